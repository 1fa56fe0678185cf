package runtime

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/energyflow/edge/safety"
)

// diffusionBundle is a policy "diffusion" bundle for the simulated 7-DoF
// arm (same state and action layout as testBundle), written by
// engines/testdata/ddim/gen.py: an analytic noise prediction for actions ~
// N(mu, 0.05²) with mu = joint 0 at 0.4 rad/s (everything else 0), whose
// eps turns NaN once the newest joint-0 position exceeds 1 rad.
func diffusionBundle(t testing.TB) string {
	p := filepath.Join(repoRoot(t), "runtime", "testdata", "simarm-diffusion")
	if _, err := os.Stat(filepath.Join(p, "manifest.json")); err != nil {
		t.Fatalf("diffusion test bundle missing: %v (regenerate with .venv/bin/python engines/testdata/ddim/gen.py)", err)
	}
	return p
}

// TestEndToEndDiffusion runs the whole stack on a diffusion bundle: the
// policy drives the arm, nothing re-scores it, the energy stop is off and
// no energy is published — and a NaN noise prediction still stops the arm.
func TestEndToEndDiffusion(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test (≈ 5 s)")
	}
	s := startStack(t, 5, func(c *Config) {
		c.Policy.Bundle = diffusionBundle(t)
		c.Safety.Energy.Scores = nil // the default: nothing asked of the energy monitor
	})
	if th := s.app.Guard().Thresholds(); len(th) != 0 || !s.app.Guard().Config().Energy.Disabled {
		t.Fatalf("energy monitor on for a policy without an energy: thresholds %v", th)
	}
	s.waitState(t, StateRunning, 60*time.Second)

	// Joint 0 moves at ≈ 0.4 rad/s from 0; past 1 rad the policy's eps is
	// NaN, so its next chunk is NaN and the gate must stop on it.
	reason := s.waitState(t, StateStopped, 30*time.Second)
	if !strings.HasPrefix(reason, "nan") {
		t.Fatalf("stop reason %q, want a NaN stop", reason)
	}
	moving := 0
	for _, c := range s.arm.Commands() {
		for i, v := range c.Velocity {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("command %v reached the arm", c.Velocity)
			}
			if i == 0 && math.Abs(v-0.4) < 0.2 {
				moving++
			}
		}
	}
	if moving < 5 {
		t.Fatalf("%d commands moved joint 0 at ≈ 0.4 rad/s, want ≥ 5 before the stop", moving)
	}
	if p := s.arm.Snapshot().Position[0]; p < 0.8 {
		t.Errorf("joint 0 at %.2f rad: the NaN trap (> 1 rad of the observed position) should not have fired yet", p)
	}

	c := s.app.Guard().Counters()
	if c.Trips[safety.KindEnergy] != 0 || c.Trips[safety.KindScoreStale] != 0 || c.Trips[safety.KindNaN] != 1 {
		t.Errorf("trips %v, want one NaN stop and no energy or score stop", c.Trips)
	}
	st := s.app.Loop().Stats()
	if st.Chunks < 2 || st.ScoreErrors != 0 || st.ScoreLate != 0 {
		t.Errorf("loop stats %+v: want ≥ 2 chunks and no re-scoring", st)
	}
	metrics := s.get(t, "/metrics")
	for _, want := range []string{"energyflow_energy_score NaN", "energyflow_energy_threshold NaN", "energyflow_energy_score_distribution_count 0"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q: a policy without an energy must not publish one", want)
		}
	}

	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) && s.arm.Snapshot().Enabled {
		time.Sleep(50 * time.Millisecond)
	}
	requireHalted(t, s.arm, "after the NaN stop")
}

// A diffusion bundle has no energy: a configuration that asks the safety
// gate for energy scores is refused with the key to change, not ignored.
func TestDiffusionRefusesEnergyConfig(t *testing.T) {
	c := simArmConfig(t)
	c.Robot.State = []string{"position", "velocity", "gripper"}
	c.Policy.Bundle = diffusionBundle(t)
	c.Safety.Limits.MaxVelocity = []float64{1, 1, 1, 1, 1, 1, 1}
	thr := 3.0
	c.Safety.Energy.Scores = []safety.ScoreConfig{{Name: "energy", Threshold: &thr}}
	_, err := NewApp(context.Background(), &c, AppOptions{})
	if err == nil || !strings.Contains(err.Error(), "safety.energy.scores") || !strings.Contains(err.Error(), "no energy") {
		t.Fatalf("err = %v, want a safety.energy.scores error saying the policy has no energy", err)
	}
	t.Logf("refused: %v", err)

	// policy.steps is S for a diffusion bundle: at most N.
	c.Safety.Energy.Scores = nil
	c.Policy.Steps = 101
	if _, err = NewApp(context.Background(), &c, AppOptions{}); err == nil || !strings.Contains(err.Error(), "policy.steps") || !strings.Contains(err.Error(), "1..100") {
		t.Fatalf("err = %v, want a policy.steps error naming 1..100", err)
	}
	c.Policy.Steps = 0

	// From a file, the error points at the key's line.
	dir := t.TempDir()
	yaml := "robot:\n  address: " + c.Robot.Address + "\n  map: " + c.Robot.Map + "\n  state: [position, velocity, gripper]\n" +
		"camera:\n  enabled: false\ntelemetry:\n  enabled: false\npolicy:\n  bundle: " + c.Policy.Bundle + "\n" +
		"safety:\n  limits:\n    max_velocity: [1, 1, 1, 1, 1, 1, 1]\n  energy:\n    scores:\n      - name: energy\n        threshold: 3\n"
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(file)
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewApp(context.Background(), cfg, AppOptions{})
	if err == nil || !strings.Contains(err.Error(), file+":15: safety.energy.scores:") {
		t.Fatalf("err = %v, want it located at %s:15", err, file)
	}
}

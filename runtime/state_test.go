package runtime

import (
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/energyflow/edge/calibration"
	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/engines/enginestest"
	"github.com/energyflow/edge/safety"
)

// withStateTerm copies the bundle at src into a temporary directory and
// gives it a state term: engines/testdata/quad/state_energy.onnx
// (state_energy = ½‖cond‖² − 1, any cond width) and its manifest block,
// with held-out q99.9 q999.
func withStateTerm(t testing.TB, src string, q999 float64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), filepath.Base(src)+"-state")
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	enginestest.AddStateTerm(t, dir, q999)
	return dir
}

// The configuration of the state score is checked against the bundle at
// start-up: state_energy needs the state term; a diffusion policy may be
// watched on it alone, never on an energy.
func TestSafetyConfigStateEnergy(t *testing.T) {
	energyflow, err := engines.LoadBundle(testBundle(t))
	if err != nil {
		t.Fatal(err)
	}
	withState, err := engines.LoadBundle(withStateTerm(t, testBundle(t), 7))
	if err != nil {
		t.Fatal(err)
	}
	diffusion, err := engines.LoadBundle(diffusionBundle(t))
	if err != nil {
		t.Fatal(err)
	}
	diffusionState, err := engines.LoadBundle(withStateTerm(t, diffusionBundle(t), 7))
	if err != nil {
		t.Fatal(err)
	}
	thr := 3.0
	state, energy := safety.ScoreConfig{Name: "state_energy"}, safety.ScoreConfig{Name: "energy", Threshold: &thr}
	cases := []struct {
		name         string
		b            *engines.Bundle
		scores       []safety.ScoreConfig
		errHas       []string
		wantDisabled bool
	}{
		{"state score without a state term", energyflow, []safety.ScoreConfig{state}, []string{"safety.energy.scores", `"state_energy", but bundle`, "no state term", "state-term"}, false},
		{"state score with the state term", withState, []safety.ScoreConfig{energy, state}, nil, false},
		{"the default with the state term", withState, nil, nil, false},
		{"diffusion watched on its state term", diffusionState, []safety.ScoreConfig{state}, nil, false},
		{"diffusion with energy and state", diffusionState, []safety.ScoreConfig{energy, state}, []string{"safety.energy.scores", "no energy", "watch only its state term"}, false},
		{"diffusion without scores watches its state term", diffusionState, nil, nil, false},
		{"diffusion without scores or a state term", diffusion, nil, nil, true},
		{"diffusion without a state term", diffusion, []safety.ScoreConfig{state}, []string{"safety.energy.scores", "no state term"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Safety.Energy.Scores = tc.scores
			sc, err := safetyConfig(&cfg, tc.b, slog.New(slog.DiscardHandler))
			if tc.errHas != nil {
				for _, w := range tc.errHas {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Fatalf("err = %v, want it to contain %q", err, w)
					}
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error is not one line: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sc.Energy.Disabled != tc.wantDisabled {
				t.Errorf("energy.disabled = %v, want %v", sc.Energy.Disabled, tc.wantDisabled)
			}
		})
	}
}

// The state_energy block's held-out statistics reach the gate, with or
// without a calibration block, and give the state score its default
// threshold (q99.9).
func TestSafetyCalibrationCopiesStateEnergy(t *testing.T) {
	b, err := engines.LoadBundle(withStateTerm(t, testBundle(t), 7.5))
	if err != nil {
		t.Fatal(err)
	}
	for _, withCal := range []bool{false, true} {
		if withCal {
			b.Manifest.Calibration = &calibration.Block{Steps: 20, Recommended: calibration.Recommendation{Score: "energy", Threshold: 432}}
		}
		cal := safetyCalibration(&b.Manifest)
		if cal == nil || cal.StateEnergy == nil || cal.StateEnergy.Quantiles["99.9"] != 7.5 || cal.StateEnergy.Std != 2 {
			t.Fatalf("calibration block %v: %+v", withCal, cal)
		}
		if withCal != (cal.Recommended.Score == "energy") {
			t.Errorf("calibration block %v: recommended %+v", withCal, cal.Recommended)
		}
	}
	plain, err := engines.LoadBundle(testBundle(t))
	if err != nil {
		t.Fatal(err)
	}
	if cal := safetyCalibration(&plain.Manifest); cal != nil {
		t.Errorf("a bundle with neither: %+v", cal)
	}
}

// runningStateEnergies checks the state energy of every RUNNING tick the
// stack recorded: finite and at least −1 (the analytic ½‖cond‖² − 1). A
// tick whose arm read failed has no new observation and no state energy,
// so there may be as many without as the loop counted arm errors. It
// returns how many RUNNING ticks there were and how many of them had a
// fresh energy.
func runningStateEnergies(t *testing.T, s *stack) (running, energies int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	missing := 0
	for i, sc := range s.scores {
		if s.decs[i] != safety.Running {
			continue
		}
		running++
		if !math.IsNaN(sc[safety.ScoreEnergy]) {
			energies++
		}
		switch x := sc[safety.ScoreStateEnergy]; {
		case math.IsNaN(x):
			missing++
		case x < -1-1e-4 || math.IsInf(x, 0):
			t.Errorf("tick %d: state energy %v, the analytic term is ≥ −1", s.ticks[i].N, x)
		}
	}
	if st := s.app.Loop().Stats(); missing > int(st.ArmErrors) || st.ScoreErrors != 0 {
		t.Errorf("%d of %d RUNNING ticks without a state energy (%d arm errors, %d score errors): want one every tick", missing, running, st.ArmErrors, st.ScoreErrors)
	}
	return running, energies
}

// TestEndToEndStateEnergy runs the stack on a bundle with the state term
// and the stop watching it: the loop scores the newest observation with
// the state term every tick, so every RUNNING tick has a state energy,
// the asynchronous re-score still brings the energies, the gate runs on
// it, and the metrics observe the watched score.
func TestEndToEndStateEnergy(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test (≈ 5 s)")
	}
	huge := 1e9
	s := startStack(t, 5, func(c *Config) {
		c.Policy.Bundle = withStateTerm(t, testBundle(t), 7)
		c.Safety.Energy.Scores = []safety.ScoreConfig{{Name: "state_energy", Threshold: &huge}, {Name: "energy", Threshold: &huge}}
	})
	if th := s.app.Guard().Thresholds(); len(th) != 2 || th[0].Score != safety.ScoreStateEnergy {
		t.Fatalf("thresholds %+v", th)
	}
	s.waitState(t, StateRunning, 60*time.Second)
	time.Sleep(3 * time.Second)
	running, energies := runningStateEnergies(t, s)
	if running < 5 || energies < 3 {
		t.Fatalf("%d RUNNING ticks, %d of them with a fresh energy: want ≥ 5 and ≥ 3", running, energies)
	}
	t.Logf("%d RUNNING ticks with a state energy, %d of them with a fresh energy", running, energies)
	if c := s.app.Guard().Counters(); c.Trips[safety.KindScoreStale] != 0 || c.Trips[safety.KindEnergy] != 0 {
		t.Errorf("trips %v", c.Trips)
	}
	metrics := s.get(t, "/metrics")
	if !strings.Contains(metrics, "energyflow_energy_threshold 1e+09") || strings.Contains(metrics, "energyflow_energy_score NaN") {
		t.Errorf("metrics do not follow the watched state score:\n%.1500s", metrics)
	}
	if n := s.app.stages.Stats(StageStateTerm).Count; n == 0 || !strings.Contains(metrics, `energyflow_stage_latency_seconds_count{stage="state_term"}`) {
		t.Errorf("state term timed %d times, or not in /metrics", n)
	}
}

// A diffusion bundle with the state term, watched on it: the loop scores
// the state term every tick with no re-scoring goroutine (the energies stay
// NaN), the score watchdog is on and quiet, and the NaN stop still works.
func TestEndToEndDiffusionStateEnergy(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test (≈ 5 s)")
	}
	huge := 1e9
	s := startStack(t, 5, func(c *Config) {
		c.Policy.Bundle = withStateTerm(t, diffusionBundle(t), 7)
		c.Safety.Energy.Scores = []safety.ScoreConfig{{Name: "state_energy", Threshold: &huge}}
	})
	if g := s.app.Guard(); g.Config().Energy.Disabled || len(g.Thresholds()) != 1 {
		t.Fatal("the state score of a diffusion bundle is not watched")
	}
	s.waitState(t, StateRunning, 60*time.Second)
	reason := s.waitState(t, StateStopped, 30*time.Second)
	if !strings.HasPrefix(reason, "nan") {
		t.Fatalf("stop reason %q, want the NaN stop of the diffusion test bundle", reason)
	}
	s.mu.Lock()
	for _, sc := range s.scores {
		if !math.IsNaN(sc[safety.ScoreEnergy]) || !math.IsNaN(sc[safety.ScoreCentered]) {
			t.Fatalf("a diffusion policy reported energies %v", sc)
		}
	}
	s.mu.Unlock()
	if running, _ := runningStateEnergies(t, s); running < 3 {
		t.Fatalf("%d RUNNING ticks, want ≥ 3", running)
	}
	if c := s.app.Guard().Counters(); c.Trips[safety.KindScoreStale] != 0 || c.Trips[safety.KindNaN] != 1 {
		t.Errorf("trips %v, want the one NaN stop", c.Trips)
	}
	if st := s.app.Loop().Stats(); st.ScoreLate != 0 {
		t.Errorf("loop stats %+v: a re-score was waited for, want none", st)
	}
}

package engines_test

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/energyflow/edge/engines"
)

// parityStateDir holds the fixtures of a bundle with a state term, written
// by `python -m energyflow fixtures --state-term --out engines/testdata/parity-state`:
// the energyflow cases plus each case's state_energy.
var parityStateDir = filepath.Join("testdata", "parity-state")

type parityStateCase struct {
	Seed        int64                  `json:"seed"`
	Obs         map[string][][]float32 `json:"obs"`
	Cond        []float32              `json:"cond"`
	StateEnergy *float64               `json:"state_energy"`
}

// TestParityStateEnergyWithPythonReference checks the toolkit's state graph
// (state_energy.onnx, exported by training/energyflow/state_term/) on ONNX Runtime
// against the Python reference: for every fixture case, the state energy of
// the cond the runtime builds from the raw observations, through
// Sampler.ScoreObs and StateEnergy, within 1e-4 relative. The bundle's
// energy parity is checked as for the other fixtures. It fails (never
// skips) when the fixtures or ONNX Runtime are missing.
func TestParityStateEnergyWithPythonReference(t *testing.T) {
	const flags = "--state-term "
	t.Run("energy", func(t *testing.T) { testEnergyParity(t, parityStateDir, flags) })
	var pf struct {
		Steps int               `json:"steps"`
		Cases []parityStateCase `json:"cases"`
	}
	b := readParity(t, parityStateDir, &pf, flags)
	m := &b.Manifest
	if !m.HasStateEnergy() || len(pf.Cases) == 0 {
		t.Fatalf("fixture bundle has state term %v, %d cases: expected a state_energy block and cases", m.HasStateEnergy(), len(pf.Cases))
	}
	s, err := engines.NewSampler(b, newORT(t), engines.SamplerOptions{Steps: pf.Steps})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var r engines.Result
	worst := 0.0
	for _, c := range pf.Cases {
		name := fmt.Sprintf("seed %d", c.Seed)
		if c.StateEnergy == nil {
			t.Fatalf("%s: case has no state_energy — regenerate the fixtures with --state-term", name)
		}
		checkParityCond(t, name, m, s.Conditioner(), c.Obs, c.Cond)
		hist := make([]engines.ObsFrame, m.ObsHorizon)
		for i := range hist {
			hist[i] = engines.ObsFrame{c.Obs[m.Obs[0].Name][i]}
		}
		if err := s.Sample(c.Cond, &r); err != nil {
			t.Fatal(err)
		}
		sc, err := s.ScoreObs(r.Actions, hist)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		alone, err := s.StateEnergy(c.Cond)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := *c.StateEnergy
		for what, got := range map[string]float32{"ScoreObs": sc.StateEnergy, "StateEnergy": alone} {
			rel := math.Abs(float64(got)-want) / math.Max(math.Abs(want), 1e-3)
			worst = math.Max(worst, rel)
			if rel > 1e-4 {
				t.Errorf("%s: %s state energy %v, Python %v (%.3g relative, want ≤ 1e-4)", name, what, got, want, rel)
			}
		}
	}
	t.Logf("state energy parity over %d cases: max rel %.3g", len(pf.Cases), worst)
}

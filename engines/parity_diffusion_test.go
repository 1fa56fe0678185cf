package engines_test

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/energyflow/edge/engines"
)

// parityDiffusionDir holds the Python reference fixtures of the Diffusion
// Policy baseline (policy "diffusion", DDIM), written by
// `python -m energyflow fixtures --policy diffusion --out engines/testdata/parity-diffusion`:
// a tiny bundle in bundle/ and cases.json, shaped like the energyflow
// fixtures without the energies.
var parityDiffusionDir = filepath.Join("testdata", "parity-diffusion")

// parityDiffusionFile is cases.json of the diffusion fixtures.
type parityDiffusionFile struct {
	Steps int `json:"steps"` // S, the DDIM steps of every case
	Cases []struct {
		Seed       int64                  `json:"seed"`
		Obs        map[string][][]float32 `json:"obs"`         // raw history, oldest first
		Cond       []float32              `json:"cond"`        // what the runtime must build from obs
		Noise      [][]float32            `json:"noise"`       // z; DDIM starts from x = z
		Actions    [][]float32            `json:"actions"`     // un-standardized final actions
		ActionsStd [][]float32            `json:"actions_std"` // standardized final actions
	} `json:"cases"`
}

// TestParityDiffusionWithPythonReference runs the diffusion fixture bundle
// on ONNX Runtime and checks every fixture seed against the Python
// reference DDIM sampler: cond within 1e-5, final actions within 1e-4 max
// abs error (the energyflow fixtures' limit). It fails (never skips) when
// the fixtures or the ONNX Runtime library are missing.
func TestParityDiffusionWithPythonReference(t *testing.T) {
	var pf parityDiffusionFile
	b := readParity(t, parityDiffusionDir, &pf, "--policy diffusion ")
	if len(pf.Cases) == 0 || pf.Steps < 1 {
		t.Fatalf("cases.json: %d cases, steps %d — expected at least one case and S ≥ 1", len(pf.Cases), pf.Steps)
	}
	m := &b.Manifest
	if m.Policy != engines.PolicyDiffusion {
		t.Fatalf("fixture bundle has policy %q, expected %q — regenerate the fixtures with --policy diffusion", m.Policy, engines.PolicyDiffusion)
	}
	s, err := engines.NewSampler(b, newORT(t), engines.SamplerOptions{Steps: pf.Steps})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.HasEnergy() {
		t.Fatal("a diffusion sampler claims an energy")
	}

	var maxAct, maxActStd, maxCond float64
	res := make([]engines.Result, 1)
	for _, c := range pf.Cases {
		name := fmt.Sprintf("seed %d", c.Seed)
		maxCond = math.Max(maxCond, checkParityCond(t, name, m, s.Conditioner(), c.Obs, c.Cond))
		if err := s.SampleWithNoise(c.Cond, flatten(c.Noise), res); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		r := res[0]
		want, wantStd := flatten(c.Actions), flatten(c.ActionsStd)
		if len(want) != len(r.Actions) || len(wantStd) != len(r.ActionsStd) {
			t.Fatalf("%s: fixture actions have %d/%d values, expected %d", name, len(want), len(wantStd), len(r.Actions))
		}
		caseMax := 0.0
		for i := range want {
			caseMax = math.Max(caseMax, math.Abs(float64(r.Actions[i]-want[i])))
			maxActStd = math.Max(maxActStd, math.Abs(float64(r.ActionsStd[i]-wantStd[i])))
		}
		maxAct = math.Max(maxAct, caseMax)
		if caseMax > 1e-4 {
			t.Errorf("%s: actions differ from the Python reference by %.3g max abs, want ≤ 1e-4", name, caseMax)
		}
		if r.Score != (engines.Score{}) {
			t.Errorf("%s: Result.Score = %+v, want zero for a policy without an energy", name, r.Score)
		}
		if _, err := s.Score(r.Actions, c.Cond); !errors.Is(err, engines.ErrNoEnergy) {
			t.Errorf("%s: Score = %v, want ErrNoEnergy", name, err)
		}
	}
	if maxActStd > 1e-4 {
		t.Errorf("standardized actions differ from the Python reference by %.3g max abs, want ≤ 1e-4", maxActStd)
	}
	t.Logf("diffusion parity over %d cases, S=%d: actions max abs %.3g (standardized %.3g), cond max abs %.3g",
		len(pf.Cases), pf.Steps, maxAct, maxActStd, maxCond)
}

package engines_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/energyflow/edge/engines"
)

// parityDir holds the Python reference fixtures (docs/bundle.md, "Parity
// fixtures"), written by `python -m energyflow fixtures --out engines/testdata/parity`.
var parityDir = filepath.Join("testdata", "parity")

// readParity reads dir/cases.json into pf and loads dir/bundle. It fails
// (never skips) when they are missing, saying how to regenerate them with
// the toolkit's fixtures command (fixtureFlags: e.g. "--policy diffusion").
func readParity(t *testing.T, dir string, pf any, fixtureFlags string) *engines.Bundle {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	if err != nil {
		t.Fatalf("parity fixtures missing: %v — generate them with `cd training && ../.venv/bin/python -m energyflow fixtures %s--out ../engines/%s` and commit them",
			err, fixtureFlags, filepath.ToSlash(dir))
	}
	if err := json.Unmarshal(data, pf); err != nil {
		t.Fatalf("%s: %v", filepath.Join(dir, "cases.json"), err)
	}
	b, err := engines.LoadBundle(filepath.Join(dir, "bundle"))
	if err != nil {
		t.Fatalf("fixture bundle: %v", err)
	}
	return b
}

type parityCase struct {
	Seed           int64                  `json:"seed"`
	Obs            map[string][][]float32 `json:"obs"`
	Cond           []float32              `json:"cond"`
	Noise          [][]float32            `json:"noise"`
	Actions        [][]float32            `json:"actions"`
	ActionsStd     [][]float32            `json:"actions_std"`
	Energy         float64                `json:"energy"`
	RefEnergyMean  float64                `json:"ref_energy_mean"`
	CenteredReward float64                `json:"centered_reward"`
}

type parityFile struct {
	Steps int          `json:"steps"`
	Cases []parityCase `json:"cases"`
}

func flatten(x [][]float32) []float32 {
	var out []float32
	for _, r := range x {
		out = append(out, r...)
	}
	return out
}

// energyParityFixtures are the EnergyFlow fixture folders, one per energy
// head, with the toolkit flags that regenerate them. The Go sampler runs
// every head unchanged: the head only changes what energy_grad.onnx computes.
var energyParityFixtures = []struct{ name, dir, flags string }{
	{"pooled", parityDir, ""},
	{"denoiser", filepath.Join("testdata", "parity-denoiser"), "--energy-head denoiser "},
}

// TestParityWithPythonReference runs each fixture bundle on ONNX Runtime and
// checks every fixture seed against the Python reference sampler: final
// actions within 1e-4 max abs error, energies within 1e-4 relative. It fails
// (never skips) when the fixtures or the ONNX Runtime library are missing.
func TestParityWithPythonReference(t *testing.T) {
	for _, fx := range energyParityFixtures {
		t.Run(fx.name, func(t *testing.T) { testEnergyParity(t, fx.dir, fx.flags) })
	}
}

func testEnergyParity(t *testing.T, dir, flags string) {
	var pf parityFile
	b := readParity(t, dir, &pf, flags)
	if len(pf.Cases) == 0 || pf.Steps < 1 {
		t.Fatalf("cases.json: %d cases, steps %d — expected at least one case and K ≥ 1", len(pf.Cases), pf.Steps)
	}
	m := &b.Manifest
	be := newORT(t)
	s, err := engines.NewSampler(b, be, engines.SamplerOptions{Steps: pf.Steps})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cb := s.Conditioner()

	var maxAct, maxActStd, maxCond, maxE, maxRef, maxRew float64
	res := make([]engines.Result, 1)
	for _, c := range pf.Cases {
		name := fmt.Sprintf("seed %d", c.Seed)
		maxCond = math.Max(maxCond, checkParityCond(t, name, m, cb, c.Obs, c.Cond))
		// Sample from the fixture's noise with the fixture's cond.
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
		rel := func(got float32, want float64) float64 {
			return math.Abs(float64(got)-want) / math.Max(math.Abs(want), 1e-6)
		}
		re, rr := rel(r.Energy, c.Energy), rel(r.RefEnergyMean, c.RefEnergyMean)
		rw := math.Abs(float64(r.CenteredReward)-c.CenteredReward) / math.Max(math.Abs(c.Energy), 1e-6)
		maxE, maxRef, maxRew = math.Max(maxE, re), math.Max(maxRef, rr), math.Max(maxRew, rw)
		if re > 1e-4 {
			t.Errorf("%s: energy %v, Python %v (%.3g relative, want ≤ 1e-4)", name, r.Energy, c.Energy, re)
		}
		if rr > 1e-4 {
			t.Errorf("%s: reference energy mean %v, Python %v (%.3g relative)", name, r.RefEnergyMean, c.RefEnergyMean, rr)
		}
		if rw > 1e-4 {
			t.Errorf("%s: centered reward %v, Python %v (%.3g relative to the energy)", name, r.CenteredReward, c.CenteredReward, rw)
		}
	}
	t.Logf("parity over %d cases, K=%d: actions max abs %.3g (standardized %.3g), cond max abs %.3g, energy max rel %.3g, ref mean max rel %.3g, centered reward max rel %.3g",
		len(pf.Cases), pf.Steps, maxAct, maxActStd, maxCond, maxE, maxRef, maxRew)
}

// checkParityCond builds cond from a fixture's raw observation history, as
// the runtime does, compares it with the cond Python built and returns the
// largest difference.
func checkParityCond(t *testing.T, name string, m *engines.Manifest, cb *engines.Conditioner, obs map[string][][]float32, want []float32) float64 {
	t.Helper()
	hist := make([]engines.ObsFrame, m.ObsHorizon)
	for i := range hist {
		hist[i] = make(engines.ObsFrame, len(m.Obs))
	}
	for oi, o := range m.Obs {
		steps, ok := obs[o.Name]
		if !ok {
			t.Fatalf("%s: fixture has no obs %q", name, o.Name)
		}
		if len(steps) != m.ObsHorizon {
			t.Fatalf("%s: obs %q has %d steps, expected obs_horizon %d", name, o.Name, len(steps), m.ObsHorizon)
		}
		for i := range steps {
			hist[i][oi] = steps[i]
		}
	}
	cond := make([]float32, cb.Dim())
	if err := cb.Build(hist, cond); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(want) != len(cond) {
		t.Fatalf("%s: fixture cond has %d values, runtime builds %d", name, len(want), len(cond))
	}
	worst := 0.0
	for i := range cond {
		d := math.Abs(float64(cond[i] - want[i]))
		worst = math.Max(worst, d)
		if d > 1e-5*math.Max(1, math.Abs(float64(want[i]))) {
			t.Errorf("%s: cond[%d] = %v, Python built %v", name, i, cond[i], want[i])
		}
	}
	return worst
}

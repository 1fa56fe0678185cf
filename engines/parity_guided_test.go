package engines_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/energyflow/edge/engines"
)

// guidedCase is one real-time chunking case of the Python reference
// (energyflow.rtc_fixtures): the guide and the actions it samples.
type guidedCase struct {
	Seed      int64       `json:"seed"`
	Cond      []float32   `json:"cond"`
	Noise     [][]float32 `json:"noise"`
	Mode      string      `json:"mode"`
	Strength  float32     `json:"strength"`
	Delay     int         `json:"delay"`
	Overlap   int         `json:"overlap"`
	Start     int         `json:"start"`
	Committed [][]float32 `json:"committed"`
	Weights   []float32   `json:"weights"`
	Actions   [][]float32 `json:"actions"`
}

// TestGuidedParityWithPythonReference samples every case of
// testdata/parity-guided with the Go sampler on ONNX Runtime and checks the
// actions against Python's guided sampler within 1e-4, and the weights
// against ChunkWeights exactly. It fails (never skips) when the fixtures or
// ONNX Runtime are missing.
func TestGuidedParityWithPythonReference(t *testing.T) {
	dir := filepath.Join("testdata", "parity-guided")
	data, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	if err != nil {
		t.Fatalf("guided parity fixtures missing: %v — generate them with `cd training && ../.venv/bin/python -m energyflow fixtures --guided-from ../engines/testdata/parity --out ../engines/testdata/parity-guided` and commit them", err)
	}
	var pf struct {
		Bundle string       `json:"bundle"`
		Steps  int          `json:"steps"`
		Cases  []guidedCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &pf); err != nil {
		t.Fatal(err)
	}
	b, err := engines.LoadBundle(filepath.Join(dir, pf.Bundle))
	if err != nil {
		t.Fatal(err)
	}
	if len(pf.Cases) < 8 {
		t.Fatalf("%d guided cases, want at least 8", len(pf.Cases))
	}
	// One sampler for every case (opening sessions is the slow part under
	// qemu, scripts/arm64.sh); each case sets the noise it starts from.
	noise := &caseNoise{}
	s, err := engines.NewSampler(b, newORT(t), engines.SamplerOptions{Steps: pf.Steps, Noise: noise, NoReferences: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	modes := map[engines.GuideMode]int{}
	for i, c := range pf.Cases {
		mode, err := engines.ParseGuideMode(c.Mode)
		if err != nil {
			t.Fatal(err)
		}
		modes[mode]++
		w := make([]float32, len(c.Weights))
		engines.ChunkWeights(w, c.Start, c.Delay, c.Overlap)
		for j := range w {
			if w[j] != c.Weights[j] {
				t.Fatalf("case %d: ChunkWeights %v, Python chunk_weights %v", i, w, c.Weights)
			}
		}
		noise.z = flatten(c.Noise)
		g := &engines.Guide{Mode: mode, Strength: c.Strength, Actions: flatten(c.Committed), Weights: w}
		var res engines.Result
		if err := s.SampleGuided(c.Cond, g, &res); err != nil {
			t.Fatal(err)
		}
		worst := 0.0
		for j, want := range flatten(c.Actions) {
			worst = math.Max(worst, math.Abs(float64(res.Actions[j]-want))/math.Max(1, math.Abs(float64(want))))
		}
		if worst > 1e-4 {
			t.Errorf("case %d (seed %d, %s, strength %g): max error %.3g against Python", i, c.Seed, c.Mode, c.Strength, worst)
		}
	}
	if modes[engines.GuideNoisy] == 0 || modes[engines.GuideDenoised] == 0 {
		t.Errorf("cases per mode %v: want both", modes)
	}
}

// caseNoise hands out the current case's z.
type caseNoise struct{ z []float32 }

func (n *caseNoise) Normal(z []float32) { copy(z, n.z) }

package enginestest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// AddStateTerm gives the bundle in dir (changed in place: pass a copy) the
// state term of engines/testdata/quad/state_energy.onnx, which computes
// StateEnergy (½‖cond‖² − 1 for any cond width), with its manifest block
// (held-out q99.9 q999) and its hash in the manifest's files.
func AddStateTerm(t testing.TB, dir string, q999 float64) {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("enginestest: cannot locate engines/testdata")
	}
	g, err := os.ReadFile(filepath.Join(filepath.Dir(self), "..", "testdata", "quad", "state_energy.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "state_energy.onnx"), g, 0o644); err != nil {
		t.Fatal(err)
	}
	mf := filepath.Join(dir, "manifest.json")
	raw, err := os.ReadFile(mf)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(g)
	m["files"].(map[string]any)["state_energy.onnx"] = hex.EncodeToString(sum[:])
	m["state_energy"] = map[string]any{
		"graph": "state_energy.onnx", "input": "cond", "output": "state_energy", "reading": "max_sigma_z",
		"sigmas": []float64{0.05, 0.4, 3}, "mean": []float64{1, 0, 0}, "std": []float64{1, 1, 1},
		"calibration": map[string]any{"mean": 1, "std": 2, "quantiles": map[string]any{"50": 1, "90": 3, "99": 5, "99.9": q999}, "max": q999, "n": 100},
	}
	if raw, err = json.MarshalIndent(m, "", " "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mf, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

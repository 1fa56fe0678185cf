package engines_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/energyflow/edge/engines"
)

// Shapes of the analytic test bundle (engines/testdata/quad).
const (
	quadTp   = 4
	quadDa   = 3
	quadDs   = 2 // state width
	quadTo   = 2
	quadCond = quadTo * quadDs
	quadM    = 16
)

// quadManifest returns the manifest of the analytic test bundle as generic
// JSON so tests can break single fields.
func quadManifest() map[string]any {
	refs := make([]any, quadM)
	for m := range refs {
		rows := make([]any, quadTp)
		for j := range rows {
			row := make([]any, quadDa)
			for d := range row {
				row[d] = float64(float32(0.1*float64(m) - 0.05*float64(j) + 0.2*float64(d) - 0.7))
			}
			rows[j] = row
		}
		refs[m] = rows
	}
	return map[string]any{
		"format_version": 1, "policy": "energyflow", "name": "quad-test",
		"created": "2026-11-22T10:00:00Z", "source_commit": "test",
		"action_dim": quadDa, "pred_horizon": quadTp, "obs_horizon": quadTo, "action_horizon": 2,
		"action_norm": map[string]any{"mean": []float64{0.5, -1, 2}, "std": []float64{2, 0.5, 1.5}},
		"obs": []any{map[string]any{"name": "state", "kind": "state", "shape": []int{quadDs},
			"norm": map[string]any{"mean": []float64{1, -2}, "std": []float64{0.5, 4}}}},
		"conditioning":      map[string]any{"layout": "history_flat", "items": []any{map[string]any{"obs": "state", "width": quadDs}}},
		"cond_dim":          quadCond,
		"schedule":          map[string]any{"kind": "geometric", "sigma_min": 0.01, "sigma_max": 10.0, "T": 1.0, "gamma": 1e-3},
		"sampler":           map[string]any{"steps": 20},
		"reference_actions": refs,
		"graphs": map[string]any{"energy_grad": map[string]any{"file": "energy_grad.onnx",
			"inputs":  []any{map[string]any{"name": "a_t", "shape": []int{-1, quadTp, quadDa}}, map[string]any{"name": "cond", "shape": []int{-1, quadCond}}, map[string]any{"name": "t", "shape": []int{-1}}},
			"outputs": []any{map[string]any{"name": "grad_a", "shape": []int{-1, quadTp, quadDa}}, map[string]any{"name": "energy", "shape": []int{-1}}}}},
		"calibration": nil,
		"files":       map[string]any{},
		"model":       map[string]any{"kind": "analytic quadratic"},
	}
}

// writeQuadBundle writes the analytic bundle into a temporary directory:
// mutateFiles may change or add files (name → content) before hashing,
// mutate may then change the manifest.
func writeQuadBundle(t testing.TB, mutateFiles func(files map[string][]byte), mutate func(m map[string]any)) string {
	t.Helper()
	onnx, err := os.ReadFile(filepath.Join("testdata", "quad", "energy_grad.onnx"))
	if err != nil {
		t.Fatalf("read test graph: %v (regenerate with .venv/bin/python engines/testdata/quad/gen.py)", err)
	}
	files := map[string][]byte{"energy_grad.onnx": onnx}
	m := quadManifest()
	hashes := map[string]any{}
	for name, data := range files {
		sum := sha256.Sum256(data)
		hashes[name] = hex.EncodeToString(sum[:])
	}
	if mutateFiles != nil {
		mutateFiles(files)
	}
	m["files"] = hashes
	if mutate != nil {
		mutate(m)
	}
	return writeBundleDir(t, files, m)
}

// writeBundleDir writes files and the manifest m into a temporary directory.
func writeBundleDir(t testing.TB, files map[string][]byte, m map[string]any) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mj, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), mj, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func loadQuad(t testing.TB) *engines.Bundle {
	t.Helper()
	b, err := engines.LoadBundle(writeQuadBundle(t, nil, nil))
	if err != nil {
		t.Fatalf("LoadBundle: %v", err)
	}
	return b
}

// newORT opens the ONNX Runtime backend; a missing library fails the test
// (CI installs it with make deps).
func newORT(t testing.TB) *engines.ORT {
	t.Helper()
	be, err := engines.NewORT(engines.ORTOptions{IntraOpThreads: 1})
	if err != nil {
		t.Fatalf("NewORT: %v", err)
	}
	t.Cleanup(func() {
		if err := be.Close(); err != nil {
			t.Errorf("ORT Close: %v", err)
		}
	})
	return be
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func truncatedQuad(cut int) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", "quad", "energy_grad.onnx"))
	if err != nil {
		panic(err)
	}
	return b[:len(b)-cut]
}

//go:build tensorrt && trtfake

package trt

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyflow/edge/engines"
)

// TestStateTermOnTheFake: the TensorRT backend runs the bundle's state term
// from its own plan (built in FP32 by engine build, chosen whatever
// precision the backend prefers) next to the policy's fused sampler:
// Score.StateEnergy is the fake's analytic state term ½‖cond‖² − 1, with no
// allocation, and a bundle whose state graph has no plan is refused at
// NewSampler with the command that builds one.
func TestStateTermOnTheFake(t *testing.T) {
	const tp, da, c = 4, 3, 4
	dir := t.TempDir()
	onnx, err := os.ReadFile(filepath.Join("..", "engines", "testdata", "quad", "energy_grad.onnx"))
	if err != nil {
		t.Skipf("engines' test graph is missing: %v", err)
	}
	state, err := os.ReadFile(filepath.Join("..", "engines", "testdata", "quad", "state_energy.onnx"))
	if err != nil {
		t.Skipf("engines' state graph is missing: %v", err)
	}
	energyPlan := "EFXFAKEPLAN 1\ntrt 100300\ngpu Orin\nprofile 1 1 16\ninput a_t float 4 3\ninput cond float 4\ninput t float\noutput grad_a float 4 3\noutput energy float\n"
	statePlan := "EFXFAKEPLAN 1\ntrt 100300\ngpu Orin\nprofile 1 1 16\ninput cond float 4\noutput state_energy float\n"
	energyFile, stateFile := PlanFile("energy_grad", "10.3.0", "Orin", "fp16"), PlanFile(engines.GraphStateEnergy, "10.3.0", "Orin", StatePlanPrecision)
	files := map[string][]byte{"energy_grad.onnx": onnx, "state_energy.onnx": state, energyFile: []byte(energyPlan), stateFile: []byte(statePlan)}
	hashes := map[string]string{}
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		hashes[name] = hex.EncodeToString(sum[:])
	}
	tensor := func(name string, shape ...int) map[string]any { return map[string]any{"name": name, "shape": shape} }
	plans := []any{
		map[string]any{"graph": "energy_grad", "file": energyFile, "trt_version": "10.3.0", "gpu": "Orin", "precision": "fp16"},
		map[string]any{"graph": "state_energy", "file": stateFile, "trt_version": "10.3.0", "gpu": "Orin", "precision": StatePlanPrecision},
	}
	manifest := map[string]any{
		"format_version": 1, "policy": "energyflow", "name": "trt-fake-state", "created": "2026-11-22T10:00:00Z", "source_commit": "test",
		"action_dim": da, "pred_horizon": tp, "obs_horizon": 2, "action_horizon": 2,
		"action_norm":       map[string]any{"mean": []float64{0, 0, 0}, "std": []float64{1, 1, 1}},
		"obs":               []any{map[string]any{"name": "state", "kind": "state", "shape": []int{2}}},
		"conditioning":      map[string]any{"layout": "history_flat", "items": []any{map[string]any{"obs": "state", "width": 2}}},
		"cond_dim":          c,
		"schedule":          map[string]any{"kind": "geometric", "sigma_min": 0.01, "sigma_max": 0.2, "T": 1.0, "gamma": 1e-3},
		"sampler":           map[string]any{"steps": 5},
		"reference_actions": [][][]float64{{{0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}}},
		"graphs": map[string]any{"energy_grad": map[string]any{"file": "energy_grad.onnx",
			"inputs":  []any{tensor("a_t", -1, tp, da), tensor("cond", -1, c), tensor("t", -1)},
			"outputs": []any{tensor("grad_a", -1, tp, da), tensor("energy", -1)}}},
		"calibration": nil,
		"plans":       plans,
		"files":       hashes,
		"state_energy": map[string]any{"graph": "state_energy.onnx", "input": "cond", "output": "state_energy", "reading": "max_sigma_z",
			"sigmas": []float64{0.05, 3}, "mean": []float64{0, 0}, "std": []float64{1, 1},
			"calibration": map[string]any{"mean": 0, "std": 1, "quantiles": map[string]any{"99.9": 3}, "max": 3, "n": 10}},
	}
	write := func(m map[string]any) *engines.Bundle {
		t.Helper()
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "manifest.json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := engines.LoadBundle(dir)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	bundle := write(manifest)

	fakeReset()
	fakeConfigure("Orin", true, 100300)
	be, err := NewBackend(Options{Precision: "fp16"}) // the policy's plan is fp16; the state plan is fp32 and still chosen
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	s, err := engines.NewSampler(bundle, be, engines.SamplerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Fused() || !s.HasStateEnergy() {
		t.Fatalf("fused %v, state term %v: want both", s.Fused(), s.HasStateEnergy())
	}
	cond := []float32{0.3, -0.2, 0.1, 0.4}
	want := 0.5*(0.09+0.04+0.01+0.16) - 1
	var r engines.Result
	if err := s.Sample(cond, &r); err != nil {
		t.Fatal(err)
	}
	for run := range 3 { // eager, capture, replay
		sc, err := s.Score(r.Actions, cond)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(float64(sc.StateEnergy)-want) > 1e-6 || math.IsNaN(float64(sc.Energy)) {
			t.Fatalf("run %d: state energy %v (energy %v), want %v", run, sc.StateEnergy, sc.Energy, want)
		}
	}
	if n := testing.AllocsPerRun(20, func() {
		if _, err := s.Score(r.Actions, cond); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Score with the state term allocates %v times", n)
	}
	s.Close()

	// Without a plan for the state graph the sampler cannot open it.
	manifest["plans"] = plans[:1]
	bundle = write(manifest)
	_, err = engines.NewSampler(bundle, be, engines.SamplerOptions{})
	if err == nil || !strings.Contains(err.Error(), "state term state_energy.onnx") || !strings.Contains(err.Error(), "graph state_energy") ||
		!strings.Contains(err.Error(), "energyflow engine build") {
		t.Fatalf("no state plan: %v", err)
	}
}

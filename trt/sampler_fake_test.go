//go:build tensorrt && trtfake

package trt

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/energyflow/edge/engines"
)

// TestEnginesSamplerOnTheFake runs package engines' Algorithm 2 sampler on
// this backend end to end: bundle loading, plan selection, the step session
// (fused K-step graph) and the scoring session (1+M rows), against the
// closed form of the fake's energy.
func TestEnginesSamplerOnTheFake(t *testing.T) {
	const (
		tp, da, c, m = 4, 3, 4, 16
		sigmaMin     = 0.01
		sigmaMax     = 0.2 // small: the fake's quadratic energy stays well scaled
		gamma        = 1e-3
		K            = 20
	)
	dir := t.TempDir()
	onnx, err := os.ReadFile(filepath.Join("..", "engines", "testdata", "quad", "energy_grad.onnx"))
	if err != nil {
		t.Skipf("engines' test graph is missing: %v", err)
	}
	plan := "EFXFAKEPLAN 1\ntrt 100300\ngpu Orin\nprofile 1 1 17\ninput a_t float 4 3\ninput cond float 4\ninput t float\noutput grad_a float 4 3\noutput energy float\n"
	planFile := PlanFile("energy_grad", "10.3.0", "Orin", "fp16")
	files := map[string][]byte{"energy_grad.onnx": onnx, planFile: []byte(plan)}
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
	refs := make([][][]float64, m)
	for i := range refs {
		refs[i] = make([][]float64, tp)
		for j := range refs[i] {
			refs[i][j] = make([]float64, da)
			for d := range refs[i][j] {
				refs[i][j][d] = float64(float32(0.1*float64(i) - 0.05*float64(j) + 0.2*float64(d) - 0.7))
			}
		}
	}
	mean, std := []float64{0.5, -1, 2}, []float64{2, 0.5, 1.5}
	manifest := map[string]any{
		"format_version": 1, "policy": "energyflow", "name": "trt-fake-test",
		"created": "2026-11-22T10:00:00Z", "source_commit": "test",
		"action_dim": da, "pred_horizon": tp, "obs_horizon": 2, "action_horizon": 2,
		"action_norm": map[string]any{"mean": mean, "std": std},
		"obs": []any{map[string]any{"name": "state", "kind": "state", "shape": []int{2},
			"norm": map[string]any{"mean": []float64{0, 0}, "std": []float64{1, 1}}}},
		"conditioning":      map[string]any{"layout": "history_flat", "items": []any{map[string]any{"obs": "state", "width": 2}}},
		"cond_dim":          c,
		"schedule":          map[string]any{"kind": "geometric", "sigma_min": sigmaMin, "sigma_max": sigmaMax, "T": 1.0, "gamma": gamma},
		"sampler":           map[string]any{"steps": K},
		"reference_actions": refs,
		"graphs": map[string]any{"energy_grad": map[string]any{"file": "energy_grad.onnx",
			"inputs":  []any{map[string]any{"name": "a_t", "shape": []int{-1, tp, da}}, map[string]any{"name": "cond", "shape": []int{-1, c}}, map[string]any{"name": "t", "shape": []int{-1}}},
			"outputs": []any{map[string]any{"name": "grad_a", "shape": []int{-1, tp, da}}, map[string]any{"name": "energy", "shape": []int{-1}}}}},
		"calibration": nil,
		"plans":       []any{map[string]any{"graph": "energy_grad", "file": planFile, "trt_version": "10.3.0", "gpu": "Orin", "precision": "fp16"}},
		"files":       hashes,
		"model":       map[string]any{"kind": "fake"},
	}
	data, err := json.Marshal(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	bundle, err := engines.LoadBundle(dir)
	if err != nil {
		t.Fatal(err)
	}

	fakeReset()
	fakeConfigure("Orin", true, 100300)
	be, err := NewBackend(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	s, err := engines.NewSampler(bundle, be, engines.SamplerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Fused() {
		t.Fatal("the sampler did not pick up the FusedSampler ability")
	}

	// Closed form of the Euler steps on E = ½(1+t)‖a−μ‖², μ_j = cond[j mod C].
	dt := (1.0 - gamma) / K
	factor := 1.0
	for k := 0; k < K; k++ {
		tk := 1.0 - float64(k)*dt
		sigma := math.Pow(sigmaMin, 1-tk) * math.Pow(sigmaMax, tk)
		scale := dt * 0.5 * 2 * sigma * sigma * math.Log(sigmaMax/sigmaMin)
		factor *= 1 - scale*(1+tk)
	}
	cond := []float32{0.3, -0.2, 0.1, 0.4}
	z := make([]float32, tp*da)
	for i := range z {
		z[i] = float32(i%5)*0.4 - 0.8
	}
	energyOf := func(a []float64) float64 {
		e := 0.0
		for j, v := range a {
			d := v - float64(cond[j%c])
			e += d * d
		}
		return 0.5 * (1 + gamma) * e
	}
	aK := make([]float64, len(z))
	for j := range z {
		mu := float64(cond[j%c])
		aK[j] = mu + factor*(sigmaMax*float64(z[j])-mu)
	}
	refMean := 0.0
	for _, r := range refs {
		var flat []float64
		for _, row := range r {
			flat = append(flat, row...)
		}
		refMean += energyOf(flat) / m
	}
	res := make([]engines.Result, 1)
	for run := range 3 { // eager, capture, replay
		if err := s.SampleWithNoise(cond, z, res); err != nil {
			t.Fatal(err)
		}
		r := res[0]
		for j, v := range aK {
			want := v*std[j%da] + mean[j%da]
			if math.Abs(float64(r.Actions[j])-want) > 1e-4*math.Max(1, math.Abs(want)) {
				t.Fatalf("run %d: action %d = %v, want %v", run, j, r.Actions[j], want)
			}
		}
		if e := energyOf(aK); math.Abs(float64(r.Energy)-e) > 1e-4*math.Max(1, e) {
			t.Fatalf("run %d: energy %v, want %v", run, r.Energy, e)
		}
		if math.Abs(float64(r.RefEnergyMean)-refMean) > 1e-4*math.Max(1, refMean) {
			t.Fatalf("run %d: reference energy mean %v, want %v", run, r.RefEnergyMean, refMean)
		}
	}
	st := fakeGetStats()
	if st.CapturedEnqueues != K+1+1 { // the fused graph, then the scoring graph
		t.Errorf("captured enqueues %d, want K+1 for the sample and 1 for scoring", st.CapturedEnqueues)
	}
	if st.H2D != 0 || st.D2H != 0 {
		t.Errorf("integrated GPU: %d/%d copies, want zero-copy", st.H2D, st.D2H)
	}
}

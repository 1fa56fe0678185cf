package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTestBundle writes the engines package's analytic test bundle.
func writeTestBundle(t *testing.T) string {
	t.Helper()
	onnx, err := os.ReadFile(filepath.Join("..", "..", "engines", "testdata", "quad", "energy_grad.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "energy_grad.onnx"), onnx, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(onnx)
	refs := make([][][]float64, 16)
	for m := range refs {
		refs[m] = [][]float64{{0.1, 0, -0.1}, {0.2, 0.1, 0}, {-0.3, 0, 0.1}, {0, float64(m) / 16, 0}}
	}
	tensors := func(kv ...any) []map[string]any {
		var out []map[string]any
		for i := 0; i < len(kv); i += 2 {
			out = append(out, map[string]any{"name": kv[i], "shape": kv[i+1]})
		}
		return out
	}
	man := map[string]any{
		"format_version": 1, "policy": "energyflow", "name": "quad", "created": "2026-11-22T10:00:00Z", "source_commit": "test",
		"action_dim": 3, "pred_horizon": 4, "obs_horizon": 2, "action_horizon": 2,
		"action_norm":       map[string]any{"mean": []float64{0, 0, 0}, "std": []float64{1, 1, 1}},
		"obs":               []any{map[string]any{"name": "state", "kind": "state", "shape": []int{2}}},
		"conditioning":      map[string]any{"layout": "history_flat", "items": []any{map[string]any{"obs": "state", "width": 2}}},
		"cond_dim":          4,
		"schedule":          map[string]any{"kind": "geometric", "sigma_min": 0.01, "sigma_max": 1.0, "T": 1.0, "gamma": 1e-3},
		"sampler":           map[string]any{"steps": 5},
		"reference_actions": refs,
		"graphs": map[string]any{"energy_grad": map[string]any{"file": "energy_grad.onnx",
			"inputs":  tensors("a_t", []int{-1, 4, 3}, "cond", []int{-1, 4}, "t", []int{-1}),
			"outputs": tensors("grad_a", []int{-1, 4, 3}, "energy", []int{-1})}},
		"calibration": map[string]any{"recommended": map[string]any{"score": "energy", "threshold": 3.5, "rule": "test"}},
		"files":       map[string]any{"energy_grad.onnx": hex.EncodeToString(sum[:])},
	}
	b, _ := json.Marshal(man)
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestBundleVerify(t *testing.T) {
	dir := writeTestBundle(t)
	var out, errb bytes.Buffer
	if code := realMain([]string{"bundle", "verify", "--threads", "1", dir}, &out, &errb); code != exitOK {
		t.Fatalf("verify exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	for _, w := range []string{"ok    manifest", "ok    files: 1 sha256 verified", "ok    graph energy_grad.onnx", "ok    test sample", "energy > 3.5", "verify: OK"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}

	// A corrupted graph fails the check (exit 3) and names the file.
	p := filepath.Join(dir, "energy_grad.onnx")
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, b[:len(b)-7], 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	if code := realMain([]string{"bundle", "verify", dir}, &out, &errb); code != exitCheckFailed {
		t.Fatalf("verify of a truncated graph: exit %d, want %d", code, exitCheckFailed)
	}
	if !strings.Contains(errb.String(), "energy_grad.onnx") || !strings.Contains(errb.String(), "sha256") {
		t.Errorf("error does not name the file and the hash: %s", errb.String())
	}

	if code := realMain([]string{"bundle"}, &out, &errb); code != exitUsage {
		t.Errorf("bare 'bundle': exit %d, want %d", code, exitUsage)
	}
}

func TestBench(t *testing.T) {
	dir := writeTestBundle(t)
	var out, errb bytes.Buffer
	code := realMain([]string{"bench", "--bundle", dir, "--steps", "3", "--n", "20", "--threads", "1"}, &out, &errb)
	if code != exitOK {
		t.Fatalf("bench exit %d: %s", code, errb.String())
	}
	for _, w := range []string{"K=3 batch=1 n=20", "p50", "p90", "p99", "allocs    "} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("bench output lacks %q:\n%s", w, out.String())
		}
	}
	out.Reset()
	if code := realMain([]string{"bench", "--bundle", dir, "--batch", "3", "--n", "5", "--json"}, &out, &errb); code != exitOK {
		t.Fatalf("bench --batch 3 --json exit %d: %s", code, errb.String())
	}
	var rep benchReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Batch != 3 || rep.N != 5 {
		t.Fatalf("json report %q: %v", out.String(), err)
	}
	// The sampler allocates nothing per sample (engines' AllocsPerRun tests
	// say so exactly); this whole-process count also sees the runtime's own
	// background allocations on a loaded machine, hence "< 1".
	if rep.AllocsPerCall >= 1 {
		t.Errorf("%.2f allocations per sample, want 0 (< 1 with background noise)", rep.AllocsPerCall)
	}
	errb.Reset()
	if code := realMain([]string{"bench", "--bundle", dir, "--backend", "trt"}, &out, &errb); code != exitFailure || !strings.Contains(errb.String(), "TensorRT backend not available in this build") {
		t.Errorf("bench --backend trt without TensorRT: exit %d, %s", code, errb.String())
	}
	if code := realMain([]string{"bench"}, &out, &errb); code != exitUsage {
		t.Errorf("bench without --bundle: exit %d, want %d", code, exitUsage)
	}
}

// A diffusion bundle (DDIM, no energy) verifies and benches too: no energy
// numbers, DDIM steps instead of Euler steps.
func TestBundleVerifyAndBenchDiffusion(t *testing.T) {
	dir := filepath.Join("..", "..", "runtime", "testdata", "simarm-diffusion")
	var out, errb bytes.Buffer
	if code := realMain([]string{"bundle", "verify", "--threads", "1", "--steps", "20", dir}, &out, &errb); code != exitOK {
		t.Fatalf("verify exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	for _, w := range []string{"(diffusion)", "DDIM S=10 of N=100 timesteps", "note  energy: none", "ok    graph eps.onnx", "ok    test sample", "DDIM S=20", "verify: OK"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("verify output lacks %q:\n%s", w, out.String())
		}
	}
	if strings.Contains(out.String(), "centered reward") {
		t.Errorf("verify printed an energy for a policy without one:\n%s", out.String())
	}
	out.Reset()
	errb.Reset()
	if code := realMain([]string{"bundle", "verify", "--steps", "101", dir}, &out, &errb); code != exitCheckFailed || !strings.Contains(errb.String(), "1..100") {
		t.Errorf("verify --steps 101: exit %d, %s", code, errb.String())
	}

	out.Reset()
	if code := realMain([]string{"bench", "--bundle", dir, "--steps", "5", "--n", "10", "--threads", "1", "--json"}, &out, &errb); code != exitOK {
		t.Fatalf("bench exit %d: %s", code, errb.String())
	}
	var rep benchReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Policy != "diffusion" || rep.Steps != 5 || rep.References != 0 || rep.BackendCalls != 5 {
		t.Fatalf("json report %q: %v", out.String(), err)
	}
	out.Reset()
	if code := realMain([]string{"bench", "--bundle", dir, "--n", "5", "--threads", "1"}, &out, &errb); code != exitOK {
		t.Fatalf("bench exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "DDIM S=10 batch=1 n=5") || !strings.Contains(out.String(), "p50") {
		t.Errorf("bench output:\n%s", out.String())
	}
}

// An image bundle verifies, and bench reports its vision graph per frame.
func TestBundleVerifyAndBenchImage(t *testing.T) {
	dir := filepath.Join("..", "..", "runtime", "testdata", "simarm-vision-bundle")
	var out, errb bytes.Buffer
	if code := realMain([]string{"bundle", "verify", "--threads", "1", "--steps", "3", dir}, &out, &errb); code != exitOK {
		t.Fatalf("verify exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "ok    graph vision.onnx") {
		t.Errorf("verify output does not check the vision graph:\n%s", out.String())
	}
	out.Reset()
	if code := realMain([]string{"bench", "--bundle", dir, "--steps", "3", "--n", "5", "--threads", "1", "--json"}, &out, &errb); code != exitOK {
		t.Fatalf("bench exit %d: %s", code, errb.String())
	}
	var rep benchReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || len(rep.Vision) != 1 {
		t.Fatalf("json report %q: %v", out.String(), err)
	}
	if v := rep.Vision[0]; v.Obs != "camera" || v.Features != 32 || !(v.P50ms > 0) || v.P90ms < v.P50ms {
		t.Fatalf("vision entry %+v", v)
	}
	out.Reset()
	if code := realMain([]string{"bench", "--bundle", dir, "--steps", "3", "--n", "5", "--threads", "1"}, &out, &errb); code != exitOK || !strings.Contains(out.String(), `vision    "camera": p50`) {
		t.Fatalf("bench exit %d:\n%s", code, out.String())
	}
}

// TestBundleVerifyNotABundle: a path that names no folder is a usage error
// that says so; an existing folder without a manifest keeps the manifest
// hint (a failed check).
func TestBundleVerifyNotABundle(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "manifest.txt")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		code       int
		want, not  string
	}{
		{"no such folder", filepath.Join(dir, "nope"), exitUsage, "nope: no such folder", "manifest"},
		{"a file", file, exitUsage, "not a folder", "manifest.json"},
		{"folder without manifest", dir, exitCheckFailed, "no manifest.json — is " + dir + " an engine bundle?", "no such folder"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := realMain([]string{"bundle", "verify", tc.path}, &out, &errb)
			if code != tc.code || !strings.Contains(errb.String(), tc.want) || strings.Contains(errb.String(), tc.not) {
				t.Fatalf("exit %d, stderr %q; want exit %d with %q and without %q", code, errb.String(), tc.code, tc.want, tc.not)
			}
		})
	}
}

// A bundle with a late network: verify samples on it too and says from
// which plan latency the runtime uses it.
func TestBundleVerifyLateNetwork(t *testing.T) {
	dir := writeTestBundle(t)
	onnx, err := os.ReadFile(filepath.Join(dir, "energy_grad.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "energy_grad_late.onnx"), onnx, 0o644); err != nil {
		t.Fatal(err)
	}
	mp := filepath.Join(dir, "manifest.json")
	raw, err := os.ReadFile(mp)
	if err != nil {
		t.Fatal(err)
	}
	var man map[string]any
	if err := json.Unmarshal(raw, &man); err != nil {
		t.Fatal(err)
	}
	graphs := man["graphs"].(map[string]any)
	late := map[string]any{}
	for k, v := range graphs["energy_grad"].(map[string]any) {
		late[k] = v
	}
	late["file"] = "energy_grad_late.onnx"
	graphs["energy_grad_late"] = late
	man["files"].(map[string]any)["energy_grad_late.onnx"] = man["files"].(map[string]any)["energy_grad.onnx"]
	man["late_policy"] = map[string]any{"graph": "energy_grad_late", "from_periods": 2}
	if raw, err = json.Marshal(man); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mp, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := realMain([]string{"bundle", "verify", "--threads", "1", dir}, &out, &errb); code != exitOK {
		t.Fatalf("verify exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	if w := "ok    late network energy_grad_late.onnx: I/O matches the manifest, finite test sample; plans sample on it from 2 periods"; !strings.Contains(out.String(), w) {
		t.Errorf("output lacks %q:\n%s", w, out.String())
	}
}

package trt

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyflow/edge/engines"
)

func TestFormatTRTVersion(t *testing.T) {
	for v, want := range map[int]string{100300: "10.3.0", 101601: "10.16.1", 110100: "11.1.0"} {
		if got := FormatTRTVersion(v); got != want {
			t.Errorf("FormatTRTVersion(%d) = %q, want %q", v, got, want)
		}
	}
}

func TestPlanFile(t *testing.T) {
	cases := []struct{ graph, v, gpu, prec, want string }{
		{"energy_grad", "10.3.0", "Orin", "fp16", "plans/10.3.0_Orin_fp16.plan"},
		{"energy_grad", "10.3.0", "NVIDIA A100-SXM4-40GB", "fp32", "plans/10.3.0_NVIDIA-A100-SXM4-40GB_fp32.plan"},
		{"vision", "10.3.0", "Orin", "fp16", "plans/vision_10.3.0_Orin_fp16.plan"},
		{"energy_grad", "10.3.0", "a/b\\c d", "fp16", "plans/10.3.0_a-b-c-d_fp16.plan"},
	}
	for _, c := range cases {
		if got := PlanFile(c.graph, c.v, c.gpu, c.prec); got != c.want {
			t.Errorf("PlanFile(%q, %q, %q, %q) = %q, want %q", c.graph, c.v, c.gpu, c.prec, got, c.want)
		}
	}
}

func TestSelectPlan(t *testing.T) {
	plan := func(graph, v, gpu, prec string) engines.PlanInfo {
		return engines.PlanInfo{Graph: graph, File: PlanFile(graph, v, gpu, prec), TRTVersion: v, GPU: gpu, Precision: prec}
	}
	plans := []engines.PlanInfo{
		plan("energy_grad", "10.3.0", "Orin", "fp32"),
		plan("energy_grad", "10.3.0", "Orin", "fp16"),
		plan("energy_grad", "10.2.0", "Orin", "fp16"),
		plan("energy_grad", "10.3.0", "NVIDIA H100", "fp16"),
		plan("vision", "10.3.0", "Orin", "fp16"),
	}
	got, err := SelectPlan(plans, "energy_grad", "10.3.0", "Orin", "")
	if err != nil || got.Precision != "fp16" || got.Graph != "energy_grad" {
		t.Fatalf("default: %+v, %v; want the fp16 plan", got, err)
	}
	got, err = SelectPlan(plans, "energy_grad", "10.3.0", "Orin", "fp32")
	if err != nil || got.Precision != "fp32" {
		t.Fatalf("fp32: %+v, %v", got, err)
	}
	got, err = SelectPlan(plans, "vision", "10.3.0", "Orin", "")
	if err != nil || got.File != "plans/vision_10.3.0_Orin_fp16.plan" {
		t.Fatalf("vision: %+v, %v", got, err)
	}
	_, err = SelectPlan(plans, "energy_grad", "10.4.0", "Orin", "")
	if !errors.Is(err, ErrPlanMismatch) {
		t.Fatalf("other version: %v", err)
	}
	for _, want := range []string{
		"running TensorRT 10.4.0 on GPU \"Orin\"",
		"plans/10.3.0_Orin_fp16.plan was built with TensorRT 10.3.0",
		"plans/10.3.0_NVIDIA-H100_fp16.plan was built with TensorRT 10.3.0 for GPU \"NVIDIA H100\"",
		"energyflow engine build --bundle BUNDLE --precision fp16",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	_, err = SelectPlan(plans[:1], "energy_grad", "10.3.0", "Orin", "fp16")
	if !errors.Is(err, ErrPlanMismatch) || !strings.Contains(err.Error(), "has precision fp32, fp16 was asked for") {
		t.Fatalf("precision: %v", err)
	}
	_, err = SelectPlan(nil, "energy_grad", "10.3.0", "Orin", "")
	if !errors.Is(err, ErrNoPlan) || !strings.Contains(err.Error(), "energyflow engine build") {
		t.Fatalf("no plans: %v", err)
	}
	// The state graph's plan is FP32 whatever precision the policy asks for.
	state := plan("state_energy", "10.3.0", "Orin", StatePlanPrecision)
	if state.File != "plans/state_energy_10.3.0_Orin_fp32.plan" {
		t.Fatalf("state plan file %q", state.File)
	}
	for _, prec := range []string{"", "fp16", "fp32"} {
		if got, err := SelectPlan(append(plans, state), "state_energy", "10.3.0", "Orin", prec); err != nil || got != state {
			t.Fatalf("state graph, precision %q: %+v, %v", prec, got, err)
		}
	}
	if _, err := SelectPlan(plans, "state_energy", "10.3.0", "Orin", ""); !errors.Is(err, ErrNoPlan) || !strings.Contains(err.Error(), "graph state_energy") {
		t.Fatalf("no state plan: %v", err)
	}
	// Entries without a graph name count as energy_grad plans.
	p := plan("", "10.3.0", "Orin", "fp16")
	if got, err := SelectPlan([]engines.PlanInfo{p}, "energy_grad", "10.3.0", "Orin", ""); err != nil || got != p {
		t.Fatalf("graph-less entry: %+v, %v", got, err)
	}
}

func TestValidateIOCollectsEveryProblem(t *testing.T) {
	spec := engines.GraphSpec{
		Name:     "energy_grad",
		MaxBatch: 16,
		Inputs:   []engines.TensorInfo{{Name: "a_t", Shape: []int64{-1, 16, 10}}, {Name: "cond", Shape: []int64{-1, 78}}, {Name: "t", Shape: []int64{-1}}},
		Outputs:  []engines.TensorInfo{{Name: "grad_a", Shape: []int64{-1, 16, 10}}, {Name: "energy", Shape: []int64{-1}}},
	}
	prof := func(d ...int64) ioDesc {
		lo := append([]int64{1}, d[1:]...)
		hi := append([]int64{16}, d[1:]...)
		return ioDesc{Input: true, Dims: d, Min: lo, Opt: lo, Max: hi}
	}
	a := prof(-1, 16, 10)
	a.Name = "a_t"
	c := prof(-1, 78)
	c.Name, c.DType = "cond", 1
	tt := prof(-1)
	tt.Name, tt.Max = "t", []int64{8}
	ios := []ioDesc{a, c, tt, {Name: "grad_a", Dims: []int64{-1, 16, 9}}, {Name: "extra", Dims: []int64{-1}}}
	_, _, err := validateIO(spec, ios)
	if !errors.Is(err, ErrSpec) {
		t.Fatalf("validateIO: %v", err)
	}
	for _, want := range []string{
		`input "cond" has dtype float16`,
		`input "t": the plan's profile allows batch 1..8`,
		`output "grad_a" has shape [-1,16,9]`,
		`plan has no output "energy" (plan outputs: grad_a, extra)`,
		`plan has output "extra" that the manifest does not list`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	good := []ioDesc{a, prof(-1, 78), prof(-1), {Name: "grad_a", Dims: []int64{-1, 16, 10}}, {Name: "energy", Dims: []int64{-1}}}
	good[1].Name, good[2].Name = "cond", "t"
	lo, hi, err := validateIO(spec, good)
	if err != nil || lo != 1 || hi != 16 {
		t.Fatalf("good plan: %d..%d, %v", lo, hi, err)
	}
	if e, ok := findEnergyIO(spec); !ok || e.grad != 3 || e.energy != 4 {
		t.Errorf("findEnergyIO = %+v, %v", e, ok)
	}
}

func TestBundleDir(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "graphs")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		dir:                                     dir,
		filepath.Join(dir, "energy_grad.onnx"):  dir,
		filepath.Join(sub, "energy_grad.onnx"):  dir,
		filepath.Join("/nonexistent", "x.onnx"): "/nonexistent",
	} {
		if got := bundleDir(in); got != want {
			t.Errorf("bundleDir(%q) = %q, want %q", in, got, want)
		}
	}
}

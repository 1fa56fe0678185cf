package trt

import (
	"errors"
	"fmt"
	"strings"

	"github.com/energyflow/edge/engines"
)

// ioDesc is one I/O tensor of a deserialized plan, as the shim reports it.
type ioDesc struct {
	Name          string
	Input         bool
	DType         int     // nvinfer1::DataType value
	Dims          []int64 // -1 for dynamic dimensions
	Min, Opt, Max []int64 // profile 0, inputs only
}

// dtypeNames are nvinfer1::DataType names, indexed by value.
var dtypeNames = [...]string{"float32", "float16", "int8", "int32", "bool", "uint8", "fp8", "bfloat16", "int64"}

func dtypeName(d int) string {
	if d >= 0 && d < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", d)
}

func dimsString(d []int64) string {
	s := make([]string, len(d))
	for i, v := range d {
		s[i] = fmt.Sprint(v)
	}
	return "[" + strings.Join(s, ",") + "]"
}

// validateIO checks a plan's I/O tensors against the manifest's GraphSpec:
// names and directions, float32 dtypes, ranks and static dimensions, and
// that the profile of every input covers batch sizes 1..spec.MaxBatch. It
// reports every problem (errors.Join), each wrapping ErrSpec, and returns
// the batch range the profile allows.
func validateIO(spec engines.GraphSpec, ios []ioDesc) (minBatch, maxBatch int64, err error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrSpec}, args...)...))
	}
	if spec.MaxBatch < 1 {
		bad("graph %s: MaxBatch %d: want ≥ 1", spec.Name, spec.MaxBatch)
	}
	byName := make(map[string]ioDesc, len(ios))
	var planIn, planOut []string
	for _, io := range ios {
		byName[io.Name] = io
		if io.Input {
			planIn = append(planIn, io.Name)
		} else {
			planOut = append(planOut, io.Name)
		}
	}
	minBatch, maxBatch = 1, 1<<31
	want := map[string]bool{}
	check := func(t engines.TensorInfo, input bool) {
		kind, plural, have := "output", "outputs", planOut
		if input {
			kind, plural, have = "input", "inputs", planIn
		}
		want[t.Name] = true
		io, ok := byName[t.Name]
		if !ok {
			bad("plan has no %s %q (plan %s: %s) — rebuild the plan from this bundle's ONNX", kind, t.Name, plural, strings.Join(have, ", "))
			return
		}
		if io.Input != input {
			bad("%q is an %s in the manifest but not in the plan", t.Name, kind)
			return
		}
		if io.DType != 0 {
			bad("%s %q has dtype %s, want float32 — build the plan with float32 I/O (energyflow engine build keeps I/O float32)", kind, t.Name, dtypeName(io.DType))
		}
		if len(io.Dims) != len(t.Shape) {
			bad("%s %q has shape %s in the plan, the manifest says %s", kind, t.Name, dimsString(io.Dims), dimsString(t.Shape))
			return
		}
		for i := 1; i < len(t.Shape); i++ {
			if io.Dims[i] != t.Shape[i] {
				bad("%s %q has shape %s in the plan, the manifest says %s", kind, t.Name, dimsString(io.Dims), dimsString(t.Shape))
				return
			}
		}
		if len(t.Shape) == 0 || t.Shape[0] != -1 {
			bad("%s %q: the manifest shape %s has no dynamic batch dimension", kind, t.Name, dimsString(t.Shape))
			return
		}
		if !input {
			return
		}
		lo, hi := io.Dims[0], io.Dims[0]
		if lo == -1 {
			if len(io.Min) == 0 || len(io.Max) == 0 {
				bad("input %q has no optimization profile", t.Name)
				return
			}
			lo, hi = io.Min[0], io.Max[0]
		}
		if lo > 1 || hi < int64(spec.MaxBatch) {
			bad("input %q: the plan's profile allows batch %d..%d, the runtime needs 1..%d — rebuild with energyflow engine build (batch min/opt/max 1/1/16)", t.Name, lo, hi, spec.MaxBatch)
		}
		minBatch = max(minBatch, lo)
		maxBatch = min(maxBatch, hi)
	}
	for _, t := range spec.Inputs {
		check(t, true)
	}
	for _, t := range spec.Outputs {
		check(t, false)
	}
	for _, io := range ios {
		if !want[io.Name] {
			kind := "output"
			if io.Input {
				kind = "input"
			}
			bad("plan has %s %q that the manifest does not list", kind, io.Name)
		}
	}
	if len(errs) > 0 {
		return 0, 0, errors.Join(errs...)
	}
	return minBatch, maxBatch, nil
}

// rowElems is the number of elements of one batch row of a manifest shape.
func rowElems(shape []int64) int {
	n := 1
	for _, d := range shape[1:] {
		n *= int(d)
	}
	return n
}

// energyIO are the indexes of the energy-gradient graph's tensors in
// GraphSpec order, or ok=false when the spec is not that graph.
type energyIO struct{ a, cond, t, grad, energy int }

func findEnergyIO(spec engines.GraphSpec) (energyIO, bool) {
	idx := func(ts []engines.TensorInfo, name string) int {
		for i, t := range ts {
			if t.Name == name {
				return i
			}
		}
		return -1
	}
	nIn := len(spec.Inputs)
	e := energyIO{
		a:      idx(spec.Inputs, "a_t"),
		cond:   idx(spec.Inputs, "cond"),
		t:      idx(spec.Inputs, "t"),
		grad:   idx(spec.Outputs, "grad_a"),
		energy: idx(spec.Outputs, "energy"),
	}
	if e.a < 0 || e.cond < 0 || e.t < 0 || e.grad < 0 || e.energy < 0 || len(spec.Inputs) != 3 || len(spec.Outputs) != 2 {
		return energyIO{}, false
	}
	if rowElems(spec.Inputs[e.a].Shape) != rowElems(spec.Outputs[e.grad].Shape) ||
		rowElems(spec.Inputs[e.t].Shape) != 1 || rowElems(spec.Outputs[e.energy].Shape) != 1 {
		return energyIO{}, false
	}
	e.grad += nIn
	e.energy += nIn
	return e, true
}

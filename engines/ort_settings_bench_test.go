package engines

// The ONNX Runtime settings the ORT backend ships with, measured against the
// alternatives on a bundle's ∇E graph (docs/engines.md, "The
// settings, measured"). This file is internal to the package: it builds
// sessions with the backend's sessionOptions and onnxruntime_go directly,
// because ORTOptions does not expose the settings the backend fixes.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	ort "github.com/yalue/onnxruntime_go"
)

// ortSetting is one way of running the ∇E graph.
type ortSetting struct {
	opt     ort.GraphOptimizationLevel
	pass    string // "binding": IoBinding over preallocated tensors (what the backend does); "run": Run with preallocated tensors; "run-alloc": Run with the outputs ONNX Runtime allocates each call
	threads int
}

func (s ortSetting) name() string {
	opt := map[ort.GraphOptimizationLevel]string{
		ort.GraphOptimizationLevelDisableAll:     "disabled",
		ort.GraphOptimizationLevelEnableBasic:    "basic",
		ort.GraphOptimizationLevelEnableExtended: "extended",
		ort.GraphOptimizationLevelEnableAll:      "all",
	}[s.opt]
	return fmt.Sprintf("opt=%s/pass=%s/threads=%d", opt, s.pass, s.threads)
}

// ortSettingRunner runs the ∇E graph once per call under one setting, on
// inputs filled once.
type ortSettingRunner struct {
	sess    *ort.DynamicAdvancedSession
	ins     []ort.Value
	outs    []ort.Value // preallocated outputs; nil entries for run-alloc
	bind    *ort.IoBinding
	pass    string
	destroy []func() error
	result  []float32 // the first output after the last call
}

func newORTSettingRunner(spec GraphSpec, s ortSetting, fill func(i int, buf []float32)) (*ortSettingRunner, error) {
	so, err := sessionOptions(s.threads, s.opt, false) // the backend's own options, but for s
	if err != nil {
		return nil, err
	}
	defer so.Destroy()
	var inNames, outNames []string
	for _, t := range spec.Inputs {
		inNames = append(inNames, t.Name)
	}
	for _, t := range spec.Outputs {
		outNames = append(outNames, t.Name)
	}
	sess, err := ort.NewDynamicAdvancedSession(spec.Path, inNames, outNames, so)
	if err != nil {
		return nil, err
	}
	r := &ortSettingRunner{sess: sess, pass: s.pass, destroy: []func() error{sess.Destroy}}
	tensor := func(t TensorInfo) (*ort.Tensor[float32], error) {
		shape := make(ort.Shape, len(t.Shape))
		for i, d := range t.Shape {
			shape[i] = max(d, 1) // batch 1
		}
		tt, err := ort.NewEmptyTensor[float32](shape)
		if err == nil {
			r.destroy = append(r.destroy, tt.Destroy)
		}
		return tt, err
	}
	for i, t := range spec.Inputs {
		tt, err := tensor(t)
		if err != nil {
			r.Close()
			return nil, err
		}
		fill(i, tt.GetData())
		r.ins = append(r.ins, tt)
	}
	for _, t := range spec.Outputs {
		if s.pass == "run-alloc" {
			r.outs = append(r.outs, nil)
			continue
		}
		tt, err := tensor(t)
		if err != nil {
			r.Close()
			return nil, err
		}
		r.outs = append(r.outs, tt)
	}
	if s.pass == "binding" {
		if r.bind, err = sess.CreateIoBinding(); err != nil {
			r.Close()
			return nil, err
		}
		r.destroy = append(r.destroy, r.bind.Destroy)
		for i, name := range inNames {
			if err := r.bind.BindInput(name, r.ins[i]); err != nil {
				r.Close()
				return nil, err
			}
		}
		for i, name := range outNames {
			if err := r.bind.BindOutput(name, r.outs[i]); err != nil {
				r.Close()
				return nil, err
			}
		}
	}
	return r, nil
}

// call runs the graph once and keeps its first output in r.result.
func (r *ortSettingRunner) call() error {
	switch r.pass {
	case "binding":
		if err := r.sess.RunWithBinding(r.bind); err != nil {
			return err
		}
		r.result = r.outs[0].(*ort.Tensor[float32]).GetData()
	case "run":
		if err := r.sess.Run(r.ins, r.outs); err != nil {
			return err
		}
		r.result = r.outs[0].(*ort.Tensor[float32]).GetData()
	case "run-alloc":
		outs := make([]ort.Value, len(r.outs))
		if err := r.sess.Run(r.ins, outs); err != nil {
			return err
		}
		r.result = append(r.result[:0], outs[0].(*ort.Tensor[float32]).GetData()...)
		for _, o := range outs {
			o.Destroy()
		}
	default:
		return fmt.Errorf("unknown pass %q", r.pass)
	}
	return nil
}

func (r *ortSettingRunner) Close() {
	for i := len(r.destroy) - 1; i >= 0; i-- {
		r.destroy[i]()
	}
}

// BenchmarkGradCallSettings times one ∇E call (batch 1) of a shipped
// bundle's graph under every combination of the graph optimisation level,
// the way tensors are passed and 1 or 2 intra-op threads, and reports each
// setting's largest difference from the backend's own (all optimisations,
// IoBinding, 1 thread) on the same input as maxdiff. The bundle is
// $ENERGYFLOW_BENCH_BUNDLE, else bundles/metaworld-button-press.
// research/ort/bench.sh runs it in rounds; research/ort/table.py prints the
// table docs/engines.md shows.
func BenchmarkGradCallSettings(b *testing.B) {
	dir := os.Getenv("ENERGYFLOW_BENCH_BUNDLE")
	if dir == "" {
		dir = filepath.Join("..", "bundles", "metaworld-button-press")
	}
	bun, err := LoadBundle(dir)
	if err != nil {
		b.Fatal(err)
	}
	be, err := NewORT(ORTOptions{}) // loads the library and holds the environment
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	spec, err := bun.GraphSpec(GraphEnergyGrad, 1)
	if err != nil {
		b.Fatal(err)
	}
	fill := func(i int, buf []float32) {
		r := rand.New(rand.NewPCG(1, uint64(i)))
		for j := range buf {
			buf[j] = float32(r.NormFloat64())
		}
		if len(buf) == 1 { // σ
			buf[0] = 0.5
		}
	}
	ref, err := newORTSettingRunner(spec, ortSetting{ort.GraphOptimizationLevelEnableAll, "binding", 1}, fill)
	if err != nil {
		b.Fatal(err)
	}
	if err := ref.call(); err != nil {
		b.Fatal(err)
	}
	want := append([]float32(nil), ref.result...)
	ref.Close()

	for _, threads := range []int{1, 2} {
		for _, pass := range []string{"binding", "run", "run-alloc"} {
			for _, opt := range []ort.GraphOptimizationLevel{
				ort.GraphOptimizationLevelDisableAll, ort.GraphOptimizationLevelEnableBasic,
				ort.GraphOptimizationLevelEnableExtended, ort.GraphOptimizationLevelEnableAll,
			} {
				s := ortSetting{opt, pass, threads}
				b.Run(s.name(), func(b *testing.B) {
					r, err := newORTSettingRunner(spec, s, fill)
					if err != nil {
						b.Fatal(err)
					}
					defer r.Close()
					if err := r.call(); err != nil { // warm-up, and the output compared
						b.Fatal(err)
					}
					diff := 0.0
					for i, v := range r.result {
						diff = math.Max(diff, math.Abs(float64(v-want[i])))
					}
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						if err := r.call(); err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
					b.ReportMetric(diff, "maxdiff")
				})
			}
		}
	}
}

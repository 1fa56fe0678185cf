//go:build tensorrt && trtfake

package trt

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/energyflow/edge/engines"
)

// Shapes of the test graph: T_p=4, D_a=3, cond_dim=5.
const (
	tp, da, condDim = 4, 3, 5
	rowA            = tp * da
)

type planOpts struct {
	trt              int
	gpu              string
	pmin, popt, pmax int
	aDtype           string
	aDims            string
	extra            string
	dropCond         bool
}

func defaultPlan() planOpts {
	return planOpts{trt: 100300, gpu: "FakeGPU", pmin: 1, popt: 1, pmax: 16, aDtype: "float", aDims: fmt.Sprintf("%d %d", tp, da)}
}

func (p planOpts) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "EFXFAKEPLAN 1\ntrt %d\ngpu %s\nprofile %d %d %d\n", p.trt, p.gpu, p.pmin, p.popt, p.pmax)
	fmt.Fprintf(&b, "input a_t %s %s\n", p.aDtype, p.aDims)
	if !p.dropCond {
		fmt.Fprintf(&b, "input cond float %d\n", condDim)
	}
	fmt.Fprintf(&b, "input t float\noutput grad_a float %d %d\noutput energy float\n", tp, da)
	b.WriteString(p.extra)
	return b.String()
}

func energySpec(dir string, plans ...engines.PlanInfo) engines.GraphSpec {
	return engines.GraphSpec{
		Path: dir,
		Name: "energy_grad",
		Inputs: []engines.TensorInfo{
			{Name: "a_t", Shape: []int64{-1, tp, da}},
			{Name: "cond", Shape: []int64{-1, condDim}},
			{Name: "t", Shape: []int64{-1}},
		},
		Outputs: []engines.TensorInfo{
			{Name: "grad_a", Shape: []int64{-1, tp, da}},
			{Name: "energy", Shape: []int64{-1}},
		},
		MaxBatch: 16,
		Plans:    plans,
	}
}

// writeBundle writes plan text as the plan for TensorRT 10.3.0 on gpu and
// returns the GraphSpec naming it.
func writeBundle(t *testing.T, p planOpts, gpu string) engines.GraphSpec {
	t.Helper()
	dir := t.TempDir()
	file := PlanFile("energy_grad", "10.3.0", gpu, "fp16")
	if err := os.MkdirAll(filepath.Join(dir, "plans"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(file)), []byte(p.text()), 0o644); err != nil {
		t.Fatal(err)
	}
	return energySpec(dir, engines.PlanInfo{Graph: "energy_grad", File: file, TRTVersion: "10.3.0", GPU: gpu, Precision: "fp16"})
}

// fixture resets the fake, configures the device and opens a backend. It
// checks at cleanup that everything the shim allocated was released.
func fixture(t *testing.T, integrated bool, opts Options) *backend {
	t.Helper()
	fakeReset()
	fakeConfigure("FakeGPU", integrated, 100300)
	b, err := newBackend(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.Close()
		st := fakeGetStats()
		if st.LiveRuntimes != 0 || st.LiveEngines != 0 || st.LiveAllocs != 0 || st.LiveGraphs != 0 {
			t.Errorf("leak after Close: %+v", st)
		}
	})
	return b
}

func forModes(t *testing.T, f func(t *testing.T, integrated bool)) {
	for _, integrated := range []bool{false, true} {
		name := "discrete"
		if integrated {
			name = "integrated"
		}
		t.Run(name, func(t *testing.T) { f(t, integrated) })
	}
}

// model is the fake's analytic energy: mu_j = cond[j mod C],
// E = ½(1+t)|a−mu|², grad = (1+t)(a−mu).
func model(a, cond []float64, t float64) (grad []float64, e float64) {
	grad = make([]float64, len(a))
	for j := range a {
		d := a[j] - cond[j%len(cond)]
		grad[j] = (1 + t) * d
		e += d * d
	}
	return grad, 0.5 * (1 + t) * e
}

func fill(n int, seed float32) (a, cond, tt []float32) {
	a = make([]float32, n*rowA)
	cond = make([]float32, n*condDim)
	tt = make([]float32, n)
	for i := range a {
		a[i] = seed + float32(i%7)*0.25 - 0.5
	}
	for i := range cond {
		cond[i] = float32(i%5)*0.1 - seed
	}
	for i := range tt {
		tt[i] = 0.1 * float32(i+1)
	}
	return a, cond, tt
}

func near(got float32, want float64, tol float64) bool {
	return math.Abs(float64(got)-want) <= tol*math.Max(1, math.Abs(want))
}

func runAndCheck(t *testing.T, s engines.Session, n int, seed float32) {
	t.Helper()
	in, out, err := s.Bind(n)
	if err != nil {
		t.Fatal(err)
	}
	a, cond, tt := fill(n, seed)
	copy(in[0], a)
	copy(in[1], cond)
	copy(in[2], tt)
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	for r := 0; r < n; r++ {
		a64 := make([]float64, rowA)
		c64 := make([]float64, condDim)
		for j := range a64 {
			a64[j] = float64(a[r*rowA+j])
		}
		for j := range c64 {
			c64[j] = float64(cond[r*condDim+j])
		}
		g, e := model(a64, c64, float64(tt[r]))
		for j := range g {
			if !near(out[0][r*rowA+j], g[j], 1e-5) {
				t.Fatalf("row %d grad[%d] = %v, want %v", r, j, out[0][r*rowA+j], g[j])
			}
		}
		if !near(out[1][r], e, 1e-5) {
			t.Fatalf("row %d energy = %v, want %v", r, out[1][r], e)
		}
	}
}

func sessionStats(t *testing.T, s engines.Session) Stats {
	t.Helper()
	switch v := s.(type) {
	case *fusedSession:
		return v.Stats()
	case *session:
		return v.Stats()
	}
	t.Fatalf("unexpected session type %T", s)
	return Stats{}
}

func TestRunMatchesModel(t *testing.T) {
	forModes(t, func(t *testing.T, integrated bool) {
		b := fixture(t, integrated, Options{})
		if b.Device().Integrated != integrated || b.Device().TRTVersion != "10.3.0" || b.Device().Name != "FakeGPU" {
			t.Fatalf("device %+v", b.Device())
		}
		s, err := b.Open(writeBundle(t, defaultPlan(), "FakeGPU"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for _, n := range []int{1, 3, 16} {
			runAndCheck(t, s, n, float32(n))
			runAndCheck(t, s, n, float32(n)+0.5) // graph capture
			runAndCheck(t, s, n, float32(n)+1.5) // graph replay
		}
		st := fakeGetStats()
		if integrated && (st.H2D != 0 || st.D2H != 0) {
			t.Errorf("zero-copy mode made copies: %+v", st)
		}
		if !integrated && st.H2D == 0 {
			t.Errorf("discrete mode made no staging copies: %+v", st)
		}
	})
}

func TestGraphPerBatchSize(t *testing.T) {
	b := fixture(t, false, Options{})
	s, err := b.Open(writeBundle(t, defaultPlan(), "FakeGPU"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := Stats{}
	step := func(n int, eager, capture, replay int64) {
		t.Helper()
		runAndCheck(t, s, n, 0.25)
		want.Eager += eager
		want.Captures += capture
		want.Replays += replay
		if got := sessionStats(t, s); got != want {
			t.Fatalf("after run at batch %d: stats %+v, want %+v", n, got, want)
		}
	}
	step(2, 1, 0, 0) // first run after the shape change: eager
	step(2, 0, 1, 0) // then capture
	step(2, 0, 0, 1) // then replay
	step(5, 1, 0, 0) // a new batch size: eager again ...
	step(5, 0, 1, 0) // ... and its own graph
	step(2, 1, 0, 0) // back to 2: eager once after the shape change ...
	step(2, 0, 0, 1) // ... then its cached graph, no recapture
	step(5, 1, 0, 0)
	step(5, 0, 0, 1)
	st := fakeGetStats()
	if st.Captures != 2 || st.Launches != 5 || st.EagerEnqueues != 4 || st.CapturedEnqueues != 2 {
		t.Errorf("fake saw %+v", st)
	}
}

func TestDisableCUDAGraphs(t *testing.T) {
	b := fixture(t, false, Options{DisableCUDAGraphs: true})
	s, err := b.Open(writeBundle(t, defaultPlan(), "FakeGPU"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 3 {
		runAndCheck(t, s, 2, 1)
	}
	if got := sessionStats(t, s); got != (Stats{Eager: 3}) {
		t.Fatalf("stats %+v", got)
	}
}

func TestCaptureFailureFallsBackToEager(t *testing.T) {
	var logs bytes.Buffer
	b := fixture(t, false, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	s, err := b.Open(writeBundle(t, defaultPlan(), "FakeGPU"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runAndCheck(t, s, 2, 1)
	fakeFailNext("capture_end", CodeCapture)
	runAndCheck(t, s, 2, 2) // capture fails, result still right (eager)
	runAndCheck(t, s, 2, 3)
	if got := sessionStats(t, s); got != (Stats{Eager: 3, CaptureFailures: 1}) {
		t.Fatalf("stats %+v", got)
	}
	if !strings.Contains(logs.String(), "CUDA graph capture failed") {
		t.Errorf("no warning logged: %s", logs.String())
	}
	// An enqueue failing inside the capture also ends in the eager fallback.
	s2, err := b.Open(writeBundle(t, defaultPlan(), "FakeGPU"))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	runAndCheck(t, s2, 1, 1)
	fakeFailNext("enqueue", CodeTRT)
	runAndCheck(t, s2, 1, 2)
	if got := sessionStats(t, s2); got != (Stats{Eager: 2, CaptureFailures: 1}) {
		t.Fatalf("stats %+v", got)
	}
}

func TestErrorPropagation(t *testing.T) {
	b := fixture(t, false, Options{})
	s, err := b.Open(writeBundle(t, defaultPlan(), "FakeGPU"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runAndCheck(t, s, 2, 1)
	for _, op := range []string{"enqueue", "memcpy", "sync"} {
		if err := s.(*fusedSession).session.setBatch(3); err != nil {
			t.Fatal(err)
		}
		fakeFailNext(op, CodeCUDA)
		err := s.Run() // eager after the shape change
		var se *ShimError
		if !errors.As(err, &se) || se.Code != CodeCUDA || !strings.Contains(se.Msg, "injected failure in "+op) {
			t.Fatalf("%s: Run error %v, want a ShimError from the injected failure", op, err)
		}
		if !strings.HasPrefix(err.Error(), "trt: energy_grad: run: ") {
			t.Errorf("error not scoped: %v", err)
		}
		s.(*fusedSession).session.batch = 0 // force a fresh shape change next time
	}
	runAndCheck(t, s, 2, 1) // recovers (eager)
	runAndCheck(t, s, 2, 2) // capture
	fakeFailNext("graph_launch", CodeCUDA)
	_, _, _ = s.Bind(2)
	if err := s.Run(); err == nil || !strings.Contains(err.Error(), "injected failure in graph_launch") {
		t.Fatalf("Run with failing launch: %v", err)
	}
}

func TestProfileAndShapeErrors(t *testing.T) {
	b := fixture(t, false, Options{})
	s, err := b.Open(writeBundle(t, defaultPlan(), "FakeGPU"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, n := range []int{0, -1, 17} {
		if _, _, err := s.Bind(n); !errors.Is(err, ErrBatch) {
			t.Errorf("Bind(%d): %v, want ErrBatch", n, err)
		}
	}
	if err := s.Run(); !errors.Is(err, errNotBound) {
		t.Errorf("Run before Bind: %v", err)
	}
	// The shim refuses a shape (e.g. a profile the Go side did not see):
	// the error carries the shim's status and message, and the next Bind
	// sets every input again.
	fakeFailNext("set_input_shape", CodeShape)
	_, _, err = s.Bind(4)
	var se *ShimError
	if !errors.As(err, &se) || se.Code != CodeShape {
		t.Fatalf("Bind with failing setInputShape: %v", err)
	}
	runAndCheck(t, s, 4, 1)
}

func TestSpecValidation(t *testing.T) {
	cases := []struct {
		name  string
		plan  func(*planOpts)
		spec  func(*engines.GraphSpec)
		wants []string
	}{
		{"missing input", func(p *planOpts) { p.dropCond = true }, nil,
			[]string{`plan has no input "cond" (plan inputs: a_t, t)`}},
		{"half io", func(p *planOpts) { p.aDtype = "half" }, nil,
			[]string{`input "a_t" has dtype float16, want float32`}},
		{"wrong dims", func(p *planOpts) { p.aDims = "4 7" }, nil,
			[]string{`input "a_t" has shape [-1,4,7] in the plan, the manifest says [-1,4,3]`}},
		{"small profile", func(p *planOpts) { p.pmax = 8; p.popt = 4 }, nil,
			[]string{`the plan's profile allows batch 1..8, the runtime needs 1..16`}},
		{"profile from 2", func(p *planOpts) { p.pmin = 2; p.popt = 2 }, nil,
			[]string{`allows batch 2..16`}},
		{"extra tensor", func(p *planOpts) { p.extra = "output debug float 3\n" }, nil,
			[]string{`plan has output "debug" that the manifest does not list`}},
		{"several at once", func(p *planOpts) { p.aDtype = "half"; p.dropCond = true }, nil,
			[]string{`dtype float16`, `no input "cond"`}},
		{"manifest output is plan input", nil, func(s *engines.GraphSpec) {
			s.Inputs = s.Inputs[:2]
			s.Outputs = append(s.Outputs, engines.TensorInfo{Name: "t", Shape: []int64{-1}})
		}, []string{`"t" is an output in the manifest but not in the plan`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := fixture(t, false, Options{})
			p := defaultPlan()
			if c.plan != nil {
				c.plan(&p)
			}
			spec := writeBundle(t, p, "FakeGPU")
			if c.spec != nil {
				c.spec(&spec)
			}
			_, err := b.Open(spec)
			if !errors.Is(err, ErrSpec) {
				t.Fatalf("Open: %v, want ErrSpec", err)
			}
			for _, w := range c.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestPlanSelectionAtOpen(t *testing.T) {
	b := fixture(t, false, Options{})
	spec := writeBundle(t, defaultPlan(), "FakeGPU")
	// Only plans for another TensorRT and another GPU.
	other := spec
	other.Plans = []engines.PlanInfo{
		{Graph: "energy_grad", File: "plans/10.2.0_FakeGPU_fp16.plan", TRTVersion: "10.2.0", GPU: "FakeGPU", Precision: "fp16"},
		{Graph: "energy_grad", File: "plans/10.3.0_Orin_fp16.plan", TRTVersion: "10.3.0", GPU: "Orin", Precision: "fp16"},
	}
	_, err := b.Open(other)
	if !errors.Is(err, ErrPlanMismatch) {
		t.Fatalf("Open: %v, want ErrPlanMismatch", err)
	}
	for _, w := range []string{"built with TensorRT 10.2.0", `built for GPU "Orin"`, "energyflow engine build --bundle"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	other.Plans = nil
	if _, err := b.Open(other); !errors.Is(err, ErrNoPlan) {
		t.Fatalf("Open without plans: %v, want ErrNoPlan", err)
	}
	// A plan whose manifest entry lies: TensorRT itself refuses it.
	p := defaultPlan()
	p.trt = 100200
	lying := writeBundle(t, p, "FakeGPU")
	_, err = b.Open(lying)
	if err == nil || !strings.Contains(err.Error(), "plan was built with TensorRT 10.2.0, this is TensorRT 10.3.0") {
		t.Fatalf("Open of a 10.2 plan: %v", err)
	}
	// engines.Bundle.GraphSpec passes the ONNX file's path: the plan is
	// found relative to the bundle that holds it.
	if err := os.WriteFile(filepath.Join(spec.Path, "manifest.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	onnx := spec
	onnx.Path = filepath.Join(spec.Path, "energy_grad.onnx")
	s0, err := b.Open(onnx)
	if err != nil {
		t.Fatalf("Open with the ONNX path: %v", err)
	}
	s0.Close()
	// Opening a .plan path directly skips the manifest.
	direct := spec
	direct.Path = filepath.Join(spec.Path, filepath.FromSlash(spec.Plans[0].File))
	direct.Plans = nil
	s, err := b.Open(direct)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

func TestTeardown(t *testing.T) {
	b := fixture(t, false, Options{})
	spec := writeBundle(t, defaultPlan(), "FakeGPU")
	s1, err := b.Open(spec)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := b.Open(spec)
	if err != nil {
		t.Fatal(err)
	}
	runAndCheck(t, s1, 2, 1)
	runAndCheck(t, s1, 2, 1)
	if st := fakeGetStats(); st.LiveEngines != 2 || st.LiveGraphs != 1 {
		t.Fatalf("live %+v", st)
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s1.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
	if _, _, err := s1.Bind(1); !errors.Is(err, ErrClosed) {
		t.Errorf("Bind after Close: %v", err)
	}
	if err := s1.Run(); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close: %v", err)
	}
	if st := fakeGetStats(); st.LiveEngines != 1 || st.LiveGraphs != 0 {
		t.Fatalf("after closing s1: %+v", st)
	}
	// Closing the backend closes s2 too.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s2.Run(); !errors.Is(err, ErrClosed) {
		t.Errorf("Run on a session of a closed backend: %v", err)
	}
	if _, err := b.Open(spec); !errors.Is(err, ErrClosed) {
		t.Errorf("Open after Close: %v", err)
	}
	if st := fakeGetStats(); st.LiveRuntimes != 0 || st.LiveEngines != 0 || st.LiveAllocs != 0 {
		t.Fatalf("after Close: %+v", st)
	}
}

func TestFailuresLeakNothing(t *testing.T) {
	fakeReset()
	fakeFailNext("runtime_create", CodeCUDA)
	if _, err := NewBackend(Options{}); err == nil || !strings.Contains(err.Error(), "injected failure in runtime_create") {
		t.Fatalf("NewBackend: %v", err)
	}
	if _, err := NewBackend(Options{Device: 3}); err == nil || !strings.Contains(err.Error(), "invalid device ordinal") {
		t.Fatalf("NewBackend(device 3): %v", err)
	}
	if _, err := NewBackend(Options{Precision: "int8"}); err == nil {
		t.Fatal("NewBackend accepted precision int8")
	}
	b := fixture(t, false, Options{})
	spec := writeBundle(t, defaultPlan(), "FakeGPU")
	for _, op := range []string{"engine_load", "mem_alloc", "set_tensor_address"} {
		fakeFailNext(op, CodeNoMem)
		if _, err := b.Open(spec); err == nil || !strings.Contains(err.Error(), "injected failure in "+op) {
			t.Fatalf("Open with failing %s: %v", op, err)
		}
		if st := fakeGetStats(); st.LiveEngines != 0 || st.LiveAllocs != 0 {
			t.Fatalf("leak after failing %s: %+v", op, st)
		}
	}
}

func TestLoggerForwarding(t *testing.T) {
	var logs bytes.Buffer
	b := fixture(t, false, Options{Verbose: true, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	p := defaultPlan()
	p.gpu = "Orin"
	_, err := b.Open(writeBundle(t, p, "FakeGPU"))
	if err == nil {
		t.Fatal("opened a plan built for another GPU")
	}
	out := logs.String()
	for _, w := range []string{"level=INFO msg=\"fake: runtime created\"", "level=ERROR msg=\"fake: deserializeCudaEngine: plan was built for GPU Orin, this is FakeGPU\"", "component=trt", "source=tensorrt"} {
		if !strings.Contains(out, w) {
			t.Errorf("log lacks %q:\n%s", w, out)
		}
	}
}

// schedule returns test times and scales (any values work for the
// contract; these keep the iteration contracting).
func schedule(K int) (ts, scales []float32) {
	ts = make([]float32, K)
	scales = make([]float32, K)
	for k := range K {
		ts[k] = 1 - float32(k)/float32(K)
		scales[k] = 0.05 * float32(k+1) / float32(K)
	}
	return ts, scales
}

// closedForm integrates a ← a − s_k(1+t_k)(a−mu) in float64:
// a_K − mu = Π_k (1 − s_k(1+t_k)) (a_0 − mu), E = ½(1+γ)|a_K − mu|².
func closedForm(a0, cond []float32, n int, ts, scales []float32, gamma float32) (a []float64, e []float64) {
	f := 1.0
	for k := range ts {
		f *= 1 - float64(scales[k])*(1+float64(ts[k]))
	}
	a = make([]float64, len(a0))
	e = make([]float64, n)
	for r := 0; r < n; r++ {
		for j := 0; j < rowA; j++ {
			mu := float64(cond[r*condDim+j%condDim])
			d := f * (float64(a0[r*rowA+j]) - mu)
			a[r*rowA+j] = mu + d
			e[r] += d * d
		}
		e[r] *= 0.5 * (1 + float64(gamma))
	}
	return a, e
}

func checkFused(t *testing.T, fs engines.FusedSampler, n, K int, seed float32) {
	t.Helper()
	a, cond, _ := fill(n, seed)
	a0 := append([]float32(nil), a...)
	ts, scales := schedule(K)
	const gamma = 1e-3
	energy := make([]float32, n)
	if err := fs.SampleFused(n, a, cond, ts, scales, gamma, energy); err != nil {
		t.Fatal(err)
	}
	wa, we := closedForm(a0, cond, n, ts, scales, gamma)
	for i := range wa {
		if !near(a[i], wa[i], 1e-5) {
			t.Fatalf("n=%d K=%d: a[%d] = %v, want %v", n, K, i, a[i], wa[i])
		}
	}
	for r := range we {
		if !near(energy[r], we[r], 1e-5) {
			t.Fatalf("n=%d K=%d: energy[%d] = %v, want %v", n, K, r, energy[r], we[r])
		}
	}
}

func TestFusedSamplerClosedForm(t *testing.T) {
	forModes(t, func(t *testing.T, integrated bool) {
		b := fixture(t, integrated, Options{})
		s, err := b.Open(writeBundle(t, defaultPlan(), "FakeGPU"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		fs, ok := s.(engines.FusedSampler)
		if !ok {
			t.Fatalf("%T does not implement engines.FusedSampler", s)
		}
		const K = 20
		checkFused(t, fs, 3, K, 1) // eager (new shape)
		before := fakeGetStats()
		checkFused(t, fs, 3, K, 2) // capture + launch
		checkFused(t, fs, 3, K, 3) // replay
		after := fakeGetStats()
		if d := after.CapturedEnqueues - before.CapturedEnqueues; d != K+1 {
			t.Errorf("captured %d enqueues, want K+1 = %d", d, K+1)
		}
		if d := after.EulerSteps - before.EulerSteps; d != 2*K {
			t.Errorf("%d Euler steps in two launches, want %d", d, 2*K)
		}
		if d := after.Syncs - before.Syncs; d != 2 {
			t.Errorf("%d host synchronizations for two samples, want 2 (no per-step round trip)", d)
		}
		if d := after.EagerEnqueues - before.EagerEnqueues; d != 0 {
			t.Errorf("%d eager enqueues during replays", d)
		}
		if got := sessionStats(t, s); got != (Stats{Eager: 1, Captures: 1, Replays: 1}) {
			t.Errorf("stats %+v", got)
		}
		checkFused(t, fs, 3, 5, 4)  // another K: its own graph
		checkFused(t, fs, 3, 5, 5)  // replay
		checkFused(t, fs, 16, K, 6) // another batch: eager first
		checkFused(t, fs, 16, K, 7) // capture
		checkFused(t, fs, 1, 40, 8) // bigger K: buffers grow, fused graphs dropped
		checkFused(t, fs, 1, 40, 9) // capture
		checkFused(t, fs, 3, K, 10) // shape change: eager; graph for (3, K) was dropped with the buffers
		checkFused(t, fs, 3, K, 11) // recapture
		runAndCheck(t, s, 3, 1)     // Run after fused (t bound back to Run's buffer): captures the Run graph
		runAndCheck(t, s, 3, 2)     // replay
		checkFused(t, fs, 3, K, 12) // fused replay still right
		if _, _, err := s.(*fusedSession).Bind(2); err != nil {
			t.Fatal(err)
		}
	})
}

func TestFusedArgumentErrors(t *testing.T) {
	b := fixture(t, false, Options{})
	s, err := b.Open(writeBundle(t, defaultPlan(), "FakeGPU"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fs := s.(engines.FusedSampler)
	a, cond, _ := fill(2, 1)
	ts, sc := schedule(4)
	e := make([]float32, 2)
	for name, err := range map[string]error{
		"no steps":      fs.SampleFused(2, a, cond, nil, nil, 0, e),
		"scale count":   fs.SampleFused(2, a, cond, ts, sc[:3], 0, e),
		"short a":       fs.SampleFused(2, a[:5], cond, ts, sc, 0, e),
		"short energy":  fs.SampleFused(2, a, cond, ts, sc, 0, e[:1]),
		"batch too big": fs.SampleFused(17, a, cond, ts, sc, 0, e),
		"batch too low": fs.SampleFused(0, a, cond, ts, sc, 0, e),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	fakeFailNext("euler_step", CodeCUDA)
	err = fs.SampleFused(2, a, cond, ts, sc, 0, e)
	var se *ShimError
	if !errors.As(err, &se) || se.Op != "efx_euler_step" {
		t.Fatalf("SampleFused with a failing kernel: %v", err)
	}
}

func TestNotAnEnergyGraph(t *testing.T) {
	b := fixture(t, false, Options{})
	dir := t.TempDir()
	plan := "EFXFAKEPLAN 1\ntrt 100300\ngpu FakeGPU\nprofile 1 1 4\ninput image float 3 8 8\noutput features float 6\n"
	path := filepath.Join(dir, "vision.plan")
	if err := os.WriteFile(path, []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := b.Open(engines.GraphSpec{Path: path, Name: "vision", MaxBatch: 4,
		Inputs:  []engines.TensorInfo{{Name: "image", Shape: []int64{-1, 3, 8, 8}}},
		Outputs: []engines.TensorInfo{{Name: "features", Shape: []int64{-1, 6}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.(engines.FusedSampler); ok {
		t.Error("vision session claims to be a FusedSampler")
	}
	in, out, err := s.Bind(4)
	if err != nil {
		t.Fatal(err)
	}
	if len(in[0]) != 4*3*8*8 || len(out[0]) != 4*6 {
		t.Fatalf("buffer sizes %d, %d", len(in[0]), len(out[0]))
	}
	out[0][0] = 7
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	if out[0][0] != 0 {
		t.Errorf("features not written")
	}
	if got := s.Inputs(); got[0].Name != "image" || got[0].Shape[1] != 3 {
		t.Errorf("Inputs() = %+v", got)
	}
}

func TestHotPathAllocatesNothing(t *testing.T) {
	b := fixture(t, false, Options{})
	s, err := b.Open(writeBundle(t, defaultPlan(), "FakeGPU"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runAndCheck(t, s, 2, 1)
	runAndCheck(t, s, 2, 1)
	if n := testing.AllocsPerRun(50, func() {
		if _, _, err := s.Bind(2); err != nil {
			t.Fatal(err)
		}
		if err := s.Run(); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Bind+Run allocate %v times per run", n)
	}
	fs := s.(engines.FusedSampler)
	a, cond, _ := fill(2, 1)
	ts, sc := schedule(20)
	e := make([]float32, 2)
	for range 2 {
		if err := fs.SampleFused(2, a, cond, ts, sc, 1e-3, e); err != nil {
			t.Fatal(err)
		}
	}
	if n := testing.AllocsPerRun(50, func() {
		if err := fs.SampleFused(2, a, cond, ts, sc, 1e-3, e); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("SampleFused allocates %v times per run", n)
	}
}

func TestSessionsOnSeveralGoroutines(t *testing.T) {
	b := fixture(t, false, Options{})
	spec := writeBundle(t, defaultPlan(), "FakeGPU")
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		s, err := b.Open(spec)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.Close()
			fs := s.(engines.FusedSampler)
			for i := range 20 {
				n := 1 + (g+i)%3
				a, cond, _ := fill(n, float32(i))
				a0 := append([]float32(nil), a...)
				ts, sc := schedule(8)
				e := make([]float32, n)
				if err := fs.SampleFused(n, a, cond, ts, sc, 0.01, e); err != nil {
					errs <- err
					return
				}
				wa, _ := closedForm(a0, cond, n, ts, sc, 0.01)
				if !near(a[0], wa[0], 1e-5) {
					errs <- fmt.Errorf("goroutine %d: a[0]=%v want %v", g, a[0], wa[0])
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestExamplePlanInTestdata(t *testing.T) {
	b := fixture(t, false, Options{})
	spec := energySpec(filepath.Join("testdata", "fake_energy_grad.plan"))
	s, err := b.Open(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runAndCheck(t, s, 4, 0.5)
}

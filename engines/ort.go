package engines

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	ort "github.com/yalue/onnxruntime_go"
)

// ORTOptions configures the ONNX Runtime backend.
type ORTOptions struct {
	// LibraryPath is the configured libonnxruntime.so.1; empty means
	// discovery: ONNXRUNTIME_LIB, the system library path, then the
	// project's install location (.deps/onnxruntime/linux-<arch>/).
	LibraryPath string
	// IntraOpThreads is ONNX Runtime's intra-op thread count per session;
	// 0 means DefaultIntraOpThreads.
	IntraOpThreads int
	// DisableSpinning stops idle intra-op threads from busy-waiting for
	// work (ONNX Runtime's session.intra_op.allow_spinning = 0): slightly
	// higher latency, less CPU taken from other processes.
	DisableSpinning bool
	// Logger receives the library choice; nil means slog.Default().
	Logger *slog.Logger
}

// DefaultIntraOpThreads is the intra-op thread count when ORTOptions leaves
// it 0. On the shared 2-core reference machine one thread gave half the
// latency of two (docs/engines.md has the numbers): a second thread only
// helps on an otherwise idle machine, and the robot's other goroutines
// (camera, arm, telemetry) need a core too.
const DefaultIntraOpThreads = 1

// ortEnvironment is onnxruntime_go's process-wide ONNX Runtime environment,
// reference-counted across ORT backends. It is the package's one piece of
// shared state, forced by the C library: one environment per process, one
// library per process.
var ortEnvironment struct {
	sync.Mutex
	refs int
	lib  ortLib // the library loaded last; it stays loaded for the process
}

// ORT is the ONNX Runtime backend (CPU). Open sessions from one goroutine
// or several; each Session has one owner.
type ORT struct {
	lib     ortLib
	threads int
	noSpin  bool
	log     *slog.Logger

	mu       sync.Mutex
	sessions map[*ortSession]struct{}
	closed   bool
}

var _ Backend = (*ORT)(nil)

// NewORT finds and loads the ONNX Runtime library (ORTOptions.LibraryPath
// documents the order) and returns a backend. The error wraps ErrNoORT and
// says how to install the library when it is missing or older than 1.24.
// All ORT backends of a process share the first library loaded.
func NewORT(opts ORTOptions) (*ORT, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	threads := opts.IntraOpThreads
	if threads == 0 {
		threads = DefaultIntraOpThreads
	}
	if threads < 0 {
		return nil, fmt.Errorf("engines: ORT intra-op threads %d, expected ≥ 0", threads)
	}
	e := &ortEnvironment
	e.Lock()
	defer e.Unlock()
	if e.refs == 0 {
		// The library stays loaded once probed: reuse it unless another is configured.
		lib := e.lib
		if lib.Path == "" || opts.LibraryPath != "" && opts.LibraryPath != lib.Path {
			var err error
			if lib, err = findORT(opts.LibraryPath); err != nil {
				return nil, err
			}
		}
		ort.SetSharedLibraryPath(lib.Path)
		if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
			return nil, fmt.Errorf("%w: initialize ONNX Runtime %s from %s: %v", ErrNoORT, lib.Version, lib.Path, err)
		}
		e.lib = lib
		log.Info("engines: ONNX Runtime loaded", "version", lib.Version, "path", lib.Path, "found_by", lib.Source)
	} else if opts.LibraryPath != "" && opts.LibraryPath != e.lib.Path {
		return nil, fmt.Errorf("engines: ONNX Runtime is already loaded from %s; cannot also load %s in the same process", e.lib.Path, opts.LibraryPath)
	}
	e.refs++
	return &ORT{lib: e.lib, threads: threads, noSpin: opts.DisableSpinning, log: log, sessions: map[*ortSession]struct{}{}}, nil
}

// Name returns "ort".
func (b *ORT) Name() string { return "ort" }

// Library returns the absolute path and version of the loaded library.
func (b *ORT) Library() (path, version string) { return b.lib.Path, b.lib.Version }

// Close closes any session still open and releases the backend's share of
// the ONNX Runtime environment. Idempotent.
func (b *ORT) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	open := make([]*ortSession, 0, len(b.sessions))
	for s := range b.sessions {
		open = append(open, s)
	}
	b.mu.Unlock()
	var errs []error
	for _, s := range open {
		b.log.Warn("engines: closing ORT session left open at backend Close", "graph", s.spec.Name)
		errs = append(errs, s.Close())
	}
	e := &ortEnvironment
	e.Lock()
	defer e.Unlock()
	e.refs--
	if e.refs == 0 {
		if err := ort.DestroyEnvironment(); err != nil {
			errs = append(errs, fmt.Errorf("engines: destroy ONNX Runtime environment: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Open loads spec.Path, checks the graph's inputs and outputs against
// spec (names, float32, rank, static dimensions, dynamic batch) and returns
// a session. Errors name the file and the tensor.
func (b *ORT) Open(spec GraphSpec) (Session, error) {
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("engines: ORT backend is closed")
	}
	if spec.MaxBatch < 1 {
		return nil, fmt.Errorf("engines: open %s: MaxBatch %d, expected ≥ 1", spec.Path, spec.MaxBatch)
	}
	info, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("engines: ORT session options: %w", err)
	}
	defer info.Destroy()
	gotIn, gotOut, err := ort.GetInputOutputInfoWithOptions(spec.Path, info)
	if err != nil {
		return nil, fmt.Errorf("engines: open %s: ONNX Runtime cannot read the graph: %w", spec.Path, err)
	}
	if err := checkGraphIO(spec, gotIn, gotOut); err != nil {
		return nil, err
	}

	so, err := sessionOptions(b.threads, ort.GraphOptimizationLevelEnableAll, b.noSpin)
	if err != nil {
		return nil, err
	}
	defer so.Destroy()
	inNames := make([]string, len(spec.Inputs))
	for i, t := range spec.Inputs {
		inNames[i] = t.Name
	}
	outNames := make([]string, len(spec.Outputs))
	for i, t := range spec.Outputs {
		outNames[i] = t.Name
	}
	sess, err := ort.NewDynamicAdvancedSession(spec.Path, inNames, outNames, so)
	if err != nil {
		return nil, fmt.Errorf("engines: open %s: %w", spec.Path, err)
	}
	s := &ortSession{backend: b, spec: spec, sess: sess, binds: map[int]*ortBinding{}}
	b.mu.Lock()
	b.sessions[s] = struct{}{}
	b.mu.Unlock()
	return s, nil
}

// checkGraphIO compares what the ONNX file declares with the spec.
func checkGraphIO(spec GraphSpec, gotIn, gotOut []ort.InputOutputInfo) error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, &FieldError{File: spec.Path, Field: "graphs." + spec.Name, Problem: fmt.Sprintf(format, args...)})
	}
	check := func(kind string, want []TensorInfo, got []ort.InputOutputInfo) {
		for _, w := range want {
			var g *ort.InputOutputInfo
			for i := range got {
				if got[i].Name == w.Name {
					g = &got[i]
				}
			}
			if g == nil {
				bad("graph has no %s %q, expected %s %v", kind, w.Name, w.Name, w.Shape)
				continue
			}
			if g.OrtValueType != ort.ONNXTypeTensor || g.DataType != ort.TensorElementDataTypeFloat {
				bad("%s %q is %v of %v, expected a float32 tensor", kind, w.Name, g.OrtValueType, g.DataType)
				continue
			}
			if len(g.Dimensions) != len(w.Shape) {
				bad("%s %q has shape %v, expected %v", kind, w.Name, g.Dimensions, w.Shape)
				continue
			}
			for d, wd := range w.Shape {
				gd := g.Dimensions[d]
				switch {
				case wd == -1 && gd >= 0 && (gd != 1 || spec.MaxBatch > 1):
					bad("%s %q has a fixed batch %d, expected a dynamic batch dimension (re-export with dynamic_axes)", kind, w.Name, gd)
				case wd >= 0 && gd >= 0 && gd != wd:
					bad("%s %q has shape %v, expected %v (dimension %d)", kind, w.Name, g.Dimensions, w.Shape, d)
				}
			}
		}
		if kind == "input" {
			for _, g := range got {
				found := false
				for _, w := range want {
					found = found || w.Name == g.Name
				}
				if !found {
					bad("graph has an extra input %q the contract does not know; expected only %s", g.Name, tensorList(want))
				}
			}
		}
	}
	check("input", spec.Inputs, gotIn)
	check("output", spec.Outputs, gotOut)
	return joinProblems(errs)
}

// ortSession is one graph on ONNX Runtime. It keeps one I/O binding per
// batch size, with tensors over Go slices, so Bind with a known n and Run
// allocate nothing on the Go side.
type ortSession struct {
	backend *ORT
	spec    GraphSpec
	sess    *ort.DynamicAdvancedSession
	binds   map[int]*ortBinding
	cur     *ortBinding
	closed  bool
}

// sessionOptions are the options every session of the backend is made
// with: threads intra-op threads, one inter-op thread, sequential execution,
// the graph optimisation level opt (the backend uses all of them; docs/engines.md,
// "The settings, measured") and, with noSpin, idle intra-op threads that do
// not busy-wait. The caller destroys them.
func sessionOptions(threads int, opt ort.GraphOptimizationLevel, noSpin bool) (*ort.SessionOptions, error) {
	so, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("engines: ORT session options: %w", err)
	}
	for _, set := range []func() error{
		func() error { return so.SetIntraOpNumThreads(threads) },
		func() error { return so.SetInterOpNumThreads(1) },
		func() error { return so.SetExecutionMode(ort.ExecutionModeSequential) },
		func() error { return so.SetGraphOptimizationLevel(opt) },
		func() error {
			if noSpin {
				return so.AddSessionConfigEntry("session.intra_op.allow_spinning", "0")
			}
			return nil
		},
	} {
		if err := set(); err != nil {
			so.Destroy()
			return nil, fmt.Errorf("engines: ORT session options: %w", err)
		}
	}
	return so, nil
}

var _ Session = (*ortSession)(nil)

type ortBinding struct {
	n       int
	in, out [][]float32
	tensors []*ort.Tensor[float32]
	bind    *ort.IoBinding
}

func (s *ortSession) Inputs() []TensorInfo  { return s.spec.Inputs }
func (s *ortSession) Outputs() []TensorInfo { return s.spec.Outputs }

// Bind implements Session. Buffers for every batch size bound so far stay
// valid until Close.
func (s *ortSession) Bind(n int) (in, out [][]float32, err error) {
	if s.closed {
		return nil, nil, fmt.Errorf("engines: %s: session is closed", s.spec.Name)
	}
	if s.cur != nil && s.cur.n == n {
		return s.cur.in, s.cur.out, nil
	}
	if n < 1 || n > s.spec.MaxBatch {
		return nil, nil, fmt.Errorf("engines: %s: batch %d, expected 1..%d (GraphSpec.MaxBatch)", s.spec.Name, n, s.spec.MaxBatch)
	}
	if b, ok := s.binds[n]; ok {
		s.cur = b
		return b.in, b.out, nil
	}
	b, err := s.newBinding(n)
	if err != nil {
		return nil, nil, err
	}
	s.binds[n] = b
	s.cur = b
	return b.in, b.out, nil
}

func (s *ortSession) newBinding(n int) (*ortBinding, error) {
	io, err := s.sess.CreateIoBinding()
	if err != nil {
		return nil, fmt.Errorf("engines: %s: create ORT binding: %w", s.spec.Name, err)
	}
	b := &ortBinding{n: n, bind: io}
	mk := func(t TensorInfo) ([]float32, *ort.Tensor[float32], error) {
		shape := make(ort.Shape, len(t.Shape))
		size := int64(1)
		for i, d := range t.Shape {
			if d < 0 {
				d = int64(n)
			}
			shape[i] = d
			size *= d
		}
		buf := make([]float32, size)
		tt, err := ort.NewTensor(shape, buf)
		return buf, tt, err
	}
	for _, t := range s.spec.Inputs {
		buf, tt, err := mk(t)
		if err == nil {
			b.tensors = append(b.tensors, tt)
			err = io.BindInput(t.Name, tt)
		}
		if err != nil {
			b.destroy()
			return nil, fmt.Errorf("engines: %s: bind input %q for batch %d: %w", s.spec.Name, t.Name, n, err)
		}
		b.in = append(b.in, buf)
	}
	for _, t := range s.spec.Outputs {
		buf, tt, err := mk(t)
		if err == nil {
			b.tensors = append(b.tensors, tt)
			err = io.BindOutput(t.Name, tt)
		}
		if err != nil {
			b.destroy()
			return nil, fmt.Errorf("engines: %s: bind output %q for batch %d: %w", s.spec.Name, t.Name, n, err)
		}
		b.out = append(b.out, buf)
	}
	return b, nil
}

func (b *ortBinding) destroy() {
	if b.bind != nil {
		b.bind.Destroy()
	}
	for _, t := range b.tensors {
		t.Destroy()
	}
}

// Run implements Session.
func (s *ortSession) Run() error {
	if s.cur == nil {
		return fmt.Errorf("engines: %s: Run before Bind", s.spec.Name)
	}
	if err := s.sess.RunWithBinding(s.cur.bind); err != nil {
		return fmt.Errorf("engines: %s: ONNX Runtime run (batch %d): %w", s.spec.Name, s.cur.n, err)
	}
	return nil
}

// Close implements Session. Idempotent.
func (s *ortSession) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	for _, b := range s.binds {
		b.destroy()
	}
	s.binds, s.cur = nil, nil
	err := s.sess.Destroy()
	s.backend.mu.Lock()
	delete(s.backend.sessions, s)
	s.backend.mu.Unlock()
	if err != nil {
		return fmt.Errorf("engines: %s: close ORT session: %w", s.spec.Name, err)
	}
	return nil
}

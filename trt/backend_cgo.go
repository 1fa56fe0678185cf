//go:build tensorrt

package trt

/*
#include <stdlib.h>
#include "shim/efx_trt.h"

extern void efxGoLog(uintptr_t, int32_t, char*);
static efx_log_fn efx_go_log_fn(void) { return (efx_log_fn)efxGoLog; }
*/
import "C"

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/cgo"
	"strings"
	"sync"
	"unsafe"

	"github.com/energyflow/edge/engines"
)

// call is one function for the CUDA goroutine. Sessions keep their hot-path
// calls preallocated so Run allocates nothing.
type call struct {
	fn   func()
	done chan struct{}
}

func newCall(fn func()) call { return call{fn: fn, done: make(chan struct{}, 1)} }

// worker is the goroutine that owns the CUDA context: locked to one OS
// thread for its whole life (the runtime API's current device and TensorRT's
// per-thread state live there), it runs the calls sent to it one at a time.
type worker struct {
	calls  chan *call
	stop   chan struct{}
	exited chan struct{}
}

func newWorker() *worker {
	w := &worker{calls: make(chan *call), stop: make(chan struct{}), exited: make(chan struct{})}
	go w.loop()
	return w
}

func (w *worker) loop() {
	// Never unlocked: when this goroutine returns, Go ends the thread and
	// with it the thread's CUDA state.
	runtime.LockOSThread()
	defer close(w.exited)
	for {
		select {
		case c := <-w.calls:
			c.fn()
			c.done <- struct{}{}
		case <-w.stop:
			return
		}
	}
}

// do runs c on the CUDA thread and waits for it.
func (w *worker) do(c *call) {
	w.calls <- c
	<-c.done
}

// exec runs fn on the CUDA thread (allocates; not for the hot path).
func (w *worker) exec(fn func()) {
	c := newCall(fn)
	w.do(&c)
}

func (w *worker) close() {
	close(w.stop)
	<-w.exited
}

// shimErr builds the error of a failed ABI call; call it on the CUDA thread
// (the message is thread-local).
func shimErr(op string, st C.int) error {
	return &ShimError{Op: op, Code: int(st), Msg: C.GoString(C.efx_last_error())}
}

// backend is a TensorRT runtime on one CUDA device.
type backend struct {
	opts   Options
	log    *slog.Logger
	w      *worker
	rt     *C.efx_runtime
	info   DeviceInfo
	handle cgo.Handle

	mu       sync.Mutex
	sessions map[*session]struct{}
	closed   bool
}

var _ engines.Backend = (*backend)(nil)

// NewBackend starts the CUDA goroutine, selects opts.Device and creates the
// TensorRT runtime. The caller owns the Backend and must Close it.
func NewBackend(opts Options) (engines.Backend, error) {
	b, err := newBackend(opts)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Probe reports the GPU and TensorRT version of device (for naming plans).
func Probe(device int) (DeviceInfo, error) {
	b, err := newBackend(Options{Device: device})
	if err != nil {
		return DeviceInfo{}, err
	}
	defer b.Close()
	return b.info, nil
}

func newBackend(opts Options) (*backend, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	lg := opts.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	lg = lg.With("component", "trt")
	b := &backend{opts: opts, log: lg, w: newWorker(), sessions: map[*session]struct{}{}}
	b.handle = cgo.NewHandle(lg)
	sev := C.int32_t(C.EFX_LOG_WARNING)
	if opts.Verbose {
		sev = C.EFX_LOG_INFO
	}
	var err error
	b.w.exec(func() {
		if v := C.efx_abi_version(); v != C.EFX_ABI_VERSION {
			err = fmt.Errorf("trt: shim ABI version %d, this package needs %d — rebuild the shim", v, C.EFX_ABI_VERSION)
			return
		}
		if st := C.efx_runtime_create(C.int32_t(opts.Device), C.efx_go_log_fn(), C.uintptr_t(b.handle), sev, &b.rt); st != C.EFX_OK {
			err = shimErr("efx_runtime_create", st)
			return
		}
		var di C.efx_device_info
		if st := C.efx_runtime_device_info(b.rt, &di); st != C.EFX_OK {
			err = shimErr("efx_runtime_device_info", st)
			return
		}
		b.info = DeviceInfo{
			Name:               C.GoString(&di.name[0]),
			Device:             int(di.device),
			Integrated:         di.integrated != 0 && di.can_map_host != 0,
			ComputeCapability:  fmt.Sprintf("%d.%d", di.cc_major, di.cc_minor),
			TotalMemory:        int64(di.total_mem),
			TRTVersion:         FormatTRTVersion(int(di.trt_version)),
			CUDARuntimeVersion: int(di.cuda_runtime_version),
		}
	})
	if err != nil {
		b.w.exec(func() { C.efx_runtime_destroy(b.rt) })
		b.w.close()
		b.handle.Delete()
		return nil, fmt.Errorf("trt: device %d: %w", opts.Device, err)
	}
	b.log.Info("tensorrt runtime ready", "gpu", b.info.Name, "trt", b.info.TRTVersion,
		"integrated", b.info.Integrated, "cc", b.info.ComputeCapability)
	return b, nil
}

func (b *backend) Name() string { return "tensorrt" }

// Device reports the GPU and TensorRT version the backend runs on.
func (b *backend) Device() DeviceInfo { return b.info }

// Close closes sessions still open (and logs that), destroys the runtime and
// stops the CUDA goroutine. Idempotent.
func (b *backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	open := make([]*session, 0, len(b.sessions))
	for s := range b.sessions {
		open = append(open, s)
	}
	b.mu.Unlock()
	if len(open) > 0 {
		b.log.Warn("closing backend with sessions still open", "sessions", len(open))
	}
	for _, s := range open {
		s.Close()
	}
	b.w.exec(func() { C.efx_runtime_destroy(b.rt) })
	b.w.close()
	b.handle.Delete()
	return nil
}

func (b *backend) forget(s *session) {
	b.mu.Lock()
	delete(b.sessions, s)
	b.mu.Unlock()
}

// planPath picks the plan file for spec: spec.Path itself when it names a
// .plan file, else the manifest plan matching this TensorRT version and GPU,
// relative to the bundle (spec.Path is the bundle or a file in it).
func (b *backend) planPath(spec engines.GraphSpec) (string, error) {
	if strings.HasSuffix(spec.Path, ".plan") {
		return spec.Path, nil
	}
	p, err := SelectPlan(spec.Plans, spec.Name, b.info.TRTVersion, b.info.Name, b.opts.Precision)
	if err != nil {
		return "", err
	}
	return filepath.Join(bundleDir(spec.Path), filepath.FromSlash(p.File)), nil
}

// Open loads the graph's plan, validates its I/O against spec and
// allocates the session's buffers for spec.MaxBatch rows. The session of an
// energy-gradient graph (a_t, cond, t → grad_a, energy) also implements
// engines.FusedSampler.
func (b *backend) Open(spec engines.GraphSpec) (engines.Session, error) {
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	path, err := b.planPath(spec)
	if err != nil {
		return nil, err
	}
	plan, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("trt: %s: read plan: %w", spec.Name, err)
	}
	if len(plan) == 0 {
		return nil, fmt.Errorf("trt: %s: plan %s is empty", spec.Name, path)
	}
	s := &session{b: b, name: spec.Name, maxBatch: spec.MaxBatch, mapped: b.info.Integrated,
		inputs: cloneInfos(spec.Inputs), outputs: cloneInfos(spec.Outputs), graphs: map[graphKey]*C.efx_graph{},
		noGraphs: b.opts.DisableCUDAGraphs}
	b.w.exec(func() { err = s.load(spec, plan) })
	if err != nil {
		b.w.exec(s.release)
		return nil, fmt.Errorf("trt: %s (%s): %w", spec.Name, path, err)
	}
	b.mu.Lock()
	if b.closed { // closed while loading
		b.mu.Unlock()
		b.w.exec(s.release)
		return nil, ErrClosed
	}
	b.sessions[s] = struct{}{}
	b.mu.Unlock()
	if e, ok := findEnergyIO(spec); ok {
		s.initFused(e)
		return &fusedSession{s}, nil
	}
	return s, nil
}

func cloneInfos(ts []engines.TensorInfo) []engines.TensorInfo {
	out := make([]engines.TensorInfo, len(ts))
	for i, t := range ts {
		out[i] = engines.TensorInfo{Name: t.Name, Shape: append([]int64(nil), t.Shape...)}
	}
	return out
}

// readIO enumerates the engine's I/O tensors (on the CUDA thread).
func readIO(eng *C.efx_engine) ([]ioDesc, error) {
	n := int(C.efx_engine_num_io(eng))
	ios := make([]ioDesc, 0, n)
	for i := 0; i < n; i++ {
		var d C.efx_tensor_desc
		if st := C.efx_engine_io(eng, C.int32_t(i), &d); st != C.EFX_OK {
			return nil, shimErr("efx_engine_io", st)
		}
		nd := int(d.nb_dims)
		if nd < 0 || nd > C.EFX_MAX_DIMS {
			return nil, fmt.Errorf("tensor %d: %d dimensions", i, nd)
		}
		io := ioDesc{Name: C.GoString(&d.name[0]), Input: d.mode == C.EFX_IO_INPUT, DType: int(d.dtype)}
		for j := 0; j < nd; j++ {
			io.Dims = append(io.Dims, int64(d.dims[j]))
			if io.Input {
				io.Min = append(io.Min, int64(d.min[j]))
				io.Opt = append(io.Opt, int64(d.opt[j]))
				io.Max = append(io.Max, int64(d.max[j]))
			}
		}
		ios = append(ios, io)
	}
	return ios, nil
}

// memAlloc allocates bytes of kind (on the CUDA thread).
func memAlloc(rt *C.efx_runtime, kind C.int32_t, bytes int) (unsafe.Pointer, C.uint64_t, error) {
	var host unsafe.Pointer
	var dev C.uint64_t
	if st := C.efx_mem_alloc(rt, kind, C.size_t(bytes), &host, &dev); st != C.EFX_OK {
		return nil, 0, shimErr("efx_mem_alloc", st)
	}
	return host, dev, nil
}

// hostDevBuf is host-visible memory with a device address: one mapped
// allocation (integrated GPUs) or pinned host staging plus device memory.
type hostDevBuf struct {
	host   unsafe.Pointer
	dev    C.uint64_t
	mapped bool
	floats int
}

func allocBuf(rt *C.efx_runtime, mapped bool, floats int) (hostDevBuf, error) {
	bytes := 4 * max(floats, 1)
	if mapped {
		h, d, err := memAlloc(rt, C.EFX_MEM_MAPPED, bytes)
		return hostDevBuf{host: h, dev: d, mapped: true, floats: floats}, err
	}
	_, d, err := memAlloc(rt, C.EFX_MEM_DEVICE, bytes)
	if err != nil {
		return hostDevBuf{}, err
	}
	h, _, err := memAlloc(rt, C.EFX_MEM_PINNED, bytes)
	if err != nil {
		C.efx_mem_free(rt, C.EFX_MEM_DEVICE, nil, d)
		return hostDevBuf{}, err
	}
	return hostDevBuf{host: h, dev: d, floats: floats}, nil
}

func (m *hostDevBuf) free(rt *C.efx_runtime) {
	if m.mapped {
		C.efx_mem_free(rt, C.EFX_MEM_MAPPED, m.host, m.dev)
	} else {
		if m.dev != 0 {
			C.efx_mem_free(rt, C.EFX_MEM_DEVICE, nil, m.dev)
		}
		if m.host != nil {
			C.efx_mem_free(rt, C.EFX_MEM_PINNED, m.host, 0)
		}
	}
	*m = hostDevBuf{}
}

func (m *hostDevBuf) floatsView(n int) []float32 {
	return unsafe.Slice((*float32)(m.host), n)
}

// errBatch is the error of a batch size outside what the session allows.
func errBatch(name string, n, maxBatch int, lo, hi int64) error {
	return fmt.Errorf("%w: %s: batch %d, allowed 1..%d (plan profile %d..%d)", ErrBatch, name, n, maxBatch, lo, hi)
}

var errNotBound = errors.New("trt: Run before Bind")

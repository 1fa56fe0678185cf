//go:build tensorrt

package trt

/*
#include <stdlib.h>
#include "shim/efx_trt.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/energyflow/edge/engines"
)

// graphKey names a cached CUDA graph: the batch size, and K for the fused
// sampler (0 for Run).
type graphKey struct{ batch, k int }

// tensorBuf is one I/O tensor's buffer, sized for maxBatch rows.
type tensorBuf struct {
	name *C.char
	row  int // elements per batch row
	hostDevBuf
}

// session is one loaded plan with its execution context, stream and
// buffers. Owned by one goroutine (engines.Session); all CUDA work runs on
// the backend's CUDA goroutine.
type session struct {
	b        *backend
	name     string
	eng      *C.efx_engine
	mapped   bool // zero-copy buffers: no staging copies
	inputs   []engines.TensorInfo
	outputs  []engines.TensorInfo
	bufs     []tensorBuf // inputs, then outputs, in GraphSpec order
	maxBatch int
	pmin     int64 // profile batch range
	pmax     int64

	batch      int  // batch of the current input shapes (0: none)
	shapeDirty bool // shapes changed since the last eager enqueue
	noGraphs   bool // eager only (option, or a capture failed)
	graphs     map[graphKey]*C.efx_graph
	stats      Stats
	closed     bool

	inViews, outViews [][]float32
	dims              [C.EFX_MAX_DIMS]C.int64_t

	// Preallocated hot-path calls.
	runCall  call
	runErr   error
	seqRunFn func() error

	fused *fusedState
}

var _ engines.Session = (*session)(nil)

// load runs on the CUDA thread: deserialize, validate, allocate, bind.
func (s *session) load(spec engines.GraphSpec, plan []byte) error {
	rt := s.b.rt
	if st := C.efx_engine_load(rt, unsafe.Pointer(&plan[0]), C.size_t(len(plan)), &s.eng); st != C.EFX_OK {
		return fmt.Errorf("deserialize plan: %w — was it built on this machine with this TensorRT? (energyflow engine build)", shimErr("efx_engine_load", st))
	}
	ios, err := readIO(s.eng)
	if err != nil {
		return err
	}
	s.pmin, s.pmax, err = validateIO(spec, ios)
	if err != nil {
		return err
	}
	all := append(append([]engines.TensorInfo(nil), spec.Inputs...), spec.Outputs...)
	s.bufs = make([]tensorBuf, len(all))
	for i, t := range all {
		s.bufs[i].name = C.CString(t.Name)
		s.bufs[i].row = rowElems(t.Shape)
		s.bufs[i].hostDevBuf, err = allocBuf(rt, s.mapped, s.maxBatch*s.bufs[i].row)
		if err != nil {
			return fmt.Errorf("buffer for %q: %w", t.Name, err)
		}
		if st := C.efx_engine_set_tensor_address(s.eng, s.bufs[i].name, s.bufs[i].dev); st != C.EFX_OK {
			return shimErr("efx_engine_set_tensor_address", st)
		}
	}
	s.inViews = make([][]float32, len(spec.Inputs))
	s.outViews = make([][]float32, len(spec.Outputs))
	s.seqRunFn = s.seqRun
	s.runCall = newCall(s.runOnWorker)
	return nil
}

// release frees everything (CUDA thread). Safe on a partly loaded session.
func (s *session) release() {
	if s.eng != nil {
		C.efx_stream_sync(s.eng)
	}
	for k, g := range s.graphs {
		C.efx_graph_destroy(g)
		delete(s.graphs, k)
	}
	C.efx_engine_destroy(s.eng)
	s.eng = nil
	for i := range s.bufs {
		s.bufs[i].free(s.b.rt)
		C.free(unsafe.Pointer(s.bufs[i].name))
	}
	s.bufs = nil
	if s.fused != nil {
		s.fused.t.free(s.b.rt)
		s.fused.scales.free(s.b.rt)
	}
}

func (s *session) Inputs() []engines.TensorInfo  { return cloneInfos(s.inputs) }
func (s *session) Outputs() []engines.TensorInfo { return cloneInfos(s.outputs) }

// Stats reports how the session has executed so far.
func (s *session) Stats() Stats { return s.stats }

// Bind sets the input shapes for batch n (only when n changes) and returns
// the session's host buffers (mapped or pinned memory) for n rows.
func (s *session) Bind(n int) (in, out [][]float32, err error) {
	if s.closed {
		return nil, nil, ErrClosed
	}
	if err := s.setBatch(n); err != nil {
		return nil, nil, err
	}
	nIn := len(s.inViews)
	for i := range s.inViews {
		s.inViews[i] = s.bufs[i].floatsView(n * s.bufs[i].row)
	}
	for i := range s.outViews {
		s.outViews[i] = s.bufs[nIn+i].floatsView(n * s.bufs[nIn+i].row)
	}
	return s.inViews, s.outViews, nil
}

func (s *session) setBatch(n int) error {
	if n < 1 || n > s.maxBatch || int64(n) < s.pmin || int64(n) > s.pmax {
		return errBatch(s.name, n, s.maxBatch, s.pmin, s.pmax)
	}
	if n == s.batch {
		return nil
	}
	var err error
	s.b.w.exec(func() {
		for i, t := range s.inputs {
			s.dims[0] = C.int64_t(n)
			for j := 1; j < len(t.Shape); j++ {
				s.dims[j] = C.int64_t(t.Shape[j])
			}
			if st := C.efx_engine_set_input_shape(s.eng, s.bufs[i].name, &s.dims[0], C.int32_t(len(t.Shape))); st != C.EFX_OK {
				err = shimErr("efx_engine_set_input_shape", st)
				return
			}
		}
	})
	if err != nil {
		s.batch = 0 // shapes are now mixed: set them all again next time
		s.shapeDirty = true
		return fmt.Errorf("trt: %s: batch %d: %w", s.name, n, err)
	}
	s.batch = n
	s.shapeDirty = true
	return nil
}

// Run executes the graph on the bound buffers: eagerly after a shape
// change, else by replaying (or capturing) the CUDA graph for this batch.
func (s *session) Run() error {
	if s.closed {
		return ErrClosed
	}
	if s.batch == 0 {
		return errNotBound
	}
	s.b.w.do(&s.runCall)
	if s.runErr != nil {
		return fmt.Errorf("trt: %s: run: %w", s.name, s.runErr)
	}
	return nil
}

func (s *session) runOnWorker() {
	s.runErr = s.execute(s.seqRunFn, graphKey{batch: s.batch})
}

// seqRun issues one inference on the stream: staging copies in (discrete
// GPUs), enqueueV3, staging copies out.
func (s *session) seqRun() error {
	n := s.batch
	nIn := len(s.inputs)
	if !s.mapped {
		for i := 0; i < nIn; i++ {
			b := &s.bufs[i]
			if st := C.efx_memcpy_h2d(s.eng, b.dev, b.host, C.size_t(4*n*b.row)); st != C.EFX_OK {
				return shimErr("efx_memcpy_h2d", st)
			}
		}
	}
	if st := C.efx_engine_enqueue(s.eng); st != C.EFX_OK {
		return shimErr("efx_engine_enqueue", st)
	}
	if !s.mapped {
		for i := nIn; i < len(s.bufs); i++ {
			b := &s.bufs[i]
			if st := C.efx_memcpy_d2h(s.eng, b.host, b.dev, C.size_t(4*n*b.row)); st != C.EFX_OK {
				return shimErr("efx_memcpy_d2h", st)
			}
		}
	}
	return nil
}

// execute runs seq (CUDA thread) eagerly when the shapes just changed or
// graphs are off, else replays the graph cached under key, capturing it
// first if needed. A failed capture turns graphs off for the session and
// the work runs eagerly.
func (s *session) execute(seq func() error, key graphKey) error {
	if !s.shapeDirty && !s.noGraphs {
		g, ok := s.graphs[key]
		if !ok {
			var err error
			g, err = s.capture(seq)
			if err != nil {
				s.stats.CaptureFailures++
				s.noGraphs = true
				s.b.log.Warn("CUDA graph capture failed; running eagerly from now on",
					"graph", s.name, "batch", key.batch, "k", key.k, "err", err)
			} else {
				s.graphs[key] = g
				s.stats.Captures++
			}
		} else {
			s.stats.Replays++
		}
		if g != nil {
			if st := C.efx_graph_launch(s.eng, g); st != C.EFX_OK {
				return shimErr("efx_graph_launch", st)
			}
			if st := C.efx_stream_sync(s.eng); st != C.EFX_OK {
				return shimErr("efx_stream_sync", st)
			}
			return nil
		}
	}
	if err := seq(); err != nil {
		C.efx_stream_sync(s.eng)
		return err
	}
	if st := C.efx_stream_sync(s.eng); st != C.EFX_OK {
		return shimErr("efx_stream_sync", st)
	}
	s.shapeDirty = false
	s.stats.Eager++
	return nil
}

// capture records seq into a CUDA graph (CUDA thread); it always leaves
// capture mode.
func (s *session) capture(seq func() error) (*C.efx_graph, error) {
	if st := C.efx_capture_begin(s.eng); st != C.EFX_OK {
		return nil, shimErr("efx_capture_begin", st)
	}
	seqErr := seq()
	var g *C.efx_graph
	st := C.efx_capture_end(s.eng, &g)
	var endErr error
	if st != C.EFX_OK {
		endErr = shimErr("efx_capture_end", st)
	}
	if seqErr != nil {
		if g != nil {
			C.efx_graph_destroy(g)
		}
		return nil, seqErr
	}
	return g, endErr
}

// Close releases the session. Idempotent.
func (s *session) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.b.w.exec(s.release)
	s.b.forget(s)
	return nil
}

// fusedState holds the fused sampler's device buffers and the arguments of
// the call in flight.
type fusedState struct {
	io     energyIO
	t      hostDevBuf // per-step t values: step k's n values at offset k·tStride(n)
	scales hostDevBuf // K step scales
	n, k   int
	call   call
	err    error
	seqFn  func() error
}

// fusedSession is the session of an energy-gradient graph: it also runs the
// whole K-step sampler on the device.
type fusedSession struct{ *session }

var _ engines.FusedSampler = (*fusedSession)(nil)

func (s *session) initFused(e energyIO) {
	f := &fusedState{io: e}
	f.seqFn = s.seqFused
	f.call = newCall(s.fusedOnWorker)
	s.fused = f
}

// maxFusedSteps bounds K (the graph has 2K+1 kernels and enqueues).
const maxFusedSteps = 1000

// tStride is the distance in floats between the per-step t slices for
// batch n: TensorRT wants tensor addresses 256-byte aligned.
func tStride(n int) int { return (n + 63) / 64 * 64 }

// SampleFused runs K = len(ts) Euler steps and the final energy on the
// device; see engines.FusedSampler. It uses (and overwrites) the session's
// bound buffers.
func (f *fusedSession) SampleFused(n int, a, cond, ts, scales []float32, gamma float32, energy []float32) error {
	s := f.session
	if s.closed {
		return ErrClosed
	}
	fs := s.fused
	K := len(ts)
	ia, ic := &s.bufs[fs.io.a], &s.bufs[fs.io.cond]
	switch {
	case K < 1 || K > maxFusedSteps || len(scales) != K:
		return fmt.Errorf("trt: %s: fused sample: %d times and %d scales, want the same count in 1..%d", s.name, K, len(scales), maxFusedSteps)
	case n < 1 || n > s.maxBatch:
		return errBatch(s.name, n, s.maxBatch, s.pmin, s.pmax)
	case len(a) != n*ia.row || len(cond) != n*ic.row || len(energy) != n:
		return fmt.Errorf("trt: %s: fused sample: lengths a=%d cond=%d energy=%d, want %d, %d, %d for batch %d",
			s.name, len(a), len(cond), len(energy), n*ia.row, n*ic.row, n, n)
	}
	if err := s.setBatch(n); err != nil {
		return err
	}
	if err := s.ensureFusedBuffers(K); err != nil {
		return err
	}
	copy(ia.floatsView(n*ia.row), a)
	copy(ic.floatsView(n*ic.row), cond)
	stride := tStride(n)
	tv := fs.t.floatsView((K + 1) * stride)
	for k := 0; k <= K; k++ {
		v := gamma
		if k < K {
			v = ts[k]
		}
		row := tv[k*stride : k*stride+n]
		for r := range row {
			row[r] = v
		}
	}
	copy(fs.scales.floatsView(K), scales)
	fs.n, fs.k = n, K
	s.b.w.do(&fs.call)
	if fs.err != nil {
		return fmt.Errorf("trt: %s: fused sample: %w", s.name, fs.err)
	}
	copy(a, ia.floatsView(n*ia.row))
	copy(energy, s.bufs[fs.io.energy].floatsView(n))
	return nil
}

// ensureFusedBuffers grows the per-step t and scale buffers for K steps at
// maxBatch rows. Growing moves them, so the fused graphs are dropped.
func (s *session) ensureFusedBuffers(K int) error {
	fs := s.fused
	if fs.scales.floats >= K && fs.t.floats >= (K+1)*tStride(s.maxBatch) {
		return nil
	}
	var err error
	s.b.w.exec(func() {
		for key, g := range s.graphs {
			if key.k != 0 {
				C.efx_graph_destroy(g)
				delete(s.graphs, key)
			}
		}
		fs.t.free(s.b.rt)
		fs.scales.free(s.b.rt)
		if fs.t, err = allocBuf(s.b.rt, s.mapped, (K+1)*tStride(s.maxBatch)); err != nil {
			return
		}
		fs.scales, err = allocBuf(s.b.rt, s.mapped, K)
	})
	if err != nil {
		return fmt.Errorf("trt: %s: fused sampler buffers: %w", s.name, err)
	}
	return nil
}

func (s *session) fusedOnWorker() {
	fs := s.fused
	fs.err = s.execute(fs.seqFn, graphKey{batch: fs.n, k: fs.k})
}

// seqFused issues the whole sampler on the stream: staging copies in, K ×
// (bind t_k, enqueueV3, Euler step), bind γ, enqueueV3, copies out. Each
// step's t address is set before its enqueue, which reads it by value, so
// the captured graph holds K+1 distinct t slices (each 256-byte aligned,
// as setTensorAddress requires).
func (s *session) seqFused() error {
	fs := s.fused
	n, K := fs.n, fs.k
	stride := tStride(n)
	a, cond, t := &s.bufs[fs.io.a], &s.bufs[fs.io.cond], &s.bufs[fs.io.t]
	grad, energy := &s.bufs[fs.io.grad], &s.bufs[fs.io.energy]
	if !s.mapped {
		for _, c := range [...]struct {
			dst  C.uint64_t
			src  unsafe.Pointer
			size int
		}{
			{a.dev, a.host, n * a.row}, {cond.dev, cond.host, n * cond.row},
			{fs.t.dev, fs.t.host, (K + 1) * stride}, {fs.scales.dev, fs.scales.host, K},
		} {
			if st := C.efx_memcpy_h2d(s.eng, c.dst, c.src, C.size_t(4*c.size)); st != C.EFX_OK {
				return shimErr("efx_memcpy_h2d", st)
			}
		}
	}
	// Restore the Run binding of t whatever happens.
	defer C.efx_engine_set_tensor_address(s.eng, t.name, t.dev)
	for k := 0; k <= K; k++ {
		addr := fs.t.dev + C.uint64_t(4*k*stride) // 256-byte aligned
		if st := C.efx_engine_set_tensor_address(s.eng, t.name, addr); st != C.EFX_OK {
			return shimErr("efx_engine_set_tensor_address", st)
		}
		if st := C.efx_engine_enqueue(s.eng); st != C.EFX_OK {
			return shimErr("efx_engine_enqueue", st)
		}
		if k == K {
			break
		}
		if st := C.efx_euler_step(s.eng, a.dev, grad.dev, fs.scales.dev, C.int32_t(k), C.int64_t(n*a.row)); st != C.EFX_OK {
			return shimErr("efx_euler_step", st)
		}
	}
	if !s.mapped {
		if st := C.efx_memcpy_d2h(s.eng, a.host, a.dev, C.size_t(4*n*a.row)); st != C.EFX_OK {
			return shimErr("efx_memcpy_d2h", st)
		}
		if st := C.efx_memcpy_d2h(s.eng, energy.host, energy.dev, C.size_t(4*n)); st != C.EFX_OK {
			return shimErr("efx_memcpy_d2h", st)
		}
	}
	return nil
}

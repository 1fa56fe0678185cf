package trt

import (
	"errors"
	"fmt"
)

var (
	// ErrNoTensorRT is returned by NewBackend in builds without the
	// "tensorrt" build tag.
	ErrNoTensorRT = errors.New("trt: built without TensorRT: rebuild with -tags tensorrt after building the shim (cmake -S . -B build -DTRT_WITH_CUDA=ON && cmake --build build), see docs/jetson.md")
	// ErrNoPlan means the bundle lists no TensorRT plan for the graph.
	ErrNoPlan = errors.New("trt: no TensorRT plan for this graph")
	// ErrPlanMismatch means the bundle has plans for the graph, but none
	// built with the running TensorRT version on the running GPU.
	ErrPlanMismatch = errors.New("trt: no plan matches this TensorRT version and GPU")
	// ErrSpec means the plan's inputs or outputs do not match what the
	// bundle manifest says (names, dtypes, shapes, profile range).
	ErrSpec = errors.New("trt: plan does not match the manifest")
	// ErrBatch means a batch size outside 1..MaxBatch or the plan's profile.
	ErrBatch = errors.New("trt: batch size out of range")
	// ErrClosed is returned by calls on a closed Backend or Session.
	ErrClosed = errors.New("trt: closed")
)

// ShimError is a failure reported by the C ABI (the shim or its fake).
type ShimError struct {
	Op   string // the ABI call, e.g. "efx_engine_enqueue"
	Code int    // EFX_E_* status
	Msg  string // the shim's message (efx_last_error)
}

// Status codes of ShimError.Code (EFX_E_* in shim/efx_trt.h).
const (
	CodeArg     = 1
	CodeCUDA    = 2
	CodeTRT     = 3
	CodeShape   = 4
	CodeState   = 5
	CodeNoMem   = 6
	CodeCapture = 7
)

func (e *ShimError) Error() string {
	return fmt.Sprintf("%s: %s (status %d)", e.Op, e.Msg, e.Code)
}

package trt

import (
	"errors"
	"fmt"
	"log/slog"
)

// Options configure NewBackend. The zero value is usable: device 0, no
// logging, fp16 plans preferred, CUDA graphs on.
type Options struct {
	// Device is the CUDA device ordinal.
	Device int
	// Logger receives TensorRT's log messages (scoped with component=trt);
	// nil discards them.
	Logger *slog.Logger
	// Verbose forwards TensorRT's info messages too (default: warnings and
	// errors).
	Verbose bool
	// Precision is the preferred plan precision: "fp16", "fp32", or "" for
	// fp16 if available, else fp32. A non-empty value is a requirement.
	Precision string
	// DisableCUDAGraphs makes every run eager (for debugging and for
	// measuring what the graphs save).
	DisableCUDAGraphs bool
}

// Validate reports every problem of o.
func (o Options) Validate() error {
	var errs []error
	switch o.Precision {
	case "", "fp16", "fp32":
	default:
		errs = append(errs, fmt.Errorf("trt: options: precision %q: want fp16, fp32 or empty", o.Precision))
	}
	if o.Device < 0 {
		errs = append(errs, fmt.Errorf("trt: options: device %d: want a CUDA device ordinal ≥ 0", o.Device))
	}
	return errors.Join(errs...)
}

// DeviceInfo describes the GPU and the TensorRT library a Backend runs on.
type DeviceInfo struct {
	Name               string // as CUDA reports it, e.g. "Orin"
	Device             int
	Integrated         bool // shares memory with the host (Jetson): zero-copy buffers
	ComputeCapability  string
	TotalMemory        int64
	TRTVersion         string // e.g. "10.3.0"
	CUDARuntimeVersion int    // e.g. 12060
}

// Stats count how a Session executed: eager runs, CUDA graph captures and
// replays, failed captures (after which the session runs eagerly).
type Stats struct {
	Eager           int64
	Captures        int64
	Replays         int64
	CaptureFailures int64
}

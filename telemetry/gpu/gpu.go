// Package gpu reads GPU statistics (utilization, memory, temperature,
// power) behind one small interface, with three implementations:
//
//   - NVML (go-nvml, cgo) on machines with the NVIDIA driver;
//   - Jetson, from the board's sysfs (load, thermal zones, INA3221 power
//     rails), since Jetson boards have no NVML;
//   - None, a clean "no GPU" answer.
//
// Open picks the first that works. NVML's Init is tried once per Open; after
// a failed Init no other NVML function is ever called (doing so kills the
// process), not even Shutdown.
package gpu

import (
	"errors"
	"log/slog"
)

// ErrNoGPU is returned by Read when the machine has no GPU statistics.
var ErrNoGPU = errors.New("gpu: no GPU statistics on this machine")

// Stats describes one GPU. A negative value means "not reported".
type Stats struct {
	Index            int     `json:"index"`
	Name             string  `json:"name"`
	UtilizationPct   float64 `json:"util_pct"`
	MemoryUsedBytes  int64   `json:"mem_used_bytes"`
	MemoryTotalBytes int64   `json:"mem_total_bytes"`
	TemperatureC     float64 `json:"temp_c"`
	PowerW           float64 `json:"power_w"`
}

// Reader reads the current statistics of every GPU. It returns ErrNoGPU
// (wrapped) when there is none. Implementations are safe for concurrent use.
type Reader interface {
	Read() ([]Stats, error)
}

// Source is an optional ability: the name of the implementation
// ("nvml", "jetson", "none").
type Source interface {
	Source() string
}

// ReadCloser is what Open returns; Close is idempotent.
type ReadCloser interface {
	Reader
	Source
	Close() error
}

// None is the "no GPU" reader.
type None struct {
	// Reason says why there is no GPU (shown to operators).
	Reason string
}

// Read returns ErrNoGPU.
func (n None) Read() ([]Stats, error) { return nil, ErrNoGPU }

// Source returns "none".
func (None) Source() string { return "none" }

// Close does nothing.
func (None) Close() error { return nil }

// Open returns the first working reader: NVML, then Jetson sysfs (under
// sysRoot, normally "/"), else None. log may be nil.
func Open(sysRoot string, log *slog.Logger) ReadCloser {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	n, err := OpenNVML()
	if err == nil {
		log.Info("gpu: using NVML", "gpus", n.Count())
		return n
	}
	log.Debug("gpu: NVML unavailable", "err", err)
	j, jerr := OpenJetson(sysRoot)
	if jerr == nil {
		log.Info("gpu: using Jetson sysfs")
		return j
	}
	log.Debug("gpu: Jetson sysfs unavailable", "err", jerr)
	// One plain sentence for the operator; the details are in the debug log.
	return None{Reason: "no NVIDIA driver (NVML) and no Jetson GPU under " + sysRoot}
}

var (
	_ ReadCloser = None{}
	_ ReadCloser = (*NVML)(nil)
	_ ReadCloser = (*Jetson)(nil)
)

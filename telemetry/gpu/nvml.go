package gpu

import (
	"fmt"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVML reads NVIDIA GPUs through the driver's NVML library.
type NVML struct {
	mu     sync.Mutex
	lib    nvml.Interface
	devs   []nvml.Device
	names  []string
	closed bool
}

// OpenNVML initializes NVML. On failure it returns an error wrapping
// ErrNoGPU and never touches NVML again.
func OpenNVML() (*NVML, error) {
	lib := nvml.New()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		// Do not call anything else on lib, not even ErrorString or
		// Shutdown: after a failed Init that kills the process.
		return nil, fmt.Errorf("%w: NVML init failed (code %d) — no NVIDIA driver?", ErrNoGPU, int(ret))
	}
	n := &NVML{lib: lib}
	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS || count == 0 {
		lib.Shutdown()
		return nil, fmt.Errorf("%w: NVML found no devices (%s)", ErrNoGPU, lib.ErrorString(ret))
	}
	for i := 0; i < count; i++ {
		d, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue
		}
		name, ret := d.GetName()
		if ret != nvml.SUCCESS {
			name = "NVIDIA GPU"
		}
		n.devs = append(n.devs, d)
		n.names = append(n.names, name)
	}
	if len(n.devs) == 0 {
		lib.Shutdown()
		return nil, fmt.Errorf("%w: NVML could not open any of %d devices", ErrNoGPU, count)
	}
	return n, nil
}

// Count is the number of GPUs.
func (n *NVML) Count() int { return len(n.devs) }

// Source returns "nvml".
func (*NVML) Source() string { return "nvml" }

// Read returns the statistics of every GPU; fields NVML does not report are
// negative.
func (n *NVML) Read() ([]Stats, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, fmt.Errorf("%w: NVML reader closed", ErrNoGPU)
	}
	out := make([]Stats, len(n.devs))
	for i, d := range n.devs {
		s := Stats{Index: i, Name: n.names[i], UtilizationPct: -1, MemoryUsedBytes: -1, MemoryTotalBytes: -1, TemperatureC: -1, PowerW: -1}
		if u, ret := d.GetUtilizationRates(); ret == nvml.SUCCESS {
			s.UtilizationPct = float64(u.Gpu)
		}
		if m, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
			s.MemoryUsedBytes, s.MemoryTotalBytes = int64(m.Used), int64(m.Total)
		}
		if t, ret := d.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
			s.TemperatureC = float64(t)
		}
		if p, ret := d.GetPowerUsage(); ret == nvml.SUCCESS {
			s.PowerW = float64(p) / 1000
		}
		out[i] = s
	}
	return out, nil
}

// Close shuts NVML down; it is idempotent.
func (n *NVML) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	if ret := n.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("gpu: NVML shutdown: %s", n.lib.ErrorString(ret))
	}
	return nil
}

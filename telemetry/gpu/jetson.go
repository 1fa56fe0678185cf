package gpu

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Jetson reads an NVIDIA Jetson's integrated GPU from sysfs: the GPU load
// (per mille), the "GPU-therm" thermal zone, the GPU power rail of the
// INA3221 monitors where present, and the unified memory from
// /proc/meminfo.
type Jetson struct {
	mu       sync.Mutex
	root     string
	loadPath string
	tempPath string
	power    powerRail
}

type powerRail struct{ voltPath, currPath, powerPath string }

// Known GPU load files (Xavier/Nano, Orin).
var jetsonLoadPaths = []string{
	"sys/devices/gpu.0/load",
	"sys/devices/platform/gpu.0/load",
	"sys/devices/platform/17000000.ga10b/load",
	"sys/devices/platform/17000000.gv11b/load",
	"sys/devices/17000000.ga10b/load",
	"sys/devices/17000000.gv11b/load",
	"sys/devices/57000000.gpu/load",
}

// OpenJetson looks for a Jetson GPU under root ("/" on the board).
func OpenJetson(root string) (*Jetson, error) {
	if root == "" {
		root = "/"
	}
	j := &Jetson{root: root}
	for _, p := range jetsonLoadPaths {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			j.loadPath = filepath.Join(root, p)
			break
		}
	}
	if j.loadPath == "" {
		return nil, fmt.Errorf("%w: no Jetson GPU load file under %s", ErrNoGPU, root)
	}
	zones, _ := filepath.Glob(filepath.Join(root, "sys/class/thermal/thermal_zone*/type"))
	for _, z := range zones {
		b, err := os.ReadFile(z)
		if err == nil && strings.HasPrefix(strings.ToLower(strings.TrimSpace(string(b))), "gpu") {
			j.tempPath = filepath.Join(filepath.Dir(z), "temp")
			break
		}
	}
	labels, _ := filepath.Glob(filepath.Join(root, "sys/bus/i2c/drivers/ina3221*/*/hwmon/hwmon*/in*_label"))
	for _, l := range labels {
		b, err := os.ReadFile(l)
		if err != nil || !strings.Contains(strings.ToUpper(string(b)), "GPU") {
			continue
		}
		base := strings.TrimSuffix(filepath.Base(l), "_label") // "in1"
		n := strings.TrimPrefix(base, "in")
		dir := filepath.Dir(l)
		j.power = powerRail{
			voltPath: filepath.Join(dir, "in"+n+"_input"),
			currPath: filepath.Join(dir, "curr"+n+"_input"),
		}
		break
	}
	return j, nil
}

// Source returns "jetson".
func (*Jetson) Source() string { return "jetson" }

// Close does nothing.
func (*Jetson) Close() error { return nil }

func readInt(path string) (int64, bool) {
	if path == "" {
		return 0, false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}

// Read returns the one integrated GPU.
func (j *Jetson) Read() ([]Stats, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := Stats{Name: "Jetson iGPU", UtilizationPct: -1, MemoryUsedBytes: -1, MemoryTotalBytes: -1, TemperatureC: -1, PowerW: -1}
	load, ok := readInt(j.loadPath)
	if !ok {
		return nil, fmt.Errorf("%w: cannot read %s", ErrNoGPU, j.loadPath)
	}
	s.UtilizationPct = float64(load) / 10 // per mille
	if t, ok := readInt(j.tempPath); ok {
		s.TemperatureC = float64(t) / 1000
	}
	if mv, ok := readInt(j.power.voltPath); ok {
		if ma, ok := readInt(j.power.currPath); ok {
			s.PowerW = float64(mv) * float64(ma) / 1e6
		}
	}
	if total, avail, ok := meminfo(filepath.Join(j.root, "proc/meminfo")); ok {
		s.MemoryTotalBytes, s.MemoryUsedBytes = total, total-avail
	}
	return []Stats{s}, nil
}

// meminfo returns MemTotal and MemAvailable in bytes.
func meminfo(path string) (total, avail int64, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var gotT, gotA bool
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		v, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case "MemTotal:":
			total, gotT = v*1024, true
		case "MemAvailable:":
			avail, gotA = v*1024, true
		}
	}
	return total, avail, gotT && gotA
}

var (
	reTegraRAM  = regexp.MustCompile(`RAM (\d+)/(\d+)MB`)
	reTegraGR3D = regexp.MustCompile(`GR3D_FREQ (\d+)%`)
	reTegraTemp = regexp.MustCompile(`(?i)\bGPU@(-?[\d.]+)C`)
	reTegraPow  = regexp.MustCompile(`\b(?:VDD_GPU_SOC|VDD_GPU|POM_5V_GPU|GPU) (\d+)mW`)
)

// ParseTegrastats parses one line of `tegrastats` output (for boards where
// sysfs is locked down and tegrastats is the only source).
func ParseTegrastats(line string) (Stats, error) {
	s := Stats{Name: "Jetson iGPU", UtilizationPct: -1, MemoryUsedBytes: -1, MemoryTotalBytes: -1, TemperatureC: -1, PowerW: -1}
	m := reTegraGR3D.FindStringSubmatch(line)
	if m == nil {
		return s, fmt.Errorf("gpu: tegrastats line has no GR3D_FREQ: %.60q", line)
	}
	s.UtilizationPct, _ = strconv.ParseFloat(m[1], 64)
	if m := reTegraRAM.FindStringSubmatch(line); m != nil {
		u, _ := strconv.ParseInt(m[1], 10, 64)
		t, _ := strconv.ParseInt(m[2], 10, 64)
		s.MemoryUsedBytes, s.MemoryTotalBytes = u<<20, t<<20
	}
	if m := reTegraTemp.FindStringSubmatch(line); m != nil {
		s.TemperatureC, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := reTegraPow.FindStringSubmatch(line); m != nil {
		mw, _ := strconv.ParseFloat(m[1], 64)
		s.PowerW = mw / 1000
	}
	return s, nil
}

package telemetry

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// CPUStats is the host's CPU and memory use. Percentages are over the time
// since the previous reading; ProcessPct counts one fully busy core as 100.
type CPUStats struct {
	Cores         int     `json:"cores"`
	TotalPct      float64 `json:"total_pct"`
	ProcessPct    float64 `json:"process_pct"`
	Load1         float64 `json:"load1"`
	MemUsedBytes  int64   `json:"mem_used_bytes"`
	MemTotalBytes int64   `json:"mem_total_bytes"`
}

// cpuSampler reads /proc (under root) and keeps the previous counters.
type cpuSampler struct {
	mu                sync.Mutex
	root              string
	prevBusy, prevAll uint64
	prevProc          uint64
	prevT             time.Time
}

// clkTck is USER_HZ, 100 on every Linux architecture Go supports.
const clkTck = 100

func (c *cpuSampler) read() (CPUStats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := CPUStats{Cores: runtime.NumCPU()}
	now := time.Now()
	b, err := os.ReadFile(filepath.Join(c.root, "proc/stat"))
	if err != nil {
		return s, fmt.Errorf("telemetry: cpu stats: %w", err)
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 5 || f[0] != "cpu" {
		return s, fmt.Errorf("telemetry: cpu stats: unexpected /proc/stat line %.40q", line)
	}
	var all, idle uint64
	for i, v := range f[1:min(len(f), 9)] {
		n, _ := strconv.ParseUint(v, 10, 64)
		all += n
		if i == 3 || i == 4 { // idle, iowait
			idle += n
		}
	}
	busy := all - idle
	proc := c.procTicks()
	if !c.prevT.IsZero() && all > c.prevAll {
		s.TotalPct = 100 * float64(busy-c.prevBusy) / float64(all-c.prevAll)
		if dt := now.Sub(c.prevT).Seconds(); dt > 0 && proc >= c.prevProc {
			s.ProcessPct = 100 * float64(proc-c.prevProc) / clkTck / dt
		}
	}
	c.prevBusy, c.prevAll, c.prevProc, c.prevT = busy, all, proc, now
	if b, err := os.ReadFile(filepath.Join(c.root, "proc/loadavg")); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			s.Load1, _ = strconv.ParseFloat(f[0], 64)
		}
	}
	if fh, err := os.Open(filepath.Join(c.root, "proc/meminfo")); err == nil {
		sc := bufio.NewScanner(fh)
		var avail int64
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 2 {
				continue
			}
			v, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "MemTotal:":
				s.MemTotalBytes = v * 1024
			case "MemAvailable:":
				avail = v * 1024
			}
		}
		fh.Close()
		s.MemUsedBytes = s.MemTotalBytes - avail
	}
	return s, nil
}

// procTicks returns this process's utime+stime in clock ticks.
func (c *cpuSampler) procTicks() uint64 {
	b, err := os.ReadFile(filepath.Join(c.root, "proc/self/stat"))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	// After ")": state(3) … utime is field 14, stime 15 → indices 11, 12.
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return u + st
}

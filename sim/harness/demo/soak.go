package demo

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	efrt "github.com/energyflow/edge/runtime"
	"github.com/energyflow/edge/safety"
)

// soakMeter records per-tick jitter and the process's memory at the start
// and the end of a soak run (the demo's --soak-report). onTick is
// allocation-free (preallocated).
type soakMeter struct {
	mu      sync.Mutex
	jitter  []time.Duration
	missed  int64
	ticks   int64
	running int64
	start   memSnap
	last    memSnap // taken every 100 ticks while running
	started bool
}

type memSnap struct {
	heap       uint64
	rss        uint64
	goroutines int
	gcPause    time.Duration
	numGC      uint32
}

func snapMem() memSnap {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memSnap{heap: ms.HeapAlloc, rss: readRSS(), goroutines: runtime.NumGoroutine(),
		gcPause: time.Duration(ms.PauseTotalNs), numGC: ms.NumGC}
}

// readRSS reads the resident set size from /proc (0 when unavailable).
func readRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseUint(f[1], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}

func newSoakMeter(capacity int) *soakMeter {
	return &soakMeter{jitter: make([]time.Duration, 0, capacity)}
}

func (s *soakMeter) onTick(tk efrt.Tick, d *safety.Decision, _ safety.Scores) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		s.started = true
		s.mu.Unlock()
		debug.FreeOSMemory()
		snap := snapMem()
		s.mu.Lock()
		s.start = snap
	}
	s.ticks++
	s.missed += tk.Missed
	if d.State == safety.Running {
		s.running++
	}
	if len(s.jitter) < cap(s.jitter) {
		s.jitter = append(s.jitter, tk.Jitter)
	}
	if s.ticks%100 == 0 {
		s.mu.Unlock()
		snap := snapMem()
		s.mu.Lock()
		s.last = snap
	}
}

// report formats the soak results as a small table.
func (s *soakMeter) report(rateHz float64, planned time.Duration) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	end := s.last // the last in-run snapshot, before shutdown tore things down
	j := append([]time.Duration(nil), s.jitter...)
	sort.Slice(j, func(a, b int) bool { return j[a] < j[b] })
	q := func(p float64) time.Duration {
		if len(j) == 0 {
			return 0
		}
		return j[min(len(j)-1, int(p*float64(len(j))))]
	}
	var mx time.Duration
	if len(j) > 0 {
		mx = j[len(j)-1]
	}
	mb := func(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	var b strings.Builder
	fmt.Fprintf(&b, "soak: %.0f Hz for %v, %d ticks (%d RUNNING), GOMAXPROCS=%d\n", rateHz, planned, s.ticks, s.running, runtime.GOMAXPROCS(0))
	fmt.Fprintf(&b, "| metric | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| tick jitter p50 | %v |\n| tick jitter p99 | %v |\n| tick jitter max | %v |\n", q(0.5), q(0.99), mx)
	fmt.Fprintf(&b, "| missed deadlines | %d |\n", s.missed)
	fmt.Fprintf(&b, "| heap start → end | %s → %s |\n", mb(s.start.heap), mb(end.heap))
	fmt.Fprintf(&b, "| RSS start → end | %s → %s |\n", mb(s.start.rss), mb(end.rss))
	fmt.Fprintf(&b, "| goroutines start → end | %d → %d |\n", s.start.goroutines, end.goroutines)
	fmt.Fprintf(&b, "| GC pause total (during soak) | %v in %d cycles |", end.gcPause-s.start.gcPause, end.numGC-s.start.numGC)
	return b.String()
}

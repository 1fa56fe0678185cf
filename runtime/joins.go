package runtime

import (
	"math"
	"slices"
	"sync"
)

// Joins measures how smoothly chunks join (issue 51): the change of the
// commanded velocity from one running tick to the next, split into the
// ticks that execute the first action of a newly committed chunk (a
// boundary) and the ticks that execute the next action of the same chunk
// (inside). Norms are Euclidean over the velocity axes (the gripper is
// left out).
type Joins struct {
	Boundaries int     // boundary ticks measured
	MaxJump    float64 // the largest change at a boundary (NaN: none)
	MedianJump float64 // the median change at a boundary (NaN: none)
	Inside     int     // inside ticks measured (the newest joinKeep of them are kept)
	// InsideMedian is the median change between consecutive actions of one
	// chunk (NaN: none).
	InsideMedian float64
	// SwitchMedian and SwitchMax are the median and largest distance at a
	// boundary between the new chunk's first executed action and what the
	// replaced chunk had planned for the same tick (the policy's change of
	// mind, which real-time chunking removes; a jump both plans intend is
	// not one); NaN: none measured.
	SwitchMedian, SwitchMax float64
}

// joinKeep bounds how many changes of each kind the meter keeps (the
// newest), so that a long run keeps a fixed footprint.
const joinKeep = 2048

// joinMeter accumulates Joins from the loop's goroutine; any goroutine
// may read them.
type joinMeter struct {
	mu       sync.Mutex
	prev     []float64
	prevSeq  int64
	havePrev bool
	bound    ring
	inside   ring
	switches ring
	maxJump  float64
	maxSw    float64
}

// ring keeps the newest len(buf) values.
type ring struct {
	buf  []float64
	next int
	n    int // values observed
}

func (r *ring) add(v float64) {
	if r.buf == nil {
		r.buf = make([]float64, joinKeep)
	}
	r.buf[r.next] = v
	r.next = (r.next + 1) % len(r.buf)
	r.n++
}

func (r *ring) median() float64 {
	k := min(r.n, len(r.buf))
	if k == 0 {
		return math.NaN()
	}
	s := slices.Clone(r.buf[:k])
	slices.Sort(s)
	if k%2 == 1 {
		return s[k/2]
	}
	return (s[k/2-1] + s[k/2]) / 2
}

// observe records one tick: running says the gate let the command through,
// v is the commanded velocity, and seq the chunk its action came from (−1:
// no action, the arm holds). fresh says the action is the first taken from
// its chunk, sw its plan switch (NaN: none). A tick that is not running
// breaks the sequence.
func (m *joinMeter) observe(running bool, v []float64, seq int64, fresh bool, sw float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if running && fresh && !math.IsNaN(sw) {
		m.switches.add(sw)
		if sw > m.maxSw || m.switches.n == 1 {
			m.maxSw = sw
		}
	}
	if !running {
		m.havePrev = false
		return
	}
	if m.havePrev && seq >= 0 && len(m.prev) == len(v) {
		var d float64
		for i, x := range v {
			e := x - m.prev[i]
			d += e * e
		}
		d = math.Sqrt(d)
		switch {
		case fresh:
			m.bound.add(d)
			if d > m.maxJump || m.bound.n == 1 {
				m.maxJump = d
			}
		case seq == m.prevSeq:
			m.inside.add(d)
		}
	}
	if cap(m.prev) < len(v) {
		m.prev = make([]float64, len(v))
	}
	m.prev = m.prev[:len(v)]
	copy(m.prev, v)
	m.prevSeq, m.havePrev = seq, true
}

func (m *joinMeter) joins() Joins {
	m.mu.Lock()
	defer m.mu.Unlock()
	j := Joins{Boundaries: m.bound.n, MaxJump: math.NaN(), MedianJump: m.bound.median(), Inside: m.inside.n, InsideMedian: m.inside.median(),
		SwitchMedian: m.switches.median(), SwitchMax: math.NaN()}
	if m.bound.n > 0 {
		j.MaxJump = m.maxJump
	}
	if m.switches.n > 0 {
		j.SwitchMax = m.maxSw
	}
	return j
}

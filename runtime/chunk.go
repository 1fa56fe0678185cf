package runtime

import (
	"math"
	"time"
)

// Chunk is an action sequence predicted from one observation, with each
// action stamped with the time it is meant for (latency compensation as in
// Diffusion Policy's real-robot loop: action i of the executed window is due
// at obsTime + i·period). Past the executed window it may hold the rest of
// the prediction, its tail: a bridge executed only while the next plan is
// late, as Diffusion Policy's real-robot loop bridges with the previous
// plan's later actions instead of stopping the arm.
type Chunk struct {
	dim     int
	actions []float64   // n × dim, un-standardized
	due     []time.Time // n
	n       int
	win     int // the executed window: actions [0, win); the tail is [win, n)
	next    int // first action not yet executed or dropped
	bridged int // tail actions executed since the chunk was filled
	taken   int // actions executed since the chunk was filled
	// from is the first row of this chunk's own plan: the rows before it
	// are the replaced plan's, kept by Handover (0: none kept).
	from    int
	oldSeq  int64 // the replaced plan's Seq, for the rows before from
	lastRow int   // the row Take returned last (−1: none since Fill)
	fresh   bool  // whether that row was the first of this chunk's own plan taken
	ownSeen bool  // a row of this chunk's own plan has been taken
	// ObsTime is the capture time of the observation the chunk was sampled from.
	ObsTime time.Time
	// Seq numbers chunks in the order they were committed.
	Seq int64
}

// NewChunk returns an empty chunk with room for up to maxActions actions of
// width dim. Chunks are reused: Fill resets them without allocating.
func NewChunk(maxActions, dim int) *Chunk {
	return &Chunk{dim: dim, actions: make([]float64, maxActions*dim), due: make([]time.Time, maxActions)}
}

// Fill loads a chunk from the policy's prediction. pred holds predHorizon×dim
// un-standardized actions; the executed window starts at index start
// (T_o−1: the action aligned with the newest observation) and is at most
// count long, followed by at most tail more actions of the prediction (the
// bridge; 0: none, the arm holds when the window runs out). Action start+i
// is due at obsTime + i·period.
func (c *Chunk) Fill(pred []float32, start, count, tail int, obsTime time.Time, period time.Duration, seq int64) {
	maxN := len(c.due)
	total := len(pred) / c.dim
	count = max(0, min(count, maxN, total-start))
	n := max(count, min(count+max(tail, 0), maxN, total-start))
	c.win = count
	count = n
	for i := 0; i < count; i++ {
		src := pred[(start+i)*c.dim : (start+i+1)*c.dim]
		dst := c.actions[i*c.dim : (i+1)*c.dim]
		for j, v := range src {
			dst[j] = float64(v)
		}
		c.due[i] = obsTime.Add(time.Duration(i) * period)
	}
	c.n, c.next, c.bridged, c.taken, c.ObsTime, c.Seq = count, 0, 0, 0, obsTime, seq
	c.from, c.oldSeq, c.lastRow, c.fresh, c.ownSeen = 0, seq, -1, false, false
}

// Handover keeps the replaced plan running for up to window more actions
// and hands over to this chunk's own plan at the action where the two join
// best: the row r, from the first row due at now (r0) to r0+window, whose
// action is closest (Euclidean over the first nVel axes) to what runs the
// tick before it — prev, the action executed last, for r = r0; the
// replaced plan's row r−1 otherwise. Rows r0..r−1 are then the replaced
// plan's. old holds the replaced plan's actions aligned with this chunk's
// rows (row i due at ObsTime + i·period; Committed, from ObsTime), valid
// in rows [oldFirst, oldFirst+oldN); a row the replaced plan does not
// cover ends the window, and the hand-over row stays inside the executed
// window. prev nil (nothing ran the tick before) or window 0 keep the chunk
// as filled. Call it right after Fill; it returns the rows kept.
func (c *Chunk) Handover(old []float32, oldFirst, oldN int, oldSeq int64, prev []float64, nVel, window int, now time.Time, period time.Duration) int {
	c.oldSeq = oldSeq
	if window <= 0 || prev == nil {
		return 0
	}
	half := period / 2
	r0 := 0
	for r0 < c.n && now.Sub(c.due[r0]) > half {
		r0++
	}
	oldRow := func(i int) []float32 { return old[i*c.dim : (i+1)*c.dim] }
	best, bestD := 0, math.Inf(1)
	for s := 0; s <= window && r0+s < c.win; s++ {
		r := r0 + s
		var d float64
		for i := range nVel {
			before := prev[i] // what runs the tick before row r
			if s > 0 {
				if r-1 < oldFirst || r-1 >= oldFirst+oldN {
					break
				}
				before = float64(oldRow(r - 1)[i])
			}
			e := c.actions[r*c.dim+i] - before
			d += e * e
		}
		if s > 0 && (r-1 < oldFirst || r-1 >= oldFirst+oldN) {
			break // the replaced plan ends before row r
		}
		if d < bestD {
			best, bestD = s, d
		}
	}
	for k := r0; k < r0+best; k++ {
		o := oldRow(k)
		for j := range c.dim {
			c.actions[k*c.dim+j] = float64(o[j])
		}
	}
	if best > 0 {
		c.from = r0 + best
	}
	return best
}

// Clear drops every remaining action (a new episode: the plan belongs to
// the previous scene).
func (c *Chunk) Clear() { c.n, c.win, c.next, c.bridged, c.taken = 0, 0, 0, 0, 0 }

// Last returns the index, from the executed window's start, of the action
// Take returned last (−1 before any).
func (c *Chunk) Last() int { return c.next - 1 }

// Taken returns how many actions have been executed since Fill: 1 right
// after the chunk's first action was taken.
func (c *Chunk) Taken() int { return c.taken }

// Len returns how many actions of the executed window remain: the loop
// replans on it; the tail does not count.
func (c *Chunk) Len() int { return max(0, c.win-c.next) }

// Bridged returns how many tail actions have been executed since Fill.
func (c *Chunk) Bridged() int { return c.bridged }

// Take returns the action to execute at time now. Actions whose due time is
// more than half a period in the past are dropped (counted in dropped); the
// first action due within ±half a period is consumed. When every remaining
// action is late, the last one is executed rather than nothing (Diffusion
// Policy's handling of an over-budget replan). ok is false when the chunk is
// exhausted. The returned slice is owned by the chunk.
func (c *Chunk) Take(now time.Time, period time.Duration) (action []float64, dropped int, ok bool) {
	half := period / 2
	for c.next < c.n {
		i := c.next
		if now.Sub(c.due[i]) > half && i < c.n-1 {
			c.next++
			dropped++
			continue
		}
		if c.due[i].Sub(now) > half {
			// Not due yet: the chunk starts in the future. Execute nothing new.
			return nil, dropped, false
		}
		c.next++
		c.taken++
		if i >= c.win {
			c.bridged++
		}
		c.lastRow = i
		c.fresh = i >= c.from && !c.ownSeen
		c.ownSeen = c.ownSeen || i >= c.from
		return c.actions[i*c.dim : (i+1)*c.dim], dropped, true
	}
	return nil, dropped, false
}

// Fresh reports whether the action Take returned last was the first taken
// from this chunk's own plan: the tick a new plan takes over (after the
// rows Handover kept, if any).
func (c *Chunk) Fresh() bool { return c.fresh }

// RowSeq is the Seq of the plan the action Take returned last came from:
// the replaced plan's for a row Handover kept, else Seq.
func (c *Chunk) RowSeq() int64 {
	if c.lastRow >= 0 && c.lastRow < c.from {
		return c.oldSeq
	}
	return c.Seq
}

// Remaining returns the not-yet-executed actions, tail included, as a flat
// slice (owned by the chunk).
func (c *Chunk) Remaining() []float64 { return c.actions[c.next*c.dim : c.n*c.dim] }

// Committed copies the actions still to run, tail included, that are due at
// from, from+period, … into dst (rows of the chunk's width, as float32):
// row first+i holds the action due at from + (first+i)·period. It returns
// first (the rows before it have no committed action: the chunk starts
// later) and n, the number of rows filled; n is 0 when nothing is due at or
// after from, or dst has no row past first.
func (c *Chunk) Committed(from time.Time, period time.Duration, dst []float32) (first, n int) {
	half := period / 2
	k := c.next
	for k < c.n && from.Sub(c.due[k]) > half {
		k++
	}
	if k >= c.n {
		return 0, 0
	}
	ahead := c.due[k].Sub(from)
	first = int((ahead + half) / period)
	rows := len(dst) / c.dim
	for i := first; i < rows && k < c.n; i, k = i+1, k+1 {
		src := c.actions[k*c.dim : (k+1)*c.dim]
		row := dst[i*c.dim : (i+1)*c.dim]
		for j, v := range src {
			row[j] = float32(v)
		}
		n++
	}
	return first, n
}

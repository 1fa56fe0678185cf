package runtime

import "time"

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
		return c.actions[i*c.dim : (i+1)*c.dim], dropped, true
	}
	return nil, dropped, false
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

package runtime

import (
	"fmt"
	"math"
	"time"

	"github.com/energyflow/edge/engines"
)

// fusedSampler is implemented by *engines.Sampler: a fused session runs
// its Euler steps on the device, where a guide cannot act.
type fusedSampler interface{ Fused() bool }

// setChunking checks loop.realtime_chunking against the bundle and the
// sampler and, when it is on, gives the inference job its guide.
func (l *Loop) setChunking(c ChunkingConfig, s PolicySampler) error {
	mode, err := engines.ParseGuideMode(c.Mode)
	if err != nil {
		return fmt.Errorf("runtime: loop.%w", err)
	}
	if err := engines.CheckStrength(mode, c.Strength); err != nil {
		return fmt.Errorf("runtime: loop.realtime_chunking.%w", err)
	}
	if c.Soft < -1 {
		return fmt.Errorf("runtime: loop.realtime_chunking.soft %d: want -1 (the whole overlap), 0 or more", c.Soft)
	}
	if c.Delay < 0 || c.Delay > l.ta {
		return fmt.Errorf("runtime: loop.realtime_chunking.delay %d: want 0 (from the measured latency) to the %d actions a chunk executes (T_a): a plan later than its chunk never joins it", c.Delay, l.ta)
	}
	l.chunking = c
	if mode == engines.GuideOff {
		return nil
	}
	if f, ok := s.(fusedSampler); ok && f.Fused() {
		return fmt.Errorf("runtime: loop.realtime_chunking.mode %s needs the sampler's per-step session, and this engine integrates on the device (fused): set the mode to off, or build the engine without the fused sampler", mode)
	}
	l.infer.job.guide = &engines.Guide{Mode: mode, Strength: float32(c.Strength),
		Actions: make([]float32, l.tp*l.dim), Weights: make([]float32, l.tp)}
	return nil
}

// chunkDelay is how many committed actions certainly run before the next
// plan lands: loop.realtime_chunking.delay, or the periods the smoothed
// inference latency spans, at least 1.
func (l *Loop) chunkDelay() int {
	if l.chunking.Delay > 0 {
		return l.chunking.Delay
	}
	return l.latencyPeriods()
}

// latencyPeriods is how many control periods the smoothed inference
// latency spans, rounded up, at least 1.
func (l *Loop) latencyPeriods() int {
	return max(1, int((l.latEWMA+l.period-1)/l.period))
}

// fillGuide writes into g the committed actions due from the new
// observation's time obsTime on, aligned with the prediction (action
// start+i is due at obsTime + i·period), and real-time chunking's weights:
// 1 on the first chunkDelay of them, decaying over the rest, 0 where
// nothing is committed (all 0: the plan samples unguided). g nil: off.
func (l *Loop) fillGuide(g *engines.Guide, obsTime time.Time) {
	if g == nil {
		return
	}
	first, n := l.chunk.Committed(obsTime, l.period, g.Actions[l.start*l.dim:])
	if n == 0 {
		for i := range g.Weights {
			g.Weights[i] = 0
		}
		return
	}
	d := l.chunkDelay() - first
	if l.chunking.Soft >= 0 {
		n = min(n, max(d, 0)+l.chunking.Soft)
	}
	engines.ChunkWeights(g.Weights, l.start+first, d, n)
}

// notePrevPlan keeps, before a new chunk replaces the committed one, the
// committed actions due from the new chunk's observation time on (aligned
// with its window), for the plan switch Joins measures.
func (l *Loop) notePrevPlan(obsTime time.Time) {
	l.prevFirst, l.prevN = l.chunk.Committed(obsTime, l.period, l.prevPlan)
}

// planSwitch is the distance, over the velocity axes, between the new
// chunk's first executed action act and what the replaced chunk had
// planned for the same tick; NaN when it planned nothing for it.
func (l *Loop) planSwitch(act []float64) float64 {
	k := l.chunk.Last()
	if k < l.prevFirst || k >= l.prevFirst+l.prevN {
		return math.NaN()
	}
	old := l.prevPlan[k*l.dim:]
	var s float64
	for i := range l.nVel {
		d := act[i] - float64(old[i])
		s += d * d
	}
	return math.Sqrt(s)
}

// Joins returns how smoothly the chunks executed so far joined (Joins).
func (l *Loop) Joins() Joins { return l.joins.joins() }

// Executed returns the chunk the latest tick's action came from (its Seq;
// −1: the arm held) and whether it was that chunk's first action. Call it
// from the loop's goroutine (OnTick).
func (l *Loop) Executed() (seq int64, first bool) { return l.execSeq, l.execFresh }

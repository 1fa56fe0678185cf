package runtime

import (
	"fmt"
	"time"
)

// maxPlanners bounds loop.planners.
const maxPlanners = 4

// planners is loop.planners, 0 read as 1.
func (c LoopConfig) planners() int { return max(1, c.Planners) }

// setPlanners gives the loop one inference worker per planner: the first
// samples with LoopDeps.Sampler (real-time chunking and warm starts are
// its alone), the others each with one of LoopDeps.MorePlanners.
func (l *Loop) setPlanners(condDim int) error {
	n := l.d.Config.Loop.planners()
	if len(l.d.MorePlanners) != n-1 {
		return fmt.Errorf("runtime: loop.planners %d needs %d samplers besides LoopDeps.Sampler, got %d", n, n-1, len(l.d.MorePlanners))
	}
	l.samplers = append([]PolicySampler{l.d.Sampler}, l.d.MorePlanners...)
	l.plans = make([]*worker[inferJob], n)
	for i := range l.plans {
		l.plans[i] = newInferWorker(condDim)
	}
	l.infer = l.plans[0]
	return nil
}

// nextPlanner returns the planner to start the next plan on at now, or nil
// when no plan should start yet. Nothing in flight: the first planner,
// once the committed window has run down to the replan margin
// (replanMargin). A plan in flight: another, free planner only while one
// plan's smoothed latency spans more than the T_a−1 periods the margin can
// cover, and only latency/N after the newest plan started, so that N plans
// in flight start evenly spaced and one lands every latency/N.
func (l *Loop) nextPlanner(now time.Time) *worker[inferJob] {
	if l.chunk.Len() > l.replanMargin() {
		return nil
	}
	var free *worker[inferJob]
	busy := 0
	for _, w := range l.plans {
		switch {
		case w.busy:
			busy++
		case free == nil:
			free = w
		}
	}
	if busy == 0 {
		return l.plans[0]
	}
	if free == nil || l.latEWMA <= time.Duration(l.ta-1)*l.period {
		return nil
	}
	gap := max(l.period, l.latEWMA/time.Duration(len(l.plans)))
	if now.Sub(l.lastStart)+l.period/2 < gap {
		return nil
	}
	return free
}

// oldestInFlight is when the oldest plan in flight started (zero: none),
// what the gate's inference deadline watches.
func (l *Loop) oldestInFlight() time.Time {
	var t time.Time
	for _, w := range l.plans {
		if w.busy && (t.IsZero() || w.job.start.Before(t)) {
			t = w.job.start
		}
	}
	return t
}

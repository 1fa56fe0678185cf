package runtime

import (
	"math"
	"slices"
	"time"

	"github.com/energyflow/edge/engines"
)

// PlanLateMargin is how many control periods the p90 of the loop's recent
// plan latencies may exceed the p90 its closed-loop calibration was driven
// at before the loop warns. Measured on Assembly at 10 Hz
// (research/notes/evaluation-log.md, "Late plans and a loaded host"): the quiet host's
// chunks ran at a median p90 of 0.99 periods and made no trip in 2.66 h;
// one busy core raised it to 1.32 with no trip in 0.26 h; the chunks that
// tripped ran at 1.63–2.6 (and "The five tasks at 10 Hz again").
const PlanLateMargin = 0.5

// planLateWindow is how many recent plans the p90 is taken over, and
// planLateMinPlans how many must have finished before it is judged (at 10
// Hz with T_a = 8 about six seconds; over 10 plans the p90 is the second
// largest latency).
const (
	planLateWindow   = 64
	planLateMinPlans = 10
)

// planLateness tracks how late the policy's plans land, in control
// periods, over the last planLateWindow finished inferences, and whether
// their p90 is past the limit the closed-loop calibration supports. It
// allocates nothing after construction; only the loop goroutine uses it.
type planLateness struct {
	period  time.Duration
	limit   float64 // periods; 0: no limit (the p90 is still tracked)
	ring    [planLateWindow]time.Duration
	scratch [planLateWindow]time.Duration
	n, next int
	first   bool    // the first plan has been seen (and left out)
	p90     float64 // periods; NaN before planLateMinPlans plans
	over    bool
}

func newPlanLateness(period time.Duration, limit float64) *planLateness {
	return &planLateness{period: period, limit: limit, p90: math.NaN()}
}

// observe folds in one finished plan's latency; the run's first plan,
// which pays the inference session's one-time set-up, is left out. It
// returns +1 when the p90
// has just passed the limit, −1 when it has just come back under
// (limit − PlanLateMargin/2, so a p90 that hovers at the limit does not
// flap), and 0 otherwise.
func (p *planLateness) observe(d time.Duration) int {
	if !p.first {
		p.first = true
		return 0
	}
	p.ring[p.next] = d
	p.next = (p.next + 1) % planLateWindow
	p.n = min(p.n+1, planLateWindow)
	if p.n < planLateMinPlans {
		return 0
	}
	s := p.scratch[:p.n]
	copy(s, p.ring[:p.n])
	slices.Sort(s)
	// Nearest rank: the smallest latency with at least 90 % at or below it.
	k := (9*p.n + 9) / 10
	p.p90 = float64(s[k-1]) / float64(p.period)
	if p.limit <= 0 {
		return 0
	}
	switch {
	case !p.over && p.p90 > p.limit:
		p.over = true
		return 1
	case p.over && p.p90 < p.limit-PlanLateMargin/2:
		p.over = false
		return -1
	}
	return 0
}

// planLateLimit resolves the lateness limit in periods and where it comes
// from: loop.plan_late_limit when set (negative: none), else the in-use
// closed-loop calibration's recorded p90 plus PlanLateMargin, else none.
// The calibration's p90 is converted at its own rate; the loop compares
// periods at its rate, which warnClosedLoopConditions already flags when
// the two differ.
func planLateLimit(cfg *Config, m *engines.Manifest) (limit float64, source string) {
	switch {
	case cfg.Loop.PlanLateLimit < 0:
		return 0, "off (loop.plan_late_limit < 0)"
	case cfg.Loop.PlanLateLimit > 0:
		return cfg.Loop.PlanLateLimit, "loop.plan_late_limit"
	}
	if c := m.Calibration; c != nil && c.ClosedLoop != nil && c.ClosedLoop.PlanLatency != nil && c.ClosedLoop.RateHz > 0 {
		return c.ClosedLoop.P90Periods() + PlanLateMargin, "calibration.closed_loop.plan_latency p90 + margin"
	}
	return 0, "none (the calibration records no plan latency; set loop.plan_late_limit)"
}

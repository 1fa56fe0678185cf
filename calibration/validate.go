package calibration

import (
	"errors"
	"fmt"
	"math"
)

// KeyError is one problem of a calibration: the manifest key that holds it
// ("calibration.closed_loop.bands[1].std") and what was wrong and expected.
type KeyError struct {
	Key     string
	Problem string
}

func (e *KeyError) Error() string { return e.Key + ": " + e.Problem }

// problems collects KeyErrors.
type problems []error

func (p *problems) add(key, format string, args ...any) {
	*p = append(*p, &KeyError{Key: key, Problem: fmt.Sprintf(format, args...)})
}

// Validate reports every problem of the calibration block, each a
// *KeyError under "calibration" (errors.Join; nil when valid): each
// closed-loop calibration valid (ClosedLoop.Validate), all of one score, no
// two certified at the same rate and K, and the recommendation's score and
// threshold (a block calibrated only in closed loop may have none). What
// depends on the rest of the manifest — a closed loop of the state score
// needs the state term — is the manifest's to check.
func (c *Block) Validate() error {
	var p problems
	c.validateClosedLoops(&p)
	// A bundle calibrated only in closed loop (sim calibrate on a bundle that
	// never had held-out windows) has no recommendation: the bands are it.
	r := c.Recommended
	if c.ClosedLoop == nil || r != (Recommendation{}) {
		if r.Score != ScoreEnergy && r.Score != ScoreCenteredEnergy {
			p.add("calibration.recommended.score", "got %q, expected %q or %q", r.Score, ScoreEnergy, ScoreCenteredEnergy)
		}
		if !finite(r.Threshold) {
			p.add("calibration.recommended.threshold", "got %v, expected a finite number", r.Threshold)
		}
	}
	return errors.Join(p...)
}

// validateClosedLoops checks closed_loop and closed_loop_others: each one
// valid, all of one score, and no two certified at the same rate and K.
func (c *Block) validateClosedLoops(p *problems) {
	if c.ClosedLoop == nil {
		if len(c.ClosedLoopOthers) > 0 {
			p.add("calibration.closed_loop_others", "got %d calibrations and no closed_loop, expected closed_loop first (the one used at any other rate or K)", len(c.ClosedLoopOthers))
		}
		return
	}
	c.ClosedLoop.validate(p, "calibration.closed_loop")
	for i, o := range c.ClosedLoopOthers {
		f := fmt.Sprintf("calibration.closed_loop_others[%d]", i)
		if o == nil {
			p.add(f, "got null, expected a closed-loop calibration")
			continue
		}
		o.validate(p, f)
		if o.Score != c.ClosedLoop.Score {
			p.add(f+".score", "got %q, expected closed_loop's %q (the calibrations differ only in rate and K)", o.Score, c.ClosedLoop.Score)
		}
		if !(o.RateHz > 0) || o.StepsK < 1 {
			p.add(f, "rate_hz %v, steps_k %d: expected both set, they say which loop it is for", o.RateHz, o.StepsK)
			continue
		}
		for j, prev := range c.ClosedLoops()[:i+1] {
			if prev != nil && prev.RateHz == o.RateHz && prev.StepsK == o.StepsK {
				other := "closed_loop"
				if j > 0 {
					other = fmt.Sprintf("closed_loop_others[%d]", j-1)
				}
				p.add(f, "certified at %g Hz and K=%d like %s: expected one calibration per rate and K", o.RateHz, o.StepsK, other)
				break
			}
		}
	}
}

// Validate reports every problem of the closed-loop calibration, each a
// *KeyError under "calibration.closed_loop" (errors.Join; nil when
// valid). It is the one check of a closed-loop calibration: the manifest
// loader runs it (through Block.Validate), and so does the safety gate on
// the calibration it uses.
func (c *ClosedLoop) Validate() error {
	var p problems
	c.validate(&p, "calibration.closed_loop")
	return errors.Join(p...)
}

// validate adds c's problems under key f.
func (c *ClosedLoop) validate(p *problems, f string) {
	switch c.Score {
	case ScoreEnergy, ScoreCenteredEnergy, ScoreStateEnergy:
	default:
		p.add(f+".score", "got %q, expected %q, %q or %q", c.Score, ScoreEnergy, ScoreCenteredEnergy, ScoreStateEnergy)
	}
	if !(c.Alpha > 0 && c.Alpha < 1) {
		p.add(f+".alpha", "got %v, expected a value in (0, 1)", c.Alpha)
	}
	if c.Rule.Kind != RuleNOfM {
		p.add(f+".rule.kind", "got %q, expected %q", c.Rule.Kind, RuleNOfM)
	}
	if c.Rule.M < 1 || c.Rule.M > MaxWindow {
		p.add(f+".rule.m", "got %d, expected 1..%d", c.Rule.M, MaxWindow)
	}
	if c.Rule.N < 1 || c.Rule.N > c.Rule.M {
		p.add(f+".rule.n", "got %d, expected 1..m (%d)", c.Rule.N, c.Rule.M)
	}
	if !finite(c.Q) {
		p.add(f+".q", "got %v, expected a finite number", c.Q)
	}
	if c.TripsPerHour < 0 || !finite(c.TripsPerHour) {
		p.add(f+".trips_per_hour", "got %v, expected a finite number > 0 (or the key absent: alpha was given)", c.TripsPerHour)
	}
	if c.ConformalHours < 0 || !finite(c.ConformalHours) {
		p.add(f+".conformal_hours", "got %v, expected a finite number ≥ 0", c.ConformalHours)
	}
	if cc := c.Ceiling; cc != nil {
		if !(cc.Alpha > 0 && cc.Alpha < 1) {
			p.add(f+".ceiling.alpha", "got %v, expected a value in (0, 1)", cc.Alpha)
		}
		switch {
		case !finite(cc.Q):
			p.add(f+".ceiling.q", "got %v, expected a finite number", cc.Q)
		case finite(c.Q) && cc.Q < c.Q:
			p.add(f+".ceiling.q", "got %v, below the rule's q %v: expected a one-tick level at or above the rule's threshold", cc.Q, c.Q)
		case !finite(cc.Quantile) || cc.Quantile > cc.Q:
			p.add(f+".ceiling.quantile", "got %v, expected a finite number at most ceiling.q %v (q is the quantile, raised to the rule's q or the floor)", cc.Quantile, cc.Q)
		case cc.Min < 0 || !finite(cc.Min) || cc.Min > cc.Q:
			p.add(f+".ceiling.min", "got %v, expected a finite number in [0, ceiling.q %v]", cc.Min, cc.Q)
		}
		if cc.Episodes < 0 {
			p.add(f+".ceiling.episodes", "got %d, expected ≥ 0", cc.Episodes)
		}
	}
	if pl := c.PlanLatency; pl != nil {
		switch {
		case !finite(pl.P50Ms) || !finite(pl.P90Ms) || pl.P50Ms <= 0 || pl.P90Ms < pl.P50Ms:
			p.add(f+".plan_latency", "p50_ms %v, p90_ms %v: expected 0 < p50 <= p90", pl.P50Ms, pl.P90Ms)
		case pl.Plans < 1 || pl.Episodes < 1:
			p.add(f+".plan_latency", "%d plans over %d episodes: expected at least one of each", pl.Plans, pl.Episodes)
		case pl.Measured != PlanLatencyFromCalibration && pl.Measured != PlanLatencyAfterwards:
			p.add(f+".plan_latency.measured", "got %q, expected %q or %q", pl.Measured, PlanLatencyFromCalibration, PlanLatencyAfterwards)
		}
	}
	if u := c.BandUnit; u != "" && !u.Valid() {
		p.add(f+".band_unit", "got %q, expected %q (running control ticks since arming) or %q (fresh scores since arming; also the meaning when absent)", u, BandTicks, BandFreshScores)
	}
	*p = append(*p, bandProblems(f+".bands", c.Bands)...)
}

// CheckBands reports every problem of a band list, each a *KeyError under
// key ("threshold.bands[1].from"; errors.Join, nil when valid): at least
// one band, From strictly increasing from 0, finite Mean and Threshold, a
// finite Std > 0. ClosedLoop.Validate checks its bands with it.
func CheckBands(key string, bands []Band) error { return errors.Join(bandProblems(key, bands)...) }

func bandProblems(key string, bands []Band) []error {
	var p problems
	if len(bands) == 0 {
		p.add(key, "empty, expected at least one band, the first from 0")
	}
	for i, b := range bands {
		bf := fmt.Sprintf("%s[%d]", key, i)
		switch {
		case i == 0 && b.From != 0:
			p.add(bf+".from", "got %d, expected 0 (the first band starts at arming)", b.From)
		case i > 0 && b.From <= bands[i-1].From:
			p.add(bf+".from", "got %d, expected more than the previous band's %d (bands sorted by from)", b.From, bands[i-1].From)
		}
		if !finite(b.Mean) {
			p.add(bf+".mean", "got %v, expected a finite number", b.Mean)
		}
		if !(b.Std > 0) || !finite(b.Std) {
			p.add(bf+".std", "got %v, expected a finite value > 0", b.Std)
		}
		if !finite(b.Threshold) {
			p.add(bf+".threshold", "got %v, expected a finite number", b.Threshold)
		}
	}
	return p
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

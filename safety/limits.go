package safety

import (
	"math"
	"time"
)

// Clamps counts, per Limit, the values of one command that were clamped.
type Clamps [NumLimits]uint16

// Total is the number of clamped values.
func (c *Clamps) Total() int {
	n := 0
	for _, v := range c {
		n += int(v)
	}
	return n
}

// limiter applies LimitsConfig to proposed commands. It keeps the previous
// output (velocity and acceleration) for the rate limits. Not safe for
// concurrent use; the Guard serializes it.
//
// Per axis the allowed velocity is an interval built in priority order:
//
//  1. hard: [−max_velocity, max_velocity] ∩ soft position interval
//     [−k·(p − lower), −k·(p − upper)] (ros2_control's soft limits; when the
//     two do not meet — far outside a soft bound — the velocity bound wins
//     and the command is the velocity bound pushing back inside);
//  2. max_delta, then max_acceleration, then max_jerk around the previous
//     output (jerk never beyond the segment between the previous output and
//     the proposal), each applied only as far as it keeps a non-empty interval:
//     when a rate limit cannot be met inside the harder interval (e.g. the
//     soft limit demands a faster slow-down than max_acceleration), the
//     harder limit wins and the command takes the point nearest to it.
//
// So velocity, soft position and gripper range hold for every output; the
// rate limits hold whenever the harder ones allow it.
type limiter struct {
	cfg   LimitsConfig
	axes  int
	prevV []float64
	prevA []float64
	prevG float64
	haveG bool
}

func newLimiter(cfg LimitsConfig) *limiter {
	n := len(cfg.MaxVelocity)
	return &limiter{cfg: cfg, axes: n, prevV: make([]float64, n), prevA: make([]float64, n)}
}

// reset restarts from standstill (after a stop: the arm was halted).
func (l *limiter) reset() {
	clear(l.prevV)
	clear(l.prevA)
	l.haveG = false
}

// interval narrowing with priority: narrow [lo, hi] by [clo, chi] if they
// meet, else collapse to the end of [lo, hi] nearest to [clo, chi]. It
// reports which end, if any, the constraint now defines.
func narrow(lo, hi, clo, chi float64) (nlo, nhi float64, setLo, setHi bool) {
	switch {
	case chi < lo:
		return lo, lo, false, false
	case clo > hi:
		return hi, hi, false, false
	}
	if clo > lo {
		lo, setLo = clo, true
	}
	if chi < hi {
		hi, setHi = chi, true
	}
	return lo, hi, setLo, setHi
}

// apply limits in.Velocity into out.Velocity (len axes) and the gripper.
// pos is the measured position (needed only with soft limits; the caller
// has checked its length and finiteness). dt is the time since the previous
// tick (≤ 0: no change allowed by the acceleration limit). Every clamp is
// counted in c.
func (l *limiter) apply(out, in []float64, gripper float64, pos []float64, dt time.Duration, c *Clamps) float64 {
	cfg := &l.cfg
	sec := dt.Seconds()
	if sec < 0 {
		sec = 0
	}
	soft := len(cfg.KPosition) > 0
	for i := 0; i < l.axes; i++ {
		v := in[i]
		vmax := cfg.MaxVelocity[i]
		lo, hi := -vmax, vmax
		loBy, hiBy := LimitVelocity, LimitVelocity
		var sl, sh bool
		if soft {
			k := cfg.KPosition[i]
			smin := -k * (pos[i] - cfg.SoftLower[i])
			smax := -k * (pos[i] - cfg.SoftUpper[i])
			if lo, hi, sl, sh = narrow(lo, hi, smin, smax); sl {
				loBy = LimitSoftPosition
			}
			if sh {
				hiBy = LimitSoftPosition
			}
			if !sl && !sh && (smax < -vmax || smin > vmax) {
				loBy, hiBy = LimitSoftPosition, LimitSoftPosition
			}
		}
		pv := l.prevV[i]
		if len(cfg.MaxDelta) > 0 {
			d := cfg.MaxDelta[i]
			if lo, hi, sl, sh = narrow(lo, hi, pv-d, pv+d); sl {
				loBy = LimitDelta
			}
			if sh {
				hiBy = LimitDelta
			}
		}
		if len(cfg.MaxAcceleration) > 0 {
			d := cfg.MaxAcceleration[i] * sec
			if lo, hi, sl, sh = narrow(lo, hi, pv-d, pv+d); sl {
				loBy = LimitAcceleration
			}
			if sh {
				hiBy = LimitAcceleration
			}
		}
		if len(cfg.MaxJerk) > 0 && sec > 0 {
			// The jerk bound never moves the command beyond the segment
			// between the previous output and the proposal (it must not
			// keep accelerating when the policy slows down): where the two
			// do not meet, the segment's end nearest to the bound is used.
			c0 := pv + l.prevA[i]*sec
			d := cfg.MaxJerk[i] * sec * sec
			jlo, jhi := c0-d, c0+d
			slo, shi := math.Min(pv, v), math.Max(pv, v)
			switch {
			case jhi < slo:
				jlo, jhi = slo, slo
			case jlo > shi:
				jlo, jhi = shi, shi
			default:
				jlo, jhi = math.Max(jlo, slo), math.Min(jhi, shi)
			}
			if lo, hi, sl, sh = narrow(lo, hi, jlo, jhi); sl {
				loBy = LimitJerk
			}
			if sh {
				hiBy = LimitJerk
			}
		}
		switch {
		case v < lo:
			if lo-v > countEps {
				c[loBy]++
			}
			v = lo
		case v > hi:
			if v-hi > countEps {
				c[hiBy]++
			}
			v = hi
		}
		out[i] = v
		if sec > 0 {
			l.prevA[i] = (v - pv) / sec
		} else {
			l.prevA[i] = 0
		}
		l.prevV[i] = v
	}

	g := gripper
	gl := cfg.Gripper
	glo, ghi := gl.Min, gl.Max
	if gl.MaxDelta > 0 && l.haveG {
		glo, ghi, _, _ = narrow(glo, ghi, l.prevG-gl.MaxDelta, l.prevG+gl.MaxDelta)
	}
	if g < glo {
		g = glo
		c[LimitGripper]++
	} else if g > ghi {
		g = ghi
		c[LimitGripper]++
	}
	l.prevG, l.haveG = g, true
	return g
}

// countEps is the smallest clamp that is counted: rounding in the rate
// limits' arithmetic is clamped but not reported.
const countEps = 1e-9

// finite reports whether every value is neither NaN nor ±Inf.
func finite(v []float64) bool {
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

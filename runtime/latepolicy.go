package runtime

import (
	"fmt"
	"time"
)

// setLatePolicy checks loop.late_policy against the bundle and the late
// sampler and, when the bundle has a late network and the configuration
// leaves it on, keeps the measured latency from which plans sample on it.
func (l *Loop) setLatePolicy(c LatePolicyConfig, late PolicySampler) error {
	lp := l.d.Manifest.LatePolicy
	switch {
	case c.Off:
		return nil
	case lp == nil && c.FromPeriods > 0:
		return fmt.Errorf("runtime: loop.late_policy.from_periods %d: bundle %q has no late network (no \"late_policy\" block); set it to 0", c.FromPeriods, l.d.Manifest.Name)
	case lp == nil:
		return nil
	case late == nil:
		return fmt.Errorf("runtime: bundle %q has a late network but the loop was given no sampler for it (LoopDeps.Late)", l.d.Manifest.Name)
	}
	from, src := lp.FromPeriods, "the bundle's late_policy"
	if c.FromPeriods > 0 {
		from, src = c.FromPeriods, "loop.late_policy"
	}
	l.lateFrom = from
	l.log.Info("late network: plans sample on it while the plans before took this many periods or more", "from_periods", from, "from", src)
	return nil
}

// planLate decides whether the plan submitted now samples on the late
// network: the smoothed latency of the plans before spans lateFrom periods
// or more. It logs the switches between the networks (rate-limited: a
// latency that hovers at the boundary switches often).
func (l *Loop) planLate(now time.Time) bool {
	if l.lateFrom == 0 {
		return false
	}
	n := l.latencyPeriods()
	late := n >= l.lateFrom
	if late != l.onLate {
		l.onLate = late
		if log, k := l.logs.late.Observe(now, struct{}{}); log {
			l.log.Info("plan latency crossed the late network's threshold", "late_network", late,
				"latency_periods", n, "from_periods", l.lateFrom, "switches_not_logged", k)
		}
	}
	if late {
		l.stats.lateNet.Add(1)
	}
	return late
}

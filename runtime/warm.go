package runtime

import (
	"fmt"
	"time"

	"github.com/energyflow/edge/engines"
)

// warmSampler is implemented by *engines.Sampler: a sample from a warm
// start (engines.SampleWarm).
type warmSampler interface {
	SampleWarm(cond []float32, w *engines.Warm, dst *engines.Result) error
}

// stepsSampler is implemented by *engines.Sampler: its K.
type stepsSampler interface{ Steps() int }

// setWarm checks loop.warm_start against the bundle and the sampler and,
// when it is on, gives the inference job its warm start. Unset, it takes
// the bundle's (bundleWarm).
func (l *Loop) setWarm(c WarmConfig, s PolicySampler) error {
	from := "loop.warm_start"
	if c.Off {
		return nil
	}
	if c.Sigma == 0 {
		var why string
		if c, why = l.bundleWarm(s); c.Sigma == 0 {
			if why != "" {
				l.log.Info("warm start: plans start cold", "bundle_sets", "sampler.warm_start", "why", why)
			}
			return nil
		}
		from = "the bundle's sampler.warm_start"
	}
	m := l.d.Manifest
	if !m.HasEnergy() {
		return fmt.Errorf("runtime: loop.warm_start needs an energy policy's Euler steps; bundle %q is %q: set warm_start.sigma to 0", m.Name, m.Policy)
	}
	ws, ok := s.(warmSampler)
	if !ok {
		return fmt.Errorf("runtime: loop.warm_start: this sampler (%T) has no warm start", s)
	}
	steps := c.Steps
	k := 0
	if ss, ok := s.(stepsSampler); ok {
		k = ss.Steps()
	}
	if steps == 0 {
		steps = max(1, k/2)
	}
	if k > 0 && steps > k {
		return fmt.Errorf("runtime: loop.warm_start.steps %d: more than the sampler's K = %d (a warm start integrates part of the schedule)", steps, k)
	}
	if err := engines.CheckWarm(m.Schedule, c.Sigma, steps); err != nil {
		return fmt.Errorf("runtime: loop.%w", err)
	}
	l.warm = ws
	l.infer.job.warm = &engines.Warm{Actions: make([]float32, l.tp*l.dim), Sigma: c.Sigma, Steps: steps}
	l.log.Info("warm start: each plan after the first starts from the committed one", "sigma", c.Sigma, "steps", steps, "from", from)
	return nil
}

// bundleWarm is the bundle's sampler.warm_start as a loop.warm_start, when
// it applies: the sampler runs the bundle's K and the loop its rate, where
// the warm start was measured (WarmSpec.Applies), and real-time chunking
// is off (a guide and a warm start do not mix), and the sampler has warm
// starts (the bundle's is a default; a test double without them plans
// cold). Otherwise the zero config (cold) and, when the bundle sets one, why
// it does not apply.
func (l *Loop) bundleWarm(s PolicySampler) (WarmConfig, string) {
	m := l.d.Manifest
	w := m.Sampler.WarmStart
	if w == nil { // (a diffusion bundle with one is refused at load)
		return WarmConfig{}, ""
	}
	if _, ok := s.(warmSampler); !ok {
		return WarmConfig{}, fmt.Sprintf("this sampler (%T) has no warm start", s)
	}
	if mode := l.d.Config.Loop.Chunking.Mode; mode != "" && mode != "off" {
		return WarmConfig{}, fmt.Sprintf("loop.realtime_chunking (mode %s) is on", mode)
	}
	k := m.Sampler.Steps
	if ss, ok := s.(stepsSampler); ok {
		k = ss.Steps()
	}
	if hz := l.d.Config.Loop.RateHz; !w.Applies(hz, k, m.Sampler.Steps) {
		return WarmConfig{}, fmt.Sprintf("it was measured at K = %d and %g Hz (0: any), this loop runs K = %d at %g Hz", m.Sampler.Steps, w.RateHz, k, hz)
	}
	return WarmConfig{Sigma: w.Sigma, Steps: w.Steps}, ""
}

// fillWarm decides whether the plan for the observation at obsTime starts
// warm: with a warm start configured and a committed prediction that still
// reaches that time, it writes the prediction shifted to obsTime into the
// job's warm start and returns true.
func (l *Loop) fillWarm(j *inferJob, obsTime time.Time) bool {
	if j.warm == nil || !l.havePred {
		return false
	}
	e := int((obsTime.Sub(l.predTime) + l.period/2) / l.period)
	if e < 0 || e >= l.tp {
		return false
	}
	l.shiftPlan(j.warm.Actions, e)
	return true
}

// shiftPlan writes into dst (T_p×D_a) the committed prediction shifted by
// e periods, its last action repeated past its end (as Diffusion Policy
// pads).
func (l *Loop) shiftPlan(dst []float32, e int) {
	for i := 0; i < l.tp; i++ {
		src := min(e+i, l.tp-1)
		copy(dst[i*l.dim:(i+1)*l.dim], l.pred[src*l.dim:(src+1)*l.dim])
	}
}

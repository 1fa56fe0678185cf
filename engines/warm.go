package engines

import (
	"fmt"
	"math"
)

// Warm is a warm start for SampleWarm: instead of integrating from pure
// noise at σ_max, the sample starts from the committed plan, shifted to
// the new observation's time and noised to Sigma, and integrates the
// schedule's remaining stretch, from the time where σ(t) = Sigma down to
// γ, in Steps Euler steps (SDEdit's start for a diffusion policy).
type Warm struct {
	// Actions is the plan to start from, un-standardized as in
	// Result.Actions (T_p×D_a): the committed prediction shifted by the
	// control periods elapsed since its observation, its last action
	// repeated past its end.
	Actions []float32
	// Sigma is the noise level the plan is noised to, in (σ(γ), σ_max].
	Sigma float64
	// Steps is the number of Euler steps from there to γ, ≥ 1.
	Steps int
}

// CheckWarm checks a warm start's σ and steps against the schedule: σ in
// (σ(γ), σ_max], steps ≥ 1.
func CheckWarm(sc Schedule, sigma float64, steps int) error {
	lo := sc.Sigma(sc.Gamma)
	if !(sigma > lo && sigma <= sc.SigmaMax) {
		return fmt.Errorf("warm-start sigma %g outside the schedule: want above σ(γ) = %.4g and at most σ_max = %g", sigma, lo, sc.SigmaMax)
	}
	if steps < 1 {
		return fmt.Errorf("warm-start steps %d: want at least 1", steps)
	}
	return nil
}

// TimeOf is the time t at which σ(t) = sigma: T·ln(σ/σ_min)/ln(σ_max/σ_min).
func (sc Schedule) TimeOf(sigma float64) float64 {
	return sc.T * math.Log(sigma/sc.SigmaMin) / math.Log(sc.SigmaMax/sc.SigmaMin)
}

// WarmSteps fills ts and scales for K = len(ts) Euler steps from the time
// of sigma down to γ, as Steps does from T: t_k = t_s − k·Δt, Δt = (t_s −
// γ)/K. At sigma = σ_max they are Steps' own.
func (sc Schedule) WarmSteps(sigma float64, ts, scales []float32) {
	k := len(ts)
	start := sc.T
	if sigma < sc.SigmaMax {
		start = sc.TimeOf(sigma)
	}
	dt := (start - sc.Gamma) / float64(k)
	for i := range ts {
		t := start - float64(float64(i)*dt)
		ts[i] = float32(t)
		scales[i] = float32(dt * 0.5 * sc.DSigma2Dt(t))
	}
}

// SampleWarm samples one chunk for cond from the warm start w: a_0 =
// standardize(w.Actions) + w.Sigma·z, then w.Steps Euler steps to γ (and,
// unless ActionsOnly, the energy at γ and the references, as Sample). w
// nil or w.Steps 0: Sample. The sampler must have batch 1; a diffusion
// policy has no warm start (an error). It allocates only when w.Steps
// grows beyond any used before.
func (s *Sampler) SampleWarm(cond []float32, w *Warm, dst *Result) error {
	if w == nil || w.Steps == 0 {
		return s.Sample(cond, dst)
	}
	if s.batch != 1 {
		return fmt.Errorf("engines: SampleWarm needs a sampler of batch 1 (this one has %d)", s.batch)
	}
	if s.diffusion {
		return fmt.Errorf("engines: a warm start needs an energy policy's Euler steps (this bundle is %q)", s.b.Manifest.Policy)
	}
	if len(w.Actions) != s.rowLen {
		return fmt.Errorf("engines: warm start has %d actions, expected T_p×D_a = %d", len(w.Actions), s.rowLen)
	}
	if s.wsigma != w.Sigma || len(s.wts) != w.Steps { // checked and laid out once per σ and steps
		if err := CheckWarm(s.sched, w.Sigma, w.Steps); err != nil {
			return fmt.Errorf("engines: %w", err)
		}
		if cap(s.wts) < w.Steps {
			s.wts, s.wscales = make([]float32, w.Steps), make([]float32, w.Steps)
		}
		s.wts, s.wscales = s.wts[:w.Steps], s.wscales[:w.Steps]
		s.sched.WarmSteps(w.Sigma, s.wts, s.wscales)
		s.wsigma = w.Sigma
	}
	da := len(s.mean)
	for i, v := range w.Actions {
		d := i % da
		s.wx0[i] = (v - s.mean[d]) / s.std[d]
	}
	s.warming = true
	defer func() { s.warming = false }()
	return s.Sample(cond, dst)
}

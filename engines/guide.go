package engines

import (
	"fmt"
	"math"
)

// GuideMode is where a Guide's quadratic energy reads the actions being
// sampled.
type GuideMode int

const (
	// GuideOff samples without guidance.
	GuideOff GuideMode = iota
	// GuideNoisy applies the term to the noisy actions a_k:
	// ∇ = w(σ)·W ⊙ (a_k − c).
	GuideNoisy
	// GuideDenoised applies it to the denoised estimate
	// â = a_k − σ_k²·∇ₐE (Tweedie, E a negative log-density), with the
	// Jacobian of â taken as the identity: ∇ = w(σ)·W ⊙ (â − c). RTC's
	// guidance on the denoised estimate without its vector-Jacobian product,
	// which the exported graph does not offer.
	GuideDenoised
)

// String returns the mode's configuration name: "off", "noisy" or
// "denoised".
func (m GuideMode) String() string {
	switch m {
	case GuideOff:
		return "off"
	case GuideNoisy:
		return "noisy"
	case GuideDenoised:
		return "denoised"
	}
	return fmt.Sprintf("GuideMode(%d)", int(m))
}

// ParseGuideMode parses a configuration name ("" is "off").
func ParseGuideMode(s string) (GuideMode, error) {
	switch s {
	case "", "off":
		return GuideOff, nil
	case "noisy":
		return GuideNoisy, nil
	case "denoised":
		return GuideDenoised, nil
	}
	return GuideOff, fmt.Errorf("real-time chunking mode %q: want off, noisy or denoised", s)
}

// Guide constrains a plan to the actions the arm executes while the plan is
// computed (real-time chunking, issue 51): the sampler descends
//
//	E(a, s, σ) + ½·w(σ)·Σ_j W_j·‖x_j − c_j‖²,  w(σ) = Strength/σ²,
//
// with c the committed actions, W ∈ [0, 1] one weight per action of the
// prediction (1: the action certainly executes before the plan lands; less:
// the rest of the overlap, decaying; 0: free), and x the noisy actions a
// (GuideNoisy) or the denoised estimate â = a − σ²·∇ₐE (GuideDenoised,
// its Jacobian taken as the identity). The Euler step's coefficient is
// c_k = Δt·½·dσ²/dt(t_k) = κ·σ_k² with κ = Δt·ln(σ_max/σ_min)/T, so the
// term moves an action by κ·Strength·W_j times its distance per step
// whatever σ is. Per element, with p = float32(κ)·Strength·W_j in float32,
// one step reads (the Python reference's order):
//
//	GuideDenoised: a ← (a − float32(c_k·∇ₐE)) − float32(p·((a − float32(σ_k²·∇ₐE)) − c))
//	GuideNoisy:    a ← ((a − float32(c_k·∇ₐE)) + float32(p·c)) / (1 + p)
//
// GuideDenoised replaces the fraction Strength·W_j of the denoised estimate
// by c (Strength ≤ 1; at 1 a held action converges on c geometrically, by
// 1 − κ a step). GuideNoisy takes the quadratic term implicitly (a proximal
// step: stable for any Strength), so a held action settles at
// (â + Strength·c)/(1 + Strength): near c only for a large Strength. A
// diffusion policy (DDIM) gets the same through inpainting: after each step
// the weighted actions are blended toward c noised to the step's level with
// the sample's own initial noise,
// x ← x + float32(Strength·W_j)·(√ᾱ_prev·c + √(1−ᾱ_prev)·z − x) (Strength ≤ 1).
type Guide struct {
	Mode GuideMode
	// Strength is w(σ)·σ², the term's weight against the energy's: in
	// (0, 1] for GuideDenoised and for a diffusion policy, any finite
	// value above 0 for GuideNoisy.
	Strength float32
	// Actions are the committed actions, un-standardized, T_p×D_a in the
	// prediction's layout (Result.Actions); rows of weight 0 are ignored.
	Actions []float32
	// Weights has T_p values in [0, 1].
	Weights []float32
}

// Active reports whether the guide changes sampling: a mode, and some
// weight above zero.
func (g *Guide) Active() bool {
	if g == nil || g.Mode == GuideOff {
		return false
	}
	for _, w := range g.Weights {
		if w > 0 {
			return true
		}
	}
	return false
}

// Validate checks the guide against a prediction of tp actions of width
// da: the mode known, Strength as the mode allows (CheckStrength), Weights
// tp finite values in [0, 1] and Actions tp×da finite values where the
// weight is above zero.
func (g *Guide) Validate(tp, da int) error {
	if err := CheckStrength(g.Mode, float64(g.Strength)); err != nil {
		return fmt.Errorf("engines: guide: %w", err)
	}
	if len(g.Weights) != tp || len(g.Actions) != tp*da {
		return fmt.Errorf("engines: guide: %d weights and %d actions, want T_p = %d and T_p×D_a = %d", len(g.Weights), len(g.Actions), tp, tp*da)
	}
	for j, w := range g.Weights {
		if !(w >= 0 && w <= 1) {
			return fmt.Errorf("engines: guide: weight %d is %g, want a finite value in [0, 1]", j, w)
		}
		if w == 0 {
			continue
		}
		for _, v := range g.Actions[j*da : (j+1)*da] {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("engines: guide: committed action %d is not finite (%g)", j, v)
			}
		}
	}
	return nil
}

// CheckStrength checks a guide's strength for its mode: finite and above
// 0, and at most 1 for GuideDenoised (a fraction of the denoised estimate).
func CheckStrength(m GuideMode, strength float64) error {
	switch m {
	case GuideOff, GuideNoisy, GuideDenoised:
	default:
		return fmt.Errorf("unknown mode %v", m)
	}
	if !(strength > 0) || math.IsInf(strength, 0) {
		return fmt.Errorf("strength %g, want a finite value above 0", strength)
	}
	if m == GuideDenoised && strength > 1 {
		return fmt.Errorf("strength %g with mode denoised, want at most 1 (the fraction of the denoised estimate replaced)", strength)
	}
	return nil
}

// ChunkWeights fills w (T_p values) with real-time chunking's mask for a
// plan whose executed window starts at prediction index start, when the
// first overlap actions from there are committed and the first delay of
// them execute before the plan lands: weight 1 on those delay actions,
// then Physical Intelligence's exponential decay over the rest of the
// overlap, c·(e^c − 1)/(e − 1) with c = (overlap − i)/(overlap − delay + 1)
// for i = delay … overlap−1, and 0 elsewhere (the past actions before
// start and everything past the overlap). delay is clamped to [0, overlap].
func ChunkWeights(w []float32, start, delay, overlap int) {
	for j := range w {
		w[j] = 0
	}
	overlap = max(0, min(overlap, len(w)-start))
	delay = max(0, min(delay, overlap))
	for i := 0; i < overlap; i++ {
		if i < delay {
			w[start+i] = 1
			continue
		}
		c := float64(overlap-i) / float64(overlap-delay+1)
		w[start+i] = float32(c * math.Expm1(c) / (math.E - 1))
	}
}

// guideState is the sampler's standardized copy of the committed actions
// and the per-element pull of the guide in use (nil: none).
type guideState struct {
	mode GuideMode
	c    []float32 // rowLen, standardized committed actions
	// p is per element float32(κ)·Strength·W_j (energyflow) or
	// Strength·W_j (diffusion); 0: free.
	p []float32
}

// setGuide standardizes g into the sampler's guide buffers; it returns
// false when g does not change sampling.
func (s *Sampler) setGuide(g *Guide) (bool, error) {
	if !g.Active() {
		return false, nil
	}
	da := len(s.mean)
	if err := g.Validate(s.rowLen/da, da); err != nil {
		return false, err
	}
	if s.diffusion && g.Strength > 1 {
		return false, fmt.Errorf("engines: guide: strength %g on a diffusion policy, want at most 1 (inpainting blends toward the committed actions)", g.Strength)
	}
	if s.guide.c == nil {
		s.guide.c = make([]float32, s.rowLen)
		s.guide.p = make([]float32, s.rowLen)
	}
	s.guide.mode = g.Mode
	k := float32(1)
	if !s.diffusion {
		k = s.kappa
	}
	for i, v := range g.Actions {
		d, j := i%da, i/da
		w := k * g.Strength * g.Weights[j]
		s.guide.p[i] = w
		if w > 0 {
			s.guide.c[i] = (v - s.mean[d]) / s.std[d]
		} else {
			s.guide.c[i] = 0
		}
	}
	return true, nil
}

// guidedEuler is one guided Euler step on row a (rowLen values) with its
// gradient grad, step coefficient scale and σ_k² (Guide's update).
func (s *Sampler) guidedEuler(a, grad []float32, scale, sig2 float32) {
	gs := &s.guide
	for i, g := range grad {
		ai := a[i]
		step := ai - float32(scale*g)
		p := gs.p[i]
		switch {
		case p == 0:
			a[i] = step
		case gs.mode == GuideDenoised:
			r := (ai - float32(sig2*g)) - gs.c[i]
			a[i] = step - float32(p*r)
		default:
			a[i] = (step + float32(p*gs.c[i])) / (1 + p)
		}
	}
}

// inpaint blends the weighted actions of x toward the committed ones noised
// to the DDIM step's level with the initial noise z (a diffusion policy's
// guide).
func (s *Sampler) inpaint(x, z []float32, st *ddimStep) {
	gs := &s.guide
	for i, w := range gs.p {
		if w == 0 {
			continue
		}
		target := float32(st.sqAbPrev*gs.c[i]) + float32(st.sq1mAbPrev*z[i])
		x[i] += float32(w * (target - x[i]))
	}
}

// SampleGuided samples one action chunk for cond under the guide g (nil,
// or a guide with no weight above zero: Sample). The sampler must have
// Batch 1, and integrate on the host: a fused session runs its Euler steps
// on the device, where the guide cannot act.
func (s *Sampler) SampleGuided(cond []float32, g *Guide, dst *Result) error {
	if s.batch != 1 {
		return fmt.Errorf("engines: SampleGuided needs a sampler of batch 1 (this one has %d)", s.batch)
	}
	on, err := s.setGuide(g)
	if err != nil {
		return err
	}
	if !on {
		return s.Sample(cond, dst)
	}
	if s.fused != nil {
		return fmt.Errorf("engines: guided sampling needs the per-step session; this one integrates on the device (fused): turn real-time chunking off or build the engine without the fused sampler")
	}
	s.guiding = true
	defer func() { s.guiding = false }()
	return s.Sample(cond, dst)
}

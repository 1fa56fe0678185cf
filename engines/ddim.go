package engines

import (
	"fmt"
	"math"
)

// ddimStep is one DDIM step: the timestep fed to the graph and the four
// scalars of the update, computed in float64 from the float64 ᾱ table and
// rounded to float32 (the reference's convention).
type ddimStep struct {
	t          float32 // DDPM timestep as the graph's t input
	sqAb       float32 // sqrt(ᾱ_t)
	sq1mAb     float32 // sqrt(1 − ᾱ_t)
	sqAbPrev   float32 // sqrt(ᾱ_prev), ᾱ_prev = 1 past the first timestep
	sq1mAbPrev float32 // sqrt(1 − ᾱ_prev)
}

// ddimSteps fills steps for S = len(steps) DDIM steps over the N training
// timesteps of a "ddpm" schedule, as diffusers' DDIMScheduler does with
// "leading" spacing and set_alpha_to_one: step_ratio = N / S (integer
// division), t_j = (S−1−j)·step_ratio, ᾱ_prev = ᾱ[t − step_ratio] or 1
// when t − step_ratio < 0. 1 ≤ S ≤ N.
func (sc Schedule) ddimSteps(steps []ddimStep) {
	n, s := sc.NumTrainTimesteps, len(steps)
	ratio := n / s
	for j := range steps {
		t := (s - 1 - j) * ratio
		ab, abPrev := sc.AlphasCumprod[t], 1.0
		if t-ratio >= 0 {
			abPrev = sc.AlphasCumprod[t-ratio]
		}
		steps[j] = ddimStep{
			t:          float32(t),
			sqAb:       float32(math.Sqrt(ab)),
			sq1mAb:     float32(math.Sqrt(1 - ab)),
			sqAbPrev:   float32(math.Sqrt(abPrev)),
			sq1mAbPrev: float32(math.Sqrt(1 - abPrev)),
		}
	}
}

// setDDIMSteps is SetSteps for a diffusion policy.
func (s *Sampler) setDDIMSteps(n int) error {
	if nt := s.sched.NumTrainTimesteps; n < 1 || n > nt {
		return fmt.Errorf("engines: sampler steps %d, expected S in 1..%d (the bundle's schedule.num_train_timesteps)", n, nt)
	}
	if cap(s.ddim) < n {
		s.ddim = make([]ddimStep, n)
	}
	s.ddim = s.ddim[:n]
	s.sched.ddimSteps(s.ddim)
	s.steps = n
	return nil
}

// runDDIM samples the batch from x = z with S calls of the eps graph. The
// sample is left in s.a.
func (s *Sampler) runDDIM(cond, z []float32) error {
	x, c, t := s.stepIn[0], s.stepIn[1], s.stepIn[2]
	eps := s.stepOut[0]
	copy(c, cond)
	copy(x, z)
	for j := range s.ddim {
		st := &s.ddim[j]
		fill(t, st.t)
		if err := s.runStep(); err != nil {
			return fmt.Errorf("engines: DDIM step %d of %d (t=%v): %w", j, len(s.ddim), st.t, err)
		}
		ddimUpdate(x, eps, st, s.clip)
		if s.guiding {
			s.inpaint(x, z, st)
		}
	}
	copy(s.a, x)
	return nil
}

// ddimUpdate is one deterministic DDIM step (eta = 0) on x in place, all in
// float32 in this order:
//
//	x0  = (x − sqrt(1−ᾱ_t)·eps) / sqrt(ᾱ_t)
//	if clip > 0: x0 = clamp(x0, −clip, clip); eps = (x − sqrt(ᾱ_t)·x0) / sqrt(1−ᾱ_t)
//	x   = sqrt(ᾱ_prev)·x0 + sqrt(1−ᾱ_prev)·eps
//
// The explicit float32 conversions keep the compiler from fusing a
// multiply and an add (FMA, e.g. on arm64), so every platform rounds like
// the reference. NaN propagates (min and max return NaN for a NaN).
func ddimUpdate(x, eps []float32, st *ddimStep, clip float32) {
	for i, e := range eps {
		xi := x[i]
		x0 := (xi - float32(st.sq1mAb*e)) / st.sqAb
		if clip > 0 {
			x0 = min(max(x0, -clip), clip)
			// ᾱ_t = 1 (hence ᾱ_prev = 1): the re-derived eps would be 0/0 and
			// is multiplied by sqrt(1−ᾱ_prev) = 0; keep the predicted one.
			if st.sq1mAb > 0 {
				e = (xi - float32(st.sqAb*x0)) / st.sq1mAb
			}
		}
		x[i] = float32(st.sqAbPrev*x0) + float32(st.sq1mAbPrev*e)
	}
}

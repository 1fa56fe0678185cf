package engines_test

import (
	"math"
	"strings"
	"testing"

	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/engines/enginestest"
)

// refWarm is SampleWarm in float64 on the analytic bundle (E = ½(1+t)‖a−μ‖²):
// from the standardized plan noised to sigma, steps Euler steps from the
// time of sigma to γ.
func refWarm(m *engines.Manifest, cond, z, plan []float64, sigma float64, steps int) []float64 {
	mu := quadMean(cond, len(z))
	sc := m.Schedule
	da := m.ActionDim
	a := make([]float64, len(z))
	for i := range a {
		a[i] = (plan[i]-float64(m.ActionNorm.Mean[i%da]))/float64(m.ActionNorm.Std[i%da]) + sigma*z[i]
	}
	start := sc.T * math.Log(sigma/sc.SigmaMin) / math.Log(sc.SigmaMax/sc.SigmaMin)
	dt := (start - sc.Gamma) / float64(steps)
	for s := 0; s < steps; s++ {
		t := start - float64(s)*dt
		scale := dt * 0.5 * sc.DSigma2Dt(t)
		for i := range a {
			a[i] -= scale * (1 + t) * (a[i] - mu[i])
		}
	}
	out := make([]float64, len(a))
	for i := range a {
		out[i] = a[i]*float64(m.ActionNorm.Std[i%da]) + float64(m.ActionNorm.Mean[i%da])
	}
	return out
}

func TestSampleWarmMatchesReference(t *testing.T) {
	b := loadQuad(t)
	plan := make([]float32, quadTp*quadDa)
	for i := range plan {
		plan[i] = float32(0.5 - 0.1*float64(i))
	}
	for name, be := range map[string]engines.Backend{"go": &enginestest.Backend{}, "ort": newORT(t)} {
		for _, tc := range []struct {
			sigma float64
			steps int
		}{{1, 4}, {0.3, 2}, {b.Manifest.Schedule.SigmaMax, 10}} {
			cond, z := testInputs(5)
			s, err := engines.NewSampler(b, be, engines.SamplerOptions{Steps: 10, Noise: fixedNoise(z), NoReferences: true})
			if err != nil {
				t.Fatal(err)
			}
			var res engines.Result
			if err := s.SampleWarm(cond, &engines.Warm{Actions: plan, Sigma: tc.sigma, Steps: tc.steps}, &res); err != nil {
				t.Fatal(err)
			}
			want := refWarm(&b.Manifest, to64(cond), to64(z), to64(plan), tc.sigma, tc.steps)
			for i, w := range want {
				if d := math.Abs(float64(res.Actions[i]) - w); d > 1e-4*math.Max(1, math.Abs(w)) {
					t.Errorf("%s σ=%g steps %d: action[%d] = %v, float64 reference %v", name, tc.sigma, tc.steps, i, res.Actions[i], w)
				}
			}
			if c := s.Stats().BackendCalls; c != int64(tc.steps)+1 {
				t.Errorf("%s σ=%g: %d backend calls, want the %d steps and the energy at γ", name, tc.sigma, c, tc.steps)
			}
			s.Close()
		}
	}
}

// At σ_max, from the action mean (standardized 0) and with K steps, a warm
// start is the cold sample, bit for bit; nil is Sample.
func TestSampleWarmAtSigmaMaxIsSample(t *testing.T) {
	b := loadQuad(t)
	m := &b.Manifest
	mean := make([]float32, quadTp*quadDa)
	for i := range mean {
		mean[i] = m.ActionNorm.Mean[i%quadDa]
	}
	cond, z := testInputs(2)
	var cold, warm, none engines.Result
	for _, r := range []struct {
		w   *engines.Warm
		dst *engines.Result
	}{{nil, &none}, {&engines.Warm{Actions: mean, Sigma: m.Schedule.SigmaMax, Steps: 10}, &warm}} {
		s, err := engines.NewSampler(b, &enginestest.Backend{}, engines.SamplerOptions{Steps: 10, Noise: fixedNoise(z)})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SampleWarm(cond, r.w, r.dst); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	s, _ := engines.NewSampler(b, &enginestest.Backend{}, engines.SamplerOptions{Steps: 10, Noise: fixedNoise(z)})
	defer s.Close()
	if err := s.Sample(cond, &cold); err != nil {
		t.Fatal(err)
	}
	for i := range cold.Actions {
		if warm.Actions[i] != cold.Actions[i] || none.Actions[i] != cold.Actions[i] {
			t.Fatalf("action[%d]: warm at σ_max %v, nil warm %v, cold %v", i, warm.Actions[i], none.Actions[i], cold.Actions[i])
		}
	}
}

// A σ outside the schedule, no steps, or a plan of the wrong size: refused
// in one line, nothing sampled.
func TestSampleWarmRefusals(t *testing.T) {
	b := loadQuad(t)
	sc := b.Manifest.Schedule
	plan := make([]float32, quadTp*quadDa)
	s, err := engines.NewSampler(b, &enginestest.Backend{}, engines.SamplerOptions{Steps: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cond, _ := testInputs(1)
	for _, tc := range []struct {
		name string
		w    engines.Warm
		want string
	}{
		{"above σ_max", engines.Warm{Actions: plan, Sigma: 2 * sc.SigmaMax, Steps: 3}, "outside the schedule"},
		{"at σ(γ)", engines.Warm{Actions: plan, Sigma: sc.Sigma(sc.Gamma), Steps: 3}, "outside the schedule"},
		{"NaN", engines.Warm{Actions: plan, Sigma: math.NaN(), Steps: 3}, "outside the schedule"},
		{"negative steps", engines.Warm{Actions: plan, Sigma: 1, Steps: -1}, "steps -1"},
		{"short plan", engines.Warm{Actions: plan[:3], Sigma: 1, Steps: 3}, "expected T_p×D_a"},
	} {
		var res engines.Result
		err := s.SampleWarm(cond, &tc.w, &res)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line with %q", tc.name, err, tc.want)
		}
	}
	if n := s.Stats().Samples; n != 0 {
		t.Errorf("%d samples drawn by refused calls", n)
	}
}

package engines_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/engines/enginestest"
)

// fixedNoise hands out the same z on every call.
type fixedNoise []float32

func (f fixedNoise) Normal(z []float32) { copy(z, f) }

// refGuided is guided Algorithm 2 on the analytic energy in float64: the
// update of engines.Guide's doc, with c and the strength.
func refGuided(m *engines.Manifest, cond, z []float64, k int, mode engines.GuideMode, strength float64, c []float64, w []float64) []float64 {
	mu := quadMean(cond, len(z))
	sc := m.Schedule
	da := m.ActionDim
	cs := make([]float64, len(c)) // standardized committed actions
	for i := range c {
		cs[i] = (c[i] - float64(m.ActionNorm.Mean[i%da])) / float64(m.ActionNorm.Std[i%da])
	}
	a := make([]float64, len(z))
	for i := range a {
		a[i] = sc.SigmaMax * z[i]
	}
	dt := (sc.T - sc.Gamma) / float64(k)
	kappa := dt * math.Log(sc.SigmaMax/sc.SigmaMin) / sc.T
	for s := 0; s < k; s++ {
		t := sc.T - float64(s)*dt
		sigma := sc.Sigma(t)
		scale := dt * 0.5 * sc.DSigma2Dt(t)
		for i := range a {
			g := (1 + t) * (a[i] - mu[i])
			p := kappa * strength * w[i/da]
			if mode == engines.GuideDenoised {
				a[i] = a[i] - scale*g - p*(a[i]-sigma*sigma*g-cs[i])
			} else {
				a[i] = (a[i] - scale*g + p*cs[i]) / (1 + p)
			}
		}
	}
	out := make([]float64, len(a))
	for i := range a {
		out[i] = a[i]*float64(m.ActionNorm.Std[i%da]) + float64(m.ActionNorm.Mean[i%da])
	}
	return out
}

// quadGuide is a guide on the analytic bundle: committed actions far from
// the energy's minimum, weight 1 on the first two actions, 0.5 on the
// third, 0 on the last.
func quadGuide(mode engines.GuideMode, strength float32) *engines.Guide {
	g := &engines.Guide{Mode: mode, Strength: strength, Actions: make([]float32, quadTp*quadDa), Weights: []float32{1, 1, 0.5, 0}}
	for i := range g.Actions {
		g.Actions[i] = float32(3 + 0.25*float64(i))
	}
	return g
}

func TestSampleGuidedMatchesReference(t *testing.T) {
	b := loadQuad(t)
	for name, be := range map[string]engines.Backend{"go": &enginestest.Backend{}, "ort": newORT(t)} {
		for _, mode := range []engines.GuideMode{engines.GuideNoisy, engines.GuideDenoised} {
			for _, tc := range []struct {
				k        int
				strength float32
			}{{10, 1}, {20, 0.3}, {10, 20}} {
				if mode == engines.GuideDenoised && tc.strength > 1 {
					continue
				}
				cond, z := testInputs(3)
				s, err := engines.NewSampler(b, be, engines.SamplerOptions{Steps: tc.k, Noise: fixedNoise(z), NoReferences: true})
				if err != nil {
					t.Fatal(err)
				}
				g := quadGuide(mode, tc.strength)
				var res engines.Result
				if err := s.SampleGuided(cond, g, &res); err != nil {
					t.Fatal(err)
				}
				want := refGuided(&b.Manifest, to64(cond), to64(z), tc.k, mode, float64(tc.strength), to64(g.Actions), to64(g.Weights))
				for i, w := range want {
					if d := math.Abs(float64(res.Actions[i]) - w); d > 1e-4*math.Max(1, math.Abs(w)) {
						t.Errorf("%s %v K=%d strength %g: action[%d] = %v, float64 reference %v", name, mode, tc.k, tc.strength, i, res.Actions[i], w)
					}
				}
				// Denoised at strength 1 holds the weight-1 actions on the
				// committed ones; noisy at strength 20 within 1/21 of the
				// distance to the energy's minimum.
				if tc.strength == 1 && mode == engines.GuideDenoised || tc.strength == 20 {
					for i := 0; i < 2*quadDa; i++ {
						if d := math.Abs(float64(res.Actions[i] - g.Actions[i])); d > 0.05*math.Abs(float64(g.Actions[i])) {
							t.Errorf("%s %v strength %g: held action[%d] = %v, committed %v", name, mode, tc.strength, i, res.Actions[i], g.Actions[i])
						}
					}
				}
				s.Close()
			}
		}
	}
}

// An inactive guide (nil, mode off, all weights 0) samples exactly as Sample.
func TestSampleGuidedInactiveIsSample(t *testing.T) {
	b := loadQuad(t)
	cond, z := testInputs(1)
	s, err := engines.NewSampler(b, &enginestest.Backend{}, engines.SamplerOptions{Noise: fixedNoise(z)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var want, got engines.Result
	if err := s.Sample(cond, &want); err != nil {
		t.Fatal(err)
	}
	off := quadGuide(engines.GuideOff, 1)
	zero := quadGuide(engines.GuideNoisy, 1)
	zero.Weights = make([]float32, quadTp)
	for name, g := range map[string]*engines.Guide{"nil": nil, "off": off, "zero weights": zero} {
		if err := s.SampleGuided(cond, g, &got); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Actions, want.Actions) || got.Energy != want.Energy {
			t.Errorf("%s: guided %v, Sample %v", name, got.Actions, want.Actions)
		}
	}
	// A guided sample leaves no trace on the next unguided one.
	if err := s.SampleGuided(cond, quadGuide(engines.GuideNoisy, 1), &got); err != nil {
		t.Fatal(err)
	}
	if err := s.Sample(cond, &got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Actions, want.Actions) {
		t.Errorf("Sample after a guided sample: %v, want %v", got.Actions, want.Actions)
	}
}

func TestSampleGuidedRefusals(t *testing.T) {
	b := loadQuad(t)
	cond, _ := testInputs(0)
	fused, err := engines.NewSampler(b, &enginestest.Backend{Fused: true}, engines.SamplerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer fused.Close()
	var res engines.Result
	if err := fused.SampleGuided(cond, quadGuide(engines.GuideNoisy, 1), &res); err == nil || !strings.Contains(err.Error(), "fused") {
		t.Errorf("fused sampler: err %v, want a refusal naming the fused session", err)
	}
	s, err := engines.NewSampler(b, &enginestest.Backend{}, engines.SamplerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nan := float32(math.NaN())
	for _, tc := range []struct {
		name string
		mut  func(g *engines.Guide)
		want string
	}{
		{"negative weight", func(g *engines.Guide) { g.Weights[1] = -0.5 }, "weight 1 is -0.5"},
		{"weight NaN", func(g *engines.Guide) { g.Weights[2] = nan }, "weight 2 is NaN"},
		{"weight above 1", func(g *engines.Guide) { g.Weights[0] = 2 }, "weight 0 is 2"},
		{"strength 0", func(g *engines.Guide) { g.Strength = 0 }, "strength 0"},
		{"strength NaN", func(g *engines.Guide) { g.Strength = nan }, "strength NaN"},
		{"strength infinite", func(g *engines.Guide) { g.Strength = float32(math.Inf(1)) }, "strength +Inf"},
		{"denoised strength above 1", func(g *engines.Guide) { g.Mode, g.Strength = engines.GuideDenoised, 1.5 }, "strength 1.5 with mode denoised"},
		{"short weights", func(g *engines.Guide) { g.Weights = g.Weights[:3] }, "3 weights"},
		{"committed action NaN", func(g *engines.Guide) { g.Actions[4] = nan }, "committed action 1 is not finite"},
	} {
		g := quadGuide(engines.GuideNoisy, 1)
		tc.mut(g)
		err := s.SampleGuided(cond, g, &res)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	// A NaN committed action where the weight is 0 is ignored.
	g := quadGuide(engines.GuideNoisy, 1)
	g.Actions[quadTp*quadDa-1] = nan
	if err := s.SampleGuided(cond, g, &res); err != nil {
		t.Errorf("NaN under weight 0: %v", err)
	}
}

func TestChunkWeights(t *testing.T) {
	decay := func(overlap, delay, i int) float32 {
		c := float64(overlap-i) / float64(overlap-delay+1)
		return float32(c * (math.Exp(c) - 1) / (math.E - 1))
	}
	for _, tc := range []struct {
		name                  string
		tp, start, delay, ovl int
		want                  []float32
	}{
		{"hard prefix then decay", 8, 1, 2, 5, []float32{0, 1, 1, decay(5, 2, 2), decay(5, 2, 3), decay(5, 2, 4), 0, 0}},
		{"delay over the overlap is the overlap", 6, 1, 9, 3, []float32{0, 1, 1, 1, 0, 0}},
		{"no delay", 4, 0, 0, 2, []float32{decay(2, 0, 0), decay(2, 0, 1), 0, 0}},
		{"overlap past the end is cut", 4, 2, 1, 10, []float32{0, 0, 1, decay(2, 1, 1)}},
		{"nothing committed", 4, 1, 2, 0, []float32{0, 0, 0, 0}},
	} {
		w := make([]float32, tc.tp)
		for i := range w {
			w[i] = 7 // overwritten
		}
		engines.ChunkWeights(w, tc.start, tc.delay, tc.ovl)
		for i := range w {
			if math.Abs(float64(w[i]-tc.want[i])) > 1e-7 {
				t.Errorf("%s: weights %v, want %v", tc.name, w, tc.want)
				break
			}
		}
		for i := 1; i < len(w); i++ {
			if w[i] > w[i-1] && w[i-1] != 0 {
				t.Errorf("%s: weights rise at %d: %v", tc.name, i, w)
			}
		}
	}
}

func TestParseGuideMode(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want engines.GuideMode
		err  bool
	}{{"", engines.GuideOff, false}, {"off", engines.GuideOff, false}, {"noisy", engines.GuideNoisy, false},
		{"denoised", engines.GuideDenoised, false}, {"Noisy", engines.GuideOff, true}, {"on", engines.GuideOff, true}} {
		got, err := engines.ParseGuideMode(tc.in)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("ParseGuideMode(%q) = %v, %v", tc.in, got, err)
		}
		if err == nil && tc.in != "" && got.String() != tc.in {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
}

// A diffusion policy inpaints: at pull 1 the held actions end exactly on
// the committed ones (the last DDIM step has ᾱ_prev = 1), at pull 0.5 part
// of the way, and the free action differs from the committed one.
func TestSampleGuidedInpaintsDDIM(t *testing.T) {
	b := loadDDIM(t, setClip(0))
	cond, z := testInputs(2)
	for _, strength := range []float32{1, 0.5} {
		s, err := engines.NewSampler(b, newORT(t), engines.SamplerOptions{Noise: fixedNoise(z)})
		if err != nil {
			t.Fatal(err)
		}
		var free, got engines.Result
		if err := s.Sample(cond, &free); err != nil {
			t.Fatal(err)
		}
		g := quadGuide(engines.GuideNoisy, strength)
		if err := s.SampleGuided(cond, g, &got); err != nil {
			t.Fatal(err)
		}
		for i := range got.Actions {
			d := math.Abs(float64(got.Actions[i] - g.Actions[i]))
			d0 := math.Abs(float64(free.Actions[i] - g.Actions[i]))
			switch j := i / quadDa; {
			case g.Weights[j] == 1 && strength == 1 && d > 1e-5:
				t.Errorf("strength 1: held action[%d] = %v, committed %v", i, got.Actions[i], g.Actions[i])
			case g.Weights[j] > 0 && !(d < d0):
				t.Errorf("strength %g: held action[%d] %v is no closer to %v than unguided %v", strength, i, got.Actions[i], g.Actions[i], free.Actions[i])
			case g.Weights[j] == 0 && d < 1e-3:
				t.Errorf("strength %g: free action[%d] = %v sits on the committed one", strength, i, got.Actions[i])
			}
		}
		s.Close()
	}
	s, err := engines.NewSampler(b, newORT(t), engines.SamplerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var res engines.Result
	if err := s.SampleGuided(cond, quadGuide(engines.GuideNoisy, 2), &res); err == nil || !strings.Contains(err.Error(), "diffusion") {
		t.Errorf("strength 2 on DDIM: err %v, want a refusal", err)
	}
}

// A planner's sampler (ActionsOnly) returns the same actions from the same
// noise with one backend call fewer per sample (no energy at γ, no
// references) and NaN energies; Score still scores.
func TestSamplerActionsOnly(t *testing.T) {
	b := loadQuad(t)
	for name, be := range map[string]engines.Backend{"go": &enginestest.Backend{}, "ort": newORT(t)} {
		t.Run(name, func(t *testing.T) {
			cond, z := testInputs(3)
			full, err := engines.NewSampler(b, be, engines.SamplerOptions{Steps: 10, Noise: fixedNoise(z)})
			if err != nil {
				t.Fatal(err)
			}
			defer full.Close()
			plan, err := engines.NewSampler(b, be, engines.SamplerOptions{Steps: 10, Noise: fixedNoise(z), ActionsOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer plan.Close()
			var want, got engines.Result
			if err := full.Sample(cond, &want); err != nil {
				t.Fatal(err)
			}
			if err := plan.Sample(cond, &got); err != nil {
				t.Fatal(err)
			}
			for i := range want.Actions {
				if got.Actions[i] != want.Actions[i] {
					t.Fatalf("action[%d] = %v, full sampler %v", i, got.Actions[i], want.Actions[i])
				}
			}
			if sc := got.Score; !math.IsNaN(float64(sc.Energy)) || !math.IsNaN(float64(sc.CenteredEnergy)) {
				t.Errorf("planner score %+v, want NaN energies", sc)
			}
			if f, p := full.Stats().BackendCalls, plan.Stats().BackendCalls; p != 10 || f <= p {
				t.Errorf("backend calls: planner %d (want the 10 steps), full sampler %d", p, f)
			}
			sc, err := plan.Score(want.Actions, cond)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(float64(sc.Energy-want.Score.Energy)) > 1e-5*math.Max(1, math.Abs(float64(want.Score.Energy))) {
				t.Errorf("planner's Score energy %v, full sampler's sample energy %v", sc.Energy, want.Score.Energy)
			}
		})
	}
}

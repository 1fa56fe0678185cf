package engines_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/energyflow/edge/engines"
)

// ddimOracle is engines/testdata/ddim/oracle.json: the parameters of the
// analytic noise-prediction graph eps.onnx (gen.py beside it). Data ~
// N(mu, s²) per element, mu = mu0 + reshape(cond · W).
type ddimOracle struct {
	N             int         `json:"num_train_timesteps"`
	AlphasCumprod []float64   `json:"alphas_cumprod"`
	Mu0           []float64   `json:"mu0"`
	S             []float64   `json:"s"`
	W             [][]float64 `json:"W"`
}

func loadOracle(t testing.TB) *ddimOracle {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "ddim", "oracle.json"))
	if err != nil {
		t.Fatalf("read oracle: %v (regenerate with .venv/bin/python engines/testdata/ddim/gen.py)", err)
	}
	var o ddimOracle
	if err := json.Unmarshal(data, &o); err != nil {
		t.Fatalf("oracle.json: %v", err)
	}
	return &o
}

// mu returns the oracle's data mean for one row's cond.
func (o *ddimOracle) mu(cond []float64) []float64 {
	mu := append([]float64(nil), o.Mu0...)
	for j := range mu {
		for i, c := range cond {
			mu[j] += c * o.W[i][j]
		}
	}
	return mu
}

// ddimManifest is a diffusion bundle with the quad bundle's shapes (T_p 4,
// D_a 3, state 2, T_o 2) around the oracle graph.
func ddimManifest(o *ddimOracle) map[string]any {
	m := quadManifest()
	m["policy"] = "diffusion"
	m["name"] = "ddim-oracle-test"
	m["schedule"] = map[string]any{"kind": "ddpm", "num_train_timesteps": o.N, "beta_schedule": "squaredcos_cap_v2",
		"prediction_type": "epsilon", "clip_sample": 0.0, "alphas_cumprod": o.AlphasCumprod}
	m["sampler"] = map[string]any{"kind": "ddim", "steps": 10}
	m["graphs"] = map[string]any{"eps": map[string]any{"file": "eps.onnx",
		"inputs":  []any{map[string]any{"name": "a_t", "shape": []int{-1, quadTp, quadDa}}, map[string]any{"name": "cond", "shape": []int{-1, quadCond}}, map[string]any{"name": "t", "shape": []int{-1}}},
		"outputs": []any{map[string]any{"name": "eps", "shape": []int{-1, quadTp, quadDa}}}}}
	m["calibration"] = nil
	m["model"] = map[string]any{"kind": "analytic Gaussian eps oracle"}
	return m
}

// writeDDIMBundle writes the oracle bundle; mutate may change the manifest.
func writeDDIMBundle(t testing.TB, mutate func(m map[string]any)) string {
	t.Helper()
	onnx, err := os.ReadFile(filepath.Join("testdata", "ddim", "eps.onnx"))
	if err != nil {
		t.Fatalf("read test graph: %v (regenerate with .venv/bin/python engines/testdata/ddim/gen.py)", err)
	}
	m := ddimManifest(loadOracle(t))
	m["files"] = map[string]any{"eps.onnx": sha256hex(onnx)}
	if mutate != nil {
		mutate(m)
	}
	return writeBundleDir(t, map[string][]byte{"eps.onnx": onnx}, m)
}

func loadDDIM(t testing.TB, mutate func(m map[string]any)) *engines.Bundle {
	t.Helper()
	b, err := engines.LoadBundle(writeDDIMBundle(t, mutate))
	if err != nil {
		t.Fatalf("LoadBundle: %v", err)
	}
	return b
}

func setClip(c float64) func(m map[string]any) {
	return func(m map[string]any) { m["schedule"].(map[string]any)["clip_sample"] = c }
}

// refDDIM is an independent float64 DDIM (eta 0, "leading" spacing,
// set_alpha_to_one) on the oracle's exact eps: the test's ground truth for
// one row.
func refDDIM(o *ddimOracle, steps int, clip float64, cond, z []float64) []float64 {
	mu := o.mu(cond)
	x := append([]float64(nil), z...)
	ratio := o.N / steps
	for j := 0; j < steps; j++ {
		t := (steps - 1 - j) * ratio
		ab := o.AlphasCumprod[t]
		abPrev := 1.0
		if t-ratio >= 0 {
			abPrev = o.AlphasCumprod[t-ratio]
		}
		for i := range x {
			s2 := o.S[i] * o.S[i]
			eps := (x[i] - math.Sqrt(ab)*mu[i]) * math.Sqrt(1-ab) / (ab*s2 + 1 - ab)
			x0 := (x[i] - math.Sqrt(1-ab)*eps) / math.Sqrt(ab)
			if clip > 0 {
				x0 = math.Max(-clip, math.Min(clip, x0))
				eps = (x[i] - math.Sqrt(ab)*x0) / math.Sqrt(1-ab)
			}
			x[i] = math.Sqrt(abPrev)*x0 + math.Sqrt(1-abPrev)*eps
		}
	}
	return x
}

// ddimAffine returns the exact distribution DDIM gives on Gaussian data
// from x = z ~ N(0, 1) with the exact eps (no clipping): the update is
// affine in x, so the result is N(m, g²). DDIM is a discretization: m and g
// approach mu and s only as S grows (for s ≠ 1 the variance shrinks a
// little each step, by Cauchy–Schwarz).
func ddimAffine(o *ddimOracle, steps int, mu, s float64) (m, g float64) {
	g = 1
	ratio := o.N / steps
	for j := 0; j < steps; j++ {
		t := (steps - 1 - j) * ratio
		ab := o.AlphasCumprod[t]
		abPrev := 1.0
		if t-ratio >= 0 {
			abPrev = o.AlphasCumprod[t-ratio]
		}
		v := ab*s*s + 1 - ab
		k := (math.Sqrt(abPrev*ab)*s*s + math.Sqrt((1-abPrev)*(1-ab))) / v
		m = math.Sqrt(abPrev)*mu + (m-math.Sqrt(ab)*mu)*k
		g *= k
	}
	return m, g
}

func TestLoadDiffusionBundle(t *testing.T) {
	b := loadDDIM(t, nil)
	m := &b.Manifest
	if m.Policy != engines.PolicyDiffusion || m.HasEnergy() || m.PolicyGraph() != engines.GraphEps {
		t.Fatalf("policy %q HasEnergy %v graph %q", m.Policy, m.HasEnergy(), m.PolicyGraph())
	}
	if m.Schedule.NumTrainTimesteps != 100 || len(m.Schedule.AlphasCumprod) != 100 || m.Sampler.Kind != "ddim" || m.Sampler.Steps != 10 {
		t.Fatalf("schedule %+v sampler %+v", m.Schedule, m.Sampler)
	}
	spec, err := b.GraphSpec(engines.GraphEps, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Inputs) != 3 || spec.Inputs[2].Name != "t" || len(spec.Outputs) != 1 || spec.Outputs[0].Name != "eps" {
		t.Fatalf("GraphSpec = %+v", spec)
	}
}

func TestLoadDiffusionBundleRefuses(t *testing.T) {
	sched := func(key string, v any) func(m map[string]any) {
		return func(m map[string]any) { m["schedule"].(map[string]any)[key] = v }
	}
	ab := func(edit func(ab []float64)) func(m map[string]any) {
		return func(m map[string]any) {
			s := m["schedule"].(map[string]any)
			a := append([]float64(nil), s["alphas_cumprod"].([]float64)...)
			edit(a)
			s["alphas_cumprod"] = a
		}
	}
	eps := func(m map[string]any) map[string]any { return m["graphs"].(map[string]any)["eps"].(map[string]any) }
	tests := []struct {
		name   string
		mutate func(map[string]any)
		want   []string // substrings of the error
	}{
		{"unknown policy", func(m map[string]any) { m["policy"] = "ppo" }, []string{`"policy"`, `"energyflow" or "diffusion"`}},
		{"schedule kind", sched("kind", "geometric"), []string{`"schedule.kind"`, `"ddpm"`}},
		{"N zero", sched("num_train_timesteps", 0), []string{`"schedule.num_train_timesteps"`, "N ≥ 1"}},
		{"table length", func(m map[string]any) {
			s := m["schedule"].(map[string]any)
			s["alphas_cumprod"] = s["alphas_cumprod"].([]float64)[:99]
		}, []string{`"schedule.alphas_cumprod"`, "has 99 values, expected num_train_timesteps = 100"}},
		{"alpha zero", ab(func(a []float64) { a[3] = 0 }), []string{`"schedule.alphas_cumprod[3]"`, "(0, 1]"}},
		{"alpha above one", ab(func(a []float64) { a[0] = 1.5 }), []string{`"schedule.alphas_cumprod[0]"`, "(0, 1]"}},
		{"alpha increasing", ab(func(a []float64) { a[10] = a[9] + 1e-3 }), []string{`"schedule.alphas_cumprod[10]"`, "non-increasing"}},
		{"prediction type", sched("prediction_type", "v_prediction"), []string{`"schedule.prediction_type"`, `"epsilon"`}},
		{"clip negative", sched("clip_sample", -1.0), []string{`"schedule.clip_sample"`, "≥ 0"}},
		{"clip bool", sched("clip_sample", true), []string{"clip_sample", "expected float64"}},
		{"sampler kind missing", func(m map[string]any) { m["sampler"] = map[string]any{"steps": 10} }, []string{`"sampler.kind"`, `"ddim"`}},
		{"sampler steps zero", func(m map[string]any) { m["sampler"] = map[string]any{"kind": "ddim", "steps": 0} }, []string{`"sampler.steps"`, "1..num_train_timesteps (100)"}},
		{"sampler steps above N", func(m map[string]any) { m["sampler"] = map[string]any{"kind": "ddim", "steps": 101} }, []string{`"sampler.steps"`, "1..num_train_timesteps (100)"}},
		{"sampler warm start", func(m map[string]any) {
			m["sampler"] = map[string]any{"kind": "ddim", "steps": 10, "warm_start": map[string]any{"sigma": 1, "steps": 5}}
		}, []string{`"sampler.warm_start"`, "absent for policy \"diffusion\""}},
		{"calibration", func(m map[string]any) {
			m["calibration"] = map[string]any{"recommended": map[string]any{"score": "energy", "threshold": 1}}
		}, []string{`"calibration"`, "no energy"}},
		{"energy graph instead of eps", func(m map[string]any) {
			g := m["graphs"].(map[string]any)
			g["energy_grad"] = g["eps"]
			delete(g, "eps")
		}, []string{`"graphs"`, `no "eps" entry`, `"graphs.energy_grad"`, `has no "energy_grad" graph`}},
		{"eps output shape", func(m map[string]any) {
			eps(m)["outputs"] = []any{map[string]any{"name": "eps", "shape": []int{-1, quadTp}}}
		}, []string{`"graphs.eps.outputs[0].shape"`, "[-1 4 3]"}},
		{"eps output name", func(m map[string]any) {
			eps(m)["outputs"] = []any{map[string]any{"name": "grad_a", "shape": []int{-1, quadTp, quadDa}}}
		}, []string{`"graphs.eps.outputs"`, `no tensor "eps"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := engines.LoadBundle(writeDDIMBundle(t, tc.mutate))
			if err == nil {
				t.Fatal("LoadBundle accepted a broken bundle")
			}
			for _, w := range append(tc.want, "manifest.json") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\n does not mention %q", err, w)
				}
			}
			var fe *engines.FieldError
			if !errors.As(err, &fe) {
				t.Errorf("error %v is not a *FieldError", err)
			}
		})
	}
}

// TestDDIMMatchesReference checks every row of batched DDIM samples on ONNX
// Runtime against an independent float64 DDIM on the exact eps, for several
// S (1: a single step from t=0; 7: step ratio 14 leaves t=98, 99 unused;
// 100: every timestep), with and without clip_sample, each row with its own
// cond. The tolerance 5e-5 (standardized units, relative above 1) covers
// float32 against float64: the first step of S=100 divides by
// sqrt(ᾱ_99) = 4.9e-4, which turns the float32 rounding of x (6e-8) into
// up to ~1.2e-4 in x0, but the same step multiplies x0 by
// sqrt(ᾱ_98) = 0.016, leaving ~2e-6 in x; later steps are better
// conditioned. Measured: at most 5e-6 (S=100), 7e-7 (S=20); logged.
func TestDDIMMatchesReference(t *testing.T) {
	o := loadOracle(t)
	be := newORT(t)
	const batch = 8
	rng := rand.New(rand.NewPCG(1, 2))
	cond := make([]float32, batch*quadCond)
	z := make([]float32, batch*quadTp*quadDa)
	for i := range cond {
		cond[i] = float32(2*rng.Float64() - 1)
	}
	for i := range z {
		z[i] = float32(rng.NormFloat64())
	}
	for _, clip := range []float64{0, 1} {
		b := loadDDIM(t, setClip(clip))
		m := &b.Manifest
		s, err := engines.NewSampler(b, be, engines.SamplerOptions{Batch: batch})
		if err != nil {
			t.Fatal(err)
		}
		if s.HasEnergy() || s.Fused() || s.Steps() != 10 {
			t.Fatalf("HasEnergy %v Fused %v Steps %d", s.HasEnergy(), s.Fused(), s.Steps())
		}
		res := make([]engines.Result, batch)
		for _, steps := range []int{1, 7, 20, 100} {
			if err := s.SetSteps(steps); err != nil {
				t.Fatal(err)
			}
			if err := s.SampleWithNoise(cond, z, res); err != nil {
				t.Fatal(err)
			}
			worst := 0.0
			for r := range res {
				rl := quadTp * quadDa
				want := refDDIM(o, steps, clip, to64(cond[r*quadCond:(r+1)*quadCond]), to64(z[r*rl:(r+1)*rl]))
				for i, w := range want {
					got := res[r].ActionsStd[i]
					d := math.Abs(float64(got)-w) / math.Max(1, math.Abs(w))
					worst = math.Max(worst, d)
					if d > 5e-5 {
						t.Errorf("clip %v S=%d row %d: x[%d] = %v, float64 DDIM %v", clip, steps, r, i, got, w)
					}
					da := i % quadDa
					// Rounded like the sampler and the reference: product, then sum
					// (unfused, also on arm64).
					if a := float32(got*m.ActionNorm.Std[da]) + m.ActionNorm.Mean[da]; res[r].Actions[i] != a {
						t.Errorf("Actions[%d] = %v, want x·std + mean = %v", i, res[r].Actions[i], a)
					}
				}
				if res[r].Score != (engines.Score{}) {
					t.Errorf("diffusion Result.Score = %+v, want zero", res[r].Score)
				}
			}
			t.Logf("clip %v S=%d: max error against float64 DDIM %.3g", clip, steps, worst)
		}
		s.Close()
	}
}

// TestDDIMSamplesTheData checks the distribution: 1024 rows from the
// sampler's own seeded noise with cond = 0, per element against the exact
// DDIM result N(m, g²) (ddimAffine), and pooled against the data N(mu, s²).
//
// Tolerances: with n = 1024 rows a sample mean has standard error g/√n and
// a sample standard deviation g/√(2n); each check allows 5 standard errors
// (the seed is fixed, so the test is deterministic; 5σ keeps it robust to a
// change of noise generator). Pooled over the 12 elements (12288 values of
// u = (x − mu)/s), the standard errors are 1/√12288 and 1/√24576, and the
// check adds DDIM's own discretization bias, max |m − mu|/s and
// max |g/s − 1| from ddimAffine (S=100: 7e-4 and 2.4 %; S=20: 8.8 % and
// 9.8 %).
func TestDDIMSamplesTheData(t *testing.T) {
	o := loadOracle(t)
	be := newORT(t)
	const n = 1024
	b := loadDDIM(t, nil)
	s, err := engines.NewSampler(b, be, engines.SamplerOptions{Batch: n, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cond := make([]float32, n*quadCond)
	res := make([]engines.Result, n)
	rl := quadTp * quadDa
	for _, steps := range []int{20, 100} {
		if err := s.SetSteps(steps); err != nil {
			t.Fatal(err)
		}
		if err := s.SampleBatch(cond, res); err != nil {
			t.Fatal(err)
		}
		var poolSum, poolSq, biasM, biasG float64
		for e := 0; e < rl; e++ {
			mu, sd := o.Mu0[e], o.S[e]
			var sum, sq float64
			for r := range res {
				x := float64(res[r].ActionsStd[e])
				sum += x
				sq += x * x
				u := (x - mu) / sd
				poolSum += u
				poolSq += u * u
			}
			mean := sum / n
			std := math.Sqrt(sq/n - mean*mean)
			m, g := ddimAffine(o, steps, mu, sd)
			biasM, biasG = math.Max(biasM, math.Abs(m-mu)/sd), math.Max(biasG, math.Abs(g/sd-1))
			if d := math.Abs(mean - m); d > 5*g/math.Sqrt(n) {
				t.Errorf("S=%d element %d: mean %.4f, DDIM gives %.4f (data mean %.4f): off by %.1f standard errors", steps, e, mean, m, mu, d/(g/math.Sqrt(n)))
			}
			if d := math.Abs(std - g); d > 5*g/math.Sqrt(2*n) {
				t.Errorf("S=%d element %d: std %.4f, DDIM gives %.4f (data std %.4f): off by %.1f standard errors", steps, e, std, g, sd, d/(g/math.Sqrt(2*n)))
			}
		}
		total := float64(n * rl)
		pm := poolSum / total
		ps := math.Sqrt(poolSq/total - pm*pm)
		tolM, tolS := 5/math.Sqrt(total)+biasM, 5/math.Sqrt(2*total)+biasG
		if math.Abs(pm) > tolM || math.Abs(ps-1) > tolS {
			t.Errorf("S=%d: standardized samples have mean %.4f std %.4f, want 0 ± %.4f and 1 ± %.4f", steps, pm, ps, tolM, tolS)
		}
		t.Logf("S=%d: (x − mu)/s pooled over %d values: mean %+.4f (tolerance %.4f), std %.4f (tolerance 1 ± %.4f); DDIM bias max %.2g (mean), %.2g (std)", steps, int(total), pm, tolM, ps, tolS, biasM, biasG)
	}
}

// clip_sample bounds the predicted x0 of every step; the last step (ᾱ_prev
// = 1) returns x0 itself, so every sample lies in [−C, C] and the elements
// whose data mean is beyond C sit on the bound.
func TestDDIMClipSample(t *testing.T) {
	const clip, n = 0.5, 64
	b := loadDDIM(t, setClip(clip))
	s, err := engines.NewSampler(b, newORT(t), engines.SamplerOptions{Batch: n, Steps: 20, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res := make([]engines.Result, n)
	if err := s.SampleBatch(make([]float32, n*quadCond), res); err != nil {
		t.Fatal(err)
	}
	atBound := 0
	for _, r := range res {
		for i, x := range r.ActionsStd {
			if math.Abs(float64(x)) > clip {
				t.Fatalf("x[%d] = %v outside clip_sample ±%v", i, x, clip)
			}
			if math.Abs(float64(x)) == clip {
				atBound++
			}
		}
	}
	if atBound < n {
		t.Fatalf("%d values at ±clip_sample, want many (data means up to ±1.5 lie beyond it)", atBound)
	}
}

// recordingBackend wraps a Backend: it records the t input of every Run
// and can poison the first output with NaN.
type recordingBackend struct {
	engines.Backend
	mu     sync.Mutex
	ts     []float32
	poison bool
}

type recordingSession struct {
	engines.Session
	b       *recordingBackend
	in, out [][]float32
}

func (r *recordingBackend) Open(spec engines.GraphSpec) (engines.Session, error) {
	s, err := r.Backend.Open(spec)
	if err != nil {
		return nil, err
	}
	return &recordingSession{Session: s, b: r}, nil
}

func (s *recordingSession) Bind(n int) (in, out [][]float32, err error) {
	s.in, s.out, err = s.Session.Bind(n)
	return s.in, s.out, err
}

func (s *recordingSession) Run() error {
	if err := s.Session.Run(); err != nil {
		return err
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.b.ts = append(s.b.ts, s.in[2][0])
	if s.b.poison {
		s.out[0][0] = float32(math.NaN())
	}
	return nil
}

// SetSteps picks diffusers' "leading" timesteps (t_j = (S−1−j)·⌊N/S⌋),
// one eps call per step, and refuses S outside 1..N.
func TestDDIMStepsAndTimesteps(t *testing.T) {
	b := loadDDIM(t, nil)
	rb := &recordingBackend{Backend: newORT(t)}
	s, err := engines.NewSampler(b, rb, engines.SamplerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, bad := range []int{0, -1, 101} {
		if err := s.SetSteps(bad); err == nil || !strings.Contains(err.Error(), "1..100") {
			t.Errorf("SetSteps(%d) = %v, want an error naming 1..100", bad, err)
		}
	}
	cond := make([]float32, quadCond)
	for _, tc := range []struct {
		steps int
		first []float32
	}{
		{20, []float32{95, 90, 85}},
		{30, []float32{87, 84, 81}},
		{7, []float32{84, 70, 56}},
		{100, []float32{99, 98, 97}},
		{1, []float32{0}},
	} {
		if err := s.SetSteps(tc.steps); err != nil {
			t.Fatal(err)
		}
		rb.ts = rb.ts[:0]
		calls := s.Stats().BackendCalls
		var r engines.Result
		if err := s.Sample(cond, &r); err != nil {
			t.Fatal(err)
		}
		if got := s.Stats().BackendCalls - calls; got != int64(tc.steps) || len(rb.ts) != tc.steps {
			t.Fatalf("S=%d: %d graph calls (%d recorded), want %d", tc.steps, got, len(rb.ts), tc.steps)
		}
		if fmt.Sprint(rb.ts[:len(tc.first)]) != fmt.Sprint(tc.first) || rb.ts[len(rb.ts)-1] != 0 {
			t.Errorf("S=%d: timesteps %v, want %v … 0", tc.steps, rb.ts, tc.first)
		}
	}
}

// A policy without an energy: Score and ScoreObs say so (ErrNoEnergy); a
// NaN noise prediction reaches the actions (the safety gate stops on it).
func TestDDIMNoEnergyAndNaN(t *testing.T) {
	b := loadDDIM(t, nil)
	rb := &recordingBackend{Backend: newORT(t)}
	s, err := engines.NewSampler(b, rb, engines.SamplerOptions{Steps: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cond := make([]float32, quadCond)
	var r engines.Result
	if err := s.Sample(cond, &r); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Score(r.Actions, cond); !errors.Is(err, engines.ErrNoEnergy) || !strings.Contains(err.Error(), `policy kind "diffusion" has no energy`) {
		t.Errorf("Score: %v, want ErrNoEnergy", err)
	}
	hist := []engines.ObsFrame{{[]float32{1, 2}}, {[]float32{3, 4}}}
	if _, err := s.ScoreObs(r.Actions, hist); !errors.Is(err, engines.ErrNoEnergy) {
		t.Errorf("ScoreObs: %v, want ErrNoEnergy", err)
	}
	rb.poison = true
	if err := s.Sample(cond, &r); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(float64(r.Actions[0])) {
		t.Errorf("a NaN eps gave action %v, want NaN", r.Actions[0])
	}
}

// The diffusion hot path allocates nothing after warm-up either, for S=1
// and S=100, including switching back to a step count used before.
func TestDDIMAllocations(t *testing.T) {
	b := loadDDIM(t, setClip(1))
	s, err := engines.NewSampler(b, newORT(t), engines.SamplerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cond := make([]float32, quadCond)
	hist := []engines.ObsFrame{{[]float32{1, 2}}, {[]float32{3, 4}}}
	var r engines.Result
	if err := s.SetSteps(100); err != nil {
		t.Fatal(err)
	}
	for _, steps := range []int{1, 100} {
		if err := s.SetSteps(steps); err != nil {
			t.Fatal(err)
		}
		if err := s.Sample(cond, &r); err != nil { // warm-up
			t.Fatal(err)
		}
		for what, f := range map[string]func() error{
			"Sample":    func() error { return s.Sample(cond, &r) },
			"SampleObs": func() error { return s.SampleObs(hist, &r) },
			"SetSteps":  func() error { return s.SetSteps(steps) },
			"Score": func() error {
				if _, err := s.Score(r.Actions, cond); !errors.Is(err, engines.ErrNoEnergy) {
					return err
				}
				return nil
			},
		} {
			allocs := testing.AllocsPerRun(20, func() {
				if err := f(); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("S=%d %s: %v allocations per call, want 0", steps, what, allocs)
			}
		}
	}
}

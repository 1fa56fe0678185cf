package engines_test

import (
	"math"
	"testing"

	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/engines/enginestest"
)

// refSample is an independent float64 implementation of Algorithm 2 for the
// analytic energy: the test's ground truth.
func refSample(m *engines.Manifest, cond, z []float64, k int) (actions []float64, energy, refMean float64) {
	mu := quadMean(cond, len(z))
	sc := m.Schedule
	a := make([]float64, len(z))
	for i := range a {
		a[i] = sc.SigmaMax * z[i]
	}
	dt := (sc.T - sc.Gamma) / float64(k)
	for s := 0; s < k; s++ {
		t := sc.T - float64(s)*dt
		sigma := math.Pow(sc.SigmaMin, 1-t/sc.T) * math.Pow(sc.SigmaMax, t/sc.T)
		d := 2 * sigma * sigma * math.Log(sc.SigmaMax/sc.SigmaMin) / sc.T
		for i := range a {
			a[i] -= dt * 0.5 * d * (1 + t) * (a[i] - mu[i])
		}
	}
	e := func(x []float64) float64 {
		var s float64
		for i := range x {
			s += (x[i] - mu[i]) * (x[i] - mu[i])
		}
		return 0.5 * (1 + sc.Gamma) * s
	}
	energy = e(a)
	for _, r := range m.ReferenceActions {
		var flat []float64
		for _, row := range r {
			for _, v := range row {
				flat = append(flat, float64(v))
			}
		}
		refMean += e(flat)
	}
	refMean /= float64(len(m.ReferenceActions))
	da := m.ActionDim
	actions = make([]float64, len(a))
	for i := range a {
		actions[i] = a[i]*float64(m.ActionNorm.Std[i%da]) + float64(m.ActionNorm.Mean[i%da])
	}
	return actions, energy, refMean
}

// quadMean is the analytic energy's minimum mu = cond·W (n values).
func quadMean(cond []float64, n int) []float64 {
	w := enginestest.Weights(len(cond), n)
	mu := make([]float64, n)
	for j := range mu {
		for i, c := range cond {
			mu[j] += c * float64(w[i][j])
		}
	}
	return mu
}

func testInputs(seed int) (cond, z []float32) {
	cond = make([]float32, quadCond)
	for i := range cond {
		cond[i] = float32(math.Sin(float64(seed*13 + i)))
	}
	z = make([]float32, quadTp*quadDa)
	for i := range z {
		z[i] = float32(math.Cos(float64(seed*7+i)) * 1.3)
	}
	return cond, z
}

func backends(t *testing.T) map[string]engines.Backend {
	return map[string]engines.Backend{
		"go":       &enginestest.Backend{},
		"go-fused": &enginestest.Backend{Fused: true},
		"ort":      newORT(t),
	}
}

func TestSamplerMatchesAlgorithm2(t *testing.T) {
	b := loadQuad(t)
	for name, be := range backends(t) {
		for _, k := range []int{1, 10, 20} {
			s, err := engines.NewSampler(b, be, engines.SamplerOptions{Steps: k})
			if err != nil {
				t.Fatal(err)
			}
			if s.Fused() != (name == "go-fused") {
				t.Errorf("%s: Fused() = %v", name, s.Fused())
			}
			for seed := 0; seed < 3; seed++ {
				cond, z := testInputs(seed)
				res := make([]engines.Result, 1)
				if err := s.SampleWithNoise(cond, z, res); err != nil {
					t.Fatal(err)
				}
				cond64, z64 := to64(cond), to64(z)
				want, e, ref := refSample(&b.Manifest, cond64, z64, k)
				for i := range want {
					if d := math.Abs(float64(res[0].Actions[i]) - want[i]); d > 1e-4*math.Max(1, math.Abs(want[i])) {
						t.Fatalf("%s K=%d seed %d: action[%d] = %v, want %v", name, k, seed, i, res[0].Actions[i], want[i])
					}
				}
				rel := func(got float32, want float64) float64 {
					return math.Abs(float64(got)-want) / math.Max(1e-3, math.Abs(want))
				}
				if rel(res[0].Energy, e) > 1e-4 || rel(res[0].RefEnergyMean, ref) > 1e-4 {
					t.Fatalf("%s K=%d seed %d: energy %v ref %v, want %v %v", name, k, seed, res[0].Energy, res[0].RefEnergyMean, e, ref)
				}
				if res[0].CenteredReward != -(res[0].Energy-res[0].RefEnergyMean) || res[0].CenteredEnergy != -res[0].CenteredReward {
					t.Fatalf("centered reward inconsistent: %+v", res[0].Score)
				}
				// Score re-evaluates the committed chunk: same energy as the sample.
				sc, err := s.Score(res[0].Actions, cond)
				if err != nil {
					t.Fatal(err)
				}
				if rel(sc.Energy, float64(res[0].Energy)) > 1e-4 || sc.RefEnergyMean != res[0].RefEnergyMean {
					t.Fatalf("%s: Score %+v, sample %+v", name, sc, res[0].Score)
				}
			}
			s.Close()
		}
	}
}

func TestSamplerBatchRowsAreIndependent(t *testing.T) {
	b := loadQuad(t)
	be := newORT(t)
	s1, err := engines.NewSampler(b, be, engines.SamplerOptions{Steps: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	s3, err := engines.NewSampler(b, be, engines.SamplerOptions{Steps: 5, Batch: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	var cond3, z3 []float32
	for seed := 0; seed < 3; seed++ {
		c, z := testInputs(seed)
		cond3, z3 = append(cond3, c...), append(z3, z...)
	}
	res3 := make([]engines.Result, 3)
	if err := s3.SampleWithNoise(cond3, z3, res3); err != nil {
		t.Fatal(err)
	}
	for seed := 0; seed < 3; seed++ {
		c, z := testInputs(seed)
		res1 := make([]engines.Result, 1)
		if err := s1.SampleWithNoise(c, z, res1); err != nil {
			t.Fatal(err)
		}
		for i := range res1[0].Actions {
			if d := math.Abs(float64(res1[0].Actions[i] - res3[seed].Actions[i])); d > 1e-5 {
				t.Fatalf("row %d differs from a batch-1 sample: %v vs %v", seed, res3[seed].Actions[i], res1[0].Actions[i])
			}
		}
		if d := math.Abs(float64(res1[0].Energy - res3[seed].Energy)); d > 1e-4*math.Abs(float64(res1[0].Energy)) {
			t.Fatalf("row %d energy %v vs %v", seed, res3[seed].Energy, res1[0].Energy)
		}
	}
	if err := s3.Sample(cond3[:quadCond], &engines.Result{}); err == nil {
		t.Error("Sample accepted on a batch-3 sampler")
	}
	if _, err := s3.Score(res3[1].Actions, cond3[quadCond:2*quadCond]); err != nil {
		t.Fatal(err)
	}
}

func TestSamplerSeededNoise(t *testing.T) {
	b := loadQuad(t)
	be := &enginestest.Backend{}
	run := func(seed uint64) []float32 {
		s, err := engines.NewSampler(b, be, engines.SamplerOptions{Seed: seed, Steps: 3})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		cond, _ := testInputs(0)
		var r engines.Result
		if err := s.Sample(cond, &r); err != nil {
			t.Fatal(err)
		}
		return r.Actions
	}
	a, a2, c := run(7), run(7), run(8)
	if !equal(a, a2) {
		t.Fatal("same seed gave different samples")
	}
	if equal(a, c) {
		t.Fatal("different seeds gave the same sample")
	}
}

func TestSamplerSetStepsAndRunCount(t *testing.T) {
	b := loadQuad(t)
	be := &enginestest.Backend{}
	s, err := engines.NewSampler(b, be, engines.SamplerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Steps() != b.Manifest.Sampler.Steps {
		t.Fatalf("default K = %d, want manifest's %d", s.Steps(), b.Manifest.Sampler.Steps)
	}
	if err := s.SetSteps(0); err == nil {
		t.Fatal("SetSteps(0) accepted")
	}
	cond, _ := testInputs(1)
	for _, k := range []int{10, 20, 3} {
		if err := s.SetSteps(k); err != nil {
			t.Fatal(err)
		}
		before := be.Runs()
		if err := s.Sample(cond, &engines.Result{}); err != nil {
			t.Fatal(err)
		}
		// K gradient calls, the energy at γ, and ONE call for all M references.
		if got := be.Runs() - before; got != k+2 {
			t.Fatalf("K=%d: %d graph calls per sample, want %d", k, got, k+2)
		}
	}
	st := s.Stats()
	if st.Samples != 3 || st.BackendCalls != (10+2)+(20+2)+(3+2) || st.TotalTime < st.BackendTime {
		t.Fatalf("stats %+v", st)
	}
}

// TestSamplerAllocations proves the hot path: after warm-up, no heap
// allocation per sample, per Euler step (K=1 and K=20 both allocate
// nothing) and per Score, on ONNX Runtime and on the fused path.
func TestSamplerAllocations(t *testing.T) {
	b := loadQuad(t)
	for name, be := range backends(t) {
		for _, k := range []int{1, 20} {
			s, err := engines.NewSampler(b, be, engines.SamplerOptions{Steps: k})
			if err != nil {
				t.Fatal(err)
			}
			cond, _ := testInputs(2)
			hist := []engines.ObsFrame{{[]float32{1, 2}}, {[]float32{3, 4}}}
			var r engines.Result
			if err := s.Sample(cond, &r); err != nil { // warm-up
				t.Fatal(err)
			}
			for what, f := range map[string]func() error{
				"Sample":    func() error { return s.Sample(cond, &r) },
				"SampleObs": func() error { return s.SampleObs(hist, &r) },
				"Score":     func() error { _, err := s.Score(r.Actions, cond); return err },
				"ScoreObs":  func() error { _, err := s.ScoreObs(r.Actions, hist); return err },
			} {
				allocs := testing.AllocsPerRun(20, func() {
					if err := f(); err != nil {
						t.Fatal(err)
					}
				})
				if allocs != 0 {
					t.Errorf("%s K=%d %s: %v allocations per call, want 0", name, k, what, allocs)
				}
			}
			s.Close()
		}
	}
}

func TestSamplerRejectsBadInput(t *testing.T) {
	s, err := engines.NewSampler(loadQuad(t), &enginestest.Backend{}, engines.SamplerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var r engines.Result
	if err := s.Sample(make([]float32, quadCond+1), &r); err == nil {
		t.Error("Sample accepted a cond of the wrong width")
	}
	if _, err := s.Score(make([]float32, 5), make([]float32, quadCond)); err == nil {
		t.Error("Score accepted actions of the wrong size")
	}
	s.Close()
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := s.Sample(make([]float32, quadCond), &r); err == nil {
		t.Error("Sample after Close accepted")
	}
}

func TestConditionerBuild(t *testing.T) {
	b := loadQuad(t)
	c, err := engines.NewConditioner(&b.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	cond := make([]float32, c.Dim())
	// norm mean {1,-2}, std {0.5,4}; oldest first.
	if err := c.Build([]engines.ObsFrame{{[]float32{2, 2}}, {[]float32{0, -6}}}, cond); err != nil {
		t.Fatal(err)
	}
	if want := []float32{2, 1, -2, -1}; !equal(cond, want) {
		t.Fatalf("cond = %v, want %v", cond, want)
	}
	for _, bad := range [][]engines.ObsFrame{
		{{[]float32{2, 2}}},
		{{[]float32{2, 2}}, {[]float32{1}}},
		{{[]float32{2, 2}}, {}},
	} {
		if err := c.Build(bad, cond); err == nil {
			t.Errorf("Build(%v) accepted", bad)
		}
	}
}

func TestScheduleValues(t *testing.T) {
	sc := engines.Schedule{Kind: "geometric", SigmaMin: 0.01, SigmaMax: 10, T: 1, Gamma: 1e-3}
	for _, tc := range []struct{ t, sigma float64 }{{0, 0.01}, {1, 10}, {0.5, math.Sqrt(0.1)}} {
		if got := sc.Sigma(tc.t); math.Abs(got-tc.sigma) > 1e-12 {
			t.Errorf("sigma(%v) = %v, want %v", tc.t, got, tc.sigma)
		}
	}
	ts, scales := make([]float32, 4), make([]float32, 4)
	sc.Steps(ts, scales)
	dt := (1 - 1e-3) / 4
	for k := range ts {
		tk := 1 - float64(k)*dt
		if math.Abs(float64(ts[k])-tk) > 1e-7 {
			t.Errorf("t_%d = %v, want %v", k, ts[k], tk)
		}
		want := dt * 0.5 * 2 * sc.Sigma(tk) * sc.Sigma(tk) * math.Log(1000)
		if math.Abs(float64(scales[k])-want) > 1e-6*want {
			t.Errorf("scale_%d = %v, want %v", k, scales[k], want)
		}
	}
}

func to64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

func equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSamplerNoReferences(t *testing.T) {
	b := loadQuad(t)
	be := newORT(t)
	cond, z := testInputs(3)
	var got [2]engines.Result
	for i, noRefs := range []bool{false, true} {
		s, err := engines.NewSampler(b, be, engines.SamplerOptions{Steps: 6, NoReferences: noRefs})
		if err != nil {
			t.Fatal(err)
		}
		res := make([]engines.Result, 1)
		if err := s.SampleWithNoise(cond, z, res); err != nil {
			t.Fatal(err)
		}
		got[i] = res[0]
		sc, err := s.Score(res[0].Actions, cond)
		if err != nil {
			t.Fatal(err)
		}
		if noRefs && (!math.IsNaN(float64(sc.CenteredEnergy)) || sc.Energy != res[0].Energy) {
			t.Errorf("NoReferences Score = %+v", sc)
		}
		s.Close()
	}
	if !equal(got[0].Actions, got[1].Actions) || math.Abs(float64(got[0].Energy-got[1].Energy)) > 1e-5*math.Abs(float64(got[0].Energy)) {
		t.Fatalf("NoReferences changed the sample: %+v vs %+v", got[0].Score, got[1].Score)
	}
	if !math.IsNaN(float64(got[1].RefEnergyMean)) || !math.IsNaN(float64(got[1].CenteredReward)) {
		t.Fatalf("NoReferences: reference scores %+v, want NaN", got[1].Score)
	}
}

// A second sampler that only scores (the safety monitor's) gives the same
// score as the sampler that drew the chunk.
func TestSamplerScoreFromAnotherSampler(t *testing.T) {
	b := loadQuad(t)
	for name, be := range backends(t) {
		s, err := engines.NewSampler(b, be, engines.SamplerOptions{Steps: 4})
		if err != nil {
			t.Fatal(err)
		}
		sc, err := engines.NewSampler(b, be, engines.SamplerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cond, _ := testInputs(5)
		var r engines.Result
		if err := s.Sample(cond, &r); err != nil {
			t.Fatal(err)
		}
		got, err := sc.Score(r.Actions, cond)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(float64(got.Energy-r.Energy)) > 1e-4*math.Abs(float64(r.Energy)) || got.RefEnergyMean != r.RefEnergyMean ||
			math.Abs(float64(got.CenteredReward-r.CenteredReward)) > 1e-4*math.Abs(float64(r.Energy)) {
			t.Fatalf("%s: score %+v, sample %+v", name, got, r.Score)
		}
		s.Close()
		sc.Close()
	}
}

package engines_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/energyflow/edge/engines"
)

// benchBundle returns the paper-size bundle the benchmarks run on:
// $ENERGYFLOW_BENCH_BUNDLE, or build/bundles/papersize made by
// `make bench-engines-bundle`. Benchmarks skip when it is absent.
func benchBundle(b *testing.B) *engines.Bundle {
	dir := os.Getenv("ENERGYFLOW_BENCH_BUNDLE")
	if dir == "" {
		dir = filepath.Join("..", "build", "bundles", "papersize")
	}
	if _, err := os.Stat(filepath.Join(dir, "manifest.json")); err != nil {
		b.Skipf("no paper-size bundle at %s: run `make bench-engines-bundle` (or set ENERGYFLOW_BENCH_BUNDLE)", dir)
	}
	bun, err := engines.LoadBundle(dir)
	if err != nil {
		b.Fatal(err)
	}
	return bun
}

func benchCond(n int) []float32 {
	r := rand.New(rand.NewPCG(1, 2))
	c := make([]float32, n)
	for i := range c {
		c[i] = float32(r.NormFloat64())
	}
	return c
}

// BenchmarkGradCall times one ∇E evaluation (batch 1) on ONNX Runtime.
func BenchmarkGradCall(b *testing.B) {
	bun := benchBundle(b)
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			be, err := engines.NewORT(engines.ORTOptions{IntraOpThreads: threads})
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			spec, _ := bun.GraphSpec(engines.GraphEnergyGrad, 1)
			s, err := be.Open(spec)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			in, _, err := s.Bind(1)
			if err != nil {
				b.Fatal(err)
			}
			copy(in[0], benchCond(len(in[0])))
			copy(in[1], benchCond(len(in[1])))
			in[2][0] = 0.5
			if err := s.Run(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := s.Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSample times one whole sample (K steps, final energy and the M
// reference energies) at batch 1, for K=10 and K=20. It reports the share of
// the wall time spent outside the backend (Go: noise, Euler updates,
// copies).
func BenchmarkSample(b *testing.B) {
	bun := benchBundle(b)
	for _, threads := range []int{1, 2} {
		be, err := engines.NewORT(engines.ORTOptions{IntraOpThreads: threads})
		if err != nil {
			b.Fatal(err)
		}
		for _, k := range []int{10, 20} {
			b.Run(fmt.Sprintf("K=%d/threads=%d", k, threads), func(b *testing.B) {
				s, err := engines.NewSampler(bun, be, engines.SamplerOptions{Steps: k, Seed: 1})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				cond := benchCond(bun.Manifest.CondDim)
				var r engines.Result
				if err := s.Sample(cond, &r); err != nil {
					b.Fatal(err)
				}
				s.ResetStats()
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := s.Sample(cond, &r); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				st := s.Stats()
				b.ReportMetric(100*float64(st.TotalTime-st.BackendTime)/float64(st.TotalTime), "%outside-backend")
			})
		}
		be.Close()
	}
}

// stateBenchBundle returns the bundle the state-term benchmark runs on:
// $ENERGYFLOW_STATE_BUNDLE (a bundle with the state term, e.g. a trained
// bundle after `python -m energyflow state-term`), else the committed
// parity-state fixture (a tiny 32-32 state term over 4 σ).
func stateBenchBundle(b *testing.B) *engines.Bundle {
	dir := os.Getenv("ENERGYFLOW_STATE_BUNDLE")
	if dir == "" {
		dir = filepath.Join("testdata", "parity-state", "bundle")
	}
	bun, err := engines.LoadBundle(dir)
	if err != nil {
		b.Fatal(err)
	}
	if !bun.Manifest.HasStateEnergy() {
		b.Fatalf("bundle %s has no state term: set ENERGYFLOW_STATE_BUNDLE to one with a state_energy block", dir)
	}
	return bun
}

// BenchmarkStateEnergy times what the state term adds to the per-tick
// re-score on ONNX Runtime (1 intra-op thread, batch 1): Score of a
// committed chunk on the bundle without the block ("score") and with it
// ("score+state", one more graph call), and the state graph alone
// ("state"). docs/engines.md has the figures.
func BenchmarkStateEnergy(b *testing.B) {
	bun := stateBenchBundle(b)
	plain := *bun
	plain.Manifest.StateEnergy = nil // the same bundle without its state term
	be, err := engines.NewORT(engines.ORTOptions{IntraOpThreads: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	cond := benchCond(bun.Manifest.CondDim)
	for _, bc := range []struct {
		name string
		bun  *engines.Bundle
		call func(s *engines.Sampler, actions []float32) error
	}{
		{"score", &plain, func(s *engines.Sampler, a []float32) error { _, err := s.Score(a, cond); return err }},
		{"score+state", bun, func(s *engines.Sampler, a []float32) error { _, err := s.Score(a, cond); return err }},
		{"state", bun, func(s *engines.Sampler, _ []float32) error { _, err := s.StateEnergy(cond); return err }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := engines.NewSampler(bc.bun, be, engines.SamplerOptions{Steps: 1, Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var r engines.Result
			if err := s.Sample(cond, &r); err != nil {
				b.Fatal(err)
			}
			if err := bc.call(s, r.Actions); err != nil { // warm-up
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := bc.call(s, r.Actions); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSampleGuided times one plan unguided and under a real-time
// chunking guide of each mode (weight 1 on 3 actions, decaying over 8), so
// that the guide's cost per plan reads as the difference.
func BenchmarkSampleGuided(b *testing.B) {
	bun := benchBundle(b)
	m := &bun.Manifest
	be, err := engines.NewORT(engines.ORTOptions{IntraOpThreads: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	s, err := engines.NewSampler(bun, be, engines.SamplerOptions{NoReferences: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	cond := benchCond(m.CondDim)
	var res engines.Result
	if err := s.Sample(cond, &res); err != nil {
		b.Fatal(err)
	}
	for _, mode := range []engines.GuideMode{engines.GuideOff, engines.GuideNoisy, engines.GuideDenoised} {
		g := &engines.Guide{Mode: mode, Strength: 1, Actions: append([]float32(nil), res.Actions...), Weights: make([]float32, m.PredHorizon)}
		engines.ChunkWeights(g.Weights, m.ObsHorizon-1, 3, 11)
		b.Run(fmt.Sprintf("K=%d/%v", s.Steps(), mode), func(b *testing.B) {
			for b.Loop() {
				if err := s.SampleGuided(cond, g, &res); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

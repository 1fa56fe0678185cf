package runtime

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/energyflow/edge/engines"
)

// warmRecorder is numberedSampler with a warm start: it records each warm
// start it is given (nil for a cold plan) and plans as numberedSampler.
type warmRecorder struct {
	*numberedSampler
	k     int // K (0: 10)
	mu    sync.Mutex
	warms []*engines.Warm
}

func (s *warmRecorder) Sample(cond []float32, dst *engines.Result) error {
	s.mu.Lock()
	s.warms = append(s.warms, nil)
	s.mu.Unlock()
	return s.numberedSampler.Sample(cond, dst)
}

func (s *warmRecorder) SampleGuided(cond []float32, g *engines.Guide, dst *engines.Result) error {
	return s.Sample(cond, dst)
}

func (s *warmRecorder) SampleWarm(cond []float32, w *engines.Warm, dst *engines.Result) error {
	s.mu.Lock()
	s.warms = append(s.warms, &engines.Warm{Actions: append([]float32(nil), w.Actions...), Sigma: w.Sigma, Steps: w.Steps})
	s.mu.Unlock()
	return s.numberedSampler.Sample(cond, dst)
}

// Steps is K: k, or 10 when unset.
func (s *warmRecorder) Steps() int {
	if s.k == 0 {
		return 10
	}
	return s.k
}

// With warm starts on — set in loop.warm_start, or the bundle's
// sampler.warm_start with the config unset — the first plan starts cold
// and every later one from the previous plan shifted by the periods
// between the two observations, its last action repeated. Off, or the
// bundle's where it does not apply (loop.warm_start.off, a K other than
// the bundle's, real-time chunking on), every plan is cold.
func TestLoopWarmStartsFromTheShiftedPlan(t *testing.T) {
	bundleWarm := &engines.WarmSpec{Sigma: 1, Steps: 4}
	for _, tc := range []struct {
		name      string
		warm      WarmConfig
		chunking  ChunkingConfig
		bundle    *engines.WarmSpec // the manifest's sampler.warm_start (the test bundle's K is 20)
		k         int               // the sampler's K (0: 10)
		wantSteps int               // 0: every plan cold
	}{
		{name: "off"},
		{name: "loop.warm_start", warm: WarmConfig{Sigma: 1}, wantSteps: 5},
		{name: "the bundle's", bundle: bundleWarm, k: 20, wantSteps: 4},
		{name: "the config's over the bundle's", warm: WarmConfig{Sigma: 1, Steps: 6}, bundle: bundleWarm, k: 20, wantSteps: 6},
		{name: "the bundle's, off", warm: WarmConfig{Off: true}, bundle: bundleWarm, k: 20},
		{name: "the bundle's, at another K", bundle: bundleWarm, k: 10},
		{name: "the bundle's, with real-time chunking", chunking: ChunkingConfig{Mode: "denoised", Strength: 1, Soft: -1}, bundle: bundleWarm, k: 20},
		{name: "the bundle's, at its rate", bundle: &engines.WarmSpec{Sigma: 1, Steps: 4, RateHz: 10}, k: 20, wantSteps: 4},
		{name: "the bundle's, at another rate", bundle: &engines.WarmSpec{Sigma: 1, Steps: 4, RateHz: 20}, k: 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var wr *warmRecorder
			o := harnessOptions{bundle: testBundle(t), latency: func() time.Duration { return 100 * time.Millisecond },
				warm: tc.warm, chunking: tc.chunking,
				manifest: func(m *engines.Manifest) { m.Sampler.WarmStart = tc.bundle },
				sampler: func(f *fakeSampler, dim int) PolicySampler {
					wr = &warmRecorder{numberedSampler: &numberedSampler{fakeSampler: f, dim: dim}, k: tc.k}
					return wr
				}}
			h := newLoopHarness(t, o)
			h.armGate(t)
			for range 60 {
				h.step()
			}
			wr.mu.Lock()
			warms := wr.warms
			wr.mu.Unlock()
			if len(warms) < 4 {
				t.Fatalf("%d plans", len(warms))
			}
			if warms[0] != nil {
				t.Errorf("the first plan started warm")
			}
			l := h.l
			for i, w := range warms[1:] {
				if tc.wantSteps == 0 {
					if w != nil {
						t.Fatalf("plan %d started warm", i+1)
					}
					continue
				}
				if w == nil {
					t.Fatalf("plan %d started cold", i+1)
				}
				if w.Sigma != 1 || w.Steps != tc.wantSteps {
					t.Errorf("plan %d: σ %v steps %d, want 1 and %d", i+1, w.Sigma, w.Steps, tc.wantSteps)
				}
				// Row j holds action e+j of plan i+1 (numbered 100·p + action), e
				// the same for every row until the last action repeats.
				first := w.Actions[0]
				p, e := int(first)/100, int(first)%100
				if p != i+1 || e < 1 {
					t.Fatalf("plan %d starts from action %d of plan %d", i+1, e, p)
				}
				for j := 0; j < l.tp; j++ {
					want := float32(100*p + min(e+j, l.tp-1))
					for d := 0; d < l.dim; d++ {
						if got := w.Actions[j*l.dim+d]; got != want {
							t.Fatalf("plan %d row %d = %v, want %v", i+1, j, got, want)
						}
					}
				}
			}
		})
	}
}

// A warm start the bundle or the sampler cannot have is refused at NewLoop
// in one line: σ outside the schedule, more steps than K, with real-time
// chunking on (config check).
func TestWarmStartRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		warm WarmConfig
		want string
	}{
		{"σ above σ_max", WarmConfig{Sigma: 1e6}, "outside the schedule"},
		{"more steps than K", WarmConfig{Sigma: 1, Steps: 11}, "more than the sampler's K = 10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newLoop(t, harnessOptions{bundle: testBundle(t), warm: tc.warm,
				sampler: func(f *fakeSampler, dim int) PolicySampler {
					return &warmRecorder{numberedSampler: &numberedSampler{fakeSampler: f, dim: dim}}
				}})
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("%v, want one line with %q", err, tc.want)
			}
		})
	}
	// A sampler without warm starts: the config's is refused, the bundle's
	// (a default) plans cold.
	if _, err := newLoop(t, harnessOptions{bundle: testBundle(t), warm: WarmConfig{Sigma: 1}}); err == nil || !strings.Contains(err.Error(), "has no warm start") {
		t.Errorf("loop.warm_start on a sampler without one: %v", err)
	}
	l, err := newLoop(t, harnessOptions{bundle: testBundle(t),
		manifest: func(m *engines.Manifest) { m.Sampler.WarmStart = &engines.WarmSpec{Sigma: 1, Steps: 4} }})
	if err != nil || l.l.warm != nil {
		t.Errorf("the bundle's warm start on a sampler without one: %v (warm %v), want cold plans", err, l != nil && l.l.warm != nil)
	}
	c := DefaultConfig()
	c.Loop.Warm = WarmConfig{Sigma: 1}
	c.Loop.Chunking.Mode = "denoised"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "warm_start and realtime_chunking") {
		t.Errorf("warm start with real-time chunking: %v", err)
	}
	c.Loop.Chunking.Mode = "off"
	c.Loop.Warm = WarmConfig{Sigma: 1, Off: true}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "warm_start: off with sigma 1") {
		t.Errorf("off with a σ: %v", err)
	}
	c.Loop.Warm = WarmConfig{Sigma: -1}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "warm_start: sigma -1") {
		t.Errorf("negative σ: %v", err)
	}
}

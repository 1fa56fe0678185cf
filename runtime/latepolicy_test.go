package runtime

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/energyflow/edge/engines"
)

// countingSampler counts the plans it samples.
type countingSampler struct {
	*fakeSampler
	n atomic.Int64
}

func (s *countingSampler) SampleGuided(cond []float32, g *engines.Guide, dst *engines.Result) error {
	s.n.Add(1)
	return s.fakeSampler.SampleGuided(cond, g, dst)
}

// withLateNetwork gives the loaded test bundle a late_policy block taking
// over from the given number of periods.
func withLateNetwork(from int) func(*engines.Manifest) {
	return func(m *engines.Manifest) {
		m.LatePolicy = &engines.LatePolicySpec{Graph: engines.GraphEnergyGradLate, FromPeriods: from}
	}
}

// A bundle with a late network: each plan samples on it while the smoothed
// latency of the plans before spans from_periods periods or more (rounded
// up), and on the main network below that; loop.late_policy overrides the
// bundle's threshold or turns the late network off. LateNetPlans counts
// the late plans.
func TestLoopSamplesLatePlansOnTheLateNetwork(t *testing.T) {
	for _, tc := range []struct {
		name    string
		bundle  int // the bundle's from_periods
		cfg     LatePolicyConfig
		latency float64 // periods each plan takes in the second phase
		late    bool    // the second phase's plans sample on the late network
	}{
		{"the bundle's, plans 2.5 periods late", 2, LatePolicyConfig{}, 2.5, true},
		{"the bundle's, plans 1.5 periods late (2 rounded up)", 2, LatePolicyConfig{}, 1.5, true},
		{"the bundle's, plans 0.9 periods late", 2, LatePolicyConfig{}, 0.9, false},
		{"the config's 3, plans 1.5 periods late", 2, LatePolicyConfig{FromPeriods: 3}, 1.5, false},
		{"the config's 3, plans 2.5 periods late", 2, LatePolicyConfig{FromPeriods: 3}, 2.5, true},
		{"off", 2, LatePolicyConfig{Off: true}, 2.5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var latency atomic.Int64
			var main, late *countingSampler
			h := newLoopHarness(t, harnessOptions{bundle: testBundle(t), manifest: withLateNetwork(tc.bundle), lateCfg: tc.cfg,
				latency: func() time.Duration { return time.Duration(latency.Load()) },
				sampler: func(f *fakeSampler, _ int) PolicySampler { main = &countingSampler{fakeSampler: f}; return main },
				late:    func(f *fakeSampler) PolicySampler { late = &countingSampler{fakeSampler: f}; return late }})
			period := h.l.period
			plans := func(n int64, d time.Duration) { t.Helper(); h.plans(t, &latency, n, d) }
			plans(10, period/2)
			if n := late.n.Load(); n != 0 {
				t.Fatalf("plans half a period late: %d on the late network, want none", n)
			}
			plans(20, time.Duration(tc.latency*float64(period)))
			before := main.n.Load()
			plans(10, time.Duration(tc.latency*float64(period)))
			gotLate := late.n.Load() > 0 && main.n.Load() == before
			if gotLate != tc.late {
				t.Fatalf("plans %.1f periods late: %d on the late network, %d more on the main one in the last 10; want late %v",
					tc.latency, late.n.Load(), main.n.Load()-before, tc.late)
			}
			if got := h.l.Stats().LateNetPlans; got != late.n.Load() {
				t.Errorf("LateNetPlans %d, the late sampler sampled %d", got, late.n.Load())
			}
			if !tc.late {
				return
			}
			// Back in time: the main network again, once the smoothed latency follows.
			plans(20, period/2)
			n := late.n.Load()
			plans(10, period/2)
			if late.n.Load() != n {
				t.Errorf("plans back in time: %d more on the late network", late.n.Load()-n)
			}
		})
	}
}

// Refused at load, in one line: a threshold for a bundle without a late
// network, a bundle with one and no sampler for it; a negative threshold,
// and off with a threshold, by the config check.
func TestLatePolicyRefusals(t *testing.T) {
	one := func(t *testing.T, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("%v, want one line with %q", err, want)
		}
	}
	_, err := newLoop(t, harnessOptions{bundle: testBundle(t), lateCfg: LatePolicyConfig{FromPeriods: 2}})
	one(t, err, "has no late network")
	_, err = newLoop(t, harnessOptions{bundle: testBundle(t), manifest: withLateNetwork(2)})
	one(t, err, "no sampler for it")
	if _, err := newLoop(t, harnessOptions{bundle: testBundle(t), manifest: withLateNetwork(2), lateCfg: LatePolicyConfig{Off: true}}); err != nil {
		t.Errorf("off, without a late sampler: %v", err)
	}
	c := DefaultConfig()
	c.Loop.Late.FromPeriods = -1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "loop: late_policy.from_periods: -1: want 0 (the bundle's)") {
		t.Errorf("a negative from_periods: %v", err)
	}
	c.Loop.Late = LatePolicyConfig{FromPeriods: 3, Off: true}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "loop: late_policy: off with from_periods 3") {
		t.Errorf("off with a threshold: %v", err)
	}
}

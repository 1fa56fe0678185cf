package runtime

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/energyflow/edge/calibration"
	"github.com/energyflow/edge/engines"
)

func TestPlanLatenessWarnsPastTheLimit(t *testing.T) {
	const period = 100 * time.Millisecond
	ms := func(v ...int) []time.Duration {
		d := make([]time.Duration, len(v))
		for i, x := range v {
			d[i] = time.Duration(x) * time.Millisecond
		}
		return d
	}
	rep := func(n, v int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = v
		}
		return s
	}
	cat := func(parts ...[]int) []int {
		var s []int
		for _, p := range parts {
			s = append(s, p...)
		}
		return s
	}
	cases := []struct {
		name    string
		limit   float64
		plans   []time.Duration
		wantP90 float64 // NaN: not judged yet
		events  []int   // the non-zero results of observe, in order
		over    bool
	}{
		{"too few plans to judge", 1.5, ms(cat([]int{900}, rep(9, 300))...), math.NaN(), nil, false},
		// the first plan (session set-up) is left out: nine slow ones are not ten
		{"the first plan is left out", 1.5, ms(cat([]int{900}, rep(10, 100))...), 1.0, nil, false},
		{"on time", 1.5, ms(rep(40, 90)...), 0.9, nil, false},
		// 10 plans: the p90 is the second largest; one slow plan is not enough
		{"one slow plan in ten", 1.5, ms(cat([]int{50}, rep(9, 90), []int{400})...), 0.9, nil, false},
		{"two slow plans in ten", 1.5, ms(cat([]int{50}, rep(8, 90), []int{400, 400})...), 4.0, []int{1}, true},
		{"late under load", 1.5, ms(cat([]int{50}, rep(20, 90), rep(30, 230))...), 2.3, []int{1}, true},
		// back under limit − margin/2 = 1.25 once the window has forgotten the load
		{"recovers", 1.5, ms(cat([]int{50}, rep(20, 230), rep(64, 90))...), 0.9, []int{1, -1}, false},
		// between limit − margin/2 and the limit it stays over: no flapping
		{"hovering just under the limit stays over", 1.5, ms(cat([]int{50}, rep(20, 230), rep(64, 140))...), 1.4, []int{1}, true},
		{"no limit: tracked, never warned", 0, ms(cat([]int{50}, rep(30, 900))...), 9.0, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPlanLateness(period, c.limit)
			var events []int
			for _, d := range c.plans {
				if e := p.observe(d); e != 0 {
					events = append(events, e)
				}
			}
			if math.IsNaN(c.wantP90) != math.IsNaN(p.p90) || !math.IsNaN(c.wantP90) && math.Abs(p.p90-c.wantP90) > 1e-9 {
				t.Errorf("p90 = %v periods, want %v", p.p90, c.wantP90)
			}
			if !slices.Equal(events, c.events) {
				t.Errorf("events %v, want %v", events, c.events)
			}
			if p.over != c.over {
				t.Errorf("over = %v, want %v", p.over, c.over)
			}
		})
	}
}

func TestPlanLateLimitSources(t *testing.T) {
	calibrated := func(rate, p90ms float64) *engines.Manifest {
		return &engines.Manifest{Calibration: &calibration.Block{ClosedLoop: &calibration.ClosedLoop{RateHz: rate,
			PlanLatency: &calibration.PlanLatency{P50Ms: p90ms / 2, P90Ms: p90ms, Plans: 100, Episodes: 10, Measured: calibration.PlanLatencyFromCalibration}}}}
	}
	cases := []struct {
		name       string
		configured float64
		m          *engines.Manifest
		want       float64
		from       string
	}{
		{"configured wins over the calibration", 2.5, calibrated(10, 100), 2.5, "loop.plan_late_limit"},
		{"negative turns it off", -1, calibrated(10, 100), 0, "off"},
		{"the calibration's p90 plus the margin", 0, calibrated(10, 120), 1.2 + PlanLateMargin, "calibration"},
		{"at the calibration's own rate", 0, calibrated(20, 100), 2 + PlanLateMargin, "calibration"},
		{"no calibration", 0, &engines.Manifest{}, 0, "none"},
		{"a calibration without plan latency", 0, &engines.Manifest{Calibration: &calibration.Block{ClosedLoop: &calibration.ClosedLoop{RateHz: 10}}}, 0, "none"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Loop.PlanLateLimit = c.configured
			got, from := planLateLimit(&cfg, c.m)
			if math.Abs(got-c.want) > 1e-9 || !strings.HasPrefix(from, c.from) {
				t.Errorf("planLateLimit = %v (%q), want %v (%q…)", got, from, c.want, c.from)
			}
		})
	}
}

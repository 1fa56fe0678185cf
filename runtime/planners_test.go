package runtime

import (
	"log/slog"
	"testing"
	"time"
)

// nextPlanner starts the first planner on the replan margin as one planner
// always did, and another only while one plan takes longer than the
// margin can cover, spaced latency/N apart.
func TestNextPlanner(t *testing.T) {
	const period = 50 * time.Millisecond
	t0 := time.Unix(1000, 0)
	cases := []struct {
		name      string
		planners  int
		busy      []bool        // per planner
		window    int           // actions left in the committed window
		latency   time.Duration // smoothed plan latency
		sinceLast time.Duration // since the newest plan started
		want      int           // index of the planner started; −1: none
	}{
		{"one planner, window above the margin", 1, []bool{false}, 4, 40 * time.Millisecond, 0, -1},
		{"one planner, on the margin", 1, []bool{false}, 1, 40 * time.Millisecond, 0, 0},
		{"one planner, busy", 1, []bool{true}, 0, 230 * time.Millisecond, 10 * period, -1},
		{"two, none in flight: the first", 2, []bool{false, false}, 0, 230 * time.Millisecond, 0, 0},
		{"two, a fast plan in flight: wait for it", 2, []bool{true, false}, 0, 140 * time.Millisecond, 10 * period, -1},
		{"two, a slow plan in flight, too soon", 2, []bool{true, false}, 0, 230 * time.Millisecond, period, -1},
		{"two, a slow plan in flight, latency/2 after it", 2, []bool{true, false}, 0, 230 * time.Millisecond, 2 * period, 1},
		{"two, the second in flight: the first again", 2, []bool{false, true}, 0, 230 * time.Millisecond, 3 * period, 0},
		{"two, both in flight", 2, []bool{true, true}, 0, 230 * time.Millisecond, 10 * period, -1},
		{"three, a third of the latency", 3, []bool{true, false, false}, 0, 230 * time.Millisecond, 2 * period, 1},
		{"four, never closer than a period", 4, []bool{true, false, false, false}, 0, 230 * time.Millisecond, period / 4, -1},
		{"two, slow plan, window above the margin", 2, []bool{true, false}, 4, 230 * time.Millisecond, 10 * period, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := &Loop{period: period, ta: 4, latEWMA: c.latency, chunk: NewChunk(8, 1), lastStart: t0}
			l.chunk.Fill(make([]float32, 8), 0, c.window, 0, t0, period, 1)
			for _, b := range c.busy {
				l.plans = append(l.plans, &worker[inferJob]{job: &inferJob{}, busy: b})
			}
			got := l.nextPlanner(t0.Add(c.sinceLast))
			want := (*worker[inferJob])(nil)
			if c.want >= 0 {
				want = l.plans[c.want]
			}
			if got != want {
				t.Errorf("nextPlanner = %p, want planner %d (%p)", got, c.want, want)
			}
		})
	}
}

// A plan that lands after one planned from a newer observation is dropped;
// the newer one stays committed.
func TestLandDropsAnOvertakenPlan(t *testing.T) {
	const period = 50 * time.Millisecond
	t0 := time.Unix(1000, 0)
	l := &Loop{period: period, ta: 4, tp: 8, dim: 1, chunk: NewChunk(8, 1), pred: make([]float32, 8),
		prevPlan: make([]float32, 8), late: newPlanLateness(period, -1), log: slog.New(slog.DiscardHandler)}
	plan := func(obs time.Time, v float32) *inferJob {
		j := &inferJob{obsTime: obs, planTime: obs, latency: 5 * period}
		j.res.Actions = make([]float32, 8)
		for i := range j.res.Actions {
			j.res.Actions[i] = v
		}
		return j
	}
	l.land(t0.Add(8*period), plan(t0.Add(3*period), 2))
	l.land(t0.Add(9*period), plan(t0, 1)) // the older observation lands last
	if !l.predTime.Equal(t0.Add(3 * period)) {
		t.Fatalf("committed the plan of %v, want the newer observation's", l.predTime.Sub(t0))
	}
	if got := l.Stats().Chunks; got != 1 {
		t.Errorf("%d chunks committed, want 1", got)
	}
	if got := l.chunk.Remaining()[0]; got != 2 {
		t.Errorf("committed action %v, want the newer plan's 2", got)
	}
	l.land(t0.Add(10*period), plan(t0.Add(4*period), 3))
	if got := l.Stats().Chunks; got != 2 {
		t.Errorf("a newer plan: %d chunks committed, want 2", got)
	}
}

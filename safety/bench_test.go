package safety

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/energyflow/edge/actuators"
)

// timingArm records when the last Halt arrived.
type timingArm struct {
	fakeArm
	haltAt atomic.Int64 // monotonic ns since base
	base   time.Time
}

func (a *timingArm) Halt(ctx context.Context) error {
	a.haltAt.Store(int64(time.Since(a.base)))
	return a.fakeArm.Halt(ctx)
}

// rearm accepts a reset on the next tick without a Reset goroutine.
func rearm(g *Guard) {
	g.mu.Lock()
	g.pending = &resetRequest{actor: "bench", done: make(chan error, 1)}
	g.mu.Unlock()
}

// BenchmarkStopLatencyFakeArm measures, per iteration, the time from the
// Tick call that carries the tripping score (the third score over the
// threshold under the default 3-of-5 rule) to the arm's Halt call, against
// the in-package fake arm: the gate's own share of the stop latency. The
// whole path to the wire is BenchmarkStopLatencySimArm (simarm_test.go).
// Reports the median, p99 and max.
//
//	go test -run '^$' -bench StopLatencyFakeArm -benchtime 2000x ./safety/
func BenchmarkStopLatencyFakeArm(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Energy.Scores = []ScoreConfig{{Name: "energy", Threshold: f64(10)}}
	cfg.Limits.MaxVelocity = []float64{1, 1, 1, 1, 1, 1, 1}
	cfg.Limits.MaxAcceleration = []float64{5, 5, 5, 5, 5, 5, 5}
	arm := &timingArm{base: time.Now()}
	g, err := New(arm, cfg, nil, Options{})
	if err != nil {
		b.Fatal(err)
	}
	st := actuators.State{Position: make([]float64, 7), Enabled: true}
	in := Inputs{Arm: &st, Command: actuators.Command{Velocity: make([]float64, 7)}}
	now := t0
	ctx := context.Background()
	tick := func(score float64) Decision {
		now = now.Add(period)
		in.Tick++
		in.Now, in.Deadline, in.Camera, st.Time = now, now, now, now
		in.Scores = Scores{score, 0}
		d, _ := g.Tick(ctx, &in)
		return d
	}
	lat := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		rearm(g)
		tick(1)
		for k := 0; k < 5; k++ {
			tick(1)
		}
		tick(50)
		tick(50)
		start := int64(time.Since(arm.base))
		if d := tick(50); d.State != Stopped {
			b.Fatalf("no trip: %+v", d)
		}
		lat = append(lat, time.Duration(arm.haltAt.Load()-start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "ns-median-stop")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "ns-p99-stop")
	b.ReportMetric(float64(lat[len(lat)-1].Nanoseconds()), "ns-max-stop")
}

// BenchmarkTickRunning is the steady-state cost of one gated tick with every
// limit configured.
func BenchmarkTickRunning(b *testing.B) {
	cfg := testConfig()
	softLimits(&cfg)
	cfg.Limits.MaxAcceleration = []float64{10, 10, 10}
	cfg.Limits.MaxJerk = []float64{100, 100, 100}
	cfg.Limits.MaxDelta = []float64{0.5, 0.5, 0.5}
	r := newRig(b, cfg)
	r.arm.record = false
	r.armGate()
	in := r.next()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		in.Tick++
		in.Now = in.Now.Add(period)
		in.Deadline, in.Camera, r.st.Time = in.Now, in.Now, in.Now
		r.vel[0] = float64(i%5) - 2
		if _, err := r.g.Tick(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}

package safety_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/energyflow/edge/actuators"
	"github.com/energyflow/edge/actuators/simarm"
	"github.com/energyflow/edge/safety"
)

// stepClock is a fake clock shared by the simulated arm, its Modbus client
// and the gate: the physics advance only when the test moves it.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// End to end through the Go simulated arm over Modbus TCP, on a fake
// clock: a policy drives joint 0 out of the region its score calls in
// distribution, the energy stop trips, a retrace recovery drives the arm
// back along the path it came, the score falls under the threshold and
// the gate re-arms by itself.
func TestRecoveryRetraceThroughSimulatedArm(t *testing.T) {
	const period = 100 * time.Millisecond
	clk := &stepClock{now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	m, err := actuators.ParseMap([]byte(simMap))
	if err != nil {
		t.Fatal(err)
	}
	sim, err := simarm.New(simarm.Config{Map: m, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	arm, err := actuators.NewTCP(m, actuators.Config{Address: sim.Addr(), Timeout: time.Second}, actuators.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { arm.Close() })
	cfg := safety.DefaultConfig() // n_of_m 3 of 5; recovery: a quarter of the speed, 30 s
	cfg.Energy.Scores = []safety.ScoreConfig{{Name: "energy", Threshold: ptr(10.0)}}
	cfg.Limits.MaxVelocity = []float64{1, 1, 1, 1, 1, 1, 1}
	cfg.Watchdog.CameraMaxAge = 0
	events := make(chan safety.Event, 64)
	g, err := safety.New(arm, cfg, nil, safety.Options{Clock: clk, Events: events, Period: period})
	if err != nil {
		t.Fatal(err)
	}

	// The "state score": 20 per radian of joint 0 away from its start, so
	// the threshold 10 lies at 0.5 rad.
	var st actuators.State
	vel := make([]float64, 7)
	var n int64
	ctx := context.Background()
	tick := func() (safety.Decision, float64) {
		t.Helper()
		now := clk.advance(period)
		err := arm.State(ctx, &st)
		score := 20 * st.Position[0]
		n++
		d, terr := g.Tick(ctx, &safety.Inputs{Tick: n, Now: now, Deadline: now, Scores: safety.Scores{score, 0, 0},
			Arm: &st, ArmErr: err, Command: actuators.Command{Velocity: vel}})
		if terr != nil {
			t.Fatalf("tick %d: %v", n, terr)
		}
		return d, score
	}
	tick()
	done := make(chan error, 1)
	go func() { done <- g.Reset(ctx, "test") }()
	for !g.Status().ResetPending {
		time.Sleep(50 * time.Microsecond)
	}
	tick()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// The policy drives joint 0 at 0.5 rad/s until the stop trips.
	vel[0] = 0.5
	var d safety.Decision
	for i := 0; i < 40; i++ {
		if d, _ = tick(); d.State == safety.Stopped {
			break
		}
	}
	if d.Reason.Kind != safety.KindEnergy {
		t.Fatalf("no energy stop: %+v", d)
	}
	vel[0] = 0
	tick()
	far := sim.Snapshot().Position[0]
	if far < 0.6 || sim.Snapshot().Enabled {
		t.Fatalf("stopped at joint 0 = %v (enabled %v), want beyond 0.6 rad and halted", far, sim.Snapshot().Enabled)
	}
	// A plain reset is refused: the arm stands out of distribution.
	go func() { done <- g.Reset(ctx, "test") }()
	for !g.Status().ResetPending {
		time.Sleep(50 * time.Microsecond)
	}
	tick()
	if err := <-done; err == nil {
		t.Fatal("reset accepted out of distribution")
	}

	// Retrace.
	go func() { done <- g.Recover(ctx, "operator", safety.RecoveryRetrace) }()
	for !g.Status().RecoveryPending {
		time.Sleep(50 * time.Microsecond)
	}
	tick()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var score float64
	ticks := 0
	for ticks = 1; ticks < 300; ticks++ {
		if d, score = tick(); d.State != safety.Recovering {
			break
		}
		if d.Command.Velocity[0] >= 0 {
			t.Fatalf("retrace tick %d commands joint 0 at %v, want back (negative)", ticks, d.Command.Velocity[0])
		}
	}
	if d.State != safety.Running {
		t.Fatalf("after %d ticks: %v (%s), want re-armed", ticks, d.State, d.Reason.Message)
	}
	back := sim.Snapshot().Position[0]
	if !(back < 0.5) || !(back < far-0.1) || score >= 10 {
		t.Fatalf("re-armed at joint 0 = %v (stopped at %v), score %v", back, far, score)
	}
	// At a quarter of the speed the way back takes four times as long:
	// from 0.6+ rad to under 0.5 rad at 0.125 rad/s is 8+ ticks, and the
	// 3-of-5 window needs 3 more under the threshold.
	if ticks < 10 {
		t.Fatalf("re-armed after %d ticks: faster than a quarter of the speed", ticks)
	}
	var ends []safety.Event
	for len(events) > 0 {
		if e := <-events; e.Type == safety.EventRecoveryEnd {
			ends = append(ends, e)
		}
	}
	if len(ends) != 1 || ends[0].End != safety.EndRearmed {
		t.Fatalf("recovery ends %+v", ends)
	}
	if s := sim.Snapshot(); !s.Enabled || s.Fault != 0 {
		t.Fatalf("sim after re-arming: %+v", s)
	}
	t.Logf("stopped at %.3f rad, re-armed at %.3f rad (score %.2f) after %d recovery ticks", far, back, score, ticks)
}

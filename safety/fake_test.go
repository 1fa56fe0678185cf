package safety

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/energyflow/edge/actuators"
)

// fakeArm records every call and checks the gate's invariants as a real
// controller would see them: no command while enable is dropped.
type fakeArm struct {
	mu         sync.Mutex
	record     bool
	calls      []armCall
	enabled    bool
	commands   int
	halts      int
	enables    int
	cmdErr     error
	haltErr    error
	enableErr  error
	violations []string
}

type armCall struct {
	op  string // "command", "halt", "enable"
	cmd actuators.Command
}

var _ actuators.Arm = (*fakeArm)(nil)

func newFakeArm() *fakeArm { return &fakeArm{record: true} }

func (a *fakeArm) Command(_ context.Context, c actuators.Command) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.commands++
	if !a.enabled {
		a.violations = append(a.violations, fmt.Sprintf("command %v while disabled", c.Velocity))
	}
	if a.record {
		a.calls = append(a.calls, armCall{op: "command", cmd: actuators.Command{Velocity: append([]float64(nil), c.Velocity...), Gripper: c.Gripper}})
	}
	return a.cmdErr
}

func (a *fakeArm) State(context.Context, *actuators.State) error {
	return errors.New("fake arm: State is not used by the gate")
}

func (a *fakeArm) Enable(context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.enables++
	if a.record {
		a.calls = append(a.calls, armCall{op: "enable"})
	}
	if a.enableErr != nil {
		return a.enableErr
	}
	a.enabled = true
	return nil
}

func (a *fakeArm) Halt(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ctx.Err() != nil {
		a.violations = append(a.violations, "halt got a cancelled context")
	}
	a.halts++
	a.enabled = false
	if a.record {
		a.calls = append(a.calls, armCall{op: "halt"})
	}
	return a.haltErr
}

func (a *fakeArm) lastOp() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.calls) == 0 {
		return ""
	}
	return a.calls[len(a.calls)-1].op
}

func (a *fakeArm) counts() (commands, halts, enables int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.commands, a.halts, a.enables
}

func (a *fakeArm) checkViolations(t testing.TB) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, v := range a.violations {
		t.Errorf("arm saw: %s", v)
	}
}

// fakeClock is advanced by tests; it never sleeps.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

const period = 100 * time.Millisecond

func f64(x float64) *float64 { return &x }

// testConfig: 3 axes, energy threshold 10 from the config, 2-of-3 rule
// (the default is 3 of 5; 2 of 3 keeps the trip tables short).
func testConfig() Config {
	c := DefaultConfig()
	c.Energy.Scores = []ScoreConfig{{Name: "energy", Threshold: f64(10)}}
	c.Energy.Rule.NOfM = NOfMConfig{N: 2, M: 3}
	c.Limits.MaxVelocity = []float64{1, 1, 1}
	c.Limits.Gripper = GripperLimits{Min: -1, Max: 1}
	c.Events.TraceBefore = 8
	c.Events.TraceAfter = 2
	return c
}

// rig drives a Guard with fresh inputs on a fake time line.
type rig struct {
	t      testing.TB
	g      *Guard
	arm    *fakeArm
	clock  *fakeClock
	events chan Event
	st     actuators.State
	in     Inputs
	n      int64
	now    time.Time
	vel    []float64
}

func newRig(t testing.TB, cfg Config) *rig { return newRigCal(t, cfg, nil) }

func newRigCal(t testing.TB, cfg Config, cal *Calibration) *rig {
	t.Helper()
	r := &rig{t: t, arm: newFakeArm(), clock: &fakeClock{now: t0}, events: make(chan Event, 64), now: t0}
	g, err := New(r.arm, cfg, cal, Options{Clock: r.clock, Events: r.events})
	if err != nil {
		t.Fatal(err)
	}
	r.g = g
	axes := len(cfg.Limits.MaxVelocity)
	r.st = actuators.State{Position: make([]float64, axes), Velocity: make([]float64, axes), Enabled: true}
	r.vel = make([]float64, axes)
	return r
}

// next prepares fresh, in-distribution inputs for the next tick.
func (r *rig) next() *Inputs {
	r.n++
	r.now = r.now.Add(period)
	r.clock.set(r.now)
	r.st.Time = r.now.Add(-time.Millisecond)
	r.in = Inputs{
		Tick:     r.n,
		Deadline: r.now,
		Now:      r.now,
		Scores:   Scores{1, 0},
		Camera:   r.now.Add(-10 * time.Millisecond),
		Arm:      &r.st,
		Command:  actuators.Command{Velocity: r.vel, Gripper: 0},
	}
	return &r.in
}

// advance moves inputs reused across ticks (the allocation tests) one
// period on, with fresh deadline, camera and arm state times.
func (r *rig) advance(in *Inputs) {
	in.Tick++
	in.Now = in.Now.Add(period)
	in.Deadline = in.Now
	in.Camera = in.Now
	r.st.Time = in.Now
}

func (r *rig) tick(mod func(*Inputs)) Decision {
	r.t.Helper()
	in := r.next()
	if mod != nil {
		mod(in)
	}
	d, _ := r.g.Tick(context.Background(), in)
	return d
}

// arm resets the gate with fresh inputs and runs one tick.
func (r *rig) armGate() {
	r.t.Helper()
	r.tick(nil)
	if err := r.resetAt(nil); err != nil {
		r.t.Fatalf("reset: %v", err)
	}
	if s := r.g.Status().State; s != Running {
		r.t.Fatalf("state after reset = %v", s)
	}
	r.drain()
}

// resetAt requests a reset and ticks once (with mod) to decide it.
func (r *rig) resetAt(mod func(*Inputs)) error {
	r.t.Helper()
	return r.resetOver(mod)
}

// resetOver requests a reset and ticks with each of mods in turn until it
// is decided; it fails the test when the reset is still pending after them.
func (r *rig) resetOver(mods ...func(*Inputs)) error {
	r.t.Helper()
	done := make(chan error, 1)
	go func() { done <- r.g.Reset(context.Background(), "tester") }()
	for !r.g.Status().ResetPending {
		time.Sleep(50 * time.Microsecond) // waits for the goroutine, not for time to pass
	}
	for _, mod := range mods {
		r.tick(mod)
		if !r.g.Status().ResetPending {
			return <-done
		}
	}
	r.t.Fatalf("reset still pending after %d ticks", len(mods))
	return nil
}

func (r *rig) drain() []Event {
	var evs []Event
	for {
		select {
		case e := <-r.events:
			evs = append(evs, e)
		default:
			return evs
		}
	}
}

func nan() float64 { return math.NaN() }

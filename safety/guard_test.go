package safety

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/energyflow/edge/actuators"
)

func TestStartsStoppedAndArmsOnReset(t *testing.T) {
	r := newRig(t, testConfig())
	d := r.tick(nil)
	if d.State != Stopped || d.Reason.Kind != KindStartup || !d.Halted {
		t.Fatalf("first tick: %+v, want stopped (startup) and halted", d)
	}
	if c, _, _ := r.arm.counts(); c != 0 {
		t.Fatalf("%d commands written before arming", c)
	}
	if err := r.resetAt(nil); err != nil {
		t.Fatal(err)
	}
	r.vel[0] = 0.5
	d = r.tick(nil)
	if d.State != Running || d.Halted || d.Command.Velocity[0] != 0.5 {
		t.Fatalf("after reset: %+v", d)
	}
	if got := r.arm.lastOp(); got != "command" {
		t.Fatalf("last arm op %q, want command", got)
	}
	c := r.g.Counters()
	if c.Resets != 1 || c.Trips[KindStartup] != 0 {
		t.Fatalf("counters %+v", c)
	}
	r.arm.checkViolations(t)
}

// Every stop reason: the tick that sees the cause writes the halt, the gate
// latches with that reason, counts it and publishes it with the trace.
func TestEveryStopReasonTrips(t *testing.T) {
	errEOF := errors.New("EOF")
	cases := []struct {
		kind Kind
		cfg  func(*Config)
		mod  func(r *rig, in *Inputs)
	}{
		{KindEnergy, nil, func(r *rig, in *Inputs) { in.Scores[ScoreEnergy] = 50 }}, // 2 of 3: second tick trips
		{KindNaN, nil, func(r *rig, in *Inputs) { in.Command.Velocity = []float64{0, math.NaN(), 0} }},
		{KindNaN, nil, func(r *rig, in *Inputs) { in.Command.Gripper = math.Inf(1) }},
		{KindNaN, nil, func(r *rig, in *Inputs) { in.Scores[ScoreEnergy] = math.Inf(1) }},
		{KindInvalidInput, nil, func(r *rig, in *Inputs) { in.Command.Velocity = []float64{0, 0} }},
		{KindScoreStale, nil, func(r *rig, in *Inputs) { in.Scores = NoScores() }}, // 3rd missing tick is 300ms > 250ms
		{KindInferenceDeadline, nil, func(r *rig, in *Inputs) { in.InferenceStarted = in.Now.Add(-600 * time.Millisecond) }},
		{KindCameraStale, nil, func(r *rig, in *Inputs) { in.Camera = in.Now.Add(-time.Second) }},
		{KindArmStale, nil, func(r *rig, in *Inputs) { r.st.Time = in.Now.Add(-time.Second) }},
		{KindArmDisconnected, nil, func(r *rig, in *Inputs) { r.st.Time = in.Now.Add(-time.Second); in.ArmErr = errEOF }},
		{KindArmDisconnected, nil, func(r *rig, in *Inputs) {
			r.g.OnArmEvent(actuators.Event{State: actuators.StateDisconnected, Err: errEOF}) // at once, state still fresh
		}},
		{KindArmWrite, nil, func(r *rig, in *Inputs) { r.arm.cmdErr = errEOF }},
		{KindArmFault, nil, func(r *rig, in *Inputs) { r.st.Fault = 0x0002 }},
		{KindEStop, nil, func(r *rig, in *Inputs) { r.st.EStop = true }},
		{KindArmDisabled, nil, func(r *rig, in *Inputs) { r.st.Enabled = false }},
		{KindLoopLate, nil, func(r *rig, in *Inputs) { in.Deadline = in.Now.Add(-60 * time.Millisecond) }},
		{KindLoopLate, nil, func(r *rig, in *Inputs) { in.Missed = 1; in.Deadline = in.Now.Add(-110 * time.Millisecond) }},
		{KindLoopLate, nil, func(r *rig, in *Inputs) { in.Missed = 1; in.Deadline = time.Time{} }},
		{KindNaN, func(c *Config) { softLimits(c) }, func(r *rig, in *Inputs) { r.st.Position[1] = math.NaN() }},
		{KindInvalidInput, func(c *Config) { softLimits(c) }, func(r *rig, in *Inputs) { r.st.Position = r.st.Position[:1] }},
		{KindTracking, func(c *Config) { c.Tracking.Enabled = true }, func(r *rig, in *Inputs) { r.st.Position[0] += 0.05 }},
		{KindNaN, func(c *Config) { c.Tracking.Enabled = true }, func(r *rig, in *Inputs) { r.st.Position[2] = math.Inf(-1) }},
		{KindInvalidInput, func(c *Config) { c.Tracking.Enabled = true }, func(r *rig, in *Inputs) { r.st.Position = nil }},
	}
	for _, tc := range cases {
		t.Run(tc.kind.String(), func(t *testing.T) {
			cfg := testConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			r := newRig(t, cfg)
			r.armGate()
			r.tick(nil)
			var d Decision
			ticks := 0
			for ticks = 1; ticks <= 5; ticks++ {
				before, _, _ := r.arm.counts()
				d = r.tick(func(in *Inputs) { tc.mod(r, in) })
				if d.State == Stopped {
					after, _, _ := r.arm.counts()
					if tc.kind != KindArmWrite && after != before {
						t.Fatalf("a command was written on the tripping tick")
					}
					break
				}
			}
			if d.State != Stopped || d.Reason.Kind != tc.kind || !d.Halted {
				t.Fatalf("after %d ticks: state %v reason %v (%s) halted %v; want stopped by %v", ticks, d.State, d.Reason.Kind, d.Reason.Message, d.Halted, tc.kind)
			}
			if r.arm.lastOp() != "halt" {
				t.Fatalf("last arm op %q, want halt", r.arm.lastOp())
			}
			if d.Reason.Message == "" || d.Reason.Tick != r.n {
				t.Fatalf("reason %+v", d.Reason)
			}
			if got := r.g.Counters().Trips[tc.kind]; got != 1 {
				t.Fatalf("trips[%v] = %d", tc.kind, got)
			}
			evs := r.drain()
			if len(evs) != 1 || evs[0].Type != EventTrip || evs[0].Reason.Kind != tc.kind || len(evs[0].Trace) == 0 {
				t.Fatalf("events %+v", evs)
			}
			if last := evs[0].Trace[len(evs[0].Trace)-1]; last.Tick != r.n {
				t.Fatalf("trace ends at tick %d, want the tripping tick %d", last.Tick, r.n)
			}
			// Latched: later ticks with clean inputs write only halts.
			r.arm.cmdErr = nil
			cmds, _, _ := r.arm.counts()
			for i := 0; i < 3; i++ {
				if d := r.tick(nil); d.State != Stopped || !d.Halted || d.Command.Velocity != nil {
					t.Fatalf("not latched: %+v", d)
				}
			}
			if c, _, _ := r.arm.counts(); c != cmds {
				t.Fatal("command written while latched")
			}
			r.arm.checkViolations(t)
		})
	}
}

func softLimits(c *Config) {
	c.Limits.SoftLower = []float64{-1, -1, -1}
	c.Limits.SoftUpper = []float64{1, 1, 1}
	c.Limits.KPosition = []float64{2, 2, 2}
}

func TestOperatorStop(t *testing.T) {
	r := newRig(t, testConfig())
	r.armGate()
	r.tick(nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Stop must halt even with a cancelled context (SIGTERM path)
	if err := r.g.Stop(ctx, "alice", "STOP button"); err != nil {
		t.Fatal(err)
	}
	if r.arm.lastOp() != "halt" {
		t.Fatal("Stop did not halt at once")
	}
	st := r.g.Status()
	if st.State != Stopped || st.Reason.Kind != KindOperator || st.Reason.Actor != "alice" || !strings.Contains(st.Reason.Message, "STOP button") {
		t.Fatalf("status %+v", st)
	}
	if d := r.tick(nil); d.State != Stopped {
		t.Fatal("operator stop did not latch")
	}
	// Stop again: still halts, reason kept, counted once.
	if err := r.g.Stop(context.Background(), "bob", "again"); err != nil {
		t.Fatal(err)
	}
	if c := r.g.Counters().Trips[KindOperator]; c != 1 {
		t.Fatalf("operator trips %d", c)
	}
	if r.g.Status().Reason.Actor != "alice" {
		t.Fatal("second stop replaced the first reason")
	}
	// Nothing persists: reset accepted.
	if err := r.resetAt(nil); err != nil {
		t.Fatal(err)
	}
	r.arm.checkViolations(t)
}

// A reset is refused while the cause persists and accepted once it is gone.
func TestResetRefusedWhileCausePersists(t *testing.T) {
	cases := []struct {
		kind  Kind
		cause func(r *rig, in *Inputs)
		clear func(r *rig)
	}{
		{KindEnergy, func(r *rig, in *Inputs) { in.Scores[ScoreEnergy] = 50 }, nil},
		{KindScoreStale, func(r *rig, in *Inputs) { in.Scores = NoScores() }, nil},
		{KindInferenceDeadline, func(r *rig, in *Inputs) { in.InferenceStarted = in.Now.Add(-time.Second) }, nil},
		{KindCameraStale, func(r *rig, in *Inputs) { in.Camera = in.Now.Add(-time.Second) }, nil},
		{KindArmStale, func(r *rig, in *Inputs) { r.st.Time = in.Now.Add(-time.Second) }, nil},
		{KindArmDisconnected, func(r *rig, in *Inputs) { r.st.Time = in.Now.Add(-time.Second); in.ArmErr = errors.New("broken pipe") }, nil},
		{KindArmDisconnected, func(r *rig, in *Inputs) { r.g.OnArmEvent(actuators.Event{State: actuators.StateDisconnected}) },
			func(r *rig) { r.g.OnArmEvent(actuators.Event{State: actuators.StateConnected}) }},
		{KindArmFault, func(r *rig, in *Inputs) { r.st.Fault = 1 }, func(r *rig) { r.st.Fault = 0 }},
		{KindEStop, func(r *rig, in *Inputs) { r.st.EStop = true }, func(r *rig) { r.st.EStop = false }},
		{KindLoopLate, func(r *rig, in *Inputs) { in.Missed = 2; in.Deadline = in.Now.Add(-250 * time.Millisecond) }, nil},
	}
	for _, tc := range cases {
		t.Run(tc.kind.String(), func(t *testing.T) {
			r := newRig(t, testConfig())
			r.armGate()
			for i := 0; i < 5 && r.g.Status().State == Running; i++ {
				r.tick(func(in *Inputs) { tc.cause(r, in) })
			}
			if st := r.g.Status(); st.Reason.Kind != tc.kind {
				t.Fatalf("tripped by %v, want %v", st.Reason.Kind, tc.kind)
			}
			r.drain()
			err := r.resetAt(func(in *Inputs) { tc.cause(r, in) })
			if !errors.Is(err, ErrResetRefused) || !strings.Contains(err.Error(), tc.kind.String()) {
				t.Fatalf("reset with the cause present: %v", err)
			}
			if r.g.Status().State != Stopped {
				t.Fatal("refused reset changed the state")
			}
			evs := r.drain()
			if len(evs) != 1 || evs[0].Type != EventResetRefused || evs[0].Actor != "tester" {
				t.Fatalf("events %+v", evs)
			}
			if tc.clear != nil {
				tc.clear(r)
			}
			// The energy rule needs its window clear of exceedances (2 of 3).
			for i := 0; i < 3; i++ {
				r.tick(nil)
			}
			if err := r.resetAt(nil); err != nil {
				t.Fatalf("reset after the cause cleared: %v", err)
			}
			if r.g.Status().State != Running {
				t.Fatal("not running after an accepted reset")
			}
			c := r.g.Counters()
			if c.ResetsRefused != 1 || c.Resets != 2 {
				t.Fatalf("counters %+v", c)
			}
			if evs := r.drain(); len(evs) == 0 || evs[len(evs)-1].Type != EventReset || evs[len(evs)-1].Reason.Kind != tc.kind {
				t.Fatalf("events %+v", evs)
			}
			r.arm.checkViolations(t)
		})
	}
}

func TestResetEnergyStricterThanRule(t *testing.T) {
	r := newRig(t, testConfig())
	r.armGate()
	r.tick(func(in *Inputs) { in.Scores[ScoreEnergy] = 50 })
	r.tick(func(in *Inputs) { in.Scores[ScoreEnergy] = 50 })
	if r.g.Status().Reason.Kind != KindEnergy {
		t.Fatal("no energy trip")
	}
	for i := 0; i < 3; i++ {
		r.tick(nil)
	}
	// The rule is clear, but a single score over the threshold still refuses.
	err := r.resetAt(func(in *Inputs) { in.Scores[ScoreEnergy] = 11 })
	if !errors.Is(err, ErrResetRefused) || !strings.Contains(err.Error(), "still above") {
		t.Fatalf("got %v", err)
	}
}

// TestResetWaitsForAScoredTick: re-scores land on some ticks and not on
// others, so a reset decided on a tick without a fresh score waits for the
// next tick that has one, and is refused with score_stale when the score
// watchdog's score_max_age (250 ms, 100 ms ticks) passes without one.
func TestResetWaitsForAScoredTick(t *testing.T) {
	noScore := func(in *Inputs) { in.Scores = NoScores() }
	scored := func(in *Inputs) { in.Scores[ScoreEnergy] = 1 }
	high := func(in *Inputs) { in.Scores[ScoreEnergy] = 11 }
	cases := []struct {
		name string
		mods []func(*Inputs)
		want string // "" = accepted, else in the refusal
	}{
		{"scored at once", []func(*Inputs){scored}, ""},
		{"scored two ticks later", []func(*Inputs){noScore, noScore, scored}, ""},
		{"scored above the threshold", []func(*Inputs){noScore, high}, "still above"},
		{"never scored", []func(*Inputs){noScore, noScore, noScore, noScore, noScore}, "score_stale"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, testConfig())
			r.armGate()
			if err := r.g.Stop(context.Background(), "tester", "test"); err != nil {
				t.Fatal(err)
			}
			r.tick(nil)
			r.drain()
			err := r.resetOver(tc.mods...)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "":
				if s := r.g.Status().State; s != Running {
					t.Fatalf("state %v after the reset", s)
				}
			case !errors.Is(err, ErrResetRefused) || !strings.Contains(err.Error(), tc.want):
				t.Fatalf("got %v, want a refusal with %q", err, tc.want)
			}
		})
	}
}

func TestResetNeedsATick(t *testing.T) {
	r := newRig(t, testConfig())
	r.tick(nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.g.Reset(ctx, "alice"); !errors.Is(err, ErrNoTick) || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	if r.g.Status().ResetPending {
		t.Fatal("timed-out reset left pending")
	}
}

func TestResetPendingAndStopCancels(t *testing.T) {
	r := newRig(t, testConfig())
	r.tick(nil)
	done := make(chan error, 1)
	go func() { done <- r.g.Reset(context.Background(), "alice") }()
	for !r.g.Status().ResetPending {
		time.Sleep(50 * time.Microsecond)
	}
	if err := r.g.Reset(context.Background(), "bob"); !errors.Is(err, ErrResetPending) {
		t.Fatalf("second reset: %v", err)
	}
	if err := r.g.Stop(context.Background(), "carol", "hold on"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrStopped) {
		t.Fatalf("pending reset after stop: %v", err)
	}
	if d := r.tick(nil); d.State != Stopped {
		t.Fatal("cancelled reset armed the gate")
	}
}

func TestResetEnableFails(t *testing.T) {
	r := newRig(t, testConfig())
	r.tick(nil)
	r.arm.enableErr = errors.New("exception 4")
	err := r.resetAt(nil)
	if !errors.Is(err, ErrResetRefused) || !strings.Contains(err.Error(), "exception 4") {
		t.Fatalf("got %v", err)
	}
	if r.g.Status().State != Stopped || r.arm.lastOp() != "halt" {
		t.Fatal("failed enable left the gate armed or the arm un-halted")
	}
}

func TestResetWhileRunningIsNoop(t *testing.T) {
	r := newRig(t, testConfig())
	r.armGate()
	if err := r.g.Reset(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
}

func TestDisabledReadbackBeforeEnableIgnored(t *testing.T) {
	r := newRig(t, testConfig())
	r.st.Enabled = false // the controller was halted: enable reads back 0
	r.tick(nil)
	if err := r.resetAt(nil); err != nil {
		t.Fatal(err)
	}
	// A state read before the enable still says disabled: no trip.
	if d := r.tick(func(in *Inputs) { r.st.Time = r.g.enabledAt.Add(-time.Millisecond) }); d.State != Running {
		t.Fatalf("tripped on a state older than the enable: %v", d.Reason.Message)
	}
	if d := r.tick(nil); d.State != Stopped || d.Reason.Kind != KindArmDisabled {
		t.Fatalf("enable dropped after enabling not caught: %+v", d)
	}
}

func TestTraceEventAfterTrip(t *testing.T) {
	r := newRig(t, testConfig()) // trace_before 8, trace_after 2
	r.armGate()
	for i := 0; i < 10; i++ {
		r.tick(nil)
	}
	r.tick(func(in *Inputs) { in.Scores[ScoreEnergy] = 20 })
	r.tick(func(in *Inputs) { in.Scores[ScoreEnergy] = 30 })
	trip := r.n
	r.tick(nil)
	r.tick(nil)
	evs := r.drain()
	if len(evs) != 2 || evs[0].Type != EventTrip || evs[1].Type != EventTrace {
		t.Fatalf("events %+v", evs)
	}
	if n := len(evs[0].Trace); n != 8 || evs[0].Trace[n-1].Scores[ScoreEnergy] != 30 || evs[0].Trace[n-2].Scores[ScoreEnergy] != 20 {
		t.Fatalf("trip trace %+v", evs[0].Trace)
	}
	tr := evs[1].Trace
	if len(tr) != 8 || tr[len(tr)-1].Tick != trip+2 || tr[len(tr)-3].Tick != trip {
		t.Fatalf("trace event %+v", tr)
	}
	if evs[1].Reason.Kind != KindEnergy || evs[0].Reason.Threshold != 10 {
		t.Fatalf("reasons %+v", evs)
	}
}

func TestEventsNeverBlock(t *testing.T) {
	cfg := testConfig()
	arm := newFakeArm()
	ch := make(chan Event) // nobody receives
	g, err := New(arm, cfg, nil, Options{Events: ch})
	if err != nil {
		t.Fatal(err)
	}
	_ = g.Stop(context.Background(), "a", "") // stopped already: no event
	r := &rig{t: t, g: g, arm: arm, clock: &fakeClock{now: t0}, now: t0}
	r.st.Enabled = true
	r.vel = make([]float64, 3)
	r.st.Position = make([]float64, 3)
	r.tick(nil)
	if err := r.resetAt(nil); err != nil {
		t.Fatal(err)
	}
	_ = g.Stop(context.Background(), "a", "")
	if c := g.Counters(); c.EventsDropped != 2 { // reset + trip
		t.Fatalf("dropped %d", c.EventsDropped)
	}
}

// Commands and stops from many goroutines: -race clean, and the arm never
// sees a command after a halt unless a reset's enable came in between.
func TestConcurrentStopResetTick(t *testing.T) {
	r := newRig(t, testConfig())
	r.arm.record = false
	r.tick(nil)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				switch (i + w) % 3 {
				case 0:
					_ = r.g.Stop(ctx, "op", "")
				case 1:
					_ = r.g.Reset(ctx, "op")
				default:
					_ = r.g.Status()
					_ = r.g.Counters()
					_ = r.g.Trace(nil)
				}
				cancel()
			}
		}(w)
	}
	// Tick until the workers have stopped and re-armed the gate a few times
	// (how soon depends on the scheduler, not on time).
	for i := 0; i < 2000 || !exercised(r.g.Counters()); i++ {
		if i > 1_000_000 {
			t.Fatalf("no stop/reset interleaving after %d ticks: %+v", i, r.g.Counters())
		}
		r.tick(nil)
		runtime.Gosched()
	}
	close(stop)
	// Let any blocked Reset finish.
	for i := 0; i < 5; i++ {
		r.tick(nil)
	}
	wg.Wait()
	r.arm.checkViolations(t)
}

func exercised(c Counters) bool { return c.Trips[KindOperator] >= 3 && c.Resets >= 3 }

func TestRunningTickAllocatesNothing(t *testing.T) {
	cfg := testConfig()
	softLimits(&cfg)
	cfg.Limits.MaxAcceleration = []float64{10, 10, 10}
	cfg.Limits.MaxJerk = []float64{100, 100, 100}
	cfg.Limits.MaxDelta = []float64{0.5, 0.5, 0.5}
	cfg.Limits.Gripper.MaxDelta = 0.1
	r := newRig(t, cfg)
	r.arm.record = false
	r.armGate()
	in := r.next()
	k := 0
	allocs := testing.AllocsPerRun(1000, func() {
		k++
		r.advance(in)
		in.Scores[ScoreEnergy] = float64(k % 7)
		r.vel[0] = float64(k%5) - 2
		in.Command.Gripper = 2
		if _, err := r.g.Tick(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	})
	if r.g.Status().State != Running {
		t.Fatalf("stopped: %s", r.g.Status().Reason.Message)
	}
	if allocs != 0 {
		t.Fatalf("running tick allocates %v times", allocs)
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(nil, testConfig(), nil, Options{}); err == nil {
		t.Fatal("nil arm accepted")
	}
	cfg := testConfig()
	cfg.Energy.Scores = nil // recommended score from the calibration, which is absent
	if _, err := New(newFakeArm(), cfg, nil, Options{}); err == nil || !strings.Contains(err.Error(), "calibrat") {
		t.Fatalf("got %v", err)
	}
	cfg.Energy.Disabled = true
	g, err := New(newFakeArm(), cfg, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Thresholds()) != 0 {
		t.Fatal("disabled monitor has thresholds")
	}
}

// Stop logs the operator stop as a warning; StopExpected, for a stop its
// caller expects (the runtime ending an evaluation episode), logs the same
// line at info. The latch, the halt and the event are the same.
func TestStopExpectedLogsAtInfo(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stop  func(g *Guard) error
		level string
	}{
		{"Stop", func(g *Guard) error { return g.Stop(context.Background(), "runtime", "shutdown") }, "WARN"},
		{"StopExpected", func(g *Guard) error { return g.StopExpected(context.Background(), "runtime", "shutdown") }, "INFO"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			r := newRig(t, testConfig())
			g, err := New(r.arm, testConfig(), nil, Options{Clock: r.clock, Events: r.events,
				Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			if err != nil {
				t.Fatal(err)
			}
			r.g = g
			r.armGate()
			buf.Reset()
			_, before, _ := r.arm.counts()
			if err := tc.stop(g); err != nil {
				t.Fatal(err)
			}
			if _, halts, _ := r.arm.counts(); halts != before+1 || g.Status().State != Stopped {
				t.Fatalf("%d halts, state %v", halts-before, g.Status().State)
			}
			events := r.events
			want := "level=" + tc.level + ` msg="safety: stop" reason=operator`
			if got := buf.String(); !strings.Contains(got, want) || !strings.Contains(got, `message="operator stop by runtime: shutdown"`) || !strings.Contains(got, "actor=runtime") {
				t.Errorf("logged %q, want a line with %q", got, want)
			}
			select {
			case ev := <-events:
				if ev.Type != EventTrip || ev.Reason.Kind != KindOperator || ev.Actor != "runtime" {
					t.Errorf("event %+v, want the operator trip", ev)
				}
			default:
				t.Error("no event")
			}
		})
	}
}

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

// recoverAt asks for a recovery in mode and ticks once (with mod) to decide it.
func (r *rig) recoverAt(mode RecoveryMode, mod func(*Inputs)) error {
	r.t.Helper()
	done := make(chan error, 1)
	go func() { done <- r.g.Recover(context.Background(), "operator", mode) }()
	for !r.g.Status().RecoveryPending {
		select {
		case err := <-done: // refused at once
			return err
		default:
		}
		time.Sleep(50 * time.Microsecond) // waits for the goroutine, not for time to pass
	}
	r.tick(mod)
	return <-done
}

// high is a tick whose energy stays above the test threshold (10).
func high(in *Inputs) { in.Scores[ScoreEnergy] = 50 }

// tripEnergy runs the armed gate with velocity v, then trips it on the
// energy (2 of 3), and returns the velocities written before the stop,
// oldest first.
func (r *rig) tripEnergy(moves [][]float64) [][]float64 {
	r.t.Helper()
	var written [][]float64
	for _, v := range moves {
		copy(r.vel, v)
		d := r.tick(nil)
		written = append(written, append([]float64(nil), d.Command.Velocity...))
	}
	for i := 0; i < 3 && r.g.Status().State == Running; i++ {
		d := r.tick(high)
		if d.State == Running {
			written = append(written, append([]float64(nil), d.Command.Velocity...))
		}
	}
	if st := r.g.Status(); st.State != Stopped || st.Reason.Kind != KindEnergy {
		r.t.Fatalf("not stopped by the energy: %+v", st)
	}
	clear(r.vel)
	r.drain()
	return written
}

// drainEvents drains the events but the trace events (trace_after ticks
// after a trip).
func (r *rig) drainEvents() []Event {
	var out []Event
	for _, e := range r.drain() {
		if e.Type != EventTrace {
			out = append(out, e)
		}
	}
	return out
}

func nearVec(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9 {
			return false
		}
	}
	return true
}

// A recovery is refused while running, with a fault other than the energy
// monitor's present (naming it), when nothing blocks a reset, and for an
// unknown mode; the gate stays as it was.
func TestRecoveryRefused(t *testing.T) {
	cases := []struct {
		name  string
		setup func(r *rig) // after the energy stop
		mod   func(r *rig, in *Inputs)
		mode  RecoveryMode
		want  []string
		state State
	}{
		{"running", func(r *rig) { r.tick(nil); r.tick(nil); r.tick(nil); _ = r.resetAt(nil) }, nil, RecoveryJog,
			[]string{"recovery refused", "the gate is running"}, Running},
		{"arm disconnected", func(r *rig) {
			r.g.OnArmEvent(actuators.Event{State: actuators.StateDisconnected, Err: errors.New("EOF")})
		},
			func(r *rig, in *Inputs) { high(in) }, RecoveryRetrace,
			[]string{"safety: recovery refused (by operator): arm_disconnected: arm connection lost: EOF", "fix the fault, then reset"}, Stopped},
		{"e-stop", nil, func(r *rig, in *Inputs) { high(in); r.st.EStop = true }, RecoveryJog,
			[]string{"recovery refused", "estop: hardware e-stop asserted"}, Stopped},
		{"arm fault", nil, func(r *rig, in *Inputs) { high(in); r.st.Fault = 4 }, RecoveryJog,
			[]string{"arm_fault: controller fault word 0x0004"}, Stopped},
		{"camera stale", nil, func(r *rig, in *Inputs) { high(in); in.Camera = in.Now.Add(-time.Second) }, RecoveryRetrace,
			[]string{"camera_stale"}, Stopped},
		{"nothing to recover from", func(r *rig) { r.tick(nil); r.tick(nil); r.tick(nil) }, nil, RecoveryRetrace,
			[]string{"nothing to recover from", "reset instead"}, Stopped},
		{"unknown mode", nil, func(r *rig, in *Inputs) { high(in) }, RecoveryNone, []string{"unknown mode"}, Stopped},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, testConfig())
			r.armGate()
			r.tripEnergy(nil)
			if tc.setup != nil {
				tc.setup(r)
			}
			var mod func(*Inputs)
			if tc.mod != nil {
				mod = func(in *Inputs) { tc.mod(r, in) }
			}
			err := r.recoverAt(tc.mode, mod)
			if !errors.Is(err, ErrRecoveryRefused) {
				t.Fatalf("err = %v, want ErrRecoveryRefused", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error on several lines: %q", err)
			}
			if st := r.g.Status(); st.State != tc.state || st.RecoveryPending {
				t.Fatalf("status after the refusal %+v", st)
			}
			r.arm.checkViolations(t)
		})
	}
}

// Jog: the gate writes the direction × speed_fraction × max_velocity while
// the jog's dead-man holds (jog_hold after it came), then zero; the energy
// monitor stays silent while the scores stay high; bad jogs are refused.
func TestRecoveryJog(t *testing.T) {
	cfg := testConfig()
	cfg.Limits.MaxVelocity = []float64{1, 2, 0.5}
	r := newRig(t, cfg)
	r.armGate()
	r.tripEnergy(nil)
	if err := r.g.Jog("operator", []float64{1, 0, 0}, math.NaN()); !errors.Is(err, ErrJogRefused) {
		t.Fatalf("jog while stopped: %v", err)
	}
	if err := r.recoverAt(RecoveryJog, high); err != nil {
		t.Fatal(err)
	}
	st := r.g.Status()
	if st.State != Recovering || st.Recovery != RecoveryJog || st.RecoveryActor != "operator" || !st.RecoveryUntil.Equal(r.now.Add(30*time.Second)) {
		t.Fatalf("status %+v", st)
	}
	if evs := r.drainEvents(); len(evs) != 1 || evs[0].Type != EventRecoveryStart || evs[0].Recovery != RecoveryJog || evs[0].Reason.Kind != KindEnergy {
		t.Fatalf("events %+v", evs)
	}
	if _, _, enables := r.arm.counts(); enables != 2 {
		t.Fatalf("%d enables, want the arming's and the recovery's", enables)
	}
	// No jog yet: the arm is held still, enabled.
	d := r.tick(high)
	if d.State != Recovering || d.Recovery != RecoveryJog || d.Halted || !nearVec(d.Command.Velocity, []float64{0, 0, 0}) {
		t.Fatalf("before any jog: %+v", d)
	}
	if d.RecoveryLeft != 29900*time.Millisecond {
		t.Fatalf("RecoveryLeft %v", d.RecoveryLeft)
	}
	if d.Block.Kind != KindEnergy || d.Block.String() != "energy: energy 50 > 10" {
		t.Fatalf("block %+v %q", d.Block, d.Block.String())
	}
	for _, bad := range []struct {
		v []float64
		g float64
	}{
		{[]float64{1, 0}, math.NaN()},
		{[]float64{1.5, 0, 0}, math.NaN()},
		{[]float64{math.NaN(), 0, 0}, math.NaN()},
		{[]float64{0, math.Inf(-1), 0}, math.NaN()},
		{[]float64{0, 0, 0}, 2},
		{[]float64{0, 0, 0}, math.Inf(1)},
	} {
		if err := r.g.Jog("operator", bad.v, bad.g); !errors.Is(err, ErrInvalidJog) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Jog(%v, %v) = %v, want ErrInvalidJog", bad.v, bad.g, err)
		}
	}
	if err := r.g.Jog("operator", []float64{1, -0.5, 0}, 0.5); err != nil {
		t.Fatal(err)
	}
	want := []float64{0.25, -0.25, 0} // × 0.25 × max_velocity
	for i := 1; i <= 3; i++ {         // jog_hold 300 ms: three ticks of 100 ms
		d := r.tick(high)
		if d.State != Recovering || !nearVec(d.Command.Velocity, want) || d.Command.Gripper != 0.5 {
			t.Fatalf("jog tick %d: %+v", i, d)
		}
	}
	d = r.tick(high)
	if !nearVec(d.Command.Velocity, []float64{0, 0, 0}) || d.Command.Gripper != 0.5 {
		t.Fatalf("after jog_hold: %+v, want zero velocity, gripper held", d)
	}
	// Resent while held: it moves again.
	if err := r.g.Jog("operator", []float64{0, 0, -1}, math.NaN()); err != nil {
		t.Fatal(err)
	}
	if d := r.tick(high); !nearVec(d.Command.Velocity, []float64{0, 0, -0.125}) || d.Command.Gripper != 0.5 {
		t.Fatalf("second jog: %+v", d)
	}
	// Still high after a few seconds: the energy monitor did not trip.
	for range 30 {
		if d := r.tick(high); d.State != Recovering {
			t.Fatalf("stopped during recovery: %v", d.Reason.Message)
		}
	}
	if c := r.g.Counters(); c.Trips[KindEnergy] != 1 {
		t.Fatalf("energy trips %d, want the first only", c.Trips[KindEnergy])
	}
	// A reset while recovering is refused; switching to retrace is not.
	if err := r.g.Reset(context.Background(), "operator"); !errors.Is(err, ErrResetRefused) || !strings.Contains(err.Error(), "recovering (jog)") {
		t.Fatalf("reset while recovering: %v", err)
	}
	if err := r.g.Recover(context.Background(), "operator", RecoveryRetrace); err != nil {
		t.Fatal(err)
	}
	if err := r.g.Jog("operator", []float64{1, 0, 0}, math.NaN()); !errors.Is(err, ErrJogRefused) {
		t.Fatalf("jog while retracing: %v", err)
	}
	r.arm.checkViolations(t)
}

// Retrace replays the written velocities newest first, negated and at
// speed_fraction (each over 1/fraction ticks), then holds still; the
// history holds the last retrace_window of running only.
func TestRecoveryRetrace(t *testing.T) {
	moves := [][]float64{{0.1, 0, 0}, {0.2, -0.1, 0}, {0.4, -0.2, 0.1}, {0.8, 0, -0.3}}
	cases := []struct {
		name    string
		window  time.Duration
		replays int // entries replayed, newest first
	}{
		{"whole path", 5 * time.Second, 5}, // the four moves and the first tick at a high score
		{"window of 300ms", 300 * time.Millisecond, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Recovery.RetraceWindow = tc.window
			r := newRig(t, cfg)
			r.armGate()
			written := r.tripEnergy(moves)
			if len(written) != 5 {
				t.Fatalf("%d commands written before the stop, want 5", len(written))
			}
			if err := r.recoverAt(RecoveryRetrace, high); err != nil {
				t.Fatal(err)
			}
			f := cfg.Recovery.SpeedFraction
			for k := 0; k < tc.replays; k++ {
				e := written[len(written)-1-k]
				want := make([]float64, len(e))
				for i := range e {
					want[i] = -f * e[i]
				}
				for j := 0; j < 4; j++ { // 1/f ticks per entry
					d := r.tick(high)
					if d.State != Recovering || !nearVec(d.Command.Velocity, want) {
						t.Fatalf("entry %d tick %d: %v (state %v), want %v", k, j, d.Command.Velocity, d.State, want)
					}
				}
			}
			for range 3 {
				if d := r.tick(high); d.State != Recovering || !nearVec(d.Command.Velocity, []float64{0, 0, 0}) {
					t.Fatalf("history exhausted: %+v, want zero velocity", d)
				}
			}
			r.arm.checkViolations(t)
		})
	}
}

// A recovery ends by itself as soon as a reset would pass: the scores back
// under the threshold and the rule's window clear. It re-arms through the
// reset path (enable, rules cleared) and the gate runs the policy again.
func TestRecoveryRearmsWhenScoresFall(t *testing.T) {
	r := newRig(t, testConfig())
	r.armGate()
	r.tripEnergy([][]float64{{0.5, 0, 0}})
	if err := r.recoverAt(RecoveryRetrace, high); err != nil {
		t.Fatal(err)
	}
	r.drain()
	// One tick under the threshold: the 2-of-3 window still holds two.
	d := r.tick(nil)
	if d.State != Recovering || d.Block.String() != "energy: energy 1 ≤ 10, rule window not clear yet" {
		t.Fatalf("first low tick: state %v block %q", d.State, d.Block.String())
	}
	d = r.tick(nil)
	if d.State != Running || d.Recovery != RecoveryNone || d.Block.Kind != KindNone {
		t.Fatalf("second low tick: %+v, want re-armed", d)
	}
	if r.arm.lastOp() != "enable" {
		t.Fatalf("last arm op %q, want the reset's enable", r.arm.lastOp())
	}
	evs := r.drainEvents()
	if len(evs) != 2 || evs[0].Type != EventReset || evs[0].Actor != "operator" || evs[0].Reason.Kind != KindEnergy ||
		evs[1].Type != EventRecoveryEnd || evs[1].End != EndRearmed || evs[1].Recovery != RecoveryRetrace || evs[1].Duration != 200*time.Millisecond {
		t.Fatalf("events %+v", evs)
	}
	c := r.g.Counters()
	if c.Recoveries != 1 || c.RecoveryEnds[EndRearmed] != 1 || c.Resets != 2 {
		t.Fatalf("counters %+v", c)
	}
	r.vel[0] = 0.3
	if d := r.tick(nil); d.State != Running || d.Command.Velocity[0] != 0.3 {
		t.Fatalf("after re-arming: %+v, want the policy's command", d)
	}
	r.arm.checkViolations(t)
}

// After recovery.time_limit with the scores still high the gate stops
// again, with a reason saying so; not counted as another trip.
func TestRecoveryTimesOut(t *testing.T) {
	cfg := testConfig()
	cfg.Recovery.TimeLimit = time.Second
	r := newRig(t, cfg)
	r.armGate()
	r.tripEnergy(nil)
	if err := r.recoverAt(RecoveryJog, high); err != nil {
		t.Fatal(err)
	}
	r.drain()
	var d Decision
	for i := 1; i <= 10; i++ {
		if d = r.tick(high); i < 10 && d.State != Recovering {
			t.Fatalf("tick %d: %v", i, d.State)
		}
	}
	if d.State != Stopped || !d.Halted || d.Reason.Kind != KindEnergy || !strings.HasPrefix(d.Reason.Message, "recovery timed out after 1s (recovery.time_limit): energy out of distribution: newest score 50") {
		t.Fatalf("at the time limit: %+v", d)
	}
	if r.arm.lastOp() != "halt" {
		t.Fatalf("last arm op %q", r.arm.lastOp())
	}
	evs := r.drainEvents()
	if len(evs) != 1 || evs[0].Type != EventRecoveryEnd || evs[0].End != EndTimeout || evs[0].Duration != time.Second ||
		!strings.HasPrefix(evs[0].Reason.Message, "recovery timed out") {
		t.Fatalf("events %+v", evs)
	}
	if c := r.g.Counters(); c.Trips[KindEnergy] != 1 || c.RecoveryEnds[EndTimeout] != 1 {
		t.Fatalf("counters %+v", c)
	}
	// Latched: a recovery may be asked for again.
	if err := r.recoverAt(RecoveryRetrace, high); err != nil {
		t.Fatalf("second recovery: %v", err)
	}
}

// An operator stop ends a recovery at once.
func TestStopDuringRecovery(t *testing.T) {
	r := newRig(t, testConfig())
	r.armGate()
	r.tripEnergy(nil)
	if err := r.recoverAt(RecoveryJog, high); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if err := r.g.Jog("operator", []float64{1, 0, 0}, math.NaN()); err != nil {
		t.Fatal(err)
	}
	r.tick(high)
	if err := r.g.Stop(context.Background(), "bob", "STOP button"); err != nil {
		t.Fatal(err)
	}
	st := r.g.Status()
	if st.State != Stopped || st.Reason.Kind != KindOperator || st.Recovery != RecoveryNone || r.arm.lastOp() != "halt" {
		t.Fatalf("after stop: %+v, last op %s", st, r.arm.lastOp())
	}
	evs := r.drainEvents()
	if len(evs) != 2 || evs[0].Type != EventTrip || evs[1].Type != EventRecoveryEnd || evs[1].End != EndStopped || evs[1].Reason.Actor != "bob" {
		t.Fatalf("events %+v", evs)
	}
	if d := r.tick(high); d.State != Stopped || !d.Halted {
		t.Fatalf("not latched: %+v", d)
	}
	r.arm.checkViolations(t)
}

// Every kind has its short phrase for what a reset would be refused for.
func TestBlockTextForEveryKind(t *testing.T) {
	for k := KindStartup; k < NumKinds; k++ {
		if txt := (Block{Kind: k}).String(); len(txt) <= len(k.String())+2 {
			t.Errorf("kind %v: block text %q", k, txt)
		}
	}
}

// Every fault other than the energy monitor's trips a recovery as it trips
// a running gate.
func TestRecoveryTripsOnFaults(t *testing.T) {
	errEOF := errors.New("EOF")
	cases := []struct {
		kind Kind
		mod  func(r *rig, in *Inputs)
	}{
		{KindArmFault, func(r *rig, in *Inputs) { r.st.Fault = 2 }},
		{KindEStop, func(r *rig, in *Inputs) { r.st.EStop = true }},
		{KindArmDisconnected, func(r *rig, in *Inputs) {
			r.g.OnArmEvent(actuators.Event{State: actuators.StateDisconnected, Err: errEOF})
		}},
		{KindArmStale, func(r *rig, in *Inputs) { r.st.Time = in.Now.Add(-time.Second) }},
		{KindArmDisabled, func(r *rig, in *Inputs) { r.st.Enabled = false }},
		{KindArmWrite, func(r *rig, in *Inputs) { r.arm.cmdErr = errEOF }},
		{KindCameraStale, func(r *rig, in *Inputs) { in.Camera = in.Now.Add(-time.Second) }},
		{KindLoopLate, func(r *rig, in *Inputs) { in.Deadline = in.Now.Add(-60 * time.Millisecond) }},
		{KindScoreStale, func(r *rig, in *Inputs) { in.Scores = NoScores() }},
	}
	for _, tc := range cases {
		t.Run(tc.kind.String(), func(t *testing.T) {
			r := newRig(t, testConfig())
			r.armGate()
			r.tripEnergy(nil)
			if err := r.recoverAt(RecoveryRetrace, high); err != nil {
				t.Fatal(err)
			}
			r.tick(high)
			r.drain()
			var d Decision
			for i := 0; i < 5; i++ {
				if d = r.tick(func(in *Inputs) { high(in); tc.mod(r, in) }); d.State != Recovering {
					break
				}
			}
			if d.State != Stopped || d.Reason.Kind != tc.kind || !d.Halted || r.arm.lastOp() != "halt" {
				t.Fatalf("state %v reason %v (%s), last op %s; want stopped by %v", d.State, d.Reason.Kind, d.Reason.Message, r.arm.lastOp(), tc.kind)
			}
			evs := r.drainEvents()
			if len(evs) != 2 || evs[0].Type != EventTrip || evs[0].Reason.Kind != tc.kind ||
				evs[1].Type != EventRecoveryEnd || evs[1].End != EndFault || evs[1].Reason.Kind != tc.kind {
				t.Fatalf("events %+v", evs)
			}
			if c := r.g.Counters(); c.Trips[tc.kind] != 1 || c.RecoveryEnds[EndFault] != 1 {
				t.Fatalf("counters %+v", c)
			}
			r.arm.cmdErr = nil
			r.arm.checkViolations(t)
		})
	}
}

// A recovering tick allocates nothing, jogging or retracing.
func TestRecoveringTickAllocatesNothing(t *testing.T) {
	for _, mode := range []RecoveryMode{RecoveryJog, RecoveryRetrace} {
		t.Run(mode.String(), func(t *testing.T) {
			cfg := testConfig()
			cfg.Recovery.TimeLimit = 5 * time.Minute
			r := newRig(t, cfg)
			r.arm.record = false
			r.armGate()
			r.tripEnergy([][]float64{{0.5, 0.5, 0.5}, {0.1, 0.2, 0.3}})
			if err := r.recoverAt(mode, high); err != nil {
				t.Fatal(err)
			}
			in := r.next()
			high(in)
			v := []float64{0.5, 0, -0.5}
			allocs := testing.AllocsPerRun(1000, func() {
				r.advance(in)
				r.clock.set(in.Now)
				if mode == RecoveryJog {
					if err := r.g.Jog("operator", v, math.NaN()); err != nil {
						t.Fatal(err)
					}
				}
				if d, err := r.g.Tick(context.Background(), in); err != nil || d.State != Recovering {
					t.Fatalf("%v %+v", err, d)
				}
			})
			if allocs != 0 {
				t.Fatalf("recovering tick allocates %v times", allocs)
			}
		})
	}
}

// A refused reset retried every tick (a retrying auto start) is logged and
// published when it starts and then at most every 5 s with the count of
// the others; every refusal is counted.
func TestRefusedResetsAreCoalesced(t *testing.T) {
	var buf bytes.Buffer
	r := newRig(t, testConfig())
	g, err := New(r.arm, testConfig(), nil, Options{Clock: r.clock, Events: r.events, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	r.g = g
	r.armGate()
	r.tripEnergy(nil)
	buf.Reset()
	for range 100 { // 100 ticks of 100 ms
		if err := r.resetAt(high); !errors.Is(err, ErrResetRefused) {
			t.Fatalf("reset: %v", err)
		}
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "safety: reset refused") || !strings.Contains(lines[0], "repeated=0") ||
		!strings.Contains(lines[1], "repeated=49") {
		t.Fatalf("log:\n%s", buf.String())
	}
	evs := r.drainEvents()
	if len(evs) != 2 || evs[0].Repeated != 0 || evs[1].Repeated != 49 || evs[1].Type != EventResetRefused {
		t.Fatalf("events %+v", evs)
	}
	if c := r.g.Counters(); c.ResetsRefused != 100 {
		t.Fatalf("ResetsRefused %d", c.ResetsRefused)
	}
	// Once the cause is gone and a reset passes, the next refusal logs at once.
	r.tick(nil)
	r.tick(nil)
	if err := r.resetAt(nil); err != nil {
		t.Fatal(err)
	}
	r.tripEnergy(nil)
	buf.Reset()
	if err := r.resetAt(high); !errors.Is(err, ErrResetRefused) || !strings.Contains(buf.String(), "safety: reset refused") {
		t.Fatalf("refusal after a new stop not logged: %v\n%s", err, buf.String())
	}
}

// Recover, Jog, Stop and Reset from other goroutines while the loop ticks
// through energy stops and recoveries: no command ever reaches a disabled
// arm (run with -race).
func TestConcurrentRecovery(t *testing.T) {
	r := newRig(t, testConfig())
	r.arm.record = false
	r.tick(nil)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			v := []float64{0.5, -0.5, 0}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				switch (i + w) % 6 {
				case 0:
					if i%7 == 0 {
						_ = r.g.Stop(ctx, "op", "")
					}
				case 1:
					_ = r.g.Reset(ctx, "op")
				case 2:
					_ = r.g.Recover(ctx, "op", RecoveryJog)
				case 3:
					_ = r.g.Recover(ctx, "op", RecoveryRetrace)
				case 4:
					_ = r.g.Jog("op", v, math.NaN())
				default:
					_ = r.g.Status()
					_ = r.g.Counters()
				}
				cancel()
			}
		}(w)
	}
	done := func(c Counters) bool {
		return c.Recoveries >= 3 && c.RecoveryEnds[EndRearmed] >= 1 && c.RecoveryEnds[EndStopped] >= 1 && c.Resets >= 3
	}
	for i := 0; i < 2000 || !done(r.g.Counters()); i++ {
		if i > 1_000_000 {
			t.Fatalf("not exercised after %d ticks: %+v", i, r.g.Counters())
		}
		r.vel[0] = 0.3
		if i%30 < 20 {
			r.tick(high)
		} else {
			r.tick(nil)
		}
		runtime.Gosched()
	}
	close(stop)
	for i := 0; i < 5; i++ {
		r.tick(nil)
	}
	wg.Wait()
	r.arm.checkViolations(t)
}

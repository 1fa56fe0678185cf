package runtime

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	goruntime "runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/energyflow/edge/safety"
)

// dialStateTerm is a state term whose reading the test sets.
type dialStateTerm struct{ x atomic.Uint64 }

func (d *dialStateTerm) set(x float64) { d.x.Store(math.Float64bits(x)) }
func (d *dialStateTerm) Energy([]float32) (float32, error) {
	return float32(math.Float64frombits(d.x.Load())), nil
}

func TestMachineRecoveryTransitions(t *testing.T) {
	cases := []struct {
		name  string
		path  []State
		legal bool
	}{
		{"stopped, recovering, re-armed", []State{StateReady, StateRunning, StateStopped, StateRecovering, StateRunning}, true},
		{"stopped, recovering, timed out", []State{StateReady, StateRunning, StateStopped, StateRecovering, StateStopped}, true},
		{"a start refused out of distribution, recovering", []State{StateReady, StateRecovering, StateRunning}, true},
		{"recovering while running", []State{StateReady, StateRunning, StateRecovering}, false},
		{"recovering to ready", []State{StateReady, StateRunning, StateStopped, StateRecovering, StateReady}, false},
		{"recovering before ready", []State{StateRecovering}, false},
		{"shutdown while recovering", []State{StateReady, StateRunning, StateStopped, StateRecovering, StateShutdown}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMachine(time.Now, nil)
			var err error
			for _, s := range tc.path {
				if err = m.To(s, "test"); err != nil {
					break
				}
			}
			if (err == nil) != tc.legal {
				t.Fatalf("path %v: err %v, want legal %v", tc.path, err, tc.legal)
			}
		})
	}
	if StateRecovering.String() != "RECOVERING" {
		t.Fatal(StateRecovering.String())
	}
}

// The loop follows the gate into and out of recovery: an energy stop,
// Loop.Recover (STOPPED → RECOVERING), the sample saying the mode, the
// seconds left and what blocks a reset, and the gate re-arming by itself
// once the state score falls (RECOVERING → RUNNING).
func TestLoopRecovery(t *testing.T) {
	dial := &dialStateTerm{}
	dial.set(1)
	h := newLoopHarness(t, harnessOptions{bundle: withStateTerm(t, testBundle(t), 7), state: dial,
		watch: []string{"state_energy"}, threshold: 5})
	var sink lastSample
	h.l.d.Sink = &sink
	h.armGate(t)
	if err := h.l.Jog("op", []float64{1, 0, 0, 0, 0, 0, 0}, math.NaN()); !errors.Is(err, safety.ErrJogRefused) {
		t.Fatalf("jog while running: %v", err)
	}
	dial.set(50)
	for i := 0; i < 10; i++ {
		if st, _ := h.l.Machine().State(); st == StateStopped {
			break
		}
		h.step()
	}
	if st, reason := h.l.Machine().State(); st != StateStopped || !strings.HasPrefix(reason, "energy: state_energy") {
		t.Fatalf("state %s (%s), want an energy stop", st, reason)
	}
	h.step()
	if s := sink.s; s.State != "STOPPED" || s.ResetBlock != "energy: state_energy 50 > 5" || s.Recovery != "" {
		t.Fatalf("stopped sample: state %q reset block %q recovery %q", s.State, s.ResetBlock, s.Recovery)
	}

	errc := make(chan error, 1)
	go func() { errc <- h.l.Recover(context.Background(), "op", safety.RecoveryRetrace) }()
	for !h.l.d.Guard.Status().RecoveryPending {
		goruntime.Gosched()
	}
	h.step()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if st, reason := h.l.Machine().State(); st != StateRecovering || reason != "recovery (retrace) by op" {
		t.Fatalf("state %s (%s), want RECOVERING", st, reason)
	}
	h.step()
	if s := sink.s; s.State != "RECOVERING" || s.Recovery != "retrace" || s.RecoveryLeft != 30*time.Second-h.l.period ||
		s.ResetBlock != "energy: state_energy 50 > 5" {
		t.Fatalf("recovering sample: state %q recovery %q left %v block %q", s.State, s.Recovery, s.RecoveryLeft, s.ResetBlock)
	}
	// The arm moves nowhere it should not: the energy monitor is silent.
	for range 5 {
		h.step()
	}
	if st, _ := h.l.Machine().State(); st != StateRecovering {
		t.Fatalf("state %s during recovery", st)
	}
	dial.set(1)
	for i := 0; i < 10; i++ {
		if st, _ := h.l.Machine().State(); st == StateRunning {
			break
		}
		h.step()
	}
	if st, reason := h.l.Machine().State(); st != StateRunning || !strings.Contains(reason, "re-armed") {
		t.Fatalf("state %s (%s), want RUNNING after the scores fell", st, reason)
	}
	h.step()
	if s := sink.s; s.State != "RUNNING" || s.ResetBlock != "" || s.Recovery != "" || s.RecoveryLeft != 0 {
		t.Fatalf("running sample: %+v", s)
	}
}

// A gate write failing on every tick logs one line, then at most one
// every 5 s with the count of the others.
func TestLoopLogsRepeatsQuietly(t *testing.T) {
	h := newLoopHarness(t, harnessOptions{bundle: testBundle(t)})
	var buf bytes.Buffer
	h.l.log = slog.New(slog.NewTextHandler(&buf, nil))
	now := time.Unix(1000, 0)
	for i := range 100 { // 10 s at 10 Hz
		h.l.logGate(now.Add(time.Duration(i)*100*time.Millisecond), errors.New("safety: write command: EOF"))
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "repeated=0") || !strings.Contains(lines[1], "repeated=49") {
		t.Fatalf("log:\n%s", buf.String())
	}
}

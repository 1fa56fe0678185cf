package runtime

import (
	"context"
	"errors"
	"time"

	"github.com/energyflow/edge/safety"
	"github.com/energyflow/edge/telemetry"
	"github.com/energyflow/edge/telemetry/lograte"
)

// Recover starts the safety gate's recovery mode on behalf of actor
// (safety.Guard.Recover: decided at the next tick, refused with the cause
// while a fault other than the energy monitor's is present) and moves the
// state machine STOPPED (or READY) → RECOVERING. The loop follows the gate
// from there: RECOVERING → RUNNING when it re-arms by itself, → STOPPED
// when it times out, is stopped or trips.
func (l *Loop) Recover(ctx context.Context, actor string, mode safety.RecoveryMode) error {
	if st, _ := l.machine.State(); st == StateInit {
		return errors.New("runtime: not ready yet (arm, engines or camera not live)")
	}
	if err := l.d.Guard.Recover(ctx, actor, mode); err != nil {
		return err
	}
	if st, _ := l.machine.State(); st == StateStopped || st == StateReady {
		_ = l.machine.To(StateRecovering, "recovery ("+mode.String()+") by "+actor)
	}
	return nil
}

// Jog passes a jog command to the gate (safety.Guard.Jog): only while
// recovering in jog mode. It does not block and logs nothing.
func (l *Loop) Jog(actor string, v []float64, gripper float64) error {
	return l.d.Guard.Jog(actor, v, gripper)
}

// syncRecovery follows the gate in and out of recovery mode (syncMachine's
// part for RECOVERING); it allocates only on a transition.
func (l *Loop) syncRecovery(st State, d *safety.Decision) {
	switch {
	case (st == StateStopped || st == StateReady) && d.State == safety.Recovering:
		s := l.d.Guard.Status()
		_ = l.machine.To(StateRecovering, "recovery ("+s.Recovery.String()+") by "+s.RecoveryActor)
	case st == StateRecovering && d.State == safety.Running:
		l.armed.Store(true)
		_ = l.machine.To(StateRunning, "recovered: every score back under its threshold, re-armed")
	case st == StateRecovering && d.State == safety.Stopped:
		_ = l.machine.To(StateStopped, d.Reason.Kind.String()+": "+d.Reason.Message)
	}
}

// recoveryView is what the telemetry sample says about recovery and about
// what a reset would be refused for. The text of the latter is formatted
// into a reused buffer and made a string only when it changes (stopped
// ticks; a running tick has none and allocates nothing).
type recoveryView struct {
	buf   []byte
	block string
}

// fill sets the sample's ResetBlock, Recovery and RecoveryLeft from d.
func (v *recoveryView) fill(s *telemetry.Sample, d *safety.Decision) {
	s.ResetBlock = ""
	if d.Block.Kind != safety.KindNone {
		v.buf = d.Block.AppendText(v.buf[:0])
		if string(v.buf) != v.block {
			v.block = string(v.buf)
		}
		s.ResetBlock = v.block
	}
	s.Recovery, s.RecoveryLeft = "", 0
	if d.State == safety.Recovering {
		s.Recovery, s.RecoveryLeft = d.Recovery.String(), d.RecoveryLeft
	}
}

// loopLogs rate-limits the loop's log lines for conditions that can repeat
// every tick or every plan: one line when a condition starts, then at most
// one every 5 s with the count of the others ("repeated"). Everything is
// counted in LoopStats either way. Used on the loop's goroutine only.
type loopLogs struct {
	gate, infer logRate
	late        logRate // switches to and from the late network (latepolicy.go)
}

// logRate rate-limits the log line of one condition of the loop.
type logRate = lograte.Repeat[struct{}]

// logGate logs a failed gate tick (a failed arm write: the gate has
// stopped).
func (l *Loop) logGate(now time.Time, err error) {
	if log, n := l.logs.gate.Observe(now, struct{}{}); log {
		l.log.Warn("gate", "err", err, "repeated", n)
	}
}

// logInference logs a failed inference.
func (l *Loop) logInference(now time.Time, err error) {
	if log, n := l.logs.infer.Observe(now, struct{}{}); log {
		l.log.Warn("inference failed", "err", err, "repeated", n)
	}
}

package safety

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/energyflow/edge/calibration"
)

// fault is a detected cause, kept unformatted so that checking allocates
// nothing; reasonFor formats it when it trips or refuses a reset.
type fault struct {
	kind      Kind
	score     Score
	value     float64       // the offending value (score, command entry)
	threshold float64       // energy threshold
	age       time.Duration // age of the stale input
	bound     time.Duration // its configured bound
	axis      int           // offending axis, −1: gripper
	n, want   int           // sizes for invalid_input; n: for energy, ticks or fresh scores since arming, per the threshold's BandUnit (−1: stopped)
	err       error         // arm read or write error
	what      string        // static description of the input
	actor     string        // operator stop
	note      string        // operator stop message, or a static detail
	ceiling   bool          // energy: one score above the one-tick ceiling (threshold holds the ceiling)
	measured  float64       // tracking: the measured displacement on axis over the window
	commanded float64       // tracking: the commanded displacement on axis over the window
	slack     float64       // tracking: what the reads' and writes' timing allowed on top of the tolerance
}

var errLinkDown = errors.New("the arm driver reports the link down")

// check evaluates every monitor and watchdog on in and returns the first
// fault in priority order (KindNone when clear), and the first fault other
// than the energy monitor's (KindEnergy), which is what trips while
// Recovering. It feeds the energy rules exactly once per tick, whatever the
// state. Called with mu held.
func (g *Guard) check(in *Inputs) (first, hw fault) {
	set := func(f fault) {
		if first.kind == KindNone {
			first = f
		}
		if hw.kind == KindNone && f.kind != KindEnergy {
			hw = f
		}
	}
	w := &g.cfg.Watchdog

	// Arm: e-stop and fault words first, then freshness.
	if a := in.Arm; a == nil || a.Time.IsZero() {
		if in.ArmErr != nil {
			set(fault{kind: KindArmDisconnected, err: in.ArmErr, age: -1, bound: w.ArmMaxAge})
		} else {
			set(fault{kind: KindArmStale, age: -1, bound: w.ArmMaxAge})
		}
	} else {
		if a.EStop {
			set(fault{kind: KindEStop})
		}
		if a.Fault != 0 {
			set(fault{kind: KindArmFault, n: int(a.Fault)})
		}
		if g.linkDown {
			err := g.linkErr
			if err == nil {
				err = errLinkDown
			}
			set(fault{kind: KindArmDisconnected, err: err, age: in.Now.Sub(a.Time), bound: w.ArmMaxAge})
		}
		if age := in.Now.Sub(a.Time); age > w.ArmMaxAge {
			if in.ArmErr != nil {
				set(fault{kind: KindArmDisconnected, err: in.ArmErr, age: age, bound: w.ArmMaxAge})
			} else {
				set(fault{kind: KindArmStale, age: age, bound: w.ArmMaxAge})
			}
		}
		if g.state != Stopped && !w.IgnoreEnabled && !a.Enabled && a.Time.After(g.enabledAt) {
			set(fault{kind: KindArmDisabled})
		}
	}

	// The loop itself. Deadline is the first deadline this tick was due at
	// (the earliest skipped one), so lateness includes skipped periods: with
	// the default bound (well under a period) any skipped deadline trips.
	if !in.Deadline.IsZero() {
		if late := in.Now.Sub(in.Deadline); late > w.LoopMaxLate {
			set(fault{kind: KindLoopLate, age: late, n: int(in.Missed), bound: w.LoopMaxLate})
		}
	} else if in.Missed > 0 {
		set(fault{kind: KindLoopLate, n: int(in.Missed), bound: w.LoopMaxLate})
	}

	// Inference and camera.
	if !in.InferenceStarted.IsZero() {
		if age := in.Now.Sub(in.InferenceStarted); age > w.InferenceDeadline {
			set(fault{kind: KindInferenceDeadline, age: age, bound: w.InferenceDeadline})
		}
	}
	if w.CameraMaxAge > 0 {
		if in.Camera.IsZero() {
			set(fault{kind: KindCameraStale, age: -1, bound: w.CameraMaxAge})
		} else if age := in.Now.Sub(in.Camera); age > w.CameraMaxAge {
			set(fault{kind: KindCameraStale, age: age, bound: w.CameraMaxAge})
		}
	}
	if d, still, ok := g.frozen.observe(in.Arm, in.CameraChanged, in.Now, in.SceneChange); !ok {
		set(fault{kind: KindCameraFrozen, value: d, threshold: w.CameraFrozenMotion, age: still})
	}
	if w.CameraMoved > 0 && in.CameraMoved > 0 && !in.SceneChange {
		set(fault{kind: KindCameraMoved, value: in.CameraMoved, threshold: w.CameraMoved})
	}
	if w.CameraUnseen > 0 && in.CameraUnseen >= w.CameraUnseen && !in.SceneChange {
		set(fault{kind: KindCameraUnseen, value: float64(in.CameraUnseen), threshold: float64(w.CameraUnseen)})
	}

	// Energy: every rule sees every fresh score, compared with the threshold
	// in effect: while running, the closed-loop band of the running ticks
	// since arming (or of the fresh scores, for a calibration in that unit);
	// while stopped, the start band (band 0).
	running := g.state == Running
	tick := -1 // running ticks since arming before this one; −1: stopped
	if running {
		tick = g.armedTicks
		g.armedTicks++
	}
	for i := range g.thresholds {
		t := &g.thresholds[i]
		k := -1 // index since arming in t.BandUnit; −1: stopped
		thr := t.At(0)
		if running {
			k = g.fresh[i]
			if t.BandUnit == calibration.BandTicks {
				k = tick
			}
			thr = t.At(k)
		}
		g.thrNow[i] = thr
		x := in.Scores[t.Score]
		switch {
		case math.IsInf(x, 0):
			set(fault{kind: KindNaN, score: t.Score, value: x, what: "score"})
		case math.IsNaN(x):
			last := g.lastScore[t.Score]
			if last.IsZero() {
				set(fault{kind: KindScoreStale, score: t.Score, age: -1, bound: w.ScoreMaxAge})
			} else if age := in.Now.Sub(last); age > w.ScoreMaxAge {
				set(fault{kind: KindScoreStale, score: t.Score, age: age, bound: w.ScoreMaxAge})
			}
		default:
			g.lastScore[t.Score] = in.Now
			if running {
				g.fresh[i]++
			}
			g.rules[i].setThreshold(thr)
			if g.rules[i].observe(x) {
				set(fault{kind: KindEnergy, score: t.Score, value: x, threshold: thr, n: k})
			} else if c := t.CeilingAt(max(k, 0)); x > c {
				set(fault{kind: KindEnergy, score: t.Score, value: x, threshold: c, n: k, ceiling: true})
			}
		}
	}

	// The proposed command matters only when it would be written (running),
	// the position the soft limits and the tracking monitor need whenever
	// the gate writes commands (running or recovering).
	axes := len(g.cfg.Limits.MaxVelocity)
	if g.state == Running {
		c := &in.Command
		if len(c.Velocity) != axes {
			set(fault{kind: KindInvalidInput, n: len(c.Velocity), want: axes, what: "command velocity"})
		} else {
			for i, v := range c.Velocity {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					set(fault{kind: KindNaN, axis: i, value: v, what: "command velocity"})
					break
				}
			}
		}
		if math.IsNaN(c.Gripper) || math.IsInf(c.Gripper, 0) {
			set(fault{kind: KindNaN, axis: -1, value: c.Gripper, what: "command gripper"})
		}
	}
	if g.state != Stopped {
		soft := len(g.cfg.Limits.KPosition) > 0
		if (soft || g.trk.on) && in.Arm != nil {
			p := in.Arm.Position
			if len(p) < axes {
				what := "arm position (soft limits)"
				if !soft {
					what = "arm position (tracking)"
				}
				set(fault{kind: KindInvalidInput, n: len(p), want: axes, what: what})
			} else {
				for i, v := range p[:axes] {
					if math.IsNaN(v) || math.IsInf(v, 0) {
						set(fault{kind: KindNaN, axis: i, value: v, what: "arm position"})
						break
					}
				}
			}
		}
	}

	// Tracking: the measured motion against the commanded one, in every
	// state (while stopped, the halted arm must stay still).
	e, over := g.trk.observe(in.Arm, in.Now, in.SceneChange)
	g.trackNow = e.excess()
	g.trackSum = e.sum
	switch {
	case over && e.excess() > g.trk.tol:
		set(fault{kind: KindTracking, value: e.norm, threshold: g.trk.tol, age: e.span, bound: g.cfg.Tracking.Window,
			axis: e.axis, measured: e.meas, commanded: e.command, slack: e.slack})
	case over:
		set(fault{kind: KindTracking, value: e.sum, threshold: g.trk.sustained, what: "sustained",
			axis: e.axis, measured: e.meas, commanded: e.command})
	}
	return first, hw
}

// noteResetNeedsScore marks the score_stale fault of the reset's own
// fresh-score rule, which a reset waits out (Guard.awaitScore), apart from the
// score watchdog's, which refuses it.
const noteResetNeedsScore = "a reset needs a fresh score on the tick that decides it"

// resetCheck adds the stricter conditions of a reset to a clear tick: every
// monitored score fresh now and at or below its threshold (the start band's,
// for closed-loop bands: the gate is stopped), no rule in alarm.
func (g *Guard) resetCheck(f *fault, in *Inputs) {
	for i := range g.thresholds {
		t := &g.thresholds[i]
		x := in.Scores[t.Score]
		thr := t.At(0)
		switch {
		case math.IsNaN(x):
			*f = fault{kind: KindScoreStale, score: t.Score, age: 0, bound: g.cfg.Watchdog.ScoreMaxAge, note: noteResetNeedsScore}
		case x > thr:
			*f = fault{kind: KindEnergy, score: t.Score, value: x, threshold: thr, n: -1, note: "still above the threshold"}
		case g.rules[i].alarmed():
			*f = fault{kind: KindEnergy, score: t.Score, value: x, threshold: thr, n: -1, note: "recent scores still in alarm: the rule's window is not clear yet"}
		default:
			continue
		}
		return
	}
}

// reasonFor formats a fault into a Reason (allocates; trips and refusals only).
func (g *Guard) reasonFor(f *fault, in *Inputs) Reason {
	r := baseReason(f, in)
	r.Message = g.message(f)
	return r
}

// baseReason is the Reason of f without its message (allocates nothing, so
// that a trip reaches the arm before any formatting).
func baseReason(f *fault, in *Inputs) Reason {
	r := Reason{Kind: f.kind, Score: f.score, Scores: in.Scores, Threshold: math.NaN(), Tick: in.Tick, Time: in.Now, Actor: f.actor}
	if f.kind == KindEnergy {
		r.Threshold = f.threshold
	}
	return r
}

// message formats the human-readable detail of f, with a hint.
func (g *Guard) message(f *fault) string {
	var m string
	age := func() string {
		if f.age < 0 {
			return "none received yet"
		}
		return fmt.Sprintf("newest is %v old", f.age)
	}
	switch f.kind {
	case KindOperator:
		m = fmt.Sprintf("operator stop by %s", f.actor)
		if f.note != "" {
			m += ": " + f.note
		}
	case KindEnergy:
		switch {
		case f.note != "":
			m = fmt.Sprintf("%s score %.4g vs threshold %.4g: %s — move the scene back toward the demonstrations", f.score, f.value, f.threshold, f.note)
		case f.ceiling:
			m = fmt.Sprintf("%s out of distribution: score %.4g above the one-tick ceiling %.4g%s (calibration.closed_loop.ceiling)", f.score, f.value, f.threshold, g.bandText(f))
		default:
			m = fmt.Sprintf("%s out of distribution: newest score %.4g, threshold %.4g%s, %s", f.score, f.value, f.threshold, g.bandText(f), g.ruleText(f.score))
		}
	case KindNaN:
		if f.what == "score" && f.score == ScoreStateEnergy {
			m = fmt.Sprintf("%s score is %v: the bundle's state term is not finite", f.score, f.value)
		} else if f.what == "score" {
			m = fmt.Sprintf("%s score is %v: the policy's energy is not finite", f.score, f.value)
		} else if f.axis < 0 {
			m = fmt.Sprintf("%s is %v", f.what, f.value)
		} else {
			m = fmt.Sprintf("%s[%d] is %v", f.what, f.axis, f.value)
		}
	case KindInvalidInput:
		m = fmt.Sprintf("%s has %d axes, limits.max_velocity has %d — the config does not match the arm", f.what, f.n, f.want)
	case KindScoreStale:
		if f.note != "" {
			m = fmt.Sprintf("no fresh %s score: %s", f.score, f.note)
		} else {
			m = fmt.Sprintf("no fresh %s score: %s (watchdog.score_max_age %v) — is the scorer running every tick?", f.score, age(), f.bound)
		}
	case KindInferenceDeadline:
		m = fmt.Sprintf("inference request in flight for %v (watchdog.inference_deadline %v) — engine hung or too slow", f.age, f.bound)
	case KindCameraStale:
		m = fmt.Sprintf("camera frames stale: %s (watchdog.camera_max_age %v) — check the camera stream", age(), f.bound)
	case KindCameraFrozen:
		m = fmt.Sprintf("camera frozen: no frame has changed for %v while the arm moved %.3g (watchdog.camera_frozen_motion %.3g) — the stream repeats one frame; check the camera and its driver", f.age.Round(time.Millisecond), f.value, f.threshold)
	case KindCameraMoved:
		m = fmt.Sprintf("camera moved: %.0f %% of the image tiles that matched the camera's view changed in one frame and still differ (watchdog.camera_moved %.3g) — the camera was knocked or turned; put it back where it was (a reset passes once its view matches again), or restart the runtime to take its present view", 100*f.value, f.threshold)
	case KindCameraUnseen:
		m = fmt.Sprintf("something unseen in view: %.0f pixels of each of two frames running have colours no demonstration showed (watchdog.camera_unseen %.0f) — an object, a hand or a tool the policy was never shown; take it out of view (a reset passes once fewer remain), or record demonstrations with it and retrain", f.value, f.threshold)
	case KindArmStale:
		m = fmt.Sprintf("arm state stale: %s (watchdog.arm_max_age %v) — is the arm reader running?", age(), f.bound)
	case KindArmDisconnected:
		m = fmt.Sprintf("arm connection lost: %v; last good state: %s (watchdog.arm_max_age %v) — check the cable / controller", f.err, age(), f.bound)
	case KindArmWrite:
		m = fmt.Sprintf("command write failed: %v", f.err)
	case KindArmFault:
		m = fmt.Sprintf("controller fault word 0x%04x — clear the fault on the controller", f.n)
	case KindEStop:
		m = "hardware e-stop asserted — release it before resetting"
	case KindArmDisabled:
		m = "the controller dropped enable while running (heartbeat lapse or another master?)"
	case KindTracking:
		if f.what == "sustained" {
			m = fmt.Sprintf("the arm's measured motion kept leaving the commanded one: %.4g accumulated beyond the drift allowance (safety.tracking.sustained %.4g, drift %.4g per second); now largest on axis %d over the window: measured %.4g, commanded %.4g — an arm pushed or dragged, or tracking settings (scale, response, drift) that do not fit the arm",
				f.value, f.threshold, g.cfg.Tracking.Drift, f.axis, f.measured, f.commanded)
			break
		}
		slack := ""
		if f.slack > 0 {
			slack = fmt.Sprintf(", plus %.2g for the timing of the reads and writes", f.slack)
		}
		m = fmt.Sprintf("the arm's measured motion left the commanded one by %.4g over %v (safety.tracking.tolerance %.4g%s, window %v); largest on axis %d: measured %.4g, commanded %.4g — a position reading that jumped, an arm pushed or blocked, or tracking settings (scale, response, lower/upper) that do not fit the arm",
			f.value, f.age, f.threshold, slack, f.bound, f.axis, f.measured, f.commanded)
	case KindLoopLate:
		if f.n > 0 {
			m = fmt.Sprintf("control loop skipped %d deadline(s) (watchdog.loop_max_late %v) — the host is overloaded", f.n, f.bound)
		} else {
			m = fmt.Sprintf("control loop woke %v late (watchdog.loop_max_late %v) — the host is overloaded", f.age, f.bound)
		}
	default:
		m = f.kind.String()
	}
	return m
}

// bandText describes the closed-loop band of an energy fault for messages
// ("" for a fixed threshold).
func (g *Guard) bandText(f *fault) string {
	for i := range g.thresholds {
		t := &g.thresholds[i]
		if t.Score != f.score || len(t.Bands) == 0 {
			continue
		}
		if f.n < 0 {
			return " (closed-loop start band: the gate is stopped)"
		}
		b := t.Bands[calibration.BandAt(t.Bands, f.n)]
		u := t.BandUnit.Noun()
		return fmt.Sprintf(" (closed-loop band from %d %s since arming: %d %s before this one)", b.From, u, f.n, u)
	}
	return ""
}

// ruleText describes the rule that judges score for messages: under
// n_of_m, the score's own window (state_energy's 2 of 5 by default).
func (g *Guard) ruleText(score Score) string {
	r := g.cfg.Energy.Rule
	if r.Kind == RuleCUSUM {
		return fmt.Sprintf("CUSUM of the exceedance over limit %g (drift %g)", r.CUSUM.Limit, r.CUSUM.Drift)
	}
	w := r.NOfM
	for _, t := range g.thresholds {
		if t.Score == score && t.NOfM.M > 0 {
			w = t.NOfM
		}
	}
	return fmt.Sprintf("%d of the last %d scores over it", w.N, w.M)
}

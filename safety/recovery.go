package safety

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Recovery errors, declared with the gate's other sentinels' wording.
var (
	// ErrRecoveryRefused: a recovery was refused (the gate is running, a
	// fault other than the energy monitor's is present, or nothing blocks a
	// reset).
	ErrRecoveryRefused = errors.New("safety: recovery refused")
	// ErrJogRefused: a jog command came while the gate is not recovering in
	// jog mode.
	ErrJogRefused = errors.New("safety: jog refused")
	// ErrInvalidJog: a jog command of the wrong length, or with a component
	// outside [-1, 1] (NaN and ±Inf included), or a gripper outside
	// limits.gripper.
	ErrInvalidJog = errors.New("safety: invalid jog")
)

// RecoveryMode is how the gate drives the arm while Recovering.
type RecoveryMode uint8

// Recovery modes.
const (
	RecoveryNone RecoveryMode = iota // not recovering (a plain reset request)
	// RecoveryJog moves the arm in the direction of the operator's latest
	// Jog, at recovery.speed_fraction of limits.max_velocity, for
	// recovery.jog_hold after each Jog (a dead-man), and holds it still
	// otherwise.
	RecoveryJog
	// RecoveryRetrace replays the velocities the gate wrote during the last
	// recovery.retrace_window of running, newest first and negated, at
	// recovery.speed_fraction of their speed (so each takes 1/fraction as
	// long and the hand goes back along the path it came), then holds still.
	RecoveryRetrace
)

// String returns "jog", "retrace", or "none".
func (m RecoveryMode) String() string {
	switch m {
	case RecoveryNone:
		return "none"
	case RecoveryJog:
		return "jog"
	case RecoveryRetrace:
		return "retrace"
	}
	return "RecoveryMode(" + strconv.Itoa(int(m)) + ")"
}

// ParseRecoveryMode maps "jog" or "retrace" to its mode.
func ParseRecoveryMode(s string) (RecoveryMode, bool) {
	switch s {
	case "jog":
		return RecoveryJog, true
	case "retrace":
		return RecoveryRetrace, true
	}
	return RecoveryNone, false
}

// RecoveryEnd says how a recovery ended.
type RecoveryEnd uint8

// How a recovery ends.
const (
	EndNone    RecoveryEnd = iota // not an end (events other than EventRecoveryEnd)
	EndRearmed                    // every score back under its threshold, no fault: re-armed (Running)
	EndTimeout                    // recovery.time_limit passed first: Stopped
	EndStopped                    // an operator Stop: Stopped
	EndFault                      // a fault other than the energy monitor's tripped: Stopped

	NumRecoveryEnds // number of RecoveryEnd values
)

var endNames = [NumRecoveryEnds]string{EndNone: "none", EndRearmed: "rearmed", EndTimeout: "timeout", EndStopped: "stopped", EndFault: "fault"}

// String returns the metrics label: "rearmed", "timeout", "stopped" or
// "fault" ("none" for EndNone).
func (e RecoveryEnd) String() string {
	if e < NumRecoveryEnds {
		return endNames[e]
	}
	return "RecoveryEnd(" + strconv.Itoa(int(e)) + ")"
}

// recovery is the gate's recovery state and the history a retrace replays.
// Guarded by Guard.mu; everything is allocated by newRecovery.
type recovery struct {
	cfg      RecoveryConfig
	mode     RecoveryMode // while Recovering; RecoveryNone otherwise
	actor    string
	since    time.Time // tick that started it
	until    time.Time // recovery.time_limit after since
	vel      []float64 // this tick's recovery velocity, before the limiter
	grip     float64   // the gripper command held (the last written one, or the last jog's)
	jog      []float64 // the latest jog direction, components in [-1, 1]
	jogUntil time.Time // the jog moves until then (recovery.jog_hold after it came)
	hist     history   // the velocities written while running, newest last
	part     float64   // the fraction of the newest history entry already retraced
}

func newRecovery(cfg RecoveryConfig, axes int, period time.Duration) recovery {
	n := int((cfg.RetraceWindow + period - 1) / period)
	n = min(max(n, 1), maxHistory)
	return recovery{cfg: cfg, vel: make([]float64, axes), jog: make([]float64, axes), hist: newHistory(n, axes)}
}

// maxHistory bounds the retrace history (ticks): a minute at 1 kHz.
const maxHistory = 60000

// start begins a recovery in mode at now, holding the gripper at grip.
// A retrace continues where an earlier one stopped: the entries it undid
// are gone from the history.
func (r *recovery) start(mode RecoveryMode, actor string, now time.Time, grip float64) {
	r.mode, r.actor, r.since, r.until = mode, actor, now, now.Add(r.cfg.TimeLimit)
	clear(r.jog)
	r.jogUntil = time.Time{}
	r.grip = grip
}

// command fills r.vel with this tick's recovery velocity: the jog while
// its dead-man holds, the next stretch of the retrace, or zero.
func (r *recovery) command(now time.Time, maxVelocity []float64) {
	clear(r.vel)
	f := r.cfg.SpeedFraction
	switch r.mode {
	case RecoveryJog:
		if r.jogUntil.IsZero() || now.After(r.jogUntil) {
			return
		}
		for i, c := range r.jog {
			r.vel[i] = c * f * maxVelocity[i]
		}
	case RecoveryRetrace:
		// Undo f entries of history per tick, newest first: each entry is
		// one tick of running at its velocity, so the velocity undoing the
		// part w of it is −w·v, and the whole path comes back in 1/f ticks
		// per entry.
		need := f
		for need > 1e-12 && r.hist.n > 0 {
			e := r.hist.newest()
			w := min(need, 1-r.part)
			for i := range r.vel {
				r.vel[i] -= w * e[i]
			}
			r.part += w
			need -= w
			if r.part >= 1-1e-9 {
				r.hist.pop()
				r.part = 0
			}
		}
	}
}

// retraceLeft is how long the history a retrace has left to replay takes
// at the recovery's speed fraction, with period the control period.
func (r *recovery) retraceLeft(period time.Duration) time.Duration {
	left := float64(r.hist.n) - r.part
	return time.Duration(left / r.cfg.SpeedFraction * float64(period))
}

// history is a ring of the last size velocity vectors of axes values each,
// in one preallocated block.
type history struct {
	buf  []float64
	axes int
	size int
	head int // entry the next push writes
	n    int // entries held
}

func newHistory(size, axes int) history {
	return history{buf: make([]float64, size*axes), axes: axes, size: size}
}

// push appends v (len ≥ axes), dropping the oldest entry when full.
func (h *history) push(v []float64) {
	copy(h.buf[h.head*h.axes:(h.head+1)*h.axes], v)
	if h.head++; h.head == h.size {
		h.head = 0
	}
	h.n = min(h.n+1, h.size)
}

// newest returns the newest entry (n > 0); it aliases the ring.
func (h *history) newest() []float64 {
	i := h.head - 1
	if i < 0 {
		i += h.size
	}
	return h.buf[i*h.axes : (i+1)*h.axes]
}

// pop drops the newest entry (n > 0).
func (h *history) pop() {
	if h.head--; h.head < 0 {
		h.head += h.size
	}
	h.n--
}

// Block is what a reset would be refused for at a tick (Decision.Block),
// unformatted so that the tick allocates nothing: Kind KindNone when a
// reset would pass now (and always while running). For the energy monitor
// (KindEnergy) and a missing score (KindScoreStale), Score names the score;
// for the energy monitor Value is its latest reading and Threshold its
// threshold (the start band's), and Window says the reading is back under
// it but the rule's window still holds recent exceedances.
type Block struct {
	Kind      Kind
	Score     Score
	Value     float64
	Threshold float64
	Window    bool
}

// blockOf turns a fault into the Block it stands for.
func blockOf(f *fault) Block {
	b := Block{Kind: f.kind, Score: f.score, Value: math.NaN(), Threshold: math.NaN()}
	if f.kind == KindEnergy {
		b.Value, b.Threshold, b.Window = f.value, f.threshold, !(f.value > f.threshold)
	}
	return b
}

// blockText is a short description of each kind for Block.AppendText.
var blockText = [NumKinds]string{
	KindStartup:           "not armed yet",
	KindOperator:          "operator stop",
	KindNaN:               "a score, command or position is not finite",
	KindInvalidInput:      "inputs of the wrong shape",
	KindInferenceDeadline: "inference request overdue",
	KindCameraStale:       "camera frames stale",
	KindArmStale:          "arm state stale",
	KindArmDisconnected:   "arm connection lost",
	KindArmWrite:          "command write failed",
	KindArmFault:          "controller fault word set",
	KindEStop:             "hardware e-stop asserted",
	KindArmDisabled:       "controller dropped enable",
	KindLoopLate:          "control loop late",
	KindTracking:          "measured motion off the commanded one",
	KindCameraFrozen:      "camera frames frozen",
	KindCameraMoved:       "camera view moved",
	KindCameraUnseen:      "something unseen in view",
}

// AppendText appends a one-line description to dst: "" for KindNone,
// "energy: state_energy 7.61 > 5.7" (or "energy: state_energy 4.2 ≤ 5.7,
// rule window not clear yet"), "score_stale: no fresh state_energy score",
// else the kind and a short phrase ("camera_stale: camera frames stale").
// It allocates nothing once dst has room.
func (b Block) AppendText(dst []byte) []byte {
	if b.Kind == KindNone {
		return dst
	}
	dst = append(dst, b.Kind.String()...)
	dst = append(dst, ": "...)
	switch b.Kind {
	case KindEnergy:
		dst = append(dst, b.Score.String()...)
		dst = append(dst, ' ')
		dst = strconv.AppendFloat(dst, b.Value, 'g', 3, 64)
		if b.Window {
			dst = append(dst, " ≤ "...)
		} else {
			dst = append(dst, " > "...)
		}
		dst = strconv.AppendFloat(dst, b.Threshold, 'g', 3, 64)
		if b.Window {
			dst = append(dst, ", rule window not clear yet"...)
		}
	case KindScoreStale:
		dst = append(dst, "no fresh "...)
		dst = append(dst, b.Score.String()...)
		dst = append(dst, " score"...)
	default:
		if b.Kind < NumKinds {
			dst = append(dst, blockText[b.Kind]...)
		}
	}
	return dst
}

// String is AppendText as a string.
func (b Block) String() string { return string(b.AppendText(nil)) }

// setBlock records what a reset would be refused for at this tick (mu
// held). A tick without a fresh score keeps the previous one: the score
// watchdog, not the reset's fresh-score rule, says whether scores stopped.
func (g *Guard) setBlock(f *fault) {
	if f.kind == KindScoreStale && f.note != "" {
		return
	}
	g.block = blockOf(f)
}

// Recover asks to start a recovery of a stopped gate in mode (RecoveryJog
// or RecoveryRetrace) on behalf of actor (the caller has authenticated it:
// the reset scope). Like Reset, the next tick decides it on live inputs: it
// is refused (ErrRecoveryRefused, one line naming the cause) while any
// fault other than the energy monitor's is present — fix the fault and
// reset — and when nothing blocks a reset (reset instead). Accepted, the
// gate enables the arm and, from the following tick, writes its own
// reduced-speed commands (see RecoveryMode) through the same limits as
// running: every monitor and watchdog but the energy rule trips as usual.
// The recovery ends by itself with a reset — the gate Running — at the
// first tick a reset would pass; after recovery.time_limit it stops
// (EndTimeout); Stop ends it too.
//
// Whatever stopped the gate, a recovery is allowed once only the energy
// monitor blocks a reset: after an energy stop, an operator stop, or a
// fault that has since cleared. Recover while recovering switches the mode
// at once (the time limit keeps running) and returns nil; while running it
// is refused. It blocks until the deciding tick or until ctx ends
// (ErrNoTick).
func (g *Guard) Recover(ctx context.Context, actor string, mode RecoveryMode) error {
	if mode != RecoveryJog && mode != RecoveryRetrace {
		return fmt.Errorf("%w (by %s): unknown mode %v — use jog or retrace", ErrRecoveryRefused, actor, mode)
	}
	g.mu.Lock()
	switch {
	case g.state == Running:
		g.mu.Unlock()
		return fmt.Errorf("%w (by %s): the gate is running — a recovery starts from a stop", ErrRecoveryRefused, actor)
	case g.state == Recovering:
		if g.rec.mode != mode {
			from := g.rec.mode
			g.rec.mode = mode
			clear(g.rec.jog)
			g.rec.jogUntil = time.Time{}
			g.mu.Unlock()
			g.log.Info("safety: recovery mode changed", "actor", actor, "from", from.String(), "to", mode.String())
			return nil
		}
		g.mu.Unlock()
		return nil
	case g.pending != nil:
		by := g.pending.actor
		g.mu.Unlock()
		return fmt.Errorf("%w (by %s)", ErrResetPending, by)
	}
	req := &resetRequest{actor: actor, mode: mode, done: make(chan error, 1)}
	g.pending = req
	g.mu.Unlock()
	return g.await(ctx, req, "recovery")
}

// Jog sets the direction of a jog recovery on behalf of actor: v has one
// component in [-1, 1] per axis of limits.max_velocity, and the gate writes
// v[i] × recovery.speed_fraction × max_velocity[i] (limited as every
// command) until recovery.jog_hold after this call, then zero until the
// next Jog. gripper is the gripper command to hold from now on, within
// limits.gripper; NaN keeps the current one. Refused (ErrJogRefused) unless
// the gate is recovering in jog mode; a bad command is ErrInvalidJog. It
// does not wait for a tick, logs nothing and allocates nothing.
func (g *Guard) Jog(actor string, v []float64, gripper float64) error {
	axes := len(g.cfg.Limits.MaxVelocity)
	if len(v) != axes {
		return fmt.Errorf("%w (by %s): %d components, limits.max_velocity has %d axes — send one per axis", ErrInvalidJog, actor, len(v), axes)
	}
	for i, x := range v {
		if !(x >= -1 && x <= 1) {
			return fmt.Errorf("%w (by %s): v[%d] is %v — each component must be in [-1, 1]", ErrInvalidJog, actor, i, x)
		}
	}
	gl := g.cfg.Limits.Gripper
	if !math.IsNaN(gripper) && !(gripper >= gl.Min && gripper <= gl.Max) {
		return fmt.Errorf("%w (by %s): gripper %v outside limits.gripper [%v, %v] — omit it to hold the gripper", ErrInvalidJog, actor, gripper, gl.Min, gl.Max)
	}
	now := g.clock.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state != Recovering || g.rec.mode != RecoveryJog {
		mode := "the gate is " + g.state.String()
		if g.state == Recovering {
			mode = "the gate is retracing"
		}
		return fmt.Errorf("%w (by %s): %s, not recovering in jog mode — start a jog recovery first", ErrJogRefused, actor, mode)
	}
	copy(g.rec.jog, v)
	if !math.IsNaN(gripper) {
		g.rec.grip = gripper
	}
	g.rec.jogUntil = now.Add(g.rec.cfg.JogHold)
	return nil
}

// recoveryEnd ends the recovery in progress at now and returns its event
// (mu held; the caller fills the Reason).
func (g *Guard) recoveryEnd(end RecoveryEnd, now time.Time) Event {
	r := &g.rec
	ev := Event{Type: EventRecoveryEnd, Time: now, Tick: g.lastTick, Actor: r.actor, Recovery: r.mode, End: end, Duration: now.Sub(r.since)}
	g.counters.RecoveryEnds[end]++
	r.mode = RecoveryNone
	clear(r.jog)
	r.jogUntil = time.Time{}
	return ev
}

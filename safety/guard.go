package safety

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/energyflow/edge/actuators"
	"github.com/energyflow/edge/telemetry/lograte"
)

// Sentinel errors. Errors returned by the Guard wrap one of these (or the
// arm's error) and say what to do.
var (
	// ErrResetRefused: a reset was refused because a stop cause persists.
	ErrResetRefused = errors.New("safety: reset refused")
	// ErrResetPending: another reset is already waiting for the next tick.
	ErrResetPending = errors.New("safety: a reset is already pending")
	// ErrNoTick: the reset's context ended before the control loop ticked.
	ErrNoTick = errors.New("safety: no control tick")
	// ErrStopped: the stop latched during the reset (operator stop or trip).
	ErrStopped = errors.New("safety: stopped during reset")
)

// Clock is the gate's time source for operator stops (ticks carry their own
// time). Tests inject a fake.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Options are the Guard's optional collaborators; zero values are valid.
type Options struct {
	Clock  Clock        // nil: the system clock
	Logger *slog.Logger // nil: discard
	// Events receives every trip, reset and refused reset. Sends never block:
	// when the channel is full the event is dropped and counted
	// (Counters.EventsDropped). The receiver owns the channel and drains it.
	Events chan<- Event
	// Period is the control loop's period; it sizes the history a retrace
	// replays (recovery.retrace_window of ticks). 0: 100 ms, the period the
	// defaults are tuned for.
	Period time.Duration
}

// defaultPeriod is Options.Period when unset.
const defaultPeriod = 100 * time.Millisecond

// Inputs is what the control loop hands the gate every tick. The gate reads
// it during Tick only and keeps no reference to it.
type Inputs struct {
	Tick int64 // tick number (runtime.Tick.N)
	// Deadline is when the tick was first due: after skipped deadlines, the
	// earliest one skipped, so Now − Deadline is the whole lateness (zero:
	// lateness not checked, and any Missed > 0 trips).
	Deadline time.Time
	Now      time.Time // when the loop woke; every age is measured from it
	Missed   int64     // deadlines skipped just before this tick

	// Scores of this tick: the committed action re-scored under the newest
	// observation. NaN: no fresh score this tick.
	Scores Scores

	// Camera is the capture time of the newest frame (zero: none yet).
	Camera time.Time
	// CameraChanged is the capture time of the newest frame whose pixels
	// differ from the frame before it (zero: unknown; the frozen-camera
	// check, watchdog.camera_frozen_motion, then stays off).
	CameraChanged time.Time
	// CameraMoved is the fraction of the camera's steady image tiles that
	// changed at once and still differ from the view before
	// (camera.ViewStatus.Fraction): > 0 while the view has moved and not
	// come back (a knocked or turned camera); 0 while it has not, or when
	// unknown. Watched when watchdog.camera_moved is set.
	CameraMoved float64
	// CameraUnseen is how many pixels of the camera's frames fall outside
	// the colours the bundle's demonstrations showed (camera.Palette), the
	// smaller count of the newest frame and the one before it, so that one
	// odd frame does not count; 0 when unknown. Watched when
	// watchdog.camera_unseen is set.
	CameraUnseen int
	// Arm is the newest successfully read arm state (nil: none yet); its
	// Time is when the reply arrived. ArmErr is the error of the newest read
	// attempt (nil: that read succeeded).
	Arm    *actuators.State
	ArmErr error
	// InferenceStarted is when the in-flight inference request was issued
	// (zero: none in flight).
	InferenceStarted time.Time

	// Command is the proposed command. Velocity must have one entry per axis
	// of limits.max_velocity.
	Command actuators.Command

	// SceneChange says the scene is being replaced at this tick (the
	// runtime's NewEpisode: every tick that holds the arm for it and the
	// first one after): the arm's position may change by other means than
	// the commands (a simulator's reset moves the hand), so the tracking
	// monitor starts afresh from this tick's position.
	SceneChange bool
}

// Decision is the gate's record of one tick, for telemetry.
type Decision struct {
	Tick   int64
	Time   time.Time
	State  State  // after this tick
	Reason Reason // why it is stopped (zero Kind while running)
	// Active is the first fault present this tick (KindNone: none), whatever
	// the state: while stopped it says what a reset would be refused for.
	Active Kind
	Clamps Clamps // values clamped in this tick's command
	// Command is what was written to the arm this tick. Velocity aliases the
	// gate's buffer and is valid until the next Tick. Empty when stopped.
	Command actuators.Command
	Halted  bool // the stop path (arm.Halt) was written this tick
	// Block is what a reset would be refused for at this tick (Kind
	// KindNone: it would pass; always while running).
	Block Block
	// Recovery is the recovery mode while Recovering (RecoveryNone
	// otherwise), and RecoveryLeft the time until recovery.time_limit.
	Recovery     RecoveryMode
	RecoveryLeft time.Duration
	// Tracking is the tracking monitor's difference at this tick between
	// the measured and the commanded displacement over tracking.window, in
	// position units, less what the timing of the reads and writes allows
	// (per: second): the value compared with tracking.tolerance. NaN: not
	// compared (monitor off, no fresh position, or its model just started).
	Tracking float64
	// TrackingSum is the sustained rule's sum at this tick, compared with
	// tracking.sustained (0 when the rule is off or its model just started).
	TrackingSum float64
	// CameraUnseen is the tick's Inputs.CameraUnseen: the pixels of colours
	// no demonstration showed, compared with watchdog.camera_unseen.
	CameraUnseen int
}

// Status is the gate's state for the API (GET /safety).
type Status struct {
	State        State
	Reason       Reason // why it is stopped (zero Kind while running)
	Since        time.Time
	Active       Kind // first fault present at the last tick
	ResetPending bool
	// RecoveryPending: a Recover waits for the next tick. While Recovering,
	// Recovery is the mode, RecoveryActor who asked and RecoveryUntil when
	// recovery.time_limit ends it.
	RecoveryPending bool
	Recovery        RecoveryMode
	RecoveryActor   string
	RecoveryUntil   time.Time
}

// Guard is the gate between the policy and the arm: the only thing the
// runtime writes commands through. Tick is called by the control loop;
// Stop, Reset, Recover, Jog, Status, Counters and Trace may be called from
// any goroutine.
type Guard struct {
	arm        actuators.Arm
	cfg        Config
	thresholds []Threshold
	clock      Clock
	log        *slog.Logger
	events     chan<- Event

	// armMu serializes every call into the arm and every state decision
	// that leads to one: Tick holds it from its decision to the end of its
	// write, Stop from its latch to the end of its Halt. So a command decided
	// before a Stop is on the wire before that Stop's Halt, none is written
	// after it, and a reset never slips between a Stop's latch and its Halt.
	armMu sync.Mutex

	mu          sync.Mutex // guards everything below
	state       State
	reason      Reason
	since       time.Time
	gen         uint64    // bumped by every latch and operator stop
	rules       []rule    // one per threshold
	fresh       []int     // per threshold: fresh scores observed while running since the last accepted reset
	armedTicks  int       // running ticks since the last accepted reset (every score's, fresh or not)
	thrNow      []float64 // per threshold: the threshold in effect at the latest tick
	lastScore   [NumScores]time.Time
	haveTick    bool
	lastTick    int64
	lastNow     time.Time
	enabledAt   time.Time
	active      Kind
	trace       ring
	traceDue    int // ticks until the EventTrace of the last trip; 0: none due
	traceReason Reason
	counters    Counters
	pending     *resetRequest
	lim         *limiter
	out         actuators.Command
	haltFailing bool
	linkDown    bool  // the arm driver reported the link lost (OnArmEvent)
	linkErr     error // why
	period      time.Duration
	rec         recovery      // recovery mode state and the retrace history (recovery.go)
	trk         *tracker      // the tracking monitor (tracking.go)
	frozen      *frozenCamera // the frozen-camera check (frozen.go)
	trackNow    float64       // the tracking difference of the latest tick (Decision.Tracking)
	trackSum    float64       // the sustained rule's sum at the latest tick (Decision.TrackingSum)
	block       Block         // what a reset would be refused for at the latest tick
	// refusals rate-limits the log and the events of refused resets and
	// recoveries: one line (and event) when a cause starts or changes, then
	// at most one every 5 s with the count of the others.
	refusals lograte.Repeat[refusal]
}

type resetRequest struct {
	actor string
	mode  RecoveryMode // RecoveryNone: a reset; else a recovery in this mode
	done  chan error   // buffered, receives exactly one result
}

// refusal identifies a repeating refusal for the log's rate limit.
type refusal struct {
	typ   EventType
	kind  Kind
	actor string
}

// enablePurpose says why a tick enables the arm.
type enablePurpose uint8

const (
	enableReset   enablePurpose = iota // an accepted Reset
	enableRecover                      // an accepted Recover
	enableRearm                        // a recovery re-arms by itself
)

// New builds a gate for arm. cal is the bundle manifest's calibration block
// (nil when the bundle has none: every monitored score then needs a
// threshold in cfg). The gate starts Stopped (KindStartup): call Reset once
// the loop is ticking with live inputs.
func New(arm actuators.Arm, cfg Config, cal *Calibration, opts Options) (*Guard, error) {
	if arm == nil {
		return nil, errors.New("safety: no arm")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	th, err := resolveThresholds(&cfg.Energy, cal)
	if err != nil {
		return nil, err
	}
	cfg = cloneConfig(cfg)
	period := opts.Period
	if period <= 0 {
		period = defaultPeriod
	}
	g := &Guard{
		arm:        arm,
		cfg:        cfg,
		thresholds: th,
		clock:      opts.Clock,
		log:        opts.Logger,
		events:     opts.Events,
		trace:      newRing(cfg.Events.TraceBefore),
		lim:        newLimiter(cfg.Limits),
		out:        actuators.Command{Velocity: make([]float64, len(cfg.Limits.MaxVelocity))},
		period:     period,
		rec:        newRecovery(cfg.Recovery, len(cfg.Limits.MaxVelocity), period),
		trk:        newTracker(cfg.Tracking, len(cfg.Limits.MaxVelocity), period),
		frozen:     newFrozenCamera(cfg.Watchdog, len(cfg.Limits.MaxVelocity)),
		trackNow:   math.NaN(),
	}
	if g.clock == nil {
		g.clock = systemClock{}
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if cal != nil && cal.ClosedLoop != nil && len(th) > 0 && !slices.ContainsFunc(th, func(t Threshold) bool { return t.Bands != nil }) {
		c := cal.ClosedLoop
		i := slices.IndexFunc(th, func(t Threshold) bool { return t.Score.String() == c.Score })
		if i < 0 {
			// the default watch set of a bundle with the state term leaves the
			// policy energy's calibration aside: expected, not a warning
			g.log.Info("safety: the bundle's closed-loop calibration is for a score the stop does not watch",
				"closed_loop_score", c.Score, "watched", watchedNames(th))
		} else {
			g.log.Warn("safety: the bundle's closed-loop threshold (calibration.closed_loop) is not used: the config sets the threshold or runs another rule than the one it was certified for",
				"closed_loop_score", c.Score, "closed_loop_rule", fmt.Sprintf("%s %d/%d", c.Rule.Kind, c.Rule.N, c.Rule.M),
				"rule", ruleName(cfg.Energy.Rule), "threshold", th[i].Value, "source", th[i].Source)
		}
	}
	g.fresh = make([]int, len(th))
	g.thrNow = make([]float64, len(th))
	for i, t := range th {
		g.thrNow[i] = t.At(0)
		switch cfg.Energy.Rule.Kind {
		case RuleCUSUM:
			c := cfg.Energy.Rule.CUSUM
			g.rules = append(g.rules, newCUSUM(t.Value, t.Scale, c.Drift, c.Limit))
		default:
			n := t.NOfM
			if n.M == 0 { // a Threshold built without a window
				n = cfg.Energy.Rule.NOfM
			}
			g.rules = append(g.rules, newNOfM(t.Value, n.N, n.M))
		}
	}
	now := g.clock.Now()
	g.state, g.since, g.active = Stopped, now, KindStartup
	g.reason = Reason{Kind: KindStartup, Scores: NoScores(), Threshold: math.NaN(), Time: now,
		Message: "not armed yet: the runtime resets the gate once camera, arm and scores are live"}
	return g, nil
}

func cloneConfig(c Config) Config {
	c.Energy.Scores = append([]ScoreConfig(nil), c.Energy.Scores...)
	l := &c.Limits
	tr := &c.Tracking
	for _, p := range []*[]float64{&l.MaxVelocity, &l.MaxAcceleration, &l.MaxJerk, &l.MaxDelta, &l.SoftLower, &l.SoftUpper, &l.KPosition,
		&tr.Scale, &tr.Lower, &tr.Upper} {
		*p = append([]float64(nil), (*p)...)
	}
	return c
}

// Thresholds returns the resolved threshold of each monitored score (for
// the telemetry overlay). For the threshold in effect now, which follows the
// closed-loop bands, see ThresholdNow.
func (g *Guard) Thresholds() []Threshold {
	out := append([]Threshold(nil), g.thresholds...)
	for i := range out {
		out[i].Bands = slices.Clone(out[i].Bands)
		if c := out[i].Ceiling; c != nil {
			cc := *c
			out[i].Ceiling = &cc
		}
	}
	return out
}

// ThresholdNow returns the first monitored score's threshold in effect at
// the latest tick (before the first tick: the start band's): with
// closed-loop bands, while running, the band of the running ticks (or, for
// a calibration in fresh scores, the fresh scores) since the gate was
// armed; while stopped, band 0. NaN when no score is monitored. It
// allocates nothing and is safe from any goroutine, the control loop's
// included (between its Ticks).
func (g *Guard) ThresholdNow() float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.thrNow) == 0 {
		return math.NaN()
	}
	return g.thrNow[0]
}

// Config returns the frozen configuration the gate runs with.
func (g *Guard) Config() Config { return cloneConfig(g.cfg) }

type action uint8

const (
	actNone action = iota
	actCommand
	actHalt
	actEnable
)

// Tick runs one control tick: it checks every monitor and watchdog on in,
// then either writes the limited command to the arm, or — on a trip, and on
// every tick while stopped — the stop path arm.Halt (with a context that
// ignores ctx's cancellation). A trip is on the wire before Tick returns.
// A pending Reset or Recover is decided here, on live inputs. While
// Recovering it writes the recovery's own command instead of the proposed
// one (the energy rule does not trip; everything else does), and re-arms
// (Running) at the first tick a reset would pass.
//
// The returned error reports a failed arm write (the gate has stopped then).
// While running, Tick allocates nothing after the first call.
func (g *Guard) Tick(ctx context.Context, in *Inputs) (Decision, error) {
	g.armMu.Lock()
	defer g.armMu.Unlock()

	var evs [4]Event
	nev := 0

	g.mu.Lock()
	var dt time.Duration
	if g.haveTick {
		dt = in.Now.Sub(g.lastNow)
	}
	g.haveTick, g.lastTick, g.lastNow = true, in.Tick, in.Now
	g.counters.Ticks++
	g.trace.push(ScoreSample{Tick: in.Tick, Time: in.Now, Scores: in.Scores})
	if g.traceDue > 0 {
		g.traceDue--
		if g.traceDue == 0 {
			evs[nev] = Event{Type: EventTrace, Time: in.Now, Tick: in.Tick, Reason: g.traceReason,
				Trace: g.trace.last(nil, g.cfg.Events.TraceBefore)}
			nev++
		}
	}

	d := Decision{Tick: in.Tick, Time: in.Now}
	f, hw := g.check(in) // hw: the first fault other than the energy monitor's
	g.active = f.kind
	d.Active = f.kind
	d.Tracking = g.trackNow
	d.TrackingSum = g.trackSum
	d.CameraUnseen = in.CameraUnseen

	act := actNone
	tripped := false
	var trip fault // the tripping fault, formatted after the halt is written
	var tripGen uint64
	var req *resetRequest
	var gen uint64
	purpose := enableReset
	var end Event // a recovery that ends at this tick (Type 0: none)
	var timeout fault
	timedOut := false
	switch {
	case g.state == Running && f.kind != KindNone:
		trip, tripGen = f, g.latch(&f, in)
		act, tripped = actHalt, true
	case g.state == Recovering && hw.kind != KindNone:
		trip, tripGen = hw, g.latch(&hw, in)
		act, tripped = actHalt, true
		end = g.recoveryEnd(EndFault, in.Now)
	case g.state == Running:
		v := g.lim.apply(g.out.Velocity, in.Command.Velocity, in.Command.Gripper, armPosition(in), dt, &d.Clamps)
		g.out.Gripper = v
		for i, c := range d.Clamps {
			g.counters.Clamps[i] += uint64(c)
		}
		g.rec.hist.push(g.out.Velocity)
		d.Command = g.out
		act = actCommand
	case g.state == Recovering:
		b := f
		if b.kind == KindNone {
			g.resetCheck(&b, in)
		}
		g.setBlock(&b)
		switch {
		case b.kind == KindNone: // a reset would pass: re-arm
			act, gen, purpose = actEnable, g.gen, enableRearm
		case !in.Now.Before(g.rec.until):
			timeout, timedOut = b, true
			g.reason = baseReason(&b, in)
			g.state, g.since = Stopped, in.Now
			g.gen++
			end = g.recoveryEnd(EndTimeout, in.Now)
			act = actHalt
		default:
			g.rec.command(in.Now, g.cfg.Limits.MaxVelocity)
			v := g.lim.apply(g.out.Velocity, g.rec.vel, g.rec.grip, armPosition(in), dt, &d.Clamps)
			g.out.Gripper = v
			for i, c := range d.Clamps {
				g.counters.Clamps[i] += uint64(c)
			}
			d.Command = g.out
			act = actCommand
		}
	default:
		g.counters.StoppedTicks++
		act = actHalt
		b := f // what a reset would be refused for
		if b.kind == KindNone {
			g.resetCheck(&b, in)
		}
		g.setBlock(&b)
		if req = g.pending; req != nil {
			g.pending = nil
			switch {
			case req.mode != RecoveryNone && hw.kind != KindNone:
				r := g.reasonFor(&hw, in)
				g.counters.RecoveriesRefused++
				evs[nev] = Event{Type: EventRecoveryRefused, Time: in.Now, Tick: in.Tick, Reason: r, Actor: req.actor, Recovery: req.mode}
				nev++
				req.done <- fmt.Errorf("%w (by %s): %s: %s; recovery is for an energy stop: fix the fault, then reset", ErrRecoveryRefused, req.actor, r.Kind, r.Message)
				req = nil
			case req.mode != RecoveryNone && b.kind == KindNone:
				r := g.reason
				g.counters.RecoveriesRefused++
				evs[nev] = Event{Type: EventRecoveryRefused, Time: in.Now, Tick: in.Tick, Reason: r, Actor: req.actor, Recovery: req.mode}
				nev++
				req.done <- fmt.Errorf("%w (by %s): nothing to recover from: every score is under its threshold and no fault is present — reset instead", ErrRecoveryRefused, req.actor)
				req = nil
			case req.mode != RecoveryNone:
				act, gen, purpose = actEnable, g.gen, enableRecover
			case g.awaitScore(req, &b):
				g.pending, req = req, nil // decided on a later tick that has the scores
			case b.kind != KindNone:
				r := g.reasonFor(&b, in)
				g.counters.ResetsRefused++
				evs[nev] = Event{Type: EventResetRefused, Time: in.Now, Tick: in.Tick, Reason: r, Actor: req.actor}
				nev++
				req.done <- fmt.Errorf("%w (by %s): %s: %s", ErrResetRefused, req.actor, r.Kind, r.Message)
				req = nil
			default:
				act, gen = actEnable, g.gen
			}
		}
	}
	g.mu.Unlock()

	var wt time.Time // when the write went out, for the tracking monitor
	if g.trk.on {
		wt = g.clock.Now()
	}
	var err error
	switch act {
	case actCommand:
		if err = g.arm.Command(ctx, g.out); err != nil {
			err = fmt.Errorf("safety: write command at tick %d: %w", in.Tick, err)
			g.mu.Lock()
			g.counters.ArmErrors++
			d.Command = actuators.Command{}
			switch g.state {
			case Running:
				g.rec.hist.pop() // not applied: not part of the path to retrace
				trip = fault{kind: KindArmWrite, err: err}
				tripGen, tripped = g.latch(&trip, in), true
			case Recovering:
				trip = fault{kind: KindArmWrite, err: err}
				tripGen, tripped = g.latch(&trip, in), true
				end = g.recoveryEnd(EndFault, in.Now)
			}
			g.mu.Unlock()
			d.Halted = true
			g.halt(ctx)
		}
	case actHalt:
		d.Halted = true
		if herr := g.halt(ctx); herr != nil && tripped {
			err = herr // report a failed halt on the trip tick (later ones are counted)
		}
	case actEnable:
		d.Halted = false
		eerr := g.arm.Enable(ctx)
		g.mu.Lock()
		switch {
		case eerr != nil && purpose == enableRearm:
			g.counters.ArmErrors++
			trip = fault{kind: KindArmWrite, err: fmt.Errorf("re-arming after the recovery: arm refused enable: %w", eerr)}
			tripGen, tripped = g.latch(&trip, in), true
			end = g.recoveryEnd(EndFault, in.Now)
		case eerr != nil:
			g.counters.ArmErrors++
			r := g.reason
			what, sentinel, typ := "", ErrResetRefused, EventResetRefused
			if purpose == enableRecover {
				what, sentinel, typ = " for the recovery", ErrRecoveryRefused, EventRecoveryRefused
				g.counters.RecoveriesRefused++
			} else {
				g.counters.ResetsRefused++
			}
			evs[nev] = Event{Type: typ, Time: in.Now, Tick: in.Tick, Reason: r, Actor: req.actor, Recovery: req.mode}
			nev++
			req.done <- fmt.Errorf("%w (by %s): arm refused enable%s: %w — check the controller's fault and e-stop", sentinel, req.actor, what, eerr)
		case g.gen != gen:
			if req != nil {
				req.done <- fmt.Errorf("%w (by %s): %s", ErrStopped, req.actor, g.reason.Message)
			}
		case purpose == enableRecover:
			g.state, g.since = Recovering, in.Now
			g.markEnabled(in.Now)
			g.lim.reset()
			g.trk.reset()
			g.rec.start(req.mode, req.actor, in.Now, g.out.Gripper)
			g.counters.Recoveries++
			evs[nev] = Event{Type: EventRecoveryStart, Time: in.Now, Tick: in.Tick, Reason: g.reason, Actor: req.actor, Recovery: req.mode}
			nev++
			req.done <- nil
		default: // an accepted reset, or a recovery re-arming
			cleared := g.reason
			g.state, g.since = Running, in.Now
			g.reason = Reason{}
			g.markEnabled(in.Now)
			for i, r := range g.rules {
				r.reset()
				g.fresh[i] = 0
			}
			g.armedTicks = 0
			g.lim.reset() // Enable halted the arm first: from standstill
			g.trk.reset()
			g.counters.Resets++
			actor := ""
			if req != nil {
				actor = req.actor
				req.done <- nil
			} else {
				actor = g.rec.actor
				end = g.recoveryEnd(EndRearmed, in.Now)
				end.Reason = cleared
			}
			evs[nev] = Event{Type: EventReset, Time: in.Now, Tick: in.Tick, Reason: cleared, Actor: actor}
			nev++
		}
		g.mu.Unlock()
		if eerr != nil {
			g.halt(ctx)
			d.Halted = true
		}
	}
	var done time.Time
	if g.trk.on {
		done = g.clock.Now()
	}
	g.mu.Lock()
	switch {
	case act == actCommand && err == nil:
		g.trk.wrote(wt, done, g.out.Velocity)
	case act == actCommand || act == actHalt || d.Halted:
		g.trk.wrote(wt, done, nil) // a halt: zero
	}
	if tripped {
		// The halt is on the wire: now format the reason and the event.
		msg := g.message(&trip)
		if g.gen == tripGen {
			g.reason.Message = msg
			g.traceReason.Message = msg
		}
		evs[nev] = g.tripEvent(trip.kind, tripGen, msg)
		nev++
	}
	if timedOut {
		g.reason.Message = fmt.Sprintf("recovery timed out after %v (recovery.time_limit): %s", g.cfg.Recovery.TimeLimit, g.message(&timeout))
	}
	if end.Type != 0 {
		if end.End != EndRearmed {
			end.Reason = g.reason
		}
		evs[nev] = end
		nev++
	}
	d.State, d.Reason = g.state, g.reason
	switch g.state {
	case Running:
		g.block = Block{}
	case Recovering:
		d.Recovery, d.RecoveryLeft = g.rec.mode, g.rec.until.Sub(in.Now)
		d.Block = g.block
	default:
		d.Block = g.block
	}
	g.mu.Unlock()

	for i := 0; i < nev; i++ {
		g.emit(&evs[i])
	}
	return d, err
}

// markEnabled records when the gate enabled the arm (mu held): read-backs
// older than that may still say disabled.
func (g *Guard) markEnabled(now time.Time) {
	g.enabledAt = g.clock.Now()
	if now.After(g.enabledAt) {
		g.enabledAt = now
	}
}

// halt writes the stop path. Called with armMu held.
func (g *Guard) halt(ctx context.Context) error {
	err := g.arm.Halt(context.WithoutCancel(ctx))
	g.mu.Lock()
	was := g.haltFailing
	g.haltFailing = err != nil
	if err != nil {
		g.counters.ArmErrors++
	}
	g.mu.Unlock()
	if err != nil {
		err = fmt.Errorf("safety: halt: %w — the controller's heartbeat timeout is the fallback", err)
		if !was {
			g.log.Error("safety: halt failed", "err", err)
		}
	} else if was {
		g.log.Info("safety: halt succeeds again")
	}
	return err
}

// Stop latches an operator stop (STOP button, API, SIGTERM) and writes the
// stop path at once, from the caller's goroutine, without waiting for the
// next tick (it waits only for an arm write in progress to finish). A
// stopped gate stays stopped with its first reason; the arm is halted again
// anyway. A pending reset is cancelled. When Stop returns, the gate is
// stopped and the halt written after any command. Safe to call from any
// goroutine, repeatedly; ctx's cancellation does not abort the halt. A
// recovery in progress ends (EndStopped). The stop is logged as a warning.
func (g *Guard) Stop(ctx context.Context, actor, message string) error {
	return g.stop(ctx, actor, message, slog.LevelWarn)
}

// StopExpected is Stop for a stop its caller expects, such as the runtime
// ending an evaluation episode on purpose: the same latch, halt and event,
// its log line ("safety: stop") at info rather than as a warning.
func (g *Guard) StopExpected(ctx context.Context, actor, message string) error {
	return g.stop(ctx, actor, message, slog.LevelInfo)
}

// stop is Stop, its trip logged at level.
func (g *Guard) stop(ctx context.Context, actor, message string, level slog.Level) error {
	// Take the arm first: no tick can decide (or enable) between the latch
	// and the halt, so the halt is never overtaken by a reset.
	g.armMu.Lock()
	g.mu.Lock()
	g.gen++
	var ev, end Event
	latched := false
	if g.state != Stopped {
		recovering := g.state == Recovering
		f := fault{kind: KindOperator, actor: actor, note: message}
		now := g.clock.Now()
		gen := g.latch(&f, &Inputs{Tick: g.lastTick, Now: now, Scores: NoScores()})
		g.reason.Message = g.message(&f)
		g.traceReason = g.reason
		ev = g.tripEvent(KindOperator, gen, g.reason.Message)
		latched = true
		if recovering {
			end = g.recoveryEnd(EndStopped, now)
			end.Reason = g.reason
		}
	}
	if req := g.pending; req != nil {
		g.pending = nil
		req.done <- fmt.Errorf("%w: stop by %s", ErrStopped, actor)
	}
	g.mu.Unlock()
	at := g.clock.Now()
	err := g.halt(ctx)
	done := g.clock.Now()
	g.mu.Lock()
	g.trk.wrote(at, done, nil)
	g.mu.Unlock()
	g.armMu.Unlock()
	if latched {
		g.emitAt(&ev, level)
	}
	if end.Type != 0 {
		g.emit(&end)
	}
	return err
}

// Reset asks to re-arm a stopped gate on behalf of actor (the caller has
// authenticated it). The request is decided at the next tick on live inputs:
// it is refused (ErrResetRefused, saying which cause persists) while any
// monitor or watchdog would trip — for the energy monitor, while its rule is
// in alarm, any monitored score is above its threshold or missing (a tick
// without a fresh score, nothing else wrong, passes the request on to the
// next tick; the score watchdog bounds that wait). Accepted,
// the gate enables the arm and passes commands again from the following
// tick, with the rate limits restarting from standstill. Reset blocks until
// that tick or until ctx ends (ErrNoTick). Resetting a running gate is a no-op;
// a recovering one is refused (it re-arms by itself when a reset would pass).
func (g *Guard) Reset(ctx context.Context, actor string) error {
	g.mu.Lock()
	switch {
	case g.state == Running:
		g.mu.Unlock()
		return nil
	case g.state == Recovering:
		mode := g.rec.mode
		g.mu.Unlock()
		return fmt.Errorf("%w (by %s): recovering (%s): the gate re-arms by itself once every score is back under its threshold — STOP ends the recovery", ErrResetRefused, actor, mode)
	case g.pending != nil:
		by := g.pending.actor
		g.mu.Unlock()
		return fmt.Errorf("%w (by %s)", ErrResetPending, by)
	}
	req := &resetRequest{actor: actor, done: make(chan error, 1)}
	g.pending = req
	g.mu.Unlock()
	return g.await(ctx, req, "reset")
}

// await waits for the tick that decides req (a reset or a recovery, what)
// or for ctx to end.
func (g *Guard) await(ctx context.Context, req *resetRequest, what string) error {
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		g.mu.Lock()
		if g.pending == req {
			g.pending = nil
			g.mu.Unlock()
			return fmt.Errorf("%w before the %s by %s timed out (%w) — is the control loop running?", ErrNoTick, what, req.actor, ctx.Err())
		}
		g.mu.Unlock()
		return <-req.done // a tick took it: its answer is coming
	}
}

// awaitScore says whether the reset req, blocked only by the reset's
// fresh-score rule (b: no fresh score on this tick, every other condition
// clear), waits for a later tick instead of being refused.
// Re-scores land on some ticks and not others, so a reset pressed between
// two of them would otherwise be refused at random on a host whose re-score
// takes several periods. The wait is bounded by the score watchdog: once no
// fresh score has come for watchdog.score_max_age, the tick's fault is the
// watchdog's score_stale and the reset is refused with it.
func (g *Guard) awaitScore(req *resetRequest, b *fault) bool {
	return req.mode == RecoveryNone && b.kind == KindScoreStale && b.note == noteResetNeedsScore
}

// OnArmEvent takes the arm driver's link events (actuators.Options.OnEvent):
// while the driver reports the link down, every tick sees arm_disconnected
// at once instead of waiting for the arm state to age past
// watchdog.arm_max_age, and a reset is refused. It never calls the arm and
// does not block, so the driver may call it from inside a request.
func (g *Guard) OnArmEvent(e actuators.Event) {
	g.mu.Lock()
	g.linkDown = e.State != actuators.StateConnected
	g.linkErr = e.Err
	g.mu.Unlock()
}

// Status returns the gate's state.
func (g *Guard) Status() Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := Status{State: g.state, Reason: g.reason, Since: g.since, Active: g.active}
	if p := g.pending; p != nil {
		st.ResetPending, st.RecoveryPending = p.mode == RecoveryNone, p.mode != RecoveryNone
	}
	if g.state == Recovering {
		st.Recovery, st.RecoveryActor, st.RecoveryUntil = g.rec.mode, g.rec.actor, g.rec.until
	}
	return st
}

// Counters returns a copy of the cumulative counters.
func (g *Guard) Counters() Counters {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.counters
}

// Trace appends the score trace (oldest first, up to events.trace_before
// samples) to dst.
func (g *Guard) Trace(dst []ScoreSample) []ScoreSample {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.trace.last(dst, len(g.trace.buf))
}

// latch moves to Stopped with f's reason, not yet formatted, and returns
// the latch's generation. Called with mu held.
func (g *Guard) latch(f *fault, in *Inputs) uint64 {
	g.reason = baseReason(f, in)
	g.state, g.since = Stopped, in.Now
	g.gen++
	g.counters.Trips[f.kind]++
	g.traceReason = g.reason
	g.traceDue = g.cfg.Events.TraceAfter
	return g.gen
}

// tripEvent builds the trip event of the latch of generation gen (mu held).
// If another stop has latched since, the reason is still this trip's.
func (g *Guard) tripEvent(kind Kind, gen uint64, msg string) Event {
	r := g.traceReason
	if g.gen != gen || r.Kind != kind {
		r = Reason{Kind: kind, Message: msg}
	}
	r.Message = msg
	return Event{Type: EventTrip, Time: r.Time, Tick: r.Tick, Reason: r, Actor: r.Actor,
		Trace: g.trace.last(nil, g.cfg.Events.TraceBefore)}
}

// emit logs and publishes one event (without locks held). Refused resets
// and recoveries repeated every tick are coalesced: logged and published
// when their cause starts or changes, then at most every 5 s with the
// number of the others (Event.Repeated); every one is counted.
func (g *Guard) emit(ev *Event) { g.emitAt(ev, slog.LevelWarn) }

// emitAt is emit with a trip logged at tripLevel.
func (g *Guard) emitAt(ev *Event, tripLevel slog.Level) {
	r := &ev.Reason
	switch ev.Type {
	case EventTrip:
		g.endRefusals()
		g.log.Log(context.Background(), tripLevel, "safety: stop", "reason", r.Kind.String(), "tick", r.Tick, "message", r.Message,
			"energy", r.Scores[ScoreEnergy], "centered_energy", r.Scores[ScoreCentered], "state_energy", r.Scores[ScoreStateEnergy],
			"threshold", r.Threshold, "actor", r.Actor)
	case EventReset:
		g.endRefusals()
		g.log.Info("safety: reset", "actor", ev.Actor, "tick", ev.Tick, "cleared", r.Kind.String())
	case EventResetRefused, EventRecoveryRefused:
		g.mu.Lock()
		log, n := g.refusals.Observe(ev.Time, refusal{typ: ev.Type, kind: r.Kind, actor: ev.Actor})
		g.mu.Unlock()
		if !log {
			return
		}
		ev.Repeated = n
		if ev.Type == EventResetRefused {
			g.log.Warn("safety: reset refused", "actor", ev.Actor, "tick", ev.Tick, "cause", r.Kind.String(), "message", r.Message, "repeated", n)
		} else {
			g.log.Warn("safety: recovery refused", "actor", ev.Actor, "mode", ev.Recovery.String(), "tick", ev.Tick, "cause", r.Kind.String(), "message", r.Message, "repeated", n)
		}
	case EventRecoveryStart:
		g.log.Info("safety: recovery started", "actor", ev.Actor, "mode", ev.Recovery.String(), "tick", ev.Tick,
			"from", r.Kind.String(), "speed_fraction", g.cfg.Recovery.SpeedFraction, "time_limit", g.cfg.Recovery.TimeLimit,
			"retrace_available", g.retraceAvailable())
	case EventRecoveryEnd:
		args := []any{"actor", ev.Actor, "mode", ev.Recovery.String(), "tick", ev.Tick, "after", ev.Duration}
		switch ev.End {
		case EndRearmed:
			g.log.Info("safety: recovery ended: scores back under threshold, re-armed", args...)
		case EndTimeout:
			g.log.Warn("safety: recovery ended: timed out, stopped", append(args, "time_limit", g.cfg.Recovery.TimeLimit, "message", r.Message)...)
		case EndStopped:
			g.log.Info("safety: recovery ended: operator stop", append(args, "by", r.Actor)...)
		default:
			g.log.Warn("safety: recovery ended: fault, stopped", append(args, "cause", r.Kind.String(), "message", r.Message)...)
		}
	}
	if g.events == nil {
		return
	}
	select {
	case g.events <- *ev:
	default:
		g.mu.Lock()
		g.counters.EventsDropped++
		g.mu.Unlock()
	}
}

// endRefusals marks the refusals' cause over (a trip or a reset): the next
// refusal is logged at once.
func (g *Guard) endRefusals() {
	g.mu.Lock()
	g.refusals.End()
	g.mu.Unlock()
}

// retraceAvailable is how long a retrace of the history left would take.
func (g *Guard) retraceAvailable() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.rec.retraceLeft(g.period)
}

func armPosition(in *Inputs) []float64 {
	if in.Arm == nil {
		return nil
	}
	return in.Arm.Position
}

// watchedNames names the scores of th, comma-separated ("state_energy").
func watchedNames(th []Threshold) string {
	names := make([]string, len(th))
	for i, t := range th {
		names[i] = t.Score.String()
	}
	return strings.Join(names, ",")
}

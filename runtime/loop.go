package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/energyflow/edge/actuators"
	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/safety"
	"github.com/energyflow/edge/telemetry"
	"github.com/energyflow/edge/telemetry/lograte"
)

// Sink receives what the loop publishes every tick (the telemetry server).
// Publish must not block; the sample's slices are reused after it returns.
type Sink interface {
	Publish(s telemetry.Sample)
}

// TickObserver receives per-tick measurements (telemetry.Metrics).
type TickObserver interface {
	ObserveTick(duration, jitter time.Duration)
	TickOverrun()
	ObserveInference(d time.Duration)
	// ObservePlanLateness follows every finished plan: the recent plans'
	// p90 latency in control periods (NaN before enough plans), the limit
	// past which the loop warns (0: none), and whether it is past it.
	ObservePlanLateness(p90, limit float64, late bool)
	ObserveEnergy(score, threshold float64)
}

// StepRecorder receives one row per RUNNING tick (episode recording).
type StepRecorder interface {
	Step(obs []float32, action []float64, gripper float64, scores safety.Scores)
}

// LoopDeps are the parts the loop drives. From Run on the loop is the only
// user of Sampler, Scorer and State (Sampler and Scorer each in a goroutine
// of its own, State in the loop's); the caller keeps owning and closing
// them and everything else.
type LoopDeps struct {
	Config   *Config
	Manifest *engines.Manifest
	Clock    Clock
	Arm      actuators.Arm
	Guard    *safety.Guard
	Sampler  PolicySampler
	// Late samples plans on the bundle's late network (the manifest's
	// late_policy; loop.late_policy says from which measured latency). Nil:
	// every plan samples on Sampler.
	Late PolicySampler
	// Scorer re-scores the committed chunk under the newest observation,
	// asynchronously: the energies, picked up within loop.score_wait or on
	// the next tick (its StateEnergy too when State is nil). Nil for a
	// policy without an energy (engines.Sampler.HasEnergy false): no
	// re-scoring goroutine runs and the energies are NaN, so the Guard must
	// not monitor energy or centered_energy.
	Scorer PolicyScorer
	// State, when the bundle has the state term, scores the newest
	// observation synchronously every tick (state_energy): an instance of
	// its own, not shared with Sampler or Scorer. Nil without the term.
	State    StateTermEvaluator
	Cond     *engines.Conditioner
	Sink     Sink         // nil: no telemetry
	Metrics  TickObserver // nil: no metrics
	Recorder StepRecorder // nil: no recording
	// CameraTime returns the capture time of the newest camera frame (zero:
	// none yet); nil when the robot has no camera.
	CameraTime func() time.Time
	// CameraChanged returns the capture time of the newest frame whose
	// pixels differ from the frame before it (nil or zero: unknown), for the
	// frozen-camera check (safety watchdog.camera_frozen_motion).
	CameraChanged func() time.Time
	// CameraMoved returns the fraction of the camera's steady image tiles
	// that changed at once and still differ (camera.ViewStatus.Fraction; 0:
	// the view has not moved), for safety watchdog.camera_moved. Nil: not
	// watched.
	CameraMoved func() float64
	// CameraUnseen returns how many pixels of the two newest frames fall
	// outside the bundle's palette (the smaller count of the two), for
	// safety watchdog.camera_unseen. Nil: not watched.
	CameraUnseen func() int
	// SceneReplaced, if set, is called on the loop's goroutine when
	// NewEpisode's replace has returned and the loop resumes on the new
	// scene (the camera's view check takes the new scene as its reference).
	// It must not block.
	SceneReplaced func()
	// Images gives the vision features of the bundle's image inputs; nil
	// when the bundle takes none (NewLoop refuses an image bundle without).
	Images   ImageSource
	Notifier *Notifier
	Logger   *slog.Logger
	// OnTick, if set, is called at the end of every tick with its decision
	// and the scores the gate saw (NaN: none); tests and the evaluation
	// harness use it. It must not block.
	OnTick func(tk Tick, d *safety.Decision, scores safety.Scores)
	// OnStop, if set, is called on the loop's goroutine at the end of the
	// tick that finds the gate newly stopped — a trip, an operator's stop, a
	// recovery that timed out — with the stop's reason (kind, score, tick,
	// time, actor, message), before that tick's OnTick. It is not called for
	// the gate's start-up stop, nor for the stop Run latches when it ends.
	// The evaluation harness ends an episode on it. It must not block.
	OnStop func(r safety.Reason)
	// Stages, if set, receives the time of every successful plan (sample,
	// and sample_step: the plan over its K steps), re-score and state-term
	// evaluation, measured on the wall clock whatever Clock is (they are
	// compute times, not the schedule). Nil: none recorded.
	Stages *StageTimes
	// ExpectedShutdown: the caller ends Run on purpose and expects it (the
	// evaluation harness ends every episode so), so the stop Run latches when
	// it ends is logged at info rather than as a warning
	// (safety.Guard.StopExpected). False: an operator stop by "runtime",
	// logged as a warning (safety.Guard.Stop).
	ExpectedShutdown bool
}

// LoopStats are counters since Run started.
type LoopStats struct {
	Ticks          int64
	Missed         int64 // deadlines skipped
	Chunks         int64 // chunks committed
	ActionsDropped int64 // actions dropped by latency compensation
	Replans        int64
	InferErrors    int64
	ScoreErrors    int64 // failed re-scores and failed state-term evaluations
	ScoreLate      int64 // ticks whose re-score missed score_wait
	ArmErrors      int64
	IdleTicks      int64 // RUNNING ticks without an action to execute (hold)
	Bridged        int64 // ticks that executed the committed prediction's tail while the next plan was late (loop.bridge)
	CondErrors     int64 // replans skipped: no observation (no usable camera frame)
	// LatePlans counts plans that finished while the p90 of the recent
	// plans' latency was past loop.plan_late_limit, and LateSpells how
	// often it went past (each logs one warning).
	LatePlans  int64
	LateSpells int64
	// LateNetPlans counts plans sampled on the bundle's late network
	// (loop.late_policy).
	LateNetPlans int64
}

// loopCounters are LoopStats as atomics: the tick updates them without
// locks or allocations, Stats reads them from any goroutine.
type loopCounters struct {
	ticks, missed, chunks, dropped, replans, inferErrors, scoreErrors, scoreLate, armErrors, idle, condErrors atomic.Int64
	latePlans, lateSpells, bridged, lateNet                                                                   atomic.Int64
}

// Loop is the fixed-rate control loop. Create with NewLoop, drive with Run.
type Loop struct {
	d       LoopDeps
	log     *slog.Logger
	period  time.Duration
	machine *Machine

	obs         *stateObs
	infer       *worker[inferJob]
	score       *worker[scoreJob] // nil without a Scorer
	chunk       *Chunk
	pred        []float32 // full prediction (T_p×D_a) of the committed chunk
	predTime    time.Time
	havePred    bool
	seq         int64
	state       actuators.State
	haveArm     bool
	cmd         actuators.Command
	nVel        int
	hasGrip     bool
	lastGrip    float64
	start       int           // index of the first executed action in a prediction (T_o−1)
	ta          int           // actions executed per chunk
	tail        int           // actions of the prediction past the window that bridge a late plan (loop.bridge)
	margin      int           // configured replan margin (actions)
	latEWMA     time.Duration // smoothed inference latency; 0 before the first chunk
	late        *planLateness // how late recent plans land against loop.plan_late_limit
	lateSource  string        // where late's limit comes from, for the log
	dim         int
	tp          int
	steps       int // sampler steps K of a plan (policy.steps or the bundle's), for sample_step
	wait        *time.Timer
	sample      telemetry.Sample
	lastInf     time.Duration
	condLogRate logRate
	stateCond   []float32    // cond of the newest observation for State; nil without one
	stateLog    logRate      // rate limit of the log line of a failing State
	thr         float64      // first monitored score's threshold in effect at the latest tick (Guard.ThresholdNow); NaN: none
	watch       safety.Score // the first monitored score (ScoreEnergy when none): what telemetry plots against thr
	watchName   string       // watch's name for the telemetry sample; "" when no score is monitored

	// armRead is the latest tick's arm state read; parts and prevParts
	// where this tick's and the previous tick's time went, logged when the
	// loop watchdog stops the arm; prevTick the previous tick's whole
	// duration.
	armRead, prevTick time.Duration
	parts, prevParts  tickParts

	// Real-time chunking (rtc.go): the configuration, how chunks join,
	// the chunk the latest tick's action came from (−1: none) and whether
	// it was that chunk's first, and the replaced chunk's actions aligned
	// with the newest chunk's window (rows prevFirst … prevFirst+prevN−1).
	chunking         ChunkingConfig
	warm             warmSampler // loop.warm_start on: the sampler's warm start (warm.go)
	lateFrom         int         // plans sample on LoopDeps.Late from this measured latency (periods); 0: never (latepolicy.go)
	onLate           bool        // the latest plan was submitted to the late network
	joins            joinMeter
	execSeq          int64
	execFresh        bool
	prevPlan         []float32
	prevFirst, prevN int

	// dec is the latest tick's decision: a field, since OnTick and publish
	// take its address (a local would escape, one allocation a tick).
	dec safety.Decision
	// stopped: the latest tick's gate was stopped (true before the first
	// tick: the gate starts stopped), so that OnStop sees each stop once.
	stopped bool

	// logs rate-limits the log lines of conditions that can repeat every
	// tick; view is the sample's recovery and reset-block text (recovery.go).
	logs loopLogs
	view recoveryView

	stats loopCounters
	armed atomic.Bool // the gate has been armed at least once

	// episode carries NewEpisode's request to the loop (one at a time);
	// switching is the switch in progress, owned by the loop: the arm
	// holds and the history stays frozen until the scene is replaced.
	// Plans and re-scores of observations before episodeFrom belong to
	// the previous scene and are dropped.
	episode     chan *episodeSwitch
	switching   *episodeSwitch
	episodeFrom time.Time
}

// episodeSwitch is one NewEpisode in progress: the loop closes held once
// it has written a hold; NewEpisode closes resume once the scene is
// replaced (or it gave up).
type episodeSwitch struct {
	held, resume chan struct{}
	acked        bool // held is closed
}

// NewLoop checks that the bundle, the arm and the safety limits fit together
// and allocates every buffer the ticks use.
func NewLoop(d LoopDeps) (*Loop, error) {
	if d.Config == nil || d.Manifest == nil || d.Arm == nil || d.Guard == nil || d.Sampler == nil || d.Cond == nil {
		return nil, errors.New("runtime: NewLoop needs Config, Manifest, Arm, Guard, Sampler and Cond")
	}
	th := d.Guard.Thresholds()
	for _, t := range th {
		computed, hint := d.Scorer != nil, "disable safety.energy for a policy without an energy"
		if t.Score == safety.ScoreStateEnergy {
			computed = computed || d.State != nil
			hint = "watch state_energy only with a bundle that has the state term"
		}
		if !computed {
			return nil, fmt.Errorf("runtime: NewLoop: the safety gate monitors %s but nothing computes it (no Scorer or State) — %s", t.Score, hint)
		}
	}
	if d.Clock == nil {
		d.Clock = SystemClock{}
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Notifier == nil {
		d.Notifier = &Notifier{}
	}
	m := d.Manifest
	l := &Loop{d: d, log: d.Logger, period: d.Config.Period(), watch: safety.ScoreEnergy, stopped: true}
	if len(th) > 0 {
		l.watch, l.watchName = th[0].Score, th[0].Score.String()
	}
	l.machine = NewMachine(d.Clock.Now, l.onTransition)

	// Probe the arm once: the state's shape fixes the observation layout.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.Arm.State(ctx, &l.state); err != nil {
		return nil, fmt.Errorf("runtime: read the arm's state: %w", err)
	}
	obs, err := newStateObs(m, d.Config.Robot.State, &l.state, d.Images)
	if err != nil {
		return nil, err
	}
	l.obs = obs
	l.dim, l.tp = m.ActionDim, m.PredHorizon
	l.steps = policySteps(d.Config, m)
	nv := len(d.Guard.Config().Limits.MaxVelocity)
	switch {
	case nv+1 == l.dim:
		l.hasGrip = true
	case nv == l.dim:
	default:
		return nil, fmt.Errorf("runtime: the bundle's actions have %d dimensions but safety.limits.max_velocity has %d axes: want %d (velocity + gripper) or %d", l.dim, nv, l.dim-1, l.dim)
	}
	l.nVel = nv
	l.cmd = actuators.Command{Velocity: make([]float64, nv)}
	l.start = m.ObsHorizon - 1
	l.ta = m.ActionHorizon
	if d.Config.Loop.ActionHorizon > 0 {
		l.ta = d.Config.Loop.ActionHorizon
	}
	if l.start+l.ta > l.tp {
		l.ta = l.tp - l.start
	}
	l.margin = d.Config.Loop.ReplanMargin
	limit, src := planLateLimit(d.Config, m)
	l.late, l.lateSource = newPlanLateness(l.period, limit), src
	l.chunk = NewChunk(l.tp-l.start, l.dim)
	l.prevPlan = make([]float32, (l.tp-l.start)*l.dim)
	if d.Config.Loop.Bridge != BridgeHold {
		l.tail = l.tp - l.start - l.ta
	}
	l.pred = make([]float32, l.tp*l.dim)
	l.infer = newInferWorker(d.Cond.Dim())
	if err := l.setChunking(d.Config.Loop.Chunking, d.Sampler); err != nil {
		return nil, err
	}
	if err := l.setWarm(d.Config.Loop.Warm, d.Sampler); err != nil {
		return nil, err
	}
	if err := l.setLatePolicy(d.Config.Loop.Late, d.Late); err != nil {
		return nil, err
	}
	if d.Scorer != nil {
		l.score = newScoreWorker(l.tp*l.dim, d.Cond.Dim())
	}
	if d.State != nil {
		l.stateCond = make([]float32, d.Cond.Dim())
	}
	l.thr = d.Guard.ThresholdNow()
	l.episode = make(chan *episodeSwitch, 1)
	l.wait = time.NewTimer(time.Hour)
	l.wait.Stop()
	l.sample.Velocities = make([]float64, 0, 16)
	return l, nil
}

// PlanLateLimit returns the lateness, in control periods, past which the
// p90 of the recent plans makes the loop warn (0: no limit), and where it
// comes from.
func (l *Loop) PlanLateLimit() (periods float64, from string) { return l.late.limit, l.lateSource }

// Machine returns the loop's state machine (for the API and tests).
func (l *Loop) Machine() *Machine { return l.machine }

// Stats returns a copy of the counters.
func (l *Loop) Stats() LoopStats {
	c := &l.stats
	return LoopStats{Ticks: c.ticks.Load(), Missed: c.missed.Load(), Chunks: c.chunks.Load(),
		ActionsDropped: c.dropped.Load(), Replans: c.replans.Load(), InferErrors: c.inferErrors.Load(),
		ScoreErrors: c.scoreErrors.Load(), ScoreLate: c.scoreLate.Load(), ArmErrors: c.armErrors.Load(), IdleTicks: c.idle.Load(), Bridged: c.bridged.Load(),
		CondErrors: c.condErrors.Load(), LatePlans: c.latePlans.Load(), LateSpells: c.lateSpells.Load(), LateNetPlans: c.lateNet.Load()}
}

func (l *Loop) onTransition(t Transition) {
	l.log.Info("state", "from", t.From.String(), "to", t.To.String(), "reason", t.Reason)
	l.d.Notifier.Status(t.To.String() + ": " + t.Reason)
}

// Arm arms the safety gate (READY → RUNNING, or STOPPED → RUNNING after a
// stop): it is Reset on the next tick, and refused while a cause persists.
func (l *Loop) Arm(ctx context.Context, actor string) error {
	st, _ := l.machine.State()
	if st == StateInit {
		return errors.New("runtime: not ready yet (arm, engines or camera not live)")
	}
	if err := l.d.Guard.Reset(ctx, actor); err != nil {
		return err
	}
	if st == StateStopped {
		_ = l.machine.To(StateReady, "reset by "+actor)
	}
	l.armed.Store(true)
	return l.machine.To(StateRunning, "armed by "+actor)
}

// Stop latches an operator stop (STOP button, API, SIGTERM).
func (l *Loop) Stop(ctx context.Context, actor, reason string) error {
	err := l.d.Guard.Stop(ctx, actor, reason)
	_ = l.machine.To(StateStopped, "operator stop by "+actor+": "+reason)
	return err
}

// NewEpisode starts the policy afresh on a new scene, as the evaluation
// harness does when it builds a runtime per episode: replace (the caller's
// scene change, e.g. the simulator's reset) runs while the loop holds the
// arm at zero velocity, and afterwards the loop forgets the observation
// history, the committed plan, the gripper command and any plan or
// re-score made from the old scene, and plans again from the new one (T_o
// fresh observations first, as at start-up). The gate's state is untouched: a running arm keeps
// running, a stopped one stays stopped until reset. Without it, the first
// plan of the new scene would be conditioned on a history spanning both
// scenes and the previous scene's actions would still run in the new one.
//
// It blocks until replace returns (or ctx ends); it fails when another
// switch is in progress or the loop does not tick. The loop resumes
// whatever happens.
func (l *Loop) NewEpisode(ctx context.Context, replace func(context.Context) error) error {
	sw := &episodeSwitch{held: make(chan struct{}), resume: make(chan struct{})}
	select {
	case l.episode <- sw:
	default:
		return errors.New("runtime: new episode: another one is starting")
	}
	defer close(sw.resume)
	select {
	case <-sw.held:
	case <-ctx.Done():
		return fmt.Errorf("runtime: new episode: the control loop did not hold the arm (%w) — is it running?", ctx.Err())
	}
	if err := replace(ctx); err != nil {
		return fmt.Errorf("runtime: new episode: %w", err)
	}
	return nil
}

// episodeTick advances a NewEpisode in progress at the start of a tick and
// reports whether the arm must hold this tick. A new request drops the
// committed plan; a replaced scene clears the history and resumes.
func (l *Loop) episodeTick(now time.Time) (hold bool) {
	if l.switching == nil {
		select {
		case sw := <-l.episode:
			l.switching = sw
			l.chunk.Clear()
			l.log.Debug("new episode: holding the arm while the scene is replaced")
		default:
			return false
		}
	}
	select {
	case <-l.switching.resume:
		l.switching = nil
		l.obs.clear(now)
		l.chunk.Clear()
		l.havePred = false
		l.lastGrip = 0 // as at start-up: the new scene starts from the gripper command 0 (a held one would close it on nothing)
		l.episodeFrom = now
		if l.d.SceneReplaced != nil {
			l.d.SceneReplaced()
		}
		return false
	default:
		return true
	}
}

// stale reports whether a plan or re-score made from the observation at
// obsTime must be dropped: a scene switch is in progress or it saw the
// previous scene.
func (l *Loop) stale(obsTime time.Time) bool {
	return l.switching != nil || obsTime.Before(l.episodeFrom)
}

// Run ticks until ctx ends (or loop.max_ticks). On return the arm has been
// sent the stop path.
func (l *Loop) Run(ctx context.Context) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	l.startWorkers(wctx, &wg)
	defer wg.Wait()
	defer cancel()

	if l.d.Config.Loop.AutoStart {
		wg.Add(1)
		go func() { defer wg.Done(); l.autoStart(wctx) }()
	}
	sched := NewScheduler(l.d.Clock, l.period)
	l.log.Info("control loop started", "rate_hz", l.d.Config.Loop.RateHz, "T_o", l.d.Manifest.ObsHorizon,
		"T_p", l.tp, "T_a", l.ta, "replan_margin", l.margin, "plan_late_limit_periods", l.late.limit, "plan_late_limit_from", l.lateSource)
	var runErr error
	// A tick runs to its end even when ctx is cancelled during it (every arm
	// request has its own timeout): cancellation takes effect between ticks,
	// so shutdown never leaves a half-written command or a spurious fault.
	tctx := context.WithoutCancel(ctx)
	for {
		tk, err := sched.Wait(ctx)
		if err != nil {
			break
		}
		l.tick(tctx, tk)
		if mt := l.d.Config.Loop.MaxTicks; mt > 0 && tk.N >= mt {
			break
		}
	}
	// Shutdown: the arm gets the stop path before we return, whatever ctx says.
	hctx, hcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer hcancel()
	stop := l.d.Guard.Stop
	if l.d.ExpectedShutdown {
		stop = l.d.Guard.StopExpected
	}
	_ = stop(hctx, "runtime", "shutdown")
	if err := l.d.Arm.Halt(hctx); err != nil {
		runErr = fmt.Errorf("runtime: halt at shutdown: %w", err)
	}
	_ = l.machine.To(StateShutdown, "shutdown")
	return runErr
}

// startWorkers starts the inference goroutine and, with a Scorer, the
// re-scoring one; they run until ctx ends, then call wg.Done.
func (l *Loop) startWorkers(ctx context.Context, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.infer.run(ctx, func(j *inferJob) {
			t0 := time.Now()
			steps := l.steps
			switch {
			case j.late:
				j.err = l.d.Late.SampleGuided(j.cond, j.guide, &j.res)
			case j.useWarm:
				j.err = l.warm.SampleWarm(j.cond, j.warm, &j.res)
				steps = j.warm.Steps
			default:
				j.err = l.d.Sampler.SampleGuided(j.cond, j.guide, &j.res)
			}
			if j.err == nil {
				l.recordSample(time.Since(t0), steps)
			}
			j.latency = l.d.Clock.Now().Sub(j.start)
		})
	}()
	if l.score != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.score.run(ctx, func(j *scoreJob) {
				t0 := time.Now()
				j.score, j.err = l.d.Scorer.Score(j.actions, j.cond)
				if j.err == nil {
					l.d.Stages.Since(StageRescore, t0)
				}
				j.latency = l.d.Clock.Now().Sub(j.start)
			})
		}()
	}
}

// recordSample records one plan's sampling time d as StageSample, and d/K
// as StageSampleStep.
func (l *Loop) recordSample(d time.Duration, steps int) {
	l.d.Stages.Record(StageSample, d)
	if steps > 0 {
		l.d.Stages.Record(StageSampleStep, d/time.Duration(steps))
	}
}

// autoStart arms the gate once at start-up (loop.auto_start), retrying
// while a cause persists (e.g. the first scores are not in yet). It never
// re-arms after a stop: a stop latches until an operator resets it.
func (l *Loop) autoStart(ctx context.Context) {
	var waiting lograte.Repeat[struct{}] // one line, then at most every 5 s
	for {
		if st, _ := l.machine.State(); st == StateReady {
			err := l.Arm(ctx, "auto_start")
			if err == nil {
				return
			}
			if log, n := waiting.Observe(l.d.Clock.Now(), struct{}{}); log {
				l.log.Info("auto start waiting", "err", err, "repeated", n)
			}
		} else if st != StateInit {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(l.period * 2):
		}
	}
}

// tick is one control period. It allocates nothing after warm-up.
func (l *Loop) tick(ctx context.Context, tk Tick) {
	now := tk.Woke
	l.stats.ticks.Add(1)
	l.stats.missed.Add(tk.Missed)
	switching := l.switching != nil
	hold := l.episodeTick(now) // a new episode's scene is being replaced
	// The scene changes while the arm holds and shows by the first tick
	// after: the gate's tracking monitor must not read it as motion.
	scene := hold || switching

	// 1. Arm state → observation history (frozen while the scene changes:
	// the arm is still read, so its watchdogs keep watching).
	start := time.Now() // wall time: the parts below are measured on it, whatever l.d.Clock is
	armErr := l.d.Arm.State(ctx, &l.state)
	l.armRead = time.Since(start)
	l.parts = tickParts{armRead: l.armRead}
	l.d.Stages.Record(StageArmRead, l.armRead)
	if armErr == nil {
		l.haveArm = true
		if !hold {
			l.obs.push(&l.state)
		}
	} else {
		l.stats.armErrors.Add(1)
	}

	// 2. A finished inference becomes the committed chunk.
	if j := l.infer.poll(); j != nil {
		l.lastInf = j.latency
		l.observeLatency(j.latency)
		l.watchLateness(j.latency)
		if l.d.Metrics != nil {
			l.d.Metrics.ObserveInference(j.latency)
		}
		switch {
		case j.err != nil:
			l.stats.inferErrors.Add(1)
			l.logInference(now, j.err)
		case l.stale(j.obsTime):
			// planned from the previous scene: dropped
		default:
			l.seq++
			copy(l.pred, j.res.Actions)
			l.predTime, l.havePred = j.obsTime, true
			l.notePrevPlan(j.obsTime)
			l.chunk.Fill(j.res.Actions, l.start, l.ta, l.tail, j.obsTime, l.period, l.seq)
			l.stats.chunks.Add(1)
		}
	}

	// 3. Replan when the committed chunk runs low; never wait for it.
	if !hold && l.obs.ready() && !l.infer.busy && l.chunk.Len() <= l.replanMargin() && armErr == nil {
		if err := l.buildCond(l.infer.job.cond); err == nil {
			l.infer.job.obsTime, l.infer.job.start = l.obs.newest, now
			l.fillGuide(l.infer.job.guide, l.obs.newest)
			l.infer.job.late = l.planLate(now)
			l.infer.job.useWarm = !l.infer.job.late && l.fillWarm(l.infer.job, l.obs.newest)
			l.infer.submit()
			l.stats.replans.Add(1)
		} else {
			l.condFailed(now, err)
		}
	}

	// 4. Score. The state term (State) reads the newest observation here,
	// synchronously, so every tick with a fresh observation has its
	// state_energy. The committed plan is re-scored under the newest
	// observation asynchronously (the energies; StateEnergy too without
	// State): a re-score that missed the previous tick's wait is picked up
	// first (it is one tick old), then this tick's is submitted. Without a
	// Scorer the energies stay NaN.
	scores := safety.NoScores()
	if l.d.State != nil && l.obs.ready() && armErr == nil { // while holding: the frozen history's
		l.scoreState(now, &scores)
	}
	if l.score != nil {
		if j := l.score.poll(); j != nil {
			l.takeScore(j, &scores)
		}
		if !hold && l.havePred && l.obs.ready() && armErr == nil && !l.score.busy {
			l.fillScoreWindow(now)
			if err := l.buildCond(l.score.job.cond); err == nil {
				l.score.job.obsTime, l.score.job.start = l.obs.newest, now
				l.score.submit()
			}
		}
	}

	// 5. The action due now (latency compensation drops stale ones).
	bridgedBefore := l.chunk.Bridged()
	act, dropped, ok := l.chunk.Take(now, l.period)
	if l.chunk.Bridged() > bridgedBefore {
		l.stats.bridged.Add(1)
	}
	if dropped > 0 {
		l.stats.dropped.Add(int64(dropped))
	}
	if ok {
		copy(l.cmd.Velocity, act[:l.nVel])
		if l.hasGrip {
			l.lastGrip = act[l.nVel]
		}
	} else {
		for i := range l.cmd.Velocity {
			l.cmd.Velocity[i] = 0
		}
		if st, _ := l.machine.State(); st == StateRunning {
			l.stats.idle.Add(1)
		}
	}
	l.cmd.Gripper = l.lastGrip

	// 6. Wait (bounded) for this tick's score, then gate and write.
	t0 := time.Now()
	l.parts.work = t0.Sub(start) - l.armRead // steps 2–5
	if l.score != nil && l.score.busy {
		l.wait.Reset(l.scoreWait())
		if j := l.score.wait(l.wait.C); j != nil {
			if !l.wait.Stop() {
				select {
				case <-l.wait.C:
				default:
				}
			}
			l.takeScore(j, &scores)
		} else {
			l.stats.scoreLate.Add(1)
		}
	}
	in := safety.Inputs{Tick: tk.N, Deadline: tk.Due, Now: now, Missed: tk.Missed, Scores: scores,
		ArmErr: armErr, Command: l.cmd, SceneChange: scene}
	if l.haveArm {
		in.Arm = &l.state
	}
	if l.d.CameraChanged != nil {
		in.CameraChanged = l.d.CameraChanged()
	}
	if l.d.CameraMoved != nil {
		in.CameraMoved = l.d.CameraMoved()
	}
	if l.d.CameraUnseen != nil {
		in.CameraUnseen = l.d.CameraUnseen()
	}
	if l.d.CameraTime != nil {
		in.Camera = l.d.CameraTime()
	}
	if l.infer.busy {
		in.InferenceStarted = l.infer.job.start
	}
	var gerr error
	t1 := time.Now()
	l.parts.scoreWait = t1.Sub(t0)
	l.dec, gerr = l.d.Guard.Tick(ctx, &in)
	l.parts.gate = time.Since(t1)
	dec := &l.dec
	if gerr != nil {
		l.logGate(now, gerr)
	}
	l.thr = l.d.Guard.ThresholdNow() // with closed-loop bands it follows the time since arming
	l.syncMachine(dec)
	seq := int64(-1)
	if ok {
		seq = l.chunk.Seq
	}
	l.execSeq, l.execFresh = seq, ok && l.chunk.Taken() == 1
	sw := math.NaN()
	if l.execFresh {
		sw = l.planSwitch(act)
	}
	l.joins.observe(dec.State == safety.Running && !scene, dec.Command.Velocity, seq, l.execFresh, sw)

	// 7. Telemetry, recording, watchdog.
	t0 = time.Now()
	end := l.d.Clock.Now()
	if l.d.Metrics != nil {
		l.d.Metrics.ObserveTick(end.Sub(now), tk.Jitter)
		if tk.Missed > 0 {
			l.d.Metrics.TickOverrun()
		}
		if x := scores[l.watch]; !math.IsNaN(x) {
			l.d.Metrics.ObserveEnergy(x, l.threshold())
		}
	}
	if l.d.Sink != nil {
		l.publish(tk, dec, scores, end.Sub(now))
	}
	if l.d.Recorder != nil && dec.State == safety.Running && len(dec.Command.Velocity) > 0 {
		l.d.Recorder.Step(l.obs.newestVector(), dec.Command.Velocity, dec.Command.Gripper, scores)
	}
	if tk.Missed == 0 && armErr == nil {
		l.d.Notifier.Healthy(end)
	}
	stopped := dec.State == safety.Stopped
	if stopped && !l.stopped {
		if dec.Reason.Kind == safety.KindLoopLate {
			// Where the late tick's time went: a slow arm link reads as
			// an overloaded host in the gate's message.
			p := l.prevParts
			l.log.Warn("the loop fell behind: the previous tick took "+l.prevTick.String(), "previous_arm_read", p.armRead,
				"previous_plan_and_score", p.work, "previous_score_wait", p.scoreWait, "previous_gate_and_write", p.gate,
				"previous_telemetry", p.telemetry, "this_arm_read", l.armRead, "jitter", tk.Jitter, "missed", tk.Missed)
		}
		if l.d.OnStop != nil {
			l.d.OnStop(dec.Reason)
		}
	}
	l.stopped = stopped
	if l.d.OnTick != nil {
		l.d.OnTick(tk, dec, scores)
	}
	l.parts.telemetry = time.Since(t0)
	l.prevTick, l.prevParts = l.d.Clock.Now().Sub(now), l.parts
	if hold && !l.switching.acked {
		l.switching.acked = true
		close(l.switching.held) // this tick's hold is written: the scene may change
	}
}

// tickParts is where one tick's time went, by step of Loop.tick: a tick
// that overruns its period names the part that held it in the log line of
// the loop watchdog's stop (a slow arm link, a gate's write that waited on
// the arm, telemetry), not only that the host is overloaded.
type tickParts struct {
	armRead   time.Duration // step 1: the arm state read
	work      time.Duration // steps 2–5: plan bookkeeping, replan, state term, the action due
	scoreWait time.Duration // step 6: the bounded wait for the re-score
	gate      time.Duration // step 6: the safety gate, with its command write to the arm
	telemetry time.Duration // step 7: metrics, live view sample, recording, OnTick
}

// observeLatency folds a finished inference's latency into the smoothed
// estimate replanMargin uses (an exponential average over ~4 chunks, so one
// slow sample under load moves it but does not own it).
func (l *Loop) observeLatency(d time.Duration) {
	if l.latEWMA == 0 {
		l.latEWMA = d
		return
	}
	l.latEWMA += (d - l.latEWMA) / 4
}

// watchLateness folds a finished plan's latency into the lateness window
// and warns when its p90 passes loop.plan_late_limit: the energy stop's
// closed-loop false-trip rate was certified on plans about as late as its
// calibration's, and later plans drive the policy into states it was not
// certified on (docs/safety.md, "When the host falls behind"). It warns and
// counts; it does not stop the arm, which the deadline watchdogs do when
// plans stop coming at all.
func (l *Loop) watchLateness(d time.Duration) {
	switch l.late.observe(d) {
	case 1:
		l.stats.lateSpells.Add(1)
		l.log.Warn("plans land later than the energy stop's calibration was driven at: the host is falling behind and the stop's calibrated false-trip rate does not hold; free the host, or lower loop.rate_hz or policy.steps and recalibrate",
			"p90_periods", l.late.p90, "limit_periods", l.late.limit, "limit_from", l.lateSource, "plans", l.late.n)
		l.d.Notifier.Status("warning: plans late (p90 " + strconv.FormatFloat(l.late.p90, 'f', 2, 64) + " periods, limit " + strconv.FormatFloat(l.late.limit, 'f', 2, 64) + ")")
	case -1:
		l.log.Info("plans land in time again", "p90_periods", l.late.p90, "limit_periods", l.late.limit)
		st, _ := l.machine.State()
		l.d.Notifier.Status(st.String() + ": plans in time again")
	}
	if l.late.over {
		l.stats.latePlans.Add(1)
	}
	if l.d.Metrics != nil {
		l.d.Metrics.ObservePlanLateness(l.late.p90, l.late.limit, l.late.over)
	}
}

// replanMargin is how many committed actions may remain when the next
// inference is requested: the configured loop.replan_margin, raised to the
// number of periods the smoothed inference latency spans so the new chunk
// lands before the committed one runs out (a plan that arrives late makes
// the arm hold at zero velocity for the missing ticks). The raise stops at
// T_a−1, so every chunk keeps at least one action of its own; a configured
// margin above that is kept as configured.
func (l *Loop) replanMargin() int {
	n := int((l.latEWMA + l.period - 1) / l.period)
	n = min(n, l.ta-1)
	return max(l.margin, n)
}

// buildCond writes the conditioning of the current observation history
// into cond.
func (l *Loop) buildCond(cond []float32) error {
	h, err := l.obs.history()
	if err != nil {
		return err
	}
	return l.d.Cond.Build(h, cond)
}

// condFailed counts a replan skipped because the conditioning could not be
// built (no usable camera frame yet, typically) and logs it at most every
// 5 s, with the count. The arm holds once the committed chunk runs out; a
// camera that stays silent trips the camera watchdog.
func (l *Loop) condFailed(now time.Time, err error) {
	l.stats.condErrors.Add(1)
	if log, n := l.condLogRate.Observe(now, struct{}{}); log {
		l.log.Warn("replan skipped: cannot build the policy's observation", "err", err, "repeated", n)
	}
}

// fillScoreWindow writes the committed prediction as seen from now: the
// plan shifted by the steps elapsed since its observation, the last action
// repeated past its end (as Diffusion Policy pads).
func (l *Loop) fillScoreWindow(now time.Time) {
	l.shiftPlan(l.score.job.actions, max(0, int((now.Sub(l.predTime)+l.period/2)/l.period)))
}

// takeScore copies a finished re-score into scores. Its StateEnergy
// (NaN without a state term) is taken only without State: with it, the
// synchronous value of the newest observation stands.
func (l *Loop) takeScore(j *scoreJob, scores *safety.Scores) {
	if j.err != nil {
		l.stats.scoreErrors.Add(1)
		return
	}
	if l.stale(j.obsTime) {
		return // the previous scene's
	}
	scores[safety.ScoreEnergy] = float64(j.score.Energy)
	scores[safety.ScoreCentered] = float64(j.score.CenteredEnergy)
	if l.d.State == nil {
		scores[safety.ScoreStateEnergy] = float64(j.score.StateEnergy)
	}
}

// scoreState evaluates the state term on the newest observation into
// scores[ScoreStateEnergy]. Without a usable observation (an image bundle
// before its first frame) the score stays NaN, as for a re-score; a failed
// evaluation leaves it NaN too, is counted with the score errors and is
// logged at most every few seconds. It allocates nothing unless it fails.
func (l *Loop) scoreState(now time.Time, scores *safety.Scores) {
	if err := l.buildCond(l.stateCond); err != nil {
		return
	}
	t0 := time.Now()
	x, err := l.d.State.Energy(l.stateCond)
	if err != nil {
		l.stats.scoreErrors.Add(1)
		if log, n := l.stateLog.Observe(now, struct{}{}); log {
			l.log.Warn("state term failed: no state_energy this tick", "err", err, "repeated", n)
		}
		return
	}
	l.d.Stages.Since(StageStateTerm, t0)
	scores[safety.ScoreStateEnergy] = float64(x)
}

func (l *Loop) scoreWait() time.Duration {
	if w := l.d.Config.Loop.ScoreWait; w > 0 {
		return w
	}
	return l.period / 2
}

func (l *Loop) threshold() float64 { return l.thr }

// imagesReady reports whether every sample of the observation history has a
// usable camera frame (true for a bundle without image inputs).
func (l *Loop) imagesReady() bool {
	if !l.obs.hasImages() {
		return true
	}
	_, err := l.obs.history()
	return err == nil
}

// syncMachine follows the gate: a trip moves RUNNING → STOPPED, and the
// gate's recovery mode moves in and out of RECOVERING.
func (l *Loop) syncMachine(d *safety.Decision) {
	st, _ := l.machine.State()
	switch {
	case st == StateInit && l.haveArm && l.obs.ready() && l.imagesReady():
		_ = l.machine.To(StateReady, "arm connected, engines loaded")
	case st == StateRunning && d.State == safety.Stopped:
		_ = l.machine.To(StateStopped, d.Reason.Kind.String()+": "+d.Reason.Message)
	default:
		l.syncRecovery(st, d)
	}
}

func (l *Loop) publish(tk Tick, d *safety.Decision, scores safety.Scores, dur time.Duration) {
	s := &l.sample
	s.Tick = uint64(tk.N)
	s.Time = tk.Woke
	s.Energy = scores[l.watch] // the score the stop compares with Threshold
	s.Watched = l.watchName
	s.StateEnergy = scores[safety.ScoreStateEnergy]
	s.Reward = -scores[safety.ScoreCentered]
	s.Threshold = l.threshold()
	s.State = d.State.String()
	s.Reason = ""
	if d.State != safety.Running {
		s.Reason = d.Reason.Kind.String()
		if d.Reason.Message != "" {
			s.Reason += ": " + d.Reason.Message
		}
	}
	l.view.fill(s, d)
	s.LoopRateHz = l.d.Config.Loop.RateHz
	s.TickDuration = dur
	s.InferenceLatency = l.lastInf
	s.PlanLateP90 = l.late.p90
	s.PlanLateLimit = math.NaN()
	if l.late.limit > 0 {
		s.PlanLateLimit = l.late.limit
	}
	s.Joints = l.state.Position
	s.Velocities = append(s.Velocities[:0], d.Command.Velocity...)
	s.EndEffector = nil
	if len(l.state.Observation) >= 3 {
		s.EndEffector = l.state.Observation[:3]
		if slices.Equal(s.Joints, s.EndEffector) {
			s.Joints = nil // a Cartesian arm: its position is its end effector, not joints
		}
	}
	s.Gripper = l.state.Gripper
	l.d.Sink.Publish(*s)
}

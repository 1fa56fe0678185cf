package runtime

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/energyflow/edge/actuators"
	"github.com/energyflow/edge/calibration"
	"github.com/energyflow/edge/camera"
	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/safety"
	"github.com/energyflow/edge/telemetry"
	"github.com/energyflow/edge/telemetry/gpu"
	"github.com/energyflow/edge/trt"
)

// AppOptions are the process-level collaborators of an App.
type AppOptions struct {
	Logger *slog.Logger
	// Announce receives the viewer URL and generated tokens (stdout).
	Announce io.Writer
	// Clock of the loop and the safety gate; nil: the system clock.
	Clock Clock
	// OnTick is passed to the loop (tests, evaluation harness).
	OnTick func(tk Tick, d *safety.Decision, scores safety.Scores)
	// OnStop is passed to the loop: it gets each stop of the gate, typed,
	// on the tick that finds it (LoopDeps.OnStop; the evaluation harness
	// ends an episode on it).
	OnStop func(r safety.Reason)
	// ExpectedShutdown is passed to the loop: the stop Run latches when it
	// ends is expected and logged at info (LoopDeps.ExpectedShutdown; the
	// evaluation harness ends every episode so).
	ExpectedShutdown bool
	// Metrics, if set, receives the loop's per-tick measurements (tick
	// time, inference latency, energy) as well as the live view's metrics
	// do: the evaluation harness reports the measured inference latency.
	// Its methods run on the loop's goroutine and must not block.
	Metrics TickObserver
	// InferenceDelay, evaluation only (sim eval --delay), holds every plan
	// this much longer before it reaches the loop, as a slower or busier
	// host would: the loop replans earlier and drops the actions that are
	// stale when it lands, exactly as for a slow sampler. Zero: none.
	InferenceDelay time.Duration
	// Episodes, if set, lets the live view restart the scene (the
	// simulated robot's episodes: telemetry.EpisodeControl); nil on a
	// real robot.
	Episodes telemetry.EpisodeControl
}

// App is the whole runtime built from a Config: bundle and sampler, arm,
// safety gate, camera, telemetry and the loop. cmd/energyflow owns it.
type App struct {
	cfg     *Config
	log     *slog.Logger
	bundle  *engines.Bundle
	backend engines.Backend
	sampler *engines.Sampler
	late    *engines.Sampler // the bundle's late network (loop.late_policy); nil: none or off
	scorer  *engines.Sampler
	state   *engines.StateTerm // the loop's own state term (evaluated every tick); nil without one
	watch   safety.Score       // the first monitored score (ScoreEnergy when none), for events and metrics
	arm     *actuators.ModbusArm
	guard   *safety.Guard
	events  chan safety.Event
	cam     camera.SourceCloser
	// viewCam is the live view's own video (telemetry.video.url); nil: the
	// live view shows cam's frames.
	viewCam    camera.SourceCloser
	viewCfg    camera.Config // viewCam's, to reconnect when a viewer returns
	camTime    atomic.Int64  // unix nanos of the newest frame
	camChanged atomic.Int64  // unix nanos of the newest frame that differs from the one before it (image bundles)
	camMoved   atomic.Uint64 // float64 bits: the view watch's moved fraction (image bundles with watchdog.camera_moved)
	viewRebase atomic.Int64  // unix nanos: the view watch takes the first frame captured after it as its reference (0: none pending)
	view       *camera.ViewWatch
	// palette is the image input's demonstration colours (watchdog.camera_unseen;
	// nil: not watched); camUnseen the smaller unseen-pixel count of the two
	// newest frames, unseenPrev the newest frame's own (the camera loop's).
	palette    *camera.Palette
	camUnseen  atomic.Int64
	unseenPrev int
	watchCam   *watchCam  // the bundle's watch camera (camera_watch); nil: none
	vision     visionSet  // one pipeline per image input; nil for a state-only bundle
	stages     StageTimes // the control path's stage latencies (camera reader, vision, loop, gate's writes)
	tel        *telemetry.Server
	telLn      net.Listener
	loop       *Loop
	rec        *recorder
	wg         sync.WaitGroup
	closers    []func() error
}

// NewApp loads the bundle, connects the arm, opens the camera and the live
// view, and builds the loop. On error everything opened so far is closed.
func NewApp(ctx context.Context, cfg *Config, opts AppOptions) (app *App, err error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &App{cfg: cfg, log: log, events: make(chan safety.Event, 64)}
	defer func() {
		if err != nil {
			a.Close()
		}
	}()

	// Policy.
	if a.bundle, err = engines.LoadBundle(cfg.Policy.Bundle); err != nil {
		return nil, err
	}
	if n := a.bundle.Manifest.Schedule.NumTrainTimesteps; !a.bundle.Manifest.HasEnergy() && cfg.Policy.Steps > n {
		return nil, cfg.keyError("policy.steps", fmt.Errorf("%d DDIM steps, but bundle %s has %d training timesteps: expected 1..%d (0 = the bundle's %d)",
			cfg.Policy.Steps, a.bundle.Dir, n, n, a.bundle.Manifest.Sampler.Steps))
	}
	scfg, err := safetyConfig(cfg, a.bundle, log)
	if err != nil {
		return nil, err
	}
	if err = checkImageConfig(cfg, a.bundle); err != nil {
		return nil, err
	}
	if err = checkWatchCamera(cfg, a.bundle, log); err != nil {
		return nil, err
	}
	switch cfg.Policy.Backend {
	case "trt":
		a.backend, err = trt.NewBackend(trt.Options{Logger: log.With("part", "trt")})
	default:
		a.backend, err = engines.NewORT(engines.ORTOptions{LibraryPath: cfg.Policy.ONNXRuntimeLib,
			IntraOpThreads: cfg.Policy.Threads, Logger: log.With("part", "ort")})
	}
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, a.backend.Close)
	sopts := engines.SamplerOptions{Steps: cfg.Policy.Steps, Seed: cfg.Policy.Seed, Logger: log.With("part", "sampler")}
	// The planner's energies go unread (the re-scoring sampler scores the
	// committed chunk every tick): its samples are the Euler steps alone.
	popts := sopts
	popts.ActionsOnly = true
	if a.sampler, err = engines.NewSampler(a.bundle, a.backend, popts); err != nil {
		return nil, err
	}
	a.closers = append(a.closers, a.sampler.Close)
	if a.bundle.Manifest.LatePolicy != nil && !cfg.Loop.Late.Off {
		lopts := popts
		lopts.Graph = engines.GraphEnergyGradLate
		if a.late, err = engines.NewSampler(a.bundle, a.backend, lopts); err != nil {
			return nil, fmt.Errorf("runtime: the bundle's late network (set loop.late_policy.off to run without it): %w", err)
		}
		a.closers = append(a.closers, a.late.Close)
	}
	// The re-scoring sampler exists only for a policy with an energy.
	if a.sampler.HasEnergy() {
		if a.scorer, err = engines.NewSampler(a.bundle, a.backend, sopts); err != nil {
			return nil, err
		}
		a.closers = append(a.closers, a.scorer.Close)
	}
	if a.bundle.Manifest.HasStateEnergy() {
		if err = a.openStateTerm(cfg); err != nil {
			return nil, err
		}
	}
	cond, err := engines.NewConditioner(&a.bundle.Manifest)
	if err != nil {
		return nil, err
	}
	if err = a.openVision(cfg); err != nil {
		return nil, err
	}

	// Arm.
	var tel *telemetry.Server
	// The gate is built after the arm; connection events reach it once it exists.
	var guard atomic.Pointer[safety.Guard]
	armOpts := actuators.Options{Logger: log.With("part", "arm"), OnEvent: func(e actuators.Event) {
		if g := guard.Load(); g != nil {
			g.OnArmEvent(e)
		}
	}}
	if a.arm, err = actuators.Open(cfg.Robot.Config, armOpts); err != nil {
		return nil, err
	}
	a.closers = append(a.closers, a.arm.Close)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = a.arm.Connect(cctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("runtime: connect to the arm at %s: %w", cfg.Robot.Address, err)
	}

	// Safety.
	useClosedLoopFor(cfg, &a.bundle.Manifest, log)
	cal := safetyCalibration(&a.bundle.Manifest)
	clock := opts.Clock
	if clock == nil {
		clock = SystemClock{}
	}
	// The gate writes the arm's commands inside its Tick: it gets the arm
	// through timedArm, which records each write as command_write.
	if a.guard, err = safety.New(timedArm{a.arm, &a.stages}, scfg, cal, safety.Options{Clock: clock, Logger: log.With("part", "safety"), Events: a.events, Period: cfg.Period()}); err != nil {
		return nil, err
	}
	guard.Store(a.guard)
	if th := a.guard.Thresholds(); len(th) > 0 {
		a.watch = th[0].Score
	}
	warnClosedLoopConditions(cfg, &a.bundle.Manifest, a.guard.Thresholds(), log)

	// Telemetry.
	if cfg.Telemetry.Enabled {
		g := gpu.Open("/", log.With("part", "gpu"))
		a.closers = append(a.closers, g.Close)
		metrics := telemetry.NewMetricsWith(telemetry.MetricsOptions{EnergyBuckets: scoreBuckets(&a.bundle.Manifest, a.watch.String())})
		if tel, err = telemetry.New(cfg.Telemetry.Config, telemetry.Options{Controller: controller{a}, GPU: g, Logger: log.With("part", "telemetry"),
			Announce: opts.Announce, Metrics: metrics, Episodes: opts.Episodes, Stages: &a.stages}); err != nil {
			return nil, err
		}
		a.stages.SetObserver(metrics)
		a.tel = tel
		a.closers = append(a.closers, tel.Close)
		if a.telLn, err = net.Listen("tcp", cfg.Telemetry.Listen); err != nil {
			return nil, fmt.Errorf("runtime: telemetry listen on %s: %w", cfg.Telemetry.Listen, err)
		}
	}

	// The live view's own video source, opened only for the view: the
	// policy's camera path does not change.
	if tel != nil && cfg.Telemetry.Video.URL != "" {
		a.viewCfg = camera.Config{Source: camera.KindHTTP, URL: cfg.Telemetry.Video.URL}
		if a.viewCam, err = camera.Open(a.viewCfg, log.With("part", "view-camera")); err != nil {
			return nil, fmt.Errorf("runtime: telemetry.video.url: %w", err)
		}
		a.closers = append(a.closers, a.viewCam.Close)
	}

	// Camera.
	if cfg.Camera.Enabled {
		if a.cam, err = camera.Open(cfg.Camera.Config, log.With("part", "camera")); err != nil {
			return nil, err
		}
		a.closers = append(a.closers, a.cam.Close)
	}
	if a.watchCam, err = openWatchCamera(cfg, &a.bundle.Manifest, log.With("part", "watch-camera")); err != nil {
		return nil, err
	}
	if a.watchCam != nil {
		a.closers = append(a.closers, a.watchCam.src.Close)
	}

	if cfg.Recording.Enabled {
		a.rec = newRecorder(cfg, &a.bundle.Manifest, log.With("part", "recording"))
	}

	var sampler PolicySampler = a.sampler
	var late PolicySampler
	if a.late != nil { // a nil pointer in an interface would not be nil
		late = a.late
	}
	if opts.InferenceDelay > 0 {
		sampler = delayedSampler{a.sampler, opts.InferenceDelay}
		if late != nil {
			late = delayedSampler{late, opts.InferenceDelay}
		}
	}
	deps := LoopDeps{Config: cfg, Manifest: &a.bundle.Manifest, Clock: clock, Arm: a.arm, Guard: a.guard,
		Sampler: sampler, Late: late, Cond: cond, Notifier: NewNotifier(), Logger: log.With("part", "loop"), OnTick: opts.OnTick,
		OnStop: opts.OnStop, ExpectedShutdown: opts.ExpectedShutdown, Stages: &a.stages}
	// A nil pointer in an interface would not be nil.
	if a.scorer != nil {
		deps.Scorer = a.scorer
	}
	if a.state != nil {
		deps.State = a.state
	}
	if tel != nil {
		deps.Sink = tel
	}
	switch {
	case tel != nil && opts.Metrics != nil:
		deps.Metrics = teeObserver{tel.Metrics(), opts.Metrics}
	case tel != nil:
		deps.Metrics = tel.Metrics()
	case opts.Metrics != nil:
		deps.Metrics = opts.Metrics
	}
	if a.rec != nil {
		deps.Recorder = a.rec
	}
	if a.vision != nil {
		deps.Images = a.vision
	}
	if a.cam != nil {
		deps.CameraTime = func() time.Time {
			if n := a.camTime.Load(); n != 0 {
				return time.Unix(0, n)
			}
			return time.Time{}
		}
		if a.vision != nil {
			deps.CameraChanged = func() time.Time {
				if n := a.camChanged.Load(); n != 0 {
					return time.Unix(0, n)
				}
				return time.Time{}
			}
			if trig := cfg.Safety.Watchdog.CameraMoved; trig > 0 {
				if a.view, err = camera.NewViewWatch(camera.ViewWatchConfig{Trigger: trig}); err != nil {
					return nil, fmt.Errorf("safety.watchdog.camera_moved: %w", err)
				}
				deps.CameraMoved = func() float64 {
					if a.viewRebase.Load() != 0 {
						return 0 // a new scene: its first frame is not in yet
					}
					return math.Float64frombits(a.camMoved.Load())
				}
				log.Info("camera view check on: a knocked or turned camera stops the arm (camera_moved)", "trigger", trig)
			}
			if n := cfg.Safety.Watchdog.CameraUnseen; n > 0 {
				if a.palette, err = imagePalette(&a.bundle.Manifest); err != nil {
					return nil, fmt.Errorf("safety.watchdog.camera_unseen: %w", err)
				}
				switch {
				case a.palette == nil && cfg.CameraWatch.On() && a.bundle.Manifest.WatchCamera != nil:
					log.Info("the bundle's image input has no palette: the unseen-colour check reads the watch camera alone", "bundle", a.bundle.Manifest.Name)
				case a.palette == nil:
					log.Warn("safety.watchdog.camera_unseen is set, but the bundle's image input has no palette (python -m energyflow.palette writes one): something new in view is not watched", "bundle", a.bundle.Manifest.Name)
				default:
					deps.CameraUnseen = func() int {
						if a.viewRebase.Load() != 0 {
							return 0 // a new scene: its frames are not in yet
						}
						return int(a.camUnseen.Load())
					}
					log.Info("unseen-colour check on: something in view that no demonstration showed stops the arm (camera_unseen)",
						"pixels", n, "levels", a.palette.Levels(), "cells", a.palette.Cells())
				}
			}
			if a.view != nil || a.palette != nil {
				deps.SceneReplaced = func() { a.viewRebase.Store(time.Now().UnixNano()) }
			}
		}
	}
	if w := a.watchCam; w != nil {
		// The watchdog reads the older frame of the two cameras, the older
		// changed frame, the larger unseen count and the larger moved
		// fraction.
		deps.CameraTime = older(w.Time, deps.CameraTime)
		deps.CameraChanged = older(w.Changed, deps.CameraChanged)
		if w.palette != nil {
			deps.CameraUnseen = larger(w.Unseen, deps.CameraUnseen)
		}
		if w.view != nil {
			deps.CameraMoved = larger(w.Moved, deps.CameraMoved)
		}
		ownReplaced := deps.SceneReplaced
		deps.SceneReplaced = func() {
			if ownReplaced != nil {
				ownReplaced()
			}
			w.SceneReplaced()
		}
	}
	if a.loop, err = NewLoop(deps); err != nil {
		return nil, err
	}
	return a, nil
}

// timedArm is the arm as the safety gate drives it: each successful
// command write is recorded as StageCommandWrite, timed here in the
// runtime around the gate's call rather than inside safety/.
type timedArm struct {
	actuators.Arm
	stages *StageTimes
}

func (a timedArm) Command(ctx context.Context, c actuators.Command) error {
	t0 := time.Now()
	err := a.Arm.Command(ctx, c)
	if err == nil {
		a.stages.Since(StageCommandWrite, t0)
	}
	return err
}

// teeObserver passes every measurement to two observers.
type teeObserver [2]TickObserver

func (t teeObserver) ObserveTick(d, jitter time.Duration) {
	t[0].ObserveTick(d, jitter)
	t[1].ObserveTick(d, jitter)
}

func (t teeObserver) TickOverrun() { t[0].TickOverrun(); t[1].TickOverrun() }

func (t teeObserver) ObserveInference(d time.Duration) {
	t[0].ObserveInference(d)
	t[1].ObserveInference(d)
}

func (t teeObserver) ObservePlanLateness(p90, limit float64, late bool) {
	t[0].ObservePlanLateness(p90, limit, late)
	t[1].ObservePlanLateness(p90, limit, late)
}

func (t teeObserver) ObserveEnergy(score, threshold float64) {
	t[0].ObserveEnergy(score, threshold)
	t[1].ObserveEnergy(score, threshold)
}

// openStateTerm opens the loop's own state term, which it evaluates on its
// goroutine every tick. On ONNX Runtime it runs with one intra-op thread,
// on the calling thread: a pool would hand a 0.05 ms graph to threads that
// share the cores with the loop. With policy.threads above 1 that needs an
// ONNX Runtime backend of its own; TensorRT runs it from its own plan.
func (a *App) openStateTerm(cfg *Config) error {
	be := a.backend
	if cfg.Policy.Backend != "trt" && cfg.Policy.Threads > 1 {
		ob, err := engines.NewORT(engines.ORTOptions{LibraryPath: cfg.Policy.ONNXRuntimeLib, IntraOpThreads: 1,
			Logger: a.log.With("part", "ort-state")})
		if err != nil {
			return err
		}
		a.closers = append(a.closers, ob.Close)
		be = ob
	}
	t, err := engines.NewStateTerm(a.bundle, be)
	if err != nil {
		return err
	}
	a.state = t
	a.closers = append(a.closers, t.Close)
	return nil
}

// checkImageConfig refuses a configuration that cannot feed the bundle's
// image inputs: an image policy needs the camera and the camera watchdog,
// or it would act on a missing or frozen view of the scene.
func checkImageConfig(cfg *Config, b *engines.Bundle) error {
	for _, o := range b.Manifest.Obs {
		if o.Kind != engines.ObsImage {
			continue
		}
		if !cfg.Camera.Enabled {
			return cfg.keyError("camera.enabled", fmt.Errorf("false, but bundle %s takes camera images (%q): enable the camera", b.Dir, o.Name))
		}
		if cfg.Safety.Watchdog.CameraMaxAge <= 0 {
			return cfg.keyError("safety.watchdog.camera_max_age", fmt.Errorf("0 turns the camera watchdog off, but bundle %s takes camera images (%q): set the oldest acceptable frame age (e.g. 250ms)", b.Dir, o.Name))
		}
		if err := checkCamera(cfg, b, o); err != nil {
			return err
		}
	}
	return nil
}

// checkCamera refuses a camera other than the one the bundle's image input
// was trained on: another name, or a V4L2 capture size other than the
// recorded frame size (an HTTP or replay source's size is checked on its
// first frame, before the arm moves). A bundle that names no camera is
// taken with any.
func checkCamera(cfg *Config, b *engines.Bundle, o engines.ObsSpec) error {
	want := o.Camera
	if want == nil {
		return nil
	}
	switch got := cfg.Camera.Name; {
	case got == "":
		return cfg.keyError("camera.name", fmt.Errorf("empty, but bundle %s was trained on camera %q (%d×%d): name the mounted camera", b.Dir, want.Name, want.Width, want.Height))
	case got != want.Name:
		return cfg.keyError("camera.name", fmt.Errorf("%q, but bundle %s was trained on camera %q (%d×%d)", got, b.Dir, want.Name, want.Width, want.Height))
	}
	c := cfg.Camera.Config
	if (c.Source == "" || c.Source == camera.KindV4L2) && c.Width > 0 && (c.Width != want.Width || c.Height != want.Height) {
		return cfg.keyError("camera.width", fmt.Errorf("%d×%d, but bundle %s was trained on %d×%d frames from camera %q", c.Width, c.Height, b.Dir, want.Width, want.Height, want.Name))
	}
	return nil
}

// openVision opens a vision pipeline for every image input of the bundle
// (checkImageConfig has passed). A frame older than the camera watchdog's
// bound is never paired with an arm state.
func (a *App) openVision(cfg *Config) error {
	m := &a.bundle.Manifest
	for i, o := range m.Obs {
		if o.Kind != engines.ObsImage {
			continue
		}
		v, err := newVisionPipeline(a.bundle, a.backend, i, cfg.Period()/2, cfg.Safety.Watchdog.CameraMaxAge, &a.stages)
		if err != nil {
			return err
		}
		a.closers = append(a.closers, v.Close)
		a.vision = append(a.vision, v)
		a.log.Info("image input", "obs", o.Name, "features", o.Features, "preprocess", fmt.Sprintf("resize %v crop %v", o.Preprocess.Resize, o.Preprocess.Crop))
	}
	return nil
}

// safetyConfig returns the safety gate's configuration for the bundle:
// cfg.Safety as it is for a policy with an energy. A policy without one
// (diffusion) gets the energy monitor disabled, with one warning, since
// there is nothing to score; every other check still stops the arm —
// unless the bundle has the state term (state_energy), which the monitor
// then watches alone: by default, or when the config lists it alone. A
// configuration that asks for a score the bundle cannot give (an energy of
// a diffusion policy, state_energy of a bundle without the state term) is
// refused rather than silently ignored.
func safetyConfig(cfg *Config, b *engines.Bundle, log *slog.Logger) (safety.Config, error) {
	sc := cfg.Safety
	m := &b.Manifest
	onlyState := len(sc.Energy.Scores) > 0
	for _, s := range sc.Energy.Scores {
		if s.Name != engines.ScoreStateEnergy {
			onlyState = false
			continue
		}
		if !sc.Energy.Disabled && !m.HasStateEnergy() {
			return sc, cfg.keyError("safety.energy.scores", fmt.Errorf("%q, but bundle %s has no state term (no \"state_energy\" block in its manifest): train one (python -m energyflow state-term --bundle %s --data D.hdf5) or watch another score", s.Name, b.Dir, b.Dir))
		}
	}
	if m.HasEnergy() {
		warnCalibrationSteps(cfg, m, log)
		return sc, nil
	}
	if !sc.Energy.Disabled && onlyState {
		return sc, nil // a diffusion policy watched on its state term alone
	}
	if !sc.Energy.Disabled && len(sc.Energy.Scores) == 0 && m.HasStateEnergy() {
		// The default watch set of a policy without an energy is its state
		// term alone (safety's defaultScores).
		log.Info("the policy has no energy: the energy stop watches its state term (state_energy) alone", "bundle", m.Name, "policy", m.Policy)
		return sc, nil
	}
	if !sc.Energy.Disabled && len(sc.Energy.Scores) > 0 {
		hint := "remove safety.energy.scores (the energy stop is then off; all other safety checks stay on)"
		if m.HasStateEnergy() {
			hint = "watch only its state term (safety.energy.scores: [{name: state_energy}]), or remove safety.energy.scores (the energy stop is then off; all other safety checks stay on)"
		}
		return sc, cfg.keyError("safety.energy.scores", fmt.Errorf("bundle %s is a %q policy, which has no energy: it cannot be monitored on energy scores — %s", b.Dir, m.Policy, hint))
	}
	sc.Energy.Disabled = true
	log.Warn("the policy has no energy, so the energy stop is disabled; deadlines, NaN, arm connection, limits and the other watchdogs still stop the arm",
		"bundle", m.Name, "policy", m.Policy)
	return sc, nil
}

// warnCalibrationSteps logs a warning when the energy stop takes its
// threshold from a calibration made at another sampler step count K than the
// one this run samples at: the energy of the chosen action depends on K
// (docs/evaluation.md: ButtonPress episodes average about 270 at K = 20 and
// 400 at K = 10, against a threshold of 432 calibrated at K = 20), so the
// calibrated false-trip rate does not carry over. It warns rather than
// refuses: running at another K is a legitimate trade of accuracy for time.
func warnCalibrationSteps(cfg *Config, m *engines.Manifest, log *slog.Logger) {
	c := m.Calibration
	if c == nil || c.Steps <= 0 || cfg.Safety.Energy.Disabled {
		return
	}
	k := policySteps(cfg, m)
	if k == c.Steps {
		return
	}
	// The default watch set holds an energy only for a bundle without the
	// state term (which is otherwise watched alone).
	calibrated := len(cfg.Safety.Energy.Scores) == 0 && !m.HasStateEnergy()
	for _, s := range cfg.Safety.Energy.Scores {
		// The state term reads the observation alone: it does not depend on K.
		calibrated = calibrated || s.Threshold == nil && s.Name != engines.ScoreStateEnergy
	}
	if !calibrated {
		return
	}
	log.Warn("the energy stop's threshold was calibrated at another number of sampler steps: the energy depends on K, so the calibrated false-trip rate does not hold; recalibrate at this K (python -m energyflow calibrate --steps K) or set policy.steps to the calibration's",
		"bundle", m.Name, "policy_steps", k, "calibration_steps", c.Steps)
}

// useClosedLoopFor makes the closed-loop calibration certified at this
// run's control rate and sampler steps K the manifest's closed_loop, when
// the bundle carries one among calibration.closed_loop_others: the gate,
// the energy histogram and warnClosedLoopConditions all read closed_loop.
// It changes the runtime's copy of the manifest only.
func useClosedLoopFor(cfg *Config, m *engines.Manifest, log *slog.Logger) {
	c := m.Calibration
	if c == nil || len(c.ClosedLoopOthers) == 0 {
		return
	}
	cl, ok := c.ClosedLoopFor(cfg.Loop.RateHz, policySteps(cfg, m))
	if !ok || cl == c.ClosedLoop {
		return
	}
	use := *c
	use.ClosedLoop, use.ClosedLoopOthers = cl, nil
	m.Calibration = &use
	log.Info("using the bundle's closed-loop calibration certified at this control rate and K",
		"bundle", m.Name, "score", cl.Score, "rate_hz", cl.RateHz, "steps_k", cl.StepsK, "seeds", cl.Seeds)
}

// policySteps returns the sampler steps K the run uses: policy.steps, or
// the bundle's default.
func policySteps(cfg *Config, m *engines.Manifest) int {
	if cfg.Policy.Steps != 0 {
		return cfg.Policy.Steps
	}
	return m.Sampler.Steps
}

// warnClosedLoopConditions logs a warning when a threshold the gate uses
// comes from the bundle's closed-loop calibration and this run's control
// rate or sampler steps K differ from the ones its episodes were driven at
// (after useClosedLoopFor: the bundle has no calibration for this loop).
// The conformal false-trip rate is a property of that closed loop: the
// states the policy visits change with how late its plans land and how
// many steps it samples (research/notes/evaluation-log.md, "Which component of the state
// score fires"), so α is not certified at another rate or K. It warns
// rather than refuses, as warnCalibrationSteps does: the threshold is still
// a measured one.
func warnClosedLoopConditions(cfg *Config, m *engines.Manifest, th []safety.Threshold, log *slog.Logger) {
	if m.Calibration == nil || m.Calibration.ClosedLoop == nil {
		return
	}
	cl := m.Calibration.ClosedLoop
	used := false
	for _, t := range th {
		used = used || t.Source == "calibration.closed_loop"
	}
	if !used {
		return
	}
	k := policySteps(cfg, m)
	rateDiffers := cl.RateHz > 0 && math.Abs(cl.RateHz-cfg.Loop.RateHz) > 1e-9*cl.RateHz
	stepsDiffer := cl.StepsK > 0 && cl.StepsK != k
	if !rateDiffers && !stepsDiffer {
		return
	}
	log.Warn("the energy stop's closed-loop threshold was certified at another control rate or number of sampler steps: its false-trip rate does not carry over to this closed loop; recalibrate at this rate and K (energyflow sim calibrate --rate R --steps K adds a calibration for them beside this one) or run at the calibration's",
		"bundle", m.Name, "score", cl.Score, "rate_hz", cfg.Loop.RateHz, "calibration_rate_hz", cl.RateHz,
		"policy_steps", k, "calibration_steps_k", cl.StepsK)
}

// safetyCalibration is what the safety gate's thresholds come from: the
// bundle's calibration block as it is, and the state_energy block's held-out
// statistics in StateEnergy (the state score's default threshold). Nil when
// the bundle has neither.
func safetyCalibration(m *engines.Manifest) *safety.Calibration {
	var state *calibration.ScoreStats
	if se := m.StateEnergy; se != nil {
		state = &calibration.ScoreStats{Mean: se.Calibration.Mean, Std: se.Calibration.Std, Quantiles: se.Calibration.Quantiles}
	}
	if m.Calibration == nil && state == nil {
		return nil
	}
	cal := &safety.Calibration{StateEnergy: state}
	if m.Calibration != nil {
		cal.Block = *m.Calibration
	}
	return cal
}

// Loop returns the control loop.
func (a *App) Loop() *Loop { return a.loop }

// Guard returns the safety gate.
func (a *App) Guard() *safety.Guard { return a.guard }

// Telemetry returns the live-view server (nil when disabled).
func (a *App) Telemetry() *telemetry.Server { return a.tel }

// ViewerURL returns the live view's address (empty when disabled).
func (a *App) ViewerURL() string {
	if a.telLn == nil {
		return ""
	}
	return "http://" + a.telLn.Addr().String() + "/"
}

// Run serves telemetry, streams the camera and runs the loop until ctx ends.
// The arm is halted before Run returns.
func (a *App) Run(ctx context.Context) error {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if a.tel != nil {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			if err := a.tel.Serve(rctx, a.telLn); err != nil && !errors.Is(err, context.Canceled) {
				a.log.Warn("telemetry server", "err", err)
			}
		}()
	}
	if a.cam != nil {
		a.wg.Add(1)
		go func() { defer a.wg.Done(); a.cameraLoop(rctx) }()
	}
	if a.viewCam != nil {
		a.wg.Add(1)
		go func() { defer a.wg.Done(); a.viewLoop(rctx) }()
	}
	if a.watchCam != nil {
		a.wg.Add(1)
		go func() { defer a.wg.Done(); a.watchCam.run(rctx) }()
	}
	a.wg.Add(1)
	go func() { defer a.wg.Done(); a.forwardEvents(rctx) }()
	err := a.loop.Run(ctx)
	cancel()
	// The event forwarder first: a trip it is still delivering saves its
	// episode itself, and the shutdown's flush waits for that save
	// (flushing beside it raced the saves' WaitGroup).
	a.wg.Wait()
	if a.rec != nil {
		a.rec.flush("shutdown")
	}
	return err
}

// cameraLoop reads frames, runs the policy's vision pipelines on them,
// stamps the newest capture time for the safety watchdog and feeds the live
// view (unless the view has its own source, see viewLoop). Errors are
// logged (rate-limited) and the source reconnects by itself; staleness is
// the watchdog's business. A frame that cannot be
// decoded or encoded does not count as fresh: the watchdog sees the last
// good one age.
func (a *App) cameraLoop(ctx context.Context) {
	var f camera.Frame
	var rgb camera.RGB
	var dec camera.JPEGDecoder
	var prev []byte // the previous frame's pixels, for the frozen-camera check
	var lastLog time.Time
	rng := a.cfg.Camera.Range() // camera.yuv_range, for YUYV frames
	warn := func(msg string, err error) {
		if time.Since(lastLog) > 5*time.Second {
			a.log.Warn(msg, "err", err)
			lastLog = time.Now()
		}
	}
	for ctx.Err() == nil {
		if err := a.cam.Read(ctx, &f); err != nil {
			if ctx.Err() != nil {
				return
			}
			warn("camera", err)
			if errors.Is(err, io.EOF) || errors.Is(err, camera.ErrClosed) {
				return
			}
			if errors.Is(err, camera.ErrDisconnected) {
				for _, v := range a.vision {
					v.Reset() // never pair new arm states with frames from before the gap
				}
			}
			continue
		}
		feedView := a.tel != nil && a.viewCam == nil
		if !feedView && a.vision == nil {
			a.camTime.Store(f.Time.UnixNano())
			continue
		}
		t0 := time.Now()
		if err := camera.ToRGB(&rgb, &f, &dec, rng); err != nil {
			warn("camera frame", err)
			continue
		}
		a.stages.Since(StageCameraDecode, t0)
		if !bytes.Equal(prev, rgb.Pix) {
			prev = append(prev[:0], rgb.Pix...)
			a.camChanged.Store(f.Time.UnixNano())
		}
		if a.view != nil || a.palette != nil {
			a.observeView(&rgb, f.Time)
		}
		ok := true
		for _, v := range a.vision {
			if _, err := v.Encode(&rgb, f.Time, f.Seq); err != nil {
				warn("vision", err)
				ok = false
			}
		}
		if ok {
			a.camTime.Store(f.Time.UnixNano())
		}
		if feedView {
			a.tel.SubmitFrame(rgb.Pix, rgb.Width, rgb.Height, f.Time)
		}
	}
}

// observeView runs the camera's view checks on a frame captured at t: the
// knocked camera (safety watchdog.camera_moved) and the unseen colours
// (watchdog.camera_unseen). After a scene replaced on purpose (NewEpisode),
// frames captured before the new scene are skipped, the first one after
// becomes the view's reference, and the unseen count starts afresh.
func (a *App) observeView(rgb *camera.RGB, t time.Time) {
	since := a.viewRebase.Load()
	if since != 0 {
		// a frame of the old scene, or of the switch (a camera whose clock is
		// not the wall clock is taken after a second)
		if t.UnixNano() <= since && time.Since(time.Unix(0, since)) < time.Second {
			return
		}
		if a.view != nil {
			a.view.Rebase()
		}
		a.unseenPrev = 0
	}
	if a.view != nil {
		a.camMoved.Store(math.Float64bits(a.view.Observe(rgb).Fraction()))
	}
	if a.palette != nil {
		n := a.palette.Unseen(rgb)
		a.camUnseen.Store(int64(min(n, a.unseenPrev)))
		a.unseenPrev = n
	}
	if since != 0 {
		a.viewRebase.CompareAndSwap(since, 0)
	}
}

// viewLoop feeds the live view from its own camera (telemetry.video.url)
// while somebody watches. With no viewer it disconnects, so that the
// camera does no work for nobody (the simulator renders its display view
// only while a client reads it), and it reconnects when a viewer comes.
func (a *App) viewLoop(ctx context.Context) {
	var f camera.Frame
	var rgb camera.RGB
	var dec camera.JPEGDecoder
	var lastLog time.Time
	first := true
	warn := func(msg string, err error) {
		if time.Since(lastLog) > 5*time.Second {
			a.log.Warn(msg, "err", err)
			lastLog = time.Now()
		}
	}
	src := a.viewCam // opened by NewApp, not yet connected
	defer func() {
		if src != nil {
			src.Close()
		}
	}()
	idle := time.NewTicker(250 * time.Millisecond)
	defer idle.Stop()
	for ctx.Err() == nil {
		if a.tel.Viewers() == 0 {
			if src != nil {
				src.Close()
				src = nil
			}
			select {
			case <-ctx.Done():
				return
			case <-idle.C:
			}
			continue
		}
		if src == nil {
			var err error
			if src, err = camera.Open(a.viewCfg, a.log.With("part", "view-camera")); err != nil {
				warn("live view camera", err) // validated at start: not expected
				return
			}
		}
		if err := src.Read(ctx, &f); err != nil {
			if ctx.Err() != nil {
				return
			}
			warn("live view camera", err)
			if errors.Is(err, io.EOF) || errors.Is(err, camera.ErrClosed) {
				return
			}
			continue
		}
		if err := camera.ToRGB(&rgb, &f, &dec, camera.RangeLimited); err != nil {
			warn("live view camera frame", err)
			continue
		}
		if first {
			a.log.Info("live view camera", "url", a.cfg.Telemetry.Video.URL, "width", rgb.Width, "height", rgb.Height)
			first = false
		}
		a.tel.SubmitFrame(rgb.Pix, rgb.Width, rgb.Height, f.Time)
	}
}

// forwardEvents logs safety events and publishes them to the live view and
// the recording.
func (a *App) forwardEvents(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-a.events:
			if a.tel != nil {
				// The watched score, or the one that tripped the energy monitor.
				w := a.watch
				if e.Reason.Kind == safety.KindEnergy {
					w = e.Reason.Score
				}
				te := telemetry.Event{Time: e.Time, Tick: uint64(e.Tick), Kind: e.Type.String(), Reason: eventReason(&e),
					Actor: e.Actor, Energy: e.Reason.Scores[w], Threshold: e.Reason.Threshold, Score: w.String()}
				for _, s := range e.Trace {
					te.Trace = append(te.Trace, s.Scores[w])
				}
				a.tel.PublishEvent(te)
				switch e.Type {
				case safety.EventTrip:
					a.tel.Metrics().SafetyTrip(e.Reason.Kind.String())
				case safety.EventRecoveryStart:
					a.tel.Metrics().RecoveryStarted()
				case safety.EventRecoveryEnd:
					a.tel.Metrics().RecoveryEnded(e.End.String())
				}
			}
			if a.rec != nil {
				a.rec.event(e)
			}
		}
	}
}

// Close releases everything in reverse order of opening. Idempotent.
func (a *App) Close() {
	if a.telLn != nil {
		a.telLn.Close()
	}
	for i := len(a.closers) - 1; i >= 0; i-- {
		_ = a.closers[i]()
	}
	a.closers = nil
}

// eventReason is the live view's line for a safety event: the reason, and
// for recovery events the mode and how it ended; a coalesced refusal says
// how many identical ones it stands for.
func eventReason(e *safety.Event) string {
	r := e.Reason.Kind.String() + ": " + e.Reason.Message
	switch e.Type {
	case safety.EventRecoveryStart:
		r = "recovery (" + e.Recovery.String() + ") from " + r
	case safety.EventRecoveryEnd:
		r = fmt.Sprintf("recovery (%s) ended after %.1f s: %s — %s", e.Recovery, e.Duration.Seconds(), e.End, r)
	case safety.EventRecoveryRefused:
		r = "recovery (" + e.Recovery.String() + ") refused: " + r
	}
	if e.Repeated > 0 {
		r += fmt.Sprintf(" (and %d more like it)", e.Repeated)
	}
	return r
}

// controller lets the live view's STOP, RESET and recovery mode reach the
// loop.
type controller struct{ a *App }

var _ telemetry.Recoverer = controller{}

func (c controller) Stop(ctx context.Context, actor, reason string) error {
	return c.a.loop.Stop(ctx, actor, reason)
}

func (c controller) Reset(ctx context.Context, actor string) error {
	return c.a.loop.Arm(ctx, actor)
}

// delayedSampler is AppOptions.InferenceDelay: each plan takes d longer.
type delayedSampler struct {
	PolicySampler
	d time.Duration
}

func (s delayedSampler) Sample(cond []float32, dst *engines.Result) error {
	time.Sleep(s.d)
	return s.PolicySampler.Sample(cond, dst)
}

func (s delayedSampler) SampleGuided(cond []float32, g *engines.Guide, dst *engines.Result) error {
	time.Sleep(s.d)
	return s.PolicySampler.SampleGuided(cond, g, dst)
}

func (s delayedSampler) SampleWarm(cond []float32, w *engines.Warm, dst *engines.Result) error {
	ws, ok := s.PolicySampler.(warmSampler)
	if !ok {
		return fmt.Errorf("runtime: this sampler (%T) has no warm start", s.PolicySampler)
	}
	time.Sleep(s.d)
	return ws.SampleWarm(cond, w, dst)
}

func (s delayedSampler) Steps() int {
	if ss, ok := s.PolicySampler.(stepsSampler); ok {
		return ss.Steps()
	}
	return 0
}

func (c controller) Recover(ctx context.Context, actor, mode string) error {
	m, ok := safety.ParseRecoveryMode(mode)
	if !ok {
		return fmt.Errorf("%w (by %s): unknown mode %q — use jog or retrace", safety.ErrRecoveryRefused, actor, mode)
	}
	return c.a.loop.Recover(ctx, actor, m)
}

func (c controller) Jog(actor string, v []float64, gripper float64) error {
	return c.a.loop.Jog(actor, v, gripper)
}

func (c controller) RecoveryInfo() telemetry.RecoveryInfo {
	sc := c.a.guard.Config()
	r := sc.Recovery
	return telemetry.RecoveryInfo{Axes: len(sc.Limits.MaxVelocity), SpeedFraction: r.SpeedFraction, TimeLimit: r.TimeLimit,
		JogHold: r.JogHold, RetraceWindow: r.RetraceWindow}
}

// imagePalette is the camera palette of the bundle's image input (nil: it
// has none, or the bundle has no image input).
func imagePalette(m *engines.Manifest) (*camera.Palette, error) {
	for _, o := range m.Obs {
		if o.Kind == engines.ObsImage && o.Palette != nil {
			p, err := camera.DecodePalette(o.Palette.Levels, o.Palette.Seen)
			if err != nil {
				return nil, fmt.Errorf("bundle %s, input %q: %w", m.Name, o.Name, err)
			}
			return p, nil
		}
	}
	return nil, nil
}

// older returns a clock reading the older of watch's and own's times (own
// nil: watch's alone); zero, none yet, is the oldest.
func older(watch, own func() time.Time) func() time.Time {
	return func() time.Time {
		t := watch()
		if own != nil {
			if o := own(); o.IsZero() || o.Before(t) {
				t = o
			}
		}
		return t
	}
}

// larger returns a reading of the larger of watch's and own's values (own
// nil: watch's alone).
func larger[T cmp.Ordered](watch, own func() T) func() T {
	return func() T {
		v := watch()
		if own != nil {
			v = max(v, own())
		}
		return v
	}
}

// WatchesUnseen reports whether the unseen-colour check runs (safety
// watchdog.camera_unseen set, and the bundle's image input has a palette or
// its watch camera is on).
func (a *App) WatchesUnseen() bool {
	return a.palette != nil || a.watchCam != nil && a.watchCam.palette != nil
}

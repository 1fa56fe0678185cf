package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/runtime"
	"github.com/energyflow/edge/runtime/record"
	"github.com/energyflow/edge/safety"
)

// Default simulated robot: Meta-World behind the bridge.
const (
	defaultSimTask   = "button-press"
	defaultSimBundle = "bundles/metaworld-button-press" // relative to the repository
	simMapFile       = "examples/maps/metaworld.yaml"
)

// The bridge's vocabulary, the one Go copy: tasks as sim/world.py's TASKS,
// OOD levels as sim/ood.py's LEVELS, injected faults as sim/world.py's
// FAULTS (sim/tests/test_go_harness.py checks that they agree).
const (
	simTasks  = "button-press drawer-open assembly bin-picking hammer"
	simLevels = "0 S M L"
	simFaults = "push object occlusion zero_state"
)

// usageError is a command-line mistake: the command prints it and exits 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// report prints err, one line per joined error each prefixed with the
// command, and returns the exit code: exitUsage for a usageError anywhere
// in err, else exitFailure.
func report(env *cliEnv, command string, err error) int {
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintf(env.stderr, "%s: %s\n", command, line)
	}
	var u usageError
	if errors.As(err, &u) {
		return exitUsage
	}
	return exitFailure
}

func cmdSim(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "record":
			return cmdSimRecord(ctx, env, args[1:])
		case "eval":
			return cmdSimEval(ctx, env, args[1:])
		case "calibrate":
			return cmdSimCalibrate(ctx, env, args[1:])
		}
	}
	return cmdSimDemo(ctx, env, args)
}

// simFlags are shared by the demo and the evaluation.
type simFlags struct {
	task, level, bundle, listen, camera string
	robotState                          string // robot.state fields, comma-separated; "": from the bundle
	seed, steps                         int
	rate                                float64
	verbose                             bool

	// Resolved by prepare.
	bundleDir string   // the bundle to run: --bundle or the task's shipped one
	state     []string // robot.state for the bundle
	// calibratedOn is the task the bundle's closed-loop stop was calibrated
	// on, when that is not --task: a bundle of another task usually never
	// arms, its state score refusing the scene.
	calibratedOn string
}

// warnTask prints one line when the bundle's stop was calibrated on
// another task (Meta-World's tasks share the 39-wide observation, so the
// width check cannot tell).
func (f *simFlags) warnTask(env *cliEnv, cmd string) {
	if f.calibratedOn != "" {
		fmt.Fprintf(env.stderr, "%s: warning: bundle %s was calibrated on task %s, not %s: its stop will likely refuse to arm\n", cmd, f.bundleDir, f.calibratedOn, f.task)
	}
}

func (f *simFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.task, "task", defaultSimTask, "Meta-World task: "+listOf(simTasks))
	fs.StringVar(&f.level, "level", "0", "out-of-distribution level: "+listOf(simLevels))
	fs.StringVar(&f.bundle, "bundle", "", "engine bundle (default: the shipped bundle for the task, "+defaultSimBundle+")")
	fs.IntVar(&f.seed, "seed", 0, "episode seed")
	fs.IntVar(&f.steps, "steps", 0, "Euler steps K (0: the bundle's default)")
	fs.Float64Var(&f.rate, "rate", 10, "control rate in Hz")
	fs.StringVar(&f.camera, "camera-size", "96x96", "camera image size WxH rendered by the simulator")
	fs.StringVar(&f.robotState, "robot-state", "", "arm-state fields the policy's state input is built from, comma-separated (default: observation for a 39-wide state input, position,gripper for a 4-wide one)")
	fs.BoolVar(&f.verbose, "v", false, "debug logging")
}

// listOf is a space-separated vocabulary as the help and errors show it.
func listOf(words string) string { return strings.Join(strings.Fields(words), ", ") }

// oneOf returns v normalized by norm, or a usage error naming the flag,
// the value and the valid ones when that is not one of words.
func oneOf(flagName, what, v, words string, norm func(string) string) (string, error) {
	if n := norm(strings.TrimSpace(v)); slices.Contains(strings.Fields(words), n) {
		return n, nil
	}
	return "", usageError{fmt.Errorf("%s %q: unknown %s; want one of %s", flagName, v, what, listOf(words))}
}

// normTask and normLevel spell a task and a level as the bridge does
// (sim/world.py normalize_task, sim/ood.py normalize_level).
func normTask(s string) string  { return strings.TrimSuffix(strings.ToLower(s), "-v3") }
func normLevel(s string) string { return strings.ToUpper(s) }

// validate checks the flags before anything starts, normalizing task and
// level; it returns every problem, each a usage error on its own line.
func (f *simFlags) validate() error {
	var errs []error
	var err error
	if f.task, err = oneOf("--task", "task", f.task, simTasks, normTask); err != nil {
		errs = append(errs, err)
	}
	if f.level, err = oneOf("--level", "OOD level", f.level, simLevels, normLevel); err != nil {
		errs = append(errs, err)
	}
	bad := func(format string, a ...any) { errs = append(errs, usageError{fmt.Errorf(format, a...)}) }
	if f.seed < 0 {
		bad("--seed %d: must be 0 or more", f.seed)
	}
	if f.steps < 0 {
		bad("--steps %d: must be 0 (the bundle's default) or more", f.steps)
	}
	if !(f.rate > 0) || math.IsInf(f.rate, 0) {
		bad("--rate %g: must be a positive control rate in Hz (e.g. 10)", f.rate)
	}
	var w, h int
	f.camera = strings.ToLower(strings.TrimSpace(f.camera))
	if n, err := fmt.Sscanf(f.camera, "%dx%d", &w, &h); err != nil || n != 2 || w <= 0 || h <= 0 || fmt.Sprintf("%dx%d", w, h) != f.camera {
		bad("--camera-size %q: want WxH in pixels, e.g. 96x96", f.camera)
	}
	return errors.Join(errs...)
}

// prepare validates the flags and resolves the bundle and the robot state
// it needs, before the bridge starts: a mistake costs no simulator start-up.
// Command-line mistakes are usage errors; a shipped bundle not built yet is not.
func (f *simFlags) prepare(root string) error {
	if err := f.validate(); err != nil {
		return err
	}
	f.bundleDir = resolveBundle(root, f)
	fi, err := os.Stat(f.bundleDir)
	missing := errors.Is(err, os.ErrNotExist)
	switch {
	case missing && f.bundle != "":
		return usageError{fmt.Errorf("--bundle %s: no such folder", f.bundle)}
	case missing:
		return fmt.Errorf("sim: no bundle for task %s at %s: train one (docs/evaluation.md) or pass --bundle", f.task, f.bundleDir)
	case err != nil:
		return fmt.Errorf("sim: bundle: %w", err)
	case !fi.IsDir():
		return usageError{fmt.Errorf("--bundle %s: not a folder (want an engine bundle's folder)", f.bundle)}
	}
	if f.state, err = simRobotState(f.bundleDir, f.robotState); err != nil {
		if f.bundle != "" {
			return usageError{err}
		}
		return err
	}
	f.calibratedOn = ""
	if m, err := readManifest(f.bundleDir); err == nil && m.Calibration != nil {
		if cl := m.Calibration.ClosedLoop; cl != nil && cl.Task != "" && cl.Task != f.task {
			f.calibratedOn = cl.Task
		}
	}
	return nil
}

// simConfig is the runtime configuration for the Meta-World bridge: the
// same Config a robot would use, pointed at the bridge's loopback servers.
// The flags must have been prepared.
func simConfig(root string, f *simFlags, b *bridge, listen string) (*runtime.Config, error) {
	c := runtime.DefaultConfig()
	c.Robot.Address = b.Modbus
	c.Robot.Map = filepath.Join(root, simMapFile)
	// The bridge is a Python process sharing the cores with the runtime (and, in
	// the demo, a browser decoding video): give its replies time.
	c.Robot.Timeout = time.Second
	c.Camera.Source = "http"
	c.Camera.URL = b.StreamURL()
	c.Policy.Bundle = f.bundleDir
	c.Robot.State = f.state
	c.Policy.Steps = f.steps
	c.Policy.Threads = 1 // sampler and scorer run side by side with the bridge on 2 cores
	c.Policy.Seed = uint64(f.seed)
	c.Loop.RateHz = f.rate
	c.Loop.AutoStart = true
	c.Safety.Limits.MaxVelocity = []float64{1, 1, 1}
	c.Safety.Limits.MaxDelta = []float64{2, 2, 2}
	c.Safety.Watchdog.CameraMaxAge = 2 * time.Second
	c.Safety.Watchdog.ArmMaxAge = 2 * time.Second
	c.Safety.Watchdog.ScoreMaxAge = time.Duration(float64(time.Second) * 3 / f.rate)
	c.Safety.Watchdog.InferenceDeadline = 2 * time.Second
	// The simulated world advances one step per command, so a late tick
	// costs no physical motion here; three periods of slack keep a loaded
	// development machine from tripping. On a robot keep the strict default.
	c.Safety.Watchdog.LoopMaxLate = time.Duration(3 * float64(time.Second) / f.rate)
	c.Telemetry.Enabled = listen != ""
	c.Telemetry.Listen = listen
	c.Telemetry.ICE.Mode = "loopback"
	c.Telemetry.Auth.TokenFile = filepath.Join(root, "build", "sim-tokens.yaml")
	c.Telemetry.Video.Width, c.Telemetry.Video.Height = simViewWidth, simViewHeight
	// The live view shows the bridge's display-size render, not the
	// policy's camera image scaled up.
	c.Telemetry.Video.URL = b.View
	c.Log.Level = "info"
	if f.verbose {
		c.Log.Level = "debug"
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// simRobotState returns robot.state for a bundle on the Meta-World bridge:
// the flag's list when given, else what the bundle's state input's width
// says — the full 39-wide observation (state policies), or the arm's own
// state, hand position and gripper opening (observation[0:4]), for image
// policies trained with that proprioception (docs/sim.md).
func simRobotState(bundle, flagValue string) ([]string, error) {
	if flagValue != "" {
		return strings.Split(flagValue, ","), nil
	}
	mpath := filepath.Join(bundle, "manifest.json")
	data, err := os.ReadFile(mpath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("sim: %s has no manifest.json — is it an engine bundle? (export one with `python -m energyflow export`)", bundle)
	}
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	m, err := engines.ParseManifest(mpath, data)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	for i := range m.Obs {
		if m.Obs[i].Kind != engines.ObsState {
			continue
		}
		switch w := m.Obs[i].Width(); w {
		case 39:
			return []string{"observation"}, nil
		case 4:
			return []string{"position", "gripper"}, nil
		default:
			return nil, fmt.Errorf("sim: bundle %s has a %d-wide state input %q: the Meta-World arm gives observation (39) or position,gripper (4); pass --robot-state", bundle, w, m.Obs[i].Name)
		}
	}
	return nil, fmt.Errorf("sim: bundle %s has no state input; the runtime needs one (pass --robot-state to choose the arm fields)", bundle)
}

// resolveBundle is --bundle, or the shipped bundle of the task.
func resolveBundle(root string, f *simFlags) string {
	if f.bundle != "" {
		return f.bundle
	}
	return filepath.Join(root, "bundles", "metaworld-"+f.task)
}

// The live view's size in the simulator; the bridge renders its display
// view at this size.
const simViewWidth, simViewHeight = 480, 480

// startSimBridge starts the bridge for the flags: lockstep (evaluation, and
// the demo by default; episodes truncated at maxSteps, 0: Meta-World's 500),
// or real time on the bridge's own --rate clock (the demo's --realtime).
// view adds the bridge's display view at /view for the live view (demo
// only).
func startSimBridge(ctx context.Context, env *cliEnv, root string, f *simFlags, lockstep bool, maxSteps int, view bool) (*bridge, error) {
	o := bridgeOptions{root: root, task: f.task, level: f.level, seed: f.seed, mapFile: filepath.Join(root, simMapFile),
		lockstep: lockstep, maxSteps: maxSteps, camera: f.camera, log: prefixWriter(env.stderr, "bridge: ")}
	if view {
		o.view = fmt.Sprintf("%dx%d", simViewWidth, simViewHeight)
	}
	if !lockstep {
		o.rateHz = f.rate
	}
	return startBridge(ctx, o)
}

// episodeSwitcher replaces the scene between two control ticks and
// restarts the policy on it (runtime.Loop.NewEpisode).
type episodeSwitcher func(ctx context.Context, replace func(context.Context) error) error

// demoNextEpisode starts the next episode when the current one has ended:
// same task, the next seed, and the level set with POST /episode/level if
// one is pending (else the current level). The reset runs through sw (nil:
// the bridge alone), so the runtime holds the arm across it and plans the
// new scene from a fresh history, as sim eval's runtime per episode does.
// It returns the episode that ended (the current one when none did), the
// new one, and whether it reset.
func demoNextEpisode(ctx context.Context, b *bridge, sw episodeSwitcher) (ended, ep episode, reset bool, err error) {
	ep, err = b.Episode(ctx)
	if err != nil || !ep.Done {
		return ep, ep, false, err
	}
	ended = ep
	seed := ep.Seed + 1
	restart := func(ctx context.Context) (err error) {
		ep, err = b.Reset(ctx, "", "", seed, "", 0)
		return err
	}
	if sw == nil {
		err = restart(ctx)
	} else {
		err = sw(ctx, restart)
	}
	return ended, ep, err == nil, err
}

// demoEpisodeEvery is how often the demo asks the bridge whether the
// episode has ended: a fraction of the 10 steps the demonstrations keep
// after success, so the arm does not linger in the finished scene.
const demoEpisodeEvery = 200 * time.Millisecond

// demoEpisodes starts a new episode whenever one ends, so the arm keeps
// working, until ctx ends. A failure is logged when it starts and again at
// most every 30 s while it lasts.
func demoEpisodes(ctx context.Context, c *demoControl, log *slog.Logger) {
	var failing time.Time
	t := time.NewTicker(demoEpisodeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := c.next(tctx, log)
		cancel()
		switch {
		case err == nil:
			if !failing.IsZero() {
				log.Info("demo: episodes start again")
				failing = time.Time{}
			}
		case ctx.Err() != nil:
			return
		case failing.IsZero() || time.Since(failing) >= 30*time.Second:
			log.Warn("demo: cannot start the next episode (retrying)", "err", err)
			failing = time.Now()
		}
	}
}

// cmdSimDemo is `energyflow sim`: the simulated robot demo.
func cmdSimDemo(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var f simFlags
	f.register(fs)
	listen := fs.String("listen", "127.0.0.1:8080", "address of the live view")
	duration := fs.Duration("duration", 0, "stop after this long (0: run until Ctrl-C)")
	soakReport := fs.String("soak-report", "", "write a soak report (tick jitter, missed deadlines, memory, GC) to this file at exit")
	nice := fs.Int("nice", -10, "CPU priority (niceness) of the demo's runtime and simulator, as the systemd unit's Nice=-10 gives the service, so a browser watching on the same machine does not delay its plans; 0 keeps the shell's (a negative value needs root or CAP_SYS_NICE; without it the demo says so and runs as it is)")
	realtime := fs.Bool("realtime", false, "run the simulator on its own --rate clock instead of one step per control tick: the two clocks drift, so the arm's state is sometimes read 0 or 2 steps apart, which the state term's transition component sees as motion the arm did not make (docs/sim.md)")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, `usage: energyflow sim [flags]          run the simulated robot demo until Ctrl-C
       energyflow sim record [flags]   record scripted demonstrations (HDF5)
       energyflow sim eval [flags]     closed-loop evaluation of a bundle
       energyflow sim calibrate [flags]  closed-loop conformal thresholds for the energy stop

The demo starts the Meta-World bridge (Modbus TCP arm + MJPEG camera on
loopback), the runtime with the task's bundle on ONNX Runtime, safety and the
live view, and prints the viewer URL with its token.`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	fail := func(err error) int { return report(env, "energyflow sim", err) }
	root, err := projectRoot()
	if err != nil {
		return fail(err)
	}
	if err := f.prepare(root); err != nil {
		return fail(err)
	}
	f.warnTask(env, "energyflow sim")
	if *nice != 0 {
		if err := setNice(*nice); err != nil {
			fmt.Fprintf(env.stderr, "energyflow sim: running at normal priority: %v\n", err)
		}
	}
	// One physics step per control tick (lockstep), paced by the runtime's
	// real-time loop: the arm's state then moves exactly one period between
	// reads, as a real arm's does. --realtime keeps the simulator's own clock.
	b, err := startSimBridge(ctx, env, root, &f, !*realtime, 0, *listen != "")
	if err != nil {
		return fail(err)
	}
	defer b.Close()
	cfg, err := simConfig(root, &f, b, *listen)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(env.stdout, "simulated robot: Meta-World %s, level %s; Modbus %s, camera http://%s/stream\n", f.task, f.level, b.Modbus, b.HTTP)
	if b.View != "" {
		fmt.Fprintf(env.stdout, "live view video: %s (%dx%d)\n", b.View, simViewWidth, simViewHeight)
	}
	fmt.Fprintln(env.stdout, "the live view's Episode panel starts a new episode and changes the OOD level (0, S, M, L)")
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	ctl := &demoControl{b: b}
	run := appRun{showToken: true, opts: runtime.AppOptions{Episodes: ctl},
		started: func(ctx context.Context, app *runtime.App, log *slog.Logger) {
			ctl.setLoop(app.Loop())
			// Start a new episode whenever one ends, so the arm keeps working.
			go demoEpisodes(ctx, ctl, log.With("part", "demo"))
		}}
	if *soakReport == "" {
		return runAppWith(ctx, env, cfg, run)
	}
	soak := newSoakMeter(int(cfg.Loop.RateHz*duration.Seconds()) + 16)
	run.opts.OnTick = soak.onTick
	code := runAppWith(ctx, env, cfg, run)
	rep := soak.report(cfg.Loop.RateHz, *duration)
	fmt.Fprintln(env.stdout, rep)
	if err := os.WriteFile(*soakReport, []byte(rep+"\n"), 0o644); err != nil {
		fmt.Fprintln(env.stderr, "energyflow sim:", err)
		return exitFailure
	}
	return code
}

// cmdSimRecord runs the bridge's scripted-demonstration recorder.
func cmdSimRecord(ctx context.Context, env *cliEnv, args []string) int {
	for _, a := range args {
		if a == "-h" || a == "--help" {
			fmt.Fprintln(env.stdout, "usage: energyflow sim record --task T --episodes N --out demos.hdf5 [--camera] [--seed S]\n(runs python -m sim.record in the project's environment; its --help follows)")
			break
		}
	}
	root, err := projectRoot()
	if err != nil {
		fmt.Fprintln(env.stderr, "energyflow sim record:", err)
		return exitFailure
	}
	py := filepath.Join(root, ".venv", "bin", "python")
	cmd := exec.CommandContext(ctx, py, append([]string{"-m", "sim.record"}, args...)...)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = env.stdout, env.stderr
	cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1")
	if os.Getenv("MUJOCO_GL") == "" {
		cmd.Env = append(cmd.Env, "MUJOCO_GL=osmesa", "PYOPENGL_PLATFORM=osmesa")
	}
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		fmt.Fprintln(env.stderr, "energyflow sim record:", err)
		return exitFailure
	}
	return exitOK
}

// evalResult is one episode of a closed-loop evaluation.
type evalResult struct {
	Episode     int      `json:"episode"`
	Seed        int      `json:"seed"`        // scene seed (the bridge's reset)
	PolicySeed  uint64   `json:"policy_seed"` // the sampler's noise seed (policy.seed)
	Success     bool     `json:"success"`
	SuccessStep *int     `json:"success_step"` // environment step of the first success; nil: none
	Steps       int      `json:"steps"`
	Return      float64  `json:"return"`
	End         string   `json:"end"` // success, truncated (the step limit), safety_stop, never_armed (auto-start refused all episode) or interrupted
	StopKind    string   `json:"stop_kind,omitempty"`
	StopTick    int64    `json:"stop_tick,omitempty"`
	StopScore   string   `json:"stop_score,omitempty"` // the score whose rule fired, for an energy stop
	Fault       string   `json:"fault,omitempty"`
	FaultStep   int      `json:"fault_step,omitempty"`
	Inferences  int      `json:"inferences"`            // policy inferences the loop finished
	InferP50    *float64 `json:"inference_p50_ms"`      // their median latency, as the loop measured it; nil: none
	MeanScore   *float64 `json:"mean_energy,omitempty"` // nil: no energy (a diffusion policy) or no fresh score
	// LateSpells counts the times the p90 of the recent plans' latency went
	// past the loop's plan_late_limit (each one a warning), LatePlans the
	// plans that finished while it was past (runtime.LoopStats).
	LateSpells int64 `json:"late_spells"`
	LatePlans  int64 `json:"late_plans"`

	inferMs   []float64 // every inference latency, for the cell's quantiles
	lateLimit *float64  // the loop's plan_late_limit in periods; nil: none
	// trace has one entry per RUNNING tick since the gate armed, in order:
	// the traced score (evalFlags.traceScore, the energy by default) of its
	// fresh score, NaN where the tick had none. Its index is the gate's
	// count of running ticks since arming, its finite entries what the rule
	// observes (sim calibrate fits on it).
	trace []float64
	// watch is what the episode's energy stop watched, in the gate's
	// order (Guard.Thresholds): --watch, or the bundle's default watch set;
	// nil with the energy stop off.
	watch []string
}

// evalFlags are the evaluation's flags.
type evalFlags struct {
	simFlags
	episodes, maxSteps int
	// delay is --delay: every plan lands this many control periods later
	// than the sampler finishes it (a slower or busier host).
	delay           float64
	fault           string // injected fault: "" or one of simFaults
	faultStep       int
	scores, summary string
	// observeOnly runs every episode with the energy stop off, so that the
	// scores are recorded but never end an episode (sim calibrate).
	observeOnly bool
	// traceScore is the score evalResult.trace records (sim calibrate
	// --score); the zero value is the energy.
	traceScore safety.Score
	// stateTerm: the bundle has the state term, so the per-tick scores
	// carry state_energy (set by prepare).
	stateTerm bool
	// watch is sim eval --watch: the scores the energy stop watches,
	// comma-separated ("": the bundle's default watch set, docs/safety.md);
	// watchScores is it parsed by prepare.
	watch       string
	watchScores []string
	// record is sim eval --record: a directory under which every episode
	// is recorded in HDF5 (the runtime's recording, docs/sim.md), one
	// folder per episode named TASK_SEED ("": no recording).
	record string
}

func (e *evalFlags) register(fs *flag.FlagSet) {
	e.simFlags.register(fs)
	fs.IntVar(&e.episodes, "episodes", 10, "number of episodes")
	fs.IntVar(&e.maxSteps, "max-steps", 500, "environment steps per episode before it counts as a failure; the bridge truncates the episode there (the official Meta-World evaluation uses 500)")
	fs.StringVar(&e.scores, "scores", "", "write per-tick scores (JSON lines) to this file")
	fs.StringVar(&e.summary, "json", "", "write the summary as JSON to this file")
	fs.StringVar(&e.fault, "fault", "", "inject a fault in every episode: push (the arm is shoved 8 cm), object (an unseen object appears in the state), occlusion (a dark square blocks the middle of the camera image) or zero_state (the arm's state reads all zeros, as a failed encoder or a dead bus would report); docs/sim.md")
	fs.IntVar(&e.faultStep, "fault-step", 30, "environment step at which --fault starts")
	fs.Float64Var(&e.delay, "delay", 0, "hold every plan this many control periods longer before the loop gets it, as a slower or busier host would (0 to the bundle's action horizon)")
}

// prepare is simFlags.prepare plus the evaluation's own flags.
func (e *evalFlags) prepare(root string) error {
	var errs []error
	if e.episodes < 1 {
		errs = append(errs, usageError{fmt.Errorf("--episodes %d: must be at least 1", e.episodes)})
	}
	if e.maxSteps < 1 {
		errs = append(errs, usageError{fmt.Errorf("--max-steps %d: must be at least 1 (environment steps per episode; Meta-World's evaluation uses 500)", e.maxSteps)})
	}
	if e.fault != "" {
		var err error
		if e.fault, err = oneOf("--fault", "fault", e.fault, simFaults, strings.ToLower); err != nil {
			errs = append(errs, err)
		}
		if e.faultStep < 0 {
			errs = append(errs, usageError{fmt.Errorf("--fault-step %d: must be 0 or more", e.faultStep)})
		}
	}
	if err := errors.Join(errs...); err != nil {
		// Check the shared flags too, so every mistake shows at once.
		return errors.Join(err, e.simFlags.validate())
	}
	if err := e.simFlags.prepare(root); err != nil {
		return err
	}
	// A manifest that does not parse is reported by the runtime's loader.
	if m, err := readManifest(e.bundleDir); err == nil {
		e.stateTerm = m.HasStateEnergy()
		if !(e.delay >= 0 && e.delay <= float64(m.ActionHorizon)) {
			return usageError{fmt.Errorf("--delay %g: must be 0 to %d control periods (the bundle's action horizon: a plan later than its chunk never runs)", e.delay, m.ActionHorizon)}
		}
	}
	return e.parseWatch()
}

// parseWatch checks --watch against the score names and the bundle: each
// name once, state_energy only for a bundle with the state term.
func (e *evalFlags) parseWatch() error {
	e.watchScores = nil
	if e.watch == "" {
		return nil
	}
	for _, name := range strings.Split(e.watch, ",") {
		name = strings.TrimSpace(name)
		sc, ok := safety.ParseScore(name)
		switch {
		case !ok:
			return usageError{fmt.Errorf("--watch %q: %q is not a score (energy, centered_energy, state_energy)", e.watch, name)}
		case slices.Contains(e.watchScores, name):
			return usageError{fmt.Errorf("--watch %q: %s is named twice", e.watch, name)}
		case sc == safety.ScoreStateEnergy && !e.stateTerm:
			return usageError{fmt.Errorf("--watch %q: bundle %s has no state term (add one with python -m energyflow state-term)", e.watch, e.bundleDir)}
		}
		e.watchScores = append(e.watchScores, name)
	}
	return nil
}

// readManifest parses (and validates) a bundle's manifest.json without
// checking its files.
func readManifest(bundle string) (*engines.Manifest, error) {
	mpath := filepath.Join(bundle, "manifest.json")
	data, err := os.ReadFile(mpath)
	if err != nil {
		return nil, err
	}
	return engines.ParseManifest(mpath, data)
}

// cmdSimEval runs the real runtime stack against the bridge per episode.
func cmdSimEval(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("sim eval", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var e evalFlags
	e.register(fs)
	fs.StringVar(&e.watch, "watch", "", "scores the energy stop watches, comma-separated (energy, centered_energy, state_energy; any one tripping stops); empty: the bundle's default, state_energy alone with the state term, else its calibration's score")
	fs.StringVar(&e.record, "record", "", "record every episode in HDF5 (the arm's state, actions and scores of each running tick, and the safety events) under this directory, one folder per episode named TASK_SEED, to look at what the robot saw when the stop tripped (needs a cgo build with libhdf5)")
	fs.BoolVar(&e.observeOnly, "observe-only", false, "run the energy stop as an observer: every score is traced (--scores) but none ends an episode, so the traces run to success or the step limit and research/stop/stop_rules.py can replay any rule on them; every other stop still acts")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	fail := func(err error) int { return report(env, "energyflow sim eval", err) }
	root, err := projectRoot()
	if err != nil {
		return fail(err)
	}
	if e.observeOnly && e.watch != "" {
		return fail(usageError{fmt.Errorf("--watch %q with --observe-only: an observing stop watches nothing; drop one of them", e.watch)})
	}
	if e.record != "" {
		if !record.Supported() {
			return fail(usageError{fmt.Errorf("--record %s: %w", e.record, record.ErrNoHDF5)})
		}
		if err := os.MkdirAll(e.record, 0o755); err != nil {
			return fail(usageError{fmt.Errorf("--record: %w", err)})
		}
	}
	if err := e.prepare(root); err != nil {
		return fail(err)
	}
	e.warnTask(env, "energyflow sim eval")
	b, err := startSimBridge(ctx, env, root, &e.simFlags, true, e.maxSteps, false)
	if err != nil {
		return fail(err)
	}
	defer b.Close()
	scoreFile, closeScores, err := createScores(e.scores)
	if err != nil {
		return fail(err)
	}
	defer closeScores()
	var results []evalResult
	trips := map[string]int{}
	for ep := 0; ep < e.episodes && ctx.Err() == nil; ep++ {
		r, err := evalEpisode(ctx, env, root, &e, b, ep, scoreFile)
		if err != nil {
			fmt.Fprintf(env.stderr, "energyflow sim eval: episode %d: %v\n", ep, err)
			return exitFailure
		}
		if r.StopKind != "" {
			trips[r.StopKind]++
		}
		results = append(results, r)
		fmt.Fprintf(env.stderr, "episode %d seed %d: success=%v steps=%d end=%s stop=%s\n", ep, r.Seed, r.Success, r.Steps, r.End, r.StopKind)
	}
	if e.steps == 0 {
		if b, err := engines.LoadBundle(e.bundleDir); err == nil {
			e.steps = b.Manifest.Sampler.Steps
		}
	}
	s := summarize(e.simFlags, results, trips)
	s.MaxSteps = e.maxSteps
	fmt.Fprintln(env.stdout, s.String())
	if e.summary != "" {
		data, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return fail(fmt.Errorf("summary: %w", err))
		}
		if err := os.WriteFile(e.summary, data, 0o644); err != nil {
			return fail(err)
		}
	}
	return exitOK
}

// createScores opens the --scores file (io.Discard for ""), and returns the
// function that closes it.
func createScores(path string) (io.Writer, func() error, error) {
	if path == "" {
		return io.Discard, func() error { return nil }, nil
	}
	fh, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	return fh, fh.Close, nil
}

// episodeConfig is the runtime configuration of episode idx: the scene
// seed and the sampler's noise seed are both --seed + idx, so episodes are
// independent draws and any one can be rerun alone with its seed.
func episodeConfig(root string, e *evalFlags, b *bridge, idx int) (*runtime.Config, error) {
	cfg, err := simConfig(root, &e.simFlags, b, "")
	if err != nil {
		return nil, err
	}
	cfg.Policy.Seed = uint64(e.seed + idx)
	if e.observeOnly {
		cfg.Safety.Energy.Disabled = true
	}
	for _, name := range e.watchScores {
		cfg.Safety.Energy.Scores = append(cfg.Safety.Energy.Scores, safety.ScoreConfig{Name: name})
	}
	if e.record != "" {
		cfg.Recording.Enabled = true
		cfg.Recording.Dir = filepath.Join(e.record, fmt.Sprintf("%s_%d", e.task, e.seed+idx))
		cfg.Recording.MaxSteps = e.maxSteps + 1 // the whole episode in one file
	}
	cfg.Log.Level = "warn"
	if e.verbose {
		cfg.Log.Level = "debug"
	}
	return cfg, nil
}

// inferenceTimes is the episode's runtime.TickObserver: it keeps the
// latency of every inference the loop finishes, as the loop measured it.
type inferenceTimes struct {
	mu sync.Mutex
	ms []float64
}

var _ runtime.TickObserver = (*inferenceTimes)(nil)

func (t *inferenceTimes) ObserveInference(d time.Duration) {
	t.mu.Lock()
	t.ms = append(t.ms, float64(d)/float64(time.Millisecond))
	t.mu.Unlock()
}

func (*inferenceTimes) ObserveTick(time.Duration, time.Duration)   {}
func (*inferenceTimes) TickOverrun()                               {}
func (*inferenceTimes) ObserveEnergy(float64, float64)             {}
func (*inferenceTimes) ObservePlanLateness(float64, float64, bool) {}

func (t *inferenceTimes) values() []float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.ms)
}

// evalEpisode runs one episode: reset the world, build the runtime against
// it, run until success, the step limit, or a safety stop.
func evalEpisode(ctx context.Context, env *cliEnv, root string, e *evalFlags, b *bridge, idx int, scores io.Writer) (evalResult, error) {
	seed := e.seed + idx
	r := evalResult{Episode: idx, Seed: seed, Fault: e.fault}
	if e.fault != "" {
		r.FaultStep = e.faultStep
	}
	if _, err := b.Reset(ctx, e.task, e.level, seed, e.fault, e.faultStep); err != nil {
		return r, err
	}
	cfg, err := episodeConfig(root, e, b, idx)
	if err != nil {
		return r, err
	}
	r.PolicySeed = cfg.Policy.Seed
	policySeed := r.PolicySeed
	ectx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var energies, trace []float64
	var stop safety.Reason
	armed := false      // the gate was Running on some tick: auto-start succeeded
	wasRunning := false // the previous tick's state, for the calibration trace
	enc := json.NewEncoder(scores)
	onTick := func(tk runtime.Tick, d *safety.Decision, sc safety.Scores) {
		mu.Lock()
		defer mu.Unlock()
		if x := sc[safety.ScoreEnergy]; !math.IsNaN(x) {
			energies = append(energies, x)
		}
		x := sc[e.traceScore]
		// The gate counts running ticks, and fresh scores, from the tick after
		// the one that armed it (that tick's score decided the reset, seen
		// while stopped); every running tick gets an entry, NaN without a
		// fresh score.
		if d.State == safety.Running && wasRunning {
			trace = append(trace, x)
		}
		wasRunning = d.State == safety.Running
		line := map[string]any{"episode": idx, "seed": seed, "policy_seed": policySeed, "tick": tk.N, "state": d.State.String(),
			"energy": nanNull(sc[safety.ScoreEnergy]), "centered_energy": nanNull(sc[safety.ScoreCentered])}
		if e.stateTerm {
			line["state_energy"] = nanNull(sc[safety.ScoreStateEnergy])
		}
		_ = enc.Encode(line)
		armed = armed || d.State == safety.Running
		if d.State == safety.Stopped && d.Reason.Kind != safety.KindStartup && stop.Kind == safety.KindNone {
			stop = d.Reason
			cancel()
		}
	}
	infer := &inferenceTimes{ms: make([]float64, 0, e.maxSteps)}
	log := slog.New(episodeEndHandler{newLogger(env, cfg).Handler()})
	app, err := runtime.NewApp(ectx, cfg, runtime.AppOptions{Logger: log, OnTick: onTick, Metrics: infer,
		InferenceDelay: time.Duration(e.delay * float64(time.Second) / e.rate)})
	if err != nil {
		return r, err
	}
	defer app.Close()
	for _, th := range app.Guard().Thresholds() {
		r.watch = append(r.watch, th.Score.String())
	}
	// Watch the episode from the harness side.
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for ectx.Err() == nil {
			time.Sleep(200 * time.Millisecond)
			ep, err := b.Episode(ectx)
			if err != nil {
				continue
			}
			if ep.Success || ep.Done || ep.Step >= e.maxSteps {
				cancel()
			}
		}
	}()
	_ = app.Run(ectx)
	cancel()
	<-watchDone
	st := app.Loop().Stats()
	r.LateSpells, r.LatePlans = st.LateSpells, st.LatePlans
	if lim, _ := app.Loop().PlanLateLimit(); lim > 0 {
		r.lateLimit = &lim
	}
	ep, err := b.Episode(context.WithoutCancel(ctx))
	if err != nil {
		return r, err
	}
	r.Steps, r.Success, r.SuccessStep, r.Return = ep.Step, ep.Success, ep.SuccessStep, ep.Return
	mu.Lock()
	defer mu.Unlock()
	if stop.Kind != safety.KindNone && stop.Kind != safety.KindOperator {
		r.StopKind, r.StopTick = stop.Kind.String(), stop.Tick
		if stop.Kind == safety.KindEnergy {
			r.StopScore = stop.Score.String()
		}
	}
	switch {
	case r.Success:
		r.End = "success"
	case r.StopKind != "":
		r.End = "safety_stop"
	case !armed:
		r.End = "never_armed"
	case ep.Done || ep.Step >= e.maxSteps:
		r.End = "truncated"
	default:
		r.End = "interrupted"
	}
	if m := mean(energies); !math.IsNaN(m) {
		r.MeanScore = &m
	}
	r.inferMs = infer.values()
	r.trace = trace
	r.Inferences = len(r.inferMs)
	r.InferP50 = quantile(r.inferMs, 0.5)
	return r, nil
}

// episodeEndHandler wraps the evaluation's log handler: the safety gate's
// stop at the runtime's shutdown, which is how the harness ends every
// episode on purpose, is logged at info, not as a warning. Trips, and
// operator stops by anyone else, keep their level.
type episodeEndHandler struct{ slog.Handler }

func (h episodeEndHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn && isShutdownStop(r) {
		r.Level = slog.LevelInfo
		if !h.Handler.Enabled(ctx, r.Level) {
			return nil
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h episodeEndHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return episodeEndHandler{h.Handler.WithAttrs(as)}
}

func (h episodeEndHandler) WithGroup(name string) slog.Handler {
	return episodeEndHandler{h.Handler.WithGroup(name)}
}

// isShutdownStop reports whether r is safety.Guard's log of the operator
// stop runtime.Loop latches when Run ends ("safety: stop", reason operator,
// actor runtime, message "... shutdown").
func isShutdownStop(r slog.Record) bool {
	if r.Message != "safety: stop" {
		return false
	}
	var reason, actor, msg string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "reason":
			reason = a.Value.String()
		case "actor":
			actor = a.Value.String()
		case "message":
			msg = a.Value.String()
		}
		return true
	})
	return reason == safety.KindOperator.String() && actor == "runtime" && strings.HasSuffix(msg, "shutdown")
}

func nanNull(v float64) any {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return v
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// quantile is the q-quantile of v (nearest rank, as bench reports); nil
// for no values.
func quantile(v []float64, q float64) *float64 {
	if len(v) == 0 {
		return nil
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	x := s[max(0, min(i, len(s)-1))]
	return &x
}

// evalSummary is the evaluation's result.
type evalSummary struct {
	Task      string  `json:"task"`
	Level     string  `json:"level"`
	Bundle    string  `json:"bundle"`
	RateHz    float64 `json:"rate_hz"` // the control rate (--rate)
	Steps     int     `json:"steps_k"`
	MaxSteps  int     `json:"max_steps"` // the episode step limit (--max-steps)
	Episodes  int     `json:"episodes"`
	Successes int     `json:"successes"`
	Rate      float64 `json:"success_rate"`
	Low       float64 `json:"ci95_low"`
	High      float64 `json:"ci95_high"`
	MeanLen   float64 `json:"mean_length"`
	// Steps to success over the successful episodes only (success_step);
	// nil: no success.
	MeanToSuccess   *float64       `json:"mean_steps_to_success"`
	MedianToSuccess *float64       `json:"median_steps_to_success"`
	InferP50        *float64       `json:"inference_p50_ms"` // over every inference of every episode; nil: none
	InferP90        *float64       `json:"inference_p90_ms"`
	Trips           map[string]int `json:"trips"`
	// PlanLateLimit is the loop's lateness limit in control periods
	// (loop.plan_late_limit, or the calibration's plan p90 + margin; nil:
	// none), InferP90Periods the cell's inference p90 in periods, and
	// LateEpisodes the episodes in which the loop warned that its plans'
	// p90 had passed the limit.
	PlanLateLimit   *float64 `json:"plan_late_limit_periods"`
	InferP90Periods *float64 `json:"inference_p90_periods"`
	LateEpisodes    int      `json:"late_episodes"`
	// Watch is what the energy stop watched, as the gate resolved it:
	// --watch, or without it the bundle's default watch set (state_energy
	// alone with the state term, else its calibration's score). Every
	// episode watches the same; empty: the energy stop was off (a policy
	// without an energy).
	Watch []string `json:"watch,omitempty"`
	// NeverArmed counts episodes in which auto-start was refused on every
	// tick (end never_armed): the arm never moved, which is not a trip.
	NeverArmed int          `json:"never_armed"`
	Results    []evalResult `json:"results"`
}

func (s evalSummary) String() string {
	kinds := make([]string, 0, len(s.Trips))
	for k := range s.Trips {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	trips := ""
	for _, k := range kinds {
		trips += fmt.Sprintf(" %s=%d", k, s.Trips[k])
	}
	if trips == "" {
		trips = " none"
	}
	if s.NeverArmed > 0 {
		trips += fmt.Sprintf(", never armed (auto-start refused all episode): %d", s.NeverArmed)
	}
	toSuccess := "steps to success: no success"
	if s.MeanToSuccess != nil {
		toSuccess = fmt.Sprintf("steps to success mean %.1f median %.0f", *s.MeanToSuccess, *s.MedianToSuccess)
	}
	inference := "inference p50: none"
	if s.InferP50 != nil {
		inference = fmt.Sprintf("inference p50 %.1f ms p90 %.1f ms", *s.InferP50, *s.InferP90)
	}
	if s.InferP90Periods != nil {
		inference += fmt.Sprintf(" (%.2f periods)", *s.InferP90Periods)
	}
	late := ""
	if s.PlanLateLimit != nil {
		late = fmt.Sprintf(", plans late past %.2f periods (p90): %d episodes", *s.PlanLateLimit, s.LateEpisodes)
	}
	return fmt.Sprintf("task %s level %s K=%d: success %d/%d = %.1f%% (95%% CI %.1f–%.1f%%), mean length %.1f steps, %s, %s%s, safety stops:%s",
		s.Task, s.Level, s.Steps, s.Successes, s.Episodes, 100*s.Rate, 100*s.Low, 100*s.High, s.MeanLen, toSuccess, inference, late, trips)
}

func summarize(f simFlags, rs []evalResult, trips map[string]int) evalSummary {
	s := evalSummary{Task: f.task, Level: f.level, Bundle: f.bundle, RateHz: f.rate, Steps: f.steps, Episodes: len(rs), Trips: trips, Results: rs}
	if len(rs) > 0 {
		s.Watch = rs[0].watch
	}
	total := 0
	var toSuccess, inferMs []float64
	for _, r := range rs {
		if r.Success {
			s.Successes++
			if r.SuccessStep != nil {
				toSuccess = append(toSuccess, float64(*r.SuccessStep))
			}
		}
		if r.End == "never_armed" {
			s.NeverArmed++
		}
		total += r.Steps
		inferMs = append(inferMs, r.inferMs...)
		if r.LateSpells > 0 {
			s.LateEpisodes++
		}
		if r.lateLimit != nil {
			s.PlanLateLimit = r.lateLimit
		}
	}
	if len(rs) > 0 {
		s.Rate = float64(s.Successes) / float64(len(rs))
		s.MeanLen = float64(total) / float64(len(rs))
	}
	if len(toSuccess) > 0 {
		m := mean(toSuccess)
		s.MeanToSuccess, s.MedianToSuccess = &m, median(toSuccess)
	}
	s.InferP50, s.InferP90 = quantile(inferMs, 0.5), quantile(inferMs, 0.9)
	if s.InferP90 != nil && f.rate > 0 {
		p := *s.InferP90 / 1000 * f.rate
		s.InferP90Periods = &p
	}
	s.Low, s.High = wilson(s.Successes, len(rs))
	return s
}

// median is the middle value of v (the mean of the middle two for an even
// count); nil for no values.
func median(v []float64) *float64 {
	if len(v) == 0 {
		return nil
	}
	s := slices.Clone(v)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + m) / 2
	}
	return &m
}

// wilson is the 95% Wilson score interval of k successes in n trials.
func wilson(k, n int) (lo, hi float64) {
	if n == 0 {
		return 0, 1
	}
	z := 1.959963984540054
	p := float64(k) / float64(n)
	nn := float64(n)
	den := 1 + z*z/nn
	c := (p + z*z/(2*nn)) / den
	h := z * math.Sqrt(p*(1-p)/nn+z*z/(4*nn*nn)) / den
	return math.Max(0, c-h), math.Min(1, c+h)
}

// prefixWriter prefixes every line written to w.
func prefixWriter(w io.Writer, prefix string) io.Writer {
	return &prefixed{w: w, prefix: prefix, bol: true}
}

type prefixed struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	bol    bool
}

func (p *prefixed) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range b {
		if p.bol {
			if _, err := io.WriteString(p.w, p.prefix); err != nil {
				return 0, err
			}
			p.bol = false
		}
		if _, err := p.w.Write([]byte{c}); err != nil {
			return 0, err
		}
		if c == '\n' {
			p.bol = true
		}
	}
	return len(b), nil
}

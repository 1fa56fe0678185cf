package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/runtime"
	"github.com/energyflow/edge/safety"
)

// Default simulated robot: Meta-World behind the bridge.
const (
	defaultSimTask   = "button-press"
	defaultSimBundle = "bundles/metaworld-button-press" // relative to the repository
	simMapFile       = "examples/maps/metaworld.yaml"
)

func cmdSim(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "record":
			return cmdSimRecord(ctx, env, args[1:])
		case "eval":
			return cmdSimEval(ctx, env, args[1:])
		}
	}
	return cmdSimDemo(ctx, env, args)
}

// simFlags are shared by the demo and the evaluation.
type simFlags struct {
	task, level, bundle, listen, camera string
	robotState                          string // robot.state fields, comma-separated; "": from the bundle
	fault                               string // injected fault (sim eval only): "", push, object or occlusion
	seed, steps, faultStep              int
	rate                                float64
	verbose                             bool
}

func (f *simFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.task, "task", defaultSimTask, "Meta-World task: button-press, drawer-open, assembly, bin-picking, hammer")
	fs.StringVar(&f.level, "level", "0", "out-of-distribution level: 0, S, M or L")
	fs.StringVar(&f.bundle, "bundle", "", "engine bundle (default: the shipped bundle for the task, "+defaultSimBundle+")")
	fs.IntVar(&f.seed, "seed", 0, "episode seed")
	fs.IntVar(&f.steps, "steps", 0, "Euler steps K (0: the bundle's default)")
	fs.Float64Var(&f.rate, "rate", 10, "control rate in Hz")
	fs.StringVar(&f.camera, "camera-size", "96x96", "camera image size WxH rendered by the simulator")
	fs.StringVar(&f.robotState, "robot-state", "", "arm-state fields the policy's state input is built from, comma-separated (default: observation for a 39-wide state input, position,gripper for a 4-wide one)")
	fs.BoolVar(&f.verbose, "v", false, "debug logging")
}

// simConfig is the runtime configuration for the Meta-World bridge: the
// same Config a robot would use, pointed at the bridge's loopback servers.
func simConfig(root string, f *simFlags, b *bridge, listen string) (*runtime.Config, error) {
	c := runtime.DefaultConfig()
	c.Robot.Address = b.Modbus
	c.Robot.Map = filepath.Join(root, simMapFile)
	// The bridge is a Python process sharing the cores with the runtime (and, in
	// the demo, a browser decoding video): give its replies time.
	c.Robot.Timeout = time.Second
	c.Camera.Source = "http"
	c.Camera.URL = b.StreamURL()
	c.Policy.Bundle = resolveBundle(root, f)
	if _, err := os.Stat(c.Policy.Bundle); err != nil {
		return nil, fmt.Errorf("sim: bundle %s not found: train one (docs/evaluation.md) or pass --bundle", c.Policy.Bundle)
	}
	st, err := simRobotState(c.Policy.Bundle, f.robotState)
	if err != nil {
		return nil, err
	}
	c.Robot.State = st
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
	c.Telemetry.Video.Width, c.Telemetry.Video.Height = 480, 480
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
	data, err := os.ReadFile(filepath.Join(bundle, "manifest.json"))
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	m, err := engines.ParseManifest(filepath.Join(bundle, "manifest.json"), data)
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

// startSimBridge finds the checkout and starts the bridge for the flags:
// lockstep for evaluation, real time at --rate for the demo.
func startSimBridge(ctx context.Context, env *cliEnv, f *simFlags, lockstep bool) (string, *bridge, error) {
	root, err := projectRoot()
	if err != nil {
		return "", nil, err
	}
	o := bridgeOptions{root: root, task: f.task, level: f.level, seed: f.seed, mapFile: filepath.Join(root, simMapFile),
		lockstep: lockstep, camera: f.camera, log: prefixWriter(env.stderr, "bridge: ")}
	if !lockstep {
		o.rateHz = f.rate
	}
	b, err := startBridge(ctx, o)
	return root, b, err
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
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, `usage: energyflow sim [flags]          run the simulated robot demo until Ctrl-C
       energyflow sim record [flags]   record scripted demonstrations (HDF5)
       energyflow sim eval [flags]     closed-loop evaluation of a bundle

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
	root, b, err := startSimBridge(ctx, env, &f, false)
	if err != nil {
		fmt.Fprintln(env.stderr, "energyflow sim:", err)
		return exitFailure
	}
	defer b.Close()
	cfg, err := simConfig(root, &f, b, *listen)
	if err != nil {
		fmt.Fprintln(env.stderr, "energyflow sim:", err)
		return exitFailure
	}
	fmt.Fprintf(env.stdout, "simulated robot: Meta-World %s, level %s; Modbus %s, camera http://%s/stream\n", f.task, f.level, b.Modbus, b.HTTP)
	fmt.Fprintf(env.stdout, "change the OOD level live: curl -X POST http://%s/episode/level -d '{\"level\":\"L\"}'\n", b.HTTP)
	// Start a new episode whenever one ends, so the arm keeps working.
	go func() {
		seed := f.seed
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			ep, err := b.Episode(ctx)
			if err == nil && ep.Done {
				seed++
				_, _ = b.Reset(ctx, f.task, ep.Level, seed, "", 0)
			}
		}
	}()
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	if *soakReport == "" {
		return runAppWith(ctx, env, cfg, true, nil)
	}
	soak := newSoakMeter(int(cfg.Loop.RateHz*duration.Seconds()) + 16)
	code := runAppWith(ctx, env, cfg, true, soak.onTick)
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
	Episode   int      `json:"episode"`
	Seed      int      `json:"seed"`
	Success   bool     `json:"success"`
	Steps     int      `json:"steps"`
	Return    float64  `json:"return"`
	StopKind  string   `json:"stop_kind,omitempty"`
	StopTick  int64    `json:"stop_tick,omitempty"`
	Fault     string   `json:"fault,omitempty"`
	FaultStep int      `json:"fault_step,omitempty"`
	InferP50  float64  `json:"inference_p50_ms"`
	MeanScore *float64 `json:"mean_energy,omitempty"` // nil: no energy (a diffusion policy) or no fresh score
}

// cmdSimEval runs the real runtime stack against the bridge per episode.
func cmdSimEval(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("sim eval", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var f simFlags
	f.register(fs)
	episodes := fs.Int("episodes", 10, "number of episodes")
	maxSteps := fs.Int("max-steps", 300, "environment steps per episode before it counts as a failure")
	out := fs.String("scores", "", "write per-tick scores (JSON lines) to this file")
	summary := fs.String("json", "", "write the summary as JSON to this file")
	fs.StringVar(&f.fault, "fault", "", "inject a fault in every episode: push (the arm is shoved 8 cm), object (an unseen object appears in the state) or occlusion (a dark square blocks the middle of the camera image); docs/sim.md")
	fs.IntVar(&f.faultStep, "fault-step", 30, "environment step at which --fault starts")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	root, b, err := startSimBridge(ctx, env, &f, true)
	if err != nil {
		fmt.Fprintln(env.stderr, "energyflow sim eval:", err)
		return exitFailure
	}
	defer b.Close()
	var scoreFile io.Writer = io.Discard
	if *out != "" {
		fh, err := os.Create(*out)
		if err != nil {
			fmt.Fprintln(env.stderr, "energyflow sim eval:", err)
			return exitFailure
		}
		defer fh.Close()
		scoreFile = fh
	}
	var results []evalResult
	trips := map[string]int{}
	for ep := 0; ep < *episodes && ctx.Err() == nil; ep++ {
		seed := f.seed + ep
		r, err := evalEpisode(ctx, env, root, &f, b, ep, seed, *maxSteps, scoreFile)
		if err != nil {
			fmt.Fprintf(env.stderr, "energyflow sim eval: episode %d: %v\n", ep, err)
			return exitFailure
		}
		if r.StopKind != "" {
			trips[r.StopKind]++
		}
		results = append(results, r)
		fmt.Fprintf(env.stderr, "episode %d seed %d: success=%v steps=%d stop=%s\n", ep, seed, r.Success, r.Steps, r.StopKind)
	}
	if f.steps == 0 {
		if b, err := engines.LoadBundle(resolveBundle(root, &f)); err == nil {
			f.steps = b.Manifest.Sampler.Steps
		}
	}
	s := summarize(f, results, trips)
	fmt.Fprintln(env.stdout, s.String())
	if *summary != "" {
		data, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			fmt.Fprintln(env.stderr, "energyflow sim eval: summary:", err)
			return exitFailure
		}
		if err := os.WriteFile(*summary, data, 0o644); err != nil {
			fmt.Fprintln(env.stderr, "energyflow sim eval:", err)
			return exitFailure
		}
	}
	return exitOK
}

// evalEpisode runs one episode: reset the world, build the runtime against
// it, run until success, the step limit, or a safety stop.
func evalEpisode(ctx context.Context, env *cliEnv, root string, f *simFlags, b *bridge, idx, seed, maxSteps int, scores io.Writer) (evalResult, error) {
	r := evalResult{Episode: idx, Seed: seed, Fault: f.fault}
	if f.fault != "" {
		r.FaultStep = f.faultStep
	}
	if _, err := b.Reset(ctx, f.task, f.level, seed, f.fault, f.faultStep); err != nil {
		return r, err
	}
	cfg, err := simConfig(root, f, b, "")
	if err != nil {
		return r, err
	}
	cfg.Log.Level = "warn"
	if f.verbose {
		cfg.Log.Level = "debug"
	}
	ectx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var energies []float64
	var stop safety.Reason
	enc := json.NewEncoder(scores)
	onTick := func(tk runtime.Tick, d *safety.Decision, sc safety.Scores) {
		mu.Lock()
		defer mu.Unlock()
		if !math.IsNaN(sc[safety.ScoreEnergy]) {
			energies = append(energies, sc[safety.ScoreEnergy])
		}
		_ = enc.Encode(map[string]any{"episode": idx, "seed": seed, "tick": tk.N, "state": d.State.String(),
			"energy": nanNull(sc[safety.ScoreEnergy]), "centered_energy": nanNull(sc[safety.ScoreCentered])})
		if d.State == safety.Stopped && d.Reason.Kind != safety.KindStartup && stop.Kind == safety.KindNone {
			stop = d.Reason
			cancel()
		}
	}
	app, err := runtime.NewApp(ectx, cfg, runtime.AppOptions{Logger: newLogger(env, cfg), OnTick: onTick})
	if err != nil {
		return r, err
	}
	defer app.Close()
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
			mu.Lock()
			r.Steps, r.Success, r.Return = ep.Step, ep.Success, ep.Return
			mu.Unlock()
			if ep.Success || ep.Done || ep.Step >= maxSteps {
				cancel()
			}
		}
	}()
	_ = app.Run(ectx)
	cancel()
	<-watchDone
	if ep, err := b.Episode(context.WithoutCancel(ctx)); err == nil {
		r.Steps, r.Success, r.Return = ep.Step, ep.Success, ep.Return
	}
	if stop.Kind != safety.KindNone && stop.Kind != safety.KindOperator {
		r.StopKind, r.StopTick = stop.Kind.String(), stop.Tick
	}
	if m := mean(energies); !math.IsNaN(m) {
		r.MeanScore = &m
	}
	return r, nil
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

// evalSummary is the evaluation's result.
type evalSummary struct {
	Task      string         `json:"task"`
	Level     string         `json:"level"`
	Bundle    string         `json:"bundle"`
	Steps     int            `json:"steps_k"`
	Episodes  int            `json:"episodes"`
	Successes int            `json:"successes"`
	Rate      float64        `json:"success_rate"`
	Low       float64        `json:"ci95_low"`
	High      float64        `json:"ci95_high"`
	MeanLen   float64        `json:"mean_length"`
	Trips     map[string]int `json:"trips"`
	Results   []evalResult   `json:"results"`
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
	return fmt.Sprintf("task %s level %s K=%d: success %d/%d = %.1f%% (95%% CI %.1f–%.1f%%), mean length %.1f steps, safety stops:%s",
		s.Task, s.Level, s.Steps, s.Successes, s.Episodes, 100*s.Rate, 100*s.Low, 100*s.High, s.MeanLen, trips)
}

func summarize(f simFlags, rs []evalResult, trips map[string]int) evalSummary {
	s := evalSummary{Task: f.task, Level: f.level, Bundle: f.bundle, Steps: f.steps, Episodes: len(rs), Trips: trips, Results: rs}
	total := 0
	for _, r := range rs {
		if r.Success {
			s.Successes++
		}
		total += r.Steps
	}
	if len(rs) > 0 {
		s.Rate = float64(s.Successes) / float64(len(rs))
		s.MeanLen = float64(total) / float64(len(rs))
	}
	s.Low, s.High = wilson(s.Successes, len(rs))
	return s
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

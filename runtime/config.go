package runtime

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/energyflow/edge/actuators"
	"github.com/energyflow/edge/camera"
	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/safety"
	"github.com/energyflow/edge/telemetry"
)

// Config is the whole runtime configuration: one YAML file, documented in
// docs/config.md with a commented example from `energyflow config example`.
// Unknown keys are rejected. The running loop works on a frozen copy.
type Config struct {
	Robot  RobotConfig  `yaml:"robot"`
	Camera CameraConfig `yaml:"camera"`
	// CameraWatch is the bundle's watch camera (engines.WatchCameraSpec):
	// a second fixed camera the stop reads and the policy does not.
	CameraWatch WatchCameraConfig `yaml:"camera_watch"`
	Policy      PolicyConfig      `yaml:"policy"`
	Safety      safety.Config     `yaml:"safety"`
	Telemetry   TelemetryConfig   `yaml:"telemetry"`
	Loop        LoopConfig        `yaml:"loop"`
	Recording   RecordingConfig   `yaml:"recording"`
	Log         LogConfig         `yaml:"log"`
	file        string            // where it was loaded from
	lines       map[string]int    // key → line, for later errors
}

// RobotConfig is the arm: the Modbus connection and register map
// (actuators.Config, inline) and how the policy's state observation is
// assembled from the arm's state.
type RobotConfig struct {
	actuators.Config `yaml:",inline"`
	// State lists the arm-state fields concatenated, in order, into the
	// policy's state observation: observation, position, velocity, gripper.
	State []string `yaml:"state"`
}

// CameraConfig is the camera (camera.Config, inline), which can be disabled
// for robots without one when the policy needs no image.
type CameraConfig struct {
	Enabled       bool `yaml:"enabled"`
	camera.Config `yaml:",inline"`
}

// WatchCameraConfig is the bundle's watch camera (camera.Config, inline).
// Enabled is unset by default: a bundle that names a watch camera is then
// refused, so that nobody runs it without the check it was given unawares;
// enabled: false runs it without, with a warning.
type WatchCameraConfig struct {
	Enabled       *bool `yaml:"enabled"`
	camera.Config `yaml:",inline"`
}

// On reports whether the watch camera is on.
func (w WatchCameraConfig) On() bool { return w.Enabled != nil && *w.Enabled }

// Off reports whether it was turned off in so many words (enabled: false).
func (w WatchCameraConfig) Off() bool { return w.Enabled != nil && !*w.Enabled }

// PolicyConfig selects the bundle and how it is executed.
type PolicyConfig struct {
	Bundle  string `yaml:"bundle"`  // bundle directory
	Backend string `yaml:"backend"` // "ort" (default) or "trt"
	Steps   int    `yaml:"steps"`   // K; 0 = the bundle's default
	Seed    uint64 `yaml:"seed"`    // seed of the sampler's noise
	// ONNXRuntimeLib is the path of libonnxruntime.so.1; empty = search
	// ($ONNXRUNTIME_LIB, system paths, the project's install location).
	ONNXRuntimeLib string `yaml:"onnxruntime_lib"`
	Threads        int    `yaml:"threads"` // ONNX Runtime intra-op threads; 0 = default
}

// TelemetryConfig is the live view and metrics server.
type TelemetryConfig struct {
	Enabled          bool `yaml:"enabled"`
	telemetry.Config `yaml:",inline"`
}

// The values of loop.bridge.
const (
	BridgeTail = "tail" // execute the committed prediction's tail while the next plan is late
	BridgeHold = "hold" // hold at zero velocity while the next plan is late
)

// LoopConfig is the control loop.
type LoopConfig struct {
	RateHz float64 `yaml:"rate_hz"` // control rate (default 10)
	// ReplanMargin: a new chunk is requested when at most this many actions
	// of the committed chunk remain (default 2), so inference overlaps
	// execution. The loop raises it to the number of periods the measured
	// inference latency spans (at most T_a−1), so a slow plan does not leave
	// the arm holding.
	ReplanMargin int `yaml:"replan_margin"`
	// ActionHorizon overrides the bundle's T_a (actions executed per chunk); 0 = bundle.
	ActionHorizon int `yaml:"action_horizon"`
	// ScoreWait bounds how long a tick waits for the re-score of the
	// committed chunk before using the previous one (default period/2).
	ScoreWait time.Duration `yaml:"score_wait"`
	// PlanLateLimit: the loop warns (log, systemd status, telemetry) when
	// the p90 of its recent plans' inference latency passes this many
	// control periods, since the energy stop's closed-loop false-trip rate
	// holds only for plans about as late as its calibration's. 0 (default):
	// the calibration's recorded p90 + PlanLateMargin, or no limit when it
	// records none; negative: no limit.
	PlanLateLimit float64 `yaml:"plan_late_limit"`
	// Bridge is what the arm does when the committed window runs out
	// before the next plan lands: "tail" (default) executes the rest of the
	// committed prediction (its actions past T_a, as Diffusion Policy's
	// real-robot loop does) until the plan lands or the prediction ends,
	// then holds; "hold" holds at zero velocity at once. A hold is a stop
	// and a restart the demonstrations never show, which the state term's
	// transition component reads as motion the arm did not make.
	Bridge string `yaml:"bridge"`
	// Chunking is real-time chunking: each plan sampled with the actions
	// the arm executes meanwhile held (engines.Guide).
	Chunking ChunkingConfig `yaml:"realtime_chunking"`
	// Warm is the warm start: each plan after the first starts from the
	// committed prediction instead of pure noise (engines.Warm).
	Warm WarmConfig `yaml:"warm_start"`
	// Late is when plans sample on the bundle's late network, for a bundle
	// that has one (its "late_policy" block).
	Late LatePolicyConfig `yaml:"late_policy"`
	// AutoStart moves READY → RUNNING without an operator start.
	AutoStart bool `yaml:"auto_start"`
	// MaxTicks stops the loop after this many ticks (0 = run until stopped).
	MaxTicks int64 `yaml:"max_ticks"`
}

// ChunkingConfig is loop.realtime_chunking: while the arm executes the
// committed chunk, the next plan is sampled with the actions that run
// during its inference held, so that chunks join without a jump
// (engines.Guide; docs/engines.md, "Real-time chunking").
type ChunkingConfig struct {
	// Mode is "off" (default), "noisy" (the quadratic term on the noisy
	// actions) or "denoised" (on the denoised estimate). A diffusion bundle
	// inpaints in either mode.
	Mode string `yaml:"mode"`
	// Strength is the term's weight against the energy's (engines.Guide):
	// with mode denoised the fraction of the denoised estimate replaced by
	// the held action, in (0, 1]; with mode noisy any finite value above 0
	// (a held action settles at (â + strength·c)/(1 + strength)). Default 1.
	Strength float64 `yaml:"strength"`
	// Soft is how many actions after the held ones get decaying weights:
	// −1 (default) the whole rest of the overlap, as Physical
	// Intelligence's real-time chunking does; 0 none (the held actions
	// alone); N the next N. Past them the plan follows its own
	// observation.
	Soft int `yaml:"soft"`
	// Delay is how many actions of the committed chunk certainly run
	// before a plan lands (weight 1); 0 (default): the periods the
	// measured inference latency spans, at least 1. At most T_a.
	Delay int `yaml:"delay"`
}

// WarmConfig is loop.warm_start: a plan starts from the committed
// prediction, shifted by the periods elapsed since its observation and
// noised to Sigma, and integrates Steps Euler steps from there to γ
// (engines.SampleWarm; docs/engines.md, "Warm starts"). The first plan of
// an episode, and any plan whose predecessor has run out, start cold.
//
// Unset (sigma 0), it is the bundle's sampler.warm_start, the one its
// success and stop were measured with, when the sampler runs the bundle's
// K at the rate it names and real-time chunking is off; otherwise, and for
// a bundle without one, every plan starts cold.
type WarmConfig struct {
	// Sigma is the noise level the committed plan is noised to, within
	// the bundle's schedule (above σ(γ), at most σ_max); 0 (default): the
	// bundle's.
	Sigma float64 `yaml:"sigma"`
	// Steps is the Euler steps from Sigma to γ, 1 to the sampler's K;
	// 0 with Sigma set: half of K, at least 1.
	Steps int `yaml:"steps"`
	// Off starts every plan cold, whatever the bundle sets.
	Off bool `yaml:"off"`
}

// LatePolicyConfig is loop.late_policy: a bundle with a late network (its
// manifest's "late_policy" block: a network trained on chunks that are
// right when they start executing some periods after their observation)
// samples each plan on it while the plans before took FromPeriods control
// periods or more (their smoothed latency, rounded up); below that, and
// for a bundle without one, plans sample on the main network. The energies
// the stop and the live view read are the main network's either way.
type LatePolicyConfig struct {
	// FromPeriods overrides the bundle's late_policy.from_periods (≥ 1);
	// 0 (default): the bundle's.
	FromPeriods int `yaml:"from_periods"`
	// Off samples every plan on the main network, whatever the bundle sets.
	Off bool `yaml:"off"`
}

// RecordingConfig controls episode recording in HDF5.
type RecordingConfig struct {
	Enabled bool   `yaml:"enabled"`
	Dir     string `yaml:"dir"`
	// MaxSteps ends an episode file after this many steps (default 1000).
	MaxSteps int `yaml:"max_steps"`
}

// LogConfig is the process log.
type LogConfig struct {
	Level  string `yaml:"level"`  // debug, info (default), warn, error
	Format string `yaml:"format"` // text (default) or json
}

// DefaultConfig returns the defaults every file is decoded over.
func DefaultConfig() Config {
	return Config{
		Robot:       RobotConfig{Config: actuators.DefaultConfig(), State: []string{"observation"}},
		Camera:      CameraConfig{Enabled: true, Config: camera.DefaultConfig()},
		CameraWatch: WatchCameraConfig{Config: camera.DefaultConfig()},
		Policy:      PolicyConfig{Backend: "ort"},
		Safety:      safety.DefaultConfig(),
		Telemetry:   TelemetryConfig{Enabled: true, Config: telemetry.DefaultConfig()},
		Loop:        LoopConfig{RateHz: 10, ReplanMargin: 2, Bridge: BridgeTail, Chunking: ChunkingConfig{Mode: "off", Strength: 1, Soft: -1}},
		Recording:   RecordingConfig{Dir: "~/.local/share/energyflow/recordings", MaxSteps: 1000},
		Log:         LogConfig{Level: "info", Format: "text"},
	}
}

// LoadConfig reads, decodes (rejecting unknown keys), resolves paths
// (~ expanded, relative to the file's directory) and validates a config
// file. All problems are reported together, each with its key and line.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("runtime: read config: %w", err)
	}
	return ParseConfig(path, data)
}

// ParseConfig is LoadConfig on bytes; file names the source in errors and
// anchors relative paths.
func ParseConfig(file string, data []byte) (*Config, error) {
	c := DefaultConfig()
	if err := decodeStrict(file, data, &c); err != nil {
		return nil, err
	}
	c.file, c.lines = file, keyLines(data)
	if err := c.resolvePaths(filepath.Dir(file)); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *Config) resolvePaths(base string) error {
	var errs []error
	for _, p := range []*string{&c.Robot.Map, &c.Policy.Bundle, &c.Policy.ONNXRuntimeLib, &c.Recording.Dir,
		&c.Telemetry.Auth.TokenFile, &c.Camera.Replay.Dir, &c.Camera.Replay.File} {
		v, err := resolvePath(base, *p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		*p = v
	}
	if c.Robot.Device != "" && c.Robot.Transport == "rtu" {
		v, err := ExpandPath(c.Robot.Device)
		if err != nil {
			errs = append(errs, err)
		}
		c.Robot.Device = v
	}
	return errors.Join(errs...)
}

// Validate checks every section and returns all problems, each located by
// key and line when the config came from a file.
func (c *Config) Validate() error {
	var errs []error
	add := func(section string, err error) {
		errs = append(errs, locate(c.file, section, c.lines, err)...)
	}
	add("robot", c.Robot.Config.Validate())
	for i, s := range c.Robot.State {
		switch s {
		case "observation", "position", "velocity", "gripper":
		default:
			add("robot", fmt.Errorf("state[%d]: unknown arm-state field %q (want observation, position, velocity or gripper)", i, s))
		}
	}
	if len(c.Robot.State) == 0 {
		add("robot", errors.New("state: must list at least one arm-state field"))
	}
	if c.Camera.Enabled {
		add("camera", c.Camera.Config.Validate())
	}
	if c.CameraWatch.On() {
		add("camera_watch", c.CameraWatch.Config.Validate())
	}
	switch {
	case c.Policy.Bundle == "":
		add("policy", errors.New("bundle: required: the directory of an engine bundle"))
	default:
		if st, err := os.Stat(c.Policy.Bundle); err != nil || !st.IsDir() {
			add("policy", fmt.Errorf("bundle: %s is not a directory (export one with 'python -m energyflow export')", c.Policy.Bundle))
		}
	}
	if c.Policy.Backend != "ort" && c.Policy.Backend != "trt" {
		add("policy", fmt.Errorf("backend: %q is not ort or trt", c.Policy.Backend))
	}
	if c.Policy.Steps < 0 || c.Policy.Steps > 1000 {
		add("policy", fmt.Errorf("steps: %d is outside 0..1000", c.Policy.Steps))
	}
	if c.Policy.Threads < 0 {
		add("policy", fmt.Errorf("threads: %d is negative", c.Policy.Threads))
	}
	add("safety", c.Safety.Validate())
	if c.Telemetry.Enabled {
		add("telemetry", c.Telemetry.Config.Validate())
	}
	if !(c.Loop.RateHz > 0 && c.Loop.RateHz <= 1000) {
		add("loop", fmt.Errorf("rate_hz: %v is outside (0, 1000]", c.Loop.RateHz))
	}
	if math.IsNaN(c.Loop.PlanLateLimit) || math.IsInf(c.Loop.PlanLateLimit, 0) {
		add("loop", fmt.Errorf("plan_late_limit: %v is not a number of periods", c.Loop.PlanLateLimit))
	}
	switch lp := c.Loop.Late; {
	case lp.FromPeriods < 0:
		add("loop", fmt.Errorf("late_policy.from_periods: %d: want 0 (the bundle's) or the plan latency in whole periods (≥ 1) from which plans sample on the late network", lp.FromPeriods))
	case lp.Off && lp.FromPeriods > 0:
		add("loop", fmt.Errorf("late_policy: off with from_periods %d: set one or the other", lp.FromPeriods))
	}
	if c.Loop.Bridge != BridgeTail && c.Loop.Bridge != BridgeHold {
		add("loop", fmt.Errorf("bridge: %q: want %q or %q", c.Loop.Bridge, BridgeTail, BridgeHold))
	}
	if m, err := engines.ParseGuideMode(c.Loop.Chunking.Mode); err != nil {
		add("loop", fmt.Errorf("realtime_chunking.mode: %q: want off, noisy or denoised", c.Loop.Chunking.Mode))
	} else if err := engines.CheckStrength(m, c.Loop.Chunking.Strength); err != nil {
		add("loop", fmt.Errorf("realtime_chunking.%w", err))
	}
	if c.Loop.Chunking.Soft < -1 {
		add("loop", fmt.Errorf("realtime_chunking.soft: %d: want -1 (the whole overlap), 0 or more", c.Loop.Chunking.Soft))
	}
	if c.Loop.Chunking.Delay < 0 {
		add("loop", fmt.Errorf("realtime_chunking.delay: %d is negative", c.Loop.Chunking.Delay))
	}
	if w := c.Loop.Warm; !(w.Sigma >= 0 && !math.IsInf(w.Sigma, 0)) || w.Steps < 0 {
		add("loop", fmt.Errorf("warm_start: sigma %v, steps %d: want sigma 0 (the bundle's) or a noise level of the bundle's schedule, steps 0 (half of K) or more", w.Sigma, w.Steps))
	} else if w.Off && (w.Sigma > 0 || w.Steps > 0) {
		add("loop", fmt.Errorf("warm_start: off with sigma %v, steps %d: set one (off: every plan cold)", w.Sigma, w.Steps))
	} else if w.Sigma > 0 && c.Loop.Chunking.Mode != "" && c.Loop.Chunking.Mode != "off" {
		add("loop", fmt.Errorf("warm_start and realtime_chunking (mode %s) are both on: use one (a warm start already begins at the committed plan)", c.Loop.Chunking.Mode))
	}
	if c.Loop.ReplanMargin < 0 {
		add("loop", fmt.Errorf("replan_margin: %d is negative", c.Loop.ReplanMargin))
	}
	if c.Loop.ActionHorizon < 0 {
		add("loop", fmt.Errorf("action_horizon: %d is negative", c.Loop.ActionHorizon))
	}
	if c.Loop.ScoreWait < 0 {
		add("loop", fmt.Errorf("score_wait: %v is negative", c.Loop.ScoreWait))
	}
	if c.Recording.Enabled && c.Recording.Dir == "" {
		add("recording", errors.New("dir: required when recording is enabled"))
	}
	if c.Recording.MaxSteps <= 0 {
		add("recording", fmt.Errorf("max_steps: %d must be positive", c.Recording.MaxSteps))
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		add("log", fmt.Errorf("level: %q is not debug, info, warn or error", c.Log.Level))
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		add("log", fmt.Errorf("format: %q is not text or json", c.Log.Format))
	}
	return errors.Join(errs...)
}

// Period returns the control period.
func (c *Config) Period() time.Duration { return time.Duration(float64(time.Second) / c.Loop.RateHz) }

package harness

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	"github.com/energyflow/edge/runtime"
	"github.com/energyflow/edge/safety"
)

// The live view's size in the simulator; the bridge renders its display
// view at this size.
const ViewWidth, ViewHeight = 480, 480

// RuntimeConfig is the runtime configuration for the Meta-World bridge b:
// the same Config a robot would use, pointed at the bridge's loopback
// servers, with the live view on listen ("": none). root is the
// repository; the flags must have been prepared.
func (f *Flags) RuntimeConfig(root string, b *Bridge, listen string) (*runtime.Config, error) {
	c := runtime.DefaultConfig()
	c.Robot.Address = b.Modbus
	c.Robot.Map = filepath.Join(root, MapFile)
	// The bridge is a Python process sharing the cores with the runtime (and, in
	// the demo, a browser decoding video): give its replies time.
	c.Robot.Timeout = time.Second
	c.Camera.Source = "http"
	c.Camera.URL = b.StreamURL()
	c.Camera.Name = f.CameraName // the camera the bridge renders (StartBridge)
	on := f.WatchCamera != ""
	c.CameraWatch.Enabled = &on // off: the bundle has none, or --watch-camera off
	if on {
		if b.Watch == "" {
			return nil, fmt.Errorf("sim: the bundle's watch camera %q, but the bridge serves none (started without it)", f.WatchCamera)
		}
		c.CameraWatch.Source = "http"
		c.CameraWatch.URL = b.Watch
		c.CameraWatch.Name = f.WatchCamera
	}
	c.Policy.Bundle = f.BundleDir
	c.Robot.State = f.State
	c.Policy.Steps = f.Steps
	c.Policy.Threads = 1 // sampler and scorer run side by side with the bridge on 2 cores
	c.Policy.Seed = uint64(f.Seed)
	c.Loop.RateHz = f.Rate
	if f.Chunking != "" {
		c.Loop.Chunking.Mode = f.Chunking
	}
	if f.ChunkingSoft != 0 || f.Chunking != "" {
		c.Loop.Chunking.Soft = f.ChunkingSoft
	}
	if f.ChunkingStrength != 0 {
		c.Loop.Chunking.Strength = f.ChunkingStrength
	}
	c.Loop.Warm = runtime.WarmConfig{Sigma: f.WarmSigma, Steps: f.WarmSteps, Off: f.Cold}
	c.Loop.Late = runtime.LatePolicyConfig{Off: f.LateOff}
	c.Loop.AutoStart = true
	c.Safety.Limits.MaxVelocity = []float64{1, 1, 1}
	c.Safety.Limits.MaxDelta = []float64{2, 2, 2}
	c.Safety.Watchdog.CameraMaxAge = 2 * time.Second
	// A frozen camera (sim eval --fault freeze): the hand moving
	// --camera-frozen-motion without a changed frame, once none has changed
	// for 300 ms (the bridge renders each step's frame after the
	// step, on a loaded machine up to a few periods late).
	c.Safety.Watchdog.CameraFrozenMotion = f.FrozenMotion
	c.Safety.Watchdog.CameraFrozenWait = 300 * time.Millisecond
	// A knocked camera (sim eval --fault camera_shift): most of the view's
	// steady tiles changing at once.
	c.Safety.Watchdog.CameraMoved = f.CameraMoved
	// Something new in view (sim eval --fault object, drawn into the
	// camera's frames): colours no demonstration showed.
	if f.Palette || f.WatchCamera != "" || f.given["camera-unseen"] {
		c.Safety.Watchdog.CameraUnseen = f.CameraUnseen // given for a bundle without a palette: the runtime says it watches nothing
	}
	c.Safety.Watchdog.ArmMaxAge = 2 * time.Second
	c.Safety.Watchdog.ScoreMaxAge = time.Duration(float64(time.Second) * 3 / f.Rate)
	c.Safety.Watchdog.InferenceDeadline = 2 * time.Second
	// The simulated world advances one step per command, so a late tick
	// costs no physical motion here; three periods of slack keep a loaded
	// development machine from tripping. On a robot keep the strict default.
	c.Safety.Watchdog.LoopMaxLate = time.Duration(3 * float64(time.Second) / f.Rate)
	c.Safety.Tracking = MetaWorldTracking(f.Task, c.Period())
	c.Telemetry.Enabled = listen != ""
	c.Telemetry.Listen = listen
	c.Telemetry.ICE.Mode = "loopback"
	c.Telemetry.Auth.TokenFile = filepath.Join(root, "build", "sim-tokens.yaml")
	c.Telemetry.Video.Width, c.Telemetry.Video.Height = ViewWidth, ViewHeight
	// The live view shows the bridge's display-size render, not the
	// policy's camera image scaled up.
	c.Telemetry.Video.URL = b.View
	c.Log.Level = "info"
	if f.Verbose {
		c.Log.Level = "debug"
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// The Meta-World arm as the tracking monitor models it (sim/world.py and
// Meta-World's SawyerXYZEnv.set_xyz_action): a command moves the hand's
// mocap target by action·0.01 m, clipped to the task's mocap box
// (hand_low, hand_high), and the hand follows the target through the mocap
// weld with a lag of about four steps.
const (
	metaWorldActionScale = 0.01 // m per unit of action per step
	metaWorldLagSteps    = 4    // the first-order time constant that fits the hand's lag, in steps
	metaWorldWindowSteps = 1    // steps the measured displacement is compared over
	// The sustained rule: 6 mm a step of unexplained motion is allowed
	// (level-0 driving's largest one-step differences are 2–8 mm, single
	// steps at contact), and 1.5 cm summed beyond it stops the arm. An
	// 8 cm push, which the weld follows at 7–16 mm a step, sums past it in
	// about five steps; an hour of level-0 ButtonPress driving reached 5 mm,
	// a BinPicking grasp that slipped 12 mm (docs/safety.md, "Sustained").
	metaWorldDriftPerStep = 0.006 // m
	metaWorldSustained    = 0.015 // m
)

// metaWorldBox is the mocap box of each task (Meta-World v3's hand_low and
// hand_high): every task's is x ∈ [−0.5, 0.5], y ∈ [0.40, 1], z ∈ [0.05, 0.5]
// but bin-picking's, whose floor is z 0.07.
func metaWorldBox(task string) (lower, upper []float64) {
	lower, upper = []float64{-0.5, 0.40, 0.05}, []float64{0.5, 1, 0.5}
	if task == "bin-picking" {
		lower[2] = 0.07
	}
	return lower, upper
}

// MetaWorldTracking is the tracking monitor's configuration for the
// Meta-World arm behind the bridge, running task at one command per period
// (docs/safety.md, "Tracking"): per tick, as the bridge steps the world once
// per command (lockstep: inside the write; real time: at the loop's rate, on
// the newest command), 1 cm per unit of action, the task's mocap box, a
// response of four steps, a window of one step and the default tolerance
// (2 cm, measured over level-0 driving of ButtonPress, DrawerOpen and
// Assembly), and the sustained rule at 1.5 cm beyond 6 mm a step.
func MetaWorldTracking(task string, period time.Duration) safety.TrackingConfig {
	t := safety.DefaultTracking()
	t.Enabled = true
	t.Per = safety.TrackingPerTick
	t.Scale = []float64{metaWorldActionScale, metaWorldActionScale, metaWorldActionScale}
	t.Response = metaWorldLagSteps * period
	t.Window = metaWorldWindowSteps * period
	t.Lower, t.Upper = metaWorldBox(task)
	t.Sustained = metaWorldSustained
	t.Drift = metaWorldDriftPerStep / period.Seconds()
	return t
}

// StartBridge starts the bridge for the flags: lockstep (evaluation, and
// the demo by default; episodes truncated at maxSteps, 0: Meta-World's 500),
// or real time on the bridge's own --rate clock (the demo's --realtime).
// view adds the bridge's display view at /view for the live view (demo
// only). The bridge's log lines go to log, each prefixed "bridge: ".
func (f *Flags) StartBridge(ctx context.Context, root string, log io.Writer, lockstep bool, maxSteps int, view bool) (*Bridge, error) {
	o := BridgeOptions{Root: root, Task: f.Task, Level: f.Level, Seed: f.Seed, MapFile: filepath.Join(root, MapFile),
		Lockstep: lockstep, MaxSteps: maxSteps, Camera: f.Camera, CamName: f.CameraName, Watch: f.WatchCamera, Log: prefixWriter(log, "bridge: ")}
	if view {
		o.View = fmt.Sprintf("%dx%d", ViewWidth, ViewHeight)
	}
	if !lockstep {
		o.RateHz = f.Rate
	}
	return StartBridge(ctx, o)
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

package eval

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/energyflow/edge/actuators"
	"github.com/energyflow/edge/actuators/simarm"
	"github.com/energyflow/edge/runtime"
	"github.com/energyflow/edge/safety"
	"github.com/energyflow/edge/sim/harness"
	"github.com/energyflow/edge/sim/harness/harnesstest"
)

// fakeWorld is the episode API of a world the test runs itself: the
// episode is done once done is set.
type fakeWorld struct{ done atomic.Bool }

func (w *fakeWorld) Episode(context.Context) (harness.Episode, error) {
	return harness.Episode{Task: "simarm", Level: "0", Step: 7, Done: w.done.Load()}, nil
}

// onRunning is the per-tick scores file of an episode: it calls f once, on
// the first line of a RUNNING tick (the gate armed).
type onRunning struct {
	mu   sync.Mutex
	once sync.Once
	f    func()
	buf  bytes.Buffer
}

func (w *onRunning) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if bytes.Contains(p, []byte(`"state":"RUNNING"`)) {
		w.once.Do(w.f)
	}
	return w.buf.Write(p)
}

// The end of an episode reaches the harness as a typed event from the
// runtime (runtime.AppOptions.OnStop), not through its logs: against the
// Go simulated arm, without the bridge, an arm fault injected once the
// gate has armed ends the episode as a safety stop of kind arm_fault, at
// the tick the runtime reported; a world whose episode is done ends it
// without a stop, and the runtime's own stop at the end is expected: no
// warning in the log.
func TestTypedStopEndsTheEpisode(t *testing.T) {
	root, m := simarmMap(t)
	for _, tc := range []struct {
		name string
		end  func(arm *simarm.Arm, w *fakeWorld) // once the gate is armed
		want string                              // Result.End
		kind safety.Kind                         // the typed stop's kind
	}{
		{"arm fault", func(arm *simarm.Arm, _ *fakeWorld) { arm.SetFault(1) }, "safety_stop", safety.KindArmFault},
		{"the world's episode is done", func(_ *simarm.Arm, w *fakeWorld) { w.done.Store(true) }, "truncated", safety.KindNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			arm, cfg := startSimarm(t, root, m)
			w := &fakeWorld{}
			start := time.Now()
			r, log := driveSimarm(t, cfg, w, &onRunning{f: func() { tc.end(arm, w) }})
			st := r.Stop()
			t.Logf("ended %s after %v: stop %+v", r.End, time.Since(start).Round(time.Millisecond), st)
			if r.End != tc.want || st.Kind != tc.kind {
				t.Fatalf("end %q, typed stop %v; want %q, %v\nlog:\n%s", r.End, st.Kind, tc.want, tc.kind, log.String())
			}
			if tc.kind != safety.KindNone {
				if r.StopKind != tc.kind.String() || r.StopTick != st.Tick || st.Tick <= 0 || st.Message == "" {
					t.Errorf("result stop %q at tick %d, typed %+v", r.StopKind, r.StopTick, st)
				}
			} else if r.StopKind != "" {
				t.Errorf("result stop %q without a stop", r.StopKind)
			}
			for _, line := range strings.Split(log.String(), "\n") {
				if strings.Contains(line, "level=WARN") && strings.Contains(line, "by runtime: shutdown") {
					t.Errorf("the episode's end logged as a warning: %s", line)
				}
			}
		})
	}
}

// simarmMap skips in -short mode (these tests run the runtime on ONNX
// Runtime) and returns the repository and the simulated arm's register map.
func simarmMap(t *testing.T) (string, *actuators.Map) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the runtime on ONNX Runtime against the simulated arm")
	}
	root := harnesstest.ModuleRoot(t)
	m, err := actuators.LoadMap(filepath.Join(root, "examples", "maps", "simarm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return root, m
}

// startSimarm starts a Go simulated arm (closed when the test ends) and
// returns it with the runtime configuration that drives it (simarmConfig).
func startSimarm(t *testing.T, root string, m *actuators.Map) (*simarm.Arm, *runtime.Config) {
	t.Helper()
	arm, err := simarm.New(simarm.Config{Map: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { arm.Close() })
	return arm, simarmConfig(t, root, arm.Addr())
}

// driveSimarm drives one episode of cfg against the world w, within two
// minutes, and returns its result and the runtime's log.
func driveSimarm(t *testing.T, cfg *runtime.Config, w *fakeWorld, scores *onRunning) (Result, *bytes.Buffer) {
	t.Helper()
	o := &Options{Flags: harness.Flags{Rate: cfg.Loop.RateHz}, MaxSteps: 500}
	var log bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := o.drive(ctx, harness.Output{Stdout: &log, Stderr: &log}, cfg, w, Result{Episode: 0, Seed: 1}, scores)
	if err != nil {
		t.Fatal(err)
	}
	return r, &log
}

// simarmConfig is a runtime configuration for the runtime's test bundle
// (runtime/testdata) on the Go simulated arm at addr, with a replayed
// camera, the energy stop watching a threshold it never reaches.
func simarmConfig(t *testing.T, root, addr string) *runtime.Config {
	t.Helper()
	c := runtime.DefaultConfig()
	c.Robot.Address = addr
	c.Robot.Map = filepath.Join(root, "examples", "maps", "simarm.yaml")
	c.Robot.Timeout = 200 * time.Millisecond
	c.Robot.State = []string{"position", "velocity", "gripper"}
	c.Camera.Source = "replay"
	c.Camera.Replay.Dir = filepath.Join(root, "camera", "testdata", "frames")
	c.Camera.Replay.Rate = 15
	c.Camera.Replay.Loop = true
	c.Policy.Bundle = filepath.Join(root, "runtime", "testdata", "simarm-bundle")
	c.Policy.Threads = 1
	c.Loop.RateHz = 10
	c.Loop.AutoStart = true
	c.Safety.Limits.MaxVelocity = []float64{1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5}
	c.Safety.Limits.SoftLower = []float64{-2, -2, -2, -2, -2, -2, -2}
	c.Safety.Limits.SoftUpper = []float64{2, 2, 2, 2, 2, 2, 2}
	c.Safety.Limits.KPosition = []float64{2, 2, 2, 2, 2, 2, 2}
	huge := 1e9
	c.Safety.Energy.Scores = []safety.ScoreConfig{{Name: "energy", Threshold: &huge}}
	c.Safety.Watchdog.ScoreMaxAge = 2 * time.Second
	c.Safety.Watchdog.InferenceDeadline = 5 * time.Second
	c.Safety.Watchdog.CameraMaxAge = 3 * time.Second
	c.Safety.Watchdog.ArmMaxAge = 500 * time.Millisecond
	c.Safety.Watchdog.LoopMaxLate = time.Second
	c.Telemetry.Enabled = false
	c.Log.Level = "warn"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return &c
}

package runtime

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/energyflow/edge/actuators"
	"github.com/energyflow/edge/actuators/simarm"
	"github.com/energyflow/edge/safety"
)

// repoRoot finds the module root (for examples/ and testdata).
func repoRoot(t testing.TB) string {
	t.Helper()
	d, _ := os.Getwd()
	for ; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
	}
	t.Fatal("no go.mod above the test")
	return ""
}

// testBundle is a small EnergyFlow bundle for the simulated 7-DoF arm
// (state = position 7 + velocity 7 + gripper 1, actions = 7 velocities +
// gripper), exported by the training toolkit: runtime/testdata/README.md.
func testBundle(t testing.TB) string {
	p := filepath.Join(repoRoot(t), "runtime", "testdata", "simarm-bundle")
	if _, err := os.Stat(filepath.Join(p, "manifest.json")); err != nil {
		t.Fatalf("test bundle missing: %v (regenerate with runtime/testdata/make-bundle.sh)", err)
	}
	return p
}

// stack is the whole runtime against the Go simulated arm over Modbus TCP:
// real ONNX Runtime, real safety gate, real telemetry server.
type stack struct {
	arm    *simarm.Arm
	app    *App
	cfg    *Config
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	mu     sync.Mutex
	ticks  []Tick
	decs   []safety.State
	scores []safety.Scores // what the gate saw each tick
}

const viewToken, resetToken = "view-token-for-tests", "reset-token-for-tests"

func startStack(t *testing.T, rateHz float64, edit func(*Config)) *stack {
	t.Helper()
	root := repoRoot(t)
	m, err := actuators.LoadMap(filepath.Join(root, "examples", "maps", "simarm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	arm, err := simarm.New(simarm.Config{Map: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { arm.Close() })

	c := DefaultConfig()
	c.Robot.Address = arm.Addr()
	c.Robot.Map = filepath.Join(root, "examples", "maps", "simarm.yaml")
	c.Robot.Timeout = 200 * time.Millisecond
	c.Robot.State = []string{"position", "velocity", "gripper"}
	c.Camera.Source = "replay"
	c.Camera.Replay.Dir = filepath.Join(root, "camera", "testdata", "frames")
	c.Camera.Replay.Rate = 15
	c.Camera.Replay.Loop = true
	c.Policy.Bundle = testBundle(t)
	c.Policy.Threads = 1 // sampler and scorer run concurrently on 2 cores
	c.Loop.RateHz = rateHz
	c.Loop.AutoStart = true
	c.Safety.Limits.MaxVelocity = []float64{1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5}
	// The test bundle is untrained: soft limits keep its random motion off
	// the simulator's hard joint limits (±3.1 rad, a controller fault).
	c.Safety.Limits.SoftLower = []float64{-2, -2, -2, -2, -2, -2, -2}
	c.Safety.Limits.SoftUpper = []float64{2, 2, 2, 2, 2, 2, 2}
	c.Safety.Limits.KPosition = []float64{2, 2, 2, 2, 2, 2, 2}
	huge := 1e9
	c.Safety.Energy.Scores = []safety.ScoreConfig{{Name: "energy", Threshold: &huge}}
	// Generous bounds: CI runs this under -race on 2 shared cores.
	c.Safety.Watchdog.ScoreMaxAge = 2 * time.Second
	c.Safety.Watchdog.InferenceDeadline = 5 * time.Second
	c.Safety.Watchdog.CameraMaxAge = 3 * time.Second
	c.Safety.Watchdog.ArmMaxAge = 500 * time.Millisecond
	c.Safety.Watchdog.LoopMaxLate = time.Second
	c.Telemetry.Listen = "127.0.0.1:0"
	c.Telemetry.ICE.Mode = "loopback"
	c.Telemetry.Auth.ViewToken, c.Telemetry.Auth.ResetToken = viewToken, resetToken
	c.Telemetry.Auth.TokenFile = ""
	c.Log.Level = "warn"
	if edit != nil {
		edit(&c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	s := &stack{arm: arm, cfg: &c, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	var logger *slog.Logger
	if os.Getenv("E2E_DEBUG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	app, err := NewApp(ctx, &c, AppOptions{Logger: logger, Announce: io.Discard, OnTick: func(tk Tick, d *safety.Decision, sc safety.Scores) {
		s.mu.Lock()
		s.ticks = append(s.ticks, tk)
		s.decs = append(s.decs, d.State)
		s.scores = append(s.scores, sc)
		s.mu.Unlock()
	}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s.app = app
	go func() { s.done <- app.Run(ctx) }()
	t.Cleanup(func() { s.stop(t); app.Close() })
	return s
}

func (s *stack) stop(t *testing.T) {
	s.once.Do(func() {
		s.cancel()
		select {
		case <-s.done:
		case <-time.After(15 * time.Second):
			t.Error("runtime did not stop within 15 s")
		}
	})
}

func (s *stack) waitState(t *testing.T, want State, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		st, reason := s.app.Loop().Machine().State()
		if st == want {
			return reason
		}
		time.Sleep(20 * time.Millisecond)
	}
	st, reason := s.app.Loop().Machine().State()
	t.Fatalf("state %s (%s), want %s within %v", st, reason, want, within)
	return ""
}

// waitStateUntil polls for state want until deadline and says whether it came.
func (s *stack) waitStateUntil(want State, deadline time.Time) bool {
	for {
		if st, _ := s.app.Loop().Machine().State(); st == want {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// armWhenBack resets the loop like an operator who waits for a restarted
// arm: every refusal (the link not yet back, or its first states or scores
// after the reconnect not in yet, slow under emulation) is retried until the
// deadline, and the last refusal is returned.
func (s *stack) armWhenBack(within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		err := s.app.Loop().Arm(context.Background(), "test")
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (s *stack) post(t *testing.T, path, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, strings.TrimSuffix(s.app.ViewerURL(), "/")+path, strings.NewReader(`{"reason":"test"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (s *stack) get(t *testing.T, path string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, strings.TrimSuffix(s.app.ViewerURL(), "/")+path, nil)
	req.Header.Set("Authorization", "Bearer "+viewToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}

// requireHalted checks that the simulated arm is at zero commanded velocity
// with enable dropped.
func requireHalted(t *testing.T, arm *simarm.Arm, when string) {
	t.Helper()
	snap := arm.Snapshot()
	for i, v := range snap.CommandVelocity {
		if v != 0 {
			t.Fatalf("%s: joint %d still commanded at %v", when, i, v)
		}
	}
	if snap.Enabled {
		t.Fatalf("%s: arm still enabled", when)
	}
}

// TestEndToEnd runs the whole stack for more than 20 s: ticks on time,
// commands reach the arm, energy is published, STOP from the API latches,
// a killed Modbus server stops the loop and recovery needs a reset.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test (25 s)")
	}
	s := startStack(t, 5, nil)
	start := time.Now()
	s.waitState(t, StateRunning, 60*time.Second)

	// 1. Running: commands flow, energy is published.
	time.Sleep(6 * time.Second)
	snap := s.arm.Snapshot()
	if !snap.Enabled || snap.Commands < 20 {
		st, reason := s.app.Loop().Machine().State()
		t.Fatalf("arm not driven: enabled=%v commands=%d; state %s (%s); stats %+v", snap.Enabled, snap.Commands, st, reason, s.app.Loop().Stats())
	}
	moving := false
	for _, c := range s.arm.Commands() {
		for _, v := range c.Velocity {
			if v != 0 {
				moving = true
			}
		}
	}
	if !moving {
		t.Fatal("the policy never commanded a non-zero velocity")
	}
	metrics := s.get(t, "/metrics")
	for _, name := range []string{"energyflow_energy_score", "energyflow_plan_late_p90_periods", "energyflow_plans_late"} {
		if !strings.Contains(metrics, name) {
			t.Fatalf("no %s published:\n%.2000s", name, metrics)
		}
	}
	st := s.app.Loop().Stats()
	if st.Chunks < 2 || st.Replans < 2 {
		t.Fatalf("policy not replanning: %+v", st)
	}

	// 2. STOP from the API latches; RESET needs the reset permission.
	if code, body := s.post(t, "/api/stop", viewToken); code != 200 {
		t.Fatalf("stop: %d %s", code, body)
	}
	s.waitState(t, StateStopped, 5*time.Second)
	time.Sleep(time.Second)
	requireHalted(t, s.arm, "after STOP")
	if st, _ := s.app.Loop().Machine().State(); st != StateStopped {
		t.Fatalf("stop did not latch: %s", st)
	}
	if code, _ := s.post(t, "/api/reset", viewToken); code != http.StatusForbidden && code != http.StatusUnauthorized {
		t.Fatalf("reset with the view token answered %d, want 403", code)
	}
	// Pressed once: a reset between two re-scores waits for the next one.
	if code, body := s.post(t, "/api/reset", resetToken); code != 200 {
		t.Fatalf("reset: %d %s", code, body)
	}
	s.waitState(t, StateRunning, 10*time.Second)

	// 3. A killed Modbus server stops the loop; reset is refused until it is back.
	time.Sleep(2 * time.Second)
	if err := s.arm.Kill(); err != nil {
		t.Fatal(err)
	}
	reason := s.waitState(t, StateStopped, 5*time.Second)
	if !strings.Contains(reason, "arm") {
		t.Fatalf("stop reason %q does not name the arm", reason)
	}
	if err := s.app.Loop().Arm(context.Background(), "test"); err == nil {
		t.Fatal("reset accepted while the arm is down")
	}
	if err := s.arm.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := s.armWhenBack(30 * time.Second); err != nil {
		t.Fatalf("reset refused after the arm came back: %v", err)
	}
	s.waitState(t, StateRunning, 5*time.Second)
	if d := time.Since(start); d < 20*time.Second {
		time.Sleep(20*time.Second - d)
	}

	// 4. Ticks were on time: no skipped deadlines in the RUNNING stretches.
	s.mu.Lock()
	n, missed := len(s.ticks), int64(0)
	for _, tk := range s.ticks {
		missed += tk.Missed
	}
	s.mu.Unlock()
	if want := int(20 * 5 * 0.8); n < want {
		t.Fatalf("%d ticks in >20 s at 5 Hz, want ≥ %d", n, want)
	}
	t.Logf("%d ticks, %d missed deadlines, stats %+v", n, missed, s.app.Loop().Stats())

	// 5. Shutdown leaves the arm halted.
	s.stop(t)
	requireHalted(t, s.arm, "after shutdown")
}

// simArmConfig starts a simulated arm on examples/maps/simarm.yaml (closed
// when the test ends) and returns a config pointed at it, with the camera
// and the live view off.
func simArmConfig(t *testing.T) Config {
	t.Helper()
	mapFile := filepath.Join(repoRoot(t), "examples", "maps", "simarm.yaml")
	m, err := actuators.LoadMap(mapFile)
	if err != nil {
		t.Fatal(err)
	}
	arm, err := simarm.New(simarm.Config{Map: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { arm.Close() })
	c := DefaultConfig()
	c.Robot.Address = arm.Addr()
	c.Robot.Map = mapFile
	c.Camera.Enabled = false
	c.Telemetry.Enabled = false
	return c
}

// TestLoopRefusesMismatchedBundle checks the start-up validation.
func TestLoopRefusesMismatchedBundle(t *testing.T) {
	c := simArmConfig(t)
	c.Robot.State = []string{"position"} // 7 values; the bundle wants 15
	c.Policy.Bundle = testBundle(t)
	c.Safety.Limits.MaxVelocity = make([]float64, 7)
	for i := range c.Safety.Limits.MaxVelocity {
		c.Safety.Limits.MaxVelocity[i] = 1
	}
	huge := 1e9
	c.Safety.Energy.Scores = []safety.ScoreConfig{{Name: "energy", Threshold: &huge}}
	_, err := NewApp(context.Background(), &c, AppOptions{})
	if err == nil || !strings.Contains(err.Error(), "robot.state") {
		t.Fatalf("err = %v, want a robot.state mismatch", err)
	}
	fmt.Fprintln(io.Discard, err)
}

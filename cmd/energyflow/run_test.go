package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/energyflow/edge/actuators"
	"github.com/energyflow/edge/actuators/simarm"
)

func moduleRoot(t *testing.T) string {
	t.Helper()
	d, _ := os.Getwd()
	for ; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
	}
	t.Fatal("no go.mod")
	return ""
}

// TestSIGTERMHaltsTheArm runs the real binary against the simulated arm and
// checks that SIGTERM leaves the arm at zero velocity with enable dropped
// before the process exits 0.
func TestSIGTERMHaltsTheArm(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	root := moduleRoot(t)
	bin := filepath.Join(t.TempDir(), "energyflow")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	m, err := actuators.LoadMap(filepath.Join(root, "examples", "maps", "simarm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	arm, err := simarm.New(simarm.Config{Map: m})
	if err != nil {
		t.Fatal(err)
	}
	defer arm.Close()
	cfg := fmt.Sprintf(`robot:
  address: %s
  map: %s
  state: [position, velocity, gripper]
camera:
  enabled: false
policy:
  bundle: %s
safety:
  energy:
    scores: [{name: energy, threshold: 1.0e9}]
  limits:
    max_velocity: [1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5]
  watchdog:
    score_max_age: 2s
    inference_deadline: 5s
    camera_max_age: 0s
    arm_max_age: 1s
    loop_max_late: 1s
telemetry:
  enabled: false
loop:
  rate_hz: 20
  auto_start: true
log:
  level: info
`, arm.Addr(), filepath.Join(root, "examples", "maps", "simarm.yaml"), filepath.Join(root, "runtime", "testdata", "simarm-bundle"))
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "run", "--config", cfgPath)
	cmd.Stderr = &stderr
	cmd.Env = append(os.Environ(), "ENERGYFLOW_ROOT="+root)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	// Wait until the policy drives the arm.
	deadline := time.Now().Add(60 * time.Second)
	for {
		s := arm.Snapshot()
		if s.Enabled && s.Commands > 20 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("energyflow exited early: %v\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("arm never driven (snapshot %+v)\n%s", arm.Snapshot(), stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("no exit within 15 s of SIGTERM\n%s", stderr.String())
	}
	// The last write on the wire must be the runtime's own halt (the
	// simulator's heartbeat-lapse stop writes no command record).
	last, ok := arm.LastCommand()
	if !ok || last.Enable {
		t.Fatalf("last command written %+v: not a halt (enable still set)\n%s", last, stderr.String())
	}
	for i, v := range last.Velocity {
		if v != 0 {
			t.Fatalf("last command written has joint %d at %v\n%s", i, v, stderr.String())
		}
	}
	s := arm.Snapshot()
	for i, v := range s.CommandVelocity {
		if v != 0 {
			t.Fatalf("joint %d commanded at %v after SIGTERM\n%s", i, v, stderr.String())
		}
	}
	if s.Enabled {
		t.Fatalf("arm still enabled after SIGTERM\n%s", stderr.String())
	}
}

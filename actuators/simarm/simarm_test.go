package simarm_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/energyflow/edge/actuators"
	"github.com/energyflow/edge/actuators/simarm"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func setup(t *testing.T, cfg simarm.Config) (*simarm.Arm, *actuators.ModbusArm, *fakeClock) {
	t.Helper()
	m, err := actuators.LoadMap(filepath.Join("..", "..", "examples", "maps", "simarm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{t: time.Unix(1000, 0)}
	cfg.Map, cfg.Clock = m, clk
	sim, err := simarm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	arm, err := actuators.NewTCP(m, actuators.Config{Address: sim.Addr(), Timeout: 2 * time.Second}, actuators.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { arm.Close() })
	if err := arm.Enable(context.Background()); err != nil {
		t.Fatal(err)
	}
	return sim, arm, clk
}

func command(t *testing.T, arm *actuators.ModbusArm, v0 float64) {
	t.Helper()
	v := make([]float64, 7)
	v[0] = v0
	if err := arm.Command(context.Background(), actuators.Command{Velocity: v}); err != nil {
		t.Fatal(err)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func TestIntegratesAndStopsOnHeartbeatLapse(t *testing.T) {
	sim, arm, clk := setup(t, simarm.Config{})
	command(t, arm, 1.0)
	clk.Advance(100 * time.Millisecond)
	s := sim.Snapshot()
	if !near(s.Position[0], 0.1) || s.Velocity[0] != 1 || !s.Enabled {
		t.Fatalf("after 100ms: %+v", s)
	}
	// No heartbeat for 550ms: the watchdog fires at 500ms.
	clk.Advance(450 * time.Millisecond)
	s = sim.Snapshot()
	if !near(s.Position[0], 0.5) || s.Enabled || s.Velocity[0] != 0 || s.Fault != actuators.FaultHeartbeat {
		t.Fatalf("after lapse: %+v", s)
	}
	// A fresh heartbeat clears the lapse bit but does not re-enable.
	command(t, arm, 1.0)
	clk.Advance(100 * time.Millisecond)
	s = sim.Snapshot()
	if s.Fault != 0 || s.Enabled || !near(s.Position[0], 0.5) {
		t.Fatalf("after fresh heartbeat: %+v", s)
	}
}

func TestJointAndVelocityLimits(t *testing.T) {
	sim, arm, clk := setup(t, simarm.Config{PositionMax: []float64{0.2}, VelocityLimit: []float64{1}})
	command(t, arm, 1.5) // above the joint's velocity limit 1
	clk.Advance(100 * time.Millisecond)
	if s := sim.Snapshot(); !near(s.Position[0], 0.1) || s.Velocity[0] != 1 {
		t.Fatalf("velocity limit: %+v", s)
	}
	command(t, arm, 1.5)
	clk.Advance(300 * time.Millisecond)
	s := sim.Snapshot()
	if s.Position[0] != 0.2 || s.Velocity[0] != 0 || s.Fault&actuators.FaultJointLimit == 0 {
		t.Fatalf("joint limit: %+v", s)
	}
	// Moving away clears it.
	command(t, arm, -1)
	clk.Advance(100 * time.Millisecond)
	if s := sim.Snapshot(); s.Fault != 0 || !near(s.Position[0], 0.1) {
		t.Fatalf("away from limit: %+v", s)
	}
}

func TestStateMatchesSimulator(t *testing.T) {
	sim, arm, clk := setup(t, simarm.Config{InitialPosition: []float64{0.25, -0.5}})
	command(t, arm, 0.5)
	clk.Advance(200 * time.Millisecond)
	var st actuators.State
	if err := arm.State(context.Background(), &st); err != nil {
		t.Fatal(err)
	}
	s := sim.Snapshot()
	for i := range s.Position {
		if float32(st.Position[i]) != float32(s.Position[i]) {
			t.Errorf("joint %d: client %v, sim %v", i, st.Position[i], s.Position[i])
		}
	}
	if !st.Enabled || st.Status != s.Status || st.Fault != 0 || st.EStop {
		t.Errorf("state %+v, sim %+v", st, s)
	}
	if !st.Time.Equal(clk.Now()) {
		t.Errorf("state time %v, clock %v", st.Time, clk.Now())
	}
}

// A position offset changes the reading only: the client reads the true
// position plus the offset, the physics (Snapshot) goes on unchanged, and
// nil reads true again.
func TestPositionOffsetIsReadingOnly(t *testing.T) {
	sim, arm, clk := setup(t, simarm.Config{InitialPosition: []float64{0.25}})
	read := func() []float64 {
		t.Helper()
		var st actuators.State
		if err := arm.State(context.Background(), &st); err != nil {
			t.Fatal(err)
		}
		return st.Position
	}
	command(t, arm, 0.5)
	clk.Advance(100 * time.Millisecond)
	sim.SetPositionOffset([]float64{0.03, 0, -0.08})
	p, s := read(), sim.Snapshot()
	for i, want := range []float64{0.30 + 0.03, 0, -0.08} {
		if float32(p[i]) != float32(want) {
			t.Errorf("joint %d reads %v, want %v", i, p[i], want)
		}
	}
	if !near(s.Position[0], 0.30) || s.Position[2] != 0 {
		t.Errorf("physics moved by the offset: %v", s.Position)
	}
	clk.Advance(100 * time.Millisecond) // still integrating the command
	if p := read(); float32(p[0]) != float32(0.35+0.03) {
		t.Errorf("joint 0 reads %v after 100ms more, want %v", p[0], 0.35+0.03)
	}
	sim.SetPositionOffset(nil)
	if p := read(); float32(p[0]) != float32(0.35) || p[2] != 0 {
		t.Errorf("offset cleared, reads %v", p)
	}
}

func TestKillRestartKeepsAddress(t *testing.T) {
	sim, arm, _ := setup(t, simarm.Config{})
	addr := sim.Addr()
	if err := sim.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := sim.Restart(); err != nil {
		t.Fatal(err)
	}
	if sim.Addr() != addr {
		t.Fatalf("address changed: %s -> %s", addr, sim.Addr())
	}
	// The old connection is gone; the client reconnects on its own.
	_ = arm.Command(context.Background(), actuators.Command{Velocity: make([]float64, 7)})
	if err := arm.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := arm.Command(context.Background(), actuators.Command{Velocity: make([]float64, 7)}); err != nil {
		t.Fatal(err)
	}
}

package actuators_test

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/energyflow/edge/actuators"
	"github.com/energyflow/edge/actuators/modbustest"
	"github.com/energyflow/edge/actuators/simarm"
)

func loadMap(t testing.TB, name string) *actuators.Map {
	t.Helper()
	m, err := actuators.LoadMap(filepath.Join("..", "examples", "maps", name))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// events collects OnEvent calls.
type events struct {
	mu sync.Mutex
	ev []actuators.Event
}

func (e *events) on(ev actuators.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ev = append(e.ev, ev)
}

func (e *events) count(s actuators.ConnState) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.ev {
		if ev.State == s {
			n++
		}
	}
	return n
}

// Generous timeouts: the tests run under -race on a loaded 2-core machine.
func testConfig(addr string) actuators.Config {
	return actuators.Config{
		Address:        addr,
		Timeout:        time.Second,
		ConnectTimeout: time.Second,
		BackoffMin:     20 * time.Millisecond,
		BackoffMax:     200 * time.Millisecond,
	}
}

func startSim(t testing.TB, m *actuators.Map, cfg simarm.Config) *simarm.Arm {
	t.Helper()
	cfg.Map = m
	sim, err := simarm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	return sim
}

func newArm(t testing.TB, m *actuators.Map, cfg actuators.Config, ev *events) *actuators.ModbusArm {
	t.Helper()
	var opts actuators.Options
	if ev != nil {
		opts.OnEvent = ev.on
	}
	arm, err := actuators.NewTCP(m, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { arm.Close() })
	return arm
}

func vel(n int, v0 float64) []float64 {
	v := make([]float64, n)
	v[0] = v0
	return v
}

func TestDrivesSimulatedArm(t *testing.T) {
	ctx := context.Background()
	m := loadMap(t, "simarm.yaml")
	sim := startSim(t, m, simarm.Config{})
	arm := newArm(t, m, testConfig(sim.Addr()), nil)

	if err := arm.Enable(ctx); err != nil {
		t.Fatal(err)
	}
	var st actuators.State
	if err := arm.State(ctx, &st); err != nil {
		t.Fatal(err)
	}
	if !st.Enabled || st.Fault != 0 || st.EStop || st.Status&simarm.StatusEnabled == 0 {
		t.Fatalf("after Enable: %+v", st)
	}
	start := st.Position[0]
	cmd := actuators.Command{Velocity: vel(7, 1.0), Gripper: 0.5}
	cmd.Velocity[6] = -0.5
	deadline := time.Now().Add(10 * time.Second)
	for st.Position[0] < start+0.05 && time.Now().Before(deadline) {
		if err := arm.Command(ctx, cmd); err != nil {
			t.Fatal(err)
		}
		if err := arm.State(ctx, &st); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st.Position[0] < start+0.05 || st.Position[6] >= 0 {
		t.Fatalf("arm did not follow the command: %v", st.Position)
	}
	if st.Velocity[0] != 1.0 || st.Gripper != 0.5 || st.Status&simarm.StatusMoving == 0 {
		t.Errorf("state %+v", st)
	}
	last, ok := sim.LastCommand()
	if !ok || last.Velocity[0] != 1.0 || last.Velocity[6] != -0.5 || last.Gripper != 0.5 {
		t.Errorf("sim's last command %+v", last)
	}

	if err := arm.Halt(ctx); err != nil {
		t.Fatal(err)
	}
	snap := sim.Snapshot()
	if snap.Enabled || snap.Velocity[0] != 0 || snap.CommandVelocity[0] != 0 || snap.GripperCommand != 0.5 {
		t.Fatalf("after Halt: %+v", snap)
	}
	// Halted: positions stay put.
	if err := arm.State(ctx, &st); err != nil {
		t.Fatal(err)
	}
	p := st.Position[0]
	time.Sleep(30 * time.Millisecond)
	if err := arm.State(ctx, &st); err != nil {
		t.Fatal(err)
	}
	if st.Position[0] != p || st.Enabled {
		t.Errorf("moved after Halt: %v -> %v", p, st.Position[0])
	}
	// Heartbeat counts every write.
	if snap.Heartbeat < 3 {
		t.Errorf("heartbeat %d", snap.Heartbeat)
	}
}

// The batching: a command, a state read and a halt are one request each
// with the simulated arm's map, with exactly these bytes.
func TestRequestsAreBatched(t *testing.T) {
	ctx := context.Background()
	m := loadMap(t, "simarm.yaml")
	sim := startSim(t, m, simarm.Config{})
	var rec modbustest.Recorder
	cfg := testConfig(sim.Addr())
	arm, err := actuators.NewModbusArm(m, cfg, rec.Dial(actuators.TCPDialer(sim.Addr())), actuators.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer arm.Close()

	if err := arm.Command(ctx, actuators.Command{Velocity: vel(7, 0.25), Gripper: 1}); err != nil {
		t.Fatal(err)
	}
	var st actuators.State
	if err := arm.State(ctx, &st); err != nil {
		t.Fatal(err)
	}
	if err := arm.Halt(ctx); err != nil {
		t.Fatal(err)
	}
	log := rec.Log()
	if len(log) != 3 {
		t.Fatalf("%d requests, want 3: %v", len(log), log)
	}
	wantFC := []byte{16, 4, 16}
	wantQty := []int{17, 34, 18}
	for i, tr := range log {
		qty := int(tr.Request[2])<<8 | int(tr.Request[3])
		if tr.Function != wantFC[i] || qty != wantQty[i] || tr.Unit != 1 {
			t.Errorf("request %d: %v qty %d, want fc %d qty %d", i, tr, qty, wantFC[i], wantQty[i])
		}
	}
	// The halt: 7 × float32 0, gripper 1.0 (last), heartbeat 2, enable 0.
	h := log[2].Request
	regs := h[4:] // address, quantity, then the registers
	for i := 0; i < 14; i++ {
		if regs[2*i] != 0 || regs[2*i+1] != 0 {
			t.Fatalf("halt velocity not zero: % x", regs)
		}
	}
	if regs[28] != 0x3f || regs[29] != 0x80 || regs[32] != 0 || regs[33] != 2 || regs[34] != 0 || regs[35] != 0 {
		t.Errorf("halt tail % x", regs[28:])
	}

	// Playback: the same calls against the recorded log need no server.
	pb := modbustest.NewPlayback(log)
	arm2, err := actuators.NewModbusArm(m, cfg, pb.Dial, actuators.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = arm2.Command(ctx, actuators.Command{Velocity: vel(7, 0.25), Gripper: 1})
	_ = arm2.State(ctx, &st)
	_ = arm2.Halt(ctx)
	if err := pb.Err(); err != nil {
		t.Error(err)
	}
	// A different command does not match the log.
	pb = modbustest.NewPlayback(log)
	arm3, _ := actuators.NewModbusArm(m, cfg, pb.Dial, actuators.Options{})
	_ = arm3.Command(ctx, actuators.Command{Velocity: vel(7, 0.5), Gripper: 1})
	if pb.Err() == nil {
		t.Error("playback accepted a different command")
	}
}

func TestCommandRefusesBadValues(t *testing.T) {
	ctx := context.Background()
	m := loadMap(t, "simarm.yaml")
	sim := startSim(t, m, simarm.Config{})
	arm := newArm(t, m, testConfig(sim.Addr()), nil)
	if err := arm.Command(ctx, actuators.Command{Velocity: vel(7, 0.1)}); err != nil {
		t.Fatal(err)
	}
	n := sim.Snapshot().Commands
	for _, c := range []actuators.Command{
		{Velocity: vel(7, 2)},          // above max 1.5
		{Velocity: vel(7, math.NaN())}, // NaN
		{Velocity: vel(7, 0), Gripper: 3},
	} {
		if err := arm.Command(ctx, c); !errors.Is(err, actuators.ErrOutOfRange) {
			t.Errorf("%v: got %v", c, err)
		}
	}
	if err := arm.Command(ctx, actuators.Command{Velocity: vel(6, 0)}); !errors.Is(err, actuators.ErrBadCommand) {
		t.Errorf("6 axes: got %v", err)
	}
	if got := sim.Snapshot().Commands; got != n {
		t.Errorf("%d commands written for refused values", got-n)
	}
}

func TestEnableRefusedOnEStopAndFault(t *testing.T) {
	ctx := context.Background()
	m := loadMap(t, "simarm.yaml")
	sim := startSim(t, m, simarm.Config{})
	arm := newArm(t, m, testConfig(sim.Addr()), nil)
	sim.SetEStop(true)
	if err := arm.Enable(ctx); !errors.Is(err, actuators.ErrEStop) {
		t.Fatalf("e-stop: %v", err)
	}
	sim.SetEStop(false)
	sim.SetFault(actuators.FaultInternal)
	if err := arm.Enable(ctx); !errors.Is(err, actuators.ErrFault) {
		t.Fatalf("fault: %v", err)
	}
	sim.ClearFault(actuators.FaultInternal)
	if err := arm.Enable(ctx); err != nil {
		t.Fatal(err)
	}
	// E-stop while enabled: the controller drops enable, the state says so.
	sim.SetEStop(true)
	var st actuators.State
	if err := arm.State(ctx, &st); err != nil {
		t.Fatal(err)
	}
	if !st.EStop || st.Enabled || st.Fault&actuators.FaultEStop == 0 {
		t.Errorf("state %+v", st)
	}
}

// A map with enable on a coil and the e-stop on a discrete input: a halt
// takes two requests, and both tables work against the simulator.
func TestCoilEnableMap(t *testing.T) {
	const y = `
format: 1
unit_id: 3
heartbeat_timeout: 1s
gripper_hold: "0"
signals:
  velocity_command: {function: holding, address: 10, type: int16, count: 3, scale: 0.001, min: -1, max: 1}
  gripper_command:  {function: holding, address: 13, type: int16, scale: 0.01, min: -1, max: 1}
  heartbeat:        {function: holding, address: 14, type: uint16}
  enable:           {function: coil, address: 5}
  position:         {function: input, address: 0, type: int32, count: 3, scale: 0.000001, word_order: low_first, min: -3, max: 3}
  status:           {function: input, address: 6}
  fault:            {function: input, address: 7}
  estop:            {function: discrete, address: 2}
`
	ctx := context.Background()
	m, err := actuators.ParseMap([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	sim := startSim(t, m, simarm.Config{})
	arm := newArm(t, m, testConfig(sim.Addr()), nil)
	if c, s, h := arm.Requests(); c != 1 || s != 3 || h != 2 {
		t.Errorf("requests %d/%d/%d", c, s, h)
	}
	if err := arm.Enable(ctx); err != nil {
		t.Fatal(err)
	}
	var st actuators.State
	for i := 0; i < 50; i++ {
		if err := arm.Command(ctx, actuators.Command{Velocity: []float64{0.5, 0, -0.5}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := arm.State(ctx, &st); err != nil {
		t.Fatal(err)
	}
	if !st.Enabled || st.Position[0] <= 0 || st.Position[2] >= 0 {
		t.Fatalf("state %+v", st)
	}
	sim.SetEStop(true)
	if err := arm.State(ctx, &st); err != nil || !st.EStop {
		t.Fatalf("estop not seen: %v %+v", err, st)
	}
	sim.SetEStop(false)
	if err := arm.Halt(ctx); err != nil {
		t.Fatal(err)
	}
	if snap := sim.Snapshot(); snap.Enabled || snap.CommandVelocity[0] != 0 {
		t.Errorf("after halt %+v", snap)
	}
}

// Halt works after the caller's context is cancelled.
func TestHaltAfterCancel(t *testing.T) {
	m := loadMap(t, "simarm.yaml")
	sim := startSim(t, m, simarm.Config{})
	arm := newArm(t, m, testConfig(sim.Addr()), nil)
	if err := arm.Enable(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := arm.Command(ctx, actuators.Command{Velocity: vel(7, 1)}); !errors.Is(err, context.Canceled) {
		t.Errorf("Command on a cancelled ctx: %v", err)
	}
	if err := arm.Halt(ctx); err != nil {
		t.Fatal(err)
	}
	if sim.Snapshot().Enabled {
		t.Error("still enabled")
	}
}

// Every map in examples/maps (the Meta-World bridge's included) is valid
// and drives the simulated arm: the format round-trips between its users.
func TestEveryExampleMapDrivesSimulator(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "examples", "maps", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example maps: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			ctx := context.Background()
			m := loadMap(t, filepath.Base(f))
			sim := startSim(t, m, simarm.Config{})
			arm := newArm(t, m, testConfig(sim.Addr()), nil)
			if err := arm.Enable(ctx); err != nil {
				t.Fatal(err)
			}
			v := make([]float64, m.Axes())
			v[0] = 0.5
			if err := arm.Command(ctx, actuators.Command{Velocity: v}); err != nil {
				t.Fatal(err)
			}
			var st actuators.State
			if err := arm.State(ctx, &st); err != nil {
				t.Fatal(err)
			}
			if !st.Enabled || st.Fault != 0 {
				t.Errorf("state %+v", st)
			}
			if err := arm.Halt(ctx); err != nil {
				t.Fatal(err)
			}
			if s := sim.Snapshot(); s.Enabled || s.CommandVelocity[0] != 0 {
				t.Errorf("after halt %+v", s)
			}
		})
	}
}

package actuators_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/energyflow/edge/actuators"
	"github.com/energyflow/edge/actuators/modbustest"
	"github.com/goburrow/modbus"
)

// pymodbusInputs encodes a known state into the sim map's input registers.
func pymodbusInputs(t testing.TB, m *actuators.Map) []uint16 {
	t.Helper()
	ir := make([]uint16, 34)
	ss := &m.Signals
	for i := 0; i < 7; i++ {
		must(t, ss.Position.Encode(ir[ss.Position.Address:], i, 0.1*float64(i)))
		must(t, ss.Velocity.Encode(ir[ss.Velocity.Address:], i, -0.01*float64(i)))
	}
	must(t, ss.GripperState.Encode(ir[ss.GripperState.Address:], 0, 0.75))
	must(t, ss.Status.Encode(ir[ss.Status.Address:], 0, 0x0001))
	must(t, ss.EnabledState.Encode(ir[ss.EnabledState.Address:], 0, 1))
	return ir
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// holding reads the command block back through an independent connection.
func holding(t testing.TB, m *actuators.Map, addr string) (vel []float64, grip float64, hb, enable uint16) {
	t.Helper()
	c := modbus.NewTCPClientHandler(addr)
	c.SlaveId, c.Timeout = 1, 5*time.Second
	defer c.Close()
	b, err := modbus.NewClient(c).ReadHoldingRegisters(0, 18)
	if err != nil {
		t.Fatal(err)
	}
	regs := make([]uint16, 18)
	for i := range regs {
		regs[i] = uint16(b[2*i])<<8 | uint16(b[2*i+1])
	}
	ss := &m.Signals
	for i := 0; i < 7; i++ {
		vel = append(vel, ss.VelocityCommand.Decode(regs, i))
	}
	return vel, ss.GripperCommand.Decode(regs[14:], 0), regs[16], regs[17]
}

func TestPymodbusPeer(t *testing.T) {
	ctx := context.Background()
	m := loadMap(t, "simarm.yaml")
	py := modbustest.StartPymodbus(t, 1, pymodbusInputs(t, m))
	arm := newArm(t, m, testConfig(py.Addr), nil)

	if err := arm.Command(ctx, actuators.Command{Velocity: []float64{0.5, -0.25, 0, 0, 0, 0, 1.5}, Gripper: -0.5}); err != nil {
		t.Fatal(err)
	}
	v, g, hb, en := holding(t, m, py.Addr)
	if v[0] != 0.5 || v[1] != -0.25 || v[6] != 1.5 || g != -0.5 || hb != 1 || en != 0 {
		t.Fatalf("holding after command: %v %v hb %d enable %d", v, g, hb, en)
	}
	var st actuators.State
	if err := arm.State(ctx, &st); err != nil {
		t.Fatal(err)
	}
	if float32(st.Position[3]) != 0.3 || float32(st.Velocity[2]) != -0.02 || st.Gripper != 0.75 || st.Status != 1 || !st.Enabled || st.EStop || st.Fault != 0 {
		t.Fatalf("state %+v", st)
	}
	if err := arm.Halt(ctx); err != nil {
		t.Fatal(err)
	}
	v, g, hb, en = holding(t, m, py.Addr)
	if v[0] != 0 || v[6] != 0 || g != -0.5 || hb != 2 || en != 0 {
		t.Fatalf("holding after halt: %v %v hb %d enable %d", v, g, hb, en)
	}
	if h := arm.Health(); h.Requests != 3 {
		t.Errorf("%d requests for command+state+halt, want 3", h.Requests)
	}
}

func TestPymodbusKilledMidRun(t *testing.T) {
	m := loadMap(t, "simarm.yaml")
	py := modbustest.StartPymodbus(t, 1, pymodbusInputs(t, m))
	var ev events
	arm := newArm(t, m, faultConfig(py.Addr), &ev)
	d := newDriver(t, arm)
	for i := 0; i < 5; i++ {
		if err := d.tick(); err != nil {
			t.Fatal(err)
		}
	}
	py.Kill()
	err := d.mustFail(5 * time.Second)
	assertDisconnected(t, err, arm, &ev)
	if err := d.tick(); !errors.Is(err, actuators.ErrDisconnected) {
		t.Fatalf("tick while down: %v", err)
	}
	if err := py.Restart(); err != nil {
		t.Fatal(err)
	}
	// The new process starts with zeroed registers: after recovery they
	// must hold the fresh command, never one that failed.
	d.recover(30 * time.Second)
	v, _, _, _ := holding(t, m, py.Addr)
	if got := seqOf(v[0]); got != d.good[len(d.good)-1] {
		t.Fatalf("controller holds command %d, last good %d", got, d.good[len(d.good)-1])
	}
	if _, failed := d.failed[seqOf(v[0])]; failed {
		t.Fatal("a failed command was written after recovery")
	}
	var st actuators.State
	if err := arm.State(context.Background(), &st); err != nil || float32(st.Position[1]) != 0.1 {
		t.Fatalf("state after recovery: %v %+v", err, st)
	}
}

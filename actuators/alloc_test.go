package actuators_test

import (
	"context"
	"testing"
	"time"

	"github.com/energyflow/edge/actuators"
	"github.com/goburrow/modbus"
)

// staticConn answers every request with preallocated replies, so that
// AllocsPerRun sees only the arm's own allocations.
type staticConn struct {
	modbus.Client
	input, ack []byte
}

func (c *staticConn) SetUnit(byte)                                   {}
func (c *staticConn) SetTimeout(time.Duration)                       {}
func (c *staticConn) Close() error                                   { return nil }
func (c *staticConn) ReadInputRegisters(a, q uint16) ([]byte, error) { return c.input[:2*q], nil }
func (c *staticConn) WriteMultipleRegisters(a, q uint16, v []byte) ([]byte, error) {
	return c.ack, nil
}

// The control tick (Command + State) allocates nothing in the arm itself
// after warm-up; goburrow/modbus allocates a few buffers per request on top.
func TestTickAllocatesNothing(t *testing.T) {
	m := loadMap(t, "simarm.yaml")
	conn := &staticConn{input: make([]byte, 250), ack: []byte{0, 0, 0, 17}}
	arm, err := actuators.NewModbusArm(m, actuators.Config{}, func(context.Context, time.Duration) (actuators.Conn, error) {
		return conn, nil
	}, actuators.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cmd := actuators.Command{Velocity: make([]float64, 7), Gripper: 0.5}
	var st actuators.State
	tick := func() {
		if err := arm.Command(ctx, cmd); err != nil {
			t.Fatal(err)
		}
		if err := arm.State(ctx, &st); err != nil {
			t.Fatal(err)
		}
	}
	tick()
	if n := testing.AllocsPerRun(100, tick); n != 0 {
		t.Errorf("%v allocations per tick", n)
	}
}

package actuators_test

import (
	"context"
	"testing"
	"time"

	"github.com/energyflow/edge/actuators"
	"github.com/energyflow/edge/actuators/modbustest"
	"github.com/energyflow/edge/actuators/simarm"
)

func startRTU(t *testing.T, m *actuators.Map) (*simarm.Arm, *actuators.ModbusArm, *events) {
	t.Helper()
	master, slave, err := modbustest.OpenPTY()
	if err != nil {
		t.Fatal(err)
	}
	sim := startSim(t, m, simarm.Config{})
	done := make(chan error, 1)
	go func() { done <- sim.ServeRTU(master) }()
	t.Cleanup(func() {
		sim.Close()
		master.Close()
		if err := <-done; err != nil {
			t.Errorf("ServeRTU: %v", err)
		}
	})
	var ev events
	arm, err := actuators.NewRTU(m, actuators.Config{
		Device: slave, BaudRate: 115200, Parity: "N", StopBits: 1,
		Timeout: time.Second, BackoffMin: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
	}, actuators.Options{OnEvent: ev.on})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { arm.Close() })
	return sim, arm, &ev
}

// RTU through a pseudo-terminal: goburrow's RTU client against the
// simulated controller's RTU framing.
func TestRTUOverPTY(t *testing.T) {
	ctx := context.Background()
	m := loadMap(t, "simarm.yaml")
	sim, arm, _ := startRTU(t, m)
	if err := arm.Enable(ctx); err != nil {
		t.Fatal(err)
	}
	if err := arm.Command(ctx, actuators.Command{Velocity: vel(7, 1), Gripper: 0.25}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	var st actuators.State
	if err := arm.State(ctx, &st); err != nil {
		t.Fatal(err)
	}
	if !st.Enabled || st.Position[0] <= 0 || st.Velocity[0] != 1 || st.Gripper != 0.25 {
		t.Fatalf("state %+v", st)
	}
	if err := arm.Halt(ctx); err != nil {
		t.Fatal(err)
	}
	if s := sim.Snapshot(); s.Enabled || s.CommandVelocity[0] != 0 {
		t.Fatalf("after halt %+v", s)
	}
}

// A controller that stops answering on the serial line: the client times
// out, reports, reopens the port, and no stalled command lands later.
func TestRTUStalledController(t *testing.T) {
	m := loadMap(t, "simarm.yaml")
	sim, arm, ev := startRTU(t, m)
	d := newDriver(t, arm)
	if err := d.tick(); err != nil {
		t.Fatal(err)
	}
	sim.Stall()
	err := d.mustFail(10 * time.Second)
	assertDisconnected(t, err, arm, ev)
	sim.Unstall()
	d.recover(20 * time.Second)
	for i := 0; i < 3; i++ {
		if err := d.tick(); err != nil {
			t.Fatal(err)
		}
	}
	d.checkLog(sim.Commands(), false)
}

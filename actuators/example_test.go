package actuators_test

import (
	"context"
	"fmt"
	"time"

	"github.com/energyflow/edge/actuators"
	"github.com/energyflow/edge/actuators/simarm"
)

// Drive the simulated arm: enable, command, read the state, halt.
func Example() {
	ctx := context.Background()
	m, err := actuators.LoadMap("../examples/maps/simarm.yaml")
	if err != nil {
		panic(err)
	}
	sim, err := simarm.New(simarm.Config{Map: m}) // serves on 127.0.0.1:0
	if err != nil {
		panic(err)
	}
	defer sim.Close()

	arm, err := actuators.NewTCP(m, actuators.Config{Address: sim.Addr(), Timeout: time.Second}, actuators.Options{
		OnEvent: func(e actuators.Event) {
			if e.State == actuators.StateDisconnected {
				// the safety layer would latch a stop here
			}
		},
	})
	if err != nil {
		panic(err)
	}
	defer arm.Close()

	if err := arm.Enable(ctx); err != nil {
		panic(err)
	}
	if err := arm.Command(ctx, actuators.Command{Velocity: []float64{0.5, 0, 0, 0, 0, 0, 0}, Gripper: 1}); err != nil {
		panic(err)
	}
	var st actuators.State
	if err := arm.State(ctx, &st); err != nil {
		panic(err)
	}
	fmt.Println("enabled:", st.Enabled, "joint 0 velocity:", st.Velocity[0])
	if err := arm.Halt(context.WithoutCancel(ctx)); err != nil {
		panic(err)
	}
	c, s, h := arm.Requests()
	fmt.Println("requests per command, state, halt:", c, s, h)
	// Output:
	// enabled: true joint 0 velocity: 0.5
	// requests per command, state, halt: 1 1 1
}

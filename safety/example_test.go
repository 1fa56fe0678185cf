package safety_test

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/energyflow/edge/actuators"
	"github.com/energyflow/edge/calibration"
	"github.com/energyflow/edge/safety"
)

// nullArm accepts everything (a stand-in for actuators.ModbusArm).
type nullArm struct{}

func (nullArm) Command(context.Context, actuators.Command) error { return nil }
func (nullArm) State(context.Context, *actuators.State) error    { return nil }
func (nullArm) Enable(context.Context) error                     { return nil }
func (nullArm) Halt(context.Context) error                       { return nil }

// The runtime builds one Guard, arms it with Reset once inputs are live, and
// routes every command through Tick.
func Example() {
	cfg := safety.DefaultConfig()
	cfg.Limits.MaxVelocity = []float64{1, 1, 1}
	cfg.Watchdog.CameraMaxAge = 0 // no camera
	cal := &safety.Calibration{Block: calibration.Block{Recommended: calibration.Recommendation{Score: "energy", Threshold: 4.2}}}
	g, err := safety.New(nullArm{}, cfg, cal, safety.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	now := time.Now()
	st := actuators.State{Enabled: true}
	tick := func(energy float64, v0 float64) safety.Decision {
		now = now.Add(100 * time.Millisecond)
		st.Time = now
		in := safety.Inputs{Tick: 0, Now: now, Deadline: now, Arm: &st,
			Scores:  safety.Scores{energy, math.NaN()},
			Command: actuators.Command{Velocity: []float64{v0, 0, 0}}}
		d, _ := g.Tick(ctx, &in)
		return d
	}

	tick(1, 0)
	done := make(chan error)
	go func() { done <- g.Reset(ctx, "operator") }() // decided on the next tick
	for !g.Status().ResetPending {
		time.Sleep(time.Millisecond)
	}
	tick(1, 0)
	fmt.Println("reset:", <-done)

	d := tick(1, 3) // too fast: clamped to max_velocity
	fmt.Println(d.State, d.Command.Velocity[0], d.Clamps[safety.LimitVelocity])

	for _, e := range []float64{9, 9, 9} { // 3 of the last 5 over 4.2
		d = tick(e, 0)
	}
	fmt.Println(d.State, d.Reason.Kind, d.Reason.Threshold)
	// Output:
	// reset: <nil>
	// RUNNING 1 1
	// STOPPED energy 4.2
}

package actuators

import (
	"context"
	"time"
)

// Command is one motion command for the arm, in the register map's
// engineering units (rad/s for joint velocities; for the Meta-World robot,
// the normalized end-effector Δxyz in [-1, 1]).
type Command struct {
	Velocity []float64 // one entry per axis of the map's velocity_command signal
	Gripper  float64   // gripper command (map's gripper_command signal)
}

// State is one reading of the arm. Slices are owned by the caller and reused
// by State(ctx, &s) so that a read allocates nothing after warm-up.
type State struct {
	Time        time.Time // when the reply arrived (monotonic clock reading)
	Position    []float64 // joint positions (map's position signal), if mapped
	Velocity    []float64 // joint velocities (map's velocity signal), if mapped
	Gripper     float64   // gripper state, if mapped
	Status      uint16    // controller status word
	Fault       uint16    // controller fault word; non-zero is a fault
	EStop       bool      // hardware e-stop input asserted
	Enabled     bool      // motion permitted, as read back
	Observation []float64 // map's optional observation vector (e.g. Meta-World's 39 floats)
}

// Arm is what the runtime and the safety layer use to move an arm.
//
// Implementations: ModbusArm (TCP and RTU), and the simulated arm served over
// Modbus TCP for tests. Halt must work after the caller's context is
// cancelled (callers pass context.WithoutCancel when stopping).
type Arm interface {
	// Command writes a fresh velocity and gripper command together with the
	// heartbeat. A failed write is reported, never retried.
	Command(ctx context.Context, c Command) error
	// State reads the arm's state into s, reusing its slices.
	State(ctx context.Context, s *State) error
	// Enable permits motion (enable=1). Refused while a fault or e-stop is active.
	Enable(ctx context.Context) error
	// Halt stops motion: zero velocity, gripper hold, enable dropped, in the
	// fewest requests the map allows. Safe to call at any time, repeatedly.
	Halt(ctx context.Context) error
}

// Package runtime is the real-time control loop of EnergyFlow Edge: it wires
// a camera, a policy (package engines), the safety gate, the arm and
// telemetry together and runs them at a fixed rate.
//
// # Concepts
//
// The Scheduler wakes the loop at absolute deadlines on the monotonic clock
// and counts overruns instead of drifting. Each tick reads the arm, pushes an
// observation into the history, hands it to the inference goroutine when a
// replan is due (a tick never waits for inference), executes the current
// action Chunk with latency compensation, asks the scorer goroutine for a
// fresh energy of the committed chunk (a policy without an energy, such as a
// diffusion bundle, has no scorer and runs with the energy stop off), scores
// the newest observation with the bundle's state term, when it has one,
// synchronously in the tick (state_energy, fresh on every tick), passes the
// command through safety and publishes telemetry. The Machine holds the
// operating state:
// INIT → READY → RUNNING → STOPPED(reason) → reset → READY, and from a stop
// the gate's recovery mode (Loop.Recover, Loop.Jog): STOPPED → RECOVERING →
// RUNNING when it re-arms by itself, or → STOPPED.
package runtime

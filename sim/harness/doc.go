// Package harness is what every `energyflow sim` command shares: the
// simulated robot's bridge process and the options that choose it.
//
// The simulated robot (sim/, Python) is Meta-World behind the same
// interfaces as real hardware: a Modbus TCP arm and an MJPEG camera on
// loopback, plus an episode-control HTTP API that only harnesses use,
// never the runtime (docs/sim.md). This package starts that bridge
// (StartBridge), talks to its episode API (Bridge.Reset, Bridge.Episode,
// Bridge.SetLevel), and points a runtime configuration at it
// (Flags.RuntimeConfig): the same runtime.Config a robot would use.
//
// # Concepts
//
//   - Flags are the options every sim command takes (task, OOD level,
//     bundle, seed, sampler steps, control rate, camera size); Prepare
//     checks them all before the bridge starts, so a mistake costs no
//     simulator start-up, and resolves the bundle and the robot state.
//   - A UsageError is a command-line mistake: the command exits 2.
//   - The commands themselves are the subpackages: demo (the live demo),
//     eval (closed-loop evaluation) and calibrate (the energy stop's
//     closed-loop calibration). cmd/energyflow parses their flags and calls
//     them.
package harness

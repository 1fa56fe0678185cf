// Package eval is `energyflow sim eval`: the closed-loop evaluation of a
// bundle on the simulated robot, every episode through the real runtime
// (camera, policy, safety gate, Modbus arm) against the Meta-World bridge.
//
// # Concepts
//
//   - Options are the evaluation's flags (harness.Flags plus the episodes,
//     step limit, injected fault, watched scores and output files).
//   - RunEpisode runs one episode: the bridge resets the scene, a fresh
//     runtime drives it until the world's episode succeeds or is done, or
//     the safety gate stops the arm. The stop reaches the harness as a
//     typed safety.Reason (runtime.AppOptions.OnStop) on the tick that
//     found it; the harness then ends the run, so the stop the runtime
//     latches at its end is expected and logged at info
//     (runtime.AppOptions.ExpectedShutdown).
//   - A Result is one episode (how it ended, its stop, inference
//     latencies, the traced score per running tick); a Summary the
//     evaluation's (success rate with its Wilson interval, steps to
//     success, latency quantiles, stops by kind), printed as one line and
//     written as JSON.
//   - Run is the command: every episode, then the summary. sim calibrate
//     (package calibrate) drives its episodes with RunEpisode too.
package eval

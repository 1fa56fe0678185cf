// Package demo is `energyflow sim`: the simulated robot demo. It starts
// the Meta-World bridge and gives the caller the runtime configuration
// pointed at it — the task's bundle on ONNX Runtime, the safety gate and
// the live view — and keeps the arm working: a new episode starts
// whenever one ends, and the live view's Episode panel starts episodes and
// changes the OOD level through the runtime, which holds the arm across
// each reset (runtime.Loop.NewEpisode).
//
// # Concepts
//
//   - Start starts the bridge and prints where everything runs; the caller
//     (cmd/energyflow, which owns the process: signals, priority, the
//     viewer URL) runs the runtime with Demo.Config and Demo.AppOptions and
//     calls Demo.Started once it is built.
//   - The episode control (telemetry.EpisodeControl) re-arms a stopped arm
//     in a new scene, retrying while the new scene's first scores come in.
//   - --soak-report measures tick jitter, missed deadlines, memory and GC
//     over the run (Demo.FinishSoak).
package demo

// Package engines loads EnergyFlow engine bundles and turns observations
// into actions and energies.
//
// # Concepts
//
// A Bundle (LoadBundle, docs/bundle.md) is a directory with a manifest and
// ONNX graphs; loading validates every manifest field, the sha256 of every
// file and the structure of every ONNX file, and reports each problem as a
// *FieldError naming the file and the field.
//
// A Backend opens graphs as Sessions with session-owned float32 buffers:
// ORT (NewORT) runs them on ONNX Runtime on the CPU; package trt runs them on
// TensorRT. Package enginestest has a pure-Go Backend for tests.
//
// A Sampler (NewSampler) runs the sampler of the bundle's policy kind. For
// "energyflow" it is the paper's Algorithm 2 on the energy-gradient graph:
// K Euler steps of the probability-flow ODE from seeded (or injected)
// noise, then one batched call for the energy of the result at γ and of the
// M reference actions (the centered reward); Score re-scores a committed
// action chunk under a new observation. For "diffusion" (the Diffusion
// Policy baseline) it is deterministic DDIM on the noise-prediction graph
// "eps"; that policy has no energy (HasEnergy is false, Score returns
// ErrNoEnergy). A Conditioner
// builds cond from the observation history as the manifest's
// "conditioning" says; a VisionEncoder turns images into features for it.
//
// A bundle may carry the optional state term (the manifest's "state_energy"
// block and graph, for either policy kind): a StateTerm maps cond to
// state_energy, a score of the observation alone that is high far from
// every demonstration step. A Sampler opens it when present and fills
// Score.StateEnergy in Score and ScoreObs (Sampler.StateEnergy evaluates it
// alone).
//
// # Ownership
//
// Samplers, VisionEncoders and Sessions have one owner each (in the
// runtime, the inference goroutine) and are not safe for concurrent use.
// They own their buffers; after the first call their hot paths allocate
// nothing. The command (cmd/energyflow) owns and closes the Backend.
//
// ONNX Runtime's environment is process-wide: ORT backends share it through
// a reference count, the package's only shared state.
package engines

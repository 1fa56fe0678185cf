// Package engines loads EnergyFlow engine bundles and turns observations
// into actions and energies.
//
// # Concepts
//
// A bundle (docs/bundle.md) is a directory with a manifest and ONNX graphs.
// A Backend (ONNX Runtime here, TensorRT in package trt) opens graphs as
// Sessions with session-owned float32 buffers. The Sampler runs the paper's
// Algorithm 2 on the energy-gradient session.
package engines

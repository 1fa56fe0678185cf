// Package trt runs engine-bundle graphs on an NVIDIA GPU with TensorRT 10
// through cgo. It implements engines.Backend, engines.Session and
// engines.FusedSampler.
//
// # Concepts
//
// TensorRT has no C API. A small C++ shim (shim/trt_shim.cpp, built by the
// top-level CMakeLists.txt) exposes a low-level C ABI (shim/efx_trt.h):
// allocate, copy, set input shapes, bind tensor addresses, enqueueV3, run one
// Euler step (shim/euler_step.cu), capture and launch CUDA graphs. The policy
// lives here in Go:
//
//   - One goroutine locked to its OS thread owns the CUDA context; every call
//     of a Backend and its Sessions is marshalled to it.
//   - Buffers: zero-copy mapped host memory on integrated GPUs (Jetson Orin),
//     device memory with pinned host staging and async copies on discrete GPUs.
//   - After any input-shape change the next run is eager (one enqueueV3); the
//     run after that captures a CUDA graph for that batch size on the
//     session's non-default stream and later runs replay it. One graph per
//     batch size; if capture fails the session falls back to eager runs.
//   - The fused sampler (FusedSampler) records the whole K-step Euler loop —
//     K × (enqueueV3 at t_k, Euler kernel) and the final enqueueV3 at γ — as
//     one CUDA graph per (batch size, K). Each step's t lives in its own slice
//     of one device buffer, bound with setTensorAddress before that step's
//     enqueue (TensorRT reads addresses by value at enqueue time). The host
//     sees only the final actions and energies.
//   - Plans are tied to a TensorRT version and a GPU; Open picks the manifest
//     plan matching the running pair and refuses the others with the reason.
//
// # Build tags
//
// Without the tag "tensorrt" the package builds without cgo and NewBackend
// returns an error wrapping ErrNoTensorRT. With "tensorrt" it links the shim
// (build/trt/libefx_trt.a), libnvinfer and libcudart. With "tensorrt trtfake"
// it links instead a CPU fake of the C ABI (fake/trt_fake.c) whose energy is
// E = ½(1+t)‖a−μ‖², so CI tests the cgo path end to end.
//
// Engine building (trtexec on the target, manifest update) is in package
// trt/enginebuild; docs/jetson.md walks through the whole path.
package trt

// euler_step.cu — the device half of the fused EnergyFlow sampler.
//
// One Euler step of Algorithm 2 on the standardized actions, in place:
//     a[i] -= scales[k] * grad[i]      for i < n (n = batch · T_p · D_a)
// scales[k] = Δt · ½ · dσ²/dt(t_k) lives in device memory, so a CUDA graph
// captured once serves any schedule with the same K: the host refreshes the
// scale buffer, not the graph.
//
// Built by nvcc through CMake (-DTRT_WITH_CUDA=ON, enable_language(CUDA)).
// The launch uses cudaLaunchKernel instead of <<< >>> so the file also
// passes a host compiler's syntax check (-DTRT_SYNTAX_ONLY=ON with
// cuda_min/cuda_syntax_compat.h).
#include <cstdint>

#include <cuda_runtime_api.h>

namespace {

__global__ void efx_euler_step_kernel(float *__restrict__ a, const float *__restrict__ grad,
                                      const float *__restrict__ scales, int32_t k, int64_t n) {
    const float s = scales[k];
    const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        a[i] -= s * grad[i];
    }
}

} // namespace

extern "C" cudaError_t efx_launch_euler_step(float *a, const float *grad, const float *scales, int32_t k, int64_t n,
                                             cudaStream_t stream) {
    if (n <= 0) {
        return cudaSuccess;
    }
    constexpr int64_t kThreads = 256;
    constexpr int64_t kMaxBlocks = 1024; // grid-stride loop covers larger n
    int64_t blocks = (n + kThreads - 1) / kThreads;
    if (blocks > kMaxBlocks) {
        blocks = kMaxBlocks;
    }
    void *args[] = {&a, &grad, &scales, &k, &n};
    return cudaLaunchKernel(reinterpret_cast<const void *>(&efx_euler_step_kernel),
                            dim3(static_cast<unsigned int>(blocks)), dim3(static_cast<unsigned int>(kThreads)), args,
                            0, stream);
}

// euler_graph_bench.cu — measures one K-step sample replayed as a CUDA graph
// against eager launches of the same kernels, and checks both against the
// closed form. Needs a GPU and nvcc, not TensorRT: a stand-in kernel
// computes the gradient of E = ½(1+t)‖a−μ‖² where the real sampler enqueues
// the TensorRT engine.
//
//   build/trt/efx_euler_graph_bench [K=20] [batch=16] [iterations=2000]
//
// Built by CMake with -DTRT_WITH_CUDA=ON. Uses cudaLaunchKernel (no <<< >>>)
// so a host compiler can syntax-check it too.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime_api.h>

extern "C" cudaError_t efx_launch_euler_step(float *a, const float *grad, const float *scales, int32_t k, int64_t n,
                                             cudaStream_t stream);

namespace {

constexpr int64_t kRow = 16 * 10; // T_p × D_a of the paper-size policy

__global__ void stand_in_grad(const float *a, const float *mu, const float *ts, int32_t k, float *grad, int64_t n) {
    const float s = 1.0f + ts[k];
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
        grad[i] = s * (a[i] - mu[i]);
    }
}

void check(cudaError_t err, const char *what) {
    if (err != cudaSuccess) {
        std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(err));
        std::exit(1);
    }
}

struct Buffers {
    float *a, *grad, *mu, *ts, *scales;
    int64_t n;
    int32_t K;
};

// sample issues one K-step sample on stream: K × (gradient, Euler step)
// and the final gradient at γ (the real sampler's last enqueue).
cudaError_t sample(const Buffers &b, cudaStream_t stream) {
    const unsigned blocks = static_cast<unsigned>((b.n + 255) / 256);
    for (int32_t k = 0; k <= b.K; k++) {
        const float *a = b.a;
        const float *mu = b.mu;
        const float *ts = b.ts;
        float *grad = b.grad;
        int32_t kk = k;
        int64_t n = b.n;
        void *args[] = {&a, &mu, &ts, &kk, &grad, &n};
        cudaError_t err = cudaLaunchKernel(reinterpret_cast<const void *>(&stand_in_grad), dim3(blocks), dim3(256),
                                           args, 0, stream);
        if (err != cudaSuccess || k == b.K) {
            return err;
        }
        err = efx_launch_euler_step(b.a, b.grad, b.scales, k, b.n, stream);
        if (err != cudaSuccess) {
            return err;
        }
    }
    return cudaSuccess;
}

} // namespace

int main(int argc, char **argv) {
    const int32_t K = argc > 1 ? std::atoi(argv[1]) : 20;
    const int64_t batch = argc > 2 ? std::atoll(argv[2]) : 16;
    const int iters = argc > 3 ? std::atoi(argv[3]) : 2000;
    if (K < 1 || batch < 1 || iters < 1) {
        std::fprintf(stderr, "usage: %s [K>=1] [batch>=1] [iterations>=1]\n", argv[0]);
        return 2;
    }
    const int64_t n = batch * kRow;
    std::vector<float> a0(static_cast<size_t>(n)), mu(static_cast<size_t>(n)), ts(static_cast<size_t>(K) + 1),
        scales(static_cast<size_t>(K));
    for (int64_t i = 0; i < n; i++) {
        a0[static_cast<size_t>(i)] = static_cast<float>((i % 13) - 6) * 0.5f;
        mu[static_cast<size_t>(i)] = static_cast<float>(i % 5) * 0.1f;
    }
    double factor = 1;
    for (int32_t k = 0; k < K; k++) {
        ts[static_cast<size_t>(k)] = 1.0f - static_cast<float>(k) / static_cast<float>(K);
        scales[static_cast<size_t>(k)] = 0.05f * static_cast<float>(k + 1) / static_cast<float>(K);
        factor *= 1.0 - static_cast<double>(scales[static_cast<size_t>(k)]) * (1.0 + ts[static_cast<size_t>(k)]);
    }
    ts[static_cast<size_t>(K)] = 1e-3f;

    Buffers b{};
    b.n = n;
    b.K = K;
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    check(cudaMalloc(reinterpret_cast<void **>(&b.a), bytes), "cudaMalloc");
    check(cudaMalloc(reinterpret_cast<void **>(&b.grad), bytes), "cudaMalloc");
    check(cudaMalloc(reinterpret_cast<void **>(&b.mu), bytes), "cudaMalloc");
    check(cudaMalloc(reinterpret_cast<void **>(&b.ts), ts.size() * sizeof(float)), "cudaMalloc");
    check(cudaMalloc(reinterpret_cast<void **>(&b.scales), scales.size() * sizeof(float)), "cudaMalloc");
    cudaStream_t stream = nullptr;
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaMemcpyAsync(b.mu, mu.data(), bytes, cudaMemcpyHostToDevice, stream), "copy mu");
    check(cudaMemcpyAsync(b.ts, ts.data(), ts.size() * sizeof(float), cudaMemcpyHostToDevice, stream), "copy ts");
    check(cudaMemcpyAsync(b.scales, scales.data(), scales.size() * sizeof(float), cudaMemcpyHostToDevice, stream),
          "copy scales");

    std::vector<float> out(static_cast<size_t>(n));
    auto verify = [&](const char *mode) {
        check(cudaMemcpyAsync(out.data(), b.a, bytes, cudaMemcpyDeviceToHost, stream), "copy a");
        check(cudaStreamSynchronize(stream), "sync");
        double worst = 0;
        for (int64_t i = 0; i < n; i++) {
            const double want = mu[static_cast<size_t>(i)] + factor * (a0[static_cast<size_t>(i)] - mu[static_cast<size_t>(i)]);
            worst = std::fmax(worst, std::fabs(out[static_cast<size_t>(i)] - want));
        }
        std::printf("%-6s max |a_K - closed form| = %.3g\n", mode, worst);
        return worst < 1e-4;
    };
    auto reset = [&]() { check(cudaMemcpyAsync(b.a, a0.data(), bytes, cudaMemcpyHostToDevice, stream), "copy a0"); };

    // Eager.
    reset();
    check(sample(b, stream), "eager sample");
    bool ok = verify("eager");
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; i++) {
        check(sample(b, stream), "eager sample");
        check(cudaStreamSynchronize(stream), "sync");
    }
    const double eager_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;

    // One graph for the whole K-step sample.
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    check(cudaStreamSynchronize(stream), "sync");
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "begin capture");
    check(sample(b, stream), "captured sample");
    check(cudaStreamEndCapture(stream, &graph), "end capture");
    check(cudaGraphInstantiateWithFlags(&exec, graph, 0), "instantiate");
    reset();
    check(cudaGraphLaunch(exec, stream), "launch");
    ok = verify("graph") && ok;
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; i++) {
        check(cudaGraphLaunch(exec, stream), "launch");
        check(cudaStreamSynchronize(stream), "sync");
    }
    const double graph_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;

    std::printf("K=%d batch=%lld (%lld floats), %d iterations\n", K, static_cast<long long>(batch),
                static_cast<long long>(n), iters);
    std::printf("eager launches: %8.1f us per sample (%d kernels)\n", eager_us, 2 * K + 1);
    std::printf("graph replay:   %8.1f us per sample (%.2fx)\n", graph_us, eager_us / graph_us);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
    cudaFree(b.a);
    cudaFree(b.grad);
    cudaFree(b.mu);
    cudaFree(b.ts);
    cudaFree(b.scales);
    return ok ? 0 : 1;
}

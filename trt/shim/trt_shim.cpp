// trt_shim.cpp — the C ABI of efx_trt.h on TensorRT 10 and the CUDA runtime.
//
// TensorRT 10 API only: createInferRuntime → deserializeCudaEngine →
// createExecutionContext → setOptimizationProfileAsync → getIOTensorName /
// getTensorIOMode / getTensorDataType / getTensorShape / getProfileShape →
// setInputShape → setTensorAddress → enqueueV3. No binding indices, no
// enqueueV2, no destroy(): objects are owned by std::unique_ptr and deleted.
//
// Compiles with -Wall -Wextra -Werror against the TensorRT 10.3 headers and
// the newest headers of github.com/NVIDIA/TensorRT (see docs/jetson.md).
#include "efx_trt.h"

#include <NvInferRuntime.h>
#include <cuda_runtime_api.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

// The Euler-step kernel launcher (euler_step.cu).
extern "C" cudaError_t efx_launch_euler_step(float *a, const float *grad, const float *scales, int32_t k, int64_t n,
                                             cudaStream_t stream);

namespace {

thread_local std::string g_last_error;

// Logger forwards TensorRT's messages to the Go callback. TensorRT may log
// from its own threads: calls are serialized by a mutex.
class Logger final : public nvinfer1::ILogger {
  public:
    Logger(efx_log_fn fn, uintptr_t user, int32_t min_severity) : fn_(fn), user_(user), min_(min_severity) {}

    void log(Severity severity, nvinfer1::AsciiChar const *msg) noexcept override {
        int32_t const sev = static_cast<int32_t>(severity);
        if (fn_ == nullptr || sev > min_) {
            return;
        }
        std::lock_guard<std::mutex> lock(mu_);
        fn_(user_, sev, msg);
    }

    // emit logs one of the shim's own messages.
    void emit(int32_t severity, char const *msg) noexcept { log(static_cast<Severity>(severity), msg); }

  private:
    efx_log_fn fn_;
    uintptr_t user_;
    int32_t min_;
    std::mutex mu_;
};

} // namespace

struct efx_runtime {
    explicit efx_runtime(efx_log_fn fn, uintptr_t user, int32_t sev) : logger(fn, user, sev) {}
    Logger logger; // outlives runtime (declared first, destroyed last)
    std::unique_ptr<nvinfer1::IRuntime> runtime;
    int32_t device = 0;
    int64_t engines = 0;
};

struct efx_engine {
    efx_runtime *rt = nullptr;
    std::unique_ptr<nvinfer1::ICudaEngine> engine;
    std::unique_ptr<nvinfer1::IExecutionContext> ctx; // destroyed before engine
    cudaStream_t stream = nullptr;
    bool capturing = false;
    std::vector<std::string> names;

    ~efx_engine() {
        ctx.reset();
        engine.reset();
        if (stream != nullptr) {
            cudaStreamDestroy(stream);
        }
    }
};

struct efx_graph {
    efx_engine *e = nullptr;
    cudaGraphExec_t exec = nullptr;
};

namespace {

int fail(efx_runtime *rt, int status, char const *fmt, ...) __attribute__((format(printf, 3, 4)));

int fail(efx_runtime *rt, int status, char const *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    g_last_error = buf;
    if (rt != nullptr) {
        rt->logger.emit(EFX_LOG_ERROR, buf);
    }
    return status;
}

// cuda checks a CUDA call; on failure it clears the (non-sticky) error state
// and records the message.
int cuda(efx_runtime *rt, cudaError_t err, char const *what) {
    if (err == cudaSuccess) {
        return EFX_OK;
    }
    cudaGetLastError();
    return fail(rt, EFX_E_CUDA, "%s: %s (cudaError %d)", what, cudaGetErrorString(err), static_cast<int>(err));
}

std::string dims_string(nvinfer1::Dims const &d) {
    std::string s = "[";
    for (int32_t i = 0; i < d.nbDims; i++) {
        if (i > 0) {
            s += ",";
        }
        s += std::to_string(static_cast<long long>(d.d[i]));
    }
    return s + "]";
}

bool known_tensor(efx_engine const *e, char const *name) {
    for (auto const &n : e->names) {
        if (n == name) {
            return true;
        }
    }
    return false;
}

void *ptr(uint64_t dev) { return reinterpret_cast<void *>(static_cast<uintptr_t>(dev)); }

} // namespace

extern "C" {

int32_t efx_abi_version(void) { return EFX_ABI_VERSION; }

const char *efx_last_error(void) { return g_last_error.c_str(); }

int efx_runtime_create(int32_t device, efx_log_fn log, uintptr_t log_user, int32_t min_severity, efx_runtime **out) {
    if (out == nullptr) {
        return fail(nullptr, EFX_E_ARG, "efx_runtime_create: out is NULL");
    }
    *out = nullptr;
    std::unique_ptr<efx_runtime> rt(new (std::nothrow) efx_runtime(log, log_user, min_severity));
    if (!rt) {
        return fail(nullptr, EFX_E_NOMEM, "efx_runtime_create: out of memory");
    }
    rt->device = device;
    cudaError_t const set = cudaSetDevice(device);
    if (set == cudaErrorNoDevice || set == cudaErrorInsufficientDriver) {
        // The CUDA runtime without any driver (no libcuda.so.1) also reports
        // "driver version is insufficient": name the likely causes.
        cudaGetLastError();
        return fail(rt.get(), EFX_E_CUDA,
                    "no usable CUDA device: cudaSetDevice(%d): %s (cudaError %d) - is the NVIDIA driver "
                    "(libcuda.so.1) installed, new enough for this CUDA runtime, and a GPU visible "
                    "(nvidia-smi; JetPack on a Jetson)?",
                    device, cudaGetErrorString(set), static_cast<int>(set));
    }
    if (int st = cuda(rt.get(), set, "cudaSetDevice")) {
        return st;
    }
    // Mapped host memory needs this before the context exists; if the
    // context is already active the flag is set anyway on current CUDA.
    cudaError_t err = cudaSetDeviceFlags(cudaDeviceMapHost);
    if (err != cudaSuccess && err != cudaErrorSetOnActiveProcess) {
        return cuda(rt.get(), err, "cudaSetDeviceFlags(cudaDeviceMapHost)");
    }
    cudaGetLastError();
    rt->runtime.reset(nvinfer1::createInferRuntime(rt->logger));
    if (!rt->runtime) {
        return fail(rt.get(), EFX_E_TRT, "createInferRuntime failed (is libnvinfer's version the one the shim was built with?)");
    }
    *out = rt.release();
    return EFX_OK;
}

int efx_runtime_device_info(efx_runtime *rt, efx_device_info *info) {
    if (rt == nullptr || info == nullptr) {
        return fail(rt, EFX_E_ARG, "efx_runtime_device_info: NULL argument");
    }
    std::memset(info, 0, sizeof *info);
    info->device = rt->device;
    // cudaDeviceProp starts with char name[256] in every CUDA version; the
    // buffer is larger than the whole struct (about 1 KiB in CUDA 12).
    alignas(16) static thread_local unsigned char prop[16384];
#ifndef EFX_CUDA_MIN
    static_assert(sizeof(cudaDeviceProp) <= sizeof prop, "cudaDeviceProp grew");
#endif
    if (int st = cuda(rt, cudaGetDeviceProperties(reinterpret_cast<cudaDeviceProp *>(prop), rt->device),
                      "cudaGetDeviceProperties")) {
        return st;
    }
    std::memcpy(info->name, prop, sizeof info->name - 1);
    int v = 0;
    struct {
        cudaDeviceAttr attr;
        int32_t *dst;
    } const attrs[] = {
        {cudaDevAttrIntegrated, &info->integrated},
        {cudaDevAttrCanMapHostMemory, &info->can_map_host},
        {cudaDevAttrComputeCapabilityMajor, &info->cc_major},
        {cudaDevAttrComputeCapabilityMinor, &info->cc_minor},
    };
    for (auto const &a : attrs) {
        if (int st = cuda(rt, cudaDeviceGetAttribute(&v, a.attr, rt->device), "cudaDeviceGetAttribute")) {
            return st;
        }
        *a.dst = v;
    }
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
        info->total_mem = static_cast<int64_t>(total_bytes);
    }
    cudaGetLastError();
    info->trt_version = getInferLibVersion();
    if (cudaRuntimeGetVersion(&v) == cudaSuccess) {
        info->cuda_runtime_version = v;
    }
    return EFX_OK;
}

void efx_runtime_destroy(efx_runtime *rt) {
    if (rt == nullptr) {
        return;
    }
    if (rt->engines != 0) {
        rt->logger.emit(EFX_LOG_ERROR, "efx_runtime_destroy: engines still alive");
    }
    delete rt;
}

int efx_engine_load(efx_runtime *rt, const void *plan, size_t size, efx_engine **out) {
    if (rt == nullptr || plan == nullptr || out == nullptr || size == 0) {
        return fail(rt, EFX_E_ARG, "efx_engine_load: NULL or empty argument");
    }
    *out = nullptr;
    try {
        std::unique_ptr<efx_engine> e(new efx_engine);
        e->rt = rt;
        e->engine.reset(rt->runtime->deserializeCudaEngine(plan, size));
        if (!e->engine) {
            return fail(rt, EFX_E_TRT,
                        "deserializeCudaEngine failed: the TensorRT log says why (a plan built with another "
                        "TensorRT version or for another GPU is refused)");
        }
        e->ctx.reset(e->engine->createExecutionContext());
        if (!e->ctx) {
            return fail(rt, EFX_E_TRT, "createExecutionContext failed (out of device memory?)");
        }
        if (int st = cuda(rt, cudaStreamCreateWithFlags(&e->stream, cudaStreamNonBlocking), "cudaStreamCreate")) {
            return st;
        }
        if (e->engine->getNbOptimizationProfiles() > 0) {
            if (!e->ctx->setOptimizationProfileAsync(0, e->stream)) {
                return fail(rt, EFX_E_TRT, "setOptimizationProfileAsync(0) failed");
            }
            if (int st = cuda(rt, cudaStreamSynchronize(e->stream), "cudaStreamSynchronize")) {
                return st;
            }
        }
        int32_t const n = e->engine->getNbIOTensors();
        for (int32_t i = 0; i < n; i++) {
            e->names.emplace_back(e->engine->getIOTensorName(i));
        }
        rt->engines++;
        *out = e.release();
        return EFX_OK;
    } catch (std::bad_alloc const &) {
        return fail(rt, EFX_E_NOMEM, "efx_engine_load: out of memory");
    }
}

int32_t efx_engine_num_io(const efx_engine *e) { return e == nullptr ? 0 : static_cast<int32_t>(e->names.size()); }

int efx_engine_io(const efx_engine *e, int32_t index, efx_tensor_desc *out) {
    if (e == nullptr || out == nullptr || index < 0 || static_cast<size_t>(index) >= e->names.size()) {
        return fail(nullptr, EFX_E_ARG, "efx_engine_io: bad index %d", static_cast<int>(index));
    }
    std::memset(out, 0, sizeof *out);
    char const *name = e->names[static_cast<size_t>(index)].c_str();
    std::snprintf(out->name, sizeof out->name, "%s", name);
    nvinfer1::ICudaEngine const &eng = *e->engine;
    out->mode = static_cast<int32_t>(eng.getTensorIOMode(name));
    out->dtype = static_cast<int32_t>(eng.getTensorDataType(name));
    nvinfer1::Dims const d = eng.getTensorShape(name);
    if (d.nbDims < 0 || d.nbDims > EFX_MAX_DIMS) {
        return fail(e->rt, EFX_E_TRT, "tensor %s has %d dimensions (max %d)", name, static_cast<int>(d.nbDims),
                    EFX_MAX_DIMS);
    }
    out->nb_dims = d.nbDims;
    for (int32_t i = 0; i < d.nbDims; i++) {
        out->dims[i] = d.d[i];
    }
    if (eng.getTensorIOMode(name) == nvinfer1::TensorIOMode::kINPUT && eng.getNbOptimizationProfiles() > 0) {
        nvinfer1::Dims const lo = eng.getProfileShape(name, 0, nvinfer1::OptProfileSelector::kMIN);
        nvinfer1::Dims const op = eng.getProfileShape(name, 0, nvinfer1::OptProfileSelector::kOPT);
        nvinfer1::Dims const hi = eng.getProfileShape(name, 0, nvinfer1::OptProfileSelector::kMAX);
        for (int32_t i = 0; i < d.nbDims && i < lo.nbDims && i < op.nbDims && i < hi.nbDims; i++) {
            out->min[i] = lo.d[i];
            out->opt[i] = op.d[i];
            out->max[i] = hi.d[i];
        }
    }
    return EFX_OK;
}

int efx_engine_set_input_shape(efx_engine *e, const char *name, const int64_t *dims, int32_t nb_dims) {
    if (e == nullptr || name == nullptr || dims == nullptr || nb_dims < 0 || nb_dims > nvinfer1::Dims::MAX_DIMS) {
        return fail(e ? e->rt : nullptr, EFX_E_ARG, "efx_engine_set_input_shape: bad argument");
    }
    if (e->capturing) {
        return fail(e->rt, EFX_E_STATE, "setInputShape(%s) during stream capture", name);
    }
    if (!known_tensor(e, name)) {
        return fail(e->rt, EFX_E_ARG, "setInputShape: the plan has no tensor %s", name);
    }
    nvinfer1::Dims d{};
    d.nbDims = nb_dims;
    for (int32_t i = 0; i < nb_dims; i++) {
        d.d[i] = dims[i];
    }
    if (!e->ctx->setInputShape(name, d)) {
        std::string range;
        if (e->engine->getNbOptimizationProfiles() > 0) {
            range = " (profile 0: min " + dims_string(e->engine->getProfileShape(name, 0, nvinfer1::OptProfileSelector::kMIN)) +
                    ", max " + dims_string(e->engine->getProfileShape(name, 0, nvinfer1::OptProfileSelector::kMAX)) + ")";
        }
        return fail(e->rt, EFX_E_SHAPE, "setInputShape(%s, %s) rejected%s", name, dims_string(d).c_str(),
                    range.c_str());
    }
    return EFX_OK;
}

int efx_engine_set_tensor_address(efx_engine *e, const char *name, uint64_t dev) {
    if (e == nullptr || name == nullptr) {
        return fail(nullptr, EFX_E_ARG, "efx_engine_set_tensor_address: NULL argument");
    }
    if (!known_tensor(e, name)) {
        return fail(e->rt, EFX_E_ARG, "setTensorAddress: the plan has no tensor %s", name);
    }
    if (!e->ctx->setTensorAddress(name, ptr(dev))) {
        return fail(e->rt, EFX_E_TRT, "setTensorAddress(%s) failed (misaligned address?)", name);
    }
    return EFX_OK;
}

int efx_engine_enqueue(efx_engine *e) {
    if (e == nullptr) {
        return fail(nullptr, EFX_E_ARG, "efx_engine_enqueue: NULL engine");
    }
    if (!e->ctx->enqueueV3(e->stream)) {
        return fail(e->rt, EFX_E_TRT, "enqueueV3 failed%s", e->capturing ? " during stream capture" : "");
    }
    return EFX_OK;
}

void efx_engine_destroy(efx_engine *e) {
    if (e == nullptr) {
        return;
    }
    if (e->stream != nullptr) {
        cudaStreamSynchronize(e->stream);
        cudaGetLastError();
    }
    e->rt->engines--;
    delete e;
}

int efx_mem_alloc(efx_runtime *rt, int32_t kind, size_t bytes, void **host, uint64_t *dev) {
    if (rt == nullptr || host == nullptr || dev == nullptr || bytes == 0) {
        return fail(rt, EFX_E_ARG, "efx_mem_alloc: bad argument");
    }
    *host = nullptr;
    *dev = 0;
    void *p = nullptr;
    switch (kind) {
    case EFX_MEM_DEVICE:
        if (cudaMalloc(&p, bytes) != cudaSuccess) {
            cudaGetLastError();
            return fail(rt, EFX_E_NOMEM, "cudaMalloc(%zu bytes) failed", bytes);
        }
        *dev = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p));
        return EFX_OK;
    case EFX_MEM_PINNED:
        if (cudaHostAlloc(&p, bytes, cudaHostAllocDefault) != cudaSuccess) {
            cudaGetLastError();
            return fail(rt, EFX_E_NOMEM, "cudaHostAlloc(%zu bytes) failed", bytes);
        }
        *host = p;
        return EFX_OK;
    case EFX_MEM_MAPPED: {
        if (cudaHostAlloc(&p, bytes, cudaHostAllocMapped) != cudaSuccess) {
            cudaGetLastError();
            return fail(rt, EFX_E_NOMEM, "cudaHostAlloc(%zu bytes, mapped) failed", bytes);
        }
        void *d = nullptr;
        if (int st = cuda(rt, cudaHostGetDevicePointer(&d, p, 0), "cudaHostGetDevicePointer")) {
            cudaFreeHost(p);
            return st;
        }
        *host = p;
        *dev = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(d));
        return EFX_OK;
    }
    default:
        return fail(rt, EFX_E_ARG, "efx_mem_alloc: unknown kind %d", static_cast<int>(kind));
    }
}

void efx_mem_free(efx_runtime *rt, int32_t kind, void *host, uint64_t dev) {
    (void)rt;
    if (kind == EFX_MEM_DEVICE) {
        if (dev != 0) {
            cudaFree(ptr(dev));
        }
    } else if (host != nullptr) {
        cudaFreeHost(host);
    }
    cudaGetLastError();
}

int efx_memcpy_h2d(efx_engine *e, uint64_t dst, const void *src, size_t bytes) {
    if (e == nullptr || src == nullptr) {
        return fail(nullptr, EFX_E_ARG, "efx_memcpy_h2d: NULL argument");
    }
    return cuda(e->rt, cudaMemcpyAsync(ptr(dst), src, bytes, cudaMemcpyHostToDevice, e->stream), "cudaMemcpyAsync(H2D)");
}

int efx_memcpy_d2h(efx_engine *e, void *dst, uint64_t src, size_t bytes) {
    if (e == nullptr || dst == nullptr) {
        return fail(nullptr, EFX_E_ARG, "efx_memcpy_d2h: NULL argument");
    }
    return cuda(e->rt, cudaMemcpyAsync(dst, ptr(src), bytes, cudaMemcpyDeviceToHost, e->stream), "cudaMemcpyAsync(D2H)");
}

int efx_euler_step(efx_engine *e, uint64_t a, uint64_t grad, uint64_t scales, int32_t k, int64_t n) {
    if (e == nullptr || k < 0 || n <= 0) {
        return fail(nullptr, EFX_E_ARG, "efx_euler_step: bad argument");
    }
    return cuda(e->rt,
                efx_launch_euler_step(static_cast<float *>(ptr(a)), static_cast<const float *>(ptr(grad)),
                                      static_cast<const float *>(ptr(scales)), k, n, e->stream),
                "Euler step kernel launch");
}

int efx_capture_begin(efx_engine *e) {
    if (e == nullptr) {
        return fail(nullptr, EFX_E_ARG, "efx_capture_begin: NULL engine");
    }
    if (e->capturing) {
        return fail(e->rt, EFX_E_STATE, "efx_capture_begin: already capturing");
    }
    // Thread-local mode: other threads' unrelated CUDA calls cannot
    // invalidate this capture.
    if (int st = cuda(e->rt, cudaStreamBeginCapture(e->stream, cudaStreamCaptureModeThreadLocal),
                      "cudaStreamBeginCapture")) {
        return st;
    }
    e->capturing = true;
    return EFX_OK;
}

int efx_capture_end(efx_engine *e, efx_graph **out) {
    if (e == nullptr || out == nullptr) {
        return fail(nullptr, EFX_E_ARG, "efx_capture_end: NULL argument");
    }
    *out = nullptr;
    if (!e->capturing) {
        return fail(e->rt, EFX_E_STATE, "efx_capture_end: not capturing");
    }
    e->capturing = false;
    cudaGraph_t graph = nullptr;
    cudaError_t err = cudaStreamEndCapture(e->stream, &graph);
    if (err != cudaSuccess || graph == nullptr) {
        if (graph != nullptr) {
            cudaGraphDestroy(graph);
        }
        cudaGetLastError();
        return fail(e->rt, EFX_E_CAPTURE, "cudaStreamEndCapture: %s", cudaGetErrorString(err));
    }
    cudaGraphExec_t exec = nullptr;
    err = cudaGraphInstantiateWithFlags(&exec, graph, 0);
    cudaGraphDestroy(graph);
    if (err != cudaSuccess) {
        cudaGetLastError();
        return fail(e->rt, EFX_E_CAPTURE, "cudaGraphInstantiate: %s", cudaGetErrorString(err));
    }
    efx_graph *g = new (std::nothrow) efx_graph;
    if (g == nullptr) {
        cudaGraphExecDestroy(exec);
        return fail(e->rt, EFX_E_NOMEM, "efx_capture_end: out of memory");
    }
    g->e = e;
    g->exec = exec;
    *out = g;
    return EFX_OK;
}

int efx_graph_launch(efx_engine *e, efx_graph *g) {
    if (e == nullptr || g == nullptr || g->e != e) {
        return fail(nullptr, EFX_E_ARG, "efx_graph_launch: bad argument");
    }
    return cuda(e->rt, cudaGraphLaunch(g->exec, e->stream), "cudaGraphLaunch");
}

void efx_graph_destroy(efx_graph *g) {
    if (g == nullptr) {
        return;
    }
    cudaGraphExecDestroy(g->exec);
    delete g;
}

int efx_stream_sync(efx_engine *e) {
    if (e == nullptr) {
        return fail(nullptr, EFX_E_ARG, "efx_stream_sync: NULL engine");
    }
    return cuda(e->rt, cudaStreamSynchronize(e->stream), "cudaStreamSynchronize");
}

} // extern "C"

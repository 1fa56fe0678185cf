/*
 * efx_trt.h — the C ABI between the Go package trt and the TensorRT shim.
 *
 * TensorRT has no C API; trt_shim.cpp implements these functions in C++ on
 * TensorRT 10 and the CUDA runtime. trt/fake/trt_fake.c implements the same
 * functions on the CPU for tests (build tag trtfake).
 *
 * The ABI is deliberately low level (allocate, copy, set shape, bind,
 * enqueue, capture, launch): the policy — when to run eagerly, when to
 * capture a CUDA graph, how the fused K-step sampler is laid out — lives in
 * Go, where the fake exercises it. Rules:
 *
 *  - Every function returning int returns EFX_OK (0) or an EFX_E_* code; the
 *    message of the last failure on the calling thread is efx_last_error().
 *  - All calls for one runtime and its engines come from one OS thread (the
 *    Go side locks a goroutine to it); only the log callback may be called
 *    from other threads (TensorRT's worker threads).
 *  - Device addresses travel as uint64_t; host pointers are C memory from
 *    efx_mem_alloc, never Go memory.
 *  - Copies, enqueues and Euler steps go onto the engine's own non-default
 *    stream, in order; between efx_capture_begin and efx_capture_end they are
 *    recorded into a CUDA graph instead of executed.
 */
#ifndef EFX_TRT_H
#define EFX_TRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EFX_ABI_VERSION 1
#define EFX_MAX_DIMS 8
#define EFX_NAME_MAX 128
#define EFX_DEVICE_NAME_MAX 256

/* Status codes. */
#define EFX_OK 0
#define EFX_E_ARG 1     /* bad argument (null, unknown tensor name, bad size) */
#define EFX_E_CUDA 2    /* a CUDA runtime call failed */
#define EFX_E_TRT 3     /* a TensorRT call failed (see the log for details) */
#define EFX_E_SHAPE 4   /* shape rejected (outside the optimization profile) */
#define EFX_E_STATE 5   /* call not valid in this state (e.g. not capturing) */
#define EFX_E_NOMEM 6   /* allocation failed */
#define EFX_E_CAPTURE 7 /* stream capture or graph instantiation failed */

/* Tensor I/O modes (values of nvinfer1::TensorIOMode). */
#define EFX_IO_NONE 0
#define EFX_IO_INPUT 1
#define EFX_IO_OUTPUT 2

/* Data types (values of nvinfer1::DataType). */
#define EFX_DT_FLOAT 0
#define EFX_DT_HALF 1
#define EFX_DT_INT8 2
#define EFX_DT_INT32 3
#define EFX_DT_BOOL 4
#define EFX_DT_UINT8 5
#define EFX_DT_FP8 6
#define EFX_DT_BF16 7
#define EFX_DT_INT64 8

/* Memory kinds for efx_mem_alloc. */
#define EFX_MEM_DEVICE 0 /* cudaMalloc: dev only, host is NULL */
#define EFX_MEM_PINNED 1 /* cudaHostAlloc(Default): host only, dev is 0 */
#define EFX_MEM_MAPPED 2 /* cudaHostAlloc(Mapped) + cudaHostGetDevicePointer: both */

/* Log severities (values of nvinfer1::ILogger::Severity). */
#define EFX_LOG_INTERNAL_ERROR 0
#define EFX_LOG_ERROR 1
#define EFX_LOG_WARNING 2
#define EFX_LOG_INFO 3
#define EFX_LOG_VERBOSE 4

typedef struct efx_runtime efx_runtime;
typedef struct efx_engine efx_engine;
typedef struct efx_graph efx_graph;

/* Log callback; may be called from any thread, never concurrently (the
 * shim serializes calls). msg is valid only during the call. */
typedef void (*efx_log_fn)(uintptr_t user, int32_t severity, const char *msg);

typedef struct {
    char name[EFX_DEVICE_NAME_MAX]; /* cudaDeviceProp.name, e.g. "Orin" */
    int32_t device;
    int32_t integrated;   /* cudaDeviceProp.integrated: shares memory with the host */
    int32_t can_map_host; /* cudaDeviceProp.canMapHostMemory */
    int32_t cc_major, cc_minor;
    int64_t total_mem;
    int32_t trt_version;  /* getInferLibVersion(): major*10000 + minor*100 + patch */
    int32_t cuda_runtime_version; /* cudaRuntimeGetVersion() */
} efx_device_info;

typedef struct {
    char name[EFX_NAME_MAX];
    int32_t mode;  /* EFX_IO_* */
    int32_t dtype; /* EFX_DT_* */
    int32_t nb_dims;
    int64_t dims[EFX_MAX_DIMS]; /* engine shape; -1 marks a dynamic dimension */
    /* Optimization profile 0 (inputs only; zero for outputs). */
    int64_t min[EFX_MAX_DIMS], opt[EFX_MAX_DIMS], max[EFX_MAX_DIMS];
} efx_tensor_desc;

int32_t efx_abi_version(void);
/* Message of the last failure on this thread ("" if none). */
const char *efx_last_error(void);

/* Runtime: selects the device, creates the TensorRT runtime with a logger
 * that forwards messages at or above min_severity to log. */
int efx_runtime_create(int32_t device, efx_log_fn log, uintptr_t log_user, int32_t min_severity,
                       efx_runtime **out);
int efx_runtime_device_info(efx_runtime *rt, efx_device_info *info);
/* Destroys the runtime; engines must be destroyed first. NULL is a no-op. */
void efx_runtime_destroy(efx_runtime *rt);

/* Engine: deserializes a plan, creates its execution context and a
 * non-blocking stream, selects optimization profile 0. */
int efx_engine_load(efx_runtime *rt, const void *plan, size_t size, efx_engine **out);
int32_t efx_engine_num_io(const efx_engine *e);
int efx_engine_io(const efx_engine *e, int32_t index, efx_tensor_desc *out);
int efx_engine_set_input_shape(efx_engine *e, const char *name, const int64_t *dims, int32_t nb_dims);
int efx_engine_set_tensor_address(efx_engine *e, const char *name, uint64_t dev);
/* enqueueV3 on the engine's stream. */
int efx_engine_enqueue(efx_engine *e);
/* Waits for the stream, destroys graphs' context, stream and engine. NULL is a no-op. */
void efx_engine_destroy(efx_engine *e);

int efx_mem_alloc(efx_runtime *rt, int32_t kind, size_t bytes, void **host, uint64_t *dev);
void efx_mem_free(efx_runtime *rt, int32_t kind, void *host, uint64_t dev);

/* Asynchronous copies on the engine's stream (host memory must be pinned or mapped). */
int efx_memcpy_h2d(efx_engine *e, uint64_t dst, const void *src, size_t bytes);
int efx_memcpy_d2h(efx_engine *e, void *dst, uint64_t src, size_t bytes);

/* One Euler step on the device: a[i] -= scales[k] * grad[i] for i < n. */
int efx_euler_step(efx_engine *e, uint64_t a, uint64_t grad, uint64_t scales, int32_t k, int64_t n);

/* CUDA graphs: begin/end stream capture on the engine's stream. capture_end
 * always leaves capture mode; on success *out is an instantiated graph. */
int efx_capture_begin(efx_engine *e);
int efx_capture_end(efx_engine *e, efx_graph **out);
int efx_graph_launch(efx_engine *e, efx_graph *g);
void efx_graph_destroy(efx_graph *g);

int efx_stream_sync(efx_engine *e);

#ifdef __cplusplus
}
#endif

#endif /* EFX_TRT_H */

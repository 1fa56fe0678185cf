/*
 * trt_fake.h — control surface of the CPU fake of the efx_trt.h ABI.
 * Test-only: compiled into package trt with build tags "tensorrt trtfake".
 */
#ifndef EFX_TRT_FAKE_H
#define EFX_TRT_FAKE_H

#include <stdint.h>

#include "../shim/efx_trt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int64_t live_runtimes, live_engines, live_allocs, live_graphs;
    int64_t captures;          /* successful efx_capture_end */
    int64_t capture_failures;  /* failed efx_capture_end */
    int64_t launches;          /* efx_graph_launch */
    int64_t eager_enqueues;    /* enqueues executed outside capture */
    int64_t captured_enqueues; /* enqueues recorded into graphs */
    int64_t euler_steps;       /* Euler steps executed (eager or replayed) */
    int64_t h2d, d2h;          /* copies executed (eager or replayed) */
    int64_t syncs;
} efx_fake_stats;

/* Device the fake pretends to be; reset() restores "FakeGPU", discrete,
 * TensorRT 10.3.0. */
void efx_fake_configure(const char *gpu_name, int32_t integrated, int32_t trt_version);
/* Clears counters, injected failures and the configuration. */
void efx_fake_reset(void);
void efx_fake_get_stats(efx_fake_stats *out);
/* The next call of op fails with status. Ops: "runtime_create", "engine_load",
 * "set_input_shape", "set_tensor_address", "enqueue", "mem_alloc", "memcpy",
 * "euler_step", "capture_begin", "capture_end", "graph_launch", "sync". */
void efx_fake_fail_next(const char *op, int32_t status);

#ifdef __cplusplus
}
#endif

#endif

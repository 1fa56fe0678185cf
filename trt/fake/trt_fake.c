/*
 * trt_fake.c — a CPU FAKE of the efx_trt.h ABI, for tests only.
 *
 * It is not TensorRT and runs no network. It lets CI compile, link and test
 * the Go cgo binding (build tags "tensorrt trtfake") with the same calls the
 * real shim gets, and models the behaviour the Go side must respect:
 *
 *  - Plans are small text files (example: trt/testdata/fake_energy_grad.plan):
 *        EFXFAKEPLAN 1
 *        trt 100300
 *        gpu FakeGPU
 *        profile 1 1 16            (batch min opt max of profile 0)
 *        input a_t float 16 10     (dims after the dynamic batch dimension)
 *        output energy float
 *    A plan for another TensorRT version or GPU fails to deserialize, as a
 *    real plan does.
 *  - The analytic energy model, when the plan has inputs a_t, cond, t and
 *    outputs grad_a, energy (P = elements of one a_t row, C = of one cond row):
 *        mu_j   = cond[j mod C]                 j < P
 *        E      = 1/2 (1 + t) |a - mu|^2
 *        grad_a = (1 + t) (a - mu)
 *  - The analytic state term, when the plan has the input cond and the
 *    output state_energy (the bundle's optional state graph):
 *        state_energy = 1/2 |cond|^2 - 1
 *    (engines/enginestest's StateEnergy, engines/testdata/quad/state_energy.onnx).
 *    Other plans get zero outputs.
 *  - Memory: DEVICE allocations are separate from PINNED host memory, so a
 *    missing copy shows up as wrong numbers; MAPPED memory has dev == host.
 *    Tensor addresses and Euler-step operands must lie in DEVICE or MAPPED
 *    allocations; tensor addresses must be 256-byte aligned (TensorRT's
 *    rule for setTensorAddress).
 *  - Streams: every operation runs synchronously unless the engine is
 *    capturing; then it is recorded (tensor addresses and shapes by value, as
 *    enqueueV3 does) and executed by efx_graph_launch.
 *  - The first enqueue after a shape change must be eager: starting a capture
 *    while a shape change is pending invalidates the capture (TensorRT may
 *    allocate or synchronize there), and efx_capture_end then fails.
 *  - efx_fake_fail_next injects one failure into a named operation.
 *
 * Not thread-safe: like the real shim it expects one owner thread.
 */
#include "trt_fake.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_MAX_IO 16
#define FAKE_MAX_ALLOCS 4096

static _Thread_local char fake_err[512];

typedef struct {
    char gpu[EFX_DEVICE_NAME_MAX];
    int32_t integrated;
    int32_t trt_version;
} fake_config;

static fake_config cfg = {"FakeGPU", 0, 100300};
static efx_fake_stats stats;
static char fail_op[64];
static int32_t fail_status;

typedef struct {
    void *ptr;
    size_t bytes;
    int32_t kind;
} fake_alloc;

static fake_alloc allocs[FAKE_MAX_ALLOCS];

struct efx_runtime {
    efx_log_fn log;
    uintptr_t log_user;
    int32_t min_severity;
    int32_t device;
    int64_t engines;
};

typedef struct {
    char name[EFX_NAME_MAX];
    int32_t mode, dtype, nb_dims;
    int64_t dims[EFX_MAX_DIMS];
    int64_t cur_batch; /* inputs: batch of the current shape, 0 = unset */
    uint64_t addr;
} fake_tensor;

enum { OP_H2D, OP_D2H, OP_ENQUEUE, OP_EULER };

typedef struct {
    int kind;
    uint64_t dst, src;
    size_t bytes;
    uint64_t a, grad, scales;
    int32_t k;
    int64_t n;
    uint64_t addr[FAKE_MAX_IO];
    int64_t batch;
} fake_op;

struct efx_engine {
    efx_runtime *rt;
    int32_t n;
    fake_tensor t[FAKE_MAX_IO];
    int64_t pmin, popt, pmax;
    int shape_dirty;
    int capturing;
    int capture_broken;
    char capture_why[256];
    fake_op *ops;
    size_t nops, cap;
};

struct efx_graph {
    efx_engine *e;
    fake_op *ops;
    size_t nops;
};

static void fake_log(efx_runtime *rt, int32_t sev, const char *msg) {
    if (rt && rt->log && sev <= rt->min_severity) {
        rt->log(rt->log_user, sev, msg);
    }
}

static int fail(efx_runtime *rt, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(fake_err, sizeof fake_err, fmt, ap);
    va_end(ap);
    fake_log(rt, EFX_LOG_ERROR, fake_err);
    return status;
}

/* injected returns the injected status for op, or 0. */
static int injected(const char *op) {
    if (fail_op[0] != '\0' && strcmp(fail_op, op) == 0) {
        fail_op[0] = '\0';
        snprintf(fake_err, sizeof fake_err, "fake: injected failure in %s", op);
        return fail_status ? fail_status : EFX_E_CUDA;
    }
    return 0;
}

void efx_fake_configure(const char *gpu_name, int32_t integrated, int32_t trt_version) {
    snprintf(cfg.gpu, sizeof cfg.gpu, "%s", gpu_name);
    cfg.integrated = integrated;
    cfg.trt_version = trt_version;
}

void efx_fake_reset(void) {
    int64_t runtimes = stats.live_runtimes, engines = stats.live_engines, a = stats.live_allocs,
            g = stats.live_graphs;
    memset(&stats, 0, sizeof stats);
    /* Live counts describe objects, not history: keep them. */
    stats.live_runtimes = runtimes;
    stats.live_engines = engines;
    stats.live_allocs = a;
    stats.live_graphs = g;
    fail_op[0] = '\0';
    fail_status = 0;
    efx_fake_configure("FakeGPU", 0, 100300);
}

void efx_fake_get_stats(efx_fake_stats *out) { *out = stats; }

void efx_fake_fail_next(const char *op, int32_t status) {
    snprintf(fail_op, sizeof fail_op, "%s", op);
    fail_status = status;
}

int32_t efx_abi_version(void) { return EFX_ABI_VERSION; }

const char *efx_last_error(void) { return fake_err; }

int efx_runtime_create(int32_t device, efx_log_fn log, uintptr_t log_user, int32_t min_severity,
                       efx_runtime **out) {
    int st;
    if (!out) return fail(NULL, EFX_E_ARG, "fake: runtime_create: out is NULL");
    if ((st = injected("runtime_create"))) return st;
    if (device != 0) return fail(NULL, EFX_E_CUDA, "fake: cudaSetDevice(%d): invalid device ordinal", device);
    efx_runtime *rt = calloc(1, sizeof *rt);
    if (!rt) return fail(NULL, EFX_E_NOMEM, "fake: out of memory");
    rt->log = log;
    rt->log_user = log_user;
    rt->min_severity = min_severity;
    rt->device = device;
    stats.live_runtimes++;
    fake_log(rt, EFX_LOG_INFO, "fake: runtime created");
    *out = rt;
    return EFX_OK;
}

int efx_runtime_device_info(efx_runtime *rt, efx_device_info *info) {
    if (!rt || !info) return fail(rt, EFX_E_ARG, "fake: device_info: NULL argument");
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "%s", cfg.gpu);
    info->device = rt->device;
    info->integrated = cfg.integrated;
    info->can_map_host = 1;
    info->cc_major = cfg.integrated ? 8 : 9;
    info->cc_minor = cfg.integrated ? 7 : 0;
    info->total_mem = (int64_t)1 << 33;
    info->trt_version = cfg.trt_version;
    info->cuda_runtime_version = 12060;
    return EFX_OK;
}

void efx_runtime_destroy(efx_runtime *rt) {
    if (!rt) return;
    if (rt->engines != 0) {
        fake_log(rt, EFX_LOG_ERROR, "fake: runtime destroyed with live engines");
    }
    stats.live_runtimes--;
    free(rt);
}

/* ---- plans ---- */

static int parse_dtype(const char *s) {
    if (strcmp(s, "float") == 0) return EFX_DT_FLOAT;
    if (strcmp(s, "half") == 0) return EFX_DT_HALF;
    if (strcmp(s, "int32") == 0) return EFX_DT_INT32;
    if (strcmp(s, "int64") == 0) return EFX_DT_INT64;
    return -1;
}

static void version_string(int32_t v, char *buf, size_t n) {
    snprintf(buf, n, "%d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
}

int efx_engine_load(efx_runtime *rt, const void *plan, size_t size, efx_engine **out) {
    int st;
    if (!rt || !plan || !out) return fail(rt, EFX_E_ARG, "fake: engine_load: NULL argument");
    if ((st = injected("engine_load"))) return st;
    char *text = malloc(size + 1);
    if (!text) return fail(rt, EFX_E_NOMEM, "fake: out of memory");
    memcpy(text, plan, size);
    text[size] = '\0';
    efx_engine *e = calloc(1, sizeof *e);
    if (!e) {
        free(text);
        return fail(rt, EFX_E_NOMEM, "fake: out of memory");
    }
    e->rt = rt;
    int line_no = 0, have_header = 0;
    st = EFX_OK;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        line_no++;
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        char word[32] = {0};
        int used = 0;
        if (sscanf(line, "%31s%n", word, &used) != 1) continue;
        char *rest = line + used;
        if (!have_header) {
            if (strcmp(word, "EFXFAKEPLAN") != 0) {
                st = fail(rt, EFX_E_TRT,
                          "fake: deserializeCudaEngine: not a fake plan (a real TensorRT plan needs the real shim)");
                break;
            }
            have_header = 1;
        } else if (strcmp(word, "trt") == 0) {
            int v = 0;
            if (sscanf(rest, "%d", &v) != 1 || v != cfg.trt_version) {
                char want[32], got[32];
                version_string(cfg.trt_version, want, sizeof want);
                version_string(v, got, sizeof got);
                st = fail(rt, EFX_E_TRT,
                          "fake: deserializeCudaEngine: plan was built with TensorRT %s, this is TensorRT %s", got,
                          want);
                break;
            }
        } else if (strcmp(word, "gpu") == 0) {
            while (*rest == ' ' || *rest == '\t') rest++;
            size_t n = strlen(rest);
            while (n > 0 && (rest[n - 1] == ' ' || rest[n - 1] == '\r' || rest[n - 1] == '\t')) rest[--n] = '\0';
            if (strcmp(rest, cfg.gpu) != 0) {
                st = fail(rt, EFX_E_TRT, "fake: deserializeCudaEngine: plan was built for GPU %s, this is %s", rest,
                          cfg.gpu);
                break;
            }
        } else if (strcmp(word, "profile") == 0) {
            long long a, b, c;
            if (sscanf(rest, "%lld %lld %lld", &a, &b, &c) != 3) {
                st = fail(rt, EFX_E_TRT, "fake: plan line %d: profile needs min opt max", line_no);
                break;
            }
            e->pmin = a;
            e->popt = b;
            e->pmax = c;
        } else if (strcmp(word, "input") == 0 || strcmp(word, "output") == 0) {
            if (e->n == FAKE_MAX_IO) {
                st = fail(rt, EFX_E_TRT, "fake: plan line %d: too many tensors", line_no);
                break;
            }
            fake_tensor *t = &e->t[e->n];
            char dt[16] = {0};
            int u2 = 0;
            if (sscanf(rest, "%127s %15s%n", t->name, dt, &u2) != 2 || parse_dtype(dt) < 0) {
                st = fail(rt, EFX_E_TRT, "fake: plan line %d: want NAME DTYPE DIMS...", line_no);
                break;
            }
            t->mode = word[0] == 'i' ? EFX_IO_INPUT : EFX_IO_OUTPUT;
            t->dtype = parse_dtype(dt);
            t->dims[0] = -1;
            t->nb_dims = 1;
            char *p = rest + u2;
            long long d;
            int u3 = 0;
            while (sscanf(p, "%lld%n", &d, &u3) == 1 && t->nb_dims < EFX_MAX_DIMS) {
                t->dims[t->nb_dims++] = d;
                p += u3;
            }
            e->n++;
        } else {
            st = fail(rt, EFX_E_TRT, "fake: plan line %d: unknown key %s", line_no, word);
            break;
        }
    }
    free(text);
    if (st == EFX_OK && !have_header) st = fail(rt, EFX_E_TRT, "fake: deserializeCudaEngine: empty plan");
    if (st == EFX_OK && (e->pmin < 1 || e->pmin > e->popt || e->popt > e->pmax))
        st = fail(rt, EFX_E_TRT, "fake: plan has no valid profile line");
    if (st != EFX_OK) {
        free(e);
        return st;
    }
    rt->engines++;
    stats.live_engines++;
    char msg[128];
    snprintf(msg, sizeof msg, "fake: deserialized plan with %d I/O tensors", e->n);
    fake_log(rt, EFX_LOG_INFO, msg);
    *out = e;
    return EFX_OK;
}

int32_t efx_engine_num_io(const efx_engine *e) { return e ? e->n : 0; }

int efx_engine_io(const efx_engine *e, int32_t index, efx_tensor_desc *out) {
    if (!e || !out || index < 0 || index >= e->n) return fail(NULL, EFX_E_ARG, "fake: engine_io: bad index %d", index);
    const fake_tensor *t = &e->t[index];
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", t->name);
    out->mode = t->mode;
    out->dtype = t->dtype;
    out->nb_dims = t->nb_dims;
    for (int i = 0; i < t->nb_dims; i++) {
        out->dims[i] = t->dims[i];
        if (t->mode == EFX_IO_INPUT) {
            out->min[i] = i == 0 ? e->pmin : t->dims[i];
            out->opt[i] = i == 0 ? e->popt : t->dims[i];
            out->max[i] = i == 0 ? e->pmax : t->dims[i];
        }
    }
    return EFX_OK;
}

static fake_tensor *find(efx_engine *e, const char *name) {
    for (int i = 0; i < e->n; i++) {
        if (strcmp(e->t[i].name, name) == 0) return &e->t[i];
    }
    return NULL;
}

int efx_engine_set_input_shape(efx_engine *e, const char *name, const int64_t *dims, int32_t nb_dims) {
    int st;
    if (!e || !name || !dims) return fail(NULL, EFX_E_ARG, "fake: set_input_shape: NULL argument");
    if ((st = injected("set_input_shape"))) return st;
    if (e->capturing) return fail(e->rt, EFX_E_STATE, "fake: setInputShape(%s) during stream capture", name);
    fake_tensor *t = find(e, name);
    if (!t || t->mode != EFX_IO_INPUT) return fail(e->rt, EFX_E_ARG, "fake: setInputShape: no input named %s", name);
    if (nb_dims != t->nb_dims)
        return fail(e->rt, EFX_E_SHAPE, "fake: setInputShape(%s): rank %d, engine has rank %d", name, nb_dims,
                    t->nb_dims);
    for (int i = 1; i < nb_dims; i++) {
        if (dims[i] != t->dims[i])
            return fail(e->rt, EFX_E_SHAPE, "fake: setInputShape(%s): dim %d is %lld, engine has %lld", name, i,
                        (long long)dims[i], (long long)t->dims[i]);
    }
    if (dims[0] < e->pmin || dims[0] > e->pmax)
        return fail(e->rt, EFX_E_SHAPE, "fake: setInputShape(%s): batch %lld outside profile 0 [%lld, %lld]", name,
                    (long long)dims[0], (long long)e->pmin, (long long)e->pmax);
    if (t->cur_batch != dims[0]) e->shape_dirty = 1;
    t->cur_batch = dims[0];
    return EFX_OK;
}

static const fake_alloc *lookup(uint64_t addr, size_t bytes) {
    for (int i = 0; i < FAKE_MAX_ALLOCS; i++) {
        const fake_alloc *a = &allocs[i];
        if (!a->ptr || a->kind == EFX_MEM_PINNED) continue;
        uint64_t base = (uint64_t)(uintptr_t)a->ptr;
        if (addr >= base && addr + bytes <= base + a->bytes) return a;
    }
    return NULL;
}

int efx_engine_set_tensor_address(efx_engine *e, const char *name, uint64_t dev) {
    int st;
    if (!e || !name) return fail(NULL, EFX_E_ARG, "fake: set_tensor_address: NULL argument");
    if ((st = injected("set_tensor_address"))) return st;
    fake_tensor *t = find(e, name);
    if (!t) return fail(e->rt, EFX_E_ARG, "fake: setTensorAddress: no tensor named %s", name);
    if (!lookup(dev, 4)) return fail(e->rt, EFX_E_ARG, "fake: setTensorAddress(%s): not device memory", name);
    if (dev % 256 != 0)
        return fail(e->rt, EFX_E_TRT, "fake: setTensorAddress(%s): address not 256-byte aligned", name);
    t->addr = dev;
    return EFX_OK;
}

static int record(efx_engine *e, fake_op op) {
    if (e->nops == e->cap) {
        size_t cap = e->cap ? 2 * e->cap : 64;
        fake_op *ops = realloc(e->ops, cap * sizeof *ops);
        if (!ops) return fail(e->rt, EFX_E_NOMEM, "fake: out of memory");
        e->ops = ops;
        e->cap = cap;
    }
    e->ops[e->nops++] = op;
    return EFX_OK;
}

static int64_t row_elems(const fake_tensor *t) {
    int64_t n = 1;
    for (int i = 1; i < t->nb_dims; i++) n *= t->dims[i];
    return n;
}

static int64_t tensor_index(efx_engine *e, const char *name) {
    fake_tensor *t = find(e, name);
    return t ? (int64_t)(t - e->t) : -1;
}

static float *at(uint64_t addr) { return (float *)(uintptr_t)addr; }

/* execute_enqueue runs the model on addresses/batch captured in op. */
static void execute_enqueue(efx_engine *e, const fake_op *op) {
    int64_t ia = tensor_index(e, "a_t"), ic = tensor_index(e, "cond"), it = tensor_index(e, "t"),
            ig = tensor_index(e, "grad_a"), ie = tensor_index(e, "energy");
    int64_t b = op->batch;
    if (ia >= 0 && ic >= 0 && it >= 0 && ig >= 0 && ie >= 0) {
        int64_t P = row_elems(&e->t[ia]), C = row_elems(&e->t[ic]);
        const float *a = at(op->addr[ia]), *cond = at(op->addr[ic]), *t = at(op->addr[it]);
        float *grad = at(op->addr[ig]), *energy = at(op->addr[ie]);
        for (int64_t r = 0; r < b; r++) {
            float s = 1.0f + t[r];
            double sum = 0;
            for (int64_t j = 0; j < P; j++) {
                float d = a[r * P + j] - cond[r * C + j % C];
                grad[r * P + j] = s * d;
                sum += (double)d * d;
            }
            energy[r] = (float)(0.5 * s * sum);
        }
        return;
    }
    int64_t is = tensor_index(e, "state_energy");
    if (ic >= 0 && is >= 0 && ia < 0) {
        int64_t C = row_elems(&e->t[ic]);
        const float *cond = at(op->addr[ic]);
        float *se = at(op->addr[is]);
        for (int64_t r = 0; r < b; r++) {
            double sum = 0;
            for (int64_t j = 0; j < C; j++) sum += (double)cond[r * C + j] * cond[r * C + j];
            se[r] = (float)(0.5 * sum - 1.0);
        }
        return;
    }
    for (int i = 0; i < e->n; i++) {
        if (e->t[i].mode == EFX_IO_OUTPUT) memset(at(op->addr[i]), 0, (size_t)(b * row_elems(&e->t[i])) * 4);
    }
}

static void execute(efx_engine *e, const fake_op *op) {
    switch (op->kind) {
    case OP_H2D:
        memcpy(at(op->dst), (const void *)(uintptr_t)op->src, op->bytes);
        stats.h2d++;
        break;
    case OP_D2H:
        memcpy((void *)(uintptr_t)op->dst, at(op->src), op->bytes);
        stats.d2h++;
        break;
    case OP_ENQUEUE:
        execute_enqueue(e, op);
        break;
    case OP_EULER: {
        float *a = at(op->a);
        const float *g = at(op->grad), *sc = at(op->scales);
        for (int64_t i = 0; i < op->n; i++) a[i] -= sc[op->k] * g[i];
        stats.euler_steps++;
        break;
    }
    }
}

static int submit(efx_engine *e, fake_op op) {
    if (e->capturing) return record(e, op);
    execute(e, &op);
    return EFX_OK;
}

int efx_engine_enqueue(efx_engine *e) {
    int st;
    if (!e) return fail(NULL, EFX_E_ARG, "fake: enqueue: NULL engine");
    if ((st = injected("enqueue"))) {
        if (e->capturing) e->capture_broken = 1;
        return st;
    }
    fake_op op;
    memset(&op, 0, sizeof op);
    op.kind = OP_ENQUEUE;
    op.batch = 0;
    for (int i = 0; i < e->n; i++) {
        fake_tensor *t = &e->t[i];
        if (t->mode == EFX_IO_INPUT) {
            if (t->cur_batch == 0)
                return fail(e->rt, EFX_E_TRT, "fake: enqueueV3: input %s has no shape (call setInputShape)", t->name);
            if (op.batch != 0 && op.batch != t->cur_batch)
                return fail(e->rt, EFX_E_TRT, "fake: enqueueV3: inputs disagree on the batch (%lld vs %lld)",
                            (long long)op.batch, (long long)t->cur_batch);
            op.batch = t->cur_batch;
        }
    }
    for (int i = 0; i < e->n; i++) {
        fake_tensor *t = &e->t[i];
        if (t->addr == 0) return fail(e->rt, EFX_E_TRT, "fake: enqueueV3: tensor %s has no address", t->name);
        if (!lookup(t->addr, (size_t)(op.batch * row_elems(t)) * 4))
            return fail(e->rt, EFX_E_TRT, "fake: enqueueV3: tensor %s: buffer too small for batch %lld", t->name,
                        (long long)op.batch);
        op.addr[i] = t->addr;
    }
    if (e->capturing) {
        if (e->shape_dirty) {
            e->capture_broken = 1;
            snprintf(e->capture_why, sizeof e->capture_why,
                     "enqueueV3 after a shape change must run eagerly before capture");
            return fail(e->rt, EFX_E_TRT, "fake: enqueueV3: %s", e->capture_why);
        }
        stats.captured_enqueues++;
        return record(e, op);
    }
    e->shape_dirty = 0;
    stats.eager_enqueues++;
    execute(e, &op);
    return EFX_OK;
}

void efx_engine_destroy(efx_engine *e) {
    if (!e) return;
    e->rt->engines--;
    stats.live_engines--;
    free(e->ops);
    free(e);
}

int efx_mem_alloc(efx_runtime *rt, int32_t kind, size_t bytes, void **host, uint64_t *dev) {
    int st;
    if (!rt || !host || !dev || bytes == 0) return fail(rt, EFX_E_ARG, "fake: mem_alloc: bad argument");
    if (kind < EFX_MEM_DEVICE || kind > EFX_MEM_MAPPED) return fail(rt, EFX_E_ARG, "fake: mem_alloc: bad kind");
    if ((st = injected("mem_alloc"))) return st;
    int slot = -1;
    for (int i = 0; i < FAKE_MAX_ALLOCS; i++) {
        if (!allocs[i].ptr) {
            slot = i;
            break;
        }
    }
    if (slot < 0) return fail(rt, EFX_E_NOMEM, "fake: too many allocations");
    /* cudaMalloc and cudaHostAlloc return 256-byte aligned memory. */
    size_t rounded = (bytes + 255) / 256 * 256;
    void *p = aligned_alloc(256, rounded);
    if (!p) return fail(rt, EFX_E_NOMEM, "fake: cudaMalloc(%zu): out of memory", bytes);
    memset(p, 0, rounded);
    allocs[slot] = (fake_alloc){p, bytes, kind};
    stats.live_allocs++;
    *host = kind == EFX_MEM_DEVICE ? NULL : p;
    *dev = kind == EFX_MEM_PINNED ? 0 : (uint64_t)(uintptr_t)p;
    return EFX_OK;
}

void efx_mem_free(efx_runtime *rt, int32_t kind, void *host, uint64_t dev) {
    (void)rt;
    void *p = kind == EFX_MEM_DEVICE ? (void *)(uintptr_t)dev : host;
    if (!p) return;
    for (int i = 0; i < FAKE_MAX_ALLOCS; i++) {
        if (allocs[i].ptr == p) {
            allocs[i].ptr = NULL;
            free(p);
            stats.live_allocs--;
            return;
        }
    }
}

int efx_memcpy_h2d(efx_engine *e, uint64_t dst, const void *src, size_t bytes) {
    int st;
    if (!e || !src) return fail(NULL, EFX_E_ARG, "fake: memcpy_h2d: NULL argument");
    if ((st = injected("memcpy"))) return st;
    if (!lookup(dst, bytes)) return fail(e->rt, EFX_E_CUDA, "fake: cudaMemcpyAsync: destination is not device memory");
    fake_op op;
    memset(&op, 0, sizeof op);
    op.kind = OP_H2D;
    op.dst = dst;
    op.src = (uint64_t)(uintptr_t)src;
    op.bytes = bytes;
    return submit(e, op);
}

int efx_memcpy_d2h(efx_engine *e, void *dst, uint64_t src, size_t bytes) {
    int st;
    if (!e || !dst) return fail(NULL, EFX_E_ARG, "fake: memcpy_d2h: NULL argument");
    if ((st = injected("memcpy"))) return st;
    if (!lookup(src, bytes)) return fail(e->rt, EFX_E_CUDA, "fake: cudaMemcpyAsync: source is not device memory");
    fake_op op;
    memset(&op, 0, sizeof op);
    op.kind = OP_D2H;
    op.dst = (uint64_t)(uintptr_t)dst;
    op.src = src;
    op.bytes = bytes;
    return submit(e, op);
}

int efx_euler_step(efx_engine *e, uint64_t a, uint64_t grad, uint64_t scales, int32_t k, int64_t n) {
    int st;
    if (!e || n <= 0 || k < 0) return fail(NULL, EFX_E_ARG, "fake: euler_step: bad argument");
    if ((st = injected("euler_step"))) return st;
    if (!lookup(a, (size_t)n * 4) || !lookup(grad, (size_t)n * 4) || !lookup(scales, (size_t)(k + 1) * 4))
        return fail(e->rt, EFX_E_CUDA, "fake: euler_step: operand is not device memory");
    fake_op op;
    memset(&op, 0, sizeof op);
    op.kind = OP_EULER;
    op.a = a;
    op.grad = grad;
    op.scales = scales;
    op.k = k;
    op.n = n;
    return submit(e, op);
}

int efx_capture_begin(efx_engine *e) {
    int st;
    if (!e) return fail(NULL, EFX_E_ARG, "fake: capture_begin: NULL engine");
    if (e->capturing) return fail(e->rt, EFX_E_STATE, "fake: cudaStreamBeginCapture: already capturing");
    if ((st = injected("capture_begin"))) return st;
    e->capturing = 1;
    e->capture_broken = 0;
    e->capture_why[0] = '\0';
    e->nops = 0;
    return EFX_OK;
}

int efx_capture_end(efx_engine *e, efx_graph **out) {
    int st;
    if (!e || !out) return fail(NULL, EFX_E_ARG, "fake: capture_end: NULL argument");
    if (!e->capturing) return fail(e->rt, EFX_E_STATE, "fake: cudaStreamEndCapture: not capturing");
    e->capturing = 0;
    if ((st = injected("capture_end"))) {
        stats.capture_failures++;
        return st;
    }
    if (e->capture_broken) {
        stats.capture_failures++;
        return fail(e->rt, EFX_E_CAPTURE, "fake: cudaStreamEndCapture: capture invalidated%s%s",
                    e->capture_why[0] ? ": " : "", e->capture_why);
    }
    efx_graph *g = calloc(1, sizeof *g);
    if (!g) return fail(e->rt, EFX_E_NOMEM, "fake: out of memory");
    g->e = e;
    g->nops = e->nops;
    g->ops = malloc((e->nops ? e->nops : 1) * sizeof *g->ops);
    if (!g->ops) {
        free(g);
        return fail(e->rt, EFX_E_NOMEM, "fake: out of memory");
    }
    memcpy(g->ops, e->ops, e->nops * sizeof *g->ops);
    e->nops = 0;
    stats.captures++;
    stats.live_graphs++;
    *out = g;
    return EFX_OK;
}

int efx_graph_launch(efx_engine *e, efx_graph *g) {
    int st;
    if (!e || !g || g->e != e) return fail(NULL, EFX_E_ARG, "fake: graph_launch: bad argument");
    if (e->capturing) return fail(e->rt, EFX_E_STATE, "fake: cudaGraphLaunch during capture");
    if ((st = injected("graph_launch"))) return st;
    for (size_t i = 0; i < g->nops; i++) execute(e, &g->ops[i]);
    stats.launches++;
    return EFX_OK;
}

void efx_graph_destroy(efx_graph *g) {
    if (!g) return;
    stats.live_graphs--;
    free(g->ops);
    free(g);
}

int efx_stream_sync(efx_engine *e) {
    int st;
    if (!e) return fail(NULL, EFX_E_ARG, "fake: sync: NULL engine");
    if (e->capturing) return fail(e->rt, EFX_E_STATE, "fake: cudaStreamSynchronize during capture");
    if ((st = injected("sync"))) return st;
    stats.syncs++;
    return EFX_OK;
}

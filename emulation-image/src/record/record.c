/* Record mode's core: CUPTI subscription, operations in host order, device
 * activities, and the trace written at exit (see record.h).
 *
 * The driver loads this library through CUDA_INJECTION64_PATH and calls
 * InitializeInjection at cuInit; it is also LD_PRELOADed so that the library
 * wrappers of record_libs.c come before the real libraries.  Runtime and
 * driver API callbacks open an operation for every kernel launch, copy,
 * memset and graph launch made outside a library call, and map the call's
 * CUPTI correlation id to it (a driver call made inside a runtime call, or
 * anything inside a library call, maps to the operation already open).  The
 * activity records that CUPTI delivers later carry the same correlation ids,
 * so each kernel, copy and memset finds its operation.  Measuring costs host
 * time only: device start and end come from the GPU's own timestamps.
 */
#define _GNU_SOURCE
#include "record.h"

#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------- configuration */

static maya_config g_cfg;
static pthread_once_t g_cfg_once = PTHREAD_ONCE_INIT;

static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

static void load_config(void) {
    const char *gpu = getenv("MAYA_GPU_NAME");
    snprintf(g_cfg.gpu.name, sizeof g_cfg.gpu.name, "%s", gpu && *gpu ? gpu : "unknown");
    const char *dir = getenv("MAYA_TRACE_DIR");
    snprintf(g_cfg.trace_dir, sizeof g_cfg.trace_dir, "%s", dir ? dir : "");
    g_cfg.rank = env_int("RANK", 0);
    g_cfg.local_rank = env_int("LOCAL_RANK", 0);
    g_cfg.world_size = env_int("WORLD_SIZE", 1);
    g_cfg.gpus_per_node = env_int("LOCAL_WORLD_SIZE", 1);
    g_cfg.node = env_int("GROUP_RANK", 0);
    g_cfg.num_devices = 1;
    g_cfg.verbose = env_int("MAYA_VERBOSE", 0);
}

const maya_config *maya_cfg(void) {
    pthread_once(&g_cfg_once, load_config);
    return &g_cfg;
}

void maya_log(const char *fmt, ...) {
    if (!maya_cfg()->verbose) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[maya record %d] ", (int)getpid());
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void maya_die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "maya record: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    _exit(70);
}

/* What trace.c and blas_op.c ask of the emulation, answered for a real GPU:
 * the device and stream of an operation come from its activity records. */
int maya_current_device(void) { return 0; }
uint32_t maya_stream_id(const void *stream) { return 0; }
int maya_stream_device(const void *stream) { return -1; }
int maya_mem_device_of(uint64_t addr) { return -1; }  /* device scalars are not read */
struct maya_graph *maya_capturing(uint32_t stream_id) { return NULL; }
void maya_graph_append(struct maya_graph *g, const maya_rec *r, const uint64_t *ext, int n) {}

/* torch loads the CUDA libraries privately (a dlopen'ed module's
 * dependencies), so RTLD_NEXT does not see them: ask the loaded library by
 * name instead. */
void *record_real(const char *symbol) {
    static const struct { const char *prefix, *lib; } libs[] = {
        {"cublasLt", "libcublasLt.so.13"}, {"cublas", "libcublas.so.13"},
        {"cudnn", "libcudnn.so.9"}, {"nccl", "libnccl.so.2"},
    };
    void *f = dlsym(RTLD_NEXT, symbol);
    for (size_t i = 0; !f && i < sizeof libs / sizeof libs[0]; i++) {
        if (strncmp(symbol, libs[i].prefix, strlen(libs[i].prefix)) != 0) continue;
        void *h = dlopen(libs[i].lib, RTLD_LAZY | RTLD_NOLOAD);
        if (!h) h = dlopen(libs[i].lib, RTLD_LAZY | RTLD_LOCAL);
        if (h) f = dlsym(h, symbol);
        break;
    }
    if (!f) maya_die("cannot find the real %s: is the library that defines it installed?", symbol);
    return f;
}

/* ---------------------------------------------------------- operations */

enum { OP_KERNEL, OP_MEMCPY, OP_MEMSET, OP_GRAPH, OP_SYNC, OP_LIB, OP_EVENT };

typedef struct {
    maya_rec head;      /* kind, thread, host time; the rest filled at the end for API operations */
    uint64_t *ext;
    int n_ext;
    uint8_t type;
    uint32_t first, count;  /* its activities, after attribution */
} op_t;

typedef struct {
    uint32_t corr;
    uint8_t what;  /* 0 kernel, 1 memcpy, 2 memset */
    uint8_t copy_kind, src_kind, dst_kind;
    uint32_t stream, device;
    uint64_t start, end, bytes;
    const char *name;
    uint32_t grid[3], block[3];
    uint32_t dyn_smem, value;
} act_t;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static op_t *g_ops;
static size_t g_nops, g_cap_ops;
static act_t *g_acts;
static size_t g_nacts, g_cap_acts;
static uint32_t *g_corr_op;  /* correlation id -> op index + 1 */
static size_t g_cap_corr;
static int64_t g_clock_offset;  /* CUPTI timestamp - trace clock */
static int g_started, g_finished;

static __thread int t_depth;     /* API or library calls open on this thread */
static __thread int t_cur = -1;  /* operation they belong to, -1 none */

static void *grow(void *p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return p;
    size_t n = *cap ? *cap : 1024;
    while (n < need) n *= 2;
    void *q = realloc(p, n * elem);
    if (!q) maya_die("out of host memory for %zu records", need);
    memset((char *)q + *cap * elem, 0, (n - *cap) * elem);
    *cap = n;
    return q;
}

static int new_op_locked(uint8_t type, uint8_t kind, maya_call c) {
    g_ops = grow(g_ops, &g_cap_ops, g_nops + 1, sizeof *g_ops);
    op_t *o = &g_ops[g_nops];
    memset(o, 0, sizeof *o);
    maya_rec_init(&o->head, kind, c);
    o->type = type;
    return (int)g_nops++;
}

static void map_corr_locked(uint32_t corr, int op) {
    if (!corr || op < 0) return;
    g_corr_op = grow(g_corr_op, &g_cap_corr, (size_t)corr + 1, sizeof *g_corr_op);
    g_corr_op[corr] = (uint32_t)op + 1;
}

static void set_duration(int op, maya_call c) {
    uint64_t d = maya_now_ns() - c.t0;
    pthread_mutex_lock(&g_lock);
    g_ops[op].head.dur_ns = d > 0xFFFFFFFFull ? 0xFFFFFFFFu : (uint32_t)d;
    pthread_mutex_unlock(&g_lock);
}

record_lib_call record_lib_begin(void) {
    maya_call c = maya_enter();
    (void)maya_thread_index();  /* the THREAD record comes first */
    pthread_mutex_lock(&g_lock);
    int op = new_op_locked(OP_LIB, 0, c);
    pthread_mutex_unlock(&g_lock);
    if (t_depth++ == 0) {
        t_cur = op;
    }
    return (record_lib_call){op, c};
}

void record_lib_end(record_lib_call c, const maya_rec *head, const uint64_t *ext, int n) {
    if (--t_depth == 0) t_cur = -1;
    uint64_t *copy = NULL;
    if (n > 0) {
        copy = malloc((size_t)n * sizeof *copy);
        if (!copy) maya_die("out of host memory");
        memcpy(copy, ext, (size_t)n * sizeof *copy);
    }
    uint64_t d = maya_now_ns() - c.call.t0;
    pthread_mutex_lock(&g_lock);
    op_t *o = &g_ops[c.op];
    o->head = *head;
    o->head.t_ns = c.call.t0;
    o->head.dur_ns = d > 0xFFFFFFFFull ? 0xFFFFFFFFu : (uint32_t)d;
    o->ext = copy;
    o->n_ext = n;
    pthread_mutex_unlock(&g_lock);
}

void record_attribute_to(int op) {
    if (op >= 0) {
        t_depth++;
        t_cur = op;
    } else if (t_depth > 0 && --t_depth == 0) {
        t_cur = -1;
    }
}

/* ------------------------------------------------------------ callbacks */

static int starts(const char *s, const char *prefix) { return s && strncmp(s, prefix, strlen(prefix)) == 0; }

/* What an API call is, from its name: -1 when it makes no device work. */
static int classify(const char *fn, const char *symbol, uint8_t *kind) {
    if (!fn) return -1;
    if (strstr(fn, "LaunchKernel") || strstr(fn, "LaunchCooperativeKernel") || (symbol && strstr(fn, "Launch") &&
                                                                                !strstr(fn, "HostFunc"))) {
        *kind = MK_KERNEL;
        return OP_KERNEL;
    }
    if (starts(fn, "cudaMemcpy") || starts(fn, "cuMemcpy")) {
        *kind = MK_MEMCPY;
        return OP_MEMCPY;
    }
    if (starts(fn, "cudaMemset") || starts(fn, "cuMemset")) {
        *kind = MK_MEMSET;
        return OP_MEMSET;
    }
    if (strstr(fn, "GraphLaunch")) {
        *kind = MK_GRAPH_LAUNCH;
        return OP_GRAPH;
    }
    if (starts(fn, "cudaStreamSynchronize") || starts(fn, "cuStreamSynchronize")) {
        *kind = MK_STREAM_SYNC;
        return OP_SYNC;
    }
    if (starts(fn, "cudaDeviceSynchronize") || starts(fn, "cuCtxSynchronize")) {
        *kind = MK_DEVICE_SYNC;
        return OP_SYNC;
    }
    if (starts(fn, "cudaEventSynchronize") || starts(fn, "cuEventSynchronize")) {
        *kind = MK_EVENT_SYNC;
        return OP_SYNC;
    }
    if (starts(fn, "cudaEventRecord") || starts(fn, "cuEventRecord")) {
        *kind = MK_EVENT_RECORD;
        return OP_EVENT;
    }
    if (starts(fn, "cudaStreamWaitEvent") || starts(fn, "cuStreamWaitEvent")) {
        *kind = MK_STREAM_WAIT_EVENT;
        return OP_EVENT;
    }
    return -1;
}

static __thread maya_call t_call;

/* A stream handle as the activity records number it (CUPTI's stream ids): the legacy default stream is
 * NULL or CU_STREAM_LEGACY, a thread's own default stream CU_STREAM_PER_THREAD or any handle of a
 * "_ptsz" call.  0 where CUPTI does not know the handle. */
static uint32_t stream_number(const CUpti_CallbackData *cb, CUstream handle) {
    uint32_t stream = 0;
    uint8_t per_thread = strstr(cb->functionName, "_ptsz") != NULL || handle == CU_STREAM_PER_THREAD;
    if (handle == CU_STREAM_LEGACY || handle == CU_STREAM_PER_THREAD) handle = NULL;
    if (!cb->context || cuptiGetStreamIdEx(cb->context, handle, per_thread, &stream) != CUPTI_SUCCESS) return 0;
    return stream;
}

/* Events by handle, numbered from 1 in the order first seen, each with how many times it was recorded:
 * a wait or a synchronisation names the event and the record it waits for, as emulation's records do
 * (TRACE_FORMAT.md).  An open-addressed table of handles (torch's allocator and streams record
 * thousands of events), under g_lock. */
static struct { CUevent handle; uint64_t version; } *g_events;  /* by number - 1 */
static size_t g_nevents, g_cap_events;
static uint32_t *g_event_slots;  /* handle's hash slot -> number, 0 empty */
static size_t g_nslots;

static uint64_t event_number_locked(CUevent handle) {
    if (2 * (g_nevents + 1) > g_nslots) {  /* grow and rehash, at most half full */
        size_t n = g_nslots ? 2 * g_nslots : 1024;
        uint32_t *slots = calloc(n, sizeof *slots);
        if (!slots) maya_die("out of memory for the event table");
        for (size_t i = 0; i < g_nevents; i++) {
            size_t h = ((uintptr_t)g_events[i].handle >> 4) & (n - 1);
            while (slots[h]) h = (h + 1) & (n - 1);
            slots[h] = (uint32_t)i + 1;
        }
        free(g_event_slots);
        g_event_slots = slots;
        g_nslots = n;
    }
    size_t h = ((uintptr_t)handle >> 4) & (g_nslots - 1);
    for (; g_event_slots[h]; h = (h + 1) & (g_nslots - 1))
        if (g_events[g_event_slots[h] - 1].handle == handle) return g_event_slots[h];
    g_events = grow(g_events, &g_cap_events, g_nevents + 1, sizeof *g_events);
    g_events[g_nevents].handle = handle;
    g_events[g_nevents].version = 0;
    g_event_slots[h] = (uint32_t)++g_nevents;
    return g_nevents;
}

/* A synchronisation's or an event call's device, stream and event, read from the call's parameters
 * (every variant of a call lays them out alike: an event record (event, stream), a stream's wait
 * (stream, event), an event's or a stream's synchronisation the one handle), so that the replay waits
 * for the work queued there.  Called under g_lock. */
static void place_locked(maya_rec *r, const CUpti_CallbackData *cb) {
    uint32_t device = 0;
    if (cb->context && cuptiGetDeviceId(cb->context, &device) == CUPTI_SUCCESS) r->device = (uint8_t)device;
    void *const *p = cb->functionParams;
    if (!p) return;
    uint64_t event = 0;
    switch (r->kind) {
    case MK_STREAM_SYNC:
        r->stream = stream_number(cb, (CUstream)p[0]);
        return;
    case MK_EVENT_RECORD:
        event = event_number_locked((CUevent)p[0]);
        r->stream = stream_number(cb, (CUstream)p[1]);
        r->a[1] = ++g_events[event - 1].version;
        break;
    case MK_STREAM_WAIT_EVENT:
        event = event_number_locked((CUevent)p[1]);
        r->stream = stream_number(cb, (CUstream)p[0]);
        r->a[1] = g_events[event - 1].version;
        break;
    case MK_EVENT_SYNC:
        event = event_number_locked((CUevent)p[0]);
        r->a[1] = g_events[event - 1].version;
        break;
    default:
        return;
    }
    r->a[0] = event;
}

static void CUPTIAPI on_callback(void *ud, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data) {
    if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
        if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        return;
    }
    const CUpti_CallbackData *cb = data;
    if (cb->callbackSite == CUPTI_API_ENTER) {
        if (t_depth++ > 0) {  /* inside an open call: its work is that call's */
            if (t_cur >= 0) {
                pthread_mutex_lock(&g_lock);
                map_corr_locked(cb->correlationId, t_cur);
                pthread_mutex_unlock(&g_lock);
            }
            return;
        }
        uint8_t kind = 0;
        int type = classify(cb->functionName, cb->symbolName, &kind);
        if (type < 0) return;
        t_call = maya_enter();
        (void)maya_thread_index();
        pthread_mutex_lock(&g_lock);
        int op = new_op_locked((uint8_t)type, kind, t_call);
        g_ops[op].head.a32 = domain == CUPTI_CB_DOMAIN_DRIVER_API;  /* KERNEL source */
        if (strstr(cb->functionName, "Async")) g_ops[op].head.flags |= MF_ASYNC;
        if (type == OP_SYNC || type == OP_EVENT) place_locked(&g_ops[op].head, cb);
        map_corr_locked(cb->correlationId, op);
        pthread_mutex_unlock(&g_lock);
        t_cur = op;
    } else {
        if (t_depth > 0) t_depth--;
        if (t_depth == 0 && t_cur >= 0) {
            set_duration(t_cur, t_call);
            t_cur = -1;
        }
    }
}

/* ------------------------------------------------------------ activities */

#define BUF_BYTES (8u << 20)

static void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records) {
    *buf = aligned_alloc(8, BUF_BYTES);
    *size = *buf ? BUF_BYTES : 0;
    *max_records = 0;
}

/* Kernel names, copied: CUPTI's own strings need not outlive their module. */
static const char *keep_name(const char *name) {
    static const char *keys[4096];
    static char *vals[4096];
    if (!name) return "";
    size_t h = ((uintptr_t)name >> 4) % 4096;
    for (size_t i = 0; i < 4096; i++, h = (h + 1) % 4096) {
        if (keys[h] == name) return vals[h];
        if (!keys[h]) {
            keys[h] = name;
            vals[h] = strdup(name);
            return vals[h];
        }
    }
    return strdup(name);
}

static act_t *new_act_locked(void) {
    g_acts = grow(g_acts, &g_cap_acts, g_nacts + 1, sizeof *g_acts);
    act_t *a = &g_acts[g_nacts++];
    memset(a, 0, sizeof *a);
    return a;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid) {
    CUpti_Activity *rec = NULL;
    pthread_mutex_lock(&g_lock);
    while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
            act_t *a = new_act_locked();
            *a = (act_t){.corr = k->correlationId, .what = 0, .stream = k->streamId, .device = k->deviceId,
                         .start = k->start, .end = k->end, .name = keep_name(k->name),
                         .grid = {(uint32_t)k->gridX, (uint32_t)k->gridY, (uint32_t)k->gridZ},
                         .block = {(uint32_t)k->blockX, (uint32_t)k->blockY, (uint32_t)k->blockZ},
                         .dyn_smem = (uint32_t)k->dynamicSharedMemory};
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;
            uint32_t corr = m->correlationId;
            if (m->runtimeCorrelationId && m->runtimeCorrelationId < g_cap_corr && g_corr_op[m->runtimeCorrelationId])
                corr = m->runtimeCorrelationId;
            act_t *a = new_act_locked();
            *a = (act_t){.corr = corr, .what = 1, .copy_kind = m->copyKind, .src_kind = m->srcKind,
                         .dst_kind = m->dstKind, .stream = m->streamId, .device = m->deviceId,
                         .start = m->start, .end = m->end, .bytes = m->bytes, .name = "memcpy"};
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
            const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)rec;
            act_t *a = new_act_locked();
            *a = (act_t){.corr = m->correlationId, .what = 2, .stream = m->streamId, .device = m->deviceId,
                         .start = m->start, .end = m->end, .bytes = m->bytes, .value = m->value,
                         .name = "memset"};
        }
    }
    size_t dropped = 0;
    cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped);
    pthread_mutex_unlock(&g_lock);
    if (dropped) fprintf(stderr, "maya record: CUPTI dropped %zu activity records\n", dropped);
    free(buf);
}

/* --------------------------------------------------------------- output */

static uint64_t pack_grid(const uint32_t g[3]) { return g[0] | (uint64_t)(g[1] & 0xFFFF) << 32 | (uint64_t)(g[2] & 0xFFFF) << 48; }
static uint64_t pack_block(const uint32_t b[3]) { return (b[0] & 0xFFFF) | (uint64_t)(b[1] & 0xFFFF) << 16 | (uint64_t)(b[2] & 0xFFFF) << 32; }

extern char *__cxa_demangle(const char *mangled, char *out, size_t *len, int *status);

/* FUNC id of a kernel name, writing its FUNC record on first use. */
static uint64_t func_id(const char *name) {
    static const char **names;
    static size_t n, cap;
    for (size_t i = n; i > 0; i--)
        if (names[i - 1] == name) return i;
    names = grow(names, &cap, n + 1, sizeof *names);
    names[n++] = name;
    int status = 0;
    char *demangled = __cxa_demangle(name, NULL, NULL, &status);
    maya_rec r;
    maya_rec_init(&r, MK_FUNC, maya_enter());
    r.a[0] = n;
    r.a[1] = maya_str(name);
    r.a[2] = status == 0 && demangled ? maya_str(demangled) : r.a[1];
    free(demangled);
    maya_emit(&r);
    return n;
}

static int by_start(const void *x, const void *y) {
    const act_t *a = x, *b = y;
    return a->start < b->start ? -1 : a->start > b->start;
}

/* cudaMemcpyKind from CUPTI's copy kind. */
static uint32_t copy_kind(uint8_t k) {
    switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD: return 1;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA: return 2;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA: case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return 3;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return 0;
    default: return 4;
    }
}

/* The operation's own fields, from its first activity. */
static int fill_from_activity(op_t *o, const act_t *a) {
    maya_rec *r = &o->head;
    r->device = (uint8_t)a->device;
    r->stream = a->stream;
    switch (o->type) {
    case OP_KERNEL:
        r->a[0] = func_id(a->name);
        r->a[1] = pack_grid(a->grid);
        r->a[2] = pack_block(a->block);
        r->a[3] = a->dyn_smem;
        r->flags |= MF_ASYNC;
        return 1;
    case OP_MEMCPY: {
        r->a32 = copy_kind(a->copy_kind);
        r->a[2] = a->bytes;
        int host_src = a->src_kind != CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
        int host_dst = a->dst_kind != CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
        r->a[3] = (host_dst ? 0 : a->device + 1) | (uint64_t)(host_src ? 0 : a->device + 1) << 32;
        if (a->src_kind == CUPTI_ACTIVITY_MEMORY_KIND_PINNED || a->dst_kind == CUPTI_ACTIVITY_MEMORY_KIND_PINNED)
            r->flags |= MF_PINNED;
        return 1;
    }
    case OP_MEMSET:
        r->a32 = 0;
        r->a[1] = a->bytes;
        r->a[2] = a->value;
        return 1;
    default:
        return 1;
    }
}

static void emit_timing(const act_t *a) {
    maya_rec r;
    maya_rec_init(&r, MK_DEVICE_TIME, maya_enter());
    r.t_ns = (uint64_t)((int64_t)a->start - g_clock_offset);
    r.dur_ns = 0;
    r.device = (uint8_t)a->device;
    r.stream = a->stream;
    r.a32 = a->what;
    r.a[0] = (uint64_t)((int64_t)a->start - g_clock_offset);
    r.a[1] = (uint64_t)((int64_t)a->end - g_clock_offset);
    r.a[2] = maya_str(a->name);
    r.a[3] = a->what == 0 ? pack_grid(a->grid) : a->bytes;
    r.a[4] = a->what == 0 ? pack_block(a->block) : 0;
    maya_emit(&r);
}

static void note(const char *fmt, ...) {
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    maya_rec r;
    maya_rec_init(&r, MK_NOTE, maya_enter());
    r.a[0] = maya_str(text);
    maya_emit(&r);
    fprintf(stderr, "maya record: %s\n", text);
}

/* Attribute activities, then write every operation in host order. */
static void finish(void) {
    if (!g_started || __atomic_exchange_n(&g_finished, 1, __ATOMIC_SEQ_CST)) return;
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    pthread_mutex_lock(&g_lock);
    size_t nops = g_nops, nacts = g_nacts;
    op_t *ops = g_ops;
    act_t *acts = g_acts;
    /* Bucket activities by operation (counting sort), unattributed last. */
    uint32_t *owner = calloc(nacts ? nacts : 1, sizeof *owner);
    size_t orphans = 0;
    for (size_t i = 0; i < nacts; i++) {
        uint32_t c = acts[i].corr;
        owner[i] = c < g_cap_corr ? g_corr_op[c] : 0;
        if (owner[i]) ops[owner[i] - 1].count++;
        else orphans++;
    }
    uint32_t pos = 0;
    for (size_t i = 0; i < nops; i++) {
        ops[i].first = pos;
        pos += ops[i].count;
        ops[i].count = 0;
    }
    act_t *sorted = malloc((nacts ? nacts : 1) * sizeof *sorted);
    for (size_t i = 0; i < nacts; i++) {
        if (!owner[i]) continue;
        op_t *o = &ops[owner[i] - 1];
        sorted[o->first + o->count++] = acts[i];
    }
    size_t silent = 0;
    for (size_t i = 0; i < nops; i++) {
        op_t *o = &ops[i];
        act_t *mine = sorted + o->first;
        qsort(mine, o->count, sizeof *mine, by_start);
        if (o->type == OP_SYNC || o->type == OP_EVENT) {
            maya_emit(&o->head);
            continue;
        }
        if (!o->count && o->type != OP_LIB) {  /* nothing ran (e.g. a failed launch, an empty copy) */
            silent++;
            continue;
        }
        if (o->count) fill_from_activity(o, &mine[0]);
        if (o->type == OP_GRAPH) o->head.a[1] = o->count;
        if (o->type == OP_LIB && !o->head.kind) continue;  /* a call that never finished */
        maya_emit_ext(&o->head, o->ext, o->n_ext);
        for (uint32_t j = 0; j < o->count; j++) emit_timing(&mine[j]);
    }
    if (orphans) note("%zu device activities belong to no recorded call", orphans);
    if (silent) maya_log("%zu calls caused no device activity", silent);
    pthread_mutex_unlock(&g_lock);
    free(sorted);
    free(owner);
    maya_trace_flush();
}

static void check(CUptiResult rc, const char *what) {
    if (rc == CUPTI_SUCCESS) return;
    const char *msg = NULL;
    cuptiGetResultString(rc, &msg);
    maya_die("%s failed: %s. Record mode needs CUPTI and permission to profile the GPU "
             "(on some systems: NVreg_RestrictProfilingToAdminUsers=0, or run as root)", what, msg ? msg : "?");
}

static void start(void) {
    if (__atomic_exchange_n(&g_started, 1, __ATOMIC_SEQ_CST)) return;
    CUpti_SubscriberHandle sub;
    check(cuptiSubscribe(&sub, on_callback, NULL), "cuptiSubscribe");
    check(cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API), "enabling runtime API callbacks");
    check(cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API), "enabling driver API callbacks");
    check(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING),
          "enabling context callbacks");
    check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "registering activity buffers");
    check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enabling kernel activities");
    check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "enabling memcpy activities");
    check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "enabling memset activities");
    uint64_t ts = 0;
    cuptiGetTimestamp(&ts);
    g_clock_offset = (int64_t)ts - (int64_t)maya_now_ns();
    atexit(finish);
}

/* Called by the driver at cuInit when CUDA_INJECTION64_PATH names this library. */
MAYA_EXPORT int InitializeInjection(void) {
    start();
    return 1;
}

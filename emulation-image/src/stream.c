/* Streams, events, host callbacks and CUDA graph capture/replay.
 *
 * Nothing waits: the emulated device is always done.  What matters is the
 * record of who waits for whom, so the simulator can rebuild the timeline.
 * Events carry a version that grows with each record, because handles are
 * reused; a wait names the version it waits for.  While a stream is being
 * captured its work goes into a graph (and into the trace, flagged
 * CAPTURED); each launch of the graph writes that work again, flagged REPLAY.
 *
 * One exception to "always done": a thread that never gives the device work
 * and only polls events (torch's NCCL watchdog) runs on its own wall clock,
 * so what it does when it sees work finish (drop the tensors a collective
 * kept alive) would land at a random point of the program.  Such an
 * observer sees an event complete only once the emulated device clock has
 * moved a polling period past the record, as a watchdog polling a real GPU
 * every 100 ms sees a fast step's work late; see observer_sees_done. */
#include "maya.h"
#include "rt.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct maya_stream {
    uint32_t id;
    int device, priority;
    unsigned flags;
    struct maya_graph *capture;
    enum cudaStreamCaptureMode capture_mode;
} maya_stream;

typedef struct maya_event {
    uint32_t id;
    int device;
    unsigned flags;
    uint64_t version, t_record;  /* t_record: emulated device clock */
    uint64_t wall_record;        /* host ns at the record (observer safety valve) */
    uint64_t told_not_ready;     /* version last answered "not ready" to an observer */
    struct maya_graph *capture;  /* recorded inside this capture */
} maya_event;

typedef struct maya_graph {
    uint64_t id;
    uint32_t origin_stream;
    size_t n, cap;           /* captured records */
    maya_rec *recs;
    uint64_t **ext;
    int *n_ext;
    void **nodes;            /* opaque node handles for cudaGraphGetNodes */
    int refs;                /* the graph handle and each executable made from it */
} maya_graph;

typedef struct { maya_graph *graph; uint64_t id; } maya_graph_exec;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static maya_stream **g_streams;  /* by id; id 0 is the legacy default stream */
static uint32_t g_nstreams = 1, g_cap_streams;
static uint32_t g_next_event;
static uint64_t g_next_graph;

/* Set once the thread launches, copies, records or waits: its queries come
 * at fixed points of the program, so "done" keeps the trace reproducible. */
static __thread int t_drives_device;

void maya_thread_drives_device(void) { t_drives_device = 1; }

static maya_stream *stream_ptr(const void *s) {
    return (s == NULL || s == cudaStreamLegacy || s == cudaStreamPerThread) ? NULL : (maya_stream *)s;
}

uint32_t maya_stream_id(const void *s) {
    if (s == cudaStreamPerThread) return 0x80000000u | maya_thread_index();
    maya_stream *st = stream_ptr(s);
    return st ? st->id : 0;
}

int maya_stream_device(const void *s) {
    maya_stream *st = stream_ptr(s);
    return st ? st->device : maya_current_device();
}

struct maya_graph *maya_capturing(uint32_t id) {
    maya_graph *g = NULL;
    pthread_mutex_lock(&g_lock);
    if (id > 0 && id < g_nstreams && g_streams && g_streams[id]) g = g_streams[id]->capture;
    pthread_mutex_unlock(&g_lock);
    return g;
}

void maya_graph_append(struct maya_graph *g, const maya_rec *r, const uint64_t *ext, int n) {
    pthread_mutex_lock(&g_lock);
    if (g->n == g->cap) {
        g->cap = g->cap ? g->cap * 2 : 64;
        g->recs = realloc(g->recs, g->cap * sizeof *g->recs);
        g->ext = realloc(g->ext, g->cap * sizeof *g->ext);
        g->n_ext = realloc(g->n_ext, g->cap * sizeof *g->n_ext);
    }
    g->recs[g->n] = *r;
    g->ext[g->n] = n ? malloc((size_t)n * 8) : NULL;
    if (n) memcpy(g->ext[g->n], ext, (size_t)n * 8);
    g->n_ext[g->n] = n;
    g->n++;
    pthread_mutex_unlock(&g_lock);
}

static void record_simple(uint8_t kind, maya_call c, const void *stream, uint64_t a0, uint64_t a1, uint8_t flags) {
    maya_rec r;
    maya_rec_init(&r, kind, c);
    r.flags = flags;
    r.device = (uint8_t)maya_stream_device(stream);
    r.stream = maya_stream_id(stream);
    r.a[0] = a0;
    r.a[1] = a1;
    maya_emit(&r);
}

void maya_stream_sync_record(uint8_t kind, const void *stream, maya_call c) {
    record_simple(kind, c, stream, 0, 0, 0);
}

/* ---------------------------------------------------------------- streams */

static cudaError_t stream_create(cudaStream_t *out, unsigned flags, int priority) {
    if (!out) return maya_rt_error(cudaErrorInvalidValue);
    maya_call c = maya_enter();
    maya_stream *s = calloc(1, sizeof *s);
    s->device = maya_current_device();
    s->flags = flags;
    s->priority = priority < -5 ? -5 : priority > 0 ? 0 : priority;
    pthread_mutex_lock(&g_lock);
    if (g_nstreams == g_cap_streams || !g_streams) {
        uint32_t old = g_streams ? g_cap_streams : 0;
        g_cap_streams = g_cap_streams ? g_cap_streams * 2 : 256;
        g_streams = realloc(g_streams, g_cap_streams * sizeof *g_streams);
        memset(g_streams + old, 0, (g_cap_streams - old) * sizeof *g_streams);
    }
    s->id = g_nstreams++;
    g_streams[s->id] = s;
    pthread_mutex_unlock(&g_lock);
    maya_device_activate(s->device);
    *out = (cudaStream_t)s;
    maya_rec r;
    maya_rec_init(&r, MK_STREAM_CREATE, c);
    r.stream = s->id;
    r.a[0] = (uint64_t)(int64_t)s->priority;
    r.a32 = flags;
    maya_emit(&r);
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaStreamCreate(cudaStream_t *s) { return stream_create(s, 0, 0); }
MAYA_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags) { return stream_create(s, flags, 0); }
MAYA_EXPORT cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned int flags, int priority) {
    return stream_create(s, flags, priority);
}

MAYA_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    maya_stream *s = stream_ptr(stream);
    if (!s) return maya_rt_error(cudaErrorInvalidResourceHandle);
    record_simple(MK_STREAM_DESTROY, maya_enter(), stream, 0, 0, 0);
    pthread_mutex_lock(&g_lock);
    g_streams[s->id] = NULL;
    pthread_mutex_unlock(&g_lock);
    free(s);
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaStreamGetPriority(cudaStream_t stream, int *priority) {
    if (!priority) return maya_rt_error(cudaErrorInvalidValue);
    maya_stream *s = stream_ptr(stream);
    *priority = s ? s->priority : 0;
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaStreamGetFlags(cudaStream_t stream, unsigned int *flags) {
    if (!flags) return maya_rt_error(cudaErrorInvalidValue);
    maya_stream *s = stream_ptr(stream);
    *flags = s ? s->flags : 0;
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaStreamGetDevice(cudaStream_t stream, int *device) {
    if (!device) return maya_rt_error(cudaErrorInvalidValue);
    *device = maya_stream_device(stream);
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaStreamGetId(cudaStream_t stream, unsigned long long *id) {
    if (!id) return maya_rt_error(cudaErrorInvalidValue);
    *id = maya_stream_id(stream);
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaStreamQuery(cudaStream_t stream) {
    record_simple(MK_STREAM_QUERY, maya_enter(), stream, 0, 0, 0);
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    maya_stream *s = stream_ptr(stream);
    if (s && s->capture) return maya_rt_error(cudaErrorStreamCaptureUnsupported);
    record_simple(MK_STREAM_SYNC, maya_enter(), stream, 0, 0, 0);
    return cudaSuccess;
}

static void observers_catch_up(void);

/* The whole device has drained: observers see every event recorded so far
 * complete, and get to look before the program goes on (see events.md). */
MAYA_EXPORT cudaError_t cudaDeviceSynchronize(void) {
    maya_call c = maya_enter();
    maya_device_drained();
    observers_catch_up();  /* inside the call: its wait is no host delay of the program's */
    record_simple(MK_DEVICE_SYNC, c, NULL, 0, 0, 0);
    return cudaSuccess;
}

/* ----------------------------------------------------------------- events */

static cudaError_t event_create(cudaEvent_t *out, unsigned flags) {
    if (!out) return maya_rt_error(cudaErrorInvalidValue);
    maya_call c = maya_enter();
    maya_event *e = calloc(1, sizeof *e);
    e->id = __atomic_add_fetch(&g_next_event, 1, __ATOMIC_RELAXED);
    e->device = maya_current_device();
    e->flags = flags;
    *out = (cudaEvent_t)e;
    maya_rec r;
    maya_rec_init(&r, MK_EVENT_CREATE, c);
    r.a[0] = e->id;
    r.a32 = flags;
    maya_emit(&r);
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaEventCreate(cudaEvent_t *e) { return event_create(e, 0); }
MAYA_EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags) { return event_create(e, flags); }

MAYA_EXPORT cudaError_t cudaEventDestroy(cudaEvent_t event) {
    maya_event *e = (maya_event *)event;
    if (!e) return maya_rt_error(cudaErrorInvalidResourceHandle);
    maya_rec r;
    maya_rec_init(&r, MK_EVENT_DESTROY, maya_enter());
    r.a[0] = e->id;
    maya_emit(&r);
    free(e);
    return cudaSuccess;
}

static cudaError_t event_record(cudaEvent_t event, cudaStream_t stream, unsigned flags) {
    maya_event *e = (maya_event *)event;
    if (!e) return maya_rt_error(cudaErrorInvalidResourceHandle);
    maya_call c = maya_enter();
    t_drives_device = 1;
    e->version++;
    e->t_record = maya_device_clock();
    e->wall_record = maya_now_ns();
    maya_stream *s = stream_ptr(stream);
    e->capture = s ? s->capture : NULL;
    record_simple(MK_EVENT_RECORD, c, stream, e->id, e->version, MF_ASYNC);
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) { return event_record(e, s, 0); }
MAYA_EXPORT cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned int flags) {
    return event_record(e, s, flags);
}

MAYA_EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
    maya_event *e = (maya_event *)event;
    if (!e) return maya_rt_error(cudaErrorInvalidResourceHandle);
    maya_stream *s = stream_ptr(stream);
    t_drives_device = 1;
    /* Waiting on an event of a capture pulls the stream into that capture. */
    if (s && e->capture && !s->capture) {
        pthread_mutex_lock(&g_lock);
        s->capture = e->capture;
        pthread_mutex_unlock(&g_lock);
    }
    record_simple(MK_STREAM_WAIT_EVENT, maya_enter(), stream, e->id, e->version, MF_ASYNC);
    return cudaSuccess;
}

/* An observer thread's view of the device.  The polling period is measured
 * on the emulated device clock, which only the program's own work moves, so
 * in the program's terms the answer does not depend on how fast the host
 * runs: work seen late is seen late on every run.  The wall-clock valve only
 * keeps a long emulation from looking hung to the observer (torch's
 * watchdog aborts a collective that seems stuck for its timeout, 10 minutes
 * by default). */
#define OBSERVER_PERIOD_NS (100ull * 1000 * 1000)
#define OBSERVER_VALVE_NS (60ull * 1000 * 1000 * 1000)
#define OBSERVER_WAIT_NS (250ull * 1000 * 1000)  /* over two of torch's watchdog periods */
#define OBSERVER_ROUND_NS (2ull * 1000 * 1000)

static uint64_t env_ns(const char *name, uint64_t scale, uint64_t fallback) {
    const char *v = getenv(name);
    char *end;
    double x = v ? strtod(v, &end) : 0;
    return v && end != v && x >= 0 ? (uint64_t)(x * (double)scale) : fallback;
}

static uint64_t g_drained_clock;  /* device clock at the last drain; 0 = none */

void maya_device_drained(void) {
    __atomic_store_n(&g_drained_clock, maya_device_clock() + 1, __ATOMIC_RELEASE);
}

/* Observer polls (cudaEventQuery by a thread that never drives the device),
 * the wall time of the last one, and collectives issued since the observers
 * last caught up with a drain. */
static uint64_t g_observer_polls, g_observer_last_ns, g_collectives_unseen, g_kernels_new;
static int g_no_observer;  /* a drain waited in vain: no observer polls in this process */

void maya_collective_issued(void) { __atomic_add_fetch(&g_collectives_unseen, 1, __ATOMIC_RELAXED); }
void maya_kernel_first_launch(void) { __atomic_add_fetch(&g_kernels_new, 1, __ATOMIC_RELAXED); }

static uint64_t monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void observer_polled(void) {
    __atomic_store_n(&g_observer_last_ns, monotonic_ns(), __ATOMIC_RELEASE);
    __atomic_add_fetch(&g_observer_polls, 1, __ATOMIC_RELEASE);
}

/* After a drain that follows collectives and kernels launched for the first
 * time, wait until an observer has polled and its round of polls has ended.
 * On a GPU each first launch loads its kernel's module, so the first steps
 * last seconds, and torch's watchdog, polling every 100 ms, has seen the
 * collectives before such a drain complete and handed their tensors back
 * before the program's next collective: DDP's first buckets are freed at
 * their rebuild in step 2 (measured on 2 x H100).  Here a step lasts
 * milliseconds, and the watchdog would poll at a random later point, or not
 * at all before the job ends.  Steady steps launch no new kernels and do not
 * wait.  The wait spins, yielding the CPU (the watchdog shares it): a thread
 * that sleeps 100 ms a step runs its next step's host work 1.5 times slower
 * on the emulating machine.  A process with no observer
 * (TORCH_NCCL_BLOCKING_WAIT=1) waits once, for MAYA_OBSERVER_WAIT_MS. */
static void observers_catch_up(void) {
    static uint64_t wait_ns = UINT64_MAX;
    if (wait_ns == UINT64_MAX) wait_ns = env_ns("MAYA_OBSERVER_WAIT_MS", 1000000ull, OBSERVER_WAIT_NS);
    if (__atomic_load_n(&g_no_observer, __ATOMIC_ACQUIRE) || !__atomic_load_n(&g_collectives_unseen, __ATOMIC_ACQUIRE) ||
        !__atomic_exchange_n(&g_kernels_new, 0, __ATOMIC_ACQ_REL))
        return;
    __atomic_store_n(&g_collectives_unseen, 0, __ATOMIC_RELEASE);
    uint64_t polls = __atomic_load_n(&g_observer_polls, __ATOMIC_ACQUIRE), t0 = monotonic_ns();
    while (__atomic_load_n(&g_observer_polls, __ATOMIC_ACQUIRE) == polls) {
        if (monotonic_ns() - t0 >= wait_ns) {
            __atomic_store_n(&g_no_observer, 1, __ATOMIC_RELEASE);
            return;
        }
        sched_yield();
    }
    /* the round: queries microseconds apart, then the handling of what it saw */
    while (monotonic_ns() - __atomic_load_n(&g_observer_last_ns, __ATOMIC_ACQUIRE) < OBSERVER_ROUND_NS &&
           monotonic_ns() - t0 < wait_ns)
        sched_yield();
}

static int observer_sees_done(const maya_event *e) {
    static uint64_t period = UINT64_MAX, valve;
    if (period == UINT64_MAX) {
        valve = env_ns("MAYA_OBSERVER_VALVE_S", 1000000000ull, OBSERVER_VALVE_NS);
        period = env_ns("MAYA_OBSERVER_PERIOD_MS", 1000000ull, OBSERVER_PERIOD_NS);
    }
    if (!e->version) return 1;  /* never recorded: CUDA calls that complete */
    if (e->t_record < __atomic_load_n(&g_drained_clock, __ATOMIC_ACQUIRE)) return 1;
    return maya_device_clock() - e->t_record >= period || maya_now_ns() - e->wall_record >= valve;
}

MAYA_EXPORT cudaError_t cudaEventQuery(cudaEvent_t event) {
    maya_event *e = (maya_event *)event;
    if (!e) return maya_rt_error(cudaErrorInvalidResourceHandle);
    maya_call c = maya_enter();
    if (!t_drives_device) observer_polled();
    int done = t_drives_device || observer_sees_done(e);
    if (!done) {  /* an observer polls on its own clock: record each wait once */
        if (e->told_not_ready == e->version) {
            maya_leave();  /* else the observer, asleep until its next poll, holds off the CPU clock */
            return cudaErrorNotReady;
        }
        e->told_not_ready = e->version;
    }
    maya_rec r;
    maya_rec_init(&r, MK_EVENT_QUERY, c);
    r.a[0] = e->id;
    r.a[1] = e->version;
    r.a32 = !done;
    maya_emit(&r);
    return done ? cudaSuccess : cudaErrorNotReady;
}

MAYA_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    maya_event *e = (maya_event *)event;
    if (!e) return maya_rt_error(cudaErrorInvalidResourceHandle);
    maya_rec r;
    maya_rec_init(&r, MK_EVENT_SYNC, maya_enter());
    r.a[0] = e->id;
    r.a[1] = e->version;
    maya_emit(&r);
    return cudaSuccess;
}

/* Device time is not known here: report the emulated device clock between
 * the records (see maya_device_clock), the same on every run. */
MAYA_EXPORT cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    maya_event *a = (maya_event *)start, *b = (maya_event *)end;
    if (!ms || !a || !b) return maya_rt_error(cudaErrorInvalidValue);
    if (!a->version || !b->version) return maya_rt_error(cudaErrorInvalidResourceHandle);
    *ms = b->t_record > a->t_record ? (float)(b->t_record - a->t_record) / 1e6f : 0.0f;
    return cudaSuccess;
}

/* ---------------------------------------------------------- host callbacks */

MAYA_EXPORT cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *data) {
    if (!fn) return maya_rt_error(cudaErrorInvalidValue);
    maya_stream *s = stream_ptr(stream);
    t_drives_device = 1;
    record_simple(MK_HOST_FUNC, maya_enter(), stream, 0, 0, MF_ASYNC);
    if (!s || !s->capture) fn(data);  /* the device is already done: run it now */
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t cb, void *data, unsigned int flags) {
    if (!cb) return maya_rt_error(cudaErrorInvalidValue);
    record_simple(MK_HOST_FUNC, maya_enter(), stream, 1, 0, MF_ASYNC);
    cb(stream, cudaSuccess, data);
    return cudaSuccess;
}

/* ------------------------------------------------------------ graph capture */

static __thread enum cudaStreamCaptureMode t_capture_mode = cudaStreamCaptureModeGlobal;

MAYA_EXPORT cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode) {
    if (!mode) return maya_rt_error(cudaErrorInvalidValue);
    enum cudaStreamCaptureMode old = t_capture_mode;
    t_capture_mode = *mode;
    *mode = old;
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
    maya_stream *s = stream_ptr(stream);
    if (!s) return maya_rt_error(cudaErrorStreamCaptureUnsupported);  /* not on the legacy stream */
    if (s->capture) return maya_rt_error(cudaErrorIllegalState);
    maya_call c = maya_enter();
    maya_graph *g = calloc(1, sizeof *g);
    g->refs = 1;
    g->id = __atomic_add_fetch(&g_next_graph, 1, __ATOMIC_RELAXED);
    g->origin_stream = s->id;
    s->capture_mode = mode;
    record_simple(MK_GRAPH_CAPTURE_BEGIN, c, stream, g->id, (uint64_t)mode, 0);
    pthread_mutex_lock(&g_lock);
    s->capture = g;
    pthread_mutex_unlock(&g_lock);
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph) {
    maya_stream *s = stream_ptr(stream);
    if (!s || !s->capture || !graph) return maya_rt_error(cudaErrorIllegalState);
    maya_call c = maya_enter();
    maya_graph *g = s->capture;
    pthread_mutex_lock(&g_lock);
    for (uint32_t i = 0; i < g_nstreams; i++)  /* every stream that joined it */
        if (g_streams[i] && g_streams[i]->capture == g) g_streams[i]->capture = NULL;
    pthread_mutex_unlock(&g_lock);
    record_simple(MK_GRAPH_CAPTURE_END, c, stream, g->id, g->n, 0);
    *graph = (cudaGraph_t)g;
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *status) {
    if (!status) return maya_rt_error(cudaErrorInvalidValue);
    maya_stream *s = stream_ptr(stream);
    *status = (s && s->capture) ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, enum cudaStreamCaptureStatus *status,
                                                 unsigned long long *id, cudaGraph_t *graph,
                                                 const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
                                                 size_t *ndeps) {
    maya_stream *s = stream_ptr(stream);
    maya_graph *g = s ? s->capture : NULL;
    if (status) *status = g ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    if (id) *id = g ? g->id : 0;
    if (graph) *graph = (cudaGraph_t)g;
    if (deps) *deps = NULL;
    if (edges) *edges = NULL;
    if (ndeps) *ndeps = 0;
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags) {
    if (!exec || !graph) return maya_rt_error(cudaErrorInvalidValue);
    maya_graph *g = (maya_graph *)graph;
    maya_graph_exec *x = calloc(1, sizeof *x);
    x->graph = g;
    __atomic_add_fetch(&g->refs, 1, __ATOMIC_RELAXED);
    x->id = __atomic_add_fetch(&g_next_graph, 1, __ATOMIC_RELAXED);
    maya_rec r;
    maya_rec_init(&r, MK_GRAPH_INSTANTIATE, maya_enter());
    r.a[0] = g->id;
    r.a[1] = x->id;
    maya_emit(&r);
    *exec = (cudaGraphExec_t)x;
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags) {
    return cudaGraphInstantiateWithFlags(exec, graph, flags);
}

MAYA_EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
    maya_graph_exec *x = (maya_graph_exec *)exec;
    if (!x) return maya_rt_error(cudaErrorInvalidValue);
    maya_graph *g = x->graph;
    t_drives_device = 1;
    record_simple(MK_GRAPH_LAUNCH, maya_enter(), stream, x->id, g->n, MF_ASYNC);
    uint32_t sid = maya_stream_id(stream);
    for (size_t i = 0; i < g->n; i++) {
        maya_rec r = g->recs[i];
        r.flags = (uint8_t)((r.flags & ~MF_CAPTURED) | MF_REPLAY);
        if (r.stream == g->origin_stream) r.stream = sid;  /* forked streams keep their ids */
        r.t_ns = maya_now_ns();
        r.dur_ns = 0;
        maya_emit_ext(&r, g->ext[i], g->n_ext[i]);
    }
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *num) {
    maya_graph *g = (maya_graph *)graph;
    if (!g || !num) return maya_rt_error(cudaErrorInvalidValue);
    if (nodes) {
        if (!g->nodes) {
            g->nodes = calloc(g->n + 1, sizeof *g->nodes);
            for (size_t i = 0; i < g->n; i++) g->nodes[i] = &g->recs[i];
        }
        size_t k = *num < g->n ? *num : g->n;
        memcpy(nodes, g->nodes, k * sizeof *nodes);
        *num = k;
    } else {
        *num = g->n;
    }
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaGraphNodeGetDependencies(cudaGraphNode_t node, cudaGraphNode_t *deps,
                                                     cudaGraphEdgeData *edges, size_t *num) {
    if (!num) return maya_rt_error(cudaErrorInvalidValue);
    *num = 0;  /* captured work is replayed in capture order */
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaGraphDebugDotPrint(cudaGraph_t graph, const char *path, unsigned int flags) {
    maya_graph *g = (maya_graph *)graph;
    FILE *f = (g && path) ? fopen(path, "w") : NULL;
    if (!f) return maya_rt_error(cudaErrorInvalidValue);
    fprintf(f, "digraph maya_graph_%llu {\n", (unsigned long long)g->id);
    for (size_t i = 0; i < g->n; i++) {
        fprintf(f, "  n%zu [label=\"kind %d stream %u\"];\n", i, g->recs[i].kind, g->recs[i].stream);
        if (i) fprintf(f, "  n%zu -> n%zu;\n", i - 1, i);
    }
    fprintf(f, "}\n");
    fclose(f);
    return cudaSuccess;
}

/* Executables outlive the graph handle (torch destroys it once instantiated). */
static void graph_unref(maya_graph *g) {
    if (__atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL) > 0) return;
    for (size_t i = 0; i < g->n; i++) free(g->ext[i]);
    free(g->ext);
    free(g->n_ext);
    free(g->recs);
    free(g->nodes);
    free(g);
}

MAYA_EXPORT cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    if (!graph) return maya_rt_error(cudaErrorInvalidValue);
    graph_unref((maya_graph *)graph);
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    maya_graph_exec *x = (maya_graph_exec *)exec;
    if (!x) return maya_rt_error(cudaErrorInvalidValue);
    graph_unref(x->graph);
    free(x);
    return cudaSuccess;
}

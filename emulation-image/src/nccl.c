/* NCCL, emulated.
 *
 * Communicators are real objects that every rank of a job creates in its own
 * process; collectives and point-to-point calls are recorded (MK_COLL) and
 * complete at once.  Small ones (per-rank payload up to the communicator's
 * slot, at most NCCL_SMALL_BYTES) also carry their real bytes between the
 * ranks through a shared-memory object per communicator (shm.c), because
 * torch reads some results on the host: DDP compares parameter shapes across
 * ranks, barrier() is a one-element all-reduce, Megatron exchanges tensor
 * shapes with send/recv.  Larger calls move nothing and wait for nobody.
 * Record layouts: emulation-image/docs/nccl.md. */
#define _GNU_SOURCE
/* nccl.h pulls in cuda_runtime.h and the fp16/bf16 headers, which need
 * CUDA's crt/ folder that the wheels do not ship; the runtime API header
 * has everything nccl.h uses (cudaStream_t, CUDART_VERSION). */
#include <cuda_runtime_api.h>
#define __CUDA_RUNTIME_H__
#define __CUDA_FP16_H__
#define __CUDA_BF16_H__
#include <nccl.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "maya.h"
#include "rt.h"
#include "shm.h"

/* Largest per-rank payload that moves real bytes. */
#define NCCL_SMALL_BYTES (1u << 20)
/* Virtual size budget of one communicator's shared object; communicators
 * of many ranks get smaller slots (and so a smaller "small" threshold). */
#define NCCL_SHM_BUDGET (256ull << 20)
#define NCCL_MIN_SLOT (64u << 10)
#define COMM_MAGIC 0x4c43434e4159414dull /* "MAYANCCL" */
#define MAX_REDOPS 256
#define UID_MAGIC "MAYA"

/* Operation codes of MK_COLL a[2] bits 0..7. */
enum {
    OP_ALLREDUCE = 1, OP_BROADCAST = 2, OP_REDUCE = 3, OP_ALLGATHER = 4, OP_REDUCESCATTER = 5,
    OP_ALLTOALL = 6, OP_SEND = 7, OP_RECV = 8, OP_GATHER = 9, OP_SCATTER = 10,
};
/* Reduction code recorded for every ncclRedOpCreatePreMulSum operator. */
#define REDOP_PREMULSUM 5
#define NO_REDOP 0xFF

typedef struct {
    int used;
    ncclDataType_t dt;
    const void *device_scalar;  /* ncclScalarDevice: read when the collective runs */
    double value;               /* ncclScalarHostImmediate: read at creation */
} premul_op;

struct ncclComm {
    uint64_t magic;
    uint64_t id;
    int nranks, rank, cudev;
    int local_clique;          /* from ncclCommInitAll: no data exchange */
    uint32_t seq;              /* collectives issued */
    uint32_t *send_idx, *recv_idx;  /* per peer: sends / receives issued */
    uint32_t nsplits;          /* splits and shrinks of this parent */
    size_t small;              /* payload limit for data movement */
    char run_id[64];
    maya_shm *shm;
    _Atomic int busy;          /* an exchange is running on this thread's behalf */
    _Atomic int dead;          /* destroyed while busy: leak rather than unmap */
    _Atomic int async_err;
    pthread_mutex_t lock;      /* reduction operators */
    premul_op ops[MAX_REDOPS];
};

/* The layout of ncclUniqueId.internal. */
typedef struct {
    char magic[4];
    uint32_t version;
    uint8_t random[16];
    char run_id[64];
} uid_layout;
_Static_assert(sizeof(uid_layout) <= NCCL_UNIQUE_ID_BYTES, "unique id too small");

/* One deferred or immediate call. */
typedef struct {
    int op;
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t dt;
    ncclRedOp_t redop;
    int peer;                  /* root or peer; -1 when none */
    struct ncclComm *comm;
    cudaStream_t stream;
    int done, moved, failed;
    uint64_t wait_ns;
} nccl_op;

/* ----------------------------------------------------------------- errors */

static pthread_mutex_t g_err_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_err[768];

/* Remember the message for ncclGetLastError; failures that mean a rank
 * hangs or disagrees always reach stderr. */
__attribute__((format(printf, 3, 4)))
static ncclResult_t fail(ncclResult_t res, int loud, const char *fmt, ...) {
    char msg[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&g_err_lock);
    snprintf(g_err, sizeof g_err, "%s", msg);
    pthread_mutex_unlock(&g_err_lock);
    if (loud) fprintf(stderr, "maya: nccl (rank %d): %s\n", maya_cfg()->rank, msg);
    else maya_log("nccl: %s", msg);
    return res;
}

/* ------------------------------------------------------------------ types */

static size_t dt_size(ncclDataType_t dt) {
    switch (dt) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}

static int dt_float(ncclDataType_t dt) {
    return dt == ncclFloat16 || dt == ncclBfloat16 || dt == ncclFloat32 || dt == ncclFloat64 ||
           dt == ncclFloat8e4m3 || dt == ncclFloat8e5m2;
}
static int dt_signed(ncclDataType_t dt) { return dt == ncclInt8 || dt == ncclInt32 || dt == ncclInt64; }

static float bits_f32(uint32_t x) { float f; memcpy(&f, &x, 4); return f; }
static uint32_t f32_bits(float f) { uint32_t x; memcpy(&x, &f, 4); return x; }

static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 0) {
        float f = (float)m * (1.0f / 16777216.0f);  /* zero or subnormal: m * 2^-24 */
        return sign ? -f : f;
    }
    if (e == 31) return bits_f32(sign | 0x7f800000u | (m << 13));
    return bits_f32(sign | ((e - 15 + 127) << 23) | (m << 13));
}

/* Round to nearest even, overflow to infinity. */
static uint16_t f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t e = (x >> 23) & 0xff, m = x & 0x7fffff;
    if (e == 0xff) return (uint16_t)(sign | 0x7c00 | (m ? 0x200 : 0));
    int ee = (int)e - 127 + 15;
    if (ee >= 31) return sign | 0x7c00;
    if (ee <= 0) {
        if (ee < -10) return sign;
        m |= 0x800000;
        int shift = 14 - ee;
        uint32_t hm = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (hm & 1))) hm++;
        return (uint16_t)(sign | hm);  /* hm may reach 0x400: the smallest normal */
    }
    uint32_t hm = m >> 13, rem = m & 0x1fff;
    uint16_t h = (uint16_t)(sign | ((uint32_t)ee << 10) | hm);
    if (rem > 0x1000 || (rem == 0x1000 && (hm & 1))) h++;  /* a carry rounds into the exponent */
    return h;
}

static float bf16_to_f32(uint16_t b) { return bits_f32((uint32_t)b << 16); }
static uint16_t f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);  /* quiet NaN */
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* fp8 through a table of the 256 codes: e4m3 (fn: no infinity, 0x7f NaN)
 * and e5m2 (IEEE-like). */
static float g_fp8[2][256];
static pthread_once_t g_fp8_once = PTHREAD_ONCE_INIT;

static float pow2f(int e) {
    float f = 1.0f;
    for (; e > 0; e--) f *= 2.0f;
    for (; e < 0; e++) f *= 0.5f;
    return f;
}

static void fp8_tables(void) {
    for (int k = 0; k < 2; k++) {
        int mbits = k ? 2 : 3, bias = k ? 15 : 7, emax = k ? 31 : 15;
        for (int c = 0; c < 256; c++) {
            int e = (c & 0x7f) >> mbits, m = c & ((1 << mbits) - 1);
            float v;
            if (e == 0) v = (float)m * pow2f(1 - bias - mbits);
            else v = (1.0f + (float)m / (float)(1 << mbits)) * pow2f(e - bias);
            if (k == 0 && (c & 0x7f) == 0x7f) v = bits_f32(0x7fc00000u);
            if (k == 1 && e == emax) v = m ? bits_f32(0x7fc00000u) : bits_f32(0x7f800000u);
            g_fp8[k][c] = (c & 0x80) ? -v : v;
        }
    }
}

static float fp8_to_f32(int k, uint8_t c) {
    pthread_once(&g_fp8_once, fp8_tables);
    return g_fp8[k][c];
}

/* Nearest code (ties to the even code), saturating at the largest finite. */
static uint8_t f32_to_fp8(int k, float v) {
    pthread_once(&g_fp8_once, fp8_tables);
    uint8_t sign = (f32_bits(v) >> 24) & 0x80;
    if (v != v) return k ? 0x7e : 0x7f;
    float a = v < 0 ? -v : v;
    int top = k ? 0x7b : 0x7e;
    if (k == 1 && a > g_fp8[1][top] * 1.125f) return sign | 0x7c;  /* past max + half ulp: inf */
    int lo = 0, hi = top;
    while (lo < hi) {  /* first code >= a */
        int mid = (lo + hi) / 2;
        if (g_fp8[k][mid] < a) lo = mid + 1;
        else hi = mid;
    }
    int c = lo;
    if (c > 0 && g_fp8[k][c] != a) {
        float dlo = a - g_fp8[k][c - 1], dhi = g_fp8[k][c] - a;
        if (g_fp8[k][c] < a || dlo < dhi || (dlo == dhi && !((c - 1) & 1))) c = c - 1;
    }
    return (uint8_t)(sign | c);
}

/* Element loads and stores through memcpy: buffers may be unaligned views. */
#define LD(T, p, i) ({ T v_; memcpy(&v_, (const char *)(p) + (i) * sizeof(T), sizeof(T)); v_; })
#define ST(T, p, i, x) do { T v_ = (T)(x); memcpy((char *)(p) + (i) * sizeof(T), &v_, sizeof(T)); } while (0)

static double ld_f(ncclDataType_t dt, const void *p, size_t i) {
    switch (dt) {
    case ncclFloat16: return f16_to_f32(LD(uint16_t, p, i));
    case ncclBfloat16: return bf16_to_f32(LD(uint16_t, p, i));
    case ncclFloat32: return LD(float, p, i);
    case ncclFloat64: return LD(double, p, i);
    case ncclFloat8e4m3: return fp8_to_f32(0, LD(uint8_t, p, i));
    case ncclFloat8e5m2: return fp8_to_f32(1, LD(uint8_t, p, i));
    default: return 0;
    }
}

static void st_f(ncclDataType_t dt, void *p, size_t i, double v) {
    switch (dt) {
    case ncclFloat16: ST(uint16_t, p, i, f32_to_f16((float)v)); break;
    case ncclBfloat16: ST(uint16_t, p, i, f32_to_bf16((float)v)); break;
    case ncclFloat32: ST(float, p, i, v); break;
    case ncclFloat64: ST(double, p, i, v); break;
    case ncclFloat8e4m3: ST(uint8_t, p, i, f32_to_fp8(0, (float)v)); break;
    case ncclFloat8e5m2: ST(uint8_t, p, i, f32_to_fp8(1, (float)v)); break;
    default: break;
    }
}

/* Integers travel as 64-bit two's complement; stores truncate (wrap). */
static uint64_t ld_i(ncclDataType_t dt, const void *p, size_t i) {
    switch (dt) {
    case ncclInt8: return (uint64_t)(int64_t)LD(int8_t, p, i);
    case ncclUint8: return LD(uint8_t, p, i);
    case ncclInt32: return (uint64_t)(int64_t)LD(int32_t, p, i);
    case ncclUint32: return LD(uint32_t, p, i);
    case ncclInt64: case ncclUint64: return LD(uint64_t, p, i);
    default: return 0;
    }
}

static void st_i(ncclDataType_t dt, void *p, size_t i, uint64_t v) {
    switch (dt) {
    case ncclInt8: case ncclUint8: ST(uint8_t, p, i, v); break;
    case ncclInt32: case ncclUint32: ST(uint32_t, p, i, v); break;
    case ncclInt64: case ncclUint64: ST(uint64_t, p, i, v); break;
    default: break;
    }
}

/* -------------------------------------------------------------- reduction */

static double comb_f(int op, double a, double b) {
    switch (op) {
    case ncclProd: return a * b;
    case ncclMax: return a > b || a != a ? a : b;
    case ncclMin: return a < b || a != a ? a : b;
    default: return a + b;  /* sum, avg, premulsum */
    }
}

static uint64_t comb_i(int op, int sgn, uint64_t a, uint64_t b) {
    switch (op) {
    case ncclProd: return a * b;
    case ncclMax: return sgn ? ((int64_t)a > (int64_t)b ? a : b) : (a > b ? a : b);
    case ncclMin: return sgn ? ((int64_t)a < (int64_t)b ? a : b) : (a < b ? a : b);
    default: return a + b;
    }
}

/* dst[i] = op over ranks of slot_r[off + i], in rank order so that every
 * rank computes the same bits. */
static void reduce_slots(maya_shm *s, int nranks, void *dst, size_t off, size_t n, ncclDataType_t dt,
                         int op) {
    if (dt_float(dt)) {
        for (size_t i = 0; i < n; i++) {
            double acc = ld_f(dt, maya_shm_slot(s, 0), off + i);
            for (int r = 1; r < nranks; r++) acc = comb_f(op, acc, ld_f(dt, maya_shm_slot(s, r), off + i));
            if (op == ncclAvg) acc /= nranks;
            st_f(dt, dst, i, acc);
        }
        return;
    }
    int sgn = dt_signed(dt);
    for (size_t i = 0; i < n; i++) {
        uint64_t acc = ld_i(dt, maya_shm_slot(s, 0), off + i);
        for (int r = 1; r < nranks; r++) acc = comb_i(op, sgn, acc, ld_i(dt, maya_shm_slot(s, r), off + i));
        if (op == ncclAvg) acc = sgn ? (uint64_t)((int64_t)acc / nranks) : acc / (uint64_t)nranks;
        st_i(dt, dst, i, acc);
    }
}

/* Copy this rank's contribution into its slot, pre-multiplied for
 * PreMulSum operators (the scalar is the local rank's own). */
static void contribute(struct ncclComm *cm, void *slot, const void *send, size_t n, ncclDataType_t dt,
                       ncclRedOp_t redop) {
    if (!send) return;
    if ((int)redop < ncclNumOps) {
        memcpy(slot, send, n * dt_size(dt));
        return;
    }
    premul_op *p = &cm->ops[(int)redop - ncclNumOps];
    double scale = p->value;
    if (p->device_scalar) scale = dt_float(dt) ? ld_f(dt, p->device_scalar, 0) : (double)(int64_t)ld_i(dt, p->device_scalar, 0);
    if (dt_float(dt)) {
        for (size_t i = 0; i < n; i++) st_f(dt, slot, i, ld_f(dt, send, i) * scale);
    } else {
        uint64_t k = (uint64_t)(int64_t)scale;
        for (size_t i = 0; i < n; i++) st_i(dt, slot, i, ld_i(dt, send, i) * k);
    }
}

static int base_op(ncclRedOp_t redop) { return (int)redop < ncclNumOps ? (int)redop : ncclSum; }

/* -------------------------------------------------------- communicators */

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ull;
    return h;
}
#define FNV0 1469598103934665603ull

static uint64_t uid_comm_id(const ncclUniqueId *u) {
    uint64_t h = fnv(FNV0, u->internal, sizeof u->internal);
    return h ? h : 1;
}

static void uid_run_id(const ncclUniqueId *u, char out[64]) {
    uid_layout l;
    memcpy(&l, u->internal, sizeof l);
    if (memcmp(l.magic, UID_MAGIC, 4) == 0 && memchr(l.run_id, 0, sizeof l.run_id) && l.run_id[0]) {
        memcpy(out, l.run_id, 64);
    } else {
        snprintf(out, 64, "%s", maya_cfg()->run_id);
    }
}

static int comm_valid(const struct ncclComm *cm) { return cm && cm->magic == COMM_MAGIC; }

static size_t comm_slot_bytes(int nranks) {
    uint64_t n = (uint64_t)nranks;
    uint64_t per = NCCL_SHM_BUDGET / (n + n * n);
    per &= ~4095ull;
    if (per > NCCL_SMALL_BYTES) per = NCCL_SMALL_BYTES;
    if (per < NCCL_MIN_SLOT) per = NCCL_MIN_SLOT;
    return (size_t)per;
}

/* Make a communicator; all ranks of it must do the same (the shared object
 * is attached collectively, like NCCL's own bootstrap). */
static ncclResult_t comm_create(struct ncclComm **out, uint64_t id, const char *run_id, int nranks, int rank,
                                int cudev, int local) {
    struct ncclComm *cm = calloc(1, sizeof *cm);
    uint32_t *idx = calloc(2 * (size_t)nranks, sizeof *idx);
    if (!cm || !idx) {
        free(cm);
        free(idx);
        return fail(ncclSystemError, 1, "out of host memory creating a communicator of %d ranks", nranks);
    }
    cm->id = id;
    cm->nranks = nranks;
    cm->rank = rank;
    cm->cudev = cudev;
    cm->local_clique = local;
    cm->send_idx = idx;
    cm->recv_idx = idx + nranks;
    cm->small = comm_slot_bytes(nranks);
    snprintf(cm->run_id, sizeof cm->run_id, "%s", run_id);
    pthread_mutex_init(&cm->lock, NULL);
    if (!local) {
        char name[128], err[512];
        snprintf(name, sizeof name, "/maya-%s-%016llx", run_id, (unsigned long long)id);
        cm->shm = maya_shm_attach(name, nranks, rank, cm->small, maya_shm_timeout_s(), err, sizeof err);
        if (!cm->shm) {
            free(idx);
            free(cm);
            return fail(ncclSystemError, 1, "communicator %016llx rank %d/%d: %s", (unsigned long long)id,
                        rank, nranks, err);
        }
    }
    cm->magic = COMM_MAGIC;
    *out = cm;
    return ncclSuccess;
}

static void comm_free(struct ncclComm *cm) {
    cm->magic = 0;
    if (atomic_load(&cm->busy)) {  /* another thread still waits in it: leak */
        atomic_store(&cm->dead, 1);
        return;
    }
    maya_shm_detach(cm->shm);
    pthread_mutex_destroy(&cm->lock);
    free(cm->send_idx);
    free(cm);
}

static void rec_comm_init(maya_call c, uint64_t id, int nranks, int rank, uint64_t parent, uint64_t colorkey,
                          int cudev, ncclResult_t res) {
    maya_rec r;
    maya_rec_init(&r, MK_COMM_INIT, c);
    r.device = (uint8_t)cudev;
    r.a32 = (uint32_t)maya_cfg()->rank;
    r.a[0] = id;
    r.a[1] = (uint32_t)nranks | (uint64_t)(uint32_t)rank << 32;
    r.a[2] = parent;
    r.a[3] = colorkey;
    r.a[4] = (uint64_t)cudev;
    if (res != ncclSuccess) r.flags |= MF_FAILED;
    maya_emit(&r);
}

static void rec_comm_destroy(maya_call c, struct ncclComm *cm, int how) {
    maya_rec r;
    maya_rec_init(&r, MK_COMM_DESTROY, c);
    r.device = (uint8_t)cm->cudev;
    r.a32 = (uint32_t)maya_cfg()->rank;
    r.a[0] = cm->id;
    r.a[1] = (uint64_t)how;
    r.a[2] = cm->seq;
    maya_emit(&r);
}

/* ------------------------------------------------------- data exchange */

/* The payload each rank puts in (or, for roots, sends out of) its buffer. */
static size_t send_bytes(const nccl_op *o) {
    size_t b = o->count * dt_size(o->dt);
    switch (o->op) {
    case OP_REDUCESCATTER: case OP_ALLTOALL: case OP_SCATTER: return b * (size_t)o->comm->nranks;
    default: return b;
    }
}

static int op_is_p2p(const nccl_op *o) { return o->op == OP_SEND || o->op == OP_RECV; }

/* Whether this call moves real bytes: the same answer on every rank. */
static int op_moves_data(const nccl_op *o) {
    struct ncclComm *cm = o->comm;
    if (!cm->shm || o->count == 0) return 0;
    if (send_bytes(o) > cm->small) return 0;
    /* A capture records the call without running it. */
    if (maya_capturing(maya_stream_id(o->stream))) return 0;
    return 1;
}

static void mark_failed(struct ncclComm *cm) { atomic_store(&cm->async_err, ncclRemoteError); }

/* One collective through the rank slots. */
static ncclResult_t exchange_coll(nccl_op *o) {
    struct ncclComm *cm = o->comm;
    maya_shm *s = cm->shm;
    int nr = cm->nranks, me = cm->rank, root = o->peer;
    size_t es = dt_size(o->dt), n = o->count, nb = n * es;
    char err[512];
    atomic_store(&cm->busy, 1);
    if (maya_shm_begin(s, &o->wait_ns, err, sizeof err) != 0) goto timeout;
    char *mine = maya_shm_slot(s, me);
    switch (o->op) {
    case OP_ALLREDUCE: case OP_REDUCE: contribute(cm, mine, o->send, n, o->dt, o->redop); break;
    case OP_REDUCESCATTER: contribute(cm, mine, o->send, n * (size_t)nr, o->dt, o->redop); break;
    case OP_BROADCAST: if (me == root && o->send) memcpy(mine, o->send, nb); break;
    case OP_ALLGATHER: case OP_GATHER: if (o->send) memcpy(mine, o->send, nb); break;
    case OP_ALLTOALL: if (o->send) memcpy(mine, o->send, nb * (size_t)nr); break;
    case OP_SCATTER: if (me == root && o->send) memcpy(mine, o->send, nb * (size_t)nr); break;
    }
    if (maya_shm_publish(s, &o->wait_ns, err, sizeof err) != 0) goto timeout;
    char *out = o->recv;
    if (out) {
        switch (o->op) {
        case OP_ALLREDUCE: reduce_slots(s, nr, out, 0, n, o->dt, base_op(o->redop)); break;
        case OP_REDUCE: if (me == root) reduce_slots(s, nr, out, 0, n, o->dt, base_op(o->redop)); break;
        case OP_REDUCESCATTER: reduce_slots(s, nr, out, (size_t)me * n, n, o->dt, base_op(o->redop)); break;
        case OP_BROADCAST: memmove(out, maya_shm_slot(s, root), nb); break;
        case OP_GATHER: if (me != root) break; /* fall through */
        case OP_ALLGATHER:
            for (int r = 0; r < nr; r++) memmove(out + (size_t)r * nb, maya_shm_slot(s, r), nb);
            break;
        case OP_ALLTOALL:
            for (int r = 0; r < nr; r++)
                memcpy(out + (size_t)r * nb, (char *)maya_shm_slot(s, r) + (size_t)me * nb, nb);
            break;
        case OP_SCATTER: memmove(out, (char *)maya_shm_slot(s, root) + (size_t)me * nb, nb); break;
        }
    }
    maya_shm_end(s);
    atomic_store(&cm->busy, 0);
    o->moved = 1;
    return ncclSuccess;
timeout:
    atomic_store(&cm->busy, 0);
    mark_failed(cm);
    o->failed = 1;
    return fail(ncclSystemError, 1, "communicator %016llx: %s", (unsigned long long)cm->id, err);
}

/* One attempt at a small send or receive; 1 when done. */
static int p2p_try(nccl_op *o) {
    struct ncclComm *cm = o->comm;
    size_t nb = o->count * dt_size(o->dt);
    if (o->op == OP_SEND) return maya_shm_send_try(cm->shm, o->peer, o->send, nb);
    size_t got = 0;
    if (!maya_shm_recv_try(cm->shm, o->peer, o->recv, nb, &got)) return 0;
    if (got != nb)
        fail(ncclSuccess, 1, "communicator %016llx: rank %d received %zu bytes from rank %d, expected %zu",
             (unsigned long long)cm->id, cm->rank, got, o->peer, nb);
    return 1;
}

/* Progress a set of small point-to-point calls in any order that keeps the
 * order of calls for the same (communicator, peer, direction): sends only
 * wait for the mailbox to be free, so grouped send/recv cannot deadlock. */
static ncclResult_t progress_p2p(nccl_op **ops, int n) {
    uint64_t t0 = 0, deadline = 0;
    double tmo = maya_shm_timeout_s();
    for (int i = 0; i < n; i++) atomic_store(&ops[i]->comm->busy, 1);
    for (unsigned attempt = 0;;) {
        int pending = 0, progress = 0;
        for (int i = 0; i < n; i++) {
            nccl_op *o = ops[i];
            if (o->done) continue;
            int blocked = 0;
            for (int j = 0; j < i && !blocked; j++)
                blocked = !ops[j]->done && ops[j]->comm == o->comm && ops[j]->op == o->op && ops[j]->peer == o->peer;
            if (!blocked && p2p_try(o)) {
                o->done = o->moved = 1;
                progress = 1;
            } else {
                pending++;
            }
        }
        if (!pending) break;
        if (progress) {
            attempt = 0;
            continue;
        }
        uint64_t now = maya_now_ns();
        if (!t0) {
            t0 = now;
            deadline = now + (uint64_t)(tmo * 1e9);
        } else if (now > deadline) {
            ncclResult_t res = ncclSuccess;
            for (int i = 0; i < n; i++) {
                nccl_op *o = ops[i];
                if (o->done) continue;
                o->failed = 1;
                mark_failed(o->comm);
                res = fail(ncclSystemError, 1,
                           "communicator %016llx: timed out after %.0f s: rank %d waits to %s rank %d "
                           "(no matching call on the peer; set MAYA_NCCL_TIMEOUT_S to wait longer)",
                           (unsigned long long)o->comm->id, tmo, o->comm->rank,
                           o->op == OP_SEND ? "send to" : "receive from", o->peer);
            }
            for (int i = 0; i < n; i++) atomic_store(&ops[i]->comm->busy, 0);
            if (n) ops[n - 1]->wait_ns += now - t0;
            return res;
        }
        maya_shm_backoff(attempt++);
    }
    if (t0 && n) ops[n - 1]->wait_ns += maya_now_ns() - t0;
    for (int i = 0; i < n; i++) atomic_store(&ops[i]->comm->busy, 0);
    return ncclSuccess;
}

/* --------------------------------------------------------------- records */

static void rec_coll(maya_call c, nccl_op *o, int in_group) {
    struct ncclComm *cm = o->comm;
    maya_rec r;
    maya_rec_init(&r, MK_COLL, c);
    r.device = (uint8_t)cm->cudev;
    r.stream = maya_stream_id(o->stream);
    r.flags |= MF_ASYNC;
    if (o->moved) r.flags |= MF_DATA;
    if (o->failed) r.flags |= MF_FAILED;
    /* Collectives count per communicator; send/recv per (peer, direction),
     * so the k-th send from A to B pairs with the k-th receive at B from A. */
    if (o->op == OP_SEND) r.a32 = ++cm->send_idx[o->peer];
    else if (o->op == OP_RECV) r.a32 = ++cm->recv_idx[o->peer];
    else r.a32 = ++cm->seq;
    int redop = NO_REDOP;
    if (o->op == OP_ALLREDUCE || o->op == OP_REDUCE || o->op == OP_REDUCESCATTER)
        redop = (int)o->redop < ncclNumOps ? (int)o->redop : REDOP_PREMULSUM;
    r.a[0] = cm->id;
    r.a[1] = o->count;
    r.a[2] = (uint64_t)o->op | (uint64_t)o->dt << 8 | (uint64_t)redop << 16 | (uint64_t)(in_group ? 1 : 0) << 24;
    r.a[3] = (uint64_t)(int64_t)o->peer;
    r.a[4] = send_bytes(o);
    uint64_t ext[3] = {o->wait_ns, (uint64_t)(uintptr_t)o->send, (uint64_t)(uintptr_t)o->recv};
    maya_emit_ext(&r, ext, 3);
    maya_collective_issued();
}

/* ---------------------------------------------------------------- groups */

static __thread int t_depth;
static __thread nccl_op *t_q;
static __thread int t_n, t_cap;
static __thread ncclResult_t t_group_err;

/* Run one call now (outside a group). */
static ncclResult_t run_now(maya_call c, nccl_op *o) {
    ncclResult_t res = ncclSuccess;
    if (op_moves_data(o)) {
        if (op_is_p2p(o)) res = progress_p2p(&o, 1);
        else res = exchange_coll(o);
    }
    rec_coll(c, o, 0);
    return res;
}

/* Run a group: point-to-point first (progressed together), then the
 * collectives in call order, which is the same on every rank. */
static ncclResult_t run_group(maya_call c, nccl_op *q, int n) {
    ncclResult_t res = ncclSuccess;
    nccl_op **p2p = calloc((size_t)n + 1, sizeof *p2p);
    if (!p2p) return fail(ncclSystemError, 1, "out of host memory in ncclGroupEnd");
    int np = 0;
    for (int i = 0; i < n; i++)
        if (op_is_p2p(&q[i]) && op_moves_data(&q[i])) p2p[np++] = &q[i];
    if (np) res = progress_p2p(p2p, np);
    free(p2p);
    for (int i = 0; i < n; i++) {
        if (op_is_p2p(&q[i]) || !op_moves_data(&q[i])) continue;
        ncclResult_t r = exchange_coll(&q[i]);
        if (r != ncclSuccess && res == ncclSuccess) res = r;
    }
    for (int i = 0; i < n; i++) rec_coll(c, &q[i], 1);
    return res;
}

static ncclResult_t submit(maya_call c, nccl_op *o) {
    struct ncclComm *cm = o->comm;
    if (!comm_valid(cm)) return fail(ncclInvalidArgument, 0, "invalid communicator %p", (void *)cm);
    if (!dt_size(o->dt)) return fail(ncclInvalidArgument, 0, "invalid data type %d", (int)o->dt);
    int reducing = o->op == OP_ALLREDUCE || o->op == OP_REDUCE || o->op == OP_REDUCESCATTER;
    if (reducing && (int)o->redop >= ncclNumOps) {
        int k = (int)o->redop - ncclNumOps;
        if (k >= MAX_REDOPS || !cm->ops[k].used)
            return fail(ncclInvalidArgument, 0, "invalid reduction operator %d", (int)o->redop);
    } else if (reducing && (int)o->redop < 0) {
        return fail(ncclInvalidArgument, 0, "invalid reduction operator %d", (int)o->redop);
    }
    int rooted = o->op == OP_BROADCAST || o->op == OP_REDUCE || o->op == OP_GATHER || o->op == OP_SCATTER;
    if ((rooted || op_is_p2p(o)) && (o->peer < 0 || o->peer >= cm->nranks))
        return fail(ncclInvalidArgument, 0, "%s %d out of range for %d ranks", rooted ? "root" : "peer", o->peer,
                    cm->nranks);
    int err = atomic_load(&cm->async_err);
    if (err != ncclSuccess)
        return fail((ncclResult_t)err, 0, "communicator %016llx failed earlier", (unsigned long long)cm->id);
    if (t_depth > 0) {
        if (t_n == t_cap) {
            int cap = t_cap ? 2 * t_cap : 16;
            nccl_op *q = realloc(t_q, (size_t)cap * sizeof *q);
            if (!q) return fail(ncclSystemError, 1, "out of host memory queueing a grouped call");
            t_q = q;
            t_cap = cap;
        }
        t_q[t_n++] = *o;
        return ncclSuccess;
    }
    return run_now(c, o);
}

static ncclResult_t coll(int op, const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t redop,
                         int peer, ncclComm_t comm, cudaStream_t stream) {
    maya_call c = maya_enter();
    nccl_op o = {op, send, recv, count, dt, redop, peer, comm, stream, 0, 0, 0, 0};
    ncclResult_t res = submit(c, &o);
    if (res != ncclSuccess && t_depth > 0 && t_group_err == ncclSuccess) t_group_err = res;
    return res;
}

/* ------------------------------------------------------------ public API */

MAYA_EXPORT ncclResult_t ncclGetVersion(int *version) {
    if (!version) return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

MAYA_EXPORT const char *ncclGetErrorString(ncclResult_t result) {
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

MAYA_EXPORT const char *ncclGetLastError(ncclComm_t comm) {
    (void)comm;
    return g_err;
}

MAYA_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId) {
    if (!uniqueId) return fail(ncclInvalidArgument, 0, "ncclGetUniqueId: NULL id");
    uid_layout l;
    memset(&l, 0, sizeof l);
    memcpy(l.magic, UID_MAGIC, 4);
    l.version = NCCL_VERSION_CODE;
    if (getrandom(l.random, sizeof l.random, 0) != (ssize_t)sizeof l.random) {
        /* No entropy source: time, pid and address still differ per call. */
        uint64_t x[2] = {maya_now_ns() ^ (uint64_t)getpid() << 32, (uint64_t)(uintptr_t)&l ^ (uint64_t)clock()};
        memcpy(l.random, x, sizeof l.random);
    }
    snprintf(l.run_id, sizeof l.run_id, "%s", maya_cfg()->run_id);
    memset(uniqueId, 0, sizeof *uniqueId);
    memcpy(uniqueId->internal, &l, sizeof l);
    return ncclSuccess;
}

static ncclResult_t init_rank(ncclComm_t *comm, int nranks, const ncclUniqueId *id, int rank) {
    maya_call c = maya_enter();
    if (!comm || !id) return fail(ncclInvalidArgument, 0, "ncclCommInitRank: NULL argument");
    *comm = NULL;
    uint64_t cid = uid_comm_id(id);
    int dev = maya_current_device();
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        rec_comm_init(c, cid, nranks, rank, 0, 0, dev, ncclInvalidArgument);
        return fail(ncclInvalidArgument, 0, "ncclCommInitRank: rank %d of %d", rank, nranks);
    }
    char run[64];
    uid_run_id(id, run);
    ncclResult_t res = comm_create(comm, cid, run, nranks, rank, dev, 0);
    rec_comm_init(c, cid, nranks, rank, 0, 0, dev, res);
    return res;
}

MAYA_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank) {
    return init_rank(comm, nranks, &commId, rank);
}

/* The configuration only tunes NCCL's algorithms and blocking mode; the
 * emulated init always completes before returning, which a non-blocking
 * caller also accepts. */
MAYA_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                                ncclConfig_t *config) {
    return init_rank(comm, nranks, &commId, rank);
}

MAYA_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                                  ncclUniqueId *commIds, ncclConfig_t *config) {
    if (nId < 1 || !commIds) return fail(ncclInvalidArgument, 0, "ncclCommInitRankScalable: no unique id");
    return init_rank(newcomm, nranks, &commIds[0], myrank);
}

/* All ranks in this process: communicators are created and record calls,
 * but no data moves (one thread cannot wait for itself). */
MAYA_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist) {
    maya_call c = maya_enter();
    if (!comm || ndev < 1) return fail(ncclInvalidArgument, 0, "ncclCommInitAll: bad arguments");
    ncclUniqueId id;
    ncclGetUniqueId(&id);
    uint64_t cid = uid_comm_id(&id);
    for (int i = 0; i < ndev; i++) {
        int dev = devlist ? devlist[i] : i;
        ncclResult_t res = comm_create(&comm[i], cid, maya_cfg()->run_id, ndev, i, dev, 1);
        rec_comm_init(c, cid, ndev, i, 0, 0, dev, res);
        if (res != ncclSuccess) {
            for (int j = 0; j < i; j++) comm_free(comm[j]);
            return res;
        }
    }
    return ncclSuccess;
}

/* The id of a child: every member derives the same one from the parent's
 * id, how many splits the parent has seen, and what distinguishes it. */
static uint64_t child_id(struct ncclComm *p, uint64_t what) {
    uint64_t w[3] = {p->id, p->nsplits, what};
    uint64_t h = fnv(FNV0, w, sizeof w);
    return h ? h : 1;
}

MAYA_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                       ncclConfig_t *config) {
    maya_call c = maya_enter();
    if (!newcomm) return fail(ncclInvalidArgument, 0, "ncclCommSplit: NULL newcomm");
    *newcomm = NULL;
    if (!comm_valid(comm)) return fail(ncclInvalidArgument, 0, "ncclCommSplit: invalid communicator");
    if (!comm->shm) {
        maya_unsupported("ncclCommSplit(single-process communicator)");
        return ncclInvalidUsage;
    }
    /* Every member's (color, key) through the parent: a real exchange. */
    maya_shm *s = comm->shm;
    char err[512];
    uint64_t waited = 0;
    atomic_store(&comm->busy, 1);
    if (maya_shm_begin(s, &waited, err, sizeof err) != 0) goto timeout;
    int32_t mine[2] = {color, key};
    memcpy(maya_shm_slot(s, comm->rank), mine, sizeof mine);
    if (maya_shm_publish(s, &waited, err, sizeof err) != 0) goto timeout;
    int n = 0, rank = 0;
    for (int r = 0; r < comm->nranks; r++) {
        int32_t ck[2];
        memcpy(ck, maya_shm_slot(s, r), sizeof ck);
        if (color == NCCL_SPLIT_NOCOLOR || ck[0] != color) continue;
        n++;
        if (ck[1] < key || (ck[1] == key && r < comm->rank)) rank++;
    }
    maya_shm_end(s);
    atomic_store(&comm->busy, 0);
    uint64_t cid = child_id(comm, (uint64_t)(uint32_t)color);
    comm->nsplits++;
    if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;
    ncclResult_t res = comm_create(newcomm, cid, comm->run_id, n, rank, comm->cudev, 0);
    rec_comm_init(c, cid, n, rank, comm->id, (uint32_t)color | (uint64_t)(uint32_t)key << 32, comm->cudev, res);
    return res;
timeout:
    atomic_store(&comm->busy, 0);
    mark_failed(comm);
    return fail(ncclSystemError, 1, "ncclCommSplit on %016llx: %s", (unsigned long long)comm->id, err);
}

MAYA_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                                        ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags) {
    maya_call c = maya_enter();
    if (!newcomm) return fail(ncclInvalidArgument, 0, "ncclCommShrink: NULL newcomm");
    *newcomm = NULL;
    if (!comm_valid(comm)) return fail(ncclInvalidArgument, 0, "ncclCommShrink: invalid communicator");
    if (excludeRanksCount < 0 || (excludeRanksCount > 0 && !excludeRanksList))
        return fail(ncclInvalidArgument, 0, "ncclCommShrink: bad exclude list");
    /* No exchange needed: survivors agree on the new numbering. */
    char *gone = calloc((size_t)comm->nranks, 1);
    if (!gone) return fail(ncclSystemError, 1, "out of host memory in ncclCommShrink");
    for (int i = 0; i < excludeRanksCount; i++)
        if (excludeRanksList[i] >= 0 && excludeRanksList[i] < comm->nranks) gone[excludeRanksList[i]] = 1;
    if (gone[comm->rank]) {
        free(gone);
        return fail(ncclInvalidArgument, 0, "ncclCommShrink: rank %d excludes itself", comm->rank);
    }
    int n = 0, rank = 0;
    uint64_t h = FNV0 ^ 0x5348524bull;  /* "SHRK" */
    for (int r = 0; r < comm->nranks; r++) {
        if (gone[r]) {
            h = fnv(h, &r, sizeof r);
            continue;
        }
        if (r < comm->rank) rank++;
        n++;
    }
    free(gone);
    uint64_t cid = child_id(comm, h);
    comm->nsplits++;
    ncclResult_t res = comm_create(newcomm, cid, comm->run_id, n, rank, comm->cudev, comm->local_clique);
    rec_comm_init(c, cid, n, rank, comm->id, 0xFFFFFFFEull | (uint64_t)(uint32_t)excludeRanksCount << 32,
                  comm->cudev, res);
    return res;
}

static ncclResult_t comm_end(ncclComm_t comm, int how) {
    maya_call c = maya_enter();
    if (!comm) return ncclSuccess;  /* NCCL accepts a NULL communicator here */
    if (!comm_valid(comm)) return fail(ncclInvalidArgument, 0, "invalid communicator %p", (void *)comm);
    maya_device_drained();  /* torch's shutdown then waits for its watchdog to see every work done */
    rec_comm_destroy(c, comm, how);
    if (how != 2) comm_free(comm);
    return ncclSuccess;
}

MAYA_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) { return comm_end(comm, 0); }
MAYA_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) { return comm_end(comm, 1); }
/* Nothing is in flight: finalize completes at once (state ncclSuccess). */
MAYA_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) { return comm_end(comm, 2); }

MAYA_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
    if (!comm_valid(comm) || !asyncError) return ncclInvalidArgument;
    *asyncError = (ncclResult_t)atomic_load(&comm->async_err);
    return ncclSuccess;
}

MAYA_EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
    if (!comm_valid(comm) || !count) return ncclInvalidArgument;
    *count = comm->nranks;
    return ncclSuccess;
}

MAYA_EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
    if (!comm_valid(comm) || !rank) return ncclInvalidArgument;
    *rank = comm->rank;
    return ncclSuccess;
}

MAYA_EXPORT ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device) {
    if (!comm_valid(comm) || !device) return ncclInvalidArgument;
    *device = comm->cudev;
    return ncclSuccess;
}

/* Registrations only need a handle that deregistration accepts. */
#define REG_MAGIC 0x4745524159414dull /* "MAYAREG" */
typedef struct {
    uint64_t magic;
    struct ncclComm *comm;
    void *buff;
    size_t size;
} registration;

static ncclResult_t reg_new(ncclComm_t comm, void *buff, size_t size, void **out) {
    if (!comm_valid(comm) || !out) return fail(ncclInvalidArgument, 0, "register: bad arguments");
    registration *g = malloc(sizeof *g);
    if (!g) return fail(ncclSystemError, 1, "out of host memory registering a buffer");
    *g = (registration){REG_MAGIC, comm, buff, size};
    *out = g;
    return ncclSuccess;
}

static ncclResult_t reg_free(void *handle) {
    registration *g = handle;
    if (!g || g->magic != REG_MAGIC) return fail(ncclInvalidArgument, 0, "deregister: unknown handle");
    g->magic = 0;
    free(g);
    return ncclSuccess;
}

MAYA_EXPORT ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle) {
    return reg_new(comm, buff, size, handle);
}

MAYA_EXPORT ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle) { return reg_free(handle); }

MAYA_EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                                int winFlags) {
    return reg_new(comm, buff, size, (void **)win);
}

MAYA_EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) { return reg_free(win); }

/* Device memory from the emulated allocator (recorded as MALLOC/FREE with
 * source MA_NCCL). */
MAYA_EXPORT ncclResult_t ncclMemAlloc(void **ptr, size_t size) {
    if (!ptr) return ncclInvalidArgument;
    *ptr = NULL;
    if (size == 0) return ncclSuccess;
    cudaError_t e = maya_malloc(ptr, size, maya_current_device(), MA_NCCL, NULL);
    if (e != cudaSuccess) {
        *ptr = NULL;
        return fail(ncclUnhandledCudaError, 0, "ncclMemAlloc(%zu): out of device memory", size);
    }
    return ncclSuccess;
}

MAYA_EXPORT ncclResult_t ncclMemFree(void *ptr) {
    if (!ptr) return ncclSuccess;
    return maya_free(ptr, MA_NCCL, NULL) == cudaSuccess ? ncclSuccess : ncclInvalidArgument;
}

MAYA_EXPORT ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                                  ncclScalarResidence_t residence, ncclComm_t comm) {
    if (!op || !scalar || !comm_valid(comm) || !dt_size(datatype))
        return fail(ncclInvalidArgument, 0, "ncclRedOpCreatePreMulSum: bad arguments");
    pthread_mutex_lock(&comm->lock);
    int k = 0;
    while (k < MAX_REDOPS && comm->ops[k].used) k++;
    if (k == MAX_REDOPS) {
        pthread_mutex_unlock(&comm->lock);
        return fail(ncclInvalidUsage, 0, "too many live reduction operators (%d)", MAX_REDOPS);
    }
    premul_op *p = &comm->ops[k];
    p->used = 1;
    p->dt = datatype;
    p->device_scalar = residence == ncclScalarDevice ? scalar : NULL;
    p->value = residence == ncclScalarDevice ? 0
               : dt_float(datatype)      ? ld_f(datatype, scalar, 0)
                                         : (double)(int64_t)ld_i(datatype, scalar, 0);
    pthread_mutex_unlock(&comm->lock);
    *op = (ncclRedOp_t)(ncclNumOps + k);
    return ncclSuccess;
}

MAYA_EXPORT ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
    int k = (int)op - ncclNumOps;
    if (!comm_valid(comm) || k < 0 || k >= MAX_REDOPS || !comm->ops[k].used)
        return fail(ncclInvalidArgument, 0, "ncclRedOpDestroy: unknown operator %d", (int)op);
    pthread_mutex_lock(&comm->lock);
    comm->ops[k].used = 0;
    pthread_mutex_unlock(&comm->lock);
    return ncclSuccess;
}

MAYA_EXPORT ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                       ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    return coll(OP_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, -1, comm, stream);
}

MAYA_EXPORT ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                       int root, ncclComm_t comm, cudaStream_t stream) {
    return coll(OP_BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
}

MAYA_EXPORT ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                   cudaStream_t stream) {
    return coll(OP_BROADCAST, buff, buff, count, datatype, ncclSum, root, comm, stream);
}

MAYA_EXPORT ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                    ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
    return coll(OP_REDUCE, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

MAYA_EXPORT ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                       ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
    return coll(OP_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, -1, comm, stream);
}

MAYA_EXPORT ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                           cudaStream_t stream) {
    return coll(OP_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, op, -1, comm, stream);
}

MAYA_EXPORT ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                      ncclComm_t comm, cudaStream_t stream) {
    return coll(OP_ALLTOALL, sendbuff, recvbuff, count, datatype, ncclSum, -1, comm, stream);
}

MAYA_EXPORT ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                    int root, ncclComm_t comm, cudaStream_t stream) {
    return coll(OP_GATHER, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
}

MAYA_EXPORT ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                     int root, ncclComm_t comm, cudaStream_t stream) {
    return coll(OP_SCATTER, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
}

MAYA_EXPORT ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                  ncclComm_t comm, cudaStream_t stream) {
    return coll(OP_SEND, sendbuff, NULL, count, datatype, ncclSum, peer, comm, stream);
}

MAYA_EXPORT ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                                  cudaStream_t stream) {
    return coll(OP_RECV, NULL, recvbuff, count, datatype, ncclSum, peer, comm, stream);
}

MAYA_EXPORT ncclResult_t ncclGroupStart(void) {
    if (t_depth++ == 0) {
        t_n = 0;
        t_group_err = ncclSuccess;
    }
    return ncclSuccess;
}

MAYA_EXPORT ncclResult_t ncclGroupEnd(void) {
    maya_call c = maya_enter();
    if (t_depth <= 0) return fail(ncclInvalidUsage, 0, "ncclGroupEnd without ncclGroupStart");
    if (--t_depth > 0) return ncclSuccess;
    int n = t_n;
    t_n = 0;
    ncclResult_t res = run_group(c, t_q, n);
    return t_group_err != ncclSuccess ? t_group_err : res;
}

/* Ends the group without running it, with a rough estimate (us) of what it
 * would take: 10 us per call plus its bytes at 100 GB/s. */
MAYA_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo) {
    if (t_depth <= 0) return fail(ncclInvalidUsage, 0, "ncclGroupSimulateEnd without ncclGroupStart");
    if (--t_depth > 0) return ncclSuccess;
    double us = 0;
    for (int i = 0; i < t_n; i++) us += 10.0 + (double)send_bytes(&t_q[i]) / 100e3;
    t_n = 0;
    if (simInfo) simInfo->estimatedTime = (float)us;
    return ncclSuccess;
}

/* The device-side API (symmetric kernels) is not emulated.  The header is
 * C++/CUDA only; the arguments are pointers. */
MAYA_EXPORT ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void *reqs, void *outDevComm) {
    maya_unsupported("ncclDevCommCreate");
    return ncclInvalidUsage;
}

MAYA_EXPORT ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const void *devComm) {
    maya_unsupported("ncclDevCommDestroy");
    return ncclInvalidUsage;
}

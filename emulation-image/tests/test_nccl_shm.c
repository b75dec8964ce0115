/* Emulated NCCL across fork()ed ranks (nccl.c, shm.c).
 *
 * Covers: unique id and communicator creation; small collectives moving real
 * data (all-reduce sum/avg/max/premulsum over fp32, fp16, bf16, int32,
 * int64; broadcast; reduce; all-gather; reduce-scatter; all-to-all);
 * grouped send/recv around a ring, two messages per pair; ungrouped
 * send/recv; ncclCommSplit by parity with an all-reduce on the children;
 * large calls completing without a peer; a missing rank failing with a
 * timeout instead of hanging; no object left in /dev/shm. */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#define __CUDA_RUNTIME_H__
#define __CUDA_FP16_H__
#define __CUDA_BF16_H__
#include <nccl.h>

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "test_nccl_shm: rank %d: %s:%d: %s\n", g_rank, __FILE__, __LINE__, #cond); \
            _exit(1);                                                                      \
        }                                                                                  \
    } while (0)
#define OK(call) CHECK((call) == ncclSuccess)
#ifndef TEST_MAX_RANKS
#define TEST_MAX_RANKS 4  /* arrays below hold up to 8 */
#endif

static int g_rank = -1;
static const char *g_run = "nccltest";

static const char *SPEC =
    "name=H100-SXM-80GB;marketing=NVIDIA H100 80GB HBM3;cc=9.0;sms=132;mem=85520809984;"
    "reserved=536870912;clock_khz=1980000;mem_clock_khz=2619000;bus_width=5120;l2=52428800;"
    "smem_sm=233472;smem_block=49152;smem_optin=232448;regs_sm=65536;regs_block=65536;"
    "threads_sm=2048;blocks_sm=32;pci_id=0x2330";

static uint16_t to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    return (uint16_t)(x >> 16);  /* exact for the small integers used here */
}
static float from_bf16(uint16_t b) {
    uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}
/* fp16 of small integers: exponent 15 + e, mantissa from the integer. */
static uint16_t to_f16_int(int v) {
    if (v == 0) return 0;
    int e = 0;
    while ((v >> e) > 1) e++;
    return (uint16_t)(((15 + e) << 10) | (((v << 10) >> e) & 0x3ff));
}

static void collectives(ncclComm_t comm, int r, int n) {
    /* fp32 sum, in place */
    float f[4];
    for (int i = 0; i < 4; i++) f[i] = (float)(r + 1) * (float)(i + 1);
    OK(ncclAllReduce(f, f, 4, ncclFloat32, ncclSum, comm, NULL));
    for (int i = 0; i < 4; i++) CHECK(f[i] == (float)(n * (n + 1) / 2) * (float)(i + 1));

    /* int64 max, int32 avg */
    int64_t l = 100 + r;
    OK(ncclAllReduce(&l, &l, 1, ncclInt64, ncclMax, comm, NULL));
    CHECK(l == 100 + n - 1);
    int32_t iv = 10 * (r + 1), ia = 0;
    OK(ncclAllReduce(&iv, &ia, 1, ncclInt32, ncclAvg, comm, NULL));
    CHECK(ia == 10 * (n + 1) / 2);

    /* bf16 and fp16 sums */
    uint16_t b = to_bf16((float)(r + 1)), bo;
    OK(ncclAllReduce(&b, &bo, 1, ncclBfloat16, ncclSum, comm, NULL));
    CHECK(from_bf16(bo) == (float)(n * (n + 1) / 2));
    uint16_t h = to_f16_int(r + 1), ho;
    OK(ncclAllReduce(&h, &ho, 1, ncclFloat16, ncclSum, comm, NULL));
    CHECK(ho == to_f16_int(n * (n + 1) / 2));

    /* premulsum: each rank scales its own value by 0.5 */
    float half = 0.5f, pv = 2.0f * (float)(r + 1);
    ncclRedOp_t op;
    OK(ncclRedOpCreatePreMulSum(&op, &half, ncclFloat32, ncclScalarHostImmediate, comm));
    OK(ncclAllReduce(&pv, &pv, 1, ncclFloat32, op, comm, NULL));
    OK(ncclRedOpDestroy(op, comm));
    CHECK(pv == (float)(n * (n + 1) / 2));

    /* broadcast from the last rank; reduce to rank 0 */
    int32_t bc[3] = {r, r, r};
    OK(ncclBroadcast(bc, bc, 3, ncclInt32, n - 1, comm, NULL));
    CHECK(bc[0] == n - 1 && bc[2] == n - 1);
    double d = r, dsum = -1;
    OK(ncclReduce(&d, &dsum, 1, ncclFloat64, ncclSum, 0, comm, NULL));
    CHECK(r != 0 || dsum == (double)(n * (n - 1) / 2));
    CHECK(r == 0 || dsum == -1);

    /* all-gather, in place at offset rank */
    int32_t g[16];
    memset(g, 0xff, sizeof g);
    g[2 * r] = r;
    g[2 * r + 1] = 1000 + r;
    OK(ncclAllGather(&g[2 * r], g, 2, ncclInt32, comm, NULL));
    for (int k = 0; k < n; k++) CHECK(g[2 * k] == k && g[2 * k + 1] == 1000 + k);

    /* reduce-scatter: block k of rank r holds r*100 + k */
    float rs[8], ro = -1;
    for (int k = 0; k < n; k++) rs[k] = (float)(r * 100 + k);
    OK(ncclReduceScatter(rs, &ro, 1, ncclFloat32, ncclSum, comm, NULL));
    CHECK(ro == (float)(100 * n * (n - 1) / 2 + n * r));

    /* all-to-all: rank r sends r*10 + k to rank k */
    int32_t a2s[8], a2r[8];
    for (int k = 0; k < n; k++) a2s[k] = r * 10 + k;
    OK(ncclAlltoAll(a2s, a2r, 1, ncclInt32, comm, NULL));
    for (int k = 0; k < n; k++) CHECK(a2r[k] == k * 10 + r);

    /* grouped ring: two messages to the next rank, two from the previous */
    int next = (r + 1) % n, prev = (r + n - 1) % n;
    int32_t s1 = r, s2 = 100 + r, r1 = -1, r2 = -1;
    OK(ncclGroupStart());
    OK(ncclRecv(&r1, 1, ncclInt32, prev, comm, NULL));
    OK(ncclRecv(&r2, 1, ncclInt32, prev, comm, NULL));
    OK(ncclSend(&s1, 1, ncclInt32, next, comm, NULL));
    OK(ncclSend(&s2, 1, ncclInt32, next, comm, NULL));
    CHECK(r1 == -1);  /* deferred until ncclGroupEnd */
    OK(ncclGroupEnd());
    CHECK(r1 == prev && r2 == 100 + prev);

    /* ungrouped: rank 0 sends to 1, 1 answers */
    if (n >= 2 && r < 2) {
        int64_t m = r == 0 ? 42 : -1;
        if (r == 0) {
            OK(ncclSend(&m, 1, ncclInt64, 1, comm, NULL));
            OK(ncclRecv(&m, 1, ncclInt64, 1, comm, NULL));
            CHECK(m == 43);
        } else {
            OK(ncclRecv(&m, 1, ncclInt64, 0, comm, NULL));
            m++;
            OK(ncclSend(&m, 1, ncclInt64, 0, comm, NULL));
        }
    }

    /* large: nothing moves, nobody waits (only rank 0 issues it) */
    if (r == 0) {
        float *big = calloc(1 << 20, sizeof *big);
        CHECK(big);
        OK(ncclAllReduce(big, big, 1 << 20, ncclFloat32, ncclSum, comm, NULL));
        free(big);
    }
}

static void child(ncclUniqueId id, int r, int n) {
    g_rank = r;
    ncclComm_t comm;
    OK(ncclCommInitRank(&comm, n, id, r));
    int cnt = 0, ur = -1;
    OK(ncclCommCount(comm, &cnt));
    OK(ncclCommUserRank(comm, &ur));
    CHECK(cnt == n && ur == r);
    collectives(comm, r, n);

    /* split by parity, reversed order inside each half */
    ncclComm_t sub;
    OK(ncclCommSplit(comm, r % 2, -r, &sub, NULL));
    CHECK(sub != NULL);
    int sn = 0, sr = -1;
    OK(ncclCommCount(sub, &sn));
    OK(ncclCommUserRank(sub, &sr));
    CHECK(sn == (n - r % 2 + 1) / 2);
    int32_t one = r, tot = 0;
    OK(ncclAllReduce(&one, &tot, 1, ncclInt32, ncclSum, sub, NULL));
    int want = 0;
    for (int k = r % 2; k < n; k += 2) want += k;
    CHECK(tot == want);
    collectives(sub, sr, sn);
    OK(ncclCommDestroy(sub));

    /* NOCOLOR gives no communicator */
    ncclComm_t none = (ncclComm_t)1;
    OK(ncclCommSplit(comm, r == 0 ? NCCL_SPLIT_NOCOLOR : 1, 0, &none, NULL));
    CHECK(r != 0 || none == NULL);
    if (none) OK(ncclCommDestroy(none));

    ncclResult_t ae = ncclInternalError;
    OK(ncclCommGetAsyncError(comm, &ae));
    CHECK(ae == ncclSuccess);
    OK(ncclCommDestroy(comm));
    _exit(0);
}

static int run_ranks(int n) {
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
    pid_t pids[8];
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        if (pids[r] == 0) child(id, r, n);
    }
    int bad = 0;
    for (int r = 0; r < n; r++) {
        int st = 0;
        waitpid(pids[r], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) bad++;
    }
    return bad;
}

/* Objects of this run left in /dev/shm. */
static int leftovers(void) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "maya-%s-", g_run);
    DIR *d = opendir("/dev/shm");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
    if (d) closedir(d);
    return n;
}

int main(void) {
    setenv("MAYA_GPU_SPEC", SPEC, 0);
    setenv("MAYA_RUN_ID", g_run, 1);
    unsetenv("MAYA_TRACE_DIR");
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess || v != NCCL_VERSION_CODE) {
        fprintf(stderr, "test_nccl_shm: version %d\n", v);
        return 1;
    }
    int failed = 0;
    for (int n = 1; n <= TEST_MAX_RANKS; n++) {
        int bad = run_ranks(n);
        if (bad) fprintf(stderr, "test_nccl_shm: %d of %d ranks failed\n", bad, n);
        failed |= bad;
    }

    /* A rank that never joins: init fails after the timeout, not a hang. */
    fprintf(stderr, "test_nccl_shm: a timeout message follows (expected)\n");
    setenv("MAYA_NCCL_TIMEOUT_S", "1", 1);
    ncclUniqueId id;
    ncclGetUniqueId(&id);
    ncclComm_t comm = NULL;
    ncclResult_t res = ncclCommInitRank(&comm, 2, id, 0);
    if (res != ncclSystemError || comm != NULL || !strstr(ncclGetLastError(NULL), "timed out")) {
        fprintf(stderr, "test_nccl_shm: missing rank gave %d (%s)\n", res, ncclGetLastError(NULL));
        failed = 1;
    }
    if (leftovers()) {
        fprintf(stderr, "test_nccl_shm: %d objects left in /dev/shm\n", leftovers());
        failed = 1;
    }
    printf("test_nccl_shm: %s\n", failed ? "FAILED" : "ok");
    return failed ? 1 : 0;
}

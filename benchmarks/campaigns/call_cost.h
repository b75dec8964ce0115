/* What benchmarks/campaigns/server_call_cost.cu and benchmarks/campaigns/server_dnn_cost.c share:
 * a CUDA-style status check and the timing of one call kind, the median of
 * REPS batches of BATCH calls (ns_per_call). */
#ifndef MAYA_CALL_COST_H
#define MAYA_CALL_COST_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BATCH 200
#define REPS 60

#define CHECK(x)                                                                   \
    do {                                                                           \
        int rc_ = (int)(x);                                                        \
        if (rc_ != 0) {                                                            \
            fprintf(stderr, "%s failed: %d (line %d)\n", #x, rc_, __LINE__);       \
            exit(1);                                                               \
        }                                                                          \
    } while (0)

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Host ns per call of one kind: `batch` issues BATCH calls of `kind` and `drain` waits for the
 * device; a batch's host time over BATCH is one sample, after three warm-up batches, and the
 * median of REPS samples is returned. */
static double ns_per_call(void (*batch)(int kind, void *ctx), void (*drain)(void *ctx), int kind, void *ctx)
{
    double sample[REPS];
    for (int rep = -3; rep < REPS; rep++) {
        double t0 = now_ns();
        batch(kind, ctx);
        double t1 = now_ns();
        drain(ctx);
        if (rep >= 0) sample[rep] = (t1 - t0) / BATCH;
    }
    qsort(sample, REPS, sizeof sample[0], cmp_double);
    return sample[REPS / 2];
}

#endif

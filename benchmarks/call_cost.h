/* What benchmarks/server_call_cost.cu and benchmarks/server_dnn_cost.c share:
 * a CUDA-style status check, a monotonic clock, and the median of samples
 * (each benchmark prints the median of REPS batches of BATCH calls). */
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

/* The median of n samples (sorts them). */
static double median_of(double *sample, int n)
{
    qsort(sample, n, sizeof sample[0], cmp_double);
    return sample[n / 2];
}

#endif

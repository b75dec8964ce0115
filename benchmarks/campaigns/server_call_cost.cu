/* Host time the real CUDA stack spends per call on a GPU server: what the
 * interposer's quick stand-ins leave out of emulated host delays.
 *
 *   nvcc -O2 -o call_cost benchmarks/campaigns/server_call_cost.cu -lcublas && ./call_cost
 *
 * Each call kind is issued in batches of BATCH calls on one stream (few
 * enough that the launch queue never fills, so the host is never held by
 * the device); a batch's host time over BATCH is one sample, the stream is
 * drained between batches, and the median of REPS samples is printed as
 * one JSON line (ns per call). */
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "call_cost.h"

__global__ void null_kernel(float *a, const float *b, int n) {
    if (n < 0) a[threadIdx.x] = b[threadIdx.x];
}

enum { LAUNCH, MEMSET, MEMCPY, GEMM, KINDS };
static const char *NAMES[KINDS] = {"kernel", "memset", "memcpy", "blas"};

struct calls {
    cudaStream_t s;
    float *a, *b;
    __half *ha, *hb, *hc;
    cublasHandle_t h;
};

static void batch(int kind, void *ctx) {
    struct calls *c = (struct calls *)ctx;
    const float one = 1.0f, zero = 0.0f;
    for (int i = 0; i < BATCH; i++) {
        switch (kind) {
        case LAUNCH: null_kernel<<<1024, 256, 0, c->s>>>(c->a, c->b, i); break;
        case MEMSET: CHECK(cudaMemsetAsync(c->a, 0, 4096, c->s)); break;
        case MEMCPY: CHECK(cudaMemcpyAsync(c->a, c->b, 4096, cudaMemcpyDeviceToDevice, c->s)); break;
        case GEMM:
            CHECK(cublasGemmEx(c->h, CUBLAS_OP_N, CUBLAS_OP_N, 64, 64, 64, &one, c->ha, CUDA_R_16F, 64, c->hb,
                               CUDA_R_16F, 64, &zero, c->hc, CUDA_R_16F, 64, CUBLAS_COMPUTE_32F,
                               CUBLAS_GEMM_DEFAULT));
            break;
        }
    }
}

static void drain(void *ctx) {
    CHECK(cudaGetLastError());
    CHECK(cudaStreamSynchronize(((struct calls *)ctx)->s));
}

int main(void) {
    struct calls c;
    CHECK(cudaStreamCreateWithFlags(&c.s, cudaStreamNonBlocking));
    CHECK(cudaMalloc(&c.a, 1 << 20));
    CHECK(cudaMalloc(&c.b, 1 << 20));
    CHECK(cudaMalloc(&c.ha, 64 * 64 * 2));
    CHECK(cudaMalloc(&c.hb, 64 * 64 * 2));
    CHECK(cudaMalloc(&c.hc, 64 * 64 * 2));
    CHECK(cublasCreate(&c.h));
    CHECK(cublasSetStream(c.h, c.s));
    printf("{");
    for (int k = 0; k < KINDS; k++)
        printf("%s\"%s\": %.1f", k ? ", " : "", NAMES[k], ns_per_call(batch, drain, k, &c));
    printf("}\n");
    return 0;
}

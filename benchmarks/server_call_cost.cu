/* Host time the real CUDA stack spends per call on a GPU server: what the
 * interposer's quick stand-ins leave out of emulated host delays.
 *
 *   nvcc -O2 -o call_cost benchmarks/server_call_cost.cu -lcublas && ./call_cost
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

int main(void) {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *a, *b;
    CHECK(cudaMalloc(&a, 1 << 20));
    CHECK(cudaMalloc(&b, 1 << 20));
    __half *ha, *hb, *hc;
    CHECK(cudaMalloc(&ha, 64 * 64 * 2));
    CHECK(cudaMalloc(&hb, 64 * 64 * 2));
    CHECK(cudaMalloc(&hc, 64 * 64 * 2));
    cublasHandle_t h;
    CHECK(cublasCreate(&h));
    CHECK(cublasSetStream(h, s));
    const float one = 1.0f, zero = 0.0f;
    printf("{");
    for (int k = 0; k < KINDS; k++) {
        double sample[REPS];
        for (int rep = -3; rep < REPS; rep++) { /* three warm-up batches */
            double t0 = now_ns();
            for (int i = 0; i < BATCH; i++) {
                switch (k) {
                case LAUNCH: null_kernel<<<1024, 256, 0, s>>>(a, b, i); break;
                case MEMSET: CHECK(cudaMemsetAsync(a, 0, 4096, s)); break;
                case MEMCPY: CHECK(cudaMemcpyAsync(a, b, 4096, cudaMemcpyDeviceToDevice, s)); break;
                case GEMM:
                    CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 64, 64, 64, &one, ha, CUDA_R_16F, 64, hb,
                                       CUDA_R_16F, 64, &zero, hc, CUDA_R_16F, 64, CUBLAS_COMPUTE_32F,
                                       CUBLAS_GEMM_DEFAULT));
                    break;
                }
            }
            double t1 = now_ns();
            CHECK(cudaGetLastError());
            CHECK(cudaStreamSynchronize(s));
            if (rep >= 0) sample[rep] = (t1 - t0) / BATCH;
        }
        printf("%s\"%s\": %.1f", k ? ", " : "", NAMES[k], median_of(sample, REPS));
    }
    printf("}\n");
    return 0;
}

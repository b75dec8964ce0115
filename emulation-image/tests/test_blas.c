/* Unit tests of the cuBLAS/cuBLASLt emulation (src/cublas.c, src/cublaslt.c),
 * no CUDA process needed:
 * - handles: create/destroy, stream/workspace/math/pointer mode round trips,
 *   versions from the headers, a cuBLAS handle accepted as the Lt handle;
 * - Lt descriptors: every attribute stored and read back, defaults, size
 *   queries, wrong sizes and unknown attributes rejected, Init_internal;
 * - heuristic: one algorithm, success, workspace within the preference;
 * - MK_BLAS records in the trace: m/n/k/batch, transposes, epilogue, types,
 *   compute type under TF32 math mode, workspace, alpha/beta from host and
 *   device pointers, bias pointer and type, strides;
 * - host outputs set (dot result, solver info) and unsupported stubs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "check.h"



/* Not in any header: the asm-label stub of cublas.c. */
cublasStatus_t cublasSaxpy_v2(cublasHandle_t, int, const float *, const float *, int, float *, int);

static double f64(uint64_t u) {
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static void test_handles(void) {
    cublasHandle_t h;
    CHECK(cublasCreate_v2(&h) == CUBLAS_STATUS_SUCCESS && h);
    cudaStream_t s = (cudaStream_t)0;
    CHECK(cublasSetStream_v2(h, s) == 0);
    cudaStream_t got = (cudaStream_t)1;
    CHECK(cublasGetStream_v2(h, &got) == 0 && got == s);
    cublasMath_t mm;
    CHECK(cublasGetMathMode(h, &mm) == 0 && mm == CUBLAS_DEFAULT_MATH);
    CHECK(cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH) == 0);
    CHECK(cublasGetMathMode(h, &mm) == 0 && mm == CUBLAS_TF32_TENSOR_OP_MATH);
    cublasPointerMode_t pm;
    CHECK(cublasGetPointerMode_v2(h, &pm) == 0 && pm == CUBLAS_POINTER_MODE_HOST);
    CHECK(cublasSetPointerMode_v2(h, (cublasPointerMode_t)7) == CUBLAS_STATUS_INVALID_VALUE);
    int v = 0;
    CHECK(cublasGetVersion_v2(h, &v) == 0 && v == CUBLAS_VERSION);
    CHECK(cublasLtGetVersion() == CUBLAS_VERSION);
    CHECK(cublasGetProperty(MAJOR_VERSION, &v) == 0 && v == CUBLAS_VER_MAJOR);
    CHECK(cublasDestroy_v2(h) == 0);
    CHECK(cublasSetStream_v2(NULL, s) == CUBLAS_STATUS_NOT_INITIALIZED);
    cublasLtHandle_t lt;
    CHECK(cublasLtCreate(&lt) == 0 && cublasLtDestroy(lt) == 0);
    CHECK(cublasSaxpy_v2(NULL, 0, NULL, NULL, 1, NULL, 1) == CUBLAS_STATUS_NOT_SUPPORTED);
}

static void test_descriptors(void) {
    cublasLtMatmulDesc_t d;
    CHECK(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F) == 0);
    size_t w = 0;
    uint32_t ep = 0;
    CHECK(cublasLtMatmulDescGetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, NULL, 0, &w) == 0 && w == 4);
    CHECK(cublasLtMatmulDescGetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, 4, &w) == 0 &&
          ep == CUBLASLT_EPILOGUE_DEFAULT);
    int32_t bt = 0;
    CHECK(cublasLtMatmulDescGetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, 4, NULL) == 0 && bt == -1);
    const void *bias = (const void *)0x1000;
    CHECK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, 4) ==
          CUBLAS_STATUS_INVALID_VALUE);
    CHECK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias) == 0);
    const void *back = NULL;
    CHECK(cublasLtMatmulDescGetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &back, sizeof back, &w) == 0 &&
          back == bias && w == 8);
    int8_t fast = 1;
    CHECK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, 1) == 0);
    CHECK(cublasLtMatmulDescSetAttribute(d, (cublasLtMatmulDescAttributes_t)27, &fast, 1) ==
          CUBLAS_STATUS_INVALID_VALUE);
    CHECK(cublasLtMatmulDescDestroy(d) == 0);

    cublasLtMatrixLayoutOpaque_t storage;
    cublasLtMatrixLayout_t l = &storage;
    CHECK(cublasLtMatrixLayoutInit(l, CUDA_R_16BF, 10, 20, 10) == 0);
    uint64_t rows = 0;
    int32_t batch = 0, order = -1;
    CHECK(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, 8, &w) == 0 && rows == 10);
    CHECK(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, 4, &w) == 0 && batch == 1);
    CHECK(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &order, 4, &w) == 0 &&
          order == CUBLASLT_ORDER_COL);
    int64_t stride = 4096, sb = 0;
    CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, 8) == 0);
    CHECK(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sb, 8, &w) == 0 &&
          sb == 4096);

    cublasLtMatmulPreference_t p;
    CHECK(cublasLtMatmulPreferenceCreate(&p) == 0);
    uint64_t ws = 1;
    CHECK(cublasLtMatmulPreferenceGetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, 8, &w) == 0 &&
          ws == 0);
    uint32_t align = 0;
    CHECK(cublasLtMatmulPreferenceGetAttribute(p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align, 4, &w) == 0 &&
          align == 256);
    CHECK(cublasLtMatmulPreferenceDestroy(p) == 0);
}

/* The n-th MK_BLAS record of the trace and its extension words. */
static int find_blas(const unsigned char *buf, size_t n, int which, maya_rec *out, uint64_t ext[BX_WORDS]) {
    size_t nslots = (n - MAYA_HEADER_SIZE) / MAYA_SLOT;
    const maya_rec *recs = (const maya_rec *)(buf + MAYA_HEADER_SIZE);
    for (size_t i = 0; i < nslots; i++) {
        if (recs[i].kind != MK_BLAS || which-- > 0)
            continue;
        *out = recs[i];
        memset(ext, 0, BX_WORDS * 8);
        for (int s = 0; s < 4 && i + 1 + s < nslots && recs[i + 1 + s].kind == MK_CONT; s++)
            memcpy(ext + 7 * s, (const char *)&recs[i + 1 + s] + 8, 7 * 8);
        return 1;
    }
    return 0;
}

static void test_records(const char *dir) {
    cublasHandle_t h;
    CHECK(cublasCreate_v2(&h) == 0);
    uint64_t dev = 0;
    CHECK(maya_mem_alloc(0, 1 << 20, &dev) == 0);
    float *dscal = (float *)(uintptr_t)dev;
    dscal[0] = 2.5f;
    dscal[1] = 0.5f;
    CHECK(cublasSetWorkspace_v2(h, (void *)(uintptr_t)(dev + 4096), 65536) == 0);
    float one = 1, zero = 0;

    /* 0: Sgemm, default math */
    CHECK(cublasSgemm_v2(h, CUBLAS_OP_T, CUBLAS_OP_N, 10, 20, 30, &one, NULL, 30, NULL, 30, &zero, NULL, 10) == 0);
    /* 1: Sgemm under TF32 math mode */
    cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH);
    CHECK(cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, 10, 20, 30, &one, NULL, 10, NULL, 30, &zero, NULL, 10) == 0);
    cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
    /* 2: strided batched Ex with device scalars */
    cublasSetPointerMode_v2(h, CUBLAS_POINTER_MODE_DEVICE);
    CHECK(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_T, 64, 32, 16, dscal, NULL, CUDA_R_16BF, 64, 1024,
                                     NULL, CUDA_R_16BF, 32, 512, dscal + 1, NULL, CUDA_R_16BF, 64, 2048, 8,
                                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == 0);
    cublasSetPointerMode_v2(h, CUBLAS_POINTER_MODE_HOST);
    /* 3: Lt with bias epilogue, on the cuBLAS handle */
    cublasLtMatmulDesc_t d;
    cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasOperation_t ta = CUBLAS_OP_T;
    cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
    const void *bias = (const void *)(uintptr_t)(dev + 8192);
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep);
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    cublasLtMatrixLayout_t A, B, C;
    cublasLtMatrixLayoutCreate(&A, CUDA_R_16BF, 64, 128, 64);  /* k x m, transposed */
    cublasLtMatrixLayoutCreate(&B, CUDA_R_16BF, 64, 32, 64);   /* k x n */
    cublasLtMatrixLayoutCreate(&C, CUDA_R_16BF, 128, 32, 128); /* m x n */
    cublasLtMatmulPreference_t p;
    cublasLtMatmulPreferenceCreate(&p);
    uint64_t max_ws = 1 << 22;
    cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, 8);
    cublasLtMatmulHeuristicResult_t res;
    int nres = 0;
    CHECK(cublasLtMatmulAlgoGetHeuristic((cublasLtHandle_t)h, d, A, B, C, C, p, 1, &res, &nres) == 0);
    CHECK(nres == 1 && res.state == CUBLAS_STATUS_SUCCESS && res.workspaceSize <= max_ws);
    CHECK(cublasLtMatmul((cublasLtHandle_t)h, d, &one, NULL, A, NULL, B, &zero, NULL, C, NULL, C, &res.algo,
                         NULL, max_ws, NULL) == 0);
    cublasLtMatmulDescDestroy(d);
    cublasLtMatrixLayoutDestroy(A);
    cublasLtMatrixLayoutDestroy(B);
    cublasLtMatrixLayoutDestroy(C);
    cublasLtMatmulPreferenceDestroy(p);
    /* 4: dot with a host result; 5: geqrf with a host info */
    float result = 7;
    CHECK(cublasSdot_v2(h, 100, NULL, 1, NULL, 1, &result) == 0 && result == 0);
    int info = 5;
    CHECK(cublasSgeqrfBatched(h, 8, 4, NULL, 8, NULL, &info, 3) == 0 && info == 0);
    CHECK(cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, -1, 1, 1, &one, NULL, 1, NULL, 1, &zero, NULL, 1) ==
          CUBLAS_STATUS_INVALID_VALUE);
    cublasDestroy_v2(h);
    maya_trace_flush();

    char path[600];
    snprintf(path, sizeof path, "%s/rank0.mayatrace", dir);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (!f)
        return;
    static unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);

    maya_rec r;
    uint64_t x[BX_WORDS];
    CHECK(find_blas(buf, n, 0, &r, x));
    CHECK(r.flags & MF_ASYNC);
    CHECK(r.a[0] == (10 | 20ull << 32) && r.a[1] == (30 | 1ull << 32) && r.a[2] == CUBLAS_OP_T);
    CHECK(r.a[3] == ((uint64_t)CUBLAS_COMPUTE_32F << 32) && r.a[4] == 65536);
    CHECK(f64(x[BX_ALPHA]) == 1.0 && f64(x[BX_BETA]) == 0.0 && x[BX_LDA] == 30 && x[BX_LDC] == 10);
    CHECK(find_blas(buf, n, 1, &r, x) && (r.a[3] >> 32 & 0xFF) == CUBLAS_COMPUTE_32F_FAST_TF32);
    CHECK(find_blas(buf, n, 2, &r, x));
    CHECK(r.a[1] == (16 | 8ull << 32) && r.a[2] == (uint64_t)CUBLAS_OP_T << 8);
    CHECK((r.a[3] & 0xFFFFFFFF) == 0x0e0e0e0e && (r.a[3] >> 32) == CUBLAS_COMPUTE_32F);
    CHECK(f64(x[BX_ALPHA]) == 2.5 && f64(x[BX_BETA]) == 0.5);
    CHECK(x[BX_STRIDE_A] == 1024 && x[BX_STRIDE_B] == 512 && x[BX_STRIDE_C] == 2048);
    CHECK(find_blas(buf, n, 3, &r, x));
    CHECK(r.a[0] == (128 | 32ull << 32) && r.a[1] == (64 | 1ull << 32));
    CHECK(r.a[2] == (CUBLAS_OP_T | (uint64_t)CUBLASLT_EPILOGUE_BIAS << 16) && r.a[4] == max_ws);
    CHECK(x[BX_BIAS] == (uint64_t)(uintptr_t)bias && (uint32_t)x[BX_BIAS_TYPE] == CUDA_R_16BF);
    CHECK(find_blas(buf, n, 4, &r, x) && r.a[0] == 100);
    CHECK(find_blas(buf, n, 5, &r, x) && r.a[0] == (8 | 4ull << 32) && r.a[1] == 3ull << 32);
    CHECK(!find_blas(buf, n, 6, &r, x));  /* the invalid call recorded nothing */
}

int main(void) {
    char dir[] = "/tmp/maya-blas-test-XXXXXX";
    if (!emulate_into(dir)) return 2;
    test_handles();
    test_descriptors();
    test_records(dir);
    return CHECK_SUMMARY("test_blas");
}

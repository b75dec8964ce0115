/* cuBLAS, replaced.
 *
 * Handles are real objects that remember the stream, workspace, math mode and
 * pointer mode torch sets on them.  Every compute routine records one MK_BLAS
 * record (docs/blas.md) and returns success without computing: kernels never
 * run, so results are not meaningful, but host-side outputs a routine owns
 * (the `info` of the batched solvers, a host dot result) are set to a
 * well-defined value.  Routines torch links but we do not emulate log through
 * maya_unsupported and return CUBLAS_STATUS_NOT_SUPPORTED.
 *
 * The MK_BLAS writer and the scalar reader are in blas_op.c.
 */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "blas.h"

/* ------------------------------------------------------------ handles */

struct cublasContext *maya_blas_handle_new(int lt) {
    struct cublasContext *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->magic = BLAS_HANDLE_MAGIC;
    h->device = maya_current_device();
    h->lt = lt;
    h->math_mode = CUBLAS_DEFAULT_MATH;
    h->pointer_mode = CUBLAS_POINTER_MODE_HOST;
    h->atomics_mode = CUBLAS_ATOMICS_NOT_ALLOWED;
    return h;
}

struct cublasContext *maya_blas_handle(const void *p) {
    struct cublasContext *h = (struct cublasContext *)p;
    return h && h->magic == BLAS_HANDLE_MAGIC ? h : NULL;
}

void maya_blas_handle_free(struct cublasContext *h) {
    h->magic = 0;  /* a stale use then fails instead of reading freed state */
    free(h);
}

MAYA_EXPORT cublasStatus_t cublasCreate_v2(cublasHandle_t *handle) {
    if (!handle)
        return CUBLAS_STATUS_INVALID_VALUE;
    *handle = maya_blas_handle_new(0);
    return *handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

MAYA_EXPORT cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
    struct cublasContext *h = maya_blas_handle(handle);
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    maya_blas_handle_free(h);
    return CUBLAS_STATUS_SUCCESS;
}

/* Getter/setter bodies: check the handle, then one assignment. */
#define HANDLE_OR_FAIL(h, handle)                      \
    struct cublasContext *h = maya_blas_handle(handle); \
    if (!h)                                            \
        return CUBLAS_STATUS_NOT_INITIALIZED

MAYA_EXPORT cublasStatus_t cublasGetVersion_v2(cublasHandle_t handle, int *version) {
    HANDLE_OR_FAIL(h, handle);
    if (!version)
        return CUBLAS_STATUS_INVALID_VALUE;
    *version = CUBLAS_VERSION;
    return CUBLAS_STATUS_SUCCESS;
}

MAYA_EXPORT cublasStatus_t cublasGetProperty(libraryPropertyType type, int *value) {
    if (!value)
        return CUBLAS_STATUS_INVALID_VALUE;
    switch (type) {
    case MAJOR_VERSION: *value = CUBLAS_VER_MAJOR; return CUBLAS_STATUS_SUCCESS;
    case MINOR_VERSION: *value = CUBLAS_VER_MINOR; return CUBLAS_STATUS_SUCCESS;
    case PATCH_LEVEL: *value = CUBLAS_VER_PATCH; return CUBLAS_STATUS_SUCCESS;
    default: return CUBLAS_STATUS_INVALID_VALUE;
    }
}

MAYA_EXPORT size_t cublasGetCudartVersion(void) {
    return CUDART_VERSION;
}

MAYA_EXPORT cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace, size_t bytes) {
    HANDLE_OR_FAIL(h, handle);
    if (bytes && !workspace)
        return CUBLAS_STATUS_INVALID_VALUE;
    h->workspace = workspace;
    h->workspace_bytes = bytes;
    return CUBLAS_STATUS_SUCCESS;
}

/* Handle fields read and written as they are. */
#define HANDLE_GETTER(fn, type, field)                                \
    MAYA_EXPORT cublasStatus_t fn(cublasHandle_t handle, type *out) { \
        HANDLE_OR_FAIL(h, handle);                                    \
        if (!out)                                                     \
            return CUBLAS_STATUS_INVALID_VALUE;                       \
        *out = h->field;                                              \
        return CUBLAS_STATUS_SUCCESS;                                 \
    }
#define HANDLE_SETTER(fn, type, field)                                \
    MAYA_EXPORT cublasStatus_t fn(cublasHandle_t handle, type value) { \
        HANDLE_OR_FAIL(h, handle);                                    \
        h->field = value;                                             \
        return CUBLAS_STATUS_SUCCESS;                                 \
    }

HANDLE_GETTER(cublasGetStream_v2, cudaStream_t, stream)
HANDLE_SETTER(cublasSetStream_v2, cudaStream_t, stream)
HANDLE_GETTER(cublasGetPointerMode_v2, cublasPointerMode_t, pointer_mode)
HANDLE_GETTER(cublasGetAtomicsMode, cublasAtomicsMode_t, atomics_mode)
HANDLE_SETTER(cublasSetAtomicsMode, cublasAtomicsMode_t, atomics_mode)
HANDLE_GETTER(cublasGetMathMode, cublasMath_t, math_mode)
HANDLE_SETTER(cublasSetMathMode, cublasMath_t, math_mode)
HANDLE_GETTER(cublasGetSmCountTarget, int, sm_count_target)
HANDLE_GETTER(cublasGetEmulationStrategy, cublasEmulationStrategy_t, emulation_strategy)
HANDLE_SETTER(cublasSetEmulationStrategy, cublasEmulationStrategy_t, emulation_strategy)

MAYA_EXPORT cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode) {
    HANDLE_OR_FAIL(h, handle);
    if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE)
        return CUBLAS_STATUS_INVALID_VALUE;
    h->pointer_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

MAYA_EXPORT cublasStatus_t cublasSetSmCountTarget(cublasHandle_t handle, int target) {
    HANDLE_OR_FAIL(h, handle);
    if (target < 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    h->sm_count_target = target;
    return CUBLAS_STATUS_SUCCESS;
}

static const char *status_name(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

static const char *status_text(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "error detected trying to check the license";
    }
    return "unknown error";
}

MAYA_EXPORT const char *cublasGetStatusName(cublasStatus_t s) { return status_name(s); }
MAYA_EXPORT const char *cublasGetStatusString(cublasStatus_t s) { return status_text(s); }
MAYA_EXPORT const char *cublasLtGetStatusName(cublasStatus_t s) { return status_name(s); }
MAYA_EXPORT const char *cublasLtGetStatusString(cublasStatus_t s) { return status_text(s); }

/* Logging is cuBLAS's own business; accept and ignore. */
MAYA_EXPORT cublasStatus_t cublasLoggerConfigure(int on, int to_stdout, int to_stderr, const char *file) {
    return CUBLAS_STATUS_SUCCESS;
}

static cublasLogCallback log_callback;

MAYA_EXPORT cublasStatus_t cublasSetLoggerCallback(cublasLogCallback cb) {
    log_callback = cb;
    return CUBLAS_STATUS_SUCCESS;
}

MAYA_EXPORT cublasStatus_t cublasGetLoggerCallback(cublasLogCallback *cb) {
    if (!cb)
        return CUBLAS_STATUS_INVALID_VALUE;
    *cb = log_callback;
    return CUBLAS_STATUS_SUCCESS;
}

/* ------------------------------------------------------ compute helpers */

/* Starts a record for a call on handle h (stream, workspace, modes). */
static void op_begin(maya_blas_op *op, const struct cublasContext *h, const char *api) {
    maya_blas_op_init(op, api);
    op->stream = h->stream;
    op->workspace = h->workspace_bytes;
    op->ext[BX_MODES] = (uint64_t)(h->pointer_mode & 0xFF) | (uint64_t)(h->math_mode & 0xFF) << 8;
    op->ext[BX_SM_TARGET] = (uint64_t)h->sm_count_target;
}

/* alpha/beta of scalar type `type`, read as the handle's pointer mode says. */
static void op_scalars(maya_blas_op *op, const struct cublasContext *h, const void *alpha,
                       const void *beta, int type) {
    int dev = h->pointer_mode == CUBLAS_POINTER_MODE_DEVICE;
    op->ext[BX_ALPHA] = maya_blas_scalar(alpha, type, dev, &op->ext[BX_ALPHA_IM]);
    if (beta)
        op->ext[BX_BETA] = maya_blas_scalar(beta, type, dev, &op->ext[BX_BETA_IM]);
}

static void op_types(maya_blas_op *op, int a, int b, int cc, int d, int compute, int scale) {
    op->atype = (uint8_t)a;
    op->btype = (uint8_t)b;
    op->ctype = (uint8_t)cc;
    op->dtype = (uint8_t)d;
    op->compute = (uint8_t)compute;
    op->scale = (uint8_t)scale;
}

static uint64_t ptr(const void *p) { return (uint64_t)(uintptr_t)p; }
static uint64_t i64(long long v) { return (uint64_t)v; }

static int scalar_bytes(int type) {
    switch (type) {
    case CUDA_R_16F: case CUDA_R_16BF: return 2;
    case CUDA_R_32F: case CUDA_R_32I: case CUDA_C_16F: case CUDA_C_16BF: return 4;
    case CUDA_R_64F: case CUDA_C_32F: return 8;
    case CUDA_C_64F: return 16;
    default: return 0;
    }
}

/* A GEMM-shaped call: C = alpha op(A) op(B) + beta C, possibly batched. */
typedef struct {
    const char *api;
    cublasHandle_t handle;
    cublasOperation_t ta, tb;
    long long m, n, k;
    const void *alpha, *beta;
    const void *A, *B, *C;
    int atype, btype, ctype, compute, scale;
    long long lda, ldb, ldc, sa, sb, sc;
    long long batch;
    long long algo;
} gemm_args;

static cublasStatus_t gemm(maya_call c, const gemm_args *g) {
    struct cublasContext *h = maya_blas_handle(g->handle);
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (g->m < 0 || g->n < 0 || g->k < 0 || g->batch < 0 || g->lda < 0 || g->ldb < 0 || g->ldc < 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    maya_blas_op op;
    op_begin(&op, h, g->api);
    op.m = (uint64_t)g->m;
    op.n = (uint64_t)g->n;
    op.k = (uint64_t)g->k;
    op.batch = (uint64_t)g->batch;
    op.transa = g->ta;
    op.transb = g->tb;
    op_types(&op, g->atype, g->btype, g->ctype, g->ctype, g->compute, g->scale);
    op_scalars(&op, h, g->alpha, g->beta, g->scale);
    op.ext[BX_LDA] = i64(g->lda);
    op.ext[BX_LDB] = i64(g->ldb);
    op.ext[BX_LDC] = op.ext[BX_LDD] = i64(g->ldc);
    op.ext[BX_STRIDE_A] = i64(g->sa);
    op.ext[BX_STRIDE_B] = i64(g->sb);
    op.ext[BX_STRIDE_C] = op.ext[BX_STRIDE_D] = i64(g->sc);
    op.ext[BX_A] = ptr(g->A);
    op.ext[BX_B] = ptr(g->B);
    op.ext[BX_C] = op.ext[BX_D] = ptr(g->C);
    op.ext[BX_ALGO] = i64(g->algo);
    maya_blas_emit(c, &op);
    return CUBLAS_STATUS_SUCCESS;
}

/* ------------------------------------------------------------- GEMM */

/* S/D/C/Z gemm_v2: types implied by the routine, compute by the math mode. */
#define GEMM_TYPED(name, T, dt, single)                                                          \
    MAYA_EXPORT cublasStatus_t name(cublasHandle_t handle, cublasOperation_t transa,             \
                                    cublasOperation_t transb, int m, int n, int k, const T *alpha, \
                                    const T *A, int lda, const T *B, int ldb, const T *beta, T *C, \
                                    int ldc) {                                                    \
        maya_call c = maya_enter();                                                               \
        struct cublasContext *h = maya_blas_handle(handle);                                       \
        if (!h)                                                                                   \
            return CUBLAS_STATUS_NOT_INITIALIZED;                                                 \
        gemm_args g = {#name, handle, transa, transb, m, n, k, alpha, beta, A, B, C,             \
                       dt, dt, dt, maya_blas_implied_compute(h->math_mode, single), dt,                                \
                       lda, ldb, ldc, 0, 0, 0, 1, CUBLAS_GEMM_DEFAULT};                           \
        return gemm(c, &g);                                                                       \
    }

GEMM_TYPED(cublasSgemm_v2, float, CUDA_R_32F, 1)
GEMM_TYPED(cublasDgemm_v2, double, CUDA_R_64F, 0)
GEMM_TYPED(cublasCgemm_v2, cuComplex, CUDA_C_32F, 1)
GEMM_TYPED(cublasZgemm_v2, cuDoubleComplex, CUDA_C_64F, 0)

#define GEMM_STRIDED_TYPED(name, T, dt, single)                                                   \
    MAYA_EXPORT cublasStatus_t name(cublasHandle_t handle, cublasOperation_t transa,             \
                                    cublasOperation_t transb, int m, int n, int k, const T *alpha, \
                                    const T *A, int lda, long long int strideA, const T *B,       \
                                    int ldb, long long int strideB, const T *beta, T *C, int ldc, \
                                    long long int strideC, int batchCount) {                      \
        maya_call c = maya_enter();                                                               \
        struct cublasContext *h = maya_blas_handle(handle);                                       \
        if (!h)                                                                                   \
            return CUBLAS_STATUS_NOT_INITIALIZED;                                                 \
        gemm_args g = {#name, handle, transa, transb, m, n, k, alpha, beta, A, B, C,             \
                       dt, dt, dt, maya_blas_implied_compute(h->math_mode, single), dt,                                \
                       lda, ldb, ldc, strideA, strideB, strideC, batchCount, CUBLAS_GEMM_DEFAULT}; \
        return gemm(c, &g);                                                                       \
    }

GEMM_STRIDED_TYPED(cublasSgemmStridedBatched, float, CUDA_R_32F, 1)
GEMM_STRIDED_TYPED(cublasDgemmStridedBatched, double, CUDA_R_64F, 0)
GEMM_STRIDED_TYPED(cublasCgemmStridedBatched, cuComplex, CUDA_C_32F, 1)
GEMM_STRIDED_TYPED(cublasZgemmStridedBatched, cuDoubleComplex, CUDA_C_64F, 0)

/* Pointer-array batches: A/B/C slots hold the device arrays of pointers. */
#define GEMM_BATCHED_TYPED(name, T, dt, single)                                                   \
    MAYA_EXPORT cublasStatus_t name(cublasHandle_t handle, cublasOperation_t transa,             \
                                    cublasOperation_t transb, int m, int n, int k, const T *alpha, \
                                    const T *const Aarray[], int lda, const T *const Barray[],    \
                                    int ldb, const T *beta, T *const Carray[], int ldc,           \
                                    int batchCount) {                                             \
        maya_call c = maya_enter();                                                               \
        struct cublasContext *h = maya_blas_handle(handle);                                       \
        if (!h)                                                                                   \
            return CUBLAS_STATUS_NOT_INITIALIZED;                                                 \
        gemm_args g = {#name, handle, transa, transb, m, n, k, alpha, beta, Aarray, Barray,       \
                       Carray, dt, dt, dt, maya_blas_implied_compute(h->math_mode, single), dt,                        \
                       lda, ldb, ldc, 0, 0, 0, batchCount, CUBLAS_GEMM_DEFAULT};                  \
        return gemm(c, &g);                                                                       \
    }

GEMM_BATCHED_TYPED(cublasSgemmBatched, float, CUDA_R_32F, 1)
GEMM_BATCHED_TYPED(cublasDgemmBatched, double, CUDA_R_64F, 0)
GEMM_BATCHED_TYPED(cublasCgemmBatched, cuComplex, CUDA_C_32F, 1)
GEMM_BATCHED_TYPED(cublasZgemmBatched, cuDoubleComplex, CUDA_C_64F, 0)

MAYA_EXPORT cublasStatus_t cublasSgemmEx(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float *alpha, const void *A, cudaDataType Atype,
                                         int lda, const void *B, cudaDataType Btype, int ldb,
                                         const float *beta, void *C, cudaDataType Ctype, int ldc) {
    maya_call c = maya_enter();
    struct cublasContext *h = maya_blas_handle(handle);
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    gemm_args g = {"cublasSgemmEx", handle, transa, transb, m, n, k, alpha, beta, A, B, C,
                   Atype, Btype, Ctype, maya_blas_implied_compute(h->math_mode, 1), CUDA_R_32F,
                   lda, ldb, ldc, 0, 0, 0, 1, CUBLAS_GEMM_DEFAULT};
    return gemm(c, &g);
}

MAYA_EXPORT cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                                        cublasOperation_t transb, int m, int n, int k,
                                        const void *alpha, const void *A, cudaDataType Atype,
                                        int lda, const void *B, cudaDataType Btype, int ldb,
                                        const void *beta, void *C, cudaDataType Ctype, int ldc,
                                        cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
    maya_call c = maya_enter();
    gemm_args g = {"cublasGemmEx", handle, transa, transb, m, n, k, alpha, beta, A, B, C,
                   Atype, Btype, Ctype, computeType, maya_blas_ex_scale_type(computeType, Ctype),
                   lda, ldb, ldc, 0, 0, 0, 1, algo};
    return gemm(c, &g);
}

MAYA_EXPORT cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
    const void *alpha, const void *A, cudaDataType Atype, int lda, long long int strideA,
    const void *B, cudaDataType Btype, int ldb, long long int strideB, const void *beta, void *C,
    cudaDataType Ctype, int ldc, long long int strideC, int batchCount,
    cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
    maya_call c = maya_enter();
    gemm_args g = {"cublasGemmStridedBatchedEx", handle, transa, transb, m, n, k, alpha, beta,
                   A, B, C, Atype, Btype, Ctype, computeType, maya_blas_ex_scale_type(computeType, Ctype),
                   lda, ldb, ldc, strideA, strideB, strideC, batchCount, algo};
    return gemm(c, &g);
}

MAYA_EXPORT cublasStatus_t cublasGemmBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
    const void *alpha, const void *const Aarray[], cudaDataType Atype, int lda,
    const void *const Barray[], cudaDataType Btype, int ldb, const void *beta,
    void *const Carray[], cudaDataType Ctype, int ldc, int batchCount,
    cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
    maya_call c = maya_enter();
    gemm_args g = {"cublasGemmBatchedEx", handle, transa, transb, m, n, k, alpha, beta,
                   Aarray, Barray, Carray, Atype, Btype, Ctype, computeType,
                   maya_blas_ex_scale_type(computeType, Ctype), lda, ldb, ldc, 0, 0, 0, batchCount, algo};
    return gemm(c, &g);
}

/* ------------------------------------------------------------- gemv */

/* y = alpha op(A) x + beta y: m x n matrix A, x in B, y in C; incx/incy in ldb/ldc. */
#define GEMV_TYPED(name, T, dt, single)                                                           \
    MAYA_EXPORT cublasStatus_t name(cublasHandle_t handle, cublasOperation_t trans, int m, int n, \
                                    const T *alpha, const T *A, int lda, const T *x, int incx,    \
                                    const T *beta, T *y, int incy) {                              \
        maya_call c = maya_enter();                                                               \
        struct cublasContext *h = maya_blas_handle(handle);                                       \
        if (!h)                                                                                   \
            return CUBLAS_STATUS_NOT_INITIALIZED;                                                 \
        if (m < 0 || n < 0 || lda < 0)                                                            \
            return CUBLAS_STATUS_INVALID_VALUE;                                                   \
        maya_blas_op op;                                                                          \
        op_begin(&op, h, #name);                                                                  \
        op.m = (uint64_t)m;                                                                       \
        op.n = (uint64_t)n;                                                                       \
        op.transa = trans;                                                                        \
        op_types(&op, dt, dt, dt, dt, maya_blas_implied_compute(h->math_mode, single), dt);                            \
        op_scalars(&op, h, alpha, beta, dt);                                                      \
        op.ext[BX_LDA] = i64(lda);                                                                \
        op.ext[BX_LDB] = i64(incx);                                                               \
        op.ext[BX_LDC] = op.ext[BX_LDD] = i64(incy);                                              \
        op.ext[BX_A] = ptr(A);                                                                    \
        op.ext[BX_B] = ptr(x);                                                                    \
        op.ext[BX_C] = op.ext[BX_D] = ptr(y);                                                     \
        maya_blas_emit(c, &op);                                                                   \
        return CUBLAS_STATUS_SUCCESS;                                                             \
    }

GEMV_TYPED(cublasSgemv_v2, float, CUDA_R_32F, 1)
GEMV_TYPED(cublasDgemv_v2, double, CUDA_R_64F, 0)
GEMV_TYPED(cublasCgemv_v2, cuComplex, CUDA_C_32F, 1)
GEMV_TYPED(cublasZgemv_v2, cuDoubleComplex, CUDA_C_64F, 0)

/* -------------------------------------------------------------- dot */

/* result = x . y: n in the m field, x in A, y in B, result in D; incx/incy in
 * ldb/ldc.  A host result gets 0: kernels do not run, but it is the caller's
 * memory and must not be left as garbage. */
static cublasStatus_t dot(maya_call c, const char *api, cublasHandle_t handle, int n,
                          const void *x, int xtype, int incx, const void *y, int ytype, int incy,
                          void *result, int rtype, int exec_type) {
    struct cublasContext *h = maya_blas_handle(handle);
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!result)
        return CUBLAS_STATUS_INVALID_VALUE;
    maya_blas_op op;
    op_begin(&op, h, api);
    op.m = n > 0 ? (uint64_t)n : 0;
    int compute = exec_type == CUDA_R_64F || exec_type == CUDA_C_64F ? CUBLAS_COMPUTE_64F
                  : exec_type == CUDA_R_16F                           ? CUBLAS_COMPUTE_16F
                                                                      : CUBLAS_COMPUTE_32F;
    op_types(&op, xtype, ytype, BLAS_NO_TYPE, rtype, compute, BLAS_NO_TYPE);
    op.ext[BX_LDB] = i64(incx);
    op.ext[BX_LDC] = i64(incy);
    op.ext[BX_A] = ptr(x);
    op.ext[BX_B] = ptr(y);
    op.ext[BX_D] = ptr(result);
    if (h->pointer_mode == CUBLAS_POINTER_MODE_HOST)
        memset(result, 0, (size_t)scalar_bytes(rtype));
    maya_blas_emit(c, &op);
    return CUBLAS_STATUS_SUCCESS;
}

#define DOT_TYPED(name, T, dt)                                                                    \
    MAYA_EXPORT cublasStatus_t name(cublasHandle_t handle, int n, const T *x, int incx,          \
                                    const T *y, int incy, T *result) {                            \
        maya_call c = maya_enter();                                                               \
        return dot(c, #name, handle, n, x, dt, incx, y, dt, incy, result, dt, dt);               \
    }

DOT_TYPED(cublasSdot_v2, float, CUDA_R_32F)
DOT_TYPED(cublasDdot_v2, double, CUDA_R_64F)
DOT_TYPED(cublasCdotu_v2, cuComplex, CUDA_C_32F)
DOT_TYPED(cublasCdotc_v2, cuComplex, CUDA_C_32F)
DOT_TYPED(cublasZdotu_v2, cuDoubleComplex, CUDA_C_64F)
DOT_TYPED(cublasZdotc_v2, cuDoubleComplex, CUDA_C_64F)

MAYA_EXPORT cublasStatus_t cublasDotEx(cublasHandle_t handle, int n, const void *x,
                                       cudaDataType xType, int incx, const void *y,
                                       cudaDataType yType, int incy, void *result,
                                       cudaDataType resultType, cudaDataType executionType) {
    maya_call c = maya_enter();
    return dot(c, "cublasDotEx", handle, n, x, xType, incx, y, yType, incy, result, resultType,
               executionType);
}

/* ------------------------------------------------------------- trsm */

/* Solve op(A) X = alpha B (or X op(A) = alpha B): B is m x n and overwritten;
 * k is the order of the triangular A (m for the left side, n for the right). */
static cublasStatus_t trsm(maya_call c, const char *api, cublasHandle_t handle,
                           cublasSideMode_t side, cublasFillMode_t uplo, cublasOperation_t trans,
                           cublasDiagType_t diag, int m, int n, const void *alpha, const void *A,
                           int lda, const void *B, int ldb, int batch, int dt, int single) {
    struct cublasContext *h = maya_blas_handle(handle);
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (m < 0 || n < 0 || batch < 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    maya_blas_op op;
    op_begin(&op, h, api);
    op.m = (uint64_t)m;
    op.n = (uint64_t)n;
    op.k = side == CUBLAS_SIDE_LEFT ? (uint64_t)m : (uint64_t)n;
    op.batch = (uint64_t)batch;
    op.transa = trans;
    op.side = side;
    op.uplo = uplo;
    op.diag = diag;
    op_types(&op, dt, dt, BLAS_NO_TYPE, dt, maya_blas_implied_compute(h->math_mode, single), dt);
    op_scalars(&op, h, alpha, NULL, dt);
    op.ext[BX_LDA] = i64(lda);
    op.ext[BX_LDB] = op.ext[BX_LDD] = i64(ldb);
    op.ext[BX_A] = ptr(A);
    op.ext[BX_B] = op.ext[BX_D] = ptr(B);
    maya_blas_emit(c, &op);
    return CUBLAS_STATUS_SUCCESS;
}

#define TRSM_TYPED(name, T, dt, single)                                                           \
    MAYA_EXPORT cublasStatus_t name(cublasHandle_t handle, cublasSideMode_t side,                \
                                    cublasFillMode_t uplo, cublasOperation_t trans,               \
                                    cublasDiagType_t diag, int m, int n, const T *alpha,          \
                                    const T *A, int lda, T *B, int ldb) {                         \
        maya_call c = maya_enter();                                                               \
        return trsm(c, #name, handle, side, uplo, trans, diag, m, n, alpha, A, lda, B, ldb, 1,   \
                    dt, single);                                                                  \
    }

TRSM_TYPED(cublasStrsm_v2, float, CUDA_R_32F, 1)
TRSM_TYPED(cublasDtrsm_v2, double, CUDA_R_64F, 0)
TRSM_TYPED(cublasCtrsm_v2, cuComplex, CUDA_C_32F, 1)
TRSM_TYPED(cublasZtrsm_v2, cuDoubleComplex, CUDA_C_64F, 0)

#define TRSM_BATCHED_TYPED(name, T, dt, single)                                                   \
    MAYA_EXPORT cublasStatus_t name(cublasHandle_t handle, cublasSideMode_t side,                \
                                    cublasFillMode_t uplo, cublasOperation_t trans,               \
                                    cublasDiagType_t diag, int m, int n, const T *alpha,          \
                                    const T *const A[], int lda, T *const B[], int ldb,           \
                                    int batchCount) {                                             \
        maya_call c = maya_enter();                                                               \
        return trsm(c, #name, handle, side, uplo, trans, diag, m, n, alpha, A, lda, B, ldb,      \
                    batchCount, dt, single);                                                      \
    }

TRSM_BATCHED_TYPED(cublasStrsmBatched, float, CUDA_R_32F, 1)
TRSM_BATCHED_TYPED(cublasDtrsmBatched, double, CUDA_R_64F, 0)
TRSM_BATCHED_TYPED(cublasCtrsmBatched, cuComplex, CUDA_C_32F, 1)
TRSM_BATCHED_TYPED(cublasZtrsmBatched, cuDoubleComplex, CUDA_C_64F, 0)

/* ------------------------------------------------- batched factorizations */

/* Shared start of the batched LAPACK-like routines (pointer arrays in A/B/C). */
/* The solvers' common end: report success through the host info, record. */
static cublasStatus_t solver_end(maya_call c, maya_blas_op *op, int *info) {
    if (info)
        *info = 0;
    maya_blas_emit(c, op);
    return CUBLAS_STATUS_SUCCESS;
}

static int solver_begin(maya_blas_op *op, cublasHandle_t handle, const char *api, int m, int n,
                        int k, int batch, int dt) {
    struct cublasContext *h = maya_blas_handle(handle);
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (m < 0 || n < 0 || k < 0 || batch < 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    op_begin(op, h, api);
    op->m = (uint64_t)m;
    op->n = (uint64_t)n;
    op->k = (uint64_t)k;
    op->batch = (uint64_t)batch;
    op_types(op, dt, BLAS_NO_TYPE, BLAS_NO_TYPE, BLAS_NO_TYPE,
             maya_blas_implied_compute(h->math_mode, dt == CUDA_R_32F || dt == CUDA_C_32F), BLAS_NO_TYPE);
    return CUBLAS_STATUS_SUCCESS;
}

/* LU of n x n matrices: pivots in the bias slot, device info array in aux. */
#define GETRF_TYPED(name, T, dt)                                                                  \
    MAYA_EXPORT cublasStatus_t name(cublasHandle_t handle, int n, T *const A[], int lda, int *P,  \
                                    int *info, int batchSize) {                                   \
        maya_call c = maya_enter();                                                               \
        maya_blas_op op;                                                                          \
        int st = solver_begin(&op, handle, #name, n, n, 0, batchSize, dt);                        \
        if (st)                                                                                   \
            return st;                                                                            \
        op.ext[BX_LDA] = i64(lda);                                                                \
        op.ext[BX_A] = op.ext[BX_D] = ptr(A);                                                     \
        op.ext[BX_BIAS] = ptr(P);                                                                 \
        op.ext[BX_AUX] = ptr(info);                                                               \
        maya_blas_emit(c, &op);                                                                   \
        return CUBLAS_STATUS_SUCCESS;                                                             \
    }

GETRF_TYPED(cublasSgetrfBatched, float, CUDA_R_32F)
GETRF_TYPED(cublasDgetrfBatched, double, CUDA_R_64F)
GETRF_TYPED(cublasCgetrfBatched, cuComplex, CUDA_C_32F)
GETRF_TYPED(cublasZgetrfBatched, cuDoubleComplex, CUDA_C_64F)

/* Solve with LU factors: n x n A, n x nrhs B; host info set to 0 (valid). */
#define GETRS_TYPED(name, T, dt)                                                                  \
    MAYA_EXPORT cublasStatus_t name(cublasHandle_t handle, cublasOperation_t trans, int n,       \
                                    int nrhs, const T *const Aarray[], int lda,                   \
                                    const int *devIpiv, T *const Barray[], int ldb, int *info,    \
                                    int batchSize) {                                              \
        maya_call c = maya_enter();                                                               \
        maya_blas_op op;                                                                          \
        int st = solver_begin(&op, handle, #name, n, nrhs, n, batchSize, dt);                     \
        if (st)                                                                                   \
            return st;                                                                            \
        op.transa = trans;                                                                        \
        op.btype = op.dtype = dt;                                                                 \
        op.ext[BX_LDA] = i64(lda);                                                                \
        op.ext[BX_LDB] = op.ext[BX_LDD] = i64(ldb);                                               \
        op.ext[BX_A] = ptr(Aarray);                                                               \
        op.ext[BX_B] = op.ext[BX_D] = ptr(Barray);                                                \
        op.ext[BX_BIAS] = ptr(devIpiv);                                                           \
        op.ext[BX_AUX] = ptr(info);                                                               \
        return solver_end(c, &op, info);                                                          \
    }

GETRS_TYPED(cublasSgetrsBatched, float, CUDA_R_32F)
GETRS_TYPED(cublasDgetrsBatched, double, CUDA_R_64F)
GETRS_TYPED(cublasCgetrsBatched, cuComplex, CUDA_C_32F)
GETRS_TYPED(cublasZgetrsBatched, cuDoubleComplex, CUDA_C_64F)

/* QR of m x n matrices: tau arrays in the bias slot; host info set to 0. */
#define GEQRF_TYPED(name, T, dt)                                                                  \
    MAYA_EXPORT cublasStatus_t name(cublasHandle_t handle, int m, int n, T *const Aarray[],      \
                                    int lda, T *const TauArray[], int *info, int batchSize) {     \
        maya_call c = maya_enter();                                                               \
        maya_blas_op op;                                                                          \
        int st = solver_begin(&op, handle, #name, m, n, 0, batchSize, dt);                        \
        if (st)                                                                                   \
            return st;                                                                            \
        op.dtype = dt;                                                                            \
        op.ext[BX_LDA] = op.ext[BX_LDD] = i64(lda);                                               \
        op.ext[BX_A] = op.ext[BX_D] = ptr(Aarray);                                                \
        op.ext[BX_BIAS] = ptr(TauArray);                                                          \
        op.ext[BX_AUX] = ptr(info);                                                               \
        return solver_end(c, &op, info);                                                          \
    }

GEQRF_TYPED(cublasSgeqrfBatched, float, CUDA_R_32F)
GEQRF_TYPED(cublasDgeqrfBatched, double, CUDA_R_64F)
GEQRF_TYPED(cublasCgeqrfBatched, cuComplex, CUDA_C_32F)
GEQRF_TYPED(cublasZgeqrfBatched, cuDoubleComplex, CUDA_C_64F)

/* Least squares: m x n A, m x nrhs C (k = nrhs); device info array in the bias
 * slot, host info (set to 0) in aux. */
#define GELS_TYPED(name, T, dt)                                                                   \
    MAYA_EXPORT cublasStatus_t name(cublasHandle_t handle, cublasOperation_t trans, int m, int n, \
                                    int nrhs, T *const Aarray[], int lda, T *const Carray[],      \
                                    int ldc, int *info, int *devInfoArray, int batchSize) {       \
        maya_call c = maya_enter();                                                               \
        maya_blas_op op;                                                                          \
        int st = solver_begin(&op, handle, #name, m, n, nrhs, batchSize, dt);                     \
        if (st)                                                                                   \
            return st;                                                                            \
        op.transa = trans;                                                                        \
        op.ctype = op.dtype = dt;                                                                 \
        op.ext[BX_LDA] = i64(lda);                                                                \
        op.ext[BX_LDC] = op.ext[BX_LDD] = i64(ldc);                                               \
        op.ext[BX_A] = ptr(Aarray);                                                               \
        op.ext[BX_C] = op.ext[BX_D] = ptr(Carray);                                                \
        op.ext[BX_BIAS] = ptr(devInfoArray);                                                      \
        op.ext[BX_AUX] = ptr(info);                                                               \
        return solver_end(c, &op, info);                                                          \
    }

GELS_TYPED(cublasSgelsBatched, float, CUDA_R_32F)
GELS_TYPED(cublasDgelsBatched, double, CUDA_R_64F)
GELS_TYPED(cublasCgelsBatched, cuComplex, CUDA_C_32F)
GELS_TYPED(cublasZgelsBatched, cuDoubleComplex, CUDA_C_64F)

/* ------------------------------------------------------- not emulated */

/* The rest of the BLAS that torch links (libtorch_cuda_linalg.so, for
 * MAGMA).  Each stub gets the real symbol name through an asm label so one
 * argument-less definition serves any prototype: the arguments are ignored and
 * the status is returned in the register every prototype reads it from. */
#define UNSUPPORTED(name)                                                           \
    MAYA_EXPORT cublasStatus_t maya_stub_##name(void) __asm__(#name);               \
    cublasStatus_t maya_stub_##name(void) {                                         \
        maya_unsupported(#name);                                                    \
        return CUBLAS_STATUS_NOT_SUPPORTED;                                         \
    }

/* Level 1 */
UNSUPPORTED(cublasSaxpy_v2) UNSUPPORTED(cublasDaxpy_v2) UNSUPPORTED(cublasCaxpy_v2) UNSUPPORTED(cublasZaxpy_v2)
UNSUPPORTED(cublasScopy_v2) UNSUPPORTED(cublasDcopy_v2) UNSUPPORTED(cublasCcopy_v2) UNSUPPORTED(cublasZcopy_v2)
UNSUPPORTED(cublasSswap_v2) UNSUPPORTED(cublasDswap_v2) UNSUPPORTED(cublasCswap_v2) UNSUPPORTED(cublasZswap_v2)
UNSUPPORTED(cublasSscal_v2) UNSUPPORTED(cublasDscal_v2) UNSUPPORTED(cublasCscal_v2) UNSUPPORTED(cublasZscal_v2)
UNSUPPORTED(cublasCsscal_v2) UNSUPPORTED(cublasZdscal_v2)
UNSUPPORTED(cublasSasum_v2) UNSUPPORTED(cublasDasum_v2) UNSUPPORTED(cublasScasum_v2) UNSUPPORTED(cublasDzasum_v2)
UNSUPPORTED(cublasSnrm2_v2) UNSUPPORTED(cublasDnrm2_v2) UNSUPPORTED(cublasScnrm2_v2) UNSUPPORTED(cublasDznrm2_v2)
UNSUPPORTED(cublasIsamax_v2) UNSUPPORTED(cublasIdamax_v2) UNSUPPORTED(cublasIcamax_v2) UNSUPPORTED(cublasIzamax_v2)
UNSUPPORTED(cublasIsamin_v2) UNSUPPORTED(cublasIdamin_v2) UNSUPPORTED(cublasIcamin_v2) UNSUPPORTED(cublasIzamin_v2)
UNSUPPORTED(cublasSrot_v2) UNSUPPORTED(cublasDrot_v2) UNSUPPORTED(cublasCrot_v2) UNSUPPORTED(cublasZrot_v2)
UNSUPPORTED(cublasCsrot_v2) UNSUPPORTED(cublasZdrot_v2)
UNSUPPORTED(cublasSrotg_v2) UNSUPPORTED(cublasDrotg_v2) UNSUPPORTED(cublasCrotg_v2) UNSUPPORTED(cublasZrotg_v2)
UNSUPPORTED(cublasSrotm_v2) UNSUPPORTED(cublasDrotm_v2) UNSUPPORTED(cublasSrotmg_v2) UNSUPPORTED(cublasDrotmg_v2)
/* Level 2 */
UNSUPPORTED(cublasSger_v2) UNSUPPORTED(cublasDger_v2) UNSUPPORTED(cublasCgeru_v2) UNSUPPORTED(cublasCgerc_v2)
UNSUPPORTED(cublasZgeru_v2) UNSUPPORTED(cublasZgerc_v2)
UNSUPPORTED(cublasSsymv_v2) UNSUPPORTED(cublasDsymv_v2) UNSUPPORTED(cublasCsymv_v2) UNSUPPORTED(cublasZsymv_v2)
UNSUPPORTED(cublasChemv_v2) UNSUPPORTED(cublasZhemv_v2)
UNSUPPORTED(cublasSsyr_v2) UNSUPPORTED(cublasDsyr_v2) UNSUPPORTED(cublasCsyr_v2) UNSUPPORTED(cublasZsyr_v2)
UNSUPPORTED(cublasCher_v2) UNSUPPORTED(cublasZher_v2)
UNSUPPORTED(cublasSsyr2_v2) UNSUPPORTED(cublasDsyr2_v2) UNSUPPORTED(cublasCsyr2_v2) UNSUPPORTED(cublasZsyr2_v2)
UNSUPPORTED(cublasCher2_v2) UNSUPPORTED(cublasZher2_v2)
UNSUPPORTED(cublasStrmv_v2) UNSUPPORTED(cublasDtrmv_v2) UNSUPPORTED(cublasCtrmv_v2) UNSUPPORTED(cublasZtrmv_v2)
UNSUPPORTED(cublasStrsv_v2) UNSUPPORTED(cublasDtrsv_v2) UNSUPPORTED(cublasCtrsv_v2) UNSUPPORTED(cublasZtrsv_v2)
/* Level 3 */
UNSUPPORTED(cublasSsymm_v2) UNSUPPORTED(cublasDsymm_v2) UNSUPPORTED(cublasCsymm_v2) UNSUPPORTED(cublasZsymm_v2)
UNSUPPORTED(cublasChemm_v2) UNSUPPORTED(cublasZhemm_v2)
UNSUPPORTED(cublasSsyrk_v2) UNSUPPORTED(cublasDsyrk_v2) UNSUPPORTED(cublasCsyrk_v2) UNSUPPORTED(cublasZsyrk_v2)
UNSUPPORTED(cublasCherk_v2) UNSUPPORTED(cublasZherk_v2)
UNSUPPORTED(cublasSsyr2k_v2) UNSUPPORTED(cublasDsyr2k_v2) UNSUPPORTED(cublasCsyr2k_v2) UNSUPPORTED(cublasZsyr2k_v2)
UNSUPPORTED(cublasCher2k_v2) UNSUPPORTED(cublasZher2k_v2)
UNSUPPORTED(cublasStrmm_v2) UNSUPPORTED(cublasDtrmm_v2) UNSUPPORTED(cublasCtrmm_v2) UNSUPPORTED(cublasZtrmm_v2)
/* Host <-> device helpers (they would move data; MAGMA only) */
UNSUPPORTED(cublasSetVector) UNSUPPORTED(cublasGetVector) UNSUPPORTED(cublasSetMatrix) UNSUPPORTED(cublasGetMatrix)
UNSUPPORTED(cublasSetVectorAsync) UNSUPPORTED(cublasGetVectorAsync)
UNSUPPORTED(cublasSetMatrixAsync) UNSUPPORTED(cublasGetMatrixAsync)

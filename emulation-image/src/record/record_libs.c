/* Record mode's library wrappers: the cuBLAS(Lt), cuDNN and NCCL compute
 * calls torch makes, forwarded to the real libraries and recorded as the
 * emulation records them, so that the two traces of one script line up and an
 * operation's features are the same in both (docs/blas.md, docs/dnn.md,
 * docs/nccl.md).  Kernels each call launches are attributed to its record.
 *
 * Not described in full: cuDNN calls carry the API's name only, without the
 * graph's parameters (those come from the emulated trace of the same script),
 * and device-mode BLAS scalars are not read (NaN).  Library calls not wrapped
 * here still run and are measured, as the plain kernels they launch.
 */
#define _GNU_SOURCE
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>
#include <nccl.h>
#include <pthread.h>

#include "../blas.h"
#include "record.h"

#undef REAL
#define REAL(fn)                                                                   \
    ({                                                                             \
        static __typeof__(&fn) real_;                                              \
        if (!real_) real_ = (__typeof__(&fn))record_real(#fn);                     \
        real_;                                                                     \
    })

/* ---------------------------------------------------------------- cuBLAS */

/* Workspace each handle was given: cuBLAS has no getter for it. */
static pthread_mutex_t g_ws_lock = PTHREAD_MUTEX_INITIALIZER;
static struct { const void *handle; size_t bytes; } g_ws[64];

MAYA_EXPORT cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace, size_t bytes) {
    pthread_mutex_lock(&g_ws_lock);
    int slot = -1;
    for (int i = 0; i < 64 && slot < 0; i++)
        if (g_ws[i].handle == handle || !g_ws[i].handle) slot = i;
    if (slot >= 0) g_ws[slot].handle = handle, g_ws[slot].bytes = bytes;
    pthread_mutex_unlock(&g_ws_lock);
    return REAL(cublasSetWorkspace_v2)(handle, workspace, bytes);
}

static uint64_t workspace_of(const void *handle) {
    uint64_t bytes = 0;
    pthread_mutex_lock(&g_ws_lock);
    for (int i = 0; i < 64; i++)
        if (g_ws[i].handle == handle) bytes = g_ws[i].bytes;
    pthread_mutex_unlock(&g_ws_lock);
    return bytes;
}

typedef struct {
    const char *api;
    cublasHandle_t handle;
    cublasOperation_t ta, tb;
    long long m, n, k;
    const void *alpha, *beta;
    const void *A, *B, *C;
    int atype, btype, ctype, compute;  /* compute < 0: implied by the routine (-1 single, -2 double) */
    long long lda, ldb, ldc, sa, sb, sc, batch, algo;
} gemm_call;

static void gemm_end(record_lib_call c, const gemm_call *g, cublasStatus_t rc) {
    cublasMath_t math = CUBLAS_DEFAULT_MATH;
    cublasPointerMode_t pm = CUBLAS_POINTER_MODE_HOST;
    int sm = 0;
    REAL(cublasGetMathMode)(g->handle, &math);
    REAL(cublasGetPointerMode_v2)(g->handle, &pm);
    REAL(cublasGetSmCountTarget)(g->handle, &sm);
    int compute = g->compute >= 0 ? g->compute : maya_blas_implied_compute(math, g->compute == -1);
    int scale = g->compute >= 0 ? maya_blas_ex_scale_type(compute, g->ctype) : g->ctype;
    if (g->atype != g->ctype && g->compute == -1) scale = CUDA_R_32F;  /* cublasSgemmEx */

    maya_blas_op op;
    maya_blas_op_init(&op, g->api);
    op.workspace = workspace_of(g->handle);
    op.m = (uint64_t)g->m, op.n = (uint64_t)g->n, op.k = (uint64_t)g->k, op.batch = (uint64_t)g->batch;
    op.transa = g->ta, op.transb = g->tb;
    op.atype = (uint8_t)g->atype, op.btype = (uint8_t)g->btype;
    op.ctype = op.dtype = (uint8_t)g->ctype;
    op.compute = (uint8_t)compute, op.scale = (uint8_t)scale;
    uint64_t *x = op.ext;
    x[BX_MODES] = (uint64_t)(pm & 0xFF) | (uint64_t)(math & 0xFF) << 8;
    x[BX_SM_TARGET] = (uint64_t)sm;
    int dev = pm == CUBLAS_POINTER_MODE_DEVICE;
    x[BX_ALPHA] = maya_blas_scalar(g->alpha, scale, dev, &x[BX_ALPHA_IM]);
    x[BX_BETA] = maya_blas_scalar(g->beta, scale, dev, &x[BX_BETA_IM]);
    x[BX_LDA] = (uint64_t)g->lda, x[BX_LDB] = (uint64_t)g->ldb;
    x[BX_LDC] = x[BX_LDD] = (uint64_t)g->ldc;
    x[BX_STRIDE_A] = (uint64_t)g->sa, x[BX_STRIDE_B] = (uint64_t)g->sb;
    x[BX_STRIDE_C] = x[BX_STRIDE_D] = (uint64_t)g->sc;
    x[BX_A] = (uint64_t)(uintptr_t)g->A, x[BX_B] = (uint64_t)(uintptr_t)g->B;
    x[BX_C] = x[BX_D] = (uint64_t)(uintptr_t)g->C;
    x[BX_ALGO] = (uint64_t)g->algo;

    maya_rec r;
    maya_blas_record(c.call, &op, &r);
    if (rc != CUBLAS_STATUS_SUCCESS) r.flags |= MF_FAILED;
    record_lib_end(c, &r, op.ext, BX_WORDS);
}

#define GEMM_TYPED(fn, T, dt, single)                                                                        \
    MAYA_EXPORT cublasStatus_t fn(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,  \
                                  int m, int n, int k, const T *alpha, const T *A, int lda, const T *B,       \
                                  int ldb, const T *beta, T *C, int ldc) {                                    \
        record_lib_call c = record_lib_begin();                                                               \
        cublasStatus_t rc = REAL(fn)(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);   \
        gemm_call g = {#fn, handle, transa, transb, m, n, k, alpha, beta, A, B, C, dt, dt, dt, (single) ? -1 : -2, \
                       lda, ldb, ldc, 0, 0, 0, 1, -1};                                                        \
        gemm_end(c, &g, rc);                                                                                  \
        return rc;                                                                                            \
    }
GEMM_TYPED(cublasSgemm_v2, float, CUDA_R_32F, 1)
GEMM_TYPED(cublasDgemm_v2, double, CUDA_R_64F, 0)

#define GEMM_TYPED_STRIDED(fn, T, dt, single)                                                                 \
    MAYA_EXPORT cublasStatus_t fn(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,  \
                                  int m, int n, int k, const T *alpha, const T *A, int lda, long long sa,     \
                                  const T *B, int ldb, long long sb, const T *beta, T *C, int ldc,            \
                                  long long sc, int batch) {                                                  \
        record_lib_call c = record_lib_begin();                                                               \
        cublasStatus_t rc = REAL(fn)(handle, transa, transb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C,  \
                                     ldc, sc, batch);                                                         \
        gemm_call g = {#fn, handle, transa, transb, m, n, k, alpha, beta, A, B, C, dt, dt, dt, (single) ? -1 : -2, \
                       lda, ldb, ldc, sa, sb, sc, batch, -1};                                                 \
        gemm_end(c, &g, rc);                                                                                  \
        return rc;                                                                                            \
    }
GEMM_TYPED_STRIDED(cublasSgemmStridedBatched, float, CUDA_R_32F, 1)
GEMM_TYPED_STRIDED(cublasDgemmStridedBatched, double, CUDA_R_64F, 0)

MAYA_EXPORT cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                        int m, int n, int k, const void *alpha, const void *A, cudaDataType Atype,
                                        int lda, const void *B, cudaDataType Btype, int ldb, const void *beta,
                                        void *C, cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                                        cublasGemmAlgo_t algo) {
    record_lib_call c = record_lib_begin();
    cublasStatus_t rc = REAL(cublasGemmEx)(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb,
                                           beta, C, Ctype, ldc, computeType, algo);
    gemm_call g = {"cublasGemmEx", handle, transa, transb, m, n, k, alpha, beta, A, B, C, Atype, Btype, Ctype,
                   computeType, lda, ldb, ldc, 0, 0, 0, 1, algo};
    gemm_end(c, &g, rc);
    return rc;
}

MAYA_EXPORT cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
    const void *alpha, const void *A, cudaDataType Atype, int lda, long long int strideA, const void *B,
    cudaDataType Btype, int ldb, long long int strideB, const void *beta, void *C, cudaDataType Ctype, int ldc,
    long long int strideC, int batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
    record_lib_call c = record_lib_begin();
    cublasStatus_t rc = REAL(cublasGemmStridedBatchedEx)(handle, transa, transb, m, n, k, alpha, A, Atype, lda,
                                                         strideA, B, Btype, ldb, strideB, beta, C, Ctype, ldc,
                                                         strideC, batchCount, computeType, algo);
    gemm_call g = {"cublasGemmStridedBatchedEx", handle, transa, transb, m, n, k, alpha, beta, A, B, C, Atype,
                   Btype, Ctype, computeType, lda, ldb, ldc, strideA, strideB, strideC, batchCount, algo};
    gemm_end(c, &g, rc);
    return rc;
}

/* -------------------------------------------------------------- cuBLASLt */

static int64_t desc_attr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, int64_t dflt, size_t size) {
    int64_t v = 0;
    size_t written = 0;
    if (REAL(cublasLtMatmulDescGetAttribute)(d, a, &v, size, &written) != CUBLAS_STATUS_SUCCESS) return dflt;
    if (size == 4) return (int64_t)(int32_t)v;
    return v;
}

static int64_t layout_attr(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t a, size_t size) {
    int64_t v = 0;
    size_t written = 0;
    if (!l || REAL(cublasLtMatrixLayoutGetAttribute)(l, a, &v, size, &written) != CUBLAS_STATUS_SUCCESS) return 0;
    if (size == 4) return (int64_t)(int32_t)v;
    return v;
}

MAYA_EXPORT cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void *alpha,
                                          const void *A, cublasLtMatrixLayout_t Adesc, const void *B,
                                          cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C,
                                          cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,
                                          const cublasLtMatmulAlgo_t *algo, void *workspace,
                                          size_t workspaceSizeInBytes, cudaStream_t stream) {
    record_lib_call c = record_lib_begin();
    cublasStatus_t rc = REAL(cublasLtMatmul)(handle, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc,
                                             algo, workspace, workspaceSizeInBytes, stream);
    cublasLtMatrixLayout_t Dl = Ddesc ? Ddesc : Cdesc;
    maya_blas_op op;
    maya_blas_op_init(&op, "cublasLtMatmul");
    op.workspace = workspaceSizeInBytes;
    op.transa = (uint32_t)desc_attr(desc, CUBLASLT_MATMUL_DESC_TRANSA, 0, 4);
    op.transb = (uint32_t)desc_attr(desc, CUBLASLT_MATMUL_DESC_TRANSB, 0, 4);
    int64_t rows_a = layout_attr(Adesc, CUBLASLT_MATRIX_LAYOUT_ROWS, 8);
    int64_t cols_a = layout_attr(Adesc, CUBLASLT_MATRIX_LAYOUT_COLS, 8);
    op.m = (uint64_t)(op.transa != CUBLAS_OP_N ? cols_a : rows_a);
    op.k = (uint64_t)(op.transa != CUBLAS_OP_N ? rows_a : cols_a);
    op.n = (uint64_t)layout_attr(Dl, CUBLASLT_MATRIX_LAYOUT_COLS, 8);
    int64_t batch = layout_attr(Dl, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 4);
    op.batch = (uint64_t)(batch > 0 ? batch : 1);
    int64_t epi = desc_attr(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_DEFAULT, 4);
    op.epilogue = epi == CUBLASLT_EPILOGUE_DEFAULT ? 0 : (uint32_t)epi;
    op.atype = (uint8_t)layout_attr(Adesc, CUBLASLT_MATRIX_LAYOUT_TYPE, 4);
    op.btype = (uint8_t)layout_attr(Bdesc, CUBLASLT_MATRIX_LAYOUT_TYPE, 4);
    op.ctype = (uint8_t)layout_attr(Cdesc, CUBLASLT_MATRIX_LAYOUT_TYPE, 4);
    op.dtype = (uint8_t)layout_attr(Dl, CUBLASLT_MATRIX_LAYOUT_TYPE, 4);
    op.compute = (uint8_t)desc_attr(desc, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, 0, 4);
    int scale = (int)desc_attr(desc, CUBLASLT_MATMUL_DESC_SCALE_TYPE, CUDA_R_32F, 4);
    op.scale = (uint8_t)scale;

    uint64_t *x = op.ext;
    x[BX_LDA] = (uint64_t)layout_attr(Adesc, CUBLASLT_MATRIX_LAYOUT_LD, 8);
    x[BX_LDB] = (uint64_t)layout_attr(Bdesc, CUBLASLT_MATRIX_LAYOUT_LD, 8);
    x[BX_LDC] = (uint64_t)layout_attr(Cdesc, CUBLASLT_MATRIX_LAYOUT_LD, 8);
    x[BX_LDD] = (uint64_t)layout_attr(Dl, CUBLASLT_MATRIX_LAYOUT_LD, 8);
    x[BX_STRIDE_A] = (uint64_t)layout_attr(Adesc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, 8);
    x[BX_STRIDE_B] = (uint64_t)layout_attr(Bdesc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, 8);
    x[BX_STRIDE_C] = (uint64_t)layout_attr(Cdesc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, 8);
    x[BX_STRIDE_D] = (uint64_t)layout_attr(Dl, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, 8);
    int pm = (int)desc_attr(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, CUBLASLT_POINTER_MODE_HOST, 4);
    x[BX_ALPHA] = maya_blas_scalar(alpha, scale, pm != CUBLASLT_POINTER_MODE_HOST, &x[BX_ALPHA_IM]);
    if (pm == CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO)
        x[BX_BETA] = x[BX_BETA_IM] = 0;
    else
        x[BX_BETA] = maya_blas_scalar(beta, scale, pm != CUBLASLT_POINTER_MODE_HOST, &x[BX_BETA_IM]);
    x[BX_A] = (uint64_t)(uintptr_t)A, x[BX_B] = (uint64_t)(uintptr_t)B;
    x[BX_C] = (uint64_t)(uintptr_t)C, x[BX_D] = (uint64_t)(uintptr_t)D;
    x[BX_BIAS] = (uint64_t)desc_attr(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, 0, 8);
    int32_t bias_type = (int32_t)desc_attr(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, -1, 4);
    if (x[BX_BIAS] && bias_type < 0) bias_type = op.dtype;
    if (!x[BX_BIAS]) bias_type = -1;
    int32_t aux_type = (int32_t)desc_attr(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, -1, 4);
    x[BX_BIAS_TYPE] = (uint64_t)(uint32_t)bias_type | (uint64_t)(uint32_t)aux_type << 32;
    x[BX_AUX] = (uint64_t)desc_attr(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, 0, 8);
    x[BX_MODES] = (uint64_t)(pm & 0xFF) | (uint64_t)(uint8_t)desc_attr(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, 0, 1) << 16;
    x[BX_ALGO] = algo ? algo->data[0] : 0;
    x[BX_SM_TARGET] = (uint64_t)desc_attr(desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, 0, 4);

    maya_rec r;
    maya_blas_record(c.call, &op, &r);
    if (rc != CUBLAS_STATUS_SUCCESS) r.flags |= MF_FAILED;
    record_lib_end(c, &r, op.ext, BX_WORDS);
    return rc;
}

/* ----------------------------------------------------------------- cuDNN */

/* A cuDNN compute call: its name, workspace and whether it used the backend
 * API; the operation's parameters are the emulated trace's to give. */
static void dnn_end(record_lib_call c, const char *name, uint64_t workspace, int backend, cudnnStatus_t rc) {
    maya_rec r;
    maya_rec_init(&r, MK_DNN, c.call);
    r.flags |= MF_ASYNC | (rc != CUDNN_STATUS_SUCCESS ? MF_FAILED : 0);
    r.a32 = (uint32_t)maya_str(name);
    r.a[0] = workspace;
    r.a[1] = 0xFFFFFFFF00000000ull;
    r.a[2] = (uint64_t)backend << 26;
    record_lib_end(c, &r, NULL, 0);
}

MAYA_EXPORT cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
                                              cudnnBackendDescriptor_t pack) {
    record_lib_call c = record_lib_begin();
    cudnnStatus_t rc = REAL(cudnnBackendExecute)(handle, plan, pack);
    int64_t ws = 0, n = 0;
    REAL(cudnnBackendGetAttribute)(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws);
    dnn_end(c, "cudnnBackendExecute", (uint64_t)ws, 1, rc);
    return rc;
}

MAYA_EXPORT cudnnStatus_t cudnnBatchNormalizationForwardTrainingEx(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t bnOps, const void *alpha, const void *beta,
    const cudnnTensorDescriptor_t xDesc, const void *xData, const cudnnTensorDescriptor_t zDesc, const void *zData,
    const cudnnTensorDescriptor_t yDesc, void *yData, const cudnnTensorDescriptor_t bnScaleBiasMeanVarDesc,
    const void *bnScale, const void *bnBias, double exponentialAverageFactor, void *resultRunningMean,
    void *resultRunningVariance, double epsilon, void *resultSaveMean, void *resultSaveInvVariance,
    cudnnActivationDescriptor_t activationDesc, void *workspace, size_t workSpaceSizeInBytes, void *reserveSpace,
    size_t reserveSpaceSizeInBytes) {
    record_lib_call c = record_lib_begin();
    cudnnStatus_t rc = REAL(cudnnBatchNormalizationForwardTrainingEx)(
        handle, mode, bnOps, alpha, beta, xDesc, xData, zDesc, zData, yDesc, yData, bnScaleBiasMeanVarDesc,
        bnScale, bnBias, exponentialAverageFactor, resultRunningMean, resultRunningVariance, epsilon,
        resultSaveMean, resultSaveInvVariance, activationDesc, workspace, workSpaceSizeInBytes, reserveSpace,
        reserveSpaceSizeInBytes);
    dnn_end(c, "batchnorm_fwd_training", workSpaceSizeInBytes, 0, rc);
    return rc;
}

MAYA_EXPORT cudnnStatus_t cudnnBatchNormalizationBackwardEx(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t bnOps, const void *alphaDataDiff,
    const void *betaDataDiff, const void *alphaParamDiff, const void *betaParamDiff,
    const cudnnTensorDescriptor_t xDesc, const void *xData, const cudnnTensorDescriptor_t yDesc, const void *yData,
    const cudnnTensorDescriptor_t dyDesc, const void *dyData, const cudnnTensorDescriptor_t dzDesc, void *dzData,
    const cudnnTensorDescriptor_t dxDesc, void *dxData, const cudnnTensorDescriptor_t dBnScaleBiasDesc,
    const void *bnScaleData, const void *bnBiasData, void *dBnScaleData, void *dBnBiasData, double epsilon,
    const void *savedMean, const void *savedInvVariance, cudnnActivationDescriptor_t activationDesc,
    void *workSpace, size_t workSpaceSizeInBytes, void *reserveSpace, size_t reserveSpaceSizeInBytes) {
    record_lib_call c = record_lib_begin();
    cudnnStatus_t rc = REAL(cudnnBatchNormalizationBackwardEx)(
        handle, mode, bnOps, alphaDataDiff, betaDataDiff, alphaParamDiff, betaParamDiff, xDesc, xData, yDesc,
        yData, dyDesc, dyData, dzDesc, dzData, dxDesc, dxData, dBnScaleBiasDesc, bnScaleData, bnBiasData,
        dBnScaleData, dBnBiasData, epsilon, savedMean, savedInvVariance, activationDesc, workSpace,
        workSpaceSizeInBytes, reserveSpace, reserveSpaceSizeInBytes);
    dnn_end(c, "batchnorm_bwd", workSpaceSizeInBytes, 0, rc);
    return rc;
}

MAYA_EXPORT cudnnStatus_t cudnnBatchNormalizationForwardInference(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, const void *alpha, const void *beta,
    const cudnnTensorDescriptor_t xDesc, const void *x, const cudnnTensorDescriptor_t yDesc, void *y,
    const cudnnTensorDescriptor_t bnScaleBiasMeanVarDesc, const void *bnScale, const void *bnBias,
    const void *estimatedMean, const void *estimatedVariance, double epsilon) {
    record_lib_call c = record_lib_begin();
    cudnnStatus_t rc = REAL(cudnnBatchNormalizationForwardInference)(handle, mode, alpha, beta, xDesc, x, yDesc, y,
                                                                     bnScaleBiasMeanVarDesc, bnScale, bnBias,
                                                                     estimatedMean, estimatedVariance, epsilon);
    dnn_end(c, "batchnorm_fwd_inference", 0, 0, rc);
    return rc;
}

/* ------------------------------------------------------------------ NCCL */

enum { C_ALLREDUCE = 1, C_BROADCAST, C_REDUCE, C_ALLGATHER, C_REDUCESCATTER, C_ALLTOALL, C_SEND, C_RECV };

static __thread int t_group_depth;
static __thread int t_group_last = -1;

/* Sequence numbers per communicator (collectives) or per (communicator, peer,
 * direction) for send/recv, as the emulation counts them. */
static uint32_t next_seq(const void *comm, int op, int peer) {
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static struct { const void *comm; int key; uint32_t seq; } table[1024];
    int key = op == C_SEND ? 1 + peer * 2 : op == C_RECV ? 2 + peer * 2 : 0;
    uint32_t seq = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < 1024; i++) {
        if (!table[i].comm) table[i].comm = comm, table[i].key = key;
        if (table[i].comm == comm && table[i].key == key) {
            seq = ++table[i].seq;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return seq;
}

static size_t type_bytes(ncclDataType_t t) {
    switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
    }
}

static void coll_end(record_lib_call c, int op, size_t count, ncclDataType_t dt, int redop, int peer,
                     size_t bytes, ncclComm_t comm, ncclResult_t rc) {
    maya_rec r;
    maya_rec_init(&r, MK_COLL, c.call);
    r.flags |= MF_ASYNC | (rc != ncclSuccess && rc != ncclInProgress ? MF_FAILED : 0);
    r.a32 = next_seq(comm, op, peer);
    r.a[0] = (uint64_t)(uintptr_t)comm;
    r.a[1] = count;
    r.a[2] = (uint64_t)op | (uint64_t)dt << 8 | (uint64_t)(redop & 0xFF) << 16 | (uint64_t)(t_group_depth > 0) << 24;
    r.a[3] = (uint64_t)(int64_t)peer;
    r.a[4] = bytes;
    uint64_t ext[3] = {0, 0, 0};
    record_lib_end(c, &r, ext, 3);
    if (t_group_depth > 0) t_group_last = c.op;
}

static int comm_size(ncclComm_t comm) {
    int n = 1;
    REAL(ncclCommCount)(comm, &n);
    return n;
}

MAYA_EXPORT ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t dt,
                                       ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    record_lib_call c = record_lib_begin();
    ncclResult_t rc = REAL(ncclAllReduce)(send, recv, count, dt, op, comm, stream);
    coll_end(c, C_ALLREDUCE, count, dt, op > 4 ? 5 : (int)op, -1, count * type_bytes(dt), comm, rc);
    return rc;
}

MAYA_EXPORT ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t dt, int root,
                                       ncclComm_t comm, cudaStream_t stream) {
    record_lib_call c = record_lib_begin();
    ncclResult_t rc = REAL(ncclBroadcast)(send, recv, count, dt, root, comm, stream);
    coll_end(c, C_BROADCAST, count, dt, 0xFF, root, count * type_bytes(dt), comm, rc);
    return rc;
}

MAYA_EXPORT ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                                    int root, ncclComm_t comm, cudaStream_t stream) {
    record_lib_call c = record_lib_begin();
    ncclResult_t rc = REAL(ncclReduce)(send, recv, count, dt, op, root, comm, stream);
    coll_end(c, C_REDUCE, count, dt, op > 4 ? 5 : (int)op, root, count * type_bytes(dt), comm, rc);
    return rc;
}

MAYA_EXPORT ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t dt,
                                       ncclComm_t comm, cudaStream_t stream) {
    record_lib_call c = record_lib_begin();
    ncclResult_t rc = REAL(ncclAllGather)(send, recv, count, dt, comm, stream);
    coll_end(c, C_ALLGATHER, count, dt, 0xFF, -1, count * type_bytes(dt), comm, rc);
    return rc;
}

MAYA_EXPORT ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count, ncclDataType_t dt,
                                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    record_lib_call c = record_lib_begin();
    ncclResult_t rc = REAL(ncclReduceScatter)(send, recv, count, dt, op, comm, stream);
    coll_end(c, C_REDUCESCATTER, count, dt, op > 4 ? 5 : (int)op, -1,
             count * (size_t)comm_size(comm) * type_bytes(dt), comm, rc);
    return rc;
}

MAYA_EXPORT ncclResult_t ncclAlltoAll(const void *send, void *recv, size_t count, ncclDataType_t dt,
                                      ncclComm_t comm, cudaStream_t stream) {
    record_lib_call c = record_lib_begin();
    ncclResult_t rc = REAL(ncclAlltoAll)(send, recv, count, dt, comm, stream);
    coll_end(c, C_ALLTOALL, count, dt, 0xFF, -1, count * (size_t)comm_size(comm) * type_bytes(dt), comm, rc);
    return rc;
}

MAYA_EXPORT ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,
                                  cudaStream_t stream) {
    record_lib_call c = record_lib_begin();
    ncclResult_t rc = REAL(ncclSend)(send, count, dt, peer, comm, stream);
    coll_end(c, C_SEND, count, dt, 0xFF, peer, count * type_bytes(dt), comm, rc);
    return rc;
}

MAYA_EXPORT ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,
                                  cudaStream_t stream) {
    record_lib_call c = record_lib_begin();
    ncclResult_t rc = REAL(ncclRecv)(recv, count, dt, peer, comm, stream);
    coll_end(c, C_RECV, count, dt, 0xFF, peer, count * type_bytes(dt), comm, rc);
    return rc;
}

MAYA_EXPORT ncclResult_t ncclGroupStart(void) {
    if (t_group_depth++ == 0) t_group_last = -1;
    return REAL(ncclGroupStart)();
}

/* Grouped calls launch their kernels here: they go to the group's last call. */
MAYA_EXPORT ncclResult_t ncclGroupEnd(void) {
    int last = --t_group_depth == 0 ? t_group_last : -1;
    if (last >= 0) record_attribute_to(last);
    ncclResult_t rc = REAL(ncclGroupEnd)();
    if (last >= 0) record_attribute_to(-1);
    return rc;
}

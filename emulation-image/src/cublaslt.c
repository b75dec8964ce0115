/* cuBLASLt, replaced.
 *
 * torch hands its cuBLAS handle to cuBLASLt (no cublasLtCreate), so every
 * entry point accepts either kind of handle (blas.h).  The three descriptors
 * are real objects laid out inside the public "semi-opaque" sizes, so both
 * the *Create and the *Init_internal forms work; every attribute set is stored
 * and answered by the GetAttribute calls through one table per descriptor
 * (attribute id -> offset and size, sizes as the header documents them).
 * cublasLtMatmul records one MK_BLAS record (docs/blas.md) and computes
 * nothing; the heuristic returns one algorithm that needs no workspace.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "blas.h"

#define LT_LAYOUT_MAGIC 0x4c59544cu  /* "LTYL" */
#define LT_DESC_MAGIC 0x43534454u    /* "TDSC" */
#define LT_PREF_MAGIC 0x46525054u    /* "TPRF" */
#define LT_ALGO_MAGIC 0x4d415941u    /* "AYAM": algo.data[0] of our algorithms */

/* ------------------------------------------------------------ descriptors */

typedef struct {
    uint32_t magic;
    uint32_t type;          /* cudaDataType */
    int32_t order;          /* cublasLtOrder_t */
    int32_t batch_count;
    uint64_t rows, cols;
    int64_t ld;
    int64_t batch_stride;   /* elements */
    int64_t plane_offset;
    uint32_t batch_mode;
} lt_layout;

typedef struct {
    uint32_t magic;
    int32_t compute, scale, pointer_mode;
    int32_t transa, transb, transc, fill_mode;
    uint32_t epilogue;
    int32_t sm_count_target, aux_type, bias_type;
    int32_t a_scale_mode, b_scale_mode, c_scale_mode, d_scale_mode, aux_scale_mode,
        d_out_scale_mode;
    int8_t fast_accum;
    const void *bias;
    int64_t bias_batch_stride;
    void *aux;
    int64_t aux_ld, aux_batch_stride, alpha_vector_batch_stride;
    const void *a_scale, *b_scale, *c_scale, *d_scale;
    void *amax_d, *aux_scale, *aux_amax, *d_out_scale;
    void *emulation;
} lt_desc;

typedef struct {
    uint32_t magic;
    uint32_t search_mode, reduction_mask;
    uint32_t align_a, align_b, align_c, align_d;
    float max_waves;
    uint64_t max_workspace;
    uint64_t impl_mask;
} lt_pref;

_Static_assert(sizeof(lt_layout) <= sizeof(cublasLtMatrixLayoutOpaque_t), "layout too big");
_Static_assert(sizeof(lt_desc) <= sizeof(cublasLtMatmulDescOpaque_t), "desc too big");
_Static_assert(sizeof(lt_pref) <= sizeof(cublasLtMatmulPreferenceOpaque_t), "pref too big");

typedef struct {
    int attr;
    uint16_t offset, size;
} attr_slot;

#define SLOT(id, type, field) {id, offsetof(type, field), sizeof(((type *)0)->field)}

static const attr_slot layout_attrs[] = {
    SLOT(CUBLASLT_MATRIX_LAYOUT_TYPE, lt_layout, type),
    SLOT(CUBLASLT_MATRIX_LAYOUT_ORDER, lt_layout, order),
    SLOT(CUBLASLT_MATRIX_LAYOUT_ROWS, lt_layout, rows),
    SLOT(CUBLASLT_MATRIX_LAYOUT_COLS, lt_layout, cols),
    SLOT(CUBLASLT_MATRIX_LAYOUT_LD, lt_layout, ld),
    SLOT(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, lt_layout, batch_count),
    SLOT(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, lt_layout, batch_stride),
    SLOT(CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET, lt_layout, plane_offset),
    SLOT(CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, lt_layout, batch_mode),
};

static const attr_slot desc_attrs[] = {
    SLOT(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, lt_desc, compute),
    SLOT(CUBLASLT_MATMUL_DESC_SCALE_TYPE, lt_desc, scale),
    SLOT(CUBLASLT_MATMUL_DESC_POINTER_MODE, lt_desc, pointer_mode),
    SLOT(CUBLASLT_MATMUL_DESC_TRANSA, lt_desc, transa),
    SLOT(CUBLASLT_MATMUL_DESC_TRANSB, lt_desc, transb),
    SLOT(CUBLASLT_MATMUL_DESC_TRANSC, lt_desc, transc),
    SLOT(CUBLASLT_MATMUL_DESC_FILL_MODE, lt_desc, fill_mode),
    SLOT(CUBLASLT_MATMUL_DESC_EPILOGUE, lt_desc, epilogue),
    SLOT(CUBLASLT_MATMUL_DESC_BIAS_POINTER, lt_desc, bias),
    SLOT(CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, lt_desc, bias_batch_stride),
    SLOT(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, lt_desc, aux),
    SLOT(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, lt_desc, aux_ld),
    SLOT(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, lt_desc, aux_batch_stride),
    SLOT(CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE, lt_desc, alpha_vector_batch_stride),
    SLOT(CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, lt_desc, sm_count_target),
    SLOT(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, lt_desc, a_scale),
    SLOT(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, lt_desc, b_scale),
    SLOT(CUBLASLT_MATMUL_DESC_C_SCALE_POINTER, lt_desc, c_scale),
    SLOT(CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, lt_desc, d_scale),
    SLOT(CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, lt_desc, amax_d),
    SLOT(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, lt_desc, aux_type),
    SLOT(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER, lt_desc, aux_scale),
    SLOT(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER, lt_desc, aux_amax),
    SLOT(CUBLASLT_MATMUL_DESC_FAST_ACCUM, lt_desc, fast_accum),
    SLOT(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, lt_desc, bias_type),
    SLOT(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, lt_desc, a_scale_mode),
    SLOT(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, lt_desc, b_scale_mode),
    SLOT(CUBLASLT_MATMUL_DESC_C_SCALE_MODE, lt_desc, c_scale_mode),
    SLOT(CUBLASLT_MATMUL_DESC_D_SCALE_MODE, lt_desc, d_scale_mode),
    SLOT(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_MODE, lt_desc, aux_scale_mode),
    SLOT(CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER, lt_desc, d_out_scale),
    SLOT(CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE, lt_desc, d_out_scale_mode),
    SLOT(CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR, lt_desc, emulation),
};

static const attr_slot pref_attrs[] = {
    SLOT(CUBLASLT_MATMUL_PREF_SEARCH_MODE, lt_pref, search_mode),
    SLOT(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, lt_pref, max_workspace),
    SLOT(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, lt_pref, reduction_mask),
    SLOT(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, lt_pref, align_a),
    SLOT(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, lt_pref, align_b),
    SLOT(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, lt_pref, align_c),
    SLOT(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, lt_pref, align_d),
    SLOT(CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT, lt_pref, max_waves),
    SLOT(CUBLASLT_MATMUL_PREF_IMPL_MASK, lt_pref, impl_mask),
};

#define NSLOTS(t) ((int)(sizeof(t) / sizeof((t)[0])))

static const attr_slot *find_slot(const attr_slot *t, int n, int attr) {
    for (int i = 0; i < n; i++)
        if (t[i].attr == attr)
            return &t[i];
    return NULL;
}

/* The size must match the attribute's storage exactly, as cuBLASLt demands. */
static cublasStatus_t attr_set(void *obj, const attr_slot *t, int n, const char *what, int attr,
                               const void *buf, size_t size) {
    const attr_slot *s = find_slot(t, n, attr);
    if (!s) { /* the program gets an error, and the run reports which attribute */
        char name[128];
        snprintf(name, sizeof name, "%s: attribute %d", what, attr);
        maya_unsupported(name);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (!buf || size != s->size)
        return CUBLAS_STATUS_INVALID_VALUE;
    memcpy((char *)obj + s->offset, buf, size);
    return CUBLAS_STATUS_SUCCESS;
}

/* sizeInBytes 0 asks for the size; otherwise the buffer must hold the value. */
static cublasStatus_t attr_get(const void *obj, const attr_slot *t, int n, int attr, void *buf,
                               size_t size, size_t *written) {
    const attr_slot *s = find_slot(t, n, attr);
    if (!s)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (size == 0) {
        if (!written)
            return CUBLAS_STATUS_INVALID_VALUE;
        *written = s->size;
        return CUBLAS_STATUS_SUCCESS;
    }
    if (!buf || size < s->size)
        return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(buf, (const char *)obj + s->offset, s->size);
    if (written)
        *written = s->size;
    return CUBLAS_STATUS_SUCCESS;
}

static void layout_init(lt_layout *l, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld) {
    memset(l, 0, sizeof(cublasLtMatrixLayoutOpaque_t));
    l->magic = LT_LAYOUT_MAGIC;
    l->type = (uint32_t)type;
    l->order = CUBLASLT_ORDER_COL;
    l->batch_count = 1;
    l->rows = rows;
    l->cols = cols;
    l->ld = ld;
}

static void desc_init(lt_desc *d, cublasComputeType_t compute, cudaDataType_t scale) {
    memset(d, 0, sizeof(cublasLtMatmulDescOpaque_t));
    d->magic = LT_DESC_MAGIC;
    d->compute = compute;
    d->scale = scale;
    d->pointer_mode = CUBLASLT_POINTER_MODE_HOST;
    d->transa = d->transb = d->transc = CUBLAS_OP_N;
    d->fill_mode = CUBLAS_FILL_MODE_FULL;
    d->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    d->aux_type = d->bias_type = -1;
}

static void pref_init(lt_pref *p) {
    memset(p, 0, sizeof(cublasLtMatmulPreferenceOpaque_t));
    p->magic = LT_PREF_MAGIC;
    p->search_mode = CUBLASLT_SEARCH_BEST_FIT;
    p->reduction_mask = CUBLASLT_REDUCTION_SCHEME_MASK;
    p->align_a = p->align_b = p->align_c = p->align_d = 256;
    p->impl_mask = ~0ull;
}

static lt_layout *as_layout(const void *p) {
    lt_layout *l = (lt_layout *)p;
    return l && l->magic == LT_LAYOUT_MAGIC ? l : NULL;
}
static lt_desc *as_desc(const void *p) {
    lt_desc *d = (lt_desc *)p;
    return d && d->magic == LT_DESC_MAGIC ? d : NULL;
}
static lt_pref *as_pref(const void *p) {
    lt_pref *q = (lt_pref *)p;
    return q && q->magic == LT_PREF_MAGIC ? q : NULL;
}

/* ----------------------------------------------------- handle and version */

MAYA_EXPORT cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
    if (!handle)
        return CUBLAS_STATUS_INVALID_VALUE;
    *handle = (cublasLtHandle_t)maya_blas_handle_new(1);
    return *handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

MAYA_EXPORT cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
    struct cublasContext *h = maya_blas_handle(handle);
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    maya_blas_handle_free(h);
    return CUBLAS_STATUS_SUCCESS;
}

/* cuBLASLt ships inside cuBLAS and reports the same version. */
MAYA_EXPORT size_t cublasLtGetVersion(void) {
    return CUBLAS_VERSION;
}

MAYA_EXPORT size_t cublasLtGetCudartVersion(void) {
    return CUDART_VERSION;
}

MAYA_EXPORT cublasStatus_t cublasLtGetProperty(libraryPropertyType type, int *value) {
    if (!value)
        return CUBLAS_STATUS_INVALID_VALUE;
    switch (type) {
    case MAJOR_VERSION: *value = CUBLAS_VER_MAJOR; return CUBLAS_STATUS_SUCCESS;
    case MINOR_VERSION: *value = CUBLAS_VER_MINOR; return CUBLAS_STATUS_SUCCESS;
    case PATCH_LEVEL: *value = CUBLAS_VER_PATCH; return CUBLAS_STATUS_SUCCESS;
    default: return CUBLAS_STATUS_INVALID_VALUE;
    }
}

static size_t heuristics_cache_capacity = 8192;

MAYA_EXPORT cublasStatus_t cublasLtHeuristicsCacheGetCapacity(size_t *capacity) {
    if (!capacity)
        return CUBLAS_STATUS_INVALID_VALUE;
    *capacity = heuristics_cache_capacity;
    return CUBLAS_STATUS_SUCCESS;
}

MAYA_EXPORT cublasStatus_t cublasLtHeuristicsCacheSetCapacity(size_t capacity) {
    heuristics_cache_capacity = capacity;
    return CUBLAS_STATUS_SUCCESS;
}

MAYA_EXPORT unsigned cublasLtDisableCpuInstructionsSetMask(unsigned mask) { return 0; }

/* Logging is cuBLASLt's own business; accept and ignore. */
MAYA_EXPORT cublasStatus_t cublasLtLoggerSetCallback(cublasLtLoggerCallback_t cb) { return CUBLAS_STATUS_SUCCESS; }
MAYA_EXPORT cublasStatus_t cublasLtLoggerSetFile(FILE *file) { return CUBLAS_STATUS_SUCCESS; }
MAYA_EXPORT cublasStatus_t cublasLtLoggerOpenFile(const char *file) { return CUBLAS_STATUS_SUCCESS; }
MAYA_EXPORT cublasStatus_t cublasLtLoggerSetLevel(int level) { return CUBLAS_STATUS_SUCCESS; }
MAYA_EXPORT cublasStatus_t cublasLtLoggerSetMask(int mask) { return CUBLAS_STATUS_SUCCESS; }
MAYA_EXPORT cublasStatus_t cublasLtLoggerForceDisable(void) { return CUBLAS_STATUS_SUCCESS; }

/* ---------------------------------------------------------- matrix layout */

MAYA_EXPORT cublasStatus_t cublasLtMatrixLayoutInit_internal(cublasLtMatrixLayout_t layout,
                                                             size_t size, cudaDataType type,
                                                             uint64_t rows, uint64_t cols,
                                                             int64_t ld) {
    if (!layout || size < sizeof(cublasLtMatrixLayoutOpaque_t))
        return CUBLAS_STATUS_ALLOC_FAILED;
    layout_init((lt_layout *)layout, type, rows, cols, ld);
    return CUBLAS_STATUS_SUCCESS;
}

MAYA_EXPORT cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout,
                                                      cudaDataType type, uint64_t rows,
                                                      uint64_t cols, int64_t ld) {
    if (!layout)
        return CUBLAS_STATUS_INVALID_VALUE;
    *layout = malloc(sizeof(cublasLtMatrixLayoutOpaque_t));
    if (!*layout)
        return CUBLAS_STATUS_ALLOC_FAILED;
    layout_init((lt_layout *)*layout, type, rows, cols, ld);
    return CUBLAS_STATUS_SUCCESS;
}

MAYA_EXPORT cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
    lt_layout *l = as_layout(layout);
    if (l) {
        l->magic = 0;
        free(l);
    }
    return CUBLAS_STATUS_SUCCESS;
}

MAYA_EXPORT cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                            cublasLtMatrixLayoutAttribute_t attr,
                                                            const void *buf, size_t size) {
    lt_layout *l = as_layout(layout);
    if (!l)
        return CUBLAS_STATUS_INVALID_VALUE;
    return attr_set(l, layout_attrs, NSLOTS(layout_attrs), "cublasLtMatrixLayoutSetAttribute",
                    attr, buf, size);
}

MAYA_EXPORT cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t layout,
                                                            cublasLtMatrixLayoutAttribute_t attr,
                                                            void *buf, size_t size,
                                                            size_t *written) {
    lt_layout *l = as_layout(layout);
    if (!l)
        return CUBLAS_STATUS_INVALID_VALUE;
    return attr_get(l, layout_attrs, NSLOTS(layout_attrs), attr, buf, size, written);
}

/* ---------------------------------------------------------- matmul desc */

MAYA_EXPORT cublasStatus_t cublasLtMatmulDescInit_internal(cublasLtMatmulDesc_t desc, size_t size,
                                                           cublasComputeType_t computeType,
                                                           cudaDataType_t scaleType) {
    if (!desc || size < sizeof(cublasLtMatmulDescOpaque_t))
        return CUBLAS_STATUS_ALLOC_FAILED;
    desc_init((lt_desc *)desc, computeType, scaleType);
    return CUBLAS_STATUS_SUCCESS;
}

MAYA_EXPORT cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc,
                                                    cublasComputeType_t computeType,
                                                    cudaDataType_t scaleType) {
    if (!desc)
        return CUBLAS_STATUS_INVALID_VALUE;
    *desc = malloc(sizeof(cublasLtMatmulDescOpaque_t));
    if (!*desc)
        return CUBLAS_STATUS_ALLOC_FAILED;
    desc_init((lt_desc *)*desc, computeType, scaleType);
    return CUBLAS_STATUS_SUCCESS;
}

MAYA_EXPORT cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
    lt_desc *d = as_desc(desc);
    if (d) {
        d->magic = 0;
        free(d);
    }
    return CUBLAS_STATUS_SUCCESS;
}

MAYA_EXPORT cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                                          cublasLtMatmulDescAttributes_t attr,
                                                          const void *buf, size_t size) {
    lt_desc *d = as_desc(desc);
    if (!d)
        return CUBLAS_STATUS_INVALID_VALUE;
    return attr_set(d, desc_attrs, NSLOTS(desc_attrs), "cublasLtMatmulDescSetAttribute", attr,
                    buf, size);
}

MAYA_EXPORT cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t desc,
                                                          cublasLtMatmulDescAttributes_t attr,
                                                          void *buf, size_t size,
                                                          size_t *written) {
    lt_desc *d = as_desc(desc);
    if (!d)
        return CUBLAS_STATUS_INVALID_VALUE;
    return attr_get(d, desc_attrs, NSLOTS(desc_attrs), attr, buf, size, written);
}

/* ---------------------------------------------------------- preference */

MAYA_EXPORT cublasStatus_t cublasLtMatmulPreferenceInit_internal(cublasLtMatmulPreference_t pref,
                                                                 size_t size) {
    if (!pref || size < sizeof(cublasLtMatmulPreferenceOpaque_t))
        return CUBLAS_STATUS_ALLOC_FAILED;
    pref_init((lt_pref *)pref);
    return CUBLAS_STATUS_SUCCESS;
}

MAYA_EXPORT cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
    if (!pref)
        return CUBLAS_STATUS_INVALID_VALUE;
    *pref = malloc(sizeof(cublasLtMatmulPreferenceOpaque_t));
    if (!*pref)
        return CUBLAS_STATUS_ALLOC_FAILED;
    pref_init((lt_pref *)*pref);
    return CUBLAS_STATUS_SUCCESS;
}

MAYA_EXPORT cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
    lt_pref *p = as_pref(pref);
    if (p) {
        p->magic = 0;
        free(p);
    }
    return CUBLAS_STATUS_SUCCESS;
}

MAYA_EXPORT cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
    size_t size) {
    lt_pref *p = as_pref(pref);
    if (!p)
        return CUBLAS_STATUS_INVALID_VALUE;
    return attr_set(p, pref_attrs, NSLOTS(pref_attrs), "cublasLtMatmulPreferenceSetAttribute",
                    attr, buf, size);
}

MAYA_EXPORT cublasStatus_t cublasLtMatmulPreferenceGetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, void *buf,
    size_t size, size_t *written) {
    lt_pref *p = as_pref(pref);
    if (!p)
        return CUBLAS_STATUS_INVALID_VALUE;
    return attr_get(p, pref_attrs, NSLOTS(pref_attrs), attr, buf, size, written);
}

/* --------------------------------------------------------------- matmul */

/* m, n, k of D = op(A) op(B): rows/cols of a layout are those of the stored
 * matrix, before the transpose. */
static void matmul_dims(const lt_desc *d, const lt_layout *a, const lt_layout *dl, uint64_t *m,
                        uint64_t *n, uint64_t *k) {
    int ta = d->transa != CUBLAS_OP_N;
    *m = ta ? a->cols : a->rows;
    *k = ta ? a->rows : a->cols;
    *n = dl->cols;
}

/* Plausible utilisation for the heuristic: 128x128 output tiles over the SMs. */
static float waves(uint64_t m, uint64_t n, uint64_t batch) {
    int sms = maya_cfg()->gpu.sm_count;
    uint64_t tiles = ((m + 127) / 128) * ((n + 127) / 128) * (batch ? batch : 1);
    return sms > 0 ? (float)tiles / (float)sms : 1.0f;
}

MAYA_EXPORT cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int *returnAlgoCount) {
    if (!maya_blas_handle(handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    lt_desc *d = as_desc(operationDesc);
    lt_layout *a = as_layout(Adesc), *dl = as_layout(Ddesc ? Ddesc : Cdesc);
    if (!d || !a || !as_layout(Bdesc) || !dl || !as_pref(preference) || requestedAlgoCount < 1 ||
        !heuristicResultsArray || !returnAlgoCount)
        return CUBLAS_STATUS_INVALID_VALUE;
    uint64_t m, n, k;
    matmul_dims(d, a, dl, &m, &n, &k);
    cublasLtMatmulHeuristicResult_t *r = &heuristicResultsArray[0];
    memset(r, 0, sizeof *r);
    r->algo.data[0] = LT_ALGO_MAGIC;
    /* The nvjet kernels cuBLASLt picks for ordinary shapes need no workspace,
     * which is also within any preference's limit. */
    r->workspaceSize = 0;
    r->state = CUBLAS_STATUS_SUCCESS;
    r->wavesCount = waves(m, n, (uint64_t)(dl->batch_count > 0 ? dl->batch_count : 1));
    *returnAlgoCount = 1;
    return CUBLAS_STATUS_SUCCESS;
}

MAYA_EXPORT cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t computeDesc,
                                          const void *alpha, const void *A,
                                          cublasLtMatrixLayout_t Adesc, const void *B,
                                          cublasLtMatrixLayout_t Bdesc, const void *beta,
                                          const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                                          cublasLtMatrixLayout_t Ddesc,
                                          const cublasLtMatmulAlgo_t *algo, void *workspace,
                                          size_t workspaceSizeInBytes, cudaStream_t stream) {
    maya_call c = maya_enter();
    struct cublasContext *h = maya_blas_handle(handle);
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    lt_desc *d = as_desc(computeDesc);
    lt_layout *al = as_layout(Adesc), *bl = as_layout(Bdesc), *cl = as_layout(Cdesc);
    lt_layout *dl = Ddesc ? as_layout(Ddesc) : cl;
    if (!d || !al || !bl || !cl || !dl)
        return CUBLAS_STATUS_INVALID_VALUE;

    maya_blas_op op;
    maya_blas_op_init(&op, "cublasLtMatmul");
    op.stream = stream;
    op.workspace = workspaceSizeInBytes;
    matmul_dims(d, al, dl, &op.m, &op.n, &op.k);
    op.batch = (uint64_t)(dl->batch_count > 0 ? dl->batch_count : 1);
    op.transa = (uint32_t)d->transa;
    op.transb = (uint32_t)d->transb;
    op.epilogue = d->epilogue == CUBLASLT_EPILOGUE_DEFAULT ? 0 : d->epilogue;
    op.atype = (uint8_t)al->type;
    op.btype = (uint8_t)bl->type;
    op.ctype = (uint8_t)cl->type;
    op.dtype = (uint8_t)dl->type;
    op.compute = (uint8_t)d->compute;
    op.scale = (uint8_t)d->scale;

    uint64_t *x = op.ext;
    x[BX_LDA] = (uint64_t)al->ld;
    x[BX_LDB] = (uint64_t)bl->ld;
    x[BX_LDC] = (uint64_t)cl->ld;
    x[BX_LDD] = (uint64_t)dl->ld;
    x[BX_STRIDE_A] = (uint64_t)al->batch_stride;
    x[BX_STRIDE_B] = (uint64_t)bl->batch_stride;
    x[BX_STRIDE_C] = (uint64_t)cl->batch_stride;
    x[BX_STRIDE_D] = (uint64_t)dl->batch_stride;

    /* Scalars per the descriptor's pointer mode; vector modes give element 0. */
    int pm = d->pointer_mode;
    int alpha_dev = pm != CUBLASLT_POINTER_MODE_HOST;
    int beta_dev = pm == CUBLASLT_POINTER_MODE_DEVICE || pm == CUBLASLT_POINTER_MODE_DEVICE_VECTOR;
    x[BX_ALPHA] = maya_blas_scalar(alpha, d->scale, alpha_dev, &x[BX_ALPHA_IM]);
    if (pm == CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO)
        x[BX_BETA] = x[BX_BETA_IM] = 0;
    else
        x[BX_BETA] = maya_blas_scalar(beta, d->scale, beta_dev, &x[BX_BETA_IM]);

    x[BX_A] = (uint64_t)(uintptr_t)A;
    x[BX_B] = (uint64_t)(uintptr_t)B;
    x[BX_C] = (uint64_t)(uintptr_t)C;
    x[BX_D] = (uint64_t)(uintptr_t)D;
    x[BX_BIAS] = (uint64_t)(uintptr_t)d->bias;
    /* Bias type -1 means "same as D" (cuBLASLt's rule for non-fp8 outputs). */
    int32_t bias_type = d->bias ? (d->bias_type >= 0 ? d->bias_type : (int32_t)dl->type) : -1;
    x[BX_BIAS_TYPE] = (uint64_t)(uint32_t)bias_type | (uint64_t)(uint32_t)d->aux_type << 32;
    x[BX_AUX] = (uint64_t)(uintptr_t)d->aux;
    x[BX_MODES] = (uint64_t)(pm & 0xFF) | (uint64_t)(h->math_mode & 0xFF) << 8 |
                  (uint64_t)(uint8_t)d->fast_accum << 16 | (uint64_t)(d->a_scale_mode & 0xFF) << 24 |
                  (uint64_t)(d->b_scale_mode & 0xFF) << 32 | (uint64_t)(d->c_scale_mode & 0xFF) << 40 |
                  (uint64_t)(d->d_scale_mode & 0xFF) << 48 |
                  (uint64_t)(d->d_out_scale_mode & 0xFF) << 56;
    x[BX_A_SCALE] = (uint64_t)(uintptr_t)d->a_scale;
    x[BX_B_SCALE] = (uint64_t)(uintptr_t)d->b_scale;
    x[BX_C_SCALE] = (uint64_t)(uintptr_t)d->c_scale;
    x[BX_D_SCALE] = (uint64_t)(uintptr_t)d->d_scale;
    x[BX_AMAX_D] = (uint64_t)(uintptr_t)d->amax_d;
    x[BX_ALGO] = algo ? algo->data[0] : 0;
    x[BX_SM_TARGET] = (uint64_t)d->sm_count_target;
    x[BX_D_OUT_SCALE] = (uint64_t)(uintptr_t)d->d_out_scale;
    maya_blas_emit(c, &op);
    return CUBLAS_STATUS_SUCCESS;
}

/* ------------------------------------------------------- not emulated */

/* Same asm-label stubs as cublas.c: torch does not call these. */
#define UNSUPPORTED(name)                                                           \
    MAYA_EXPORT cublasStatus_t maya_stub_##name(void) __asm__(#name);               \
    cublasStatus_t maya_stub_##name(void) {                                         \
        maya_call c = maya_enter();                                                 \
        (void)c;                                                                    \
        maya_unsupported(#name);                                                    \
        return CUBLAS_STATUS_NOT_SUPPORTED;                                         \
    }

UNSUPPORTED(cublasLtMatrixTransform)
UNSUPPORTED(cublasLtMatrixTransformDescInit_internal)
UNSUPPORTED(cublasLtMatrixTransformDescCreate)
UNSUPPORTED(cublasLtMatrixTransformDescDestroy)
UNSUPPORTED(cublasLtMatrixTransformDescSetAttribute)
UNSUPPORTED(cublasLtMatrixTransformDescGetAttribute)
UNSUPPORTED(cublasLtEmulationDescInit_internal)
UNSUPPORTED(cublasLtEmulationDescCreate)
UNSUPPORTED(cublasLtEmulationDescDestroy)
UNSUPPORTED(cublasLtEmulationDescSetAttribute)
UNSUPPORTED(cublasLtEmulationDescGetAttribute)
UNSUPPORTED(cublasLtMatmulAlgoGetIds)
UNSUPPORTED(cublasLtMatmulAlgoInit)
UNSUPPORTED(cublasLtMatmulAlgoCheck)
UNSUPPORTED(cublasLtMatmulAlgoCapGetAttribute)
UNSUPPORTED(cublasLtMatmulAlgoConfigSetAttribute)
UNSUPPORTED(cublasLtMatmulAlgoConfigGetAttribute)

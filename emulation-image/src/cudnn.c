/* cuDNN emulation: handles, versions, errors, the MK_DNN record, and the
 * legacy (descriptor + call) API (its RNN part is cudnn_rnn.c).
 *
 * The version reported is the one of the installed headers (9.19 with
 * torch 2.11.0+cu130), so torch and the cudnn-frontend compiled into it pick
 * the same paths as on a real H100.  Legacy descriptors are plain structs;
 * queries answer plausible values; every compute call records one MK_DNN
 * record and touches no data.  The backend (graph) API is in cudnn_backend.c.
 */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "dnn.h"

/* ----------------------------------------------------------- records */

int dnn_dtype_size(int dtype)
{
    switch (dtype) {
    case CUDNN_DATA_DOUBLE:
    case CUDNN_DATA_INT64: return 8;
    case CUDNN_DATA_FLOAT:
    case CUDNN_DATA_INT32:
    case CUDNN_DATA_INT8x4:
    case CUDNN_DATA_UINT8x4: return 4;
    case CUDNN_DATA_HALF:
    case CUDNN_DATA_BFLOAT16: return 2;
    default: return 1;
    }
}

static uint64_t dbits(double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

void dnn_sdpa_params(dnn_record *d, const dnn_sdpa *s)
{
    uint64_t p[] = {(uint64_t)s->b, (uint64_t)s->h, (uint64_t)s->hk, (uint64_t)s->sq, (uint64_t)s->skv,
                    (uint64_t)s->d, (uint64_t)s->dv, dbits(s->scale), dbits(s->dropout)};
    d->np = (int)(sizeof p / sizeof *p);
    memcpy(d->params, p, sizeof p);
}

void dnn_conv_params(dnn_record *d, const dnn_conv *cv)
{
    int n = 0;
    d->params[n++] = (uint64_t)cv->n;
    d->params[n++] = (uint64_t)cv->c;
    d->params[n++] = (uint64_t)cv->k;
    d->params[n++] = (uint64_t)cv->groups;
    d->params[n++] = (uint64_t)cv->nsp;
    for (int i = 0; i < 3; i++) {
        d->params[n++] = (uint64_t)cv->in[i];
        d->params[n++] = (uint64_t)cv->filt[i];
        d->params[n++] = (uint64_t)cv->out[i];
        d->params[n++] = (uint64_t)cv->pad[i];
        d->params[n++] = (uint64_t)cv->stride[i];
        d->params[n++] = (uint64_t)cv->dil[i];
    }
    d->np = n;
}

void dnn_emit(cudnnHandle_t h, maya_call c, const dnn_record *d)
{
    enum { MAXW = 1024 };
    uint64_t w[MAXW];
    int n = 0;
    for (int i = 0; i < d->np && n < MAXW; i++)
        w[n++] = d->params[i];
    for (int i = 0; i < d->nk && n < MAXW; i++)
        w[n++] = d->kernels[i];
    int ng = 0;
    for (int i = 0; i < d->ng && n < MAXW; i++, ng++)
        w[n++] = d->graph[i];
    maya_rec r;
    maya_rec_init(&r, MK_DNN, c);
    r.flags |= MF_ASYNC;
    r.device = (uint8_t)h->device;
    r.stream = maya_stream_id(h->stream);
    r.a32 = (uint32_t)maya_str(d->op);
    r.a[0] = d->workspace;
    r.a[1] = (uint64_t)d->engine | ((uint64_t)d->knob << 32);
    r.a[2] = (uint64_t)(d->io_dtype & 0xff) | (uint64_t)(d->compute_dtype & 0xff) << 8 |
             (uint64_t)(d->layout & 0xff) << 16 | d->flags;
    r.a[3] = (uint64_t)d->np | (uint64_t)d->nk << 16 | (uint64_t)ng << 32;
    r.a[4] = d->graph_hash;
    maya_emit_ext(&r, w, n);
}

/* ----------------------------------------------------------- handles */

int dnn_handle_ok(cudnnHandle_t h)
{
    return h && h->magic == DNN_HANDLE_MAGIC;
}

MAYA_EXPORT cudnnStatus_t cudnnCreate(cudnnHandle_t *handle)
{
    if (!handle)
        return CUDNN_STATUS_BAD_PARAM;
    struct cudnnContext *h = calloc(1, sizeof *h);
    if (!h)
        return CUDNN_STATUS_ALLOC_FAILED;
    h->magic = DNN_HANDLE_MAGIC;
    h->device = maya_current_device();
    h->stream = NULL;
    *handle = h;
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnDestroy(cudnnHandle_t handle)
{
    if (!dnn_handle_ok(handle))
        return CUDNN_STATUS_BAD_PARAM;
    handle->magic = 0;
    free(handle);
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId)
{
    if (!dnn_handle_ok(handle))
        return CUDNN_STATUS_BAD_PARAM;
    handle->stream = streamId;
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t *streamId)
{
    if (!dnn_handle_ok(handle) || !streamId)
        return CUDNN_STATUS_BAD_PARAM;
    *streamId = handle->stream;
    return CUDNN_STATUS_SUCCESS;
}

/* ----------------------------------------------------------- versions */

MAYA_EXPORT size_t cudnnGetVersion(void)
{
    return CUDNN_VERSION;
}

MAYA_EXPORT size_t cudnnGetCudartVersion(void)
{
    return CUDART_VERSION;
}

MAYA_EXPORT cudnnStatus_t cudnnGetProperty(libraryPropertyType type, int *value)
{
    if (!value)
        return CUDNN_STATUS_BAD_PARAM;
    switch (type) {
    case MAJOR_VERSION: *value = CUDNN_MAJOR; break;
    case MINOR_VERSION: *value = CUDNN_MINOR; break;
    case PATCH_LEVEL: *value = CUDNN_PATCHLEVEL; break;
    default: return CUDNN_STATUS_BAD_PARAM;
    }
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT const char *cudnnGetErrorString(cudnnStatus_t status)
{
    switch (status) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_BAD_PARAM_NULL_POINTER: return "CUDNN_STATUS_BAD_PARAM_NULL_POINTER";
    case CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED: return "CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED";
    case CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND: return "CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND";
    case CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE: return "CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE";
    case CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE: return "CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN: return "CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN";
    case CUDNN_STATUS_INTERNAL_ERROR: return "CUDNN_STATUS_INTERNAL_ERROR";
    case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
    default: return "CUDNN_STATUS_UNKNOWN";
    }
}

MAYA_EXPORT void cudnnGetLastErrorString(char *message, size_t max_size)
{
    if (message && max_size)
        message[0] = 0;
}

/* ----------------------------------------------------------- descriptors */

struct cudnnFilterStruct {
    cudnnDataType_t dtype;
    cudnnTensorFormat_t format;
    int nd;
    int dims[DNN_MAXD];
};

struct cudnnConvolutionStruct {
    int nsp;
    int pad[DNN_MAXD], stride[DNN_MAXD], dil[DNN_MAXD];
    cudnnConvolutionMode_t mode;
    cudnnDataType_t compute;
    cudnnMathType_t math;
    int groups;
};

struct cudnnActivationStruct {
    cudnnActivationMode_t mode;
    cudnnNanPropagation_t nan;
    double coef;
};

struct cudnnPoolingStruct {
    cudnnPoolingMode_t mode;
    int win[2], pad[2], stride[2];
};

struct cudnnDropoutStruct {
    float p;
    void *states;
    size_t state_size;
    unsigned long long seed;
};

struct cudnnSpatialTransformerStruct { int nd; int dims[DNN_MAXD]; cudnnDataType_t dtype; };
struct cudnnCTCLossStruct { cudnnDataType_t compute; int max_label; };

DESC_API(Tensor, cudnnTensorDescriptor_t)
DESC_API(Filter, cudnnFilterDescriptor_t)
DESC_API(Convolution, cudnnConvolutionDescriptor_t)
DESC_API(Activation, cudnnActivationDescriptor_t)
DESC_API(Pooling, cudnnPoolingDescriptor_t)
DESC_API(Dropout, cudnnDropoutDescriptor_t)
DESC_API(SpatialTransformer, cudnnSpatialTransformerDescriptor_t)
DESC_API(CTCLoss, cudnnCTCLossDescriptor_t)

MAYA_EXPORT cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t t, cudnnDataType_t dataType, int nbDims,
                                                     const int dimA[], const int strideA[])
{
    if (!t || nbDims < 1 || nbDims > DNN_MAXD || !dimA || !strideA)
        return CUDNN_STATUS_BAD_PARAM;
    t->dtype = dataType;
    t->nd = nbDims;
    for (int i = 0; i < nbDims; i++) {
        t->dims[i] = dimA[i];
        t->strides[i] = strideA[i];
    }
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnSetTensor4dDescriptorEx(cudnnTensorDescriptor_t t, cudnnDataType_t dataType, int n,
                                                       int c, int h, int w, int nStride, int cStride, int hStride,
                                                       int wStride)
{
    int d[4] = {n, c, h, w}, s[4] = {nStride, cStride, hStride, wStride};
    return cudnnSetTensorNdDescriptor(t, dataType, 4, d, s);
}

MAYA_EXPORT cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t t, cudnnTensorFormat_t format,
                                                     cudnnDataType_t dataType, int n, int c, int h, int w)
{
    if (format == CUDNN_TENSOR_NHWC)
        return cudnnSetTensor4dDescriptorEx(t, dataType, n, c, h, w, h * w * c, 1, w * c, c);
    return cudnnSetTensor4dDescriptorEx(t, dataType, n, c, h, w, c * h * w, h * w, w, 1);
}

MAYA_EXPORT cudnnStatus_t cudnnGetTensorNdDescriptor(const cudnnTensorDescriptor_t t, int nbDimsRequested,
                                                     cudnnDataType_t *dataType, int *nbDims, int dimA[], int strideA[])
{
    if (!t)
        return CUDNN_STATUS_BAD_PARAM;
    if (dataType)
        *dataType = t->dtype;
    if (nbDims)
        *nbDims = t->nd;
    for (int i = 0; i < t->nd && i < nbDimsRequested; i++) {
        if (dimA)
            dimA[i] = t->dims[i];
        if (strideA)
            strideA[i] = t->strides[i];
    }
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnSetFilterNdDescriptor(cudnnFilterDescriptor_t f, cudnnDataType_t dataType,
                                                     cudnnTensorFormat_t format, int nbDims, const int filterDimA[])
{
    if (!f || nbDims < 1 || nbDims > DNN_MAXD || !filterDimA)
        return CUDNN_STATUS_BAD_PARAM;
    f->dtype = dataType;
    f->format = format;
    f->nd = nbDims;
    memcpy(f->dims, filterDimA, sizeof(int) * (size_t)nbDims);
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t f, cudnnDataType_t dataType,
                                                     cudnnTensorFormat_t format, int k, int c, int h, int w)
{
    int d[4] = {k, c, h, w};
    return cudnnSetFilterNdDescriptor(f, dataType, format, 4, d);
}

MAYA_EXPORT cudnnStatus_t cudnnGetFilterNdDescriptor(const cudnnFilterDescriptor_t f, int nbDimsRequested,
                                                     cudnnDataType_t *dataType, cudnnTensorFormat_t *format,
                                                     int *nbDims, int filterDimA[])
{
    if (!f)
        return CUDNN_STATUS_BAD_PARAM;
    if (dataType)
        *dataType = f->dtype;
    if (format)
        *format = f->format;
    if (nbDims)
        *nbDims = f->nd;
    for (int i = 0; i < f->nd && i < nbDimsRequested && filterDimA; i++)
        filterDimA[i] = f->dims[i];
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnSetConvolutionNdDescriptor(cudnnConvolutionDescriptor_t cd, int arrayLength,
                                                          const int padA[], const int filterStrideA[],
                                                          const int dilationA[], cudnnConvolutionMode_t mode,
                                                          cudnnDataType_t computeType)
{
    if (!cd || arrayLength < 1 || arrayLength > DNN_MAXD || !padA || !filterStrideA || !dilationA)
        return CUDNN_STATUS_BAD_PARAM;
    cd->nsp = arrayLength;
    for (int i = 0; i < arrayLength; i++) {
        cd->pad[i] = padA[i];
        cd->stride[i] = filterStrideA[i];
        cd->dil[i] = dilationA[i];
    }
    cd->mode = mode;
    cd->compute = computeType;
    if (!cd->groups)
        cd->groups = 1;
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t cd, int pad_h, int pad_w,
                                                          int u, int v, int dilation_h, int dilation_w,
                                                          cudnnConvolutionMode_t mode, cudnnDataType_t computeType)
{
    int p[2] = {pad_h, pad_w}, s[2] = {u, v}, d[2] = {dilation_h, dilation_w};
    return cudnnSetConvolutionNdDescriptor(cd, 2, p, s, d, mode, computeType);
}

MAYA_EXPORT cudnnStatus_t cudnnGetConvolutionNdDescriptor(const cudnnConvolutionDescriptor_t cd,
                                                          int arrayLengthRequested, int *arrayLength, int padA[],
                                                          int strideA[], int dilationA[], cudnnConvolutionMode_t *mode,
                                                          cudnnDataType_t *computeType)
{
    if (!cd)
        return CUDNN_STATUS_BAD_PARAM;
    if (arrayLength)
        *arrayLength = cd->nsp;
    for (int i = 0; i < cd->nsp && i < arrayLengthRequested; i++) {
        if (padA)
            padA[i] = cd->pad[i];
        if (strideA)
            strideA[i] = cd->stride[i];
        if (dilationA)
            dilationA[i] = cd->dil[i];
    }
    if (mode)
        *mode = cd->mode;
    if (computeType)
        *computeType = cd->compute;
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t cd, int groupCount)
{
    if (!cd || groupCount < 1)
        return CUDNN_STATUS_BAD_PARAM;
    cd->groups = groupCount;
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnGetConvolutionGroupCount(cudnnConvolutionDescriptor_t cd, int *groupCount)
{
    if (!cd || !groupCount)
        return CUDNN_STATUS_BAD_PARAM;
    *groupCount = cd->groups ? cd->groups : 1;
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t cd, cudnnMathType_t mathType)
{
    if (!cd)
        return CUDNN_STATUS_BAD_PARAM;
    cd->math = mathType;
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnGetConvolutionMathType(cudnnConvolutionDescriptor_t cd, cudnnMathType_t *mathType)
{
    if (!cd || !mathType)
        return CUDNN_STATUS_BAD_PARAM;
    *mathType = cd->math;
    return CUDNN_STATUS_SUCCESS;
}

/* Output spatial size of a convolution (cuDNN's formula). */
static int conv_out(int in, int filt, int pad, int stride, int dil)
{
    if (stride < 1)
        stride = 1;
    if (dil < 1)
        dil = 1;
    return (in + 2 * pad - ((filt - 1) * dil + 1)) / stride + 1;
}

MAYA_EXPORT cudnnStatus_t cudnnGetConvolutionNdForwardOutputDim(const cudnnConvolutionDescriptor_t cd,
                                                                const cudnnTensorDescriptor_t x,
                                                                const cudnnFilterDescriptor_t f, int nbDims,
                                                                int tensorOuputDimA[])
{
    if (!cd || !x || !f || !tensorOuputDimA || nbDims != x->nd || x->nd != cd->nsp + 2)
        return CUDNN_STATUS_BAD_PARAM;
    tensorOuputDimA[0] = x->dims[0];
    tensorOuputDimA[1] = f->dims[0];
    for (int i = 0; i < cd->nsp; i++)
        tensorOuputDimA[i + 2] = conv_out(x->dims[i + 2], f->dims[i + 2], cd->pad[i], cd->stride[i], cd->dil[i]);
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnSetActivationDescriptor(cudnnActivationDescriptor_t a, cudnnActivationMode_t mode,
                                                       cudnnNanPropagation_t reluNanOpt, double coef)
{
    if (!a)
        return CUDNN_STATUS_BAD_PARAM;
    a->mode = mode;
    a->nan = reluNanOpt;
    a->coef = coef;
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnSetPooling2dDescriptor(cudnnPoolingDescriptor_t p, cudnnPoolingMode_t mode,
                                                      cudnnNanPropagation_t maxpoolingNanOpt, int windowHeight,
                                                      int windowWidth, int verticalPadding, int horizontalPadding,
                                                      int verticalStride, int horizontalStride)
{
    if (!p)
        return CUDNN_STATUS_BAD_PARAM;
    p->mode = mode;
    p->win[0] = windowHeight;
    p->win[1] = windowWidth;
    p->pad[0] = verticalPadding;
    p->pad[1] = horizontalPadding;
    p->stride[0] = verticalStride;
    p->stride[1] = horizontalStride;
    return CUDNN_STATUS_SUCCESS;
}

/* ------------------------------------------------------------- dropout */

/* One curand Philox state (48 bytes) per resident thread, as real cuDNN sizes it. */
MAYA_EXPORT cudnnStatus_t cudnnDropoutGetStatesSize(cudnnHandle_t handle, size_t *sizeInBytes)
{
    if (!dnn_handle_ok(handle) || !sizeInBytes)
        return CUDNN_STATUS_BAD_PARAM;
    const maya_config *cfg = maya_cfg();
    size_t threads = (size_t)(cfg->gpu.sm_count > 0 ? cfg->gpu.sm_count : 132) *
                     (size_t)(cfg->gpu.max_threads_per_sm > 0 ? cfg->gpu.max_threads_per_sm : 2048);
    *sizeInBytes = threads * 48;
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnDropoutGetReserveSpaceSize(cudnnTensorDescriptor_t x, size_t *sizeInBytes)
{
    if (!x || !sizeInBytes)
        return CUDNN_STATUS_BAD_PARAM;
    size_t n = 1;
    for (int i = 0; i < x->nd; i++)
        n *= (size_t)x->dims[i];
    *sizeInBytes = n; /* one mask byte per element */
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t set_dropout(cudnnDropoutDescriptor_t d, cudnnHandle_t handle, float dropout, void *states,
                                 size_t size, unsigned long long seed, int init)
{
    maya_call c = maya_enter();
    if (!d || !dnn_handle_ok(handle))
        return CUDNN_STATUS_BAD_PARAM;
    d->p = dropout;
    d->states = states;
    d->state_size = size;
    d->seed = seed;
    if (init && states && size) {
        /* Real cuDNN launches a kernel that seeds the states. */
        dnn_record r = {.op = "dropout_init_states", .knob = DNN_NO_KNOB};
        r.params[0] = size;
        r.params[1] = seed;
        r.np = 2;
        dnn_add_kernel(&r, "void cudnn::cuda::initStatesKernel(curandStatePhilox4_32_10*, unsigned long long, unsigned long long)");
        dnn_emit(handle, c, &r);
    }
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnSetDropoutDescriptor(cudnnDropoutDescriptor_t d, cudnnHandle_t handle, float dropout,
                                                    void *states, size_t stateSizeInBytes, unsigned long long seed)
{
    return set_dropout(d, handle, dropout, states, stateSizeInBytes, seed, 1);
}

MAYA_EXPORT cudnnStatus_t cudnnRestoreDropoutDescriptor(cudnnDropoutDescriptor_t d, cudnnHandle_t handle,
                                                        float dropout, void *states, size_t stateSizeInBytes,
                                                        unsigned long long seed)
{
    return set_dropout(d, handle, dropout, states, stateSizeInBytes, seed, 0);
}

MAYA_EXPORT cudnnStatus_t cudnnGetDropoutDescriptor(cudnnDropoutDescriptor_t d, cudnnHandle_t handle, float *dropout,
                                                    void **states, unsigned long long *seed)
{
    if (!d)
        return CUDNN_STATUS_BAD_PARAM;
    if (dropout)
        *dropout = d->p;
    if (states)
        *states = d->states;
    if (seed)
        *seed = d->seed;
    return CUDNN_STATUS_SUCCESS;
}

static int64_t tensor_elems(const struct cudnnTensorStruct *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->nd; i++)
        n *= t->dims[i];
    return n;
}

static cudnnStatus_t dropout_call(const char *op, cudnnHandle_t handle, cudnnDropoutDescriptor_t dd,
                                  cudnnTensorDescriptor_t x)
{
    maya_call c = maya_enter();
    if (!dnn_handle_ok(handle) || !dd || !x)
        return CUDNN_STATUS_BAD_PARAM;
    dnn_record r = {.op = op, .knob = DNN_NO_KNOB, .io_dtype = (uint32_t)x->dtype};
    r.params[0] = (uint64_t)tensor_elems(x);
    memcpy(&r.params[1], &(double){dd->p}, sizeof(double));
    r.np = 2;
    dnn_add_kernel(&r, "void cudnn::ops::dropout_fp<float, float>(...)");
    dnn_emit(handle, c, &r);
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnDropoutForward(cudnnHandle_t handle, const cudnnDropoutDescriptor_t dropoutDesc,
                                              const cudnnTensorDescriptor_t xdesc, const void *x,
                                              const cudnnTensorDescriptor_t ydesc, void *y, void *reserveSpace,
                                              size_t reserveSpaceSizeInBytes)
{
    return dropout_call("dropout_fwd", handle, dropoutDesc, xdesc);
}

MAYA_EXPORT cudnnStatus_t cudnnDropoutBackward(cudnnHandle_t handle, const cudnnDropoutDescriptor_t dropoutDesc,
                                               const cudnnTensorDescriptor_t dydesc, const void *dy,
                                               const cudnnTensorDescriptor_t dxdesc, void *dx, void *reserveSpace,
                                               size_t reserveSpaceSizeInBytes)
{
    return dropout_call("dropout_bwd", handle, dropoutDesc, dydesc);
}

/* --------------------------------------------------------- convolution */

static int tensor_layout(const struct cudnnTensorStruct *t)
{
    /* Channels-last when C is the innermost dimension of a >1-channel tensor. */
    if (t->nd >= 4 && t->dims[1] > 1 && t->strides[1] == 1)
        return DNN_LAYOUT_NHWC;
    return DNN_LAYOUT_NCHW;
}

static int conv_shape(dnn_conv *cv, const struct cudnnTensorStruct *x, const struct cudnnFilterStruct *w,
                      const struct cudnnConvolutionStruct *cd)
{
    memset(cv, 0, sizeof *cv);
    if (!x || !w || !cd || x->nd < 3 || w->nd != x->nd || cd->nsp != x->nd - 2 || cd->nsp > 3)
        return -1;
    cv->n = x->dims[0];
    cv->c = x->dims[1];
    cv->k = w->dims[0];
    cv->groups = cd->groups > 0 ? cd->groups : 1;
    cv->nsp = cd->nsp;
    for (int i = 0; i < cd->nsp; i++) {
        cv->in[i] = x->dims[i + 2];
        cv->filt[i] = w->dims[i + 2];
        cv->pad[i] = cd->pad[i];
        cv->stride[i] = cd->stride[i];
        cv->dil[i] = cd->dil[i];
        cv->out[i] = conv_out(x->dims[i + 2], w->dims[i + 2], cd->pad[i], cd->stride[i], cd->dil[i]);
    }
    return 0;
}

/* Workspace a legacy algorithm asks for: none for the implicit GEMMs, an
 * im2col-sized buffer for explicit GEMM, the filter in fp32 for wgrad. */
static size_t conv_ws(const dnn_conv *cv, int dir, int algo, int dtype)
{
    size_t es = (size_t)dnn_dtype_size(dtype);
    size_t rs = 1, pq = 1;
    for (int i = 0; i < cv->nsp; i++) {
        rs *= (size_t)cv->filt[i];
        pq *= (size_t)cv->out[i];
    }
    if (dir == 0)
        return algo == CUDNN_CONVOLUTION_FWD_ALGO_GEMM ? (size_t)cv->c * rs * pq * es : 0;
    if (dir == 2)
        return (size_t)cv->k * (size_t)(cv->c / (cv->groups ? cv->groups : 1)) * rs * 4;
    return 0;
}

static cudnnStatus_t conv_call(const char *op, int dir, cudnnHandle_t handle, const struct cudnnTensorStruct *x,
                               const struct cudnnFilterStruct *w, const struct cudnnConvolutionStruct *cd, int algo,
                               size_t ws)
{
    maya_call c = maya_enter();
    if (!dnn_handle_ok(handle))
        return CUDNN_STATUS_BAD_PARAM;
    dnn_conv cv;
    if (conv_shape(&cv, x, w, cd) != 0)
        return CUDNN_STATUS_BAD_PARAM;
    dnn_record r = {.op = op, .workspace = ws, .engine = (uint32_t)algo, .knob = DNN_NO_KNOB,
                    .io_dtype = (uint32_t)x->dtype, .compute_dtype = (uint32_t)cd->compute,
                    .layout = (uint32_t)tensor_layout(x)};
    dnn_conv_params(&r, &cv);
    dnn_kernels_conv(&r, &cv, dir, x->dtype, tensor_layout(x));
    dnn_emit(handle, c, &r);
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void *alpha,
                                                  const cudnnTensorDescriptor_t xDesc, const void *x,
                                                  const cudnnFilterDescriptor_t wDesc, const void *w,
                                                  const cudnnConvolutionDescriptor_t convDesc,
                                                  cudnnConvolutionFwdAlgo_t algo, void *workSpace,
                                                  size_t workSpaceSizeInBytes, const void *beta,
                                                  const cudnnTensorDescriptor_t yDesc, void *y)
{
    return conv_call("conv_fprop", 0, handle, xDesc, wDesc, convDesc, algo, workSpaceSizeInBytes);
}

MAYA_EXPORT cudnnStatus_t cudnnConvolutionBiasActivationForward(
    cudnnHandle_t handle, const void *alpha1, const cudnnTensorDescriptor_t xDesc, const void *x,
    const cudnnFilterDescriptor_t wDesc, const void *w, const cudnnConvolutionDescriptor_t convDesc,
    cudnnConvolutionFwdAlgo_t algo, void *workSpace, size_t workSpaceSizeInBytes, const void *alpha2,
    const cudnnTensorDescriptor_t zDesc, const void *z, const cudnnTensorDescriptor_t biasDesc, const void *bias,
    const cudnnActivationDescriptor_t activationDesc, const cudnnTensorDescriptor_t yDesc, void *y)
{
    return conv_call("conv_fprop_bias_act", 0, handle, xDesc, wDesc, convDesc, algo, workSpaceSizeInBytes);
}

MAYA_EXPORT cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void *alpha,
                                                       const cudnnFilterDescriptor_t wDesc, const void *w,
                                                       const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                                       const cudnnConvolutionDescriptor_t convDesc,
                                                       cudnnConvolutionBwdDataAlgo_t algo, void *workSpace,
                                                       size_t workSpaceSizeInBytes, const void *beta,
                                                       const cudnnTensorDescriptor_t dxDesc, void *dx)
{
    return conv_call("conv_dgrad", 1, handle, dxDesc, wDesc, convDesc, algo, workSpaceSizeInBytes);
}

MAYA_EXPORT cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void *alpha,
                                                         const cudnnTensorDescriptor_t xDesc, const void *x,
                                                         const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                                         const cudnnConvolutionDescriptor_t convDesc,
                                                         cudnnConvolutionBwdFilterAlgo_t algo, void *workSpace,
                                                         size_t workSpaceSizeInBytes, const void *beta,
                                                         const cudnnFilterDescriptor_t dwDesc, void *dw)
{
    return conv_call("conv_wgrad", 2, handle, xDesc, dwDesc, convDesc, algo, workSpaceSizeInBytes);
}

/* Algorithm lists: the implicit-GEMM algorithms first (what cuDNN's
 * heuristics return on Hopper), all deterministic, tensor cores for
 * half-precision inputs. */
static const int fwd_algos[] = {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                                CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_GEMM};
static const int bwd_data_algos[] = {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0};
static const int bwd_filter_algos[] = {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0};

#define FILL_PERF(PerfT, list, dir)                                                                       \
    do {                                                                                                  \
        dnn_conv cv;                                                                                      \
        if (!dnn_handle_ok(handle) || !returnedAlgoCount || !perfResults || conv_shape(&cv, x, w, cd) != 0) \
            return CUDNN_STATUS_BAD_PARAM;                                                                \
        int n = 0;                                                                                        \
        for (size_t i = 0; i < sizeof list / sizeof *list && n < requestedAlgoCount; i++, n++) {          \
            PerfT *p = &perfResults[n];                                                                   \
            memset(p, 0, sizeof *p);                                                                      \
            p->algo = (__typeof__(p->algo))list[i];                                                       \
            p->status = CUDNN_STATUS_SUCCESS;                                                             \
            p->time = 0.01f * (float)(i + 1);                                                             \
            p->memory = conv_ws(&cv, dir, list[i], x->dtype);                                             \
            p->determinism = CUDNN_DETERMINISTIC;                                                         \
            p->mathType = x->dtype == CUDNN_DATA_FLOAT && cd->math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION \
                              ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;                                    \
        }                                                                                                 \
        *returnedAlgoCount = n;                                                                           \
        return CUDNN_STATUS_SUCCESS;                                                                      \
    } while (0)

MAYA_EXPORT cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t handle,
                                                                 const cudnnTensorDescriptor_t x,
                                                                 const cudnnFilterDescriptor_t w,
                                                                 const cudnnConvolutionDescriptor_t cd,
                                                                 const cudnnTensorDescriptor_t destDesc,
                                                                 const int requestedAlgoCount,
                                                                 int *returnedAlgoCount,
                                                                 cudnnConvolutionFwdAlgoPerf_t *perfResults)
{
    FILL_PERF(cudnnConvolutionFwdAlgoPerf_t, fwd_algos, 0);
}

MAYA_EXPORT cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t handle,
                                                                      const cudnnFilterDescriptor_t w,
                                                                      const cudnnTensorDescriptor_t diffDesc,
                                                                      const cudnnConvolutionDescriptor_t cd,
                                                                      const cudnnTensorDescriptor_t x,
                                                                      const int requestedAlgoCount,
                                                                      int *returnedAlgoCount,
                                                                      cudnnConvolutionBwdDataAlgoPerf_t *perfResults)
{
    FILL_PERF(cudnnConvolutionBwdDataAlgoPerf_t, bwd_data_algos, 1);
}

MAYA_EXPORT cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x, const cudnnTensorDescriptor_t diffDesc,
    const cudnnConvolutionDescriptor_t cd, const cudnnFilterDescriptor_t w, const int requestedAlgoCount,
    int *returnedAlgoCount, cudnnConvolutionBwdFilterAlgoPerf_t *perfResults)
{
    FILL_PERF(cudnnConvolutionBwdFilterAlgoPerf_t, bwd_filter_algos, 2);
}

MAYA_EXPORT cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x, const void *xp, const cudnnFilterDescriptor_t w,
    const void *wp, const cudnnConvolutionDescriptor_t cd, const cudnnTensorDescriptor_t yDesc, void *y,
    const int requestedAlgoCount, int *returnedAlgoCount, cudnnConvolutionFwdAlgoPerf_t *perfResults,
    void *workSpace, size_t workSpaceSizeInBytes)
{
    FILL_PERF(cudnnConvolutionFwdAlgoPerf_t, fwd_algos, 0);
}

MAYA_EXPORT cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithmEx(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t w, const void *wp, const cudnnTensorDescriptor_t dyDesc,
    const void *dy, const cudnnConvolutionDescriptor_t cd, const cudnnTensorDescriptor_t x, void *dx,
    const int requestedAlgoCount, int *returnedAlgoCount, cudnnConvolutionBwdDataAlgoPerf_t *perfResults,
    void *workSpace, size_t workSpaceSizeInBytes)
{
    FILL_PERF(cudnnConvolutionBwdDataAlgoPerf_t, bwd_data_algos, 1);
}

MAYA_EXPORT cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithmEx(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x, const void *xp, const cudnnTensorDescriptor_t dyDesc,
    const void *y, const cudnnConvolutionDescriptor_t cd, const cudnnFilterDescriptor_t w, void *dw,
    const int requestedAlgoCount, int *returnedAlgoCount, cudnnConvolutionBwdFilterAlgoPerf_t *perfResults,
    void *workSpace, size_t workSpaceSizeInBytes)
{
    FILL_PERF(cudnnConvolutionBwdFilterAlgoPerf_t, bwd_filter_algos, 2);
}

static cudnnStatus_t ws_query(cudnnHandle_t handle, const struct cudnnTensorStruct *x,
                              const struct cudnnFilterStruct *w, const struct cudnnConvolutionStruct *cd, int dir,
                              int algo, size_t *sizeInBytes)
{
    dnn_conv cv;
    if (!dnn_handle_ok(handle) || !sizeInBytes || conv_shape(&cv, x, w, cd) != 0)
        return CUDNN_STATUS_BAD_PARAM;
    *sizeInBytes = conv_ws(&cv, dir, algo, x->dtype);
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t handle,
                                                                  const cudnnTensorDescriptor_t xDesc,
                                                                  const cudnnFilterDescriptor_t wDesc,
                                                                  const cudnnConvolutionDescriptor_t convDesc,
                                                                  const cudnnTensorDescriptor_t yDesc,
                                                                  cudnnConvolutionFwdAlgo_t algo, size_t *sizeInBytes)
{
    return ws_query(handle, xDesc, wDesc, convDesc, 0, algo, sizeInBytes);
}

MAYA_EXPORT cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t handle,
                                                                       const cudnnFilterDescriptor_t wDesc,
                                                                       const cudnnTensorDescriptor_t dyDesc,
                                                                       const cudnnConvolutionDescriptor_t convDesc,
                                                                       const cudnnTensorDescriptor_t dxDesc,
                                                                       cudnnConvolutionBwdDataAlgo_t algo,
                                                                       size_t *sizeInBytes)
{
    return ws_query(handle, dxDesc, wDesc, convDesc, 1, algo, sizeInBytes);
}

MAYA_EXPORT cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t handle,
                                                                         const cudnnTensorDescriptor_t xDesc,
                                                                         const cudnnTensorDescriptor_t dyDesc,
                                                                         const cudnnConvolutionDescriptor_t convDesc,
                                                                         const cudnnFilterDescriptor_t gradDesc,
                                                                         cudnnConvolutionBwdFilterAlgo_t algo,
                                                                         size_t *sizeInBytes)
{
    return ws_query(handle, xDesc, gradDesc, convDesc, 2, algo, sizeInBytes);
}

MAYA_EXPORT cudnnStatus_t cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t handle, int *count)
{
    if (!count)
        return CUDNN_STATUS_BAD_PARAM;
    *count = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnnHandle_t handle, int *count)
{
    if (!count)
        return CUDNN_STATUS_BAD_PARAM;
    *count = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnnHandle_t handle, int *count)
{
    if (!count)
        return CUDNN_STATUS_BAD_PARAM;
    *count = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
    return CUDNN_STATUS_SUCCESS;
}

/* ---------------------------------------------------------- batch norm */

/* N, C, spatial product of a 4-d/5-d tensor. */
static void bn_shape(const struct cudnnTensorStruct *x, int64_t *n, int64_t *ch, int64_t *sp)
{
    *n = x->nd > 0 ? x->dims[0] : 1;
    *ch = x->nd > 1 ? x->dims[1] : 1;
    *sp = 1;
    for (int i = 2; i < x->nd; i++)
        *sp *= x->dims[i];
}

static cudnnStatus_t bn_call(const char *op, int phase, cudnnHandle_t handle, cudnnBatchNormMode_t mode, int ops,
                             const struct cudnnTensorStruct *x, const struct cudnnTensorStruct *param, double eps,
                             double factor, size_t ws, size_t reserve)
{
    maya_call c = maya_enter();
    if (!dnn_handle_ok(handle) || !x)
        return CUDNN_STATUS_BAD_PARAM;
    int64_t n, ch, sp;
    bn_shape(x, &n, &ch, &sp);
    int layout = tensor_layout(x);
    dnn_record r = {.op = op, .workspace = ws, .engine = (uint32_t)mode, .knob = DNN_NO_KNOB,
                    .io_dtype = (uint32_t)x->dtype,
                    .compute_dtype = param ? (uint32_t)param->dtype : CUDNN_DATA_FLOAT,
                    .layout = (uint32_t)layout, .flags = phase == 2 ? 0 : DNN_F_TRAINING};
    uint64_t p[] = {(uint64_t)n, (uint64_t)ch, (uint64_t)sp, (uint64_t)mode, (uint64_t)ops, 0, 0, reserve};
    memcpy(&p[5], &eps, sizeof eps);
    memcpy(&p[6], &factor, sizeof factor);
    memcpy(r.params, p, sizeof p);
    r.np = (int)(sizeof p / sizeof *p);
    dnn_kernels_bn(&r, phase, x->dtype, layout);
    dnn_emit(handle, c, &r);
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnBatchNormalizationForwardTrainingEx(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t bnOps, const void *alpha, const void *beta,
    const cudnnTensorDescriptor_t xDesc, const void *xData, const cudnnTensorDescriptor_t zDesc, const void *zData,
    const cudnnTensorDescriptor_t yDesc, void *yData, const cudnnTensorDescriptor_t bnScaleBiasMeanVarDesc,
    const void *bnScale, const void *bnBias, double exponentialAverageFactor, void *resultRunningMean,
    void *resultRunningVariance, double epsilon, void *resultSaveMean, void *resultSaveInvVariance,
    cudnnActivationDescriptor_t activationDesc, void *workspace, size_t workSpaceSizeInBytes, void *reserveSpace,
    size_t reserveSpaceSizeInBytes)
{
    return bn_call("batchnorm_fwd_training", 0, handle, mode, bnOps, xDesc, bnScaleBiasMeanVarDesc, epsilon,
                   exponentialAverageFactor, workSpaceSizeInBytes, reserveSpaceSizeInBytes);
}

MAYA_EXPORT cudnnStatus_t cudnnBatchNormalizationForwardInference(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, const void *alpha, const void *beta,
    const cudnnTensorDescriptor_t xDesc, const void *x, const cudnnTensorDescriptor_t yDesc, void *y,
    const cudnnTensorDescriptor_t bnScaleBiasMeanVarDesc, const void *bnScale, const void *bnBias,
    const void *estimatedMean, const void *estimatedVariance, double epsilon)
{
    return bn_call("batchnorm_fwd_inference", 2, handle, mode, CUDNN_BATCHNORM_OPS_BN, xDesc,
                   bnScaleBiasMeanVarDesc, epsilon, 0.0, 0, 0);
}

MAYA_EXPORT cudnnStatus_t cudnnBatchNormalizationBackwardEx(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t bnOps, const void *alphaDataDiff,
    const void *betaDataDiff, const void *alphaParamDiff, const void *betaParamDiff,
    const cudnnTensorDescriptor_t xDesc, const void *xData, const cudnnTensorDescriptor_t yDesc, const void *yData,
    const cudnnTensorDescriptor_t dyDesc, const void *dyData, const cudnnTensorDescriptor_t dzDesc, void *dzData,
    const cudnnTensorDescriptor_t dxDesc, void *dxData, const cudnnTensorDescriptor_t dBnScaleBiasDesc,
    const void *bnScaleData, const void *bnBiasData, void *dBnScaleData, void *dBnBiasData, double epsilon,
    const void *savedMean, const void *savedInvVariance, cudnnActivationDescriptor_t activationDesc,
    void *workSpace, size_t workSpaceSizeInBytes, void *reserveSpace, size_t reserveSpaceSizeInBytes)
{
    return bn_call("batchnorm_bwd", 1, handle, mode, bnOps, xDesc, dBnScaleBiasDesc, epsilon, 0.0,
                   workSpaceSizeInBytes, reserveSpaceSizeInBytes);
}

/* The NHWC persistent kernels keep per-CTA partial sums and a sync
 * counter in the workspace; the plain spatial kernels need none. */
static size_t bn_ws(cudnnBatchNormMode_t mode, const struct cudnnTensorStruct *x)
{
    if (!x || mode != CUDNN_BATCHNORM_SPATIAL_PERSISTENT)
        return 0;
    int64_t n, ch, sp;
    bn_shape(x, &n, &ch, &sp);
    const maya_config *cfg = maya_cfg();
    int sms = cfg->gpu.sm_count > 0 ? cfg->gpu.sm_count : 132;
    return (size_t)ch * 2 * sizeof(float) * (size_t)sms + 4096;
}

MAYA_EXPORT cudnnStatus_t cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t bnOps, const cudnnTensorDescriptor_t xDesc,
    const cudnnTensorDescriptor_t zDesc, const cudnnTensorDescriptor_t yDesc,
    const cudnnTensorDescriptor_t bnScaleBiasMeanVarDesc, const cudnnActivationDescriptor_t activationDesc,
    size_t *sizeInBytes)
{
    if (!dnn_handle_ok(handle) || !sizeInBytes || !xDesc)
        return CUDNN_STATUS_BAD_PARAM;
    *sizeInBytes = bn_ws(mode, xDesc);
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnGetBatchNormalizationBackwardExWorkspaceSize(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t bnOps, const cudnnTensorDescriptor_t xDesc,
    const cudnnTensorDescriptor_t yDesc, const cudnnTensorDescriptor_t dyDesc, const cudnnTensorDescriptor_t dzDesc,
    const cudnnTensorDescriptor_t dxDesc, const cudnnTensorDescriptor_t dBnScaleBiasDesc,
    const cudnnActivationDescriptor_t activationDesc, size_t *sizeInBytes)
{
    if (!dnn_handle_ok(handle) || !sizeInBytes || !xDesc)
        return CUDNN_STATUS_BAD_PARAM;
    *sizeInBytes = bn_ws(mode, xDesc);
    return CUDNN_STATUS_SUCCESS;
}

/* A bit mask of the activation's sign when an activation is fused. */
MAYA_EXPORT cudnnStatus_t cudnnGetBatchNormalizationTrainingExReserveSpaceSize(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t bnOps,
    const cudnnActivationDescriptor_t activationDesc, const cudnnTensorDescriptor_t xDesc, size_t *sizeInBytes)
{
    if (!dnn_handle_ok(handle) || !sizeInBytes || !xDesc)
        return CUDNN_STATUS_BAD_PARAM;
    *sizeInBytes = 0;
    if (bnOps != CUDNN_BATCHNORM_OPS_BN)
        *sizeInBytes = ((size_t)tensor_elems(xDesc) + 31) / 32 * 4;
    return CUDNN_STATUS_SUCCESS;
}

/* ------------------------------------------------------------- pooling */

MAYA_EXPORT cudnnStatus_t cudnnPoolingForward(cudnnHandle_t handle, const cudnnPoolingDescriptor_t poolingDesc,
                                              const void *alpha, const cudnnTensorDescriptor_t xDesc, const void *x,
                                              const void *beta, const cudnnTensorDescriptor_t yDesc, void *y)
{
    maya_call c = maya_enter();
    if (!dnn_handle_ok(handle) || !poolingDesc || !xDesc || !yDesc)
        return CUDNN_STATUS_BAD_PARAM;
    dnn_record r = {.op = "pooling_fwd", .engine = (uint32_t)poolingDesc->mode, .knob = DNN_NO_KNOB,
                    .io_dtype = (uint32_t)xDesc->dtype, .layout = (uint32_t)tensor_layout(xDesc)};
    uint64_t p[] = {(uint64_t)tensor_elems(xDesc), (uint64_t)tensor_elems(yDesc), (uint64_t)poolingDesc->win[0],
                    (uint64_t)poolingDesc->win[1], (uint64_t)poolingDesc->stride[0],
                    (uint64_t)poolingDesc->stride[1]};
    memcpy(r.params, p, sizeof p);
    r.np = (int)(sizeof p / sizeof *p);
    dnn_add_kernel(&r, "void cudnn::ops::pooling_fw_4d_kernel<float, float, cudnn::maxpooling_func<float>, 0, false>(...)");
    dnn_emit(handle, c, &r);
    return CUDNN_STATUS_SUCCESS;
}

/* ----------------------------------------- not emulated: CTC, spatial TF (RNN: cudnn_rnn.c) */

MAYA_EXPORT cudnnStatus_t cudnnSetSpatialTransformerNdDescriptor(cudnnSpatialTransformerDescriptor_t st,
                                                                 cudnnSamplerType_t samplerType,
                                                                 cudnnDataType_t dataType, const int nbDims,
                                                                 const int dimA[])
{
    if (!st || nbDims < 1 || nbDims > DNN_MAXD || !dimA)
        return CUDNN_STATUS_BAD_PARAM;
    st->nd = nbDims;
    st->dtype = dataType;
    memcpy(st->dims, dimA, sizeof(int) * (size_t)nbDims);
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnSetCTCLossDescriptorEx(cudnnCTCLossDescriptor_t d, cudnnDataType_t compType,
                                                      cudnnLossNormalizationMode_t normMode,
                                                      cudnnNanPropagation_t gradMode)
{
    if (!d)
        return CUDNN_STATUS_BAD_PARAM;
    d->compute = compType;
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnSetCTCLossDescriptor_v9(cudnnCTCLossDescriptor_t d, cudnnDataType_t compType,
                                                       cudnnLossNormalizationMode_t normMode,
                                                       cudnnCTCGradMode_t ctcGradMode, int maxLabelLength)
{
    if (!d)
        return CUDNN_STATUS_BAD_PARAM;
    d->compute = compType;
    d->max_label = maxLabelLength;
    return CUDNN_STATUS_SUCCESS;
}

#define UNSUPPORTED(name, proto)                 \
    MAYA_EXPORT cudnnStatus_t name proto          \
    {                                            \
        maya_unsupported(#name);                 \
        return CUDNN_STATUS_NOT_SUPPORTED;       \
    }

UNSUPPORTED(cudnnCTCLoss, (cudnnHandle_t handle, const cudnnTensorDescriptor_t probsDesc, const void *probs,
                           const int hostLabels[], const int hostLabelLengths[], const int hostInputLengths[],
                           void *costs, const cudnnTensorDescriptor_t gradientsDesc, void *gradients,
                           cudnnCTCLossAlgo_t algo, cudnnCTCLossDescriptor_t ctcLossDesc, void *workspace,
                           size_t workSpaceSizeInBytes))
UNSUPPORTED(cudnnCTCLoss_v8, (cudnnHandle_t handle, cudnnCTCLossAlgo_t algo, cudnnCTCLossDescriptor_t ctcLossDesc,
                              const cudnnTensorDescriptor_t probsDesc, const void *probs, const int labels[],
                              const int labelLengths[], const int inputLengths[], void *costs,
                              const cudnnTensorDescriptor_t gradientsDesc, void *gradients,
                              size_t workSpaceSizeInBytes, void *workspace))
UNSUPPORTED(cudnnGetCTCLossWorkspaceSize, (cudnnHandle_t handle, const cudnnTensorDescriptor_t probsDesc,
                                           const cudnnTensorDescriptor_t gradientsDesc, const int *labels,
                                           const int *labelLengths, const int *inputLengths, cudnnCTCLossAlgo_t algo,
                                           cudnnCTCLossDescriptor_t ctcLossDesc, size_t *sizeInBytes))
UNSUPPORTED(cudnnGetCTCLossWorkspaceSize_v8, (cudnnHandle_t handle, cudnnCTCLossAlgo_t algo,
                                              cudnnCTCLossDescriptor_t ctcLossDesc,
                                              const cudnnTensorDescriptor_t probsDesc,
                                              const cudnnTensorDescriptor_t gradientsDesc, size_t *sizeInBytes))
UNSUPPORTED(cudnnSpatialTfGridGeneratorForward, (cudnnHandle_t handle, const cudnnSpatialTransformerDescriptor_t stDesc,
                                                 const void *theta, void *grid))
UNSUPPORTED(cudnnSpatialTfGridGeneratorBackward, (cudnnHandle_t handle,
                                                  const cudnnSpatialTransformerDescriptor_t stDesc, const void *dgrid,
                                                  void *dtheta))
UNSUPPORTED(cudnnSpatialTfSamplerForward, (cudnnHandle_t handle, cudnnSpatialTransformerDescriptor_t stDesc,
                                           const void *alpha, const cudnnTensorDescriptor_t xDesc, const void *x,
                                           const void *grid, const void *beta, cudnnTensorDescriptor_t yDesc,
                                           void *y))
UNSUPPORTED(cudnnSpatialTfSamplerBackward, (cudnnHandle_t handle, cudnnSpatialTransformerDescriptor_t stDesc,
                                            const void *alpha, const cudnnTensorDescriptor_t xDesc, const void *x,
                                            const void *beta, const cudnnTensorDescriptor_t dxDesc, void *dx,
                                            const void *alphaDgrid, const cudnnTensorDescriptor_t dyDesc,
                                            const void *dy, const void *grid, const void *betaDgrid, void *dgrid))

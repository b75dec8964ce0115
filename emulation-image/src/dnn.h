/* Private to the cuDNN emulation (cudnn.c, cudnn_rnn.c, cudnn_backend.c, cudnn_kernels.c).
 *
 * cudnn.c owns handles, versions and the legacy API; cudnn_rnn.c its RNN part;
 * cudnn_backend.c owns the backend (graph) descriptors; cudnn_kernels.c names
 * the kernels a real H100 would launch.  All compute calls end in dnn_emit(), which writes one MK_DNN
 * record (layout in docs/dnn.md).
 */
#ifndef MAYA_DNN_H
#define MAYA_DNN_H

#include <cudnn.h>
#include <stdint.h>

#include "maya.h"

#define DNN_HANDLE_MAGIC 0x4d444e48u /* "MDNH" */

struct cudnnContext {
    uint32_t magic;
    int device;
    cudaStream_t stream;
};

int dnn_handle_ok(cudnnHandle_t h);

/* Legacy tensor descriptor (shared with cudnn_rnn.c, which fills and clears them). */
#define DNN_MAXD 8

struct cudnnTensorStruct {
    cudnnDataType_t dtype;
    int nd;
    int dims[DNN_MAXD], strides[DNN_MAXD];
};

/* Head word a[2] of a DNN record. */
enum {
    DNN_F_CAUSAL = 1u << 24,
    DNN_F_DROPOUT = 1u << 25,
    DNN_F_BACKEND = 1u << 26,   /* came through the backend (graph) API */
    DNN_F_TRAINING = 1u << 27,  /* batch norm in training mode */
    DNN_F_GQA = 1u << 28,       /* fewer K/V heads than Q heads */
    DNN_F_UNIFIED = 1u << 29,   /* native SDPA operation (not the composite graph) */
    DNN_F_BIAS = 1u << 30,      /* SDPA: an additive mask (attn_mask) added to the scores */
};

enum { DNN_LAYOUT_NCHW = 0, DNN_LAYOUT_NHWC = 1, DNN_LAYOUT_ROWMAJOR = 2 };

#define DNN_MAX_PARAMS 32
#define DNN_MAX_KERNELS 10
#define DNN_NO_KNOB 0xffffffffu

/* One compute call as recorded. */
typedef struct {
    const char *op;              /* "sdpa_fprop", "conv_dgrad", ... */
    uint64_t workspace;
    uint32_t engine;             /* backend engine global index or legacy algo */
    uint32_t knob;               /* CUDNN_KNOB_TYPE_KERNEL_CFG choice, DNN_NO_KNOB if none */
    uint32_t io_dtype, compute_dtype, layout, flags;
    uint64_t graph_hash;         /* backend: hash of the operation graph; legacy: 0 */
    uint64_t params[DNN_MAX_PARAMS];
    int np;
    uint64_t kernels[DNN_MAX_KERNELS]; /* string ids (maya_str) of the full names */
    int nk;
    const uint64_t *graph;       /* backend: op and tensor words (docs/dnn.md) */
    int ng;
} dnn_record;

void dnn_emit(cudnnHandle_t h, maya_call c, const dnn_record *d);
void dnn_add_kernel(dnn_record *d, const char *name);

/* Parameter blocks (the order is the documented one). */
typedef struct {
    int64_t b, h, hk, sq, skv, d, dv;
    double scale, dropout;
    int causal, gqa;
} dnn_sdpa;

typedef struct {
    int64_t n, c, k, groups;
    int nsp;                       /* spatial dims (2 for conv2d) */
    int64_t in[3], filt[3], out[3], pad[3], stride[3], dil[3];
} dnn_conv;

/* An RNN call (cudnn_rnn.c): cell mode (cudnnRNNMode_t), algorithm, physical layers, directions,
 * input, hidden and projection sizes, longest sequence, batch, tokens (sum of the sequence lengths),
 * bias mode, math type (cudnnMathType_t), reserve-space bytes, dropout between layers. */
typedef struct {
    int64_t mode, algo, layers, dirs, input, hidden, proj, seq, batch, tokens, bias, math, reserve;
    double dropout;
} dnn_rnn;

void dnn_sdpa_params(dnn_record *d, const dnn_sdpa *s);
void dnn_conv_params(dnn_record *d, const dnn_conv *cv);
void dnn_rnn_params(dnn_record *d, const dnn_rnn *r); /* cudnn_rnn.c */

/* Kernel names (cudnn_kernels.c). dir: 0 fprop, 1 dgrad, 2 wgrad. */
void dnn_kernels_sdpa(dnn_record *d, const dnn_sdpa *s, int backward, int dtype);
void dnn_kernels_conv(dnn_record *d, const dnn_conv *cv, int dir, int dtype, int layout);
/* Workspace (bytes) of the engine a real GPU's autotuning picks for the
 * convolution, from the measured table in cudnn_kernels.c; -1 when no
 * measurement covers the shape (the caller keeps its own estimate). */
int64_t dnn_conv_workspace(const dnn_conv *cv, int dir, int dtype, int layout);
void dnn_kernels_bn(dnn_record *d, int phase, int dtype, int layout); /* 0 train fwd, 1 bwd, 2 inference */

/* Size in bytes of one element of a cuDNN data type (0 if unknown). */
int dnn_dtype_size(int dtype);

/* cudnnCreate<Name>Descriptor and cudnnDestroy<Name>Descriptor of a descriptor that is a plain
 * struct (cudnn.c, cudnn_rnn.c). */
#define DESC_API(Name, Type)                                                     \
    MAYA_EXPORT cudnnStatus_t cudnnCreate##Name##Descriptor(Type *d)              \
    {                                                                            \
        if (!d)                                                                  \
            return CUDNN_STATUS_BAD_PARAM;                                       \
        *d = calloc(1, sizeof **d);                                              \
        return *d ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED;            \
    }                                                                            \
    MAYA_EXPORT cudnnStatus_t cudnnDestroy##Name##Descriptor(Type d)              \
    {                                                                            \
        free(d);                                                                 \
        return CUDNN_STATUS_SUCCESS;                                             \
    }

#endif

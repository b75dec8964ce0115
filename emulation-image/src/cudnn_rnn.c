/* cuDNN emulation: the RNN API (cudnn_adv.h, v8 descriptors), as torch's
 * aten/src/ATen/native/cudnn/RNN.cpp calls it for nn.LSTM, nn.GRU and nn.RNN.
 *
 * torch builds its parameter tensors as views into the weight space, at the
 * addresses cudnnGetRNNWeightParams returns, and checks that the matrices of
 * one pseudo-layer (and its biases) follow each other without gaps.  The
 * weight space holds pseudo-layers in order (layer 0 forward, layer 0
 * backward, layer 1 forward, ...), in each the matrices by cuDNN's
 * linear-layer ids (input weights of every gate, recurrent weights of every
 * gate, then the LSTM projection), then the biases by linear-layer id.  The
 * ids and shapes are cuDNN's documented ones; that the biases follow each
 * pseudo-layer's matrices (rather than all matrices of all layers) and that
 * no padding separates pseudo-layers are assumptions torch accepts either way,
 * unverified against real cuDNN.  The size is the parameter count times the
 * element size.
 *
 * Workspace and reserve-space sizes (rnn_temp_sizes) are cuDNN 9's as measured
 * on an H200: the reserve exactly, the workspace's largest part exactly and the
 * rest fitted, so every answer is counted approximated.  Forward, backward-data and backward-weights
 * calls write one MK_DNN record each (rnn_fwd, rnn_bwd_data, rnn_bwd_weights)
 * with the shape the predictor times them by (predictor/estimate/rnn.py).
 */
#include <stdlib.h>
#include <string.h>

#include "dnn.h"

struct cudnnRNNStruct {
    int set;
    cudnnRNNAlgo_t algo;
    cudnnRNNMode_t mode;
    cudnnRNNBiasMode_t bias;
    cudnnDirectionMode_t dir;
    cudnnRNNInputMode_t input_mode;
    cudnnDataType_t dtype, math_prec;
    cudnnMathType_t math;
    int32_t input, hidden, proj, layers;
    cudnnDropoutDescriptor_t dropout;
};

struct cudnnRNNDataStruct {
    int set;
    cudnnDataType_t dtype;
    cudnnRNNDataLayout_t layout;
    int max_seq, batch, vec;
    int64_t tokens; /* sum of the sequence lengths */
};

/* ------------------------------------------------------------ shapes */

static int64_t rnn_gates(const struct cudnnRNNStruct *r)
{
    return r->mode == CUDNN_LSTM ? 4 : r->mode == CUDNN_GRU ? 3 : 1;
}

static int64_t rnn_dirs(const struct cudnnRNNStruct *r)
{
    return r->dir == CUDNN_BIDIRECTIONAL ? 2 : 1;
}

static int rnn_has_proj(const struct cudnnRNNStruct *r)
{
    return r->mode == CUDNN_LSTM && r->proj < r->hidden;
}

/* Width of a layer's output per direction (and of the recurrent input): the projection if any. */
static int64_t rnn_out(const struct cudnnRNNStruct *r)
{
    return rnn_has_proj(r) ? r->proj : r->hidden;
}

/* Input width of physical layer l (0 for layer 0 under CUDNN_SKIP_INPUT: no input matrices). */
static int64_t rnn_layer_in(const struct cudnnRNNStruct *r, int l)
{
    if (l == 0)
        return r->input_mode == CUDNN_SKIP_INPUT ? 0 : r->input;
    return rnn_out(r) * rnn_dirs(r);
}

static int64_t rnn_lin_ids(const struct cudnnRNNStruct *r)
{
    return 2 * rnn_gates(r) + rnn_has_proj(r);
}

/* Whether linear layer `lin` has a bias vector under the descriptor's bias mode. */
static int rnn_has_bias(const struct cudnnRNNStruct *r, int64_t lin)
{
    int64_t g = rnn_gates(r);
    switch (r->bias) {
    case CUDNN_RNN_DOUBLE_BIAS: return lin < 2 * g;
    case CUDNN_RNN_SINGLE_INP_BIAS: return lin < g;
    case CUDNN_RNN_SINGLE_REC_BIAS: return lin >= g && lin < 2 * g;
    default: return 0;
    }
}

/* Rows and columns of linear layer `lin`'s matrix in physical layer l. */
static void rnn_matrix(const struct cudnnRNNStruct *r, int l, int64_t lin, int64_t *rows, int64_t *cols)
{
    int64_t g = rnn_gates(r);
    if (lin < g) {
        *rows = r->hidden;
        *cols = rnn_layer_in(r, l);
    } else if (lin < 2 * g) {
        *rows = r->hidden;
        *cols = rnn_out(r);
    } else { /* LSTM projection */
        *rows = r->proj;
        *cols = r->hidden;
    }
}

/* Elements of pseudo-layer p's matrices (*mats) and of all its parameters (return). */
static int64_t rnn_pseudo_elems(const struct cudnnRNNStruct *r, int p, int64_t *mats)
{
    int l = (int)(p / rnn_dirs(r));
    int64_t m = 0, b = 0;
    for (int64_t lin = 0; lin < rnn_lin_ids(r); lin++) {
        int64_t rows, cols;
        rnn_matrix(r, l, lin, &rows, &cols);
        m += rows * cols;
        b += rnn_has_bias(r, lin) ? r->hidden : 0;
    }
    if (mats)
        *mats = m;
    return m + b;
}

static int64_t rnn_weight_elems(const struct cudnnRNNStruct *r)
{
    int64_t n = 0;
    for (int p = 0; p < r->layers * rnn_dirs(r); p++)
        n += rnn_pseudo_elems(r, p, NULL);
    return n;
}

/* ------------------------------------------------------------ descriptors */

DESC_API(RNN, cudnnRNNDescriptor_t)
DESC_API(RNNData, cudnnRNNDataDescriptor_t)

MAYA_EXPORT cudnnStatus_t cudnnSetRNNDescriptor_v8(cudnnRNNDescriptor_t d, cudnnRNNAlgo_t algo,
                                                   cudnnRNNMode_t cellMode, cudnnRNNBiasMode_t biasMode,
                                                   cudnnDirectionMode_t dirMode, cudnnRNNInputMode_t inputMode,
                                                   cudnnDataType_t dataType, cudnnDataType_t mathPrec,
                                                   cudnnMathType_t mathType, int32_t inputSize, int32_t hiddenSize,
                                                   int32_t projSize, int32_t numLayers,
                                                   cudnnDropoutDescriptor_t dropoutDesc, uint32_t auxFlags)
{
    if (!d || algo < 0 || algo >= CUDNN_RNN_ALGO_COUNT || cellMode < CUDNN_RNN_RELU || cellMode > CUDNN_GRU ||
        biasMode < CUDNN_RNN_NO_BIAS || biasMode > CUDNN_RNN_SINGLE_REC_BIAS ||
        (dirMode != CUDNN_UNIDIRECTIONAL && dirMode != CUDNN_BIDIRECTIONAL) ||
        (inputMode != CUDNN_LINEAR_INPUT && inputMode != CUDNN_SKIP_INPUT) || inputSize < 1 || hiddenSize < 1 ||
        numLayers < 1 || projSize < 1 || projSize > hiddenSize ||
        (projSize < hiddenSize && cellMode != CUDNN_LSTM) ||
        (inputMode == CUDNN_SKIP_INPUT && inputSize != hiddenSize))
        return CUDNN_STATUS_BAD_PARAM;
    *d = (struct cudnnRNNStruct){
        .set = 1, .algo = algo, .mode = cellMode, .bias = biasMode, .dir = dirMode, .input_mode = inputMode,
        .dtype = dataType, .math_prec = mathPrec, .math = mathType, .input = inputSize, .hidden = hiddenSize,
        .proj = projSize, .layers = numLayers, .dropout = dropoutDesc,
    };
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnSetRNNDataDescriptor(cudnnRNNDataDescriptor_t d, cudnnDataType_t dataType,
                                                    cudnnRNNDataLayout_t layout, int maxSeqLength, int batchSize,
                                                    int vectorSize, const int seqLengthArray[], void *paddingFill)
{
    if (!d || maxSeqLength < 1 || batchSize < 1 || vectorSize < 1 || !seqLengthArray ||
        layout < CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED || layout > CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED)
        return CUDNN_STATUS_BAD_PARAM;
    int64_t tokens = 0;
    for (int i = 0; i < batchSize; i++) {
        if (seqLengthArray[i] < 0 || seqLengthArray[i] > maxSeqLength)
            return CUDNN_STATUS_BAD_PARAM;
        tokens += seqLengthArray[i];
    }
    *d = (struct cudnnRNNDataStruct){.set = 1, .dtype = dataType, .layout = layout, .max_seq = maxSeqLength,
                                     .batch = batchSize, .vec = vectorSize, .tokens = tokens};
    return CUDNN_STATUS_SUCCESS;
}

/* ------------------------------------------------------------ weight space */

MAYA_EXPORT cudnnStatus_t cudnnGetRNNWeightSpaceSize(cudnnHandle_t handle, cudnnRNNDescriptor_t r,
                                                     size_t *weightSpaceSize)
{
    if (!dnn_handle_ok(handle) || !r || !r->set || !weightSpaceSize)
        return CUDNN_STATUS_BAD_PARAM;
    *weightSpaceSize = (size_t)rnn_weight_elems(r) * (size_t)dnn_dtype_size(r->dtype);
    return CUDNN_STATUS_SUCCESS;
}

/* A 3-d descriptor [1, rows, cols] (fully packed), or a cleared one when the parameter does not exist. */
static void rnn_param_desc(cudnnTensorDescriptor_t t, cudnnDataType_t dtype, int64_t rows, int64_t cols)
{
    if (!t)
        return;
    if (rows * cols == 0) {
        memset(t, 0, sizeof *t);
        return;
    }
    t->dtype = dtype;
    t->nd = 3;
    t->dims[0] = 1;
    t->dims[1] = (int)rows;
    t->dims[2] = (int)cols;
    t->strides[0] = (int)(rows * cols);
    t->strides[1] = (int)cols;
    t->strides[2] = 1;
}

MAYA_EXPORT cudnnStatus_t cudnnGetRNNWeightParams(cudnnHandle_t handle, cudnnRNNDescriptor_t r, int32_t pseudoLayer,
                                                  size_t weightSpaceSize, const void *weightSpace,
                                                  int32_t linLayerID, cudnnTensorDescriptor_t mDesc, void **mAddr,
                                                  cudnnTensorDescriptor_t bDesc, void **bAddr)
{
    if (!dnn_handle_ok(handle) || !r || !r->set || !weightSpace || pseudoLayer < 0 ||
        pseudoLayer >= r->layers * rnn_dirs(r) || linLayerID < 0 || linLayerID >= rnn_lin_ids(r))
        return CUDNN_STATUS_BAD_PARAM;
    size_t elem = (size_t)dnn_dtype_size(r->dtype);
    if (weightSpaceSize < (size_t)rnn_weight_elems(r) * elem)
        return CUDNN_STATUS_BAD_PARAM;
    int64_t base = 0, mats = 0;
    for (int p = 0; p < pseudoLayer; p++)
        base += rnn_pseudo_elems(r, p, NULL);
    rnn_pseudo_elems(r, pseudoLayer, &mats);
    int l = (int)(pseudoLayer / rnn_dirs(r));
    int64_t moff = base, boff = base + mats, rows = 0, cols = 0;
    for (int64_t lin = 0; lin < linLayerID; lin++) {
        rnn_matrix(r, l, lin, &rows, &cols);
        moff += rows * cols;
        boff += rnn_has_bias(r, lin) ? r->hidden : 0;
    }
    rnn_matrix(r, l, linLayerID, &rows, &cols);
    const char *w = weightSpace;
    if (mAddr)
        *mAddr = rows * cols != 0 ? (void *)(w + moff * (int64_t)elem) : NULL;
    rnn_param_desc(mDesc, r->dtype, rows, cols);
    int bias = rnn_has_bias(r, linLayerID);
    if (bAddr)
        *bAddr = bias ? (void *)(w + boff * (int64_t)elem) : NULL;
    rnn_param_desc(bDesc, r->dtype, bias ? r->hidden : 0, 1);
    return CUDNN_STATUS_SUCCESS;
}

/* ------------------------------------------------------------ temporary space */

/* Reserve space (training only): what backward reads of the forward pass, per token (a sequence's
 * time step: a packed batch's real ones, not its padding) of the batch: LSTM 5 vectors of the hidden
 * size per pseudo-layer (4 gates and the cell state), 6 and its projection with an LSTM projection,
 * GRU 6, RNN 1; plus, between layers, each layer's hidden vector but the last's.  Measured on an H200
 * with cuDNN 9.19 (benchmarks/campaigns/rnn_memory.py, benchmarks/data/rnn_memory/: torch's reserve
 * tensor, 472 configurations of LSTM, GRU and RNN, 1-3 layers, one or two directions, fp32 and bf16,
 * padded and packed, projections of 64 and 128): every reserve this gives is cuDNN's, to the
 * allocator's rounding.
 *
 * Workspace: measured exactly on an H200 with cuDNN 9.19 (benchmarks/campaigns/rnn_workspace.py,
 * benchmarks/data/rnn_workspace/: the byte tensor torch allocates for each call, read off the caching
 * allocator's history, 2055 configurations), then modelled.  Exact in every configuration: 8 MiB
 * per pseudo-layer (bytes, whatever the data type) plus each pseudo-layer's gate matrices, gates x
 * hidden x (layer input + hidden) elements; the same in training and inference.  The rest grows
 * linearly with the batch at a fixed sequence, and with the sequence at a fixed batch (per token
 * 5-15 hidden vectors, by cell and direction), but changes regime with batch, sequence length and
 * size in ways not pinned down; it is a least-squares fit (relative) per phase (training, which
 * backward asks too, or inference), cell, direction count and algorithm (torch's choice: standard,
 * PERSIST_STATIC_SMALL_H, PERSIST_STATIC) on the features in rnn_ws_coef's order, generated by
 * benchmarks/calibration/rnn_workspace.py.  Fitted on all
 * but hidden sizes 200, 300, 768 and 1000: median error 2% on the fit, 1% on those held out, 90% of
 * configurations within 13%, a few far off (small batches and sequences with large inputs).  fp32
 * with and without TF32 ask the same. */
#include "cudnn_rnn_workspace.h"

static void rnn_temp_sizes(const struct cudnnRNNStruct *r, cudnnForwardMode_t mode,
                           const struct cudnnRNNDataStruct *x, size_t *work, size_t *reserve)
{
    int64_t elem = dnn_dtype_size(r->dtype), dirs = rnn_dirs(r), g = rnn_gates(r), h = r->hidden;
    int64_t rows = (int64_t)x->max_seq * x->batch;
    int64_t tokens = x->tokens > 0 ? x->tokens : rows;
    int64_t proj = rnn_has_proj(r) ? r->proj : 0;
    int64_t cell = r->mode == CUDNN_LSTM ? (proj ? 6 : 5) : r->mode == CUDNN_GRU ? 6 : 1;
    int64_t rs = 0;
    if (mode == CUDNN_FWD_MODE_TRAINING)
        rs = tokens * (r->layers * dirs * (cell * h + proj) + (r->layers - 1) * dirs * h);
    int64_t ws = 0; /* bytes */
    for (int l = 0; l < r->layers; l++) {
        int64_t in = l == 0 ? (r->input_mode == CUDNN_SKIP_INPUT ? 0 : r->input) : h * dirs;
        ws += dirs * ((8 << 20) + g * h * (in + h) * elem);
    }
    int phase = mode == CUDNN_FWD_MODE_TRAINING ? 0 : 1;
    int cellx = r->mode == CUDNN_LSTM ? 0 : r->mode == CUDNN_GRU ? 1 : 2;
    int alg = r->algo == CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H ? 1 : r->algo == CUDNN_RNN_ALGO_PERSIST_STATIC ? 2 : 0;
    const double *k = rnn_ws_coef[phase][cellx][dirs - 1][alg];
    double t = (double)tokens, b = (double)x->batch, in0 = (double)r->input, hh = (double)h, L = (double)r->layers;
    double rest = k[0] * t * hh + k[1] * t * in0 + k[2] * b * hh * L + k[3] * b * hh + k[4] * b * in0 +
                  k[5] * t * hh * (L - 1);
    if (rest > 0)
        ws += (int64_t)(rest * (double)elem);
    *work = (size_t)ws;
    *reserve = (size_t)(rs * elem);
}

MAYA_EXPORT cudnnStatus_t cudnnGetRNNTempSpaceSizes(cudnnHandle_t handle, cudnnRNNDescriptor_t r,
                                                    cudnnForwardMode_t fwdMode, cudnnRNNDataDescriptor_t xDesc,
                                                    size_t *workSpaceSize, size_t *reserveSpaceSize)
{
    if (!dnn_handle_ok(handle) || !r || !r->set || !xDesc || !xDesc->set ||
        (fwdMode != CUDNN_FWD_MODE_INFERENCE && fwdMode != CUDNN_FWD_MODE_TRAINING))
        return CUDNN_STATUS_BAD_PARAM;
    size_t work, reserve;
    rnn_temp_sizes(r, fwdMode, xDesc, &work, &reserve);
    if (workSpaceSize)
        *workSpaceSize = work;
    if (reserveSpaceSize)
        *reserveSpaceSize = reserve;
    maya_approximated("cudnnGetRNNTempSpaceSizes: workspace size partly fitted to cuDNN 9's (median error 2%)");
    return CUDNN_STATUS_SUCCESS;
}

/* ------------------------------------------------------------ compute */

void dnn_rnn_params(dnn_record *d, const dnn_rnn *r)
{
    uint64_t p[] = {(uint64_t)r->mode, (uint64_t)r->algo, (uint64_t)r->layers, (uint64_t)r->dirs,
                    (uint64_t)r->input, (uint64_t)r->hidden, (uint64_t)r->proj, (uint64_t)r->seq,
                    (uint64_t)r->batch, (uint64_t)r->tokens, (uint64_t)r->bias, (uint64_t)r->math,
                    (uint64_t)r->reserve, 0};
    memcpy(&p[13], &r->dropout, sizeof(double));
    d->np = (int)(sizeof p / sizeof *p);
    memcpy(d->params, p, sizeof p);
}

static double rnn_dropout(cudnnHandle_t handle, const struct cudnnRNNStruct *r)
{
    float p = 0.0f;
    if (r->dropout && r->layers > 1)
        cudnnGetDropoutDescriptor(r->dropout, handle, &p, NULL, NULL);
    return p;
}

static cudnnStatus_t rnn_call(const char *op, maya_call c, cudnnHandle_t handle, const struct cudnnRNNStruct *r,
                              int training, const struct cudnnRNNDataStruct *x, const struct cudnnRNNDataStruct *y,
                              size_t weight_bytes, size_t work_bytes, size_t reserve_bytes)
{
    if (!dnn_handle_ok(handle) || !r || !r->set || !x || !x->set || !y || !y->set)
        return CUDNN_STATUS_BAD_PARAM;
    if (x->vec != r->input || y->vec != rnn_out(r) * rnn_dirs(r) || x->batch != y->batch ||
        x->max_seq != y->max_seq || weight_bytes < (size_t)rnn_weight_elems(r) * (size_t)dnn_dtype_size(r->dtype))
        return CUDNN_STATUS_BAD_PARAM;
    size_t need_work, need_reserve;
    rnn_temp_sizes(r, training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE, x, &need_work, &need_reserve);
    if (work_bytes < need_work || reserve_bytes < need_reserve)
        return CUDNN_STATUS_BAD_PARAM; /* as cuDNN: the caller did not allocate what it was told */
    dnn_rnn s = {.mode = r->mode, .algo = r->algo, .layers = r->layers, .dirs = rnn_dirs(r), .input = r->input,
                 .hidden = r->hidden, .proj = rnn_has_proj(r) ? r->proj : 0, .seq = x->max_seq, .batch = x->batch,
                 .tokens = x->tokens, .bias = r->bias, .math = r->math, .reserve = (int64_t)reserve_bytes,
                 .dropout = training ? rnn_dropout(handle, r) : 0.0};
    dnn_record d = {.op = op, .workspace = work_bytes, .engine = (uint32_t)r->algo, .knob = DNN_NO_KNOB,
                    .io_dtype = (uint32_t)r->dtype, .compute_dtype = (uint32_t)r->math_prec,
                    .layout = DNN_LAYOUT_ROWMAJOR};
    if (training)
        d.flags |= DNN_F_TRAINING;
    if (s.dropout > 0)
        d.flags |= DNN_F_DROPOUT;
    dnn_rnn_params(&d, &s);
    dnn_emit(handle, c, &d);
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnRNNForward(cudnnHandle_t handle, cudnnRNNDescriptor_t rnnDesc,
                                          cudnnForwardMode_t fwdMode, const int32_t devSeqLengths[],
                                          cudnnRNNDataDescriptor_t xDesc, const void *x,
                                          cudnnRNNDataDescriptor_t yDesc, void *y, cudnnTensorDescriptor_t hDesc,
                                          const void *hx, void *hy, cudnnTensorDescriptor_t cDesc, const void *cx,
                                          void *cy, size_t weightSpaceSize, const void *weightSpace,
                                          size_t workSpaceSize, void *workSpace, size_t reserveSpaceSize,
                                          void *reserveSpace)
{
    maya_call c = maya_enter();
    if (fwdMode != CUDNN_FWD_MODE_INFERENCE && fwdMode != CUDNN_FWD_MODE_TRAINING)
        return CUDNN_STATUS_BAD_PARAM;
    int training = fwdMode == CUDNN_FWD_MODE_TRAINING;
    return rnn_call("rnn_fwd", c, handle, rnnDesc, training, xDesc, yDesc, weightSpaceSize, workSpaceSize,
                    training ? reserveSpaceSize : 0);
}

MAYA_EXPORT cudnnStatus_t cudnnRNNBackwardData_v8(cudnnHandle_t handle, cudnnRNNDescriptor_t rnnDesc,
                                                  const int32_t devSeqLengths[], cudnnRNNDataDescriptor_t yDesc,
                                                  const void *y, const void *dy, cudnnRNNDataDescriptor_t xDesc,
                                                  void *dx, cudnnTensorDescriptor_t hDesc, const void *hx,
                                                  const void *dhy, void *dhx, cudnnTensorDescriptor_t cDesc,
                                                  const void *cx, const void *dcy, void *dcx, size_t weightSpaceSize,
                                                  const void *weightSpace, size_t workSpaceSize, void *workSpace,
                                                  size_t reserveSpaceSize, void *reserveSpace)
{
    maya_call c = maya_enter();
    return rnn_call("rnn_bwd_data", c, handle, rnnDesc, 1, xDesc, yDesc, weightSpaceSize, workSpaceSize,
                    reserveSpaceSize);
}

MAYA_EXPORT cudnnStatus_t cudnnRNNBackwardWeights_v8(cudnnHandle_t handle, cudnnRNNDescriptor_t rnnDesc,
                                                     cudnnWgradMode_t addGrad, const int32_t devSeqLengths[],
                                                     cudnnRNNDataDescriptor_t xDesc, const void *x,
                                                     cudnnTensorDescriptor_t hDesc, const void *hx,
                                                     cudnnRNNDataDescriptor_t yDesc, const void *y,
                                                     size_t weightSpaceSize, void *dweightSpace, size_t workSpaceSize,
                                                     void *workSpace, size_t reserveSpaceSize, void *reserveSpace)
{
    maya_call c = maya_enter();
    return rnn_call("rnn_bwd_weights", c, handle, rnnDesc, 1, xDesc, yDesc, weightSpaceSize, workSpaceSize,
                    reserveSpaceSize);
}

/* cuDNN backend (graph) API: the descriptor store torch reaches through the
 * header-only cudnn-frontend (SDPA, convolutions).
 *
 * Every descriptor is a real object that keeps each attribute as set (type,
 * element count, bytes) and answers GetAttribute from it.  Descriptor-valued
 * attributes hold references (the frontend destroys e.g. a pointwise
 * descriptor right after setting it into its operation), and a descriptor-
 * valued Get copies the referenced object into the caller's descriptor, as
 * cuDNN does.  Finalize validates what cuDNN requires and derives what cuDNN
 * derives: an operation graph is analysed (SDPA forward/backward, convolution
 * fprop/dgrad/wgrad, or a generic graph) and gets an engine count;
 * heuristics return engine configurations with knobs and notes modelled on
 * what cuDNN 9.19 returns on an H100; an execution plan gets a workspace size.
 * Execute records one MK_DNN record (docs/dnn.md) and touches no data.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnn.h"

#define BMAGIC 0x4d424b44u /* "MBKD" */
/* Private attribute: rank of an engine config in the heuristics' answer. */
#define ATTR_MAYA_RANK 0x7fff0001
/* Executions of a plan that count as autotuning (warm-up + timed run). */
#define TUNING_RUNS 2
#define RANK_CLOCK_NS 40000
#define GI_MAXW 640

enum gclass {
    G_GENERIC,
    G_SDPA_FWD,
    G_SDPA_BWD,
    G_CONV_FPROP,
    G_CONV_DGRAD,
    G_CONV_WGRAD,
    G_MATMUL,
    G_NORM_FWD,
    G_NORM_BWD,
    G_NCLASS,
};

static const char *const class_op[G_NCLASS] = {
    "graph", "sdpa_fprop", "sdpa_bprop", "conv_fprop", "conv_dgrad", "conv_wgrad", "matmul", "norm_fwd", "norm_bwd",
};

/* What the analysis of an operation graph found. */
typedef struct {
    int cls;
    int io_dtype, compute_dtype, layout;
    uint32_t flags;
    dnn_sdpa s;
    int64_t scale_uid;   /* by-value tensor holding the softmax scale, -1 if none */
    dnn_conv cv;
    int nops;
    uint64_t hash;
    uint64_t words[GI_MAXW];
    int nw;
} ginfo;

typedef struct {
    int name, type;
    int64_t count;
    void *data;
} battr;

typedef struct bdesc {
    uint32_t magic;
    int type;
    int finalized;
    int refs;
    battr *attrs;
    int nattr, cap;
    ginfo *gi;           /* operation graphs */
    struct bdesc *graph; /* engines, configs and plans: their operation graph (referenced) */
    int nexec;           /* plans: executions so far */
} bdesc;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int valid(const bdesc *d)
{
    return d && d->magic == BMAGIC;
}

/* ------------------------------------------------------------ objects */

static bdesc *bnew(int type)
{
    bdesc *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->magic = BMAGIC;
    d->type = type;
    d->refs = 1;
    return d;
}

static void bunref(bdesc *d);

static void attr_clear(battr *a)
{
    if (a->type == CUDNN_TYPE_BACKEND_DESCRIPTOR)
        for (int64_t i = 0; i < a->count; i++)
            bunref(((bdesc **)a->data)[i]);
    free(a->data);
    a->data = NULL;
    a->count = 0;
}

static void bclear(bdesc *d)
{
    for (int i = 0; i < d->nattr; i++)
        attr_clear(&d->attrs[i]);
    free(d->attrs);
    d->attrs = NULL;
    d->nattr = d->cap = 0;
    free(d->gi);
    d->gi = NULL;
    if (d->graph)
        bunref(d->graph);
    d->graph = NULL;
    d->finalized = 0;
}

static void bunref(bdesc *d)
{
    if (!valid(d) || --d->refs > 0)
        return;
    bclear(d);
    d->magic = 0;
    free(d);
}

static void bref(bdesc *d)
{
    if (valid(d))
        d->refs++;
}

static size_t tsize(int type)
{
    switch (type) {
    case CUDNN_TYPE_HANDLE:
    case CUDNN_TYPE_VOID_PTR:
    case CUDNN_TYPE_BACKEND_DESCRIPTOR: return sizeof(void *);
    case CUDNN_TYPE_BOOLEAN: return sizeof(bool);
    case CUDNN_TYPE_INT64:
    case CUDNN_TYPE_DOUBLE: return 8;
    case CUDNN_TYPE_CHAR: return 1;
    case CUDNN_TYPE_FRACTION: return sizeof(cudnnFraction_t);
    default: return 4; /* FLOAT, INT32 and every enum */
    }
}

static battr *attr_find(const bdesc *d, int name)
{
    for (int i = 0; i < d->nattr; i++)
        if (d->attrs[i].name == name)
            return &d->attrs[i];
    return NULL;
}

static int attr_set(bdesc *d, int name, int type, int64_t count, const void *data)
{
    if (count < 0 || (count > 0 && !data))
        return -1;
    battr *a = attr_find(d, name);
    if (!a) {
        if (d->nattr == d->cap) {
            int cap = d->cap ? d->cap * 2 : 8;
            battr *na = realloc(d->attrs, sizeof *na * (size_t)cap);
            if (!na)
                return -1;
            d->attrs = na;
            d->cap = cap;
        }
        a = &d->attrs[d->nattr++];
        memset(a, 0, sizeof *a);
        a->name = name;
    }
    size_t bytes = tsize(type) * (size_t)count;
    void *copy = bytes ? malloc(bytes) : NULL;
    if (bytes && !copy)
        return -1;
    if (bytes)
        memcpy(copy, data, bytes);
    if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR)
        for (int64_t i = 0; i < count; i++)
            bref(((bdesc **)copy)[i]);
    attr_clear(a); /* after taking the new references: setting the same object again is safe */
    a->type = type;
    a->count = count;
    a->data = copy;
    return 0;
}

static void set_i64(bdesc *d, int name, int64_t v)
{
    attr_set(d, name, CUDNN_TYPE_INT64, 1, &v);
}

/* Element i of an attribute read as an integer (any integer-like type). */
static int attr_i64(const battr *a, int64_t i, int64_t *out)
{
    if (!a || i >= a->count)
        return -1;
    const char *p = (const char *)a->data + tsize(a->type) * (size_t)i;
    switch (a->type) {
    case CUDNN_TYPE_INT64: *out = *(const int64_t *)p; return 0;
    case CUDNN_TYPE_BOOLEAN: *out = *(const bool *)p; return 0;
    case CUDNN_TYPE_FLOAT: *out = (int64_t)*(const float *)p; return 0;
    case CUDNN_TYPE_DOUBLE: *out = (int64_t)*(const double *)p; return 0;
    case CUDNN_TYPE_HANDLE:
    case CUDNN_TYPE_VOID_PTR:
    case CUDNN_TYPE_BACKEND_DESCRIPTOR:
    case CUDNN_TYPE_CHAR:
    case CUDNN_TYPE_FRACTION: return -1;
    default: *out = *(const int32_t *)p; return 0;
    }
}

static int64_t get_i64(const bdesc *d, int name, int64_t i, int64_t dflt)
{
    int64_t v;
    return d && attr_i64(attr_find(d, name), i, &v) == 0 ? v : dflt;
}

static double get_f64(const bdesc *d, int name, double dflt)
{
    const battr *a = d ? attr_find(d, name) : NULL;
    if (!a || a->count < 1)
        return dflt;
    if (a->type == CUDNN_TYPE_DOUBLE)
        return *(const double *)a->data;
    if (a->type == CUDNN_TYPE_FLOAT)
        return *(const float *)a->data;
    int64_t v;
    return attr_i64(a, 0, &v) == 0 ? (double)v : dflt;
}

static bdesc *get_desc(const bdesc *d, int name, int64_t i)
{
    const battr *a = d ? attr_find(d, name) : NULL;
    if (!a || a->type != CUDNN_TYPE_BACKEND_DESCRIPTOR || i >= a->count)
        return NULL;
    bdesc *r = ((bdesc **)a->data)[i];
    return valid(r) ? r : NULL;
}

/* Make dst a copy of src (a descriptor-valued Get fills caller-made objects). */
static int bcopy_into(bdesc *dst, const bdesc *src)
{
    if (dst == src)
        return 0;
    bclear(dst);
    dst->type = src->type;
    for (int i = 0; i < src->nattr; i++) {
        const battr *a = &src->attrs[i];
        if (attr_set(dst, a->name, a->type, a->count, a->data) != 0)
            return -1;
    }
    if (src->gi) {
        dst->gi = malloc(sizeof *dst->gi);
        if (!dst->gi)
            return -1;
        memcpy(dst->gi, src->gi, sizeof *dst->gi);
    }
    dst->graph = src->graph;
    bref(dst->graph);
    dst->finalized = src->finalized;
    return 0;
}

/* ------------------------------------------------------- graph analysis */

typedef struct {
    int64_t uid;
    int dtype, nd, virt, byval;
    int64_t dims[8], strides[8];
} tinfo;

static int tensor_info(const bdesc *t, tinfo *ti)
{
    memset(ti, 0, sizeof *ti);
    if (!t || t->type != CUDNN_BACKEND_TENSOR_DESCRIPTOR)
        return -1;
    const battr *dims = attr_find(t, CUDNN_ATTR_TENSOR_DIMENSIONS);
    const battr *str = attr_find(t, CUDNN_ATTR_TENSOR_STRIDES);
    ti->uid = get_i64(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, 0, -1);
    ti->dtype = (int)get_i64(t, CUDNN_ATTR_TENSOR_DATA_TYPE, 0, CUDNN_DATA_FLOAT);
    ti->virt = (int)get_i64(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, 0, 0);
    ti->byval = (int)get_i64(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, 0, 0);
    ti->nd = dims ? (int)(dims->count > 8 ? 8 : dims->count) : 0;
    for (int i = 0; i < ti->nd; i++) {
        attr_i64(dims, i, &ti->dims[i]);
        if (attr_i64(str, i, &ti->strides[i]) != 0)
            ti->strides[i] = 0;
    }
    return 0;
}

static bdesc *op_tensor(const bdesc *op, int name)
{
    bdesc *t = get_desc(op, name, 0);
    return t && t->type == CUDNN_BACKEND_TENSOR_DESCRIPTOR ? t : NULL;
}

static int pw_mode(const bdesc *op)
{
    return (int)get_i64(get_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, 0), CUDNN_ATTR_POINTWISE_MODE, 0,
                        -1);
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
}

static void gw(ginfo *g, uint64_t w)
{
    if (g->nw < GI_MAXW)
        g->words[g->nw++] = w;
    g->hash = mix(g->hash, w);
}

/* Op word: descriptor type | sub-mode << 8 | tensor count << 32. */
static uint64_t op_word(const bdesc *op, int ntensors)
{
    int sub = 0;
    if (op->type == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR)
        sub = pw_mode(op);
    else if (op->type == CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR)
        sub = (int)get_i64(get_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, 0), CUDNN_ATTR_REDUCTION_OPERATOR, 0, 0);
    return (uint64_t)(op->type & 0xff) | (uint64_t)(sub & 0xffffff) << 8 | (uint64_t)ntensors << 32;
}

/* Tensors an operation references, in attribute order. */
static int op_tensors(const bdesc *op, const bdesc **out, int max)
{
    int n = 0;
    for (int i = 0; i < op->nattr && n < max; i++) {
        const battr *a = &op->attrs[i];
        if (a->type != CUDNN_TYPE_BACKEND_DESCRIPTOR)
            continue;
        for (int64_t j = 0; j < a->count && n < max; j++) {
            const bdesc *t = ((bdesc **)a->data)[j];
            if (valid(t) && t->type == CUDNN_BACKEND_TENSOR_DESCRIPTOR)
                out[n++] = t;
        }
    }
    return n;
}

static int layout_of(const tinfo *t)
{
    if (t->nd >= 4 && t->dims[1] > 1 && t->strides[1] == 1)
        return DNN_LAYOUT_NHWC;
    return DNN_LAYOUT_NCHW;
}

static void analyse_sdpa_unified(ginfo *g, const bdesc *op, int bwd)
{
    tinfo q, k, v;
    tensor_info(op_tensor(op, bwd ? CUDNN_ATTR_OPERATION_SDPA_BWD_QDESC : CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC), &q);
    tensor_info(op_tensor(op, bwd ? CUDNN_ATTR_OPERATION_SDPA_BWD_KDESC : CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC), &k);
    tensor_info(op_tensor(op, bwd ? CUDNN_ATTR_OPERATION_SDPA_BWD_VDESC : CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC), &v);
    bdesc *sc = op_tensor(op, bwd ? CUDNN_ATTR_OPERATION_SDPA_BWD_SCALEDESC : CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC);
    if (sc)
        g->scale_uid = get_i64(sc, CUDNN_ATTR_TENSOR_UNIQUE_ID, 0, -1);
    g->cls = bwd ? G_SDPA_BWD : G_SDPA_FWD;
    g->flags |= DNN_F_UNIFIED;
    g->io_dtype = q.dtype;
    if (q.nd == 4) {
        g->s.b = q.dims[0];
        g->s.h = q.dims[1];
        g->s.sq = q.dims[2];
        g->s.d = q.dims[3];
    }
    if (k.nd == 4) {
        g->s.hk = k.dims[1];
        /* K may be given as K^T ([b, h, d, s]). */
        g->s.skv = (k.dims[3] == g->s.d && k.dims[2] != g->s.d) ? k.dims[2] : k.dims[3] == g->s.d ? k.dims[2] : k.dims[3];
    }
    g->s.dv = v.nd == 4 ? v.dims[3] : g->s.d;
}

static void analyse_conv(ginfo *g, const bdesc *op)
{
    int x_a, w_a, y_a, cd_a;
    switch (op->type) {
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
        g->cls = G_CONV_FPROP;
        x_a = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X;
        w_a = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W;
        y_a = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y;
        cd_a = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC;
        break;
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR:
        g->cls = G_CONV_DGRAD;
        x_a = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX;
        w_a = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W;
        y_a = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY;
        cd_a = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC;
        break;
    default:
        g->cls = G_CONV_WGRAD;
        x_a = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X;
        w_a = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW;
        y_a = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY;
        cd_a = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC;
        break;
    }
    tinfo x, w, y;
    tensor_info(op_tensor(op, x_a), &x);
    tensor_info(op_tensor(op, w_a), &w);
    tensor_info(op_tensor(op, y_a), &y);
    const bdesc *cd = get_desc(op, cd_a, 0);
    dnn_conv *cv = &g->cv;
    g->io_dtype = x.dtype;
    g->compute_dtype = (int)get_i64(cd, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, 0, CUDNN_DATA_FLOAT);
    g->layout = layout_of(&x);
    cv->n = x.nd > 0 ? x.dims[0] : 0;
    cv->c = x.nd > 1 ? x.dims[1] : 0;
    cv->k = w.nd > 0 ? w.dims[0] : 0;
    cv->groups = (w.nd > 1 && w.dims[1] > 0 && cv->c % w.dims[1] == 0) ? cv->c / w.dims[1] : 1;
    cv->nsp = x.nd > 2 ? x.nd - 2 : 0;
    if (cv->nsp > 3)
        cv->nsp = 3;
    for (int i = 0; i < cv->nsp; i++) {
        cv->in[i] = x.dims[i + 2];
        cv->filt[i] = w.nd > i + 2 ? w.dims[i + 2] : 1;
        cv->out[i] = y.nd > i + 2 ? y.dims[i + 2] : 0;
        cv->pad[i] = get_i64(cd, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, i, 0);
        cv->stride[i] = get_i64(cd, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, i, 1);
        cv->dil[i] = get_i64(cd, CUDNN_ATTR_CONVOLUTION_DILATIONS, i, 1);
    }
}

/* The composite SDPA graphs the frontend builds: Q.K^T first, then softmax
 * (exp + reductions), then P.V (forward, 2 matmuls) or the five matmuls of
 * the backward pass. */
static void analyse_sdpa_composite(ginfo *g, const bdesc *const *ops, int nops, int nmm)
{
    const bdesc *mm[8];
    const bdesc *adds[8];
    int n = 0, nadd = 0;
    int has_genidx = 0, has_cmp = 0;
    for (int i = 0; i < nops; i++) {
        const bdesc *op = ops[i];
        if (op->type == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR && pw_mode(op) == CUDNN_POINTWISE_ADD && nadd < 8)
            adds[nadd++] = op;
        if (op->type == CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR && n < 8)
            mm[n++] = op;
        if (op->type == CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR) {
            const bdesc *rng = get_desc(op, CUDNN_ATTR_OPERATION_RNG_DESC, 0);
            double keep = get_f64(rng, CUDNN_ATTR_RNG_BERNOULLI_DIST_PROBABILITY, 1.0);
            g->s.dropout = 1.0 - keep;
            g->flags |= DNN_F_DROPOUT;
        }
        if (op->type == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR) {
            int m = pw_mode(op);
            if (m == CUDNN_POINTWISE_GEN_INDEX)
                has_genidx = 1;
            if (m >= CUDNN_POINTWISE_CMP_EQ && m <= CUDNN_POINTWISE_CMP_LE)
                has_cmp = 1;
        }
    }
    g->cls = nmm >= 4 ? G_SDPA_BWD : G_SDPA_FWD;
    if (has_genidx && has_cmp)
        g->flags |= DNN_F_CAUSAL;
    tinfo q, kt, c2;
    tensor_info(op_tensor(mm[0], CUDNN_ATTR_OPERATION_MATMUL_ADESC), &q);
    tensor_info(op_tensor(mm[0], CUDNN_ATTR_OPERATION_MATMUL_BDESC), &kt);
    tensor_info(op_tensor(mm[1], CUDNN_ATTR_OPERATION_MATMUL_CDESC), &c2);
    g->io_dtype = q.dtype;
    if (q.nd == 4) {
        g->s.b = q.dims[0];
        g->s.h = q.dims[1];
        g->s.sq = q.dims[2];
        g->s.d = q.dims[3];
    }
    if (kt.nd == 4) {
        g->s.hk = kt.dims[1];
        g->s.skv = kt.dims[3];
    }
    g->s.dv = c2.nd == 4 ? c2.dims[3] : g->s.d;
    /* An additive mask: a graph input (neither virtual nor by value) added to the scores, of shape
     * [b or 1, h or 1, sq or 1, skv]; the softmax statistics ([b, h, sq, 1]) are no mask. */
    for (int i = 0; i < nadd; i++) {
        for (int side = 0; side < 2; side++) {
            tinfo t;
            tensor_info(op_tensor(adds[i], side ? CUDNN_ATTR_OPERATION_POINTWISE_BDESC
                                                : CUDNN_ATTR_OPERATION_POINTWISE_XDESC), &t);
            if (t.nd == 4 && !t.virt && !t.byval && g->s.skv > 1 && t.dims[3] == g->s.skv &&
                (t.dims[2] == g->s.sq || t.dims[2] == 1))
                g->flags |= DNN_F_BIAS;
        }
    }
    /* The scale: the by-value operand of the multiply applied to Q.K^T. */
    tinfo s_out;
    tensor_info(op_tensor(mm[0], CUDNN_ATTR_OPERATION_MATMUL_CDESC), &s_out);
    for (int i = 0; i < nops; i++) {
        const bdesc *op = ops[i];
        if (op->type != CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR || pw_mode(op) != CUDNN_POINTWISE_MUL)
            continue;
        tinfo x, b;
        tensor_info(op_tensor(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC), &x);
        tensor_info(op_tensor(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC), &b);
        if (x.uid == s_out.uid && b.byval) {
            g->scale_uid = b.uid;
            break;
        }
    }
}

static int analyse(bdesc *graph)
{
    const battr *a = attr_find(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS);
    if (!a || a->type != CUDNN_TYPE_BACKEND_DESCRIPTOR || a->count < 1)
        return -1;
    ginfo *g = calloc(1, sizeof *g);
    if (!g)
        return -1;
    g->scale_uid = -1;
    g->compute_dtype = CUDNN_DATA_FLOAT;
    g->layout = DNN_LAYOUT_ROWMAJOR;
    const bdesc *const *ops = (const bdesc *const *)a->data;
    int nops = (int)a->count, nmm = 0, nexp = 0, nred = 0;
    const bdesc *special = NULL;
    for (int i = 0; i < nops; i++) {
        const bdesc *op = ops[i];
        if (!valid(op)) {
            free(g);
            return -1;
        }
        switch (op->type) {
        case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR: nmm++; break;
        case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR: nred++; break;
        case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR:
            if (pw_mode(op) == CUDNN_POINTWISE_EXP)
                nexp++;
            break;
        case CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR:
        case CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR:
        case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
        case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR:
        case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR:
        case CUDNN_BACKEND_OPERATION_NORM_FORWARD_DESCRIPTOR:
        case CUDNN_BACKEND_OPERATION_NORM_BACKWARD_DESCRIPTOR:
            if (!special)
                special = op;
            break;
        default: break;
        }
    }
    g->nops = nops;
    if (special && special->type == CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR)
        analyse_sdpa_unified(g, special, 0);
    else if (special && special->type == CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR)
        analyse_sdpa_unified(g, special, 1);
    else if (special && (special->type == CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR ||
                         special->type == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR ||
                         special->type == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR))
        analyse_conv(g, special);
    else if (special && special->type == CUDNN_BACKEND_OPERATION_NORM_FORWARD_DESCRIPTOR)
        g->cls = G_NORM_FWD;
    else if (special && special->type == CUDNN_BACKEND_OPERATION_NORM_BACKWARD_DESCRIPTOR)
        g->cls = G_NORM_BWD;
    else if (nmm >= 2 && nexp >= 1 && nred >= 1)
        analyse_sdpa_composite(g, ops, nops, nmm);
    else if (nmm == 1)
        g->cls = G_MATMUL;
    if (g->cls == G_SDPA_FWD || g->cls == G_SDPA_BWD) {
        g->s.causal = !!(g->flags & DNN_F_CAUSAL);
        if (g->s.hk && g->s.hk != g->s.h) {
            g->s.gqa = 1;
            g->flags |= DNN_F_GQA;
        }
        if (!g->s.hk)
            g->s.hk = g->s.h;
    }
    /* Words: ops, then the graph's non-virtual tensors (docs/dnn.md). */
    const bdesc *seen[128];
    int nseen = 0;
    for (int i = 0; i < nops; i++) {
        const bdesc *ts[16];
        int nt = op_tensors(ops[i], ts, 16);
        gw(g, op_word(ops[i], nt));
        for (int j = 0; j < nt && nseen < 128; j++) {
            int dup = 0;
            for (int k = 0; k < nseen; k++)
                if (seen[k] == ts[j] || get_i64(seen[k], CUDNN_ATTR_TENSOR_UNIQUE_ID, 0, -1) ==
                                            get_i64(ts[j], CUDNN_ATTR_TENSOR_UNIQUE_ID, 0, -2))
                    dup = 1;
            if (!dup)
                seen[nseen++] = ts[j];
        }
    }
    int nio = 0;
    for (int k = 0; k < nseen; k++) {
        tinfo t;
        tensor_info(seen[k], &t);
        if (!t.virt)
            nio++;
    }
    gw(g, (uint64_t)nio);
    for (int k = 0; k < nseen; k++) {
        tinfo t;
        tensor_info(seen[k], &t);
        if (t.virt)
            continue;
        gw(g, (uint64_t)t.uid);
        gw(g, (uint64_t)(t.dtype & 0xff) | (uint64_t)t.nd << 8 | (uint64_t)t.byval << 16);
        for (int i = 0; i < t.nd; i++)
            gw(g, (uint64_t)t.dims[i]);
        for (int i = 0; i < t.nd; i++)
            gw(g, (uint64_t)t.strides[i]);
    }
    free(graph->gi);
    graph->gi = g;
    return 0;
}

/* ------------------------------------------------------ engine catalogue */

/* Engine configurations per kind of graph, modelled on what cuDNN 9.19
 * returned for torch 2.11 on an H100 (docs/dnn.md): engine global index,
 * knobs, notes.  Heuristic modes return `heur`, FALLBACK returns `fallback`. */
typedef struct {
    int engine;
    int nk;
    int ktype[5];
    int64_t kval[5];
    int tensor_core, runtime_compiled;
} engcfg;

#define K1(a, x) 1, {a}, {x}
#define K2(a, x, b, y) 2, {a, b}, {x, y}
#define K3(a, x, b, y, c, z) 3, {a, b, c}, {x, y, z}
#define K5(a, x, b, y, c, z, d, w, e, v) 5, {a, b, c, d, e}, {x, y, z, w, v}
#define KNONE 0, {0}, {0}

static const engcfg sdpa_fwd_heur[] = {
    {2, K1(CUDNN_KNOB_TYPE_KERNEL_CFG, 7), 1, 1},
    {1, K1(CUDNN_KNOB_TYPE_KERNEL_CFG, 6), 1, 1},
    {1, K1(CUDNN_KNOB_TYPE_KERNEL_CFG, 5), 1, 1},
    {1, K1(CUDNN_KNOB_TYPE_KERNEL_CFG, 3), 1, 1},
};
static const engcfg sdpa_fwd_unified_heur[] = {
    {9, K1(CUDNN_KNOB_TYPE_KERNEL_CFG, 7), 1, 1},
    {2, K1(CUDNN_KNOB_TYPE_KERNEL_CFG, 7), 1, 1},
};
static const engcfg sdpa_bwd_heur[] = {
    {6, K2(CUDNN_KNOB_TYPE_STAGES, -1, CUDNN_KNOB_TYPE_KERNEL_CFG, 26), 1, 1},
    {6, K2(CUDNN_KNOB_TYPE_STAGES, -1, CUDNN_KNOB_TYPE_KERNEL_CFG, 20), 1, 1},
    {5, K1(CUDNN_KNOB_TYPE_KERNEL_CFG, 1), 1, 1},
};
/* Convolutions: the first entry is the engine torch's autotuning picked on
 * the H100 probes for mid-size bf16/fp16/fp32 convolutions (sm90 xmma
 * engines 62, 67, 65); knob types as the frontend's plan tags show them
 * ("eng62_k2=0_k13=1_k18=0_k25=0_k27=8_k28=1"). */
#define CONV_TAIL                                     \
    {22, K5(2, 2, 13, 0, 14, 3, 18, 1, 23, 0), 1, 0}, \
    {45, K3(2, 4, 5, 3, 14, 3), 1, 0},                \
    {28, K2(2, 3, 3, 0), 0, 0}
static const engcfg conv_fprop_heur[] = {{62, K5(2, 0, 13, 1, 18, 0, 25, 0, 27, 8), 1, 0}, CONV_TAIL};
static const engcfg conv_dgrad_heur[] = {{67, K5(2, 1, 13, 0, 18, 0, 25, 0, 27, 8), 1, 0}, CONV_TAIL};
static const engcfg conv_wgrad_heur[] = {{65, K5(2, 1, 13, 1, 18, 1, 25, 0, 27, 1), 1, 0}, CONV_TAIL};
static const engcfg conv_fallback[] = {
    {1, KNONE, 0, 0},
    {28, KNONE, 0, 0},
    {0, KNONE, 0, 0},
};
static const engcfg generic_heur[] = {
    {0, KNONE, 1, 1},
};

static void catalogue(int cls, int mode, int unified, const engcfg **list, int *n)
{
    int fb = mode == CUDNN_HEUR_MODE_FALLBACK;
#define PICK(a) (*list = (a), *n = (int)(sizeof(a) / sizeof *(a)))
    switch (cls) {
    case G_SDPA_FWD:
        if (unified)
            PICK(sdpa_fwd_unified_heur);
        else
            PICK(sdpa_fwd_heur);
        break;
    case G_SDPA_BWD: PICK(sdpa_bwd_heur); break;
    case G_CONV_FPROP:
    case G_CONV_DGRAD:
    case G_CONV_WGRAD:
        if (fb)
            PICK(conv_fallback);
        else if (cls == G_CONV_FPROP)
            PICK(conv_fprop_heur);
        else if (cls == G_CONV_DGRAD)
            PICK(conv_dgrad_heur);
        else
            PICK(conv_wgrad_heur);
        break;
    default: PICK(generic_heur); break;
    }
#undef PICK
}

static const engcfg *find_engine(const ginfo *g, int64_t index)
{
    static const int modes[] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    for (int m = 0; m < 2; m++) {
        const engcfg *list;
        int n;
        catalogue(g->cls, modes[m], !!(g->flags & DNN_F_UNIFIED), &list, &n);
        for (int i = 0; i < n; i++)
            if (list[i].engine == index)
                return &list[i];
    }
    return NULL;
}

static int64_t engine_count(const ginfo *g)
{
    switch (g->cls) {
    case G_SDPA_FWD:
    case G_SDPA_BWD: return 10;
    case G_CONV_FPROP:
    case G_CONV_DGRAD:
    case G_CONV_WGRAD: return 80;
    default: return 4;
    }
}

/* Workspace of a plan, as cuDNN 9.19 asked on the H100 probes.  SDPA
 * backward keeps dQ in fp32 plus the softmax sums (B*H*Sq*D*4 + B*H*Sq*4 +
 * 256, exact on every probe); with GQA also per-Q-head dK/dV in 16 bits
 * before the head reduction (B*H*Skv*(D+Dv)*2, exact on the probe).
 * Forward asks 256 bytes.  The sm90 xmma convolution engines ask 131 bytes
 * for fprop/dgrad; wgrad (split-K) asked 1.7 to 4.3 MB on the probes, fitted
 * as max(K*C/g*R*S*6, 3.5 MiB) (within 2x of all four).  On top, the
 * tensors those engines cannot read in place (conv_copies). */
static int64_t conv_copies(const ginfo *g);

static int64_t workspace(const ginfo *g, int engine)
{
    const dnn_sdpa *s = &g->s;
    switch (g->cls) {
    case G_SDPA_FWD: return 256;
    case G_SDPA_BWD: {
        int64_t ws = s->b * s->h * s->sq * s->d * 4 + s->b * s->h * s->sq * 4 + 256;
        if (s->gqa)
            ws += s->b * s->h * s->skv * (s->d + s->dv) * 2;
        return ws;
    }
    case G_CONV_FPROP:
    case G_CONV_DGRAD:
    case G_CONV_WGRAD: {
        /* The engine autotuning picks (first in the list): the measured
         * workspace when a real run covers the shape. */
        static const int first[] = {62, 67, 65};
        int dir = g->cls - G_CONV_FPROP;
        if (engine == first[dir]) {
            int64_t ws = dnn_conv_workspace(&g->cv, dir, g->io_dtype, g->layout);
            if (ws >= 0)
                return ws;
        }
        if (g->cls != G_CONV_WGRAD)
            return engine == 62 || engine == 67 ? 131 + conv_copies(g) : 0;
        if (engine != 65)
            return 0;
        int64_t rs = 1;
        for (int i = 0; i < g->cv.nsp; i++)
            rs *= g->cv.filt[i];
        int64_t w = g->cv.k * (g->cv.groups ? g->cv.c / g->cv.groups : g->cv.c) * rs * 6;
        return (w > (int64_t)3670016 ? w : 3670016) + conv_copies(g);
    }
    default: return 0;
    }
}

/* The copies a convolution's engine keeps in its workspace, as cuDNN 9.19
 * asked on an H200 with autotuning on (benchmarks/data/conv_workspace/):
 * the sm90 engines read channels-last tensors whose channels fill 16 bytes.
 * An NCHW convolution with a filter larger than 1x1 (and at least 4 input
 * channels) copies all three tensors, input (or its gradient), output (or
 * its gradient) and filter, into that form; a channels-last one copies the
 * tensors whose channels are short of a multiple of 16 bytes, and the filter.
 * Each copy holds its channels padded up to 16 bytes.  This is what sets the
 * peak of an NCHW network at its largest convolution (68 MiB for a UNet's
 * 128 -> 3 output convolution on 64 x 64 x 64 in bf16).  Not modelled:
 * NCHW inputs of fewer than 4 channels (a stem: the probes asked 0 to 2x
 * this), grouped and 3-D convolutions (none probed), and the 2 MiB an fp32
 * forward engine asks beside its copies. */
static int64_t conv_copies(const ginfo *g)
{
    const dnn_conv *cv = &g->cv;
    int64_t e = dnn_dtype_size(g->io_dtype);
    if (e <= 0 || e > 16 || cv->groups != 1 || cv->nsp != 2 || cv->n <= 0)
        return 0; /* measured on 2-D convolutions only (torch runs a 1-D one as 2-D) */
    int64_t per = 16 / e, cp = (cv->c + per - 1) / per * per, kp = (cv->k + per - 1) / per * per;
    int64_t in = 1, out = 1, rs = 1;
    for (int i = 0; i < cv->nsp; i++) {
        in *= cv->in[i];
        out *= cv->out[i];
        rs *= cv->filt[i];
    }
    int64_t x = cv->n * cp * in * e, y = cv->n * kp * out * e, w = kp * cp * rs * e;
    if (g->layout == DNN_LAYOUT_NCHW)
        return rs > 1 && cv->c >= 4 ? x + y + w : 0;
    int c_short = cv->c % per != 0, k_short = cv->k % per != 0;
    return (c_short ? x : 0) + (k_short ? y : 0) + (c_short || k_short ? w : 0);
}

/* ------------------------------------------------------- derived objects */

static bdesc *graph_of(const bdesc *d)
{
    if (!d)
        return NULL;
    if (d->type == CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
        return (bdesc *)d;
    return d->graph;
}

static void set_graph(bdesc *d, bdesc *graph)
{
    bref(graph);
    if (d->graph)
        bunref(d->graph);
    d->graph = graph;
}

/* Attributes cuDNN derives when an engine is finalized. */
static void derive_engine(bdesc *e, const ginfo *g, int64_t index)
{
    const engcfg *ec = find_engine(g, index);
    int tc = ec ? ec->tensor_core
                : (g->io_dtype == CUDNN_DATA_HALF || g->io_dtype == CUDNN_DATA_BFLOAT16);
    int rtc = ec ? ec->runtime_compiled : 0;
    cudnnBackendNumericalNote_t notes[2];
    int nn = 0;
    if (tc)
        notes[nn++] = CUDNN_NUMERICAL_NOTE_TENSOR_CORE;
    if (index == 0 && (g->cls == G_CONV_FPROP || g->cls == G_CONV_DGRAD || g->cls == G_CONV_WGRAD))
        notes[nn++] = CUDNN_NUMERICAL_NOTE_STRICT_NAN_PROP;
    attr_set(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, nn, notes);
    cudnnBackendBehaviorNote_t beh[2] = {CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION,
                                         CUDNN_BEHAVIOR_NOTE_SUPPORTS_CUDA_GRAPH_NATIVE_API};
    attr_set(e, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE, rtc ? 2 : 0, beh);
    bdesc *infos[5];
    int ni = 0;
    for (int k = 0; ec && k < ec->nk; k++) {
        bdesc *ki = bnew(CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR);
        if (!ki)
            break;
        int32_t kt = ec->ktype[k];
        attr_set(ki, CUDNN_ATTR_KNOB_INFO_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &kt);
        set_i64(ki, CUDNN_ATTR_KNOB_INFO_MINIMUM_VALUE, ec->kval[k] < 0 ? ec->kval[k] : 0);
        set_i64(ki, CUDNN_ATTR_KNOB_INFO_MAXIMUM_VALUE, ec->kval[k] > 63 ? ec->kval[k] : 63);
        set_i64(ki, CUDNN_ATTR_KNOB_INFO_STRIDE, 1);
        ki->finalized = 1;
        infos[ni++] = ki;
    }
    attr_set(e, CUDNN_ATTR_ENGINE_KNOB_INFO, CUDNN_TYPE_BACKEND_DESCRIPTOR, ni, infos);
    for (int k = 0; k < ni; k++)
        bunref(infos[k]);
    set_i64(e, CUDNN_ATTR_ENGINE_SM_COUNT_TARGET, maya_cfg()->gpu.sm_count);
}

static int64_t cfg_engine_index(const bdesc *cfg)
{
    return get_i64(get_desc(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, 0), CUDNN_ATTR_ENGINE_GLOBAL_INDEX, 0, -1);
}

static void derive_cfg(bdesc *cfg, const ginfo *g)
{
    int64_t idx = cfg_engine_index(cfg);
    if (!attr_find(cfg, CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE) || !cfg->finalized)
        set_i64(cfg, CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, workspace(g, (int)idx));
    int32_t smem = g->cls == G_SDPA_FWD || g->cls == G_SDPA_BWD ? 197632 : 98304;
    attr_set(cfg, CUDNN_ATTR_ENGINECFG_SHARED_MEMORY_USED, CUDNN_TYPE_INT32, 1, &smem);
    if (!attr_find(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES))
        attr_set(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, NULL);
}

/* A finalized engine config for entry ec of graph g, rank-th in its list. */
static bdesc *make_cfg(bdesc *graph, const engcfg *ec, int64_t rank)
{
    bdesc *e = bnew(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    bdesc *cfg = bnew(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    if (!e || !cfg) {
        bunref(e);
        bunref(cfg);
        return NULL;
    }
    attr_set(e, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
    set_i64(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, ec->engine);
    derive_engine(e, graph->gi, ec->engine);
    set_graph(e, graph);
    e->finalized = 1;
    attr_set(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &e);
    bunref(e);
    bdesc *choices[5];
    int nc = 0;
    for (int k = 0; k < ec->nk; k++) {
        bdesc *kc = bnew(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
        if (!kc)
            break;
        int32_t kt = ec->ktype[k];
        attr_set(kc, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &kt);
        set_i64(kc, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, ec->kval[k]);
        kc->finalized = 1;
        choices[nc++] = kc;
    }
    attr_set(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, nc, choices);
    for (int k = 0; k < nc; k++)
        bunref(choices[k]);
    set_i64(cfg, ATTR_MAYA_RANK, rank);
    set_graph(cfg, graph);
    derive_cfg(cfg, graph->gi);
    cfg->finalized = 1;
    return cfg;
}

/* ------------------------------------------------------------- finalize */

static int need(const bdesc *d, int name)
{
    if (attr_find(d, name))
        return 1;
    if (maya_cfg()->verbose)
        maya_log("cudnn: finalize of descriptor type %d lacks attribute %d\n", d->type, name);
    return 0;
}

static cudnnStatus_t finalize(bdesc *d)
{
    switch (d->type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: {
        if (!need(d, CUDNN_ATTR_TENSOR_DATA_TYPE) || !need(d, CUDNN_ATTR_TENSOR_DIMENSIONS) ||
            !need(d, CUDNN_ATTR_TENSOR_STRIDES) || !need(d, CUDNN_ATTR_TENSOR_UNIQUE_ID))
            return CUDNN_STATUS_BAD_PARAM;
        const battr *dims = attr_find(d, CUDNN_ATTR_TENSOR_DIMENSIONS);
        const battr *str = attr_find(d, CUDNN_ATTR_TENSOR_STRIDES);
        if (dims->count != str->count || dims->count < 1 || dims->count > 8)
            return CUDNN_STATUS_BAD_PARAM;
        return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
        if (analyse(d) != 0)
            return CUDNN_STATUS_BAD_PARAM;
        set_i64(d, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, engine_count(d->gi));
        return CUDNN_STATUS_SUCCESS;
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR: {
        bdesc *graph = get_desc(d, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, 0);
        if (!graph || !graph->finalized || !graph->gi)
            return CUDNN_STATUS_BAD_PARAM;
        int mode = (int)get_i64(d, CUDNN_ATTR_ENGINEHEUR_MODE, 0, CUDNN_HEUR_MODE_INSTANT);
        const engcfg *list;
        int n;
        catalogue(graph->gi->cls, mode, !!(graph->gi->flags & DNN_F_UNIFIED), &list, &n);
        bdesc *cfgs[16];
        int nc = 0;
        for (int i = 0; i < n && nc < 16; i++) {
            bdesc *cfg = make_cfg(graph, &list[i], (mode == CUDNN_HEUR_MODE_FALLBACK ? 10 : 0) + i);
            if (cfg)
                cfgs[nc++] = cfg;
        }
        attr_set(d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, nc, cfgs);
        for (int i = 0; i < nc; i++)
            bunref(cfgs[i]);
        set_graph(d, graph);
        return nc ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_NOT_SUPPORTED;
    }
    case CUDNN_BACKEND_ENGINE_DESCRIPTOR: {
        bdesc *graph = get_desc(d, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, 0);
        int64_t idx = get_i64(d, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, 0, -1);
        if (!graph || !graph->gi || idx < 0)
            return CUDNN_STATUS_BAD_PARAM;
        if (idx >= engine_count(graph->gi))
            return CUDNN_STATUS_NOT_SUPPORTED;
        derive_engine(d, graph->gi, idx);
        set_graph(d, graph);
        return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR: {
        bdesc *e = get_desc(d, CUDNN_ATTR_ENGINECFG_ENGINE, 0);
        if (!e || !graph_of(e) || !graph_of(e)->gi)
            return CUDNN_STATUS_BAD_PARAM;
        set_graph(d, graph_of(e));
        derive_cfg(d, d->graph->gi);
        return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: {
        bdesc *cfg = get_desc(d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, 0);
        if (!cfg || !graph_of(cfg) || !graph_of(cfg)->gi)
            return CUDNN_STATUS_BAD_PARAM;
        set_graph(d, graph_of(cfg));
        int64_t idx = cfg_engine_index(cfg);
        int64_t ws = get_i64(cfg, CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, 0, workspace(d->graph->gi, (int)idx));
        set_i64(d, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, ws);
        attr_set(d, CUDNN_ATTR_EXECUTION_PLAN_COMPUTED_INTERMEDIATE_UIDS, CUDNN_TYPE_INT64, 0, NULL);
        char json[160];
        int len = snprintf(json, sizeof json, "{\"engineId\":%lld,\"smVersion\":%d%d}", (long long)idx,
                           maya_cfg()->gpu.cc_major, maya_cfg()->gpu.cc_minor);
        attr_set(d, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, len + 1, json);
        return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: {
        const battr *u = attr_find(d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS);
        const battr *p = attr_find(d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
        if ((u ? u->count : 0) != (p ? p->count : 0))
            return CUDNN_STATUS_BAD_PARAM;
        return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR:
        return need(d, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE) ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
    case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR: /* a layout view inside SDPA graphs: X and Y */
        return need(d, CUDNN_ATTR_OPERATION_RESHAPE_XDESC) && need(d, CUDNN_ATTR_OPERATION_RESHAPE_YDESC)
                   ? CUDNN_STATUS_SUCCESS
                   : CUDNN_STATUS_BAD_PARAM;
    /* The pieces of a graph that the analysis reads: their attributes are kept as set. */
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR:
    case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR:
    case CUDNN_BACKEND_MATMUL_DESCRIPTOR:
    case CUDNN_BACKEND_REDUCTION_DESCRIPTOR:
    case CUDNN_BACKEND_RNG_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_NORM_FORWARD_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_NORM_BACKWARD_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR:
        return CUDNN_STATUS_SUCCESS;
    default: { /* accepted so that the program goes on, but nothing checked or understood it */
        char what[112];
        snprintf(what, sizeof what, "cudnnBackendFinalize: descriptor type %d accepted unchecked", (int)d->type);
        maya_approximated(what);
        return CUDNN_STATUS_SUCCESS;
    }
    }
}

/* ------------------------------------------------------------------ API */

MAYA_EXPORT cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t descriptorType,
                                                       cudnnBackendDescriptor_t *descriptor)
{
    if (!descriptor)
        return CUDNN_STATUS_BAD_PARAM;
    bdesc *d = bnew(descriptorType);
    if (!d)
        return CUDNN_STATUS_ALLOC_FAILED;
    *descriptor = d;
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor)
{
    bdesc *d = descriptor;
    if (!valid(d))
        return CUDNN_STATUS_BAD_PARAM;
    pthread_mutex_lock(&lock);
    bunref(d);
    pthread_mutex_unlock(&lock);
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnBackendInitialize(cudnnBackendDescriptor_t descriptor)
{
    bdesc *d = descriptor;
    if (!valid(d))
        return CUDNN_STATUS_BAD_PARAM;
    pthread_mutex_lock(&lock);
    bclear(d);
    pthread_mutex_unlock(&lock);
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor,
                                                   cudnnBackendAttributeName_t attributeName,
                                                   cudnnBackendAttributeType_t attributeType, int64_t elementCount,
                                                   const void *arrayOfElements)
{
    bdesc *d = descriptor;
    if (!valid(d) || elementCount < 0 || (elementCount > 0 && !arrayOfElements))
        return CUDNN_STATUS_BAD_PARAM;
    if (d->finalized)
        return CUDNN_STATUS_NOT_SUPPORTED; /* cuDNN refuses to change a finalized descriptor */
    if (attributeType == CUDNN_TYPE_BACKEND_DESCRIPTOR)
        for (int64_t i = 0; i < elementCount; i++)
            if (!valid(((bdesc *const *)arrayOfElements)[i]))
                return CUDNN_STATUS_BAD_PARAM;
    pthread_mutex_lock(&lock);
    int rc = attr_set(d, attributeName, attributeType, elementCount, arrayOfElements);
    pthread_mutex_unlock(&lock);
    return rc == 0 ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED;
}

MAYA_EXPORT cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor)
{
    bdesc *d = descriptor;
    if (!valid(d))
        return CUDNN_STATUS_BAD_PARAM;
    pthread_mutex_lock(&lock);
    cudnnStatus_t st = d->finalized ? CUDNN_STATUS_BAD_PARAM : finalize(d);
    if (st == CUDNN_STATUS_SUCCESS)
        d->finalized = 1;
    pthread_mutex_unlock(&lock);
    if (st != CUDNN_STATUS_SUCCESS && maya_cfg()->verbose)
        maya_log("cudnn: finalize of descriptor type %d -> %d\n", d->type, (int)st);
    return st;
}

/* Store an integer into element i of an array of the requested type. */
static int put_i64(int type, void *array, int64_t i, int64_t v)
{
    char *p = (char *)array + tsize(type) * (size_t)i;
    switch (type) {
    case CUDNN_TYPE_INT64: *(int64_t *)p = v; return 0;
    case CUDNN_TYPE_BOOLEAN: *(bool *)p = v != 0; return 0;
    case CUDNN_TYPE_FLOAT: *(float *)p = (float)v; return 0;
    case CUDNN_TYPE_DOUBLE: *(double *)p = (double)v; return 0;
    case CUDNN_TYPE_HANDLE:
    case CUDNN_TYPE_VOID_PTR:
    case CUDNN_TYPE_BACKEND_DESCRIPTOR:
    case CUDNN_TYPE_CHAR:
    case CUDNN_TYPE_FRACTION: return -1;
    default: *(int32_t *)p = (int32_t)v; return 0;
    }
}

static cudnnStatus_t get_attr(const bdesc *d, int name, int type, int64_t requested, int64_t *count, void *array)
{
    const battr *a = attr_find(d, name);
    if (!a) {
        if (maya_cfg()->verbose)
            maya_log("cudnn: get of unset attribute %d (type %d) on descriptor type %d\n", name, type, d->type);
        return CUDNN_STATUS_BAD_PARAM;
    }
    if (count)
        *count = a->count;
    if (!array || requested <= 0)
        return CUDNN_STATUS_SUCCESS;
    int64_t n = requested < a->count ? requested : a->count;
    if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
        if (a->type != CUDNN_TYPE_BACKEND_DESCRIPTOR)
            return CUDNN_STATUS_BAD_PARAM;
        for (int64_t i = 0; i < n; i++) {
            bdesc *dst = ((bdesc **)array)[i];
            if (!valid(dst) || bcopy_into(dst, ((bdesc **)a->data)[i]) != 0)
                return CUDNN_STATUS_BAD_PARAM;
        }
        return CUDNN_STATUS_SUCCESS;
    }
    if (type == a->type) {
        memcpy(array, a->data, tsize(type) * (size_t)n);
        return CUDNN_STATUS_SUCCESS;
    }
    if (type == CUDNN_TYPE_DOUBLE && a->type == CUDNN_TYPE_FLOAT) {
        for (int64_t i = 0; i < n; i++)
            ((double *)array)[i] = ((const float *)a->data)[i];
        return CUDNN_STATUS_SUCCESS;
    }
    if (type == CUDNN_TYPE_FLOAT && a->type == CUDNN_TYPE_DOUBLE) {
        for (int64_t i = 0; i < n; i++)
            ((float *)array)[i] = (float)((const double *)a->data)[i];
        return CUDNN_STATUS_SUCCESS;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t v;
        if (attr_i64(a, i, &v) != 0 || put_i64(type, array, i, v) != 0)
            return CUDNN_STATUS_BAD_PARAM;
    }
    return CUDNN_STATUS_SUCCESS;
}

MAYA_EXPORT cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor,
                                                   cudnnBackendAttributeName_t attributeName,
                                                   cudnnBackendAttributeType_t attributeType,
                                                   int64_t requestedElementCount, int64_t *elementCount,
                                                   void *arrayOfElements)
{
    const bdesc *d = descriptor;
    if (!valid(d) || (!elementCount && !arrayOfElements))
        return CUDNN_STATUS_BAD_PARAM;
    pthread_mutex_lock(&lock);
    cudnnStatus_t st = get_attr(d, attributeName, attributeType, requestedElementCount, elementCount,
                                arrayOfElements);
    pthread_mutex_unlock(&lock);
    return st;
}

/* Host value of a by-value float tensor in the variant pack, or dflt. */
static double byvalue_f(const bdesc *vp, int64_t uid, double dflt)
{
    const battr *u = attr_find(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS);
    const battr *p = attr_find(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
    if (!u || !p || uid < 0)
        return dflt;
    for (int64_t i = 0; i < u->count && i < p->count; i++) {
        int64_t id;
        if (attr_i64(u, i, &id) == 0 && id == uid) {
            const float *v = ((const float *const *)p->data)[i];
            return v ? (double)*v : dflt;
        }
    }
    return dflt;
}

MAYA_EXPORT cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle, cudnnBackendDescriptor_t executionPlan,
                                              cudnnBackendDescriptor_t variantPack)
{
    maya_call c = maya_enter();
    bdesc *plan = executionPlan, *vp = variantPack;
    if (!dnn_handle_ok(handle) || !valid(plan) || !valid(vp) || plan->type != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)
        return CUDNN_STATUS_BAD_PARAM;
    if (!plan->finalized || !vp->finalized)
        return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
    pthread_mutex_lock(&lock);
    const ginfo *g = plan->graph ? plan->graph->gi : NULL;
    if (!g) {
        pthread_mutex_unlock(&lock);
        return CUDNN_STATUS_BAD_PARAM;
    }
    const bdesc *cfg = get_desc(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, 0);
    dnn_record r = {.op = class_op[g->cls], .knob = DNN_NO_KNOB};
    r.workspace = (uint64_t)get_i64(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, 0, 0);
    r.engine = (uint32_t)cfg_engine_index(cfg);
    const battr *kc = cfg ? attr_find(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES) : NULL;
    for (int64_t i = 0; kc && kc->type == CUDNN_TYPE_BACKEND_DESCRIPTOR && i < kc->count; i++) {
        const bdesc *k = ((bdesc **)kc->data)[i];
        if (get_i64(k, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, 0, -1) == CUDNN_KNOB_TYPE_KERNEL_CFG)
            r.knob = (uint32_t)get_i64(k, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, 0, 0);
    }
    r.io_dtype = (uint32_t)g->io_dtype;
    r.compute_dtype = (uint32_t)g->compute_dtype;
    r.layout = (uint32_t)g->layout;
    r.flags = g->flags | DNN_F_BACKEND;
    r.graph_hash = g->hash;
    r.graph = g->words;
    r.ng = g->nw;
    switch (g->cls) {
    case G_SDPA_FWD:
    case G_SDPA_BWD: {
        dnn_sdpa s = g->s;
        s.scale = byvalue_f(vp, g->scale_uid, 0.0);
        dnn_sdpa_params(&r, &s);
        dnn_kernels_sdpa(&r, &s, g->cls == G_SDPA_BWD, g->io_dtype);
        break;
    }
    case G_CONV_FPROP:
    case G_CONV_DGRAD:
    case G_CONV_WGRAD:
        dnn_conv_params(&r, &g->cv);
        dnn_kernels_conv(&r, &g->cv, g->cls - G_CONV_FPROP, g->io_dtype, g->layout);
        break;
    default: /* no shape model: the record holds the graph's op list and count */
        r.params[0] = (uint64_t)g->nops;
        r.np = 1;
        break;
    }
    dnn_emit(handle, c, &r);
    int64_t rank = get_i64(cfg, ATTR_MAYA_RANK, 0, 20);
    int tuning = plan->nexec++ < TUNING_RUNS;
    int shapeless = g->cls == G_GENERIC || g->cls == G_MATMUL || g->cls == G_NORM_FWD || g->cls == G_NORM_BWD;
    const char *op = class_op[g->cls];
    pthread_mutex_unlock(&lock);
    if (shapeless) {
        char what[112];
        snprintf(what, sizeof what, "cudnnBackendExecute: %s graph recorded by its op list only",
                 strcmp(op, "graph") ? op : "unknown-pattern");
        maya_approximated(what);
    }
    /* Autotuning (cudnn.benchmark) times plans with CUDA events, which read
     * the emulated device clock.  Charging it in proportion to the heuristics
     * rank during a plan's first runs makes the timing pick cuDNN's first
     * choice, the same on every run. */
    if (tuning && rank > 0) maya_device_clock_advance((uint64_t)rank * RANK_CLOCK_NS);
    return CUDNN_STATUS_SUCCESS;
}

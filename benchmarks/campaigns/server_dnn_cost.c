/* Host time of one cuDNN convolution call as PyTorch makes it, on a GPU
 * server or under the interposer: the cuDNN part of the replay's host model
 * (benchmarks/campaigns/server_call_cost.cu has the other call kinds).
 *
 *   gcc -O2 -o dnn_cost benchmarks/campaigns/server_dnn_cost.c -I<cudnn>/include -I<cudart>/include \
 *       -L<cudnn>/lib -L<cudart>/lib -l:libcudnn.so.9 -l:libcudart.so.13 && ./dnn_cost
 *
 * PyTorch keeps one execution plan per convolution shape; each call sets the
 * handle's stream, builds a variant pack (the tensors' addresses and the
 * workspace), executes the plan and destroys the pack.  "dnn" times that
 * whole sequence per call; "dnn_execute" times cudnnBackendExecute alone with
 * one reused pack.  Both are issued in batches of BATCH calls on one stream
 * (a small bf16 3x3 convolution, so the device never holds the host back), a
 * batch's host time over BATCH is one sample, and the median of REPS samples
 * is printed as one JSON line (ns per call). */
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <stdint.h>

#include "call_cost.h"

#define MAX_CONFIGS 64

typedef cudnnBackendDescriptor_t desc_t;

static desc_t make(cudnnBackendDescriptorType_t type)
{
    desc_t d;
    CHECK(cudnnBackendCreateDescriptor(type, &d));
    return d;
}

static void set(desc_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t n,
                const void *value)
{
    CHECK(cudnnBackendSetAttribute(d, name, type, n, value));
}

/* An NHWC bf16 tensor of dims (n, c, h, w). */
static desc_t tensor(int64_t uid, int64_t n, int64_t c, int64_t h, int64_t w)
{
    desc_t t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    cudnnDataType_t dtype = CUDNN_DATA_BFLOAT16;
    int64_t dims[4] = {n, c, h, w}, strides[4] = {c * h * w, 1, w * c, c}, align = 16;
    set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dtype);
    set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
    set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
    set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    CHECK(cudnnBackendFinalize(t));
    return t;
}

/* The execution plan of a 3x3, pad 1 forward convolution of (N, C, H, W) into K channels:
 * the first engine configuration of heuristics mode A that finalizes. */
static desc_t conv_plan(cudnnHandle_t h, int64_t N, int64_t C, int64_t H, int64_t W, int64_t K,
                        int64_t *workspace)
{
    desc_t x = tensor('x', N, C, H, W), w = tensor('w', K, C, 3, 3), y = tensor('y', N, K, H, W);
    desc_t conv = make(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    int64_t dims = 2, one[2] = {1, 1}, pad[2] = {1, 1};
    set(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    set(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
    set(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims);
    set(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, one);
    set(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, one);
    set(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
    set(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
    CHECK(cudnnBackendFinalize(conv));

    desc_t op = make(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
    float alpha = 1.0f, beta = 0.0f;
    set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w);
    set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv);
    set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
    set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
    CHECK(cudnnBackendFinalize(op));

    desc_t graph = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op);
    set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
    CHECK(cudnnBackendFinalize(graph));

    desc_t heur = make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    cudnnBackendHeurMode_t heur_mode = CUDNN_HEUR_MODE_A;
    set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
    set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &heur_mode);
    CHECK(cudnnBackendFinalize(heur));
    desc_t configs[MAX_CONFIGS];
    for (int i = 0; i < MAX_CONFIGS; i++) configs[i] = make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    int64_t count = 0;
    CHECK(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                   MAX_CONFIGS, &count, configs));
    for (int64_t i = 0; i < count; i++) {
        desc_t plan = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
        set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
        set(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &configs[i]);
        if (cudnnBackendFinalize(plan) == CUDNN_STATUS_SUCCESS) {
            int64_t n = 0;
            CHECK(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                           workspace));
            return plan;
        }
        cudnnBackendDestroyDescriptor(plan);
    }
    fprintf(stderr, "no engine configuration of %lld finalizes an execution plan\n", (long long)count);
    exit(1);
}

static desc_t variant_pack(void **pointers, void *workspace)
{
    static const int64_t uids[3] = {'x', 'w', 'y'};
    desc_t pack = make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, pointers);
    set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
    set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
    CHECK(cudnnBackendFinalize(pack));
    return pack;
}

enum { CALL, EXECUTE, KINDS };
static const char *NAMES[KINDS] = {"dnn", "dnn_execute"};

struct calls {
    cudaStream_t s;
    cudnnHandle_t h;
    desc_t plan, reused;
    void *pointers[3], *workspace;
};

static void batch(int kind, void *ctx)
{
    struct calls *c = ctx;
    for (int i = 0; i < BATCH; i++) {
        if (kind == CALL) {
            CHECK(cudnnSetStream(c->h, c->s));
            desc_t pack = variant_pack(c->pointers, c->workspace);
            CHECK(cudnnBackendExecute(c->h, c->plan, pack));
            CHECK(cudnnBackendDestroyDescriptor(pack));
        } else {
            CHECK(cudnnBackendExecute(c->h, c->plan, c->reused));
        }
    }
}

static void drain(void *ctx) { CHECK(cudaStreamSynchronize(((struct calls *)ctx)->s)); }

int main(void)
{
    const int64_t N = 1, C = 32, H = 8, W = 8, K = 32;
    struct calls c = {.workspace = NULL};
    CHECK(cudaStreamCreateWithFlags(&c.s, cudaStreamNonBlocking));
    CHECK(cudnnCreate(&c.h));
    CHECK(cudnnSetStream(c.h, c.s));
    int64_t ws_bytes = 0;
    c.plan = conv_plan(c.h, N, C, H, W, K, &ws_bytes);
    CHECK(cudaMalloc(&c.pointers[0], N * C * H * W * 2));
    CHECK(cudaMalloc(&c.pointers[1], K * C * 9 * 2));
    CHECK(cudaMalloc(&c.pointers[2], N * K * H * W * 2));
    if (ws_bytes > 0) CHECK(cudaMalloc(&c.workspace, (size_t)ws_bytes));
    c.reused = variant_pack(c.pointers, c.workspace);
    printf("{");
    for (int k = 0; k < KINDS; k++) printf("%s\"%s\": %.1f", k ? ", " : "", NAMES[k], ns_per_call(batch, drain, k, &c));
    printf(", \"workspace_bytes\": %lld}\n", (long long)ws_bytes);
    return 0;
}

/* Unit tests of approximations and unknown calls (src/unsupported.c and its
 * callers), no CUDA process needed:
 * - maya_approximated counts each name and writes one APPROXIMATED record per
 *   occurrence, naming it through an interned string;
 * - an unknown cuFuncGetAttribute / cuDeviceGetAttribute / cudaDeviceGetAttribute
 *   attribute, and a memory-pool reuse policy, is answered 0 and counted;
 *   known ones are not;
 * - kernel argument indices: a signature that cannot be split gives none and
 *   is counted; an index beyond the parameter list is never read and counted;
 * - cudnnBackendFinalize of a descriptor type nothing checks is counted, of a
 *   listed one is not; executing a graph of no known pattern is counted;
 * - a driver symbol nobody emulates: cuGetProcAddress says "not found" and the
 *   trace gets an UNSUPPORTED record; an explicit version we do not hold is
 *   answered with ours and counted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cudnn.h>

#include "check.h"
#include "own_trace.h"
#include "rt.h"

/* Records of `kind` in the trace of this process whose a0 names the string `name`. */
static int count_records(const char *dir, uint8_t kind, const char *name) {
    size_t nslots;
    const maya_rec *recs = own_trace(dir, &nslots);
    if (!nslots) return -1;
    uint64_t id = 0;  /* the string's id, once its STRING record is seen */
    int found = 0;
    for (size_t i = 0; i < nslots; i++) {
        if (recs[i].kind == MK_STRING && recs[i].a32 == strlen(name) && i + 1 < nslots) {
            char text[512] = {0};
            size_t len = recs[i].a32 < sizeof text - 1 ? recs[i].a32 : sizeof text - 1;
            for (size_t k = 0; k < len; k++)  /* text fills bytes 8..63 of the continuation slots */
                text[k] = ((const char *)&recs[i + 1 + k / MAYA_CONT_BYTES])[8 + k % MAYA_CONT_BYTES];
            if (!strcmp(text, name)) id = recs[i].a[0];
        }
        if (recs[i].kind == kind && id && recs[i].a[0] == id) found++;
    }
    return found;
}

static void test_counting(const char *dir) {
    const char *what = "test: an approximation";
    CHECK(maya_approximated_count(what) == 0);
    int before = maya_approximated_count(NULL);
    maya_approximated(what);
    char copy[64];
    snprintf(copy, sizeof copy, "%s", what);  /* the name is copied, not kept by pointer */
    maya_approximated(copy);
    memset(copy, 'x', sizeof copy - 1);
    CHECK(maya_approximated_count(what) == 2);
    CHECK(maya_approximated_count(NULL) == before + 2);
    CHECK(count_records(dir, MK_APPROXIMATED, what) == 2);
}

static void test_attributes(const char *dir) {
    maya_registry_add((const void *)0x1234, "_Z6kernelPf");
    maya_func *f = maya_registry_get((const void *)0x1234);
    int v = -1;
    CHECK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, (CUfunction)f) == CUDA_SUCCESS && v == f->num_regs);
    CHECK(maya_approximated_count(NULL) == 2);  /* only test_counting's */
    v = -1;
    CHECK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, (CUfunction)f) == CUDA_SUCCESS && v == 0);
    CHECK(maya_approximated_count("cuFuncGetAttribute: attribute 3 answered 0") == 1);
    CHECK(count_records(dir, MK_APPROXIMATED, "cuFuncGetAttribute: attribute 3 answered 0") == 1);

    CHECK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0) == CUDA_SUCCESS && v == 132);
    CHECK(cuDeviceGetAttribute(&v, (CUdevice_attribute)100000, 0) == CUDA_SUCCESS && v == 0);
    CHECK(maya_approximated_count("cuDeviceGetAttribute: attribute 100000 answered 0") == 1);
    CHECK(cudaDeviceGetAttribute(&v, (enum cudaDeviceAttr)100000, 0) == cudaSuccess && v == 0);
    CHECK(maya_approximated_count("cudaDeviceGetAttribute: attribute 100000 answered 0") == 1);

    cudaMemPool_t pool;
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0) == cudaSuccess);
    uint64_t used = 1;
    CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used) == cudaSuccess && used == 0);
    int reuse = -1;
    CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &reuse) == cudaSuccess && reuse == 0);
    char what[96];
    snprintf(what, sizeof what, "cudaMemPoolGetAttribute: attribute %d answered 0",
             (int)cudaMemPoolReuseAllowOpportunistic);
    CHECK(maya_approximated_count(what) == 1);
}

static void test_kernel_args(void) {
    const char *unsplit = "kernel arguments: demangled signature not split, integer arguments not recorded";
    const char *beyond = "kernel arguments: parameter index beyond the signature, integer arguments not recorded";
    maya_func f = {0};
    /* A stray '>' in a parameter type (an operator in a template argument) unbalances the list. */
    CHECK(maya_kernel_integer_params("void k(foo<(1)>(2)>, int)", &f) == 0);
    CHECK(f.n_params == -1 && f.n_ints == 0 && maya_approximated_count(unsplit) == 1);
    CHECK(maya_kernel_integer_params("void k(int, float*, long)", &f) == 2);
    CHECK(f.n_params == 3 && f.int_index[1] == 2 && maya_approximated_count(unsplit) == 1);
    CHECK(maya_kernel_integer_params("void k()", &f) == 0 && f.n_params == 0);
    CHECK(maya_kernel_integer_params("triton_poi_fused_add_0", &f) == 0 && f.n_params == 0);
    CHECK(maya_approximated_count(unsplit) == 1);

    /* An index the parameter count does not cover is never read. */
    CHECK(maya_kernel_integer_params("void k(int, long)", &f) == 2);
    int32_t a = 7;
    int64_t b = 9;
    void *args[] = {&a, &b};
    uint64_t out[MAYA_KERNEL_INTS];
    CHECK(maya_kernel_integer_args(&f, args, 1, 1, out) == 2 && out[0] == 7 && out[1] == 9);
    CHECK(maya_approximated_count(beyond) == 0);
    f.n_params = 1;  /* as if the kernel had one parameter: args[1] does not exist */
    CHECK(maya_kernel_integer_args(&f, args, 1, 1, out) == 0);
    CHECK(maya_approximated_count(beyond) == 1);

    /* An attention kernel's parameter struct whose sizes are out of range (not the layout expected):
     * nothing recorded, and counted. */
    const char *attention = "kernel arguments: attention parameters out of range, not recorded";
    CHECK(maya_kernel_integer_params("fmha_cutlassB_f32_aligned_64x64_k64_sm80(PyTorchMemEffAttention::"
                                     "AttentionBackwardKernel<cutlass::arch::Sm80, float, true, false, false, 64, "
                                     "64, 64, false>::Params)", &f) == 0 && f.attention);
    unsigned char params[256] = {0};
    void *launch[] = {params};
    CHECK(maya_kernel_integer_args(&f, launch, 1, 1, out) == 0 && maya_approximated_count(attention) == 1);
}

static cudnnBackendDescriptor_t desc(cudnnBackendDescriptorType_t type) {
    cudnnBackendDescriptor_t d = NULL;
    CHECK(cudnnBackendCreateDescriptor(type, &d) == CUDNN_STATUS_SUCCESS);
    return d;
}

static void set_desc(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendDescriptor_t v) {
    CHECK(cudnnBackendSetAttribute(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v) == CUDNN_STATUS_SUCCESS);
}

static cudnnBackendDescriptor_t tensor(int64_t uid) {
    cudnnBackendDescriptor_t t = desc(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    cudnnDataType_t dt = CUDNN_DATA_FLOAT;
    int64_t dims[3] = {1, 8, 8}, strides[3] = {64, 8, 1}, align = 16;
    CHECK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt) == 0);
    CHECK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 3, dims) == 0);
    CHECK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 3, strides) == 0);
    CHECK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid) == 0);
    CHECK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align) == 0);
    CHECK(cudnnBackendFinalize(t) == CUDNN_STATUS_SUCCESS);
    return t;
}

static void test_cudnn(void) {
    const char *unchecked = "cudnnBackendFinalize: descriptor type 27 accepted unchecked";
    cudnnBackendDescriptor_t concat = desc(CUDNN_BACKEND_OPERATION_CONCAT_DESCRIPTOR);
    CHECK(cudnnBackendFinalize(concat) == CUDNN_STATUS_SUCCESS && maya_approximated_count(unchecked) == 1);
    /* A reshape is checked for its two tensors, and so is no approximation. */
    int after_concat = maya_approximated_count(NULL);
    cudnnBackendDescriptor_t reshape = desc(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    CHECK(cudnnBackendFinalize(reshape) == CUDNN_STATUS_BAD_PARAM);
    cudnnBackendDescriptor_t rx = tensor(7), ry = tensor(8);
    set_desc(reshape, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, rx);
    set_desc(reshape, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, ry);
    CHECK(cudnnBackendFinalize(reshape) == CUDNN_STATUS_SUCCESS);
    CHECK(maya_approximated_count(NULL) == after_concat);

    /* A graph of one ReLU: none of the patterns the analysis knows. */
    int before = maya_approximated_count(NULL);
    cudnnBackendDescriptor_t pw = desc(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    cudnnPointwiseMode_t mode = CUDNN_POINTWISE_RELU_FWD;
    CHECK(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode) == 0);
    CHECK(cudnnBackendFinalize(pw) == CUDNN_STATUS_SUCCESS);
    cudnnBackendDescriptor_t x = tensor(1), y = tensor(2);
    cudnnBackendDescriptor_t op = desc(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
    set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    CHECK(cudnnBackendFinalize(op) == CUDNN_STATUS_SUCCESS);
    cudnnHandle_t h;
    CHECK(cudnnCreate(&h) == CUDNN_STATUS_SUCCESS);
    cudnnBackendDescriptor_t graph = desc(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    set_desc(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, op);
    CHECK(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h) == 0);
    CHECK(cudnnBackendFinalize(graph) == CUDNN_STATUS_SUCCESS);
    cudnnBackendDescriptor_t engine = desc(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    set_desc(engine, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, graph);
    int64_t index = 0;
    CHECK(cudnnBackendSetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &index) == 0);
    CHECK(cudnnBackendFinalize(engine) == CUDNN_STATUS_SUCCESS);
    cudnnBackendDescriptor_t cfg = desc(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    set_desc(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, engine);
    CHECK(cudnnBackendFinalize(cfg) == CUDNN_STATUS_SUCCESS);
    cudnnBackendDescriptor_t plan = desc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    set_desc(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfg);
    CHECK(cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h) == 0);
    CHECK(cudnnBackendFinalize(plan) == CUDNN_STATUS_SUCCESS);
    cudnnBackendDescriptor_t vp = desc(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    int64_t uids[2] = {1, 2};
    void *ptrs[2] = {(void *)0x1000, (void *)0x2000};
    CHECK(cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 2, uids) == 0);
    CHECK(cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 2, ptrs) == 0);
    CHECK(cudnnBackendFinalize(vp) == CUDNN_STATUS_SUCCESS);
    CHECK(maya_approximated_count(NULL) == before);  /* every descriptor so far is one the emulation reads */
    CHECK(cudnnBackendExecute(h, plan, vp) == CUDNN_STATUS_SUCCESS);
    CHECK(cudnnBackendExecute(h, plan, vp) == CUDNN_STATUS_SUCCESS);
    CHECK(maya_approximated_count("cudnnBackendExecute: unknown-pattern graph recorded by its op list only") == 2);
    CHECK(maya_approximated_count(NULL) == before + 2);
}

static void test_driver_symbols(const char *dir) {
    void *fn = (void *)1;
    CUdriverProcAddressQueryResult st;
    int before = maya_unsupported_count();
    CHECK(cuGetProcAddress("cuNoSuchEntryPoint", &fn, 13000, 0, &st) == CUDA_ERROR_NOT_FOUND);
    CHECK(fn == NULL && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    enum cudaDriverEntryPointQueryResult rst;
    fn = (void *)1;
    CHECK(cudaGetDriverEntryPoint("cuNoSuchEntryPoint", &fn, 0, &rst) == cudaSuccess);
    CHECK(fn == NULL && rst == cudaDriverEntryPointSymbolNotFound);
    CHECK(maya_unsupported_count() == before + 2);
    CHECK(count_records(dir, MK_UNSUPPORTED, "cuNoSuchEntryPoint") == 2);

    /* The unversioned name is cuda.h's: served exactly, nothing approximated. */
    int approx = maya_approximated_count(NULL);
    CHECK(cuGetProcAddress("cuMemAlloc", &fn, 13000, 0, &st) == CUDA_SUCCESS && fn == (void *)cuMemAlloc_v2);
    CHECK(maya_approximated_count(NULL) == approx);
    CHECK(cuGetProcAddress("cuMemAlloc_v3", &fn, 13000, 0, &st) == CUDA_SUCCESS && fn == (void *)cuMemAlloc_v2);
    CHECK(maya_approximated_count("cuGetProcAddress: cuMemAlloc_v3 answered with cuMemAlloc_v2") == 1);
}

int main(void) {
    char dir[] = "/tmp/maya-approx-test-XXXXXX";
    if (!emulate_into(dir)) return 2;
    test_counting(dir);
    test_attributes(dir);
    test_kernel_args();
    test_cudnn();
    test_driver_symbols(dir);
    char path[600];
    snprintf(path, sizeof path, "%s/rank0.mayatrace", dir);
    unlink(path);
    rmdir(dir);
    return CHECK_SUMMARY("test_approximated");
}

/* Unit tests of the interposer's own pieces, no CUDA process needed:
 * - range allocator: alignment, exhaustion, coalescing, lookups;
 * - GPU spec parsing;
 * - device memory: capacity enforced with the driver's 2 MiB granule, frees;
 * - kernel registry: add, lookup, rename, demangling;
 * - integer arguments of launches, and what multi_tensor_apply launches cover (their list metadata);
 * - trace writer: header, thread naming, head records, continuation slots,
 *   interned strings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "maya.h"



static void test_ranges(void) {
    maya_ranges *r = maya_ranges_new(0x10000, 0x10000);
    uint64_t a = maya_ranges_alloc(r, 100, 256);
    uint64_t b = maya_ranges_alloc(r, 0x1000, 0x1000);
    CHECK(a == 0x10000);
    CHECK(b % 0x1000 == 0 && b >= a + 100);
    uint64_t size = 0;
    CHECK(maya_ranges_find(r, a + 50, &size) == a && size == 100);
    CHECK(maya_ranges_find(r, a + 100, NULL) == 0);
    CHECK(maya_ranges_alloc(r, 0x20000, 1) == 0);  /* larger than the span */
    CHECK(maya_ranges_release(r, a + 1) == 0);      /* not an allocation start */
    CHECK(maya_ranges_release(r, a) == 100);
    CHECK(maya_ranges_release(r, b) == 0x1000);
    /* Everything coalesced back: the whole span is one free range again. */
    CHECK(maya_ranges_alloc(r, 0x10000, 1) == 0x10000);
    maya_ranges_free_all(r);
}

static void test_spec(void) {
    maya_gpu g;
    memset(&g, 0, sizeof g);
    CHECK(maya_parse_spec(TEST_SPEC, &g) == 0);
    CHECK(!strcmp(g.name, "TEST-GPU") && g.cc_major == 9 && g.cc_minor == 0 && g.sm_count == 132);
    CHECK(g.memory_bytes == 1073741824ull);
    maya_gpu bad;
    memset(&bad, 0, sizeof bad);
    CHECK(maya_parse_spec("name=X;sms=1", &bad) != 0);  /* no memory, no cc */
}

static void test_memory(void) {
    uint64_t p = 0, q = 0;
    CHECK(maya_mem_alloc(0, 100 << 20, &p) == 0 && p);
    CHECK(maya_mem_device_of(p) == 0 && maya_mem_device_of(p + (99 << 20)) == 0);
    CHECK(maya_mem_device_of((uint64_t)&p) == -1);
    CHECK(maya_mem_used(0) == (100u << 20));
    /* 1 GiB card: 900 MiB more fits, 1 MiB beyond that does not. */
    CHECK(maya_mem_alloc(0, 1000u << 20, &q) != 0);
    CHECK(maya_mem_oom_count() == 1);
    CHECK(maya_mem_alloc(0, 924u << 20, &q) == 0);
    uint64_t free_bytes, total;
    maya_mem_info(0, &free_bytes, &total);
    CHECK(free_bytes == 0 && total == 1073741824ull);
    /* A 1-byte allocation still takes a 2 MiB granule of capacity. */
    uint64_t r;
    CHECK(maya_mem_alloc(0, 1, &r) != 0);
    uint64_t size = 0;
    CHECK(maya_mem_free(0, q, &size) == 0 && size == (924u << 20));
    CHECK(maya_mem_alloc(0, 1, &r) == 0);
    CHECK(maya_mem_used(0) == (102u << 20));
    /* Small copies really land in device memory and read back. */
    char buf[16] = "round trip!", out[16] = {0};
    CHECK(maya_mem_copy((void *)r, buf, sizeof buf) == 1);
    CHECK(maya_mem_copy(out, (void *)r, sizeof out) == 1 && !strcmp(out, "round trip!"));
    CHECK(maya_mem_copy((void *)p, buf, (uint64_t)maya_cfg()->copy_limit + 1) == 0);  /* large: recorded only */
    CHECK(maya_mem_free(0, p, NULL) == 0 && maya_mem_free(0, p, NULL) != 0);
    CHECK(maya_mem_peak(0) == 1024ull << 20);
}

static int stub_a;
static char stub_b[200000];

static void test_registry(void) {
    maya_registry_add(&stub_a, "_Z6kernelPfi");
    maya_registry_add(stub_b, "plain_kernel");
    maya_func *f = maya_registry_get(&stub_a);
    CHECK(f && !strcmp(f->name, "_Z6kernelPfi"));
    CHECK(maya_registry_get(&failures) == NULL);
    char *d = maya_demangle(f->name);
    CHECK(d && !strcmp(d, "kernel(float*, int)"));
    free(d);
    CHECK(maya_demangle("plain_kernel") == NULL);
    for (int i = 1; i < 100000; i++) maya_registry_add(stub_b + i, "many");  /* forces growth */
    CHECK(maya_registry_get(&stub_a) == f && maya_registry_get(stub_b + 5000)->name[0] == 'm');
}

/* Integer parameters found in demangled signatures, read from a launch's args. */
/* Writes a 4-byte word into a by-value argument's bytes (a parameter struct). */
static void put32(unsigned char *p, size_t offset, int32_t v) { memcpy(p + offset, &v, 4); }

/* A multi_tensor_apply kernel's tensor list metadata, as torch 2.11 lays it out: list addresses, element
 * counts (at `numel`), then each block's tensor (at `b2t`) and chunk (at `b2c`). */
static void put64(unsigned char *p, size_t offset, uint64_t v) { memcpy(p + offset, &v, 8); }

static void test_tensor_lists(void) {
    static const char *const kernel =
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
        "%s, at::native::(anonymous namespace)::UnaryOpFunctor<float, 2, 1, 1>, std::sqrt<float> >"
        "(at::native::(anonymous namespace)::%s, at::native::(anonymous namespace)::UnaryOpFunctor<float, 2, 1, 1>, "
        "std::sqrt<float>)";
    static const struct { const char *type; int depth, tensors, numel, b2t; } layouts[] = {
        {"TensorListMetadata<2>", 2, 64, 2 * 64 * 8, 2 * 64 * 8 + 64 * 8},
        {"TensorListScalarListMetadata<float, 1>", 1, 96, 96 * 8, 96 * 8 + 96 * 8 + 96 * 4},
        {"FusedOptimizerTensorListMetadata<4>", 4, 36, 4 * 36 * 8, 4 * 36 * 8 + 36 * 8 + 36 * 8},
    };
    for (size_t i = 0; i < sizeof layouts / sizeof *layouts; i++) {
        char name[1024];
        snprintf(name, sizeof name, kernel, layouts[i].type, layouts[i].type);
        maya_func f = {0};
        maya_kernel_integer_params(name, &f);
        CHECK(f.lists.depth == layouts[i].depth && f.lists.tensors == layouts[i].tensors);
        CHECK(f.lists.numel == layouts[i].numel && f.lists.block_to_tensor == layouts[i].b2t);
        CHECK(f.lists.block_to_chunk == layouts[i].b2t + 320);
        /* Tensor 0 of 100000 elements in two chunks, tensor 1 of 1001 (no multiple of 4: its block runs
         * off the vectorised path), tensor 2 of 4096 at an address 8 bytes off. */
        static unsigned char meta[4096];
        memset(meta, 0, sizeof meta);
        for (int d = 0; d < f.lists.depth; d++)
            for (int t = 0; t < 3; t++) put64(meta, 8 * ((size_t)d * f.lists.tensors + t), 0x100000 * (t + 1));
        put64(meta, 8 * (size_t)(f.lists.depth - 1) * f.lists.tensors + 8 * 2, 0x300008);
        put64(meta, f.lists.numel, 100000);
        put64(meta, f.lists.numel + 8, 1001);
        put64(meta, f.lists.numel + 16, 4096);
        const unsigned char tensor[4] = {0, 0, 1, 2};
        const int32_t chunk[4] = {0, 1, 0, 0};
        for (int b = 0; b < 4; b++) {
            meta[f.lists.block_to_tensor + b] = tensor[b];
            memcpy(meta + f.lists.block_to_chunk + 4 * b, &chunk[b], 4);
        }
        void *args[] = {meta, NULL, NULL};
        uint64_t out[MAYA_KERNEL_INTS] = {0};
        CHECK(maya_kernel_integer_args(&f, args, 4, 1, out) == 3);
        CHECK(out[0] == 100000 + 1001 + 4096 && out[1] == 1001 + 4096 && out[2] == 3);
        CHECK(maya_kernel_integer_args(&f, args, 3, 1, out) == 3 && out[0] == 100000 + 1001 && out[2] == 2);
        /* A block past a tensor's end, or a grid larger than the struct holds, is no layout of ours. */
        int before = maya_approximated_count(NULL);
        CHECK(maya_kernel_integer_args(&f, args, 321, 1, out) == 0);
        put64(meta, f.lists.numel, 1000);
        CHECK(maya_kernel_integer_args(&f, args, 4, 1, out) == 0 && maya_approximated_count(NULL) == before + 2);
        meta[f.lists.block_to_tensor] = 200;  /* a tensor the struct has no count for: nothing is read */
        CHECK(maya_kernel_integer_args(&f, args, 1, 1, out) == 0 && maya_approximated_count(NULL) == before + 3);
    }
    maya_func other = {0};
    maya_kernel_integer_params("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<"
                               "at::native::(anonymous namespace)::TensorListScalarListMetadata<c10::complex<double>, 1>, "
                               "F>(at::native::(anonymous namespace)::TensorListScalarListMetadata<c10::complex<double>, 1>, F)",
                               &other);
    CHECK(other.lists.depth == 0);  /* a layout of its own: not read */
}

static void test_cat_inputs(void) {
    static const char name[] =
        "void at::native::(anonymous namespace)::CatArrayBatchedCopy_vectorized<at::native::(anonymous namespace)::"
        "OpaqueType<2u>, unsigned int, 2, 64, 64, 16, 8>(char*, at::native::(anonymous namespace)::"
        "CatArrInputTensorMetadata<at::native::(anonymous namespace)::OpaqueType<2u>, unsigned int, 64, 64>, "
        "at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)";
    maya_func f = {0};
    maya_kernel_integer_params(name, &f);
    CHECK(f.cat.batch == 64 && f.cat.bytes == 2 && f.n_params == 5);
    /* Three inputs of 1000, 24 and 4096 elements: their counts follow 64 addresses, offsets and dimSizes. */
    static unsigned char meta[64 * 17 + 64 * 32];
    memset(meta, 0xff, sizeof meta);  /* slots past the launch's inputs hold whatever the stack held */
    const uint32_t counts[3] = {1000, 24, 4096};
    memcpy(meta + 64 * 16, counts, sizeof counts);
    void *args[] = {NULL, meta, NULL, NULL, NULL};
    uint64_t out[MAYA_KERNEL_INTS] = {0};
    CHECK(maya_kernel_integer_args(&f, args, 296 * 3, 3, out) == 3);
    CHECK(out[0] == 1000 + 24 + 4096 && out[1] == 3 && out[2] == 2);
    CHECK(maya_kernel_integer_args(&f, args, 296, 1, out) == 3 && out[0] == 1000 && out[1] == 1);
    int before = maya_approximated_count(NULL);
    CHECK(maya_kernel_integer_args(&f, args, 296 * 65, 65, out) == 0);  /* more inputs than the struct holds */
    CHECK(maya_approximated_count(NULL) == before + 1);
    maya_func other = {0};  /* another index type: a layout of its own, its integer arguments read as before */
    maya_kernel_integer_params("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned long, 2, 64, 64>"
                               "(float*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<float, unsigned long, "
                               "64, 64>, at::native::(anonymous namespace)::TensorSizeStride<unsigned long, 4u>, int, "
                               "unsigned long)", &other);
    CHECK(other.cat.batch == 0 && other.n_ints == 2);
}

static void test_kernel_integer_args(void) {
    maya_func f = {0};
    CHECK(maya_kernel_integer_params(
              "void at::native::(anonymous namespace)::EmbeddingBag_updateOutputKernel_sum_mean<float, long>"
              "(long const*, long const*, float const*, float*, long*, long, long, long, long, long, long*, "
              "float const*, long, long*, long)", &f) == 6);
    CHECK(f.int_index[0] == 5 && f.int_size[0] == 8 && f.int_index[5] == 12);
    /* Parentheses and commas inside template arguments and lambdas are not parameters. */
    CHECK(maya_kernel_integer_params(
              "void at::native::vectorized_elementwise_kernel<4, at::native::fill(int, long)::{lambda(float, int)#1}, "
              "std::array<char*, 1ul> >(int, at::native::fill(int, long)::{lambda(float, int)#1}, "
              "std::array<char*, 1ul>)", &f) == 1);
    CHECK(f.int_index[0] == 0 && f.int_size[0] == 4);
    CHECK(maya_kernel_integer_params("void k(unsigned int, float, unsigned long long, bool)", &f) == 2);
    CHECK(f.int_index[1] == 2 && f.int_size[1] == 8);
    CHECK(maya_kernel_integer_params("nvjet_sm90_tst_128x256", &f) == 0);
    CHECK(maya_kernel_integer_params(NULL, &f) == 0);
    CHECK(maya_kernel_integer_params("void k(int*, float)", &f) == 0);

    CHECK(maya_kernel_integer_params("void k(float*, int, long, double)", &f) == 2);
    float *p = NULL;
    int32_t n = -3;
    int64_t m = 1ll << 40;
    double d = 1.0;
    void *args[] = {&p, &n, &m, &d};
    uint64_t out[MAYA_KERNEL_INTS];
    CHECK(maya_kernel_integer_args(&f, args, 1, 1, out) == 2);
    CHECK(out[0] == (uint64_t)-3 && out[1] == (uint64_t)m);
    CHECK(maya_kernel_integer_args(&f, NULL, 1, 1, out) == 0);

    /* PyTorch's strided elementwise kernel: after N, its closure's OffsetCalculator (dims, innermost
     * size, the output's and first input's innermost byte strides), as torch 2.11 lays it out. */
    static const char strided[] =
        "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<"
        "at::native::CUDAFunctor_add<c10::BFloat16> >(at::TensorIteratorBase&, "
        "at::native::CUDAFunctor_add<c10::BFloat16> const&)::{lambda(int)#1}>(int, "
        "at::native::gpu_kernel_impl_nocast<at::native::CUDAFunctor_add<c10::BFloat16> >("
        "at::TensorIteratorBase&, at::native::CUDAFunctor_add<c10::BFloat16> const&)::{lambda(int)#1})";
    CHECK(maya_kernel_integer_params(strided, &f) == 1 && f.strided && f.n_params == 2);
    unsigned char closure[4 + 12 * 25 + 4 * 25 * 3] = {0};
    int32_t dims = 3, numel = 32768;
    uint32_t sizes[3] = {16, 64, 32}, strides[6] = {2, 128, 2, 32, 2, 64};
    memcpy(closure, &dims, 4);
    for (int i = 0; i < 3; i++) memcpy(closure + 4 + 12 * i, &sizes[i], 4);
    memcpy(closure + 304, strides, sizeof strides);
    void *launch[] = {&numel, closure};
    CHECK(maya_kernel_integer_args(&f, launch, 1, 1, out) == 5);
    CHECK(out[0] == 32768 && out[1] == 3 && out[2] == 16 && out[3] == 2 && out[4] == 128);
    dims = 0;  /* not an OffsetCalculator: only N */
    memcpy(closure, &dims, 4);
    CHECK(maya_kernel_integer_args(&f, launch, 1, 1, out) == 1 && out[0] == 32768);
    /* Other elementwise kernels keep their integer arguments alone. */
    CHECK(maya_kernel_integer_params(
              "void at::native::elementwise_kernel<128, 4, at::native::index_put_kernel_impl(int)::{lambda(int)#1}>"
              "(int, at::native::index_put_kernel_impl(int)::{lambda(int)#1})", &f) == 1 && !f.strided);

    /* Attention kernels: six words from their parameter struct (batch, heads, query and key lengths,
     * head dimension, mask word: bit 0 causal, bit 2 a bias, value head dimension from bit 8). */
    unsigned char params[512];
    void *attn[] = {params, &numel};
    CHECK(maya_kernel_integer_params(
              "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 64, 4, false, false, "
              "cutlass::bfloat16_t, Flash_kernel_traits<64, 128, 64, 4, cutlass::bfloat16_t> >, true, true, false, "
              "false, true, true, false>(pytorch_flash::Flash_fwd_params)", &f) == 0 && f.n_params == 1);
    memset(params, 0, sizeof params);
    put32(params, 96, 5);    /* h */
    put32(params, 176, 3);   /* b */
    put32(params, 180, 200); /* seqlen_q */
    put32(params, 184, 328); /* seqlen_k */
    put32(params, 192, 64);  /* d */
    put32(params, 392, 0);   /* window_size_right: causal */
    CHECK(maya_kernel_integer_args(&f, attn, 1, 1, out) == 6);
    CHECK(out[0] == 3 && out[1] == 5 && out[2] == 200 && out[3] == 328 && out[4] == 64 && out[5] == (1 | 64 << 8));
    put32(params, 392, -1);  /* not causal */
    CHECK(maya_kernel_integer_args(&f, attn, 1, 1, out) == 6 && out[5] == 64 << 8);
    /* The flash backward's dQ conversion takes the struct and an int: the struct's words. */
    CHECK(maya_kernel_integer_params(
              "void pytorch_flash::flash_bwd_convert_dq_kernel<Flash_bwd_kernel_traits<64, 128, 128, 8, 4, 4, 4, "
              "false, false, cutlass::bfloat16_t, Flash_kernel_traits<64, 128, 128, 8, cutlass::bfloat16_t> > >"
              "(pytorch_flash::Flash_bwd_params, int)", &f) == 1);
    CHECK(maya_kernel_integer_args(&f, attn, 1, 1, out) == 6 && out[3] == 328);

    CHECK(maya_kernel_integer_params(
              "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t, "
              "cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)", &f) == 0);
    memset(params, 0, sizeof params);
    void *bias_ptr = params;
    memcpy(params + 24, &bias_ptr, 8);    /* attn_bias_ptr */
    put32(params, 96, 64);   /* head_dim */
    put32(params, 100, 32);  /* head_dim_value */
    put32(params, 104, 200); /* num_queries */
    put32(params, 108, 328); /* num_keys */
    params[116] = 2;                      /* custom_mask_type: causal from the bottom right */
    put32(params, 192, 3);   /* num_batches */
    put32(params, 196, 5);   /* num_heads */
    CHECK(maya_kernel_integer_args(&f, attn, 1, 1, out) == 6);
    CHECK(out[0] == 3 && out[1] == 5 && out[2] == 200 && out[3] == 328 && out[4] == 64 && out[5] == (1 | 4 | 32 << 8));

    CHECK(maya_kernel_integer_params(
              "fmha_cutlassB_bf16_aligned_64x64_k64_sm80(PyTorchMemEffAttention::AttentionBackwardKernel<"
              "cutlass::arch::Sm80, cutlass::bfloat16_t, true, false, true, 64, 64, 64, false>::Params)", &f) == 0);
    memset(params, 0, sizeof params);
    put32(params, 144, 64);  /* head_dim */
    put32(params, 148, 64);  /* head_dim_value */
    put32(params, 152, 200); /* num_queries */
    put32(params, 156, 328); /* num_keys */
    put32(params, 160, 5);   /* num_heads */
    CHECK(maya_kernel_integer_args(&f, attn, 1, 1, out) == 6);
    CHECK(out[0] == 0 && out[1] == 5 && out[2] == 200 && out[3] == 328 && out[4] == 64 && out[5] == 64 << 8);
    /* A kernel that merely takes a Params struct is no attention kernel. */
    CHECK(maya_kernel_integer_params("void k(Foo::Params, int)", &f) == 1 && !f.attention);
}

static void test_trace(const char *dir) {
    maya_rec r;
    maya_rec_init(&r, MK_MEMSET, maya_enter());
    r.a[0] = 42;
    r.a[4] = 7;
    maya_emit(&r);
    uint64_t words[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    maya_rec_init(&r, MK_BLAS, maya_enter());
    maya_emit_ext(&r, words, 9);
    char long_name[200];
    memset(long_name, 'k', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = 0;
    uint64_t id = maya_str(long_name);
    CHECK(id > 0 && maya_str(long_name) == id && maya_str("other") != id);
    maya_trace_flush();

    char path[600];
    snprintf(path, sizeof path, "%s/rank0.mayatrace", dir);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (!f) return;
    static unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    CHECK(!memcmp(buf, MAYA_TRACE_MAGIC, 8));
    uint32_t version, slot, header;
    memcpy(&version, buf + 8, 4);
    memcpy(&slot, buf + 12, 4);
    memcpy(&header, buf + 16, 4);
    CHECK(version == MAYA_TRACE_VERSION && slot == MAYA_SLOT && header == MAYA_HEADER_SIZE);
    CHECK(!strcmp((char *)buf + 64, "TEST-GPU"));
    /* Only the records written here: memory.c and the registry write none. */
    size_t nslots = (n - MAYA_HEADER_SIZE) / MAYA_SLOT;
    maya_rec *recs = (maya_rec *)(buf + MAYA_HEADER_SIZE);
    /* The thread's first record is preceded by its name and a THREAD record. */
    CHECK(recs[0].kind == MK_STRING && !strcmp((char *)&recs[1] + 8, "test_core"));
    CHECK(recs[2].kind == MK_THREAD && recs[2].a[0] == 0 && recs[2].a[1] == recs[0].a[0] && recs[2].a[2] > 0);
    recs += 3;
    nslots -= 3;
    CHECK(nslots == 1 + 1 + 2 + 1 + 4 + 1 + 1);  /* memset, blas+2 cont, string+4 cont, string+1 cont */
    CHECK(recs[0].kind == MK_MEMSET && recs[0].a[0] == 42 && recs[0].a[4] == 7);
    CHECK(recs[1].kind == MK_BLAS && recs[2].kind == MK_CONT && recs[3].kind == MK_CONT);
    uint64_t w[7];
    memcpy(w, (char *)&recs[2] + 8, 56);
    CHECK(w[0] == 1 && w[6] == 7);
    memcpy(w, (char *)&recs[3] + 8, 16);
    CHECK(w[0] == 8 && w[1] == 9);
    CHECK(recs[4].kind == MK_STRING && recs[4].a32 == 199 && recs[4].a[0] == id);
    CHECK(!memcmp((char *)&recs[5] + 8, long_name, 56) && recs[8].kind == MK_CONT);
    CHECK(recs[9].kind == MK_STRING && !strcmp((char *)&recs[10] + 8, "other"));
}

int main(void) {
    char dir[] = "/tmp/maya-test-XXXXXX";
    if (!emulate_into(dir)) return 2;
    test_ranges();
    test_spec();
    test_memory();
    test_registry();
    test_kernel_integer_args();
    test_trace(dir);
    test_tensor_lists();  /* after the trace test: it counts approximations, which write records */
    test_cat_inputs();
    return CHECK_SUMMARY("test_core");
}

/* Integer arguments of a kernel launch.
 *
 * A KERNEL record's grid says how big the work is only for kernels that give
 * each element its own thread.  Grid-stride kernels (random fills, batch and
 * layer norm, embedding bags, softmax backward...) launch a grid that does not
 * grow with the data; their sizes are in their integer arguments (numel, rows,
 * columns, channels).  The demangled name lists the parameter types, and a
 * launch's `args` holds one pointer per parameter whatever its size, so the
 * parameters whose type is a plain integer can be read without knowing the
 * layout of the others.
 *
 * `args` has exactly as many entries as the kernel has parameters, and nothing
 * else says how many that is, so an index is read only when it lies inside the
 * parameter list the signature was split into; a signature that cannot be
 * split (unbalanced brackets) gives no indices at all.  Either case is counted
 * as an approximation: the launch records no integer arguments. */
#include "maya.h"

#include <stdio.h>
#include <string.h>

/* PyTorch's elementwise kernel for operands that are not all contiguous (ATen's
 * gpu_kernel_impl / gpu_kernel_impl_nocast: a transposing copy, a broadcast add)
 * takes (int N, closure), and its closure begins with the OffsetCalculator that
 * maps an element to each operand's byte offset: int dims; IntDivider<uint32_t>
 * sizes[MAX_DIMS] (divisor, multiplier, shift); uint32_t strides[MAX_DIMS][NARGS],
 * dimension 0 the fastest.  How fast such a kernel runs depends on those strides
 * (a copy that keeps the innermost dimension contiguous on both sides runs at
 * copy bandwidth, a transposing one several times slower), which nothing else in
 * the launch says.  So after N the launch records the dimensions, the innermost
 * size, and the innermost byte strides of the output and the first input
 * (layout of torch 2.11's OffsetCalculator.cuh, MAX_DIMS 25; checked under
 * emulation on a permuting copy, a transposing copy and a broadcast add). */
#define STRIDED_KERNEL "void at::native::elementwise_kernel<"
#define STRIDED_CLOSURE "gpu_kernel_impl"
#define OFFSETS_MAX_DIMS 25
#define OFFSETS_STRIDES (4 + 12 * OFFSETS_MAX_DIMS)

/* PyTorch's attention kernels (flash-attention and memory-efficient attention) take one struct of
 * parameters by value.  Their grid counts query tiles, batches and heads, but not the keys each tile
 * runs over, nor the head dimension or a mask, which set most of their time.  So such a launch records,
 * in place of integer arguments, six words read from the struct: batch (0 where the struct does not
 * hold it: the memory-efficient backward, whose grid's z is the batch), heads, query length, key
 * length, head dimension, and a mask word: bit 0 causal, bit 2 an additive bias (an attn_mask tensor),
 * the value head dimension from bit 8.  Offsets are torch 2.11's (flash.h's Flash_fwd_params, the
 * AttentionKernel and AttentionBackwardKernel Params of mem_eff_attention), found under emulation by
 * launching each kernel with distinct sizes; a struct whose sizes are out of range records nothing. */
enum { ATTENTION_NONE, ATTENTION_FLASH, ATTENTION_MEMEFF_FWD, ATTENTION_MEMEFF_BWD };
#define ATTENTION_OUT_OF_RANGE "kernel arguments: attention parameters out of range, not recorded"

/* PyTorch's multi_tensor_apply kernels (every foreach op, the fused optimizers) take their tensor lists
 * as one struct by value: up to depth_to_max_tensors addresses per list, each tensor's element count,
 * and per block the tensor and the 65536-element chunk of it the block works on.  The grid is the number
 * of blocks whatever they cover, so a launch over tensors smaller than a chunk moves a fraction of what
 * a launch of as many full chunks does.  Such a launch records, in place of integer arguments, the
 * elements its blocks cover, those of them in blocks off the vectorised path (a tensor whose remaining
 * size is no multiple of 4, or an address not 16-byte aligned: such blocks run about 1.8 times slower),
 * and the tensors it touches.  Layouts of torch 2.11's MultiTensorApply.cuh: TensorListMetadata<n>,
 * TensorListScalarListMetadata<scalar_t, n> and FusedOptimizerTensorListMetadata<n>. */
#define LISTS_KERNEL "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<"
#define LISTS_CHUNK 65536
#define LISTS_MAX_BLOCKS 320
static const int max_tensors[5] = {110, 64, 48, 36, 30};
static const int max_tensors_scalarlist[5] = {96, 64, 48, 36, 30};
#define LISTS_OUT_OF_RANGE "kernel arguments: tensor list metadata out of range, not recorded"

/* PyTorch's torch.cat kernels (CatArrayBatchedCopy and its _contig, _vectorized and _alignedK_contig forms) take
 * the inputs of one launch as a struct by value, CatArrInputTensorMetadata<T, IndexType, batch_size, stride_size>:
 * batch_size input addresses, then IndexType offset[], dimSize[] and nElements[], one per input.  The grid's y is
 * the inputs this launch copies; its x is capped at a few blocks per SM whatever their size, so the launch does
 * not say how much it moves.  Such a launch records, in place of integer arguments, the elements of its inputs
 * (the sum of nElements over grid y), how many inputs, and the element's bytes (T is OpaqueType<bytes>).
 * Layout of torch 2.11's Shape.cu, IndexType unsigned int (parallel_cat's). */
#define CAT_KERNEL "void at::native::(anonymous namespace)::CatArrayBatchedCopy"
#define CAT_OUT_OF_RANGE "kernel arguments: torch.cat metadata out of range, not recorded"

#define UNSPLIT "kernel arguments: demangled signature not split, integer arguments not recorded"
#define OUT_OF_RANGE "kernel arguments: parameter index beyond the signature, integer arguments not recorded"

static int starts_with(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Size of a by-value integer parameter named `t` (length n), 0 when it is not one. */
static int integer_size(const char *t, size_t n) {
    static const struct { const char *name; int size; } types[] = {
        {"int", 4}, {"unsigned int", 4}, {"long", 8}, {"unsigned long", 8},
        {"long long", 8}, {"unsigned long long", 8},
    };
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (strlen(types[i].name) == n && memcmp(types[i].name, t, n) == 0) return types[i].size;
    return 0;
}

/* Which attention kernel the parameter list starting at `params` (after the opening parenthesis) is. */
static int attention_kind(const char *params) {
    if (starts_with(params, "pytorch_flash::Flash_fwd_params") || starts_with(params, "pytorch_flash::Flash_bwd_params"))
        return ATTENTION_FLASH;
    if (starts_with(params, "PyTorchMemEffAttention::AttentionKernel<")) return ATTENTION_MEMEFF_FWD;
    if (starts_with(params, "PyTorchMemEffAttention::AttentionBackwardKernel<")) return ATTENTION_MEMEFF_BWD;
    return ATTENTION_NONE;
}

/* The metadata layout named by a multi_tensor_apply kernel's first parameter `p` into f->lists. */
static void lists_layout(const char *p, maya_func *f) {
    static const char ns[] = "at::native::(anonymous namespace)::";
    if (starts_with(p, ns)) p += sizeof ns - 1;
    int depth = 0, tensors = 0, extra = 0;  /* extra: bytes between the counts and block_to_tensor */
    if (sscanf(p, "TensorListMetadata<%d>", &depth) == 1 || sscanf(p, "FusedOptimizerTensorListMetadata<%d>", &depth) == 1) {
        if (depth < 1 || depth > 5) return;
        tensors = max_tensors[depth - 1];
        if (starts_with(p, "Fused")) extra = 8 * max_tensors_scalarlist[depth - 1];  /* state steps' addresses */
    } else if (starts_with(p, "TensorListScalarListMetadata<")) {
        const char *comma = NULL, *q = p + 29;  /* the depth follows the template's last comma */
        for (int level = 0; *q && (level > 0 || *q != '>'); q++) {
            if (*q == '<') level++;
            else if (*q == '>') level--;
            else if (*q == ',' && level == 0) comma = q;
        }
        if (!comma || sscanf(comma + 1, " %d", &depth) != 1 || depth < 1 || depth > 5) return;
        int size = starts_with(p + 29, "double") ? 8 : starts_with(p + 29, "float") ? 4
                   : starts_with(p + 29, "c10::complex<float>") ? 8 : 0;
        if (!size) return;  /* complex<double> lists have a layout of their own; bool and others: not read */
        tensors = max_tensors_scalarlist[depth - 1];
        extra = size * tensors;  /* the scalars; block_to_tensor (bytes) follows unpadded */
    } else {
        return;
    }
    f->lists.depth = (uint16_t)depth;
    f->lists.tensors = (uint16_t)tensors;
    f->lists.numel = (uint16_t)(8 * depth * tensors);
    f->lists.block_to_tensor = (uint16_t)(f->lists.numel + 8 * tensors + extra);
    f->lists.block_to_chunk = (uint16_t)(f->lists.block_to_tensor + LISTS_MAX_BLOCKS);  /* 320: 4-aligned */
}

/* The cat metadata layout named by a CatArrayBatchedCopy kernel's template arguments (`t`: after its '<')
 * into f->cat: <OpaqueType<bytes>, unsigned int, Dims, batch_size, ...>; left 0 for another layout. */
static void cat_layout(const char *t, maya_func *f) {
    static const char ns[] = "at::native::(anonymous namespace)::";
    if (starts_with(t, ns)) t += sizeof ns - 1;
    unsigned bytes = 0;
    int dims = 0, batch = 0, used = 0;
    if (sscanf(t, "OpaqueType<%uu>, unsigned int, %d, %d,%n", &bytes, &dims, &batch, &used) != 3 || !used) return;
    if (bytes < 1 || bytes > 16 || batch < 1 || batch > 1024) return;
    f->cat.batch = (uint16_t)batch;
    f->cat.bytes = (uint8_t)bytes;
}

static int unsplit(maya_func *f) {
    f->n_ints = 0;
    f->n_params = -1;
    maya_approximated(UNSPLIT);
    return 0;
}

int maya_kernel_integer_params(const char *demangled, maya_func *f) {
    f->n_ints = 0;
    f->n_params = 0;
    f->attention = ATTENTION_NONE;
    f->strided = demangled && starts_with(demangled, STRIDED_KERNEL) && strstr(demangled, STRIDED_CLOSURE) != NULL;
    size_t len = demangled ? strlen(demangled) : 0;
    if (len < 2 || demangled[len - 1] != ')') return 0;  /* not a function signature (C names, Triton) */
    /* The parameter list is the parenthesised group that ends the name. */
    size_t open = len - 1;
    int depth = 0;
    for (;;) {
        char ch = demangled[open];
        if (ch == ')') depth++;
        else if (ch == '(' && --depth == 0) break;
        if (open == 0) return unsplit(f);
        open--;
    }
    f->attention = attention_kind(demangled + open + 1);
    memset(&f->lists, 0, sizeof f->lists);
    if (starts_with(demangled, LISTS_KERNEL)) lists_layout(demangled + open + 1, f);
    memset(&f->cat, 0, sizeof f->cat);
    if (starts_with(demangled, CAT_KERNEL)) {
        const char *t = strchr(demangled + sizeof CAT_KERNEL - 1, '<');
        if (t && t < demangled + open) cat_layout(t + 1, f);
    }
    int index = 0, n = 0;
    uint16_t where[MAYA_KERNEL_INTS] = {0};
    uint8_t size_of[MAYA_KERNEL_INTS] = {0};
    depth = 0;
    size_t start = open + 1;
    for (size_t i = open + 1; i < len; i++) {
        char ch = demangled[i];
        if (ch == '<' || ch == '(' || ch == '[' || ch == '{') depth++;
        else if (ch == '>' || ch == ']' || ch == '}' || (ch == ')' && i != len - 1)) depth--;
        if (depth < 0) return unsplit(f);
        if (depth == 0 && (ch == ',' || i == len - 1)) {
            while (start < i && demangled[start] == ' ') start++;
            if (i == open + 1) break;  /* "()": no parameters */
            int size = integer_size(demangled + start, i - start);
            if (size && n < MAYA_KERNEL_INTS && index <= UINT16_MAX) {
                where[n] = (uint16_t)index;
                size_of[n] = (uint8_t)size;
                n++;
            }
            index++;
            start = i + 1;
        }
    }
    if (depth != 0) return unsplit(f);
    memcpy(f->int_index, where, sizeof where);
    memcpy(f->int_size, size_of, sizeof size_of);
    f->n_params = index;
    f->n_ints = n;
    return n;
}

/* The 4-byte word at `offset` of a by-value argument (unaligned). */
static int32_t word32(const unsigned char *p, size_t offset) {
    int32_t v;
    memcpy(&v, p + offset, 4);
    return v;
}

/* The strided kernel's layout words (see STRIDED_KERNEL) into out: dims, innermost size, output's and
 * first input's innermost byte stride; returns 4, or 0 when dims is out of range (not that closure). */
static int strided_layout(const unsigned char *closure, uint64_t *out) {
    int32_t dims = word32(closure, 0);
    if (dims < 1 || dims > OFFSETS_MAX_DIMS) return 0;
    out[0] = (uint64_t)dims;
    out[1] = (uint32_t)word32(closure, 4);
    out[2] = (uint32_t)word32(closure, OFFSETS_STRIDES);
    out[3] = (uint32_t)word32(closure, OFFSETS_STRIDES + 4);
    return 4;
}

/* The attention words (see ATTENTION_FLASH) of one launch's parameter struct into out; returns 6, or 0
 * when a size is out of range. */
static int attention_shape(int kind, const unsigned char *p, uint64_t *out) {
    int64_t b, h, sq, skv, d, dv, causal;
    uint64_t bias;
    if (kind == ATTENTION_FLASH) {
        h = word32(p, 96), b = word32(p, 176), sq = word32(p, 180), skv = word32(p, 184), d = dv = word32(p, 192);
        causal = word32(p, 392) == 0;  /* window_size_right: 0 causal, -1 none */
        bias = 0;
    } else if (kind == ATTENTION_MEMEFF_FWD) {
        d = word32(p, 96), dv = word32(p, 100), sq = word32(p, 104), skv = word32(p, 108);
        causal = p[116] != 0;  /* custom_mask_type: 1 causal from the top left, 2 from the bottom right */
        b = word32(p, 192), h = word32(p, 196);
        memcpy(&bias, p + 24, 8);
    } else {
        d = word32(p, 144), dv = word32(p, 148), sq = word32(p, 152), skv = word32(p, 156), h = word32(p, 160);
        causal = p[164] != 0;
        b = 0;
        memcpy(&bias, p + 24, 8);
    }
    if (b < 0 || b >= 1 << 24 || h < 1 || h >= 1 << 16 || sq < 1 || sq >= 1 << 26 || skv < 1 || skv >= 1 << 26 ||
        d < 1 || d > 1024 || dv < 1 || dv > 1024) {
        maya_approximated(ATTENTION_OUT_OF_RANGE);
        return 0;
    }
    out[0] = (uint64_t)b, out[1] = (uint64_t)h, out[2] = (uint64_t)sq, out[3] = (uint64_t)skv, out[4] = (uint64_t)d;
    out[5] = (uint64_t)(causal | (bias ? 4 : 0) | (dv << 8));
    return 6;
}

/* A multi_tensor_apply launch's words (see LISTS_KERNEL) into out; returns 3, or 0 out of range. */
static int lists_work(const maya_func *f, const unsigned char *m, uint64_t blocks, uint64_t *out) {
    uint64_t elements = 0, scalar_path = 0, touched = 0;
    int last = -1;
    if (blocks < 1 || blocks > LISTS_MAX_BLOCKS) goto out_of_range;
    for (uint64_t b = 0; b < blocks; b++) {
        int t = m[f->lists.block_to_tensor + b];
        int32_t chunk = word32(m, f->lists.block_to_chunk + 4 * b);
        if (t >= f->lists.tensors || chunk < 0) goto out_of_range;  /* before reading past the counts */
        int64_t numel;
        memcpy(&numel, m + f->lists.numel + 8 * t, 8);
        int64_t rest = numel - (int64_t)chunk * LISTS_CHUNK;
        if (rest <= 0) goto out_of_range;
        uint64_t n = rest < LISTS_CHUNK ? (uint64_t)rest : LISTS_CHUNK;
        int vectorised = rest % 4 == 0;
        for (int d = 0; d < f->lists.depth; d++) {
            uint64_t address;
            memcpy(&address, m + 8 * ((size_t)d * f->lists.tensors + t), 8);
            if (address % 16) vectorised = 0;
        }
        elements += n;
        if (!vectorised) scalar_path += n;
        if (t != last) touched++, last = t;
    }
    out[0] = elements, out[1] = scalar_path, out[2] = touched;
    return 3;
out_of_range:
    maya_approximated(LISTS_OUT_OF_RANGE);
    return 0;
}

/* A torch.cat launch's words (see CAT_KERNEL) into out: elements, inputs, element bytes; returns 3, or 0
 * out of range. */
static int cat_work(const maya_func *f, const unsigned char *m, uint64_t inputs, uint64_t *out) {
    if (inputs < 1 || inputs > f->cat.batch) {
        maya_approximated(CAT_OUT_OF_RANGE);
        return 0;
    }
    size_t counts = (size_t)f->cat.batch * (8 + 4 + 4);  /* after the addresses, offsets and dimSizes */
    uint64_t elements = 0;
    for (uint64_t i = 0; i < inputs; i++) elements += (uint32_t)word32(m, counts + 4 * i);
    out[0] = elements, out[1] = inputs, out[2] = f->cat.bytes;
    return 3;
}

int maya_kernel_integer_args(const maya_func *f, void *const *args, uint64_t blocks, uint64_t grid_y, uint64_t *out) {
    if (!args) return 0;
    if (f->cat.batch && f->n_params >= 2)
        return args[1] ? cat_work(f, args[1], grid_y, out) : 0;
    if (f->lists.depth && f->n_params >= 1)
        return args[0] ? lists_work(f, args[0], blocks, out) : 0;
    if (f->attention && f->n_params >= 1)
        return args[0] ? attention_shape(f->attention, args[0], out) : 0;
    for (int i = 0; i < f->n_ints; i++) {
        if (f->int_index[i] >= f->n_params) {
            maya_approximated(OUT_OF_RANGE);
            return 0;
        }
        const void *p = args[f->int_index[i]];
        if (!p) return 0;
        if (f->int_size[i] == 4) {
            int32_t v;
            memcpy(&v, p, 4);
            out[i] = (uint64_t)(int64_t)v;
        } else {
            memcpy(&out[i], p, 8);
        }
    }
    if (f->strided && f->n_params == 2 && f->n_ints == 1 && args[1])
        return 1 + strided_layout(args[1], out + 1);
    return f->n_ints;
}

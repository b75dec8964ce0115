/* The MK_BLAS record (docs/blas.md): how a BLAS call becomes a record, shared
 * by the emulated libraries (cublas.c, cublaslt.c) and by record mode
 * (record/record_libs.c), so a call is described the same way in both. */
#include <string.h>

#include "blas.h"

uint64_t maya_blas_double_bits(double v) {
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

static uint64_t nan_bits(void) { return maya_blas_double_bits(__builtin_nan("")); }

/* IEEE half to double without libm. */
static double half_to_double(uint16_t h) {
    unsigned sign = h >> 15, exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
    double v;
    if (exp == 0)
        v = frac / 16777216.0;  /* subnormal: frac * 2^-24 */
    else if (exp == 31)
        v = frac ? __builtin_nan("") : __builtin_inf();
    else {
        uint32_t bits = (uint32_t)(exp - 15 + 127) << 23 | (uint32_t)frac << 13;
        float f;
        memcpy(&f, &bits, sizeof f);
        v = f;
    }
    return sign ? -v : v;
}

static double bf16_to_double(uint16_t b) {
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint64_t maya_blas_scalar(const void *p, int type, int device, uint64_t *imag) {
    *imag = 0;
    if (!p)
        return nan_bits();
    /* Device scalars live in host-backed device memory; anything else handed
     * over as a device pointer is not ours to dereference. */
    if (device && maya_mem_device_of((uint64_t)(uintptr_t)p) < 0)
        return nan_bits();
    double re, im = 0;
    switch (type) {
    case CUDA_R_16F: { uint16_t h; memcpy(&h, p, 2); re = half_to_double(h); break; }
    case CUDA_R_16BF: { uint16_t h; memcpy(&h, p, 2); re = bf16_to_double(h); break; }
    case CUDA_R_32F: { float f; memcpy(&f, p, 4); re = f; break; }
    case CUDA_R_64F: { double d; memcpy(&d, p, 8); re = d; break; }
    case CUDA_R_32I: { int32_t i; memcpy(&i, p, 4); re = i; break; }
    case CUDA_R_8I: { int8_t i; memcpy(&i, p, 1); re = i; break; }
    case CUDA_C_16F: { uint16_t h[2]; memcpy(h, p, 4); re = half_to_double(h[0]); im = half_to_double(h[1]); break; }
    case CUDA_C_32F: { float f[2]; memcpy(f, p, 8); re = f[0]; im = f[1]; break; }
    case CUDA_C_64F: { double d[2]; memcpy(d, p, 16); re = d[0]; im = d[1]; break; }
    default: return nan_bits();
    }
    *imag = maya_blas_double_bits(im);
    return maya_blas_double_bits(re);
}

void maya_blas_op_init(maya_blas_op *op, const char *api) {
    memset(op, 0, sizeof *op);
    op->api = api;
    op->batch = 1;
    op->atype = op->btype = op->ctype = op->dtype = BLAS_NO_TYPE;
    op->compute = op->scale = BLAS_NO_TYPE;
    op->ext[BX_ALPHA] = op->ext[BX_BETA] = nan_bits();
    op->ext[BX_BIAS_TYPE] = 0xFFFFFFFFFFFFFFFFull;  /* -1 | -1 << 32: none */
}

void maya_blas_record(maya_call c, const maya_blas_op *op, maya_rec *out) {
    maya_rec r;
    maya_rec_init(&r, MK_BLAS, c);
    r.flags |= MF_ASYNC;
    r.stream = maya_stream_id(op->stream);
    int dev = maya_stream_device(op->stream);
    if (dev >= 0)
        r.device = (uint8_t)dev;
    r.a32 = (uint32_t)maya_str(op->api);
    r.a[0] = (op->m & 0xFFFFFFFFull) | op->n << 32;
    r.a[1] = (op->k & 0xFFFFFFFFull) | op->batch << 32;
    r.a[2] = (uint64_t)(op->transa & 0xFF) | (uint64_t)(op->transb & 0xFF) << 8 |
             (uint64_t)(op->epilogue & 0xFFFF) << 16 | (uint64_t)(op->side & 0xFF) << 32 |
             (uint64_t)(op->uplo & 0xFF) << 40 | (uint64_t)(op->diag & 0xFF) << 48;
    r.a[3] = (uint64_t)op->atype | (uint64_t)op->btype << 8 | (uint64_t)op->ctype << 16 |
             (uint64_t)op->dtype << 24 | (uint64_t)op->compute << 32 | (uint64_t)op->scale << 40;
    r.a[4] = op->workspace;
    *out = r;
}

void maya_blas_emit(maya_call c, const maya_blas_op *op) {
    maya_rec r;
    maya_blas_record(c, op, &r);
    maya_emit_ext(&r, op->ext, BX_WORDS);
    if (maya_cfg()->verbose > 1)
        maya_log("%s m=%llu n=%llu k=%llu batch=%llu", op->api, (unsigned long long)op->m,
                 (unsigned long long)op->n, (unsigned long long)op->k, (unsigned long long)op->batch);
}

static int is_complex(int t) {
    return t == CUDA_C_16F || t == CUDA_C_16BF || t == CUDA_C_32F || t == CUDA_C_64F ||
           t == CUDA_C_8I || t == CUDA_C_32I;
}

/* Compute type implied by a typed routine (S/C single, D/Z double) under the
 * handle's math mode, as cuBLAS documents it. */
int maya_blas_implied_compute(int math_mode, int single) {
    int mode = math_mode & 0xF;
    if (single) {
        if (mode == CUBLAS_TF32_TENSOR_OP_MATH)
            return CUBLAS_COMPUTE_32F_FAST_TF32;
        if (mode == CUBLAS_PEDANTIC_MATH)
            return CUBLAS_COMPUTE_32F_PEDANTIC;
        if (mode == CUBLAS_FP32_EMULATED_BF16X9_MATH)
            return CUBLAS_COMPUTE_32F_EMULATED_16BFX9;
        return CUBLAS_COMPUTE_32F;
    }
    if (mode == CUBLAS_PEDANTIC_MATH)
        return CUBLAS_COMPUTE_64F_PEDANTIC;
    if (mode == CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH)
        return CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT;
    return CUBLAS_COMPUTE_64F;
}

/* Type of alpha/beta for the *Ex routines: set by the compute type. */
int maya_blas_ex_scale_type(int compute, int ctype) {
    int cplx = is_complex(ctype);
    switch (compute) {
    case CUBLAS_COMPUTE_16F:
    case CUBLAS_COMPUTE_16F_PEDANTIC:
        return cplx ? CUDA_C_16F : CUDA_R_16F;
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC:
    case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT:
        return cplx ? CUDA_C_64F : CUDA_R_64F;
    case CUBLAS_COMPUTE_32I:
    case CUBLAS_COMPUTE_32I_PEDANTIC:
        return CUDA_R_32I;
    default:
        return cplx ? CUDA_C_32F : CUDA_R_32F;
    }
}


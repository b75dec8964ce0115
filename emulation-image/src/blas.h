/* Internals shared by cublas.c and cublaslt.c: the handle object (torch hands
 * its cuBLAS handle to cuBLASLt, so both libraries use one type) and the
 * writer of MK_BLAS records.  The record layout is documented in
 * emulation-image/docs/blas.md; keep the two in step.
 */
#ifndef MAYA_BLAS_H
#define MAYA_BLAS_H

#include <cublasLt.h>
#include <cublas_v2.h>

#include "maya.h"

#define BLAS_HANDLE_MAGIC 0x48534c42u  /* "BLSH": a live handle */

/* The opaque context behind cublasHandle_t; cublasLtCreate makes one too and
 * casts it, so an Lt entry point accepts either kind of handle. */
struct cublasContext {
    uint32_t magic;
    int device;               /* current device when the handle was created */
    int lt;                   /* made by cublasLtCreate */
    cudaStream_t stream;
    void *workspace;
    size_t workspace_bytes;
    cublasMath_t math_mode;
    cublasPointerMode_t pointer_mode;
    cublasAtomicsMode_t atomics_mode;
    int sm_count_target;
    cublasEmulationStrategy_t emulation_strategy;
};

struct cublasContext *maya_blas_handle_new(int lt);
/* The handle behind a cuBLAS or cuBLASLt handle value, NULL if it is not one. */
struct cublasContext *maya_blas_handle(const void *h);
void maya_blas_handle_free(struct cublasContext *h);

/* Extension words of an MK_BLAS record (docs/blas.md, "Extension words"). */
enum {
    BX_LDA, BX_LDB, BX_LDC, BX_LDD,
    BX_STRIDE_A, BX_STRIDE_B, BX_STRIDE_C, BX_STRIDE_D,
    BX_ALPHA, BX_BETA, BX_ALPHA_IM, BX_BETA_IM,
    BX_A, BX_B, BX_C, BX_D,
    BX_BIAS,          /* bias (Lt) or the routine's auxiliary array (pivots, tau...) */
    BX_BIAS_TYPE,     /* bias cudaDataType (int32, -1 none) | aux data type << 32 */
    BX_AUX,           /* epilogue aux pointer (Lt) or info array */
    BX_MODES,         /* pointer mode | math mode << 8 | order/fast accum / scale modes */
    BX_A_SCALE, BX_B_SCALE, BX_C_SCALE, BX_D_SCALE, BX_AMAX_D,
    BX_ALGO,          /* cublasGemmAlgo_t, or the Lt algorithm id */
    BX_SM_TARGET,     /* SM count target, 0 = all */
    BX_D_OUT_SCALE,   /* Lt block-scaled output scale pointer */
    BX_WORDS          /* 28 words = 4 continuation slots */
};

#define BLAS_NO_TYPE 0xFF  /* a[3] byte when a matrix or type does not apply */

/* One BLAS call as it will be recorded. */
typedef struct {
    const char *api;
    const void *stream;
    uint64_t workspace;
    uint64_t m, n, k, batch;
    uint32_t transa, transb, epilogue, side, uplo, diag;
    uint8_t atype, btype, ctype, dtype, compute, scale;
    uint64_t ext[BX_WORDS];
} maya_blas_op;

/* Defaults: no types, batch 1, NaN alpha/beta, no bias. */
void maya_blas_op_init(maya_blas_op *op, const char *api);
void maya_blas_emit(maya_call c, const maya_blas_op *op);
/* The head slot of the record, without writing it (record mode writes later). */
void maya_blas_record(maya_call c, const maya_blas_op *op, maya_rec *out);
/* Compute type of a typed routine (S/C single, D/Z double) under a math mode. */
int maya_blas_implied_compute(int math_mode, int single);
/* Type of alpha/beta of the *Ex routines, set by the compute type. */
int maya_blas_ex_scale_type(int compute, int ctype);
/* Bit pattern of the double value of a scalar of cudaDataType `type` at p,
 * read from host memory or (device=1) host-backed device memory; NaN bits when
 * it cannot be read.  *imag gets the imaginary part for complex types. */
uint64_t maya_blas_scalar(const void *p, int type, int device, uint64_t *imag);
uint64_t maya_blas_double_bits(double v);

#endif

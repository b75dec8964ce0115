/* Names of the kernels a real H100 (cuDNN 9.19, torch 2.11.0+cu130) launches
 * for one cuDNN operation, so emulated traces can be diffed against
 * torch.profiler output.  The families and their shape-dependent parts were
 * read off torch.profiler on an H100 (docs/dnn.md lists the probes).
 * Convolutions of measured shapes take what the real GPU's autotuning picked
 * (conv_table); other shapes take the nearest measurement or rules whose
 * tile suffixes are estimates.  "Memset (Device)" entries are the memsets
 * cuDNN issues itself before the kernels.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnn.h"

#define MEMSET "Memset (Device)"

void dnn_add_kernel(dnn_record *d, const char *name)
{
    if (d->nk >= DNN_MAX_KERNELS)
        return;
    d->kernels[d->nk++] = maya_str(name);
}

/* Formatted name, never truncated (mangled cutlass names run past 1900
 * characters). */
static void addf(dnn_record *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void addf(dnn_record *d, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof buf) {
        dnn_add_kernel(d, buf);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big)
        return;
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    dnn_add_kernel(d, big);
    free(big);
}

/* Head dims the flash kernels are built for; others round up. */
static int64_t flash_d(int64_t d)
{
    static const int64_t sizes[] = {32, 64, 96, 128, 192, 256};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        if (d <= sizes[i])
            return sizes[i];
    return d;
}

/* The backward helper kernels are templated on the 16-bit type: <true> for
 * bf16, <false> for fp16 (the H100 probes show <true> for bf16 causal, full
 * and dropout attention alike; BERT in fp16 shows <false>). */
void dnn_kernels_sdpa(dnn_record *d, const dnn_sdpa *s, int backward, int dtype)
{
    const char *bf16 = dtype == CUDNN_DATA_HALF ? "false" : "true";
    int64_t hd = flash_d(s->d > s->dv ? s->d : s->dv);
    if (!backward) {
        dnn_add_kernel(d, MEMSET);
        addf(d, "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x%lld_4x1x1_cga1x1x1_kernel0_0",
             (long long)hd);
        return;
    }
    dnn_add_kernel(d, MEMSET);
    dnn_add_kernel(d, MEMSET);
    addf(d, "void cudnn::fusion::compute_dot_do_o_specialized<%s, %lld>(void const*, void const*, void*, void*, "
            "unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, "
            "unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, "
            "unsigned int, unsigned int, unsigned int, float, void const*, void const*, void const*, void const*, "
            "void const*, bool, void const*, void*, void const*, int, int, int, int, int, int, int, int, int)",
         bf16, (long long)hd);
    addf(d, "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x%lld_1x4x1_cga1x1x1_kernel0_0",
         (long long)hd);
    addf(d, "void cudnn::fusion::convert_dq_to_16bits<%s>(void const*, void*, unsigned int, unsigned int, "
            "unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, "
            "unsigned int, float const*, float const*, float const*, float*, void const*, void*, void*, bool, bool)",
         bf16);
    if (s->gqa) {
        /* dK and dV are computed per Q head and summed over each group. */
        /* Probed in bf16 only; the flag is assumed to follow the type too. */
        for (int i = 0; i < 2; i++)
            addf(d, "void cudnn::fusion::fmha_reduce_head<%s>(void const*, void*, unsigned int, unsigned int, unsigned int, "
                    "unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, "
                    "unsigned int, float const*, float const*, float const*, float*, void*, bool, void*, bool)",
                 bf16);
    }
}

static const char *xmma_types(int dtype)
{
    switch (dtype) {
    case CUDNN_DATA_BFLOAT16: return "bf16bf16_bf16f32_f32";
    case CUDNN_DATA_HALF: return "f16f16_f16f32_f32";
    default: return "f32f32_tf32f32_f32";
    }
}

/* Rules for shapes no measurement is near: the families of the probes, tiles
 * guessed from the channel counts. */
static void conv_rules(dnn_record *d, const dnn_conv *cv, int dir, int dtype, int layout)
{
    const char *t = xmma_types(dtype);
    if (layout != DNN_LAYOUT_NHWC) {
        /* NCHW tensors: sm80 kernels on NCHW for fp32, transposes around NHWC kernels otherwise. */
        if (dtype == CUDNN_DATA_FLOAT) {
            static const char *dirs[] = {"fprop", "dgrad", "wgrad"};
            addf(d, "sm80_xmma_%s_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize128x32x8_stage3_warpsize2x2x1_g1_ffma_aligna4_alignc4_execute_kernel__5x_cudnn",
                 dirs[dir]);
            return;
        }
        static const char tr[] = "void cudnn::engines_precompiled::nchwToNhwcKernel<float, float, float, false, true, "
                                 "(cudnnKernelDataType_t)2>(cudnn::engines_precompiled::nchw2nhwc_params_t<float>, float const*, float*)";
        dnn_add_kernel(d, tr);
        dnn_add_kernel(d, tr);
    }
    int one_by_one = 1;
    for (int i = 0; i < cv->nsp; i++)
        if (cv->filt[i] != 1 || cv->stride[i] != 1 || cv->pad[i] != 0)
            one_by_one = 0;
    int strided = 0;
    for (int i = 0; i < cv->nsp; i++)
        if (cv->stride[i] > 1)
            strided = 1;
    int wide = cv->k >= 128 && cv->c >= 64;
    if (dir == 0) {
        if (one_by_one && cv->groups == 1 && dtype != CUDNN_DATA_FLOAT) {
            /* A 1x1 convolution is a GEMM: cuDNN runs a cuBLASLt kernel. */
            dnn_add_kernel(d, "nvjet_sm90_tst_128x192_64x5_2x1_v_bz_coopB_TNN");
            return;
        }
        dnn_add_kernel(d, MEMSET);
        addf(d, "sm90_xmma_fprop_implicit_gemm_%s_nhwckrsc_nhwc_tilesize%s_warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
             t, dtype == CUDNN_DATA_FLOAT ? "64x128x32" : wide ? "128x128x64" : "128x64x64");
    } else if (dir == 1) {
        dnn_add_kernel(d, MEMSET);
        if (strided)
            addf(d, "sm90_xmma_dgrad_implicit_gemm_indexed_%s_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_g1_strided_execute_kernel__5x_cudnn", t);
        else
            addf(d, "sm90_xmma_dgrad_implicit_gemm_%s_nhwckrsc_nhwc_tilesize%s_warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
                 t, dtype == CUDNN_DATA_FLOAT ? "128x64x32" : wide ? "128x128x64" : "64x64x64");
    } else {
        int split = !one_by_one && !strided && cv->c <= 128;
        if (split) {
            dnn_add_kernel(d, MEMSET);
            dnn_add_kernel(d, "void cask_plugin__5x_cudnn::xmma__5x_cudnn::init_device_workspace_kernel<xmma__5x_cudnn::"
                              "implicit_gemm::wgrad_indexed::Warp_specialized_params<xmma__5x_cudnn::Grid_constant_params> >"
                              "(xmma__5x_cudnn::implicit_gemm::wgrad_indexed::Warp_specialized_params<xmma__5x_cudnn::"
                              "Grid_constant_params>, bool)");
            const char *tile = dtype == CUDNN_DATA_FLOAT ? "128x64x32" : "128x64x64";
            addf(d, "sm90_xmma_wgrad_indexed_implicit_gemm_%s_nhwckrsc_nhwc_tilesize%s_warpgroupsize1x1x1_g1_execute_segment_k_on_kernel__5x_cudnn", t, tile);
            addf(d, "sm90_xmma_wgrad_indexed_implicit_gemm_%s_nhwckrsc_nhwc_tilesize%s_warpgroupsize1x1x1_g1_execute_split_k_kernel__5x_cudnn", t, tile);
        } else {
            addf(d, "sm90_xmma_wgrad_indexed_implicit_gemm_%s_nhwckrsc_nhwc_tilesize%s_warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
                 t, wide ? "64x128x64" : "64x64x64");
        }
    }
    if (layout != DNN_LAYOUT_NHWC)
        dnn_add_kernel(d, "void cudnn::engines_precompiled::nhwcToNchwKernel<float, float, float, true, false, "
                          "(cudnnKernelDataType_t)0>(cudnn::engines_precompiled::nhwc2nchw_params_t<float>, float const*, float*)");
}

/* ------------------------------------------------ measured convolutions
 *
 * What torch's autotuning (cudnn.benchmark) settled on for each convolution
 * of a real training step, read off torch.profiler in the committed ground
 * truth: benchmarks/data/gpu_fidelity/<GPU>/cnn.json (ResNet-18, N=64,
 * 224x224, bf16 autocast, channels_last; its forward convolutions in order,
 * then their dgrad/wgrad pairs in reverse) and the probes in
 * benchmarks/results/2026-11-22-h100-cudnn-probe/cudnn_kernels.json (N=32).
 * Autotuning is a timing race between engines, so the H100 and the H200
 * (same SM count and clocks, faster memory) settle on different tiles for
 * some shapes: entries are per GPU model.  A shape is looked up exactly,
 * then (same GPU first) the nearest measured GEMM shape of the same class;
 * see conv_lookup.
 */

#define XT "bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize"
#define XFPROP(tile, wg) "sm90_xmma_fprop_implicit_gemm_" XT tile "_warpgroupsize" wg "_g1_execute_segment_k_off_kernel__5x_cudnn"
#define XDGRAD(tile, wg) "sm90_xmma_dgrad_implicit_gemm_" XT tile "_warpgroupsize" wg "_g1_execute_segment_k_off_kernel__5x_cudnn"
#define XDGRAD_STRIDED(tile, wg) \
    "sm90_xmma_dgrad_implicit_gemm_indexed_" XT tile "_warpgroupsize" wg "_g1_strided_execute_kernel__5x_cudnn"
#define XWGRAD(tile) "sm90_xmma_wgrad_indexed_implicit_gemm_" XT tile "_warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn"
#define INIT_WS                                                                                                        \
    "void cask_plugin__5x_cudnn::xmma__5x_cudnn::init_device_workspace_kernel<xmma__5x_cudnn::implicit_gemm::"       \
    "wgrad_indexed::Warp_specialized_params<xmma__5x_cudnn::Grid_constant_params> >(xmma__5x_cudnn::implicit_gemm::" \
    "wgrad_indexed::Warp_specialized_params<xmma__5x_cudnn::Grid_constant_params>, bool)"
/* Split-K wgrad: workspace set-up, partial sums, reduction (or in-kernel). */
#define XWGRAD_SEGK(tile) \
    INIT_WS, "sm90_xmma_wgrad_indexed_implicit_gemm_" XT tile "_warpgroupsize1x1x1_g1_execute_segment_k_on_kernel__5x_cudnn"
#define XWGRAD_SPLIT(tile) \
    XWGRAD_SEGK(tile), "sm90_xmma_wgrad_indexed_implicit_gemm_" XT tile "_warpgroupsize1x1x1_g1_execute_split_k_kernel__5x_cudnn"
/* Channels not a multiple of 8 (an RGB stem): cuDNN pads them to 8, runs an
 * sm80 cutlass kernel, and strips the padding of dW again. */
#define PAD_BF16                                                                                                  \
    "void nhwcAddPaddingKernel<__nv_bfloat16, __nv_bfloat16, float, true, (cudnnKernelDataType_t)0>(int, int, int, " \
    "int, int, int, int, int, __nv_bfloat16 const*, __nv_bfloat16*, int, int, int, int, float, float, "             \
    "cudnn::reduced_divisor, cudnn::reduced_divisor, cudnn::reduced_divisor)"
#define CUTLASS_FPROP_256x64                                                                          \
    "void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8>" \
    "(cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8::Params)"
#define CUTLASS_WGRAD_64x128x32                                                                                       \
    "_ZN17cutlass__5x_cudnn6KernelINS_4conv6kernel23ImplicitGemmConvolutionINS1_11threadblock22ImplicitGemmMultistageIN" \
    "S_4gemm9GemmShapeILi64ELi128ELi32EEENS4_52Conv2dWgradOutputGradientTileAccessIteratorOptimizedINS_11MatrixShapeILi6" \
    "4ELi32EEENS_10bfloat16_tENS_9transform29PitchLinearWarpRakedThreadMapINS_16PitchLinearShapeILi64ELi32EEELi128ENSF_I" \
    "Li8ELi4EEELi8EEENS_12AlignedArrayISC_Li8ELi16EEEEENSD_11threadblock25RegularTileAccessIteratorISB_SC_NS_6layout40Co" \
    "lumnMajorTensorOpMultiplicandCongruousILi16ELi64EEELi1ESI_Li16EEELNS_4arch14CacheOperation4KindE0ENS4_48Conv2dWgrad" \
    "ActivationTileAccessIteratorOptimizedINSA_ILi32ELi128EEESC_NSE_INSF_ILi128ELi32EEELi128ESH_Li8EEESK_EENSN_ISW_SC_NS" \
    "O_37RowMajorTensorOpMultiplicandCongruousILi16ELi64EEELi0ESY_Li16EEELSU_0ENS6_11threadblock9MmaPolicyINS6_4warp11Mm" \
    "aTensorOpINS7_ILi32ELi64ELi32EEESC_SQ_SC_S11_fNSO_8RowMajorENS15_17MmaTensorOpPolicyINSS_3MmaINS7_ILi16ELi8ELi16EEE" \
    "Li32ESC_S18_SC_NSO_11ColumnMajorEfS18_NSS_13OpMultiplyAddEEENSA_ILi1ELi1EEEEELi1ELb0EbEENSA_ILi0ELi0EEES1I_Li1EEELi" \
    "6EbEENS_8epilogue11threadblock8EpilogueIS8_S1H_Li1ENS1M_22PredicatedTileIteratorINS1M_26OutputTileOptimalThreadMapI" \
    "NS1M_15OutputTileShapeILi128ELi8ELi2ELi1ELi1EEENS1Q_ILi1ELi4ELi1ELi1ELi4EEELi128ELi4ELi32EEEfLb0ENSO_9NoPermuteELb0" \
    "EEENS1L_4warp24FragmentIteratorTensorOpIS17_S1B_fNS_5ArrayIfLi4ELb1EEES18_EENS1W_20TileIteratorTensorOpIS17_S1B_fS1" \
    "8_EENS1M_18SharedLoadIteratorINS1T_18CompactedThreadMapEfLi16EEENS1L_6thread17LinearCombinationIfLi4EffLNS26_9Scale" \
    "Type4KindE0ELNS_15FloatRoundStyleE2EEENSA_ILi0ELi8EEELi2ELi1EEENS13_30GemmIdentityThreadblockSwizzleILi4EEELNS1_8Op" \
    "eratorE2ENS1_17Conv2dProblemSizeELNS1_9GroupModeE0EEEEEvNT_6ParamsE"
#define CUTLASS_REDUCE_SPLITK                                                                                      \
    "void cutlass__5x_cudnn::Kernel<cutlass__5x_cudnn::reduction::kernel::ReduceSplitK<cutlass__5x_cudnn::"        \
    "MatrixShape<4, 256>, cutlass__5x_cudnn::epilogue::thread::LinearCombination<cutlass__5x_cudnn::bfloat16_t, 8, " \
    "float, float, (cutlass__5x_cudnn::epilogue::thread::ScaleType::Kind)0, (cutlass__5x_cudnn::FloatRoundStyle)2>, " \
    "cutlass__5x_cudnn::reduction::thread::ReduceAdd<float, float, 8>, 4> >(cutlass__5x_cudnn::reduction::kernel::"  \
    "ReduceSplitK<cutlass__5x_cudnn::MatrixShape<4, 256>, cutlass__5x_cudnn::epilogue::thread::LinearCombination<"   \
    "cutlass__5x_cudnn::bfloat16_t, 8, float, float, (cutlass__5x_cudnn::epilogue::thread::ScaleType::Kind)0, "      \
    "(cutlass__5x_cudnn::FloatRoundStyle)2>, cutlass__5x_cudnn::reduction::thread::ReduceAdd<float, float, 8>, 4>::Params)"

typedef struct {
    const char *gpu;          /* catalog GPU model the run was measured on */
    uint8_t dir;              /* 0 fprop, 1 dgrad, 2 wgrad */
    uint8_t dtype;            /* cudnnDataType_t of the tensors (layout NHWC) */
    int16_t n, c, k, r, in, stride, pad; /* square 2-D, groups 1, dilation 1 */
    int64_t ws;               /* workspace, bytes; -1: not known (estimate) */
    const char *kern[5];      /* launch order; memsets are added by conv_emit */
} conv_meas;

#define H100 "H100-SXM-80GB"
#define H200 "H200-SXM-141GB"
#define BF CUDNN_DATA_BFLOAT16
/* clang-format off */
static const conv_meas conv_table[] = {
    /* ResNet-18 stem, 3 -> 64, 7x7/2 on 224 (both GPUs). */
    {H100, 0, BF, 64, 3, 64, 7, 224, 2, 3, -1, {PAD_BF16, PAD_BF16, CUTLASS_FPROP_256x64}},
    {H100, 2, BF, 64, 3, 64, 7, 224, 2, 3, -1, {PAD_BF16, CUTLASS_WGRAD_64x128x32, CUTLASS_REDUCE_SPLITK, PAD_BF16}},
    {H200, 0, BF, 64, 3, 64, 7, 224, 2, 3, -1, {PAD_BF16, PAD_BF16, CUTLASS_FPROP_256x64}},
    {H200, 2, BF, 64, 3, 64, 7, 224, 2, 3, -1, {PAD_BF16, CUTLASS_WGRAD_64x128x32, CUTLASS_REDUCE_SPLITK, PAD_BF16}},
    /* 64 -> 64, 3x3 on 56 */
    {H100, 0, BF, 64, 64, 64, 3, 56, 1, 1, -1, {XFPROP("64x64x64", "1x1x1")}},
    {H200, 0, BF, 64, 64, 64, 3, 56, 1, 1, -1, {XFPROP("256x64x32", "1x1x1")}},
    {H100, 1, BF, 64, 64, 64, 3, 56, 1, 1, -1, {XDGRAD("256x64x32", "1x1x1")}},
    {H200, 1, BF, 64, 64, 64, 3, 56, 1, 1, -1, {XDGRAD("256x64x32", "1x1x1")}},
    {H100, 2, BF, 64, 64, 64, 3, 56, 1, 1, -1, {XWGRAD_SPLIT("64x64x64")}},
    {H200, 2, BF, 64, 64, 64, 3, 56, 1, 1, -1, {XWGRAD_SPLIT("64x64x64")}},
    /* 64 -> 128, 3x3/2 on 56 */
    {H100, 0, BF, 64, 64, 128, 3, 56, 2, 1, -1, {XFPROP("256x64x64", "1x1x1")}},
    {H200, 0, BF, 64, 64, 128, 3, 56, 2, 1, -1, {XFPROP("128x128x64", "1x1x1")}},
    {H100, 1, BF, 64, 64, 128, 3, 56, 2, 1, -1, {XDGRAD_STRIDED("256x64x64", "1x1x1")}},
    {H200, 1, BF, 64, 64, 128, 3, 56, 2, 1, -1, {XDGRAD_STRIDED("256x64x64", "1x1x1")}},
    {H100, 2, BF, 64, 64, 128, 3, 56, 2, 1, -1, {XWGRAD_SPLIT("128x64x64")}},
    {H200, 2, BF, 64, 64, 128, 3, 56, 2, 1, -1, {XWGRAD_SPLIT("128x64x64")}},
    /* 64 -> 128, 1x1/2 on 56 (downsample) */
    {H100, 0, BF, 64, 64, 128, 1, 56, 2, 0, -1, {XFPROP("128x128x64", "1x1x1")}},
    {H200, 0, BF, 64, 64, 128, 1, 56, 2, 0, -1, {XFPROP("128x64x64", "1x1x1")}},
    {H100, 1, BF, 64, 64, 128, 1, 56, 2, 0, -1, {XDGRAD_STRIDED("256x64x32", "1x1x1")}},
    {H200, 1, BF, 64, 64, 128, 1, 56, 2, 0, -1, {XDGRAD_STRIDED("256x64x32", "1x1x1")}},
    {H100, 2, BF, 64, 64, 128, 1, 56, 2, 0, -1, {XWGRAD_SPLIT("64x64x64")}},
    {H200, 2, BF, 64, 64, 128, 1, 56, 2, 0, -1, {XWGRAD_SPLIT("64x64x64")}},
    /* 128 -> 128, 3x3 on 28 */
    {H100, 0, BF, 64, 128, 128, 3, 28, 1, 1, -1, {XFPROP("128x128x64", "1x1x1")}},
    {H200, 0, BF, 64, 128, 128, 3, 28, 1, 1, -1, {XFPROP("128x128x64", "1x1x1")}},
    {H100, 1, BF, 64, 128, 128, 3, 28, 1, 1, -1, {XDGRAD("128x128x64", "1x1x1")}},
    {H200, 1, BF, 64, 128, 128, 3, 28, 1, 1, -1, {XDGRAD("64x128x64", "1x1x1")}},
    {H100, 2, BF, 64, 128, 128, 3, 28, 1, 1, -1, {XWGRAD_SPLIT("128x128x64")}},
    {H200, 2, BF, 64, 128, 128, 3, 28, 1, 1, -1, {XWGRAD_SPLIT("128x128x64")}},
    /* 128 -> 256, 3x3/2 on 28 */
    {H100, 0, BF, 64, 128, 256, 3, 28, 2, 1, -1, {XFPROP("128x128x64", "1x1x1")}},
    {H200, 0, BF, 64, 128, 256, 3, 28, 2, 1, -1, {XFPROP("128x128x64", "1x1x1")}},
    {H100, 1, BF, 64, 128, 256, 3, 28, 2, 1, -1, {XDGRAD_STRIDED("256x128x64", "2x1x1")}},
    {H200, 1, BF, 64, 128, 256, 3, 28, 2, 1, -1, {XDGRAD_STRIDED("128x128x64", "1x1x1")}},
    {H100, 2, BF, 64, 128, 256, 3, 28, 2, 1, 0, {XWGRAD("64x64x64")}},
    {H200, 2, BF, 64, 128, 256, 3, 28, 2, 1, -1, {XWGRAD_SEGK("128x64x64")}},
    /* 128 -> 256, 1x1/2 on 28 (downsample) */
    {H100, 0, BF, 64, 128, 256, 1, 28, 2, 0, -1, {XFPROP("128x256x32", "2x1x1")}},
    {H200, 0, BF, 64, 128, 256, 1, 28, 2, 0, -1, {XFPROP("256x128x64", "2x1x1")}},
    {H100, 1, BF, 64, 128, 256, 1, 28, 2, 0, -1, {XDGRAD_STRIDED("256x64x64", "1x1x1")}},
    {H200, 1, BF, 64, 128, 256, 1, 28, 2, 0, -1, {XDGRAD_STRIDED("128x128x64", "1x1x1")}},
    {H100, 2, BF, 64, 128, 256, 1, 28, 2, 0, -1, {XWGRAD_SPLIT("64x64x64")}},
    {H200, 2, BF, 64, 128, 256, 1, 28, 2, 0, -1, {XWGRAD_SPLIT("64x64x64")}},
    /* 256 -> 256, 3x3 on 14 */
    {H100, 0, BF, 64, 256, 256, 3, 14, 1, 1, -1, {XFPROP("128x256x32", "2x1x1")}},
    {H200, 0, BF, 64, 256, 256, 3, 14, 1, 1, -1, {XFPROP("128x256x32", "2x1x1")}},
    {H100, 1, BF, 64, 256, 256, 3, 14, 1, 1, -1, {XDGRAD("128x128x64", "1x1x1")}},
    {H200, 1, BF, 64, 256, 256, 3, 14, 1, 1, -1, {XDGRAD("128x128x32", "1x1x1")}},
    {H100, 2, BF, 64, 256, 256, 3, 14, 1, 1, 0, {XWGRAD("128x64x64")}},
    {H200, 2, BF, 64, 256, 256, 3, 14, 1, 1, 0, {XWGRAD("128x64x64")}},
    /* 256 -> 512, 3x3/2 on 14 */
    {H100, 0, BF, 64, 256, 512, 3, 14, 2, 1, -1, {XFPROP("64x128x64", "1x1x1")}},
    {H200, 0, BF, 64, 256, 512, 3, 14, 2, 1, -1, {XFPROP("64x128x64", "1x1x1")}},
    {H100, 1, BF, 64, 256, 512, 3, 14, 2, 1, -1, {XDGRAD_STRIDED("128x128x64", "1x1x1")}},
    {H200, 1, BF, 64, 256, 512, 3, 14, 2, 1, -1, {XDGRAD_STRIDED("128x128x64", "1x1x1")}},
    {H100, 2, BF, 64, 256, 512, 3, 14, 2, 1, 0, {XWGRAD("128x64x64")}},
    {H200, 2, BF, 64, 256, 512, 3, 14, 2, 1, 0, {XWGRAD("128x64x64")}},
    /* 256 -> 512, 1x1/2 on 14 (downsample) */
    {H100, 0, BF, 64, 256, 512, 1, 14, 2, 0, -1, {XFPROP("128x128x64", "1x1x1")}},
    {H200, 0, BF, 64, 256, 512, 1, 14, 2, 0, -1, {XFPROP("128x128x64", "1x1x1")}},
    {H100, 1, BF, 64, 256, 512, 1, 14, 2, 0, -1, {XDGRAD_STRIDED("64x128x64", "1x1x1")}},
    {H200, 1, BF, 64, 256, 512, 1, 14, 2, 0, -1, {XDGRAD_STRIDED("128x128x32", "1x1x1")}},
    {H100, 2, BF, 64, 256, 512, 1, 14, 2, 0, 0, {XWGRAD("64x64x64")}},
    {H200, 2, BF, 64, 256, 512, 1, 14, 2, 0, 0, {XWGRAD("64x64x64")}},
    /* 512 -> 512, 3x3 on 7 */
    {H100, 0, BF, 64, 512, 512, 3, 7, 1, 1, -1, {XFPROP("128x128x64", "1x1x1")}},
    {H200, 0, BF, 64, 512, 512, 3, 7, 1, 1, -1, {XFPROP("128x64x64", "1x1x1")}},
    {H100, 1, BF, 64, 512, 512, 3, 7, 1, 1, -1, {XDGRAD("128x128x64", "1x1x1")}},
    {H200, 1, BF, 64, 512, 512, 3, 7, 1, 1, -1, {XDGRAD("128x128x64", "1x1x1")}},
    {H100, 2, BF, 64, 512, 512, 3, 7, 1, 1, 0, {XWGRAD("128x64x64")}},
    {H200, 2, BF, 64, 512, 512, 3, 7, 1, 1, 0, {XWGRAD("128x64x64")}},
    /* Probes (H100, N=32, a bias-free conv alone): 64 -> 128 3x3 on 56, and
     * 256 -> 256 3x3/2 on 28. */
    {H100, 0, BF, 32, 64, 128, 3, 56, 1, 1, -1, {XFPROP("128x128x64", "1x1x1")}},
    {H100, 1, BF, 32, 64, 128, 3, 56, 1, 1, -1, {XDGRAD("64x64x64", "1x1x1")}},
    {H100, 2, BF, 32, 64, 128, 3, 56, 1, 1, -1, {XWGRAD_SPLIT("128x64x64")}},
    {H100, 0, BF, 32, 256, 256, 3, 28, 2, 1, -1, {XFPROP("128x128x64", "1x1x1")}},
    {H100, 1, BF, 32, 256, 256, 3, 28, 2, 1, -1, {XDGRAD_STRIDED("128x128x64", "1x1x1")}},
    {H100, 2, BF, 32, 256, 256, 3, 28, 2, 1, 0, {XWGRAD("64x128x64")}},
};
/* clang-format on */

/* GEMM view of a convolution (M x N x K), the sizes autotuning trades
 * tiles on: fprop M = N*P*Q, N = K, K = C*R*S; dgrad M = N*H*W, N = C,
 * K = K*R*S; wgrad M = K, N = C*R*S, K = N*P*Q. */
static void conv_gemm(int dir, double n, double c, double k, int64_t r, int64_t in, int64_t stride, int64_t pad,
                      double g[3])
{
    double out = (double)((in + 2 * pad - r) / (stride > 0 ? stride : 1) + 1);
    double npq = n * out * out, crs = c * r * r;
    if (dir == 0) {
        g[0] = npq, g[1] = k, g[2] = crs;
    } else if (dir == 1) {
        g[0] = n * in * in, g[1] = c, g[2] = k * r * r;
    } else {
        g[0] = k, g[1] = crs, g[2] = npq;
    }
}

/* |log2(a / b)| without libm (the library links none): exponent by halving,
 * mantissa by the atanh series of ln, plenty for a distance. */
static double log2_ratio(double a, double b)
{
    double x = a > b ? a / b : b / a;
    int e = 0;
    while (x >= 2.0) {
        x /= 2.0;
        e++;
    }
    double t = (x - 1.0) / (x + 1.0), t2 = t * t;
    double ln = 2.0 * t * (1.0 + t2 / 3.0 + t2 * t2 / 5.0 + t2 * t2 * t2 / 7.0);
    return e + ln / 0.6931471805599453;
}

/* Shape classes that select different kernel families; a measurement only
 * stands in for a shape of the same class. */
static int conv_class(int c, int k, int r, int stride)
{
    return (c % 8 == 0 && k % 8 == 0) | (r == 1) << 1 | (stride > 1) << 2;
}

/* The measurement for a convolution: the same shape on the same GPU model,
 * else the same shape measured on another GPU (the choice is a timing race
 * that similar GPUs mostly settle alike), else the nearest measured GEMM
 * shape of the same class (distance: sum of |log2| ratios of M, N, K; within
 * a factor 4 overall).  *exact tells whether the shape itself was measured. */
static const conv_meas *conv_lookup(const dnn_conv *cv, int dir, int dtype, int layout, int *exact)
{
    if (layout != DNN_LAYOUT_NHWC || cv->nsp != 2 || cv->groups != 1)
        return NULL;
    if (cv->in[0] != cv->in[1] || cv->filt[0] != cv->filt[1] || cv->stride[0] != cv->stride[1] ||
        cv->pad[0] != cv->pad[1] || cv->dil[0] != 1 || cv->dil[1] != 1)
        return NULL;
    const char *gpu = maya_cfg()->gpu.name;
    int cls = conv_class((int)cv->c, (int)cv->k, (int)cv->filt[0], (int)cv->stride[0]);
    double want[3];
    conv_gemm(dir, (double)cv->n, (double)cv->c, (double)cv->k, cv->filt[0], cv->in[0], cv->stride[0], cv->pad[0],
              want);
    const conv_meas *best = NULL;
    double best_d = 2.0 + 1e-9; /* log2 units */
    for (size_t i = 0; i < sizeof conv_table / sizeof *conv_table; i++) {
        const conv_meas *m = &conv_table[i];
        if (m->dir != dir || m->dtype != dtype || conv_class(m->c, m->k, m->r, m->stride) != cls)
            continue;
        int same_shape = m->n == cv->n && m->c == cv->c && m->k == cv->k && m->r == cv->filt[0] &&
                         m->in == cv->in[0] && m->stride == cv->stride[0] && m->pad == cv->pad[0];
        double have[3];
        conv_gemm(dir, m->n, m->c, m->k, m->r, m->in, m->stride, m->pad, have);
        double dist = same_shape ? 0.0
                                 : log2_ratio(have[0], want[0]) + log2_ratio(have[1], want[1]) +
                                       log2_ratio(have[2], want[2]);
        if (!same_shape && dist == 0.0)
            dist = 0.25; /* same GEMM, other geometry */
        if (strcmp(m->gpu, gpu) != 0)
            dist += 0.5;
        if (dist < best_d) {
            best_d = dist;
            best = m;
            *exact = same_shape;
        }
    }
    return best;
}

int64_t dnn_conv_workspace(const dnn_conv *cv, int dir, int dtype, int layout)
{
    int exact = 0;
    const conv_meas *m = conv_lookup(cv, dir, dtype, layout, &exact);
    return m && exact ? m->ws : -1;
}

void dnn_kernels_conv(dnn_record *d, const dnn_conv *cv, int dir, int dtype, int layout)
{
    int exact = 0;
    const conv_meas *m = conv_lookup(cv, dir, dtype, layout, &exact);
    if (!m) {
        conv_rules(d, cv, dir, dtype, layout);
        return;
    }
    /* cuDNN's own memsets (not in the profiler's kernel list): one before a
     * dgrad and one before a split-K wgrad, 29 per ResNet-18 step as on the
     * H100. */
    if (dir == 1 || (dir == 2 && m->kern[0] && !strcmp(m->kern[0], INIT_WS)))
        dnn_add_kernel(d, MEMSET);
    for (int i = 0; i < 5 && m->kern[i]; i++)
        dnn_add_kernel(d, m->kern[i]);
}

static const char *ctype(int dtype)
{
    switch (dtype) {
    case CUDNN_DATA_HALF: return "__half";
    case CUDNN_DATA_BFLOAT16: return "__nv_bfloat16";
    default: return "float";
    }
}

void dnn_kernels_bn(dnn_record *d, int phase, int dtype, int layout)
{
    const char *t = ctype(dtype);
    int half = dtype == CUDNN_DATA_HALF || dtype == CUDNN_DATA_BFLOAT16;
    if (layout == DNN_LAYOUT_NHWC) {
        if (phase == 0) {
            dnn_add_kernel(d, MEMSET);
            addf(d, "void cudnn::batchnorm_fwtr_nhwc_semiPersist<%s, float, %s, 512, 16, %d, 4, 1, 1, false, false, true, 2>"
                    "(cudnn::NhwcBatchNormFwdParams<%s, float>)", t, t, half ? 5 : 2, t);
        } else if (phase == 1) {
            dnn_add_kernel(d, MEMSET);
            dnn_add_kernel(d, MEMSET);
            addf(d, "void cudnn::batchnorm_bwtr_nhwc_semiPersist<%s, float, %s, 512, 16, 3, 4, 1, %d, true, 2>"
                    "(cudnn::NhwcBatchNormBwdParams<%s, float>)", t, t, half ? 0 : 1, t);
        } else {
            addf(d, "void cudnn::bn_fw_inf_1C11_kernel_NHWC<%s, float, true, 1>(%s, float, cudnn::bn_fw_inf_args)", t, t);
        }
        return;
    }
    if (phase == 0)
        addf(d, "void cudnn::bn_fw_tr_1C11_singleread<%s, 512, true, 1, 2, 0>(cudnn::bn_fw_tr_1C11_args<%s>)", t, t);
    else if (phase == 1)
        addf(d, "void cudnn::bn_bw_1C11_singleread<%s, 512, true, 1, 2, 0>(cudnn::bn_bw_1C11_args<%s>)", t, t);
    else
        addf(d, "void cudnn::bn_fw_inf_1C11_kernel_NCHW<%s, float, true, 1>(%s, float, cudnn::bn_fw_inf_args)", t, t);
}

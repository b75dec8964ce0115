/* Names of the kernels a real H100 (cuDNN 9.19, torch 2.11.0+cu130) launches
 * for one cuDNN operation, so emulated traces can be diffed against
 * torch.profiler output.  The families and their shape-dependent parts were
 * read off torch.profiler on an H100 (docs/dnn.md lists the probes); shapes
 * that were not probed reuse the nearest observed tile, so treat the suffixes
 * as estimates and the prefixes as facts.  "Memset (Device)" entries are the
 * memsets cuDNN issues itself before the kernels.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dnn.h"

#define MEMSET "Memset (Device)"

void dnn_add_kernel(dnn_record *d, const char *name)
{
    if (d->nk >= DNN_MAX_KERNELS)
        return;
    snprintf(d->kernels[d->nk++], DNN_KNAME, "%s", name);
}

static void addf(dnn_record *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void addf(dnn_record *d, const char *fmt, ...)
{
    if (d->nk >= DNN_MAX_KERNELS)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->kernels[d->nk++], DNN_KNAME, fmt, ap);
    va_end(ap);
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

void dnn_kernels_sdpa(dnn_record *d, const dnn_sdpa *s, int backward)
{
    int64_t hd = flash_d(s->d > s->dv ? s->d : s->dv);
    if (!backward) {
        dnn_add_kernel(d, MEMSET);
        addf(d, "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x%lld_4x1x1_cga1x1x1_kernel0_0",
             (long long)hd);
        return;
    }
    dnn_add_kernel(d, MEMSET);
    dnn_add_kernel(d, MEMSET);
    addf(d, "void cudnn::fusion::compute_dot_do_o_specialized<true, %lld>(void const*, void const*, void*, void*, "
            "unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, "
            "unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, "
            "unsigned int, unsigned int, unsigned int, float, void const*, void const*, void const*, void const*, "
            "void const*, bool, void const*, void*, void const*, int, int, int, int, int, int, int, int, int)",
         (long long)hd);
    addf(d, "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x%lld_1x4x1_cga1x1x1_kernel0_0",
         (long long)hd);
    dnn_add_kernel(d, "void cudnn::fusion::convert_dq_to_16bits<true>(void const*, void*, unsigned int, unsigned int, "
                      "unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, "
                      "unsigned int, float const*, float const*, float const*, float*, void const*, void*, void*, bool, bool)");
    if (s->gqa) {
        /* dK and dV are computed per Q head and summed over each group. */
        static const char reduce[] =
            "void cudnn::fusion::fmha_reduce_head<true>(void const*, void*, unsigned int, unsigned int, unsigned int, "
            "unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, "
            "unsigned int, float const*, float const*, float const*, float*, void*, bool, void*, bool)";
        dnn_add_kernel(d, reduce);
        dnn_add_kernel(d, reduce);
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

void dnn_kernels_conv(dnn_record *d, const dnn_conv *cv, int dir, int dtype, int layout)
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

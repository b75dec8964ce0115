/* Unit tests of kernels handed out by the driver API (Triton's), no CUDA process needed:
 * - cuModuleGetFunction gives each module's kernel an entry of its own (two Inductor graphs
 *   may both hold a triton_poi_fused_add_0), and the same entry when a module is asked twice;
 * - maya_kernel_facts: a kernel of the pending name takes the facts at its first launch and
 *   records them as its integer arguments from then on, after they are withdrawn too; a kernel
 *   of another name, or one first launched while none are pending, records none. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "own_trace.h"
#include "rt.h"

void maya_kernel_facts(const char *name, const int64_t *values, int n);

/* The integer words of the n-th KERNEL record of function `f` in this process's trace, or -1. */
static int launch_ints(const char *dir, const maya_func *f, int nth, uint64_t *out) {
    size_t nslots;
    const maya_rec *recs = own_trace(dir, &nslots);
    for (size_t i = 0; i < nslots; i++) {
        if (recs[i].kind != MK_KERNEL || recs[i].a[0] != f->func_id || nth--) continue;
        int k = (int)recs[i].a[4];
        for (int j = 0; j < k && i + 1 < nslots; j++) memcpy(&out[j], (const char *)&recs[i + 1] + 8 + 8 * j, 8);
        return k;
    }
    return -1;
}

static CUfunction launch(const char *image, const char *name, CUmodule *module) {
    CUfunction fn = NULL;
    if (!*module) CHECK(cuModuleLoadData(module, image) == CUDA_SUCCESS);
    CHECK(cuModuleGetFunction(&fn, *module, name) == CUDA_SUCCESS && fn);
    CHECK(cuLaunchKernel(fn, 4, 1, 1, 128, 1, 1, 0, NULL, NULL, NULL) == CUDA_SUCCESS);
    return fn;
}

int main(void) {
    char dir[] = "/tmp/maya-test-XXXXXX";
    if (!emulate_into(dir)) return 2;
    CHECK(cuInit(0) == CUDA_SUCCESS);
    static const char image[] = "\x7f" "ELF";
    const char *name = "triton_poi_fused_add_0";

    CUmodule m1 = NULL, m2 = NULL;
    int64_t facts[6] = {8192, 1024, 16777216, 8388608, 2, 1};
    maya_kernel_facts(name, facts, 6);
    CUfunction a = launch(image, name, &m1);
    maya_kernel_facts(NULL, NULL, 0);
    CUfunction again = NULL;
    CHECK(cuModuleGetFunction(&again, m1, name) == CUDA_SUCCESS && again == a);
    CHECK(cuLaunchKernel(a, 4, 1, 1, 128, 1, 1, 0, NULL, NULL, NULL) == CUDA_SUCCESS);

    /* Another graph's kernel of the same name: its own entry, its own facts. */
    int64_t other[6] = {64, 0, 256, 256, 1, 1};
    maya_kernel_facts(name, other, 6);
    CUfunction b = launch(image, name, &m2);
    maya_kernel_facts(NULL, NULL, 0);
    CHECK(b != a);

    /* A kernel first launched with nothing pending, and one whose name is not the pending one. */
    CUmodule m3 = NULL, m4 = NULL;
    CUfunction c = launch(image, name, &m3);
    maya_kernel_facts("triton_red_fused_sum_1", facts, 6);
    CUfunction d = launch(image, name, &m4);
    maya_kernel_facts(NULL, NULL, 0);

    uint64_t out[MAYA_KERNEL_INTS] = {0};
    CHECK(launch_ints(dir, (maya_func *)a, 0, out) == 6 && out[0] == 8192 && out[1] == 1024 && out[2] == 16777216 &&
          out[3] == 8388608 && out[4] == 2 && out[5] == 1);
    memset(out, 0, sizeof out);
    CHECK(launch_ints(dir, (maya_func *)a, 1, out) == 6 && out[0] == 8192);  /* kept after they were withdrawn */
    CHECK(launch_ints(dir, (maya_func *)b, 0, out) == 6 && out[0] == 64 && out[2] == 256);
    CHECK(launch_ints(dir, (maya_func *)c, 0, out) == 0);
    CHECK(launch_ints(dir, (maya_func *)d, 0, out) == 0);
    CHECK(cuModuleUnload(m1) == CUDA_SUCCESS && cuModuleUnload(m2) == CUDA_SUCCESS);
    return CHECK_SUMMARY("test_driver_kernels");
}

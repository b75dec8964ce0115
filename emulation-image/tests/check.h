/* The unit tests' one assertion: count, report where it failed, carry on.
 * Each test program ends with CHECK_SUMMARY("name"). */
#ifndef MAYA_CHECK_H
#define MAYA_CHECK_H

#include <stdio.h>
#include <stdlib.h>

/* The spec of the small virtual GPU the tests emulate (1 GiB). */
static const char *const TEST_SPEC =
    "name=TEST-GPU;marketing=Test GPU;cc=9.0;sms=132;mem=1073741824;reserved=0;"
    "smem_sm=233472;smem_optin=232448;threads_sm=2048;blocks_sm=32;regs_sm=65536";

static int failures, checks;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        checks++;                                                                     \
        if (!(cond)) {                                                                \
            failures++;                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                             \
    } while (0)

/* A new trace directory (`dir`, a mkdtemp template) and the environment of one emulated test GPU;
 * 0 when the directory cannot be made. */
static inline int emulate_into(char *dir) {
    if (!mkdtemp(dir)) return 0;
    setenv("MAYA_GPU_SPEC", TEST_SPEC, 1);
    setenv("MAYA_TRACE_DIR", dir, 1);
    setenv("MAYA_NUM_GPUS", "1", 1);
    return 1;
}

#define CHECK_SUMMARY(name) (printf("%s: %d passed, %d failed\n", name, checks - failures, failures), failures ? 1 : 0)

#endif

/* Calls Maya does not emulate, and calls it answers only approximately.
 *
 * Unsupported calls are named: the process gets the library's own error code,
 * stderr says which API it was (once per name), and the trace gets an
 * UNSUPPORTED record so `maya emulate` can report it.
 *
 * Approximated calls succeed, but with an answer or a record a real GPU might
 * not give (an attribute answered 0, a descriptor accepted unchecked, work
 * recorded without its shape).  Each occurrence writes an APPROXIMATED record
 * naming what was approximated, and `maya emulate` reports every name with
 * its count, so no approximation passes silently.
 *
 * The library areas torch links but training rarely uses (cuFFT, cuSPARSE,
 * cuSPARSELt, cuFile, CUPTI) are answered here wholesale, as are driver
 * entry points we know of but do not emulate (MAYA_DRIVER_UNSUPPORTED in
 * driver_symbols.h).  These stubs take no parameters: on x86-64 the caller owns its arguments, so returning a status
 * without reading them is safe for any prototype. */
#include "driver_symbols.h"
#include "maya.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_count;
#define MAX_NAMES 256
static char *g_seen[MAX_NAMES];  /* copied: a looked-up driver symbol's name is the caller's */
static int g_nseen;

void maya_unsupported(const char *api) {
    maya_call c = maya_enter();
    int first = 1;
    pthread_mutex_lock(&g_lock);
    g_count++;
    for (int i = 0; i < g_nseen; i++)
        if (!strcmp(g_seen[i], api)) first = 0;
    if (first && g_nseen < MAX_NAMES && (g_seen[g_nseen] = strdup(api))) g_nseen++;
    pthread_mutex_unlock(&g_lock);
    if (first) fprintf(stderr, "maya: %s is not supported by the emulator; the call returned an error\n", api);
    maya_rec r;
    maya_rec_init(&r, MK_UNSUPPORTED, c);
    r.a[0] = maya_str(api);
    maya_emit(&r);
}

int maya_unsupported_count(void) { return g_count; }

/* Names approximated so far (copied: callers format them on the stack) and their counts. */
static struct { char *what; int count; } g_approx[MAX_NAMES];
static int g_napprox, g_approx_total;

void maya_approximated(const char *what) {
    maya_call c = maya_enter();
    int first = 1;
    pthread_mutex_lock(&g_lock);
    g_approx_total++;
    for (int i = 0; i < g_napprox; i++)
        if (!strcmp(g_approx[i].what, what)) {
            g_approx[i].count++;
            first = 0;
        }
    if (first && g_napprox < MAX_NAMES && (g_approx[g_napprox].what = strdup(what)))
        g_approx[g_napprox++].count = 1;
    pthread_mutex_unlock(&g_lock);
    if (first) maya_log("approximated: %s", what);
    maya_rec r;
    maya_rec_init(&r, MK_APPROXIMATED, c);
    r.a[0] = maya_str(what);
    maya_emit(&r);
}

int maya_approximated_count(const char *what) {
    int n = 0;
    pthread_mutex_lock(&g_lock);
    if (!what) n = g_approx_total;
    for (int i = 0; what && i < g_napprox; i++)
        if (!strcmp(g_approx[i].what, what)) n = g_approx[i].count;
    pthread_mutex_unlock(&g_lock);
    return n;
}

/* Status codes each library uses for "not supported". */
#define CUFFT_NOT_SUPPORTED 16
#define CUSPARSE_NOT_SUPPORTED 10
#define CUFILE_NOT_SUPPORTED 5009
#define CUPTI_NOT_SUPPORTED 27
#define CUDA_DRV_NOT_SUPPORTED 801

#define STUB(name, code)                       \
    MAYA_EXPORT int name(void);                \
    MAYA_EXPORT int name(void) {               \
        maya_unsupported(#name);               \
        return code;                           \
    }

#define CUFFT_APIS(X) X(cufftCreate) X(cufftDestroy) X(cufftSetAutoAllocation) X(cufftSetStream) \
    X(cufftSetWorkArea) X(cufftXtExec) X(cufftXtMakePlanMany)
#define CUFILE_APIS(X) X(cuFileBufDeregister) X(cuFileBufRegister) X(cuFileHandleDeregister) \
    X(cuFileHandleRegister) X(cuFileRead) X(cuFileWrite)
#define CUPTI_APIS(X) X(cuptiActivityDisable) X(cuptiActivityEnable) X(cuptiActivityEnableCudaEventDeviceTimestamps) \
    X(cuptiActivityEnableDriverApi) X(cuptiActivityEnableRuntimeApi) X(cuptiActivityFlushAll) \
    X(cuptiActivityGetNextRecord) X(cuptiActivityGetNumDroppedRecords) X(cuptiActivityPopExternalCorrelationId) \
    X(cuptiActivityPushExternalCorrelationId) X(cuptiActivityRegisterCallbacks) \
    X(cuptiActivityRegisterTimestampCallback) X(cuptiActivitySetAttribute) X(cuptiEnableCallback) \
    X(cuptiEnableDomain) X(cuptiFinalize) X(cuptiGetVersion) X(cuptiSubscribe) X(cuptiUnsubscribe)
#define CUSPARSE_APIS(X) X(cusparseCreate) X(cusparseDestroy) X(cusparseSetStream) X(cusparseSetPointerMode) \
    X(cusparseCreateCsr) X(cusparseCreateCoo) X(cusparseCreateDnMat) X(cusparseCreateDnVec) \
    X(cusparseDestroySpMat) X(cusparseDestroyDnMat) X(cusparseDestroyDnVec) X(cusparseSpMM) \
    X(cusparseSpMM_bufferSize) X(cusparseSpMV) X(cusparseSpMV_bufferSize) X(cusparseSDDMM) \
    X(cusparseSDDMM_bufferSize) X(cusparseSDDMM_preprocess) X(cusparseSpGEMM_compute) X(cusparseSpGEMM_copy) \
    X(cusparseSpGEMM_createDescr) X(cusparseSpGEMM_destroyDescr) X(cusparseSpGEMM_workEstimation) \
    X(cusparseXcoo2csr) X(cusparseXcoosortByRow) X(cusparseXcoosort_bufferSizeExt) X(cusparseXcsrsort) \
    X(cusparseXcsrsort_bufferSizeExt) X(cusparseCreateMatDescr) X(cusparseDestroyMatDescr) \
    X(cusparseCreateIdentityPermutation) X(cusparseCsrSetPointers) X(cusparseCsrSetStridedBatch) \
    X(cusparseDnMatSetStridedBatch) X(cusparseSpMatGetSize) X(cusparseSpMatSetAttribute) \
    X(cusparseSpSM_analysis) X(cusparseSpSM_bufferSize) X(cusparseSpSM_createDescr) X(cusparseSpSM_destroyDescr) \
    X(cusparseSpSM_solve) X(cusparseSpSV_analysis) X(cusparseSpSV_bufferSize) X(cusparseSpSV_createDescr) \
    X(cusparseSpSV_destroyDescr) X(cusparseSpSV_solve) X(cusparseLtInit) X(cusparseLtMatmul) \
    X(cusparseLtDenseDescriptorInit) X(cusparseLtStructuredDescriptorInit) X(cusparseLtMatmulDescriptorInit) \
    X(cusparseLtMatmulPlanInit) X(cusparseLtMatmulSearch) X(cusparseLtSpMMACompress2) X(cusparseLtSpMMACompressedSize2)
#define STUB_CUFFT(n) STUB(n, CUFFT_NOT_SUPPORTED)
#define STUB_CUFILE(n) STUB(n, CUFILE_NOT_SUPPORTED)
#define STUB_CUPTI(n) STUB(n, CUPTI_NOT_SUPPORTED)
#define STUB_CUSPARSE(n) STUB(n, CUSPARSE_NOT_SUPPORTED)
#define STUB_DRIVER(n) STUB(n, CUDA_DRV_NOT_SUPPORTED)
CUFFT_APIS(STUB_CUFFT)
CUFILE_APIS(STUB_CUFILE)
CUPTI_APIS(STUB_CUPTI)
CUSPARSE_APIS(STUB_CUSPARSE)
MAYA_DRIVER_UNSUPPORTED(STUB_DRIVER)

typedef struct { const char *name; void *fn; } stub_entry;
static const stub_entry g_driver_stubs[] = {
#define DRIVER_ENTRY(n) {#n, (void *)n},
    MAYA_DRIVER_UNSUPPORTED(DRIVER_ENTRY)
#undef DRIVER_ENTRY
};

/* A named failing stub for a driver entry point, or NULL. */
void *maya_driver_stub(const char *symbol) {
    for (size_t i = 0; i < sizeof g_driver_stubs / sizeof *g_driver_stubs; i++)
        if (!strcmp(g_driver_stubs[i].name, symbol)) return g_driver_stubs[i].fn;
    return NULL;
}

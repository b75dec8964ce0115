/* Module registration and kernel launches through the runtime.
 *
 * CUDA 13 launches go Push -> GetKernel -> Pop -> __cudaLaunchKernel; the
 * cudaKernel_t we hand out is the host stub itself, so every path looks the
 * kernel up by stub.  Device variables get addresses in device memory when a
 * program asks for them. */
#include "maya.h"
#include "rt.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------- registration */

typedef struct { const void *host; uint64_t size, dev_addr; const char *name; } device_var;
static pthread_mutex_t g_var_lock = PTHREAD_MUTEX_INITIALIZER;
static device_var *g_vars;
static size_t g_nvars, g_cap_vars;

MAYA_EXPORT void **__cudaRegisterFatBinary(void *fatbin) {
    void **handle = calloc(1, sizeof(void *));
    *handle = fatbin;
    return handle;
}

MAYA_EXPORT void __cudaRegisterFatBinaryEnd(void **handle) {}

MAYA_EXPORT void __cudaUnregisterFatBinary(void **handle) { free(handle); }

MAYA_EXPORT void __cudaRegisterFunction(void **handle, const char *host_fun, char *device_fun, const char *device_name,
                                        int thread_limit, uint3 *tid, uint3 *bid, dim3 *bdim, dim3 *gdim, int *wsize) {
    maya_registry_add(host_fun, device_name ? device_name : device_fun);
}

MAYA_EXPORT void __cudaRegisterVar(void **handle, char *host_var, char *device_address, const char *device_name,
                                   int ext, size_t size, int constant, int global) {
    pthread_mutex_lock(&g_var_lock);
    if (g_nvars == g_cap_vars) {
        g_cap_vars = g_cap_vars ? g_cap_vars * 2 : 256;
        g_vars = realloc(g_vars, g_cap_vars * sizeof *g_vars);
    }
    g_vars[g_nvars++] = (device_var){host_var, size, 0, device_name};
    pthread_mutex_unlock(&g_var_lock);
}

MAYA_EXPORT void __cudaRegisterManagedVar(void **handle, void **host_var_ptr, char *device_address,
                                          const char *device_name, int ext, size_t size, int constant, int global) {}

/* Device address of a registered variable; allocated on first use. */
static cudaError_t symbol_address(const void *symbol, uint64_t *addr, uint64_t *size) {
    cudaError_t rc = cudaErrorInvalidSymbol;
    pthread_mutex_lock(&g_var_lock);
    for (size_t i = 0; i < g_nvars; i++) {
        device_var *v = &g_vars[i];
        if (v->host != symbol) continue;
        if (!v->dev_addr && maya_va_reserve(maya_current_device(), v->size ? v->size : 1, 256, &v->dev_addr) != 0) {
            rc = cudaErrorMemoryAllocation;
            break;
        }
        *addr = v->dev_addr;
        if (size) *size = v->size;
        rc = cudaSuccess;
        break;
    }
    pthread_mutex_unlock(&g_var_lock);
    return rc;
}

MAYA_EXPORT cudaError_t cudaGetSymbolAddress(void **dev_ptr, const void *symbol) {
    uint64_t a = 0;
    cudaError_t rc = symbol_address(symbol, &a, NULL);
    if (rc != cudaSuccess || !dev_ptr) return maya_rt_error(rc != cudaSuccess ? rc : cudaErrorInvalidValue);
    *dev_ptr = (void *)a;
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaGetSymbolSize(size_t *size, const void *symbol) {
    uint64_t a = 0, s = 0;
    cudaError_t rc = symbol_address(symbol, &a, &s);
    if (rc != cudaSuccess || !size) return maya_rt_error(rc != cudaSuccess ? rc : cudaErrorInvalidValue);
    *size = s;
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t n, size_t offset,
                                           enum cudaMemcpyKind kind) {
    uint64_t a = 0;
    cudaError_t rc = symbol_address(symbol, &a, NULL);
    if (rc != cudaSuccess) return maya_rt_error(rc);
    return maya_memcpy((char *)a + offset, src, n, kind == cudaMemcpyDefault ? cudaMemcpyHostToDevice : kind, NULL, 0);
}

MAYA_EXPORT cudaError_t cudaMemcpyToSymbolAsync(const void *symbol, const void *src, size_t n, size_t offset,
                                                enum cudaMemcpyKind kind, cudaStream_t s) {
    uint64_t a = 0;
    cudaError_t rc = symbol_address(symbol, &a, NULL);
    if (rc != cudaSuccess) return maya_rt_error(rc);
    return maya_memcpy((char *)a + offset, src, n, kind == cudaMemcpyDefault ? cudaMemcpyHostToDevice : kind, s, 1);
}

/* -------------------------------------------------------------- launches */

typedef struct { dim3 grid, block; size_t smem; void *stream; } call_config;
static __thread call_config t_configs[16];
static __thread int t_nconfigs;

MAYA_EXPORT unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t smem, void *stream) {
    if (t_nconfigs < 16) t_configs[t_nconfigs] = (call_config){grid, block, smem, stream};
    t_nconfigs++;
    return 0;
}

MAYA_EXPORT cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *smem, void *stream) {
    if (t_nconfigs <= 0) return cudaErrorMissingConfiguration;
    t_nconfigs--;
    if (t_nconfigs >= 16) return cudaErrorMissingConfiguration;
    call_config c = t_configs[t_nconfigs];
    *grid = c.grid;
    *block = c.block;
    *smem = c.smem;
    *(void **)stream = c.stream;
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *stub) {
    if (!kernel) return cudaErrorInvalidValue;
    if (!maya_registry_get(stub)) return maya_rt_error(cudaErrorInvalidDeviceFunction);
    *kernel = (cudaKernel_t)stub;
    return cudaSuccess;
}

static cudaError_t launch(maya_call c, const void *func, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                          void **args) {
    maya_func *f = maya_registry_get(func);
    if (!f) return maya_rt_error(cudaErrorInvalidDeviceFunction);
    if (block.x * block.y * block.z > 1024 || !grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z)
        return maya_rt_error(cudaErrorInvalidConfiguration);
    maya_device_activate(maya_stream_device(stream));
    maya_thread_drives_device();
    maya_record_launch(c, f, grid.x, grid.y, grid.z, block.x, block.y, block.z, smem, stream, ML_RUNTIME, args);
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void **args, size_t smem,
                                           cudaStream_t stream) {
    return launch(maya_enter(), kernel, grid, block, smem, stream, args);
}

MAYA_EXPORT cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t smem,
                                         cudaStream_t stream) {
    return launch(maya_enter(), func, grid, block, smem, stream, args);
}

MAYA_EXPORT cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 grid, dim3 block, void **args, size_t smem,
                                                    cudaStream_t stream) {
    return launch(maya_enter(), func, grid, block, smem, stream, args);
}

MAYA_EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args) {
    if (!config) return maya_rt_error(cudaErrorInvalidValue);
    return launch(maya_enter(), func, config->gridDim, config->blockDim, config->dynamicSmemBytes, config->stream,
                  args);
}

/* ------------------------------------------------- function attributes */

MAYA_EXPORT cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func) {
    maya_func *f = maya_registry_get(func);
    if (!attr) return maya_rt_error(cudaErrorInvalidValue);
    if (!f) return maya_rt_error(cudaErrorInvalidDeviceFunction);
    const maya_gpu *g = &maya_cfg()->gpu;
    memset(attr, 0, sizeof *attr);
    attr->maxThreadsPerBlock = f->max_threads;
    attr->numRegs = f->num_regs;
    attr->sharedSizeBytes = (size_t)f->static_smem;
    attr->maxDynamicSharedSizeBytes = g->smem_per_block_optin - f->static_smem;
    attr->ptxVersion = g->cc_major * 10 + g->cc_minor;
    attr->binaryVersion = attr->ptxVersion;
    attr->cacheModeCA = 0;
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value) {
    return maya_registry_get(func) ? cudaSuccess : maya_rt_error(cudaErrorInvalidDeviceFunction);
}

MAYA_EXPORT cudaError_t cudaFuncSetCacheConfig(const void *func, enum cudaFuncCache config) { return cudaSuccess; }

/* Resident blocks per SM for a block size, from the catalog's limits: the
 * registers a kernel really uses are unknown without its cubin, so assume
 * the registry's default. */
int maya_occupancy(const maya_func *f, int block_size, size_t dyn_smem) {
    const maya_gpu *g = &maya_cfg()->gpu;
    if (block_size <= 0) return 0;
    int warps = (block_size + 31) / 32;
    int by_threads = g->max_threads_per_sm / (warps * 32);
    int regs = f ? f->num_regs : 32;
    int by_regs = g->regs_per_sm / (regs * warps * 32 > 0 ? regs * warps * 32 : 1);
    size_t smem = dyn_smem + (size_t)(f ? f->static_smem : 0) + 1024;
    int by_smem = smem ? (int)((size_t)g->smem_per_sm / smem) : g->max_blocks_per_sm;
    int n = g->max_blocks_per_sm;
    if (by_threads < n) n = by_threads;
    if (by_regs < n) n = by_regs;
    if (by_smem < n) n = by_smem;
    return n;
}

MAYA_EXPORT cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, const void *func, int block_size,
                                                                               size_t dyn_smem, unsigned int flags) {
    if (!n) return maya_rt_error(cudaErrorInvalidValue);
    maya_func *f = maya_registry_get(func);
    if (!f) return maya_rt_error(cudaErrorInvalidDeviceFunction);
    *n = maya_occupancy(f, block_size, dyn_smem);
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, const void *func, int block_size,
                                                                      size_t dyn_smem) {
    return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(n, func, block_size, dyn_smem, 0);
}

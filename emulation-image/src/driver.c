/* The driver API.  Nothing links against libcuda: torch, cuBLASLt and Triton
 * reach it through dlopen("libcuda.so.1") (our SONAME) and entry-point
 * lookups, so the table at the bottom (generated from driver_symbols.h) is
 * the driver's real surface here.  A name the table does not hold is reported
 * as unsupported, never NULL with success. */
#include "driver_symbols.h"
#include "maya.h"
#include "rt.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static CUresult cu_error(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return CUDA_SUCCESS;
    case cudaErrorMemoryAllocation: return CUDA_ERROR_OUT_OF_MEMORY;
    case cudaErrorInvalidDevice: return CUDA_ERROR_INVALID_DEVICE;
    case cudaErrorNotSupported: return CUDA_ERROR_NOT_SUPPORTED;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

/* ------------------------------------------------- init, devices, contexts */

typedef struct { int device; } maya_ctx;
static maya_ctx g_ctx[MAYA_MAX_DEVICES];

MAYA_EXPORT CUresult cuInit(unsigned int flags) { return CUDA_SUCCESS; }

MAYA_EXPORT CUresult cuDriverGetVersion(int *v) {
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    *v = CUDA_VERSION;
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuDeviceGetCount(int *n) {
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    *n = maya_cfg()->num_devices;
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    if (!maya_device_valid(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
    *d = ordinal;
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute attr, CUdevice dev) {
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    if (!maya_device_valid(dev)) return CUDA_ERROR_INVALID_DEVICE;
    if (maya_device_attribute((int)attr, dev, v) != 0) {
        char what[96];
        snprintf(what, sizeof what, "cuDeviceGetAttribute: attribute %d answered 0", (int)attr);
        maya_approximated(what);
        *v = 0;
    }
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
    if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (!maya_device_valid(dev)) return CUDA_ERROR_INVALID_DEVICE;
    strncpy(name, maya_cfg()->gpu.marketing_name, (size_t)len - 1);
    name[len - 1] = 0;
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) {
    if (!uuid) return CUDA_ERROR_INVALID_VALUE;
    if (!maya_device_valid(dev)) return CUDA_ERROR_INVALID_DEVICE;
    maya_device_uuid(dev, (unsigned char *)uuid->bytes);
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuDeviceTotalMem(size_t *bytes, CUdevice dev) {
    if (!bytes) return CUDA_ERROR_INVALID_VALUE;
    *bytes = maya_cfg()->gpu.memory_bytes;
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active) {
    if (!maya_device_valid(dev)) return CUDA_ERROR_INVALID_DEVICE;
    if (flags) *flags = 0;
    if (active) *active = maya_device_active(dev);
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev) {
    if (!ctx) return CUDA_ERROR_INVALID_VALUE;
    if (!maya_device_valid(dev)) return CUDA_ERROR_INVALID_DEVICE;
    maya_device_activate(dev);
    g_ctx[dev].device = dev;
    *ctx = (CUcontext)&g_ctx[dev];
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
    return maya_device_valid(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

static int ctx_device(CUcontext ctx) {
    int d = (int)((maya_ctx *)ctx - g_ctx);
    return maya_device_valid(d) ? d : -1;
}

MAYA_EXPORT CUresult cuCtxGetCurrent(CUcontext *ctx) {
    if (!ctx) return CUDA_ERROR_INVALID_VALUE;
    int dev = maya_current_device();
    *ctx = maya_device_active(dev) ? (CUcontext)&g_ctx[dev] : NULL;
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
    if (!ctx) return CUDA_SUCCESS;
    int dev = ctx_device(ctx);
    if (dev < 0) return CUDA_ERROR_INVALID_CONTEXT;
    maya_set_current_device(dev);
    return CUDA_SUCCESS;
}

static __thread int t_ctx_stack[8];
static __thread int t_ctx_depth;

MAYA_EXPORT CUresult cuCtxPushCurrent(CUcontext ctx) {
    int dev = ctx_device(ctx);
    if (dev < 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (t_ctx_depth < 8) t_ctx_stack[t_ctx_depth] = maya_current_device();
    t_ctx_depth++;
    maya_set_current_device(dev);
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuCtxPopCurrent(CUcontext *ctx) {
    if (ctx) *ctx = (CUcontext)&g_ctx[maya_current_device()];
    if (t_ctx_depth > 0 && --t_ctx_depth < 8) maya_set_current_device(t_ctx_stack[t_ctx_depth]);
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuCtxGetDevice(CUdevice *dev) {
    if (!dev) return CUDA_ERROR_INVALID_VALUE;
    *dev = maya_current_device();
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuCtxSynchronize(void) { return cu_error(cudaDeviceSynchronize()); }

MAYA_EXPORT CUresult cuCtxGetLimit(size_t *value, CUlimit limit) {
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    *value = limit == CU_LIMIT_STACK_SIZE ? 1024 : 0;
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuCtxSetLimit(CUlimit limit, size_t value) { return CUDA_SUCCESS; }

MAYA_EXPORT CUresult cuGetErrorString(CUresult e, const char **s) {
    if (!s) return CUDA_ERROR_INVALID_VALUE;
    switch (e) {
    case CUDA_SUCCESS: *s = "no error"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "out of memory"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *s = "operation not supported (not emulated by maya)"; break;
    case CUDA_ERROR_NOT_FOUND: *s = "named symbol not found"; break;
    default: *s = "invalid argument"; break;
    }
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuGetErrorName(CUresult e, const char **s) {
    if (!s) return CUDA_ERROR_INVALID_VALUE;
    switch (e) {
    case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *s = "CUDA_ERROR_NOT_SUPPORTED"; break;
    case CUDA_ERROR_NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; break;
    default: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    }
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ memory */

MAYA_EXPORT CUresult cuMemAlloc(CUdeviceptr *p, size_t size) {
    return cu_error(maya_malloc((void **)p, size, maya_current_device(), MA_DRIVER, NULL));
}

MAYA_EXPORT CUresult cuMemFree(CUdeviceptr p) { return cu_error(maya_free((void *)p, MA_DRIVER, NULL)); }

MAYA_EXPORT CUresult cuMemGetInfo(size_t *free_bytes, size_t *total) { return cu_error(cudaMemGetInfo(free_bytes, total)); }

MAYA_EXPORT CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n) {
    return cu_error(maya_memcpy((void *)dst, src, n, cudaMemcpyHostToDevice, NULL, 0));
}

MAYA_EXPORT CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n) {
    return cu_error(maya_memcpy(dst, (const void *)src, n, cudaMemcpyDeviceToHost, NULL, 0));
}

MAYA_EXPORT CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t n, CUstream stream) {
    maya_call c = maya_enter();
    uint32_t *p = (uint32_t *)dst;
    if (maya_mem_device_of(dst) < 0) return CUDA_ERROR_INVALID_VALUE;
    int moved = n * 4 <= maya_cfg()->copy_limit;
    for (size_t i = 0; moved && i < n; i++) p[i] = value;
    maya_rec r;
    maya_rec_init(&r, MK_MEMSET, c);
    r.stream = maya_stream_id(stream);
    r.flags = (uint8_t)(MF_ASYNC | (moved ? MF_DATA : 0));
    r.a[0] = dst;
    r.a[1] = n * 4;
    r.a[2] = value;
    r.a32 = 4;  /* element size */
    maya_emit(&r);
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuStreamWriteValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
    return cuMemsetD32Async(addr, value, 1, stream);
}

/* Virtual memory management (expandable segments): physical handles charge
 * capacity, reservations take addresses, maps tie the two together. */
typedef struct { uint64_t size; int device; } phys_handle;
typedef struct { uint64_t va, size; phys_handle *h; } mapping;
static pthread_mutex_t g_map_lock = PTHREAD_MUTEX_INITIALIZER;
static mapping *g_maps;
static size_t g_nmaps, g_cap_maps;

MAYA_EXPORT CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
                                                   CUmemAllocationGranularity_flags option) {
    if (!g) return CUDA_ERROR_INVALID_VALUE;
    *g = 2u << 20;
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                                 unsigned long long flags) {
    if (!handle || !prop) return CUDA_ERROR_INVALID_VALUE;
    maya_call c = maya_enter();
    int dev = prop->location.id;
    int failed = maya_mem_charge(dev, size) != 0;
    maya_rec r;
    maya_rec_init(&r, MK_MALLOC, c);
    r.device = (uint8_t)dev;
    r.flags = failed ? MF_FAILED : 0;
    r.a32 = MA_VMM;
    r.a[1] = size;
    r.a[2] = maya_mem_used(dev);
    if (!failed) {
        phys_handle *h = calloc(1, sizeof *h);
        h->size = size;
        h->device = dev;
        *handle = (CUmemGenericAllocationHandle)h;
        r.a[0] = (uint64_t)h;
    }
    maya_emit(&r);
    return failed ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    phys_handle *h = (phys_handle *)handle;
    if (!h) return CUDA_ERROR_INVALID_VALUE;
    maya_call c = maya_enter();
    maya_mem_uncharge(h->device, h->size);
    maya_rec r;
    maya_rec_init(&r, MK_FREE, c);
    r.device = (uint8_t)h->device;
    r.a32 = MA_VMM;
    r.a[0] = (uint64_t)h;
    r.a[1] = h->size;
    r.a[2] = maya_mem_used(h->device);
    maya_emit(&r);
    free(h);
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr,
                                         unsigned long long flags) {
    if (!ptr) return CUDA_ERROR_INVALID_VALUE;
    uint64_t p = 0;
    if (maya_va_reserve(maya_current_device(), size, align ? align : (2u << 20), &p) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    *ptr = p;
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    return maya_va_release(ptr) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

MAYA_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                              unsigned long long flags) {
    if (!handle || maya_mem_device_of(ptr) < 0) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_map_lock);
    if (g_nmaps == g_cap_maps) {
        g_cap_maps = g_cap_maps ? g_cap_maps * 2 : 256;
        g_maps = realloc(g_maps, g_cap_maps * sizeof *g_maps);
    }
    g_maps[g_nmaps++] = (mapping){ptr, size, (phys_handle *)handle};
    pthread_mutex_unlock(&g_map_lock);
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    pthread_mutex_lock(&g_map_lock);
    for (size_t i = 0; i < g_nmaps;) {
        if (g_maps[i].va >= ptr && g_maps[i].va < ptr + size) g_maps[i] = g_maps[--g_nmaps];
        else i++;
    }
    pthread_mutex_unlock(&g_map_lock);
    madvise((void *)ptr, size, MADV_DONTNEED);
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr) {
    if (!handle) return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_map_lock);
    for (size_t i = 0; i < g_nmaps; i++) {
        if ((uint64_t)addr >= g_maps[i].va && (uint64_t)addr < g_maps[i].va + g_maps[i].size) {
            *handle = (CUmemGenericAllocationHandle)g_maps[i].h;
            rc = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&g_map_lock);
    return rc;
}

MAYA_EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop, CUmemGenericAllocationHandle handle) {
    phys_handle *h = (phys_handle *)handle;
    if (!prop || !h) return CUDA_ERROR_INVALID_VALUE;
    memset(prop, 0, sizeof *prop);
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = h->device;
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuMemGetAddressRange(CUdeviceptr *base, size_t *size, CUdeviceptr ptr) {
    uint64_t s = 0;
    uint64_t b = maya_mem_lookup(ptr, &s, NULL);
    if (!b) return CUDA_ERROR_NOT_FOUND;
    if (base) *base = b;
    if (size) *size = s;
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attr, CUdeviceptr ptr) {
    if (!data) return CUDA_ERROR_INVALID_VALUE;
    int dev = maya_mem_device_of(ptr);
    uint64_t size = 0, base = maya_mem_lookup(ptr, &size, NULL);
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        if (dev < 0 && !maya_host_pinned((void *)ptr)) return CUDA_ERROR_INVALID_VALUE;
        *(unsigned *)data = dev >= 0 ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        if (dev < 0) return CUDA_ERROR_INVALID_VALUE;
        *(int *)data = dev;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = ptr;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        if (!base) return CUDA_ERROR_INVALID_VALUE;
        *(CUdeviceptr *)data = base;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        if (!base) return CUDA_ERROR_INVALID_VALUE;
        *(size_t *)data = size;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        if (dev < 0) return CUDA_ERROR_INVALID_VALUE;
        *(CUcontext *)data = (CUcontext)&g_ctx[dev];
        return CUDA_SUCCESS;
    default:
        maya_unsupported("cuPointerGetAttribute (this attribute)");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

/* ------------------------------------------------------ modules, launches */

/* A module's kernels: each cuModuleGetFunction name of a module gets a registry entry of its own,
 * so that kernels of the same name in two modules (two Inductor graphs both have a
 * triton_poi_fused_add_0) stay apart; a module asked twice for a name gives the same entry. */
typedef struct {
    size_t n, cap;
    maya_func **funcs;
} maya_module;

static CUmodule new_module(void) { return (CUmodule)calloc(1, sizeof(maya_module)); }

MAYA_EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image) {
    if (!module || !image) return CUDA_ERROR_INVALID_VALUE;
    *module = new_module();
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int n, CUjit_option *opts, void **vals) {
    return cuModuleLoadData(module, image);
}

/* Inductor's launcher loads the cubin Triton wrote to disk. */
MAYA_EXPORT CUresult cuModuleLoad(CUmodule *module, const char *path) {
    if (!module || !path) return CUDA_ERROR_INVALID_VALUE;
    if (access(path, R_OK) != 0) return CUDA_ERROR_FILE_NOT_FOUND;
    *module = new_module();
    return CUDA_SUCCESS;
}

/* The registry keeps the module's entries: a launch may still name one after the unload. */
MAYA_EXPORT CUresult cuModuleUnload(CUmodule module) {
    maya_module *m = (maya_module *)module;
    if (m) free(m->funcs);
    free(m);
    return CUDA_SUCCESS;
}

/* A new registry entry for a driver-side kernel, keyed by a copy of its name of its own. */
maya_func *maya_driver_function(const char *name) {
    char *key = strdup(name);
    maya_registry_add(key, key);
    return maya_registry_get(key);
}

MAYA_EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule module, const char *name) {
    if (!f || !name) return CUDA_ERROR_INVALID_VALUE;
    maya_module *m = (maya_module *)module;
    if (!m) {
        *f = (CUfunction)maya_driver_function(name);
        return CUDA_SUCCESS;
    }
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    maya_func *found = NULL;
    for (size_t i = 0; i < m->n && !found; i++)
        if (!strcmp(m->funcs[i]->name, name)) found = m->funcs[i];
    if (!found) {
        if (m->n == m->cap) {
            m->cap = m->cap ? m->cap * 2 : 4;
            m->funcs = realloc(m->funcs, m->cap * sizeof *m->funcs);
        }
        found = m->funcs[m->n++] = maya_driver_function(name);
    }
    pthread_mutex_unlock(&lock);
    *f = (CUfunction)found;
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuFuncGetAttribute(int *v, CUfunction_attribute attr, CUfunction func) {
    maya_func *f = (maya_func *)func;
    if (!v || !f) return CUDA_ERROR_INVALID_VALUE;
    const maya_gpu *g = &maya_cfg()->gpu;
    switch (attr) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = f->max_threads; break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *v = f->static_smem; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *v = f->num_regs; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *v = g->smem_per_block_optin - f->static_smem; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *v = g->cc_major * 10 + g->cc_minor; break;
    default: {  /* local (spill) and constant bytes, cache and cluster settings: not known here */
        char what[96];
        snprintf(what, sizeof what, "cuFuncGetAttribute: attribute %d answered 0", (int)attr);
        maya_approximated(what);
        *v = 0;
        break;
    }
    }
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute attr, int value) { return CUDA_SUCCESS; }
MAYA_EXPORT CUresult cuFuncSetCacheConfig(CUfunction f, CUfunc_cache config) { return CUDA_SUCCESS; }

MAYA_EXPORT CUresult cuLaunchKernel(CUfunction func, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                    unsigned bz, unsigned smem, CUstream stream, void **params, void **extra) {
    maya_call c = maya_enter();
    if (!func) return CUDA_ERROR_INVALID_HANDLE;
    maya_record_launch(c, (maya_func *)func, gx, gy, gz, bx, by, bz, smem, stream, ML_DRIVER, params);
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *cfg, CUfunction func, void **params, void **extra) {
    if (!cfg) return CUDA_ERROR_INVALID_VALUE;
    return cuLaunchKernel(func, cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ, cfg->blockDimX, cfg->blockDimY,
                          cfg->blockDimZ, cfg->sharedMemBytes, cfg->hStream, params, extra);
}

MAYA_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction func, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                               unsigned by, unsigned bz, unsigned smem, CUstream stream, void **params) {
    return cuLaunchKernel(func, gx, gy, gz, bx, by, bz, smem, stream, params, NULL);
}

int maya_occupancy(const maya_func *f, int block_size, size_t dyn_smem);

MAYA_EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, CUfunction func, int block_size, size_t smem) {
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    *n = maya_occupancy((maya_func *)func, block_size, smem);
    return CUDA_SUCCESS;
}

MAYA_EXPORT CUresult cuOccupancyMaxActiveClusters(int *n, CUfunction func, const CUlaunchConfig *cfg) {
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    *n = maya_cfg()->gpu.sm_count / 2;
    return CUDA_SUCCESS;
}

/* A TMA descriptor is opaque device data; kernels never read it here. */
MAYA_EXPORT CUresult cuTensorMapEncodeTiled(CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank, void *addr,
                                            const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
                                            const cuuint32_t *elem_strides, CUtensorMapInterleave interleave,
                                            CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                                            CUtensorMapFloatOOBfill fill) {
    if (!map) return CUDA_ERROR_INVALID_VALUE;
    memset(map, 0, sizeof *map);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------ entry-point table */

typedef struct { const char *name; void *fn; } entry;
static const entry g_entries[] = {
#define ENTRY(name) {#name, (void *)name},
    MAYA_DRIVER_EMULATED(ENTRY)
#undef ENTRY
};

void *maya_driver_stub(const char *symbol);

/* Length of `s` without a trailing "_v<digits>" version suffix. */
static size_t unversioned_len(const char *s) {
    size_t n = strlen(s), i = n;
    while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9') i--;
    if (i < n && i >= 2 && s[i - 1] == 'v' && s[i - 2] == '_') return i - 2;
    return n;
}

/* The function a driver symbol names: the entry of that exact name, else the entry of the same
 * name in another version ("cuMemAlloc" asks for what cuda.h calls cuMemAlloc_v2).  A request
 * for an explicit version other than the one held is answered with it and counted approximated. */
void *maya_driver_lookup(const char *symbol) {
    if (!symbol) return NULL;
    for (size_t i = 0; i < sizeof g_entries / sizeof *g_entries; i++)
        if (!strcmp(g_entries[i].name, symbol)) return g_entries[i].fn;
    void *stub = maya_driver_stub(symbol);
    if (stub) return stub;
    size_t n = unversioned_len(symbol);
    for (size_t i = 0; i < sizeof g_entries / sizeof *g_entries; i++) {
        const char *name = g_entries[i].name;
        if (unversioned_len(name) != n || strncmp(name, symbol, n) != 0) continue;
        if (symbol[n]) {  /* an explicit version we do not hold */
            char what[256];
            snprintf(what, sizeof what, "cuGetProcAddress: %s answered with %s", symbol, name);
            maya_approximated(what);
        }
        return g_entries[i].fn;
    }
    return NULL;
}

MAYA_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                      CUdriverProcAddressQueryResult *status) {
    if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
    *pfn = maya_driver_lookup(symbol);
    if (status) *status = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (!*pfn) {
        maya_unsupported(symbol);
        return CUDA_ERROR_NOT_FOUND;
    }
    return CUDA_SUCCESS;
}

/* A symbol not found is answered as the driver answers it (success, status "not found", NULL)
 * and reported unsupported by its name. */
MAYA_EXPORT cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned int version,
                                                         unsigned long long flags,
                                                         enum cudaDriverEntryPointQueryResult *status) {
    if (!symbol || !fn) return maya_rt_error(cudaErrorInvalidValue);
    *fn = maya_driver_lookup(symbol);
    if (status) *status = *fn ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
    if (!*fn) maya_unsupported(symbol);
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **fn, unsigned long long flags,
                                                enum cudaDriverEntryPointQueryResult *status) {
    return cudaGetDriverEntryPointByVersion(symbol, fn, CUDA_VERSION, flags, status);
}

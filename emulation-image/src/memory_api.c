/* Memory entry points of the runtime: allocation, copies, sets, pinned host
 * memory, pointer queries and the stream-ordered pool.  Addresses and
 * capacity come from memory.c; this file turns calls into records. */
#include "maya.h"
#include "rt.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ------------------------------------------------------- pinned host memory */

typedef struct { void *p; size_t size; } host_block;
static pthread_mutex_t g_host_lock = PTHREAD_MUTEX_INITIALIZER;
static host_block *g_host;
static size_t g_nhost, g_cap_host;

void maya_host_track(void *p, size_t size) {
    pthread_mutex_lock(&g_host_lock);
    if (g_nhost == g_cap_host) {
        g_cap_host = g_cap_host ? g_cap_host * 2 : 64;
        g_host = realloc(g_host, g_cap_host * sizeof *g_host);
    }
    g_host[g_nhost++] = (host_block){p, size};
    pthread_mutex_unlock(&g_host_lock);
}

int maya_host_untrack(void *p) {
    int found = 0;
    pthread_mutex_lock(&g_host_lock);
    for (size_t i = 0; i < g_nhost; i++) {
        if (g_host[i].p == p) {
            g_host[i] = g_host[--g_nhost];
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&g_host_lock);
    return found;
}

int maya_host_pinned(const void *p) {
    int found = 0;
    pthread_mutex_lock(&g_host_lock);
    for (size_t i = 0; i < g_nhost && !found; i++)
        found = (const char *)p >= (const char *)g_host[i].p && (const char *)p < (const char *)g_host[i].p + g_host[i].size;
    pthread_mutex_unlock(&g_host_lock);
    return found;
}

/* ------------------------------------------------------------- allocation */

cudaError_t maya_malloc(void **ptr, size_t size, int dev, uint32_t source, const void *stream) {
    if (!ptr) return maya_rt_error(cudaErrorInvalidValue);
    if (size == 0) { *ptr = NULL; return cudaSuccess; }
    maya_call c = maya_enter();
    uint64_t p = 0;
    int failed = maya_mem_alloc(dev, size, &p) != 0;
    maya_device_activate(dev);
    maya_rec r;
    maya_rec_init(&r, MK_MALLOC, c);
    r.device = (uint8_t)dev;
    r.stream = maya_stream_id(stream);
    r.flags = (uint8_t)(failed ? MF_FAILED : 0) | (source == MA_ASYNC ? MF_ASYNC : 0);
    r.a32 = source;
    r.a[0] = p;
    r.a[1] = size;
    r.a[2] = maya_mem_used(dev);
    maya_emit(&r);
    if (failed) {
        *ptr = NULL;
        return maya_rt_error(cudaErrorMemoryAllocation);
    }
    *ptr = (void *)p;
    return cudaSuccess;
}

cudaError_t maya_free(void *ptr, uint32_t source, const void *stream) {
    if (!ptr) return cudaSuccess;
    maya_call c = maya_enter();
    uint64_t size = 0;
    int dev = maya_mem_device_of((uint64_t)ptr);
    if (maya_mem_free(dev, (uint64_t)ptr, &size) != 0) return maya_rt_error(cudaErrorInvalidValue);
    maya_rec r;
    maya_rec_init(&r, MK_FREE, c);
    r.device = (uint8_t)dev;
    r.stream = maya_stream_id(stream);
    r.flags = source == MA_ASYNC ? MF_ASYNC : 0;
    r.a32 = source;
    r.a[0] = (uint64_t)ptr;
    r.a[1] = size;
    r.a[2] = maya_mem_used(dev);
    maya_emit(&r);
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaMalloc(void **ptr, size_t size) {
    return maya_malloc(ptr, size, maya_current_device(), MA_RUNTIME, NULL);
}

MAYA_EXPORT cudaError_t cudaFree(void *ptr) {
    maya_device_activate(maya_current_device());  /* cudaFree(0) is how programs create the context */
    return maya_free(ptr, MA_RUNTIME, NULL);
}

MAYA_EXPORT cudaError_t cudaMallocAsync(void **ptr, size_t size, cudaStream_t stream) {
    return maya_malloc(ptr, size, maya_stream_device(stream), MA_ASYNC, stream);
}

MAYA_EXPORT cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream) { return maya_free(ptr, MA_ASYNC, stream); }

MAYA_EXPORT cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    uint64_t f, t;
    maya_mem_info(maya_current_device(), &f, &t);
    if (free_bytes) *free_bytes = f;
    if (total_bytes) *total_bytes = t;
    return cudaSuccess;
}

/* The pool of cudaMallocAsync: one per device; we allocate directly, so the
 * pool only answers what it holds. */
static int g_pool_tag[MAYA_MAX_DEVICES];

MAYA_EXPORT cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int dev) {
    if (!pool) return maya_rt_error(cudaErrorInvalidValue);
    if (!maya_device_valid(dev)) return maya_rt_error(cudaErrorInvalidDevice);
    *pool = (cudaMemPool_t)&g_pool_tag[dev];
    return cudaSuccess;
}

static int pool_device(cudaMemPool_t pool) {
    int dev = (int)((int *)pool - g_pool_tag);
    return maya_device_valid(dev) ? dev : -1;
}

MAYA_EXPORT cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value) {
    int dev = pool_device(pool);
    if (dev < 0 || !value) return maya_rt_error(cudaErrorInvalidValue);
    switch (attr) {
    case cudaMemPoolAttrReservedMemCurrent: case cudaMemPoolAttrUsedMemCurrent:
        *(uint64_t *)value = maya_mem_used(dev); break;
    case cudaMemPoolAttrReservedMemHigh: case cudaMemPoolAttrUsedMemHigh:
        *(uint64_t *)value = maya_mem_peak(dev); break;
    case cudaMemPoolAttrReleaseThreshold:
        *(uint64_t *)value = 0; break;
    default: { /* the reuse policies: the pool here never reuses across streams */
        char what[96];
        snprintf(what, sizeof what, "cudaMemPoolGetAttribute: attribute %d answered 0", (int)attr);
        maya_approximated(what);
        *(int *)value = 0;
        break;
    }
    }
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value) {
    return pool_device(pool) < 0 ? maya_rt_error(cudaErrorInvalidValue) : cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaMemPoolSetAccess(cudaMemPool_t pool, const struct cudaMemAccessDesc *desc, size_t n) {
    return pool_device(pool) < 0 ? maya_rt_error(cudaErrorInvalidValue) : cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t keep) {
    return pool_device(pool) < 0 ? maya_rt_error(cudaErrorInvalidValue) : cudaSuccess;
}

/* ------------------------------------------------------------ copies/sets */

static int resolve_kind(const void *dst, const void *src, int kind) {
    if (kind != cudaMemcpyDefault) return kind;
    int d = maya_mem_device_of((uint64_t)dst) >= 0, s = maya_mem_device_of((uint64_t)src) >= 0;
    return d ? (s ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
             : (s ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
}

cudaError_t maya_memcpy(void *dst, const void *src, size_t n, int kind, const void *stream, int async) {
    maya_call c = maya_enter();
    maya_thread_drives_device();
    kind = resolve_kind(dst, src, kind);
    int dev_dst = maya_mem_device_of((uint64_t)dst), dev_src = maya_mem_device_of((uint64_t)src);
    if (n && ((kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice) && dev_dst < 0))
        return maya_rt_error(cudaErrorInvalidValue);
    if (n && ((kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice) && dev_src < 0))
        return maya_rt_error(cudaErrorInvalidValue);
    int moved = maya_mem_copy(dst, src, n);
    const void *host = kind == cudaMemcpyHostToDevice ? src : kind == cudaMemcpyDeviceToHost ? dst : NULL;
    maya_rec r;
    maya_rec_init(&r, MK_MEMCPY, c);
    r.device = (uint8_t)(dev_dst >= 0 ? dev_dst : dev_src >= 0 ? dev_src : maya_current_device());
    r.stream = maya_stream_id(stream);
    r.flags = (uint8_t)((async ? MF_ASYNC : 0) | (moved ? MF_DATA : 0) | (host && maya_host_pinned(host) ? MF_PINNED : 0));
    r.a32 = (uint32_t)kind;
    r.a[0] = (uint64_t)dst;
    r.a[1] = (uint64_t)src;
    r.a[2] = n;
    r.a[3] = (uint64_t)(uint32_t)(dev_dst + 1) | ((uint64_t)(uint32_t)(dev_src + 1) << 32);
    maya_emit(&r);
    return cudaSuccess;
}

cudaError_t maya_memset(void *dst, int value, size_t n, const void *stream, int async) {
    maya_call c = maya_enter();
    maya_thread_drives_device();
    int dev = maya_mem_device_of((uint64_t)dst);
    if (n && dev < 0) return maya_rt_error(cudaErrorInvalidValue);
    int moved = maya_mem_set(dst, value, n);
    maya_rec r;
    maya_rec_init(&r, MK_MEMSET, c);
    r.device = (uint8_t)(dev >= 0 ? dev : maya_current_device());
    r.stream = maya_stream_id(stream);
    r.flags = (uint8_t)((async ? MF_ASYNC : 0) | (moved ? MF_DATA : 0));
    r.a[0] = (uint64_t)dst;
    r.a[1] = n;
    r.a[2] = (uint64_t)(unsigned)value;
    maya_emit(&r);
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) {
    return maya_memcpy(dst, src, n, kind, NULL, 0);
}

MAYA_EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s) {
    return maya_memcpy(dst, src, n, kind, s, 1);
}

MAYA_EXPORT cudaError_t cudaMemcpyPeerAsync(void *dst, int dst_dev, const void *src, int src_dev, size_t n, cudaStream_t s) {
    return maya_memcpy(dst, src, n, cudaMemcpyDeviceToDevice, s, 1);
}

MAYA_EXPORT cudaError_t cudaMemcpyPeer(void *dst, int dst_dev, const void *src, int src_dev, size_t n) {
    return maya_memcpy(dst, src, n, cudaMemcpyDeviceToDevice, NULL, 0);
}

MAYA_EXPORT cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                          size_t height, enum cudaMemcpyKind kind, cudaStream_t s) {
    if (dpitch == width && spitch == width) return maya_memcpy(dst, src, width * height, kind, s, 1);
    maya_unsupported("cudaMemcpy2DAsync (pitched)");
    return maya_rt_error(cudaErrorNotSupported);
}

MAYA_EXPORT cudaError_t cudaMemset(void *dst, int value, size_t n) { return maya_memset(dst, value, n, NULL, 0); }

MAYA_EXPORT cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t s) {
    return maya_memset(dst, value, n, s, 1);
}

/* ------------------------------------------------------ pinned host memory */

MAYA_EXPORT cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags) {
    if (!ptr) return maya_rt_error(cudaErrorInvalidValue);
    void *p = NULL;
    if (posix_memalign(&p, 4096, size ? size : 1) != 0) return maya_rt_error(cudaErrorMemoryAllocation);
    maya_host_track(p, size);
    *ptr = p;
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaMallocHost(void **ptr, size_t size) { return cudaHostAlloc(ptr, size, 0); }

MAYA_EXPORT cudaError_t cudaFreeHost(void *ptr) {
    if (!ptr) return cudaSuccess;
    if (!maya_host_untrack(ptr)) return maya_rt_error(cudaErrorInvalidValue);
    free(ptr);
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags) {
    if (!ptr) return maya_rt_error(cudaErrorInvalidValue);
    maya_host_track(ptr, size);
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaHostUnregister(void *ptr) {
    return maya_host_untrack(ptr) ? cudaSuccess : maya_rt_error(cudaErrorHostMemoryNotRegistered);
}

MAYA_EXPORT cudaError_t cudaHostGetDevicePointer(void **dev_ptr, void *host, unsigned int flags) {
    if (!dev_ptr || !maya_host_pinned(host)) return maya_rt_error(cudaErrorInvalidValue);
    *dev_ptr = host;  /* unified addressing: the same address */
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *ptr) {
    if (!a) return maya_rt_error(cudaErrorInvalidValue);
    memset(a, 0, sizeof *a);
    int dev = maya_mem_device_of((uint64_t)ptr);
    if (dev >= 0) {
        a->type = cudaMemoryTypeDevice;
        a->device = dev;
        a->devicePointer = (void *)ptr;
    } else if (maya_host_pinned(ptr)) {
        a->type = cudaMemoryTypeHost;
        a->device = maya_current_device();
        a->devicePointer = (void *)ptr;
        a->hostPointer = (void *)ptr;
    } else {
        a->type = cudaMemoryTypeUnregistered;
        a->device = -2;
        a->hostPointer = (void *)ptr;
    }
    return cudaSuccess;
}

/* ------------------------------------------------------------------- IPC */

/* Sharing device memory between processes needs real memory behind the
 * handles; not emulated. */
MAYA_EXPORT cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *h, void *p) {
    maya_unsupported("cudaIpcGetMemHandle");
    return maya_rt_error(cudaErrorNotSupported);
}
MAYA_EXPORT cudaError_t cudaIpcOpenMemHandle(void **p, cudaIpcMemHandle_t h, unsigned int flags) {
    maya_unsupported("cudaIpcOpenMemHandle");
    return maya_rt_error(cudaErrorNotSupported);
}
MAYA_EXPORT cudaError_t cudaIpcCloseMemHandle(void *p) {
    maya_unsupported("cudaIpcCloseMemHandle");
    return maya_rt_error(cudaErrorNotSupported);
}
MAYA_EXPORT cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t *h, cudaEvent_t e) {
    maya_unsupported("cudaIpcGetEventHandle");
    return maya_rt_error(cudaErrorNotSupported);
}
MAYA_EXPORT cudaError_t cudaIpcOpenEventHandle(cudaEvent_t *e, cudaIpcEventHandle_t h) {
    maya_unsupported("cudaIpcOpenEventHandle");
    return maya_rt_error(cudaErrorNotSupported);
}

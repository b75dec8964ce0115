/* Devices: identity, properties and attributes from the catalog, the current
 * device, versions and the runtime's error state. */
#include "maya.h"
#include "rt.h"

#include <stdio.h>
#include <string.h>

static __thread int t_device;
static __thread cudaError_t t_last_error;
static int g_active[MAYA_MAX_DEVICES];  /* primary context "created" */

int maya_current_device(void) { return t_device; }
int maya_device_valid(int dev) { return dev >= 0 && dev < maya_cfg()->num_devices; }
void maya_device_activate(int dev) { if (maya_device_valid(dev)) g_active[dev] = 1; }
int maya_device_active(int dev) { return maya_device_valid(dev) && g_active[dev]; }
void maya_set_current_device(int dev) { t_device = dev; maya_device_activate(dev); }

cudaError_t maya_rt_error(cudaError_t e) {
    if (e != cudaSuccess) t_last_error = e;
    return e;
}

MAYA_EXPORT cudaError_t cudaGetDeviceCount(int *count) {
    if (!count) return maya_rt_error(cudaErrorInvalidValue);
    *count = maya_cfg()->num_devices;
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaGetDevice(int *device) {
    if (!device) return maya_rt_error(cudaErrorInvalidValue);
    *device = t_device;
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaSetDevice(int device) {
    if (!maya_device_valid(device)) return maya_rt_error(cudaErrorInvalidDevice);
    maya_call c = maya_enter();
    int changed = device != t_device;
    maya_set_current_device(device);
    if (changed) {
        maya_rec r;
        maya_rec_init(&r, MK_SET_DEVICE, c);
        r.a[0] = (uint64_t)device;
        maya_emit(&r);
    }
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaDriverGetVersion(int *v) {
    if (!v) return maya_rt_error(cudaErrorInvalidValue);
    *v = CUDA_VERSION;
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaRuntimeGetVersion(int *v) {
    if (!v) return maya_rt_error(cudaErrorInvalidValue);
    *v = CUDART_VERSION;
    return cudaSuccess;
}

/* The same 16 bytes every time for a device, so runs are deterministic. */
void maya_device_uuid(int dev, unsigned char out[16]) {
    const char *name = maya_cfg()->gpu.name;
    uint64_t h = 1469598103934665603ull;
    for (const char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    memcpy(out, "MAYA", 4);
    memcpy(out + 4, &h, 8);
    uint32_t d = (uint32_t)dev;
    memcpy(out + 12, &d, 4);
}

int maya_device_pci_bus(int dev) { return 0x18 + dev * 0x10; }

MAYA_EXPORT cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int dev) {
    if (!p) return maya_rt_error(cudaErrorInvalidValue);
    if (!maya_device_valid(dev)) return maya_rt_error(cudaErrorInvalidDevice);
    const maya_gpu *g = &maya_cfg()->gpu;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", g->marketing_name);
    maya_device_uuid(dev, (unsigned char *)p->uuid.bytes);
    p->totalGlobalMem = g->memory_bytes;
    p->sharedMemPerBlock = (size_t)g->smem_per_block;
    p->regsPerBlock = g->regs_per_block;
    p->warpSize = 32;
    p->memPitch = 2147483647;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = 1024; p->maxThreadsDim[1] = 1024; p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647; p->maxGridSize[1] = 65535; p->maxGridSize[2] = 65535;
    p->totalConstMem = 65536;
    p->major = g->cc_major;
    p->minor = g->cc_minor;
    p->textureAlignment = 512;
    p->texturePitchAlignment = 32;
    p->multiProcessorCount = g->sm_count;
    p->canMapHostMemory = 1;
    p->surfaceAlignment = 512;
    p->concurrentKernels = 1;
    p->ECCEnabled = 1;
    p->pciBusID = maya_device_pci_bus(dev);
    p->pciDeviceID = 0;
    p->asyncEngineCount = 5;
    p->unifiedAddressing = 1;
    p->memoryBusWidth = g->memory_bus_width;
    p->l2CacheSize = g->l2_bytes;
    p->persistingL2CacheMaxSize = g->l2_bytes / 4 * 3;
    p->maxThreadsPerMultiProcessor = g->max_threads_per_sm;
    p->streamPrioritiesSupported = 1;
    p->globalL1CacheSupported = 1;
    p->localL1CacheSupported = 1;
    p->sharedMemPerMultiprocessor = (size_t)g->smem_per_sm;
    p->regsPerMultiprocessor = g->regs_per_sm;
    p->managedMemory = 1;
    p->hostNativeAtomicSupported = 0;
    p->concurrentManagedAccess = 1;
    p->computePreemptionSupported = 1;
    p->cooperativeLaunch = 1;
    p->sharedMemPerBlockOptin = (size_t)g->smem_per_block_optin;
    p->maxBlocksPerMultiProcessor = g->max_blocks_per_sm;
    p->accessPolicyMaxWindowSize = 134213632;
    p->reservedSharedMemPerBlock = 1024;
    p->hostRegisterSupported = 1;
    p->sparseCudaArraySupported = 1;
    p->timelineSemaphoreInteropSupported = 1;
    p->memoryPoolsSupported = 1;
    p->gpuDirectRDMASupported = 1;
    p->memoryPoolSupportedHandleTypes = 1;
    p->deferredMappingCudaArraySupported = 1;
    p->ipcEventSupported = 1;
    p->clusterLaunch = g->cc_major >= 9;
    p->unifiedFunctionPointers = 1;
    p->deviceNumaId = -1;
    p->hostNumaId = -1;
    p->gpuPciDeviceID = ((unsigned)g->pci_device_id << 16) | 0x10de;
    return cudaSuccess;
}

int maya_device_attribute(int attr, int dev, int *value) {
    const maya_gpu *g = &maya_cfg()->gpu;
    int v;
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: v = 1024; break;
    case cudaDevAttrMaxBlockDimX: case cudaDevAttrMaxBlockDimY: v = 1024; break;
    case cudaDevAttrMaxBlockDimZ: v = 64; break;
    case cudaDevAttrMaxGridDimX: v = 2147483647; break;
    case cudaDevAttrMaxGridDimY: case cudaDevAttrMaxGridDimZ: v = 65535; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: v = g->smem_per_block; break;
    case cudaDevAttrTotalConstantMemory: v = 65536; break;
    case cudaDevAttrWarpSize: v = 32; break;
    case cudaDevAttrMaxRegistersPerBlock: v = g->regs_per_block; break;
    case cudaDevAttrClockRate: v = g->clock_khz; break;
    case cudaDevAttrMultiProcessorCount: v = g->sm_count; break;
    case cudaDevAttrComputeCapabilityMajor: v = g->cc_major; break;
    case cudaDevAttrComputeCapabilityMinor: v = g->cc_minor; break;
    case cudaDevAttrMemoryClockRate: v = g->memory_clock_khz; break;
    case cudaDevAttrGlobalMemoryBusWidth: v = g->memory_bus_width; break;
    case cudaDevAttrL2CacheSize: v = g->l2_bytes; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: v = g->max_threads_per_sm; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: v = g->smem_per_sm; break;
    case cudaDevAttrMaxRegistersPerMultiprocessor: v = g->regs_per_sm; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: v = g->smem_per_block_optin; break;
    case cudaDevAttrMaxBlocksPerMultiprocessor: v = g->max_blocks_per_sm; break;
    case cudaDevAttrPciBusId: v = maya_device_pci_bus(dev); break;
    case cudaDevAttrPciDeviceId: case cudaDevAttrPciDomainId: v = 0; break;
    case cudaDevAttrAsyncEngineCount: v = 5; break;
    case cudaDevAttrIntegrated: case cudaDevAttrKernelExecTimeout: case cudaDevAttrTccDriver:
    case cudaDevAttrIsMultiGpuBoard: case cudaDevAttrPageableMemoryAccess:
    case cudaDevAttrPageableMemoryAccessUsesHostPageTables: case cudaDevAttrHostNativeAtomicSupported:
    case cudaDevAttrDirectManagedMemAccessFromHost: case cudaDevAttrComputeMode:
        v = 0; break;
    case cudaDevAttrStreamPrioritiesSupported: case cudaDevAttrUnifiedAddressing: case cudaDevAttrManagedMemory:
    case cudaDevAttrConcurrentManagedAccess: case cudaDevAttrConcurrentKernels: case cudaDevAttrCanMapHostMemory:
    case cudaDevAttrEccEnabled: case cudaDevAttrCooperativeLaunch: case cudaDevAttrComputePreemptionSupported:
    case cudaDevAttrMemoryPoolsSupported: case cudaDevAttrHostRegisterSupported: case cudaDevAttrGlobalL1CacheSupported:
    case cudaDevAttrLocalL1CacheSupported: case cudaDevAttrCanUseHostPointerForRegisteredMem:
    case cudaDevAttrGPUDirectRDMASupported: case cudaDevAttrIpcEventSupport:
        v = 1; break;
    case cudaDevAttrClusterLaunch: v = g->cc_major >= 9; break;
    case cudaDevAttrReservedSharedMemoryPerBlock: v = 1024; break;
    case cudaDevAttrMaxPersistingL2CacheSize: v = g->l2_bytes / 4 * 3; break;
    case cudaDevAttrMaxAccessPolicyWindowSize: v = 134213632; break;
    case cudaDevAttrMemoryPoolSupportedHandleTypes: v = 1; break;
    case cudaDevAttrNumaConfig: v = 0; break;
    case cudaDevAttrNumaId: case cudaDevAttrHostNumaId: v = -1; break;
    default:
        return -1;
    }
    *value = v;
    return 0;
}

MAYA_EXPORT cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int dev) {
    if (!value) return maya_rt_error(cudaErrorInvalidValue);
    if (!maya_device_valid(dev)) return maya_rt_error(cudaErrorInvalidDevice);
    if (maya_device_attribute((int)attr, dev, value) != 0) {
        char what[96];
        snprintf(what, sizeof what, "cudaDeviceGetAttribute: attribute %d answered 0", (int)attr);
        maya_approximated(what);
        *value = 0;
    }
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaDeviceGetPCIBusId(char *bus, int len, int dev) {
    if (!bus || len <= 0) return maya_rt_error(cudaErrorInvalidValue);
    if (!maya_device_valid(dev)) return maya_rt_error(cudaErrorInvalidDevice);
    snprintf(bus, (size_t)len, "00000000:%02X:00.0", maya_device_pci_bus(dev));
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest) {
    if (least) *least = 0;
    if (greatest) *greatest = -5;
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaDeviceCanAccessPeer(int *can, int dev, int peer) {
    if (!can) return maya_rt_error(cudaErrorInvalidValue);
    if (!maya_device_valid(dev) || !maya_device_valid(peer)) return maya_rt_error(cudaErrorInvalidDevice);
    *can = dev != peer;
    return cudaSuccess;
}

MAYA_EXPORT cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
    return maya_device_valid(peer) ? cudaSuccess : maya_rt_error(cudaErrorInvalidDevice);
}

MAYA_EXPORT cudaError_t cudaGetLastError(void) {
    cudaError_t e = t_last_error;
    t_last_error = cudaSuccess;
    return e;
}

MAYA_EXPORT cudaError_t cudaPeekAtLastError(void) { return t_last_error; }

#define MAYA_ERRORS(X)                                                         \
    X(cudaSuccess, "no error")                                                 \
    X(cudaErrorInvalidValue, "invalid argument")                               \
    X(cudaErrorMemoryAllocation, "out of memory")                              \
    X(cudaErrorInitializationError, "initialization error")                    \
    X(cudaErrorInvalidDevice, "invalid device ordinal")                        \
    X(cudaErrorInvalidDevicePointer, "invalid device pointer")                 \
    X(cudaErrorInvalidResourceHandle, "invalid resource handle")               \
    X(cudaErrorNotSupported, "operation not supported")                        \
    X(cudaErrorNotReady, "device not ready")                                   \
    X(cudaErrorSymbolNotFound, "named symbol not found")                       \
    X(cudaErrorInvalidDeviceFunction, "invalid device function")               \
    X(cudaErrorStreamCaptureUnsupported, "operation not permitted when stream is capturing") \
    X(cudaErrorStreamCaptureInvalidated, "operation failed due to a previous error during capture") \
    X(cudaErrorIllegalState, "the operation is not permitted in the current state") \
    X(cudaErrorPeerAccessAlreadyEnabled, "peer access is already enabled")     \
    X(cudaErrorUnknown, "unknown error")

MAYA_EXPORT const char *cudaGetErrorName(cudaError_t e) {
#define NAME(code, text) if (e == code) return #code;
    MAYA_ERRORS(NAME)
#undef NAME
    return "cudaErrorUnknown";
}

MAYA_EXPORT const char *cudaGetErrorString(cudaError_t e) {
#define TEXT(code, text) if (e == code) return text;
    MAYA_ERRORS(TEXT)
#undef TEXT
    return "unrecognized error code (emulated by maya)";
}

MAYA_EXPORT cudaError_t cudaProfilerStart(void) { return cudaSuccess; }
MAYA_EXPORT cudaError_t cudaProfilerStop(void) { return cudaSuccess; }

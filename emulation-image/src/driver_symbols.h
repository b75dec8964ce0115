/* The driver entry points the interposer exports, by the names they carry in
 * its dynamic symbol table (cuda.h turns `cuMemAlloc` into `cuMemAlloc_v2`).
 *
 * One list, two uses: `cuGetProcAddress` and `cudaGetDriverEntryPoint*`
 * answer from the table these lists generate (driver.c, unsupported.c), and
 * tests/test_driver_symbols.c checks them against src/exports.map and the
 * built library's exports, so a function that is exported but cannot be
 * looked up (or the reverse) fails `make test`.
 *
 * MAYA_DRIVER_EMULATED: implemented in driver.c.
 * MAYA_DRIVER_UNSUPPORTED: known to torch but not needed for training; each
 * is a named stub that returns CUDA_ERROR_NOT_SUPPORTED and reports itself
 * (unsupported.c). */
#ifndef MAYA_DRIVER_SYMBOLS_H
#define MAYA_DRIVER_SYMBOLS_H

#define MAYA_DRIVER_EMULATED(X)                                                                               \
    X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetAttribute)                \
    X(cuDeviceGetName) X(cuDeviceGetUuid_v2) X(cuDeviceTotalMem_v2)                                           \
    X(cuDevicePrimaryCtxGetState) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease_v2)                 \
    X(cuCtxGetCurrent) X(cuCtxSetCurrent) X(cuCtxPushCurrent_v2) X(cuCtxPopCurrent_v2)                        \
    X(cuCtxGetDevice) X(cuCtxSynchronize) X(cuCtxGetLimit) X(cuCtxSetLimit)                                   \
    X(cuGetErrorString) X(cuGetErrorName) X(cuGetProcAddress_v2)                                              \
    X(cuMemAlloc_v2) X(cuMemFree_v2) X(cuMemGetInfo_v2) X(cuMemcpyHtoD_v2) X(cuMemcpyDtoH_v2)                 \
    X(cuMemsetD32Async) X(cuStreamWriteValue32_v2)                                                            \
    X(cuMemGetAllocationGranularity) X(cuMemCreate) X(cuMemRelease) X(cuMemAddressReserve)                    \
    X(cuMemAddressFree) X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess) X(cuMemRetainAllocationHandle)            \
    X(cuMemGetAllocationPropertiesFromHandle) X(cuMemGetAddressRange_v2) X(cuPointerGetAttribute)             \
    X(cuModuleLoad) X(cuModuleLoadData) X(cuModuleLoadDataEx) X(cuModuleUnload) X(cuModuleGetFunction)        \
    X(cuFuncGetAttribute) X(cuFuncSetAttribute) X(cuFuncSetCacheConfig)                                       \
    X(cuLaunchKernel) X(cuLaunchKernelEx) X(cuLaunchCooperativeKernel)                                        \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor) X(cuOccupancyMaxActiveClusters)                            \
    X(cuTensorMapEncodeTiled)

#define MAYA_DRIVER_UNSUPPORTED(X)                                                                            \
    X(cuMemExportToShareableHandle) X(cuMemImportFromShareableHandle) X(cuMulticastCreate)                    \
    X(cuMulticastAddDevice) X(cuMulticastBindMem) X(cuMulticastUnbind) X(cuGreenCtxCreate) X(cuGreenCtxDestroy) \
    X(cuGreenCtxStreamCreate) X(cuCtxFromGreenCtx) X(cuDevResourceGenerateDesc) X(cuDevSmResourceSplitByCount) \
    X(cuDeviceGetDevResource) X(cuLinkAddData) X(cuLinkAddData_v2) X(cuLinkCreate) X(cuLinkCreate_v2)        \
    X(cuLinkComplete) X(cuLinkDestroy) X(cuGetExportTable)

#endif

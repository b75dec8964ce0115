/* Helpers shared by the runtime-API files (device.c, stream.c, memory_api.c,
 * launch.c) and the driver API that forwards to them. */
#ifndef MAYA_RT_H
#define MAYA_RT_H

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "maya.h"

/* Remember e as the thread's last error (unless success) and return it. */
cudaError_t maya_rt_error(cudaError_t e);
int maya_device_valid(int dev);
void maya_device_activate(int dev);
int maya_device_active(int dev);
void maya_set_current_device(int dev);
void maya_device_uuid(int dev, unsigned char out[16]);
int maya_device_pci_bus(int dev);
/* 0 and *value set for a known attribute (cudaDeviceAttr numbering = CUdevice_attribute). */
int maya_device_attribute(int attr, int dev, int *value);

/* Memory operations shared by the runtime and driver entry points. */
cudaError_t maya_malloc(void **ptr, size_t size, int dev, uint32_t source, const void *stream);
cudaError_t maya_free(void *ptr, uint32_t source, const void *stream);
cudaError_t maya_memcpy(void *dst, const void *src, size_t n, int kind, const void *stream, int async);
cudaError_t maya_memset(void *dst, int value, size_t n, const void *stream, int async);
int maya_host_pinned(const void *p);
void maya_host_track(void *p, size_t size);
int maya_host_untrack(void *p);

/* Sources of allocations (MALLOC/FREE a32). */
enum { MA_RUNTIME = 0, MA_ASYNC = 1, MA_DRIVER = 2, MA_VMM = 3, MA_NCCL = 4 };
/* Sources of launches (KERNEL a32). */
enum { ML_RUNTIME = 0, ML_DRIVER = 1 };

/* A new entry for a kernel handed out by the driver API (Triton), named at cuModuleGetFunction. */
maya_func *maya_driver_function(const char *name);

/* Events (stream.c). */
void maya_stream_sync_record(uint8_t kind, const void *stream, maya_call c);
/* The calling thread gives the device work (launches, copies, event records):
 * it is no mere observer of event completion (see cudaEventQuery). */
void maya_thread_drives_device(void);
/* The program waits for all work issued so far to drain (a communicator is
 * finalized or destroyed): observers see all of it complete from now on. */
void maya_device_drained(void);
/* A collective was issued, a kernel launched for the first time: the next device drain
 * lets observers catch up (stream.c). */
void maya_collective_issued(void);
void maya_kernel_first_launch(void);
void *maya_driver_lookup(const char *symbol);

#endif

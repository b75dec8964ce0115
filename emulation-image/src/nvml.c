/* NVML, enough for device counting and identity (torch asks NVML for the
 * device count and UUIDs; there is no nvml.h in the wheels, so the few types
 * are spelled out here with NVML's ABI). */
#include "maya.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef int nvmlReturn_t;
typedef struct maya_nvml_device *nvmlDevice_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;

enum { NVML_SUCCESS = 0, NVML_ERROR_INVALID_ARGUMENT = 2, NVML_ERROR_NOT_SUPPORTED = 3, NVML_ERROR_INSUFFICIENT_SIZE = 7 };

struct maya_nvml_device { int index; };
static struct maya_nvml_device g_dev[MAYA_MAX_DEVICES];

static nvmlReturn_t handle_index(nvmlDevice_t d, int *i) {
    int k = (int)(d - g_dev);
    if (!d || k < 0 || k >= maya_cfg()->num_devices) return NVML_ERROR_INVALID_ARGUMENT;
    *i = k;
    return NVML_SUCCESS;
}

MAYA_EXPORT nvmlReturn_t nvmlInit_v2(void) { return NVML_SUCCESS; }
MAYA_EXPORT nvmlReturn_t nvmlInit(void) { return NVML_SUCCESS; }
MAYA_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { return NVML_SUCCESS; }
MAYA_EXPORT nvmlReturn_t nvmlShutdown(void) { return NVML_SUCCESS; }

MAYA_EXPORT const char *nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported (not emulated by maya)";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    default: return "Unknown Error";
    }
}

MAYA_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n) {
    if (!n) return NVML_ERROR_INVALID_ARGUMENT;
    *n = (unsigned)maya_cfg()->num_devices;
    return NVML_SUCCESS;
}

MAYA_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *n) { return nvmlDeviceGetCount_v2(n); }

MAYA_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d) {
    if (!d || (int)i >= maya_cfg()->num_devices) return NVML_ERROR_INVALID_ARGUMENT;
    g_dev[i].index = (int)i;
    *d = &g_dev[i];
    return NVML_SUCCESS;
}

MAYA_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *d) {
    return nvmlDeviceGetHandleByIndex_v2(i, d);
}

MAYA_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int *index) {
    int i;
    if (!index || handle_index(d, &i)) return NVML_ERROR_INVALID_ARGUMENT;
    *index = (unsigned)i;
    return NVML_SUCCESS;
}

MAYA_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int len) {
    int i;
    if (!name || handle_index(d, &i)) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(maya_cfg()->gpu.marketing_name) >= len) return NVML_ERROR_INSUFFICIENT_SIZE;
    snprintf(name, len, "%s", maya_cfg()->gpu.marketing_name);
    return NVML_SUCCESS;
}

void maya_device_uuid(int dev, unsigned char out[16]);

MAYA_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int len) {
    int i;
    if (!uuid || handle_index(d, &i)) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned char b[16];
    maya_device_uuid(i, b);
    if (len < 41) return NVML_ERROR_INSUFFICIENT_SIZE;
    snprintf(uuid, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
             b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    return NVML_SUCCESS;
}

MAYA_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
    int i;
    if (!m || handle_index(d, &i)) return NVML_ERROR_INVALID_ARGUMENT;
    uint64_t free_bytes, total;
    maya_mem_info(i, &free_bytes, &total);
    m->total = total;
    m->free = free_bytes;
    m->used = total - free_bytes;
    return NVML_SUCCESS;
}

MAYA_EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *major, int *minor) {
    int i;
    if (!major || !minor || handle_index(d, &i)) return NVML_ERROR_INVALID_ARGUMENT;
    *major = maya_cfg()->gpu.cc_major;
    *minor = maya_cfg()->gpu.cc_minor;
    return NVML_SUCCESS;
}

MAYA_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned int len) {
    if (!v) return NVML_ERROR_INVALID_ARGUMENT;
    snprintf(v, len, "580.00 (maya emulated)");
    return NVML_SUCCESS;
}

MAYA_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) {
    if (!v) return NVML_ERROR_INVALID_ARGUMENT;
    *v = 13000;
    return NVML_SUCCESS;
}

MAYA_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) { return nvmlSystemGetCudaDriverVersion_v2(v); }

int maya_device_pci_bus(int dev);

MAYA_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus, nvmlDevice_t *d) {
    if (!bus || !d) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned domain = 0, b = 0;
    if (sscanf(bus, "%x:%x", &domain, &b) != 2) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < maya_cfg()->num_devices; i++)
        if ((unsigned)maya_device_pci_bus(i) == b) return nvmlDeviceGetHandleByIndex_v2((unsigned)i, d);
    return NVML_ERROR_INVALID_ARGUMENT;
}

MAYA_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *d) {
    if (!uuid || !d) return NVML_ERROR_INVALID_ARGUMENT;
    char buf[96];
    for (int i = 0; i < maya_cfg()->num_devices; i++) {
        nvmlDevice_t h;
        nvmlDeviceGetHandleByIndex_v2((unsigned)i, &h);
        if (nvmlDeviceGetUUID(h, buf, sizeof buf) == NVML_SUCCESS && !strcmp(buf, uuid)) {
            *d = h;
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_INVALID_ARGUMENT;
}

/* The v1 layout, which the unversioned symbol has always had. */
typedef struct { unsigned int pid; unsigned long long used; } nvml_process_v1;

MAYA_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *count, nvml_process_v1 *infos) {
    int i;
    if (!count || handle_index(d, &i)) return NVML_ERROR_INVALID_ARGUMENT;
    if (*count < 1 || !infos) {
        *count = 1;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    *count = 1;
    infos[0].pid = (unsigned)getpid();
    infos[0].used = maya_mem_used(i) + maya_cfg()->gpu.reserved_bytes;
    return NVML_SUCCESS;
}

MAYA_EXPORT nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, int index, int *status) {
    int i, j;
    if (!status || handle_index(a, &i) || handle_index(b, &j)) return NVML_ERROR_INVALID_ARGUMENT;
    *status = 0;  /* NVML_P2P_STATUS_OK: every GPU of a virtual node reaches every other */
    return NVML_SUCCESS;
}

/* What a GPU without NVLink fabric information answers. */
MAYA_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t d, unsigned int link, int *type) {
    return NVML_ERROR_NOT_SUPPORTED;
}
MAYA_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned int link, void *pci) {
    return NVML_ERROR_NOT_SUPPORTED;
}
MAYA_EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t d, void *info) { return NVML_ERROR_NOT_SUPPORTED; }

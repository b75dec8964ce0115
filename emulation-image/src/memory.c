/* Virtual device memory.
 *
 * Each device owns a span of never-touched host address space (MAP_NORESERVE),
 * so device pointers are real addresses: small copies land there and read
 * back, while capacity is accounted separately and enforced like the driver
 * does.  The span is many times the capacity: expandable segments reserve
 * address ranges as large as the whole card, once per pool and stream, and
 * reservations cost no capacity. */
#include "maya.h"

#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#define ALLOC_ALIGN 512ull
#define PAGE_GRANULE (2ull << 20)  /* the driver hands out 2 MiB pages */
#define SPAN_PER_CAPACITY 16

typedef struct {
    uint64_t base, span;
    maya_ranges *ranges;
    uint64_t used, peak;  /* capacity charged, bytes */
} device_mem;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static device_mem g_dev[MAYA_MAX_DEVICES];
static int g_oom;

static uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/* Capacity user allocations may take: total less what the context holds. */
static uint64_t capacity(void) {
    const maya_gpu *g = &maya_cfg()->gpu;
    return g->memory_bytes - g->reserved_bytes;
}

static device_mem *dev_locked(int dev) {
    if (dev < 0 || dev >= maya_cfg()->num_devices) return NULL;
    device_mem *d = &g_dev[dev];
    if (!d->ranges) {
        uint64_t span = round_up(maya_cfg()->gpu.memory_bytes, PAGE_GRANULE) * SPAN_PER_CAPACITY;
        void *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) maya_die("cannot reserve %llu bytes of address space for device %d", (unsigned long long)span, dev);
        d->base = (uint64_t)p;
        d->span = span;
        /* Keep address 0 of the span unused so no allocation is ever the base. */
        d->ranges = maya_ranges_new(d->base + PAGE_GRANULE, span - PAGE_GRANULE);
    }
    return d;
}

static int charge_locked(device_mem *d, uint64_t size) {
    uint64_t charged = round_up(size, PAGE_GRANULE);
    if (d->used + charged > capacity()) {
        g_oom++;
        return -1;
    }
    d->used += charged;
    if (d->used > d->peak) d->peak = d->used;
    return 0;
}

int maya_mem_alloc(int dev, uint64_t size, uint64_t *ptr) {
    pthread_mutex_lock(&g_lock);
    int rc = -1;
    device_mem *d = dev_locked(dev);
    if (d && charge_locked(d, size) == 0) {
        *ptr = maya_ranges_alloc(d->ranges, size, ALLOC_ALIGN);
        if (*ptr) rc = 0;
        else d->used -= round_up(size, PAGE_GRANULE);
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

int maya_mem_free(int dev_hint, uint64_t ptr, uint64_t *size_out) {
    int dev = maya_mem_device_of(ptr);
    (void)dev_hint;
    if (dev < 0) return -1;
    pthread_mutex_lock(&g_lock);
    device_mem *d = &g_dev[dev];
    uint64_t size = maya_ranges_release(d->ranges, ptr);
    if (size) d->used -= round_up(size, PAGE_GRANULE);
    pthread_mutex_unlock(&g_lock);
    if (!size) return -1;
    madvise((void *)ptr, size, MADV_DONTNEED);  /* give back pages small copies touched */
    if (size_out) *size_out = size;
    return 0;
}

int maya_va_reserve(int dev, uint64_t size, uint64_t align, uint64_t *ptr) {
    pthread_mutex_lock(&g_lock);
    device_mem *d = dev_locked(dev);
    *ptr = d ? maya_ranges_alloc(d->ranges, size, align < ALLOC_ALIGN ? ALLOC_ALIGN : align) : 0;
    pthread_mutex_unlock(&g_lock);
    return *ptr ? 0 : -1;
}

int maya_va_release(uint64_t ptr) {
    int dev = maya_mem_device_of(ptr);
    if (dev < 0) return -1;
    pthread_mutex_lock(&g_lock);
    uint64_t size = maya_ranges_release(g_dev[dev].ranges, ptr);
    pthread_mutex_unlock(&g_lock);
    if (size) madvise((void *)ptr, size, MADV_DONTNEED);
    return size ? 0 : -1;
}

int maya_mem_charge(int dev, uint64_t size) {
    pthread_mutex_lock(&g_lock);
    device_mem *d = dev_locked(dev);
    int rc = d ? charge_locked(d, size) : -1;
    pthread_mutex_unlock(&g_lock);
    return rc;
}

void maya_mem_uncharge(int dev, uint64_t size) {
    pthread_mutex_lock(&g_lock);
    device_mem *d = dev_locked(dev);
    if (d) d->used -= round_up(size, PAGE_GRANULE);
    pthread_mutex_unlock(&g_lock);
}

int maya_mem_device_of(uint64_t addr) {
    for (int i = 0; i < MAYA_MAX_DEVICES; i++) {
        const device_mem *d = &g_dev[i];
        if (d->ranges && addr >= d->base && addr < d->base + d->span) return i;
    }
    return -1;
}

uint64_t maya_mem_lookup(uint64_t addr, uint64_t *size, int *dev) {
    int i = maya_mem_device_of(addr);
    if (i < 0) return 0;
    pthread_mutex_lock(&g_lock);
    uint64_t base = maya_ranges_find(g_dev[i].ranges, addr, size);
    pthread_mutex_unlock(&g_lock);
    if (dev) *dev = i;
    return base;
}

void maya_mem_info(int dev, uint64_t *free_bytes, uint64_t *total_bytes) {
    pthread_mutex_lock(&g_lock);
    device_mem *d = dev_locked(dev);
    uint64_t used = d ? d->used : 0;
    pthread_mutex_unlock(&g_lock);
    if (total_bytes) *total_bytes = maya_cfg()->gpu.memory_bytes;
    if (free_bytes) *free_bytes = capacity() > used ? capacity() - used : 0;
}

uint64_t maya_mem_used(int dev) { return dev >= 0 && dev < MAYA_MAX_DEVICES ? g_dev[dev].used : 0; }
uint64_t maya_mem_peak(int dev) { return dev >= 0 && dev < MAYA_MAX_DEVICES ? g_dev[dev].peak : 0; }
int maya_mem_oom_count(void) { return g_oom; }

int maya_mem_copy(void *dst, const void *src, uint64_t n) {
    if (n == 0 || n > maya_cfg()->copy_limit || !dst || !src) return 0;
    memmove(dst, src, n);
    return 1;
}

int maya_mem_set(void *dst, int value, uint64_t n) {
    if (n == 0 || n > maya_cfg()->copy_limit || !dst) return 0;
    memset(dst, value, n);
    return 1;
}

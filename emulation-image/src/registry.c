/* Kernel identity.
 *
 * __cudaRegisterFunction tells us, at library load, which host stub stands for
 * which device function; CUDA 13 launches then name the stub (or the
 * cudaKernel_t we hand out for it, which is the same entry).  Driver-side
 * kernels (Triton) get entries from cuModuleGetFunction.  A launch emits the
 * FUNC record of its kernel the first time, so traces carry only the names
 * they use. */
#include "maya.h"
#include "rt.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static maya_func **g_tab;
static size_t g_cap, g_count;

static size_t slot_of(const void *key, size_t cap) {
    uint64_t h = (uint64_t)(uintptr_t)key * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 17) & (cap - 1);
}

static void grow_locked(void) {
    size_t cap = g_cap ? g_cap * 2 : 32768;
    maya_func **t = calloc(cap, sizeof *t);
    for (size_t i = 0; i < g_cap; i++) {
        if (!g_tab[i]) continue;
        size_t j = slot_of(g_tab[i]->key, cap);
        while (t[j]) j = (j + 1) & (cap - 1);
        t[j] = g_tab[i];
    }
    free(g_tab);
    g_tab = t;
    g_cap = cap;
}

void maya_registry_add(const void *key, const char *name) {
    pthread_mutex_lock(&g_lock);
    if ((g_count + 1) * 2 > g_cap) grow_locked();
    size_t j = slot_of(key, g_cap);
    while (g_tab[j] && g_tab[j]->key != key) j = (j + 1) & (g_cap - 1);
    if (!g_tab[j]) {
        maya_func *f = calloc(1, sizeof *f);
        f->key = key;
        f->max_threads = 1024;
        f->num_regs = 32;
        g_tab[j] = f;
        g_count++;
    }
    g_tab[j]->name = name;  /* re-registration (a reloaded module) renames */
    pthread_mutex_unlock(&g_lock);
}

maya_func *maya_registry_get(const void *key) {
    maya_func *f = NULL;
    pthread_mutex_lock(&g_lock);
    if (g_cap) {
        size_t j = slot_of(key, g_cap);
        while (g_tab[j] && g_tab[j]->key != key) j = (j + 1) & (g_cap - 1);
        f = g_tab[j];
    }
    pthread_mutex_unlock(&g_lock);
    return f;
}

extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

char *maya_demangle(const char *mangled) {
    if (!mangled || mangled[0] != '_' || mangled[1] != 'Z') return NULL;
    int status = 0;
    char *out = __cxa_demangle(mangled, NULL, NULL, &status);
    return status == 0 ? out : NULL;
}

uint64_t maya_func_trace_id(maya_func *f) {
    uint64_t id = __atomic_load_n(&f->func_id, __ATOMIC_ACQUIRE);
    if (id) return id;
    static uint64_t next;
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    if (!f->func_id) {
        char *dem = maya_demangle(f->name);
        maya_rec r;
        maya_rec_init(&r, MK_FUNC, maya_enter());
        r.a[0] = ++next;
        r.a[1] = maya_str(f->name);
        r.a[2] = dem ? maya_str(dem) : r.a[1];
        maya_kernel_integer_params(dem, f);
        free(dem);
        maya_emit(&r);
        maya_kernel_first_launch();
        __atomic_store_n(&f->func_id, next, __ATOMIC_RELEASE);
    }
    id = f->func_id;
    pthread_mutex_unlock(&lock);
    return id;
}

/* Facts about the Triton kernel whose launches the start-up hook is about to make (maya_kernel_facts):
 * a driver-side function of that name takes them at its first launch while they are pending, so
 * the kernels of each Inductor graph keep their own even where two graphs name a kernel alike
 * (cuModuleGetFunction gives each module's kernel an entry of its own). */
static pthread_mutex_t g_facts_lock = PTHREAD_MUTEX_INITIALIZER;
static char *g_facts_name;
static uint64_t g_facts[MAYA_KERNEL_INTS];
static int g_n_facts;

MAYA_EXPORT void maya_kernel_facts(const char *name, const int64_t *values, int n) {
    pthread_mutex_lock(&g_facts_lock);
    free(g_facts_name);
    g_facts_name = NULL;
    g_n_facts = 0;
    if (name && values && n > 0) {
        g_facts_name = strdup(name);
        g_n_facts = n < MAYA_KERNEL_INTS ? n : MAYA_KERNEL_INTS;
        for (int i = 0; i < g_n_facts; i++) g_facts[i] = (uint64_t)values[i];
    }
    pthread_mutex_unlock(&g_facts_lock);
}

static void take_facts(maya_func *f) {
    pthread_mutex_lock(&g_facts_lock);
    if (g_facts_name && f->name && !strcmp(g_facts_name, f->name)) {
        memcpy(f->facts, g_facts, sizeof f->facts);
        f->n_facts = g_n_facts;
    }
    pthread_mutex_unlock(&g_facts_lock);
}

void maya_record_launch(maya_call c, maya_func *f, unsigned gx, unsigned gy, unsigned gz,
                        unsigned bx, unsigned by, unsigned bz, uint64_t smem, const void *stream,
                        uint32_t source, void *const *args) {
    uint64_t id = maya_func_trace_id(f);
    maya_rec r;
    maya_rec_init(&r, MK_KERNEL, c);
    r.flags = MF_ASYNC;
    r.device = (uint8_t)maya_stream_device(stream);
    r.stream = maya_stream_id(stream);
    r.a32 = source;
    r.a[0] = id;
    r.a[1] = (uint64_t)gx | ((uint64_t)(gy & 0xFFFF) << 32) | ((uint64_t)(gz & 0xFFFF) << 48);
    r.a[2] = (uint64_t)(bx & 0xFFFF) | ((uint64_t)(by & 0xFFFF) << 16) | ((uint64_t)(bz & 0xFFFF) << 32);
    r.a[3] = smem;
    uint64_t ints[MAYA_KERNEL_INTS];
    int n = maya_kernel_integer_args(f, args, (uint64_t)gx * gy * gz, gy, ints);
    if (!f->n_facts && __atomic_load_n(&g_facts_name, __ATOMIC_RELAXED)) take_facts(f);
    if (!n && f->n_facts) {
        memcpy(ints, f->facts, sizeof ints);
        n = f->n_facts;
    }
    r.a[4] = (uint64_t)n;
    maya_emit_ext(&r, ints, n);
}

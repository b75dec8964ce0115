/* Configuration, read once from the environment (HAMi-core style).
 *
 * `maya emulate` renders the catalog entry of the chosen GPU into
 * MAYA_GPU_SPEC ("key=value;..."), so the catalog has a single source in
 * maya/gpus.json and this file only parses it. */
#include "maya.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static maya_config g_cfg;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static int env_int(const char *name, int def) {
    const char *v = getenv(name);
    return (v && *v) ? atoi(v) : def;
}

/* Assign one key of the spec; unknown keys are ignored so the catalog may grow. */
static void spec_set(maya_gpu *g, const char *key, const char *val) {
    long long n = strtoll(val, NULL, 0);
    if (!strcmp(key, "name")) snprintf(g->name, sizeof g->name, "%s", val);
    else if (!strcmp(key, "marketing")) snprintf(g->marketing_name, sizeof g->marketing_name, "%s", val);
    else if (!strcmp(key, "cc")) { g->cc_major = atoi(val); const char *d = strchr(val, '.'); g->cc_minor = d ? atoi(d + 1) : 0; }
    else if (!strcmp(key, "sms")) g->sm_count = (int)n;
    else if (!strcmp(key, "mem")) g->memory_bytes = (uint64_t)n;
    else if (!strcmp(key, "reserved")) g->reserved_bytes = (uint64_t)n;
    else if (!strcmp(key, "clock_khz")) g->clock_khz = (int)n;
    else if (!strcmp(key, "mem_clock_khz")) g->memory_clock_khz = (int)n;
    else if (!strcmp(key, "bus_width")) g->memory_bus_width = (int)n;
    else if (!strcmp(key, "l2")) g->l2_bytes = (int)n;
    else if (!strcmp(key, "smem_sm")) g->smem_per_sm = (int)n;
    else if (!strcmp(key, "smem_block")) g->smem_per_block = (int)n;
    else if (!strcmp(key, "smem_optin")) g->smem_per_block_optin = (int)n;
    else if (!strcmp(key, "regs_sm")) g->regs_per_sm = (int)n;
    else if (!strcmp(key, "regs_block")) g->regs_per_block = (int)n;
    else if (!strcmp(key, "threads_sm")) g->max_threads_per_sm = (int)n;
    else if (!strcmp(key, "blocks_sm")) g->max_blocks_per_sm = (int)n;
    else if (!strcmp(key, "pci_id")) g->pci_device_id = (int)n;
}

int maya_parse_spec(const char *spec, maya_gpu *g) {
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", spec);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) return -1;
        *eq = 0;
        spec_set(g, tok, eq + 1);
    }
    return (g->name[0] && g->sm_count > 0 && g->memory_bytes > 0 && g->cc_major > 0) ? 0 : -1;
}

static void load(void) {
    maya_config *c = &g_cfg;
    const char *spec = getenv("MAYA_GPU_SPEC");
    if (!spec || maya_parse_spec(spec, &c->gpu) != 0)
        maya_die("MAYA_GPU_SPEC is missing or incomplete; run the program through "
                 "'maya emulate --gpu NAME -- COMMAND' (see 'maya gpus')");
    if (!c->gpu.marketing_name[0]) snprintf(c->gpu.marketing_name, sizeof c->gpu.marketing_name, "%s", c->gpu.name);
    c->gpus_per_node = env_int("MAYA_GPUS_PER_NODE", 8);
    c->num_devices = env_int("MAYA_NUM_GPUS", c->gpus_per_node);
    if (c->num_devices < 1) c->num_devices = 1;
    if (c->num_devices > MAYA_MAX_DEVICES) c->num_devices = MAYA_MAX_DEVICES;
    if (c->gpus_per_node < 1) c->gpus_per_node = 1;
    c->rank = env_int("RANK", 0);
    c->local_rank = env_int("LOCAL_RANK", 0);
    c->world_size = env_int("WORLD_SIZE", 1);
    c->node = c->rank / c->gpus_per_node;
    const char *dir = getenv("MAYA_TRACE_DIR");
    snprintf(c->trace_dir, sizeof c->trace_dir, "%s", dir ? dir : "");
    const char *run = getenv("MAYA_RUN_ID");
    snprintf(c->run_id, sizeof c->run_id, "%s", (run && *run) ? run : "local");
    const char *lim = getenv("MAYA_COPY_LIMIT");
    c->copy_limit = (lim && *lim) ? strtoull(lim, NULL, 0) : (1u << 20);
    c->verbose = env_int("MAYA_VERBOSE", 0);
    maya_cpu_clock = !env_int("MAYA_WALL_CLOCK", 0);  /* trace.c: time off the CPU left out */
}

const maya_config *maya_cfg(void) {
    pthread_once(&g_once, load);
    return &g_cfg;
}

void maya_log(const char *fmt, ...) {
    if (!maya_cfg()->verbose) return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[maya %d] %s\n", (int)getpid(), buf);
}

void maya_die(const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "maya: %s\n", buf);
    maya_trace_flush_nowait();
    _exit(70);
}

/* A job of several virtual nodes emulated by one launcher on this machine
 * (torchrun --nproc-per-node 16 with 8 GPUs per node) must look to each rank
 * as it would on its node: LOCAL_RANK counts within the node and
 * LOCAL_WORLD_SIZE is the node's size.  This runs before the program reads
 * its environment. */
__attribute__((constructor)) static void virtual_node_env(void) {
    int rank = env_int("RANK", -1), world = env_int("WORLD_SIZE", 1);
    int per_node = env_int("MAYA_GPUS_PER_NODE", 8);
    if (rank < 0 || per_node < 1 || world <= per_node) return;
    char buf[32];
    snprintf(buf, sizeof buf, "%d", rank % per_node);
    setenv("LOCAL_RANK", buf, 1);
    snprintf(buf, sizeof buf, "%d", per_node);
    setenv("LOCAL_WORLD_SIZE", buf, 1);
    snprintf(buf, sizeof buf, "%d", rank / per_node);
    setenv("GROUP_RANK", buf, 1);
}

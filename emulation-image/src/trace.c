#define _GNU_SOURCE /* pthread_getname_np, gettid */
/* The trace writer: one binary file per process, 64-byte slots, buffered.
 *
 * The file is opened on the first record, so processes that never touch the
 * device (the torchrun agent, data loader workers) leave no trace.  Strings
 * are interned and written once, the first time they are used.  The layout
 * is documented in emulation-image/TRACE_FORMAT.md. */
#include "maya.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BUF_SLOTS 16384

typedef struct {
    char magic[8];
    uint32_t version, slot_size, header_size, pid;
    int32_t rank, local_rank, world_size, node, gpus_per_node;
    uint32_t num_devices, off_cpu_us, gc_us;
    uint64_t start_unix_ns;
    char gpu_name[60];
    uint32_t hook_us;
} trace_header;
_Static_assert(sizeof(trace_header) == MAYA_HEADER_SIZE, "header size");
_Static_assert(sizeof(maya_rec) == MAYA_SLOT, "slot size");

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_fd = -1;
static int g_failed;
static maya_rec g_buf[BUF_SLOTS];
static int g_used;
static trace_header g_header;
static uint64_t g_t0;
static int g_threads;
static __thread int t_thread = -1;

/* Interned strings: open addressing on a hash of the text. */
typedef struct { char *text; uint64_t id; } str_entry;
static str_entry *g_strs;
static size_t g_str_cap, g_str_count;

/* The trace clock leaves out the time the process spends off the CPU between
 * intercepted calls: preempted by another rank that shares its CPU (8 ranks
 * emulated on 2 CPUs), by another process, by the hypervisor.  The host delay
 * between two calls is then the CPU work the program did there, which is what
 * the replay turns into the GPU server's.  Inside a call the clock runs as the
 * wall clock, so waits there (for a collective's peers) keep their length.
 *
 * The process's CPU time (every thread's: a thread that waits while another
 * runs, as PyTorch's main thread during autograd's backward pass, is not off
 * the CPU) is read only at the start of a call that comes at least
 * GAP_READ_NS after the last recorded call ended, since a preemption makes a
 * gap at least a scheduler slice long: two reads a call cost the host delays
 * about 5% (a system call each, and what it does to the caches).  What went
 * off the CPU since the previous read is taken out there (at most the gap),
 * which holds when the calls between the two reads were short and no other
 * thread was inside one: a long call (which may have waited off the CPU) is
 * read at its end and starts a new interval there, and while another thread
 * is inside a call (or made one that wrote no record, and has not called
 * since) the next read only starts one.  Emulation only (maya_cpu_clock, set
 * by config.c): a recorded trace keeps the wall clock, which CUPTI's
 * timestamps are aligned to. */
#define GAP_READ_NS 50000ull
#define LONG_CALL_NS 50000ull
#define SMALLEST_OFF_NS 20000ull
int maya_cpu_clock;
static pthread_mutex_t g_clock_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_off;                  /* ns left out so far: off the CPU, and pauses (g_paused) */
static uint64_t g_mark_wall;            /* when the last recorded call ended */
static uint64_t g_ref_wall, g_ref_cpu;  /* the last read of the process's CPU time */
static int g_ref_valid;                 /* ...and nothing since that could have waited off the CPU */
static int g_inside;                    /* threads whose call has not ended (as far as we know) */
static __thread int t_inside;
static pthread_key_t g_thread_key;      /* a thread that ends inside a call no longer counts */

/* Python's garbage collections are left out of the trace clock too (emulation only).  A
 * collection lands in a different step from one run to the next (the allocation counts that
 * trigger it depend on threads' interleaving), and the replay steadies a run to its quickest
 * steady step, so the collections were a source of run-to-run noise in the host delays: BERT's
 * predictions spread 6.1% over six emulations, 2.9% with the collector off.  The start-up hook's
 * gc callback (maya/_hook) brackets each collection with maya_gc_pause(1) and (0); the pause is
 * left out when no other thread was inside a call or ended one meanwhile (else its records
 * would move), and the header's gc_us holds the total left out.  The GPU server's collections
 * stay in the host model's factor, fitted on steadied delays that mostly escaped them.  The
 * hook's own work (device values computed on the host, maya/_hook/_maya_device_values.py) is
 * left out the same way through maya_hook_pause, and counted apart in hook_us.  Pauses nest (a
 * collection during the hook's work): the outermost one is left out, counted to its kind. */
enum { PAUSE_GC, PAUSE_HOOK };
static uint64_t g_paused[2];            /* ns left out so far, by kind of the outermost pause */
static int g_pause_depth;               /* pauses begun and not ended */
static int g_pause_kind;                /* the outermost one's kind */
static uint64_t g_pause_wall;           /* when it began */
static uint64_t g_pause_mark;           /* ...and g_mark_wall then */
static int g_pause_alone;               /* ...and no thread was inside a call then */
static uint64_t g_pause_cpu;            /* ...and the process's CPU time then (0: not read, g_ref_valid was 0) */

static uint64_t wall_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec - g_t0;
}

static uint64_t process_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t maya_now_ns(void) { return wall_ns() - __atomic_load_n(&g_off, __ATOMIC_RELAXED); }

/* The calling thread is no longer inside a call (g_clock_lock held). */
static void leave_locked(void) {
    if (t_inside) g_inside--;
    t_inside = 0;
}

static void thread_gone(void *unused) {
    (void)unused;
    pthread_mutex_lock(&g_clock_lock);
    leave_locked();
    pthread_mutex_unlock(&g_clock_lock);
}

maya_call maya_enter(void) {
    uint64_t wall = wall_ns();  /* before reading the CPU time: that read counts as the call's */
    if (maya_cpu_clock) {
        pthread_mutex_lock(&g_clock_lock);
        if (!t_inside) {  /* (else this thread's last call wrote no record: it is over) */
            if (!pthread_getspecific(g_thread_key)) pthread_setspecific(g_thread_key, &g_thread_key);
            t_inside = 1;
            g_inside++;
        }
        uint64_t gap = wall > g_mark_wall ? wall - g_mark_wall : 0;
        if (g_inside > 1) {
            g_ref_valid = 0;
        } else if (gap >= GAP_READ_NS) {
            uint64_t cpu = process_cpu_ns();
            if (g_ref_valid && wall - g_ref_wall > cpu - g_ref_cpu) {
                uint64_t off = wall - g_ref_wall - (cpu - g_ref_cpu);
                if (off > gap) off = gap;
                if (off >= SMALLEST_OFF_NS) __atomic_add_fetch(&g_off, off, __ATOMIC_RELAXED);
            }
            g_ref_wall = wall;
            g_ref_cpu = cpu;
            g_ref_valid = 1;
        }
        pthread_mutex_unlock(&g_clock_lock);
    }
    maya_call c = {wall - __atomic_load_n(&g_off, __ATOMIC_RELAXED)};
    return c;
}

void maya_leave(void) {
    if (!maya_cpu_clock) return;
    pthread_mutex_lock(&g_clock_lock);
    leave_locked();
    pthread_mutex_unlock(&g_clock_lock);
}

static void pause_clock(int begin, int kind) {
    if (!maya_cpu_clock) return;
    pthread_mutex_lock(&g_clock_lock);
    uint64_t wall = wall_ns();
    if (begin) {
        if (g_pause_depth++ == 0) {
            g_pause_kind = kind;
            g_pause_wall = wall;
            g_pause_mark = g_mark_wall;
            g_pause_alone = g_inside == 0;
            g_pause_cpu = g_ref_valid && g_pause_alone ? process_cpu_ns() : 0;
        }
    } else if (g_pause_depth > 0 && --g_pause_depth == 0) {
        if (g_pause_alone && g_inside == 0 && g_mark_wall == g_pause_mark) {
            uint64_t d = wall - g_pause_wall;
            __atomic_add_fetch(&g_off, d, __ATOMIC_RELAXED);
            __atomic_add_fetch(&g_paused[g_pause_kind], d, __ATOMIC_RELAXED);
            /* The CPU time read before spans the pause: move that read past it, wall and CPU time alike,
             * so that time off the CPU around the pause (a sleep the hook's sampling thread woke in) is
             * still found at the next call; where it was not read, start a new interval. */
            if (g_ref_valid && g_pause_cpu) {
                g_ref_wall += d;
                g_ref_cpu += process_cpu_ns() - g_pause_cpu;
            } else {
                g_ref_valid = 0;
            }
        }
    }
    pthread_mutex_unlock(&g_clock_lock);
}

MAYA_EXPORT void maya_gc_pause(int begin) { pause_clock(begin, PAUSE_GC); }
MAYA_EXPORT void maya_hook_pause(int begin) { pause_clock(begin, PAUSE_HOOK); }
/* The trace clock, for the start-up hook's samples of the CPU's pace (maya/_hook/_maya_pace.py): the
 * replay finds which of them fell in the steady steps by the records' times. */
MAYA_EXPORT uint64_t maya_trace_now_ns(void) { return maya_now_ns(); }

/* The end of a recorded call that started at trace time t0: where the next host delay starts. */
static void call_ended(uint64_t t0) {
    if (!maya_cpu_clock) return;
    pthread_mutex_lock(&g_clock_lock);
    leave_locked();
    uint64_t wall = wall_ns();
    if (wall - __atomic_load_n(&g_off, __ATOMIC_RELAXED) - t0 > LONG_CALL_NS) {
        g_ref_cpu = process_cpu_ns();
        wall = wall_ns();
        g_ref_wall = wall;
        g_ref_valid = g_inside == 0;
    }
    g_mark_wall = wall;
    pthread_mutex_unlock(&g_clock_lock);
}

static void append_locked(const maya_rec *r, const uint64_t *words, int n);

/* Indices are handed out first come, first served, which can differ between
 * runs; the THREAD record names each one (torch names its threads, e.g.
 * pt_autograd_0), so readers can tell threads apart by name. */
uint8_t maya_thread_index(void) {
    if (t_thread < 0) {
        t_thread = __atomic_fetch_add(&g_threads, 1, __ATOMIC_RELAXED);
        char name[32] = "";
        pthread_getname_np(pthread_self(), name, sizeof name);
        maya_rec r;
        memset(&r, 0, sizeof r);
        r.kind = MK_THREAD;
        r.thread = (uint8_t)(t_thread > 255 ? 255 : t_thread);
        r.t_ns = maya_now_ns();
        r.a[0] = r.thread;
        r.a[1] = maya_str(name);
        r.a[2] = (uint64_t)gettid();
        pthread_mutex_lock(&g_lock);
        append_locked(&r, NULL, 0);
        pthread_mutex_unlock(&g_lock);
    }
    return (uint8_t)(t_thread > 255 ? 255 : t_thread);
}

static void write_all(const void *p, size_t n) {
    const char *c = p;
    while (n > 0 && g_fd >= 0) {
        ssize_t w = write(g_fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) { g_failed = 1; return; }
        c += w;
        n -= (size_t)w;
    }
}

static uint32_t saturated_us(uint64_t ns) {
    uint64_t us = ns / 1000;
    return us > 0xFFFFFFFFull ? 0xFFFFFFFFu : (uint32_t)us;
}

static void flush_locked(void) {
    if (g_used && g_fd >= 0) write_all(g_buf, (size_t)g_used * MAYA_SLOT);
    g_used = 0;
    if (g_fd >= 0 && !g_failed) {  /* the header's running totals of what the clock left out */
        uint64_t gc_ns = __atomic_load_n(&g_paused[PAUSE_GC], __ATOMIC_RELAXED);
        uint64_t hook_ns = __atomic_load_n(&g_paused[PAUSE_HOOK], __ATOMIC_RELAXED);
        g_header.off_cpu_us = saturated_us(__atomic_load_n(&g_off, __ATOMIC_RELAXED) - gc_ns - hook_ns);
        g_header.gc_us = saturated_us(gc_ns);
        g_header.hook_us = saturated_us(hook_ns);
        if (pwrite(g_fd, &g_header, sizeof g_header, 0) != (ssize_t)sizeof g_header) g_failed = 1;
    }
}

void maya_trace_flush(void) {
    pthread_mutex_lock(&g_lock);
    flush_locked();
    pthread_mutex_unlock(&g_lock);
}

/* For a fatal error, which may strike while this thread holds the lock. */
void maya_trace_flush_nowait(void) {
    if (pthread_mutex_trylock(&g_lock) != 0) return;
    flush_locked();
    pthread_mutex_unlock(&g_lock);
}

/* A fatal signal still leaves a readable trace (write(2) is signal-safe). */
static void on_fatal(int sig) {
    if (g_used && g_fd >= 0) write_all(g_buf, (size_t)g_used * MAYA_SLOT);
    g_used = 0;
    signal(sig, SIG_DFL);
    raise(sig);
}

static void catch_fatal(int sig) {
    struct sigaction old;
    if (sigaction(sig, NULL, &old) == 0 && old.sa_handler == SIG_DFL) signal(sig, on_fatal);
}

static void open_locked(void) {
    const maya_config *cfg = maya_cfg();
    if (g_fd >= 0 || g_failed || !cfg->trace_dir[0]) return;
    mkdir(cfg->trace_dir, 0755);
    char path[768];
    snprintf(path, sizeof path, "%s/rank%d.mayatrace", cfg->trace_dir, cfg->rank);
    g_fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (g_fd < 0 && errno == EEXIST) {  /* a second CUDA process of the same rank */
        snprintf(path, sizeof path, "%s/rank%d.pid%d.mayatrace", cfg->trace_dir, cfg->rank, (int)getpid());
        g_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    }
    if (g_fd < 0) {
        g_failed = 1;
        fprintf(stderr, "maya: cannot write the trace %s: %s\n", path, strerror(errno));
        return;
    }
    /* Kept: each flush rewrites it with the time off the CPU so far. */
    trace_header *h = &g_header;
    memset(h, 0, sizeof *h);
    memcpy(h->magic, MAYA_TRACE_MAGIC, 8);
    h->version = MAYA_TRACE_VERSION;
    h->slot_size = MAYA_SLOT;
    h->header_size = MAYA_HEADER_SIZE;
    h->pid = (uint32_t)getpid();
    h->rank = cfg->rank;
    h->local_rank = cfg->local_rank;
    h->world_size = cfg->world_size;
    h->node = cfg->node;
    h->gpus_per_node = cfg->gpus_per_node;
    h->num_devices = (uint32_t)cfg->num_devices;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    h->start_unix_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec - wall_ns();
    snprintf(h->gpu_name, sizeof h->gpu_name, "%s", cfg->gpu.name);
    write_all(h, sizeof *h);
    catch_fatal(SIGTERM);
    catch_fatal(SIGABRT);
    catch_fatal(SIGSEGV);
    catch_fatal(SIGBUS);
}

static maya_rec *slot_locked(void) {
    if (g_used == BUF_SLOTS) flush_locked();
    return &g_buf[g_used++];
}

static void append_locked(const maya_rec *r, const uint64_t *words, int n) {
    open_locked();
    if (g_fd < 0) return;
    *slot_locked() = *r;
    for (int i = 0; i < n; i += 7) {
        maya_rec *s = slot_locked();
        memset(s, 0, sizeof *s);
        s->kind = MK_CONT;
        int k = n - i < 7 ? n - i : 7;
        memcpy((char *)s + 8, words + i, (size_t)k * 8);
    }
}

void maya_rec_init(maya_rec *r, uint8_t kind, maya_call c) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->device = (uint8_t)maya_current_device();
    r->thread = maya_thread_index();
    r->t_ns = c.t0;
    call_ended(c.t0);  /* first: its work is the call's time, not the next host delay's */
    uint64_t d = maya_now_ns() - c.t0;
    r->dur_ns = d > 0xFFFFFFFFull ? 0xFFFFFFFFu : (uint32_t)d;
}

/* Work that a graph capture swallows instead of running. */
static int is_stream_work(uint8_t kind) {
    switch (kind) {
    case MK_KERNEL: case MK_MEMCPY: case MK_MEMSET: case MK_EVENT_RECORD: case MK_STREAM_WAIT_EVENT:
    case MK_HOST_FUNC: case MK_BLAS: case MK_DNN: case MK_COLL:
        return 1;
    default:
        return 0;
    }
}

static uint64_t g_device_clock;

uint64_t maya_device_clock(void) { return __atomic_load_n(&g_device_clock, __ATOMIC_RELAXED); }

void maya_device_clock_advance(uint64_t ns) { __atomic_add_fetch(&g_device_clock, ns, __ATOMIC_RELAXED); }

void maya_emit_ext(maya_rec *r, const uint64_t *words, int n) {
    if (is_stream_work(r->kind)) maya_device_clock_advance(1000);
    if (is_stream_work(r->kind) && !(r->flags & MF_REPLAY)) {
        struct maya_graph *g = maya_capturing(r->stream);
        if (g) {
            r->flags |= MF_CAPTURED;
            maya_graph_append(g, r, words, n);
        }
    }
    pthread_mutex_lock(&g_lock);
    append_locked(r, words, n);
    pthread_mutex_unlock(&g_lock);
}

void maya_emit(maya_rec *r) { maya_emit_ext(r, NULL, 0); }

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

uint64_t maya_str(const char *s) {
    if (!s) return 0;
    pthread_mutex_lock(&g_lock);
    if (g_str_count * 2 >= g_str_cap) {  /* grow and rehash */
        size_t cap = g_str_cap ? g_str_cap * 2 : 1024;
        str_entry *t = calloc(cap, sizeof *t);
        for (size_t i = 0; i < g_str_cap; i++) {
            if (!g_strs[i].text) continue;
            size_t j = hash_str(g_strs[i].text) & (cap - 1);
            while (t[j].text) j = (j + 1) & (cap - 1);
            t[j] = g_strs[i];
        }
        free(g_strs);
        g_strs = t;
        g_str_cap = cap;
    }
    size_t j = hash_str(s) & (g_str_cap - 1);
    while (g_strs[j].text && strcmp(g_strs[j].text, s)) j = (j + 1) & (g_str_cap - 1);
    if (!g_strs[j].text) {
        g_strs[j].text = strdup(s);
        g_strs[j].id = ++g_str_count;
        size_t len = strlen(s);
        maya_rec r;
        memset(&r, 0, sizeof r);
        r.kind = MK_STRING;
        r.a32 = (uint32_t)len;
        r.a[0] = g_strs[j].id;
        r.t_ns = maya_now_ns();
        int words = (int)((len + 7) / 8);
        uint64_t *w = calloc((size_t)words + 1, 8);
        memcpy(w, s, len);
        append_locked(&r, w, words);
        free(w);
    }
    uint64_t id = g_strs[j].id;
    pthread_mutex_unlock(&g_lock);
    return id;
}

static void at_exit(void) { maya_trace_flush(); }

/* A forked child must not write into its parent's trace. */
static void after_fork_child(void) {
    g_fd = -1;
    g_used = 0;
    g_failed = 0;
    for (size_t i = 0; i < g_str_cap; i++) free(g_strs[i].text);
    free(g_strs);
    g_strs = NULL;
    g_str_cap = g_str_count = 0;
    pthread_mutex_init(&g_lock, NULL);
    pthread_mutex_init(&g_clock_lock, NULL);
    g_ref_valid = 0;
    g_inside = t_inside;  /* the forking thread alone goes on in the child */
}

__attribute__((constructor)) static void trace_init(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    g_t0 = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    atexit(at_exit);
    pthread_atfork(NULL, NULL, after_fork_child);
    pthread_key_create(&g_thread_key, thread_gone);
}

__attribute__((destructor)) static void trace_fini(void) { maya_trace_flush(); }

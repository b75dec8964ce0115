/* Shared-memory rendezvous for the ranks of an emulated NCCL communicator;
 * the protocol is described in shm.h. */
#define _GNU_SOURCE
#include "shm.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* One cache line per counter pair so ranks do not false-share. */
typedef struct {
    _Atomic uint64_t a;  /* rank: exchanges published;  pair: messages sent */
    _Atomic uint64_t b;  /* rank: exchanges finished;   pair: messages taken */
    uint64_t n;          /* pair: size of the message in the mailbox */
    char pad[40];
} shm_ctr;

typedef struct {
    _Atomic uint64_t attached;
    uint64_t nranks, slot_bytes;
    char pad[40];
} shm_hdr;

struct maya_shm {
    char *base;
    size_t size, slot;
    int nranks, rank;
    uint64_t gen;        /* exchanges this rank has begun */
    uint64_t *sent_k;    /* per peer: mailbox messages sent to it */
    uint64_t *recv_k;    /* per peer: mailbox messages taken from it */
    double timeout_s;
};

/* ---------------------------------------------------------------- timing */

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double maya_shm_timeout_s(void) {
    const char *e = getenv("MAYA_NCCL_TIMEOUT_S");
    double t = e && *e ? strtod(e, NULL) : 0;
    return t > 0 ? t : 300.0;
}

/* Spin a little (the peer is usually about to arrive), then yield, then
 * sleep in growing steps up to 1 ms: ranks share few cores. */
void maya_shm_backoff(unsigned attempt) {
    if (attempt < 64) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    } else if (attempt < 256) {
        sched_yield();
    } else {
        unsigned us = attempt < 1024 ? 200 : 1000;
        struct timespec ts = {0, (long)us * 1000};
        nanosleep(&ts, NULL);
    }
}

/* -------------------------------------------------- pending object names */

/* Names created but not yet unlinked (attach in progress), removed at exit
 * if the process leaves while waiting. */
static pthread_mutex_t g_pending_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_pending[16][128];
static pthread_once_t g_atexit_once = PTHREAD_ONCE_INIT;

static void unlink_pending(void) {
    pthread_mutex_lock(&g_pending_lock);
    for (int i = 0; i < 16; i++)
        if (g_pending[i][0]) {
            shm_unlink(g_pending[i]);
            g_pending[i][0] = 0;
        }
    pthread_mutex_unlock(&g_pending_lock);
}

static void register_atexit(void) { atexit(unlink_pending); }

static void pending_set(const char *name, int add) {
    pthread_once(&g_atexit_once, register_atexit);
    pthread_mutex_lock(&g_pending_lock);
    for (int i = 0; i < 16; i++) {
        if (add && !g_pending[i][0]) {
            snprintf(g_pending[i], sizeof g_pending[i], "%s", name);
            break;
        }
        if (!add && strcmp(g_pending[i], name) == 0) {
            g_pending[i][0] = 0;
            break;
        }
    }
    pthread_mutex_unlock(&g_pending_lock);
}

/* ---------------------------------------------------------------- layout */

static shm_hdr *hdr(maya_shm *s) { return (shm_hdr *)s->base; }
static shm_ctr *rank_ctr(maya_shm *s, int r) { return (shm_ctr *)(s->base + 64) + r; }
static shm_ctr *pair_ctr(maya_shm *s, int src, int dst) {
    return (shm_ctr *)(s->base + 64) + s->nranks + (size_t)src * s->nranks + dst;
}
static size_t data_offset(int nranks) {
    size_t meta = 64 + 64 * ((size_t)nranks + (size_t)nranks * nranks);
    return (meta + 4095) & ~(size_t)4095;
}
void *maya_shm_slot(maya_shm *s, int r) { return s->base + data_offset(s->nranks) + (size_t)r * s->slot; }
static void *mailbox(maya_shm *s, int src, int dst) {
    size_t n = (size_t)s->nranks;
    return s->base + data_offset(s->nranks) + (n + (size_t)src * n + dst) * s->slot;
}
size_t maya_shm_slot_bytes(const maya_shm *s) { return s->slot; }

/* ---------------------------------------------------------------- attach */

maya_shm *maya_shm_attach(const char *name, int nranks, int rank, size_t slot_bytes,
                          double timeout_s, char *err, size_t errlen) {
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        snprintf(err, errlen, "bad rank %d of %d", rank, nranks);
        return NULL;
    }
    slot_bytes = (slot_bytes + 63) & ~(size_t)63;
    size_t n = (size_t)nranks;
    size_t size = data_offset(nranks) + (n + n * n) * slot_bytes;
    pending_set(name, 1);
    int fd = shm_open(name, O_CREAT | O_RDWR, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "shm_open(%s): %s", name, strerror(errno));
        pending_set(name, 0);
        return NULL;
    }
    /* Every rank sets the same size; tmpfs keeps the file sparse. */
    struct stat st;
    if ((fstat(fd, &st) != 0 || (size_t)st.st_size < size) && ftruncate(fd, (off_t)size) != 0) {
        snprintf(err, errlen, "ftruncate(%s, %zu): %s", name, size, strerror(errno));
        close(fd);
        shm_unlink(name);
        pending_set(name, 0);
        return NULL;
    }
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
        snprintf(err, errlen, "mmap(%s, %zu): %s", name, size, strerror(errno));
        shm_unlink(name);
        pending_set(name, 0);
        return NULL;
    }
    maya_shm *s = calloc(1, sizeof *s);
    uint64_t *counts = calloc(2 * n, sizeof *counts);
    if (!s || !counts) {
        free(s);
        free(counts);
        munmap(base, size);
        snprintf(err, errlen, "out of host memory");
        pending_set(name, 0);
        return NULL;
    }
    s->base = base;
    s->size = size;
    s->slot = slot_bytes;
    s->nranks = nranks;
    s->rank = rank;
    s->sent_k = counts;
    s->recv_k = counts + n;
    s->timeout_s = timeout_s;
    atomic_fetch_add_explicit(&hdr(s)->attached, 1, memory_order_acq_rel);

    /* Wait for every rank: after this all of them hold the mapping, so the
     * name can go (a later communicator with the same id gets a fresh one). */
    uint64_t deadline = now_ns() + (uint64_t)(timeout_s * 1e9);
    for (unsigned i = 0;; i++) {
        uint64_t a = atomic_load_explicit(&hdr(s)->attached, memory_order_acquire);
        if (a >= n) break;
        if (now_ns() > deadline) {
            snprintf(err, errlen,
                     "timed out after %.0f s waiting for %d of %d ranks to join communicator %s "
                     "(set MAYA_NCCL_TIMEOUT_S to wait longer)",
                     timeout_s, nranks - (int)a, nranks, name);
            shm_unlink(name);
            pending_set(name, 0);
            maya_shm_detach(s);
            return NULL;
        }
        maya_shm_backoff(i);
    }
    shm_unlink(name);
    pending_set(name, 0);
    return s;
}

void maya_shm_detach(maya_shm *s) {
    if (!s) return;
    munmap(s->base, s->size);
    free(s->sent_k);
    free(s);
}

/* ------------------------------------------------------ collective rounds */

/* Wait until every rank's counter (a or b) has reached `target`. */
static int wait_all(maya_shm *s, int use_b, uint64_t target, uint64_t *wait_ns, const char *what,
                    char *err, size_t errlen) {
    uint64_t t0 = 0, deadline = 0;
    for (int r = 0; r < s->nranks; r++) {
        shm_ctr *c = rank_ctr(s, r);
        for (unsigned i = 0;; i++) {
            uint64_t v = atomic_load_explicit(use_b ? &c->b : &c->a, memory_order_acquire);
            if (v >= target) break;
            if (!t0) {
                t0 = now_ns();
                deadline = t0 + (uint64_t)(s->timeout_s * 1e9);
            } else if (now_ns() > deadline) {
                snprintf(err, errlen,
                         "timed out after %.0f s: rank %d waits for rank %d to %s exchange %llu "
                         "(the ranks issued different collectives, or one of them stopped; "
                         "set MAYA_NCCL_TIMEOUT_S to wait longer)",
                         s->timeout_s, s->rank, r, what, (unsigned long long)target);
                if (wait_ns) *wait_ns += now_ns() - t0;
                return -1;
            }
            maya_shm_backoff(i);
        }
    }
    if (t0 && wait_ns) *wait_ns += now_ns() - t0;
    return 0;
}

int maya_shm_begin(maya_shm *s, uint64_t *wait_ns, char *err, size_t errlen) {
    s->gen++;
    return wait_all(s, 1, s->gen - 1, wait_ns, "finish", err, errlen);
}

int maya_shm_publish(maya_shm *s, uint64_t *wait_ns, char *err, size_t errlen) {
    atomic_store_explicit(&rank_ctr(s, s->rank)->a, s->gen, memory_order_release);
    return wait_all(s, 0, s->gen, wait_ns, "reach", err, errlen);
}

void maya_shm_end(maya_shm *s) {
    atomic_store_explicit(&rank_ctr(s, s->rank)->b, s->gen, memory_order_release);
}

/* -------------------------------------------------------- point to point */

int maya_shm_send_try(maya_shm *s, int peer, const void *buf, size_t n) {
    shm_ctr *c = pair_ctr(s, s->rank, peer);
    uint64_t k = s->sent_k[peer];
    if (atomic_load_explicit(&c->b, memory_order_acquire) < k) return 0;  /* previous not taken */
    if (n > s->slot) n = s->slot;
    if (n && buf) memcpy(mailbox(s, s->rank, peer), buf, n);
    c->n = n;
    s->sent_k[peer] = k + 1;
    atomic_store_explicit(&c->a, k + 1, memory_order_release);
    return 1;
}

int maya_shm_recv_try(maya_shm *s, int peer, void *buf, size_t n, size_t *got) {
    shm_ctr *c = pair_ctr(s, peer, s->rank);
    uint64_t k = s->recv_k[peer];
    if (atomic_load_explicit(&c->a, memory_order_acquire) < k + 1) return 0;  /* not sent yet */
    size_t m = c->n < n ? c->n : n;
    if (m && buf) memcpy(buf, mailbox(s, peer, s->rank), m);
    if (got) *got = c->n;
    s->recv_k[peer] = k + 1;
    atomic_store_explicit(&c->b, k + 1, memory_order_release);
    return 1;
}

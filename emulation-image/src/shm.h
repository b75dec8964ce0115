/* A rendezvous in POSIX shared memory for the processes of one emulated
 * NCCL communicator (shm.c).  All ranks of a communicator run on this
 * machine, so small collectives and point-to-point messages carry their real
 * bytes through one shared object per communicator:
 *
 *   header | per-rank counters | per-pair counters | rank slots | pair mailboxes
 *
 * Collective exchange number k (k = 1, 2, ...):
 *   begin   waits until every rank has finished reading exchange k-1, so the
 *           caller may overwrite its own slot;
 *   publish marks the caller's slot written and waits until every rank's is;
 *   end     marks the caller done reading the others' slots.
 * Mailboxes hold one message per ordered pair (src, dst) at a time.
 *
 * Every wait spins briefly, then yields, then sleeps, and gives up after the
 * timeout with a message in err (never hangs forever). */
#ifndef MAYA_SHM_H
#define MAYA_SHM_H

#include <stddef.h>
#include <stdint.h>

typedef struct maya_shm maya_shm;

/* Open (creating if needed) `name` for nranks processes and wait until all of
 * them have attached; the name is unlinked once they have, so nothing is
 * left in /dev/shm.  NULL (and err filled) on failure or timeout. */
maya_shm *maya_shm_attach(const char *name, int nranks, int rank, size_t slot_bytes,
                          double timeout_s, char *err, size_t errlen);
void maya_shm_detach(maya_shm *s);
size_t maya_shm_slot_bytes(const maya_shm *s);

/* The slot of rank r for collective exchanges. */
void *maya_shm_slot(maya_shm *s, int r);
/* 0 ok, -1 on timeout (err filled).  *wait_ns accumulates the time spent
 * waiting for the other ranks. */
int maya_shm_begin(maya_shm *s, uint64_t *wait_ns, char *err, size_t errlen);
int maya_shm_publish(maya_shm *s, uint64_t *wait_ns, char *err, size_t errlen);
void maya_shm_end(maya_shm *s);

/* Point to point.  The try forms return 1 when done, 0 when the mailbox is
 * still full (send) or empty (recv).  *got is the size the sender wrote. */
int maya_shm_send_try(maya_shm *s, int peer, const void *buf, size_t n);
int maya_shm_recv_try(maya_shm *s, int peer, void *buf, size_t n, size_t *got);

/* Waiting with back-off: call with the attempt number (0, 1, ...). */
void maya_shm_backoff(unsigned attempt);
/* Seconds after which waits give up: MAYA_NCCL_TIMEOUT_S or 300. */
double maya_shm_timeout_s(void);

#endif

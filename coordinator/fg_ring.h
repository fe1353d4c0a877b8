/* fg_ring.h - the ranks of a pipeline run (`mpirun -np P flexgen run`):
 * MPI, wrapped to what the engine needs. A run started without mpirun (or
 * by a flexgen built without MPI) is one rank and never calls MPI.
 *
 * Rank r is a coordinator with its own three workers over a stage of
 * decoder layers (fg_ring_stage); hidden states go r -> r+1, the sampled ids
 * from the last rank back to rank 0, all as non-blocking point-to-point
 * messages from shared-memory buffers (coordinator/fg_pipe.c). Rank 0 owns
 * the job: prompts' journal, outputs, report. A rank that ends with an
 * error takes the others with it (MPI_Abort from an atexit handler), and
 * mpirun ends every rank when one dies. */
#ifndef FG_RING_H
#define FG_RING_H

#include <stdint.h>

#include "fg_common.h"

/* Joins MPI when the environment says mpirun started this process with
 * more than one rank; FG_EINPUT when it did but this build has no MPI.
 * Safe to call once; afterwards rank and size are known (0 and 1 alone). */
fg_status fg_ring_init(void);
int fg_ring_rank(void);
int fg_ring_size(void);
/* The run ended well: leave MPI (every rank calls it). */
void fg_ring_finish(void);

/* Decoder layers [*lo, *hi) of rank r of P over L layers, balanced:
 * [r*L/P, (r+1)*L/P). */
void fg_ring_stage(int L, int r, int P, int *lo, int *hi);

/* A non-blocking message in flight; zeroed: none. */
typedef struct {
    uint64_t opaque[2];   /* an MPI_Request */
    int active, send;
    double t0;            /* when it was posted */
} fg_ring_req;

enum { FG_RING_TAG_HIDDEN = 1, FG_RING_TAG_IDS = 2, FG_RING_TAG_OUT = 3 };

fg_status fg_ring_isend(const void *buf, uint64_t n, int dest, int tag, fg_ring_req *r);
fg_status fg_ring_irecv(void *buf, uint64_t cap, int src, int tag, fg_ring_req *r);
/* 1 when r has completed (r is then inactive; *n gets the bytes a receive
 * got, may be NULL); 0 while it is in flight. Never blocks. */
int fg_ring_test(fg_ring_req *r, uint64_t *n);
/* Seconds from posting each send to seeing it complete, summed: the ring's
 * transfer time as this rank sees it (completion is seen when tested). */
double fg_ring_send_seconds(void);
/* Cancel a receive that will never match (the run ends early). */
void fg_ring_cancel(fg_ring_req *r);
/* A message from src with tag whose size is not known ahead: 1 and its
 * size when one has arrived, 0 when none yet. Never blocks. */
int fg_ring_probe(int src, int tag, uint64_t *n);
fg_status fg_ring_recv(void *buf, uint64_t n, int src, int tag);

/* Blocking collectives over every rank (set-up and the end, not the
 * schedule). */
fg_status fg_ring_bcast(void *buf, uint64_t n, int root);
fg_status fg_ring_gather(const void *send, uint64_t n, void *recv, int root);

#endif

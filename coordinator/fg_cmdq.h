/* fg_cmdq.h - the engine's command queue: submit commands to the workers,
 * wait for them, express what a gpu command waits for, and account for
 * every command once it ends (busy time per worker, bytes moved, trace
 * events). The supervisor (runtime/fg_super.h) delivers and re-issues; this
 * is the engine's view of what is in flight.
 *
 * Dependencies: a gpu command waits on the gpu worker for the commands in
 * its fg_deps (the protocol's `after`, like a CUDA stream waiting on an
 * event), so the coordinator queues it at once; a command of the disk or
 * cpu worker cannot be waited for there, so fg_cmdq_need() waits for it
 * here. */
#ifndef FG_CMDQ_H
#define FG_CMDQ_H

#include "fg_super.h"

/* Streams of the gpu worker: commands of one stream run in order, the three
 * side by side, as a GPU's compute stream and its two copy engines. */
enum { ST_COMPUTE = 0, ST_H2D = 1, ST_D2H = 2, NSTREAMS = 3 };

/* What a gpu command waits for: per gpu stream, the latest command (0: none). */
typedef struct {
    uint64_t s[NSTREAMS];
} fg_deps;

/* One finished command, for --trace. */
typedef struct {
    uint64_t start_ns, end_ns;
    int role, stream, type, op, layer, batch;
} fg_trace_ev;

typedef struct fg_cmdq_pending fg_cmdq_pending;

/* Pending commands past which the schedule calls fg_cmdq_reap(): every
 * lookup walks the pending list, so it is kept short. */
#define FG_CMDQ_REAP_AT 512

typedef struct {
    fg_super *sup;
    int overlap;                 /* 0: every submit waits for its command */
    int tracing;                 /* keep a trace event per command */
    fg_cmdq_pending *pend;       /* submitted, not yet accounted for */
    size_t npend, cappend;       /* past FG_CMDQ_REAP_AT the schedule reaps */
    fg_trace_ev *ev;             /* --trace: every finished command */
    size_t nev, capev;
    /* accounting */
    double busy_s[FG_NROLES];    /* from DONE timings */
    long commands;
    uint64_t h2d_bytes, d2h_bytes;
    uint64_t d2d_bytes;                           /* inside the device (GPU-tier experts into a slot) */
    uint64_t disk_read_bytes, disk_write_bytes;   /* DISK_READ / DISK_WRITE buffers */
    /* the disk's delivered read rate: DISK_READs finished, their bytes and
     * the seconds at least one was in flight (fg_cmdq_await) */
    uint64_t rd_done_bytes;
    double rd_busy_s;
    uint64_t rd_end_ns;
    uint64_t last_gpu[NSTREAMS];                  /* the latest gpu command of each stream */
} fg_cmdq;

void fg_cmdq_free(fg_cmdq *q);

/* Submit m to role on stream; without overlap, wait for it at once. *seq
 * (may be NULL) gets its number. */
fg_status fg_cmdq_submit(fg_cmdq *q, fg_role role, fg_msg *m, int stream, uint64_t *seq);
/* Submit a gpu command on stream t behind d (NULL: nothing): its own stream
 * keeps order by itself, the other streams' commands go into `after`. */
fg_status fg_cmdq_submit_gpu(fg_cmdq *q, fg_msg *m, int t, const fg_deps *d, uint64_t *seq);

/* Add command seq (0: nothing) to what a gpu command waits for: a gpu
 * command into d, a disk or cpu worker's command waited for here. */
fg_status fg_cmdq_need(fg_cmdq *q, fg_deps *d, uint64_t seq);
void fg_deps_merge(fg_deps *a, const fg_deps *b);

/* Wait for command seq (0 or accounted for already: returns at once). */
fg_status fg_cmdq_await(fg_cmdq *q, uint64_t seq);
fg_status fg_cmdq_await_all(fg_cmdq *q);
/* Has seq ended (accounted for, or its DONE is in)? Never waits. */
int fg_cmdq_ended(fg_cmdq *q, uint64_t seq);
/* Account for every command that has ended, so the pending list stays
 * short when nothing waits for them (stores, copies). */
fg_status fg_cmdq_reap(fg_cmdq *q);

/* Chrome trace-event JSON of every accounted command (Perfetto opens it):
 * one process per worker, one thread per stream. Written whole or not at all. */
fg_status fg_cmdq_write_trace(const fg_cmdq *q, const char *path);

#endif

/* fg_worker_int.h - the worker loop's state, shared by its two files and by
 * nobody else: fg_worker_loop.c (the I/O thread: flags, the socket, READY,
 * heartbeats, commands in, replies out) and fg_worker_exec.c (the queue of
 * jobs and the executor threads that run them).
 *
 * Threads: the I/O thread is the only one that touches the socket.
 * Executors take jobs from a FIFO under w->mu and put finished jobs on a
 * done list, then poke an eventfd that the I/O thread polls beside the
 * socket. The shm table is written only by an exclusive job (SHM_MAP),
 * during which no other job runs, so executors read it without a lock. */
#ifndef FG_WORKER_INT_H
#define FG_WORKER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "fg_fault.h"
#include "fg_worker.h"

/* Distinct streams a command's flags can name (FG_MSG_STREAM: 8 bits). */
#define FG_WK_NSTREAMS ((FG_MSG_STREAM_MASK >> FG_MSG_STREAM_SHIFT) + 1)

typedef struct job {
    struct job *next;
    fg_msg cmd;
    fg_worker_fn fn;     /* NULL: SHM_MAP */
    int exclusive;
    int stream;          /* FG_MSG_STREAM(flags): in order within a stream */
    fg_fault_kind fault; /* FLEXGEN_FAULT: damage the reply, or hang in it (tests) */
    /* results */
    int32_t code;        /* 0 or FG_MSG_E* */
    char err[FG_MSG_TEXT_MAX + 1];
    uint64_t start_ns, end_ns;
} job;

struct fg_worker {
    const fg_worker_def *def;
    const char *endpoint;
    const char *offload_dir;
    void *ctx;
    fg_shm_table *shm;
    char info[FG_MSG_INFO_MAX + 1];   /* READY's: def->info, or what init set */

    pthread_mutex_t mu;
    pthread_cond_t cv;   /* jobs to take, executors ending */
    job *qhead, *qtail;  /* waiting to run */
    job *dhead, *dtail;  /* finished, not yet replied */
    int running, exclusive_running, stopping;
    int live;                  /* executor threads not yet ended */
    uint8_t stream_busy[FG_WK_NSTREAMS];   /* executors inside a job of each stream */
    uint64_t *running_seq;     /* per executor: the seq of its job, 0 if idle */
    int evfd;
    _Atomic uint64_t busy_ns;
    uint64_t received;         /* commands, for FLEXGEN_FAULT */
    pthread_t *threads;
    int nthreads;
};

static inline uint64_t fg_wk_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* fg_worker_exec.c */
void fg_wk_enqueue(fg_worker *w, job *j);
/* The finished jobs, oldest first, taken off the done list. */
job *fg_wk_take_finished(fg_worker *w);
fg_status fg_wk_start_executors(fg_worker *w);
/* Tell the executors to end after the job in hand and wait for them, at
 * most FG_WK_STOP_GRACE_MS: returns how many are still inside a command
 * (stuck; the process must exit without them), 0 when all ended. */
int fg_wk_stop_executors(fg_worker *w);
void fg_wk_free_jobs(fg_worker *w);

#endif

/* fg_pool.h - the compute threads of a process. One pool does all the
 * parallel work (Linear layers, attention heads), and OpenBLAS is held to one
 * thread inside each task: two thread pools on the same cores (OpenBLAS's and
 * OpenMP's) spin against each other, which cost a third of the decode time
 * on a 2-core machine. Idle workers sleep on a condition variable, so a
 * worker process never burns a core its neighbours need. */
#ifndef FG_POOL_H
#define FG_POOL_H

/* fn(ctx, task) for task in [0, n_tasks), spread over the pool; returns when
 * all are done. Nested calls from inside a task run serially. */
typedef void (*fg_pool_fn)(void *ctx, int task);
void fg_pool_run(int n_tasks, fg_pool_fn fn, void *ctx);

/* Threads in the pool (the caller included). Set by FLEXGEN_THREADS, default
 * the number of online CPUs. */
int fg_pool_threads(void);
/* The threads the pool has or will have, without starting it (starting it
 * wakes OpenBLAS's own threads, which cost an idle process its latency). */
int fg_pool_size(void);

#endif

/* fg_pool.c - a small persistent thread pool (see fg_pool.h). Tasks are
 * handed out through an atomic counter; the caller works too. */
#include "fg_pool.h"

#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#define FG_POOL_MAX 64

static struct {
    pthread_once_t once;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    int nthreads;
    /* the job in progress */
    fg_pool_fn fn;
    void *ctx;
    int n_tasks;
    atomic_int next;
    int generation;   /* bumped per job; workers wait for a new one */
    int busy;         /* workers still inside the current job */
} pool = {.once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER,
          .wake = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};

static _Thread_local int in_task;
static pthread_mutex_t run_mu = PTHREAD_MUTEX_INITIALIZER;   /* one job at a time */

static void drain(fg_pool_fn fn, void *ctx, int n) {
    in_task = 1;
    for (int t; (t = atomic_fetch_add(&pool.next, 1)) < n;) fn(ctx, t);
    in_task = 0;
}

static void *worker(void *arg) {
    (void)arg;
    int seen = 0;
    pthread_mutex_lock(&pool.mu);
    for (;;) {
        while (pool.generation == seen) pthread_cond_wait(&pool.wake, &pool.mu);
        seen = pool.generation;
        fg_pool_fn fn = pool.fn;
        void *ctx = pool.ctx;
        int n = pool.n_tasks;
        pthread_mutex_unlock(&pool.mu);
        drain(fn, ctx, n);
        pthread_mutex_lock(&pool.mu);
        if (--pool.busy == 0) pthread_cond_signal(&pool.done);
    }
    return NULL;
}

int fg_pool_size(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    const char *env = getenv("FLEXGEN_THREADS");
    if (env && atoi(env) > 0) n = atoi(env);
    if (n < 1) n = 1;
    if (n > FG_POOL_MAX) n = FG_POOL_MAX;
    return (int)n;
}

static void pool_init(void) {
    pool.nthreads = fg_pool_size();
    openblas_set_num_threads(1);   /* parallelism comes from this pool alone */
    for (int i = 1; i < pool.nthreads; i++) {
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &at, worker, NULL) != 0) {
            pool.nthreads = i;   /* run with the threads we got */
            pthread_attr_destroy(&at);
            break;
        }
        pthread_attr_destroy(&at);
    }
}

int fg_pool_threads(void) {
    pthread_once(&pool.once, pool_init);
    return pool.nthreads;
}

void fg_pool_run(int n_tasks, fg_pool_fn fn, void *ctx) {
    pthread_once(&pool.once, pool_init);
    if (n_tasks <= 0) return;
    if (in_task || pool.nthreads == 1 || n_tasks == 1) {
        for (int t = 0; t < n_tasks; t++) fn(ctx, t);
        return;
    }
    pthread_mutex_lock(&run_mu);
    pthread_mutex_lock(&pool.mu);
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n_tasks = n_tasks;
    atomic_store(&pool.next, 0);
    pool.busy = pool.nthreads - 1;
    pool.generation++;
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.mu);
    drain(fn, ctx, n_tasks);
    pthread_mutex_lock(&pool.mu);
    while (pool.busy > 0) pthread_cond_wait(&pool.done, &pool.mu);
    pthread_mutex_unlock(&pool.mu);
    pthread_mutex_unlock(&run_mu);
}

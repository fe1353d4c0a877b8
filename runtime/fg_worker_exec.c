/* fg_worker_exec.c - a worker's jobs and the executor threads that run
 * them (see fg_worker_int.h): which queued job may start (streams in order,
 * `after` dependencies, barriers alone), running it, and stopping. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fg_worker_int.h"

/* An executor still inside its command this long after the worker was told
 * to stop is stuck in it: the worker exits without it. Below the
 * coordinator's SHUTDOWN grace (fg_super_int.h), so a spawned worker leaves
 * by itself before it would be killed. */
#define FG_WK_STOP_GRACE_MS 4000

static fg_status run_shm_map(fg_worker *w, const fg_msg *cmd) {
    const fg_msg_shm_map *m = &cmd->u.map;
    fg_shm_seg *cur = fg_shm_table_get(w->shm, m->segment);
    if (cur && !strcmp(fg_shm_name(cur), m->name) && fg_shm_size(cur) == m->size)
        return FG_OK;  /* already mapped: a re-sent map is a no-op */
    fg_shm_seg *seg = NULL;
    fg_status st = fg_shm_attach(m->name, m->segment, &seg);
    if (st != FG_OK) return st;
    if (fg_shm_size(seg) != m->size) {
        fg_shm_destroy(&seg);
        return fg_err_set(FG_EINPUT, "segment %s has %llu bytes, the coordinator says %llu",
                          m->name, (unsigned long long)fg_shm_size(seg),
                          (unsigned long long)m->size);
    }
    fg_debug("mapped segment %u: %s", m->segment, m->name);
    /* the worker's own preparation (the gpu worker's backend registers or
     * prefaults it), else page tables filled in the background */
    if (!w->def->on_map) fg_shm_populate_async(seg);
    else if ((st = w->def->on_map(w, fg_shm_base(seg), fg_shm_size(seg))) != FG_OK) {
        fg_shm_destroy(&seg);
        return st;
    }
    return fg_shm_table_add(w->shm, seg);
}

static void run_job(fg_worker *w, job *j) {
    fg_err_set(FG_OK, "%s", "");
    j->start_ns = fg_wk_now_ns();
    if (j->fault == FG_FAULT_HANG) fg_fault_hang();
    fg_status st = j->fn ? j->fn(w, &j->cmd) : run_shm_map(w, &j->cmd);
    j->end_ns = fg_wk_now_ns();
    atomic_fetch_add(&w->busy_ns, j->end_ns - j->start_ns);
    if (st != FG_OK) {
        j->code = st == FG_EINPUT ? FG_MSG_EBADCMD : FG_MSG_EIO;
        snprintf(j->err, sizeof j->err, "%s", fg_err_msg());
    }
}

/* Has command seq ended? It was sent before the job that asks (the
 * coordinator checks that), so it has ended unless it is still queued in
 * front of that job or running. */
static int ended(const fg_worker *w, const job *asker, uint64_t seq) {
    if (!seq) return 1;
    for (const job *q = w->qhead; q && q != asker; q = q->next)
        if (q->cmd.seq == seq) return 0;
    for (int t = 0; t < w->nthreads; t++)
        if (w->running_seq[t] == seq) return 0;
    return 1;
}

/* The job an idle executor may take, with the one before it in the queue
 * (NULL: it is the head), or NULL: the first queued job of a stream whose
 * earlier jobs have all ended and whose `after` commands have ended;
 * nothing past an exclusive job, which itself runs only when nothing else
 * does. */
static job *pick(const fg_worker *w, job **prev_out) {
    if (w->exclusive_running) return NULL;
    uint8_t skipped[FG_WK_NSTREAMS] = {0};
    job *prev = NULL;
    for (job *j = w->qhead; j; prev = j, j = j->next) {
        if (j->exclusive) {
            if (j == w->qhead && w->running == 0) {
                *prev_out = NULL;
                return j;
            }
            return NULL;
        }
        int free_stream = !w->def->ordered_streams || (!w->stream_busy[j->stream] && !skipped[j->stream]);
        if (free_stream && ended(w, j, j->cmd.after[0]) && ended(w, j, j->cmd.after[1])) {
            *prev_out = prev;
            return j;
        }
        skipped[j->stream] = 1;   /* a stream runs in order: nothing of it passes a waiting job */
    }
    return NULL;
}

/* Take job j (prev: the one before it in the queue) off the queue as
 * running. Under w->mu. */
static void take(fg_worker *w, job *j, job *prev) {
    if (prev) prev->next = j->next;
    else w->qhead = j->next;
    if (w->qtail == j) w->qtail = prev;
    j->next = NULL;
    w->running++;
    w->stream_busy[j->stream]++;
    for (int t = 0; t < w->nthreads; t++)
        if (!w->running_seq[t]) {
            w->running_seq[t] = j->cmd.seq;
            break;
        }
    if (j->exclusive) w->exclusive_running = 1;
}

/* Job j ended: off the running set, onto the done list. Under w->mu. */
static void finish(fg_worker *w, job *j) {
    w->running--;
    w->stream_busy[j->stream]--;
    for (int t = 0; t < w->nthreads; t++)
        if (w->running_seq[t] == j->cmd.seq) {
            w->running_seq[t] = 0;
            break;
        }
    if (j->exclusive) w->exclusive_running = 0;
    if (w->dtail) w->dtail->next = j;
    else w->dhead = j;
    w->dtail = j;
}

static void wake_io(fg_worker *w) {
    uint64_t one = 1;
    ssize_t rc = write(w->evfd, &one, sizeof one);
    (void)rc;
}

/* An executor takes its next job before it wakes the I/O thread for the
 * DONE of the last one, and wakes another executor only when a job is
 * there for it: each wakeup between two jobs of a stream may cost a
 * scheduler slice where the compute fills every core. */
static void *executor(void *arg) {
    fg_worker *w = arg;
    int done_unsent = 0;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        job *j = NULL, *prev = NULL;
        while (!w->stopping && !(j = pick(w, &prev))) {
            if (done_unsent) {   /* nothing to run: the DONE goes out now */
                pthread_mutex_unlock(&w->mu);
                wake_io(w);
                done_unsent = 0;
                pthread_mutex_lock(&w->mu);
                continue;
            }
            pthread_cond_wait(&w->cv, &w->mu);
        }
        if (w->stopping) break;
        take(w, j, prev);
        job *other, *oprev;
        if ((other = pick(w, &oprev)) != NULL) pthread_cond_signal(&w->cv);
        pthread_mutex_unlock(&w->mu);
        if (done_unsent) wake_io(w);
        done_unsent = 0;

        run_job(w, j);

        pthread_mutex_lock(&w->mu);
        finish(w, j);
        done_unsent = 1;
    }
    w->live--;
    pthread_cond_broadcast(&w->cv);   /* the stopping I/O thread waits on it */
    pthread_mutex_unlock(&w->mu);
    if (done_unsent) wake_io(w);
    return NULL;
}

void fg_wk_enqueue(fg_worker *w, job *j) {
    pthread_mutex_lock(&w->mu);
    if (w->qtail) w->qtail->next = j;
    else w->qhead = j;
    w->qtail = j;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

job *fg_wk_take_finished(fg_worker *w) {
    pthread_mutex_lock(&w->mu);
    job *j = w->dhead;
    w->dhead = w->dtail = NULL;
    pthread_mutex_unlock(&w->mu);
    return j;
}

fg_status fg_wk_start_executors(fg_worker *w) {
    w->threads = fg_xcalloc((size_t)w->nthreads, sizeof *w->threads);
    w->running_seq = fg_xcalloc((size_t)w->nthreads, sizeof *w->running_seq);
    for (int i = 0; i < w->nthreads; i++) {
        pthread_mutex_lock(&w->mu);
        w->live++;
        pthread_mutex_unlock(&w->mu);
        int rc = pthread_create(&w->threads[i], NULL, executor, w);
        if (rc) {
            pthread_mutex_lock(&w->mu);
            w->live--;
            w->nthreads = i;   /* those started are the ones to stop */
            pthread_mutex_unlock(&w->mu);
            return fg_err_set(FG_ERUNTIME, "cannot start executor thread %d: %s", i, strerror(rc));
        }
    }
    return FG_OK;
}

int fg_wk_stop_executors(fg_worker *w) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += FG_WK_STOP_GRACE_MS / 1000;
    until.tv_nsec += (FG_WK_STOP_GRACE_MS % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&w->mu);
    w->stopping = 1;
    pthread_cond_broadcast(&w->cv);
    while (w->live > 0 && pthread_cond_timedwait(&w->cv, &w->mu, &until) != ETIMEDOUT) {
    }
    int stuck = w->live;
    if (stuck) {
        char seqs[128] = "";
        for (int t = 0; t < w->nthreads; t++)
            if (w->running_seq[t])
                snprintf(seqs + strlen(seqs), sizeof seqs - strlen(seqs), " %llu",
                         (unsigned long long)w->running_seq[t]);
        fg_warn("%d executor(s) still inside a command (seq%s) %d ms after the stop: exiting without them", stuck,
                seqs, FG_WK_STOP_GRACE_MS);
    }
    pthread_mutex_unlock(&w->mu);
    if (!stuck)
        for (int i = 0; i < w->nthreads; i++) pthread_join(w->threads[i], NULL);
    return stuck;
}

void fg_wk_free_jobs(fg_worker *w) {
    for (job *j = w->qhead, *n; j; j = n) {
        n = j->next;
        free(j);
    }
    for (job *j = w->dhead, *n; j; j = n) {
        n = j->next;
        free(j);
    }
    w->qhead = w->qtail = w->dhead = w->dtail = NULL;
}

/* fg_super_api.c - the supervisor's public calls (fg_super.h): creating
 * the run (sweep, run directory, the control socket, spawning or waiting
 * for hand-started workers), destroying it, segments, submit, poll and
 * wait; each under the supervisor's lock. And the heartbeat thread, which
 * pumps the supervisor whenever its owner has not for half an interval, so
 * heartbeats flow both ways however long the coordinator works between
 * calls (a tier-store conversion, loading weights, writing outputs). The
 * protocol itself is fg_super.c's; the window of commands and worker command
 * lines live here as both files need them. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "fg_super_int.h"

#define now_ns fg_sup_now_ns

static void lock(fg_super *s) { pthread_mutex_lock(&s->mu); }
static void unlock(fg_super *s) { pthread_mutex_unlock(&s->mu); }

/* ---- the window ------------------------------------------------------- */

cmd *fg_sup_slot_get(const fg_super *s, uint64_t seq) {
    if (seq < s->lo || seq >= s->hi) return NULL;
    return s->slots[seq & (s->cap - 1)];
}

uint64_t fg_sup_slot_add(fg_super *s, cmd *c) {
    if (s->hi - s->lo == s->cap) {
        uint64_t ncap = s->cap * 2;
        cmd **n = fg_xcalloc(ncap, sizeof *n);
        for (uint64_t q = s->lo; q < s->hi; q++) n[q & (ncap - 1)] = s->slots[q & (s->cap - 1)];
        free(s->slots);
        s->slots = n;
        s->cap = ncap;
    }
    uint64_t seq = s->hi++;
    s->slots[seq & (s->cap - 1)] = c;
    c->msg.seq = seq;
    return seq;
}

void fg_sup_slot_free(fg_super *s, uint64_t seq) {
    cmd **p = &s->slots[seq & (s->cap - 1)];
    free(*p);
    *p = NULL;
    while (s->lo < s->hi && !s->slots[s->lo & (s->cap - 1)]) s->lo++;
}

void fg_sup_fifo_push(fg_super *s, uint64_t seq) {
    if (s->fifo_len == s->fifo_cap) {
        size_t ncap = s->fifo_cap ? s->fifo_cap * 2 : 256;
        uint64_t *n = fg_xmalloc(ncap * sizeof *n);
        for (size_t i = 0; i < s->fifo_len; i++) n[i] = s->fifo[(s->fifo_head + i) % s->fifo_cap];
        free(s->fifo);
        s->fifo = n;
        s->fifo_cap = ncap;
        s->fifo_head = 0;
    }
    s->fifo[(s->fifo_head + s->fifo_len) % s->fifo_cap] = seq;
    s->fifo_len++;
}

/* ---- worker command lines --------------------------------------------- */

/* The worker's command line, as spawned or as printed for a start by hand. */
int fg_sup_worker_argv(fg_super *s, int role, char **argv) {
    worker *w = &s->w[role];
    int n = 0;
    argv[n++] = w->path;
    argv[n++] = "--connect";
    argv[n++] = s->endpoint;
    if (role == FG_ROLE_DISK && s->opts.offload_dir) {
        argv[n++] = "--offload-dir";
        argv[n++] = (char *)s->opts.offload_dir;
    }
    if (role == FG_ROLE_GPU && s->opts.gpu_device) {
        argv[n++] = "--device";
        argv[n++] = (char *)s->opts.gpu_device;
    }
    argv[n] = NULL;
    return n;
}

/* Say how to start a role's worker by hand: its exact command line. */
void fg_sup_announce_manual(fg_super *s, int role) {
    char *argv[8], line[FG_SUP_PATH_MAX * 3] = "";
    int n = fg_sup_worker_argv(s, role, argv);
    size_t len = 0;
    for (int i = 0; i < n && len < sizeof line; i++)
        len += (size_t)snprintf(line + len, sizeof line - len, "%s%s", i ? " " : "", argv[i]);
    fg_info("waiting for the %s worker; start it by hand (under a debugger: gdb --args ...):\n  %s",
            fg_role_name(role), line);
}

/* ---- the heartbeat thread ----------------------------------------------- */

static void *hb_main(void *arg) {
    fg_super *s = arg;
    lock(s);
    while (!s->hb_stop) {
        uint64_t t = now_ns();
        if (t - s->last_pump >= MS(HB_THREAD_IDLE_MS)) {
            s->bg = 1;
            if (fg_sup_pump(s, 0) < 0) fg_warn("heartbeat thread: %s", fg_err_msg());
            s->bg = 0;
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += HB_THREAD_TICK_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&s->hb_cv, &s->mu, &until);
    }
    unlock(s);
    return NULL;
}

/* Started with every signal blocked: SIGINT and SIGTERM go to the owner's
 * thread, whose handlers clean up. */
static fg_status hb_start(fg_super *s) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&s->hb_thread, NULL, hb_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) return fg_err_set(FG_ERUNTIME, "cannot start the heartbeat thread: %s", strerror(rc));
    s->hb_started = 1;
    return FG_OK;
}

static void hb_stop(fg_super *s) {
    if (!s->hb_started) return;
    lock(s);
    s->hb_stop = 1;
    pthread_cond_signal(&s->hb_cv);
    unlock(s);
    pthread_join(s->hb_thread, NULL);
    s->hb_started = 0;
}

/* ---- public API ------------------------------------------------------- */

const char *fg_super_endpoint(const fg_super *s) { return s->endpoint; }
const char *fg_super_run_id(const fg_super *s) { return s->run_id; }
const char *fg_super_run_dir(const fg_super *s) { return s->run_dir; }

void fg_super_get_stats(fg_super *s, fg_super_stats *st) {
    lock(s);
    *st = s->stats;
    unlock(s);
}

size_t fg_super_inflight(fg_super *s) {
    lock(s);
    size_t n = s->undelivered;
    unlock(s);
    return n;
}

pid_t fg_super_worker_pid(fg_super *s, fg_role role) {
    if ((int)role < 0 || role >= FG_NROLES) return 0;
    lock(s);
    pid_t p = s->w[role].state == W_READY ? s->w[role].remote_pid : 0;
    unlock(s);
    return p;
}

static int all_ready(const fg_super *s, char *why, size_t cap) {
    for (int r = 0; r < FG_NROLES; r++) {
        const worker *w = &s->w[r];
        if (!w->managed) continue;
        if (w->state == W_FAILED) {
            snprintf(why, cap, "the %s worker could not be started: %s", fg_role_name(r),
                     w->gone[0] ? w->gone : w->last_death[0] ? w->last_death : "see the log above");
            return -1;
        }
        if (w->state != W_READY) return 0;
    }
    return 1;
}

static fg_status wait_ready(fg_super *s, int timeout_ms) {
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : now_ns() + MS(timeout_ms);
    char why[256];
    for (;;) {
        int st = all_ready(s, why, sizeof why);
        if (st > 0) return FG_OK;
        if (st < 0) return fg_err_set(FG_ERUNTIME, "%s", why);
        uint64_t t = now_ns();
        if (t >= deadline)
            return fg_err_set(FG_ERUNTIME, "workers not ready after %d ms (HINT: start them with "
                              "--connect %s)", timeout_ms, s->endpoint);
        int left = deadline == UINT64_MAX ? -1 : (int)((deadline - t) / 1000000 + 1);
        if (fg_sup_pump(s, left) < 0) return FG_ERUNTIME;
    }
}

fg_status fg_super_wait_ready(fg_super *s, int timeout_ms) {
    lock(s);
    fg_status st = wait_ready(s, timeout_ms);
    unlock(s);
    return st;
}

/* The control socket's address: ipc://<rundir>/ctl unless one is given; a
 * tcp wildcard host means loopback (only an address named on purpose
 * listens beyond this machine). */
static fg_status bind_endpoint(const fg_super *s, char *ep, size_t cap) {
    const char *given = s->opts.endpoint;
    if (!given) {
        int n = snprintf(ep, cap, "ipc://%s/ctl", s->run_dir);
        if (n - 6 >= 107)  /* sun_path holds 108 bytes */
            return fg_err_set(FG_ERUNTIME, "control socket path %s is too long for a Unix socket "
                              "(HINT: set XDG_RUNTIME_DIR to a short directory)", ep + 6);
        return FG_OK;
    }
    if (!strncmp(given, "tcp://*:", 8)) {
        snprintf(ep, cap, "tcp://127.0.0.1:%s", given + 8);
        return FG_OK;
    }
    snprintf(ep, cap, "%s", given);
    return FG_OK;
}

fg_status fg_super_new(const fg_super_opts *opts, fg_super **out) {
    *out = NULL;
    fg_super *s = fg_xcalloc(1, sizeof *s);
    fg_super_opts none = {0};
    s->opts = opts ? *opts : none;
    if (!s->opts.roles) s->opts.roles = (1u << FG_NROLES) - 1;
    if (s->opts.ready_timeout_ms <= 0) s->opts.ready_timeout_ms = DEFAULT_READY_TIMEOUT_MS;
    if (s->opts.max_restarts <= 0) s->opts.max_restarts = DEFAULT_MAX_RESTARTS;
    if (s->opts.max_deaths <= 0) s->opts.max_deaths = DEFAULT_MAX_DEATHS;
    int any_manual = 0;
    for (int r = 0; r < FG_NROLES; r++) {
        worker *w = &s->w[r];
        w->managed = (s->opts.roles >> r) & 1;
        w->manual = w->managed && (s->opts.manual || ((s->opts.attach >> r) & 1));
        w->pidfd = -1;
        any_manual |= w->manual;
    }
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&s->mu, &ma);
    pthread_mutexattr_destroy(&ma);
    pthread_cond_init(&s->hb_cv, NULL);
    s->cap = 1024;
    s->slots = fg_xcalloc(s->cap, sizeof *s->slots);
    s->lo = s->hi = 1;  /* seq 0 means "not a command" */
    s->segs = fg_shm_table_new();

    fg_status st = FG_OK;
    for (int r = 0; r < FG_NROLES && st == FG_OK; r++) {
        worker *w = &s->w[r];
        if (!w->managed) continue;
        st = fg_sup_worker_path(s->opts.worker_path[r], s->opts.worker_dir, fg_sup_program(r),
                                w->path, sizeof w->path);
        if (st != FG_OK && w->manual) {  /* only printed: the bare name will do */
            snprintf(w->path, sizeof w->path, "%s", fg_sup_program(r));
            st = FG_OK;
        }
    }
    if (st != FG_OK) goto fail;

    fg_shm_sweep();
    fg_sup_rundir_sweep();
    if ((st = fg_shm_run_id_new(s->run_id)) != FG_OK) goto fail;
    if ((st = fg_sup_rundir_make(s->run_id, s->run_dir, sizeof s->run_dir)) != FG_OK) goto fail;
    s->cleanup = fg_sup_cleanup_new(s->run_dir, !s->opts.no_signal_handlers);

    char bind_ep[FG_SUP_PATH_MAX + 16];
    if ((st = bind_endpoint(s, bind_ep, sizeof bind_ep)) != FG_OK) goto fail;
    s->zctx = zmq_ctx_new();
    s->router = zmq_socket(s->zctx, ZMQ_ROUTER);
    int zero = 0, one = 1, uid = (int)geteuid();
    zmq_setsockopt(s->router, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s->router, ZMQ_SNDHWM, &zero, sizeof zero);
    zmq_setsockopt(s->router, ZMQ_RCVHWM, &zero, sizeof zero);
    zmq_setsockopt(s->router, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    zmq_setsockopt(s->router, ZMQ_ROUTER_HANDOVER, &one, sizeof one);
    /* ipc: a peer of another user is refused when it connects (SO_PEERCRED),
     * before it could take a role's identity; the run directory's 0700 is
     * the first fence, this one holds against root and a loosened mode */
    if (!strncmp(bind_ep, "ipc://", 6) &&
        zmq_setsockopt(s->router, ZMQ_IPC_FILTER_UID, &uid, sizeof uid) != 0) {
        st = fg_err_set(FG_ERUNTIME, "the control socket cannot check its peers' user id "
                        "(ZMQ_IPC_FILTER_UID: %s)", zmq_strerror(zmq_errno()));
        goto fail;
    }
    if (zmq_bind(s->router, bind_ep) != 0) {
        st = fg_err_set(FG_ERUNTIME, "cannot bind the control socket %s: %s%s", bind_ep,
                        zmq_strerror(zmq_errno()),
                        s->opts.endpoint ? " (HINT: use ipc://PATH or tcp://127.0.0.1:PORT; "
                                           "port * picks a free one)" : "");
        goto fail;
    }
    size_t len = sizeof s->endpoint;
    if (zmq_getsockopt(s->router, ZMQ_LAST_ENDPOINT, s->endpoint, &len) != 0)
        snprintf(s->endpoint, sizeof s->endpoint, "%s", bind_ep);
    if (!strncmp(s->endpoint, "ipc://", 6)) fg_sup_cleanup_set_ctl(s->cleanup, s->endpoint + 6);
    s->next_hb = now_ns() + MS(FG_HB_INTERVAL_MS);
    s->last_pump = now_ns();
    fg_debug("run %s: control socket %s", s->run_id, s->endpoint);
    if ((st = hb_start(s)) != FG_OK) goto fail;

    lock(s);
    if (s->opts.manual) {
        fg_info("waiting for workers; start each by hand with --connect %s", s->endpoint);
    } else {
        for (int r = 0; r < FG_NROLES; r++)
            if (s->w[r].managed && !s->w[r].manual) fg_sup_spawn_role(s, r);
        for (int r = 0; r < FG_NROLES; r++)
            if (s->w[r].manual) fg_sup_announce_manual(s, r);
        /* a worker started by hand may take a while (a debugger): no limit;
         * a spawned one that does not come up is restarted, then given up */
        st = wait_ready(s, any_manual ? -1 : s->opts.ready_timeout_ms);
    }
    unlock(s);
    if (st != FG_OK) goto fail;
    *out = s;
    return FG_OK;

fail: {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", fg_err_msg());
    fg_super_destroy(&s);
    return fg_err_set(st, "%s", msg);
}
}

void fg_super_destroy(fg_super **sp) {
    if (!sp || !*sp) return;
    fg_super *s = *sp;
    hb_stop(s);   /* from here this thread alone touches s */
    if (s->router) {
        for (int r = 0; r < FG_NROLES; r++) {
            if (s->w[r].state == W_READY) fg_sup_send_plain(s, r, FG_MSG_SHUTDOWN);
            else fg_sup_kill_child(s, r);  /* still starting: nothing to shut down */
        }
        /* spawned workers: a grace period, then SIGKILL */
        uint64_t deadline = now_ns() + MS(SHUTDOWN_GRACE_MS);
        for (;;) {
            struct pollfd pf[FG_NROLES];
            int n = 0, alive = 0;
            for (int r = 0; r < FG_NROLES; r++) {
                worker *w = &s->w[r];
                if (!w->child) continue;
                int ws;
                pid_t p = waitpid(w->child, &ws, WNOHANG);
                if (p == w->child || (p < 0 && errno == ECHILD)) {
                    fg_sup_reap(s, r, ws);
                    continue;
                }
                alive++;
                if (w->pidfd >= 0) pf[n++] = (struct pollfd){w->pidfd, POLLIN, 0};
            }
            uint64_t t = now_ns();
            if (!alive || t >= deadline) break;
            int ms = (int)((deadline - t) / 1000000 + 1);
            poll(pf, (nfds_t)n, n < alive ? (ms < WAITPID_POLL_MS ? ms : WAITPID_POLL_MS) : ms);
        }
        for (int r = 0; r < FG_NROLES; r++)
            if (s->w[r].child) {
                fg_warn("the %s worker did not exit after SHUTDOWN: killing it", fg_role_name(r));
                fg_sup_kill_child(s, r);
            }
        zmq_close(s->router);
    }
    if (s->zctx) zmq_ctx_term(s->zctx);
    fg_shm_table_destroy(&s->segs);  /* unlinks: we created them */
    for (uint64_t q = s->lo; q < s->hi; q++) free(fg_sup_slot_get(s, q));
    free(s->slots);
    free(s->fifo);
    if (s->run_dir[0]) fg_sup_rundir_remove(s->run_dir);
    fg_sup_cleanup_destroy(&s->cleanup);
    pthread_cond_destroy(&s->hb_cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
    *sp = NULL;
}

static fg_status segment_new(fg_super *s, const char *segname, uint64_t data_bytes,
                              uint32_t *index) {
    if (s->nsegs >= FG_SHM_MAX_SEGMENTS)
        return fg_err_set(FG_EINPUT, "too many shm segments (max %d)", FG_SHM_MAX_SEGMENTS);
    fg_shm_seg *seg = NULL;
    fg_status st = fg_shm_create(s->run_id, segname, s->nsegs, data_bytes, &seg);
    if (st != FG_OK) return st;
    fg_sup_cleanup_add_shm(s->cleanup, fg_shm_name(seg));
    fg_shm_table_add(s->segs, seg);
    uint32_t idx = s->nsegs++;
    for (int r = 0; r < FG_NROLES; r++)
        if (s->w[r].state == W_READY) fg_sup_send_map(s, r, idx, seg);   /* others get it with READY */
    if (index) *index = idx;
    return FG_OK;
}

fg_status fg_super_segment_new(fg_super *s, const char *segname, uint64_t data_bytes,
                               uint32_t *index) {
    lock(s);
    fg_status st = segment_new(s, segname, data_bytes, index);
    unlock(s);
    return st;
}

/* No lock: the segment table changes only on the owner's thread. */
void *fg_super_ptr(fg_super *s, fg_shm_handle h) { return fg_shm_resolve(s->segs, h); }

static fg_status submit(fg_super *s, fg_role role, const fg_msg *m, void *user, uint64_t *seq) {
    if ((int)role < 0 || role >= FG_NROLES || !s->w[role].managed)
        return fg_err_set(FG_EINPUT, "submit: role %d is not managed by this run", (int)role);
    if (!fg_msg_is_command(m->type) || m->type == FG_MSG_SHM_MAP)
        return fg_err_set(FG_EINPUT, "submit: %s is not a command", fg_msg_type_name(m->type));
    if (s->w[role].state == W_FAILED)
        return fg_err_set(FG_ERUNTIME, "the %s worker is gone: %s", fg_role_name(role), s->w[role].gone);
    /* a dependency is an earlier command of the same worker: a worker knows
     * only its own commands, so one on another would be waited for by nobody */
    for (int i = 0; i < FG_MSG_MAX_AFTER; i++) {
        uint64_t a = m->after[i];
        if (!a) continue;
        if (a >= s->hi)
            return fg_err_set(FG_EINPUT, "submit: %s waits for command %" PRIu64 ", which was never submitted",
                              fg_msg_type_name(m->type), a);
        const cmd *d = fg_sup_slot_get(s, a);
        if (d && d->role != role)
            return fg_err_set(FG_EINPUT, "submit: %s for the %s worker waits for command %" PRIu64
                                         " of the %s worker (a dependency must be on the same worker)",
                              fg_msg_type_name(m->type), fg_role_name(role), a, fg_role_name(d->role));
    }
    uint8_t buf[FG_MSG_MAX_BYTES];
    size_t len;
    fg_msg probe = *m;
    probe.seq = s->hi;   /* the number it is about to get */
    if (fg_msg_encode(&probe, buf, sizeof buf, &len) != 0)
        return fg_err_set(FG_EINPUT, "submit: malformed %s (a count or string too long)",
                          fg_msg_type_name(m->type));
    cmd *c = fg_xmalloc(sizeof *c);
    memset(&c->done, 0, sizeof c->done);
    c->msg = *m;
    c->msg.flags &= FG_MSG_F_BARRIER | FG_MSG_STREAM_MASK;
    c->role = role;
    c->state = C_PENDING;
    c->internal = 0;
    c->epoch = 0;
    c->sends = 0;
    c->done.role = role;
    c->done.type = m->type;
    c->done.user = user;
    c->done.submit_ns = now_ns();
    uint64_t q = fg_sup_slot_add(s, c);
    c->done.seq = q;
    s->undone++;
    s->undelivered++;
    s->stats.submitted++;
    if (fg_sup_can_send(s, role)) fg_sup_send_cmd(s, c, 0);
    if (seq) *seq = q;
    return FG_OK;
}

fg_status fg_super_submit(fg_super *s, fg_role role, const fg_msg *m, void *user, uint64_t *seq) {
    lock(s);
    fg_status st = submit(s, role, m, user, seq);
    unlock(s);
    return st;
}

/* Hand every completed command to cb, in completion order. */
static int deliver(fg_super *s, fg_super_done_fn cb, void *ctx) {
    int n = 0;
    while (s->fifo_len) {
        uint64_t q = s->fifo[s->fifo_head];
        s->fifo_head = (s->fifo_head + 1) % s->fifo_cap;
        s->fifo_len--;
        cmd *c = fg_sup_slot_get(s, q);
        if (!c || c->state != C_DONE) continue;  /* taken by wait */
        fg_super_done d = c->done;
        fg_sup_slot_free(s, q);
        s->undelivered--;
        n++;
        if (cb) cb(ctx, &d);
    }
    return n;
}

static int poll_locked(fg_super *s, int timeout_ms, fg_super_done_fn cb, void *ctx) {
    FG_ASSERT(!s->in_restore);
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : now_ns() + MS(timeout_ms);
    for (;;) {
        uint64_t t = now_ns();
        int left = deadline == UINT64_MAX ? -1 : t >= deadline ? 0
                                                               : (int)((deadline - t) / 1000000 + 1);
        if (fg_sup_pump(s, s->fifo_len ? 0 : left) < 0) return -1;
        if (s->fifo_len || now_ns() >= deadline) break;
        if (deadline == UINT64_MAX && !s->undone) break;  /* nothing can complete */
    }
    return deliver(s, cb, ctx);
}

static int test_locked(fg_super *s, uint64_t seq) {
    if (fg_sup_pump(s, 0) < 0) return -1;
    cmd *c = fg_sup_slot_get(s, seq);
    if (!c || c->internal) return -1;
    return c->state == C_DONE;
}

static fg_status wait_locked(fg_super *s, uint64_t seq, int timeout_ms, fg_super_done *out) {
    FG_ASSERT(!s->in_restore);
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : now_ns() + MS(timeout_ms);
    for (;;) {
        cmd *c = fg_sup_slot_get(s, seq);
        if (!c || c->internal)
            return fg_err_set(FG_EINPUT, "wait: no command %" PRIu64 " (already taken?)", seq);
        if (c->state == C_DONE) {
            fg_super_done d = c->done;
            fg_sup_slot_free(s, seq);  /* its fifo entry is skipped by deliver */
            s->undelivered--;
            if (out) *out = d;
            if (d.status)
                return fg_err_set(FG_ERUNTIME, "%s seq %" PRIu64 " on the %s worker failed: %s",
                                  fg_msg_type_name(d.type), seq, fg_role_name(d.role), d.error);
            return FG_OK;
        }
        uint64_t t = now_ns();
        if (t >= deadline)
            return fg_err_set(FG_ERUNTIME, "wait: command %" PRIu64 " not done after %d ms", seq,
                              timeout_ms);
        int left = deadline == UINT64_MAX ? -1 : (int)((deadline - t) / 1000000 + 1);
        if (fg_sup_pump(s, left) < 0) return FG_ERUNTIME;
    }
}

static fg_status wait_all_locked(fg_super *s, int timeout_ms) {
    FG_ASSERT(!s->in_restore);
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : now_ns() + MS(timeout_ms);
    while (s->undone) {
        uint64_t t = now_ns();
        if (t >= deadline)
            return fg_err_set(FG_ERUNTIME, "%zu command(s) not done after %d ms", s->undone,
                              timeout_ms);
        int left = deadline == UINT64_MAX ? -1 : (int)((deadline - t) / 1000000 + 1);
        if (fg_sup_pump(s, left) < 0) return FG_ERUNTIME;
    }
    for (size_t i = 0; i < s->fifo_len; i++) {
        cmd *c = fg_sup_slot_get(s, s->fifo[(s->fifo_head + i) % s->fifo_cap]);
        if (c && c->state == C_DONE && c->done.status)
            return fg_err_set(FG_ERUNTIME, "%s seq %" PRIu64 " on the %s worker failed: %s",
                              fg_msg_type_name(c->done.type), c->done.seq,
                              fg_role_name(c->done.role), c->done.error);
    }
    return FG_OK;
}

int fg_super_poll(fg_super *s, int timeout_ms, fg_super_done_fn cb, void *ctx) {
    lock(s);
    int r = poll_locked(s, timeout_ms, cb, ctx);
    unlock(s);
    return r;
}

int fg_super_test(fg_super *s, uint64_t seq) {
    lock(s);
    int r = test_locked(s, seq);
    unlock(s);
    return r;
}

fg_status fg_super_wait(fg_super *s, uint64_t seq, int timeout_ms, fg_super_done *out) {
    lock(s);
    fg_status r = wait_locked(s, seq, timeout_ms, out);
    unlock(s);
    return r;
}

fg_status fg_super_wait_all(fg_super *s, int timeout_ms) {
    lock(s);
    fg_status r = wait_all_locked(s, timeout_ms);
    unlock(s);
    return r;
}

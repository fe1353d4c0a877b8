/* fg_super_start.c - creating a run and destroying it (fg_super.h): the
 * sweep of dead runs, the run directory, the control socket, the heartbeat
 * thread, spawning workers or waiting for hand-started ones; at the end
 * SHUTDOWN, a grace period, SIGKILL, and nothing left behind. Also the
 * workers' command lines, as spawned or as printed for a start by hand. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "fg_super_int.h"

#define now_ns fg_sup_now_ns
#define lock fg_sup_lock
#define unlock fg_sup_unlock

#define IPC_SCHEME "ipc://"
#define TCP_ANY_HOST "tcp://*:"
#define SUN_PATH_MAX sizeof(((struct sockaddr_un *)0)->sun_path)   /* a Unix socket's path, NUL included */
#define INITIAL_WINDOW 1024   /* commands in flight before the window first grows (a power of two) */

/* ---- worker command lines --------------------------------------------- */

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

/* ---- waiting for READY ------------------------------------------------ */

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

/* ---- creating a run --------------------------------------------------- */

/* The options with their defaults filled in, the workers' roles, and the
 * empty window. */
static fg_super *alloc_super(const fg_super_opts *opts) {
    fg_super *s = fg_xcalloc(1, sizeof *s);
    fg_super_opts none = {0};
    s->opts = opts ? *opts : none;
    if (!s->opts.roles) s->opts.roles = (1u << FG_NROLES) - 1;
    if (s->opts.ready_timeout_ms <= 0) s->opts.ready_timeout_ms = DEFAULT_READY_TIMEOUT_MS;
    if (s->opts.max_restarts <= 0) s->opts.max_restarts = DEFAULT_MAX_RESTARTS;
    if (s->opts.max_deaths <= 0) s->opts.max_deaths = DEFAULT_MAX_DEATHS;
    if (!s->opts.cmd_timeout_ms) s->opts.cmd_timeout_ms = FG_SUPER_CMD_TIMEOUT_MS;
    for (int r = 0; r < FG_NROLES; r++) {
        worker *w = &s->w[r];
        w->managed = (s->opts.roles >> r) & 1;
        w->manual = w->managed && (s->opts.manual || ((s->opts.attach >> r) & 1));
        w->pidfd = -1;
    }
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&s->mu, &ma);
    pthread_mutexattr_destroy(&ma);
    pthread_cond_init(&s->hb_cv, NULL);
    s->cap = INITIAL_WINDOW;
    s->slots = fg_xcalloc(s->cap, sizeof *s->slots);
    s->lo = s->hi = 1;  /* seq 0 means "not a command" */
    s->segs = fg_shm_table_new();
    return s;
}

/* Each managed role's program; one started by hand is only printed, so
 * its bare name will do where it is not found. */
static fg_status find_programs(fg_super *s) {
    for (int r = 0; r < FG_NROLES; r++) {
        worker *w = &s->w[r];
        if (!w->managed) continue;
        fg_status st = fg_sup_worker_path(s->opts.worker_path[r], s->opts.worker_dir, fg_sup_program(r),
                                          w->path, sizeof w->path);
        if (st != FG_OK && !w->manual) return st;
        if (st != FG_OK) snprintf(w->path, sizeof w->path, "%s", fg_sup_program(r));
    }
    return FG_OK;
}

/* The control socket's address: ipc://<rundir>/ctl unless one is given; a
 * tcp wildcard host means loopback (only an address named on purpose
 * listens beyond this machine). */
static fg_status bind_endpoint(const fg_super *s, char *ep, size_t cap) {
    const char *given = s->opts.endpoint;
    if (!given) {
        int n = snprintf(ep, cap, IPC_SCHEME "%s/ctl", s->run_dir);
        if ((size_t)n - strlen(IPC_SCHEME) >= SUN_PATH_MAX)
            return fg_err_set(FG_ERUNTIME, "control socket path %s is too long for a Unix socket "
                              "(HINT: set XDG_RUNTIME_DIR to a short directory)", ep + strlen(IPC_SCHEME));
        return FG_OK;
    }
    if (!strncmp(given, TCP_ANY_HOST, strlen(TCP_ANY_HOST))) {
        snprintf(ep, cap, "tcp://127.0.0.1:%s", given + strlen(TCP_ANY_HOST));
        return FG_OK;
    }
    snprintf(ep, cap, "%s", given);
    return FG_OK;
}

/* The ROUTER, bound. Routing ids are the workers' own; one that connects
 * again under its id takes its own place back (handover). */
static fg_status open_socket(fg_super *s) {
    char bind_ep[FG_SUP_PATH_MAX + 16];
    fg_status st = bind_endpoint(s, bind_ep, sizeof bind_ep);
    if (st != FG_OK) return st;
    s->zctx = zmq_ctx_new();
    s->router = zmq_socket(s->zctx, ZMQ_ROUTER);
    int zero = 0, one = 1, uid = (int)geteuid();
    zmq_setsockopt(s->router, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s->router, ZMQ_SNDHWM, &zero, sizeof zero);
    zmq_setsockopt(s->router, ZMQ_RCVHWM, &zero, sizeof zero);
    zmq_setsockopt(s->router, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    zmq_setsockopt(s->router, ZMQ_ROUTER_HANDOVER, &one, sizeof one);
    /* ipc: a peer of another user is refused when it connects (SO_PEERCRED),
     * before it could take a role; the run directory's 0700 is the first
     * fence, this one holds against root and a loosened mode */
    if (!strncmp(bind_ep, IPC_SCHEME, strlen(IPC_SCHEME)) &&
        zmq_setsockopt(s->router, ZMQ_IPC_FILTER_UID, &uid, sizeof uid) != 0)
        return fg_err_set(FG_ERUNTIME, "the control socket cannot check its peers' user id "
                          "(ZMQ_IPC_FILTER_UID: %s)", zmq_strerror(zmq_errno()));
    if (zmq_bind(s->router, bind_ep) != 0)
        return fg_err_set(FG_ERUNTIME, "cannot bind the control socket %s: %s%s", bind_ep,
                          zmq_strerror(zmq_errno()),
                          s->opts.endpoint ? " (HINT: use ipc://PATH or tcp://127.0.0.1:PORT; "
                                             "port * picks a free one)" : "");
    size_t len = sizeof s->endpoint;
    if (zmq_getsockopt(s->router, ZMQ_LAST_ENDPOINT, s->endpoint, &len) != 0)
        snprintf(s->endpoint, sizeof s->endpoint, "%s", bind_ep);
    if (!strncmp(s->endpoint, IPC_SCHEME, strlen(IPC_SCHEME)))
        fg_sup_cleanup_set_ctl(s->cleanup, s->endpoint + strlen(IPC_SCHEME));
    return FG_OK;
}

/* Spawn the spawned roles, print the hand-started ones' command lines, and
 * wait for every READY: a worker started by hand may take a while (a
 * debugger), so without limit; a spawned one that does not come up is
 * restarted, then given up. */
static fg_status start_workers(fg_super *s) {
    lock(s);
    fg_status st = FG_OK;
    if (s->opts.manual) {
        fg_info("waiting for workers; start each by hand with --connect %s", s->endpoint);
    } else {
        int any_manual = 0;
        for (int r = 0; r < FG_NROLES; r++)
            if (s->w[r].managed && !s->w[r].manual) fg_sup_spawn_role(s, r);
        for (int r = 0; r < FG_NROLES; r++)
            if (s->w[r].manual) fg_sup_announce_manual(s, r), any_manual = 1;
        st = wait_ready(s, any_manual ? -1 : s->opts.ready_timeout_ms);
    }
    unlock(s);
    return st;
}

fg_status fg_super_new(const fg_super_opts *opts, fg_super **out) {
    *out = NULL;
    fg_super *s = alloc_super(opts);
    fg_status st = find_programs(s);
    if (st != FG_OK) goto fail;
    fg_shm_sweep();
    fg_sup_rundir_sweep();
    if ((st = fg_shm_run_id_new(s->run_id)) != FG_OK) goto fail;
    if ((st = fg_sup_rundir_make(s->run_id, s->run_dir, sizeof s->run_dir)) != FG_OK) goto fail;
    s->cleanup = fg_sup_cleanup_new(s->run_dir, !s->opts.no_signal_handlers);
    if ((st = open_socket(s)) != FG_OK) goto fail;
    s->next_hb = now_ns() + MS(FG_HB_INTERVAL_MS);
    s->last_pump = now_ns();
    fg_debug("run %s: control socket %s", s->run_id, s->endpoint);
    if ((st = hb_start(s)) != FG_OK) goto fail;
    if ((st = start_workers(s)) != FG_OK) goto fail;
    *out = s;
    return FG_OK;

fail: {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", fg_err_msg());
    fg_super_destroy(&s);
    return fg_err_set(st, "%s", msg);
}
}

/* ---- destroying a run ------------------------------------------------- */

/* Spawned workers told to go: a grace period for them to exit, then
 * SIGKILL. */
static void reap_workers(fg_super *s) {
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
        reap_workers(s);
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

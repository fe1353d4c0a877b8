/* fg_worker_loop.c - the worker side of the protocol, shared by the three
 * worker programs: flag parsing, the DEALER socket, READY, heartbeats both
 * ways, commands in and DONE/ERROR replies out, on the I/O thread (the
 * caller of fg_worker_main). The jobs and their executor threads are
 * fg_worker_exec.c's (fg_worker_int.h). */
#include "fg_worker_int.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <zmq.h>

#define now_ns fg_wk_now_ns

/* ---- handler helpers -------------------------------------------------- */

void *fg_worker_ptr(fg_worker *w, fg_shm_handle h) {
    if (h.segment == FG_SEG_DEVICE) {   /* the gpu worker's backend resolves these, not the loop */
        fg_err_set(FG_EINPUT, "a device handle where shared memory is wanted");
        return NULL;
    }
    return fg_shm_resolve(w->shm, h);
}

void fg_worker_set_info(fg_worker *w, const char *info) { snprintf(w->info, sizeof w->info, "%s", info); }
const char *fg_worker_offload_dir(const fg_worker *w) { return w->offload_dir; }
void fg_worker_set_ctx(fg_worker *w, void *ctx) { w->ctx = ctx; }
void *fg_worker_ctx(const fg_worker *w) { return w->ctx; }

/* ---- replies ---------------------------------------------------------- */

static void send_error(void *sock, uint64_t seq, uint32_t flags, int32_t code, const char *text) {
    fg_msg r;
    fg_msg_init(&r, FG_MSG_ERROR);
    r.seq = seq;
    r.flags = flags;  /* echo: carries the epoch back */
    r.u.error.code = code;
    snprintf(r.u.error.text, sizeof r.u.error.text, "%s", text);
    if (fg_msg_send(sock, NULL, &r, 0) != 0)
        fg_warn("sending ERROR for seq %llu failed: %s", (unsigned long long)seq,
                zmq_strerror(zmq_errno()));
}

static void send_finished(fg_worker *w, void *sock) {
    job *j = fg_wk_take_finished(w);
    while (j) {
        job *next = j->next;
        if (j->code) {
            char what[160];
            fg_msg_describe(&j->cmd, what, sizeof what);
            fg_debug("%s failed: %s", what, j->err);
            send_error(sock, j->cmd.seq, j->cmd.flags, j->code, j->err);
        } else {
            fg_msg r;
            fg_msg_init(&r, FG_MSG_DONE);
            r.seq = j->cmd.seq;
            r.flags = j->cmd.flags;
            r.u.done.start_ns = j->start_ns;
            r.u.done.end_ns = j->end_ns;
            r.u.done.busy_ns = atomic_load(&w->busy_ns);
            if ((j->fault ? fg_fault_send(sock, NULL, &r, j->fault) : fg_msg_send(sock, NULL, &r, 0)) != 0)
                fg_warn("sending DONE for seq %llu failed: %s", (unsigned long long)r.seq,
                        zmq_strerror(zmq_errno()));
        }
        free(j);
        j = next;
    }
}

/* ---- commands in ------------------------------------------------------ */

static const fg_worker_op *find_op(const fg_worker_op *ops, size_t n, uint32_t op) {
    for (size_t i = 0; i < n; i++)
        if (ops[i].op == op) return &ops[i];
    return NULL;
}

/* Queue a command, or answer ERROR at once if nobody here can run it. */
static void accept_command(fg_worker *w, void *sock, const fg_msg *m) {
    const fg_worker_def *d = w->def;
    fg_fault_kind fault = fg_fault_at(fg_role_name(d->role), ++w->received);
    if (fault == FG_FAULT_CRASH) abort();
    if (fault == FG_FAULT_STOP) raise(SIGSTOP);   /* every thread stops: alive and silent */
    fg_worker_fn fn = NULL;
    char why[128] = "";
    if (m->type == FG_MSG_COMPUTE || m->type == FG_MSG_CPU_ATTN) {
        const fg_worker_op *op = m->type == FG_MSG_COMPUTE
                                     ? find_op(d->compute_ops, d->n_compute_ops, m->u.compute.op)
                                     : find_op(d->attn_ops, d->n_attn_ops, m->u.compute.op);
        if (op) fn = op->fn;
        else snprintf(why, sizeof why, "unknown op %u for %s on the %s worker", m->u.compute.op,
                      fg_msg_type_name(m->type), fg_role_name(d->role));
    } else if (m->type != FG_MSG_SHM_MAP) {
        fn = d->handlers[m->type];
        if (!fn) snprintf(why, sizeof why, "the %s worker does not handle %s",
                          fg_role_name(d->role), fg_msg_type_name(m->type));
    }
    if (why[0]) {
        fg_debug("seq %llu: %s", (unsigned long long)m->seq, why);
        send_error(sock, m->seq, m->flags, FG_MSG_EUNSUPPORTED, why);
        return;
    }
    job *j = fg_xcalloc(1, sizeof *j);
    j->cmd = *m;
    j->fn = fn;
    j->exclusive = m->type == FG_MSG_SHM_MAP || (m->flags & FG_MSG_F_BARRIER);
    j->stream = FG_MSG_STREAM(m->flags);
    j->fault = fault == FG_FAULT_GARBLE || fault == FG_FAULT_TRUNCATE || fault == FG_FAULT_HANG ? fault
                                                                                                : FG_FAULT_NONE;
    fg_wk_enqueue(w, j);
}

/* ---- the loop --------------------------------------------------------- */

static void usage(const fg_worker_def *d, FILE *f) {
    fprintf(f,
            "usage: %s --connect ENDPOINT [--offload-dir DIR]\n"
            "       %s --profile [--json]\n\n"
            "%s\n\n"
            "The coordinator (flexgen) normally starts this program. To attach one by hand,\n"
            "e.g. under a debugger, give the endpoint the coordinator printed:\n"
            "  %s --connect ipc:///tmp/flexgen-UID/run-ID/ctl\n\n"
            "options:\n"
            "  --connect ENDPOINT  the coordinator's control socket (ipc:// or tcp://)\n"
            "  --offload-dir DIR   base directory for files named by a relative path or id\n"
            "  --profile           measure this tier alone and print its profile%s\n"
            "%s"
            "  --help              this text\n\n"
            "environment: FLEXGEN_LOG=debug|info|warn|error\n",
            d->program, d->program, d->summary, d->program, d->profile ? ": a summary,\n                      or one JSON object with --json" : " (not yet)",
            d->options_help ? d->options_help : "");
}

static int parse_args(fg_worker *w, int argc, char **argv) {
    const fg_worker_def *d = w->def;
    int used;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--json")) {
            fprintf(stderr, "%s: --json goes with --profile\n", d->program);
            return 2;
        } else if (!strcmp(a, "--connect") && val) {
            w->endpoint = val;
            i++;
        } else if (!strcmp(a, "--offload-dir") && val) {
            w->offload_dir = val;
            i++;
        } else if (!strcmp(a, "--protocol-version") && val) {
            /* hidden: speak another protocol version, to test the refusal */
            char *end;
            long v = strtol(val, &end, 10);
            if (*end || v < 0 || v > 65535) {
                fprintf(stderr, "%s: bad --protocol-version '%s'\n", d->program, val);
                return 2;
            }
            fg_msg_version = (uint16_t)v;
            i++;
        } else if (d->option && (used = d->option(a, val)) != 0) {
            if (used < 0) return 2;
            i += used - 1;
        } else {
            fprintf(stderr, "%s: unknown or incomplete option '%s'\n\n", d->program, a);
            usage(d, stderr);
            return 2;
        }
    }
    if (!w->endpoint) {
        fprintf(stderr, "%s: --connect ENDPOINT is required\n"
                        "HINT: the coordinator starts workers itself; to attach one by hand, "
                        "pass the endpoint it printed\n", d->program);
        return 2;
    }
    return 0;
}

static void send_ready(fg_worker *w, void *sock) {
    fg_msg r;
    fg_msg_init(&r, FG_MSG_READY);
    r.u.ready.role = (uint32_t)w->def->role;
    r.u.ready.proto_version = fg_msg_version;
    r.u.ready.pid = (uint32_t)getpid();
    r.u.ready.threads = (uint32_t)w->nthreads;
    r.u.ready.caps = w->def->caps;
    snprintf(r.u.ready.info, sizeof r.u.ready.info, "%s", w->info);
    fg_msg_send(sock, NULL, &r, 0);
}

/* Returns the exit status. */
static int serve(fg_worker *w, void *sock) {
    const uint64_t interval = (uint64_t)FG_HB_INTERVAL_MS * 1000000ull;
    const uint64_t give_up = (uint64_t)FG_HB_WORKER_LIVENESS * interval;
    uint64_t last_heard = now_ns(), next_hb = last_heard + interval;
    int heard_once = 0;
    send_ready(w, sock);
    for (;;) {
        uint64_t t = now_ns();
        long timeout_ms = next_hb > t ? (long)((next_hb - t) / 1000000ull) + 1 : 0;
        zmq_pollitem_t items[2] = {{sock, 0, ZMQ_POLLIN, 0}, {NULL, w->evfd, ZMQ_POLLIN, 0}};
        int rc = zmq_poll(items, 2, timeout_ms);
        if (rc < 0 && zmq_errno() != EINTR) {
            fg_log(FG_LOG_ERROR, "zmq_poll: %s", zmq_strerror(zmq_errno()));
            return 1;
        }
        if (items[1].revents & ZMQ_POLLIN) {
            uint64_t cnt;
            ssize_t n = read(w->evfd, &cnt, sizeof cnt);
            (void)n;
            send_finished(w, sock);
        }
        while (items[0].revents & ZMQ_POLLIN) {
            fg_msg m;
            rc = fg_msg_recv(sock, NULL, 0, &m, ZMQ_DONTWAIT);
            if (rc == -1) break;
            if (rc == -2) {
                if (m.version && m.version != fg_msg_version) {
                    fg_log(FG_LOG_ERROR, "refused: the coordinator at %s speaks protocol version "
                           "%u, this worker speaks %u (HINT: run the workers built with this "
                           "flexgen)", w->endpoint, m.version, fg_msg_version);
                    return 2;
                }
                /* a command may be lost in it: say so, and the coordinator
                 * restarts this worker and re-issues what it had in flight */
                fg_warn("dropped a malformed message from the coordinator");
                send_error(sock, 0, 0, FG_MSG_EBADCMD, "a message from the coordinator did not "
                           "decode (a command may be lost)");
                continue;
            }
            last_heard = now_ns();
            if (!heard_once && m.type != FG_MSG_ERROR) {   /* an ERROR here may be a refusal */
                heard_once = 1;
                fg_info("attached to the coordinator at %s", w->endpoint);
            }
            if (fg_msg_is_command(m.type)) {
                accept_command(w, sock, &m);
            } else if (m.type == FG_MSG_SHUTDOWN) {
                fg_info("shutdown requested");
                return 0;
            } else if (m.type == FG_MSG_ERROR) {
                fg_log(FG_LOG_ERROR, "refused by the coordinator: %s", m.u.error.text);
                if (m.u.error.code == FG_MSG_EVERSION || m.u.error.code == FG_MSG_EROLE) return 2;
            } else if (m.type != FG_MSG_HEARTBEAT) {
                fg_warn("ignored unexpected %s from the coordinator", fg_msg_type_name(m.type));
            }
        }
        t = now_ns();
        if (t >= next_hb) {
            fg_msg hb;
            fg_msg_init(&hb, FG_MSG_HEARTBEAT);
            fg_msg_send(sock, NULL, &hb, 0);
            next_hb = t + interval;
        }
        if (t - last_heard > give_up) {
            fg_warn("%s from the coordinator at %s for %d s: exiting",
                    heard_once ? "silence" : "no answer", w->endpoint,
                    FG_HB_WORKER_LIVENESS * FG_HB_INTERVAL_MS / 1000);
            return 0;
        }
    }
}

int fg_worker_profile_print(json_t *j, int as_json, void (*summary)(const json_t *j)) {
    if (as_json) {
        char *s = json_dumps(j, JSON_COMPACT);
        printf("%s\n", s);
        free(s);
    } else {
        summary(j);
    }
    json_decref(j);
    return fflush(stdout) == 0 ? 0 : 1;
}

/* The DEALER, connected under a routing id of this process's own
 * ("gpu.1234.5f3a9c01"): the coordinator tells a second worker for a role
 * from the one that holds it. NULL after logging why. */
static void *connect_socket(fg_worker *w, void *zctx) {
    char id[64];
    snprintf(id, sizeof id, "%s.%d.%08x", fg_role_name(w->def->role), (int)getpid(),
             (unsigned)(now_ns() ^ (now_ns() >> 32)));
    void *sock = zmq_socket(zctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(sock, ZMQ_SNDHWM, &zero, sizeof zero);
    zmq_setsockopt(sock, ZMQ_RCVHWM, &zero, sizeof zero);
    zmq_setsockopt(sock, ZMQ_ROUTING_ID, id, strlen(id));
    if (zmq_connect(sock, w->endpoint) != 0) {
        fg_log(FG_LOG_ERROR, "cannot connect to '%s': %s (HINT: expected ipc://PATH or "
               "tcp://HOST:PORT as printed by the coordinator)", w->endpoint,
               zmq_strerror(zmq_errno()));
        zmq_close(sock);
        return NULL;
    }
    return sock;
}

/* --help anywhere wins; --profile is a program mode of its own, with flags
 * the loop does not know. Returns the exit status, or -1 to serve. */
static int program_mode(const fg_worker_def *def, int argc, char **argv) {
    int profile = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(def, stdout);
            return 0;
        }
        profile |= !strcmp(argv[i], "--profile");
    }
    if (!profile) return -1;
    if (def->profile) return def->profile(argc, argv);
    fprintf(stderr, "%s: --profile is not implemented yet\n", def->program);
    return 2;
}

static void worker_free(fg_worker *w) {
    fg_wk_free_jobs(w);
    if (w->def->fini) w->def->fini(w);
    fg_shm_table_destroy(&w->shm);
    if (w->evfd >= 0) close(w->evfd);
    free(w->threads);
    free(w->running_seq);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

int fg_worker_main(const fg_worker_def *def, int argc, char **argv) {
    static char role_tag[32];
    snprintf(role_tag, sizeof role_tag, "%s-worker", fg_role_name(def->role));
    fg_log_init(role_tag);
    signal(SIGPIPE, SIG_IGN);
    int rc = program_mode(def, argc, argv);
    if (rc >= 0) return rc;

    fg_worker *w = fg_xcalloc(1, sizeof *w);
    w->def = def;
    w->offload_dir = ".";
    fg_worker_set_info(w, def->info ? def->info : "");
    if ((rc = parse_args(w, argc, argv)) != 0) {
        free(w);
        return rc;
    }
    w->shm = fg_shm_table_new();
    w->nthreads = def->threads > 0 ? def->threads : 1;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (w->evfd < 0) {
        fg_log(FG_LOG_ERROR, "eventfd: %s", strerror(errno));
        return 1;
    }
    if (def->init && def->init(w) != FG_OK) {
        fg_log(FG_LOG_ERROR, "%s", fg_err_msg());
        return 1;
    }
    void *zctx = zmq_ctx_new();
    void *sock = connect_socket(w, zctx);
    if (!sock) {
        zmq_ctx_term(zctx);
        return 2;
    }
    if (fg_wk_start_executors(w) != FG_OK) {
        fg_log(FG_LOG_ERROR, "%s", fg_err_msg());
        rc = 1;
    } else {
        fg_debug("connecting to %s with %d executor thread(s)", w->endpoint, w->nthreads);
        rc = serve(w, sock);
    }
    if (fg_wk_stop_executors(w)) {
        /* an executor is inside a command that does not return: nothing
         * may be freed under it, and a stuck worker exits abnormally */
        fflush(NULL);
        _exit(1);
    }
    zmq_close(sock);
    zmq_ctx_term(zctx);
    worker_free(w);
    return rc;
}

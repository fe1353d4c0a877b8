/* fg_super.c - the supervisor: the ROUTER socket, the table of commands in
 * flight, READY handshakes, heartbeats, death detection, restart, restore
 * and re-issue, and delivery of completions (see fg_super.h for the
 * contract). Run directories, spawning and signal cleanup live in
 * fg_super_proc.c.
 *
 * Commands live in a window indexed by sequence number: slots[seq & mask]
 * for lo <= seq < hi. Each is PENDING (not sent to the current worker of its
 * role), SENT (with that worker's epoch) or DONE (waiting for poll or wait
 * to take it). A worker's death turns its SENT commands back to PENDING; its
 * successor's READY sends them again. */
#include "fg_super.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "fg_super_proc.h"

#define DEFAULT_READY_TIMEOUT_MS 30000
#define DEFAULT_MAX_RESTARTS 5
#define SHUTDOWN_GRACE_MS 5000   /* SHUTDOWN to SIGKILL at destroy */
#define WAITPID_POLL_MS 100      /* child checks where there is no pidfd */

typedef enum { C_PENDING, C_SENT, C_DONE } cmd_state;

typedef struct {
    fg_msg msg;          /* seq set; flags: the caller's BARRIER and stream only */
    fg_role role;
    cmd_state state;
    int internal;        /* an SHM_MAP of the supervisor's: never delivered */
    uint16_t epoch;      /* epoch of the worker it was last sent to */
    uint32_t sends;
    fg_super_done done;
} cmd;

typedef enum { W_ABSENT, W_STARTING, W_READY, W_FAILED } wstate;

typedef struct {
    int managed;
    wstate state;
    char path[FG_SUP_PATH_MAX];  /* program, when spawning */
    pid_t child;                 /* our child, 0 if none */
    int pidfd;                   /* -1 if none */
    uint64_t ready_deadline;     /* W_STARTING */
    pid_t remote_pid;            /* from READY; kept after a death, for revive */
    uint64_t last_seen;
    uint16_t epoch;              /* bumped on every READY */
    uint32_t readies;
    uint32_t deaths_in_row;      /* deaths with no reply in between */
    char last_death[160];
} worker;

struct fg_super {
    fg_super_opts opts;
    char run_id[FG_SHM_RUNID_LEN + 1];
    char run_dir[FG_SUP_PATH_MAX];
    char endpoint[FG_SUP_PATH_MAX + 16];
    void *zctx, *router;
    worker w[FG_NROLES];
    fg_shm_table *segs;
    uint32_t nsegs;
    fg_sup_cleanup *cleanup;

    cmd **slots;                 /* the window */
    uint64_t cap, lo, hi;
    uint64_t *fifo;              /* seqs of DONE user commands, in order */
    size_t fifo_cap, fifo_head, fifo_len;
    size_t undone;               /* user commands not DONE */
    size_t undelivered;          /* user commands not yet taken */
    uint64_t next_hb;
    int in_restore;
    fg_super_stats stats;
};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define MS(x) ((uint64_t)(x) * 1000000ull)

static const char *program_of(int role) {
    static const char *const names[FG_NROLES] = {"flexgen-gpu-worker", "flexgen-cpu-worker",
                                                 "flexgen-disk-worker"};
    return names[role];
}

/* ---- the window ------------------------------------------------------- */

static cmd *slot_get(const fg_super *s, uint64_t seq) {
    if (seq < s->lo || seq >= s->hi) return NULL;
    return s->slots[seq & (s->cap - 1)];
}

static uint64_t slot_add(fg_super *s, cmd *c) {
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

static void slot_free(fg_super *s, uint64_t seq) {
    cmd **p = &s->slots[seq & (s->cap - 1)];
    free(*p);
    *p = NULL;
    while (s->lo < s->hi && !s->slots[s->lo & (s->cap - 1)]) s->lo++;
}

static void fifo_push(fg_super *s, uint64_t seq) {
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

/* ---- sending ---------------------------------------------------------- */

static void send_plain(fg_super *s, int role, fg_msg_type type) {
    fg_msg m;
    fg_msg_init(&m, type);
    fg_msg_send(s->router, fg_role_name(role), &m, ZMQ_DONTWAIT);
}

static void send_cmd(fg_super *s, cmd *c, int extra_flags) {
    worker *w = &s->w[c->role];
    uint32_t user = c->msg.flags & (FG_MSG_F_BARRIER | FG_MSG_STREAM_MASK);
    c->msg.flags = user | (uint32_t)extra_flags | (c->sends ? FG_MSG_F_REISSUE : 0) |
                   (uint32_t)w->epoch << FG_MSG_EPOCH_SHIFT;
    int rc = fg_msg_send(s->router, fg_role_name(c->role), &c->msg, ZMQ_DONTWAIT);
    c->msg.flags = user;
    if (rc != 0) {
        /* EHOSTUNREACH: the connection is gone before we saw the death; the
         * command stays PENDING and goes to the successor */
        fg_debug("seq %" PRIu64 " to %s not sent: %s", c->msg.seq, fg_role_name(c->role),
                 zmq_strerror(zmq_errno()));
        return;
    }
    if (c->sends) {
        c->done.reissues++;
        if (!c->internal) s->stats.reissued++;
    }
    c->sends++;
    c->state = C_SENT;
    c->epoch = w->epoch;
}

/* ---- completion ------------------------------------------------------- */

static void complete(fg_super *s, cmd *c, int32_t status, const char *text, const fg_msg_done *t) {
    c->state = C_DONE;
    c->done.status = status;
    snprintf(c->done.error, sizeof c->done.error, "%s", text ? text : "");
    if (t) {
        c->done.start_ns = t->start_ns;
        c->done.end_ns = t->end_ns;
        c->done.busy_ns = t->busy_ns;
    }
    c->done.complete_ns = now_ns();
    if (c->internal) {
        if (status)
            fg_log(FG_LOG_ERROR, "the %s worker could not map %s: %s", fg_role_name(c->role),
                   c->msg.u.map.name, c->done.error);
        slot_free(s, c->msg.seq);
        return;
    }
    if (status) s->stats.failed++;
    else s->stats.completed++;
    s->undone--;
    fifo_push(s, c->msg.seq);
}

/* Fail everything the role still owes: its worker cannot be kept alive. */
static void give_up(fg_super *s, int role, const char *why) {
    worker *w = &s->w[role];
    w->state = W_FAILED;
    fg_log(FG_LOG_ERROR, "giving up on the %s worker: %s", fg_role_name(role), why);
    char text[FG_MSG_TEXT_MAX + 1];
    snprintf(text, sizeof text, "the %s worker is gone: %s", fg_role_name(role), why);
    for (uint64_t q = s->lo; q < s->hi; q++) {
        cmd *c = slot_get(s, q);
        if (!c || c->role != (fg_role)role || c->state == C_DONE) continue;
        if (c->internal) {
            s->slots[q & (s->cap - 1)] = NULL;
            free(c);
        } else {
            complete(s, c, FG_SUPER_EGAVEUP, text, NULL);
        }
    }
    while (s->lo < s->hi && !s->slots[s->lo & (s->cap - 1)]) s->lo++;
}

/* Turn the role's SENT commands back to PENDING (they go to its next
 * worker) and drop its segment maps (sent afresh on READY). Returns how
 * many commands the role owes. */
static size_t requeue(fg_super *s, int role) {
    size_t n = 0;
    for (uint64_t q = s->lo; q < s->hi; q++) {
        cmd *c = slot_get(s, q);
        if (!c || c->role != (fg_role)role || c->state == C_DONE) continue;
        if (c->internal) {
            s->slots[q & (s->cap - 1)] = NULL;
            free(c);
        } else {
            c->state = C_PENDING;
            n++;
        }
    }
    while (s->lo < s->hi && !s->slots[s->lo & (s->cap - 1)]) s->lo++;
    return n;
}

/* ---- worker lifecycle ------------------------------------------------- */

static void spawn(fg_super *s, int role) {
    worker *w = &s->w[role];
    char *argv[8];
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
    pid_t pid;
    int pidfd;
    if (fg_sup_spawn(argv, &pid, &pidfd) != FG_OK) {
        give_up(s, role, fg_err_msg());
        return;
    }
    w->child = pid;
    w->pidfd = pidfd;
    w->state = W_STARTING;
    w->ready_deadline = now_ns() + MS(s->opts.ready_timeout_ms);
    fg_sup_cleanup_set_pid(s->cleanup, role, pid);
    fg_debug("started %s (pid %d)", w->path, (int)pid);
}

static void reap(fg_super *s, int role, int wstatus) {
    worker *w = &s->w[role];
    fg_sup_describe_exit(wstatus, w->last_death, sizeof w->last_death);
    if (w->pidfd >= 0) close(w->pidfd);
    w->pidfd = -1;
    w->child = 0;
    fg_sup_cleanup_set_pid(s->cleanup, role, 0);
}

/* SIGKILL our child and collect it (a silent or hung worker). */
static void kill_child(fg_super *s, int role) {
    worker *w = &s->w[role];
    if (!w->child) return;
    kill(w->child, SIGKILL);
    int ws = 0;
    while (waitpid(w->child, &ws, 0) < 0 && errno == EINTR) {
    }
    char why[160];
    snprintf(why, sizeof why, "%s", w->last_death);
    reap(s, role, ws);
    snprintf(w->last_death, sizeof w->last_death, "%s", why);
}

/* The role's worker is gone (`why`). Its SENT commands become PENDING; a
 * spawned role is restarted, a manual one waited for. */
static void role_down(fg_super *s, int role, const char *why) {
    worker *w = &s->w[role];
    if (w->state == W_FAILED) return;
    int was_ready = w->state == W_READY;
    size_t requeued = requeue(s, role);
    w->state = W_ABSENT;
    s->stats.deaths[role]++;
    w->deaths_in_row++;
    fg_warn("the %s worker %s%s; %zu command(s) in flight will be re-issued", fg_role_name(role),
            why, was_ready ? "" : " before it was ready", requeued);
    if (s->opts.manual) {
        fg_info("waiting for a %s worker: %s --connect %s", fg_role_name(role), program_of(role),
                s->endpoint);
        return;
    }
    if (w->deaths_in_row > (uint32_t)s->opts.max_restarts) {
        char msg[256];
        snprintf(msg, sizeof msg, "it died %u times in a row without answering a command (last: "
                 "%s) (HINT: run %s by hand with --connect under a debugger, see its log above)",
                 w->deaths_in_row, why, program_of(role));
        give_up(s, role, msg);
        return;
    }
    s->stats.restarts[role]++;
    spawn(s, role);
}


/* SHM_MAP of segment idx to role's worker, as an internal command (re-sent
 * to a restarted worker like any other). */
static void send_map(fg_super *s, int role, uint32_t idx, const fg_shm_seg *seg) {
    cmd *c = fg_xcalloc(1, sizeof *c);
    fg_msg_init(&c->msg, FG_MSG_SHM_MAP);
    c->msg.u.map.segment = idx;
    c->msg.u.map.size = fg_shm_size(seg);
    snprintf(c->msg.u.map.name, sizeof c->msg.u.map.name, "%s", fg_shm_name(seg));
    c->role = (fg_role)role;
    c->internal = 1;
    slot_add(s, c);
    send_cmd(s, c, 0);
}
static void worker_ready(fg_super *s, int role, const fg_msg *m) {
    worker *w = &s->w[role];
    if (w->state == W_READY) {
        /* a second READY: a new worker took over the identity (restarted by
         * hand); what the old one had in flight goes to the new one */
        size_t n = requeue(s, role);
        fg_warn("a new %s worker (pid %u) replaces pid %d; %zu command(s) will be re-issued",
                fg_role_name(role), m->u.ready.pid, (int)w->remote_pid, n);
    }
    if (w->child && (pid_t)m->u.ready.pid != w->child) {
        /* ours would fight it for the identity: one worker per role */
        fg_warn("a %s worker started by hand (pid %u) takes the place of ours (pid %d)",
                fg_role_name(role), m->u.ready.pid, (int)w->child);
        kill_child(s, role);
    }
    w->state = W_READY;
    w->remote_pid = (pid_t)m->u.ready.pid;
    w->last_seen = now_ns();
    w->epoch++;
    w->readies++;
    send_plain(s, role, FG_MSG_HEARTBEAT);  /* tells the worker it was accepted */

    for (uint32_t i = 0; i < s->nsegs; i++) send_map(s, role, i, fg_shm_table_get(s->segs, i));

    uint64_t before = s->hi;
    if (w->readies > 1 && s->opts.restore) {
        s->in_restore = 1;
        fg_status st = s->opts.restore(s, (fg_role)role, s->opts.restore_ctx);
        s->in_restore = 0;
        if (st != FG_OK) {
            char msg[FG_MSG_TEXT_MAX];
            snprintf(msg, sizeof msg, "restoring its state failed: %s", fg_err_msg());
            give_up(s, role, msg);
            return;
        }
    }
    int barrier = s->hi != before ? FG_MSG_F_BARRIER : 0;  /* restore first */
    size_t resent = 0;
    for (uint64_t q = s->lo; q < s->hi; q++) {
        cmd *c = slot_get(s, q);
        if (c && c->role == (fg_role)role && c->state == C_PENDING && !c->internal) {
            send_cmd(s, c, resent == 0 ? barrier : 0);
            resent++;
        }
    }
    if (w->readies == 1)
        fg_info("%s worker ready: pid %u, %u thread(s), %s", fg_role_name(role), m->u.ready.pid,
                m->u.ready.threads, m->u.ready.info);
    else
        fg_info("%s worker ready again: pid %u; re-issued %zu command(s)", fg_role_name(role),
                m->u.ready.pid, resent);
}

/* A hand-started worker we declared dead talks again (a debugger paused it):
 * it kept its maps and state, so it only needs what it owes, again. */
static void revive(fg_super *s, int role) {
    worker *w = &s->w[role];
    w->state = W_READY;
    w->last_seen = now_ns();
    w->epoch++;
    size_t resent = 0;
    for (uint64_t q = s->lo; q < s->hi; q++) {
        cmd *c = slot_get(s, q);
        if (c && c->role == (fg_role)role && c->state == C_PENDING && !c->internal) {
            send_cmd(s, c, 0);
            resent++;
        }
    }
    fg_info("the %s worker (pid %d) is back; re-issued %zu command(s)", fg_role_name(role),
            (int)w->remote_pid, resent);
}

/* ---- receiving -------------------------------------------------------- */

static void refuse(fg_super *s, const char *id, int32_t code, const char *text) {
    s->stats.refused++;
    fg_msg r;
    fg_msg_init(&r, FG_MSG_ERROR);
    r.u.error.code = code;
    snprintf(r.u.error.text, sizeof r.u.error.text, "%s", text);
    fg_msg_send(s->router, id, &r, ZMQ_DONTWAIT);
}

static void on_reply(fg_super *s, int role, const fg_msg *m) {
    cmd *c = slot_get(s, m->seq);
    if (!c || c->state == C_DONE || c->role != (fg_role)role) {
        fg_debug("%s from %s for seq %" PRIu64 ": nothing waits for it", fg_msg_type_name(m->type),
                 fg_role_name(role), m->seq);
        return;
    }
    /* sent again to a successor: only the successor's answer counts */
    if (c->state == C_SENT && FG_MSG_EPOCH(m->flags) != c->epoch) return;
    s->w[role].deaths_in_row = 0;
    if (m->type == FG_MSG_DONE) complete(s, c, 0, NULL, &m->u.done);
    else complete(s, c, m->u.error.code ? m->u.error.code : FG_MSG_EIO, m->u.error.text, NULL);
}

static void on_message(fg_super *s, const char *id, int rc, const fg_msg *m) {
    int role = fg_role_from_name(id);
    if (rc == -2) {
        if (m->version && m->version != fg_msg_version) {
            fg_log(FG_LOG_ERROR, "refused a worker '%s': it speaks protocol version %u, this "
                   "coordinator speaks %u (HINT: use the flexgen-*-worker programs built with "
                   "this flexgen)", id, m->version, fg_msg_version);
            char text[160];
            snprintf(text, sizeof text, "protocol version mismatch: the coordinator speaks %u, "
                     "this worker speaks %u", fg_msg_version, m->version);
            refuse(s, id, FG_MSG_EVERSION, text);
        } else {
            fg_warn("dropped a malformed message from '%s'", id);
        }
        return;
    }
    if (role < 0 || !s->w[role].managed ||
        (m->type == FG_MSG_READY && m->u.ready.role != (uint32_t)role)) {
        if (m->type == FG_MSG_READY) {
            char text[200];
            snprintf(text, sizeof text, "role '%s' is not one this run uses (it uses:%s%s%s)", id,
                     s->w[0].managed ? " gpu" : "", s->w[1].managed ? " cpu" : "",
                     s->w[2].managed ? " disk" : "");
            fg_log(FG_LOG_ERROR, "refused a worker: %s", text);
            refuse(s, id, FG_MSG_EROLE, text);
        }
        return;
    }
    worker *w = &s->w[role];
    if (m->type == FG_MSG_READY) {
        if (m->u.ready.proto_version != fg_msg_version) {
            fg_log(FG_LOG_ERROR, "refused the %s worker: READY says protocol version %u, this "
                   "coordinator speaks %u", id, m->u.ready.proto_version, fg_msg_version);
            refuse(s, id, FG_MSG_EVERSION, "protocol version mismatch in READY");
            return;
        }
        worker_ready(s, role, m);
        return;
    }
    if (w->state != W_READY) {
        /* replies from a worker declared dead still count (they arrive after
         * its death was seen, or it was only paused) */
        if (m->type == FG_MSG_DONE || m->type == FG_MSG_ERROR) on_reply(s, role, m);
        if (s->opts.manual && w->state == W_ABSENT && w->readies > 0) revive(s, role);
        return;
    }
    w->last_seen = now_ns();
    switch (m->type) {
    case FG_MSG_HEARTBEAT:
        break;
    case FG_MSG_DONE:
    case FG_MSG_ERROR:
        if (m->seq) on_reply(s, role, m);
        else fg_warn("the %s worker reports: %s", id, m->u.error.text);
        break;
    default:
        fg_warn("ignored an unexpected %s from the %s worker", fg_msg_type_name(m->type), id);
    }
}

/* ---- the pump --------------------------------------------------------- */

static void check_children(fg_super *s, const short *revents) {
    for (int r = 0; r < FG_NROLES; r++) {
        worker *w = &s->w[r];
        if (!w->child) continue;
        if (w->pidfd >= 0 && !(revents[r] & ZMQ_POLLIN)) continue;
        int ws = 0;
        pid_t p = waitpid(w->child, &ws, WNOHANG);
        if (p == 0) continue;
        if (p < 0 && errno != ECHILD) continue;
        if (p < 0) ws = 0;  /* reaped elsewhere (SIGCHLD ignored): status unknown */
        reap(s, r, ws);
        char why[200];
        snprintf(why, sizeof why, "(pid %d) %s", (int)p, w->last_death);
        role_down(s, r, why);
    }
}

static void run_timers(fg_super *s, uint64_t t) {
    if (t >= s->next_hb) {
        for (int r = 0; r < FG_NROLES; r++)
            if (s->w[r].state == W_READY) send_plain(s, r, FG_MSG_HEARTBEAT);
        s->next_hb = t + MS(FG_HB_INTERVAL_MS);
    }
    for (int r = 0; r < FG_NROLES; r++) {
        worker *w = &s->w[r];
        char why[200];
        if (w->state == W_READY && t - w->last_seen > MS(FG_HB_LIVENESS * FG_HB_INTERVAL_MS)) {
            snprintf(why, sizeof why, "(pid %d) was silent for %.1f s: declared dead",
                     (int)w->remote_pid, (double)(t - w->last_seen) / 1e9);
            snprintf(w->last_death, sizeof w->last_death, "silent");
            kill_child(s, r);
            role_down(s, r, why);
        } else if (w->state == W_STARTING && t > w->ready_deadline) {
            snprintf(why, sizeof why, "(pid %d) did not say READY within %d ms", (int)w->child,
                     s->opts.ready_timeout_ms);
            snprintf(w->last_death, sizeof w->last_death, "no READY");
            kill_child(s, r);
            role_down(s, r, why);
        }
    }
}

static void drain(fg_super *s) {
    for (;;) {
        char id[64];
        fg_msg m;
        int r = fg_msg_recv(s->router, id, sizeof id, &m, ZMQ_DONTWAIT);
        if (r == -1) break;
        on_message(s, id, r, &m);
    }
}

/* One round: wait up to timeout_ms (or the next timer) for the socket or a
 * child, and handle what came. -1 on a socket failure. What is already
 * queued is read before any liveness check: a coordinator that did not poll
 * for a while must not declare its workers dead for its own silence. */
static int pump(fg_super *s, int timeout_ms) {
    drain(s);
    uint64_t t = now_ns();
    run_timers(s, t);
    uint64_t wake = s->next_hb;
    int no_pidfd = 0;
    for (int r = 0; r < FG_NROLES; r++) {
        worker *w = &s->w[r];
        if (w->state == W_READY) {
            uint64_t dl = w->last_seen + MS(FG_HB_LIVENESS * FG_HB_INTERVAL_MS) + 1;
            if (dl < wake) wake = dl;
        } else if (w->state == W_STARTING && w->ready_deadline + 1 < wake) {
            wake = w->ready_deadline + 1;
        }
        if (w->child && w->pidfd < 0) no_pidfd = 1;
    }
    long ms = wake > t ? (long)((wake - t + 999999) / 1000000) : 0;
    if (timeout_ms >= 0 && timeout_ms < ms) ms = timeout_ms;
    if (no_pidfd && ms > WAITPID_POLL_MS) ms = WAITPID_POLL_MS;

    zmq_pollitem_t items[1 + FG_NROLES];
    int role_at[1 + FG_NROLES];
    int n = 0;
    items[n++] = (zmq_pollitem_t){s->router, 0, ZMQ_POLLIN, 0};
    for (int r = 0; r < FG_NROLES; r++)
        if (s->w[r].child && s->w[r].pidfd >= 0) {
            role_at[n] = r;
            items[n++] = (zmq_pollitem_t){NULL, s->w[r].pidfd, ZMQ_POLLIN, 0};
        }
    int rc = zmq_poll(items, n, ms);
    if (rc < 0) {
        if (zmq_errno() == EINTR) return 0;
        fg_err_set(FG_ERUNTIME, "zmq_poll: %s", zmq_strerror(zmq_errno()));
        return -1;
    }
    if (items[0].revents & ZMQ_POLLIN) drain(s);
    short rev[FG_NROLES] = {0};
    for (int i = 1; i < n; i++) rev[role_at[i]] = items[i].revents;
    check_children(s, rev);
    run_timers(s, now_ns());
    return 0;
}

/* ---- public API ------------------------------------------------------- */

const char *fg_super_endpoint(const fg_super *s) { return s->endpoint; }
const char *fg_super_run_id(const fg_super *s) { return s->run_id; }
const char *fg_super_run_dir(const fg_super *s) { return s->run_dir; }
void fg_super_get_stats(const fg_super *s, fg_super_stats *st) { *st = s->stats; }
size_t fg_super_inflight(const fg_super *s) { return s->undelivered; }

pid_t fg_super_worker_pid(const fg_super *s, fg_role role) {
    if ((int)role < 0 || role >= FG_NROLES) return 0;
    return s->w[role].state == W_READY ? s->w[role].remote_pid : 0;
}

static int all_ready(const fg_super *s, char *why, size_t cap) {
    for (int r = 0; r < FG_NROLES; r++) {
        const worker *w = &s->w[r];
        if (!w->managed) continue;
        if (w->state == W_FAILED) {
            snprintf(why, cap, "the %s worker could not be started (%s)", fg_role_name(r),
                     w->last_death[0] ? w->last_death : "see the log above");
            return -1;
        }
        if (w->state != W_READY) return 0;
    }
    return 1;
}

fg_status fg_super_wait_ready(fg_super *s, int timeout_ms) {
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
        if (pump(s, left) < 0) return FG_ERUNTIME;
    }
}

fg_status fg_super_new(const fg_super_opts *opts, fg_super **out) {
    *out = NULL;
    fg_super *s = fg_xcalloc(1, sizeof *s);
    fg_super_opts none = {0};
    s->opts = opts ? *opts : none;
    if (!s->opts.roles) s->opts.roles = (1u << FG_NROLES) - 1;
    if (s->opts.ready_timeout_ms <= 0) s->opts.ready_timeout_ms = DEFAULT_READY_TIMEOUT_MS;
    if (s->opts.max_restarts <= 0) s->opts.max_restarts = DEFAULT_MAX_RESTARTS;
    for (int r = 0; r < FG_NROLES; r++) {
        s->w[r].managed = (s->opts.roles >> r) & 1;
        s->w[r].pidfd = -1;
    }
    s->cap = 1024;
    s->slots = fg_xcalloc(s->cap, sizeof *s->slots);
    s->lo = s->hi = 1;  /* seq 0 means "not a command" */
    s->segs = fg_shm_table_new();

    fg_status st = FG_OK;
    if (!s->opts.manual)
        for (int r = 0; r < FG_NROLES && st == FG_OK; r++)
            if (s->w[r].managed)
                st = fg_sup_worker_path(s->opts.worker_path[r], s->opts.worker_dir, program_of(r),
                                        s->w[r].path, sizeof s->w[r].path);
    if (st != FG_OK) goto fail;

    fg_shm_sweep();
    fg_sup_rundir_sweep();
    if ((st = fg_shm_run_id_new(s->run_id)) != FG_OK) goto fail;
    if ((st = fg_sup_rundir_make(s->run_id, s->run_dir, sizeof s->run_dir)) != FG_OK) goto fail;
    s->cleanup = fg_sup_cleanup_new(s->run_dir, !s->opts.no_signal_handlers);

    char bind_ep[FG_SUP_PATH_MAX + 16];
    if (s->opts.endpoint) {
        snprintf(bind_ep, sizeof bind_ep, "%s", s->opts.endpoint);
    } else {
        int n = snprintf(bind_ep, sizeof bind_ep, "ipc://%s/ctl", s->run_dir);
        if (n - 6 >= 107) {  /* sun_path holds 108 bytes */
            st = fg_err_set(FG_ERUNTIME, "control socket path %s is too long for a Unix socket "
                            "(HINT: set XDG_RUNTIME_DIR to a short directory)", bind_ep + 6);
            goto fail;
        }
    }
    s->zctx = zmq_ctx_new();
    s->router = zmq_socket(s->zctx, ZMQ_ROUTER);
    int zero = 0, one = 1;
    zmq_setsockopt(s->router, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s->router, ZMQ_SNDHWM, &zero, sizeof zero);
    zmq_setsockopt(s->router, ZMQ_RCVHWM, &zero, sizeof zero);
    zmq_setsockopt(s->router, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    zmq_setsockopt(s->router, ZMQ_ROUTER_HANDOVER, &one, sizeof one);
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
    fg_debug("run %s: control socket %s", s->run_id, s->endpoint);

    if (s->opts.manual) {
        fg_info("waiting for workers; start each by hand with --connect %s", s->endpoint);
    } else {
        for (int r = 0; r < FG_NROLES; r++)
            if (s->w[r].managed) spawn(s, r);
        if ((st = fg_super_wait_ready(s, s->opts.ready_timeout_ms)) != FG_OK) goto fail;
    }
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
    if (s->router) {
        for (int r = 0; r < FG_NROLES; r++) {
            if (s->w[r].state == W_READY) send_plain(s, r, FG_MSG_SHUTDOWN);
            else kill_child(s, r);  /* still starting: nothing to shut down */
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
                    reap(s, r, ws);
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
                kill_child(s, r);
            }
        zmq_close(s->router);
    }
    if (s->zctx) zmq_ctx_term(s->zctx);
    fg_shm_table_destroy(&s->segs);  /* unlinks: we created them */
    for (uint64_t q = s->lo; q < s->hi; q++) free(slot_get(s, q));
    free(s->slots);
    free(s->fifo);
    if (s->run_dir[0]) fg_sup_rundir_remove(s->run_dir);
    fg_sup_cleanup_destroy(&s->cleanup);
    free(s);
    *sp = NULL;
}

fg_status fg_super_segment_new(fg_super *s, const char *segname, uint64_t data_bytes,
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
        if (s->w[r].state == W_READY) send_map(s, r, idx, seg);   /* others get it with READY */
    if (index) *index = idx;
    return FG_OK;
}

void *fg_super_ptr(fg_super *s, fg_shm_handle h) { return fg_shm_resolve(s->segs, h); }

fg_status fg_super_submit(fg_super *s, fg_role role, const fg_msg *m, void *user, uint64_t *seq) {
    if ((int)role < 0 || role >= FG_NROLES || !s->w[role].managed)
        return fg_err_set(FG_EINPUT, "submit: role %d is not managed by this run", (int)role);
    if (!fg_msg_is_command(m->type) || m->type == FG_MSG_SHM_MAP)
        return fg_err_set(FG_EINPUT, "submit: %s is not a command", fg_msg_type_name(m->type));
    if (s->w[role].state == W_FAILED)
        return fg_err_set(FG_ERUNTIME, "submit: the %s worker is gone (%s)", fg_role_name(role),
                          s->w[role].last_death);
    /* a dependency is an earlier command of the same worker: a worker knows
     * only its own commands, so one on another would be waited for by nobody */
    for (int i = 0; i < FG_MSG_MAX_AFTER; i++) {
        uint64_t a = m->after[i];
        if (!a) continue;
        if (a >= s->hi)
            return fg_err_set(FG_EINPUT, "submit: %s waits for command %" PRIu64 ", which was never submitted",
                              fg_msg_type_name(m->type), a);
        const cmd *d = slot_get(s, a);
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
    uint64_t q = slot_add(s, c);
    c->done.seq = q;
    s->undone++;
    s->undelivered++;
    s->stats.submitted++;
    if (s->w[role].state == W_READY) send_cmd(s, c, 0);
    if (seq) *seq = q;
    return FG_OK;
}

/* Hand every completed command to cb, in completion order. */
static int deliver(fg_super *s, fg_super_done_fn cb, void *ctx) {
    int n = 0;
    while (s->fifo_len) {
        uint64_t q = s->fifo[s->fifo_head];
        s->fifo_head = (s->fifo_head + 1) % s->fifo_cap;
        s->fifo_len--;
        cmd *c = slot_get(s, q);
        if (!c || c->state != C_DONE) continue;  /* taken by wait */
        fg_super_done d = c->done;
        slot_free(s, q);
        s->undelivered--;
        n++;
        if (cb) cb(ctx, &d);
    }
    return n;
}

int fg_super_poll(fg_super *s, int timeout_ms, fg_super_done_fn cb, void *ctx) {
    FG_ASSERT(!s->in_restore);
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : now_ns() + MS(timeout_ms);
    for (;;) {
        uint64_t t = now_ns();
        int left = deadline == UINT64_MAX ? -1 : t >= deadline ? 0
                                                               : (int)((deadline - t) / 1000000 + 1);
        if (pump(s, s->fifo_len ? 0 : left) < 0) return -1;
        if (s->fifo_len || now_ns() >= deadline) break;
        if (deadline == UINT64_MAX && !s->undone) break;  /* nothing can complete */
    }
    return deliver(s, cb, ctx);
}

int fg_super_test(fg_super *s, uint64_t seq) {
    if (pump(s, 0) < 0) return -1;
    cmd *c = slot_get(s, seq);
    if (!c || c->internal) return -1;
    return c->state == C_DONE;
}

fg_status fg_super_wait(fg_super *s, uint64_t seq, int timeout_ms, fg_super_done *out) {
    FG_ASSERT(!s->in_restore);
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : now_ns() + MS(timeout_ms);
    for (;;) {
        cmd *c = slot_get(s, seq);
        if (!c || c->internal)
            return fg_err_set(FG_EINPUT, "wait: no command %" PRIu64 " (already taken?)", seq);
        if (c->state == C_DONE) {
            fg_super_done d = c->done;
            slot_free(s, seq);  /* its fifo entry is skipped by deliver */
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
        if (pump(s, left) < 0) return FG_ERUNTIME;
    }
}

fg_status fg_super_wait_all(fg_super *s, int timeout_ms) {
    FG_ASSERT(!s->in_restore);
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : now_ns() + MS(timeout_ms);
    while (s->undone) {
        uint64_t t = now_ns();
        if (t >= deadline)
            return fg_err_set(FG_ERUNTIME, "%zu command(s) not done after %d ms", s->undone,
                              timeout_ms);
        int left = deadline == UINT64_MAX ? -1 : (int)((deadline - t) / 1000000 + 1);
        if (pump(s, left) < 0) return FG_ERUNTIME;
    }
    for (size_t i = 0; i < s->fifo_len; i++) {
        cmd *c = slot_get(s, s->fifo[(s->fifo_head + i) % s->fifo_cap]);
        if (c && c->state == C_DONE && c->done.status)
            return fg_err_set(FG_ERUNTIME, "%s seq %" PRIu64 " on the %s worker failed: %s",
                              fg_msg_type_name(c->done.type), c->done.seq,
                              fg_role_name(c->done.role), c->done.error);
    }
    return FG_OK;
}

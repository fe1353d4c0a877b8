/* fg_super.c - the supervisor's protocol: the table of commands in flight,
 * READY handshakes, heartbeats, death detection, restart, restore and
 * re-issue, and the pump that drives them (see fg_super.h for the
 * contract). The public calls, the lock and the heartbeat thread live in
 * fg_super_api.c; run directories, spawning and signal cleanup in
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

#include "fg_fault.h"
#include "fg_super_int.h"

#define now_ns fg_sup_now_ns

const char *fg_sup_program(int role) {
    static const char *const names[FG_NROLES] = {"flexgen-gpu-worker", "flexgen-cpu-worker",
                                                 "flexgen-disk-worker"};
    return names[role];
}

/* ---- sending ---------------------------------------------------------- */

void fg_sup_send_plain(fg_super *s, int role, fg_msg_type type) {
    fg_msg m;
    fg_msg_init(&m, type);
    fg_msg_send(s->router, fg_role_name(role), &m, ZMQ_DONTWAIT);
}

void fg_sup_send_cmd(fg_super *s, cmd *c, int extra_flags) {
    worker *w = &s->w[c->role];
    uint32_t user = c->msg.flags & (FG_MSG_F_BARRIER | FG_MSG_STREAM_MASK);
    c->msg.flags = user | (uint32_t)extra_flags | (c->sends ? FG_MSG_F_REISSUE : 0) |
                   (uint32_t)w->epoch << FG_MSG_EPOCH_SHIFT;
    fg_fault_kind fault = fg_fault_at("coord", ++s->sent_cmds);
    int rc = fault ? fg_fault_send(s->router, fg_role_name(c->role), &c->msg, fault)
                   : fg_msg_send(s->router, fg_role_name(c->role), &c->msg, ZMQ_DONTWAIT);
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
        fg_sup_slot_free(s, c->msg.seq);
        return;
    }
    if (status) s->stats.failed++;
    else s->stats.completed++;
    s->undone--;
    fg_sup_fifo_push(s, c->msg.seq);
}

/* Fail everything the role still owes: its worker cannot be kept alive. */
static void give_up(fg_super *s, int role, const char *why) {
    worker *w = &s->w[role];
    w->state = W_FAILED;
    snprintf(w->gone, sizeof w->gone, "%s", why);
    fg_log(FG_LOG_ERROR, "giving up on the %s worker: %s", fg_role_name(role), why);
    char text[FG_MSG_TEXT_MAX + 1];
    snprintf(text, sizeof text, "the %s worker is gone: %s", fg_role_name(role), why);
    for (uint64_t q = s->lo; q < s->hi; q++) {
        cmd *c = fg_sup_slot_get(s, q);
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
        cmd *c = fg_sup_slot_get(s, q);
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

/* Start the role's worker. On the heartbeat thread it is left to the
 * owner's next pump: the child's death signal is tied to the thread that
 * forks it, and that must be one that lives as long as the run. */
void fg_sup_spawn_role(fg_super *s, int role) {
    worker *w = &s->w[role];
    if (s->bg) {
        w->spawn_due = 1;
        return;
    }
    w->spawn_due = 0;
    char *argv[8];
    fg_sup_worker_argv(s, role, argv);
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

void fg_sup_reap(fg_super *s, int role, int wstatus) {
    worker *w = &s->w[role];
    fg_sup_describe_exit(wstatus, w->last_death, sizeof w->last_death);
    if (w->pidfd >= 0) close(w->pidfd);
    w->pidfd = -1;
    w->child = 0;
    fg_sup_cleanup_set_pid(s->cleanup, role, 0);
}

/* SIGKILL our child and collect it (a silent or hung worker). */
void fg_sup_kill_child(fg_super *s, int role) {
    worker *w = &s->w[role];
    if (!w->child) return;
    kill(w->child, SIGKILL);
    int ws = 0;
    while (waitpid(w->child, &ws, 0) < 0 && errno == EINTR) {
    }
    char why[160];
    snprintf(why, sizeof why, "%s", w->last_death);
    fg_sup_reap(s, role, ws);
    snprintf(w->last_death, sizeof w->last_death, "%s", why);
}

/* The role's worker is gone (`why`). Its SENT commands become PENDING; a
 * spawned role is restarted, a manual one waited for. A spawned role that
 * dies max_restarts + 1 times in a row without answering a command, or
 * max_deaths times in the run, is given up: its commands fail. */
static void role_down(fg_super *s, int role, const char *why) {
    worker *w = &s->w[role];
    if (w->state == W_FAILED) return;
    int was_ready = w->state == W_READY;
    size_t requeued = requeue(s, role);
    w->state = W_ABSENT;
    w->restore_due = 0;
    s->stats.deaths[role]++;
    w->deaths_in_row++;
    w->deaths++;
    fg_warn("the %s worker %s%s; %zu command(s) in flight %s", fg_role_name(role), why,
            was_ready ? "" : " before it was ready", requeued,
            w->manual ? "wait for it to speak again or for a new one" : "will be re-issued");
    if (w->manual) {
        fg_sup_announce_manual(s, role);
        return;
    }
    char msg[FG_MSG_TEXT_MAX];
    if (w->deaths_in_row > (uint32_t)s->opts.max_restarts)
        snprintf(msg, sizeof msg, "it died %u times in a row without answering a command (last: "
                 "%s) (HINT: run flexgen with --attach %s and start the worker by hand under a "
                 "debugger; see its log above)", w->deaths_in_row, why, fg_role_name(role));
    else if (w->deaths >= (uint32_t)s->opts.max_deaths)
        snprintf(msg, sizeof msg, "it died %u times in this run (last: %s) (HINT: see its log "
                 "above; run flexgen with --attach %s to debug it)", w->deaths, why,
                 fg_role_name(role));
    else
        msg[0] = 0;
    if (msg[0]) {
        give_up(s, role, msg);
        return;
    }
    s->stats.restarts[role]++;
    fg_sup_spawn_role(s, role);
}


/* SHM_MAP of segment idx to role's worker, as an internal command (re-sent
 * to a restarted worker like any other). */
void fg_sup_send_map(fg_super *s, int role, uint32_t idx, const fg_shm_seg *seg) {
    cmd *c = fg_xcalloc(1, sizeof *c);
    fg_msg_init(&c->msg, FG_MSG_SHM_MAP);
    c->msg.u.map.segment = idx;
    c->msg.u.map.size = fg_shm_size(seg);
    snprintf(c->msg.u.map.name, sizeof c->msg.u.map.name, "%s", fg_shm_name(seg));
    c->role = (fg_role)role;
    c->internal = 1;
    fg_sup_slot_add(s, c);
    fg_sup_send_cmd(s, c, 0);
}
/* A restarted worker's restore hook, then everything it owes, re-issued
 * (the first one a barrier if the hook queued anything, so that restore
 * comes first). Returns how many were re-issued, -1 if the role was given
 * up. */
static long finish_ready(fg_super *s, int role) {
    worker *w = &s->w[role];
    w->restore_due = 0;
    uint64_t before = s->hi;
    if (w->readies > 1 && s->opts.restore) {
        s->in_restore = 1;
        fg_status st = s->opts.restore(s, (fg_role)role, s->opts.restore_ctx);
        s->in_restore = 0;
        if (st != FG_OK) {
            char msg[FG_MSG_TEXT_MAX];
            snprintf(msg, sizeof msg, "restoring its state failed: %s", fg_err_msg());
            give_up(s, role, msg);
            return -1;
        }
    }
    int barrier = s->hi != before ? FG_MSG_F_BARRIER : 0;
    long resent = 0;
    for (uint64_t q = s->lo; q < s->hi; q++) {
        cmd *c = fg_sup_slot_get(s, q);
        if (c && c->role == (fg_role)role && c->state == C_PENDING && !c->internal) {
            fg_sup_send_cmd(s, c, resent == 0 ? barrier : 0);
            resent++;
        }
    }
    return resent;
}

int fg_sup_can_send(const fg_super *s, int role) {
    const worker *w = &s->w[role];
    return w->state == W_READY && (!w->restore_due || s->in_restore);
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
        fg_sup_kill_child(s, role);
    }
    w->state = W_READY;
    w->no_revive = 0;
    w->remote_pid = (pid_t)m->u.ready.pid;
    w->last_seen = now_ns();
    w->epoch++;
    w->readies++;
    fg_sup_send_plain(s, role, FG_MSG_HEARTBEAT);  /* tells the worker it was accepted */

    for (uint32_t i = 0; i < s->nsegs; i++) fg_sup_send_map(s, role, i, fg_shm_table_get(s->segs, i));

    if (w->readies > 1 && s->opts.restore && s->bg) {
        /* the hook touches the owner's state: it runs on the owner's thread */
        w->restore_due = 1;
        fg_info("%s worker ready again: pid %u; its commands go out at the coordinator's next step",
                fg_role_name(role), m->u.ready.pid);
        return;
    }
    long resent = finish_ready(s, role);
    if (resent < 0) return;
    if (w->readies == 1)
        fg_info("%s worker ready: pid %u, %u thread(s), %s", fg_role_name(role), m->u.ready.pid,
                m->u.ready.threads, m->u.ready.info);
    else
        fg_info("%s worker ready again: pid %u; re-issued %ld command(s)", fg_role_name(role),
                m->u.ready.pid, resent);
}

/* A hand-started worker we declared dead talks again (a debugger paused
 * it): the same process, with its maps, its state and every command it was
 * sent, which it runs once. Those stay its own under the same epoch; sending
 * them again would run them twice, and an op that updates a tensor in place
 * is not idempotent run twice over. It gets the maps of segments made while
 * it was silent (a map it has is a no-op) and the commands queued since. */
static void revive(fg_super *s, int role) {
    worker *w = &s->w[role];
    w->state = W_READY;
    w->last_seen = now_ns();
    for (uint32_t i = 0; i < s->nsegs; i++) fg_sup_send_map(s, role, i, fg_shm_table_get(s->segs, i));
    size_t held = 0, sent = 0;
    for (uint64_t q = s->lo; q < s->hi; q++) {
        cmd *c = fg_sup_slot_get(s, q);
        if (!c || c->role != (fg_role)role || c->state != C_PENDING || c->internal) continue;
        if (c->sends && c->epoch == w->epoch) {
            c->state = C_SENT;
            held++;
        } else {
            fg_sup_send_cmd(s, c, 0);
            sent++;
        }
    }
    fg_info("the %s worker (pid %d) is back: %zu command(s) it holds still count, %zu sent to it",
            fg_role_name(role), (int)w->remote_pid, held, sent);
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
    cmd *c = fg_sup_slot_get(s, m->seq);
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

/* The worker and we are out of step (a message one side could not decode):
 * a command or its reply may be lost, and nothing would time out. Restart
 * it like a dead one (a hand-started one, still alive, is sent what it owes
 * again when it next speaks), so everything in flight is re-issued. */
static void protocol_fault(fg_super *s, int role, const char *what) {
    worker *w = &s->w[role];
    char why[FG_MSG_TEXT_MAX + 64];
    snprintf(why, sizeof why, "(pid %d) %s", (int)w->remote_pid, what);
    snprintf(w->last_death, sizeof w->last_death, "protocol error");
    fg_sup_kill_child(s, role);
    if (w->manual) {   /* not ours to kill: ask it to go, and never take it back */
        fg_sup_send_plain(s, role, FG_MSG_SHUTDOWN);
        w->no_revive = 1;
    }
    role_down(s, role, why);
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
        } else if (role >= 0 && s->w[role].managed && s->w[role].state == W_READY) {
            /* a reply may be lost in it, and nothing would ever time out */
            protocol_fault(s, role, "sent a malformed message (it failed the decoder's checks)");
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
        if (w->manual && w->state == W_ABSENT && w->readies > 0 && !w->no_revive) revive(s, role);
        return;
    }
    w->last_seen = now_ns();
    switch (m->type) {
    case FG_MSG_HEARTBEAT:
        break;
    case FG_MSG_DONE:
    case FG_MSG_ERROR:
        if (m->seq) on_reply(s, role, m);
        else if (m->type == FG_MSG_ERROR && m->u.error.code == FG_MSG_EBADCMD)
            protocol_fault(s, role, "reports that a message from the coordinator did not decode");
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
        fg_sup_reap(s, r, ws);
        char why[200];
        snprintf(why, sizeof why, "(pid %d) %s", (int)p, w->last_death);
        role_down(s, r, why);
    }
}

static void run_timers(fg_super *s, uint64_t t) {
    if (t >= s->next_hb) {
        for (int r = 0; r < FG_NROLES; r++)
            if (s->w[r].state == W_READY) fg_sup_send_plain(s, r, FG_MSG_HEARTBEAT);
        s->next_hb = t + MS(FG_HB_INTERVAL_MS);
    }
    for (int r = 0; r < FG_NROLES; r++) {
        worker *w = &s->w[r];
        char why[200];
        if (w->state == W_READY && t - w->last_seen > MS(FG_HB_LIVENESS * FG_HB_INTERVAL_MS)) {
            snprintf(why, sizeof why, "(pid %d) was silent for %.1f s: declared dead",
                     (int)w->remote_pid, (double)(t - w->last_seen) / 1e9);
            snprintf(w->last_death, sizeof w->last_death, "silent");
            fg_sup_kill_child(s, r);
            role_down(s, r, why);
        } else if (w->state == W_STARTING && t > w->ready_deadline) {
            snprintf(why, sizeof why, "(pid %d) did not say READY within %d ms", (int)w->child,
                     s->opts.ready_timeout_ms);
            snprintf(w->last_death, sizeof w->last_death, "no READY");
            fg_sup_kill_child(s, r);
            role_down(s, r, why);
        }
    }
}

/* Every message already queued; how many. */
static int drain(fg_super *s) {
    int n = 0;
    for (;; n++) {
        char id[64];
        fg_msg m;
        int r = fg_msg_recv(s->router, id, sizeof id, &m, ZMQ_DONTWAIT);
        if (r == -1) break;
        on_message(s, id, r, &m);
    }
    return n;
}

/* What the heartbeat thread left to the owner's thread: restarts, and the
 * restore of workers that said READY again meanwhile. */
static void owner_work(fg_super *s) {
    for (int r = 0; r < FG_NROLES; r++) {
        worker *w = &s->w[r];
        if (w->spawn_due && w->state == W_ABSENT) fg_sup_spawn_role(s, r);
        w->spawn_due = 0;
        if (w->restore_due && w->state == W_READY) {
            long resent = finish_ready(s, r);
            if (resent >= 0)
                fg_info("%s worker (pid %d): restored; re-issued %ld command(s)", fg_role_name(r),
                        (int)w->remote_pid, resent);
        }
    }
}

/* One round: wait up to timeout_ms (or the next timer) for the socket or a
 * child, and handle what came. -1 on a socket failure. What is already
 * queued is read before any liveness check: a coordinator that did not poll
 * for a while must not declare its workers dead for its own silence. */
int fg_sup_pump(fg_super *s, int timeout_ms) {
    if (!s->bg) owner_work(s);
    /* what came while the caller was busy may be what it waits for: then
     * the poll below only looks, and the caller checks again. (Blocking
     * here held a DONE already in hand until the next message or timer, up
     * to a heartbeat interval: a CPU attention step, whose coordinator
     * waits with nothing else in flight, stalled 0.1-0.9 s at a time.) */
    if (drain(s) > 0) timeout_ms = 0;
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
    s->last_pump = now_ns();
    return 0;
}

/* fg_super.c - the supervisor's protocol: READY handshakes and refusals,
 * deaths, restart, restore and re-issue (see fg_super.h for the contract).
 * The pump and its timers (heartbeats, silence, the command deadline) live
 * in fg_super_pump.c; the window and the public calls on it in
 * fg_super_api.c; creating and destroying a run, the heartbeat thread and
 * worker command lines in fg_super_start.c; run directories, spawning and
 * signal cleanup in fg_super_proc.c.
 *
 * Commands live in a window indexed by sequence number: slots[seq & mask]
 * for lo <= seq < hi. Each is PENDING (not sent to the current worker of its
 * role), SENT (with that worker's epoch) or DONE (waiting for poll or wait
 * to take it). A worker's death turns its SENT commands back to PENDING; its
 * successor's READY sends them again.
 *
 * Each worker process connects under a routing id of its own
 * ("<role>.<pid>.<nonce>", fg_worker_loop.c), so a second process for a
 * role is told apart from the one that holds it: one that says READY while
 * the holder lives is refused; messages from an earlier incarnation are
 * told to go. */
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

/* The role a routing id names ("gpu.1234.5f3a9c01": gpu), or -1. */
static int role_of(const char *id) {
    char name[16];
    size_t n = strcspn(id, ".");
    if (n >= sizeof name) return -1;
    memcpy(name, id, n);
    name[n] = 0;
    return fg_role_from_name(name);
}

/* ---- sending ---------------------------------------------------------- */

static void send_to(fg_super *s, const char *id, fg_msg_type type) {
    fg_msg m;
    fg_msg_init(&m, type);
    if (id[0]) fg_msg_send(s->router, id, &m, ZMQ_DONTWAIT);
}

void fg_sup_send_plain(fg_super *s, int role, fg_msg_type type) { send_to(s, s->w[role].id, type); }

void fg_sup_send_cmd(fg_super *s, cmd *c, int extra_flags) {
    worker *w = &s->w[c->role];
    uint32_t user = c->msg.flags & (FG_MSG_F_BARRIER | FG_MSG_STREAM_MASK);
    c->msg.flags = user | (uint32_t)extra_flags | (c->sends ? FG_MSG_F_REISSUE : 0) |
                   (uint32_t)w->epoch << FG_MSG_EPOCH_SHIFT;
    fg_fault_kind fault = fg_fault_at("coord", ++s->sent_cmds);
    int rc = fault ? fg_fault_send(s->router, w->id, &c->msg, fault)
                   : fg_msg_send(s->router, w->id, &c->msg, ZMQ_DONTWAIT);
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
    c->sent_ns = now_ns();
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
void fg_sup_role_down(fg_super *s, int role, const char *why) {
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
            !w->manual ? "will be re-issued" : w->no_revive ? "wait for a new one"
                                                            : "wait for it to speak again or for a new one");
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

void fg_sup_declare_dead(fg_super *s, int role, const char *death, const char *why, int ask_to_go) {
    worker *w = &s->w[role];
    snprintf(w->last_death, sizeof w->last_death, "%s", death);
    fg_sup_kill_child(s, role);
    if (w->manual && ask_to_go) {   /* not ours to kill: ask it to go, and never take it back */
        fg_sup_send_plain(s, role, FG_MSG_SHUTDOWN);
        w->no_revive = 1;
    }
    fg_sup_role_down(s, role, why);
}

int fg_sup_collect_child(fg_super *s, int role) {
    worker *w = &s->w[role];
    int ws = 0;
    pid_t pid = w->child, p = waitpid(pid, &ws, WNOHANG);
    if (p == 0 || (p < 0 && errno != ECHILD)) return 0;
    if (p < 0) ws = 0;  /* reaped elsewhere (SIGCHLD ignored): status unknown */
    fg_sup_reap(s, role, ws);
    char why[200];
    snprintf(why, sizeof why, "(pid %d) %s", (int)pid, w->last_death);
    fg_sup_role_down(s, role, why);
    return 1;
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
long fg_sup_finish_ready(fg_super *s, int role) {
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

static void worker_ready(fg_super *s, int role, const char *id, const fg_msg *m) {
    worker *w = &s->w[role];
    if (w->state == W_READY) {
        /* the same process said READY again: what it had in flight is sent
         * to it again, as to a new worker */
        size_t n = requeue(s, role);
        fg_warn("the %s worker (pid %u) said READY again; %zu command(s) will be re-issued", fg_role_name(role),
                m->u.ready.pid, n);
    }
    if (w->child && (pid_t)m->u.ready.pid != w->child) {
        /* ours, still starting, would hold the role beside it: one worker per role */
        fg_warn("a %s worker started by hand (pid %u) takes the place of ours (pid %d)",
                fg_role_name(role), m->u.ready.pid, (int)w->child);
        fg_sup_kill_child(s, role);
    }
    snprintf(w->id, sizeof w->id, "%s", id);
    w->state = W_READY;
    w->no_revive = 0;
    w->remote_pid = (pid_t)m->u.ready.pid;
    w->last_seen = w->progress_ns = now_ns();
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
    long resent = fg_sup_finish_ready(s, role);
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
    w->last_seen = w->progress_ns = now_ns();
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

/* The role's READY worker is gone though not yet found dead (it ended
 * within the liveness window): found dead now, so that a new worker's
 * READY replaces it rather than being refused as a second one. A worker
 * not ours is probed by its pid (a local process). */
static int holder_gone(fg_super *s, int role) {
    worker *w = &s->w[role];
    if (w->child) return fg_sup_collect_child(s, role);
    if (w->remote_pid <= 0 || kill(w->remote_pid, 0) == 0 || errno != ESRCH) return 0;
    char why[64];
    snprintf(why, sizeof why, "(pid %d) is gone", (int)w->remote_pid);
    snprintf(w->last_death, sizeof w->last_death, "gone");
    fg_sup_role_down(s, role, why);
    return 1;
}

/* A second worker for a role whose worker lives: refused (it exits 2 with
 * the text), the holder keeps the role. */
static void refuse_second(fg_super *s, int role, const char *id, const fg_msg *m) {
    const worker *w = &s->w[role];
    const char *name = fg_role_name(role);
    char hint[200], text[FG_MSG_TEXT_MAX];
    if (w->manual)
        snprintf(hint, sizeof hint, "to replace it, end pid %d (kill %d) and start this worker again", (int)w->remote_pid,
                 (int)w->remote_pid);
    else
        snprintf(hint, sizeof hint, "this run spawned it; to run the %s worker by hand, start flexgen run with "
                 "--attach %s and this worker with the command it prints", name, name);
    snprintf(text, sizeof text, "the %s role of this run is held by pid %d, which is alive and answering: one "
             "worker per role (HINT: %s)", name, (int)w->remote_pid, hint);
    fg_warn("refused a second %s worker (pid %u): the role is held by pid %d", name, m->u.ready.pid,
            (int)w->remote_pid);
    refuse(s, id, FG_MSG_EROLE, text);
}

static void on_ready(fg_super *s, int role, const char *id, const fg_msg *m) {
    worker *w = &s->w[role];
    if (m->u.ready.proto_version != fg_msg_version) {
        fg_log(FG_LOG_ERROR, "refused the %s worker (pid %u): READY says protocol version %u, this coordinator "
               "speaks %u", fg_role_name(role), m->u.ready.pid, m->u.ready.proto_version, fg_msg_version);
        refuse(s, id, FG_MSG_EVERSION, "protocol version mismatch in READY");
        return;
    }
    if (w->state == W_READY && strcmp(id, w->id) && !holder_gone(s, role)) {
        refuse_second(s, role, id, m);
        return;
    }
    worker_ready(s, role, id, m);
}

/* A reply; `current`: from the incarnation that holds the role now. */
static void on_reply(fg_super *s, int role, const fg_msg *m, int current) {
    cmd *c = fg_sup_slot_get(s, m->seq);
    if (!c || c->state == C_DONE || c->role != (fg_role)role) {
        fg_debug("%s from %s for seq %" PRIu64 ": nothing waits for it", fg_msg_type_name(m->type),
                 fg_role_name(role), m->seq);
        return;
    }
    /* sent again to a successor: only the successor's answer counts */
    if (c->state == C_SENT && FG_MSG_EPOCH(m->flags) != c->epoch) return;
    s->w[role].deaths_in_row = 0;
    if (current) s->w[role].progress_ns = now_ns();
    if (m->type == FG_MSG_DONE) complete(s, c, 0, NULL, &m->u.done);
    else complete(s, c, m->u.error.code ? m->u.error.code : FG_MSG_EIO, m->u.error.text, NULL);
}

/* The worker and we are out of step (a message one side could not decode):
 * a command or its reply may be lost, and nothing would time out. Restart
 * it like a dead one, so everything in flight is re-issued. */
static void protocol_fault(fg_super *s, int role, const char *what) {
    char why[FG_MSG_TEXT_MAX + 64];
    snprintf(why, sizeof why, "(pid %d) %s", (int)s->w[role].remote_pid, what);
    fg_sup_declare_dead(s, role, "protocol error", why, 1);
}

/* A message that did not decode: from a worker of another protocol
 * version (refused), or from a role's worker (a protocol fault). */
static void on_malformed(fg_super *s, const char *id, int role, const fg_msg *m) {
    const char *who = role >= 0 ? fg_role_name(role) : id;
    if (m->version && m->version != fg_msg_version) {
        fg_log(FG_LOG_ERROR, "refused a worker '%s': it speaks protocol version %u, this "
               "coordinator speaks %u (HINT: use the flexgen-*-worker programs built with "
               "this flexgen)", who, m->version, fg_msg_version);
        char text[160];
        snprintf(text, sizeof text, "protocol version mismatch: the coordinator speaks %u, "
                 "this worker speaks %u", fg_msg_version, m->version);
        refuse(s, id, FG_MSG_EVERSION, text);
    } else if (role >= 0 && s->w[role].managed && s->w[role].state == W_READY && !strcmp(id, s->w[role].id)) {
        /* a reply may be lost in it, and nothing would ever time out */
        protocol_fault(s, role, "sent a malformed message (it failed the decoder's checks)");
    } else {
        fg_warn("dropped a malformed message from '%s'", who);
    }
}

/* From a process that does not hold its role (an earlier incarnation, or
 * one refused): a reply still counts where its epoch says so; anything else
 * is told to go. */
static void from_other(fg_super *s, int role, const char *id, const fg_msg *m) {
    if ((m->type == FG_MSG_DONE || m->type == FG_MSG_ERROR) && m->seq) on_reply(s, role, m, 0);
    else send_to(s, id, FG_MSG_SHUTDOWN);
}

void fg_sup_on_message(fg_super *s, const char *id, int rc, const fg_msg *m) {
    int role = role_of(id);
    if (rc == -2) {
        on_malformed(s, id, role, m);
        return;
    }
    if (role < 0 || !s->w[role].managed ||
        (m->type == FG_MSG_READY && m->u.ready.role != (uint32_t)role)) {
        if (m->type == FG_MSG_READY) {
            char text[200];
            snprintf(text, sizeof text, "role '%s' is not one this run uses (it uses:%s%s%s)",
                     role >= 0 ? fg_role_name(role) : id,
                     s->w[0].managed ? " gpu" : "", s->w[1].managed ? " cpu" : "",
                     s->w[2].managed ? " disk" : "");
            fg_log(FG_LOG_ERROR, "refused a worker: %s", text);
            refuse(s, id, FG_MSG_EROLE, text);
        }
        return;
    }
    worker *w = &s->w[role];
    if (m->type == FG_MSG_READY) {
        on_ready(s, role, id, m);
        return;
    }
    if (strcmp(id, w->id)) {
        from_other(s, role, id, m);
        return;
    }
    if (w->state != W_READY) {
        /* replies from a worker declared dead still count (they arrive after
         * its death was seen, or it was only paused) */
        if (m->type == FG_MSG_DONE || m->type == FG_MSG_ERROR) on_reply(s, role, m, 0);
        if (w->manual && w->state == W_ABSENT && w->readies > 0 && !w->no_revive) revive(s, role);
        return;
    }
    w->last_seen = now_ns();
    switch (m->type) {
    case FG_MSG_HEARTBEAT:
        break;
    case FG_MSG_DONE:
    case FG_MSG_ERROR:
        if (m->seq) on_reply(s, role, m, 1);
        else if (m->type == FG_MSG_ERROR && m->u.error.code == FG_MSG_EBADCMD)
            protocol_fault(s, role, "reports that a message from the coordinator did not decode");
        else fg_warn("the %s worker reports: %s", fg_role_name(role), m->u.error.text);
        break;
    default:
        fg_warn("ignored an unexpected %s from the %s worker", fg_msg_type_name(m->type), fg_role_name(role));
    }
}

/* fg_super_pump.c - the supervisor's pump: one round reads what the
 * workers sent, runs the timers (heartbeats out, silence, READY deadlines,
 * the command deadline), collects children that exited, and does what the
 * heartbeat thread left to the owner's thread. fg_super.c handles what it
 * finds. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "fg_engine_ops.h"
#include "fg_super_int.h"

#define now_ns fg_sup_now_ns

/* A worker is silent when nothing came from it for this long. */
#define LIVENESS_NS MS(FG_HB_LIVENESS * FG_HB_INTERVAL_MS)

/* t - since, or 0 for a moment noted after t was read. */
static uint64_t elapsed(uint64_t t, uint64_t since) { return t > since ? t - since : 0; }

static void check_children(fg_super *s, const short *revents) {
    for (int r = 0; r < FG_NROLES; r++) {
        worker *w = &s->w[r];
        if (!w->child) continue;
        if (w->pidfd >= 0 && !(revents[r] & ZMQ_POLLIN)) continue;
        fg_sup_collect_child(s, r);
    }
}

/* ---- the command deadline --------------------------------------------- */

/* The oldest command the role's current worker owes (sent to it, not
 * answered), or NULL. */
static const cmd *oldest_owed(const fg_super *s, int role) {
    const worker *w = &s->w[role];
    for (uint64_t q = s->lo; q < s->hi; q++) {
        const cmd *c = fg_sup_slot_get(s, q);
        if (c && c->role == (fg_role)role && c->state == C_SENT && c->epoch == w->epoch) return c;
    }
    return NULL;
}

/* "COMPUTE LAYER seq 812 (layer 3, batch 1)": a command as the log names it. */
static void describe(const cmd *c, char *out, size_t cap) {
    const fg_msg *m = &c->msg;
    int n = snprintf(out, cap, "%s", fg_msg_type_name(m->type));
    if (m->type == FG_MSG_COMPUTE || m->type == FG_MSG_CPU_ATTN) {
        uint32_t op = m->u.compute.op;
        n += snprintf(out + n, cap - (size_t)n, " %s", op == FG_OP_AXPY ? "AXPY" : op == FG_OP_NOP ? "NOP"
                                                                                            : fg_op_name(op));
    }
    n += snprintf(out + n, cap - (size_t)n, " seq %" PRIu64, m->seq);
    if (m->type == FG_MSG_COMPUTE || m->type == FG_MSG_CPU_ATTN)
        snprintf(out + n, cap - (size_t)n, " (layer %u, batch %u)", m->u.compute.layer, m->u.compute.gpu_batch);
    else if (m->type == FG_MSG_COPY)
        snprintf(out + n, cap - (size_t)n, " (stream %d, %u copies)", FG_MSG_STREAM(m->flags), m->u.copy.n);
    else if (m->type == FG_MSG_DISK_READ || m->type == FG_MSG_DISK_WRITE)
        snprintf(out + n, cap - (size_t)n, " (%s, %" PRIu64 " bytes)", m->u.disk.path[0] ? m->u.disk.path : "by id",
                 m->u.disk.buf.nbytes);
    else if (m->type == FG_MSG_SHM_MAP)
        snprintf(out + n, cap - (size_t)n, " (%s)", m->u.map.name);
}

/* A worker that owes commands and has answered none for cmd_timeout_ms is
 * stuck, though its I/O thread heartbeats (a handler in a loop, a wedged
 * device call): declared dead like a silent one, so it is replaced and its
 * commands re-issued. Named by its oldest unanswered command: every earlier
 * one has ended, so that is the one it is stuck in or stuck behind. The
 * clock restarts at each reply and whenever the worker owes nothing, so a
 * long queue of short commands, or an idle worker, never trips it. */
static void check_stuck(fg_super *s, int role, uint64_t t) {
    worker *w = &s->w[role];
    if (s->opts.cmd_timeout_ms < 0) return;
    uint64_t limit = MS(s->opts.cmd_timeout_ms);
    if (elapsed(t, w->progress_ns) <= limit) return;
    const cmd *c = oldest_owed(s, role);
    if (!c) {
        w->progress_ns = t;   /* owes nothing: idle */
        return;
    }
    if (c->sent_ns > w->progress_ns) w->progress_ns = c->sent_ns;   /* nothing was owed before it */
    if (elapsed(t, w->progress_ns) <= limit) return;
    char what[FG_MSG_TEXT_MAX / 2], quiet[64] = "", why[FG_MSG_TEXT_MAX];
    describe(c, what, sizeof what);
    double owed_s = (double)elapsed(t, c->sent_ns) / 1e9, quiet_s = (double)elapsed(t, w->progress_ns) / 1e9;
    if (owed_s - quiet_s >= 0.1) snprintf(quiet, sizeof quiet, " (its last reply %.1f s ago)", quiet_s);
    snprintf(why, sizeof why, "(pid %d) is stuck in %s: unanswered for %.1f s%s though it heartbeats (command "
             "deadline %.0f s, --cmd-timeout): declared dead", (int)w->remote_pid, what, owed_s, quiet,
             s->opts.cmd_timeout_ms / 1e3);
    fg_sup_declare_dead(s, role, "stuck in a command", why, 1);
}

/* When the command deadline may next fire for a READY worker. */
static uint64_t stuck_deadline(const fg_super *s, const worker *w) {
    return s->opts.cmd_timeout_ms < 0 ? UINT64_MAX : w->progress_ns + MS(s->opts.cmd_timeout_ms) + 1;
}

/* ---- timers ----------------------------------------------------------- */

static void run_timers(fg_super *s, uint64_t t) {
    if (t >= s->next_hb) {
        for (int r = 0; r < FG_NROLES; r++)
            if (s->w[r].state == W_READY) fg_sup_send_plain(s, r, FG_MSG_HEARTBEAT);
        s->next_hb = t + MS(FG_HB_INTERVAL_MS);
    }
    for (int r = 0; r < FG_NROLES; r++) {
        worker *w = &s->w[r];
        char why[200];
        if (w->state == W_READY && elapsed(t, w->last_seen) > LIVENESS_NS) {
            snprintf(why, sizeof why, "(pid %d) was silent for %.1f s: declared dead",
                     (int)w->remote_pid, (double)elapsed(t, w->last_seen) / 1e9);
            fg_sup_declare_dead(s, r, "silent", why, 0);   /* a paused hand-started one may come back */
        } else if (w->state == W_READY) {
            check_stuck(s, r, t);
        } else if (w->state == W_STARTING && t > w->ready_deadline) {
            snprintf(why, sizeof why, "(pid %d) did not say READY within %d ms", (int)w->child,
                     s->opts.ready_timeout_ms);
            fg_sup_declare_dead(s, r, "no READY", why, 0);
        }
    }
}

/* The next moment a timer is due. */
static uint64_t next_wake(const fg_super *s) {
    uint64_t wake = s->next_hb;
    for (int r = 0; r < FG_NROLES; r++) {
        const worker *w = &s->w[r];
        uint64_t dl = UINT64_MAX;
        if (w->state == W_READY) {
            dl = w->last_seen + LIVENESS_NS + 1;
            uint64_t stuck = stuck_deadline(s, w);
            if (stuck < dl) dl = stuck;
        } else if (w->state == W_STARTING) {
            dl = w->ready_deadline + 1;
        }
        if (dl < wake) wake = dl;
    }
    return wake;
}

/* ---- the pump --------------------------------------------------------- */

/* Every message already queued; how many. */
static int drain(fg_super *s) {
    int n = 0;
    for (;; n++) {
        char id[FG_SUP_ID_MAX];
        fg_msg m;
        int r = fg_msg_recv(s->router, id, sizeof id, &m, ZMQ_DONTWAIT);
        if (r == -1) break;
        fg_sup_on_message(s, id, r, &m);
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
            long resent = fg_sup_finish_ready(s, r);
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
     * the poll below only looks, and the caller checks again, rather than
     * holding a DONE in hand until the next message or timer */
    if (drain(s) > 0) timeout_ms = 0;
    uint64_t t = now_ns();
    run_timers(s, t);
    uint64_t wake = next_wake(s);
    int no_pidfd = 0;
    for (int r = 0; r < FG_NROLES; r++)
        if (s->w[r].child && s->w[r].pidfd < 0) no_pidfd = 1;
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

/* fg_super_api.c - the window of commands and the supervisor's public
 * calls on a running run (fg_super.h): segments, submit, poll, wait,
 * stats; each under the supervisor's lock. Creating and destroying a run
 * is fg_super_start.c's; the protocol fg_super.c's. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fg_super_int.h"

#define now_ns fg_sup_now_ns

#define lock fg_sup_lock
#define unlock fg_sup_unlock

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

/* fg_pipe.c - a pipeline rank's ring (fg_flex_int.h's fg_pipe): hidden
 * states between stages and sampled ids back to rank 0, as non-blocking
 * MPI messages from the plan's shared-memory buffers, overlapped with the
 * device: a send is posted once the COPY off the device that fills its
 * buffer has ended, a receive as soon as its buffer's last COPY to the
 * device has ended, and the schedule waits only where a unit needs a
 * message that has not arrived (that wait is the pipeline's bubble).
 *
 * Deadlock: every rank sends and receives in the one schedule order, and
 * before any wait a rank posts everything it can send (awaiting the copies)
 * and records its sampled tokens, so a message a rank waits for never
 * waits on that rank. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fg_flex_int.h"

void fg_pipe_init(fg_engine *e) {
    fg_pipe *p = &e->pipe;
    memset(p, 0, sizeof *p);
    p->P = fg_ring_size(), p->r = fg_ring_rank();
    p->Kg = e->pl.K / p->P;
    if (p->P > 1) {
        p->ids_buf = fg_xcalloc((size_t)e->pl.K * e->pl.gbs, sizeof *p->ids_buf);
        p->ids_req = fg_xcalloc((size_t)e->pl.K, sizeof *p->ids_req);
        p->ids_copy = fg_xcalloc((size_t)e->pl.K, sizeof *p->ids_copy);
    }
}

void fg_pipe_free(fg_engine *e) {
    fg_pipe *p = &e->pipe;
    for (int b = 0; b < 2; b++) fg_ring_cancel(&p->in_req[b]);
    free(p->ids_buf), free(p->ids_req), free(p->ids_copy);
    p->ids_buf = NULL, p->ids_req = NULL, p->ids_copy = NULL;
}

/* Post the oldest message not yet posted, its COPY having ended (awaited
 * when `wait`); 0 when there is none or its copy is still running. */
static int post_send(fg_engine *e, int wait, fg_status *st) {
    fg_pipe *p = &e->pipe;
    if (p->out_posted == p->out_next) return 0;
    int b = (int)(p->out_posted % 2);
    if (wait ? (*st = fg_cmdq_await(&e->q, p->out_copy[b])) != FG_OK : !fg_cmdq_ended(&e->q, p->out_copy[b])) return 0;
    *st = fg_ring_isend(fg_engine_ptr(e, e->pl.ring_out[b]), p->out_n[b], p->r + 1, FG_RING_TAG_HIDDEN, &p->out_req[b]);
    p->sent += p->out_n[b], p->msgs++;
    p->out_copy[b] = 0, p->out_posted++;
    return *st == FG_OK;
}

fg_status fg_pipe_poll(fg_engine *e) {
    fg_pipe *p = &e->pipe;
    if (p->P == 1) return FG_OK;
    fg_status st = FG_OK;
    while (post_send(e, 0, &st)) {}
    for (int b = 0; b < 2 && !st; b++) (void)fg_ring_test(&p->out_req[b], NULL);   /* MPI moves a message only inside its calls */
    while (!st && p->in_posted < p->in_total && p->in_posted < p->in_next + 2) {
        int b = (int)(p->in_posted % 2);
        if (p->in_read[b] && !fg_cmdq_ended(&e->q, p->in_read[b])) break;
        p->in_read[b] = 0;
        fg_loc in = e->pl.ring_in[b];
        st = fg_ring_irecv(fg_engine_ptr(e, in), in.n, p->r - 1, FG_RING_TAG_HIDDEN, &p->in_req[b]);
        p->in_posted++;
    }
    return st;
}

/* Everything this rank can give the others, before it waits: the sends
 * whose copies are queued (awaited) and the tokens sampled so far. */
static fg_status flush(fg_engine *e) {
    fg_status st = FG_OK;
    while (post_send(e, 1, &st)) {}
    if (!st && e->sm) st = fg_sample_until(e, e->sm, -1);
    return st;
}

/* A pause between two tests of the ring, 20 us doubling to 1 ms: it leaves
 * the cores to the workers, where MPI's own wait would spin. */
static void nap(unsigned *us) {
    usleep(*us);
    if (*us < 1000) *us *= 2;
}

/* Wait for r, flushing first when asked. */
static fg_status wait_req(fg_engine *e, fg_ring_req *r, uint64_t *n, int do_flush) {
    if (fg_ring_test(r, n)) return FG_OK;
    fg_status st = do_flush ? flush(e) : FG_OK;
    double t0 = fg_now();
    for (unsigned us = 20; !st && !fg_ring_test(r, n); nap(&us)) st = fg_pipe_poll(e);
    e->pipe.wait_s += fg_now() - t0;
    return st;
}

fg_status fg_pipe_block_start(fg_engine *e) {
    fg_pipe *p = &e->pipe;
    if (p->P == 1) return FG_OK;
    p->out_next = p->out_posted = p->in_next = p->in_posted = 0;
    p->in_total = e->pl.st.embed ? 0 : (long)e->block_G * e->pl.K;
    return fg_pipe_poll(e);
}

fg_status fg_pipe_take_hidden(fg_engine *e, const fg_unit *u, uint64_t n, fg_loc *src) {
    fg_pipe *p = &e->pipe;
    int b = (int)(p->in_next % 2);
    uint64_t got = 0;
    fg_status st = FG_OK;
    if (p->in_next >= p->in_total)
        return fg_err_set(FG_ERUNTIME, "rank %d: more hidden states taken than the block has (%ld)", p->r, p->in_total);
    while (!st && p->in_posted <= p->in_next) {   /* its buffer was still being read: wait for that */
        if (!(st = fg_cmdq_await(&e->q, p->in_read[b]))) st = fg_pipe_poll(e);
    }
    if (st || (st = wait_req(e, &p->in_req[b], &got, 1))) return st;
    if (got != n)
        return fg_err_set(FG_ERUNTIME, "rank %d: token %d batch %d: rank %d sent a hidden state of %llu bytes, this "
                                       "stage expects %llu: the ranks disagree on the prompts or the batches",
                          p->r, u->i, u->k, p->r - 1, (unsigned long long)got, (unsigned long long)n);
    p->recvd += got, p->in_next++;
    *src = fg_loc_sub(e->pl.ring_in[b], 0, n);
    return FG_OK;
}

void fg_pipe_took(fg_engine *e, uint64_t copy) { e->pipe.in_read[(e->pipe.in_next - 1) % 2] = copy; }

fg_status fg_pipe_send_hidden(fg_engine *e, const fg_pending_store *ps) {
    fg_pipe *p = &e->pipe;
    const fg_plan *pl = &e->pl;
    int b = (int)(p->out_next % 2);
    fg_status st = FG_OK;
    /* the buffer's last message is on its way before the next fills it */
    while (!st && p->out_posted + 2 <= p->out_next) post_send(e, 1, &st);
    if (st || (st = wait_req(e, &p->out_req[b], NULL, 1))) return st;
    fg_loc dev = fg_unit_hidden(e, &ps->u);
    fg_deps d = {{0}};
    if ((st = fg_cmdq_need(&e->q, &d, ps->last))) return st;
    fg_msg c;
    fg_msg_init(&c, FG_MSG_COPY);
    fg_msg_copy_add(&c, fg_engine_handle(e, dev), fg_engine_handle(e, fg_loc_sub(pl->ring_out[b], 0, dev.n)));
    if ((st = fg_cmdq_submit_gpu(&e->q, &c, ST_D2H, &d, &p->out_copy[b]))) return st;
    /* the copy reads the hidden-state slot: its next writer waits for it */
    if (pl->atier != FG_TIER_GPU) e->par[ps->u.k % 2].h.read[0] = p->out_copy[b];
    p->out_n[b] = dev.n, p->out_next++;
    return FG_OK;
}

fg_status fg_pipe_load_ids(fg_engine *e, const fg_unit *u, fg_deps *ld) {
    fg_pipe *p = &e->pipe;
    const fg_plan *pl = &e->pl;
    uint64_t n = 4ull * pl->gbs, got = 0;
    fg_loc io = fg_loc_sub(pl->ids_io[u->k], 0, n), dev = fg_loc_sub(pl->ids_dev[u->k], 0, n);
    fg_ring_req r = {0};
    fg_status st = fg_cmdq_await(&e->q, p->ids_copy[u->k]);   /* the last token's are on the device */
    if (st || (st = fg_ring_irecv(fg_engine_ptr(e, io), n, p->P - 1, FG_RING_TAG_IDS, &r)) ||
        (st = wait_req(e, &r, &got, 1)))
        return st;
    if (got != n)
        return fg_err_set(FG_ERUNTIME, "rank 0: token %d batch %d: the last rank sent %llu bytes of ids, expected %llu",
                          u->i, u->k, (unsigned long long)got, (unsigned long long)n);
    p->recvd += got;
    /* the embedding before this one read the device's ids */
    fg_deps d = {{[ST_COMPUTE] = e->q.last_gpu[ST_COMPUTE]}};
    fg_msg c;
    fg_msg_init(&c, FG_MSG_COPY);
    fg_msg_copy_add(&c, fg_engine_handle(e, io), fg_engine_handle(e, dev));
    if ((st = fg_cmdq_submit_gpu(&e->q, &c, ST_H2D, &d, &p->ids_copy[u->k]))) return st;
    fg_deps got_d = {{[ST_H2D] = p->ids_copy[u->k]}};
    fg_deps_merge(ld, &got_d);
    return FG_OK;
}

fg_status fg_pipe_send_ids(fg_engine *e, int i, int k) {
    fg_pipe *p = &e->pipe;
    if (p->P == 1 || e->pl.st.embed || i == e->block_G - 1) return FG_OK;   /* the block's last token embeds nothing */
    int B = e->pl.gbs;
    /* this batch's last ids were taken long ago (rank 0 embedded them
     * before this token reached the head): no flush, no cycle */
    fg_status st = wait_req(e, &p->ids_req[k], NULL, 0);
    if (st) return st;
    memcpy(p->ids_buf + (size_t)k * B, fg_engine_ptr(e, e->pl.ids_io[k]), 4ull * B);
    p->sent += 4ull * B, p->msgs++;
    return fg_ring_isend(p->ids_buf + (size_t)k * B, 4ull * B, 0, FG_RING_TAG_IDS, &p->ids_req[k]);
}

/* The last rank's outputs of a block, as rank 0 journals them: per prompt
 * its count, its finish reason and its ids. */
static fg_status send_outputs(fg_engine *e, fg_seq_out *out, int first, int count) {
    size_t len = 0;
    for (int q = first; q < first + count; q++) len += 2 + (size_t)out[q].n;
    int32_t *buf = fg_xcalloc(len ? len : 1, sizeof *buf), *w = buf;
    for (int q = first; q < first + count; q++) {
        *w++ = out[q].n, *w++ = (int32_t)out[q].finish;
        memcpy(w, out[q].ids, sizeof *w * (size_t)out[q].n), w += out[q].n;
    }
    fg_ring_req r = {0};
    fg_status st = fg_ring_isend(buf, 4 * len, 0, FG_RING_TAG_OUT, &r);
    if (!st) st = wait_req(e, &r, NULL, 0);
    e->pipe.sent += 4 * len;
    free(buf);
    return st;
}

static fg_status recv_outputs(fg_engine *e, fg_seq_out *out, int first, int count) {
    fg_pipe *p = &e->pipe;
    uint64_t n = 0;
    double t0 = fg_now();
    for (unsigned us = 20; !fg_ring_probe(p->P - 1, FG_RING_TAG_OUT, &n);) nap(&us);
    p->wait_s += fg_now() - t0;
    int32_t *buf = fg_xcalloc(n / 4 + 1, 4);
    fg_status st = fg_ring_recv(buf, n, p->P - 1, FG_RING_TAG_OUT);
    p->recvd += n;
    const int32_t *rd = buf, *end = buf + n / 4;
    for (int q = first; q < first + count && !st; q++) {
        if (end - rd < 2 || rd[0] < 0 || rd[0] > e->pl.G || end - rd - 2 < rd[0]) {
            st = fg_err_set(FG_ERUNTIME, "rank 0: the last rank's outputs of prompts %d..%d do not parse", first,
                            first + count - 1);
            break;
        }
        out[q].n = rd[0], out[q].finish = (fg_finish)rd[1];
        memcpy(out[q].ids, rd + 2, 4ull * (size_t)rd[0]);
        rd += 2 + rd[0];
    }
    free(buf);
    return st;
}

fg_status fg_pipe_block_end(fg_engine *e, fg_seq_out *out, int first, int count) {
    fg_pipe *p = &e->pipe;
    if (p->P == 1) return FG_OK;
    fg_status st = flush(e);
    for (int b = 0; b < 2 && !st; b++) st = wait_req(e, &p->out_req[b], NULL, 0);
    for (int k = 0; k < e->pl.K && !st; k++) st = wait_req(e, &p->ids_req[k], NULL, 0);
    if (st) return st;
    if (p->r == p->P - 1) return send_outputs(e, out, first, count);
    if (p->r == 0) return recv_outputs(e, out, first, count);
    return FG_OK;
}

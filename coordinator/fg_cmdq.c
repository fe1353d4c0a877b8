/* fg_cmdq.c - the engine's command queue (see fg_cmdq.h). */
#include "fg_cmdq.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fg_engine_ops.h"
#include "fg_fs.h"

struct fg_cmdq_pending {
    uint64_t seq;
    fg_role role;
    int type, op, stream, layer, batch;
    uint64_t bytes;   /* a DISK_READ's */
};

void fg_cmdq_free(fg_cmdq *q) {
    free(q->pend);
    free(q->ev);
    q->pend = NULL, q->ev = NULL;
    q->npend = q->cappend = q->nev = q->capev = 0;
}

static void *grow(void *p, size_t *cap, size_t elem, size_t first) {
    *cap = *cap ? 2 * *cap : first;
    p = realloc(p, *cap * elem);
    FG_ASSERT(p);
    return p;
}

fg_status fg_cmdq_await(fg_cmdq *q, uint64_t seq) {
    if (!seq) return FG_OK;
    size_t i = 0;
    while (i < q->npend && q->pend[i].seq != seq) i++;
    if (i == q->npend) return FG_OK;   /* accounted for before */
    fg_cmdq_pending pd = q->pend[i];
    q->pend[i] = q->pend[--q->npend];
    fg_super_done d;
    fg_status st = fg_super_wait(q->sup, seq, -1, &d);
    q->busy_s[pd.role] += (double)(d.end_ns - d.start_ns) * 1e-9;
    if (pd.type == FG_MSG_DISK_READ && !st) {
        /* the union of the reads' intervals, taken in the order they are
         * waited for (about the order they began: a read overlapping
         * the last counted adds only what lies past it) */
        uint64_t from = d.start_ns > q->rd_end_ns ? d.start_ns : q->rd_end_ns;
        if (d.end_ns > from) q->rd_busy_s += (double)(d.end_ns - from) * 1e-9;
        if (d.end_ns > q->rd_end_ns) q->rd_end_ns = d.end_ns;
        q->rd_done_bytes += pd.bytes;
    }
    if (q->tracing && !st) {
        if (q->nev == q->capev) q->ev = grow(q->ev, &q->capev, sizeof *q->ev, 1024);
        q->ev[q->nev++] = (fg_trace_ev){d.start_ns, d.end_ns, pd.role, pd.stream, pd.type, pd.op, pd.layer, pd.batch};
    }
    if (st) return fg_err_set(FG_ERUNTIME, "%s worker: %s", fg_role_name(pd.role), d.error[0] ? d.error : fg_err_msg());
    return FG_OK;
}

fg_status fg_cmdq_await_all(fg_cmdq *q) {
    fg_status st = FG_OK;
    while (q->npend) {
        fg_status s2 = fg_cmdq_await(q, q->pend[q->npend - 1].seq);
        if (!st) st = s2;
    }
    return st;
}

fg_status fg_cmdq_submit(fg_cmdq *q, fg_role role, fg_msg *m, int stream, uint64_t *seq) {
    if (seq) *seq = 0;
    m->flags |= (uint32_t)stream << FG_MSG_STREAM_SHIFT;
    uint64_t s;
    fg_status st = fg_super_submit(q->sup, role, m, NULL, &s);
    if (st) return st;
    if (q->npend == q->cappend) q->pend = grow(q->pend, &q->cappend, sizeof *q->pend, 64);
    int is_op = m->type == FG_MSG_COMPUTE || m->type == FG_MSG_CPU_ATTN;
    q->pend[q->npend++] = (fg_cmdq_pending){s, role, m->type, is_op ? (int)m->u.compute.op : -1, stream,
                                            is_op ? (int)m->u.compute.layer : -1, is_op ? (int)m->u.compute.gpu_batch : -1,
                                            m->type == FG_MSG_DISK_READ ? m->u.disk.buf.nbytes : 0};
    q->commands++;
    if (m->type == FG_MSG_COPY)
        for (uint32_t i = 0; i < m->u.copy.n; i++) {
            int sdev = m->u.copy.src[i].segment == FG_SEG_DEVICE, ddev = m->u.copy.dst[i].segment == FG_SEG_DEVICE;
            if (sdev && ddev) q->d2d_bytes += m->u.copy.dst[i].nbytes;
            else if (ddev) q->h2d_bytes += m->u.copy.dst[i].nbytes;
            else q->d2h_bytes += m->u.copy.dst[i].nbytes;
        }
    if (m->type == FG_MSG_DISK_READ) q->disk_read_bytes += m->u.disk.buf.nbytes;
    if (m->type == FG_MSG_DISK_WRITE) q->disk_write_bytes += m->u.disk.buf.nbytes;
    if (seq) *seq = s;
    return q->overlap ? FG_OK : fg_cmdq_await(q, s);
}

fg_status fg_cmdq_need(fg_cmdq *q, fg_deps *d, uint64_t seq) {
    if (!seq) return FG_OK;
    for (size_t i = 0; i < q->npend; i++)
        if (q->pend[i].seq == seq) {
            if (q->pend[i].role != FG_ROLE_GPU) return fg_cmdq_await(q, seq);
            int t = q->pend[i].stream;
            if (seq > d->s[t]) d->s[t] = seq;
            return FG_OK;
        }
    return FG_OK;   /* accounted for before */
}

fg_status fg_cmdq_submit_gpu(fg_cmdq *q, fg_msg *m, int t, const fg_deps *d, uint64_t *seq) {
    int n = 0;
    for (int s = 0; s < NSTREAMS; s++)
        if (s != t && d && d->s[s]) m->after[n++] = d->s[s];
    uint64_t mine;
    fg_status st = fg_cmdq_submit(q, FG_ROLE_GPU, m, t, &mine);
    if (!st) q->last_gpu[t] = mine;
    if (seq) *seq = mine;
    return st;
}

void fg_deps_merge(fg_deps *a, const fg_deps *b) {
    for (int t = 0; t < NSTREAMS; t++)
        if (b->s[t] > a->s[t]) a->s[t] = b->s[t];
}

int fg_cmdq_ended(fg_cmdq *q, uint64_t seq) {
    size_t i = 0;
    while (i < q->npend && q->pend[i].seq != seq) i++;
    return i == q->npend || fg_super_test(q->sup, seq) == 1;
}

fg_status fg_cmdq_reap(fg_cmdq *q) {
    for (size_t i = 0; i < q->npend;) {
        uint64_t s = q->pend[i].seq;
        if (fg_super_test(q->sup, s) == 1) {
            fg_status st = fg_cmdq_await(q, s);   /* moves the last entry into i */
            if (st) return st;
        } else {
            i++;
        }
    }
    return FG_OK;
}

fg_status fg_cmdq_write_trace(const fg_cmdq *q, const char *path) {
    static const char *stream_name[NSTREAMS] = {"compute", "copy h2d", "copy d2h"};
    fg_fs_atomic a;
    if (fg_fs_atomic_fopen(&a, path, 0)) return fg_err_set(FG_EINPUT, "%s: cannot create the trace", a.partial);
    FILE *f = a.f;
    uint64_t t0 = q->nev ? q->ev[0].start_ns : 0;
    for (size_t i = 0; i < q->nev; i++) t0 = q->ev[i].start_ns < t0 ? q->ev[i].start_ns : t0;
    fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    for (int r = 0; r < FG_NROLES; r++) {
        fprintf(f, "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, \"args\": {\"name\": \"%s worker\"}},\n", r,
                fg_role_name(r));
        for (int t = 0; t < NSTREAMS; t++)
            fprintf(f, "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": \"%s\"}},\n",
                    r, t, r == FG_ROLE_GPU ? stream_name[t] : (t ? "other" : "commands"));
    }
    char opname[32];
    for (size_t i = 0; i < q->nev; i++) {
        const fg_trace_ev *v = &q->ev[i];
        const char *name = v->type == FG_MSG_COPY ? (v->stream == ST_H2D ? "load" : "store") : fg_msg_type_name(v->type);
        if (v->op >= 0) {   /* an op: its table name in lower case, "layer" */
            snprintf(opname, sizeof opname, "%s", fg_op_name((uint32_t)v->op));
            for (char *c = opname; *c; c++) *c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
            name = opname;
        }
        fprintf(f, "{\"ph\": \"X\", \"name\": \"%s\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, "
                   "\"args\": {\"layer\": %d, \"batch\": %d}}%s\n",
                name, v->role, v->stream, (double)(v->start_ns - t0) / 1e3, (double)(v->end_ns - v->start_ns) / 1e3,
                v->layer, v->batch, i + 1 < q->nev ? "," : "");
    }
    fprintf(f, "]}\n");
    if (fg_fs_atomic_commit(&a)) return fg_err_set(FG_ERUNTIME, "%s: cannot write the trace", path);
    return FG_OK;
}

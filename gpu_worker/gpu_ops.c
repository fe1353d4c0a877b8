/* gpu_ops.c - the gpu_worker's engine ops (see gpu_ops.h): decode and check a
 * command, then call the backend. Everything the coordinator can get wrong is
 * caught here or in fg_op_args, so backends see only well-formed ops:
 * DEVICE_INIT came first, the step's model is DEVICE_INIT's, B*S fits the
 * workspace, and every handle has the bytes its slot's shape implies.
 * Commands run on one executor thread (worker_main.c), so the state needs
 * no lock. */
#include "gpu_ops.h"

#include <inttypes.h>
#include <string.h>

#include "fg_backend.h"

typedef struct {
    const fg_backend *be;
    void *ctx;
    int ready;          /* a DEVICE_INIT succeeded and its arena is there */
    fg_op_init init;    /* its params */
} gpu_state;

fg_status fg_gpu_open(fg_worker *w) {
    gpu_state *g = fg_xcalloc(1, sizeof *g);
    g->be = &fg_backend_host;
    fg_status st = g->be->open(&g->ctx);
    if (st) {
        free(g);
        return st;
    }
    fg_worker_set_ctx(w, g);
    return FG_OK;
}

void fg_gpu_close(fg_worker *w) {
    gpu_state *g = fg_worker_ctx(w);
    if (!g) return;
    fg_worker_set_device(w, NULL, 0);
    g->be->close(g->ctx);
    free(g);
    fg_worker_set_ctx(w, NULL);
}

uint64_t fg_gpu_mem_bytes(fg_worker *w, int peak) {
    gpu_state *g = fg_worker_ctx(w);
    return g ? g->be->mem_bytes(g->ctx, peak) : 0;
}

static int same_init(const fg_op_init *a, const fg_op_init *b) {
    return !memcmp(&a->model, &b->model, sizeof a->model) && a->arena_bytes == b->arena_bytes &&
           a->budget_bytes == b->budget_bytes && a->max_rows == b->max_rows;
}

fg_status fg_gpu_device_init(fg_worker *w, const fg_msg *cmd) {
    gpu_state *g = fg_worker_ctx(w);
    const fg_msg_compute *c = &cmd->u.compute;
    if (c->n_in || c->n_out || c->params_len != sizeof(fg_op_init))
        return fg_err_set(FG_EINPUT, "DEVICE_INIT takes no handles and %zu bytes of params (fg_op_init), got "
                          "%" PRIu32 " inputs, %" PRIu32 " outputs, %" PRIu32 " bytes",
                          sizeof(fg_op_init), c->n_in, c->n_out, c->params_len);
    fg_op_init p;
    memcpy(&p, c->params, sizeof p);
    if (g->ready && same_init(&p, &g->init)) return FG_OK;
    fg_opt_config cfg;
    fg_status st = fg_op_model_config(&p.model, "DEVICE_INIT", &cfg);
    if (st) return st;
    if (p.max_rows < 1 || p.max_rows > (1u << 24))
        return fg_err_set(FG_EINPUT, "DEVICE_INIT: max_rows=%" PRIu32 " must be in [1, %u]", p.max_rows, 1u << 24);
    if (p.arena_bytes < 1) return fg_err_set(FG_EINPUT, "DEVICE_INIT: arena_bytes must be > 0");
    void *base = NULL;
    uint64_t size = 0;
    st = g->be->device_init(g->ctx, &p, &cfg, &base, &size);
    fg_worker_set_device(w, base, size);
    if (st == FG_OK) {
        g->init = p;
        g->ready = 1;
    } else if (!base) {
        g->ready = 0;
    }
    return st;
}

fg_status fg_gpu_op(fg_worker *w, const fg_msg *cmd) {
    gpu_state *g = fg_worker_ctx(w);
    const fg_backend *be = g->be;
    fg_op_args a;
    if (!g->ready)
        return fg_err_set(FG_EINPUT, "%s before DEVICE_INIT: the device has no arena", fg_op_name(cmd->u.compute.op));
    /* the step against the device first: a size mismatch it explains
     * would otherwise be reported as one of the handles */
    const fg_msg_compute *mc = &cmd->u.compute;
    if (mc->params_len == sizeof(fg_op_step)) {
        fg_op_step p;
        memcpy(&p, mc->params, sizeof p);
        if (memcmp(&p.model, &g->init.model, sizeof p.model))
            return fg_err_set(FG_EINPUT, "%s: the step's model differs from DEVICE_INIT's", fg_op_name(mc->op));
        if ((uint64_t)p.B * p.S > g->init.max_rows)
            return fg_err_set(FG_EINPUT, "%s: B*S = %" PRIu32 "*%" PRIu32 " rows exceed DEVICE_INIT's max_rows %" PRIu32,
                              fg_op_name(mc->op), p.B, p.S, g->init.max_rows);
    }
    fg_status st = fg_op_args_parse(w, cmd, &a);
    if (st) return st;
    void *c = g->ctx;
    switch (a.op) {
    case FG_OP_EMBED: return be->embed(c, &a, a.in[0], a.out[0]);
    case FG_OP_ATTN: return be->attn(c, &a, a.in[0], a.in[2], a.in[3], a.out[0]);
    case FG_OP_ATTN_QKV: return be->attn_qkv(c, &a, a.in[0], a.out[0], a.out[1], a.out[2]);
    case FG_OP_ATTN_OUT: return be->attn_out(c, &a, a.in[0], a.in[1], a.out[0]);
    case FG_OP_MLP: return be->mlp(c, &a, a.in[0], a.out[0]);
    case FG_OP_LAYER:
        if ((st = be->attn(c, &a, a.in[0], a.in[2], a.in[3], a.out[0]))) return st;
        return be->mlp(c, &a, a.out[0], a.out[0]);
    case FG_OP_LM_HEAD: return be->lm_head(c, &a, a.in[0], a.out[0]);
    case FG_OP_SAMPLE: return be->sample(c, &a, a.in[0], a.in[1], a.out[0]);
    default: return fg_err_set(FG_EINPUT, "%s does not run on the gpu worker", a.name);
    }
}

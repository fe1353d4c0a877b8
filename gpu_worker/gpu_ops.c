/* gpu_ops.c - the gpu_worker's commands (see gpu_ops.h): decode and check
 * them, then call the backend chosen at start. Everything the coordinator
 * can get wrong is caught here or in fg_op_args, so backends see only
 * well-formed work: DEVICE_INIT came first, the step's model is
 * DEVICE_INIT's, B*S fits the workspace, every handle has the bytes its
 * slot's shape implies and every device range lies inside the arena.
 * Commands of one stream run in order on one executor thread
 * (worker_main.c); the three streams share this state, which only
 * DEVICE_INIT (a barrier: it runs alone) writes. */
#include "gpu_ops.h"

#include <inttypes.h>
#include <string.h>

#include "fg_backend.h"
#include "fg_fmt.h"
#include "fg_devsize.h"

typedef struct {
    const fg_backend *be;
    void *ctx;
    int ready;          /* a DEVICE_INIT succeeded and its arena is there */
    fg_op_init init;    /* its params */
} gpu_state;

static const char *device_name;   /* --device; NULL: fg_devsize_default() */

int fg_gpu_option(const char *flag, const char *val) {
    if (strcmp(flag, "--device")) return 0;
    if (!val) {
        fprintf(stderr, "flexgen-gpu-worker: --device needs a backend name (host or cuda)\n");
        return -1;
    }
    device_name = val;
    return 2;
}

fg_status fg_gpu_open(fg_worker *w) {
    const char *name = device_name ? device_name : fg_devsize_default();
    const fg_backend *be = fg_backend_find(name);
    if (!be) return FG_EINPUT;
    gpu_state *g = fg_xcalloc(1, sizeof *g);
    g->be = be;
    char info[FG_MSG_INFO_MAX + 1];
    fg_status st = be->open(&g->ctx, info, sizeof info);
    if (st) {
        free(g);
        return st;
    }
    fg_info("%s", info);
    fg_worker_set_info(w, info);
    fg_worker_set_ctx(w, g);
    return FG_OK;
}

void fg_gpu_close(fg_worker *w) {
    gpu_state *g = fg_worker_ctx(w);
    if (!g) return;
    g->be->close(g->ctx);
    free(g);
    fg_worker_set_ctx(w, NULL);
}

fg_status fg_gpu_on_map(fg_worker *w, void *base, uint64_t size) {
    gpu_state *g = fg_worker_ctx(w);
    return g->be->register_host ? g->be->register_host(g->ctx, base, size) : FG_OK;
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
    fg_model_config cfg;
    fg_status st = fg_config_from_desc(&p.model, "DEVICE_INIT", &cfg);
    if (st) return st;
    if (p.max_rows < 1 || p.max_rows > (1u << 24))
        return fg_err_set(FG_EINPUT, "DEVICE_INIT: max_rows=%" PRIu32 " must be in [1, %u]", p.max_rows, 1u << 24);
    if (p.arena_bytes < 1) return fg_err_set(FG_EINPUT, "DEVICE_INIT: arena_bytes must be > 0");
    st = g->be->device_init(g->ctx, &p, &cfg);
    if (st == FG_OK) {
        g->init = p;
        g->ready = 1;
    } else if (st == FG_ERUNTIME) {
        g->ready = 0;   /* the old arena went before the new one failed */
    }
    return st;   /* refused (FG_EINPUT): the old arena, if any, stays as it was */
}

/* Is [off, off + n) inside the arena? */
static fg_status dev_range(const gpu_state *g, fg_shm_handle h) {
    if (!g->ready) return fg_err_set(FG_EINPUT, "a device handle before DEVICE_INIT: the device has no arena");
    uint64_t size = g->init.arena_bytes;
    if (h.offset > size || h.nbytes > size - h.offset)
        return fg_err_set(FG_EINPUT, "device handle [%" PRIu64 ", +%" PRIu64 ") leaves the %" PRIu64 "-byte arena",
                          h.offset, h.nbytes, size);
    return FG_OK;
}

/* fg_op_args' resolver for device handles. */
static void *dev_ptr(void *ctx, fg_shm_handle h) {
    gpu_state *g = ctx;
    return dev_range(g, h) ? NULL : g->be->dev_ptr(g->ctx, h.offset);
}

fg_status fg_gpu_copy(fg_worker *w, const fg_msg *cmd) {
    gpu_state *g = fg_worker_ctx(w);
    const fg_backend *be = g->be;
    const fg_msg_copy *c = &cmd->u.copy;
    int stream = FG_MSG_STREAM(cmd->flags);
    fg_status st = FG_OK;
    for (uint32_t i = 0; i < c->n && !st; i++) {
        fg_shm_handle s = c->src[i], d = c->dst[i];
        if (s.nbytes != d.nbytes)
            return fg_err_set(FG_EINPUT, "COPY pair %" PRIu32 ": source has %" PRIu64 " bytes, destination %" PRIu64,
                              i, s.nbytes, d.nbytes);
        int sdev = s.segment == FG_SEG_DEVICE, ddev = d.segment == FG_SEG_DEVICE;
        void *sp = NULL, *dp = NULL;
        if ((sdev ? dev_range(g, s) : !(sp = fg_worker_ptr(w, s))) || (ddev ? dev_range(g, d) : !(dp = fg_worker_ptr(w, d))))
            return FG_EINPUT;
        if (sdev && ddev) st = be->copy_async(g->ctx, d.offset, s.offset, s.nbytes, stream);
        else if (ddev) st = be->set_async(g->ctx, d.offset, sp, s.nbytes, stream);
        else if (sdev) st = be->get_async(g->ctx, dp, s.offset, s.nbytes, stream);
        else memmove(dp, sp, s.nbytes);   /* shm to shm: the CPU's business, done here */
    }
    fg_status s2 = be->synchronize(g->ctx, stream);   /* a DONE means the bytes have landed */
    return st ? st : s2;
}

fg_status fg_gpu_op(fg_worker *w, const fg_msg *cmd) {
    gpu_state *g = fg_worker_ctx(w);
    const fg_backend *be = g->be;
    const fg_msg_compute *mc = &cmd->u.compute;
    if (!g->ready)
        return fg_err_set(FG_EINPUT, "%s before DEVICE_INIT: the device has no arena", fg_op_name(mc->op));
    /* the step against the device first: a size mismatch it explains
     * would otherwise be reported as one of the handles */
    if (mc->params_len >= sizeof(fg_op_step)) {
        fg_op_step p;
        memcpy(&p, mc->params, sizeof p);
        if (!fg_config_desc_same_shape(&p.model, &g->init.model))   /* the formats are the layer's own */
            return fg_err_set(FG_EINPUT, "%s: the step's model differs from DEVICE_INIT's", fg_op_name(mc->op));
        if ((uint64_t)p.B * p.S > g->init.max_rows)
            return fg_err_set(FG_EINPUT, "%s: B*S = %" PRIu32 "*%" PRIu32 " rows exceed DEVICE_INIT's max_rows %" PRIu32,
                              fg_op_name(mc->op), p.B, p.S, g->init.max_rows);
    }
    fg_op_args a;
    fg_status st = fg_op_args_parse(w, cmd, dev_ptr, g, &a);
    if (st) return st;
    return fg_gpu_run_op(be, g->ctx, &a, FG_MSG_STREAM(cmd->flags));
}

fg_status fg_gpu_run_op(const fg_backend *be, void *ctx, const fg_op_args *a, int stream) {
    fg_backend_op_fn fn = be->ops[FG_OPI(a->op)];
    if (!fn) return fg_err_set(FG_EINPUT, "%s does not run on the %s backend", a->name, be->name);
    for (int i = 0; i < fg_spec_count(&a->cfg); i++) {
        int f = fg_config_fmt(&a->cfg, i);
        if (fg_config_fmt_slot(i) >= 0 && !(be->formats >> f & 1))
            return fg_err_set(FG_EINPUT, "%s: the %s backend does not run %s weights (the model's %s matrices); run "
                              "it on the host backend, or from an F16 file", a->name, be->name, fg_fmt_name(f),
                              i < FG_GW_COUNT ? "model-level" : "layer");
    }
    fg_status st = fn(ctx, a);
    fg_status s2 = be->synchronize(ctx, stream);   /* a DONE means the op has ended */
    return st ? st : s2;
}

/* fg_worker_ops.c - command handlers shared by several workers: COPY between
 * shm buffers, and the runtime's test ops (NOP, AXPY) that make every
 * compute path testable before the engine's own ops exist. Each writes fixed
 * outputs from fixed inputs, so running it twice changes nothing. */
#include <inttypes.h>
#include <string.h>

#include "fg_worker.h"

fg_status fg_worker_copy(fg_worker *w, const fg_msg *cmd) {
    const fg_msg_copy *c = &cmd->u.copy;
    for (uint32_t i = 0; i < c->n; i++) {
        if (c->src[i].nbytes != c->dst[i].nbytes)
            return fg_err_set(FG_EINPUT, "COPY pair %u: source has %" PRIu64 " bytes, destination %"
                              PRIu64, i, c->src[i].nbytes, c->dst[i].nbytes);
        void *src = fg_worker_ptr(w, c->src[i]);
        if (!src) return FG_EINPUT;
        void *dst = fg_worker_ptr(w, c->dst[i]);
        if (!dst) return FG_EINPUT;
        memmove(dst, src, c->src[i].nbytes);
    }
    return FG_OK;
}

fg_status fg_worker_op_nop(fg_worker *w, const fg_msg *cmd) {
    (void)w;
    (void)cmd;
    return FG_OK;
}

fg_status fg_worker_op_axpy(fg_worker *w, const fg_msg *cmd) {
    const fg_msg_compute *c = &cmd->u.compute;
    if (c->n_in != 2 || c->n_out != 1 || c->params_len != sizeof(float))
        return fg_err_set(FG_EINPUT, "AXPY takes 2 inputs, 1 output and a float alpha "
                          "(got %u, %u, %u bytes)", c->n_in, c->n_out, c->params_len);
    uint64_t n = c->out[0].nbytes;
    if (n % sizeof(float) || c->in[0].nbytes != n || c->in[1].nbytes != n)
        return fg_err_set(FG_EINPUT, "AXPY: x, y and out must be the same whole number of floats");
    const float *x = fg_worker_ptr(w, c->in[0]);   /* (n/4,) */
    const float *y = fg_worker_ptr(w, c->in[1]);   /* (n/4,) */
    float *out = fg_worker_ptr(w, c->out[0]);      /* (n/4,) */
    if (!x || !y || !out) return FG_EINPUT;
    float alpha;
    memcpy(&alpha, c->params, sizeof alpha);
    for (uint64_t i = 0; i < n / sizeof(float); i++) out[i] = alpha * x[i] + y[i];
    return FG_OK;
}

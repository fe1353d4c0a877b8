/* moe_cpu.c - the cpu_worker's MOE_CPU: the experts of a sparse layer that
 * live in CPU memory computed where they are (FlexGen's idea for attention,
 * applied to experts): the batch's hidden state comes over, and each routed
 * row's output of one of the CPU tier's experts goes back, (B*S, k, H) fp32,
 * instead of the experts' weights crossing to the device. The device's
 * MLP_SPLIT sums them with the rest in MLP's order (kernels/fg_moe.h), so
 * the layer's result does not depend on which side computed an expert.
 *
 * Scratch (the norm's output, the router's, gathered rows, an expert's
 * gate and up) is kept by the thread between commands and grown as needed:
 * a fresh block each command would be first-touched pages each time, and
 * failing to grow it is an ERROR reply, not an exit. */
#include <stdlib.h>
#include <string.h>

#include "attn_core.h"
#include "fg_fwd.h"
#include "fg_moe.h"

/* The fg_opt_ws fields MOE_CPU's kernels use, for rows rows of config c. */
static fg_status scratch(const fg_model_config *c, int rows, fg_opt_ws *ws) {
    static _Thread_local float *buf;
    static _Thread_local size_t cap;
    size_t a = (size_t)rows * c->hidden, ff = (size_t)rows * fg_opt_ws_ff(c), moe = fg_moe_ws_floats(c, rows);
    size_t need = (a + ff + moe) * sizeof(float);
    if (need > cap) {
        float *nb = NULL;
        if (posix_memalign((void **)&nb, 64, need))
            return fg_err_set(FG_ERUNTIME, "MOE_CPU: cannot allocate %zu bytes of fp32 scratch", need);
        free(buf);
        buf = memset(nb, 0, need), cap = need;
    }
    *ws = (fg_opt_ws){.max_rows = rows, .a = buf, .ff = buf + a, .moe = buf + a + ff};
    return FG_OK;
}

/* MOE_CPU: in h, ln2, router, the band's stacks (XW); out y. */
fg_status fg_cpu_moe_run(const fg_op_args *a) {
    const fg_half *h16 = a->in[0];   /* (B*S, H) */
    float *y = a->out[0];            /* (B*S, k, H): the band's choices written */
    int rows = a->st.B * a->st.S;
    if (!a->lw.w[FG_LW_ROUTER_W]) return fg_err_set(FG_EINPUT, "MOE_CPU: the layer has no router (not a sparse layer)");
    if (!a->x_n) return FG_OK;
    fg_opt_ws ws;
    fg_status st = scratch(&a->cfg, rows, &ws);
    if (st) return st;
    /* h widened (fg_fwd_moe_band normalises it into ws.a) */
    static _Thread_local float *hf;
    static _Thread_local size_t hcap;
    size_t n = (size_t)rows * a->cfg.hidden;
    if (n > hcap) {
        float *nb = NULL;
        if (posix_memalign((void **)&nb, 64, n * sizeof(float)))
            return fg_err_set(FG_ERUNTIME, "MOE_CPU: cannot allocate %zu bytes for h", n * sizeof(float));
        free(hf);
        hf = nb, hcap = n;
    }
    fg_half_to_float_n(h16, hf, n);
    fg_fwd_moe_band(y, hf, &a->st, &a->cfg, &a->lw, &ws, a->x_lo, a->x_n);
    return FG_OK;
}

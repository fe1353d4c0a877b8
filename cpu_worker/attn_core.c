/* attn_core.c - the cpu_worker's ops, by the op table: FG_OP_ATTN_CORE
 * (cpu_cache_compute): the step's k, v into a CPU-resident KV cache, then
 * attention of q over it, so only q, k, v and ctx (B*S, H) cross between the
 * GPU and the CPU tier, never the cache. The cache and k, v are the kv
 * heads' (KV*d wide), q and ctx the query heads' (A*d).
 *
 * Numerics: q, k, v arrive fp16 (fg_fwd_attn_qkv rounds them) and widen
 * exactly; fg_fwd_attn_core is the function the reference engine's attention
 * block calls, and it rounds ctx to fp16, so narrowing it loses nothing. */
#include "attn_core.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "fg_op_args.h"

/* ATTN_CORE: in q, k, v, kc, vc, mask; out ctx. */
fg_status fg_cpu_attn_core_run(const fg_op_args *a) {
    const fg_half *q16 = a->in[0], *k16 = a->in[1], *v16 = a->in[2];  /* (B*S, A*d), (B*S, KV*d) x 2 */
    fg_half *kc = a->in[3], *vc = a->in[4];                          /* (Tmax, B, KV*d), written at [past, past+S) */
    fg_half *ctx16 = a->out[0];                                      /* (B*S, A*d) */
    size_t n = (size_t)a->st.B * a->st.S * (size_t)fg_config_q_dim(&a->cfg);    /* q and ctx */
    size_t nk = (size_t)a->st.B * a->st.S * (size_t)fg_config_kv_dim(&a->cfg);  /* k and v (<= n) */
    /* q, k, v, ctx fp32, one block, kept by the thread between commands:
     * allocated per command, a decode step's block could be fresh pages
     * each time, and a page's first touch is dear (docs/ARCHITECTURE.md,
     * section 1). Failing to grow it is an ERROR, not an exit. */
    static _Thread_local float *buf;
    static _Thread_local size_t cap;
    size_t need = 4 * n * sizeof(float);
    if (need > cap) {
        float *nb = NULL;
        if (posix_memalign((void **)&nb, 64, need))
            return fg_err_set(FG_ERUNTIME, "ATTN_CORE: cannot allocate %zu bytes of fp32 scratch", need);
        free(buf);
        buf = memset(nb, 0, need), cap = need;
    }
    float *q = buf, *k = q + n, *v = k + n, *ctx = v + n;
    fg_half_to_float_n(q16, q, n);
    fg_half_to_float_n(k16, k, nk);
    fg_half_to_float_n(v16, v, nk);
    fg_fwd_attn_core(ctx, q, k, v, kc, vc, a->Tmax, &a->st, &a->cfg);
    fg_float_to_half_n(ctx, ctx16, n);
    return FG_OK;
}

const fg_cpu_kernel fg_cpu_kernels[FG_NUM_ENGINE_OPS] = {
    [FG_OPI(FG_OP_ATTN_CORE)] = fg_cpu_attn_core_run,
    [FG_OPI(FG_OP_MOE_CPU)] = fg_cpu_moe_run,
};

fg_status fg_cpu_op(fg_worker *w, const fg_msg *cmd) {
    fg_op_args a;
    fg_status st = fg_op_args_parse(w, cmd, NULL, NULL, &a);
    if (st) return st;
    fg_cpu_kernel k = fg_cpu_kernels[FG_OPI(a.op)];
    return k ? k(&a) : fg_err_set(FG_EINPUT, "%s does not run on the cpu worker", a.name);
}

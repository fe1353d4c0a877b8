/* fg_engine_flex.c - the offloading engine (see fg_engine_flex.h).
 *
 * Plan: every tensor gets a home by the policy (device arena for the GPU
 * tier, shared memory for the CPU tier) and, when it is not on the GPU, a
 * place in one of two device slots it is loaded into before use (weights
 * per layer, KV cache and activations per GPU batch). The plan is computed
 * once, by plan_build(), before anything runs: budgets are checked against
 * it and refused with the numbers.
 *
 * Schedule (zig-zag, DESIGN.md §5): for each token, for each layer (the
 * embedding and the LM head count as layers), the layer's weights are
 * loaded once and serve all GPU batches of the block; `--schedule row` runs
 * one batch through all layers instead, loading each layer for every batch.
 * Commands are issued to the workers in schedule order; the workers report
 * each command's start, end and busy time.
 *
 * Not yet: the disk tier (policies with disk percentages are refused), and
 * overlapping loads and stores with compute (every command is waited for). */
#include "fg_engine_flex.h"

#include <stdio.h>
#include <string.h>

#include "fg_engine_ops.h"
#include "fg_opt.h"
#include "fg_super.h"

/* ---- plan ---------------------------------------------------------------- */

enum { SEG_DEV, SEG_W, SEG_WGPU, SEG_KV, SEG_ACT, SEG_IO, NSEG };
static const char *seg_name[NSEG] = {"device", "w", "wgpu", "kv", "act", "io"};

typedef struct {
    int seg;
    uint64_t off, n;
} loc;

typedef struct {
    const fg_opt_config *c;
    const fg_spec *sp;
    fg_policy p;
    int L, K, gbs, S, G, Tmax;
    uint64_t used[NSEG];          /* bump allocator per segment */

    fg_tier *wtier;               /* (nspec) */
    loc *whome;                   /* (nspec) device (GPU) or SEG_W (CPU) */
    loc *wsrc;                    /* (nspec) SEG_WGPU host copy of GPU-resident weights */
    uint64_t *wslot_off;          /* (nspec) offset inside a weight slot */
    uint64_t wslot_bytes;
    loc wslot[2];

    fg_tier *ctier;               /* (L) */
    loc *kc, *vc;                 /* (L*K) home of each (layer, batch) cache */
    loc kslot[2], vslot[2];       /* device slots for CPU-tier cache */

    fg_tier atier;
    loc *hhome;                   /* (K) */
    loc hslot[2];                 /* device slots when activations live on the CPU */

    loc *ids_dev, *mask_dev, *ids_io, *mask_io, *logits_io;   /* (K) */
    loc logits_dev;
    loc q_dev, k_dev, v_dev, ctx_dev, q_io, k_io, v_io, ctx_io;   /* CPU attention exchange */
    uint64_t ws_bytes;
} plan;

static loc place(plan *pl, int seg, uint64_t n) {
    uint64_t start = seg == SEG_DEV ? 0 : FG_SHM_HEADER_BYTES;
    uint64_t off = pl->used[seg] < start ? start : pl->used[seg];
    off = (off + 4095) & ~(uint64_t)4095;
    pl->used[seg] = off + n;
    return (loc){seg, off, n};
}

static void plan_free(plan *pl) {
    free(pl->wtier); free(pl->whome); free(pl->wsrc); free(pl->wslot_off);
    free(pl->ctier); free(pl->kc); free(pl->vc); free(pl->hhome);
    free(pl->ids_dev); free(pl->mask_dev); free(pl->ids_io); free(pl->mask_io); free(pl->logits_io);
    memset(pl, 0, sizeof *pl);
}

static const char *human(uint64_t b, char *buf) {
    if (b >= (1ull << 30)) sprintf(buf, "%.2f GiB", b / (double)(1ull << 30));
    else sprintf(buf, "%.1f MiB", b / (double)(1ull << 20));
    return buf;
}

static fg_status plan_build(plan *pl, const fg_opt_config *c, const fg_spec *sp, const fg_flex_opts *fo, int S, int G) {
    memset(pl, 0, sizeof *pl);
    const fg_policy *p = &fo->policy;
    pl->c = c, pl->sp = sp, pl->p = *p;
    pl->L = c->n_layers, pl->K = p->num_gpu_batches, pl->gbs = p->gbs, pl->S = S, pl->G = G, pl->Tmax = S + G;
    int n = fg_spec_count(c), L = pl->L, K = pl->K, B = pl->gbs, H = c->hidden;
    if (p->w_gpu + p->w_cpu < 100 || p->c_gpu + p->c_cpu < 100 || p->h_gpu + p->h_cpu < 100)
        return fg_err_set(FG_EINPUT, "--percent: the disk tier is not wired into the offloading engine yet; "
                                     "give GPU + CPU = 100 for weights, cache and activations");
    if (!(p->h_gpu == 100 || p->h_cpu == 100))
        return fg_err_set(FG_EINPUT, "--percent: activations must be all on one tier (HG 100 or HC 100), as in FlexGen");

    pl->wtier = fg_xcalloc((size_t)n, sizeof *pl->wtier);
    pl->whome = fg_xcalloc((size_t)n, sizeof *pl->whome);
    pl->wsrc = fg_xcalloc((size_t)n, sizeof *pl->wsrc);
    pl->wslot_off = fg_xcalloc((size_t)n, sizeof *pl->wslot_off);
    /* weights: homes, and offsets inside a slot for the non-GPU ones of each layer */
    for (int g = -1; g < L; g++) {
        int first = g < 0 ? 0 : fg_spec_layer(g, 0), count = g < 0 ? FG_GW_COUNT : FG_LW_COUNT;
        uint64_t slot = 0;
        for (int i = first; i < first + count; i++) {
            if (!sp[i].present) continue;
            uint64_t bytes = 2 * (uint64_t)fg_spec_numel(&sp[i]);
            pl->wtier[i] = fg_policy_weight_tier(p, c, sp, g, i);
            if (pl->wtier[i] == FG_TIER_GPU) {
                pl->whome[i] = place(pl, SEG_DEV, bytes);
                pl->wsrc[i] = place(pl, SEG_WGPU, bytes);
            } else {
                pl->whome[i] = place(pl, SEG_W, bytes);
                slot = (slot + 4095) & ~(uint64_t)4095;
                pl->wslot_off[i] = slot;
                slot += bytes;
            }
        }
        if (slot > pl->wslot_bytes) pl->wslot_bytes = slot;
    }
    for (int s = 0; s < 2; s++) pl->wslot[s] = place(pl, SEG_DEV, pl->wslot_bytes);

    /* KV cache: whole layers; one (Tmax, gbs, H) fp16 block per (layer, batch) */
    uint64_t cbytes = 2ull * pl->Tmax * B * H;
    pl->ctier = fg_xcalloc((size_t)L, sizeof *pl->ctier);
    pl->kc = fg_xcalloc((size_t)L * K, sizeof *pl->kc);
    pl->vc = fg_xcalloc((size_t)L * K, sizeof *pl->vc);
    int any_cpu_cache = 0;
    for (int l = 0; l < L; l++) {
        pl->ctier[l] = fg_policy_cache_tier(p, c, l);
        any_cpu_cache |= pl->ctier[l] != FG_TIER_GPU;
        for (int k = 0; k < K; k++) {
            int seg = pl->ctier[l] == FG_TIER_GPU ? SEG_DEV : SEG_KV;
            pl->kc[l * K + k] = place(pl, seg, cbytes);
            pl->vc[l * K + k] = place(pl, seg, cbytes);
        }
    }
    if (any_cpu_cache)
        for (int s = 0; s < 2; s++) pl->kslot[s] = place(pl, SEG_DEV, cbytes), pl->vslot[s] = place(pl, SEG_DEV, cbytes);

    /* activations: the hidden state of each batch between layers */
    uint64_t hbytes = 2ull * B * S * H;
    pl->atier = p->h_gpu == 100 ? FG_TIER_GPU : FG_TIER_CPU;
    pl->hhome = fg_xcalloc((size_t)K, sizeof *pl->hhome);
    for (int k = 0; k < K; k++) pl->hhome[k] = place(pl, pl->atier == FG_TIER_GPU ? SEG_DEV : SEG_ACT, hbytes);
    if (pl->atier != FG_TIER_GPU)
        for (int s = 0; s < 2; s++) pl->hslot[s] = place(pl, SEG_DEV, hbytes);

    /* per-batch inputs and outputs */
    pl->ids_dev = fg_xcalloc((size_t)K, sizeof(loc)); pl->mask_dev = fg_xcalloc((size_t)K, sizeof(loc));
    pl->ids_io = fg_xcalloc((size_t)K, sizeof(loc)); pl->mask_io = fg_xcalloc((size_t)K, sizeof(loc));
    pl->logits_io = fg_xcalloc((size_t)K, sizeof(loc));
    for (int k = 0; k < K; k++) {
        pl->ids_dev[k] = place(pl, SEG_DEV, 4ull * B * S);
        pl->mask_dev[k] = place(pl, SEG_DEV, (uint64_t)B * pl->Tmax);
        pl->ids_io[k] = place(pl, SEG_IO, 4ull * B * S);
        pl->mask_io[k] = place(pl, SEG_IO, (uint64_t)B * pl->Tmax);
        pl->logits_io[k] = place(pl, SEG_IO, 4ull * B * c->vocab_size);
    }
    pl->logits_dev = place(pl, SEG_DEV, 4ull * B * c->vocab_size);
    if (p->cpu_cache_compute && any_cpu_cache) {
        uint64_t x = 2ull * B * H;   /* decode: one new token per sequence */
        pl->q_dev = place(pl, SEG_DEV, x), pl->k_dev = place(pl, SEG_DEV, x);
        pl->v_dev = place(pl, SEG_DEV, x), pl->ctx_dev = place(pl, SEG_DEV, x);
        pl->q_io = place(pl, SEG_IO, x), pl->k_io = place(pl, SEG_IO, x);
        pl->v_io = place(pl, SEG_IO, x), pl->ctx_io = place(pl, SEG_IO, x);
    }
    /* the backend's fp32 workspace: fg_opt's buffers and the step's hidden
     * state in fp32 (gpu_worker/backend_host.c) */
    pl->ws_bytes = fg_opt_ws_bytes(c, B * S) + 4ull * B * S * H;

    uint64_t gpu = pl->used[SEG_DEV] + pl->ws_bytes, shm = 0;
    for (int s = 1; s < NSEG; s++) shm += pl->used[s];
    char a[32], b[32];
    if (fo->gpu_mem && gpu > fo->gpu_mem)
        return fg_err_set(FG_EINPUT, "the policy needs %s of GPU memory (weights, cache and activations placed "
                                     "there, two weight slots of %s, workspace %s) but --gpu-mem is %s; lower the GPU "
                                     "percentages or the batch size", human(gpu, a), human(pl->wslot_bytes, b),
                          human(pl->ws_bytes, (char[32]){0}), human(fo->gpu_mem, (char[32]){0}));
    if (fo->cpu_mem && shm > fo->cpu_mem)
        return fg_err_set(FG_EINPUT, "the policy needs %s of CPU memory (shared memory for CPU-tier weights, cache, "
                                     "activations and staging) but --cpu-mem is %s", human(shm, a), human(fo->cpu_mem, b));
    return FG_OK;
}

/* ---- running commands ------------------------------------------------------ */

typedef struct {
    plan pl;
    fg_super *sup;
    uint32_t seg_idx[NSEG];
    fg_wsrc *ws;
    fg_flex_stats *fs;
    int restarted;
} engine;

static fg_shm_handle H(const engine *e, loc l) {
    return (fg_shm_handle){.segment = l.seg == SEG_DEV ? FG_SEG_DEVICE : e->seg_idx[l.seg], .offset = l.off,
                           .nbytes = l.n};
}

static fg_shm_handle Hsub(const engine *e, loc l, uint64_t off, uint64_t n) {
    fg_shm_handle h = H(e, l);
    h.offset += off;
    h.nbytes = n;
    return h;
}

static void *P(engine *e, loc l) { return fg_super_ptr(e->sup, H(e, l)); }

static fg_status run(engine *e, fg_role role, const fg_msg *m) {
    uint64_t seq;
    fg_status st = fg_super_submit(e->sup, role, m, NULL, &seq);
    if (st) return st;
    fg_super_done d;
    st = fg_super_wait(e->sup, seq, -1, &d);
    e->fs->commands++;
    e->fs->busy_s[role] += (double)(d.end_ns - d.start_ns) * 1e-9;
    if (m->type == FG_MSG_COPY)
        for (uint32_t i = 0; i < m->u.copy.n; i++) {
            if (m->u.copy.dst[i].segment == FG_SEG_DEVICE) e->fs->h2d_bytes += m->u.copy.dst[i].nbytes;
            else e->fs->d2h_bytes += m->u.copy.dst[i].nbytes;
        }
    if (st) {
        char what[160];
        fg_msg_describe(m, what, sizeof what);
        return fg_err_set(FG_ERUNTIME, "%s worker failed %s: %s", fg_role_name(role), what,
                          d.error[0] ? d.error : fg_err_msg());
    }
    return FG_OK;
}

static fg_status copy1(engine *e, fg_shm_handle src, fg_shm_handle dst) {
    if (!src.nbytes) return FG_OK;
    fg_msg m;
    fg_msg_init(&m, FG_MSG_COPY);
    fg_msg_copy_add(&m, src, dst);
    return run(e, FG_ROLE_GPU, &m);
}

static fg_op_model op_model(const fg_opt_config *c) {
    return (fg_op_model){(uint32_t)c->vocab_size, (uint32_t)c->hidden, (uint32_t)c->n_heads, (uint32_t)c->ffn_dim,
                         (uint32_t)c->max_pos, (uint32_t)c->word_embed_proj_dim, (uint32_t)c->pre_ln};
}

/* The device arena, and the GPU-resident weights uploaded from their host copy. */
static fg_status gpu_setup(engine *e) {
    const plan *pl = &e->pl;
    fg_msg m;
    fg_msg_init(&m, FG_MSG_COMPUTE);
    m.u.compute.op = FG_OP_DEVICE_INIT;
    fg_op_init init = {.model = op_model(pl->c), .arena_bytes = pl->used[SEG_DEV],
                       .budget_bytes = pl->used[SEG_DEV] + pl->ws_bytes, .max_rows = (uint32_t)(pl->gbs * pl->S)};
    fg_msg_compute_set_params(&m, &init, sizeof init);
    fg_status st = run(e, FG_ROLE_GPU, &m);
    for (int i = 0; !st && i < fg_spec_count(pl->c); i++)
        if (pl->sp[i].present && pl->wtier[i] == FG_TIER_GPU) st = copy1(e, H(e, pl->wsrc[i]), H(e, pl->whome[i]));
    return st;
}

/* A restarted gpu worker lost its arena: the block in progress is redone. */
static fg_status on_restore(fg_super *sup, fg_role role, void *ctx) {
    (void)sup;
    engine *e = ctx;
    if (role == FG_ROLE_GPU) {
        e->restarted = 1;
        e->fs->gpu_restarts++;
    }
    return FG_OK;
}

/* Handle of weight idx for a compute on group g whose weights sit in slot s. */
static fg_shm_handle W(const engine *e, int idx, int s) {
    const plan *pl = &e->pl;
    if (!pl->sp[idx].present) return (fg_shm_handle){.segment = FG_SEG_DEVICE, .offset = 0, .nbytes = 0};
    if (pl->wtier[idx] == FG_TIER_GPU) return H(e, pl->whome[idx]);
    return Hsub(e, pl->wslot[s], pl->wslot_off[idx], pl->whome[idx].n);
}

/* Load group g's (-1: model-level) non-GPU weights into slot s. */
static fg_status load_weights(engine *e, int g, int s) {
    const plan *pl = &e->pl;
    int first = g < 0 ? 0 : fg_spec_layer(g, 0), count = g < 0 ? FG_GW_COUNT : FG_LW_COUNT;
    fg_msg m;
    fg_msg_init(&m, FG_MSG_COPY);
    for (int i = first; i < first + count; i++)
        if (pl->sp[i].present && pl->wtier[i] != FG_TIER_GPU)
            fg_msg_copy_add(&m, H(e, pl->whome[i]), W(e, i, s));
    return m.u.copy.n ? run(e, FG_ROLE_GPU, &m) : FG_OK;
}

typedef struct {
    int i, k, S_k;      /* token, batch, the batch's prompt length */
} step_ctx;

static fg_op_step op_step(const engine *e, const step_ctx *sc) {
    fg_op_step s = {.model = op_model(e->pl.c), .B = (uint32_t)e->pl.gbs, .Tmax = (uint32_t)e->pl.Tmax,
                    .mask_stride = (uint32_t)e->pl.Tmax};
    s.S = sc->i == 0 ? (uint32_t)sc->S_k : 1;
    s.past = sc->i == 0 ? 0 : (uint32_t)(sc->S_k + sc->i - 1);
    return s;
}

static void compute_msg(fg_msg *m, int op, int layer, int batch, const fg_op_step *st) {
    fg_msg_init(m, FG_MSG_COMPUTE);
    m->u.compute.op = (uint32_t)op;
    m->u.compute.layer = (uint32_t)layer;
    m->u.compute.gpu_batch = (uint32_t)batch;
    fg_msg_compute_set_params(m, st, sizeof *st);
}

/* Rows [t0, t1) of a time-major (Tmax, gbs, H) cache block. */
static uint64_t cache_rows(const plan *pl, int t) { return 2ull * t * pl->gbs * pl->c->hidden; }

/* Layer j of the schedule (0 embedding, 1..L decoder layers, L+1 LM head)
 * for batch k at token i; weights of j are in slot s. */
static fg_status compute(engine *e, int j, int s, const step_ctx *sc) {
    const plan *pl = &e->pl;
    int k = sc->k, L = pl->L, K = pl->K;
    fg_op_step st = op_step(e, sc);
    uint64_t hb = 2ull * st.B * st.S * pl->c->hidden;
    int act_gpu = pl->atier == FG_TIER_GPU;
    fg_shm_handle h = act_gpu ? Hsub(e, pl->hhome[k], 0, hb) : Hsub(e, pl->hslot[k % 2], 0, hb);
    fg_shm_handle mask = H(e, pl->mask_dev[k]);
    fg_msg m;
    fg_status rc;
    if (j == 0) {
        compute_msg(&m, FG_OP_EMBED, j, k, &st);
        fg_msg_compute_add_in(&m, Hsub(e, pl->ids_dev[k], 0, 4ull * st.B * st.S));
        fg_msg_compute_add_in(&m, mask);
        fg_msg_compute_add_in(&m, W(e, FG_GW_EMBED_TOKENS, s));
        fg_msg_compute_add_in(&m, W(e, FG_GW_EMBED_POS, s));
        fg_msg_compute_add_in(&m, W(e, FG_GW_PROJ_IN, s));
        fg_msg_compute_add_out(&m, h);
        if ((rc = run(e, FG_ROLE_GPU, &m))) return rc;
        return act_gpu ? FG_OK : copy1(e, h, Hsub(e, pl->hhome[k], 0, hb));
    }
    if (!act_gpu && (rc = copy1(e, Hsub(e, pl->hhome[k], 0, hb), h))) return rc;
    if (j == L + 1) {
        compute_msg(&m, FG_OP_LM_HEAD, j, k, &st);
        fg_msg_compute_add_in(&m, h);
        fg_msg_compute_add_in(&m, W(e, FG_GW_FINAL_LN_W, s));
        fg_msg_compute_add_in(&m, W(e, FG_GW_FINAL_LN_B, s));
        fg_msg_compute_add_in(&m, W(e, FG_GW_PROJ_OUT, s));
        fg_msg_compute_add_in(&m, W(e, FG_GW_EMBED_TOKENS, s));
        fg_msg_compute_add_out(&m, H(e, pl->logits_dev));
        if ((rc = run(e, FG_ROLE_GPU, &m))) return rc;
        return copy1(e, H(e, pl->logits_dev), H(e, pl->logits_io[k]));
    }
    int l = j - 1;
    int cache_gpu = pl->ctier[l] == FG_TIER_GPU, cpu_attn = !cache_gpu && pl->p.cpu_cache_compute && sc->i > 0;
    loc kh = pl->kc[l * K + k], vh = pl->vc[l * K + k];
    if (cpu_attn) {
        /* q, k, v on the GPU; attention on the CPU worker where the cache is */
        uint64_t xb = 2ull * st.B * pl->c->hidden;
        compute_msg(&m, FG_OP_ATTN_QKV, j, k, &st);
        fg_msg_compute_add_in(&m, h);
        static const int qkv_w[] = {FG_LW_Q_W, FG_LW_Q_B, FG_LW_K_W, FG_LW_K_B, FG_LW_V_W, FG_LW_V_B,
                                    FG_LW_LN1_W, FG_LW_LN1_B};
        for (size_t t = 0; t < sizeof qkv_w / sizeof qkv_w[0]; t++)
            fg_msg_compute_add_in(&m, W(e, fg_spec_layer(l, qkv_w[t]), s));
        fg_msg_compute_add_out(&m, H(e, pl->q_dev));
        fg_msg_compute_add_out(&m, H(e, pl->k_dev));
        fg_msg_compute_add_out(&m, H(e, pl->v_dev));
        if ((rc = run(e, FG_ROLE_GPU, &m))) return rc;
        fg_msg c;
        fg_msg_init(&c, FG_MSG_COPY);
        fg_msg_copy_add(&c, Hsub(e, pl->q_dev, 0, xb), Hsub(e, pl->q_io, 0, xb));
        fg_msg_copy_add(&c, Hsub(e, pl->k_dev, 0, xb), Hsub(e, pl->k_io, 0, xb));
        fg_msg_copy_add(&c, Hsub(e, pl->v_dev, 0, xb), Hsub(e, pl->v_io, 0, xb));
        if ((rc = run(e, FG_ROLE_GPU, &c))) return rc;
        fg_msg a;
        fg_msg_init(&a, FG_MSG_CPU_ATTN);
        a.u.compute.op = FG_OP_ATTN_CORE;
        a.u.compute.layer = (uint32_t)j;
        a.u.compute.gpu_batch = (uint32_t)k;
        fg_msg_compute_set_params(&a, &st, sizeof st);
        fg_msg_compute_add_in(&a, H(e, pl->q_io));
        fg_msg_compute_add_in(&a, H(e, pl->k_io));
        fg_msg_compute_add_in(&a, H(e, pl->v_io));
        fg_msg_compute_add_in(&a, H(e, kh));
        fg_msg_compute_add_in(&a, H(e, vh));
        fg_msg_compute_add_in(&a, H(e, pl->mask_io[k]));
        fg_msg_compute_add_out(&a, H(e, pl->ctx_io));
        if ((rc = run(e, FG_ROLE_CPU, &a))) return rc;
        if ((rc = copy1(e, H(e, pl->ctx_io), H(e, pl->ctx_dev)))) return rc;
        compute_msg(&m, FG_OP_ATTN_OUT, j, k, &st);
        fg_msg_compute_add_in(&m, h);
        fg_msg_compute_add_in(&m, H(e, pl->ctx_dev));
        static const int out_w[] = {FG_LW_O_W, FG_LW_O_B, FG_LW_LN1_W, FG_LW_LN1_B};
        for (size_t t = 0; t < 4; t++) fg_msg_compute_add_in(&m, W(e, fg_spec_layer(l, out_w[t]), s));
        fg_msg_compute_add_out(&m, h);
        if ((rc = run(e, FG_ROLE_GPU, &m))) return rc;
    } else {
        fg_shm_handle kd = cache_gpu ? H(e, kh) : H(e, pl->kslot[k % 2]);
        fg_shm_handle vd = cache_gpu ? H(e, vh) : H(e, pl->vslot[k % 2]);
        if (!cache_gpu && st.past > 0) {   /* load the cache prefix [0, past) */
            fg_msg c;
            fg_msg_init(&c, FG_MSG_COPY);
            fg_msg_copy_add(&c, Hsub(e, kh, 0, cache_rows(pl, (int)st.past)), Hsub(e, pl->kslot[k % 2], 0, cache_rows(pl, (int)st.past)));
            fg_msg_copy_add(&c, Hsub(e, vh, 0, cache_rows(pl, (int)st.past)), Hsub(e, pl->vslot[k % 2], 0, cache_rows(pl, (int)st.past)));
            if ((rc = run(e, FG_ROLE_GPU, &c))) return rc;
        }
        compute_msg(&m, FG_OP_ATTN, j, k, &st);
        fg_msg_compute_add_in(&m, h);
        fg_msg_compute_add_in(&m, mask);
        fg_msg_compute_add_in(&m, kd);
        fg_msg_compute_add_in(&m, vd);
        static const int attn_w[] = {FG_LW_Q_W, FG_LW_Q_B, FG_LW_K_W, FG_LW_K_B, FG_LW_V_W, FG_LW_V_B,
                                     FG_LW_O_W, FG_LW_O_B, FG_LW_LN1_W, FG_LW_LN1_B};
        for (size_t t = 0; t < sizeof attn_w / sizeof attn_w[0]; t++)
            fg_msg_compute_add_in(&m, W(e, fg_spec_layer(l, attn_w[t]), s));
        fg_msg_compute_add_out(&m, h);
        if ((rc = run(e, FG_ROLE_GPU, &m))) return rc;
        if (!cache_gpu) {   /* store the step's new rows [past, past+S) */
            uint64_t o = cache_rows(pl, (int)st.past), nb = cache_rows(pl, (int)st.S);
            fg_msg c;
            fg_msg_init(&c, FG_MSG_COPY);
            fg_msg_copy_add(&c, Hsub(e, pl->kslot[k % 2], o, nb), Hsub(e, kh, o, nb));
            fg_msg_copy_add(&c, Hsub(e, pl->vslot[k % 2], o, nb), Hsub(e, vh, o, nb));
            if ((rc = run(e, FG_ROLE_GPU, &c))) return rc;
        }
    }
    compute_msg(&m, FG_OP_MLP, j, k, &st);
    fg_msg_compute_add_in(&m, h);
    static const int mlp_w[] = {FG_LW_FC1_W, FG_LW_FC1_B, FG_LW_FC2_W, FG_LW_FC2_B, FG_LW_LN2_W, FG_LW_LN2_B};
    for (size_t t = 0; t < 6; t++) fg_msg_compute_add_in(&m, W(e, fg_spec_layer(l, mlp_w[t]), s));
    fg_msg_compute_add_out(&m, h);
    if ((rc = run(e, FG_ROLE_GPU, &m))) return rc;
    return act_gpu ? FG_OK : copy1(e, h, Hsub(e, pl->hhome[k], 0, hb));
}

/* ---- a block of K GPU batches ----------------------------------------------- */

static fg_status run_block(engine *e, const fg_seq_in *in, int n, int first, const fg_gen_opts *opt,
                           const fg_flex_opts *fo, fg_seq_out *out, fg_gen_stats *stats) {
    const plan *pl = &e->pl;
    const fg_opt_config *c = pl->c;
    int K = pl->K, B = pl->gbs, G = pl->G, L = pl->L, V = c->vocab_size, Tm = pl->Tmax;
    int S_k[64];
    FG_ASSERT(K <= 64);
    fg_status st = FG_OK;
    /* inputs: each batch left-padded to its own longest prompt, as the
     * reference engine pads a batch; rows past the prompts are padding */
    for (int k = 0; k < K; k++) {
        int32_t *ids = P(e, pl->ids_io[k]);
        uint8_t *mask = P(e, pl->mask_io[k]);
        S_k[k] = 1;
        for (int b = 0; b < B; b++) {
            int q = first + k * B + b;
            if (q < n && in[q].len > S_k[k]) S_k[k] = in[q].len;
        }
        memset(mask, 0, (size_t)B * Tm);
        for (int b = 0; b < B; b++) {
            int q = first + k * B + b, len = q < n ? in[q].len : 1, pad = S_k[k] - len;
            for (int t = 0; t < S_k[k]; t++) ids[b * S_k[k] + t] = t < pad || q >= n ? c->pad_id : in[q].ids[t - pad];
            for (int t = pad; t < Tm; t++) mask[(size_t)b * Tm + t] = 1;
            if (q < n) {
                out[q].ids = fg_xcalloc((size_t)(G ? G : 1), sizeof(int32_t));
                out[q].n = 0;
                out[q].finish = FG_FINISH_LENGTH;
            }
        }
        if ((st = copy1(e, Hsub(e, pl->ids_io[k], 0, 4ull * B * S_k[k]), Hsub(e, pl->ids_dev[k], 0, 4ull * B * S_k[k]))) ||
            (st = copy1(e, H(e, pl->mask_io[k]), H(e, pl->mask_dev[k]))))
            return st;
    }
    fg_rng rng[64 * 64];
    uint8_t done[64 * 64] = {0};
    FG_ASSERT(K * B <= 64 * 64);
    for (int r = 0; r < K * B; r++) fg_rng_init(&rng[r], opt->samp.seed, (uint64_t)(first + r));
    void *scratch = fg_alloc_tensor(sizeof(float) * 2 * (size_t)V);

    for (int i = 0; i < G && !st; i++) {
        double t0 = fg_now();
        if (fo->schedule_row) {
            for (int k = 0; k < K && !st; k++)
                for (int j = 0; j <= L + 1 && !st; j++) {
                    step_ctx sc = {i, k, S_k[k]};
                    if (!(st = load_weights(e, j == 0 || j == L + 1 ? -1 : j - 1, j % 2))) st = compute(e, j, j % 2, &sc);
                }
        } else {
            for (int j = 0; j <= L + 1 && !st; j++) {
                if ((st = load_weights(e, j == 0 || j == L + 1 ? -1 : j - 1, j % 2))) break;
                for (int k = 0; k < K && !st; k++) {
                    step_ctx sc = {i, k, S_k[k]};
                    st = compute(e, j, j % 2, &sc);
                }
            }
        }
        if (st) break;
        if (e->restarted) return fg_err_set(FG_ERUNTIME, "gpu worker restarted mid-block");
        /* sample, record, and feed the next ids back */
        for (int k = 0; k < K && !st; k++) {
            const float *lg = P(e, pl->logits_io[k]);
            int32_t *ids = P(e, pl->ids_io[k]);
            for (int b = 0; b < B; b++) {
                int q = first + k * B + b, r = k * B + b;
                const float *row = lg + (size_t)b * V;
                int tok = fg_sample(row, V, &opt->samp, &rng[r], scratch);
                ids[b] = tok;
                if (q >= n) continue;
                if (opt->logits && (st = fg_npy_write(opt->logits, ((int64_t)q * G + i) * V, row, (size_t)V))) break;
                if (done[r]) continue;
                fg_seq_out *o = &out[q];
                o->ids[o->n++] = tok;
                if (!opt->ignore_eos && tok == c->eos_id) o->finish = FG_FINISH_EOS, done[r] = 1;
                else if (opt->stop && opt->stop(opt->stop_ctx, q, o->ids, o->n)) o->finish = FG_FINISH_STOP, done[r] = 1;
            }
            if (!st && i + 1 < G) st = copy1(e, Hsub(e, pl->ids_io[k], 0, 4ull * B), Hsub(e, pl->ids_dev[k], 0, 4ull * B));
        }
        double dt = fg_now() - t0;
        if (i == 0) stats->prefill_s += dt;
        else stats->decode_s += dt;
    }
    int real = n - first < K * B ? n - first : K * B;
    stats->generated += (long)real * G;
    free(scratch);
    return st;
}

/* ---- entry ------------------------------------------------------------------ */

fg_status fg_flex_default_policy(const fg_wsrc *ws, fg_flex_opts *fo, int S, int G) {
    const fg_opt_config *c = fg_wsrc_config(ws);
    fg_policy *p = &fo->policy;
    /* everything on the GPU; else weights 100, 95, ... 0 % on the GPU with
     * cache and activations on the CPU: the first that fits both budgets */
    fg_status st = FG_OK;
    for (int w = 105; w >= 0; w -= 5) {
        int all_gpu = w == 105;
        p->w_gpu = all_gpu ? 100 : w, p->w_cpu = 100 - p->w_gpu;
        p->c_gpu = all_gpu ? 100 : 0, p->c_cpu = 100 - p->c_gpu;
        p->h_gpu = all_gpu ? 100 : 0, p->h_cpu = 100 - p->h_gpu;
        plan pl;
        st = plan_build(&pl, c, fg_wsrc_specs(ws), fo, S, G);
        plan_free(&pl);
        if (st == FG_OK) return FG_OK;
    }
    char why[1024];
    snprintf(why, sizeof why, "%s", fg_err_msg());
    return fg_err_set(FG_EINPUT, "no placement fits the budgets, even with all weights on the CPU: %s", why);
}

fg_status fg_engine_flex_run(fg_wsrc *ws, const fg_seq_in *in, int n, const fg_gen_opts *opt,
                             const fg_flex_opts *fo, fg_seq_out *out, fg_gen_stats *stats, fg_flex_stats *fs) {
    memset(stats, 0, sizeof *stats);
    memset(fs, 0, sizeof *fs);
    const fg_opt_config *c = fg_wsrc_config(ws);
    int S = 1;
    for (int q = 0; q < n; q++) S = in[q].len > S ? in[q].len : S;
    engine e = {.ws = ws, .fs = fs};
    fg_status st = fg_policy_validate(&fo->policy);
    if (!st) st = plan_build(&e.pl, c, fg_wsrc_specs(ws), fo, S, opt->gen_len);
    if (st) {
        plan_free(&e.pl);
        return st;
    }
    plan *pl = &e.pl;
    fs->gpu_bytes = pl->used[SEG_DEV] + pl->ws_bytes;
    for (int s = 1; s < NSEG; s++) fs->shm_bytes += pl->used[s];
    char desc[256];
    fg_policy_describe(&fo->policy, desc, sizeof desc);
    fg_info("policy: %s; schedule %s", desc, fo->schedule_row ? "row" : "zig-zag block");

    fg_super_opts so = {.worker_dir = fo->worker_dir, .offload_dir = fo->offload_dir, .restore = on_restore,
                        .restore_ctx = &e};
    double t0 = fg_now();
    if ((st = fg_super_new(&so, &e.sup))) goto out;
    for (int s = 1; s < NSEG && !st; s++)
        if (pl->used[s]) st = fg_super_segment_new(e.sup, seg_name[s], pl->used[s], &e.seg_idx[s]);
    if (st) goto out;
    /* weights to their homes: host copies here, GPU ones uploaded by gpu_setup */
    for (int i = 0; i < fg_spec_count(c) && !st; i++) {
        if (!pl->sp[i].present) continue;
        loc home = pl->wtier[i] == FG_TIER_GPU ? pl->wsrc[i] : pl->whome[i];
        st = fg_wsrc_read(ws, i, P(&e, home));
    }
    if (!st) st = gpu_setup(&e);
    stats->load_s = fg_now() - t0;
    int block = pl->K * pl->gbs;
    for (int first = 0; first < n && !st; first += block) {
        int tries = 0;
        for (;;) {
            e.restarted = 0;
            st = run_block(&e, in, n, first, opt, fo, out, stats);
            if (!e.restarted || ++tries > 3) break;
            fg_warn("gpu worker restarted: redoing the block of prompts %d..%d", first, first + block - 1);
            for (int q = first; q < n && q < first + block; q++) free(out[q].ids), out[q].ids = NULL;
            if ((st = gpu_setup(&e))) break;
        }
    }
out:
    fg_super_destroy(&e.sup);
    plan_free(&e.pl);
    return st;
}

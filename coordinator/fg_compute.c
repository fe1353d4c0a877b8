/* fg_compute.c - FlexGen's compute(i, j, k): the ops of one unit, each
 * message built from the op table (fg_op_build) with every slot resolved
 * here, by its kind, to the unit's place in the plan. The slot lists live
 * only in the table; this file knows where each kind of tensor of a unit
 * is, and which ops a schedule layer runs. */
#include "fg_flex_int.h"

fg_op_init fg_device_init_params(const fg_plan *pl) {
    return (fg_op_init){.model = fg_config_desc_layer(pl->c, pl->sp, -1), .max_rows = (uint32_t)(pl->gbs * pl->S),
                        .arena_bytes = pl->used[SEG_DEV], .budget_bytes = fg_plan_gpu_bytes(pl)};
}

fg_op_step fg_unit_step(const fg_engine *e, const fg_unit *u) {
    const fg_plan *pl = &e->pl;
    int layer = u->j >= 1 && u->j <= pl->L ? u->j - 1 : -1;   /* its formats: the layer's, or the model-level ones */
    return (fg_op_step){.model = fg_config_desc_layer(pl->c, pl->sp, layer), .B = (uint32_t)pl->gbs,
                        .S = u->i == 0 ? (uint32_t)u->S_k : 1,
                        .past = u->i == 0 ? 0 : (uint32_t)(u->S_k + u->i - 1),
                        .Tmax = (uint32_t)pl->Tmax, .mask_stride = (uint32_t)pl->Tmax};
}

fg_loc fg_unit_hidden(const fg_engine *e, const fg_unit *u) {
    const fg_plan *pl = &e->pl;
    fg_op_step st = fg_unit_step(e, u);
    fg_loc l = pl->atier == FG_TIER_GPU ? pl->hhome[u->k] : pl->hslot[u->k % 2];
    return fg_loc_sub(l, 0, 2ull * st.B * st.S * pl->c->hidden);
}

int fg_unit_cpu_attn(const fg_plan *pl, const fg_unit *u) {
    return fg_plan_cache_off_gpu(pl, u->j) && !fg_plan_cache_on_disk(pl, u->j) && pl->p.cpu_cache_compute && u->i > 0;
}

/* ---- slots -> handles ---------------------------------------------------- */

typedef struct {
    fg_engine *e;
    const fg_unit *u;
    fg_op_step step;   /* the op's: S is 1 for SAMPLE */
    int s;             /* the weight slot */
} unit_ctx;

static fg_shm_handle resolve(void *ctx, const fg_op_info *oi, const fg_op_slot *sl) {
    unit_ctx *x = ctx;
    const fg_engine *e = x->e;
    const fg_plan *pl = &e->pl;
    const fg_unit *u = x->u;
    int k = u->k, p = k % 2, l = u->j - 1, cpu = oi->worker == FG_ROLE_CPU;
    uint64_t rows = (uint64_t)x->step.B * x->step.S;
    fg_loc loc = {SEG_DEV, 0, 0};
    switch (sl->kind) {
    case FG_SLOT_ACT: {
        const fg_loc dev[] = {[FG_ACT_Q] = pl->q_dev, [FG_ACT_K] = pl->k_dev, [FG_ACT_V] = pl->v_dev, [FG_ACT_CTX] = pl->ctx_dev};
        const fg_loc io[] = {[FG_ACT_Q] = pl->q_io, [FG_ACT_K] = pl->k_io, [FG_ACT_V] = pl->v_io, [FG_ACT_CTX] = pl->ctx_io};
        if (sl->which == FG_ACT_H)   /* a cpu op's: the copy out of it (MOE_CPU) */
            return fg_engine_handle(e, cpu ? fg_loc_sub(pl->hx_io[p], 0, 2 * rows * pl->c->hidden) : fg_unit_hidden(e, u));
        int kv = sl->which == FG_ACT_K || sl->which == FG_ACT_V;   /* KV*d wide; q and ctx A*d */
        uint64_t width = (uint64_t)(kv ? fg_config_kv_dim(pl->c) : fg_config_q_dim(pl->c));
        loc = fg_loc_sub(cpu ? io[sl->which] : dev[sl->which], 0, 2 * rows * width);
        break;
    }
    case FG_SLOT_IDS: loc = fg_loc_sub(pl->ids_dev[k], 0, 4 * rows); break;
    case FG_SLOT_MASK: loc = cpu ? pl->mask_io[k] : pl->mask_dev[k]; break;
    case FG_SLOT_CACHE: {
        int home = cpu || !fg_plan_cache_off_gpu(pl, u->j);   /* else the device slots the prefix was loaded into */
        if (sl->which == 0) loc = home ? pl->kc[l * pl->K + k] : pl->kslot[p];
        else loc = home ? pl->vc[l * pl->K + k] : pl->vslot[p];
        break;
    }
    case FG_SLOT_LOGITS: loc = pl->logits_dev[p]; break;
    case FG_SLOT_RNG: loc = pl->rng_dev[k]; break;
    case FG_SLOT_ECOUNT: loc = pl->counts_dev[p]; break;
    case FG_SLOT_EOUT: loc = fg_loc_sub(cpu ? pl->ycpu_io[p] : pl->ycpu_dev[p], 0, 4 * rows * pl->c->experts_per_token * pl->c->hidden); break;
    case FG_SLOT_XW: {   /* the cpu worker's band of a stack: its CPU home, experts xcpu_lo .. */
        int stack = fg_plan_stack(pl, fg_spec_layer(l, sl->which));
        fg_loc first = pl->ehome[(size_t)stack * pl->E + pl->xcpu_lo];
        loc = fg_loc_sub(first, 0, (uint64_t)pl->xcpu_n * first.n);
        break;
    }
    case FG_SLOT_LW:
        if (cpu) return fg_engine_handle(e, fg_weight_host(e, fg_spec_layer(l, sl->which), x->s));
        return fg_weight_handle(e, fg_spec_layer(l, sl->which), x->s);
    case FG_SLOT_GW: return fg_weight_handle(e, fg_spec_global(sl->which), x->s);
    }
    return fg_engine_handle(e, loc);
}

/* Op `op` of unit u on its worker, behind d (gpu ops only). */
static fg_status op(fg_engine *e, uint32_t opc, const fg_unit *u, int s, const void *params, uint32_t len,
                    const fg_deps *d, uint64_t *seq) {   /* params start with the fg_op_step */
    unit_ctx x = {e, u, *(const fg_op_step *)params, s};
    fg_msg m;
    fg_op_build(&m, opc, (uint32_t)u->j, (uint32_t)u->k, params, len, resolve, &x);
    if (fg_op_info_get(opc)->worker == FG_ROLE_CPU) return fg_cmdq_submit(&e->q, FG_ROLE_CPU, &m, 0, seq);
    return fg_cmdq_submit_gpu(&e->q, &m, ST_COMPUTE, d, seq);
}

/* A COPY of n pairs (src[i] -> dst[i]) on the copy stream its direction
 * takes, behind d. */
static fg_status copy(fg_engine *e, const fg_loc *src, const fg_loc *dst, int n, const fg_deps *d, uint64_t *seq) {
    fg_msg m;
    fg_msg_init(&m, FG_MSG_COPY);
    for (int i = 0; i < n; i++) fg_msg_copy_add(&m, fg_engine_handle(e, src[i]), fg_engine_handle(e, dst[i]));
    return fg_cmdq_submit_gpu(&e->q, &m, dst[0].seg == SEG_DEV ? ST_H2D : ST_D2H, d, seq);
}

/* ---- compute(i, j, k) ------------------------------------------------------ */

/* The LM head, then SAMPLE where the logits are (the next token's
 * embedding of this batch follows on the compute stream), then the logits
 * and ids out for the coordinator to record. */
static fg_status lm_head(fg_engine *e, const fg_unit *u, int s, fg_deps d, const fg_op_step *st) {
    const fg_plan *pl = &e->pl;
    int k = u->k, p = k % 2;
    uint64_t last, smp;
    fg_status rc;
    /* the logits buffer of this parity, once its last copy out ended */
    if ((rc = fg_cmdq_need(&e->q, &d, e->par[p].logits_read)) ||
        (rc = op(e, FG_OP_LM_HEAD, u, s, st, sizeof *st, &d, &last)))
        return rc;
    e->w[s].last_read = last;
    /* nothing is stored from its hidden-state slot: the next load into the
     * slot waits for this, its last reader */
    if (pl->atier != FG_TIER_GPU) e->par[p].h.read[0] = last;
    fg_op_sample sp = {.step = *st, .temperature = e->samp_max_t[k], .top_p = e->samp_min_p[k]};
    sp.step.S = 1;
    if ((rc = op(e, FG_OP_SAMPLE, u, s, &sp, sizeof sp, NULL, &smp))) return rc;
    fg_deps after = {{[ST_COMPUTE] = smp}};
    const fg_loc src[] = {pl->logits_dev[p], fg_loc_sub(pl->ids_dev[k], 0, 4ull * pl->gbs)};
    const fg_loc dst[] = {pl->logits_io[k], fg_loc_sub(pl->ids_io[k], 0, 4ull * pl->gbs)};
    rc = copy(e, src, dst, 2, &after, &e->par[p].logits_read);
    e->sampled_copy[k] = e->par[p].logits_read;   /* recorded once that ends */
    return rc;
}

/* Decode attention on the cpu worker, where the cache is: q, k, v from the
 * GPU, the context back, out_proj. *last gets ATTN_OUT. */
static fg_status cpu_attention(fg_engine *e, const fg_unit *u, int s, const fg_deps *d, const fg_op_step *st,
                               uint64_t *last) {
    const fg_plan *pl = &e->pl;
    uint64_t n = 2ull * st->B * fg_config_q_dim(pl->c), nk = 2ull * st->B * fg_config_kv_dim(pl->c), q;
    fg_status rc;
    if ((rc = op(e, FG_OP_ATTN_QKV, u, s, st, sizeof *st, d, &q))) return rc;
    fg_deps dq = {{[ST_COMPUTE] = q}};
    const fg_loc dev[] = {fg_loc_sub(pl->q_dev, 0, n), fg_loc_sub(pl->k_dev, 0, nk), fg_loc_sub(pl->v_dev, 0, nk)};
    const fg_loc io[] = {fg_loc_sub(pl->q_io, 0, n), fg_loc_sub(pl->k_io, 0, nk), fg_loc_sub(pl->v_io, 0, nk)};
    if ((rc = copy(e, dev, io, 3, &dq, &q)) || (rc = fg_cmdq_await(&e->q, q)) ||
        (rc = op(e, FG_OP_ATTN_CORE, u, s, st, sizeof *st, NULL, &q)) || (rc = fg_cmdq_await(&e->q, q)) ||
        (rc = copy(e, &pl->ctx_io, &pl->ctx_dev, 1, NULL, &q)))
        return rc;
    fg_deps dc = {{[ST_H2D] = q}};
    return op(e, FG_OP_ATTN_OUT, u, s, st, sizeof *st, &dc, last);
}

/* cpu_attention, then the MLP. *last gets the MLP. */
static fg_status cpu_attention_layer(fg_engine *e, const fg_unit *u, int s, const fg_deps *d, const fg_op_step *st,
                                     uint64_t *last) {
    fg_status rc = cpu_attention(e, u, s, d, st, last);
    return rc ? rc : op(e, FG_OP_MLP, u, s, st, sizeof *st, NULL, last);
}

/* A unit of a split sparse layer (some expert off the GPU) whose experts
 * load as routed, or whose CPU experts the cpu worker computes. */
static int split_unit(const fg_plan *pl, const fg_unit *u) {
    int l = u->j - 1;
    return u->j >= 1 && u->j <= pl->L && pl->E && pl->xview[l] &&
           (pl->p.expert_load == FG_EXPERTS_ROUTED || pl->xcpu_n > 0);
}

/* A sparse layer whose experts load as routed: its attention (on the GPU
 * or the cpu worker's), MOE_ROUTE, the counts out and waited for, the
 * experts they name that the slot lacks loaded (fg_load_experts), then
 * the MLP behind them. *attn gets the GPU attention (0 for the cpu
 * worker's), *last the MLP; *cmds grows by the commands sent, the
 * expert loads' as many as the routing asked for. */
/* Routed loading of a split layer's experts for unit u (after its
 * attention): MOE_ROUTE, its counts out and waited for, the experts they
 * name that the slot lacks loaded (not the cpu worker's); *ld waits for
 * them. *cmds grows by the commands sent. */
static fg_status route_and_load(fg_engine *e, const fg_unit *u, int s, const fg_op_step *st, fg_deps *ld, int *cmds) {
    const fg_plan *pl = &e->pl;
    int l = u->j - 1, p = u->k % 2, E = pl->E;
    uint64_t r = 0, c = 0;
    fg_status rc;
    if ((rc = op(e, FG_OP_MOE_ROUTE, u, s, st, sizeof *st, NULL, &r))) return rc;
    fg_deps after = {{[ST_COMPUTE] = r}};
    if ((rc = copy(e, &pl->counts_dev[p], &pl->counts_io[u->k], 1, &after, &c)) || (rc = fg_cmdq_await(&e->q, c)))
        return rc;
    const int32_t *counts = fg_engine_ptr(e, pl->counts_io[u->k]);   /* (E) */
    const uint8_t *held = e->w[s].xheld;
    for (int q = 0; q < E; q++) {
        e->xwant[q] = counts[q] > 0 && !fg_plan_expert_on_cpu(pl, q);   /* the cpu worker's stay where they are */
        if (e->xwant[q] && !held[q] && e->xs.routed && u->i < e->xs.G) e->xs.routed[u->i]++;
    }
    long before = e->q.commands;
    if ((rc = fg_load_experts(e, s, l, e->xwant, ld))) return rc;
    *cmds += (int)(e->q.commands - before) + FG_CMDS_MOE_ROUTE;
    return FG_OK;
}

/* A split sparse layer (some expert off the GPU) that routes before it
 * loads, or whose CPU experts the cpu worker computes: its attention (on
 * the GPU or the cpu worker's), then
 *  - with the cpu worker's experts: the hidden state out to it and
 *    MOE_CPU sent, to run while the GPU side routes and loads;
 *  - under FG_EXPERTS_ROUTED: route_and_load;
 *  - MLP, or MLP_SPLIT behind MOE_CPU's outputs copied in.
 * *attn gets the GPU attention (0 for the cpu worker's), *last the MLP;
 * *cmds the commands sent (the expert loads as many as the routing asks). */
static fg_status split_layer(fg_engine *e, const fg_unit *u, int s, const fg_deps *d, const fg_op_step *st,
                             uint64_t *attn, uint64_t *last, int *cmds) {
    const fg_plan *pl = &e->pl;
    int p = u->k % 2, cpu = fg_unit_cpu_attn(pl, u), xcpu = pl->xcpu_n > 0;
    uint64_t a = 0, c = 0, mc = 0;
    fg_deps ld = {{0}};
    fg_status rc;
    if (cpu) rc = cpu_attention(e, u, s, d, st, &a);
    else rc = op(e, FG_OP_ATTN, u, s, st, sizeof *st, d, &a), *attn = a;
    *cmds = cpu ? FG_CMDS_CPU_ATTN : FG_CMDS_ATTN;
    if (rc) return rc;
    fg_op_experts xp = {.step = *st, .x_lo = (uint32_t)pl->xcpu_lo, .x_n = (uint32_t)pl->xcpu_n};
    if (xcpu) {   /* h to the cpu worker, whose MOE_CPU runs while the GPU side routes and loads */
        uint64_t n = 2ull * st->B * st->S * pl->c->hidden;
        fg_deps after = {{[ST_COMPUTE] = a}};
        const fg_loc src = fg_unit_hidden(e, u), dst = fg_loc_sub(pl->hx_io[p], 0, n);
        if ((rc = fg_cmdq_await(&e->q, e->par[p].ycpu_copy)) || (rc = copy(e, &src, &dst, 1, &after, &c)) ||
            (rc = fg_cmdq_await(&e->q, c)) || (rc = op(e, FG_OP_MOE_CPU, u, s, &xp, sizeof xp, NULL, &mc)))
            return rc;
        *cmds += FG_CMDS_MOE_CPU - 1;   /* the COPY in comes below */
    }
    if (pl->p.expert_load == FG_EXPERTS_ROUTED && (rc = route_and_load(e, u, s, st, &ld, cmds))) return rc;
    *cmds += FG_CMDS_MLP;
    if (!xcpu) return op(e, FG_OP_MLP, u, s, st, sizeof *st, &ld, last);
    uint64_t n = 4ull * st->B * st->S * pl->c->experts_per_token * pl->c->hidden;
    const fg_loc src = fg_loc_sub(pl->ycpu_io[p], 0, n), dst = fg_loc_sub(pl->ycpu_dev[p], 0, n);
    fg_deps after = {{[ST_COMPUTE] = e->par[p].ycpu_read}};   /* the last MLP_SPLIT reading this parity's */
    if ((rc = fg_cmdq_await(&e->q, mc)) || (rc = copy(e, &src, &dst, 1, &after, &c))) return rc;
    e->par[p].ycpu_copy = c;
    *cmds += 1;
    ld.s[ST_H2D] = ld.s[ST_H2D] > c ? ld.s[ST_H2D] : c;   /* the H2D stream is in order: the later of the two */
    if ((rc = op(e, FG_OP_MLP_SPLIT, u, s, &xp, sizeof xp, &ld, last))) return rc;
    e->par[p].ycpu_read = *last;
    return FG_OK;
}

fg_status fg_compute(fg_engine *e, const fg_unit *u, int s, const fg_deps *d, fg_pending_store *ps) {
    const fg_plan *pl = &e->pl;
    fg_op_step st = fg_unit_step(e, u);
    uint64_t last = 0, attn = 0;
    fg_status rc;
    long before = e->q.commands;
    ps->valid = 0;
    if (u->j == pl->L + 1) {
        if (!(rc = lm_head(e, u, s, *d, &st))) fg_cmds_issued(e, before, FG_CMDS_LM_HEAD);
        return rc;
    }
    int cmds = FG_CMDS_LAYER;
    if (u->j == 0) rc = op(e, FG_OP_EMBED, u, s, &st, sizeof st, d, &last), cmds = FG_CMDS_EMBED;   /* ids: prompts, or SAMPLE's */
    else if (split_unit(pl, u)) rc = split_layer(e, u, s, d, &st, &attn, &last, &cmds);
    else if (fg_unit_cpu_attn(pl, u)) rc = cpu_attention_layer(e, u, s, d, &st, &last), cmds = FG_CMDS_CPU_ATTN_LAYER;
    else rc = op(e, FG_OP_LAYER, u, s, &st, sizeof st, d, &attn), last = attn;   /* attention and MLP, one command */
    if (rc) return rc;
    fg_cmds_issued(e, before, cmds);
    e->w[s].last_read = last;
    *ps = (fg_pending_store){1, *u, attn, last};
    return FG_OK;
}

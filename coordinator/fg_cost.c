/* fg_cost.c - the cost model's terms and the evaluation of a plan (see
 * fg_cost.h). */
#include "fg_cost.h"
#include "fg_shm.h"
#include "fg_unit_cmds.h"

#include <math.h>
#include <string.h>

/* Units of the terms below: bytes of one element, and the cache's two
 * tensors a layer. */
#define FP16_BYTES 2.0       /* hidden states, q, k, v, ctx; the cache as attention reads it */
#define FP32_BYTES 4.0       /* the logits */
#define KV_TENSORS 2.0       /* a layer's cache: k and v, each a row of fg_cache_row_bytes a position */
#define FLOPS_PER_MAC 2.0    /* a multiply and an add */
/* a (query, key) pair's attention FLOPs per query width: QK^T and AV, a
 * multiply-add each */
#define ATTN_FLOPS_PER_PAIR (2 * FLOPS_PER_MAC)

const char *fg_cost_res_name(int r) {
    static const char *n[FG_COST_NRES] = {"compute", "cpu->gpu", "gpu->cpu", "disk"};
    return r >= 0 && r < FG_COST_NRES ? n[r] : "?";
}

json_t *fg_cost_res_json(const double res[FG_COST_NRES]) {
    json_t *o = json_object();
    for (int r = 0; r < FG_COST_NRES; r++) json_object_set_new(o, fg_cost_res_name(r), json_real(res[r]));
    return o;
}

double fg_lin_eval(const fg_lin *l, const double *x) {
    double s = l->c;
    for (int v = 0; v < FG_COST_NX; v++) s += l->a[v] * x[v];
    return s;
}

double fg_cost_experts_touched(int E, int k, double n) {
    if (E <= 0 || k >= E) return 1;
    return 1 - pow(1 - (double)k / E, n > 0 ? n : 0);
}

void fg_cost_case_weights(fg_cost_case *cs, const fg_model_config *c, const fg_spec *sp) {
    cs->layer_bytes = cs->model_bytes = cs->layer_q4_fp16_bytes = cs->layer_expert_bytes = 0;
    memset(cs->layer_flops, 0, sizeof cs->layer_flops);
    memset(cs->layer_expert_flops, 0, sizeof cs->layer_expert_flops);
    cs->n_experts = c->n_experts, cs->top_k = c->experts_per_token;
    for (int i = 0; i < FG_GW_COUNT; i++)
        if (sp[i].present) cs->model_bytes += (double)fg_spec_stored_bytes(c, sp, i);
    /* a layer's bytes as moved (compressed, or in the file's formats, which
     * may differ by layer: a Q4_K_M file's Q6_K layers) and its GEMM FLOPs
     * by format: the mean layer (every layer runs each step, so their sum
     * is L times it) */
    for (int l = 0; l < c->n_layers; l++)
        for (int i = 0; i < FG_LW_COUNT; i++) {
            const int idx = fg_spec_layer(l, i), fmt = fg_spec_fmt(c, sp, idx);
            if (!sp[idx].present) continue;
            cs->layer_bytes += (double)fg_spec_stored_bytes(c, sp, idx) / c->n_layers;
            cs->layer_flops[fmt] += fg_spec_flops_per_row(c, sp, idx) / c->n_layers;
            if (sp[idx].experts) {
                cs->layer_expert_bytes += (double)fg_spec_stored_bytes(c, sp, idx) / c->n_layers;
                cs->layer_expert_flops[fmt] += fg_spec_flops_per_row(c, sp, idx) / c->n_layers;
            }
            if (fmt == FG_FMT_Q4G64) cs->layer_q4_fp16_bytes += FP16_BYTES * (double)fg_spec_numel(&sp[idx]) / c->n_layers;
        }
    const int head = sp[FG_GW_LM_HEAD].present ? FG_GW_LM_HEAD : FG_GW_EMBED_TOKENS;   /* a tied head: the embedding */
    cs->head_fmt = fg_spec_fmt(c, sp, fg_spec_global(head));
}

uint32_t fg_cost_formats(const fg_model_config *c, const fg_spec *sp) {
    fg_cost_case cs;
    fg_cost_case_weights(&cs, c, sp);
    uint32_t m = FG_FMT_BIT(cs.head_fmt);
    for (int f = 0; f < FG_FMT_COUNT; f++)
        if (cs.layer_flops[f] > 0) m |= FG_FMT_BIT(f);
    return m;
}

/* Seconds of `flops` of GEMMs over `rows` rows on weights held in fmt, at
 * the profile's rate for it (fg_hw_fmt_tflops). FlexGen's 4-bit weights
 * where the profile has no mm_q4 (presets): F16's rate plus a pass that
 * writes their expand_bytes of fp16, at the device's streaming rate (its
 * decode attention's, the closest measured kernel of that kind). */
static double fmt_s(const fg_hw *hw, int fmt, double rows, double flops, double expand_bytes, int prefill) {
    if (!(flops > 0)) return 0;
    if (fmt == FG_FMT_Q4G64 && !fg_hw_fmt_measured(hw, fmt))
        return flops / (fg_hw_fmt_tflops(hw, FG_FMT_F16, rows, prefill) * 1e12) + expand_bytes / (hw->attn_decode_gbps * 1e9);
    return flops / (fg_hw_fmt_tflops(hw, fmt, rows, prefill) * 1e12);
}

/* Seconds of the mean decoder layer's GEMMs (and per-row work) over `rows`
 * rows: each format's FLOPs at its own rate, so a Q4_K_M layer's Q4_K
 * matrices go at Q4_K's and its Q6_K ones at Q6_K's. */
static double layer_s(const fg_hw *hw, const fg_cost_case *cs, double rows, int prefill) {
    double s = 0;
    for (int f = 0; f < FG_FMT_COUNT; f++)   /* the dense part: a sparse layer's experts are expert_terms' */
        s += fmt_s(hw, f, rows, rows * (cs->layer_flops[f] - cs->layer_expert_flops[f]), cs->layer_q4_fp16_bytes, prefill);
    return s;
}

/* Seconds of the experts' GEMMs of one batch of `rows` rows: the top k's
 * FLOPs at each format's rate for the rows an expert gets, rows * k over
 * the experts the batch touches. */
static double experts_s(const fg_hw *hw, const fg_cost_case *cs, double rows, int prefill) {
    double per = rows * cs->top_k / (cs->n_experts * fg_cost_experts_touched(cs->n_experts, cs->top_k, rows)), s = 0;
    for (int f = 0; f < FG_FMT_COUNT; f++) s += fmt_s(hw, f, per < 1 ? 1 : per, rows * cs->layer_expert_flops[f], 0, prefill);
    return s;
}

double fg_cost_fmt_tflops(const fg_hw *hw, const fg_cost_case *cs, int fmt, double rows, int prefill) {
    double flops = rows * (cs->layer_flops[fmt] > 0 ? cs->layer_flops[fmt] : 1);   /* the layer's, where it has any */
    double s = fmt_s(hw, fmt, rows, flops, cs->layer_q4_fp16_bytes, prefill);
    return s > 0 ? flops / s / 1e12 : 0;
}

/* The terms of one step: gpu compute seconds `comp` (with the fractions
 * that add to it in comp_x), bytes each way and on disk, each with its
 * constant part and its per-fraction part, turned into seconds. */
typedef struct {
    fg_lin comp;                   /* seconds */
    fg_lin h2d, d2h, d2h_cache;    /* bytes */
    fg_lin rd, wr;                 /* disk bytes */
    fg_lin cmds;                   /* commands */
} step;

static void lin_add(fg_lin *d, const fg_lin *s, double k) {
    d->c += k * s->c;
    for (int v = 0; v < FG_COST_NX; v++) d->a[v] += k * s->a[v];
}

void fg_cost_bounds(const fg_lin res[FG_COST_NRES], double contention, fg_lin bound[FG_COST_NBOUND]) {
    memcpy(bound, res, FG_COST_NRES * sizeof *res);
    bound[B_DISK_COMPUTE] = res[R_DISK], bound[B_COMPUTE_DISK] = res[R_COMPUTE];
    lin_add(&bound[B_DISK_COMPUTE], &res[R_COMPUTE], contention);
    lin_add(&bound[B_COMPUTE_DISK], &res[R_DISK], contention);
}

double fg_cost_disk_compute_s(double disk_s, double comp_s, double contention) {
    double a = disk_s + contention * comp_s, b = comp_s + contention * disk_s;
    return a > b ? a : b;
}

double fg_cost_read_gbps(const fg_hw *hw, int prefill) {
    return prefill && hw->disk_read_prefill_gbps > 0 ? hw->disk_read_prefill_gbps : hw->disk_read_gbps;
}

/* A step's terms in seconds per resource. A prefill step's copies take
 * their own engine factor: they overlap long GEMMs on the same cores. */
static void to_res(const fg_hw *hw, const step *s, int prefill, fg_lin res[FG_COST_NRES]) {
    memset(res, 0, FG_COST_NRES * sizeof *res);
    lin_add(&res[R_COMPUTE], &s->comp, 1);
    lin_add(&res[R_COMPUTE], &s->cmds, hw->cmd_s);
    const double cf = prefill ? hw->eng_prefill_copy_factor : hw->eng_copy_factor, df = hw->eng_disk_factor;
    lin_add(&res[R_H2D], &s->h2d, cf / (hw->h2d_gbps * 1e9));
    lin_add(&res[R_D2H], &s->d2h, cf / (hw->d2h_gbps * 1e9));
    lin_add(&res[R_D2H], &s->d2h_cache, cf / (hw->d2h_cache_gbps * 1e9));
    lin_add(&res[R_DISK], &s->rd, df / (fg_cost_read_gbps(hw, prefill) * 1e9));
    lin_add(&res[R_DISK], &s->wr, df / (hw->disk_write_gbps * 1e9));
    if (hw->shares_host_cpu) {   /* copies are memcpy on the same cores as the compute */
        lin_add(&res[R_COMPUTE], &res[R_H2D], 1);
        lin_add(&res[R_COMPUTE], &res[R_D2H], 1);
    }
}

/* A sparse layer's experts in a step of K batches of `rows` rows each
 * (prefill B*S, decode B), beside its dense part (the terms above count
 * the dense bytes and FLOPs only). Linear in the experts' fractions:
 *  - loads: under routed loading the block's union of its K * rows rows'
 *    choices, a share fg_cost_experts_touched of the experts (all of them
 *    under FG_EXPERTS_ALL), from the CPU (not with cpu_experts) and the
 *    disk through the stage;
 *  - routed loading waits for the router (a round trip a batch) and
 *    serialises the loads behind it: their seconds join the compute's;
 *  - compute: the device's share of the experts' GEMMs at its rates; with
 *    cpu_experts the CPU's share (x_cpu) on the cpu worker instead, the
 *    coordinator waiting for it (on the host's cores: at the same rates;
 *    beside a GPU, streaming the touched experts' bytes at the cpu worker's
 *    decode attention rate, the kernel of that kind it measured), its rows'
 *    hidden states out and their outputs in. */
static void expert_terms(const fg_model_config *c, const fg_hw *hw, const fg_cost_case *cs, double K, double rows,
                         int prefill, step *s) {
    if (!(cs->layer_expert_bytes > 0)) return;
    const double We = cs->layer_expert_bytes, H = c->hidden;
    const int routed = cs->expert_load == FG_EXPERTS_ROUTED;
    const double tau = routed ? fg_cost_experts_touched(cs->n_experts, cs->top_k, K * rows) : 1, moved = We * tau;
    const double cf = prefill ? hw->eng_prefill_copy_factor : hw->eng_copy_factor;
    const double h2d_s = cf / (hw->h2d_gbps * 1e9), disk_s = hw->eng_disk_factor / (fg_cost_read_gbps(hw, prefill) * 1e9);
    if (!cs->cpu_experts) s->h2d.a[X_X_CPU] += moved;
    s->h2d.a[X_X_DISK] += moved, s->rd.a[X_X_DISK] += moved;
    if (routed) {
        if (!cs->cpu_experts) s->comp.a[X_X_CPU] += moved * h2d_s + K * hw->rtt_s;
        s->comp.a[X_X_DISK] += moved * (h2d_s + disk_s) + K * hw->rtt_s;
        s->cmds.a[X_X_CPU] += K * FG_CMDS_MOE_ROUTE, s->cmds.a[X_X_DISK] += K * FG_CMDS_MOE_ROUTE;
    }
    const double gpu = K * experts_s(hw, cs, rows, prefill) * (prefill ? hw->eng_prefill_factor : hw->eng_decode_factor);
    s->comp.c += gpu;
    if (!cs->cpu_experts) return;
    /* the CPU's share leaves the device for the cpu worker */
    const double tau_b = fg_cost_experts_touched(cs->n_experts, cs->top_k, rows);
    const double cpu = hw->shares_host_cpu ? gpu : K * We * tau_b / (hw->cpu_attn_gbps * 1e9);
    s->comp.a[X_X_CPU] += cpu - gpu + 2 * K * hw->rtt_s;
    s->d2h.a[X_X_CPU] += K * FP16_BYTES * rows * H;                /* h out */
    s->h2d.a[X_X_CPU] += K * FP32_BYTES * rows * cs->top_k * H;    /* their outputs in */
    s->cmds.a[X_X_CPU] += K * FG_CMDS_MOE_CPU;
}

void fg_cost_terms_make(const fg_model_config *c, const fg_hw *hw, const fg_cost_case *cs, fg_cost_terms *t) {
    memset(t, 0, sizeof *t);
    t->contention = hw->eng_disk_contention;
    const double B = cs->gbs, K = cs->K, S = cs->S, G = cs->G, H = c->hidden, V = c->vocab_size;
    const double Q = fg_config_q_dim(c), KV = fg_config_kv_dim(c);   /* q and ctx width; k, v and the cache's */
    const double Wl = cs->layer_bytes - cs->layer_expert_bytes, Wm = cs->model_bytes;   /* a layer's dense part */
    const double ctx = S + G / 2, past = ctx - 1;      /* the mean decode context and cached prefix */
    const double keys = fg_config_attn_keys(c, ctx);   /* what a decode query attends: a window at most */
    const int act_off = cs->act != FG_TIER_GPU, act_disk = cs->act == FG_TIER_DISK, ca = cs->cpu_attn;
    const double hb_p = FP16_BYTES * B * S * H, hb_g = FP16_BYTES * B * H;   /* a batch's hidden state */
    /* the cache as stored (4-bit with compress_cache) is what moves: a
     * position's k or v row of one sequence */
    const double row = (double)fg_cache_row_bytes(c);
    const double rows_p = KV_TENSORS * B * S * row, rows_g = KV_TENSORS * B * row;   /* a batch's new k and v rows */
    const double prefix = KV_TENSORS * B * past * row;               /* the cached k and v a decode step loads */
    const double attn_g = KV_TENSORS * B * keys * KV * FP16_BYTES;   /* what its attention reads, expanded */

    /* ---- a decoder layer, prefill: K batches of B*S rows ---- */
    step p;
    memset(&p, 0, sizeof p);
    const double pre_attn_flops = ATTN_FLOPS_PER_PAIR * B * fg_config_prefill_attn_pairs(c, S) * Q;
    p.comp.c = K * (layer_s(hw, cs, B * S, 1) + pre_attn_flops / (hw->attn_prefill_tflops * 1e12)) * hw->eng_prefill_factor;
    p.h2d.a[X_W_CPU] = p.h2d.a[X_W_DISK] = Wl;                   /* the layer's off-GPU weights, once per block */
    p.rd.a[X_W_DISK] = Wl;
    p.h2d.c += act_off * K * hb_p, p.d2h.c += act_off * K * hb_p;
    p.rd.c += act_disk * K * hb_p, p.wr.c += act_disk * K * hb_p;
    p.d2h_cache.a[X_C_CPU] = p.d2h_cache.a[X_C_DISK] = K * rows_p;   /* new rows to an off-GPU cache */
    p.wr.a[X_C_DISK] = K * (rows_p + KV_TENSORS * FG_SHM_ALIGN);   /* O_DIRECT: each tensor's write from the aligned boundary below */
    /* commands: a layer and its hidden state's load and store per batch, the
     * weights' load once; an off-GPU cache's store (no load: no prefix yet) */
    p.cmds.c = K * (FG_CMDS_LAYER + 2 * FG_CMDS_HIDDEN_MOVE * act_off);
    p.cmds.a[X_W_CPU] = p.cmds.a[X_W_DISK] = FG_CMDS_WEIGHT_COPY;
    p.cmds.a[X_C_CPU] = p.cmds.a[X_C_DISK] = K * FG_CMDS_CACHE_MOVE;
    p.cmds.a[X_C_DISK] += K * FG_CMDS_CACHE_DISK;
    expert_terms(c, hw, cs, K, B * S, 1, &p);
    to_res(hw, &p, 1, t->pre);

    /* ---- a decoder layer, one decode token: K batches of B rows ---- */
    step g;
    memset(&g, 0, sizeof g);
    double gemm = layer_s(hw, cs, B, 0), gpu_attn = attn_g / (hw->attn_decode_gbps * 1e9);
    g.comp.c = K * gemm;
    /* attention on the gpu over a GPU cache, over a disk cache (loaded), and
     * over a CPU cache unless the cpu worker does it (then serial: the
     * coordinator waits for it) */
    g.comp.a[X_C_GPU] = g.comp.a[X_C_DISK] = K * gpu_attn;
    /* (the CPU path waits twice a unit: for q, k, v out and for the cpu
     * worker's attention, a round trip each) */
    g.comp.a[X_C_CPU] = K * (ca ? attn_g / (fg_hw_cpu_attn_gbps(hw, B, keys) * 1e9) + 2 * hw->rtt_s : gpu_attn);
    g.h2d.a[X_W_CPU] = g.h2d.a[X_W_DISK] = Wl;
    g.rd.a[X_W_DISK] = Wl;
    g.h2d.a[X_C_DISK] = K * prefix, g.rd.a[X_C_DISK] = K * prefix;
    g.wr.a[X_C_DISK] = K * (rows_g + KV_TENSORS * FG_SHM_ALIGN);
    g.d2h_cache.a[X_C_DISK] = K * rows_g;
    if (ca)   /* ctx in; q, k, v out */
        g.h2d.a[X_C_CPU] = K * FP16_BYTES * B * Q, g.d2h.a[X_C_CPU] = K * FP16_BYTES * B * (Q + KV_TENSORS * KV);
    else g.h2d.a[X_C_CPU] = K * prefix, g.d2h_cache.a[X_C_CPU] = K * rows_g;
    g.h2d.c += act_off * K * hb_g, g.d2h.c += act_off * K * hb_g;
    g.rd.c += act_disk * K * hb_g, g.wr.c += act_disk * K * hb_g;
    /* the engine's own figures (the profile's calibration): its decode
     * compute against the tiers', and what a unit adds over a CPU-tier cache
     * attended on the CPU, or loaded (from the CPU or the disk) */
    const double ef = hw->eng_decode_factor;
    g.comp.c *= ef;
    for (int v = 0; v < FG_COST_NX; v++) g.comp.a[v] *= ef;
    g.comp.a[X_C_CPU] += K * (ca ? hw->eng_cpu_attn_unit_s : hw->eng_cache_load_unit_s);
    g.comp.a[X_C_DISK] += K * hw->eng_cache_load_unit_s;
    /* commands as at prefill, and per batch: CPU attention's in place of the
     * layer, or an off-GPU cache's load and store; a disk cache's writes too
     * (its reads, which the coordinator waits for, are in
     * eng_cache_load_unit_s) */
    g.cmds.c = K * (FG_CMDS_LAYER + 2 * FG_CMDS_HIDDEN_MOVE * act_off);
    g.cmds.a[X_W_CPU] = g.cmds.a[X_W_DISK] = FG_CMDS_WEIGHT_COPY;
    g.cmds.a[X_C_CPU] = K * (ca ? FG_CMDS_CPU_ATTN_LAYER - FG_CMDS_LAYER : 2 * FG_CMDS_CACHE_MOVE);
    g.cmds.a[X_C_DISK] = K * (2 * FG_CMDS_CACHE_MOVE + FG_CMDS_CACHE_DISK);
    expert_terms(c, hw, cs, K, B, 0, &g);
    to_res(hw, &g, 0, t->gen);

    /* ---- the embedding + LM head group, per token: its off-GPU weights
     * once, the head's GEMM over each batch's last rows, logits out ---- */
    for (int ph = 0; ph < 2; ph++) {
        step h;
        memset(&h, 0, sizeof h);
        const int head = !cs->no_lm_head;   /* a pipeline's stages: the embedding on the first, the head on the last */
        h.comp.c = head * K * fmt_s(hw, cs->head_fmt, B, FLOPS_PER_MAC * B * H * V, 0, ph == 0) *
                   (ph == 0 ? hw->eng_prefill_factor : ef);
        h.h2d.a[X_W_CPU] = h.h2d.a[X_W_DISK] = Wm;
        h.rd.a[X_W_DISK] = Wm;
        h.d2h.c = head * K * FP32_BYTES * B * V;   /* the logits */
        h.cmds.c = K * (!cs->no_embed * FG_CMDS_EMBED + head * FG_CMDS_LM_HEAD);
        h.cmds.a[X_W_CPU] = h.cmds.a[X_W_DISK] = Wm > 0 ? FG_CMDS_WEIGHT_COPY : 0;
        to_res(hw, &h, ph == 0, ph == 0 ? t->head_pre : t->head_gen);
    }
}

/* A step's seconds at x: the largest of its bounds (each resource's busy
 * seconds added to acc) */
static double step_max(const fg_lin res[FG_COST_NRES], double contention, const double *x, double *acc) {
    fg_lin b[FG_COST_NBOUND];
    fg_cost_bounds(res, contention, b);
    double best = 0;
    for (int r = 0; r < FG_COST_NBOUND; r++) {
        double v = fg_lin_eval(&b[r], x);
        if (acc && r < FG_COST_NRES) acc[r] += v;
        if (v > best) best = v;
    }
    return best;
}

static int argmax(const double *v) {
    int a = 0;
    for (int r = 1; r < FG_COST_NRES; r++)
        if (v[r] > v[a]) a = r;
    return a;
}

/* The fractions of group g's dense weight bytes on each tier, and of a
 * sparse layer's experts (every sparse layer alike). */
static void weight_fracs(const fg_plan *pl, int g, double *x) {
    int first = g < 0 ? 0 : fg_spec_layer(g, 0), count = g < 0 ? FG_GW_COUNT : FG_LW_COUNT;
    double by[FG_NTIERS] = {0}, tot = 0;
    for (int t = 0; t < FG_NTIERS; t++) x[X_X_GPU + t] = pl->E ? (double)pl->xtier_count[t] / pl->E : t == FG_TIER_GPU;
    for (int i = first; i < first + count; i++) {
        if (!pl->sp[i].present || pl->sp[i].experts) continue;
        double b = (double)fg_spec_stored_bytes(pl->c, pl->sp, i);
        by[pl->wtier[i]] += b, tot += b;
    }
    x[X_W_GPU] = tot > 0 ? by[FG_TIER_GPU] / tot : 1;
    x[X_W_CPU] = tot > 0 ? by[FG_TIER_CPU] / tot : 0;
    x[X_W_DISK] = tot > 0 ? by[FG_TIER_DISK] / tot : 0;
}

void fg_cost_eval_steps(const fg_plan *pl, const fg_hw *hw, const fg_cost_case *shape, double gen_steps, fg_cost_result *r) {
    memset(r, 0, sizeof *r);
    fg_cost_case cs = {.gbs = pl->gbs, .K = shape->K, .S = pl->S, .G = pl->G, .cpu_attn = pl->p.cpu_cache_compute,
                       .act = pl->atier, .no_embed = shape->no_embed, .no_lm_head = shape->no_lm_head};
    fg_cost_case_weights(&cs, pl->c, pl->sp);
    cs.expert_load = pl->p.expert_load, cs.cpu_experts = pl->xcpu_n > 0;
    fg_cost_terms t;
    fg_cost_terms_make(pl->c, hw, &cs, &t);
    double x[FG_COST_NX];
    const double ct = t.contention;
    for (int l = 0; l < pl->L; l++) {   /* each layer with its own weight split and cache tier */
        weight_fracs(pl, l, x);
        x[X_C_GPU] = pl->ctier[l] == FG_TIER_GPU, x[X_C_CPU] = pl->ctier[l] == FG_TIER_CPU;
        x[X_C_DISK] = pl->ctier[l] == FG_TIER_DISK;
        r->prefill_s += step_max(t.pre, ct, x, r->pre_res);
        r->decode_s += gen_steps * step_max(t.gen, ct, x, NULL);
        for (int q = 0; q < FG_COST_NRES; q++) r->gen_res[q] += gen_steps * fg_lin_eval(&t.gen[q], x);
    }
    weight_fracs(pl, -1, x);
    r->prefill_s += step_max(t.head_pre, ct, x, r->pre_res);
    r->decode_s += gen_steps * step_max(t.head_gen, ct, x, NULL);
    for (int q = 0; q < FG_COST_NRES; q++) r->gen_res[q] += gen_steps * fg_lin_eval(&t.head_gen[q], x);
    r->pre_bottleneck = argmax(r->pre_res), r->gen_bottleneck = argmax(r->gen_res);
}

void fg_cost_eval_plan(const fg_plan *pl, const fg_hw *hw, int n_prompts, fg_cost_result *r) {
    fg_cost_case whole = {.K = pl->K};
    fg_cost_eval_steps(pl, hw, &whole, pl->G - 1, r);
    /* n prompts run as ceil(n / (K*B)) blocks, the last one possibly part full */
    int bls = pl->K * pl->gbs, n = n_prompts > 0 ? n_prompts : bls, blocks = (n + bls - 1) / bls;
    r->prefill_s *= blocks, r->decode_s *= blocks;
    for (int q = 0; q < FG_COST_NRES; q++) r->pre_res[q] *= blocks, r->gen_res[q] *= blocks;
    r->throughput = r->prefill_s + r->decode_s > 0 ? (double)n * pl->G / (r->prefill_s + r->decode_s) : 0;
}

/* fg_cost.c - the cost model's terms and the evaluation of a plan (see
 * fg_cost.h). */
#include "fg_cost.h"
#include "fg_shm.h"
#include "fg_unit_cmds.h"

#include <string.h>

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

void fg_cost_case_weights(fg_cost_case *cs, const fg_model_config *c, const fg_spec *sp) {
    cs->layer_bytes = cs->model_bytes = 0;
    cs->layer_fp16_bytes = 0;
    for (int i = 0; i < FG_GW_COUNT; i++)
        if (sp[i].present) cs->model_bytes += (double)fg_spec_stored_bytes(c, sp, i);
    /* a layer's bytes as moved (compressed, or in the file's formats, which
     * may differ by layer: a Q4_K_M file's Q6_K layers): the mean layer */
    for (int l = 0; l < c->n_layers; l++)
        for (int i = 0; i < FG_LW_COUNT; i++)
            if (sp[fg_spec_layer(l, i)].present) {
                cs->layer_bytes += (double)fg_spec_stored_bytes(c, sp, fg_spec_layer(l, i)) / c->n_layers;
                cs->layer_fp16_bytes += 2.0 * (double)fg_spec_numel(&sp[fg_spec_layer(l, i)]) / c->n_layers;
            }
}

/* Seconds of a GEMM of `flops` over `rows` rows. */
static double mm_s(const fg_hw *hw, double rows, double flops, int prefill) {
    return flops / (fg_hw_mm_tflops(hw, rows, prefill) * 1e12);
}

/* Seconds of a decoder layer's GEMMs (and per-row work) over `rows` rows.
 * With 4-bit weights: at the rate the profile measured for them (mm_q4),
 * else the fp16 rate plus a pass that writes the layer's fp16 bytes, at the
 * device's streaming rate (its attention's, the closest measured kernel of
 * that kind; presets have no mm_q4). */
static double layer_s(const fg_hw *hw, const fg_model_config *c, const fg_cost_case *cs, double rows, double flops,
                      int prefill) {
    double q4 = c->compress_weight ? fg_hw_mm_q4_tflops(hw, rows) : 0;
    if (q4 > 0) return flops / (q4 * 1e12);
    return mm_s(hw, rows, flops, prefill) +
           (c->compress_weight ? cs->layer_fp16_bytes / (hw->attn_decode_gbps * 1e9) : 0);
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
    lin_add(&res[R_DISK], &s->rd, df / (hw->disk_read_gbps * 1e9));
    lin_add(&res[R_DISK], &s->wr, df / (hw->disk_write_gbps * 1e9));
    if (hw->shares_host_cpu) {   /* copies are memcpy on the same cores as the compute */
        lin_add(&res[R_COMPUTE], &res[R_H2D], 1);
        lin_add(&res[R_COMPUTE], &res[R_D2H], 1);
    }
}

void fg_cost_terms_make(const fg_model_config *c, const fg_hw *hw, const fg_cost_case *cs, fg_cost_terms *t) {
    memset(t, 0, sizeof *t);
    t->contention = hw->eng_disk_contention;
    const double B = cs->gbs, K = cs->K, S = cs->S, G = cs->G, H = c->hidden, V = c->vocab_size;
    const double Q = fg_config_q_dim(c), KV = fg_config_kv_dim(c);   /* q and ctx width; k, v and the cache's */
    const double Wl = cs->layer_bytes, Wm = cs->model_bytes;
    const double ctx = S + G / 2, past = ctx - 1;      /* the mean decode context and cached prefix */
    const double keys = fg_config_attn_keys(c, ctx);   /* what a decode query attends: a window at most */
    const int act_off = cs->act != FG_TIER_GPU, act_disk = cs->act == FG_TIER_DISK, ca = cs->cpu_attn;
    const double hb_p = 2 * B * S * H, hb_g = 2 * B * H;            /* a batch's hidden state */
    /* the cache's bytes as stored (4-bit with compress_cache): what moves */
    const double kvr = (double)fg_cache_row_bytes(c) / (2 * KV);
    const double rows_p = kvr * 4 * B * S * KV, rows_g = kvr * 4 * B * KV;   /* a batch's new k and v rows */
    const double prefix = kvr * 4 * B * past * KV, attn_g = 4 * B * keys * KV;   /* k and v bytes loaded; read (fp16, expanded) */
    const double layer_flops = fg_config_layer_flops(c);           /* per row: q k v o and the MLP's matrices */

    /* ---- a decoder layer, prefill: K batches of B*S rows ---- */
    step p;
    memset(&p, 0, sizeof p);
    p.comp.c = K * (layer_s(hw, c, cs, B * S, B * S * layer_flops, 1) + 4 * B * fg_config_prefill_attn_pairs(c, S) * Q / (hw->attn_prefill_tflops * 1e12)) *
               hw->eng_prefill_factor;
    p.h2d.a[X_W_CPU] = p.h2d.a[X_W_DISK] = Wl;                   /* the layer's off-GPU weights, once per block */
    p.rd.a[X_W_DISK] = Wl;
    p.h2d.c += act_off * K * hb_p, p.d2h.c += act_off * K * hb_p;
    p.rd.c += act_disk * K * hb_p, p.wr.c += act_disk * K * hb_p;
    p.d2h_cache.a[X_C_CPU] = p.d2h_cache.a[X_C_DISK] = K * rows_p;   /* new rows to an off-GPU cache */
    p.wr.a[X_C_DISK] = K * (rows_p + 2 * FG_SHM_ALIGN);       /* O_DIRECT writes from the aligned boundary below */
    /* commands: a layer and its hidden state's load and store per batch, the
     * weights' load once; an off-GPU cache's store (no load: no prefix yet) */
    p.cmds.c = K * (FG_CMDS_LAYER + 2 * FG_CMDS_HIDDEN_MOVE * act_off);
    p.cmds.a[X_W_CPU] = p.cmds.a[X_W_DISK] = FG_CMDS_WEIGHT_COPY;
    p.cmds.a[X_C_CPU] = p.cmds.a[X_C_DISK] = K * FG_CMDS_CACHE_MOVE;
    p.cmds.a[X_C_DISK] += K * FG_CMDS_CACHE_DISK;
    to_res(hw, &p, 1, t->pre);

    /* ---- a decoder layer, one decode token: K batches of B rows ---- */
    step g;
    memset(&g, 0, sizeof g);
    double gemm = layer_s(hw, c, cs, B, B * layer_flops, 0), gpu_attn = attn_g / (hw->attn_decode_gbps * 1e9);
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
    g.h2d.a[X_C_DISK] = K * prefix, g.rd.a[X_C_DISK] = K * prefix, g.wr.a[X_C_DISK] = K * (rows_g + 2 * FG_SHM_ALIGN);
    g.d2h_cache.a[X_C_DISK] = K * rows_g;
    if (ca) g.h2d.a[X_C_CPU] = K * 2 * B * Q, g.d2h.a[X_C_CPU] = K * 2 * B * (Q + 2 * KV);   /* ctx in; q, k, v out */
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
    to_res(hw, &g, 0, t->gen);

    /* ---- the embedding + LM head group, per token: its off-GPU weights
     * once, the head's GEMM over each batch's last rows, logits out ---- */
    for (int ph = 0; ph < 2; ph++) {
        step h;
        memset(&h, 0, sizeof h);
        const int head = !cs->no_lm_head;   /* a pipeline's stages: the embedding on the first, the head on the last */
        h.comp.c = head * K * mm_s(hw, B, 2 * B * H * V, ph == 0) * (ph == 0 ? hw->eng_prefill_factor : ef);
        h.h2d.a[X_W_CPU] = h.h2d.a[X_W_DISK] = Wm;
        h.rd.a[X_W_DISK] = Wm;
        h.d2h.c = head * K * 4 * B * V;
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

/* The fractions of group g's weight bytes on each tier. */
static void weight_fracs(const fg_plan *pl, int g, double *x) {
    int first = g < 0 ? 0 : fg_spec_layer(g, 0), count = g < 0 ? FG_GW_COUNT : FG_LW_COUNT;
    double by[FG_NTIERS] = {0}, tot = 0;
    for (int i = first; i < first + count; i++) {
        if (!pl->sp[i].present) continue;
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

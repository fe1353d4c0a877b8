/* fg_cost_pipe.c - the cost model of a pipeline of machines (see fg_cost_pipe.h). */
#include "fg_cost_pipe.h"

#include "fg_plan.h"
#include "fg_ring.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Model-level tensors a stage does not hold (fg_stage_holds_global) are
 * absent from its spec, as from its memory. */
static void keep_globals(fg_spec *g, int embed, int head) {
    fg_stage st = {0, 0, embed, head};
    for (int i = 0; i < FG_GW_COUNT; i++)
        if (!fg_stage_holds_global(&st, i)) g[i].present = 0;
}

static int kind_of(fg_pipecost *pp, const fg_model_config *c, const fg_spec *sp, int first, int count, int r) {
    const int no_embed = r > 0, no_lm_head = r < pp->P - 1;
    for (int k = 0; k < pp->nkinds; k++) {
        const fg_pipecost_kind *kd = &pp->kinds[k];
        if (kd->cfg.n_layers == count && kd->no_embed == no_embed && kd->no_lm_head == no_lm_head) return k;
    }
    fg_pipecost_kind *kd = &pp->kinds[pp->nkinds];
    kd->cfg = *c, kd->cfg.n_layers = count, kd->no_embed = no_embed, kd->no_lm_head = no_lm_head;
    kd->sp = fg_xcalloc((size_t)fg_spec_count(&kd->cfg), sizeof *kd->sp);
    memcpy(kd->sp, sp, FG_GW_COUNT * sizeof *sp);
    memcpy(kd->sp + FG_GW_COUNT, sp + fg_spec_layer(first, 0), (size_t)count * FG_LW_COUNT * sizeof *sp);
    keep_globals(kd->sp, !no_embed, !no_lm_head);
    return pp->nkinds++;
}

fg_status fg_pipecost_check(const fg_model_config *c, int P) {
    const int L = c->n_layers, top = L < FG_MAX_GPU_BATCHES ? L : FG_MAX_GPU_BATCHES;
    if (P < 1 || P > top)
        return fg_err_set(FG_EINPUT, "--stages %d: expected 1 to %d (%s has %d decoder layers, at least one a stage, "
                                     "and a block holds a group of GPU batches per stage, at most %d batches)",
                          P, top, c->name, L, FG_MAX_GPU_BATCHES);
    return FG_OK;
}

fg_status fg_pipecost_init(fg_pipecost *pp, const fg_model_config *c, const fg_spec *sp, int P, const fg_hw *hw,
                       const fg_search_opts *o) {
    memset(pp, 0, sizeof *pp);
    const int L = c->n_layers;
    fg_status st = fg_pipecost_check(c, P);
    if (st) return st;
    pp->P = P, pp->hw = hw, pp->model = c, pp->o = *o, pp->o.groups = P;
    pp->first = fg_xcalloc((size_t)P, sizeof *pp->first);
    pp->count = fg_xcalloc((size_t)P, sizeof *pp->count);
    pp->kind = fg_xcalloc((size_t)P, sizeof *pp->kind);
    pp->kinds = fg_xcalloc((size_t)P, sizeof *pp->kinds);
    double most = -1;
    for (int r = 0; r < P; r++) {   /* balanced, as the ranks split them (fg_ring_stage) */
        int hi;
        fg_ring_stage(L, r, P, &pp->first[r], &hi);
        pp->count[r] = hi - pp->first[r];
        pp->kind[r] = kind_of(pp, c, sp, pp->first[r], pp->count[r], r);
        const fg_pipecost_kind *kd = &pp->kinds[pp->kind[r]];
        fg_cost_case cs = {0};
        fg_cost_case_weights(&cs, &kd->cfg, kd->sp);
        double bytes = cs.layer_bytes * kd->cfg.n_layers + cs.model_bytes;
        if (bytes > most) most = bytes, pp->rep = pp->kind[r];
    }
    return FG_OK;
}

void fg_pipecost_free(fg_pipecost *pp) {
    for (int k = 0; k < pp->nkinds; k++) free(pp->kinds[k].sp);
    free(pp->kinds), free(pp->kind), free(pp->count), free(pp->first);
    memset(pp, 0, sizeof *pp);
}

void fg_pipecost_detail_free(fg_pipecost_detail *d) {
    free(d->pre_s), free(d->gen_s), free(d->pre_res), free(d->gen_res);
    free(d->gpu_bytes), free(d->shm_bytes), free(d->disk_bytes);
    memset(d, 0, sizeof *d);
}

/* The compression the caller searches under is the model's, kinds are copies. */
static void sync_kinds(fg_pipecost *pp) {
    for (int k = 0; k < pp->nkinds; k++) {
        pp->kinds[k].cfg.compress_weight = pp->model->compress_weight;
        pp->kinds[k].cfg.compress_cache = pp->model->compress_cache;
    }
}

/* What one kind of stage costs under p: a group's sweep (prefill; one
 * decode token) on its plan of P*K batches, and its memory. */
typedef struct {
    fg_cost_result steps;
    uint64_t gpu, shm, disk;
} kind_eval;

static fg_status eval_kind(const fg_pipecost *pp, int k, const fg_policy *p, kind_eval *e) {
    const fg_pipecost_kind *kd = &pp->kinds[k];
    const fg_search_opts *o = &pp->o;
    fg_policy q = *p;
    q.num_gpu_batches = p->num_gpu_batches * pp->P;
    fg_plan pl;
    fg_status st = fg_plan_build(&pl, &kd->cfg, kd->sp, &q, o->S, o->G, o->backend, o->gpu_mem, o->cpu_mem, o->disk_mem);
    if (!st) {
        fg_cost_case cs = {.K = p->num_gpu_batches, .no_embed = kd->no_embed, .no_lm_head = kd->no_lm_head};
        fg_cost_eval_steps(&pl, pp->hw, &cs, 1, &e->steps);
        e->gpu = fg_plan_gpu_bytes(&pl), e->shm = fg_plan_shm_bytes(&pl), e->disk = fg_search_disk_bytes(&pl);
    }
    fg_plan_free(&pl);
    return st;
}

/* p moved down a tier until every kind of stage fits its budgets (a move
 * for one never undoes another's: placement only goes down). */
static fg_status fit_all(fg_pipecost *pp, fg_policy *p) {
    for (int pass = 0; pass < 8; pass++) {
        int moved = 0;
        for (int k = 0; k < pp->nkinds; k++) {
            fg_policy q = *p;
            fg_plan pl;
            fg_status st = fg_search_fit(&pp->kinds[k].cfg, pp->kinds[k].sp, &pp->o, &q, &pl);
            if (st) return st;
            fg_plan_free(&pl);
            if (q.w_gpu != p->w_gpu || q.w_cpu != p->w_cpu || q.c_gpu != p->c_gpu || q.c_cpu != p->c_cpu) *p = q, moved = 1;
        }
        if (!moved) return FG_OK;
    }
    return fg_err_set(FG_EINPUT, "no placement of this case fits every stage's budgets");
}

/* A transfer of c seconds on a link free from *link, ready at t: its arrival. */
static double xfer(double *link, double t, double c) {
    double s = t > *link ? t : *link;
    return *link = s + c;
}

/* Exact tokens simulated before the decode's steady increment is taken as
 * the rest's (the schedule is periodic within a few rounds of the ring). */
#define SIM_TOKENS(P) (4 * (P) + 8)

/* The block's schedule: rank r takes (token i, group g) in that order once
 * free and once g's input arrived (rank 0: the ids of g's last token). */
static void simulate(const fg_pipecost_detail *d, int G, double *prefill_end, double *end) {
    const int P = d->P, T = G < SIM_TOKENS(P) ? G : SIM_TOKENS(P);
    double *freeat = fg_xcalloc((size_t)P, sizeof *freeat), *link = fg_xcalloc((size_t)P, sizeof *link);
    double *done = fg_xcalloc((size_t)P * P, sizeof *done), last = 0, before = 0;
    for (int i = 0; i < T; i++) {
        before = last;
        for (int g = 0; g < P; g++)
            for (int r = 0; r < P; r++) {
                double in = r > 0 ? xfer(&link[r - 1], done[(r - 1) * P + g], i ? d->hop_gen_s : d->hop_pre_s)
                            : i == 0 ? 0
                            : P > 1  ? xfer(&link[P - 1], done[(P - 1) * P + g], d->ids_s)
                                     : done[g];
                double start = in > freeat[r] ? in : freeat[r];
                done[r * P + g] = freeat[r] = start + (i ? d->gen_s[r] : d->pre_s[r]);
                if (freeat[r] > last) last = freeat[r];
            }
        if (i == 0) *prefill_end = last;
    }
    *end = last + (G > T ? (double)(G - T) * (last - before) : 0);
    free(freeat), free(link), free(done);
}

/* The transfers, the steady-state bounds and what binds a decode token. */
static void bounds(const fg_pipecost *pp, const fg_policy *p, fg_pipecost_detail *d) {
    const double K = p->num_gpu_batches, B = p->gbs, S = pp->o.S, H = pp->model->hidden;
    const double bw = pp->hw->net_gbps * 1e9, lat = pp->hw->net_latency_s;
    const int P = d->P;
    d->hop_pre_s = P > 1 ? K * (lat + 2 * B * S * H / bw) : 0;
    d->hop_gen_s = P > 1 ? K * (lat + 2 * B * H / bw) : 0;
    d->ids_s = P > 1 ? K * (lat + 4 * B / bw) : 0;
    d->ring_pre_s = (P - 1) * d->hop_pre_s + d->ids_s;
    d->ring_gen_s = (P - 1) * d->hop_gen_s + d->ids_s;
    double sum = 0;
    d->slowest = 0, d->fill_s = 0;
    for (int r = 0; r < P; r++) {
        sum += d->gen_s[r];
        if (d->gen_s[r] > d->gen_s[d->slowest]) d->slowest = r;
        if (r < P - 1) d->fill_s += d->pre_s[r] + d->hop_pre_s;
    }
    d->bound_stage_s = P * d->gen_s[d->slowest];
    d->bound_net_s = P * (d->hop_gen_s > d->ids_s ? d->hop_gen_s : d->ids_s);
    d->bound_ring_s = sum + d->ring_gen_s;
    if (d->bound_stage_s >= d->bound_net_s && d->bound_stage_s >= d->bound_ring_s)
        snprintf(d->bottleneck, sizeof d->bottleneck, "stage %d (%s)", d->slowest, fg_cost_res_name(d->gen_res[d->slowest]));
    else
        snprintf(d->bottleneck, sizeof d->bottleneck, "%s", d->bound_net_s >= d->bound_ring_s ? "network" : "ring round trip");
}

static void detail_alloc(fg_pipecost_detail *d, int P) {
    memset(d, 0, sizeof *d);
    d->P = P;
    d->pre_s = fg_xcalloc((size_t)P, sizeof *d->pre_s), d->gen_s = fg_xcalloc((size_t)P, sizeof *d->gen_s);
    d->pre_res = fg_xcalloc((size_t)P, sizeof *d->pre_res), d->gen_res = fg_xcalloc((size_t)P, sizeof *d->gen_res);
    d->gpu_bytes = fg_xcalloc((size_t)P, sizeof *d->gpu_bytes), d->shm_bytes = fg_xcalloc((size_t)P, sizeof *d->shm_bytes);
    d->disk_bytes = fg_xcalloc((size_t)P, sizeof *d->disk_bytes);
}

/* p's pipeline: every kind of stage on its plan, the schedule simulated;
 * r's pred (resources: busy seconds summed over the stages), the largest
 * stage's memory, and the detail when d is given. */
static fg_status evaluate(const fg_pipecost *pp, const fg_policy *p, fg_search_result *r, fg_pipecost_detail *d) {
    const int P = pp->P, G = pp->o.G;
    kind_eval *ke = fg_xcalloc((size_t)pp->nkinds, sizeof *ke);
    fg_status st = FG_OK;
    for (int k = 0; k < pp->nkinds && !st; k++)
        if ((st = eval_kind(pp, k, p, &ke[k]))) {
            int s = 0;
            while (pp->kind[s] != k) s++;
            char why[512];
            snprintf(why, sizeof why, "%s", fg_err_msg());
            st = fg_err_set(st, "stage %d (layers %d-%d): %s", s, pp->first[s], pp->first[s] + pp->count[s] - 1, why);
        }
    fg_pipecost_detail own;
    if (!d) d = &own;
    detail_alloc(d, P);
    d->K = p->num_gpu_batches, d->gbs = p->gbs;
    memset(r, 0, sizeof *r);
    r->p = *p;
    for (int s = 0; s < P && !st; s++) {
        const kind_eval *e = &ke[pp->kind[s]];
        d->pre_s[s] = e->steps.prefill_s, d->gen_s[s] = e->steps.decode_s;
        d->pre_res[s] = e->steps.pre_bottleneck, d->gen_res[s] = e->steps.gen_bottleneck;
        d->gpu_bytes[s] = e->gpu, d->shm_bytes[s] = e->shm, d->disk_bytes[s] = e->disk;
        if (e->gpu > r->gpu_bytes) r->gpu_bytes = e->gpu;
        if (e->shm > r->shm_bytes) r->shm_bytes = e->shm;
        if (e->disk > r->disk_bytes) r->disk_bytes = e->disk;
        for (int q = 0; q < FG_COST_NRES; q++)   /* P groups a token */
            r->pred.pre_res[q] += P * e->steps.pre_res[q], r->pred.gen_res[q] += (double)P * (G - 1) * e->steps.gen_res[q];
    }
    if (!st) {
        bounds(pp, p, d);
        simulate(d, G, &d->block_prefill_s, &d->block_decode_s);
        d->block_decode_s -= d->block_prefill_s;
        int bls = P * p->num_gpu_batches * p->gbs, n = pp->o.n_prompts > 0 ? pp->o.n_prompts : bls;
        int blocks = (n + bls - 1) / bls;   /* each block fills and drains the pipeline */
        r->pred.prefill_s = blocks * d->block_prefill_s, r->pred.decode_s = blocks * d->block_decode_s;
        for (int q = 0; q < FG_COST_NRES; q++) r->pred.pre_res[q] *= blocks, r->pred.gen_res[q] *= blocks;
        double total = r->pred.prefill_s + r->pred.decode_s;
        r->pred.throughput = total > 0 ? (double)n * G / total : 0;
        r->pred.pre_bottleneck = d->pre_res[d->slowest], r->pred.gen_bottleneck = d->gen_res[d->slowest];
    }
    if (d == &own) fg_pipecost_detail_free(&own);
    free(ke);
    return st;
}

static fg_status scorer(void *ctx, fg_policy *p, fg_search_result *r) {
    fg_pipecost *pp = ctx;
    fg_status st = fit_all(pp, p);
    return st ? st : evaluate(pp, p, r, NULL);
}

fg_status fg_pipecost_search(fg_pipecost *pp, fg_search_result *r, fg_pipecost_detail *d) {
    sync_kinds(pp);
    fg_search_opts o = pp->o;
    o.score = scorer, o.score_ctx = pp;
    const fg_pipecost_kind *rep = &pp->kinds[pp->rep];
    fg_status st = fg_search_policy(&rep->cfg, rep->sp, pp->hw, &o, r);
    if (st || !d) return st;
    fg_search_result again;   /* the winner's detail (the same figures) */
    st = evaluate(pp, &r->p, &again, d);
    return st;
}

fg_status fg_pipecost_score(fg_pipecost *pp, const fg_policy *p, fg_search_result *r, fg_pipecost_detail *d) {
    sync_kinds(pp);
    double t0 = fg_now();
    fg_status st = evaluate(pp, p, r, d);
    r->cases = 1, r->seconds = fg_now() - t0;
    return st;
}

json_t *fg_pipecost_json(const fg_pipecost *pp, const fg_pipecost_detail *d) {
    json_t *st = json_array();
    for (int r = 0; r < pp->P; r++)
        json_array_append_new(st, json_pack("{s:i, s:i, s:b, s:b, s:f, s:f, s:s, s:s, s:{s:I, s:I, s:I}}",
            "first_layer", pp->first[r], "layers", pp->count[r], "embedding", r == 0, "lm_head", r == pp->P - 1,
            "prefill_sweep_s", d->pre_s[r], "decode_sweep_s", d->gen_s[r],
            "prefill_bound", fg_cost_res_name(d->pre_res[r]), "decode_bound", fg_cost_res_name(d->gen_res[r]),
            "memory_bytes", "gpu", (json_int_t)d->gpu_bytes[r], "cpu", (json_int_t)d->shm_bytes[r],
            "disk", (json_int_t)d->disk_bytes[r]));
    return json_pack("{s:i, s:i, s:f, s:f, s:o, s:f, s:f, s:f, s:f, s:f, s:{s:f, s:f, s:f}, s:s, s:f, s:f, s:f}",
        "groups", pp->P, "sequences_per_block", pp->P * d->K * d->gbs, "network_GBps", pp->hw->net_gbps,
        "network_latency_us", pp->hw->net_latency_s * 1e6, "stage", st,
        "transfer_prefill_s", d->hop_pre_s, "transfer_decode_s", d->hop_gen_s, "ids_transfer_s", d->ids_s,
        "ring_prefill_s", d->ring_pre_s, "ring_decode_s", d->ring_gen_s,
        "decode_token_bounds_s", "stage", d->bound_stage_s, "network", d->bound_net_s, "ring", d->bound_ring_s,
        "bottleneck", d->bottleneck, "fill_s", d->fill_s, "block_prefill_s", d->block_prefill_s,
        "block_decode_s", d->block_decode_s);
}

void fg_pipecost_print(FILE *f, const fg_pipecost *pp, const fg_pipecost_detail *d) {
    fprintf(f, "pipeline: %d machines, each with this hardware, these budgets and this policy; network %.3g GB/s a link, "
               "%.3g us a message\n", pp->P, pp->hw->net_gbps, pp->hw->net_latency_s * 1e6);
    fprintf(f, "  a block: %d groups of %d x %d = %d sequences; each stage sweeps its layers once a group a token\n",
            pp->P, d->K, d->gbs, pp->P * d->K * d->gbs);
    for (int r = 0; r < pp->P; r++)
        fprintf(f, "  stage %d: layers %d-%d%s%s: a group's prefill %.4g s (%s), decode %.4g s a token (%s); "
                   "gpu %.3g GB, cpu %.3g GB, disk %.3g GB\n", r, pp->first[r], pp->first[r] + pp->count[r] - 1,
                r == 0 ? " + embedding" : "", r == pp->P - 1 ? " + LM head" : "", d->pre_s[r],
                fg_cost_res_name(d->pre_res[r]), d->gen_s[r], fg_cost_res_name(d->gen_res[r]),
                (double)d->gpu_bytes[r] / 1e9, (double)d->shm_bytes[r] / 1e9, (double)d->disk_bytes[r] / 1e9);
    fprintf(f, "  a group's transfers: hidden %.3g s a hop at prefill, %.3g s a decode token; ids back %.3g s; "
               "around the ring %.3g s a decode token\n", d->hop_pre_s, d->hop_gen_s, d->ids_s, d->ring_gen_s);
    fprintf(f, "  a decode token: stages %.4g s, network %.4g s, ring round trip %.4g s: bound by %s; "
               "fill %.4g s a block\n", d->bound_stage_s, d->bound_net_s, d->bound_ring_s, d->bottleneck, d->fill_s);
}

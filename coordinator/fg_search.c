/* fg_search.c - the policy search (see fg_search.h). */
#include "fg_search.h"
#include "fg_plan.h"
#include "fg_shm.h"
#include "fg_store.h"

#include <glpk.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* LP columns (GLPK counts from 1). */
enum {
    /* the fractions, X_* + 1: weights (a mixture of experts' dense part),
     * cache, experts, on the GPU, CPU, disk */
    C_W_GPU = 1, C_W_CPU, C_W_DISK, C_C_GPU, C_C_CPU, C_C_DISK, C_X_GPU, C_X_CPU, C_X_DISK,
    /* seconds of a layer's prefill and decode step, and of the head's */
    C_T_LAYER_PRE, C_T_LAYER_GEN, C_T_HEAD_PRE, C_T_HEAD_GEN,
    /* GB of a device weight slot; of the shm stages of disk-tier weights */
    C_SLOT, C_STAGE,
    /* 0/1: whether a buffer exists (any fraction off its tier): the cache
     * slots on the GPU, the cache stages in shm, the tier store on disk,
     * the device weight slots */
    C_Z_CACHE_SLOTS, C_Z_CACHE_STAGES, C_Z_STORE, C_Z_WEIGHT_SLOTS,
    /* 0/1: a sparse layer's stacks are read in the weight slot (an expert off the GPU) */
    C_Z_XVIEW,
    NCOL = C_Z_XVIEW
};
_Static_assert(C_X_DISK == C_W_GPU + X_X_DISK, "the fractions' columns in fg_cost.h's order");


/* What the memory rows need, from the engine's own plan of the case with
 * everything on the GPU (its fixed buffers: inputs, logits, workspace,
 * activations) and from the tensor list (the rest, by fraction). Bytes. */
typedef struct {
    double wtot;           /* every weight but the experts */
    double xtot, xl;       /* every sparse layer's experts; one layer's (the largest) */
    double wl, wm, mx;     /* a decoder layer's weights, the model-level group's, the larger of the two */
    double ctot;           /* the whole KV cache: k and v of every layer and GPU batch */
    double cslot, cstage;  /* an off-GPU cache's device slots; a disk cache's shm stages */
    double store;          /* the tier store of the weights (fg_search_disk_bytes) */
    double fix_gpu, fix_shm, fix_disk;
} mem_coef;

#define KV_TENSORS 2   /* a layer's cache: k and v */

/* GPU batches a plan holds per K of the LP: a pipeline stage's groups. */
static int ngroups(const fg_search_opts *o) { return o->groups > 1 ? o->groups : 1; }

static void policy_of(const fg_cost_case *cs, fg_policy *p) {
    memset(p, 0, sizeof *p);
    p->gbs = cs->gbs, p->num_gpu_batches = cs->K, p->cpu_cache_compute = cs->cpu_attn, p->overlap = 1;
    p->w_gpu = 100, p->c_gpu = 100;
    p->x_set = 1, p->x_gpu = 100, p->expert_load = (fg_expert_load)cs->expert_load, p->cpu_expert_compute = cs->cpu_experts;
    p->h_gpu = cs->act == FG_TIER_GPU ? 100 : 0, p->h_cpu = cs->act == FG_TIER_CPU ? 100 : 0;
}

/* The tier store of the model's weights: a file a group (the model-level
 * tensors, each layer), each tensor aligned, a header page a file; group[]
 * gets the model-level group's bytes and one decoder layer's. */
static double store_bytes(const fg_model_config *c, const fg_spec *sp, double group[2]) {
    group[0] = group[1] = 0;
    for (int i = 0; i < FG_GW_COUNT + FG_LW_COUNT; i++)
        if (sp[i].present) group[i >= FG_GW_COUNT] += (double)fg_shm_align_up(fg_spec_stored_bytes(c, sp, i));
    return group[0] + c->n_layers * group[1] + (c->n_layers + 1) * (double)FG_STORE_ALIGN;
}

static fg_status mem_coefs(const fg_model_config *c, const fg_spec *sp, const fg_search_opts *o, const fg_cost_case *cs,
                           mem_coef *m) {
    fg_policy p;
    policy_of(cs, &p);
    p.num_gpu_batches *= ngroups(o);
    fg_plan a;
    fg_status st = fg_plan_build(&a, c, sp, &p, o->S, o->G, o->backend, 0, 0, 0);
    if (!st) {
        double group[2];   /* model-level, one decoder layer */
        m->store = store_bytes(c, sp, group);
        double block = (double)fg_shm_align_up((uint64_t)a.Tmax * a.gbs * fg_cache_row_bytes(c));
        m->xtot = m->xl = 0;
        for (int l = 0; l < c->n_layers; l++) {
            double xl = 0;
            for (int i = fg_spec_layer(l, 0); i < fg_spec_layer(l + 1, 0); i++)
                if (sp[i].present && sp[i].experts) xl += (double)fg_spec_stored_bytes(c, sp, i);
            m->xtot += xl, m->xl = xl > m->xl ? xl : m->xl;
        }
        m->wtot = (double)(a.used[SEG_WGPU] - FG_SHM_HEADER_BYTES) - m->xtot;
        m->wm = group[0], m->wl = group[1];
        m->mx = group[0] > group[1] ? group[0] : group[1];
        m->ctot = (double)KV_TENSORS * a.L * a.K * block;
        m->cslot = m->cstage = (double)FG_NSLOTS * KV_TENSORS * block;   /* double-buffered k and v */
        m->fix_gpu = (double)fg_plan_gpu_bytes(&a) - m->wtot - m->xtot - m->ctot;
        m->fix_shm = (double)fg_plan_shm_bytes(&a) - m->wtot - m->xtot;
        m->fix_disk = (double)a.used[SEG_SPILL];
    }
    fg_plan_free(&a);
    return st;
}

/* Nonzero coefficients of one LP: the rows of solve() have well under
 * this many (GLPK's arrays count from 1, so each array has one more). */
#define LP_MAX_NZ 512

static int nz_room(int ne) {
    FG_ASSERT(ne < LP_MAX_NZ);
    return ne;
}

/* The problem's columns and their bounds: fractions in [0, 1], seconds and
 * GB at least 0, the 0/1 quantities relaxed to [0, 1]. */
static glp_prob *lp_new(void) {
    glp_prob *lp = glp_create_prob();
    glp_set_obj_dir(lp, GLP_MIN);
    glp_add_cols(lp, NCOL);
    for (int j = C_W_GPU; j <= C_X_DISK; j++) glp_set_col_bnds(lp, j, GLP_DB, 0, 1);
    for (int j = C_T_LAYER_PRE; j <= C_STAGE; j++) glp_set_col_bnds(lp, j, GLP_LO, 0, 0);
    for (int j = C_Z_CACHE_SLOTS; j <= C_Z_XVIEW; j++) glp_set_col_bnds(lp, j, GLP_DB, 0, 1);
    return lp;
}

/* Simplex from the last basis (the previous case, the next K, is a few
 * pivots away; a basis gone bad starts again from the standard one). */
static int lp_run(glp_prob *lp, double *x, double *obj) {
    glp_smcp parm;
    glp_init_smcp(&parm);
    parm.msg_lev = GLP_MSG_OFF;
    int rc = glp_simplex(lp, &parm);
    if (rc == GLP_EBADB || rc == GLP_ESING || rc == GLP_ECOND) glp_std_basis(lp), rc = glp_simplex(lp, &parm);
    int ok = rc == 0 && glp_get_status(lp) == GLP_OPT;
    for (int v = 0; ok && v < FG_COST_NX; v++) x[v] = glp_get_col_prim(lp, C_W_GPU + v);
    if (ok) *obj = glp_get_obj_val(lp);
    return ok ? 0 : -1;
}

/* One LP: the fractions minimising the block's time for case cs. 0 and x,
 * *obj (the block's seconds) filled, or -1 when infeasible. The 0/1
 * quantities (a buffer that exists once any fraction is off its tier) are
 * relaxed to [0, 1]: the rounding and fit() against the engine's plan
 * settle them. *lpp keeps the problem from one K to the next of a line, so
 * each solve starts from the last basis (NULL: a new one). */
static int solve(glp_prob **lpp, const fg_cost_terms *t, const mem_coef *m, const fg_search_opts *o,
                 const fg_cost_case *cs, int L, double *x, double *obj) {
    int fresh = !*lpp;
    if (fresh) *lpp = lp_new();
    /* a model without experts: their fractions all on the GPU (nothing to place) */
    if (!(m->xtot > 0)) glp_set_col_bnds(*lpp, C_X_GPU, GLP_FX, 1, 1);
    glp_prob *lp = *lpp;
    glp_set_obj_coef(lp, C_T_LAYER_PRE, L);
    glp_set_obj_coef(lp, C_T_HEAD_PRE, 1);
    glp_set_obj_coef(lp, C_T_LAYER_GEN, (double)L * (cs->G - 1));
    glp_set_obj_coef(lp, C_T_HEAD_GEN, cs->G - 1);

    /* rows, as (column, coefficient) lists; memory rows in GB for scale.
     * Beside each, the inequality it is (w_*, c_*: the weights' and the
     * cache's fractions on a tier; T_*: a step's seconds; z_*: 0/1, a
     * buffer exists; slot, stage: GB of a device weight slot, of the shm
     * stages of disk-tier weights) */
    int ia[1 + LP_MAX_NZ], ja[1 + LP_MAX_NZ], ne = 0, row = 0;
    double ar[1 + LP_MAX_NZ];
#define ROW(type, lo, hi) ((fresh ? glp_add_rows(lp, 1) : 0), glp_set_row_bnds(lp, ++row, type, lo, hi))
#define COEF(col, v) (ne = nz_room(ne), ia[++ne] = row, ja[ne] = (col), ar[ne] = (v))
    /* w_gpu + w_cpu + w_disk = 1 */
    ROW(GLP_FX, 1, 1), COEF(C_W_GPU, 1), COEF(C_W_CPU, 1), COEF(C_W_DISK, 1);
    /* c_gpu + c_cpu + c_disk = 1 */
    ROW(GLP_FX, 1, 1), COEF(C_C_GPU, 1), COEF(C_C_CPU, 1), COEF(C_C_DISK, 1);
    /* x_gpu + x_cpu + x_disk = 1 */
    ROW(GLP_FX, 1, 1), COEF(C_X_GPU, 1), COEF(C_X_CPU, 1), COEF(C_X_DISK, 1);
    const fg_lin *sets[4] = {t->pre, t->gen, t->head_pre, t->head_gen};
    const int tcol[4] = {C_T_LAYER_PRE, C_T_LAYER_GEN, C_T_HEAD_PRE, C_T_HEAD_GEN};
    for (int q = 0; q < 4; q++) {   /* T >= each bound: the max() of the step */
        fg_lin b[FG_COST_NBOUND];
        fg_cost_bounds(sets[q], t->contention, b);
        for (int r = 0; r < FG_COST_NBOUND; r++) {
            /* T_q >= b.c + sum_v b.a[v] x_v, as T_q - sum_v b.a[v] x_v >= b.c */
            ROW(GLP_LO, b[r].c, 0), COEF(tcol[q], 1);
            for (int v = 0; v < FG_COST_NX; v++)
                if (b[r].a[v] != 0) COEF(C_W_GPU + v, -b[r].a[v]);
        }
    }
    /* c_cpu + c_disk <= z_cache_slots: the device's cache slots exist once any cache is off it */
    ROW(GLP_UP, 0, 0), COEF(C_C_CPU, 1), COEF(C_C_DISK, 1), COEF(C_Z_CACHE_SLOTS, -1);
    /* c_disk <= z_cache_stages: the shm stages, once any cache is on disk */
    ROW(GLP_UP, 0, 0), COEF(C_C_DISK, 1), COEF(C_Z_CACHE_STAGES, -1);
    /* w_disk <= z_store, x_disk <= z_store: the tier store, once any weight is on disk */
    ROW(GLP_UP, 0, 0), COEF(C_W_DISK, 1), COEF(C_Z_STORE, -1);
    ROW(GLP_UP, 0, 0), COEF(C_X_DISK, 1), COEF(C_Z_STORE, -1);
    /* x_cpu + x_disk <= z_xview: the stacks in the weight slot, once any expert is off the GPU */
    ROW(GLP_UP, 0, 0), COEF(C_X_CPU, 1), COEF(C_X_DISK, 1), COEF(C_Z_XVIEW, -1);
    const double GB = 1e9;
    /* A weight slot holds the largest group's off-GPU bytes: a layer's by
     * fraction; the model-level group's whole (one tensor, the embedding,
     * is nearly all of it). FG_NSLOTS of them on the device; as many shm
     * stages of the same size once any weight is on disk. */
    /* w_cpu + w_disk <= z_weight_slots: the slots, once any weight is off the GPU */
    ROW(GLP_UP, 0, 0), COEF(C_W_CPU, 1), COEF(C_W_DISK, 1), COEF(C_Z_WEIGHT_SLOTS, -1);
    /* slot >= wm z_weight_slots */
    ROW(GLP_LO, 0, 0), COEF(C_SLOT, 1), COEF(C_Z_WEIGHT_SLOTS, -m->wm / GB);
    /* slot >= wl (w_cpu + w_disk) + xl z_xview: a layer's dense part by fraction, its experts' stacks whole */
    ROW(GLP_LO, 0, 0), COEF(C_SLOT, 1), COEF(C_W_CPU, -m->wl / GB), COEF(C_W_DISK, -m->wl / GB);
    COEF(C_Z_XVIEW, -m->xl / GB);
    /* stage >= FG_NSLOTS (slot - mx (1 - z_store)): the slots' size once the store exists (a slot is at most
     * mx), as stage - FG_NSLOTS slot - FG_NSLOTS mx z_store >= -FG_NSLOTS mx */
    ROW(GLP_LO, -FG_NSLOTS * m->mx / GB, 0), COEF(C_STAGE, 1), COEF(C_SLOT, -FG_NSLOTS);
    COEF(C_Z_STORE, -FG_NSLOTS * m->mx / GB);
    if (o->gpu_mem) {
        /* wtot w_gpu + xtot x_gpu + FG_NSLOTS slot + ctot c_gpu + cslot z_cache_slots <= gpu_mem - fixed */
        ROW(GLP_UP, 0, ((double)o->gpu_mem - m->fix_gpu) / GB);
        COEF(C_W_GPU, m->wtot / GB), COEF(C_X_GPU, m->xtot / GB), COEF(C_SLOT, FG_NSLOTS);
        COEF(C_C_GPU, m->ctot / GB), COEF(C_Z_CACHE_SLOTS, m->cslot / GB);
    }
    if (o->cpu_mem) {
        /* wtot (w_gpu + w_cpu) + xtot (x_gpu + x_cpu) + stage + ctot c_cpu + cstage z_cache_stages
         * <= cpu_mem - fixed (the GPU weights' and experts' host copy stays in shm) */
        ROW(GLP_UP, 0, ((double)o->cpu_mem - m->fix_shm) / GB);
        COEF(C_W_GPU, m->wtot / GB), COEF(C_W_CPU, m->wtot / GB), COEF(C_STAGE, 1);
        COEF(C_X_GPU, m->xtot / GB), COEF(C_X_CPU, m->xtot / GB);
        COEF(C_C_CPU, m->ctot / GB), COEF(C_Z_CACHE_STAGES, m->cstage / GB);
    }
    if (o->disk_mem) {
        /* store z_store + ctot c_disk <= disk_mem - fixed (the spill file) */
        ROW(GLP_UP, 0, ((double)o->disk_mem - m->fix_disk) / GB);
        COEF(C_Z_STORE, m->store / GB), COEF(C_C_DISK, m->ctot / GB);
    }
#undef ROW
#undef COEF
    glp_load_matrix(lp, ne, ia, ja, ar);
    return lp_run(lp, x, obj);
}

/* The engine's percentages from fractions, rounded down, the rest to disk;
 * but where the LP puts no whole point on disk, the rounding's remainder
 * goes to the CPU: a point of weights left on disk would have the run build
 * the whole model's tier store and read from it every step (fit() moves it
 * down again where the CPU budget cannot hold it). */
static void round_policy(const double *x, fg_policy *p) {
    p->w_gpu = floor(100 * x[X_W_GPU] + 1e-6), p->w_cpu = floor(100 * x[X_W_CPU] + 1e-6);
    p->c_gpu = floor(100 * x[X_C_GPU] + 1e-6), p->c_cpu = floor(100 * x[X_C_CPU] + 1e-6);
    if (p->w_gpu + p->w_cpu > 100 || 100 * x[X_W_DISK] < 1 - 1e-6) p->w_cpu = 100 - p->w_gpu;
    if (p->c_gpu + p->c_cpu > 100 || 100 * x[X_C_DISK] < 1 - 1e-6) p->c_cpu = 100 - p->c_gpu;
    /* the experts: the disk's share rounded to the nearest point, not what
     * two floors leave (a point of experts on disk costs the whole tier store) */
    p->x_set = 1;
    p->x_gpu = floor(100 * x[X_X_GPU] + 1e-6);
    p->x_cpu = floor(100 * (1 - x[X_X_DISK]) + 0.5) - p->x_gpu;
    if (p->x_cpu < 0) p->x_cpu = 0;
}

#define FIT_MAX_MOVES 64   /* moves down a tier before fit() gives up */

/* Build p's plan within the budgets, moving placement a tier down (GPU to
 * CPU, CPU to disk; weights before cache) while a budget is exceeded, by
 * the percentage points the excess bytes are worth. FG_OK with *pl built,
 * or the last refusal. */
static fg_status fit_moves(const fg_model_config *c, const fg_spec *sp, const fg_search_opts *o, const mem_coef *m,
                           fg_policy *p, fg_plan *pl) {
    for (int tries = 0; tries < FIT_MAX_MOVES; tries++) {
        fg_status st = fg_plan_build(pl, c, sp, p, o->S, o->G, o->backend, o->gpu_mem, o->cpu_mem, o->disk_mem);
        if (!st) return FG_OK;
        uint64_t gpu = fg_plan_gpu_bytes(pl), shm = fg_plan_shm_bytes(pl);
        fg_plan_free(pl);
        if (st != FG_EINPUT) return st;
        /* a percentage point of weights, of experts or of cache, in bytes; the
         * larger of the dense part and the experts moves first */
        double wpt = m->wtot / 100 > 1 ? m->wtot / 100 : 1, cpt = m->ctot / 100 > 1 ? m->ctot / 100 : 1;
        double xpt = m->xtot / 100 > 1 ? m->xtot / 100 : 1;
        int xfirst = m->xtot > m->wtot && p->x_set;
        if (o->gpu_mem && gpu > o->gpu_mem) {
            double over = (double)(gpu - o->gpu_mem);
            int dw = (int)ceil(over / wpt), dc = (int)ceil(over / cpt), dx = (int)ceil(over / xpt);
            if (xfirst && p->x_gpu >= 1) dx = dx < p->x_gpu ? dx : (int)p->x_gpu, p->x_gpu -= dx, p->x_cpu += dx;
            else if (p->w_gpu >= 1) dw = dw < p->w_gpu ? dw : (int)p->w_gpu, p->w_gpu -= dw, p->w_cpu += dw;
            else if (p->x_set && p->x_gpu >= 1) dx = dx < p->x_gpu ? dx : (int)p->x_gpu, p->x_gpu -= dx, p->x_cpu += dx;
            else if (p->c_gpu >= 1) dc = dc < p->c_gpu ? dc : (int)p->c_gpu, p->c_gpu -= dc, p->c_cpu += dc;
            else return st;
        } else if (o->cpu_mem && shm > o->cpu_mem) {
            double over = (double)(shm - o->cpu_mem);
            int dw = (int)ceil(over / wpt), dc = (int)ceil(over / cpt), dx = (int)ceil(over / xpt);
            if (xfirst && p->x_cpu >= 1) p->x_cpu -= dx < p->x_cpu ? dx : p->x_cpu;
            else if (p->w_cpu >= 1) p->w_cpu -= dw < p->w_cpu ? dw : p->w_cpu;
            else if (p->x_set && p->x_cpu >= 1) p->x_cpu -= dx < p->x_cpu ? dx : p->x_cpu;
            else if (p->c_cpu >= 1) p->c_cpu -= dc < p->c_cpu ? dc : p->c_cpu;
            else if (p->w_gpu >= 1) p->w_gpu -= dw < p->w_gpu ? dw : p->w_gpu;   /* the GPU weights' host copy is shm too */
            else if (p->x_set && p->x_gpu >= 1) p->x_gpu -= dx < p->x_gpu ? dx : p->x_gpu;
            else return st;
        } else {
            return st;   /* disk, or something no move helps */
        }
    }
    return fg_err_set(FG_EINPUT, "no placement of this case fits the budgets");
}

/* fit_moves on the plan of all of a block's GPU batches (a pipeline
 * stage's groups of them); p keeps its per-group K. */
static fg_status fit(const fg_model_config *c, const fg_spec *sp, const fg_search_opts *o, const mem_coef *m,
                     fg_policy *p, fg_plan *pl) {
    const int g = ngroups(o);
    p->num_gpu_batches *= g;
    fg_status st = fit_moves(c, sp, o, m, p, pl);
    p->num_gpu_batches /= g;
    return st;
}

fg_status fg_search_fit(const fg_model_config *c, const fg_spec *sp, const fg_search_opts *o, fg_policy *p, fg_plan *pl) {
    fg_cost_case cs = {.gbs = p->gbs, .K = p->num_gpu_batches, .cpu_attn = p->cpu_cache_compute,
                       .act = fg_policy_act_tier(p)};
    mem_coef m = {0};
    fg_status st = mem_coefs(c, sp, o, &cs, &m);
    return st ? st : fit(c, sp, o, &m, p, pl);
}

uint64_t fg_search_disk_bytes(const fg_plan *pl) {
    double group[2];
    return pl->used[SEG_SPILL] + (pl->any_disk_weights ? (uint64_t)store_bytes(pl->c, pl->sp, group) : 0);
}

fg_status fg_search_score(const fg_model_config *c, const fg_spec *sp, const fg_hw *hw, const fg_search_opts *o,
                          const fg_policy *p, fg_search_result *r) {
    memset(r, 0, sizeof *r);
    double t0 = fg_now();
    fg_plan pl;
    fg_status st = fg_plan_build(&pl, c, sp, p, o->S, o->G, o->backend, o->gpu_mem, o->cpu_mem, o->disk_mem);
    if (!st) {
        r->p = *p;
        fg_cost_eval_plan(&pl, hw, o->n_prompts, &r->pred);
        r->gpu_bytes = fg_plan_gpu_bytes(&pl), r->shm_bytes = fg_plan_shm_bytes(&pl), r->disk_bytes = fg_search_disk_bytes(&pl);
        r->cases = 1;
    }
    fg_plan_free(&pl);
    r->seconds = fg_now() - t0;
    return st;
}

/* A case the LP solved: the candidate it proposes. */
typedef struct {
    fg_cost_case cs;
    mem_coef m;
    double x[FG_COST_NX];
    double lp_tput;   /* the LP optimum as throughput */
} cand;

/* Pass 2 stops at an LP optimum below this share of the best score found:
 * rounding only lowers a candidate, and the LP averages the layers. */
#define LP_PRUNE_MARGIN 0.9

/* A rounded candidate fitted to the budgets and scored: on its plan, or by
 * the caller's scorer (a pipeline's stages). */
static fg_status score(const fg_model_config *c, const fg_spec *sp, const fg_hw *hw, const fg_search_opts *o,
                       const cand *cd, fg_policy *p, fg_search_result *sc) {
    memset(sc, 0, sizeof *sc);
    if (o->score) return o->score(o->score_ctx, p, sc);
    fg_plan pl;
    fg_status st = fit(c, sp, o, &cd->m, p, &pl);
    if (st) return st;
    fg_cost_eval_plan(&pl, hw, o->n_prompts, &sc->pred);
    sc->gpu_bytes = fg_plan_gpu_bytes(&pl), sc->shm_bytes = fg_plan_shm_bytes(&pl);
    sc->disk_bytes = fg_search_disk_bytes(&pl);
    fg_plan_free(&pl);
    return FG_OK;
}

static int by_lp_tput(const void *a, const void *b) {
    double x = ((const cand *)a)->lp_tput, y = ((const cand *)b)->lp_tput;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The least demanding placement (every weight and the cache on disk, one
 * sequence a batch) built as the engine would: FG_EINPUT where even it does
 * not fit, else its GPU and shm bytes. */
static fg_status least_fits(const fg_model_config *c, const fg_spec *sp, const fg_search_opts *o, uint64_t *gpu,
                            uint64_t *shm) {
    fg_policy least = {.gbs = 1, .num_gpu_batches = ngroups(o), .h_cpu = 100, .overlap = 1};
    fg_plan pl;
    fg_status st = fg_plan_build(&pl, c, sp, &least, o->S, o->G, o->backend, o->gpu_mem, o->cpu_mem, o->disk_mem);
    if (!st) *gpu = fg_plan_gpu_bytes(&pl), *shm = fg_plan_shm_bytes(&pl);
    fg_plan_free(&pl);
    return st ? fg_err_set(FG_EINPUT, "no policy fits the budgets (even with every weight and the cache on disk and "
                                      "one sequence per batch: %s)", fg_err_msg())
              : FG_OK;
}

fg_status fg_search_policy(const fg_model_config *c, const fg_spec *sp, const fg_hw *hw, const fg_search_opts *o,
                           fg_search_result *r) {
    static const int gbs_list[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256};
    memset(r, 0, sizeof *r);
    double t0 = fg_now();
    glp_term_out(GLP_OFF);
    char why[512] = "no case was tried";   /* the first (smallest) case's reason */
    int why_set = 0;
    size_t ncand = 0, cap = 256;
    cand *cands = fg_xcalloc(cap, sizeof *cands);
    /* pass 1: an LP per case */
    for (size_t gi = 0; gi < sizeof gbs_list / sizeof gbs_list[0]; gi++) {
        int gbs = o->gbs > 0 ? o->gbs : gbs_list[gi];
        if (o->gbs > 0 && gi > 0) break;
        if (o->gbs <= 0 && o->n_prompts > 0 && gbs > o->n_prompts) break;   /* a batch of padding is no gain */
        const int ng = ngroups(o);   /* a block holds ng * K batches */
        int kmax = o->n_prompts > 0 ? (o->n_prompts + gbs * ng - 1) / (gbs * ng) : FG_MAX_GPU_BATCHES / ng;
        if (kmax > FG_MAX_GPU_BATCHES / ng) kmax = FG_MAX_GPU_BATCHES / ng;
        /* memory grows with K: the first K the LP cannot fit ends that
         * (cpu attention, activation tier) line */
        /* a mixture of experts: routed or whole loads, the cpu worker's experts or not */
        int xm_n = c->n_experts ? 4 : 1;
        for (int xm = 0; xm < xm_n; xm++)
        for (int ca = o->cpu_attn < 0 ? 0 : o->cpu_attn; ca <= (o->cpu_attn < 0 ? 1 : o->cpu_attn); ca++)
            for (int act = FG_TIER_GPU; act < FG_NTIERS; act++) {
                int xload = xm & 1 ? FG_EXPERTS_ALL : FG_EXPERTS_ROUTED, xcpu = xm >> 1;
                if ((o->expert_load >= 0 && xload != o->expert_load) || (o->cpu_experts >= 0 && xcpu != o->cpu_experts))
                    continue;
                glp_prob *lp = NULL;
                for (int K = o->K > 0 ? o->K : 1; K <= (o->K > 0 ? o->K : kmax); K++) {
                    cand cd = {.cs = {.gbs = gbs, .K = K, .S = o->S, .G = o->G, .cpu_attn = ca, .act = (fg_tier)act,
                                      .expert_load = xload, .cpu_experts = xcpu}};
                    fg_cost_case_weights(&cd.cs, c, sp);
                    r->cases++;
                    if (mem_coefs(c, sp, o, &cd.cs, &cd.m)) break;
                    fg_cost_terms t;
                    fg_cost_terms_make(c, hw, &cd.cs, &t);
                    double obj = 0;
                    r->lps++;
                    if (solve(&lp, &t, &cd.m, o, &cd.cs, c->n_layers, cd.x, &obj)) {
                        if (!why_set++) snprintf(why, sizeof why, "gbs %d x %d: the LP finds no placement within the budgets", gbs, K);
                        break;
                    }
                    /* (a pipeline's block: each stage sweeps its layers once per group) */
                    int bls = gbs * K * ng, n = o->n_prompts > 0 ? o->n_prompts : bls, blocks = (n + bls - 1) / bls;
                    cd.lp_tput = obj > 0 ? (double)n * o->G / (blocks * obj * ng) : 0;
                    if (ncand == cap) {
                        cands = realloc(cands, (cap *= 2) * sizeof *cands);
                        FG_ASSERT(cands);
                    }
                    cands[ncand++] = cd;
                }
                if (lp) glp_delete_prob(lp);
            }
    }
    /* pass 2: best LP optimum first, each rounded, fitted to the engine's
     * plan and scored on it. Rounding only moves placement down a tier, so
     * once the LP optimum falls well below the best score found (the margin
     * covers the LP's averaging of layers), nothing after it can win */
    qsort(cands, ncand, sizeof *cands, by_lp_tput);
    int found = 0;
    for (size_t i = 0; i < ncand; i++) {
        const cand *cd = &cands[i];
        if (found && cd->lp_tput < LP_PRUNE_MARGIN * r->pred.throughput) break;
        fg_policy p;
        policy_of(&cd->cs, &p);
        round_policy(cd->x, &p);
        fg_search_result sc;
        if (score(c, sp, hw, o, cd, &p, &sc)) {
            if (!why_set++) snprintf(why, sizeof why, "%s", fg_err_msg());
            continue;
        }
        if (!found || sc.pred.throughput > r->pred.throughput) {
            found = 1;
            r->p = p, r->pred = sc.pred;
            r->p.compress_weight = c->compress_weight, r->p.compress_cache = c->compress_cache;   /* the config's, searched under */
            r->gpu_bytes = sc.gpu_bytes, r->shm_bytes = sc.shm_bytes, r->disk_bytes = sc.disk_bytes;
        }
    }
    free(cands);
    r->seconds = fg_now() - t0;
    if (!found) {   /* say what the least demanding placement needs */
        uint64_t g, h;
        fg_status st = least_fits(c, sp, o, &g, &h);
        /* where it fits the engine's plan, the LP's memory rows (which
         * count a device weight slot and the shm stages as whole layers)
         * found none: say so, with what that placement takes */
        return st ? st : fg_err_set(FG_EINPUT, "no policy fits the budgets (%s); every weight and the cache on "
                                               "disk, one sequence a batch, would take %.2f GB of GPU and %.2f GB of "
                                               "CPU memory: raise --gpu-mem or --cpu-mem, or give that placement "
                                               "(--percent 0 0 0 0 0 100 --gpu-batch-size 1)",
                                    why, (double)g / 1e9, (double)h / 1e9);
    }
    return FG_OK;
}

fg_status fg_search_least_fits(const fg_model_config *c, const fg_spec *sp, const fg_search_opts *o) {
    uint64_t g, h;
    return least_fits(c, sp, o, &g, &h);
}

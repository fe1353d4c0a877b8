/* fg_search.h - the policy search (`--policy auto`, `flexgen policy`):
 * for every GPU batch size, number of GPU batches per block, CPU attention
 * on or off and activation tier (enumerated over the whole feasible range,
 * no early stop), a linear program in GLPK picks the placement fractions
 * of weights and KV cache that minimise the block's time under the cost
 * model (fg_cost.h) within the memory budgets; max() terms go in through
 * auxiliary variables as FlexGen's do, and the buffers that exist once
 * anything is off a tier (cache slots, disk stages, the tier store) are
 * 0/1 variables (glp_intopt). The fractions are then rounded to what the
 * engine places (percentages: weights tensor by tensor, cache layer by
 * layer), the rounded policy is checked against the engine's own memory
 * plan (moving placement down a tier until it fits) and scored on that
 * concrete plan; the best score wins. */
#ifndef FG_SEARCH_H
#define FG_SEARCH_H

#include "fg_cost.h"

typedef struct {
    fg_policy p;                 /* the winner, as `flexgen run` takes it */
    fg_cost_result pred;         /* its predicted cost */
    uint64_t gpu_bytes, shm_bytes, disk_bytes;   /* its memory plan (disk: spill file + tier store) */
    long cases, lps;             /* (gbs, K, cpu attention, activation tier, experts' load) cases tried; LPs solved */
    double seconds;              /* the search's own time */
} fg_search_result;

/* A caller's own score of a candidate policy (a pipeline's: fg_cost_pipe.c):
 * p fitted to the budgets (placement only moved down a tier), its predicted
 * cost and memory in r->pred and r->*_bytes. FG_EINPUT: it fits nowhere. */
typedef fg_status (*fg_search_scorer)(void *ctx, fg_policy *p, fg_search_result *r);

typedef struct {
    int S, G;                    /* prompt length (padded), new tokens */
    int n_prompts;               /* 0: unknown (blocks as large as the budgets allow) */
    uint64_t gpu_mem, cpu_mem, disk_mem;   /* 0: no limit */
    const char *backend;         /* the gpu worker's backend (workspace sizes) */
    int gbs, K;                  /* > 0: fixed, not searched */
    int cpu_attn;                /* -1: search; 0 or 1: fixed */
    /* a mixture of experts: how its experts load (FG_EXPERTS_*) and whether
     * the cpu worker computes the CPU's; -1: searched (the placement of
     * experts apart from the dense part is the LP's, always) */
    int expert_load, cpu_experts;
    /* > 1: (c, sp) are one stage of a pipeline whose block is `groups`
     * groups of K GPU batches (fg_cost_pipe.h): memory is planned for groups * K
     * batches, the LP's time is one group's (K <= FG_MAX_GPU_BATCHES /
     * groups); 0 or 1: one machine */
    int groups;
    fg_search_scorer score;      /* non-NULL: scores each candidate instead of fitting it to (c, sp) alone */
    void *score_ctx;
} fg_search_opts;

/* FG_EINPUT when no policy fits the budgets (with the reason of the
 * smallest case). */
fg_status fg_search_policy(const fg_model_config *c, const fg_spec *sp, const fg_hw *hw, const fg_search_opts *o,
                           fg_search_result *r);

/* FG_EINPUT, saying what it needs, when not even the least demanding
 * placement (every weight and the cache on disk, one sequence per batch)
 * fits the budgets: no search can succeed, so nothing need be measured. */
fg_status fg_search_least_fits(const fg_model_config *c, const fg_spec *sp, const fg_search_opts *o);

/* p (its gbs, batches and tiers of activations) moved down a tier, weights
 * before cache, until its plan on (c, sp) fits o's budgets (with o->groups:
 * the plan of groups * K batches); FG_OK with *pl built, or the refusal. */
fg_status fg_search_fit(const fg_model_config *c, const fg_spec *sp, const fg_search_opts *o, fg_policy *p, fg_plan *pl);

/* A plan's disk bytes: its spill file, and the tier store of its model's
 * weights where any weight is on disk. */
uint64_t fg_search_disk_bytes(const fg_plan *pl);

/* Score policy p as given (no search): its plan and predicted cost. */
fg_status fg_search_score(const fg_model_config *c, const fg_spec *sp, const fg_hw *hw, const fg_search_opts *o,
                          const fg_policy *p, fg_search_result *r);

#endif

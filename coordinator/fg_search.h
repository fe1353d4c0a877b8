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
    int S, G;                    /* prompt length (padded), new tokens */
    int n_prompts;               /* 0: unknown (blocks as large as the budgets allow) */
    uint64_t gpu_mem, cpu_mem, disk_mem;   /* 0: no limit */
    const char *backend;         /* the gpu worker's backend (workspace sizes) */
    int gbs, K;                  /* > 0: fixed, not searched */
    int cpu_attn;                /* -1: search; 0 or 1: fixed */
} fg_search_opts;

typedef struct {
    fg_policy p;                 /* the winner, as `flexgen run` takes it */
    fg_cost_result pred;         /* its predicted cost */
    uint64_t gpu_bytes, shm_bytes, disk_bytes;   /* its memory plan (disk: spill file + tier store) */
    long cases, lps;             /* (gbs, K, cpu attention, activation tier) cases tried; LPs solved */
    double seconds;              /* the search's own time */
} fg_search_result;

/* FG_EINPUT when no policy fits the budgets (with the reason of the
 * smallest case). */
fg_status fg_search_policy(const fg_model_config *c, const fg_spec *sp, const fg_hw *hw, const fg_search_opts *o,
                           fg_search_result *r);

/* FG_EINPUT, saying what it needs, when not even the least demanding
 * placement (every weight and the cache on disk, one sequence per batch)
 * fits the budgets: no search can succeed, so nothing need be measured. */
fg_status fg_search_least_fits(const fg_model_config *c, const fg_spec *sp, const fg_search_opts *o);

/* Score policy p as given (no search): its plan and predicted cost. */
fg_status fg_search_score(const fg_model_config *c, const fg_spec *sp, const fg_hw *hw, const fg_search_opts *o,
                          const fg_policy *p, fg_search_result *r);

#endif

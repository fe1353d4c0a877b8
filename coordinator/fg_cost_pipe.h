/* fg_cost_pipe.h - the cost model of a pipeline of P identical machines
 * (`flexgen policy --stages P`), as FlexGen's dist_flex_opt runs one and
 * as `mpirun -np P flexgen run` is to: rank r holds decoder layers
 * [r*L/P, (r+1)*L/P), the embedding on rank 0 and the LM head on rank P-1
 * (a tied head's matrix on both), each rank with its own workers, memory
 * budgets (gpu/cpu/disk per machine) and the same policy. A block is P
 * groups of K GPU batches of B sequences; every rank sweeps its layers once
 * per group per token (its weights loaded once a group), so it plans memory
 * for P*K batches (their cache, activations, inputs) but a sweep costs the
 * cost model's step of K batches (fg_cost_eval_steps). A group's hidden
 * states go r -> r+1 (K messages of 2*B*S*H bytes at prefill, 2*B*H a
 * decode token) and its sampled ids P-1 -> 0 (K messages of 4*B bytes);
 * each message takes its bytes over the link's bandwidth plus its latency
 * (hw net_gbps, net_latency_s), and a link carries one message at a time.
 *
 * The block's time is a small simulation of that schedule: rank r takes
 * (token, group) in order, each when it is free and the group's input has
 * arrived. In the steady state a decode token takes the largest of
 *   stage:   P * the slowest rank's sweep (each rank sweeps P groups),
 *   network: P * the busiest link's transfer of a group,
 *   ring:    a group's round trip, every rank's sweep and every transfer in
 *            series (P groups fill a ring of P ranks exactly, so when the
 *            ranks are balanced no transfer hides behind another group),
 * plus, once a block, the fill: the last group reaches rank P-1 (P-1)
 * sweeps after the first. The search (fg_search.c with groups = P) solves
 * its LPs on the stage with the most weight bytes, and scores each rounded
 * candidate here: fitted to every stage's budgets, each stage's sweep
 * evaluated on its own plan, the schedule simulated. */
#ifndef FG_COST_PIPE_H
#define FG_COST_PIPE_H

#include <stdio.h>

#include "fg_search.h"

/* One kind of stage: its layer count and end parts; stages alike share one. */
typedef struct {
    fg_model_config cfg;   /* the model with n_layers = the stage's */
    fg_spec *sp;           /* its tensors: the stage's layers, the model-level ones it holds */
    int no_embed, no_lm_head;
} fg_pipecost_kind;

typedef struct {
    int P;                 /* stages */
    int *first, *count;    /* (P) each stage's first layer and number of layers */
    int *kind;             /* (P) its kind */
    int nkinds, rep;       /* kinds; the one with the most weight bytes (the LP's) */
    fg_pipecost_kind *kinds;
    const fg_model_config *model;   /* the whole model (its compression is the kinds') */
    const fg_hw *hw;
    fg_search_opts o;      /* per machine (budgets), groups = P */
} fg_pipecost;

/* A scored pipeline: each stage's sweep of one group, the transfers, the
 * steady-state bounds of a decode token and what binds it. */
typedef struct {
    int P, K, gbs;
    double *pre_s, *gen_s;             /* (P) a group's prefill sweep; a decode token's */
    int *pre_res, *gen_res;            /* (P) R_*: what each stage's sweep is bound by */
    uint64_t *gpu_bytes, *shm_bytes, *disk_bytes;   /* (P) each stage's memory plan */
    double hop_pre_s, hop_gen_s, ids_s;   /* a group's transfer on a link: hidden at prefill, a decode token; ids back */
    double ring_pre_s, ring_gen_s;     /* a group's transfers around the ring, a token (prefill; decode) */
    double bound_stage_s, bound_net_s, bound_ring_s;   /* a decode token's steady-state bounds */
    int slowest;                       /* the stage with the longest decode sweep */
    char bottleneck[64];               /* "stage 3 (disk)", "network", "ring round trip" */
    double fill_s;                     /* the prefill's last group reaching the last stage after the first */
    double block_prefill_s, block_decode_s;   /* one block, simulated */
} fg_pipecost_detail;

/* FG_EINPUT unless 1 <= P <= min(L, FG_MAX_GPU_BATCHES): a stage holds at
 * least one layer, a block a group of GPU batches per stage. */
fg_status fg_pipecost_check(const fg_model_config *c, int P);

/* Stages of the model (c, sp) on P machines of hardware hw with o's
 * workload and per-machine budgets. FG_EINPUT when P is out of range
 * (1..min(L, FG_MAX_GPU_BATCHES)). */
fg_status fg_pipecost_init(fg_pipecost *pp, const fg_model_config *c, const fg_spec *sp, int P, const fg_hw *hw,
                       const fg_search_opts *o);
void fg_pipecost_free(fg_pipecost *pp);

/* The search: the policy every stage runs with the highest predicted
 * throughput; d (may be NULL) its detail (free with fg_pipecost_detail_free). */
fg_status fg_pipecost_search(fg_pipecost *pp, fg_search_result *r, fg_pipecost_detail *d);
/* Score policy p as given; FG_EINPUT (the stage named) where a stage's
 * plan exceeds the budgets. */
fg_status fg_pipecost_score(fg_pipecost *pp, const fg_policy *p, fg_search_result *r, fg_pipecost_detail *d);
void fg_pipecost_detail_free(fg_pipecost_detail *d);

/* The detail for `flexgen policy --json` ("pipeline") and as text. */
json_t *fg_pipecost_json(const fg_pipecost *pp, const fg_pipecost_detail *d);
void fg_pipecost_print(FILE *f, const fg_pipecost *pp, const fg_pipecost_detail *d);

#endif

/* fg_cost.h - the cost model: how long a block takes under a policy, on
 * the hardware of a profile (fg_hw.h). FlexGen's per-layer terms (compute;
 * loads to the compute device; stores back; disk reads and writes), for
 * prefill and for one decode token at the mean context, each linear in the
 * placement fractions, so the same terms serve the LP (fg_search.c) and
 * the evaluation of a concrete plan. Extended to what this engine does:
 *  - the resources overlap as the engine overlaps them: a layer step takes
 *    the longest of the gpu compute stream, the host-to-device copies, the
 *    device-to-host copies and the disk (reads and writes share it); on a
 *    backend that computes on the host's cores (the host backend) compute
 *    and copies share those cores and add up; the disk and the compute
 *    overlap only as far as the profile measured (its disk contention c:
 *    the step takes at least disk + c * compute and compute + c * disk,
 *    c = 0 where they overlap fully, 1 where they take turns);
 *  - CPU attention (cpu_cache_compute) as a choice: the coordinator waits
 *    for it, so it adds to the compute stream's time, at the cpu profile's
 *    rate for the batch size and mean context of the run;
 *  - activations on disk; the block schedule's prefill (all K batches per
 *    layer load); the embedding and LM head group once per token; the
 *    logits copied out; a per-command cost.
 *
 * Letters: L layers, K GPU batches per block, B sequences per batch, S
 * prompt length, G tokens generated, H hidden, V vocabulary; a layer's
 * FLOPs, its weight bytes and the cache's width (KV*d) come from the model
 * description (fg_config_layer_flops, fg_spec_stored_bytes,
 * fg_cache_row_bytes), so a gated MLP and grouped kv heads count as they run;
 * attention counts the keys a query sees, min(context, sliding window)
 * (fg_config_attn_keys; a prefill's pairs fg_config_prefill_attn_pairs),
 * while a cache moved off the GPU moves whole. */
#ifndef FG_COST_H
#define FG_COST_H

#include <jansson.h>

#include "fg_hw.h"
#include "fg_plan.h"

/* Placement fractions, the LP's variables: of the weights (X_W_*: a
 * mixture of experts' dense part), of the KV cache (X_C_*) and of a sparse
 * layer's experts (X_X_*) on each tier. */
enum { X_W_GPU, X_W_CPU, X_W_DISK, X_C_GPU, X_C_CPU, X_C_DISK, X_X_GPU, X_X_CPU, X_X_DISK, FG_COST_NX };
/* Resources of a layer step. */
enum { R_COMPUTE, R_H2D, R_D2H, R_DISK, FG_COST_NRES };

/* seconds = c + sum_v x[v] * a[v] */
typedef struct {
    double c, a[FG_COST_NX];
} fg_lin;

/* A step's time is the largest of its bounds: each resource alone
 * (R_*), then the disk with c times the compute, and the compute with c
 * times the disk (c: the disk contention above). A layer's copy from its
 * stage into the slot is not on the disk's path: the next layer's reads
 * are issued as that copy is (fg_load_weight before the compute). */
enum { B_DISK_COMPUTE = FG_COST_NRES, B_COMPUTE_DISK, FG_COST_NBOUND };
void fg_cost_bounds(const fg_lin res[FG_COST_NRES], double contention, fg_lin bound[FG_COST_NBOUND]);
/* The same two bounds for plain seconds: disk and compute seconds that
 * overlap with this contention take the larger of disk + c * compute and
 * compute + c * disk (the calibration fits c with it). */
double fg_cost_disk_compute_s(double disk_s, double comp_s, double contention);
/* The disk's read rate charged in a phase (prefill 1): a streamed store's
 * prefill rate where the profile has one (fg_hw_disk_streamed). */
double fg_cost_read_gbps(const fg_hw *hw, int prefill);

typedef struct {
    int gbs, K, S, G;
    int cpu_attn;            /* cpu_cache_compute */
    fg_tier act;             /* the activations' tier */
    double layer_bytes;      /* a decoder layer's weights (the mean layer's: a Q4_K_M file's differ) */
    double model_bytes;      /* the model-level weights (embeddings, final LayerNorm, projections) */
    /* the mean decoder layer's GEMM FLOPs per row by the format its
     * matrices are held in (fg_spec_flops_per_row; their sum is
     * fg_config_layer_flops): each format's go at its own rate */
    double layer_flops[FG_FMT_COUNT];
    double layer_q4_fp16_bytes;   /* the mean layer's FlexGen 4-bit matrices expanded to fp16 */
    int head_fmt;            /* the LM head's format (a tied head: the embedding's) */
    /* a mixture of experts: the mean layer's experts (its stacks, within
     * layer_bytes and layer_flops) apart from its dense part: their bytes
     * and their GEMM FLOPs per row by format (the top k's), E and k; and
     * how the case loads them (FG_EXPERTS_*) and whether the cpu worker
     * computes the CPU's (fg_policy). 0 bytes: no experts. */
    double layer_expert_bytes;
    double layer_expert_flops[FG_FMT_COUNT];
    int n_experts, top_k;
    int expert_load, cpu_experts;
    /* a pipeline stage (fg_cost_pipe.h) without the embedding, or without the LM
     * head (its GEMM, logits and commands; a stage's model-level weight bytes
     * are its own spec's): 0 and 0 on one machine */
    int no_embed, no_lm_head;
} fg_cost_case;

/* The expected share of E experts that n routed rows touch when each row
 * picks k of them uniformly: 1 - (1 - k/E)^n (1 for E = 0). */
double fg_cost_experts_touched(int E, int k, double n);

/* A case's weight bytes and GEMM FLOPs by format from the model's tensor
 * list, as the tiers hold them (4-bit under the config's compress_weight,
 * a GGUF file's formats; the cache's bytes follow compress_cache inside
 * fg_cost_terms_make). */
void fg_cost_case_weights(fg_cost_case *cs, const fg_model_config *c, const fg_spec *sp);
/* The formats whose GEMM rates a model's cost depends on (FG_FMT_BIT
 * each): those its decoder layers' matrices are held in, and its LM
 * head's. */
uint32_t fg_cost_formats(const fg_model_config *c, const fg_spec *sp);
/* The rate (10^12 FLOP/s) the model charges a layer's GEMMs on weights in
 * fmt at `rows` rows: the profile's for fmt (fg_hw_fmt_tflops), FlexGen's
 * 4-bit without mm_q4 with its expansion pass in (cs's layer); for reports. */
double fg_cost_fmt_tflops(const fg_hw *hw, const fg_cost_case *cs, int fmt, double rows, int prefill);

typedef struct {
    fg_lin pre[FG_COST_NRES], gen[FG_COST_NRES];             /* one decoder layer: prefill; a decode token */
    fg_lin head_pre[FG_COST_NRES], head_gen[FG_COST_NRES];   /* the embedding + LM head group, per token */
    double contention;                                       /* the hardware's disk contention */
} fg_cost_terms;

void fg_cost_terms_make(const fg_model_config *c, const fg_hw *hw, const fg_cost_case *cs, fg_cost_terms *t);
double fg_lin_eval(const fg_lin *l, const double *x);

typedef struct {
    double prefill_s, decode_s;            /* all blocks */
    double throughput;                     /* generated tokens / (prefill + decode), FlexGen's definition */
    int pre_bottleneck, gen_bottleneck;    /* R_*: the resource the phase's steps spend most on */
    /* seconds each resource is busy, summed over the steps (layers and the
     * head), tokens and blocks */
    double pre_res[FG_COST_NRES], gen_res[FG_COST_NRES];
} fg_cost_result;

/* The cost of the plan's concrete placement (weights tensor by tensor,
 * cache layer by layer) for n prompts (0: one full block). */
void fg_cost_eval_plan(const fg_plan *pl, const fg_hw *hw, int n_prompts, fg_cost_result *r);
/* The steps of one block on the plan's placement, blocks not counted
 * (throughput left 0): the prefill step and gen_steps decode tokens, with
 * terms of cs->K GPU batches and its head parts (no_embed, no_lm_head);
 * cs's other fields come from the plan. fg_cost_eval_plan is this with
 * cs->K = pl->K, both head parts and gen_steps = G - 1; a pipeline stage
 * (fg_cost_pipe.c) is one group's sweep: K of the plan's pl->K batches, one
 * decode token. */
void fg_cost_eval_steps(const fg_plan *pl, const fg_hw *hw, const fg_cost_case *cs, double gen_steps, fg_cost_result *r);
const char *fg_cost_res_name(int r);   /* "compute", "cpu->gpu", "gpu->cpu", "disk" */
/* {"compute": seconds, "cpu->gpu": ..., ...}: a phase's res by name (reports). */
json_t *fg_cost_res_json(const double res[FG_COST_NRES]);

#endif

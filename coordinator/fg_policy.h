/* fg_policy.h - FlexGen's placement knobs and the rules that turn them into
 * a tier for every weight tensor, every layer's KV cache and every layer's
 * activations (docs/ARCHITECTURE.md, "Numerics").
 *
 * Rules (FlexGen's get_choice over cumulative percentages GPU, CPU, disk):
 *  - weights: within each layer, tensor i goes to the tier whose cumulative
 *    percentage band holds the midpoint of its bytes in the layer's total,
 *    bytes as the tiers hold them (fg_spec_stored_bytes: 4-bit under
 *    compress_weight, a GGUF file's blocks), so a quantized layer splits
 *    by what it moves;
 *  - KV cache: whole layers, layer j to the band holding (j + 0.5) / L.
 *    (FlexGen splits one tensor across devices for mixed cache
 *    percentages; whole layers keep every transfer contiguous.)
 *  - activations: all on one tier, as in FlexGen.
 *  - experts (a sparse layer's, Mixtral, Qwen3-MoE): each expert is a unit
 *    of placement of its own, apart from its layer's dense part: expert e
 *    of E goes to the band of the experts' percentages holding
 *    (e + 0.5) / E (experts are all one size, so this counts bytes too);
 *    the layer's dense tensors take the weight rule over their own bytes.
 * Attention and MLP of a layer are one weight group (FlexGen's sep_layer
 * off): the engine loads a decoder layer's weights as one, its experts
 * as fg_policy.expert_load says. */
#ifndef FG_POLICY_H
#define FG_POLICY_H

#include "fg_config.h"

/* GPU batches per block: the schedule keeps per-batch state for each. */
#define FG_MAX_GPU_BATCHES 64

typedef enum { FG_TIER_GPU = 0, FG_TIER_CPU = 1, FG_TIER_DISK = 2, FG_NTIERS = 3 } fg_tier;

/* How the off-GPU experts of a sparse layer reach the device:
 *   ROUTED  once a batch's rows have been routed, the experts they chose
 *           that the layer's weight slot does not hold yet: over a block,
 *           the union of what its batches chose, each expert read once a
 *           layer; experts nobody chose are not read;
 *   ALL     every off-GPU expert with the layer's dense part, prefetched
 *           while the layer before computes (FlexGen's whole-layer load:
 *           the better choice where a block's rows touch every expert). */
typedef enum { FG_EXPERTS_ROUTED = 0, FG_EXPERTS_ALL = 1 } fg_expert_load;

typedef struct {
    int gbs;                 /* sequences per GPU batch */
    int num_gpu_batches;     /* GPU batches per block */
    double w_gpu, w_cpu;     /* weight percentages; the rest on disk */
    double c_gpu, c_cpu;     /* KV cache percentages */
    double h_gpu, h_cpu;     /* activation percentages */
    int cpu_cache_compute;   /* decode attention on the CPU worker over a CPU cache */
    int overlap;             /* prefetch and store behind compute */
    int compress_weight, compress_cache;   /* 4-bit group quantization (fg_q4.h); the engine reads
                                              them from the config (fg_model_config), set from these */
    int x_set;               /* the experts' percentages were given; else they are the weights' */
    double x_gpu, x_cpu;     /* percent of each sparse layer's experts on the GPU and CPU; the rest on disk */
    fg_expert_load expert_load;
    int cpu_expert_compute;  /* the CPU tier's experts computed by the cpu worker where they live */
} fg_policy;

const char *fg_tier_name(fg_tier t);   /* "gpu", "cpu", "disk" */

/* Check percentages (each in [0, 100], pairs summing to <= 100) and sizes. */
fg_status fg_policy_validate(const fg_policy *p);

/* Tiers of the tensors of layer `layer` (-1: the model-level tensors,
 * placed as one more layer), in spec order: tiers[i] for spec index
 * first + i (FG_LW_COUNT entries, or FG_GW_COUNT; absent ones too). */
void fg_policy_weight_tiers(const fg_policy *p, const fg_spec *specs, int layer, fg_tier *tiers);
/* The tier of expert e of E of a sparse layer (every sparse layer alike). */
fg_tier fg_policy_expert_tier(const fg_policy *p, int e, int E);
/* The experts' percentages in effect: x_gpu, x_cpu where given, else the weights'. */
void fg_policy_expert_pct(const fg_policy *p, double *gpu, double *cpu);
fg_tier fg_policy_cache_tier(const fg_policy *p, int layer, int n_layers);
/* The tier of all activations (validate checked that there is one). */
fg_tier fg_policy_act_tier(const fg_policy *p);

/* "--percent WG WC CG CC HG HC" inside a getopt_long loop: `first` is the
 * option's argument, the five values after it are taken too (*optind moves
 * past them). */
fg_status fg_policy_parse_percent(fg_policy *p, const char *first, int argc, char **argv, int *optind);
/* "--percent-experts XG XC" the same way (one value after `first`). */
fg_status fg_policy_parse_percent_experts(fg_policy *p, const char *first, int argc, char **argv, int *optind);
/* "--expert-load routed|all". */
fg_status fg_policy_parse_expert_load(fg_policy *p, const char *v);

/* One line: "gbs 8 x 4 batches, weights 20/80/0, cache 0/100/0, act 100/0/0, ...";
 * with_experts: the experts' placement and load too (a model with experts). */
void fg_policy_describe(const fg_policy *p, char *buf, size_t len);
void fg_policy_describe_ex(const fg_policy *p, int with_experts, char *buf, size_t len);

#endif

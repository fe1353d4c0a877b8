/* fg_config.h - model configurations of every family (OPT; the Llama family:
 * Llama 2/3.x, Mistral, Qwen2, Qwen3, TinyLlama), chosen by name or read from a
 * Hugging Face config.json, the description the workers are told, and the
 * list of tensors (name, shape) a checkpoint of that config must hold. */
#ifndef FG_CONFIG_H
#define FG_CONFIG_H

#include "fg_common.h"

/* Model families: the kernels a model runs (kernels/fg_fwd.h dispatches on
 * it) and the names its checkpoints give tensors. Each family's description
 * (model/fg_family_<name>.c: sizes by name, config.json, tensor names) is
 * the only place that names it; everything else reads the fields below. */
enum { FG_FAMILY_OPT = 1, FG_FAMILY_LLAMA = 2 };
enum { FG_FFN_RELU = 0, FG_FFN_SWIGLU = 1 };          /* fc2(relu(fc1 x)); down(silu(gate x) * up x) */
enum { FG_NORM_LAYER = 0, FG_NORM_RMS = 1 };           /* LayerNorm with bias; RMSNorm, weight only */
enum { FG_POS_LEARNED = 0, FG_POS_ROPE = 1 };          /* a position table (OPT's offset 2); rotary */
enum { FG_ROPE_NONE = 0, FG_ROPE_LINEAR = 1, FG_ROPE_LLAMA3 = 2 };   /* rope_scaling */
/* How a sparse layer's router turns its logits (x Wg^T in fp32, one per
 * expert) into k experts and their weights (kernels/fg_moe.c):
 *   MIXTRAL    softmax over all experts, the top k, renormalised to sum 1
 *              (modeling_mixtral.py);
 *   QWEN3_MOE  softmax over all experts, the top k, renormalised only with
 *              norm_topk_prob (moe_norm_topk; modeling_qwen3_moe.py).
 * Kinds to come are one more value and one case each, nothing here
 * rewritten: gpt-oss (the top k of the raw logits, then a softmax over those
 * k; router and expert biases as layer roles of their own), DeepSeek-V3
 * (sigmoid scores, a selection bias added for the choice only, top k within
 * the best expert groups, the chosen scores normalised and scaled by
 * routed_scaling_factor, beside n_shared_experts always-on experts): their
 * extra numbers (groups, scale) become fields beside moe_norm_topk. */
enum { FG_ROUTER_NONE = 0, FG_ROUTER_MIXTRAL = 1, FG_ROUTER_QWEN3_MOE = 2 };
#define FG_MAX_EOS 8
/* Bounds on a config, far above any real model: every size at most
 * FG_CONFIG_DIM_MAX (what the workers accept in a model description, and
 * what keeps the ops' size products inside uint64 and row counts inside
 * int), at most FG_CONFIG_MAX_LAYERS layers (the tensor list stays an int
 * count and a few MB), at most FG_CONFIG_MAX_EXPERTS experts a layer. */
#define FG_CONFIG_DIM_MAX (1 << 20)
#define FG_CONFIG_MAX_LAYERS 4096
#define FG_CONFIG_MAX_EXPERTS 1024

typedef struct {
    char name[64];
    int family;              /* FG_FAMILY_* */
    int vocab_size;          /* V: rows of the token embedding (and of the LM head) */
    int hidden;              /* H */
    int n_heads;             /* A: query heads */
    int n_kv_heads;          /* key/value heads; A is a multiple (GQA; OPT: A) */
    int head_dim;            /* d: q is A*d wide, k and v n_kv_heads*d (OPT: H / A) */
    int n_layers;            /* decoder layers (embedding and head not counted) */
    int ffn_dim;             /* F */
    int max_pos;             /* max_position_embeddings; a learned table has max_pos+2 rows */
    int word_embed_proj_dim; /* D: embedding width; != H means project_in/out exist (OPT-350m) */
    int pre_ln;              /* norm before each block (OPT's do_layer_norm_before; 0 for 350m) */
    int ffn_kind;            /* FG_FFN_* */
    int norm_kind;           /* FG_NORM_* */
    float norm_eps;          /* the RMSNorm's epsilon (a LayerNorm's is FG_LN_EPS) */
    int pos_kind;            /* FG_POS_* */
    float rope_theta;        /* rotary base */
    int rope_scaling;        /* FG_ROPE_* */
    float rope_factor;       /* linear and llama3: the factor */
    float rope_low, rope_high;   /* llama3: low_freq_factor, high_freq_factor */
    int rope_orig_max;       /* llama3: original_max_position_embeddings */
    int sliding_window;      /* 0 = none; else key slot j is seen from query slot i iff i - W < j <= i */
    int qkv_bias, o_bias, mlp_bias;   /* which projections have a bias */
    int qk_norm;             /* Qwen3: an RMSNorm over each head of q and of k (weights [head_dim],
                                eps norm_eps) after the projections, before rotary */
    int tied;                /* the LM head is the token embedding (no lm_head tensor) */
    /* Mixture of experts (n_experts 0: every MLP dense). A sparse layer's
     * MLP is n_experts gated MLPs of moe_ffn_dim each; its router picks
     * experts_per_token of them for each token and sums their outputs by
     * its weights. A dense layer of the same model keeps ffn_dim. */
    int n_experts;           /* E */
    int experts_per_token;   /* k: the top k */
    int moe_ffn_dim;         /* Fe: an expert's intermediate size (moe_intermediate_size) */
    int router;              /* FG_ROUTER_* */
    int moe_norm_topk;       /* QWEN3_MOE: renormalise the k weights (norm_topk_prob) */
    int n_shared_experts;    /* always-on experts beside the routed ones (DeepSeek): 0 here */
    uint64_t moe_layers[FG_CONFIG_MAX_LAYERS / 64];   /* bit l: layer l is sparse (fg_config_layer_sparse) */
    int pad_id, bos_id;
    int n_eos, eos_ids[FG_MAX_EOS];   /* generation stops at any of them */
    /* How the tiers hold it (a run's choice, not the checkpoint's): FlexGen's
     * 4-bit group-wise compression (common/fg_q4.h) of each layer's weight
     * matrices (--compress-weight), of the KV cache (--compress-cache).
     * Carried to the workers in the description. */
    int compress_weight, compress_cache;
    /* The storage formats (common/fg_fmt.h) of one layer's matrices and of
     * the model-level ones, a nibble each (fg_config_fmt): what a model
     * description tells a worker about the tensors an op reads. 0 (F16) in
     * a whole model's config: there each tensor's format is its spec's
     * (fg_spec.fmt, which the weight source sets; layers may differ). */
    uint32_t fmt_layer, fmt_global;
} fg_model_config;

/* Fill *cfg for a model name of any family ("opt-125m" ... "opt-175b",
 * "opt-350m", "llama-3.1-8b", ...; an optional "facebook/" prefix is
 * accepted). FG_EINPUT listing the known names if unknown. */
fg_status fg_config_by_name(const char *name, fg_model_config *cfg);

/* Parse a Hugging Face config.json (model_type picks the family; a
 * generation_config.json beside it gives the EOS list). Errors name the
 * file and the field; an unknown model_type or an unsupported feature
 * (rope_scaling yarn, ...) is refused (FG_EINPUT). */
fg_status fg_config_load_json(const char *path, fg_model_config *cfg);

/* Load a JSON file; the message names the file and the line on a syntax
 * error (FG_EINPUT). Free with json_decref. */
struct json_t;
fg_status fg_json_load_file(const char *path, struct json_t **root);
/* The same with jansson's decoding flags (JSON_DECODE_INT_AS_REAL for a
 * file whose integers may exceed 64 bits, as tokenizer_config.json's
 * model_max_length of 1e30 does). */
fg_status fg_json_load_file_ex(const char *path, size_t flags, struct json_t **root);
/* A JSON value's kind as an error message says it: "an object", "a string", ... */
const char *fg_json_kind(const struct json_t *v);

/* Semantic checks shared by every constructor (A % n_kv_heads == 0, sizes
 * > 0 and within the bounds above, the kinds the family's kernels run, ...). */
fg_status fg_config_validate(const fg_model_config *cfg, const char *origin);

/* 1 if tok ends generation (one of the EOS ids). */
int fg_config_is_eos(const fg_model_config *c, int tok);
/* "opt", "llama": the family's name, for messages. */
const char *fg_config_family_name(const fg_model_config *c);

/* ---- the shape as a general description ---- */

/* What the workers are told of a model (the ops' params carry it): the
 * family and the config's numbers in one layout for every family (floats
 * as their IEEE bit patterns), so a worker reads any model without knowing
 * its config file. Order: vocab_size, hidden, n_heads, n_kv_heads,
 * head_dim, ffn_dim, max_pos, word_embed_proj_dim, kinds (ffn_kind |
 * norm_kind << 4 | pos_kind << 8 | rope_scaling << 12), flags (FG_DESC_F_*),
 * norm_eps, rope_theta, rope_factor, rope_low, rope_high, rope_orig_max,
 * sliding_window, n_experts, experts_per_token, moe_ffn_dim, the router
 * (router | moe_norm_topk << 8), n_shared_experts, then what may differ by
 * layer: fmt_layer, fmt_global (the formats of the tensors the op reads:
 * fg_config_desc_layer) and the layer's kind (FG_DESC_L_*). */
enum {
    FG_DESC_F_PRE_LN = 1, FG_DESC_F_QKV_BIAS = 2, FG_DESC_F_O_BIAS = 4, FG_DESC_F_MLP_BIAS = 8,
    FG_DESC_F_TIED = 16, FG_DESC_F_COMPRESS_WEIGHT = 32, FG_DESC_F_COMPRESS_CACHE = 64, FG_DESC_F_QK_NORM = 128,
};
#define FG_DESC_F_ALL 255u   /* every flag above */
enum { FG_DESC_L_SPARSE = 1 };   /* the op's layer: its MLP is a mixture of experts */
#define FG_DESC_L_ALL 1u
#define FG_MODEL_DESC_N 25
#define FG_MODEL_DESC_MAX 25
#define FG_MODEL_DESC_SHAPE_N 22   /* the numbers before the formats: the model's shape */
#define FG_MODEL_DESC_DENSE_N 17   /* of those, the ones a model without experts is told apart by */
typedef struct {
    uint32_t family;                  /* FG_FAMILY_* */
    uint32_t n;                       /* values used: FG_MODEL_DESC_N */
    uint32_t v[FG_MODEL_DESC_MAX];    /* the numbers; the rest 0 */
} fg_model_desc;
_Static_assert(sizeof(fg_model_desc) == 108, "fg_model_desc: 27 x u32, no padding");

/* cfg -> its description (formats as cfg's fmt_layer, fmt_global). */
fg_model_desc fg_config_desc(const fg_model_config *cfg);
struct fg_spec_s;
/* The description of an op on decoder layer `layer` (or -1: the model-level
 * tensors only) of a whole model: its formats are those of the specs, its
 * kind (sparse or not) the layer's. */
fg_model_desc fg_config_desc_layer(const fg_model_config *cfg, const struct fg_spec_s *sp, int layer);
/* cfg's fmt_layer / fmt_global set from the specs of decoder layer `layer`
 * (-1: none) and the model-level ones: the config the kernels run that
 * layer's ops with in this process (the reference engine). The kernels
 * tell a sparse layer by its router (fg_llama.c), so nothing else changes. */
void fg_config_set_formats(fg_model_config *cfg, const struct fg_spec_s *sp, int layer);
/* 1 if a and b describe the same model shape (family and the first
 * FG_MODEL_DESC_SHAPE_N numbers); their formats may differ (by layer). */
int fg_config_desc_same_shape(const fg_model_desc *a, const fg_model_desc *b);
/* A description -> a one-layer config to run ops with; FG_EINPUT naming
 * `who` for an unknown family, a wrong count or an out-of-range number. */
fg_status fg_config_from_desc(const fg_model_desc *d, const char *who, fg_model_config *cfg);
/* The description as text, "FAMILY,V0,...,V24" (a worker's --profile
 * --shape), and back: FG_EINPUT naming `who` for text that is not one. */
void fg_config_desc_text(const fg_model_config *cfg, char *out, size_t cap);
fg_status fg_config_from_desc_text(const char *text, const char *who, fg_model_config *cfg);

static inline int fg_config_head_dim(const fg_model_config *c) { return c->head_dim; }
static inline int fg_config_has_proj(const fg_model_config *c) { return c->word_embed_proj_dim != c->hidden; }
/* Widths of q (and the attention context) and of k and v (and the cache). */
static inline int fg_config_q_dim(const fg_model_config *c) { return c->n_heads * c->head_dim; }
static inline int fg_config_kv_dim(const fg_model_config *c) { return c->n_kv_heads * c->head_dim; }
/* Keys a query at a context of ctx positions attends: ctx, or the sliding
 * window where it is shorter. */
static inline double fg_config_attn_keys(const fg_model_config *c, double ctx) {
    return c->sliding_window > 0 && c->sliding_window < ctx ? c->sliding_window : ctx;
}
/* (query, key) pairs of a causal prefill of S positions, counted as S^2/2
 * (the cost model's causal half); a window W < S cuts off the triangle
 * beyond it: S W - W^2/2. */
static inline double fg_config_prefill_attn_pairs(const fg_model_config *c, double S) {
    double W = fg_config_attn_keys(c, S);
    return S * W - W * W / 2;
}
/* 1 if decoder layer l's MLP is a mixture of experts. */
static inline int fg_config_layer_sparse(const fg_model_config *c, int l) {
    return c->n_experts > 0 && l >= 0 && l < FG_CONFIG_MAX_LAYERS && (c->moe_layers[l / 64] >> (l % 64) & 1);
}
static inline void fg_config_set_sparse(fg_model_config *c, int l, int sparse) {
    uint64_t bit = 1ull << (l % 64);
    c->moe_layers[l / 64] = sparse ? c->moe_layers[l / 64] | bit : c->moe_layers[l / 64] & ~bit;
}
/* Weight matrices of the MLP: 2 (fc1, fc2) or 3 (gate, up, down). */
static inline int fg_config_ffn_mats(const fg_model_config *c) { return c->ffn_kind == FG_FFN_SWIGLU ? 3 : 2; }
/* FLOPs of a decoder layer's Linear layers per row: 2 x (q, k, v, o, MLP);
 * a model with experts counts a sparse layer's (the router and k experts
 * a row), the mean over its layers. */
static inline double fg_config_layer_flops(const fg_model_config *c) {
    double H = c->hidden, Q = fg_config_q_dim(c), KV = fg_config_kv_dim(c), mlp = fg_config_ffn_mats(c) * H * (double)c->ffn_dim;
    if (c->n_experts > 0) {
        int sparse = 0;
        for (int l = 0; l < c->n_layers; l++) sparse += fg_config_layer_sparse(c, l);
        double moe = H * c->n_experts + (double)c->experts_per_token * 3 * H * c->moe_ffn_dim;
        mlp = (sparse * moe + (c->n_layers - sparse) * mlp) / (c->n_layers > 0 ? c->n_layers : 1);
    }
    return 2 * (H * Q + 2 * H * KV + Q * H + mlp);
}

/* ---- tensor specs ---- */

/* Per-layer tensors in a fixed order; the index of a tensor inside a layer.
 * Roles, by family: LN1 the norm before attention (OPT self_attn_layer_norm,
 * Llama input_layernorm), LN2 before the MLP (final_layer_norm,
 * post_attention_layernorm), FC1 the MLP's first matrix (fc1, gate_proj),
 * FC2 its last (fc2, down_proj), UP the gated MLP's up_proj, QN and KN
 * the per-head q and k norms (Qwen3's q_norm, k_norm: [head_dim]), ROUTER
 * a sparse layer's router ([E, H]: Mixtral's block_sparse_moe.gate,
 * Qwen3-MoE's mlp.gate). In a sparse layer FC1, UP and FC2 hold every
 * expert's matrix, expert after expert: FC1 and UP [E * Fe, H], FC2
 * [E * H, Fe], so expert e is one contiguous byte range of each
 * (fg_spec_expert_bytes), which a loader fills and a GEMM reads alone.
 * New roles are appended, so a layer's earlier roles keep their index. */
enum {
    FG_LW_Q_W, FG_LW_Q_B, FG_LW_K_W, FG_LW_K_B, FG_LW_V_W, FG_LW_V_B,
    FG_LW_O_W, FG_LW_O_B, FG_LW_LN1_W, FG_LW_LN1_B,
    FG_LW_FC1_W, FG_LW_FC1_B, FG_LW_FC2_W, FG_LW_FC2_B, FG_LW_LN2_W, FG_LW_LN2_B,
    FG_LW_UP_W, FG_LW_UP_B, FG_LW_QN_W, FG_LW_KN_W, FG_LW_ROUTER_W,
    FG_LW_COUNT
};
/* Model-level tensors (some only exist for some configs: see fg_spec.present).
 * LM_HEAD: an untied head (a tied one is EMBED_TOKENS). */
enum {
    FG_GW_EMBED_TOKENS, FG_GW_EMBED_POS, FG_GW_PROJ_IN, FG_GW_PROJ_OUT,
    FG_GW_FINAL_LN_W, FG_GW_FINAL_LN_B, FG_GW_LM_HEAD, FG_GW_COUNT
};

typedef struct fg_spec_s {
    char name[96];    /* canonical name, without the "model." prefix */
    int ndim;         /* 1 or 2 */
    int64_t dims[2];  /* row-major; a Linear weight is [out, in] */
    int present;      /* 0 where this config has no such tensor */
    int fmt;          /* the source's storage format (common/fg_fmt.h): F16
                         for 1-D tensors, and for matrices a float checkpoint
                         holds; a GGUF file's Q4_K ... as it is. What the
                         tiers hold is fg_spec_fmt (compression applied). */
    int experts;      /* a sparse layer's stack of this many experts' matrices
                         (fg_spec_is_experts and present), each placed on its
                         own (fg_policy_expert_tier); 0 for any other tensor */
} fg_spec;

/* All tensors of the config: global ones first (FG_GW_COUNT entries, some
 * absent), then n_layers blocks of FG_LW_COUNT. Index with fg_spec_global()
 * and fg_spec_layer(). Returns a heap array of fg_spec_count(cfg) entries. */
fg_spec *fg_specs_new(const fg_model_config *cfg);
static inline int fg_spec_count(const fg_model_config *c) { return FG_GW_COUNT + c->n_layers * FG_LW_COUNT; }
static inline int fg_spec_global(int which) { return which; }
static inline int fg_spec_layer(int layer, int which) { return FG_GW_COUNT + layer * FG_LW_COUNT + which; }
static inline int64_t fg_spec_numel(const fg_spec *s) { return s->ndim == 1 ? s->dims[0] : s->dims[0] * s->dims[1]; }

/* Map a checkpoint's tensor name to a spec index: strips "model.", accepts
 * FlexGen's "decoder.layer_norm" for OPT's final LayerNorm. Returns -1 for
 * an unknown name (or one this config has no tensor for), -2 for names to
 * ignore (lm_head.weight of a tied model). */
int fg_spec_lookup(const fg_model_config *cfg, const fg_spec *specs, const char *name);
/* The same, also for one expert's matrix of a sparse layer
 * ("layers.3.mlp.experts.17.up_proj.weight"): its layer's FC1, FC2 or UP
 * spec, *expert its number; *expert = -1 for a whole tensor. */
int fg_spec_lookup_part(const fg_model_config *cfg, const fg_spec *specs, const char *name, int *expert);
/* 1 if spec index idx holds every expert of a sparse layer (FC1, FC2, UP
 * there, and their biases). */
int fg_spec_is_experts(const fg_model_config *cfg, int idx);

/* ---- bytes as the tiers hold them ---- */

/* The matrices whose format a description carries: a layer's seven (q, k,
 * v, o, fc1/gate, fc2/down, up: nibble fg_config_fmt_slot) and the
 * model-level four (token embedding, project_in/out, LM head). -1 for any
 * other tensor (norms, biases, the position table: always F16). */
int fg_config_fmt_slot(int idx);
#define FG_CONFIG_FMT_LAYER_SLOTS 7    /* a layer's matrices in fmt_layer, nibbles 0.. */
#define FG_CONFIG_FMT_GLOBAL_SLOTS 4   /* the model-level ones in fmt_global */
/* A matrix's GEMM FLOPs per row of activations (spec index idx, 2-D): a
 * multiply-add per weight, a stack of experts' only for the
 * experts_per_token of them a row goes through; 0 for anything else. Over
 * a layer's specs, averaged over the layers: fg_config_layer_flops. */
double fg_spec_flops_per_row(const fg_model_config *c, const fg_spec *sp, int idx);
/* The format the tiers hold spec index idx in: sp[idx].fmt, or with sp NULL
 * the config's nibble (a description's one-layer config: every layer
 * alike); FlexGen's Q4G64 instead for a layer's F16 matrices under
 * compress_weight (embeddings, the LM head, biases and norms are never
 * compressed; a ggml-quantized matrix stays as it is; a stack of experts is
 * compressed expert by expert, each matrix its own fg_q4.h slice). */
int fg_spec_fmt(const fg_model_config *c, const fg_spec *sp, int idx);
/* fg_spec_fmt(c, NULL, idx). fg_specs_new() gives each spec its nibble. */
int fg_config_fmt(const fg_model_config *c, int idx);
/* Bytes spec index idx occupies in every tier: fg_fmt_bytes of
 * fg_spec_fmt and its shape (1-D tensors: fp16; a stack of experts: E
 * times one expert's matrix). */
uint64_t fg_spec_stored_bytes(const fg_model_config *c, const fg_spec *sp, int idx);
/* Bytes of one expert's part of a stacked spec (fg_spec_is_experts): a
 * 1/E of fg_spec_stored_bytes, expert e at offset e times it (rows of whole
 * blocks, or under FlexGen's 4-bit its own slice). */
uint64_t fg_spec_expert_bytes(const fg_model_config *c, const fg_spec *sp, int idx);
/* KV cache bytes of one position of one sequence (n_kv_heads * head_dim
 * values): fp16, or n_kv_heads compressed head_dim slices. A (Tmax, B, KV)
 * cache block is Tmax*B of these, time-major. */
uint64_t fg_cache_row_bytes(const fg_model_config *c);

#endif

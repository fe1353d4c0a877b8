/* fg_config.h - OPT model configurations: every size FlexGen names plus the
 * 350m variant, chosen by name or read from a Hugging Face config.json, and
 * the list of tensors (name, shape) a checkpoint of that config must hold. */
#ifndef FG_CONFIG_H
#define FG_CONFIG_H

#include "fg_common.h"

typedef struct {
    char name[64];
    int vocab_size;          /* V: rows of the token embedding = LM head */
    int hidden;              /* H */
    int n_heads;             /* A; head_dim = H / A */
    int n_layers;            /* decoder layers (embedding and head not counted) */
    int ffn_dim;             /* F */
    int max_pos;             /* max_position_embeddings; the table has max_pos+2 rows */
    int word_embed_proj_dim; /* D: embedding width; != H means project_in/out exist */
    int pre_ln;              /* do_layer_norm_before: 1 for all but 350m */
    int pad_id, bos_id, eos_id;
    /* How the tiers hold it (a run's choice, not the checkpoint's): FlexGen's
     * 4-bit group-wise compression (common/fg_q4.h) of the six attention and
     * MLP weight matrices (--compress-weight), of the KV cache
     * (--compress-cache). Carried to the workers in the description. */
    int compress_weight, compress_cache;
} fg_opt_config;

/* Fill *cfg for a FlexGen model name ("opt-125m" ... "opt-175b", "opt-350m";
 * an optional "facebook/" prefix is accepted). FG_EINPUT if unknown. */
fg_status fg_config_by_name(const char *name, fg_opt_config *cfg);
/* The OPT size whose shapes are closest to c's: its own name if it is one,
 * else the one nearest in hidden size (what a hardware profile is measured
 * with for c). */
const char *fg_config_nearest_size(const fg_opt_config *c);

/* Parse a Hugging Face config.json. Errors name the file and the field. */
fg_status fg_config_load_json(const char *path, fg_opt_config *cfg);

/* Load a JSON file; the message names the file and the line on a syntax
 * error (FG_EINPUT). Free with json_decref. */
struct json_t;
fg_status fg_json_load_file(const char *path, struct json_t **root);

/* Bounds on a config, far above any real model: every size at most
 * FG_CONFIG_DIM_MAX (what the workers accept in a model description, and
 * what keeps the ops' size products inside uint64 and row counts inside
 * int), at most FG_CONFIG_MAX_LAYERS layers (the tensor list stays an int
 * count and a few MB). */
#define FG_CONFIG_DIM_MAX (1 << 20)
#define FG_CONFIG_MAX_LAYERS 4096

/* Semantic checks shared by both constructors (H % A == 0, sizes > 0 and
 * within the bounds above, ...). */
fg_status fg_config_validate(const fg_opt_config *cfg, const char *origin);

/* ---- the shape as a general description ---- */

/* What the workers are told of a model (the ops' params carry it): a family
 * and that family's numbers in its own order. The struct knows no family,
 * so another family (its own op kernels and tensor roles) can be added
 * without a new wire format. OPT: vocab_size, hidden, n_heads, ffn_dim,
 * max_pos, word_embed_proj_dim, pre_ln, compress_weight, compress_cache. */
enum { FG_FAMILY_OPT = 1 };
#define FG_MODEL_DESC_MAX 13
typedef struct {
    uint32_t family;                  /* FG_FAMILY_* */
    uint32_t n;                       /* values used, <= FG_MODEL_DESC_MAX */
    uint32_t v[FG_MODEL_DESC_MAX];    /* the family's numbers; the rest 0 */
} fg_model_desc;
_Static_assert(sizeof(fg_model_desc) == 60, "fg_model_desc: 15 x u32, no padding");

/* cfg -> its description. */
fg_model_desc fg_config_desc(const fg_opt_config *cfg);
/* A description -> a one-layer config to run ops with; FG_EINPUT naming
 * `who` for an unknown family, a wrong count or an out-of-range number. */
fg_status fg_config_from_desc(const fg_model_desc *d, const char *who, fg_opt_config *cfg);

static inline int fg_config_head_dim(const fg_opt_config *c) { return c->hidden / c->n_heads; }
static inline int fg_config_has_proj(const fg_opt_config *c) { return c->word_embed_proj_dim != c->hidden; }

/* ---- tensor specs ---- */

/* Per-layer tensors in a fixed order; the index of a tensor inside a layer. */
enum {
    FG_LW_Q_W, FG_LW_Q_B, FG_LW_K_W, FG_LW_K_B, FG_LW_V_W, FG_LW_V_B,
    FG_LW_O_W, FG_LW_O_B, FG_LW_LN1_W, FG_LW_LN1_B,
    FG_LW_FC1_W, FG_LW_FC1_B, FG_LW_FC2_W, FG_LW_FC2_B, FG_LW_LN2_W, FG_LW_LN2_B,
    FG_LW_COUNT
};
/* Model-level tensors (some only exist for some configs: see fg_spec.present). */
enum {
    FG_GW_EMBED_TOKENS, FG_GW_EMBED_POS, FG_GW_PROJ_IN, FG_GW_PROJ_OUT,
    FG_GW_FINAL_LN_W, FG_GW_FINAL_LN_B, FG_GW_COUNT
};

typedef struct {
    char name[96];    /* canonical name, without the "model." prefix */
    int ndim;         /* 1 or 2 */
    int64_t dims[2];  /* row-major; a Linear weight is [out, in] */
    int present;      /* 0 where this config has no such tensor */
} fg_spec;

/* All tensors of the config: global ones first (FG_GW_COUNT entries, some
 * absent), then n_layers blocks of FG_LW_COUNT. Index with fg_spec_global()
 * and fg_spec_layer(). Returns a heap array of fg_spec_count(cfg) entries. */
fg_spec *fg_specs_new(const fg_opt_config *cfg);
static inline int fg_spec_count(const fg_opt_config *c) { return FG_GW_COUNT + c->n_layers * FG_LW_COUNT; }
static inline int fg_spec_global(int which) { return which; }
static inline int fg_spec_layer(int layer, int which) { return FG_GW_COUNT + layer * FG_LW_COUNT + which; }
static inline int64_t fg_spec_numel(const fg_spec *s) { return s->ndim == 1 ? s->dims[0] : s->dims[0] * s->dims[1]; }

/* Map a checkpoint's tensor name to a spec index: strips "model.", accepts
 * FlexGen's "decoder.layer_norm" for the final LayerNorm. Returns -1 for an
 * unknown name, -2 for names to ignore (lm_head.weight: the head is tied). */
int fg_spec_lookup(const fg_opt_config *cfg, const fg_spec *specs, const char *name);

/* ---- bytes as the tiers hold them ---- */

/* 1 if spec index idx is held 4-bit compressed (compress_weight and one of
 * a layer's q, k, v, out_proj, fc1, fc2 weights; embeddings, biases and
 * LayerNorms stay fp16). */
int fg_spec_is_q4(const fg_opt_config *c, int idx);
/* Bytes spec index idx occupies in every tier: fp16, or fg_q4 compressed. */
uint64_t fg_spec_stored_bytes(const fg_opt_config *c, const fg_spec *sp, int idx);
/* KV cache bytes of one position of one sequence (H values): 2H fp16, or
 * n_heads compressed head_dim slices. A (Tmax, B, H) cache block is Tmax*B
 * of these, time-major. */
uint64_t fg_cache_row_bytes(const fg_opt_config *c);

#endif

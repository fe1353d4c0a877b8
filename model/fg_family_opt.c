/* fg_family_opt.c - the OPT family's description: every size FlexGen names
 * plus the 350m variant, its config.json, and its tensor names. */
#include <string.h>

#include "fg_family.h"

typedef struct {
    const char *name;
    int hidden, heads, layers, ffn;
} opt_size;

/* The family as published (and as FlexGen's opt_config.py lists it). */
static const opt_size opt_sizes[] = {
    {"opt-125m", 768, 12, 12, 3072},     {"opt-350m", 1024, 16, 24, 4096},
    {"opt-1.3b", 2048, 32, 24, 8192},    {"opt-2.7b", 2560, 32, 32, 10240},
    {"opt-6.7b", 4096, 32, 32, 16384},   {"opt-13b", 5120, 40, 40, 20480},
    {"opt-30b", 7168, 56, 48, 28672},    {"opt-66b", 9216, 72, 64, 36864},
    {"opt-175b", 12288, 96, 96, 49152},
};

/* What every OPT shares: ReLU MLP, LayerNorm, learned positions, every
 * projection with a bias, the head tied to the embedding, BOS = EOS = 2. */
static void opt_common(fg_model_config *c) {
    c->family = FG_FAMILY_OPT;
    c->n_kv_heads = c->n_heads;
    c->head_dim = c->n_heads > 0 ? c->hidden / c->n_heads : 0;
    c->ffn_kind = FG_FFN_RELU;
    c->norm_kind = FG_NORM_LAYER;
    c->norm_eps = 1e-5f;
    c->pos_kind = FG_POS_LEARNED;
    c->qkv_bias = c->o_bias = c->mlp_bias = 1;
    c->tied = 1;
}

static int opt_by_name(const char *name, fg_model_config *cfg) {
    for (size_t i = 0; i < sizeof opt_sizes / sizeof opt_sizes[0]; i++) {
        const opt_size *s = &opt_sizes[i];
        if (strcmp(name, s->name)) continue;
        memset(cfg, 0, sizeof *cfg);
        snprintf(cfg->name, sizeof cfg->name, "%s", s->name);
        cfg->vocab_size = 50272;
        cfg->hidden = s->hidden;
        cfg->n_heads = s->heads;
        cfg->n_layers = s->layers;
        cfg->ffn_dim = s->ffn;
        cfg->max_pos = 2048;
        /* 350m alone is post-LayerNorm with a 512-wide embedding. */
        int is350 = !strcmp(s->name, "opt-350m");
        cfg->word_embed_proj_dim = is350 ? 512 : s->hidden;
        cfg->pre_ln = !is350;
        cfg->pad_id = 1;
        cfg->bos_id = 2;
        cfg->n_eos = 1, cfg->eos_ids[0] = 2;
        opt_common(cfg);
        return 1;
    }
    return 0;
}

static void opt_list_names(char *buf, size_t cap) {
    for (size_t i = 0; i < sizeof opt_sizes / sizeof opt_sizes[0]; i++) {
        size_t l = strlen(buf);
        snprintf(buf + l, cap - l, " %s", opt_sizes[i].name);
    }
}

static fg_status opt_from_json(json_t *root, const char *path, const char *dir, fg_model_config *cfg) {
    fg_status st;
    json_t *act = json_object_get(root, "activation_function");
    if (act && (!json_is_string(act) || strcmp(json_string_value(act), "relu")))
        return fg_err_set(FG_EINPUT, "%s: field 'activation_function' must be \"relu\" (OPT)", path);
    int bias = 1, affine = 1, eos = 2;
    if ((st = fg_json_int(root, path, "vocab_size", 0, 0, &cfg->vocab_size)) ||
        (st = fg_json_int(root, path, "hidden_size", 0, 0, &cfg->hidden)) ||
        (st = fg_json_int(root, path, "num_attention_heads", 0, 0, &cfg->n_heads)) ||
        (st = fg_json_int(root, path, "num_hidden_layers", 0, 0, &cfg->n_layers)) ||
        (st = fg_json_int(root, path, "ffn_dim", 0, 0, &cfg->ffn_dim)) ||
        (st = fg_json_int(root, path, "max_position_embeddings", 0, 0, &cfg->max_pos)) ||
        (st = fg_json_int(root, path, "word_embed_proj_dim", 1, cfg->hidden, &cfg->word_embed_proj_dim)) ||
        (st = fg_json_int(root, path, "pad_token_id", 1, 1, &cfg->pad_id)) ||
        (st = fg_json_int(root, path, "bos_token_id", 1, 2, &cfg->bos_id)) ||
        (st = fg_json_int(root, path, "eos_token_id", 1, 2, &eos)) ||
        (st = fg_json_bool(root, path, "do_layer_norm_before", 1, &cfg->pre_ln)) ||
        (st = fg_json_bool(root, path, "enable_bias", 1, &bias)) ||
        (st = fg_json_bool(root, path, "layer_norm_elementwise_affine", 1, &affine)))
        return st;
    if (!bias || !affine)
        return fg_err_set(FG_EINPUT, "%s: enable_bias=false or layer_norm_elementwise_affine=false "
                                     "is not an OPT checkpoint this engine supports", path);
    json_t *rm = json_object_get(root, "_remove_final_layer_norm");
    if (rm && json_is_true(rm))
        return fg_err_set(FG_EINPUT, "%s: _remove_final_layer_norm=true is not supported", path);
    json_t *nm = json_object_get(root, "_name_or_path");
    snprintf(cfg->name, sizeof cfg->name, "%s", nm && json_is_string(nm) ? json_string_value(nm) : "opt");
    cfg->n_eos = 1, cfg->eos_ids[0] = eos;
    opt_common(cfg);
    return FG_OK;
}

/* OPT's kernels (kernels/fg_opt.c) run exactly this shape. */
static fg_status opt_validate(const fg_model_config *c, const char *origin) {
    if (c->hidden % c->n_heads)
        return fg_err_set(FG_EINPUT, "%s: hidden_size %d is not a multiple of num_attention_heads %d", origin,
                          c->hidden, c->n_heads);
    if (c->n_kv_heads != c->n_heads || c->head_dim != c->hidden / c->n_heads || c->ffn_kind != FG_FFN_RELU ||
        c->norm_kind != FG_NORM_LAYER || c->pos_kind != FG_POS_LEARNED || c->rope_scaling != FG_ROPE_NONE ||
        !c->qkv_bias || !c->o_bias || !c->mlp_bias || !c->tied || c->sliding_window || c->qk_norm ||
        c->n_experts)
        return fg_err_set(FG_EINPUT, "%s: an OPT model has one kv head per head, ReLU, LayerNorm, learned "
                                     "positions, every bias and a tied head", origin);
    return FG_OK;
}

static const char *const opt_types[] = {"opt", NULL};
static const char *const opt_aliases[] = {
    "decoder.layer_norm.weight", "decoder.final_layer_norm.weight",   /* FlexGen's name for the final LayerNorm */
    "decoder.layer_norm.bias", "decoder.final_layer_norm.bias", NULL};

const fg_family fg_family_opt = {
    .id = FG_FAMILY_OPT,
    .name = "opt",
    .model_types = opt_types,
    .by_name = opt_by_name,
    .list_names = opt_list_names,
    .from_json = opt_from_json,
    .validate = opt_validate,
    .layer_prefix = "decoder.layers.",
    .layer_suffix = {
        "self_attn.q_proj.weight", "self_attn.q_proj.bias", "self_attn.k_proj.weight", "self_attn.k_proj.bias",
        "self_attn.v_proj.weight", "self_attn.v_proj.bias", "self_attn.out_proj.weight", "self_attn.out_proj.bias",
        "self_attn_layer_norm.weight", "self_attn_layer_norm.bias", "fc1.weight", "fc1.bias",
        "fc2.weight", "fc2.bias", "final_layer_norm.weight", "final_layer_norm.bias",
        "up.weight", "up.bias", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
        "router.weight",   /* OPT has none */
    },
    .global_name = {
        "decoder.embed_tokens.weight", "decoder.embed_positions.weight", "decoder.project_in.weight",
        "decoder.project_out.weight", "decoder.final_layer_norm.weight", "decoder.final_layer_norm.bias",
        "lm_head.weight",
    },
    .aliases = opt_aliases,
};

/* fg_family_llama.c - the Llama family's description: Llama 2 and 3.x,
 * Mistral, Qwen2/2.5 and TinyLlama (Hugging Face model_type llama, mistral,
 * qwen2): gated SiLU MLP, RMSNorm, rotary positions (rope_theta, rope_scaling
 * linear or llama3), grouped-query attention, optional q/k/v biases (Qwen2),
 * tied or separate LM head, Mistral's sliding window, a list of EOS ids. The
 * sizes below are the published config.json values. */
#include <math.h>
#include <string.h>

#include "fg_family.h"

typedef struct {
    const char *name, *model_type;
    int vocab, hidden, layers, heads, kv_heads, ffn, max_pos;
    float theta, eps;
    int scaling;                         /* FG_ROPE_* */
    float factor;                        /* linear, llama3 */
    int tied, window, bos, eos[3];
} llama_size;

static const llama_size llama_sizes[] = {
    {"tinyllama-1.1b", "llama", 32000, 2048, 22, 32, 4, 5632, 2048, 10000, 1e-5f, FG_ROPE_NONE, 0, 0, 0, 1, {2}},
    {"llama-3.2-1b", "llama", 128256, 2048, 16, 32, 8, 8192, 131072, 500000, 1e-5f, FG_ROPE_LLAMA3, 32, 1, 0, 128000,
     {128001, 128008, 128009}},
    {"llama-2-7b", "llama", 32000, 4096, 32, 32, 32, 11008, 4096, 10000, 1e-5f, FG_ROPE_NONE, 0, 0, 0, 1, {2}},
    {"llama-2-13b", "llama", 32000, 5120, 40, 40, 40, 13824, 4096, 10000, 1e-5f, FG_ROPE_NONE, 0, 0, 0, 1, {2}},
    {"llama-2-70b", "llama", 32000, 8192, 80, 64, 8, 28672, 4096, 10000, 1e-5f, FG_ROPE_NONE, 0, 0, 0, 1, {2}},
    {"llama-3.1-8b", "llama", 128256, 4096, 32, 32, 8, 14336, 131072, 500000, 1e-5f, FG_ROPE_LLAMA3, 8, 0, 0, 128000,
     {128001, 128008, 128009}},
    {"llama-3.1-70b", "llama", 128256, 8192, 80, 64, 8, 28672, 131072, 500000, 1e-5f, FG_ROPE_LLAMA3, 8, 0, 0, 128000,
     {128001, 128008, 128009}},
    {"mistral-7b", "mistral", 32000, 4096, 32, 32, 8, 14336, 32768, 10000, 1e-5f, FG_ROPE_NONE, 0, 0, 4096, 1, {2}},
    {"qwen2.5-7b", "qwen2", 152064, 3584, 28, 28, 4, 18944, 131072, 1000000, 1e-6f, FG_ROPE_NONE, 0, 0, 0, 151643,
     {151643, 151645}},
};

/* What every member shares, and the biases its model_type implies. */
static void llama_common(fg_opt_config *c, const char *model_type) {
    c->family = FG_FAMILY_LLAMA;
    c->word_embed_proj_dim = c->hidden;
    c->pre_ln = 1;
    c->ffn_kind = FG_FFN_SWIGLU;
    c->norm_kind = FG_NORM_RMS;
    c->pos_kind = FG_POS_ROPE;
    if (!strcmp(model_type, "qwen2")) c->qkv_bias = 1, c->o_bias = 0;
}

static int llama_by_name(const char *name, fg_opt_config *c) {
    for (size_t i = 0; i < sizeof llama_sizes / sizeof llama_sizes[0]; i++) {
        const llama_size *s = &llama_sizes[i];
        if (strcmp(name, s->name)) continue;
        memset(c, 0, sizeof *c);
        snprintf(c->name, sizeof c->name, "%s", s->name);
        c->vocab_size = s->vocab, c->hidden = s->hidden, c->n_layers = s->layers;
        c->n_heads = s->heads, c->n_kv_heads = s->kv_heads, c->head_dim = s->hidden / s->heads;
        c->ffn_dim = s->ffn, c->max_pos = s->max_pos;
        c->rope_theta = s->theta, c->norm_eps = s->eps, c->rope_scaling = s->scaling;
        if (s->scaling == FG_ROPE_LLAMA3)   /* Llama 3.1 and 3.2 alike */
            c->rope_factor = s->factor, c->rope_low = 1, c->rope_high = 4, c->rope_orig_max = 8192;
        c->tied = s->tied, c->sliding_window = s->window;
        c->bos_id = s->bos, c->pad_id = 0;
        for (int e = 0; e < 3 && s->eos[e]; e++) c->eos_ids[c->n_eos++] = s->eos[e];
        llama_common(c, s->model_type);
        return 1;
    }
    return 0;
}

static void llama_list_names(char *buf, size_t cap) {
    for (size_t i = 0; i < sizeof llama_sizes / sizeof llama_sizes[0]; i++) {
        size_t l = strlen(buf);
        snprintf(buf + l, cap - l, " %s", llama_sizes[i].name);
    }
}

/* rope_scaling: null, {"rope_type"|"type": "default"|"linear"|"llama3", ...};
 * anything else (yarn, dynamic, longrope) refused naming the field. */
static fg_status rope_scaling(json_t *root, const char *path, fg_opt_config *c) {
    json_t *rs = json_object_get(root, "rope_scaling");
    if (!rs || json_is_null(rs)) return FG_OK;
    if (!json_is_object(rs)) return fg_err_set(FG_EINPUT, "%s: field 'rope_scaling' must be an object or null", path);
    json_t *t = json_object_get(rs, "rope_type");
    if (!t) t = json_object_get(rs, "type");
    const char *kind = json_is_string(t) ? json_string_value(t) : NULL;
    if (!kind) return fg_err_set(FG_EINPUT, "%s: field 'rope_scaling.rope_type' is missing or not a string", path);
    if (!strcmp(kind, "default")) return FG_OK;
    fg_status st;
    if (!strcmp(kind, "linear")) {
        c->rope_scaling = FG_ROPE_LINEAR;
        return fg_json_float(rs, path, "factor", 0, 0, &c->rope_factor);
    }
    if (!strcmp(kind, "llama3")) {
        c->rope_scaling = FG_ROPE_LLAMA3;
        if ((st = fg_json_float(rs, path, "factor", 0, 0, &c->rope_factor)) ||
            (st = fg_json_float(rs, path, "low_freq_factor", 0, 0, &c->rope_low)) ||
            (st = fg_json_float(rs, path, "high_freq_factor", 0, 0, &c->rope_high)) ||
            (st = fg_json_int(rs, path, "original_max_position_embeddings", 0, 0, &c->rope_orig_max)))
            return st;
        return FG_OK;
    }
    return fg_err_set(FG_EINPUT, "%s: field 'rope_scaling.rope_type' is \"%s\", which this engine does not run "
                                 "(supported: default, linear, llama3)", path, kind);
}

/* generation_config.json beside config.json, when there: its BOS and EOS
 * (a list for Llama 3 instruct models) replace config.json's. */
static fg_status generation_config(const char *dir, fg_opt_config *c) {
    char p[4096];
    snprintf(p, sizeof p, "%s/generation_config.json", dir);
    json_t *root;
    FILE *f = fopen(p, "r");
    if (!f) return FG_OK;
    fclose(f);
    fg_status st = fg_json_load_file(p, &root);
    if (st) return st;
    json_t *eos = json_object_get(root, "eos_token_id");
    if (!json_is_object(root)) st = fg_err_set(FG_EINPUT, "%s: expected a JSON object", p);
    else if (eos && !json_is_null(eos)) st = fg_json_id_list(eos, p, "eos_token_id", c->eos_ids, &c->n_eos);
    if (!st) st = fg_json_int(root, p, "bos_token_id", 1, c->bos_id, &c->bos_id);
    json_decref(root);
    return st;
}

/* Biases, MLP activation and windows by model_type (HF's LlamaConfig,
 * MistralConfig, Qwen2Config). */
static fg_status llama_variant(json_t *root, const char *path, const char *mt, fg_opt_config *c) {
    fg_status st;
    json_t *act = json_object_get(root, "hidden_act");
    if (act && (!json_is_string(act) || strcmp(json_string_value(act), "silu")))
        return fg_err_set(FG_EINPUT, "%s: field 'hidden_act' must be \"silu\" (the gated SiLU MLP)", path);
    json_t *prf = json_object_get(root, "partial_rotary_factor");
    if (prf && !(json_is_number(prf) && json_number_value(prf) == 1.0))
        return fg_err_set(FG_EINPUT, "%s: field 'partial_rotary_factor' must be 1 (rotary over the whole head)", path);
    if (!strcmp(mt, "llama")) {
        int ab = 0;
        if ((st = fg_json_bool(root, path, "attention_bias", 0, &ab)) ||
            (st = fg_json_bool(root, path, "mlp_bias", 0, &c->mlp_bias)))
            return st;
        c->qkv_bias = c->o_bias = ab;
    } else if (!strcmp(mt, "mistral")) {
        if ((st = fg_json_int(root, path, "sliding_window", 1, 0, &c->sliding_window))) return st;
    } else {   /* qwen2: q/k/v biases; its window only with use_sliding_window */
        int usw = 0;
        if ((st = fg_json_bool(root, path, "use_sliding_window", 0, &usw))) return st;
        if (usw)
            return fg_err_set(FG_EINPUT, "%s: field 'use_sliding_window' is true: Qwen2's per-layer window "
                                         "(max_window_layers) is not supported", path);
    }
    return FG_OK;
}

static fg_status llama_from_json(json_t *root, const char *path, const char *dir, fg_opt_config *c) {
    const char *mt = json_string_value(json_object_get(root, "model_type"));
    fg_status st;
    if ((st = fg_json_int(root, path, "vocab_size", 0, 0, &c->vocab_size)) ||
        (st = fg_json_int(root, path, "hidden_size", 0, 0, &c->hidden)) ||
        (st = fg_json_int(root, path, "intermediate_size", 0, 0, &c->ffn_dim)) ||
        (st = fg_json_int(root, path, "num_hidden_layers", 0, 0, &c->n_layers)) ||
        (st = fg_json_int(root, path, "num_attention_heads", 0, 0, &c->n_heads)) ||
        (st = fg_json_int(root, path, "num_key_value_heads", 1, c->n_heads, &c->n_kv_heads)) ||
        (st = fg_json_int(root, path, "max_position_embeddings", 0, 0, &c->max_pos)) ||
        (st = fg_json_float(root, path, "rms_norm_eps", 1, 1e-6, &c->norm_eps)) ||
        (st = fg_json_float(root, path, "rope_theta", 1, 10000, &c->rope_theta)) ||
        (st = fg_json_bool(root, path, "tie_word_embeddings", 0, &c->tied)) ||
        (st = fg_json_int(root, path, "bos_token_id", 1, 1, &c->bos_id)) ||
        (st = fg_json_int(root, path, "pad_token_id", 1, 0, &c->pad_id)))
        return st;
    if (c->n_heads <= 0) return fg_err_set(FG_EINPUT, "%s: num_attention_heads must be > 0", path);
    if (c->hidden % c->n_heads && !json_object_get(root, "head_dim"))
        return fg_err_set(FG_EINPUT, "%s: hidden_size %d is not a multiple of num_attention_heads %d and there is "
                                     "no head_dim", path, c->hidden, c->n_heads);
    if ((st = fg_json_int(root, path, "head_dim", 1, c->hidden / c->n_heads, &c->head_dim))) return st;
    json_t *eos = json_object_get(root, "eos_token_id");
    c->n_eos = 1, c->eos_ids[0] = 2;
    if (eos && !json_is_null(eos) && (st = fg_json_id_list(eos, path, "eos_token_id", c->eos_ids, &c->n_eos)))
        return st;
    llama_common(c, mt);
    if ((st = llama_variant(root, path, mt, c)) || (st = rope_scaling(root, path, c)) ||
        (st = generation_config(dir, c)))
        return st;
    json_t *nm = json_object_get(root, "_name_or_path");
    snprintf(c->name, sizeof c->name, "%s", nm && json_is_string(nm) && *json_string_value(nm) ? json_string_value(nm) : mt);
    return FG_OK;
}

/* The kernels of kernels/fg_llama.c: pre-norm RMSNorm, SwiGLU, rotary. */
static fg_status llama_validate(const fg_opt_config *c, const char *origin) {
#define NEED(cond, ...) do { if (!(cond)) return fg_err_set(FG_EINPUT, __VA_ARGS__); } while (0)
    NEED(c->pre_ln && c->word_embed_proj_dim == c->hidden && c->ffn_kind == FG_FFN_SWIGLU &&
         c->norm_kind == FG_NORM_RMS && c->pos_kind == FG_POS_ROPE,
         "%s: a Llama-family model is pre-norm with RMSNorm, a gated SiLU MLP and rotary positions", origin);
    NEED(c->head_dim % 2 == 0, "%s: head_dim %d must be even (rotary pairs)", origin, c->head_dim);
    NEED(isfinite(c->norm_eps) && c->norm_eps > 0 && c->norm_eps < 1, "%s: rms_norm_eps %g must be in (0, 1)", origin,
         (double)c->norm_eps);
    NEED(isfinite(c->rope_theta) && c->rope_theta > 1, "%s: rope_theta %g must be > 1", origin, (double)c->rope_theta);
    NEED(c->sliding_window >= 0, "%s: sliding_window %d must be >= 0", origin, c->sliding_window);
    if (c->rope_scaling != FG_ROPE_NONE)
        NEED(isfinite(c->rope_factor) && c->rope_factor >= 1 && c->rope_factor <= 1024,
             "%s: rope_scaling.factor %g must be in [1, 1024]", origin, (double)c->rope_factor);
    if (c->rope_scaling == FG_ROPE_LLAMA3)
        NEED(isfinite(c->rope_low) && isfinite(c->rope_high) && c->rope_low > 0 && c->rope_high > c->rope_low &&
             c->rope_orig_max > 0 && c->rope_orig_max <= FG_CONFIG_DIM_MAX,
             "%s: rope_scaling llama3 needs 0 < low_freq_factor < high_freq_factor and "
             "original_max_position_embeddings > 0 (got %g, %g, %d)", origin, (double)c->rope_low,
             (double)c->rope_high, c->rope_orig_max);
    NEED(c->rope_scaling >= FG_ROPE_NONE && c->rope_scaling <= FG_ROPE_LLAMA3, "%s: unknown rope scaling %d", origin,
         c->rope_scaling);
#undef NEED
    return FG_OK;
}

static const char *const llama_types[] = {"llama", "mistral", "qwen2", NULL};
static const char *const llama_aliases[] = {NULL};

const fg_family fg_family_llama = {
    .id = FG_FAMILY_LLAMA,
    .name = "llama",
    .model_types = llama_types,
    .by_name = llama_by_name,
    .list_names = llama_list_names,
    .from_json = llama_from_json,
    .validate = llama_validate,
    .layer_prefix = "layers.",
    .layer_suffix = {
        "self_attn.q_proj.weight", "self_attn.q_proj.bias", "self_attn.k_proj.weight", "self_attn.k_proj.bias",
        "self_attn.v_proj.weight", "self_attn.v_proj.bias", "self_attn.o_proj.weight", "self_attn.o_proj.bias",
        "input_layernorm.weight", "input_layernorm.bias", "mlp.gate_proj.weight", "mlp.gate_proj.bias",
        "mlp.down_proj.weight", "mlp.down_proj.bias", "post_attention_layernorm.weight",
        "post_attention_layernorm.bias", "mlp.up_proj.weight", "mlp.up_proj.bias",
    },
    .global_name = {
        "embed_tokens.weight", "embed_positions.weight", "project_in.weight", "project_out.weight",
        "norm.weight", "norm.bias", "lm_head.weight",
    },
    .aliases = llama_aliases,
};

/* fg_family_llama.c - the Llama family's description: Llama 2 and 3.x,
 * Mistral, Qwen2/2.5, Qwen3, TinyLlama, and the mixtures of experts Mixtral
 * and Qwen3-MoE (Hugging Face model_type llama, mistral, qwen2, qwen3,
 * mixtral, qwen3_moe): gated SiLU MLP, RMSNorm, rotary positions
 * (rope_theta, rope_scaling linear or llama3), grouped-query attention,
 * optional q/k/v biases (Qwen2), per-head q/k RMSNorm (Qwen3), tied or
 * separate LM head, Mistral's sliding window, a list of EOS ids; sparse
 * layers of routed gated-SiLU experts (which layers, how many, the router's
 * kind) and their tensor names, Hugging Face's and llama.cpp's (GGUF
 * architectures llama, with expert_count Mixtral, qwen2, qwen3, qwen3moe).
 * The sizes below are the published config.json values. */
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "fg_family.h"

typedef struct {
    const char *name, *model_type;
    int vocab, hidden, layers, heads, kv_heads, ffn, max_pos;
    float theta, eps;
    int scaling;                         /* FG_ROPE_* */
    float factor;                        /* linear, llama3 */
    int tied, window, bos, eos[3];
    int head_dim;                        /* 0: hidden / heads */
    int experts, topk, moe_ffn;          /* 0 experts: dense; every layer sparse otherwise */
} llama_size;

static const llama_size llama_sizes[] = {
    {"tinyllama-1.1b", "llama", 32000, 2048, 22, 32, 4, 5632, 2048, 10000, 1e-5f, FG_ROPE_NONE, 0, 0, 0, 1, {2},
     0, 0, 0, 0},
    {"llama-3.2-1b", "llama", 128256, 2048, 16, 32, 8, 8192, 131072, 500000, 1e-5f, FG_ROPE_LLAMA3, 32, 1, 0, 128000,
     {128001, 128008, 128009}, 0, 0, 0, 0},
    {"llama-2-7b", "llama", 32000, 4096, 32, 32, 32, 11008, 4096, 10000, 1e-5f, FG_ROPE_NONE, 0, 0, 0, 1, {2},
     0, 0, 0, 0},
    {"llama-2-13b", "llama", 32000, 5120, 40, 40, 40, 13824, 4096, 10000, 1e-5f, FG_ROPE_NONE, 0, 0, 0, 1, {2},
     0, 0, 0, 0},
    {"llama-2-70b", "llama", 32000, 8192, 80, 64, 8, 28672, 4096, 10000, 1e-5f, FG_ROPE_NONE, 0, 0, 0, 1, {2},
     0, 0, 0, 0},
    {"llama-3.1-8b", "llama", 128256, 4096, 32, 32, 8, 14336, 131072, 500000, 1e-5f, FG_ROPE_LLAMA3, 8, 0, 0, 128000,
     {128001, 128008, 128009}, 0, 0, 0, 0},
    {"llama-3.1-70b", "llama", 128256, 8192, 80, 64, 8, 28672, 131072, 500000, 1e-5f, FG_ROPE_LLAMA3, 8, 0, 0, 128000,
     {128001, 128008, 128009}, 0, 0, 0, 0},
    {"mistral-7b", "mistral", 32000, 4096, 32, 32, 8, 14336, 32768, 10000, 1e-5f, FG_ROPE_NONE, 0, 0, 4096, 1, {2},
     0, 0, 0, 0},
    {"qwen2.5-7b", "qwen2", 152064, 3584, 28, 28, 4, 18944, 131072, 1000000, 1e-6f, FG_ROPE_NONE, 0, 0, 0, 151643,
     {151643, 151645}, 0, 0, 0, 0},
    {"qwen3-0.6b", "qwen3", 151936, 1024, 28, 16, 8, 3072, 40960, 1000000, 1e-6f, FG_ROPE_NONE, 0, 1, 0, 151643,
     {151645, 151643}, 128, 0, 0, 0},
    {"qwen3-8b", "qwen3", 151936, 4096, 36, 32, 8, 12288, 40960, 1000000, 1e-6f, FG_ROPE_NONE, 0, 0, 0, 151643,
     {151645, 151643}, 128, 0, 0, 0},
    {"mixtral-8x7b", "mixtral", 32000, 4096, 32, 32, 8, 14336, 32768, 1000000, 1e-5f, FG_ROPE_NONE, 0, 0, 0, 1, {2},
     0, 8, 2, 14336},
    {"qwen3-30b-a3b", "qwen3_moe", 151936, 2048, 48, 32, 4, 6144, 40960, 1000000, 1e-6f, FG_ROPE_NONE, 0, 0, 0,
     151643, {151645, 151643}, 128, 128, 8, 768},
    {"qwen3-235b-a22b", "qwen3_moe", 151936, 4096, 94, 64, 4, 12288, 40960, 1000000, 1e-6f, FG_ROPE_NONE, 0, 0, 0,
     151643, {151645, 151643}, 128, 128, 8, 1536},
};

/* What every member shares, and the biases its model_type implies. */
static void llama_common(fg_model_config *c, const char *model_type) {
    c->family = FG_FAMILY_LLAMA;
    c->word_embed_proj_dim = c->hidden;
    c->pre_ln = 1;
    c->ffn_kind = FG_FFN_SWIGLU;
    c->norm_kind = FG_NORM_RMS;
    c->pos_kind = FG_POS_ROPE;
    if (!strcmp(model_type, "qwen2")) c->qkv_bias = 1, c->o_bias = 0;
    c->qk_norm = !strcmp(model_type, "qwen3") || !strcmp(model_type, "qwen3_moe");
    if (!strcmp(model_type, "mixtral")) c->router = FG_ROUTER_MIXTRAL;
    if (!strcmp(model_type, "qwen3_moe")) c->router = FG_ROUTER_QWEN3_MOE;
}

/* Every layer sparse (Mixtral; Qwen3-MoE's published sizes). */
static void all_sparse(fg_model_config *c) {
    for (int l = 0; l < c->n_layers; l++) fg_config_set_sparse(c, l, 1);
}

static int llama_by_name(const char *name, fg_model_config *c) {
    for (size_t i = 0; i < sizeof llama_sizes / sizeof llama_sizes[0]; i++) {
        const llama_size *s = &llama_sizes[i];
        if (strcmp(name, s->name)) continue;
        memset(c, 0, sizeof *c);
        snprintf(c->name, sizeof c->name, "%s", s->name);
        c->vocab_size = s->vocab, c->hidden = s->hidden, c->n_layers = s->layers;
        c->n_heads = s->heads, c->n_kv_heads = s->kv_heads;
        c->head_dim = s->head_dim ? s->head_dim : s->hidden / s->heads;
        c->ffn_dim = s->ffn, c->max_pos = s->max_pos;
        c->rope_theta = s->theta, c->norm_eps = s->eps, c->rope_scaling = s->scaling;
        if (s->scaling == FG_ROPE_LLAMA3)   /* Llama 3.1 and 3.2 alike */
            c->rope_factor = s->factor, c->rope_low = 1, c->rope_high = 4, c->rope_orig_max = 8192;
        c->tied = s->tied, c->sliding_window = s->window;
        c->bos_id = s->bos, c->pad_id = 0;
        for (int e = 0; e < 3 && s->eos[e]; e++) c->eos_ids[c->n_eos++] = s->eos[e];
        llama_common(c, s->model_type);
        if (s->experts) {   /* Qwen3-MoE's published sizes renormalise (norm_topk_prob true) */
            c->n_experts = s->experts, c->experts_per_token = s->topk, c->moe_ffn_dim = s->moe_ffn;
            c->moe_norm_topk = c->router == FG_ROUTER_QWEN3_MOE;
            all_sparse(c);
        }
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
static fg_status rope_scaling(json_t *root, const char *path, fg_model_config *c) {
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
static fg_status generation_config(const char *dir, fg_model_config *c) {
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

/* Qwen2's and Qwen3's windows: only with use_sliding_window (refused), and
 * no layer_types entry other than full_attention. */
static fg_status qwen_window(json_t *root, const char *path) {
    int usw = 0;
    fg_status st = fg_json_bool(root, path, "use_sliding_window", 0, &usw);
    if (st) return st;
    if (usw)
        return fg_err_set(FG_EINPUT, "%s: field 'use_sliding_window' is true: Qwen's per-layer window "
                                     "(max_window_layers) is not supported", path);
    json_t *lt = json_object_get(root, "layer_types"), *x;
    size_t i;
    if (lt && !json_is_null(lt) && !json_is_array(lt))
        return fg_err_set(FG_EINPUT, "%s: field 'layer_types' must be a list", path);
    json_array_foreach(lt, i, x) if (!json_is_string(x) || strcmp(json_string_value(x), "full_attention"))
        return fg_err_set(FG_EINPUT, "%s: field 'layer_types[%zu]' is not \"full_attention\": per-layer "
                                     "sliding windows are not supported", path, i);
    return FG_OK;
}

/* Mixtral's experts (MixtralConfig: num_local_experts 8, num_experts_per_tok
 * 2, each of intermediate_size; every layer sparse) and Qwen3-MoE's
 * (Qwen3MoeConfig: num_experts 128, num_experts_per_tok 8,
 * moe_intermediate_size 768, norm_topk_prob false; layer l sparse unless in
 * mlp_only_layers, where (l + 1) % decoder_sparse_step == 0; its dense layers
 * keep intermediate_size): the defaults are Hugging Face's. */
static fg_status llama_experts(json_t *root, const char *path, const char *mt, fg_model_config *c) {
    fg_status st;
    int step = 1;
    if (!strcmp(mt, "mixtral")) {
        if ((st = fg_json_int(root, path, "num_local_experts", 1, 8, &c->n_experts)) ||
            (st = fg_json_int(root, path, "num_experts_per_tok", 1, 2, &c->experts_per_token)))
            return st;
        c->moe_ffn_dim = c->ffn_dim;
        all_sparse(c);
        return FG_OK;
    }
    if ((st = fg_json_int(root, path, "num_experts", 1, 128, &c->n_experts)) ||
        (st = fg_json_int(root, path, "num_experts_per_tok", 1, 8, &c->experts_per_token)) ||
        (st = fg_json_int(root, path, "moe_intermediate_size", 1, 768, &c->moe_ffn_dim)) ||
        (st = fg_json_bool(root, path, "norm_topk_prob", 0, &c->moe_norm_topk)) ||
        (st = fg_json_int(root, path, "decoder_sparse_step", 1, 1, &step)))
        return st;
    if (step < 1) return fg_err_set(FG_EINPUT, "%s: field 'decoder_sparse_step' must be >= 1", path);
    for (int l = 0; l < c->n_layers && l < FG_CONFIG_MAX_LAYERS; l++) fg_config_set_sparse(c, l, (l + 1) % step == 0);
    json_t *only = json_object_get(root, "mlp_only_layers"), *x;
    size_t i;
    if (only && !json_is_null(only) && !json_is_array(only))
        return fg_err_set(FG_EINPUT, "%s: field 'mlp_only_layers' must be a list of layer numbers", path);
    json_array_foreach(only, i, x) {
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= c->n_layers)
            return fg_err_set(FG_EINPUT, "%s: field 'mlp_only_layers[%zu]' is not a layer number in [0, %d)", path,
                              i, c->n_layers);
        fg_config_set_sparse(c, (int)json_integer_value(x), 0);
    }
    return FG_OK;
}

/* Biases, MLP activation and windows by model_type (HF's LlamaConfig,
 * MistralConfig, MixtralConfig, Qwen2Config, Qwen3Config, Qwen3MoeConfig). */
static fg_status llama_variant(json_t *root, const char *path, const char *mt, fg_model_config *c) {
    fg_status st;
    json_t *act = json_object_get(root, "hidden_act");
    if (act && (!json_is_string(act) || strcmp(json_string_value(act), "silu")))
        return fg_err_set(FG_EINPUT, "%s: field 'hidden_act' must be \"silu\" (the gated SiLU MLP)", path);
    json_t *prf = json_object_get(root, "partial_rotary_factor");
    if (prf && !(json_is_number(prf) && json_number_value(prf) == 1.0))
        return fg_err_set(FG_EINPUT, "%s: field 'partial_rotary_factor' must be 1 (rotary over the whole head)", path);
    if (!strcmp(mt, "llama") || !strcmp(mt, "qwen3") || !strcmp(mt, "qwen3_moe")) {   /* attention_bias: q, k, v, o */
        int ab = 0;
        if ((st = fg_json_bool(root, path, "attention_bias", 0, &ab)) ||
            (st = fg_json_bool(root, path, "mlp_bias", 0, &c->mlp_bias)))
            return st;
        c->qkv_bias = c->o_bias = ab;
        if (strcmp(mt, "llama")) return qwen_window(root, path);
    } else if (!strcmp(mt, "mistral") || !strcmp(mt, "mixtral")) {
        if ((st = fg_json_int(root, path, "sliding_window", 1, 0, &c->sliding_window))) return st;
    } else {   /* qwen2: q/k/v biases; its window only with use_sliding_window */
        return qwen_window(root, path);
    }
    return FG_OK;
}

static fg_status llama_from_json(json_t *root, const char *path, const char *dir, fg_model_config *c) {
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
    int qwen3 = !strcmp(mt, "qwen3");   /* Qwen3Config: head_dim 128 by default (Qwen3-MoE: hidden / heads) */
    if (c->hidden % c->n_heads && !qwen3 && !json_object_get(root, "head_dim"))
        return fg_err_set(FG_EINPUT, "%s: hidden_size %d is not a multiple of num_attention_heads %d and there is "
                                     "no head_dim", path, c->hidden, c->n_heads);
    if ((st = fg_json_int(root, path, "head_dim", 1, qwen3 ? 128 : c->hidden / c->n_heads, &c->head_dim))) return st;
    json_t *eos = json_object_get(root, "eos_token_id");
    c->n_eos = 1, c->eos_ids[0] = 2;
    if (eos && !json_is_null(eos) && (st = fg_json_id_list(eos, path, "eos_token_id", c->eos_ids, &c->n_eos)))
        return st;
    llama_common(c, mt);
    if ((st = llama_variant(root, path, mt, c)) || (st = rope_scaling(root, path, c)) ||
        (st = generation_config(dir, c)))
        return st;
    if (c->router != FG_ROUTER_NONE && (st = llama_experts(root, path, mt, c))) return st;
    json_t *nm = json_object_get(root, "_name_or_path");
    snprintf(c->name, sizeof c->name, "%s", nm && json_is_string(nm) && *json_string_value(nm) ? json_string_value(nm) : mt);
    return FG_OK;
}

/* The kernels of kernels/fg_llama.c: pre-norm RMSNorm, SwiGLU, rotary. */
static fg_status llama_validate(const fg_model_config *c, const char *origin) {
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

/* ---- GGUF (llama.cpp's converter, convert_hf_to_gguf.py) ---- */

/* expert_gating_func's value for a softmax over the experts (gguf-py's
 * ExpertGatingFuncType.SOFTMAX). */
#define GG_GATING_SOFTMAX 1

/* An integer or float metadata value of the architecture, optional where
 * has_def. */
static fg_status gg_int(const fg_gguf *g, const char *arch, const char *key, int has_def, int64_t def, int *out) {
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    int64_t v = def;
    if ((!has_def || fg_gguf_find_kv(g, k) >= 0) && fg_gguf_get_int(g, k, &v)) return FG_EINPUT;
    if (v < 0 || v > (1 << 30)) return fg_err_set(FG_EINPUT, "%s: %s = %lld is out of range", fg_gguf_path(g), k, (long long)v);
    *out = (int)v;
    return FG_OK;
}

static fg_status gg_float(const fg_gguf *g, const char *arch, const char *key, double def, float *out) {
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    double v = def;
    if (fg_gguf_find_kv(g, k) >= 0 && fg_gguf_get_float(g, k, &v)) return FG_EINPUT;
    if (!isfinite(v) || fabs(v) > 1e30) return fg_err_set(FG_EINPUT, "%s: %s = %g is out of range", fg_gguf_path(g), k, v);
    *out = (float)v;
    return FG_OK;
}

/* llama.cpp keeps Llama 3's rope scaling as rope_freqs.weight, per-frequency
 * divisors of theta^(-2i/d), not as its parameters. Accepted when they are
 * the divisors Llama 3.1 and 3.2 publish (low_freq_factor 1,
 * high_freq_factor 4, original context rope.scaling.original_context_length
 * or 8192, factor rope.scaling.factor or the largest divisor), computed as
 * the converter computes them (in double): the config then holds those
 * parameters and the engine computes exactly what config.json would make
 * it compute. Other divisors are refused naming the tensor. */
static fg_status gg_llama3(const fg_gguf *g, const char *arch, fg_model_config *c) {
    const fg_gguf_tensor *t = fg_gguf_find_tensor(g, "rope_freqs.weight");
    if (!t) return FG_OK;
    int half = c->head_dim / 2;
    float f[FG_CONFIG_DIM_MAX / 2 < 4096 ? FG_CONFIG_DIM_MAX / 2 : 4096];
    if (t->numel != (uint64_t)half || t->type != FG_GGML_F32 || half > (int)(sizeof f / sizeof f[0]))
        return fg_err_set(FG_EINPUT, "%s: rope_freqs.weight must be %d F32 values", fg_gguf_path(g), half);
    int fd = open(fg_gguf_path(g), O_RDONLY | O_CLOEXEC);   /* bounds checked at open: the bytes are there */
    ssize_t got = fd < 0 ? -1 : pread(fd, f, sizeof(float) * (size_t)half, (off_t)t->offset);
    if (fd >= 0) close(fd);
    if (got != (ssize_t)(sizeof(float) * (size_t)half))
        return fg_err_set(FG_ERUNTIME, "%s: cannot read rope_freqs.weight", fg_gguf_path(g));
    float fmax = 1;
    for (int i = 0; i < half; i++) fmax = f[i] > fmax ? f[i] : fmax;
    c->rope_scaling = FG_ROPE_LLAMA3, c->rope_low = 1, c->rope_high = 4, c->rope_orig_max = 8192, c->rope_factor = fmax;
    fg_status st;
    if ((st = gg_float(g, arch, "rope.scaling.factor", fmax, &c->rope_factor)) ||
        (st = gg_int(g, arch, "rope.scaling.original_context_length", 1, 8192, &c->rope_orig_max)))
        return st;
    for (int i = 0; i < half; i++) {
        double wl = 2 * M_PI * pow((double)c->rope_theta, 2.0 * i / c->head_dim), want;
        double lo_wl = c->rope_orig_max / (double)c->rope_low, hi_wl = c->rope_orig_max / (double)c->rope_high;
        if (wl < hi_wl) want = 1;
        else if (wl > lo_wl) want = c->rope_factor;
        else {
            double sm = (c->rope_orig_max / wl - c->rope_low) / (c->rope_high - c->rope_low);
            want = 1 / ((1 - sm) / c->rope_factor + sm);
        }
        if ((float)want != f[i])
            return fg_err_set(FG_EINPUT, "%s: rope_freqs.weight[%d] = %g is not Llama 3's rope scaling (factor %g, "
                                         "low_freq_factor 1, high_freq_factor 4, original context %d gives %g): "
                                         "not supported", fg_gguf_path(g), i, (double)f[i], (double)c->rope_factor,
                              c->rope_orig_max, (double)(float)want);
    }
    return FG_OK;
}

/* Scaling given as metadata (linear), or refused by name (yarn, ...). */
static fg_status gg_rope_scaling(const fg_gguf *g, const char *arch, fg_model_config *c) {
    char k[128];
    snprintf(k, sizeof k, "%s.rope.scaling.type", arch);
    const char *type = "none";
    if (fg_gguf_find_kv(g, k) >= 0 && fg_gguf_get_string(g, k, &type, NULL)) return FG_EINPUT;
    if (!strcmp(type, "linear")) {
        c->rope_scaling = FG_ROPE_LINEAR;
        return gg_float(g, arch, "rope.scaling.factor", 1, &c->rope_factor);
    }
    if (strcmp(type, "none"))
        return fg_err_set(FG_EINPUT, "%s: %s is \"%s\", which this engine does not run (none, linear; llama3 as "
                                     "rope_freqs.weight)", fg_gguf_path(g), k, type);
    return gg_llama3(g, arch, c);
}

/* BOS, EOS and (Llama 3 instruct) EOT from the tokenizer metadata. */
static fg_status gg_tokens(const fg_gguf *g, fg_model_config *c) {
    int64_t v;
    c->bos_id = 1, c->n_eos = 1, c->eos_ids[0] = 2;
    if (fg_gguf_find_kv(g, "tokenizer.ggml.bos_token_id") >= 0) {
        if (fg_gguf_get_int(g, "tokenizer.ggml.bos_token_id", &v)) return FG_EINPUT;
        c->bos_id = (int)(v < 0 || v > (1 << 30) ? -1 : v);
    }
    const char *keys[] = {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"};
    for (int i = 0; i < 2; i++) {
        if (fg_gguf_find_kv(g, keys[i]) < 0) continue;
        if (fg_gguf_get_int(g, keys[i], &v)) return FG_EINPUT;
        int id = (int)(v < 0 || v > (1 << 30) ? -1 : v);
        if (i == 0) c->eos_ids[0] = id;
        else if (id != c->eos_ids[0]) c->eos_ids[c->n_eos++] = id;
    }
    return FG_OK;
}

static fg_status gg_bool(const fg_gguf *g, const char *arch, const char *key, int def, int *out) {
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    *out = def;
    return fg_gguf_find_kv(g, k) >= 0 ? fg_gguf_get_bool(g, k, out) : FG_OK;
}

/* The keys of llama.cpp's mixtures of experts that ask for routing this
 * engine's kernels do not run: refused by name rather than ignored. */
static fg_status gg_experts_refused(const fg_gguf *g, const char *arch) {
    int shared = 0, shared_ff = 0, groups = 0, gating = GG_GATING_SOFTMAX;
    float scale = 0;
    fg_status st;
    if ((st = gg_int(g, arch, "expert_shared_count", 1, 0, &shared)) ||
        (st = gg_int(g, arch, "expert_shared_feed_forward_length", 1, 0, &shared_ff)) ||
        (st = gg_int(g, arch, "expert_group_count", 1, 0, &groups)) ||
        (st = gg_int(g, arch, "expert_gating_func", 1, GG_GATING_SOFTMAX, &gating)) ||
        (st = gg_float(g, arch, "expert_weights_scale", 0, &scale)))
        return st;
    const char *path = fg_gguf_path(g);
    if (shared || shared_ff)
        return fg_err_set(FG_EINPUT, "%s: %s.expert_shared_count %d, expert_shared_feed_forward_length %d: shared "
                                     "experts are not supported", path, arch, shared, shared_ff);
    if (groups > 1)
        return fg_err_set(FG_EINPUT, "%s: %s.expert_group_count %d: routing within expert groups is not supported",
                          path, arch, groups);
    if (gating != GG_GATING_SOFTMAX)
        return fg_err_set(FG_EINPUT, "%s: %s.expert_gating_func is %d: only %d (softmax over the experts) is "
                                     "supported", path, arch, gating, GG_GATING_SOFTMAX);
    if (scale != 0 && scale != 1)
        return fg_err_set(FG_EINPUT, "%s: %s.expert_weights_scale %g: scaled expert weights are not supported",
                          path, arch, (double)scale);
    return FG_OK;
}

/* llama.cpp's mixtures of experts: architecture llama with expert_count
 * (Mixtral: experts of feed_forward_length, the top k renormalised) and
 * qwen3moe (experts of expert_feed_forward_length, else feed_forward_length
 * / k as llama.cpp defaults it; renormalised unless expert_weights_norm is
 * false: llama.cpp's qwen3moe graph always renormalises, as the published
 * Qwen3-MoE models do, and never reads that key). Which layers are sparse:
 * those below leading_dense_block_count dense where the file gives one,
 * else each layer by whether it has a router (blk.N.ffn_gate_inp.weight).
 * llama.cpp's own loaders want every layer sparse; this engine also reads a
 * file whose dense layers keep ffn_gate, ffn_up and ffn_down, which is how
 * Qwen3-MoE's mlp_only_layers and decoder_sparse_step (no GGUF key) travel. */
static fg_status gg_experts(const fg_gguf *g, const char *arch, fg_model_config *c) {
    fg_status st;
    const char *path = fg_gguf_path(g);
    int qwen = c->router == FG_ROUTER_QWEN3_MOE, norm = 1;
    if ((st = gg_int(g, arch, "expert_used_count", 0, 0, &c->experts_per_token)) ||
        (st = gg_bool(g, arch, "expert_weights_norm", 1, &norm)) || (st = gg_experts_refused(g, arch)))
        return st;
    if (qwen) {
        c->moe_norm_topk = norm;
        int topk = c->experts_per_token > 0 ? c->experts_per_token : 1;
        if ((st = gg_int(g, arch, "expert_feed_forward_length", 1, c->ffn_dim / topk, &c->moe_ffn_dim))) return st;
    } else {
        if (!norm)
            return fg_err_set(FG_EINPUT, "%s: %s.expert_weights_norm is false: Mixtral's router renormalises its "
                                         "top k (llama.cpp's llama graph always does)", path, arch);
        c->moe_ffn_dim = c->ffn_dim;
    }
    int lead = -1, n = c->n_layers < FG_CONFIG_MAX_LAYERS ? c->n_layers : FG_CONFIG_MAX_LAYERS, sparse = 0;
    char k[128];
    snprintf(k, sizeof k, "%s.leading_dense_block_count", arch);
    if (fg_gguf_find_kv(g, k) >= 0 && (st = gg_int(g, arch, "leading_dense_block_count", 0, 0, &lead))) return st;
    for (int l = 0; l < n; l++) {
        char r[64];
        snprintf(r, sizeof r, "blk.%d.ffn_gate_inp.weight", l);
        int s = lead >= 0 ? l >= lead : fg_gguf_find_tensor(g, r) != NULL;
        fg_config_set_sparse(c, l, s);
        sparse += s;
    }
    if (!sparse)
        return fg_err_set(FG_EINPUT, "%s: %s.expert_count is %d but no layer is sparse (%s)", path, arch,
                          c->n_experts, lead >= 0 ? "leading_dense_block_count covers them all"
                                                  : "no blk.N.ffn_gate_inp.weight");
    return FG_OK;
}

static fg_status llama_from_gguf(const fg_gguf *g, const char *arch, fg_model_config *c) {
    fg_status st;
    int rope_dim = 0;
    const fg_gguf_tensor *emb = fg_gguf_find_tensor(g, "token_embd.weight");
    if (!emb || emb->n_dims != 2) return fg_err_set(FG_EINPUT, "%s: no 2-D token_embd.weight", fg_gguf_path(g));
    if ((st = gg_int(g, arch, "embedding_length", 0, 0, &c->hidden)) ||
        (st = gg_int(g, arch, "block_count", 0, 0, &c->n_layers)) ||
        (st = gg_int(g, arch, "feed_forward_length", 0, 0, &c->ffn_dim)) ||
        (st = gg_int(g, arch, "attention.head_count", 0, 0, &c->n_heads)) ||
        (st = gg_int(g, arch, "attention.head_count_kv", 1, c->n_heads, &c->n_kv_heads)) ||
        (st = gg_int(g, arch, "context_length", 0, 0, &c->max_pos)) ||
        (st = gg_int(g, arch, "vocab_size", 1, (int64_t)emb->ne[1], &c->vocab_size)) ||
        (st = gg_float(g, arch, "attention.layer_norm_rms_epsilon", 1e-6, &c->norm_eps)) ||
        (st = gg_float(g, arch, "rope.freq_base", 10000, &c->rope_theta)))
        return st;
    if (c->n_heads <= 0) return fg_err_set(FG_EINPUT, "%s: %s.attention.head_count must be > 0", fg_gguf_path(g), arch);
    if ((st = gg_int(g, arch, "attention.key_length", 1, c->hidden / c->n_heads, &c->head_dim)) ||
        (st = gg_int(g, arch, "rope.dimension_count", 1, c->head_dim, &rope_dim)))
        return st;
    if (rope_dim != c->head_dim)
        return fg_err_set(FG_EINPUT, "%s: %s.rope.dimension_count %d is not the head dimension %d (partial rotary "
                                     "is not supported)", fg_gguf_path(g), arch, rope_dim, c->head_dim);
    /* llama, qwen2 (biases: below), qwen3 (q/k norms); with experts llama is
     * Mixtral, and qwen3moe Qwen3-MoE */
    int moe = !strcmp(arch, "llama") || !strcmp(arch, "qwen3moe");
    if (moe && (st = gg_int(g, arch, "expert_count", strcmp(arch, "qwen3moe") != 0, 0, &c->n_experts))) return st;
    llama_common(c, !strcmp(arch, "qwen3moe") ? "qwen3_moe" : c->n_experts ? "mixtral" : arch);
    if (!strcmp(arch, "qwen3moe") && !c->n_experts)
        return fg_err_set(FG_EINPUT, "%s: qwen3moe.expert_count is 0", fg_gguf_path(g));
    if (c->n_experts && (st = gg_experts(g, arch, c))) return st;
    c->qkv_bias = fg_gguf_find_tensor(g, "blk.0.attn_q.bias") != NULL;
    c->o_bias = fg_gguf_find_tensor(g, "blk.0.attn_output.bias") != NULL;
    c->tied = fg_gguf_find_tensor(g, "output.weight") == NULL;
    const char *name = arch;
    if (fg_gguf_find_kv(g, "general.name") >= 0 && fg_gguf_get_string(g, "general.name", &name, NULL)) return FG_EINPUT;
    snprintf(c->name, sizeof c->name, "%s", name);
    if ((st = gg_rope_scaling(g, arch, c)) || (st = gg_tokens(g, c))) return st;
    return FG_OK;
}

/* llama.cpp permutes q and k rows (weights and biases) of architecture
 * llama for its interleaved rotary; qwen2 and qwen3 rotate NEOX-style,
 * unpermuted. */
static int llama_gguf_unpermute(const fg_model_config *c, const char *arch, int w) {
    return strcmp(arch, "llama") ? 0 : fg_family_llama_unpermute_interleaved(c, w);
}

int fg_family_llama_unpermute_interleaved(const fg_model_config *c, int w) {
    if (w == FG_LW_Q_W || w == FG_LW_Q_B) return c->n_heads;
    if (w == FG_LW_K_W || w == FG_LW_K_B) return c->n_kv_heads;
    return 0;
}

/* llama2.c's model.py and run.c: RMSNorm eps 1e-5, rotary theta 10000 over
 * the whole head, no biases. Its training data (TinyStories) separates
 * stories with BOS (1), and run.c ends a sequence when it samples BOS: that
 * is the EOS here. */
void fg_family_llama_llama2c(fg_model_config *c) {
    llama_common(c, "llama");
    c->norm_eps = 1e-5f;
    c->rope_theta = 10000;
    c->rope_scaling = FG_ROPE_NONE;
    c->bos_id = 1, c->pad_id = 0;
    c->n_eos = 1, c->eos_ids[0] = 1;
}

static const char *const llama_gguf_archs[] = {"llama", "qwen2", "qwen3", "qwen3moe", NULL};
static const char *const llama_gguf_ignored[] = {"rope_freqs.weight", NULL};
static const char *const llama_types[] = {"llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen3_moe", NULL};

/* A sparse layer's names in Hugging Face checkpoints, by the router's kind
 * (each kind is its model's so far): the router, then each expert's gate,
 * down and up matrices, %d its number. NULL: the dense name stands. */
static const char *llama_moe_suffix(const fg_model_config *c, int w) {
    static const char *const mixtral[] = {"block_sparse_moe.gate.weight", "block_sparse_moe.experts.%d.w1.weight",
                                          "block_sparse_moe.experts.%d.w2.weight",
                                          "block_sparse_moe.experts.%d.w3.weight"};
    static const char *const qwen[] = {"mlp.gate.weight", "mlp.experts.%d.gate_proj.weight",
                                       "mlp.experts.%d.down_proj.weight", "mlp.experts.%d.up_proj.weight"};
    const char *const *n = c->router == FG_ROUTER_MIXTRAL ? mixtral : c->router == FG_ROUTER_QWEN3_MOE ? qwen : NULL;
    if (!n) return NULL;
    switch (w) {
    case FG_LW_ROUTER_W: return n[0];
    case FG_LW_FC1_W: return n[1];
    case FG_LW_FC2_W: return n[2];
    case FG_LW_UP_W: return n[3];
    }
    return NULL;
}
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
        "post_attention_layernorm.bias", "mlp.up_proj.weight", "mlp.up_proj.bias", "self_attn.q_norm.weight",
        "self_attn.k_norm.weight", "mlp.gate.weight",
    },
    .moe_suffix = llama_moe_suffix,
    .global_name = {
        "embed_tokens.weight", "embed_positions.weight", "project_in.weight", "project_out.weight",
        "norm.weight", "norm.bias", "lm_head.weight",
    },
    .aliases = llama_aliases,
    .gguf_archs = llama_gguf_archs,
    .from_gguf = llama_from_gguf,
    .gguf_layer_suffix = {
        "attn_q.weight", "attn_q.bias", "attn_k.weight", "attn_k.bias", "attn_v.weight", "attn_v.bias",
        "attn_output.weight", "attn_output.bias", "attn_norm.weight", "", "ffn_gate.weight", "ffn_gate.bias",
        "ffn_down.weight", "ffn_down.bias", "ffn_norm.weight", "", "ffn_up.weight", "ffn_up.bias",
        "attn_q_norm.weight", "attn_k_norm.weight", "ffn_gate_inp.weight",
    },
    .gguf_moe_suffix = {[FG_LW_FC1_W] = "ffn_gate_exps.weight", [FG_LW_FC2_W] = "ffn_down_exps.weight",
                        [FG_LW_UP_W] = "ffn_up_exps.weight"},
    .gguf_expert_suffix = {[FG_LW_FC1_W] = "ffn_gate.%d.weight", [FG_LW_FC2_W] = "ffn_down.%d.weight",
                           [FG_LW_UP_W] = "ffn_up.%d.weight"},
    .gguf_global_name = {"token_embd.weight", "", "", "", "output_norm.weight", "", "output.weight"},
    .gguf_ignored = llama_gguf_ignored,
    .gguf_unpermute = llama_gguf_unpermute,
};

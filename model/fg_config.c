/* fg_config.c - OPT configurations by name and from config.json, and the
 * canonical tensor list every loader validates a checkpoint against. */
#include "fg_config.h"

#include "fg_q4.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    int hidden, heads, layers, ffn;
} opt_size;

/* The OPT family as published (and as FlexGen's opt_config.py lists it). */
static const opt_size opt_sizes[] = {
    {"opt-125m", 768, 12, 12, 3072},     {"opt-350m", 1024, 16, 24, 4096},
    {"opt-1.3b", 2048, 32, 24, 8192},    {"opt-2.7b", 2560, 32, 32, 10240},
    {"opt-6.7b", 4096, 32, 32, 16384},   {"opt-13b", 5120, 40, 40, 20480},
    {"opt-30b", 7168, 56, 48, 28672},    {"opt-66b", 9216, 72, 64, 36864},
    {"opt-175b", 12288, 96, 96, 49152},
};

fg_status fg_config_by_name(const char *name, fg_opt_config *cfg) {
    const char *n = name;
    if (!strncmp(n, "facebook/", 9)) n += 9;
    for (size_t i = 0; i < sizeof opt_sizes / sizeof opt_sizes[0]; i++) {
        const opt_size *s = &opt_sizes[i];
        if (strcmp(n, s->name)) continue;
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
        cfg->eos_id = 2;
        return fg_config_validate(cfg, name);
    }
    char known[512] = "";
    for (size_t i = 0; i < sizeof opt_sizes / sizeof opt_sizes[0]; i++) {
        size_t l = strlen(known);
        snprintf(known + l, sizeof known - l, " %s", opt_sizes[i].name);
    }
    return fg_err_set(FG_EINPUT, "unknown model name '%s'; known:%s", name, known);
}

const char *fg_config_nearest_size(const fg_opt_config *c) {
    const char *n = !strncmp(c->name, "facebook/", 9) ? c->name + 9 : c->name;
    size_t best = 0;
    for (size_t i = 0; i < sizeof opt_sizes / sizeof opt_sizes[0]; i++) {
        if (!strcmp(n, opt_sizes[i].name)) return opt_sizes[i].name;
        if (abs(opt_sizes[i].hidden - c->hidden) < abs(opt_sizes[best].hidden - c->hidden)) best = i;
    }
    return opt_sizes[best].name;
}

fg_status fg_config_validate(const fg_opt_config *c, const char *origin) {
#define NEED(cond, ...) do { if (!(cond)) return fg_err_set(FG_EINPUT, __VA_ARGS__); } while (0)
    NEED(c->vocab_size > 0, "%s: vocab_size must be > 0", origin);
    NEED(c->hidden > 0, "%s: hidden_size must be > 0", origin);
    NEED(c->n_heads > 0, "%s: num_attention_heads must be > 0", origin);
    NEED(c->hidden % c->n_heads == 0,
         "%s: hidden_size %d is not a multiple of num_attention_heads %d", origin, c->hidden, c->n_heads);
    NEED(c->n_layers > 0, "%s: num_hidden_layers must be > 0", origin);
    NEED(c->ffn_dim > 0, "%s: ffn_dim must be > 0", origin);
    NEED(c->max_pos > 0, "%s: max_position_embeddings must be > 0", origin);
    NEED(c->word_embed_proj_dim > 0, "%s: word_embed_proj_dim must be > 0", origin);
    /* Bounded here, not only where the workers read a description, so an
     * absurd config.json is refused naming its field before anything runs. */
    const struct { const char *key; int v; } dim[] = {
        {"vocab_size", c->vocab_size}, {"hidden_size", c->hidden}, {"num_attention_heads", c->n_heads},
        {"ffn_dim", c->ffn_dim}, {"max_position_embeddings", c->max_pos},
        {"word_embed_proj_dim", c->word_embed_proj_dim}};
    for (size_t i = 0; i < sizeof dim / sizeof dim[0]; i++)
        NEED(dim[i].v <= FG_CONFIG_DIM_MAX, "%s: %s %d exceeds %d", origin, dim[i].key, dim[i].v, FG_CONFIG_DIM_MAX);
    NEED(c->n_layers <= FG_CONFIG_MAX_LAYERS, "%s: num_hidden_layers %d exceeds %d", origin, c->n_layers,
         FG_CONFIG_MAX_LAYERS);
    NEED(c->pad_id >= 0 && c->pad_id < c->vocab_size, "%s: pad_token_id %d out of range", origin, c->pad_id);
    NEED(c->bos_id >= 0 && c->bos_id < c->vocab_size, "%s: bos_token_id %d out of range", origin, c->bos_id);
    NEED(c->eos_id >= 0 && c->eos_id < c->vocab_size, "%s: eos_token_id %d out of range", origin, c->eos_id);
#undef NEED
    return FG_OK;
}

/* Read an integer field; required unless def_val is given (has_def). */
static fg_status json_int(json_t *root, const char *path, const char *key, int has_def, int def_val, int *out) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        if (has_def) { *out = def_val; return FG_OK; }
        return fg_err_set(FG_EINPUT, "%s: missing field '%s'", path, key);
    }
    if (!json_is_integer(v))
        return fg_err_set(FG_EINPUT, "%s: field '%s' must be an integer", path, key);
    json_int_t x = json_integer_value(v);
    if (x < 0 || x > (1 << 30))
        return fg_err_set(FG_EINPUT, "%s: field '%s' = %lld is out of range", path, key, (long long)x);
    *out = (int)x;
    return FG_OK;
}

static fg_status json_bool(json_t *root, const char *path, const char *key, int def_val, int *out) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) { *out = def_val; return FG_OK; }
    if (!json_is_boolean(v)) return fg_err_set(FG_EINPUT, "%s: field '%s' must be true or false", path, key);
    *out = json_is_true(v);
    return FG_OK;
}

fg_status fg_json_load_file(const char *path, json_t **root) {
    json_error_t jerr;
    *root = json_load_file(path, 0, &jerr);
    if (*root) return FG_OK;
    if (jerr.line < 0) return fg_err_set(FG_EINPUT, "%s: cannot read: %s", path, jerr.text);
    return fg_err_set(FG_EINPUT, "%s: line %d: not valid JSON: %s", path, jerr.line, jerr.text);
}

fg_status fg_config_load_json(const char *path, fg_opt_config *cfg) {
    json_t *root;
    fg_status st = fg_json_load_file(path, &root);
    if (st) return st;
    memset(cfg, 0, sizeof *cfg);
    if (!json_is_object(root)) { st = fg_err_set(FG_EINPUT, "%s: expected a JSON object", path); goto out; }
    json_t *mt = json_object_get(root, "model_type");
    if (mt && (!json_is_string(mt) || strcmp(json_string_value(mt), "opt"))) {
        st = fg_err_set(FG_EINPUT, "%s: field 'model_type' is %s, expected \"opt\"", path,
                        json_is_string(mt) ? json_string_value(mt) : "not a string");
        goto out;
    }
    json_t *act = json_object_get(root, "activation_function");
    if (act && (!json_is_string(act) || strcmp(json_string_value(act), "relu"))) {
        st = fg_err_set(FG_EINPUT, "%s: field 'activation_function' must be \"relu\" (OPT)", path);
        goto out;
    }
    int bias = 1, affine = 1;
    if ((st = json_int(root, path, "vocab_size", 0, 0, &cfg->vocab_size)) ||
        (st = json_int(root, path, "hidden_size", 0, 0, &cfg->hidden)) ||
        (st = json_int(root, path, "num_attention_heads", 0, 0, &cfg->n_heads)) ||
        (st = json_int(root, path, "num_hidden_layers", 0, 0, &cfg->n_layers)) ||
        (st = json_int(root, path, "ffn_dim", 0, 0, &cfg->ffn_dim)) ||
        (st = json_int(root, path, "max_position_embeddings", 0, 0, &cfg->max_pos)) ||
        (st = json_int(root, path, "word_embed_proj_dim", 1, cfg->hidden, &cfg->word_embed_proj_dim)) ||
        (st = json_int(root, path, "pad_token_id", 1, 1, &cfg->pad_id)) ||
        (st = json_int(root, path, "bos_token_id", 1, 2, &cfg->bos_id)) ||
        (st = json_int(root, path, "eos_token_id", 1, 2, &cfg->eos_id)) ||
        (st = json_bool(root, path, "do_layer_norm_before", 1, &cfg->pre_ln)) ||
        (st = json_bool(root, path, "enable_bias", 1, &bias)) ||
        (st = json_bool(root, path, "layer_norm_elementwise_affine", 1, &affine)))
        goto out;
    if (!bias || !affine) {
        st = fg_err_set(FG_EINPUT, "%s: enable_bias=false or layer_norm_elementwise_affine=false "
                                   "is not an OPT checkpoint this engine supports", path);
        goto out;
    }
    json_t *rm = json_object_get(root, "_remove_final_layer_norm");
    if (rm && json_is_true(rm)) {
        st = fg_err_set(FG_EINPUT, "%s: _remove_final_layer_norm=true is not supported", path);
        goto out;
    }
    json_t *nm = json_object_get(root, "_name_or_path");
    snprintf(cfg->name, sizeof cfg->name, "%s", nm && json_is_string(nm) ? json_string_value(nm) : "opt");
    st = fg_config_validate(cfg, path);
out:
    json_decref(root);
    return st;
}

/* ---- tensor specs ---- */

static const char *layer_suffix[FG_LW_COUNT] = {
    "self_attn.q_proj.weight", "self_attn.q_proj.bias", "self_attn.k_proj.weight", "self_attn.k_proj.bias",
    "self_attn.v_proj.weight", "self_attn.v_proj.bias", "self_attn.out_proj.weight", "self_attn.out_proj.bias",
    "self_attn_layer_norm.weight", "self_attn_layer_norm.bias", "fc1.weight", "fc1.bias",
    "fc2.weight", "fc2.bias", "final_layer_norm.weight", "final_layer_norm.bias",
};

static const char *global_name[FG_GW_COUNT] = {
    "decoder.embed_tokens.weight", "decoder.embed_positions.weight", "decoder.project_in.weight",
    "decoder.project_out.weight", "decoder.final_layer_norm.weight", "decoder.final_layer_norm.bias",
};

static void set_spec(fg_spec *s, const char *name, int present, int64_t d0, int64_t d1) {
    snprintf(s->name, sizeof s->name, "%s", name);
    s->present = present;
    s->ndim = d1 ? 2 : 1;
    s->dims[0] = d0;
    s->dims[1] = d1;
}

fg_spec *fg_specs_new(const fg_opt_config *c) {
    fg_spec *sp = fg_xcalloc((size_t)fg_spec_count(c), sizeof *sp);
    int64_t V = c->vocab_size, H = c->hidden, F = c->ffn_dim, D = c->word_embed_proj_dim;
    int proj = fg_config_has_proj(c);
    set_spec(&sp[FG_GW_EMBED_TOKENS], global_name[FG_GW_EMBED_TOKENS], 1, V, D);
    set_spec(&sp[FG_GW_EMBED_POS], global_name[FG_GW_EMBED_POS], 1, c->max_pos + 2, H);
    set_spec(&sp[FG_GW_PROJ_IN], global_name[FG_GW_PROJ_IN], proj, H, D);
    set_spec(&sp[FG_GW_PROJ_OUT], global_name[FG_GW_PROJ_OUT], proj, D, H);
    set_spec(&sp[FG_GW_FINAL_LN_W], global_name[FG_GW_FINAL_LN_W], c->pre_ln, H, 0);
    set_spec(&sp[FG_GW_FINAL_LN_B], global_name[FG_GW_FINAL_LN_B], c->pre_ln, H, 0);
    for (int l = 0; l < c->n_layers; l++) {
        for (int w = 0; w < FG_LW_COUNT; w++) {
            char name[96];
            snprintf(name, sizeof name, "decoder.layers.%d.%s", l, layer_suffix[w]);
            int64_t d0 = H, d1 = 0;
            switch (w) {
            case FG_LW_Q_W: case FG_LW_K_W: case FG_LW_V_W: case FG_LW_O_W: d1 = H; break;
            case FG_LW_FC1_W: d0 = F; d1 = H; break;
            case FG_LW_FC1_B: d0 = F; break;
            case FG_LW_FC2_W: d0 = H; d1 = F; break;
            default: break;
            }
            set_spec(&sp[fg_spec_layer(l, w)], name, 1, d0, d1);
        }
    }
    return sp;
}

int fg_spec_lookup(const fg_opt_config *c, const fg_spec *specs, const char *name) {
    if (!strncmp(name, "model.", 6)) name += 6;
    if (!strcmp(name, "lm_head.weight")) return -2;
    if (!strcmp(name, "decoder.layer_norm.weight")) name = global_name[FG_GW_FINAL_LN_W];
    if (!strcmp(name, "decoder.layer_norm.bias")) name = global_name[FG_GW_FINAL_LN_B];
    for (int g = 0; g < FG_GW_COUNT; g++)
        if (specs[g].present && !strcmp(name, specs[g].name)) return g;
    static const char pre[] = "decoder.layers.";
    if (strncmp(name, pre, sizeof pre - 1)) return -1;
    const char *p = name + sizeof pre - 1;
    char *end;
    long l = strtol(p, &end, 10);
    if (end == p || *end != '.' || l < 0 || l >= c->n_layers) return -1;
    for (int w = 0; w < FG_LW_COUNT; w++)
        if (!strcmp(end + 1, layer_suffix[w])) return fg_spec_layer((int)l, w);
    return -1;
}

/* ---- bytes as the tiers hold them ---- */

int fg_spec_is_q4(const fg_opt_config *c, int idx) {
    if (!c->compress_weight || idx < FG_GW_COUNT) return 0;
    int w = (idx - FG_GW_COUNT) % FG_LW_COUNT;
    return w == FG_LW_Q_W || w == FG_LW_K_W || w == FG_LW_V_W || w == FG_LW_O_W || w == FG_LW_FC1_W ||
           w == FG_LW_FC2_W;
}

uint64_t fg_spec_stored_bytes(const fg_opt_config *c, const fg_spec *sp, int idx) {
    const fg_spec *t = &sp[idx];
    if (!t->present) return 0;
    if (fg_spec_is_q4(c, idx)) return fg_q4_slice_bytes((uint64_t)t->dims[0], (uint64_t)t->dims[1]);
    return 2 * (uint64_t)fg_spec_numel(t);
}

uint64_t fg_cache_row_bytes(const fg_opt_config *c) {
    if (!c->compress_cache) return 2 * (uint64_t)c->hidden;
    return (uint64_t)c->n_heads * fg_q4_slice_bytes((uint64_t)fg_config_head_dim(c), 1);
}

/* ---- the description the workers get ---- */


fg_model_desc fg_config_desc(const fg_opt_config *c) {
    fg_model_desc d = {.family = FG_FAMILY_OPT, .n = 9};
    const int v[9] = {c->vocab_size, c->hidden, c->n_heads, c->ffn_dim, c->max_pos, c->word_embed_proj_dim, c->pre_ln,
                      c->compress_weight, c->compress_cache};
    for (int i = 0; i < 9; i++) d.v[i] = (uint32_t)v[i];
    return d;
}

fg_status fg_config_from_desc(const fg_model_desc *d, const char *who, fg_opt_config *c) {
    if (d->family != FG_FAMILY_OPT)
        return fg_err_set(FG_EINPUT, "%s: model family %u is not one this worker runs (OPT is %d)", who,
                          (unsigned)d->family, FG_FAMILY_OPT);
    if (d->n != 9) return fg_err_set(FG_EINPUT, "%s: an OPT description has 9 numbers, got %u", who, (unsigned)d->n);
    for (int i = 0; i < 6; i++)
        if (d->v[i] > FG_CONFIG_DIM_MAX)
            return fg_err_set(FG_EINPUT, "%s: model dimension %u exceeds %d", who, (unsigned)d->v[i], FG_CONFIG_DIM_MAX);
    for (int i = 6; i < 9; i++)
        if (d->v[i] > 1)
            return fg_err_set(FG_EINPUT, "%s: model %s must be 0 or 1, got %u", who,
                              i == 6 ? "pre_ln" : i == 7 ? "compress_weight" : "compress_cache", (unsigned)d->v[i]);
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "op");
    c->vocab_size = (int)d->v[0];
    c->hidden = (int)d->v[1];
    c->n_heads = (int)d->v[2];
    c->n_layers = 1;
    c->ffn_dim = (int)d->v[3];
    c->max_pos = (int)d->v[4];
    c->word_embed_proj_dim = (int)d->v[5];
    c->pre_ln = (int)d->v[6];
    c->compress_weight = (int)d->v[7];
    c->compress_cache = (int)d->v[8];
    char origin[64];
    snprintf(origin, sizeof origin, "%s: model", who);
    return fg_config_validate(c, origin);
}

/* fg_config.c - configurations of every family by name and from
 * config.json, the description the workers get, and the canonical tensor
 * list every loader validates a checkpoint against. Family-specific facts
 * (sizes, config.json fields, tensor names) come from the families'
 * descriptions (fg_family.h); shapes are derived here from the fields. */
#include "fg_config.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fg_family.h"
#include "fg_fmt.h"
#include "fg_q4.h"

static const fg_family *const families[] = {&fg_family_opt, &fg_family_llama};
#define N_FAMILIES (sizeof families / sizeof families[0])

const fg_family *fg_family_get(int id) {
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (families[i]->id == id) return families[i];
    return NULL;
}

const fg_family *fg_family_of_gguf_arch(const char *arch) {
    for (size_t i = 0; i < N_FAMILIES; i++)
        for (const char *const *a = families[i]->gguf_archs; a && *a; a++)
            if (!strcmp(*a, arch)) return families[i];
    return NULL;
}

const char *fg_config_family_name(const fg_model_config *c) {
    const fg_family *f = fg_family_get(c->family);
    return f ? f->name : "?";
}

fg_status fg_config_by_name(const char *name, fg_model_config *cfg) {
    const char *n = name, *slash = strchr(name, '/');
    if (slash) n = slash + 1;   /* "facebook/opt-1.3b", "meta-llama/..." */
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (families[i]->by_name(n, cfg)) return fg_config_validate(cfg, name);
    char known[1024] = "";
    for (size_t i = 0; i < N_FAMILIES; i++) families[i]->list_names(known, sizeof known);
    return fg_err_set(FG_EINPUT, "unknown model name '%s'; known:%s", name, known);
}

int fg_config_is_eos(const fg_model_config *c, int tok) {
    for (int i = 0; i < c->n_eos; i++)
        if (c->eos_ids[i] == tok) return 1;
    return 0;
}

/* A stack of experts' rows (E * Fe, E * H) stays far inside int64 and the
 * tensor readers' bounds. */
#define EXPERT_ROWS_MAX (1LL << 26)

/* The mixture's numbers: all zero for a dense model; else the router
 * kinds kernels/fg_moe.c runs, k of E experts, and what is not done yet
 * (shared experts, expert biases) refused rather than ignored. */
static fg_status validate_experts(const fg_model_config *c, const char *origin) {
#define NEED(cond, ...) do { if (!(cond)) return fg_err_set(FG_EINPUT, __VA_ARGS__); } while (0)
    uint64_t sparse = 0;   /* any layer marked sparse */
    for (int i = 0; i < FG_CONFIG_MAX_LAYERS / 64; i++) sparse |= c->moe_layers[i];
    if (c->n_experts == 0) {
        NEED(!sparse && !c->experts_per_token && !c->moe_ffn_dim && c->router == FG_ROUTER_NONE && !c->n_shared_experts,
             "%s: experts_per_token, moe_intermediate_size, a router or shared experts without experts", origin);
        return FG_OK;
    }
    NEED(c->n_experts > 0 && c->n_experts <= FG_CONFIG_MAX_EXPERTS, "%s: %d experts (1 to %d)", origin,
         c->n_experts, FG_CONFIG_MAX_EXPERTS);
    NEED(c->experts_per_token >= 1 && c->experts_per_token <= c->n_experts,
         "%s: num_experts_per_tok %d must be in [1, %d experts]", origin, c->experts_per_token, c->n_experts);
    NEED(c->moe_ffn_dim > 0 && c->moe_ffn_dim <= FG_CONFIG_DIM_MAX, "%s: the experts' intermediate size %d must be in "
         "[1, %d]", origin, c->moe_ffn_dim, FG_CONFIG_DIM_MAX);
    NEED((int64_t)c->n_experts * (c->moe_ffn_dim > c->hidden ? c->moe_ffn_dim : c->hidden) <= EXPERT_ROWS_MAX,
         "%s: %d experts of %d x %d exceed %lld stacked rows", origin, c->n_experts, c->moe_ffn_dim, c->hidden,
         EXPERT_ROWS_MAX);
    NEED(c->router == FG_ROUTER_MIXTRAL || c->router == FG_ROUTER_QWEN3_MOE, "%s: unknown router kind %d", origin,
         c->router);
    NEED(c->n_shared_experts == 0, "%s: %d shared experts: not supported yet", origin, c->n_shared_experts);
    NEED(!c->mlp_bias, "%s: biases in a model with experts: not supported yet", origin);
#undef NEED
    return FG_OK;
}

fg_status fg_config_validate(const fg_model_config *c, const char *origin) {
#define NEED(cond, ...) do { if (!(cond)) return fg_err_set(FG_EINPUT, __VA_ARGS__); } while (0)
    const fg_family *fam = fg_family_get(c->family);
    NEED(fam, "%s: unknown model family %d", origin, c->family);
    NEED(c->n_heads > 0, "%s: num_attention_heads must be > 0", origin);
    NEED(c->n_kv_heads > 0, "%s: num_key_value_heads must be > 0", origin);
    fg_status st = fam->validate(c, origin);   /* first: its shape rules explain a wrong head_dim best */
    if (st) return st;
    const struct { const char *key; int v; } dim[] = {
        {"vocab_size", c->vocab_size}, {"hidden_size", c->hidden}, {"num_attention_heads", c->n_heads},
        {"num_key_value_heads", c->n_kv_heads}, {"head_dim", c->head_dim}, {"ffn_dim", c->ffn_dim},
        {"max_position_embeddings", c->max_pos}, {"word_embed_proj_dim", c->word_embed_proj_dim},
        {"num_hidden_layers", c->n_layers}};
    /* Bounded here, not only where the workers read a description, so an
     * absurd config.json is refused naming its field before anything runs. */
    for (size_t i = 0; i < sizeof dim / sizeof dim[0]; i++) {
        NEED(dim[i].v > 0, "%s: %s must be > 0", origin, dim[i].key);
        NEED(dim[i].v <= FG_CONFIG_DIM_MAX, "%s: %s %d exceeds %d", origin, dim[i].key, dim[i].v, FG_CONFIG_DIM_MAX);
    }
    NEED(c->n_layers <= FG_CONFIG_MAX_LAYERS, "%s: num_hidden_layers %d exceeds %d", origin, c->n_layers,
         FG_CONFIG_MAX_LAYERS);
    NEED(c->n_heads % c->n_kv_heads == 0, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d",
         origin, c->n_heads, c->n_kv_heads);
    NEED((int64_t)c->n_heads * c->head_dim <= FG_CONFIG_DIM_MAX, "%s: num_attention_heads x head_dim exceeds %d",
         origin, FG_CONFIG_DIM_MAX);
    NEED(c->pad_id >= 0 && c->pad_id < c->vocab_size, "%s: pad_token_id %d out of range", origin, c->pad_id);
    NEED(c->bos_id >= 0 && c->bos_id < c->vocab_size, "%s: bos_token_id %d out of range", origin, c->bos_id);
    NEED(c->n_eos >= 1 && c->n_eos <= FG_MAX_EOS, "%s: %d eos_token_id values (1 to %d)", origin, c->n_eos,
         FG_MAX_EOS);
    for (int i = 0; i < c->n_eos; i++)
        NEED(c->eos_ids[i] >= 0 && c->eos_ids[i] < c->vocab_size, "%s: eos_token_id %d out of range", origin,
             c->eos_ids[i]);
#undef NEED
    return validate_experts(c, origin);
}

/* ---- config.json ---- */

fg_status fg_json_int(json_t *root, const char *path, const char *key, int has_def, int def_val, int *out) {
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

fg_status fg_json_bool(json_t *root, const char *path, const char *key, int def_val, int *out) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) { *out = def_val; return FG_OK; }
    if (!json_is_boolean(v)) return fg_err_set(FG_EINPUT, "%s: field '%s' must be true or false", path, key);
    *out = json_is_true(v);
    return FG_OK;
}

fg_status fg_json_float(json_t *root, const char *path, const char *key, int has_def, double def_val, float *out) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        if (has_def) { *out = (float)def_val; return FG_OK; }
        return fg_err_set(FG_EINPUT, "%s: missing field '%s'", path, key);
    }
    if (!json_is_number(v)) return fg_err_set(FG_EINPUT, "%s: field '%s' must be a number", path, key);
    double x = json_number_value(v);
    if (!isfinite(x) || fabs(x) > 1e30)
        return fg_err_set(FG_EINPUT, "%s: field '%s' = %g is out of range", path, key, x);
    *out = (float)x;
    return FG_OK;
}

fg_status fg_json_id_list(json_t *v, const char *path, const char *key, int *ids, int *n) {
    size_t count = json_is_array(v) ? json_array_size(v) : 1;
    if (!json_is_array(v) && !json_is_integer(v))
        return fg_err_set(FG_EINPUT, "%s: field '%s' must be an integer or a list of integers", path, key);
    if (count < 1 || count > FG_MAX_EOS)
        return fg_err_set(FG_EINPUT, "%s: field '%s' has %zu ids (1 to %d)", path, key, count, FG_MAX_EOS);
    for (size_t i = 0; i < count; i++) {
        json_t *x = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > (1 << 30))
            return fg_err_set(FG_EINPUT, "%s: field '%s' must hold token ids (integers >= 0)", path, key);
        ids[i] = (int)json_integer_value(x);
    }
    *n = (int)count;
    return FG_OK;
}

fg_status fg_json_load_file(const char *path, json_t **root) { return fg_json_load_file_ex(path, 0, root); }

const char *fg_json_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

fg_status fg_json_load_file_ex(const char *path, size_t flags, json_t **root) {
    json_error_t jerr;
    *root = json_load_file(path, flags, &jerr);
    if (*root) return FG_OK;
    if (jerr.line < 0) return fg_err_set(FG_EINPUT, "%s: cannot read: %s", path, jerr.text);
    return fg_err_set(FG_EINPUT, "%s: line %d: not valid JSON: %s", path, jerr.line, jerr.text);
}

/* The family whose model_types hold mt (an absent model_type: OPT, as the
 * first checkpoints this engine read had none). */
static const fg_family *family_of_type(const char *mt) {
    if (!mt) return &fg_family_opt;
    for (size_t i = 0; i < N_FAMILIES; i++)
        for (const char *const *t = families[i]->model_types; *t; t++)
            if (!strcmp(*t, mt)) return families[i];
    return NULL;
}

fg_status fg_config_load_json(const char *path, fg_model_config *cfg) {
    json_t *root;
    fg_status st = fg_json_load_file(path, &root);
    if (st) return st;
    memset(cfg, 0, sizeof *cfg);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    json_t *mt = json_object_get(root, "model_type");
    const fg_family *fam = NULL;
    if (!json_is_object(root)) st = fg_err_set(FG_EINPUT, "%s: expected a JSON object", path);
    else if (mt && !json_is_string(mt)) st = fg_err_set(FG_EINPUT, "%s: field 'model_type' is not a string", path);
    else if (!(fam = family_of_type(mt ? json_string_value(mt) : NULL)))
        st = fg_err_set(FG_EINPUT, "%s: field 'model_type' is \"%s\", which this engine does not run (opt, llama, "
                                   "mistral, qwen2, qwen3, mixtral, qwen3_moe)", path, json_string_value(mt));
    if (!st) st = fam->from_json(root, path, dir, cfg);
    if (!st) st = fg_config_validate(cfg, path);
    json_decref(root);
    return st;
}

/* ---- tensor specs ---- */

static void set_spec(fg_spec *s, const char *name, int present, int64_t d0, int64_t d1) {
    snprintf(s->name, sizeof s->name, "%s", name);
    s->present = present;
    s->ndim = d1 ? 2 : 1;
    s->dims[0] = d0;
    s->dims[1] = d1;
}

/* Layer l's tensor w: its shape (d1 = 0: a vector) and presence, from the
 * fields. A sparse layer's FC1, UP and FC2 stack its experts' matrices
 * (fg_config.h), and it has a router. */
static int layer_shape(const fg_model_config *c, int l, int w, int64_t *d0, int64_t *d1) {
    int64_t H = c->hidden, F = c->ffn_dim, Q = fg_config_q_dim(c), KV = fg_config_kv_dim(c);
    int ln_b = c->norm_kind == FG_NORM_LAYER, gated = c->ffn_kind == FG_FFN_SWIGLU;
    int64_t E = 1;   /* matrices stacked in the MLP's roles */
    if (fg_config_layer_sparse(c, l)) E = c->n_experts, F = c->moe_ffn_dim;
    *d1 = 0;
    switch (w) {
    case FG_LW_Q_W: *d0 = Q, *d1 = H; return 1;
    case FG_LW_Q_B: *d0 = Q; return c->qkv_bias;
    case FG_LW_K_W: case FG_LW_V_W: *d0 = KV, *d1 = H; return 1;
    case FG_LW_K_B: case FG_LW_V_B: *d0 = KV; return c->qkv_bias;
    case FG_LW_O_W: *d0 = H, *d1 = Q; return 1;
    case FG_LW_O_B: *d0 = H; return c->o_bias;
    case FG_LW_LN1_W: case FG_LW_LN2_W: *d0 = H; return 1;
    case FG_LW_LN1_B: case FG_LW_LN2_B: *d0 = H; return ln_b;
    case FG_LW_FC1_W: *d0 = E * F, *d1 = H; return 1;
    case FG_LW_FC1_B: *d0 = E * F; return c->mlp_bias;
    case FG_LW_FC2_W: *d0 = E * H, *d1 = F; return 1;
    case FG_LW_FC2_B: *d0 = E * H; return c->mlp_bias;
    case FG_LW_UP_W: *d0 = E * F, *d1 = H; return gated;
    case FG_LW_UP_B: *d0 = E * F; return gated && c->mlp_bias;
    case FG_LW_QN_W: case FG_LW_KN_W: *d0 = c->head_dim; return c->qk_norm;
    case FG_LW_ROUTER_W: *d0 = c->n_experts, *d1 = H; return E > 1;
    }
    return 0;
}

int fg_spec_is_experts(const fg_model_config *c, int idx) {
    if (idx < FG_GW_COUNT) return 0;
    int l = (idx - FG_GW_COUNT) / FG_LW_COUNT, w = (idx - FG_GW_COUNT) % FG_LW_COUNT;
    return fg_config_layer_sparse(c, l) && w >= FG_LW_FC1_W && w <= FG_LW_UP_B && w != FG_LW_LN2_W &&
           w != FG_LW_LN2_B;
}

/* A sparse layer's name for role w: the family's pattern with the expert's
 * number as "*" (a name no checkpoint holds: the stack of all of them), or
 * NULL where the dense name stands. */
static int moe_name(const fg_family *fam, const fg_model_config *c, int l, int w, char *out, size_t cap) {
    const char *pat = fg_config_layer_sparse(c, l) && fam->moe_suffix ? fam->moe_suffix(c, w) : NULL;
    if (!pat) return 0;
    const char *at = strstr(pat, "%d");
    if (at) snprintf(out, cap, "%s%d.%.*s*%s", fam->layer_prefix, l, (int)(at - pat), pat, at + 2);
    else snprintf(out, cap, "%s%d.%s", fam->layer_prefix, l, pat);
    return 1;
}

fg_spec *fg_specs_new(const fg_model_config *c) {
    const fg_family *fam = fg_family_get(c->family);
    FG_ASSERT(fam);
    fg_spec *sp = fg_xcalloc((size_t)fg_spec_count(c), sizeof *sp);
    int64_t V = c->vocab_size, H = c->hidden, D = c->word_embed_proj_dim;
    int proj = fg_config_has_proj(c), learned = c->pos_kind == FG_POS_LEARNED, ln_b = c->norm_kind == FG_NORM_LAYER;
    const char *const *g = fam->global_name;
    set_spec(&sp[FG_GW_EMBED_TOKENS], g[FG_GW_EMBED_TOKENS], 1, V, D);
    set_spec(&sp[FG_GW_EMBED_POS], g[FG_GW_EMBED_POS], learned, c->max_pos + 2, H);   /* OPT's offset 2 */
    set_spec(&sp[FG_GW_PROJ_IN], g[FG_GW_PROJ_IN], proj, H, D);
    set_spec(&sp[FG_GW_PROJ_OUT], g[FG_GW_PROJ_OUT], proj, D, H);
    set_spec(&sp[FG_GW_FINAL_LN_W], g[FG_GW_FINAL_LN_W], c->pre_ln, H, 0);
    set_spec(&sp[FG_GW_FINAL_LN_B], g[FG_GW_FINAL_LN_B], c->pre_ln && ln_b, H, 0);
    set_spec(&sp[FG_GW_LM_HEAD], g[FG_GW_LM_HEAD], !c->tied, V, D);
    for (int l = 0; l < c->n_layers; l++)
        for (int w = 0; w < FG_LW_COUNT; w++) {
            char name[96];
            if (!moe_name(fam, c, l, w, name, sizeof name))
                snprintf(name, sizeof name, "%s%d.%s", fam->layer_prefix, l, fam->layer_suffix[w]);
            int64_t d0, d1;
            int present = layer_shape(c, l, w, &d0, &d1);
            set_spec(&sp[fg_spec_layer(l, w)], name, present, d0, d1);
            if (present && fg_spec_is_experts(c, fg_spec_layer(l, w))) sp[fg_spec_layer(l, w)].experts = c->n_experts;
        }
    for (int i = 0; i < fg_spec_count(c); i++) {   /* the description's formats, compression not applied */
        fg_model_config plain = *c;
        plain.compress_weight = 0;
        sp[i].fmt = fg_config_fmt(&plain, i);
    }
    return sp;
}

/* The layer a name after the family's prefix names ("3." of "layers.3...."),
 * and where its suffix starts; -1 if none. */
static int name_layer(const fg_family *fam, const fg_model_config *c, const char *name, const char **suffix) {
    size_t pl = strlen(fam->layer_prefix);
    if (strncmp(name, fam->layer_prefix, pl)) return -1;
    const char *p = name + pl;
    char *end;
    long l = strtol(p, &end, 10);
    if (end == p || *end != '.' || l < 0 || l >= c->n_layers) return -1;
    *suffix = end + 1;
    return (int)l;
}

int fg_spec_lookup(const fg_model_config *c, const fg_spec *specs, const char *name) {
    const fg_family *fam = fg_family_get(c->family);
    if (!strncmp(name, "model.", 6)) name += 6;
    for (const char *const *a = fam->aliases; *a; a += 2)
        if (!strcmp(name, a[0])) name = a[1];
    if (c->tied && !strcmp(name, fam->global_name[FG_GW_LM_HEAD])) return -2;   /* the embedding is the head */
    for (int g = 0; g < FG_GW_COUNT; g++)
        if (specs[g].present && !strcmp(name, specs[g].name)) return g;
    const char *suffix;
    int l = name_layer(fam, c, name, &suffix);
    for (int w = 0; l >= 0 && w < FG_LW_COUNT; w++) {
        const fg_spec *s = &specs[fg_spec_layer(l, w)];
        if (s->present && !strcmp(name, s->name)) return fg_spec_layer(l, w);
    }
    return -1;
}

int fg_spec_lookup_part(const fg_model_config *c, const fg_spec *specs, const char *name, int *expert) {
    *expert = -1;
    int idx = fg_spec_lookup(c, specs, name);
    const fg_family *fam = fg_family_get(c->family);
    if (idx != -1 || !c->n_experts || !fam->moe_suffix) return idx;
    if (!strncmp(name, "model.", 6)) name += 6;
    const char *suffix;
    int l = name_layer(fam, c, name, &suffix);
    if (l < 0 || !fg_config_layer_sparse(c, l)) return -1;
    static const int roles[] = {FG_LW_FC1_W, FG_LW_FC2_W, FG_LW_UP_W};
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++) {
        const char *pat = fam->moe_suffix(c, roles[i]), *at = pat ? strstr(pat, "%d") : NULL;
        if (!at || strncmp(suffix, pat, (size_t)(at - pat))) continue;
        const char *p = suffix + (at - pat);
        char *end;
        long e = strtol(p, &end, 10);
        if (end == p || *p == '-' || *p == '+' || (*p == '0' && end - p > 1) || strcmp(end, at + 2)) continue;
        if (e < 0 || e >= c->n_experts) return -1;
        *expert = (int)e;
        return fg_spec_layer(l, roles[i]);
    }
    return -1;
}

/* ---- bytes as the tiers hold them ---- */

/* Nibble positions: layer matrices 0-6, model-level 0-3. */
static const int8_t layer_slot[FG_LW_COUNT] = {
    [FG_LW_Q_W] = 0, [FG_LW_K_W] = 1, [FG_LW_V_W] = 2, [FG_LW_O_W] = 3, [FG_LW_FC1_W] = 4, [FG_LW_FC2_W] = 5,
    [FG_LW_UP_W] = 6, [FG_LW_Q_B] = -1, [FG_LW_K_B] = -1, [FG_LW_V_B] = -1, [FG_LW_O_B] = -1, [FG_LW_LN1_W] = -1,
    [FG_LW_LN1_B] = -1, [FG_LW_FC1_B] = -1, [FG_LW_FC2_B] = -1, [FG_LW_LN2_W] = -1, [FG_LW_LN2_B] = -1,
    [FG_LW_UP_B] = -1, [FG_LW_QN_W] = -1, [FG_LW_KN_W] = -1, [FG_LW_ROUTER_W] = -1};
static const int8_t global_slot[FG_GW_COUNT] = {
    [FG_GW_EMBED_TOKENS] = 0, [FG_GW_PROJ_IN] = 1, [FG_GW_PROJ_OUT] = 2, [FG_GW_LM_HEAD] = 3,
    [FG_GW_EMBED_POS] = -1, [FG_GW_FINAL_LN_W] = -1, [FG_GW_FINAL_LN_B] = -1};

int fg_config_fmt_slot(int idx) {
    if (idx < 0) return -1;
    return idx < FG_GW_COUNT ? global_slot[idx] : layer_slot[(idx - FG_GW_COUNT) % FG_LW_COUNT];
}

int fg_spec_fmt(const fg_model_config *c, const fg_spec *sp, int idx) {
    int slot = fg_config_fmt_slot(idx), f;
    if (sp) f = sp[idx].fmt;
    else if (slot < 0) f = FG_FMT_F16;
    else f = (int)((idx < FG_GW_COUNT ? c->fmt_global : c->fmt_layer) >> (4 * slot) & 15);
    return f == FG_FMT_F16 && c->compress_weight && idx >= FG_GW_COUNT && slot >= 0 ? FG_FMT_Q4G64 : f;
}

int fg_config_fmt(const fg_model_config *c, int idx) { return fg_spec_fmt(c, NULL, idx); }

double fg_spec_flops_per_row(const fg_model_config *c, const fg_spec *sp, int idx) {
    const fg_spec *t = &sp[idx];
    if (!t->present || t->ndim != 2) return 0;
    double f = 2.0 * (double)fg_spec_numel(t);   /* a multiply and an add a weight */
    return fg_spec_is_experts(c, idx) ? f * c->experts_per_token / c->n_experts : f;
}

uint64_t fg_spec_stored_bytes(const fg_model_config *c, const fg_spec *sp, int idx) {
    const fg_spec *t = &sp[idx];
    if (!t->present) return 0;
    if (t->ndim == 1) return 2 * (uint64_t)t->dims[0];
    uint64_t parts = t->experts ? (uint64_t)t->experts : 1;   /* a stack: each expert's matrix on its own */
    return parts * fg_fmt_bytes(fg_spec_fmt(c, sp, idx), (uint64_t)t->dims[0] / parts, (uint64_t)t->dims[1]);
}

uint64_t fg_spec_expert_bytes(const fg_model_config *c, const fg_spec *sp, int idx) {
    FG_ASSERT(fg_spec_is_experts(c, idx) && c->n_experts > 0);
    return fg_spec_stored_bytes(c, sp, idx) / (uint64_t)c->n_experts;
}

uint64_t fg_cache_row_bytes(const fg_model_config *c) {
    if (!c->compress_cache) return 2 * (uint64_t)fg_config_kv_dim(c);
    return (uint64_t)c->n_kv_heads * fg_q4_slice_bytes((uint64_t)fg_config_head_dim(c), 1);
}

/* ---- the description the workers get ---- */

static uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bitsf(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The router word of a description: kind, and the flag beside it. */
#define DESC_ROUTER_NORM_TOPK (1u << 8)

fg_model_desc fg_config_desc(const fg_model_config *c) {
    fg_model_desc d = {.family = (uint32_t)c->family, .n = FG_MODEL_DESC_N};
    uint32_t kinds = (uint32_t)(c->ffn_kind | c->norm_kind << 4 | c->pos_kind << 8 | c->rope_scaling << 12);
    uint32_t flags = (c->pre_ln ? FG_DESC_F_PRE_LN : 0) | (c->qkv_bias ? FG_DESC_F_QKV_BIAS : 0) |
                     (c->o_bias ? FG_DESC_F_O_BIAS : 0) | (c->mlp_bias ? FG_DESC_F_MLP_BIAS : 0) |
                     (c->tied ? FG_DESC_F_TIED : 0) | (c->compress_weight ? FG_DESC_F_COMPRESS_WEIGHT : 0) |
                     (c->compress_cache ? FG_DESC_F_COMPRESS_CACHE : 0) | (c->qk_norm ? FG_DESC_F_QK_NORM : 0);
    uint32_t router = (uint32_t)c->router | (c->moe_norm_topk ? DESC_ROUTER_NORM_TOPK : 0);
    uint32_t layer = fg_config_layer_sparse(c, 0) ? FG_DESC_L_SPARSE : 0;   /* a one-layer config's layer */
    const uint32_t v[FG_MODEL_DESC_N] = {
        (uint32_t)c->vocab_size, (uint32_t)c->hidden, (uint32_t)c->n_heads, (uint32_t)c->n_kv_heads,
        (uint32_t)c->head_dim, (uint32_t)c->ffn_dim, (uint32_t)c->max_pos, (uint32_t)c->word_embed_proj_dim,
        kinds, flags, fbits(c->norm_eps), fbits(c->rope_theta), fbits(c->rope_factor), fbits(c->rope_low),
        fbits(c->rope_high), (uint32_t)c->rope_orig_max, (uint32_t)c->sliding_window, (uint32_t)c->n_experts,
        (uint32_t)c->experts_per_token, (uint32_t)c->moe_ffn_dim, router, (uint32_t)c->n_shared_experts,
        c->fmt_layer, c->fmt_global, layer};
    memcpy(d.v, v, sizeof v);
    return d;
}

void fg_config_set_formats(fg_model_config *c, const fg_spec *sp, int layer) {
    c->fmt_layer = c->fmt_global = 0;
    for (int g = 0; g < FG_GW_COUNT; g++)
        if (sp[g].present && global_slot[g] >= 0) c->fmt_global |= (uint32_t)sp[g].fmt << (4 * global_slot[g]);
    for (int w = 0; layer >= 0 && w < FG_LW_COUNT; w++) {
        const fg_spec *t = &sp[fg_spec_layer(layer, w)];
        /* F16 + compress_weight: Q4G64 in the description too (fg_spec_fmt) */
        if (t->present && layer_slot[w] >= 0) c->fmt_layer |= (uint32_t)t->fmt << (4 * layer_slot[w]);
    }
}

fg_model_desc fg_config_desc_layer(const fg_model_config *c, const fg_spec *sp, int layer) {
    fg_model_config one = *c;
    fg_config_set_formats(&one, sp, layer);
    fg_config_set_sparse(&one, 0, fg_config_layer_sparse(c, layer));   /* the description's layer kind */
    return fg_config_desc(&one);
}

int fg_config_desc_same_shape(const fg_model_desc *a, const fg_model_desc *b) {
    return a->family == b->family && a->n == b->n && !memcmp(a->v, b->v, FG_MODEL_DESC_SHAPE_N * sizeof a->v[0]);
}

/* Every matrix of a description's one layer a whole number of its format's
 * blocks along `in`. */
static fg_status formats_fit(const fg_model_config *c, const char *who) {
    fg_spec *sp = fg_specs_new(c);
    fg_status st = FG_OK;
    for (int i = 0; i < fg_spec_count(c) && !st; i++)
        if (sp[i].present && sp[i].ndim == 2 && !fg_spec_stored_bytes(c, sp, i))
            st = fg_err_set(FG_EINPUT, "%s: model tensor %s [%lld, %lld] cannot be held in %s (%lld values a row, "
                            "blocks of %d)", who, sp[i].name, (long long)sp[i].dims[0], (long long)sp[i].dims[1],
                            fg_fmt_name(sp[i].fmt), (long long)sp[i].dims[1], fg_fmt_get(sp[i].fmt)->block);
    free(sp);
    return st;
}

fg_status fg_config_from_desc(const fg_model_desc *d, const char *who, fg_model_config *c) {
    if (!fg_family_get((int)d->family))
        return fg_err_set(FG_EINPUT, "%s: model family %u is not one this worker runs", who, (unsigned)d->family);
    if (d->n != FG_MODEL_DESC_N)
        return fg_err_set(FG_EINPUT, "%s: a model description has %d numbers, got %u", who, FG_MODEL_DESC_N,
                          (unsigned)d->n);
    for (int i = 0; i < 8; i++)
        if (d->v[i] > FG_CONFIG_DIM_MAX)
            return fg_err_set(FG_EINPUT, "%s: model dimension %u exceeds %d", who, (unsigned)d->v[i], FG_CONFIG_DIM_MAX);
    uint32_t kinds = d->v[8], flags = d->v[9];
    if (kinds & ~0x3111u || flags & ~FG_DESC_F_ALL || d->v[15] > FG_CONFIG_DIM_MAX || d->v[16] > FG_CONFIG_DIM_MAX)
        return fg_err_set(FG_EINPUT, "%s: model kinds 0x%x or flags 0x%x or a size out of range", who,
                          (unsigned)kinds, (unsigned)flags);
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "op");
    c->family = (int)d->family;
    c->vocab_size = (int)d->v[0], c->hidden = (int)d->v[1], c->n_heads = (int)d->v[2], c->n_kv_heads = (int)d->v[3];
    c->head_dim = (int)d->v[4], c->ffn_dim = (int)d->v[5], c->max_pos = (int)d->v[6];
    c->word_embed_proj_dim = (int)d->v[7];
    c->n_layers = 1;
    c->ffn_kind = (int)(kinds & 15), c->norm_kind = (int)(kinds >> 4 & 15), c->pos_kind = (int)(kinds >> 8 & 15);
    c->rope_scaling = (int)(kinds >> 12 & 15);
    c->pre_ln = !!(flags & FG_DESC_F_PRE_LN), c->qkv_bias = !!(flags & FG_DESC_F_QKV_BIAS);
    c->o_bias = !!(flags & FG_DESC_F_O_BIAS), c->mlp_bias = !!(flags & FG_DESC_F_MLP_BIAS);
    c->tied = !!(flags & FG_DESC_F_TIED), c->compress_weight = !!(flags & FG_DESC_F_COMPRESS_WEIGHT);
    c->compress_cache = !!(flags & FG_DESC_F_COMPRESS_CACHE), c->qk_norm = !!(flags & FG_DESC_F_QK_NORM);
    c->norm_eps = bitsf(d->v[10]), c->rope_theta = bitsf(d->v[11]), c->rope_factor = bitsf(d->v[12]);
    c->rope_low = bitsf(d->v[13]), c->rope_high = bitsf(d->v[14]);
    c->rope_orig_max = (int)d->v[15], c->sliding_window = (int)d->v[16];
    if (d->v[17] > FG_CONFIG_MAX_EXPERTS || d->v[18] > d->v[17] || d->v[19] > FG_CONFIG_DIM_MAX ||
        (d->v[20] & ~(DESC_ROUTER_NORM_TOPK | 255u)) || d->v[21] > FG_CONFIG_MAX_EXPERTS ||
        d->v[24] & ~FG_DESC_L_ALL || (d->v[24] && !d->v[17]))
        return fg_err_set(FG_EINPUT, "%s: model experts %u (top %u, size %u, router 0x%x, shared %u, layer kind "
                          "%u) out of range", who, (unsigned)d->v[17], (unsigned)d->v[18], (unsigned)d->v[19],
                          (unsigned)d->v[20], (unsigned)d->v[21], (unsigned)d->v[24]);
    c->n_experts = (int)d->v[17], c->experts_per_token = (int)d->v[18], c->moe_ffn_dim = (int)d->v[19];
    c->router = (int)(d->v[20] & 255), c->moe_norm_topk = !!(d->v[20] & DESC_ROUTER_NORM_TOPK);
    c->n_shared_experts = (int)d->v[21];
    fg_config_set_sparse(c, 0, d->v[24] & FG_DESC_L_SPARSE);
    c->fmt_layer = d->v[22], c->fmt_global = d->v[23];
    int bad = c->fmt_layer >> 28 || c->fmt_global >> 16;
    for (int i = 0; i < FG_CONFIG_FMT_LAYER_SLOTS; i++) bad |= (c->fmt_layer >> (4 * i) & 15) >= FG_FMT_COUNT;
    for (int i = 0; i < FG_CONFIG_FMT_GLOBAL_SLOTS; i++) {
        uint32_t f = c->fmt_global >> (4 * i) & 15;
        bad |= f >= FG_FMT_COUNT || f == FG_FMT_Q4G64;   /* FlexGen's scheme is for a layer's matrices */
    }
    if (bad)
        return fg_err_set(FG_EINPUT, "%s: model formats 0x%x / 0x%x name a format this engine does not hold "
                          "there", who, (unsigned)c->fmt_layer, (unsigned)c->fmt_global);
    c->n_eos = 1;   /* token ids are the coordinator's business */
    char origin[64];
    snprintf(origin, sizeof origin, "%s: model", who);
    fg_status st = fg_config_validate(c, origin);
    return st ? st : formats_fit(c, who);
}

void fg_config_desc_text(const fg_model_config *c, char *out, size_t cap) {
    fg_model_desc d = fg_config_desc(c);
    size_t len = (size_t)snprintf(out, cap, "%u", (unsigned)d.family);
    for (uint32_t i = 0; i < d.n && len < cap; i++) len += (size_t)snprintf(out + len, cap - len, ",%u", (unsigned)d.v[i]);
}

fg_status fg_config_from_desc_text(const char *text, const char *who, fg_model_config *c) {
    fg_model_desc d = {.n = FG_MODEL_DESC_N};
    const char *p = text;
    for (int i = 0; i <= FG_MODEL_DESC_N; i++) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(p, &end, 10);
        if (end == p || errno || v > UINT32_MAX || *end != (i < FG_MODEL_DESC_N ? ',' : 0))
            return fg_err_set(FG_EINPUT, "%s: '%s' is not a model description (%d numbers after the family, "
                                         "comma-separated)", who, text, FG_MODEL_DESC_N);
        if (i == 0) d.family = (uint32_t)v;
        else d.v[i - 1] = (uint32_t)v;
        p = end + 1;
    }
    return fg_config_from_desc(&d, who, c);
}

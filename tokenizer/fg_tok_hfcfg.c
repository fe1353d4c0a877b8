/* fg_tok_hfcfg.c - the special ids around a text and at the end of a
 * generation: a tokenizer.json's post_processor (what it puts before and
 * after $A of the single template), tokenizer_config.json's bos_token,
 * eos_token, add_bos_token and add_eos_token, generation_config.json's
 * eos_token_id; and the lookups (BOS, EOS, prefix, suffix) for both kinds of
 * tokenizer. tokenizer_config.json keys that do not change ids
 * (chat_template, model_max_length, clean_up_tokenization_spaces, ...) are
 * ignored; one that would and is not implemented is refused. */
#include <stdio.h>
#include <string.h>

#include "fg_tok_hf.h"

static fg_status check_id(const fg_tok *t, json_int_t id, const char *path, const char *where) {
    if (id < 0 || id >= t->n_ids || !t->str[id])
        return fg_err_set(FG_EINPUT, "%s: %s: id %lld is not in the vocabulary (ids 0..%d)", path, where,
                          (long long)id, t->n_ids - 1);
    return FG_OK;
}

/* ---------------------------------------------------------------- post_processor */

static fg_status push_ids(fg_tok *t, int32_t *to, int *n, json_t *ids, const char *path, const char *where) {
    for (size_t i = 0; i < json_array_size(ids); i++) {
        json_t *v = json_array_get(ids, i);
        fg_status st = json_is_integer(v) ? check_id(t, json_integer_value(v), path, where)
                                          : fg_err_set(FG_EINPUT, "%s: %s: expected integer ids", path, where);
        if (st) return st;
        if (*n == FG_TOK_MAX_TEMPLATE)
            return fg_err_set(FG_EINPUT, "%s: %s: more than %d special tokens", path, where, FG_TOK_MAX_TEMPLATE);
        to[(*n)++] = (int32_t)json_integer_value(v);
    }
    return FG_OK;
}

static fg_status template(fg_tok *t, json_t *pp, const char *path, const char *where) {
    fg_tok_hf *hf = t->hf;
    json_t *single = json_object_get(pp, "single"), *specials = json_object_get(pp, "special_tokens");
    if (!json_is_array(single))
        return fg_err_set(FG_EINPUT, "%s: %s: TemplateProcessing needs a \"single\" array", path, where);
    int seen_a = 0;
    for (size_t i = 0; i < json_array_size(single); i++) {
        json_t *it = json_array_get(single, i);
        json_t *sp = json_object_get(it, "SpecialToken"), *seq = json_object_get(it, "Sequence");
        const char *seq_id = json_string_value(json_object_get(seq, "id"));
        if (seq) {
            if (!seq_id || strcmp(seq_id, "A") || seen_a)
                return fg_err_set(FG_EINPUT, "%s: %s.single[%zu]: only one Sequence \"A\" is supported", path,
                                  where, i);
            seen_a = 1;
            continue;
        }
        const char *name = json_string_value(json_object_get(sp, "id"));
        json_t *ids = json_object_get(json_object_get(specials, name ? name : ""), "ids");
        if (!name || !json_is_array(ids))
            return fg_err_set(FG_EINPUT, "%s: %s.single[%zu]: a SpecialToken that special_tokens does not "
                              "define", path, where, i);
        fg_status st = seen_a ? push_ids(t, hf->suf, &hf->n_suf, ids, path, where)
                              : push_ids(t, hf->pre, &hf->n_pre, ids, path, where);
        if (st) return st;
    }
    if (!seen_a) return fg_err_set(FG_EINPUT, "%s: %s.single: no Sequence \"A\"", path, where);
    return FG_OK;
}

/* RobertaProcessing and BertProcessing: "cls": [token, id], "sep": [token, id]. */
static fg_status cls_sep(fg_tok *t, json_t *pp, const char *path, const char *where) {
    fg_tok_hf *hf = t->hf;
    json_t *cls = json_array_get(json_object_get(pp, "cls"), 1), *sep = json_array_get(json_object_get(pp, "sep"), 1);
    if (!json_is_integer(cls) || !json_is_integer(sep))
        return fg_err_set(FG_EINPUT, "%s: %s: expected \"cls\" and \"sep\" as [token, id]", path, where);
    fg_status st = check_id(t, json_integer_value(cls), path, where);
    if (!st) st = check_id(t, json_integer_value(sep), path, where);
    if (st) return st;
    hf->pre[hf->n_pre++] = (int32_t)json_integer_value(cls);
    hf->suf[hf->n_suf++] = (int32_t)json_integer_value(sep);
    return FG_OK;
}

typedef struct {
    fg_tok *t;
    int templates;   /* template post-processors seen */
} post_ctx;

/* A post_processor step (fg_tok_step_fn; CTX is a post_ctx). */
static fg_status post_step(void *ctx, json_t *pp, const char *type, const char *path, const char *where,
                           size_t i) {
    post_ctx *c = ctx;
    (void)i;
    if (!strcmp(type, "ByteLevel")) return FG_OK;   /* offsets only */
    int tp = !strcmp(type, "TemplateProcessing");
    if (!tp && strcmp(type, "RobertaProcessing") && strcmp(type, "BertProcessing"))
        return fg_err_set(FG_EINPUT, "%s: %s type '%s' is not supported", path, where, type);
    if (c->templates++)
        return fg_err_set(FG_EINPUT, "%s: %s: a second template post-processor is not supported", path, where);
    return tp ? template(c->t, pp, path, where) : cls_sep(c->t, pp, path, where);
}

fg_status fg_tok_parse_post(fg_tok *t, json_t *pp, const char *path) {
    post_ctx c = {t, 0};
    return fg_tok_json_steps(pp, path, "post_processor", "processors", post_step, &c);
}

/* ---------------------------------------------------------------- config files */

/* bos_token / eos_token: a string, {"content": string, ...}, or null/absent (-1). */
static fg_status config_token(const fg_tok *t, json_t *root, const char *key, const char *path, int32_t *id) {
    json_t *v = json_object_get(root, key);
    *id = -1;
    if (!v || json_is_null(v)) return FG_OK;
    if (json_is_object(v)) v = json_object_get(v, "content");
    if (!json_is_string(v))
        return fg_err_set(FG_EINPUT, "%s: %s: expected a string or an object with a string \"content\"", path, key);
    if ((*id = fg_tok_id(t, json_string_value(v))) < 0)
        return fg_err_set(FG_EINPUT, "%s: %s \"%s\" is not a token of the tokenizer", path, key, json_string_value(v));
    return FG_OK;
}

/* add_bos_token / add_eos_token: when given, whether ID is the prefix / suffix. */
static fg_status config_add(json_t *root, const char *key, const char *tok_key, int32_t id, const char *path,
                            int32_t *ids, int *n) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return FG_OK;
    if (!json_is_boolean(v)) return fg_err_set(FG_EINPUT, "%s: %s: expected true or false", path, key);
    if (json_is_true(v) && id < 0)
        return fg_err_set(FG_EINPUT, "%s: %s is true but there is no %s", path, key, tok_key);
    *n = 0;
    if (json_is_true(v)) ids[(*n)++] = id;
    return FG_OK;
}

fg_status fg_tok_load_config(fg_tok *t, const char *path) {
    fg_tok_hf *hf = t->hf;
    json_t *root;
    int32_t bos, eos;
    /* its model_max_length is often 1e30 written as an integer */
    fg_status st = fg_tok_json_load(path, JSON_DECODE_INT_AS_REAL, &root);
    if (!st) st = config_token(t, root, "bos_token", path, &bos);
    if (!st) st = config_token(t, root, "eos_token", path, &eos);
    if (!st) st = config_add(root, "add_bos_token", "bos_token", bos, path, hf->pre, &hf->n_pre);
    if (!st) st = config_add(root, "add_eos_token", "eos_token", eos, path, hf->suf, &hf->n_suf);
    if (!st && json_is_true(json_object_get(root, "add_prefix_space")))
        st = fg_err_set(FG_EINPUT, "%s: add_prefix_space true is not supported (transformers rebuilds the "
                        "tokenizer from its slow files then)", path);
    if (!st) {
        hf->split_special = json_is_true(json_object_get(root, "split_special_tokens"));
        if (bos >= 0) hf->bos_id = bos;
        if (eos >= 0) {
            /* eos_token comes first in the list */
            int32_t *old = t->eos;
            size_t n_old = t->n_eos;
            t->eos = NULL, t->n_eos = 0;
            st = fg_tok_add_eos_ids(t, &eos, 1);
            if (!st) st = fg_tok_add_eos_ids(t, old, n_old);
            free(old);
        }
    }
    json_decref(root);
    return st;
}

fg_status fg_tok_add_eos_ids(fg_tok *t, const int32_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_ids || !t->str[ids[i]])
            return fg_err_set(FG_EINPUT, "EOS id %d is not in the vocabulary (ids 0..%d)", ids[i], t->n_ids - 1);
        int dup = 0;
        for (size_t j = 0; j < t->n_eos; j++) dup |= t->eos[j] == ids[i];
        if (dup) continue;
        int32_t *e = fg_xmalloc((t->n_eos + 1) * sizeof *e);
        if (t->n_eos) memcpy(e, t->eos, t->n_eos * sizeof *e);
        e[t->n_eos++] = ids[i];
        free(t->eos);
        t->eos = e;
    }
    return FG_OK;
}

fg_status fg_tok_load_generation_config(fg_tok *t, const char *path) {
    json_t *root;
    fg_status st = fg_tok_json_load(path, 0, &root);
    json_t *v = st ? NULL : json_object_get(root, "eos_token_id");
    if (v && !json_is_null(v)) {
        size_t n = json_is_array(v) ? json_array_size(v) : 1;
        for (size_t i = 0; i < n && !st; i++) {
            json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
            if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) >= t->n_ids ||
                !t->str[json_integer_value(e)]) {
                st = fg_err_set(FG_EINPUT, "%s: eos_token_id: expected ids of the vocabulary (0..%d), or a list "
                                "of them", path, t->n_ids - 1);
                break;
            }
            int32_t id = (int32_t)json_integer_value(e);
            st = fg_tok_add_eos_ids(t, &id, 1);
        }
    }
    json_decref(root);
    return st;
}

/* ---------------------------------------------------------------- lookups */

size_t fg_tok_prefix_ids(const fg_tok *t, const int32_t **ids) {
    if (t->hf) {
        *ids = t->hf->pre;
        return (size_t)t->hf->n_pre;
    }
    *ids = &t->bos_eos;
    return t->bos_eos >= 0;
}

size_t fg_tok_suffix_ids(const fg_tok *t, const int32_t **ids) {
    *ids = t->hf ? t->hf->suf : NULL;
    return t->hf ? (size_t)t->hf->n_suf : 0;
}

size_t fg_tok_eos_ids(const fg_tok *t, const int32_t **ids) {
    *ids = t->eos;
    return t->n_eos;
}

int32_t fg_tok_bos_id(const fg_tok *t) {
    if (!t->hf) return t->bos_eos;
    return t->hf->bos_id >= 0 ? t->hf->bos_id : t->hf->n_pre ? t->hf->pre[0] : -1;
}

int32_t fg_tok_eos_id(const fg_tok *t) { return t->n_eos ? t->eos[0] : -1; }

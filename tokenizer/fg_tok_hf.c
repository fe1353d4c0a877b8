/* fg_tok_hf.c - loads a Hugging Face tokenizer.json into the tokenizer: the
 * BPE model (vocab, merges in either format, unk_token, byte_fallback,
 * fuse_unk, ignore_merges), the added tokens, and through the other
 * fg_tok_*.c files the normalizer, pre-tokenizer, decoder and post-processor;
 * with the JSON reading those files share (a file's object, a section that is
 * one step or a Sequence of them).
 * Every field whose value would change the ids and is not implemented is
 * refused here with FG_EINPUT naming the file and the part, so a tokenizer
 * that loads encodes as its reference does. */
#include <stdio.h>
#include <string.h>

#include "fg_tok_hf.h"

#define FG_TOK_MAX_ID (1 << 24)

const char *fg_tok_json_type(json_t *obj) {
    return json_is_object(obj) ? json_string_value(json_object_get(obj, "type")) : NULL;
}

fg_status fg_tok_json_load(const char *path, size_t flags, json_t **root) {
    json_error_t jerr;
    *root = json_load_file(path, flags, &jerr);
    if (!*root) {
        if (jerr.line < 0) return fg_err_set(FG_EINPUT, "%s: %s", path, jerr.text);
        return fg_err_set(FG_EINPUT, "%s:%d:%d: malformed JSON: %s", path, jerr.line, jerr.column, jerr.text);
    }
    if (!json_is_object(*root)) return fg_err_set(FG_EINPUT, "%s: expected a JSON object", path);
    return FG_OK;
}

static fg_status json_step(json_t *step, const char *path, const char *where, size_t i, fg_tok_step_fn fn,
                           void *ctx) {
    const char *type = fg_tok_json_type(step);
    if (!type) return fg_err_set(FG_EINPUT, "%s: %s: expected an object with a \"type\"", path, where);
    return fn(ctx, step, type, path, where, i);
}

fg_status fg_tok_json_steps(json_t *j, const char *path, const char *section, const char *list,
                            fg_tok_step_fn fn, void *ctx) {
    if (!j || json_is_null(j)) return FG_OK;
    const char *type = fg_tok_json_type(j);
    if (!type || strcmp(type, "Sequence")) return json_step(j, path, section, 0, fn, ctx);
    json_t *steps = json_object_get(j, list);
    if (!json_is_array(steps))
        return fg_err_set(FG_EINPUT, "%s: %s: a Sequence needs a \"%s\" array", path, section, list);
    for (size_t i = 0; i < json_array_size(steps); i++) {
        char where[64];
        snprintf(where, sizeof where, "%s.%s[%zu]", section, list, i);
        fg_status st = json_step(json_array_get(steps, i), path, where, i, fn, ctx);
        if (st) return st;
    }
    return FG_OK;
}

/* A boolean field: absent or null -> DEF. */
static fg_status get_bool(json_t *obj, const char *key, int def, const char *path, const char *where,
                          int *out) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return FG_OK;
    }
    if (!json_is_boolean(v))
        return fg_err_set(FG_EINPUT, "%s: %s.%s: expected true or false", path, where, key);
    *out = json_is_true(v);
    return FG_OK;
}

/* ---------------------------------------------------------------- added tokens */

static fg_status parse_added(fg_tok_hf *hf, json_t *arr, const char *path, int32_t *max_id,
                             size_t *chars) {
    if (!arr || json_is_null(arr)) return FG_OK;
    if (!json_is_array(arr)) return fg_err_set(FG_EINPUT, "%s: added_tokens: expected an array", path);
    hf->n_added = json_array_size(arr);
    hf->added = fg_xcalloc(hf->n_added ? hf->n_added : 1, sizeof *hf->added);
    for (size_t i = 0; i < hf->n_added; i++) {
        json_t *a = json_array_get(arr, i), *id = json_object_get(a, "id");
        json_t *c = json_object_get(a, "content");
        char where[48];
        snprintf(where, sizeof where, "added_tokens[%zu]", i);
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= FG_TOK_MAX_ID ||
            !json_is_string(c) || !json_string_length(c) || strlen(json_string_value(c)) != json_string_length(c))
            return fg_err_set(FG_EINPUT, "%s: %s: expected an object with an integer \"id\" in [0, %d) "
                              "and a non-empty string \"content\"", path, where, FG_TOK_MAX_ID);
        fg_tok_added *t = &hf->added[i];
        int sw = 0, ls = 0, rs = 0, nz = 0, sp = 0;
        fg_status st;
        if ((st = get_bool(a, "single_word", 0, path, where, &sw)) ||
            (st = get_bool(a, "lstrip", 0, path, where, &ls)) ||
            (st = get_bool(a, "rstrip", 0, path, where, &rs)) ||
            (st = get_bool(a, "special", 0, path, where, &sp)) ||
            (st = get_bool(a, "normalized", !sp, path, where, &nz)))
            return st;
        if (sw)
            return fg_err_set(FG_EINPUT, "%s: %s (\"%s\"): single_word added tokens are not supported",
                              path, where, json_string_value(c));
        t->id = (int32_t)json_integer_value(id);
        t->len = json_string_length(c);
        t->content = fg_xmalloc(t->len + 1);
        memcpy(t->content, json_string_value(c), t->len + 1);
        t->special = (uint8_t)sp, t->lstrip = (uint8_t)ls, t->rstrip = (uint8_t)rs;
        t->normalized = (uint8_t)nz;
        if (t->id > *max_id) *max_id = t->id;
        *chars += t->len + 1;
    }
    return FG_OK;
}

/* Added tokens into the vocabulary: an id model.vocab has must be the same
 * string there. */
static fg_status vocab_add_added(fg_tok *t, const char *path, size_t arena_used) {
    fg_tok_hf *hf = t->hf;
    char *w = t->str_arena + arena_used;
    hf->is_added = fg_xcalloc((size_t)t->n_ids, 1);
    for (size_t i = 0; i < hf->n_added; i++) {
        const fg_tok_added *a = &hf->added[i];
        if (t->str[a->id] && !hf->is_added[a->id] && strcmp(t->str[a->id], a->content))
            return fg_err_set(FG_EINPUT, "%s: added_tokens[%zu]: id %d is \"%s\" but model.vocab has "
                              "\"%s\" there", path, i, a->id, a->content, t->str[a->id]);
        if (hf->is_added[a->id])
            return fg_err_set(FG_EINPUT, "%s: added_tokens[%zu]: id %d appears twice", path, i, a->id);
        if (!t->str[a->id]) {
            memcpy(w, a->content, a->len + 1);
            t->str[a->id] = w;
            w += a->len + 1;
        }
        hf->is_added[a->id] = 1;
    }
    return FG_OK;
}

/* ---------------------------------------------------------------- model */

static fg_status check_model_fields(fg_tok_hf *hf, json_t *m, const char *path) {
    const char *type = fg_tok_json_type(m);
    if (!json_is_object(m)) return fg_err_set(FG_EINPUT, "%s: model: expected an object", path);
    if (type ? strcmp(type, "BPE") : !json_object_get(m, "merges"))
        return fg_err_set(FG_EINPUT, "%s: model type '%s' is not supported (only BPE)", path,
                          type ? type : "(none)");
    json_t *d = json_object_get(m, "dropout");
    if (d && !json_is_null(d) && !(json_is_number(d) && json_number_value(d) == 0))
        return fg_err_set(FG_EINPUT, "%s: model.dropout: BPE dropout is not supported (expected null)", path);
    const char *affix[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        json_t *v = json_object_get(m, affix[i]);
        if (v && !json_is_null(v) && !(json_is_string(v) && !json_string_length(v)))
            return fg_err_set(FG_EINPUT, "%s: model.%s is not supported (expected null or \"\")", path, affix[i]);
    }
    fg_status st;
    if ((st = get_bool(m, "fuse_unk", 0, path, "model", &hf->fuse_unk)) ||
        (st = get_bool(m, "byte_fallback", 0, path, "model", &hf->byte_fallback)) ||
        (st = get_bool(m, "ignore_merges", 0, path, "model", &hf->ignore_merges)))
        return st;
    json_t *merges = json_object_get(m, "merges");
    if (!json_is_array(merges)) return fg_err_set(FG_EINPUT, "%s: model.merges: expected an array", path);
    json_t *vocab = json_object_get(m, "vocab");
    if (!json_is_object(vocab)) return fg_err_set(FG_EINPUT, "%s: model.vocab: expected an object", path);
    return FG_OK;
}

/* One merge: "a b" (older files) or ["a", "b"] (tokenizers >= 0.20). */
static fg_status merge_parts(json_t *e, const char *path, size_t i, const char **a, size_t *la,
                             const char **b, size_t *lb) {
    if (json_is_string(e)) {
        const char *s = json_string_value(e), *sp = strchr(s, ' ');
        if (!sp || strchr(sp + 1, ' ') || sp == s || !sp[1])
            return fg_err_set(FG_EINPUT, "%s: model.merges[%zu] \"%s\": expected two tokens separated "
                              "by one space", path, i, s);
        *a = s, *la = (size_t)(sp - s), *b = sp + 1, *lb = strlen(sp + 1);
        return FG_OK;
    }
    json_t *x = json_array_get(e, 0), *y = json_array_get(e, 1);
    if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(x) || !json_is_string(y))
        return fg_err_set(FG_EINPUT, "%s: model.merges[%zu]: expected \"a b\" or [\"a\", \"b\"]", path, i);
    *a = json_string_value(x), *la = strlen(*a), *b = json_string_value(y), *lb = strlen(*b);
    return FG_OK;
}

static fg_status load_hf_merges(fg_tok *t, json_t *merges, const char *path) {
    size_t n = json_array_size(merges), cap = 256;
    char *both = fg_xmalloc(cap);
    fg_tok_merges_alloc(t, n + 1);
    fg_status st = FG_OK;
    for (size_t i = 0; i < n && !st; i++) {
        const char *a = NULL, *b = NULL;
        size_t la = 0, lb = 0;
        if ((st = merge_parts(json_array_get(merges, i), path, i, &a, &la, &b, &lb))) break;
        if (la + lb + 1 > cap) {
            free(both);
            cap = 2 * (la + lb + 1);
            both = fg_xmalloc(cap);
        }
        memcpy(both, a, la);
        memcpy(both + la, b, lb);
        both[la + lb] = 0;
        int32_t ia = fg_tok_vocab_find(t, a, la), ib = fg_tok_vocab_find(t, b, lb);
        int32_t im = fg_tok_vocab_find(t, both, la + lb);
        if (ia < 0 || ib < 0 || im < 0)
            st = fg_err_set(FG_EINPUT, "%s: model.merges[%zu] (\"%.*s\", \"%.*s\"): \"%.*s\" is not in "
                            "model.vocab", path, i, (int)la, a, (int)lb, b,
                            ia < 0 ? (int)la : ib < 0 ? (int)lb : (int)(la + lb),
                            ia < 0 ? a : ib < 0 ? b : both);
        else
            fg_tok_merge_put(t, ia, ib, (int32_t)i, im);
    }
    free(both);
    if (!st) fg_tok_merges_finish(t);
    return st;
}

/* The model's own ids: unk, <0xNN> byte tokens, one-character ASCII tokens,
 * and (ignore_merges) the table of whole pieces that are tokens. */
static fg_status model_ids(fg_tok *t, json_t *m, const char *path) {
    fg_tok_hf *hf = t->hf;
    json_t *unk = json_object_get(m, "unk_token");
    hf->unk_id = -1;
    if (unk && !json_is_null(unk)) {
        if (!json_is_string(unk) || (hf->unk_id = fg_tok_id(t, json_string_value(unk))) < 0)
            return fg_err_set(FG_EINPUT, "%s: model.unk_token: expected a token of the vocabulary", path);
    }
    for (int b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        hf->fb_id[b] = hf->byte_fallback ? fg_tok_id(t, s) : -1;
    }
    for (int c = 0; c < 128; c++) {
        char s[2] = {(char)c, 0};
        hf->ascii_id[c] = c ? fg_tok_vocab_find(t, s, 1) : -1;
        if (hf->ascii_id[c] >= 0 && !hf->in_model[hf->ascii_id[c]]) hf->ascii_id[c] = -1;
    }
    if (!hf->ignore_merges) return FG_OK;
    size_t cap = fg_tok_pow2_at_least((size_t)t->n_ids * 2);
    hf->piece_slots = fg_xmalloc(cap * sizeof *hf->piece_slots);
    memset(hf->piece_slots, 0xff, cap * sizeof *hf->piece_slots);
    hf->piece_mask = cap - 1;
    for (int32_t id = 0; id < t->n_ids; id++) {
        if (!hf->in_model[id]) continue;
        size_t n;
        const uint8_t *p = fg_tok_piece_form(t, id, &n);
        size_t i = fg_tok_hash(p, n) & hf->piece_mask;
        while (hf->piece_slots[i] >= 0) i = (i + 1) & hf->piece_mask;
        hf->piece_slots[i] = id;
    }
    return FG_OK;
}

static fg_status load_vocab_and_added(fg_tok *t, json_t *root, const char *path) {
    fg_tok_hf *hf = t->hf;
    int32_t max_added = -1;
    size_t chars = 0, used;
    fg_status st = parse_added(hf, json_object_get(root, "added_tokens"), path, &max_added, &chars);
    if (st) return st;
    json_t *m = json_object_get(root, "model");
    st = fg_tok_vocab_from_json(t, json_object_get(m, "vocab"), path, "model.vocab: ", max_added + 1,
                                chars, &used);
    if (st) return st;
    hf->in_model = fg_xmalloc((size_t)t->n_ids);
    for (int32_t id = 0; id < t->n_ids; id++) hf->in_model[id] = t->str[id] != NULL;
    if ((st = vocab_add_added(t, path, used))) return st;
    fg_tok_vocab_index(t);
    for (size_t i = 0; i < hf->n_added; i++) {
        fg_tok_added *a = &hf->added[i];
        st = fg_tok_trie_add(a->normalized && hf->n_norm ? &hf->normed : &hf->raw, a->content, a->len,
                             (int32_t)i);
        if (st) return st;
    }
    return FG_OK;
}

/* ---------------------------------------------------------------- lifetime */

static fg_status load_hf(fg_tok *t, json_t *root, const char *path) {
    fg_tok_hf *hf = t->hf;
    json_t *m = json_object_get(root, "model");
    fg_status st = check_model_fields(hf, m, path);
    /* the normalizer first: it decides which added tokens match normalized text */
    if (!st) st = fg_tok_parse_normalizer(hf, json_object_get(root, "normalizer"), path);
    if (!st) st = load_vocab_and_added(t, root, path);
    if (!st) st = load_hf_merges(t, json_object_get(m, "merges"), path);
    if (!st) st = fg_tok_parse_pretok(hf, json_object_get(root, "pre_tokenizer"), path);
    if (!st) st = fg_tok_parse_decoder(t, json_object_get(root, "decoder"), path);
    if (!st) st = model_ids(t, m, path);
    if (!st && !hf->byte_level) fg_tok_spm_check_segment(t);
    if (!st) st = fg_tok_parse_post(t, json_object_get(root, "post_processor"), path);
    if (st) return st;
    for (size_t i = 0; i < hf->n_added; i++)
        if (hf->added[i].special) t->special[hf->added[i].id] = 1;
    return FG_OK;
}

fg_status fg_tok_open_hf_root(json_t *root, const char *path, fg_tok **out) {
    fg_tok *t = fg_xcalloc(1, sizeof *t);
    t->cache_on = 1;
    t->bos_eos = -1;
    t->hf = fg_xcalloc(1, sizeof *t->hf);
    t->hf->bos_id = -1;
    fg_status st = load_hf(t, root, path);
    if (st) fg_tok_destroy(&t);
    *out = t;
    return st;
}

fg_status fg_tok_open_hf(const char *tokenizer_json, const char *tokenizer_config_json, fg_tok **out) {
    *out = NULL;
    json_t *root = NULL;
    fg_status st = fg_tok_json_load(tokenizer_json, 0, &root);
    if (st) {
        json_decref(root);
        return st;
    }
    fg_tok *t = NULL;
    st = fg_tok_open_hf_root(root, tokenizer_json, &t);
    json_decref(root);
    if (!st && tokenizer_config_json) st = fg_tok_load_config(t, tokenizer_config_json);
    if (st) {
        fg_tok_destroy(&t);
        return st;
    }
    *out = t;
    return FG_OK;
}

void fg_tok_hf_free(fg_tok_hf *hf) {
    if (!hf) return;
    for (int i = 0; i < hf->n_norm; i++) {
        free(hf->norm[i].from);
        free(hf->norm[i].to);
    }
    for (int i = 0; i < hf->n_split; i++) {
        pcre2_match_data_free(hf->split[i].md);
        pcre2_code_free(hf->split[i].re);
        free(hf->split[i].lit);
    }
    for (size_t i = 0; i < hf->n_added; i++) free(hf->added[i].content);
    free(hf->added);
    free(hf->is_added);
    free(hf->in_model);
    fg_tok_trie_free(&hf->raw);
    fg_tok_trie_free(&hf->normed);
    free(hf->piece_slots);
    free(hf->strip_content);
    free(hf->meta_rep);
    free(hf->dec_rep);
    free(hf->buf[0]);
    free(hf->buf[1]);
    free(hf->pieces.off);
    free(hf->pieces.len);
    free(hf);
}

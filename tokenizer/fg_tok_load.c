/* fg_tok_load.c - builds a tokenizer from vocab.json + merges.txt: the id
 * tables, the byte <-> character map of GPT-2's bytes_to_unicode, the merge
 * ranks, and the compiled pre-split pattern. Also the lookups by id or string
 * and the helpers that find a model's (or the cached GPT-2) files.
 * Encoding and decoding live in fg_tok_encode.c and fg_tok_decode.c. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fg_tok_hf.h"

/* Ids above this are refused: the tables are indexed by id, and a vocabulary
 * with a stray huge id would otherwise cost gigabytes. */
#define FG_TOK_MAX_ID (1 << 24)

/* GPT-2's pattern, except that \s is spelled out as Unicode's White_Space set.
 * GPT-2 runs the pattern with Python's `regex` module, whose \s is exactly
 * White_Space; PCRE2's UCP \s also matches U+180E MONGOLIAN VOWEL SEPARATOR
 * (a space before Unicode 6.3, a format character since), so running "\s" as
 * written would split U+180E differently from GPT-2. \p{L} and \p{N} are
 * PCRE2's, from the Unicode version the library was built with. */
#define WS "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}" \
           "\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
static const char fg_tok_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+"
    "|[" WS "]+(?![^" WS "])|[" WS "]+";

/* Decode skips these where Hugging Face skips its special tokens. */
static const char *const fg_tok_specials[] = {"<s>", "</s>", "<pad>", "<unk>", "<|endoftext|>"};

/* ---------------------------------------------------------------- bytes_to_unicode */

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the
 * other 68 map to U+0100.. in byte order, so every byte is a visible character. */
static void byte_map(uint32_t to_cp[256], int16_t from_cp[324]) {
    int n = 0;
    for (int i = 0; i < 324; i++) from_cp[i] = -1;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        to_cp[b] = printable ? (uint32_t)b : (uint32_t)(256 + n++);
        from_cp[to_cp[b]] = (int16_t)b;
    }
}

static size_t put_utf8(uint32_t cp, uint8_t *o) {
    if (cp < 0x80) { o[0] = (uint8_t)cp; return 1; }
    if (cp < 0x800) { o[0] = (uint8_t)(0xC0 | cp >> 6); o[1] = (uint8_t)(0x80 | (cp & 63)); return 2; }
    o[0] = (uint8_t)(0xE0 | cp >> 12);
    o[1] = (uint8_t)(0x80 | (cp >> 6 & 63));
    o[2] = (uint8_t)(0x80 | (cp & 63));
    return 3; /* the map only reaches U+0143 */
}

/* ---------------------------------------------------------------- string -> id */

static void vocab_insert(fg_tok *t, int32_t id) {
    const char *s = t->str[id];
    size_t i = fg_tok_hash(s, strlen(s)) & t->vocab_mask;
    while (t->vocab_slots[i] >= 0) i = (i + 1) & t->vocab_mask;
    t->vocab_slots[i] = id;
}

int32_t fg_tok_vocab_find(const fg_tok *t, const char *s, size_t n) {
    size_t i = fg_tok_hash(s, n) & t->vocab_mask;
    for (;;) {
        int32_t id = t->vocab_slots[i];
        if (id < 0) return -1;
        if (!strncmp(t->str[id], s, n) && t->str[id][n] == 0) return id;
        i = (i + 1) & t->vocab_mask;
    }
}

int32_t fg_tok_id(const fg_tok *t, const char *token) {
    return fg_tok_vocab_find(t, token, strlen(token));
}

size_t fg_tok_pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n) c <<= 1;
    return c;
}

/* ---------------------------------------------------------------- vocab.json */

fg_status fg_tok_vocab_from_json(fg_tok *t, json_t *root, const char *path, const char *where,
                                 int32_t min_ids, size_t extra_chars, size_t *arena_used) {
    if (!json_is_object(root))
        return fg_err_set(FG_EINPUT, "%s: %sexpected a JSON object mapping token strings to ids",
                          path, where);
    /* First pass: check the ids and size the tables. */
    const char *key;
    json_t *val;
    json_int_t max_id = -1;
    size_t chars = 0;
    json_object_foreach(root, key, val) {
        if (!json_is_integer(val) || json_integer_value(val) < 0 ||
            json_integer_value(val) >= FG_TOK_MAX_ID)
            return fg_err_set(FG_EINPUT, "%s: %stoken \"%s\": expected an integer id in [0, %d)",
                              path, where, key, FG_TOK_MAX_ID);
        if (json_integer_value(val) > max_id) max_id = json_integer_value(val);
        chars += strlen(key) + 1;
    }
    if (max_id < 0) return fg_err_set(FG_EINPUT, "%s: %sempty vocabulary", path, where);
    t->n_ids = (int32_t)max_id + 1 > min_ids ? (int32_t)max_id + 1 : min_ids;
    t->str = fg_xcalloc((size_t)t->n_ids, sizeof *t->str);
    t->str_arena = fg_xmalloc(chars + extra_chars + 1);
    char *w = t->str_arena;
    json_object_foreach(root, key, val) {
        int32_t id = (int32_t)json_integer_value(val);
        if (t->str[id])
            return fg_err_set(FG_EINPUT, "%s: %sid %d is used by both \"%s\" and \"%s\"", path, where,
                              id, t->str[id], key);
        size_t n = strlen(key) + 1;
        memcpy(w, key, n);
        t->str[id] = w;
        w += n;
    }
    *arena_used = (size_t)(w - t->str_arena);
    return FG_OK;
}

void fg_tok_vocab_index(fg_tok *t) {
    size_t count = 0;
    for (int32_t id = 0; id < t->n_ids; id++) count += t->str[id] != NULL;
    size_t cap = fg_tok_pow2_at_least(count * 2);
    free(t->vocab_slots);
    t->vocab_slots = fg_xmalloc(cap * sizeof *t->vocab_slots);
    memset(t->vocab_slots, 0xff, cap * sizeof *t->vocab_slots);
    t->vocab_mask = cap - 1;
    for (int32_t id = 0; id < t->n_ids; id++)
        if (t->str[id]) vocab_insert(t, id);
}

static fg_status load_vocab(fg_tok *t, const char *path) {
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) {
        if (jerr.line < 0) return fg_err_set(FG_EINPUT, "%s: %s", path, jerr.text);
        return fg_err_set(FG_EINPUT, "%s:%d:%d: malformed JSON: %s", path, jerr.line,
                          jerr.column, jerr.text);
    }
    size_t used;
    fg_status st = fg_tok_vocab_from_json(t, root, path, "", 0, 0, &used);
    if (!st) fg_tok_vocab_index(t);
    json_decref(root);
    return st;
}

/* What each token decodes to: its characters mapped back through
 * bytes_to_unicode. A character outside the map (only in tokens someone added
 * to a vocabulary by hand) stands for its own UTF-8 bytes, and so do the
 * tokens RAW marks (a tokenizer.json's added tokens). */
fg_status fg_tok_build_bytes(fg_tok *t, const char *path, const uint8_t *raw) {
    uint32_t to_cp[256];
    int16_t from_cp[324];
    byte_map(to_cp, from_cp);

    size_t total = 0;
    for (int32_t id = 0; id < t->n_ids; id++)
        if (t->str[id]) total += strlen(t->str[id]);
    t->bytes = fg_xmalloc(total + 1);
    t->bytes_off = fg_xcalloc((size_t)t->n_ids, sizeof *t->bytes_off);
    t->bytes_len = fg_xcalloc((size_t)t->n_ids, sizeof *t->bytes_len);
    t->special = fg_xcalloc((size_t)t->n_ids, 1);
    size_t w = 0;
    for (int32_t id = 0; id < t->n_ids; id++) {
        const uint8_t *s = (const uint8_t *)t->str[id];
        if (!s) continue;
        size_t n = strlen((const char *)s);
        t->bytes_off[id] = (uint32_t)w;
        for (size_t i = 0; i < n;) {
            int k = fg_tok_utf8_seq(s + i, n - i);
            if (k < 0) /* jansson only hands out valid UTF-8 */
                return fg_err_set(FG_EINPUT, "%s: token id %d is not valid UTF-8", path, id);
            uint32_t cp = s[i];
            if (k == 2) cp = (uint32_t)(s[i] & 0x1F) << 6 | (s[i + 1] & 0x3F);
            if (raw && raw[id]) {
                memcpy(t->bytes + w, s + i, (size_t)k);
                w += (size_t)k;
            } else if (k == 2 && cp < 324 && from_cp[cp] >= 0) {
                t->bytes[w++] = (uint8_t)from_cp[cp];
            } else if (k == 1 && from_cp[cp] >= 0) {
                t->bytes[w++] = (uint8_t)from_cp[cp];
            } else {
                memcpy(t->bytes + w, s + i, (size_t)k);
                w += (size_t)k;
            }
            i += (size_t)k;
        }
        t->bytes_len[id] = (uint32_t)(w - t->bytes_off[id]);
    }
    for (int b = 0; b < 256; b++) {
        uint8_t u[4];
        size_t n = put_utf8(to_cp[b], u);
        t->byte_id[b] = fg_tok_vocab_find(t, (const char *)u, n);
        if (t->byte_id[b] < 0)
            return fg_err_set(FG_EINPUT, "%s: no token for byte 0x%02x (\"%.*s\"): not a "
                              "byte-level BPE vocabulary", path, b, (int)n, (const char *)u);
    }
    return FG_OK;
}

/* ---------------------------------------------------------------- merges */

void fg_tok_merges_alloc(fg_tok *t, size_t count) {
    size_t cap = fg_tok_pow2_at_least(count * 2);
    t->merges = fg_xmalloc(cap * sizeof *t->merges);
    for (size_t i = 0; i < cap; i++) t->merges[i].key = FG_TOK_EMPTY_KEY;
    t->merge_mask = cap - 1;
}

void fg_tok_merge_put(fg_tok *t, int32_t a, int32_t b, int32_t rank, int32_t merged) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t i = fg_tok_mix64(key) & t->merge_mask;
    /* A repeated pair keeps its last rank, as the dict in GPT-2's encoder.py
     * and Hugging Face's loaders do. */
    while (t->merges[i].key != FG_TOK_EMPTY_KEY && t->merges[i].key != key)
        i = (i + 1) & t->merge_mask;
    t->merges[i] = (fg_tok_merge){key, rank, merged};
}

/* bpe_heap merges one pair at a time, GPT-2 all occurrences of the best pair
 * at once; the two agree when every merge ranks after every merge that makes
 * one of its inputs (true of GPT-2's file). Otherwise all words of a
 * vocab.json tokenizer take the step-for-step path, and all words of a
 * tokenizer.json one (whose reference merges one pair at a time) the heap. */
void fg_tok_merges_finish(fg_tok *t) {
    int32_t *maxprod = fg_xmalloc((size_t)t->n_ids * sizeof *maxprod);
    for (int32_t i = 0; i < t->n_ids; i++) maxprod[i] = -1;
    for (size_t i = 0; i <= t->merge_mask; i++) {
        const fg_tok_merge *m = &t->merges[i];
        if (m->key != FG_TOK_EMPTY_KEY && m->rank > maxprod[m->merged]) maxprod[m->merged] = m->rank;
    }
    t->causal = 1;
    for (size_t i = 0; i <= t->merge_mask; i++) {
        const fg_tok_merge *m = &t->merges[i];
        if (m->key == FG_TOK_EMPTY_KEY) continue;
        int32_t a = (int32_t)(m->key >> 32), b = (int32_t)(uint32_t)m->key;
        if (maxprod[a] >= m->rank || maxprod[b] >= m->rank) t->causal = 0;
    }
    free(maxprod);
}

static fg_status load_merges(fg_tok *t, const char *path) {
    char *data;
    size_t len;
    fg_status st = fg_read_file(path, &data, &len);
    if (st) return st;
    size_t lines = 1;
    for (size_t i = 0; i < len; i++) lines += data[i] == '\n';
    fg_tok_merges_alloc(t, lines);

    char *both = NULL;
    size_t both_cap = 0;
    int32_t rank = 0;
    int lineno = 0;
    for (char *p = data, *end = data + len; p < end;) {
        char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) eol = end;
        char *line = p;
        size_t n = (size_t)(eol - p);
        p = eol + 1;
        lineno++;
        if (n && line[n - 1] == '\r') n--;
        line[n] = 0;
        /* The first line of GPT-2's and HF's files is "#version: 0.2". */
        if (lineno == 1 && !strncmp(line, "#version", 8)) continue;
        char *save = NULL;
        char *a = strtok_r(line, " \t", &save);
        if (!a) continue; /* the empty last line */
        char *b = strtok_r(NULL, " \t", &save);
        if (!b || strtok_r(NULL, " \t", &save)) {
            st = fg_err_set(FG_EINPUT, "%s:%d: expected two tokens separated by a space", path,
                            lineno);
            goto out;
        }
        size_t la = strlen(a), lb = strlen(b);
        if (la + lb + 1 > both_cap) {
            free(both);
            both_cap = 2 * (la + lb + 1);
            both = fg_xmalloc(both_cap);
        }
        memcpy(both, a, la);
        memcpy(both + la, b, lb + 1);
        int32_t ia = fg_tok_id(t, a), ib = fg_tok_id(t, b), im = fg_tok_id(t, both);
        const char *missing = ia < 0 ? a : ib < 0 ? b : im < 0 ? both : NULL;
        if (missing) {
            st = fg_err_set(FG_EINPUT, "%s:%d: token \"%s\" of merge \"%s %s\" is not in the "
                            "vocabulary", path, lineno, missing, a, b);
            goto out;
        }
        fg_tok_merge_put(t, ia, ib, rank++, im);
    }
    fg_tok_merges_finish(t);
out:
    free(both);
    free(data);
    return st;
}

/* ---------------------------------------------------------------- lifetime */

fg_status fg_tok_compile_gpt2(fg_tok *t, pcre2_code **re, pcre2_match_data **md, int *jit) {
    (void)t;
    int code;
    PCRE2_SIZE off;
    *re = pcre2_compile((PCRE2_SPTR)fg_tok_pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                        &code, &off, NULL);
    if (!*re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        return fg_err_set(FG_ERUNTIME, "tokenizer: PCRE2 rejected the pre-split pattern at %zu: %s",
                          (size_t)off, (const char *)msg);
    }
    /* Without JIT (a platform PCRE2 cannot JIT for) the interpreter gives the
     * same matches, only slower. */
    *jit = pcre2_jit_compile(*re, PCRE2_JIT_COMPLETE) == 0;
    *md = pcre2_match_data_create_from_pattern(*re, NULL);
    if (!*md) return fg_err_set(FG_ERUNTIME, "tokenizer: out of memory for PCRE2 match data");
    return FG_OK;
}

fg_status fg_tok_new(const char *vocab_json, const char *merges_txt, fg_tok **out) {
    *out = NULL;
    fg_tok *t = fg_xcalloc(1, sizeof *t);
    t->cache_on = 1;
    fg_status st = load_vocab(t, vocab_json);
    if (!st) st = fg_tok_build_bytes(t, vocab_json, NULL);
    if (!st) {
        for (size_t i = 0; i < sizeof fg_tok_specials / sizeof *fg_tok_specials; i++) {
            int32_t id = fg_tok_id(t, fg_tok_specials[i]);
            if (id >= 0) t->special[id] = 1;
        }
        int32_t id = fg_tok_id(t, "</s>");
        t->bos_eos = id >= 0 ? id : fg_tok_id(t, "<|endoftext|>");
        if (t->bos_eos >= 0) st = fg_tok_add_eos_ids(t, &t->bos_eos, 1);
    }
    if (!st) st = load_merges(t, merges_txt);
    if (!st) st = fg_tok_compile_gpt2(t, &t->re, &t->md, &t->jit);
    if (st) {
        fg_tok_destroy(&t);
        return st;
    }
    *out = t;
    return FG_OK;
}

void fg_tok_destroy(fg_tok **p) {
    fg_tok *t = *p;
    if (!t) return;
    free(t->str);
    free(t->str_arena);
    free(t->bytes_off);
    free(t->bytes_len);
    free(t->bytes);
    free(t->special);
    free(t->vocab_slots);
    free(t->merges);
    pcre2_match_data_free(t->md);
    pcre2_code_free(t->re);
    free(t->cache);
    free(t->cache_keys);
    free(t->cache_ids);
    free(t->sym);
    free(t->rank);
    free(t->mrg);
    free(t->next);
    free(t->prev);
    free(t->heap);
    fg_tok_hf_free(t->hf);
    free(t->eos);
    free(t);
    *p = NULL;
}

/* ---------------------------------------------------------------- opening files */

static fg_status open_pair(const char *dir, const char *vocab, const char *merges,
                           const char *hint, fg_tok **out) {
    char pv[PATH_MAX], pm[PATH_MAX];
    if (snprintf(pv, sizeof pv, "%s/%s", dir, vocab) >= (int)sizeof pv ||
        snprintf(pm, sizeof pm, "%s/%s", dir, merges) >= (int)sizeof pm)
        return fg_err_set(FG_EINPUT, "%s: path too long", dir);
    const char *missing = access(pv, R_OK) ? pv : access(pm, R_OK) ? pm : NULL;
    if (missing)
        return fg_err_set(FG_EINPUT, "%s: %s%s", missing, strerror(errno), hint);
    return fg_tok_new(pv, pm, out);
}

fg_status fg_tok_open_model_dir(const char *dir, fg_tok **out) {
    char tj[PATH_MAX], tc[PATH_MAX], gc[PATH_MAX];
    /* a GGUF model is one file that carries its own tokenizer */
    size_t dl = strlen(dir);
    if (dl > 5 && !strcmp(dir + dl - 5, ".gguf")) return fg_tok_open_gguf(dir, out);
    if (snprintf(tj, sizeof tj, "%s/tokenizer.json", dir) >= (int)sizeof tj ||
        snprintf(tc, sizeof tc, "%s/tokenizer_config.json", dir) >= (int)sizeof tc ||
        snprintf(gc, sizeof gc, "%s/generation_config.json", dir) >= (int)sizeof gc)
        return fg_err_set(FG_EINPUT, "%s: path too long", dir);
    if (access(tj, F_OK) != 0)
        return open_pair(dir, "vocab.json", "merges.txt",
                         " (a Hugging Face model directory has tokenizer.json, or vocab.json and "
                         "merges.txt)", out);
    fg_status st = fg_tok_open_hf(tj, access(tc, F_OK) == 0 ? tc : NULL, out);
    if (!st && access(gc, F_OK) == 0) {
        st = fg_tok_load_generation_config(*out, gc);
        if (st) fg_tok_destroy(out);
    }
    return st;
}

fg_status fg_tok_open_gpt2_cache(fg_tok **out) {
    char dir[PATH_MAX];
    const char *cache = getenv("FLEXGEN_CACHE");
    const char *home = getenv("HOME");
    int n = cache && *cache ? snprintf(dir, sizeof dir, "%s/gpt2", cache)
                            : snprintf(dir, sizeof dir, "%s/.cache/flexgen/gpt2", home ? home : ".");
    if (n >= (int)sizeof dir) return fg_err_set(FG_EINPUT, "FLEXGEN_CACHE: path too long");
    return open_pair(dir, "encoder.json", "vocab.bpe",
                     "\nHINT: the GPT-2 vocabulary is fetched once by scripts/fetch-gpt2-vocab.sh",
                     out);
}

/* ---------------------------------------------------------------- lookups */

int32_t fg_tok_vocab_size(const fg_tok *t) { return t->n_ids; }

const char *fg_tok_token(const fg_tok *t, int32_t id) {
    return id >= 0 && id < t->n_ids ? t->str[id] : NULL;
}

const uint8_t *fg_tok_token_bytes(const fg_tok *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_ids || !t->str[id]) return NULL;
    *len = t->bytes_len[id];
    return t->bytes + t->bytes_off[id];
}

int fg_tok_is_special(const fg_tok *t, int32_t id) {
    return id >= 0 && id < t->n_ids && t->special[id];
}

int fg_tok_is_hf(const fg_tok *t) { return t->hf != NULL; }

fg_status fg_tok_open_file(const char *path, fg_tok **out) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return fg_err_set(FG_EINPUT, "%s: cannot open: %s", path, strerror(errno));
    int c;
    while ((c = fgetc(f)) == ' ' || c == '\t' || c == '\n' || c == '\r') {}
    fclose(f);
    return c == '{' ? fg_tok_open_hf(path, NULL, out) : fg_tok_open_llama2c(path, out);
}

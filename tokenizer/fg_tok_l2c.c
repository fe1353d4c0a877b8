/* fg_tok_l2c.c - llama2.c's tokenizer.bin as a tokenizer: another loader for
 * the tokenizer.json machinery (fg_tok_hf.c), not a second tokenizer.
 *
 * The file: int32 max_token_length, then for each id a float32 score, an
 * int32 length and that many bytes (its piece, spaces as ' ', the byte
 * tokens as "<0xNN>"). llama2.c's run.c encodes: BOS (1), a space before
 * non-empty text, each code point looked up (else its UTF-8 bytes as
 * <0xNN>, id byte + 3), then repeatedly merges the adjacent pair whose
 * concatenation is in the vocabulary with the highest score, the leftmost
 * of equal scores. That is a SentencePiece-style BPE in char mode with byte
 * fallback, and the loader states it as one: pieces with ' ' as "▁", a
 * Prepend + Replace normalizer, the template "<s> $A", and a merge (a, b)
 * for every split of every piece into two pieces, ranked by the piece's
 * score (equal scores, equal ranks: the leftmost pair merges first, as in
 * run.c). Decoding follows run.c too: <0xNN> is its byte, and the leading
 * space of a piece right after BOS is dropped.
 * Ids 0, 1, 2 are <unk>, <s>, </s> (run.c's convention; the file stores
 * BOS and EOS as "\n<s>\n" and "\n</s>\n"); they are special tokens. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fg_tok_hf.h"

#define L2C_MAX_VOCAB (1 << 20)   /* far above any llama2.c vocabulary; keeps counts in int */
#define L2C_UNK 0
#define L2C_BOS 1
#define L2C_EOS 2
#define SP "\xE2\x96\x81"         /* U+2581, SentencePiece's space */

static const char *const special_name[3] = {"<unk>", "<s>", "</s>"};

static void *grow(void *p, size_t n) {
    p = realloc(p, n);
    FG_ASSERT(p);   /* as fg_xmalloc: out of memory is not an input error */
    return p;
}

/* A byte token's piece: "<0xNN>". */
static int is_byte_piece(const char *s) {
    return strlen(s) == 6 && !strncmp(s, "<0x", 3) && s[5] == '>';
}

/* A piece's bytes with ' ' as "▁" (heap string); NULL, error set, for bytes
 * that are not UTF-8 or that already hold "▁" (the mapping would collide). */
static char *piece_string(const char *path, int32_t id, const uint8_t *b, size_t n) {
    size_t bad;
    if (!fg_tok_utf8_valid((const char *)b, n, &bad) || memchr(b, 0, n)) {
        fg_err_set(FG_EINPUT, "%s: token %d: its %zu bytes are not UTF-8 text (byte %zu)", path, id, n,
                   memchr(b, 0, n) ? (size_t)((const uint8_t *)memchr(b, 0, n) - b) : bad);
        return NULL;
    }
    char *s = fg_xmalloc(3 * n + 1), *w = s;
    for (size_t i = 0; i < n; i++) {
        if (i + 3 <= n && !memcmp(b + i, SP, 3)) {
            free(s);
            fg_err_set(FG_EINPUT, "%s: token %d holds U+2581, which this loader uses for the space", path, id);
            return NULL;
        }
        if (b[i] == ' ') memcpy(w, SP, 3), w += 3;
        else *w++ = (char)b[i];
    }
    *w = 0;
    return s;
}

/* The vocabulary of the file: strings[id] (heap) and scores[id]. */
typedef struct {
    int32_t n;
    char **str;
    float *score;
} l2c_vocab;

static void vocab_free(l2c_vocab *v) {
    for (int32_t i = 0; v->str && i < v->n; i++) free(v->str[i]);
    free(v->str);
    free(v->score);
}

static fg_status read_file(const char *path, uint8_t **buf, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return fg_err_set(FG_EINPUT, "%s: cannot open: %s", path, strerror(errno));
    fg_status st = FG_OK;
    size_t cap = 1 << 16, n = 0;
    uint8_t *b = fg_xmalloc(cap);
    for (;;) {
        if (n == cap) b = grow(b, cap *= 2);
        size_t k = fread(b + n, 1, cap - n, f);
        n += k;
        if (k == 0) break;
    }
    if (ferror(f)) st = fg_err_set(FG_ERUNTIME, "%s: read error: %s", path, strerror(errno));
    fclose(f);
    if (st) free(b), b = NULL;
    *buf = b, *size = n;
    return st;
}

/* Parse the file; every length checked against what is left of it. */
static fg_status parse(const char *path, const uint8_t *b, size_t size, l2c_vocab *v) {
    int32_t maxlen;
    if (size < 4) return fg_err_set(FG_EINPUT, "%s: %zu bytes: too short for max_token_length", path, size);
    memcpy(&maxlen, b, 4);
    if (maxlen <= 0 || maxlen > (1 << 16))
        return fg_err_set(FG_EINPUT, "%s: max_token_length is %d, expected 1..65536 (not a llama2.c "
                          "tokenizer.bin?)", path, maxlen);
    size_t off = 4, cap = 0;
    while (off < size) {
        if (v->n == L2C_MAX_VOCAB) return fg_err_set(FG_EINPUT, "%s: more than %d tokens", path, L2C_MAX_VOCAB);
        if (size - off < 8)
            return fg_err_set(FG_EINPUT, "%s: token %d at byte %zu: the file ends inside its score and length "
                              "(%zu bytes left, 8 needed)", path, v->n, off, size - off);
        float score;
        int32_t len;
        memcpy(&score, b + off, 4);
        memcpy(&len, b + off + 4, 4);
        off += 8;
        if (len < 0 || len > maxlen || (size_t)len > size - off)
            return fg_err_set(FG_EINPUT, "%s: token %d at byte %zu: length %d, expected 0..%d and within the "
                              "%zu bytes left", path, v->n, off - 4, len, maxlen, size - off);
        if (!isfinite(score)) return fg_err_set(FG_EINPUT, "%s: token %d: its score is not finite", path, v->n);
        if ((size_t)v->n == cap) {
            cap = cap ? 2 * cap : 1024;
            v->str = grow(v->str, cap * sizeof *v->str);
            v->score = grow(v->score, cap * sizeof *v->score);
        }
        int32_t id = v->n;
        v->str[id] = NULL;
        v->score[id] = score;
        v->n++;
        if (id < 3) {
            v->str[id] = grow(NULL, strlen(special_name[id]) + 1);
            strcpy(v->str[id], special_name[id]);
        } else if (!(v->str[id] = piece_string(path, id, b + off, (size_t)len))) {
            return FG_EINPUT;
        }
        if (!v->str[id][0]) return fg_err_set(FG_EINPUT, "%s: token %d is empty", path, id);
        off += (size_t)len;
    }
    if (v->n < 3)
        return fg_err_set(FG_EINPUT, "%s: %d tokens: a llama2.c vocabulary starts with <unk>, <s> and </s>",
                          path, v->n);
    return FG_OK;
}

/* The tokenizer.json this file is: see the top of the file. */
static json_t *as_tokenizer_json(const l2c_vocab *v) {
    json_t *vocab = json_object(), *merges = json_array(), *added = json_array();
    for (int32_t id = 0; id < v->n; id++) json_object_set_new(vocab, v->str[id], json_integer(id));
    for (int32_t id = 0; id < 3; id++)
        json_array_append_new(added, json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", id, "content",
                                               v->str[id], "single_word", 0, "lstrip", 0, "rstrip", 0,
                                               "normalized", 0, "special", 1));
    /* Every split of a piece into two pieces (at character boundaries; the
     * specials and byte tokens neither split nor take part). */
    for (int32_t id = 3; id < v->n; id++) {
        const char *s = v->str[id];
        size_t n = strlen(s);
        if (is_byte_piece(s)) continue;
        for (size_t k = 1; k < n; k++) {
            if (((uint8_t)s[k] & 0xC0) == 0x80) continue;
            json_t *a = json_stringn(s, k), *b = json_string(s + k);
            json_t *ia = json_object_get(vocab, json_string_value(a)), *ib = json_object_get(vocab, s + k);
            if (ia && ib && json_integer_value(ia) >= 3 && json_integer_value(ib) >= 3 &&
                !is_byte_piece(json_string_value(a)) && !is_byte_piece(s + k))
                json_array_append_new(merges, json_pack("[oo]", a, b));
            else
                json_decref(a), json_decref(b);
        }
    }
    json_t *model = json_pack("{s:s, s:o, s:o, s:b, s:b, s:s}", "type", "BPE", "vocab", vocab, "merges", merges,
                              "byte_fallback", 1, "fuse_unk", 1, "unk_token", "<unk>");
    json_t *norm = json_pack("{s:s, s:[{s:s, s:s}, {s:s, s:{s:s}, s:s}]}", "type", "Sequence", "normalizers",
                             "type", "Prepend", "prepend", SP, "type", "Replace", "pattern", "String", " ",
                             "content", SP);
    json_t *dec = json_pack("{s:s, s:[{s:s, s:{s:s}, s:s}, {s:s}, {s:s}]}", "type", "Sequence", "decoders",
                            "type", "Replace", "pattern", "String", SP, "content", " ", "type", "ByteFallback",
                            "type", "Fuse");
    json_t *post = json_pack("{s:s, s:[{s:{s:s, s:i}}, {s:{s:s, s:i}}], s:{s:{s:s, s:[i], s:[s]}}}", "type",
                             "TemplateProcessing", "single", "SpecialToken", "id", "<s>", "type_id", 0, "Sequence",
                             "id", "A", "type_id", 0, "special_tokens", "<s>", "id", "<s>", "ids", L2C_BOS,
                             "tokens", "<s>");
    return json_pack("{s:o, s:o, s:n, s:o, s:o, s:o}", "model", model, "normalizer", norm, "pre_tokenizer",
                     "decoder", dec, "post_processor", post, "added_tokens", added);
}

/* run.c's order: a merge's rank is its piece's place among the scores,
 * highest first, equal scores sharing a rank. */
typedef struct {
    float score;
    int32_t id;
} scored;

static int by_score_desc(const void *x, const void *y) {
    float a = ((const scored *)x)->score, b = ((const scored *)y)->score;
    return (a < b) - (a > b);
}

static void rank_by_score(fg_tok *t, const l2c_vocab *v) {
    scored *order = fg_xmalloc((size_t)v->n * sizeof *order);
    int32_t *rank = fg_xmalloc((size_t)v->n * sizeof *rank);
    for (int32_t i = 0; i < v->n; i++) order[i] = (scored){v->score[i], i};
    qsort(order, (size_t)v->n, sizeof *order, by_score_desc);
    for (int32_t i = 0, r = 0; i < v->n; i++) {
        if (i > 0 && order[i].score != order[i - 1].score) r++;
        rank[order[i].id] = r;
    }
    for (size_t i = 0; i <= t->merge_mask; i++)
        if (t->merges[i].key != FG_TOK_EMPTY_KEY) t->merges[i].rank = rank[t->merges[i].merged];
    fg_tok_merges_finish(t);
    free(order);
    free(rank);
}

fg_status fg_tok_open_llama2c(const char *path, fg_tok **out) {
    *out = NULL;
    uint8_t *buf = NULL;
    size_t size = 0;
    l2c_vocab v = {0};
    json_t *root = NULL;
    fg_tok *t = NULL;
    fg_status st = read_file(path, &buf, &size);
    if (!st) st = parse(path, buf, size, &v);
    if (!st) {
        root = as_tokenizer_json(&v);
        st = fg_tok_open_hf_root(root, path, &t);
    }
    if (!st && json_object_size(json_object_get(json_object_get(root, "model"), "vocab")) != (size_t)v.n)
        st = fg_err_set(FG_EINPUT, "%s: two tokens have the same piece (%zu distinct of %d)", path,
                        json_object_size(json_object_get(json_object_get(root, "model"), "vocab")), v.n);
    if (!st) {
        rank_by_score(t, &v);
        t->hf->strip_after_bos = 1;
        t->hf->bos_id = L2C_BOS;
        int32_t eos = L2C_EOS;
        st = fg_tok_add_eos_ids(t, &eos, 1);
    }
    json_decref(root);
    vocab_free(&v);
    free(buf);
    if (st) fg_tok_destroy(&t);
    *out = t;
    return st;
}

/* fg_tok_spm.c - the SentencePiece-style side of a tokenizer.json (Llama 2,
 * Mistral, TinyLlama), and the normalizers and decoders any tokenizer.json
 * may have:
 *  - normalizers: Prepend, Replace (String pattern), NFC (libutf8proc), alone
 *    or in a Sequence, applied to each section of text between added tokens;
 *  - "char mode" (no ByteLevel pre-tokenizer): a piece's characters become
 *    the initial BPE symbols; a character model.vocab lacks becomes its
 *    <0xNN> byte tokens (byte_fallback) or unk_token (consecutive ones fused
 *    into one with fuse_unk), as Hugging Face's BPE model does;
 *  - decoders: ByteLevel, or Replace (String), ByteFallback, Strip and Fuse.
 *    The steps before Fuse act on each token alone, so they are applied once
 *    per token at load into the table fg_tok_decode concatenates; a Strip
 *    after Fuse acts on the whole text and is applied by decode;
 *  - segmenting: a piece may be cut before each run of "▁" that follows
 *    another character when no token of model.vocab holds such a boundary
 *    (so no merge crosses it, and nothing fuses across it: "▁" is a token);
 *    Llama 2 and Mistral pass, and their pieces (whole sections of text) then
 *    reach BPE and the word cache a word at a time. */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef FG_HAVE_UTF8PROC
#include <utf8proc.h>
#endif

#include "fg_tok_hf.h"

#define SP "\xE2\x96\x81" /* U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's space */

/* ---------------------------------------------------------------- normalizers */

static char *dup_string(json_t *v, size_t *len) {
    *len = json_string_length(v);
    char *s = fg_xmalloc(*len + 1);
    memcpy(s, json_string_value(v), *len + 1);
    return s;
}

/* A normalizer step (fg_tok_step_fn; CTX is the fg_tok_hf). */
static fg_status parse_norm_step(void *ctx, json_t *o, const char *type, const char *path, const char *where,
                                 size_t i) {
    fg_tok_hf *hf = ctx;
    (void)i;
    if (hf->n_norm == FG_TOK_MAX_STEPS)
        return fg_err_set(FG_EINPUT, "%s: %s: more than %d steps", path, where, FG_TOK_MAX_STEPS);
    fg_tok_norm *n = &hf->norm[hf->n_norm];
    if (!strcmp(type, "Prepend")) {
        json_t *p = json_object_get(o, "prepend");
        if (!json_is_string(p)) return fg_err_set(FG_EINPUT, "%s: %s: Prepend needs a string \"prepend\"", path, where);
        n->kind = FG_NORM_PREPEND;
        n->to = dup_string(p, &n->to_len);
    } else if (!strcmp(type, "Replace")) {
        json_t *pat = json_object_get(o, "pattern"), *c = json_object_get(o, "content");
        json_t *lit = json_object_get(pat, "String");
        if (json_object_get(pat, "Regex"))
            return fg_err_set(FG_EINPUT, "%s: %s: Replace with a Regex pattern is not supported", path, where);
        if (!json_is_string(lit) || !json_string_length(lit) || !json_is_string(c))
            return fg_err_set(FG_EINPUT, "%s: %s: Replace needs a pattern {\"String\": ...} and a string "
                              "\"content\"", path, where);
        n->kind = FG_NORM_REPLACE;
        n->from = dup_string(lit, &n->from_len);
        n->to = dup_string(c, &n->to_len);
    } else if (!strcmp(type, "NFC")) {
#ifndef FG_HAVE_UTF8PROC
        return fg_err_set(FG_EINPUT, "%s: %s type 'NFC' needs libutf8proc, which this build lacks "
                          "(scripts/deps.sh installs libutf8proc-dev)", path, where);
#endif
        n->kind = FG_NORM_NFC;
    } else {
        return fg_err_set(FG_EINPUT, "%s: %s type '%s' is not supported", path, where, type);
    }
    hf->n_norm++;
    return FG_OK;
}

fg_status fg_tok_parse_normalizer(fg_tok_hf *hf, json_t *nz, const char *path) {
    return fg_tok_json_steps(nz, path, "normalizer", "normalizers", parse_norm_step, hf);
}

static uint8_t *buf_at_least(fg_tok_hf *hf, int k, size_t n) {
    if (n > hf->buf_cap[k]) {
        size_t cap = hf->buf_cap[k] ? hf->buf_cap[k] : 4096;
        while (cap < n) cap *= 2;
        free(hf->buf[k]);
        hf->buf[k] = fg_xmalloc(cap);
        hf->buf_cap[k] = cap;
    }
    return hf->buf[k];
}

/* One step from S into buffer K; returns the new length. */
static size_t norm_step(fg_tok_hf *hf, const fg_tok_norm *nm, const uint8_t *s, size_t n, int k) {
    if (nm->kind == FG_NORM_PREPEND) {
        uint8_t *o = buf_at_least(hf, k, n + nm->to_len);
        memcpy(o, nm->to, nm->to_len);
        memcpy(o + nm->to_len, s, n);
        return n + nm->to_len;
    }
    if (nm->kind == FG_NORM_REPLACE) {
        size_t grow = nm->to_len > nm->from_len ? nm->to_len - nm->from_len : 0;
        uint8_t *o = buf_at_least(hf, k, n + (n / nm->from_len + 1) * grow);
        size_t w = 0;
        for (size_t i = 0; i < n;) {
            if (i + nm->from_len <= n && s[i] == (uint8_t)nm->from[0] && !memcmp(s + i, nm->from, nm->from_len)) {
                memcpy(o + w, nm->to, nm->to_len);
                w += nm->to_len;
                i += nm->from_len;
            } else {
                o[w++] = s[i++];
            }
        }
        return w;
    }
#ifdef FG_HAVE_UTF8PROC
    utf8proc_uint8_t *d = NULL;
    utf8proc_ssize_t m = utf8proc_map(s, (utf8proc_ssize_t)n, &d, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (m < 0) { /* valid UTF-8 always maps; out of memory is the only way here */
        fprintf(stderr, "tokenizer: NFC failed: %s\n", utf8proc_errmsg(m));
        abort();
    }
    uint8_t *o = buf_at_least(hf, k, (size_t)m + 1);
    memcpy(o, d, (size_t)m);
    free(d);
    return (size_t)m;
#else
    (void)s;
    return n; /* not reached: refused at load */
#endif
}

/* Whether S can change under NFC: only characters from U+0300 up (a lead
 * byte from 0xCC) can; below that every character is stable and starts
 * nothing a later one composes with. */
static int nfc_may_change(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] >= 0xCC) return 1;
    return 0;
}

const uint8_t *fg_tok_normalize(fg_tok *t, const uint8_t *s, size_t n, size_t *out_n) {
    fg_tok_hf *hf = t->hf;
    const uint8_t *cur = s;
    int k = 0;
    for (int i = 0; i < hf->n_norm; i++) {
        const fg_tok_norm *nm = &hf->norm[i];
        if (!n) break; /* nothing to prepend to; nothing to replace */
        if (nm->kind == FG_NORM_NFC && !nfc_may_change(cur, n)) continue;
        if (nm->kind == FG_NORM_REPLACE && !memmem(cur, n, nm->from, nm->from_len)) continue;
        n = norm_step(hf, nm, cur, n, k);
        cur = hf->buf[k];
        k ^= 1;
    }
    *out_n = n;
    return cur;
}

/* ---------------------------------------------------------------- char mode */

long fg_tok_char_symbols(fg_tok *t, const uint8_t *w, size_t n) {
    const fg_tok_hf *hf = t->hf;
    int32_t *sym = t->sym;
    size_t k = 0;
    int prev_unk = 0;
    for (size_t i = 0; i < n;) {
        int len = fg_tok_utf8_seq(w + i, n - i);   /* the text is valid UTF-8 */
        int32_t id = w[i] < 0x80 ? hf->ascii_id[w[i]] : fg_tok_vocab_find(t, (const char *)w + i, (size_t)len);
        if (id >= 0 && !hf->in_model[id]) id = -1;
        if (id >= 0) {
            sym[k++] = id;
            prev_unk = 0;
        } else {
            int all = hf->byte_fallback;
            for (int j = 0; j < len && all; j++) all = hf->fb_id[w[i + j]] >= 0;
            if (all) {
                for (int j = 0; j < len; j++) sym[k++] = hf->fb_id[w[i + j]];
                prev_unk = 0;
            } else if (hf->unk_id >= 0) {
                if (!(hf->fuse_unk && prev_unk)) sym[k++] = hf->unk_id;
                prev_unk = 1;
            } else {
                fg_err_set(FG_EINPUT, "the character \"%.*s\" has no token (the tokenizer has no "
                           "byte_fallback and no unk_token)", len, (const char *)w + i);
                return -1;
            }
        }
        i += (size_t)len;
    }
    return (long)k;
}

void fg_tok_spm_check_segment(fg_tok *t) {
    fg_tok_hf *hf = t->hf;
    int32_t sp = fg_tok_id(t, SP);
    hf->spm_segment = 0;
    if (sp < 0 || !hf->in_model[sp]) return;
    for (int32_t id = 0; id < t->n_ids; id++) {
        if (!hf->in_model[id]) continue;
        const char *s = t->str[id];
        if (!s[0]) continue;
        for (const char *p = strstr(s + 1, SP); p; p = strstr(p + 3, SP))
            if (p - s < 3 || memcmp(p - 3, SP, 3)) return;   /* a character, then "▁" */
    }
    hf->spm_segment = 1;
}

/* ---------------------------------------------------------------- decoder */

typedef struct {
    int kind;                 /* 'R' Replace, 'B' ByteFallback, 'S' Strip */
    const char *from, *to;
    size_t from_len, to_len;
    int start, stop;
} dec_step;

/* One token through the per-token steps into O (room for its worst case). */
static size_t decode_token(const dec_step *st, int n_st, const char *s, uint8_t *o, uint8_t *tmp) {
    size_t n = strlen(s);
    memcpy(o, s, n);
    for (int i = 0; i < n_st; i++) {
        const dec_step *d = &st[i];
        if (d->kind == 'R') {
            size_t w = 0;
            for (size_t j = 0; j < n;)
                if (j + d->from_len <= n && !memcmp(o + j, d->from, d->from_len)) {
                    memcpy(tmp + w, d->to, d->to_len);
                    w += d->to_len, j += d->from_len;
                } else {
                    tmp[w++] = o[j++];
                }
            memcpy(o, tmp, w);
            n = w;
        } else if (d->kind == 'B') {
            unsigned v;
            char c;
            if (n == 6 && !memcmp(o, "<0x", 3) && o[5] == '>' && sscanf((const char *)o + 3, "%2x%c", &v, &c) == 2 &&
                c == '>' && strchr("0123456789abcdefABCDEF", o[3]) && strchr("0123456789abcdefABCDEF", o[4])) {
                o[0] = (uint8_t)v;
                n = 1;
            }
        } else {
            size_t a = 0, b = n;
            for (int j = 0; j < d->start && b - a >= d->from_len && !memcmp(o + a, d->from, d->from_len); j++)
                a += d->from_len;
            size_t fl = d->from_len;
            for (int j = 0; j < d->stop && b - a >= fl && !memcmp(o + b - fl, d->from, fl); j++) b -= fl;
            memmove(o, o + a, b - a);
            n = b - a;
        }
    }
    return n;
}

/* Every token through the per-token steps into t->bytes. */
static void spm_bytes(fg_tok *t, const dec_step *st, int n_st) {
    size_t expand = 1, longest = 0, total = 0;
    for (int i = 0; i < n_st; i++)
        if (st[i].kind == 'R' && st[i].to_len > st[i].from_len) expand *= st[i].to_len;
    for (int32_t id = 0; id < t->n_ids; id++)
        if (t->str[id]) {
            size_t l = strlen(t->str[id]);
            total += l;
            if (l > longest) longest = l;
        }
    size_t cap = (longest + 1) * expand + 8, bcap = total + 64, w = 0;
    uint8_t *o = fg_xmalloc(cap), *tmp = fg_xmalloc(cap);
    t->bytes = fg_xmalloc(bcap);
    t->bytes_off = fg_xcalloc((size_t)t->n_ids, sizeof *t->bytes_off);
    t->bytes_len = fg_xcalloc((size_t)t->n_ids, sizeof *t->bytes_len);
    t->special = fg_xcalloc((size_t)t->n_ids, 1);
    for (int32_t id = 0; id < t->n_ids; id++) {
        if (!t->str[id]) continue;
        size_t n = decode_token(st, n_st, t->str[id], o, tmp);
        if (w + n > bcap) {
            while (w + n > bcap) bcap *= 2;
            uint8_t *b = fg_xmalloc(bcap);
            memcpy(b, t->bytes, w);
            free(t->bytes);
            t->bytes = b;
        }
        t->bytes_off[id] = (uint32_t)w;
        t->bytes_len[id] = (uint32_t)n;
        memcpy(t->bytes + w, o, n);
        w += n;
    }
    free(o);
    free(tmp);
}

/* Metaspace decoder, as the first step: each replacement becomes a space,
 * except in the first token, where it is dropped (unless prepend_scheme is
 * "never"; old files: add_prefix_space false). */
static fg_status dec_metaspace(fg_tok *t, json_t *o, const char *path, const char *where, dec_step *st, int *n_st) {
    fg_tok_hf *hf = t->hf;
    json_t *rep = json_object_get(o, "replacement"), *sch = json_object_get(o, "prepend_scheme");
    json_t *aps = json_object_get(o, "add_prefix_space");
    if (*n_st || hf->dec_rep)
        return fg_err_set(FG_EINPUT, "%s: %s: a Metaspace decoder is supported only as the first step", path, where);
    if (!json_is_string(rep) || !json_string_length(rep) || (sch && !json_is_string(sch)))
        return fg_err_set(FG_EINPUT, "%s: %s: Metaspace needs a string \"replacement\"", path, where);
    const char *s = json_string_value(sch);
    hf->meta_dec_first = s ? strcmp(s, "never") != 0 : !(aps && json_is_false(aps));
    hf->dec_rep_len = json_string_length(rep);
    hf->dec_rep = fg_xmalloc(hf->dec_rep_len + 1);
    memcpy(hf->dec_rep, json_string_value(rep), hf->dec_rep_len + 1);
    st[(*n_st)++] = (dec_step){'R', hf->dec_rep, " ", hf->dec_rep_len, 1, 0, 0};
    return FG_OK;
}

size_t fg_tok_meta_first(const fg_tok *t, int32_t id, uint8_t *out) {
    const fg_tok_hf *hf = t->hf;
    const char *s = t->str[id];
    if (!strstr(s, hf->dec_rep)) {
        memcpy(out, t->bytes + t->bytes_off[id], t->bytes_len[id]);
        return t->bytes_len[id];
    }
    size_t w = 0;
    for (const char *p = s; *p;)
        if (!strncmp(p, hf->dec_rep, hf->dec_rep_len)) p += hf->dec_rep_len;
        else out[w++] = (uint8_t)*p++;
    return w;
}

/* One decoder step of a char-mode tokenizer into ST (before Fuse) or the
 * whole-text Strip (after it). */
static fg_status parse_dec_step(fg_tok *t, json_t *o, const char *path, const char *where, int fused,
                                int *seen_fallback, dec_step *st, int *n_st) {
    fg_tok_hf *hf = t->hf;
    const char *type = fg_tok_json_type(o);
    if (!type) return fg_err_set(FG_EINPUT, "%s: %s: expected an object with a \"type\"", path, where);
    if (!strcmp(type, "Fuse")) return FG_OK;
    if (!strcmp(type, "ByteLevel"))
        return fg_err_set(FG_EINPUT, "%s: %s: a ByteLevel decoder needs a ByteLevel pre_tokenizer", path, where);
    int strip = !strcmp(type, "Strip"), replace = !strcmp(type, "Replace");
    if (!strcmp(type, "Metaspace"))
        return fused ? fg_err_set(FG_EINPUT, "%s: %s: Metaspace after Fuse is not supported", path, where)
                     : dec_metaspace(t, o, path, where, st, n_st);
    if (!strip && !replace && strcmp(type, "ByteFallback"))
        return fg_err_set(FG_EINPUT, "%s: %s type '%s' is not supported", path, where, type);
    if (hf->dec_rep && !fused && type[0] != 'B')
        return fg_err_set(FG_EINPUT, "%s: %s: only ByteFallback, Fuse and Strip after Fuse may follow a Metaspace "
                          "decoder", path, where);
    if (fused && !strip)
        return fg_err_set(FG_EINPUT, "%s: %s: %s after Fuse is not supported", path, where, type);
    if (replace && *seen_fallback)
        return fg_err_set(FG_EINPUT, "%s: %s: Replace after ByteFallback is not supported", path, where);
    if (*n_st == FG_TOK_MAX_STEPS)
        return fg_err_set(FG_EINPUT, "%s: %s: more than %d steps", path, where, FG_TOK_MAX_STEPS);
    dec_step *d = &st[*n_st];
    if (replace) {
        json_t *lit = json_object_get(json_object_get(o, "pattern"), "String"), *c = json_object_get(o, "content");
        if (!json_is_string(lit) || !json_string_length(lit) || !json_is_string(c))
            return fg_err_set(FG_EINPUT, "%s: %s: Replace needs a pattern {\"String\": ...} (Regex is not "
                              "supported) and a string \"content\"", path, where);
        *d = (dec_step){'R', json_string_value(lit), json_string_value(c), json_string_length(lit),
                        json_string_length(c), 0, 0};
    } else if (strip) {
        json_t *c = json_object_get(o, "content"), *a = json_object_get(o, "start"), *b = json_object_get(o, "stop");
        if (!json_is_string(c) || !json_string_length(c) || !json_is_integer(a) || !json_is_integer(b) ||
            json_integer_value(a) < 0 || json_integer_value(b) < 0 || json_integer_value(a) > 1000 ||
            json_integer_value(b) > 1000)
            return fg_err_set(FG_EINPUT, "%s: %s: Strip needs a string \"content\" and counts \"start\", "
                              "\"stop\"", path, where);
        *d = (dec_step){'S', json_string_value(c), NULL, json_string_length(c), 0,
                        (int)json_integer_value(a), (int)json_integer_value(b)};
        if (fused) {
            if (hf->strip_content)
                return fg_err_set(FG_EINPUT, "%s: %s: a second Strip after Fuse is not supported", path, where);
            hf->strip_len = d->from_len;
            hf->strip_content = fg_xmalloc(d->from_len + 1);
            memcpy(hf->strip_content, d->from, d->from_len + 1);
            hf->strip_start = d->start, hf->strip_stop = d->stop;
            return FG_OK;
        }
    } else {
        *d = (dec_step){'B', NULL, NULL, 0, 0, 0, 0};
        *seen_fallback = 1;
    }
    (*n_st)++;
    return FG_OK;
}

fg_status fg_tok_parse_decoder(fg_tok *t, json_t *dec, const char *path) {
    fg_tok_hf *hf = t->hf;
    if (!dec || json_is_null(dec))
        return fg_err_set(FG_EINPUT, "%s: decoder null is not supported (ids could not become text)", path);
    const char *type = fg_tok_json_type(dec);
    json_t *steps = json_object_get(dec, "decoders");
    int seq = type && !strcmp(type, "Sequence");
    if (seq && !json_is_array(steps))
        return fg_err_set(FG_EINPUT, "%s: decoder: a Sequence needs a \"decoders\" array", path);
    size_t n = seq ? json_array_size(steps) : 1;
    if (hf->byte_level) {
        json_t *only = seq ? json_array_get(steps, 0) : dec;
        const char *ot = fg_tok_json_type(only);
        if (n != 1 || !ot || strcmp(ot, "ByteLevel"))
            return fg_err_set(FG_EINPUT, "%s: decoder: with a ByteLevel pre_tokenizer only the ByteLevel decoder "
                              "is supported", path);
        return fg_tok_build_bytes(t, path, hf->is_added);
    }
    dec_step st[FG_TOK_MAX_STEPS];
    int n_st = 0, fused = 0, seen_fallback = 0;
    for (size_t i = 0; i < n; i++) {
        char where[64];
        snprintf(where, sizeof where, seq ? "decoder.decoders[%zu]" : "decoder", i);
        json_t *o = seq ? json_array_get(steps, i) : dec;
        fg_status s = parse_dec_step(t, o, path, where, fused, &seen_fallback, st, &n_st);
        if (s) return s;
        const char *ot = fg_tok_json_type(o);
        if (ot && !strcmp(ot, "Fuse")) fused = 1;
    }
    spm_bytes(t, st, n_st);
    return FG_OK;
}

/* fg_tok_hfenc.c - encoding with a tokenizer.json, in Hugging Face's order:
 *  1. added tokens are found in the raw text (a byte trie, leftmost match,
 *     longest first; special ones only with FG_TOK_PARSE_SPECIAL), taking
 *     the white space beside them where lstrip / rstrip say so; the text
 *     between them is a section;
 *  2. each section is normalized, and added tokens with normalized: true are
 *     found in the result the same way;
 *  3. each remaining part is pre-tokenized (ByteLevel's prefix space or
 *     Metaspace here, then the splits of fg_tok_split.c) into pieces, and
 *     each piece (cut before its "▁" runs in char mode where that is exact,
 *     fg_tok_spm.c) goes through the word cache and BPE (fg_tok_piece).
 * The template's special tokens around the result are fg_tok_encode_ex's.
 * Also the decoder's whole-text Strip, which fg_tok_decode calls. */
#define _GNU_SOURCE /* memmem */
#include <string.h>

#include "fg_tok_hf.h"

#define SP "\xE2\x96\x81" /* "▁" */

/* ---------------------------------------------------------------- added-token trie */

static int32_t trie_node(fg_tok_trie *tr, uint8_t byte) {
    if (tr->n == tr->cap) {
        size_t cap = tr->cap ? 2 * tr->cap : 64;
        fg_tok_trie_node *nodes = fg_xmalloc(cap * sizeof *nodes);
        if (tr->n) memcpy(nodes, tr->nodes, tr->n * sizeof *nodes);
        free(tr->nodes);
        tr->nodes = nodes, tr->cap = cap;
    }
    tr->nodes[tr->n] = (fg_tok_trie_node){-1, -1, -1, byte};
    return (int32_t)tr->n++;
}

static int32_t trie_child(const fg_tok_trie *tr, int32_t node, uint8_t byte) {
    for (int32_t c = tr->nodes[node].child; c >= 0; c = tr->nodes[c].sibling)
        if (tr->nodes[c].byte == byte) return c;
    return -1;
}

fg_status fg_tok_trie_add(fg_tok_trie *tr, const char *s, size_t n, int32_t added) {
    if (!tr->n) trie_node(tr, 0);
    int32_t node = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t c = trie_child(tr, node, (uint8_t)s[i]);
        if (c < 0) {
            c = trie_node(tr, (uint8_t)s[i]);
            tr->nodes[c].sibling = tr->nodes[node].child;
            tr->nodes[node].child = c;
        }
        node = c;
    }
    if (tr->nodes[node].added < 0) tr->nodes[node].added = added;   /* a repeated content: the first */
    tr->first[(uint8_t)s[0]] = 1;
    return FG_OK;
}

void fg_tok_trie_free(fg_tok_trie *tr) {
    free(tr->nodes);
    memset(tr, 0, sizeof *tr);
}

/* The longest added token allowed here that starts at s[0]: its index in
 * hf->added, length in *len; -1 when none. */
static int32_t trie_match(const fg_tok_hf *hf, const fg_tok_trie *tr, const uint8_t *s, size_t n, int special,
                          size_t *len) {
    int32_t node = 0, best = -1;
    for (size_t j = 0; j < n; j++) {
        node = trie_child(tr, node, s[j]);
        if (node < 0) break;
        int32_t a = tr->nodes[node].added;
        if (a >= 0 && (special || !hf->added[a].special)) best = a, *len = j + 1;
    }
    return best;
}

/* ---------------------------------------------------------------- white space */

/* Length of the White_Space character at s[0..n) (Rust's char::is_whitespace),
 * or 0. */
static int ws_at(const uint8_t *s, size_t n) {
    uint8_t c = s[0];
    if (c == ' ' || (c >= 0x09 && c <= 0x0D)) return 1;
    if (n >= 2 && c == 0xC2 && (s[1] == 0x85 || s[1] == 0xA0)) return 2;
    if (n < 3) return 0;
    uint32_t cp = (uint32_t)(c & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
    if ((c & 0xF0) != 0xE0) return 0;
    return cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
                   cp == 0x205F || cp == 0x3000 ? 3 : 0;
}

/* Start of the white space that ends s[lo..end): walks back a character at a time. */
static size_t ws_back(const uint8_t *s, size_t lo, size_t end) {
    while (end > lo) {
        size_t p = end - 1;
        while (p > lo && (s[p] & 0xC0) == 0x80) p--;
        if (ws_at(s + p, end - p) != (int)(end - p)) break;
        end = p;
    }
    return end;
}

/* ---------------------------------------------------------------- sections */

static fg_tok_ids *ids_push(fg_tok_ids *o, int32_t id) {
    fg_tok_ids_reserve(o, 1);
    o->v[o->n++] = id;
    return o;
}

/* Pre-tokenize s[0..n) and BPE each piece. */
static fg_status pieces(fg_tok *t, const uint8_t *s, size_t n, fg_tok_ids *o) {
    fg_tok_hf *hf = t->hf;
    hf->pieces.n = 0;
    fg_status st = fg_tok_pretok(hf, s, n, 0, 0, &hf->pieces);
    for (size_t i = 0; i < hf->pieces.n && !st; i++) {
        const uint8_t *p = s + hf->pieces.off[i];
        size_t len = hf->pieces.len[i];
        if (!hf->spm_segment) {
            st = fg_tok_piece(t, p, len, o);
            continue;
        }
        /* cut before each "▁" that follows another character */
        size_t a = 0;
        for (size_t j = 1; j + 3 <= len && !st; j++) {
            if (memcmp(p + j, SP, 3) || (j >= 3 && !memcmp(p + j - 3, SP, 3))) continue;
            st = fg_tok_piece(t, p + a, j - a, o);
            a = j;
        }
        if (!st) st = fg_tok_piece(t, p + a, len - a, o);
    }
    return st;
}

/* The scratch buffer that does not hold S (S may point into the middle of
 * one: a part of a normalized section). */
static int other_buf(const fg_tok_hf *hf, const uint8_t *s) {
    return hf->buf[0] && s >= hf->buf[0] && s < hf->buf[0] + hf->buf_cap[0] ? 1 : 0;
}

/* Scratch buffer K with room for N bytes. */
static uint8_t *scratch(fg_tok_hf *hf, int k, size_t n) {
    if (hf->buf_cap[k] < n) {
        free(hf->buf[k]);
        hf->buf_cap[k] = 2 * n > 4096 ? 2 * n : 4096;
        hf->buf[k] = fg_xmalloc(hf->buf_cap[k]);
    }
    return hf->buf[k];
}

/* Metaspace: spaces become the replacement, which also goes first where
 * prepend_scheme says (AT0: this part starts the text) and the part does not
 * start with it. Into the scratch buffer S is not in. */
static const uint8_t *metaspace(fg_tok_hf *hf, const uint8_t *s, size_t *n, int at0) {
    const char *rep = hf->meta_rep;
    size_t rl = hf->meta_rep_len, m = *n, w = 0;
    uint8_t *o = scratch(hf, other_buf(hf, s), (m + 1) * rl);
    int starts = s[0] == ' ' || (m >= rl && !memcmp(s, rep, rl));
    if (!starts && (hf->meta_scheme == 2 || (hf->meta_scheme == 1 && at0))) memcpy(o, rep, rl), w = rl;
    for (size_t i = 0; i < m; i++)
        if (s[i] == ' ') memcpy(o + w, rep, rl), w += rl;
        else o[w++] = s[i];
    *n = w;
    return o;
}

/* A normalized part: ByteLevel's prefix space or Metaspace, then pieces. AT0:
 * the part starts the text. */
static fg_status part(fg_tok *t, const uint8_t *s, size_t n, int at0, fg_tok_ids *o) {
    fg_tok_hf *hf = t->hf;
    if (!n) return FG_OK;
    if (hf->meta_rep) {
        s = metaspace(hf, s, &n, at0);
    } else if (hf->prefix_space && s[0] != ' ') {
        uint8_t *b = scratch(hf, other_buf(hf, s), n + 1);
        b[0] = ' ';
        memcpy(b + 1, s, n);
        s = b, n++;
    }
    return pieces(t, s, n, o);
}

typedef fg_status (*part_fn)(fg_tok *, const uint8_t *, size_t, int special, int at0, fg_tok_ids *);

/* Splits s[0..n) at the added tokens of TR; the parts between go to FN. AT0:
 * S starts the text. */
static fg_status split_added(fg_tok *t, const fg_tok_trie *tr, const uint8_t *s, size_t n, int special, int at0,
                             part_fn fn, fg_tok_ids *o) {
    const fg_tok_hf *hf = t->hf;
    size_t start = 0;
    fg_status st = FG_OK;
    for (size_t i = 0; i < n && !st;) {
        size_t len = 0;
        int32_t a = tr->n && tr->first[s[i]] ? trie_match(hf, tr, s + i, n - i, special, &len) : -1;
        if (a < 0) {
            i++;
            continue;
        }
        const fg_tok_added *ad = &hf->added[a];
        size_t left = ad->lstrip ? ws_back(s, start, i) : i, right = i + len;
        if (ad->rstrip)
            for (int w; right < n && (w = ws_at(s + right, n - right)) > 0;) right += (size_t)w;
        st = fn(t, s + start, left - start, special, at0 && start == 0, o);
        ids_push(o, ad->id);
        start = i = right;
    }
    if (!st) st = fn(t, s + start, n - start, special, at0 && start == 0, o);
    return st;
}

static fg_status normed_part(fg_tok *t, const uint8_t *s, size_t n, int special, int at0, fg_tok_ids *o) {
    (void)special;
    return part(t, s, n, at0, o);
}

/* A section between raw added tokens: normalize, then the normalized added
 * tokens, then pieces. */
static fg_status section(fg_tok *t, const uint8_t *s, size_t n, int special, int at0, fg_tok_ids *o) {
    if (!n) return FG_OK;
    size_t m;
    const uint8_t *norm = fg_tok_normalize(t, s, n, &m);
    if (t->hf->normed.n) return split_added(t, &t->hf->normed, norm, m, special, at0, normed_part, o);
    return part(t, norm, m, at0, o);
}

fg_status fg_tok_hf_encode(fg_tok *t, const char *text, size_t len, unsigned flags, fg_tok_ids *o) {
    int special = (flags & FG_TOK_PARSE_SPECIAL) && !t->hf->split_special;
    return split_added(t, &t->hf->raw, (const uint8_t *)text, len, special, 1, section, o);
}

void fg_tok_hf_strip(const fg_tok *t, uint8_t *out, size_t *len) {
    const fg_tok_hf *hf = t->hf;
    if (!hf || !hf->strip_content) return;
    size_t a = 0, b = *len, sl = hf->strip_len;
    for (int j = 0; j < hf->strip_start && b - a >= sl && !memcmp(out + a, hf->strip_content, sl); j++) a += sl;
    for (int j = 0; j < hf->strip_stop && b - a >= sl && !memcmp(out + b - sl, hf->strip_content, sl); j++) b -= sl;
    memmove(out, out + a, b - a);
    *len = b - a;
    out[*len] = 0;
}

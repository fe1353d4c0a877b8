/* fg_tok_decode.c - ids -> text, and the UTF-8 rules both directions use:
 * strict validation for input (encode refuses what is not UTF-8) and
 * replacement for output (a token boundary may cut a character in two). */
#include <string.h>

#include "fg_tok_hf.h"

int fg_tok_utf8_seq(const uint8_t *s, size_t n) {
    uint8_t b = s[0];
    if (b < 0x80) return 1;
    int len;
    uint8_t lo = 0x80, hi = 0xBF; /* the second byte's range: Unicode Table 3-7 */
    if (b >= 0xC2 && b <= 0xDF) len = 2;
    else if (b == 0xE0) len = 3, lo = 0xA0;
    else if (b >= 0xE1 && b <= 0xEC) len = 3;
    else if (b == 0xED) len = 3, hi = 0x9F; /* not a surrogate */
    else if (b >= 0xEE && b <= 0xEF) len = 3;
    else if (b == 0xF0) len = 4, lo = 0x90;
    else if (b >= 0xF1 && b <= 0xF3) len = 4;
    else if (b == 0xF4) len = 4, hi = 0x8F; /* not above U+10FFFF */
    else return -1;
    if (n < 2 || s[1] < lo || s[1] > hi) return -1;
    for (int i = 2; i < len; i++)
        if ((size_t)i >= n || (s[i] & 0xC0) != 0x80) return -i;
    return len;
}

int fg_tok_utf8_valid(const char *buf, size_t len, size_t *bad) {
    const uint8_t *s = (const uint8_t *)buf;
    size_t i = 0;
    while (i < len) {
        /* ASCII runs are most text: skip them 8 bytes at a time. */
        while (i + 8 <= len) {
            uint64_t v;
            memcpy(&v, s + i, 8);
            if (v & 0x8080808080808080ULL) break;
            i += 8;
        }
        if (i >= len) break;
        int k = fg_tok_utf8_seq(s + i, len - i);
        if (k < 0) {
            if (bad) *bad = i;
            return 0;
        }
        i += (size_t)k;
    }
    return 1;
}

fg_status fg_tok_decode(fg_tok *t, const int32_t *ids, size_t n, int skip_special, char **text,
                        size_t *len) {
    *text = NULL;
    *len = 0;
    size_t raw_len = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_ids || !t->str[ids[i]])
            return fg_err_set(FG_EINPUT, "token id %d at position %zu is not in the vocabulary "
                              "(ids 0..%d)", ids[i], i, t->n_ids - 1);
        if (!(skip_special && t->special[ids[i]])) raw_len += t->bytes_len[ids[i]];
    }
    uint8_t *raw = fg_xmalloc(raw_len + 1);
    size_t w = 0;
    int first = 1;
    for (size_t i = 0; i < n; i++) {
        if (skip_special && t->special[ids[i]]) continue;
        if (first && t->hf && t->hf->meta_dec_first) {
            w += fg_tok_meta_first(t, ids[i], raw + w);   /* never longer than its bytes */
        } else if (i > 0 && t->hf && t->hf->strip_after_bos && ids[i - 1] == t->hf->bos_id &&
                   t->bytes_len[ids[i]] && t->bytes[t->bytes_off[ids[i]]] == ' ') {
            memcpy(raw + w, t->bytes + t->bytes_off[ids[i]] + 1, t->bytes_len[ids[i]] - 1);
            w += t->bytes_len[ids[i]] - 1;
        } else {
            memcpy(raw + w, t->bytes + t->bytes_off[ids[i]], t->bytes_len[ids[i]]);
            w += t->bytes_len[ids[i]];
        }
        first = 0;
    }
    raw_len = w;
    /* U+FFFD (3 bytes) replaces at least one byte, so 3x bounds the output. */
    uint8_t *out = fg_xmalloc(3 * raw_len + 1);
    size_t o = 0;
    for (size_t i = 0; i < raw_len;) {
        int k = fg_tok_utf8_seq(raw + i, raw_len - i);
        if (k > 0) {
            memcpy(out + o, raw + i, (size_t)k);
            o += (size_t)k;
            i += (size_t)k;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += (size_t)-k;
        }
    }
    free(raw);
    out[o] = 0;
    fg_tok_hf_strip(t, out, &o);
    *text = (char *)out;
    *len = o;
    return FG_OK;
}

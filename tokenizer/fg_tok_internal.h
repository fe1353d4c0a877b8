/* fg_tok_internal.h - the tokenizer's object and the small hash helpers its
 * files share (loading in fg_tok_load.c, encoding in fg_tok_encode.c,
 * decoding and UTF-8 handling in fg_tok_decode.c). Not for callers. */
#ifndef FG_TOK_INTERNAL_H
#define FG_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdint.h>
#include <string.h>

#include "fg_tokenizer.h"

/* One merge of merges.txt, keyed by its pair of ids. */
typedef struct {
    uint64_t key;   /* (uint64)left << 32 | right; FG_TOK_EMPTY_KEY when free */
    int32_t rank;   /* 0-based line among the merges: lower merges first */
    int32_t merged; /* id of left+right */
} fg_tok_merge;
#define FG_TOK_EMPTY_KEY UINT64_MAX

/* One cached word: its bytes and the ids BPE made of them, in two arenas. */
typedef struct {
    uint64_t hash;
    uint32_t key_off, key_len; /* in cache_keys; key_len 0 marks a free slot */
    uint32_t ids_off, n_ids;   /* in cache_ids */
} fg_tok_cache_slot;

/* Heap entry of the long-word BPE: a candidate merge at symbol POS. */
typedef struct {
    int32_t rank, pos, left, right;
} fg_tok_cand;

struct fg_tok {
    /* vocabulary: ids from vocab.json, possibly with holes */
    int32_t n_ids;          /* one past the largest id */
    char **str;             /* (n_ids) vocab.json strings, NULL in holes */
    char *str_arena;
    uint32_t *bytes_off;    /* (n_ids) into bytes: what each token decodes to */
    uint32_t *bytes_len;    /* (n_ids) */
    uint8_t *bytes;
    uint8_t *special;       /* (n_ids) 1 for <s>, </s>, <pad>, <unk>, <|endoftext|> */
    int32_t *vocab_slots;   /* string -> id, open addressing, -1 free */
    size_t vocab_mask;
    int32_t byte_id[256];   /* id of each byte's bytes_to_unicode character */

    /* merges.txt */
    fg_tok_merge *merges;   /* open addressing */
    size_t merge_mask;
    int causal; /* every merge ranks after those making its inputs: see bpe_heap */

    /* GPT-2's pre-split */
    pcre2_code *re;
    pcre2_match_data *md;
    int jit;

    /* word cache: raw bytes of a pre-split piece -> ids */
    int cache_on;
    fg_tok_cache_slot *cache;
    size_t cache_mask, cache_count;
    uint8_t *cache_keys;
    size_t cache_keys_len, cache_keys_cap;
    int32_t *cache_ids;
    size_t cache_ids_len, cache_ids_cap;

    /* scratch for BPE, grown to the longest word seen */
    size_t scratch_cap;
    int32_t *sym, *rank, *mrg, *next, *prev;
    fg_tok_cand *heap;
};

static inline uint64_t fg_tok_mix64(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

/* Hash of a short byte string (words and vocab strings): 8 bytes a step. */
static inline uint64_t fg_tok_hash(const void *p, size_t n) {
    const uint8_t *s = p;
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        h = (h ^ v) * 0x100000001b3ULL;
        h ^= h >> 29;
        s += 8;
        n -= 8;
    }
    uint64_t v = 0;
    memcpy(&v, s, n);
    return fg_tok_mix64(h ^ v);
}

static inline const fg_tok_merge *fg_tok_merge_find(const fg_tok *t, int32_t a, int32_t b) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t i = fg_tok_mix64(key) & t->merge_mask;
    for (;;) {
        const fg_tok_merge *m = &t->merges[i];
        if (m->key == key) return m;
        if (m->key == FG_TOK_EMPTY_KEY) return NULL;
        i = (i + 1) & t->merge_mask;
    }
}

/* Length of the well-formed UTF-8 sequence at S[0..N) (1..4), or, when it is
 * ill-formed, minus the length of its maximal subpart (Unicode's "maximal
 * subpart" rule, which Python's errors="replace" and WHATWG decoders share). */
int fg_tok_utf8_seq(const uint8_t *s, size_t n);

/* Drop the word cache's contents (keeps its memory). */
void fg_tok_cache_clear(fg_tok *t);

#endif

/* fg_tok_internal.h - the tokenizer's object and the small hash helpers its
 * files share (loading in fg_tok_load.c, encoding in fg_tok_encode.c,
 * decoding and UTF-8 handling in fg_tok_decode.c; what a tokenizer.json adds
 * is in fg_tok_hf.h). Not for callers. */
#ifndef FG_TOK_INTERNAL_H
#define FG_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
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

struct fg_tok_hf;

/* A growing list of ids (encode's output). */
typedef struct {
    int32_t *v;
    size_t n, cap;
} fg_tok_ids;

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
    int32_t bos_eos;        /* vocab.json: </s>, else <|endoftext|>, else -1 */
    int32_t *eos;           /* the ids that end a generation (fg_tok_eos_ids) */
    size_t n_eos;

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

    struct fg_tok_hf *hf;   /* tokenizer.json's pipeline; NULL for vocab.json + merges.txt */
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

void fg_tok_ids_reserve(fg_tok_ids *o, size_t more);

/* BPE of one pre-tokenized piece w[0..n) (its raw bytes; the word cache's
 * key), appended to O. FG_EINPUT only for a tokenizer.json model that has no
 * token for a character (no byte fallback, no unk_token). */
fg_status fg_tok_piece(fg_tok *t, const uint8_t *w, size_t n, fg_tok_ids *o);

/* Loading, shared by vocab.json + merges.txt (fg_tok_load.c) and
 * tokenizer.json (fg_tok_hf.c). fg_tok_vocab_from_json fills t->str from an
 * object mapping strings to ids, leaving room for ids up to MIN_IDS - 1 and
 * EXTRA_CHARS more bytes of strings (added tokens) at t->str_arena +
 * *arena_used; fg_tok_vocab_index then builds the string -> id table. WHERE
 * names the object in messages ("" for a whole vocab.json). */
fg_status fg_tok_vocab_from_json(fg_tok *t, json_t *obj, const char *path, const char *where,
                                 int32_t min_ids, size_t extra_chars, size_t *arena_used);
void fg_tok_vocab_index(fg_tok *t);
int32_t fg_tok_vocab_find(const fg_tok *t, const char *s, size_t n);
/* GPT-2's byte map into t->bytes (tokens marked in RAW keep their own bytes)
 * and t->byte_id; FG_EINPUT naming PATH when a byte has no token. */
fg_status fg_tok_build_bytes(fg_tok *t, const char *path, const uint8_t *raw);
void fg_tok_merges_alloc(fg_tok *t, size_t count);
void fg_tok_merge_put(fg_tok *t, int32_t a, int32_t b, int32_t rank, int32_t merged);
void fg_tok_merges_finish(fg_tok *t);   /* sets t->causal */
fg_status fg_tok_compile_gpt2(fg_tok *t, pcre2_code **re, pcre2_match_data **md, int *jit);
size_t fg_tok_pow2_at_least(size_t n);

#endif

/* fg_tok_encode.c - text -> ids: GPT-2's pre-split (PCRE2), the byte-level
 * BPE of each piece, and the word cache in front of it. A tokenizer.json's
 * pieces (fg_tok_hfenc.c) take the same BPE and cache through fg_tok_piece.
 *
 * BPE has two paths with the same result. Short pieces (nearly all words) run
 * GPT-2's loop as written: find the lowest-ranked adjacent pair, merge all its
 * occurrences left to right, repeat; that is quadratic in the piece's length,
 * which a long run of spaces or a long CJK sentence (one \p{L}+ piece) would
 * feel. Longer pieces use a heap of candidate pairs and a linked list, one
 * merge at a time in (rank, position) order, which equals GPT-2's order when
 * the merges are causal (checked at load, see fg_tok_load.c). */
#include <limits.h>
#include <string.h>

#include "fg_tok_hf.h"

/* Pieces with more bytes than this take the heap path. */
#define FG_TOK_LINEAR_MAX 48

/* The cache forgets everything when it reaches either bound: a long-running
 * coordinator must not grow without limit on unusual text. */
#define FG_TOK_CACHE_MAX_WORDS (1u << 20)
#define FG_TOK_CACHE_MAX_BYTES (64u << 20)
/* Longer pieces (runs of spaces, digits, CJK) rarely repeat and the heap path
 * is quick on them; caching them would only crowd out words. */
#define FG_TOK_CACHE_MAX_PIECE 256

/* ---------------------------------------------------------------- output vector */

void fg_tok_ids_reserve(fg_tok_ids *o, size_t more) {
    if (o->n + more <= o->cap) return;
    size_t cap = o->cap ? o->cap : 64;
    while (cap < o->n + more) cap *= 2;
    int32_t *v = fg_xmalloc(cap * sizeof *v);
    if (o->n) memcpy(v, o->v, o->n * sizeof *v);
    free(o->v);
    o->v = v;
    o->cap = cap;
}

/* ---------------------------------------------------------------- BPE */

static void scratch_reserve(fg_tok *t, size_t n) {
    if (n <= t->scratch_cap) return;
    size_t cap = t->scratch_cap ? t->scratch_cap : 64;
    while (cap < n) cap *= 2;
    free(t->sym);
    free(t->rank);
    free(t->mrg);
    free(t->next);
    free(t->prev);
    free(t->heap);
    t->sym = fg_xmalloc(cap * sizeof *t->sym);
    t->rank = fg_xmalloc(cap * sizeof *t->rank);
    t->mrg = fg_xmalloc(cap * sizeof *t->mrg);
    t->next = fg_xmalloc(cap * sizeof *t->next);
    t->prev = fg_xmalloc(cap * sizeof *t->prev);
    t->heap = fg_xmalloc(2 * cap * sizeof *t->heap);
    t->scratch_cap = cap;
}

static inline void pair_rank(const fg_tok *t, const int32_t *sym, size_t i, int32_t *rank,
                             int32_t *mrg) {
    const fg_tok_merge *m = fg_tok_merge_find(t, sym[i], sym[i + 1]);
    rank[i] = m ? m->rank : INT32_MAX;
    mrg[i] = m ? m->merged : -1;
}

/* rank[i], mrg[i] of every adjacent pair (i, i + 1) of sym[0..n). */
static inline void rank_pairs(const fg_tok *t, size_t n) {
    for (size_t i = 0; i + 1 < n; i++) pair_rank(t, t->sym, i, t->rank, t->mrg);
}

/* The first of the lowest-ranked pairs of sym[0..n) (n > 1), or N where
 * no pair merges. */
static inline size_t lowest_pair(const int32_t *rank, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; i++)
        if (rank[i] < rank[best]) best = i;
    return rank[best] == INT32_MAX ? n : best;
}

/* GPT-2's loop on sym[0..n); returns the new length. */
static size_t bpe_linear(fg_tok *t, size_t n) {
    int32_t *sym = t->sym, *rank = t->rank, *mrg = t->mrg;
    rank_pairs(t, n);
    while (n > 1) {
        size_t best = lowest_pair(rank, n);
        if (best == n) break;
        int32_t a = sym[best], b = sym[best + 1], c = mrg[best];
        /* No occurrence lies left of BEST: it is the first with this rank. */
        size_t w = best, r = best;
        while (r < n) {
            if (r + 1 < n && sym[r] == a && sym[r + 1] == b) {
                sym[w++] = c;
                r += 2;
            } else {
                sym[w++] = sym[r++];
            }
        }
        n = w;
        for (size_t i = best ? best - 1 : 0; i + 1 < n; i++) pair_rank(t, sym, i, rank, mrg);
    }
    return n;
}

/* Hugging Face's order on sym[0..n): one merge at a time, the lowest (rank,
 * position) pair first, which is the order bpe_heap keeps; found by a scan
 * (quadratic), for short words. Returns the new length. */
static size_t bpe_linear_one(fg_tok *t, size_t n) {
    int32_t *sym = t->sym, *rank = t->rank, *mrg = t->mrg;
    rank_pairs(t, n);
    while (n > 1) {
        size_t best = lowest_pair(rank, n);
        if (best == n) break;
        sym[best] = mrg[best];
        /* symbols after best+1 and pairs after best move one to the left */
        memmove(sym + best + 1, sym + best + 2, (n - best - 2) * sizeof *sym);
        if (n >= best + 3) {
            memmove(rank + best + 1, rank + best + 2, (n - best - 3) * sizeof *rank);
            memmove(mrg + best + 1, mrg + best + 2, (n - best - 3) * sizeof *mrg);
        }
        n--;
        if (best > 0) pair_rank(t, sym, best - 1, rank, mrg);
        if (best + 1 < n) pair_rank(t, sym, best, rank, mrg);
    }
    return n;
}

/* Min-heap on (rank, pos): equal ranks merge left to right, as in GPT-2. */
static inline int cand_less(const fg_tok_cand *x, const fg_tok_cand *y) {
    return x->rank < y->rank || (x->rank == y->rank && x->pos < y->pos);
}

static void heap_push(fg_tok_cand *h, size_t *n, fg_tok_cand c) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&c, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}

static fg_tok_cand heap_pop(fg_tok_cand *h, size_t *n) {
    fg_tok_cand top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && cand_less(&h[c + 1], &h[c])) c++;
        if (!cand_less(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = last;
    return top;
}

static void push_pair(fg_tok *t, size_t *nh, int32_t pos) {
    if (pos < 0 || t->next[pos] < 0) return;
    int32_t nx = t->next[pos];
    const fg_tok_merge *m = fg_tok_merge_find(t, t->sym[pos], t->sym[nx]);
    if (m) heap_push(t->heap, nh, (fg_tok_cand){m->rank, pos, t->sym[pos], t->sym[nx]});
}

/* The heap path on sym[0..n); returns the new length, symbols compacted. Each
 * pair is pushed when it forms; a popped entry whose symbols have changed since
 * is stale and skipped. A merged symbol keeps its left part's position, so
 * positions keep their left-to-right order. The heap holds at most 2n entries:
 * n-1 pairs at the start, then each merge pops one and pushes at most two, and
 * there are at most n-1 merges. */
static size_t bpe_heap(fg_tok *t, size_t n) {
    int32_t *sym = t->sym, *next = t->next, *prev = t->prev;
    size_t nh = 0;
    for (size_t i = 0; i < n; i++) {
        next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
        prev[i] = (int32_t)i - 1;
    }
    for (size_t i = 0; i + 1 < n; i++) push_pair(t, &nh, (int32_t)i);
    while (nh) {
        fg_tok_cand c = heap_pop(t->heap, &nh);
        int32_t r = next[c.pos];
        if (sym[c.pos] != c.left || r < 0 || sym[r] != c.right) continue; /* stale */
        sym[c.pos] = fg_tok_merge_find(t, c.left, c.right)->merged;
        sym[r] = -1; /* dead: never equal to an id an entry holds */
        next[c.pos] = next[r];
        if (next[r] >= 0) prev[next[r]] = c.pos;
        push_pair(t, &nh, prev[c.pos]);
        push_pair(t, &nh, c.pos);
    }
    size_t w = 0;
    for (int32_t i = 0; i >= 0; i = next[i]) sym[w++] = sym[i];
    return w;
}

/* ---------------------------------------------------------------- word cache */

void fg_tok_cache_clear(fg_tok *t) {
    if (t->cache) memset(t->cache, 0, (t->cache_mask + 1) * sizeof *t->cache);
    t->cache_count = t->cache_keys_len = t->cache_ids_len = 0;
}

void fg_tok_set_cache(fg_tok *t, int on) {
    t->cache_on = on;
    fg_tok_cache_clear(t);
}

int fg_tok_jit(const fg_tok *t) {
    if (!t->hf) return t->jit;
    for (int i = 0; i < t->hf->n_split; i++)   /* a tokenizer.json: every regex step */
        if (t->hf->split[i].re && !t->hf->split[i].jit) return 0;
    return 1;
}

static const fg_tok_cache_slot *cache_find(const fg_tok *t, const uint8_t *w, size_t n, uint64_t h) {
    if (!t->cache) return NULL;
    for (size_t i = h & t->cache_mask;; i = (i + 1) & t->cache_mask) {
        const fg_tok_cache_slot *s = &t->cache[i];
        if (!s->key_len) return NULL;
        if (s->hash == h && s->key_len == n && !memcmp(t->cache_keys + s->key_off, w, n)) return s;
    }
}

static void *grow(void *p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return p;
    size_t c = *cap ? *cap : 4096;
    while (c < need) c *= 2;
    void *q = fg_xmalloc(c * elem);
    if (p) memcpy(q, p, *cap * elem);
    free(p);
    *cap = c;
    return q;
}

static void cache_put(fg_tok *t, const uint8_t *w, size_t n, uint64_t h, const int32_t *ids,
                      size_t k) {
    if (t->cache_count >= FG_TOK_CACHE_MAX_WORDS ||
        t->cache_keys_len + n > FG_TOK_CACHE_MAX_BYTES ||
        (t->cache_ids_len + k) * sizeof *ids > FG_TOK_CACHE_MAX_BYTES)
        fg_tok_cache_clear(t);
    if ((t->cache_count + 1) * 2 > (t->cache ? t->cache_mask + 1 : 0)) {
        /* Keep the load under one half: rehash into a table twice the size. */
        size_t cap = t->cache ? 2 * (t->cache_mask + 1) : 4096;
        fg_tok_cache_slot *old = t->cache;
        size_t old_n = old ? t->cache_mask + 1 : 0;
        t->cache = fg_xcalloc(cap, sizeof *t->cache);
        t->cache_mask = cap - 1;
        for (size_t i = 0; i < old_n; i++) {
            if (!old[i].key_len) continue;
            size_t j = old[i].hash & t->cache_mask;
            while (t->cache[j].key_len) j = (j + 1) & t->cache_mask;
            t->cache[j] = old[i];
        }
        free(old);
    }
    t->cache_keys = grow(t->cache_keys, &t->cache_keys_cap, t->cache_keys_len + n, 1);
    t->cache_ids = grow(t->cache_ids, &t->cache_ids_cap, t->cache_ids_len + k, sizeof *ids);
    size_t j = h & t->cache_mask;
    while (t->cache[j].key_len) j = (j + 1) & t->cache_mask;
    t->cache[j] = (fg_tok_cache_slot){h, (uint32_t)t->cache_keys_len, (uint32_t)n,
                                      (uint32_t)t->cache_ids_len, (uint32_t)k};
    memcpy(t->cache_keys + t->cache_keys_len, w, n);
    memcpy(t->cache_ids + t->cache_ids_len, ids, k * sizeof *ids);
    t->cache_keys_len += n;
    t->cache_ids_len += k;
    t->cache_count++;
}

/* ---------------------------------------------------------------- encode */

/* ignore_merges: a piece that is itself a token of model.vocab is that token. */
static int32_t piece_token(const fg_tok *t, const uint8_t *w, size_t n) {
    const fg_tok_hf *hf = t->hf;
    size_t i = fg_tok_hash(w, n) & hf->piece_mask;
    for (;;) {
        int32_t id = hf->piece_slots[i];
        if (id < 0) return -1;
        size_t m;
        const uint8_t *p = fg_tok_piece_form(t, id, &m);
        if (m == n && !memcmp(p, w, n)) return id;
        i = (i + 1) & hf->piece_mask;
    }
}

fg_status fg_tok_piece(fg_tok *t, const uint8_t *w, size_t n, fg_tok_ids *o) {
    int chars = t->hf && !t->hf->byte_level;
    if (n == 1 && !chars) {
        fg_tok_ids_reserve(o, 1);
        o->v[o->n++] = t->byte_id[w[0]];
        return FG_OK;
    }
    uint64_t h = 0;
    int cached = t->cache_on && n <= FG_TOK_CACHE_MAX_PIECE;
    if (cached) {
        h = fg_tok_hash(w, n);
        const fg_tok_cache_slot *s = cache_find(t, w, n, h);
        if (s) {
            fg_tok_ids_reserve(o, s->n_ids);
            memcpy(o->v + o->n, t->cache_ids + s->ids_off, s->n_ids * sizeof *o->v);
            o->n += s->n_ids;
            return FG_OK;
        }
    }
    scratch_reserve(t, n);
    size_t k = n;
    int32_t whole = t->hf && t->hf->ignore_merges ? piece_token(t, w, n) : -1;
    if (whole >= 0) {
        t->sym[0] = whole;
        k = 1;
    } else {
        if (chars) {
            long m = fg_tok_char_symbols(t, w, n);
            if (m < 0) return FG_EINPUT;
            k = (size_t)m;
        } else {
            for (size_t i = 0; i < n; i++) t->sym[i] = t->byte_id[w[i]];
        }
        /* Short words by a scan, long ones by the heap. GPT-2's loop merges
         * every occurrence of the best pair at once, a tokenizer.json's
         * reference one pair at a time; the two agree only when the merges
         * are causal (Llama 2's and 3's are not). */
        if (t->hf) k = k <= FG_TOK_LINEAR_MAX ? bpe_linear_one(t, k) : bpe_heap(t, k);
        else k = k <= FG_TOK_LINEAR_MAX || !t->causal ? bpe_linear(t, k) : bpe_heap(t, k);
    }
    fg_tok_ids_reserve(o, k);
    memcpy(o->v + o->n, t->sym, k * sizeof *o->v);
    o->n += k;
    if (cached) cache_put(t, w, n, h, t->sym, k);
    return FG_OK;
}

/* GPT-2's pre-split of the whole text, each piece through fg_tok_piece. */
static fg_status encode_gpt2(fg_tok *t, const char *text, size_t len, fg_tok_ids *o) {
    const PCRE2_SPTR s = (PCRE2_SPTR)text;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(t->md);
    for (size_t pos = 0; pos < len;) {
        /* Validated by the caller, so PCRE2 need not re-check the whole
         * subject on every call (which would make the loop quadratic). */
        int rc = t->jit ? pcre2_jit_match(t->re, s, len, pos, 0, t->md, NULL)
                        : pcre2_match(t->re, s, len, pos, PCRE2_NO_UTF_CHECK, t->md, NULL);
        /* Every character is \s, \p{L}, \p{N} or none of them, so the pieces
         * tile the text; anything else is a bug, not bad input. */
        if (rc < 0 || ov[0] != pos || ov[1] <= pos)
            return fg_err_set(FG_ERUNTIME, "tokenizer: pre-split failed at byte %zu (PCRE2 %d)",
                              pos, rc);
        fg_tok_piece(t, (const uint8_t *)text + pos, ov[1] - pos, o);   /* cannot fail here */
        pos = ov[1];
    }
    return FG_OK;
}

fg_status fg_tok_encode_ex(fg_tok *t, const char *text, size_t len, unsigned flags, int32_t **ids,
                           size_t *n) {
    *ids = NULL;
    *n = 0;
    size_t bad;
    if (!fg_tok_utf8_valid(text, len, &bad))
        return fg_err_set(FG_EINPUT, "invalid UTF-8 at byte offset %zu", bad);
    fg_tok_ids o = {0};
    fg_tok_ids_reserve(&o, len / 3 + 16);
    const int32_t *pre, *suf;
    size_t n_pre = fg_tok_prefix_ids(t, &pre), n_suf = fg_tok_suffix_ids(t, &suf);
    if (flags & FG_TOK_ADD_SPECIAL) {
        memcpy(o.v, pre, n_pre * sizeof *pre);
        o.n = n_pre;
    }
    fg_status st = t->hf ? fg_tok_hf_encode(t, text, len, flags, &o) : encode_gpt2(t, text, len, &o);
    if (st) {
        free(o.v);
        return st;
    }
    if (flags & FG_TOK_ADD_SPECIAL) {
        fg_tok_ids_reserve(&o, n_suf);
        memcpy(o.v + o.n, suf, n_suf * sizeof *suf);
        o.n += n_suf;
    }
    *ids = o.v;
    *n = o.n;
    return FG_OK;
}

fg_status fg_tok_encode(fg_tok *t, const char *text, size_t len, int32_t **ids, size_t *n) {
    return fg_tok_encode_ex(t, text, len, 0, ids, n);
}

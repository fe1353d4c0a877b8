/* fg_tok_hf.h - what a Hugging Face tokenizer.json adds to the tokenizer
 * object, shared by the files that load and run it (not for callers):
 *   fg_tok_hf.c     tokenizer.json: the BPE model, merges, added tokens, and
 *                   the refusal of every part that is not implemented
 *   fg_tok_split.c  pre-tokenizers: Split (regex or string, each behavior,
 *                   invert) and ByteLevel; Oniguruma patterns made PCRE2's
 *   fg_tok_spm.c    SentencePiece-style pieces: normalizers (Prepend,
 *                   Replace, NFC), characters to ids with byte fallback and
 *                   unk, and the decoders (Replace, ByteFallback, Fuse, Strip)
 *   fg_tok_hfenc.c  encoding: added tokens in the text, then normalizer,
 *                   pre-tokenizer and BPE per section, then the template
 *   fg_tok_hfcfg.c  post_processor, tokenizer_config.json (BOS, EOS,
 *                   add_bos_token) and generation_config.json (EOS ids)
 * The vocabulary, merges, word cache and BPE itself are the GPT-2 path's
 * (fg_tok_internal.h). */
#ifndef FG_TOK_HF_H
#define FG_TOK_HF_H

#include <jansson.h>

#include "fg_tok_internal.h"

#define FG_TOK_MAX_STEPS 8   /* normalizer, pre-tokenizer and template entries */
#define FG_TOK_MAX_TEMPLATE 8

typedef enum { FG_NORM_PREPEND, FG_NORM_REPLACE, FG_NORM_NFC } fg_tok_norm_kind;

typedef struct {
    fg_tok_norm_kind kind;
    char *from, *to;          /* Replace: literal from -> to; Prepend: to */
    size_t from_len, to_len;
} fg_tok_norm;

/* Split's behavior: what happens to the pieces the pattern matches. */
typedef enum {
    FG_SPLIT_REMOVED, FG_SPLIT_ISOLATED, FG_SPLIT_MERGED_PREV, FG_SPLIT_MERGED_NEXT,
    FG_SPLIT_CONTIGUOUS
} fg_tok_behavior;

/* One pre-tokenizer step: a Split, or ByteLevel with use_regex (GPT-2's
 * pattern, Isolated). ByteLevel without use_regex splits nothing. */
typedef struct {
    pcre2_code *re;           /* NULL for a String pattern */
    pcre2_match_data *md;
    int jit;
    char *lit;                /* String pattern */
    size_t lit_len;
    fg_tok_behavior beh;
    int invert;
} fg_tok_split;

typedef struct {
    int32_t id;
    char *content;
    size_t len;
    uint8_t special, lstrip, rstrip, normalized;
} fg_tok_added;

/* Byte trie of added-token contents: child lists, leftmost-longest match. */
typedef struct {
    int32_t child, sibling, added; /* added: index into hf->added, or -1 */
    uint8_t byte;
} fg_tok_trie_node;

typedef struct {
    fg_tok_trie_node *nodes;
    size_t n, cap;
    uint8_t first[256];       /* 1 where some content starts with the byte */
} fg_tok_trie;

/* Output of the pre-tokenizer and segmenting: a growable list of pieces. */
typedef struct {
    size_t *off, *len;
    size_t n, cap;
} fg_tok_pieces;

typedef struct fg_tok_hf {
    /* model */
    int byte_level;           /* a ByteLevel pre-tokenizer: pieces are bytes */
    int byte_fallback, fuse_unk, ignore_merges;
    int32_t unk_id;           /* -1: none */
    int32_t fb_id[256];       /* <0xNN> ids, -1 where absent */
    int32_t ascii_id[128];    /* id of each one-character ASCII token, -1 */
    int spm_segment;          /* char mode: pieces may be cut before "▁" runs */
    int32_t *piece_slots;     /* ignore_merges: piece bytes -> id */
    size_t piece_mask;
    int32_t n_model;          /* one past the largest id of model.vocab */

    /* normalizer and pre-tokenizer */
    fg_tok_norm norm[FG_TOK_MAX_STEPS];
    int n_norm;
    fg_tok_split split[FG_TOK_MAX_STEPS];
    int n_split;
    int prefix_space;         /* ByteLevel add_prefix_space (first step only) */
    char *meta_rep;           /* Metaspace (first step only): spaces become this */
    size_t meta_rep_len;      /* (NULL: no Metaspace) */
    int meta_scheme;          /* its prepend_scheme: 0 never, 1 first, 2 always */
    int meta_dec_first;       /* Metaspace decoder: the first token's dec_rep dropped */
    char *dec_rep;            /* the Metaspace decoder's replacement, or NULL */
    size_t dec_rep_len;

    /* added tokens */
    fg_tok_added *added;
    size_t n_added;
    uint8_t *is_added;        /* (n_ids) */
    uint8_t *in_model;        /* (n_ids) 1 for the ids of model.vocab */
    fg_tok_trie raw, normed;  /* normalized = false / true */

    /* decoder (per-token steps are folded into t->bytes at load) */
    char *strip_content;      /* Strip after Fuse: up to strip_start leading and */
    size_t strip_len;         /* strip_stop trailing copies of strip_content */
    int strip_start, strip_stop;
    int strip_after_bos;      /* llama2.c: a piece right after BOS loses one leading ' ' */

    /* post-processor (single template) and special ids */
    int32_t pre[FG_TOK_MAX_TEMPLATE], suf[FG_TOK_MAX_TEMPLATE];
    int n_pre, n_suf;
    int32_t bos_id;
    int split_special;        /* tokenizer_config's split_special_tokens */

    /* scratch */
    uint8_t *buf[2];
    size_t buf_cap[2];
    fg_tok_pieces pieces;
} fg_tok_hf;

/* What a piece of text must be to be token ID (ignore_merges): its bytes
 * (byte-level) or its string (char mode, "▁the"). */
static inline const uint8_t *fg_tok_piece_form(const fg_tok *t, int32_t id, size_t *n) {
    if (t->hf->byte_level) {
        *n = t->bytes_len[id];
        return t->bytes + t->bytes_off[id];
    }
    *n = strlen(t->str[id]);
    return (const uint8_t *)t->str[id];
}

/* fg_tok_hf.c */
const char *fg_tok_json_type(json_t *obj);   /* obj's "type" string, or NULL */
/* The JSON object in file PATH (FLAGS: jansson's decoding flags), or
 * FG_EINPUT naming the file, line and column. */
fg_status fg_tok_json_load(const char *path, size_t flags, json_t **root);
/* One step of a section (normalizer, pre_tokenizer, post_processor): STEP
 * has the string "type" TYPE; WHERE names it for messages; I is its index in
 * a Sequence (0 for a lone step). */
typedef fg_status (*fg_tok_step_fn)(void *ctx, json_t *step, const char *type, const char *path,
                                    const char *where, size_t i);
/* Section J of a tokenizer.json: null or absent (nothing), one step, or a
 * "Sequence" whose array LIST holds the steps; FN(CTX, ...) on each step, in
 * order, until one fails. A step without a "type" is refused here. */
fg_status fg_tok_json_steps(json_t *j, const char *path, const char *section, const char *list,
                            fg_tok_step_fn fn, void *ctx);
void fg_tok_hf_free(fg_tok_hf *hf);
/* A tokenizer from a tokenizer.json's object ROOT (PATH names it in
 * messages): fg_tok_open_hf without tokenizer_config.json, and the way in
 * of the loaders that build ROOT from another format (fg_tok_l2c.c from
 * llama2.c's tokenizer.bin, fg_tok_gguf.c from a GGUF file's metadata). */
fg_status fg_tok_open_hf_root(json_t *root, const char *path, fg_tok **out);

/* fg_tok_split.c: pre_tokenizer (null, Split, ByteLevel, Metaspace or a
 * Sequence of them); sets byte_level, prefix_space and meta_*. */
fg_status fg_tok_parse_pretok(fg_tok_hf *hf, json_t *pt, const char *path);
/* Onig-syntax pattern -> PCRE2 pattern (malloc'd), or FG_EINPUT naming what
 * PCRE2 would read differently. */
fg_status fg_tok_regex_translate(const char *in, const char *path, const char *where, char **out);
fg_status fg_tok_split_compile(fg_tok_split *s, const char *pattern, const char *path, const char *where);
/* Pre-tokenizes buf[0..n) through steps FROM.. and appends the pieces. */
fg_status fg_tok_pretok(fg_tok_hf *hf, const uint8_t *buf, size_t n, int from, size_t base,
                        fg_tok_pieces *out);
void fg_tok_pieces_push(fg_tok_pieces *p, size_t off, size_t len);

/* fg_tok_spm.c */
fg_status fg_tok_parse_normalizer(fg_tok_hf *hf, json_t *nz, const char *path);
/* Applies the normalizers to s[0..n); returns the result (one of hf->buf, or
 * S itself when there is nothing to do) and its length in *out_n. */
const uint8_t *fg_tok_normalize(fg_tok *t, const uint8_t *s, size_t n, size_t *out_n);
/* decoder: checks it against the pre-tokenizer and fills t->bytes. */
fg_status fg_tok_parse_decoder(fg_tok *t, json_t *dec, const char *path);
/* Metaspace decoder: what the first token decodes to (its string without
 * the replacement, or its bytes when it has none) into OUT; the length. */
size_t fg_tok_meta_first(const fg_tok *t, int32_t id, uint8_t *out);
/* Char mode: the initial symbols of piece w[0..n) into t->sym; returns the
 * count, or -1 (error set) for a character with no token, no byte fallback
 * and no unk. */
long fg_tok_char_symbols(fg_tok *t, const uint8_t *w, size_t n);
void fg_tok_spm_check_segment(fg_tok *t);

/* fg_tok_hfenc.c */
fg_status fg_tok_trie_add(fg_tok_trie *tr, const char *s, size_t n, int32_t added);
void fg_tok_trie_free(fg_tok_trie *tr);
fg_status fg_tok_hf_encode(fg_tok *t, const char *text, size_t len, unsigned flags, fg_tok_ids *o);
void fg_tok_hf_strip(const fg_tok *t, uint8_t *out, size_t *len);

/* fg_tok_hfcfg.c */
fg_status fg_tok_parse_post(fg_tok *t, json_t *pp, const char *path);
fg_status fg_tok_load_config(fg_tok *t, const char *path);

#endif

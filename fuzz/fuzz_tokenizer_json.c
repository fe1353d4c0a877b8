/* fuzz_tokenizer_json.c - libFuzzer target for a Hugging Face tokenizer.json
 * (tokenizer/fg_tok_hf.c and the files it loads through: pre-tokenizer
 * patterns, normalizers, decoders, post-processor, added tokens) with its
 * tokenizer_config.json and generation_config.json, through fg_tok_open_hf.
 * The input is tokenizer.json, then optionally "\n\x01\n" and
 * tokenizer_config.json, then optionally "\n\x01\n" and generation_config.json.
 * Properties: loading never crashes or leaks (ASan); a tokenizer that loads
 * encodes a fixed sample and the input itself (when it is UTF-8) with and
 * without special tokens, every id it gives decodes, and where the pipeline
 * loses nothing (ByteLevel, no normalizer, no Removed split, no stripping
 * added token) decode(encode(x)) == x. */
#include <stdlib.h>
#include <string.h>

#include "fg_tok_hf.h"
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)fz_dir();
    return 0;
}

static int lossless(const fg_tok *t) {
    const fg_tok_hf *hf = t->hf;
    if (!hf->byte_level || hf->n_norm || hf->prefix_space) return 0;
    for (int i = 0; i < hf->n_split; i++)
        if (hf->split[i].beh == FG_SPLIT_REMOVED) return 0;
    for (size_t i = 0; i < hf->n_added; i++)
        if (hf->added[i].lstrip || hf->added[i].rstrip) return 0;
    return 1;
}

static void encode(fg_tok *t, const char *text, size_t len, unsigned flags) {
    int32_t *ids = NULL;
    size_t n = 0;
    size_t bad;
    fg_status st = fg_tok_encode_ex(t, text, len, flags, &ids, &n);
    if (st) {
        /* FG_EINPUT: only bad UTF-8, or a character a tokenizer without byte
         * fallback and unk_token has no token for (FG_ERUNTIME: a pattern
         * PCRE2 gave up on, reported) */
        if (st == FG_EINPUT && fg_tok_utf8_valid(text, len, &bad) && t->hf->byte_level) abort();
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= fg_tok_vocab_size(t) || !fg_tok_token(t, ids[i])) abort();
    char *back = NULL;
    size_t blen = 0;
    if (fg_tok_decode(t, ids, n, 0, &back, &blen) != FG_OK) abort();   /* its own ids */
    if (!(flags & FG_TOK_ADD_SPECIAL) && lossless(t) && (blen != len || memcmp(back, text, len))) abort();
    free(back);
    if (fg_tok_decode(t, ids, n, 1, &back, &blen) != FG_OK) abort();
    free(back);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_part part[3];
    int np = fz_split(data, size, "\n\x01\n", part, 3);
    const char *tj = fz_write(0, "tokenizer.json", part[0].p, part[0].n);
    const char *tc = np > 1 ? fz_write(1, "tokenizer_config.json", part[1].p, part[1].n) : NULL;
    const char *gc = np > 2 ? fz_write(2, "generation_config.json", part[2].p, part[2].n) : NULL;
    fg_tok *t = NULL;
    if (fg_tok_open_hf(tj, tc, &t) != FG_OK) return 0;
    if (gc && fg_tok_load_generation_config(t, gc) != FG_OK) {
        fg_tok_destroy(&t);
        return 0;
    }
    static const char sample[] = "Hello world, h\xc3\xa9llo 123 's 'VE \xf0\x9f\x98\x80 \xe1\xa0\x8e  \t\n end "
                                 "<s></s><|endoftext|> \xe2\x96\x81x  y\r\n\r\n e\xcc\x81";
    for (unsigned flags = 0; flags < 4; flags++) encode(t, sample, sizeof sample - 1, flags);
    encode(t, (const char *)data, size, FG_TOK_PARSE_SPECIAL);
    fg_tok_set_cache(t, 0);
    encode(t, sample, sizeof sample - 1, 0);
    const int32_t *ids;
    size_t n = fg_tok_eos_ids(t, &ids);
    for (size_t i = 0; i < n; i++)
        if (!fg_tok_token(t, ids[i])) abort();
    n = fg_tok_prefix_ids(t, &ids);
    for (size_t i = 0; i < n; i++)
        if (!fg_tok_token(t, ids[i])) abort();
    (void)fg_tok_bos_id(t);
    (void)fg_tok_eos_id(t);
    fg_tok_destroy(&t);
    return 0;
}

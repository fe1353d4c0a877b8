/* fuzz_tok.h - what the fuzz targets that load a tokenizer check of one
 * that loaded: TEXT encodes (or is refused) to ids inside the vocabulary,
 * and those ids decode without error. Header-only: only the targets that
 * link the tokenizer include it. */
#ifndef FUZZ_TOK_H
#define FUZZ_TOK_H

#include <stdlib.h>

#include "fg_tokenizer.h"

static inline void fz_tok_roundtrip(fg_tok *t, const char *text, size_t len, unsigned flags) {
    int32_t *ids = NULL;
    size_t n = 0;
    if (fg_tok_encode_ex(t, text, len, flags, &ids, &n) == FG_OK) {
        for (size_t i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= fg_tok_vocab_size(t)) abort();
        char *out = NULL;
        size_t olen = 0;
        if (fg_tok_decode(t, ids, n, 1, &out, &olen) != FG_OK) abort();
        free(out);
    }
    free(ids);
}

#endif

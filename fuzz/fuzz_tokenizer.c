/* fuzz_tokenizer.c - libFuzzer target for the tokenizer's files
 * (tokenizer/fg_tok_load.c: vocab.json and merges.txt) through fg_tok_new.
 * The input is vocab.json, the separator "\n\x01\n", then merges.txt.
 * Properties: loading never crashes or leaks (ASan); a tokenizer that loads
 * encodes a fixed sample and the input itself (when it is UTF-8) to ids that
 * decode back to the very same text (byte-level BPE loses nothing). */
#include <stdlib.h>
#include <string.h>

#include "fg_tokenizer.h"
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)fz_dir();
    return 0;
}

static void round_trip(fg_tok *t, const char *text, size_t len) {
    int32_t *ids = NULL;
    size_t n = 0;
    if (fg_tok_encode(t, text, len, &ids, &n) != FG_OK) {
        size_t bad;
        if (fg_tok_utf8_valid(text, len, &bad)) abort();   /* valid UTF-8 always encodes */
        return;
    }
    char *back = NULL;
    size_t blen = 0;
    if (fg_tok_decode(t, ids, n, 0, &back, &blen) != FG_OK) abort();   /* its own ids */
    if (blen != len || memcmp(back, text, len)) abort();
    free(back);
    if (fg_tok_decode(t, ids, n, 1, &back, &blen) != FG_OK) abort();
    free(back);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_part part[2];
    if (fz_split(data, size, "\n\x01\n", part, 2) != 2) return 0;
    const char *vocab = fz_write(0, "vocab.json", part[0].p, part[0].n);
    const char *merges = fz_write(1, "merges.txt", part[1].p, part[1].n);
    fg_tok *t = NULL;
    if (fg_tok_new(vocab, merges, &t) != FG_OK) return 0;
    static const char sample[] = "Hello world, h\xc3\xa9llo 123 's 've \xf0\x9f\x98\x80 \xe1\xa0\x8e  \t\n end";
    round_trip(t, sample, sizeof sample - 1);
    round_trip(t, (const char *)data, size);
    fg_tok_set_cache(t, 0);
    round_trip(t, sample, sizeof sample - 1);
    for (int32_t id = -1; id <= fg_tok_vocab_size(t); id++) {
        size_t n;
        (void)fg_tok_token_bytes(t, id, &n);
        (void)fg_tok_token(t, id);
        (void)fg_tok_is_special(t, id);
    }
    (void)fg_tok_bos_id(t);
    fg_tok_destroy(&t);
    return 0;
}

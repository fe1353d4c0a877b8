/* fuzz_tokenizer_l2c.c - libFuzzer target for llama2.c's tokenizer.bin
 * (tokenizer/fg_tok_l2c.c, `--tokenizer FILE`): the input is written as a
 * file and loaded. Properties: loading never crashes, leaks or reads past
 * the file (ASan), and fails only with FG_EINPUT; a loaded tokenizer
 * encodes a fixed text of ASCII, multi-byte characters and a NUL to ids
 * inside its vocabulary, and decodes them back without error. Seeds:
 * fuzz/seeds/tokenizer_l2c (tok512.bin and small vocabularies). */
#include <stdlib.h>

#include "fg_tokenizer.h"
#include "fuzz_tok.h"
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    (void)fz_dir();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fz_write(0, "tokenizer.bin", data, size);
    fg_tok *t = NULL;
    fg_status st = fg_tok_open_llama2c(path, &t);
    if (st != FG_OK) {
        if (st != FG_EINPUT) abort();
        return 0;
    }
    static const char text[] = "Once upon a time, caf\xC3\xA9 \xE2\x98\x83 \xF0\x9F\x98\x80 <s>\n\tend";
    fz_tok_roundtrip(t, text, sizeof text - 1, FG_TOK_ADD_SPECIAL);
    fg_tok_destroy(&t);
    return 0;
}

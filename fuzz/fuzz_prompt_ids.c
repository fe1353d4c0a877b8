/* fuzz_prompt_ids.c - libFuzzer target for the pre-tokenized prompts of
 * --prompt-ids FILE (coordinator/fg_prompts.c, fg_prompt_ids_read), read by
 * `flexgen run` and `flexgen policy`. Properties: no crash or leak (ASan);
 * what is read is non-empty lists of ids inside the vocabulary. */
#include <stdlib.h>

#include "fg_prompts.h"
#include "fuzz_util.h"

#define VOCAB 50272   /* OPT's */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)fz_dir();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fz_write(0, "ids.json", data, size);
    fg_seq_in *in = NULL;
    int n = 0;
    if (fg_prompt_ids_read(path, VOCAB, &in, &n) != FG_OK) return 0;
    if (n < 1) abort();
    for (int i = 0; i < n; i++) {
        if (in[i].len < 1) abort();
        for (int j = 0; j < in[i].len; j++)
            if (in[i].ids[j] < 0 || in[i].ids[j] >= VOCAB) abort();
    }
    fg_prompt_ids_free(in, (size_t)n);
    return 0;
}

/* fuzz_llama2c.c - libFuzzer target for llama2.c checkpoints
 * (model/fg_wsrc_llama2c.c, `--model FILE.bin`): the input is written as a
 * file and opened as a model with fg_wsrc_open_dir. Properties: opening
 * never crashes, leaks or reads outside the file (ASan); a file that opens
 * has every tensor bound inside it, so every tensor of a small model reads
 * (FG_OK: never a failure after a successful open) and it has an identity;
 * anything else is refused with FG_EINPUT. Seeds: fuzz/seeds/llama2c (a
 * legacy and a version-1 checkpoint of a tiny shape, and stories260K's
 * header cut short). */
#include <stdlib.h>

#include "fg_weights.h"
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    (void)fz_dir();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size >= 4 && data[0] == 'G' && data[1] == 'G' && data[2] == 'U' && data[3] == 'F') return 0;   /* fuzz_gguf's */
    const char *path = fz_write(0, "model.bin", data, size);
    fg_wsrc *ws = NULL;
    fg_status st = fg_wsrc_open_dir(path, NULL, &ws);
    if (st != FG_OK) {
        if (st != FG_EINPUT) abort();
        return 0;
    }
    const fg_model_config *c = fg_wsrc_config(ws);
    const fg_spec *sp = fg_wsrc_specs(ws);
    for (int i = 0; i < fg_spec_count(c); i++) {
        if (!sp[i].present || fg_spec_numel(&sp[i]) > (1 << 20)) continue;
        fg_half *buf = malloc(sizeof(fg_half) * (size_t)fg_spec_numel(&sp[i]));
        if (fg_wsrc_read(ws, i, buf) != FG_OK) abort();
        free(buf);
    }
    (void)fg_wsrc_identity(ws);
    fg_wsrc_destroy(&ws);
    return 0;
}

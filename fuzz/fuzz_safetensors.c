/* fuzz_safetensors.c - libFuzzer target for the safetensors reader
 * (model/fg_weights.c) through fg_wsrc_open_dir, the path `flexgen run
 * --model DIR` takes. The directory holds the tiny model's config.json and
 * either:
 *  - model.safetensors = the input (an input not starting with '{'), or
 *  - model.safetensors.index.json = the input (starting with '{'), beside a
 *    valid shard model-00001-of-00001.safetensors (the sharded path).
 * Properties: opening never crashes, leaks or reads outside the file
 * (ASan); a source that opens reads every tensor (the byte ranges the header
 * promised) and has an identity. */
#include <stdlib.h>
#include <string.h>

#include "fg_weights.h"
#include "fuzz_tiny.h"
#include "fuzz_util.h"

static const char *dir;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    dir = fz_dir();
    fz_write(0, "config.json", fz_tiny_config_json, strlen(fz_tiny_config_json));
    size_t n;
    uint8_t *shard = fz_tiny_safetensors(&n);
    fz_write(0, "model-00001-of-00001.safetensors", shard, n);
    free(shard);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size && data[0] == '{') {
        fz_remove("model.safetensors");
        fz_write(0, "model.safetensors.index.json", data, size);
    } else {
        fz_remove("model.safetensors.index.json");
        fz_write(0, "model.safetensors", data, size);
    }
    fg_wsrc *ws = NULL;
    if (fg_wsrc_open_dir(dir, NULL, &ws) != FG_OK) return 0;
    const fg_model_config *c = fg_wsrc_config(ws);
    const fg_spec *specs = fg_wsrc_specs(ws);
    for (int i = 0; i < fg_spec_count(c); i++) {
        if (!specs[i].present) continue;
        fg_half *buf = malloc((size_t)fg_spec_numel(&specs[i]) * sizeof *buf);
        if (fg_wsrc_read(ws, i, buf) != FG_OK) abort();   /* opened means readable */
        free(buf);
    }
    (void)fg_wsrc_identity(ws);
    (void)fg_wsrc_describe(ws);
    fg_wsrc_destroy(&ws);
    return 0;
}

/* fuzz_npy.c - libFuzzer target for the .npy header reader of FlexGen numpy
 * directories (model/fg_weights.c, parse_npy) through fg_wsrc_open_dir. The
 * directory holds the tiny model's config.json and a valid .npy file for each
 * of its tensors; the input's first byte picks one file (a tensor, or the
 * ignored-but-checked lm_head.weight) and the rest replaces it for this run.
 * Properties: no crash, leak or read outside the file (ASan); a directory
 * that opens reads every tensor. */
#include <stdlib.h>
#include <string.h>

#include "fg_weights.h"
#include "fuzz_tiny.h"
#include "fuzz_util.h"

static const char *dir;
static int n_files;          /* present specs, then lm_head.weight */
static int file_spec[64];    /* spec index per file; -1 for lm_head.weight */

static void write_valid(int k) {
    if (file_spec[k] < 0) {   /* the tied head: the embedding's shape */
        size_t n;
        uint8_t *f = fz_tiny_npy(fg_spec_global(FG_GW_EMBED_TOKENS), &n);
        fz_write(0, "lm_head.weight", f, n);
        free(f);
        return;
    }
    size_t n;
    uint8_t *f = fz_tiny_npy(file_spec[k], &n);
    fz_write(0, fz_tiny_specs()[file_spec[k]].name, f, n);
    free(f);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    dir = fz_dir();
    fz_write(0, "config.json", fz_tiny_config_json, strlen(fz_tiny_config_json));
    const fg_model_config *c = fz_tiny_config();
    for (int i = 0; i < fg_spec_count(c); i++)
        if (fz_tiny_specs()[i].present) file_spec[n_files++] = i;
    file_spec[n_files++] = -1;
    for (int k = 0; k < n_files; k++) write_valid(k);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int k = data[0] % n_files;
    const char *name = file_spec[k] < 0 ? "lm_head.weight" : fz_tiny_specs()[file_spec[k]].name;
    fz_write(0, name, data + 1, size - 1);
    fg_wsrc *ws = NULL;
    if (fg_wsrc_open_dir(dir, NULL, &ws) == FG_OK) {
        const fg_model_config *c = fg_wsrc_config(ws);
        const fg_spec *specs = fg_wsrc_specs(ws);
        for (int i = 0; i < fg_spec_count(c); i++) {
            if (!specs[i].present) continue;
            fg_half *buf = malloc((size_t)fg_spec_numel(&specs[i]) * sizeof *buf);
            if (fg_wsrc_read(ws, i, buf) != FG_OK) abort();
            free(buf);
        }
        (void)fg_wsrc_identity(ws);
        fg_wsrc_destroy(&ws);
    }
    write_valid(k);
    return 0;
}

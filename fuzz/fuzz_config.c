/* fuzz_config.c - libFuzzer target for config.json (model/fg_config.c,
 * fg_config_load_json). Properties: no crash or leak (ASan); a config that
 * loads passes fg_config_validate, its tensor list can be made, and its
 * description (what the ops' params carry to the workers) converts back. */
#include <stdlib.h>

#include "fg_config.h"
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)fz_dir();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fz_write(0, "config.json", data, size);
    fg_model_config cfg;
    if (fg_config_load_json(path, &cfg) != FG_OK) return 0;
    if (fg_config_validate(&cfg, path) != FG_OK) abort();
    fg_spec *specs = fg_specs_new(&cfg);
    for (int i = 0; i < fg_spec_count(&cfg); i++)
        if (specs[i].present && fg_spec_lookup(&cfg, specs, specs[i].name) != i) abort();
    free(specs);
    fg_model_desc d = fg_config_desc(&cfg);
    fg_model_config one;
    if (fg_config_from_desc(&d, "fuzz", &one) != FG_OK) abort();
    return 0;
}

/* fuzz_profile.c - libFuzzer target for the hardware profile JSON the cost
 * model reads (coordinator/fg_hw.c, fg_hw_load_for: `flexgen profile`'s
 * cache file, or --hardware FILE), its gpu section alone and at a model's
 * layer shape (its shapes[] entries). Properties: no crash or leak (ASan);
 * a profile that loads gives positive, finite bandwidths and, for every
 * weight format, a GEMM rate that is a number (not NaN) at every row count
 * the search asks about. */
#include <math.h>
#include <stdlib.h>

#include "fg_hw.h"
#include "fuzz_util.h"

static fg_model_config shape;   /* a layer shape the shapes[] entries are matched against */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)fz_dir();
    if (fg_config_by_name("opt-125m", &shape) != FG_OK) abort();
    return 0;
}

static void check(const fg_hw *hw) {
    const double bw[] = {hw->h2d_gbps, hw->d2h_gbps, hw->d2h_cache_gbps, hw->cpu_attn_gbps, hw->disk_read_gbps,
                         hw->disk_write_gbps, hw->attn_prefill_tflops, hw->attn_decode_gbps};
    for (size_t i = 0; i < sizeof bw / sizeof bw[0]; i++)
        if (!(bw[i] > 0) || !isfinite(bw[i])) abort();
    for (int f = 0; f < FG_FMT_COUNT; f++)
        for (double rows = 1; rows <= 1 << 20; rows *= 2)
            for (int pre = 0; pre < 2; pre++)
                if (isnan(fg_hw_fmt_tflops(hw, f, rows, pre))) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fz_write(0, "profile.json", data, size);
    fg_hw hw;
    if (fg_hw_load(path, &hw) == FG_OK) check(&hw);
    if (fg_hw_load_for(path, &shape, &hw) == FG_OK) check(&hw);
    return 0;
}

/* fp16_dump.c - writes fg_fp16's conversions for a numpy check: every one of
 * the 65536 halves widened to float, and a set of floats narrowed to half,
 * each with the F16C path and the portable path. Usage: fp16_dump IN OUT
 * IN: float32 raw values to narrow; OUT: raw [h2f_fast 65536 f32][h2f_port
 * 65536 f32][f2h_fast n u16][f2h_port n u16]. */
#include <stdio.h>
#include <stdlib.h>

#include "fg_common.h"
#include "fg_fp16.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: fp16_dump IN.f32 OUT.bin\n");
        return 2;
    }
    char *data;
    size_t len;
    fg_exit_on(fg_read_file(argv[1], &data, &len));
    size_t n = len / 4;
    const float *in = (const float *)data;
    fg_half *all = malloc(65536 * sizeof *all);
    float *wide = malloc(65536 * sizeof *wide);
    fg_half *narrow = malloc(n * sizeof *narrow + 2);
    FILE *f = fopen(argv[2], "wb");
    if (!f) return 1;
    for (int i = 0; i < 65536; i++) all[i] = (fg_half)i;
    for (int pass = 0; pass < 2; pass++) {
        fg_fp16_force_portable(pass);
        fg_half_to_float_n(all, wide, 65536);
        fwrite(wide, sizeof *wide, 65536, f);
    }
    for (int pass = 0; pass < 2; pass++) {
        fg_fp16_force_portable(pass);
        fg_float_to_half_n(in, narrow, n);
        fwrite(narrow, sizeof *narrow, n, f);
    }
    fprintf(stderr, "fp16_dump: f16c %s\n", (fg_fp16_force_portable(0), fg_fp16_have_f16c()) ? "available" : "absent");
    fclose(f);
    return 0;
}

/* q4_tool.c - fg_q4's packing and expansion as a filter, for the numpy check
 * (q4_check.py against tests/ref/q4_ref.py). Usage:
 *   q4_tool pack N C IN OUT     IN: (N, C) fp16 raw; OUT: the slice's bytes
 *   q4_tool expand N C IN OUT   IN: a slice's bytes; OUT: (N, C) fp16 raw
 * Both directions also run with the portable fp16 path and must agree with
 * the F16C one (exit 1 otherwise). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fg_common.h"
#include "fg_q4.h"

static int write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) return 1;
    return fclose(f) != 0;
}

int main(int argc, char **argv) {
    if (argc != 6 || (strcmp(argv[1], "pack") && strcmp(argv[1], "expand"))) {
        fprintf(stderr, "usage: q4_tool pack|expand N C IN OUT\n");
        return 2;
    }
    int N = atoi(argv[2]), C = atoi(argv[3]);
    char *in;
    size_t len;
    fg_exit_on(fg_read_file(argv[4], &in, &len));
    size_t slice = (size_t)fg_q4_slice_bytes((uint64_t)N, (uint64_t)C), dense = (size_t)N * C * 2;
    int pack = !strcmp(argv[1], "pack");
    if (len != (pack ? dense : slice)) {
        fprintf(stderr, "q4_tool: %s has %zu bytes, want %zu\n", argv[4], len, pack ? dense : slice);
        return 2;
    }
    size_t on = pack ? slice : dense;
    uint8_t *out[2] = {malloc(on), malloc(on)};
    for (int pass = 0; pass < 2; pass++) {
        fg_fp16_force_portable(pass);
        if (pack) fg_q4_pack((const fg_half *)in, N, C, out[pass]);
        else fg_q4_expand((const uint8_t *)in, N, C, (fg_half *)out[pass]);
    }
    if (memcmp(out[0], out[1], on)) {
        fprintf(stderr, "q4_tool: the F16C and portable fp16 paths disagree\n");
        return 1;
    }
    if (!pack) {   /* the fp32 form the attention reads must be the same values */
        float *f = malloc(sizeof(float) * (size_t)N * C);
        fg_q4_expand_f32((const uint8_t *)in, N, C, f);
        for (size_t i = 0; i < (size_t)N * C; i++)
            if (fg_float_to_half(f[i]) != ((fg_half *)out[0])[i] && f[i] == f[i]) {
                fprintf(stderr, "q4_tool: fg_q4_expand_f32 differs from fg_q4_expand at %zu\n", i);
                return 1;
            }
        free(f);
    }
    return write_file(argv[5], out[0], on);
}

/* fmt_fill.h - random weight matrices in any format of common/fg_fmt.h for
 * the GPU tests: values spread over about [-a, a] with zero mean, as a
 * Linear's weights are (the scale fields set so; codes random), so a
 * layer's activations stay O(1) whatever the format. Written from
 * ggml-common.h's block layouts (as tests/ref/ggml_blocks.py), not from the
 * engine's dequantizers. */
#ifndef FG_TEST_FMT_FILL_H
#define FG_TEST_FMT_FILL_H

#include <stdint.h>

#ifdef __cplusplus   /* cuda_fmt_host.cu */
extern "C" {
#endif

/* A 64-bit LCG: *s advanced, [0, 1) returned. */
double fmt_fill_urand(uint64_t *s);

/* W (out, in) in fmt: fg_fmt_bytes(fmt, out, in) bytes at dst. Q4G64:
 * uniform fp16 values packed by fg_q4_pack. */
void fmt_fill(uint8_t *dst, int fmt, int out, int in, float a, uint64_t *s);

/* Every byte random (every code, every scale bit pattern, NaN and inf
 * scales too): the dequantizers' bitwise test. */
void fmt_fill_bytes(uint8_t *dst, uint64_t n, uint64_t *s);

#ifdef __cplusplus
}
#endif
#endif

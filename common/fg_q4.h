/* fg_q4.h - FlexGen's 4-bit group-wise compression (Sheng et al., ICML'23,
 * §5: "group-wise quantization", num_bits 4, group_size 64, asymmetric),
 * defined here bit for bit so that every process, the numpy oracle
 * (tests/ref/q4_ref.py) and a CUDA kernel produce the same bytes and the same
 * expanded values. This file packs and expands; where compressed tensors
 * live and who expands them is the plan's and the kernels' business.
 *
 * A compressed tensor is a stack of A slices, each an fp16 matrix (N, C)
 * grouped along N (the grouped dimension) in groups of 64 consecutive rows
 * of one column; G = ceil(N / 64) groups per column, the last zero-padded.
 *   weight (out, in):        A = 1, N = out, C = in  (FlexGen's group_dim=0)
 *   KV cache (Tmax, B, H):   A = Tmax*B*n_heads, N = head_dim, C = 1
 *                            (FlexGen's cache config, group_dim 2 of
 *                            (s, b*n_head, head_dim))
 *
 * Per group, with x the group's 64 fp16 values widened to fp32 (the padding
 * rows are +0.0 and take part in min and max, as in FlexGen):
 *   mn    = min x   (the first in index order attaining it: the sign of a zero)
 *   mx    = max x
 *   d     = mx - mn                      fp32, round to nearest even
 *   s32   = 15 / d                       fp32; +inf when d == 0
 *   q[i]  = rint(clamp((x[i] - mn) * s32, 0, 15))   each op fp32, rint half
 *           to even (torch.round); q = 0 for every i when d == 0 (FlexGen's
 *           0 * inf is NaN, which its uint8 cast turns into 0)
 *   stored: min = fp16(mn) (exact: mn is an fp16 value), scale = fp16(s32)
 *           (round to nearest even; +inf when s32 >= 65520)
 * FlexGen quantizes weights this way (on the CPU in fp32, scale and min then
 * copied into fp16 storage); its GPU path for the KV cache computes in fp16.
 * Here the cache uses the fp32 definition too, so that the cpu worker and a
 * GPU store the same bytes (a q may differ from FlexGen's GPU cache by one
 * step where an fp16 product falls on the other side of a .5).
 *
 * Expansion, as FlexGen's GPU decompress computes it in fp16:
 *   y = fp16(fp16(q / scale) + min)
 * each op in fp32 and rounded to fp16 (for + and / this equals the fp16 op
 * correctly rounded: fp32 has more than 2*11+2 significand bits). A group
 * with scale +inf expands to min everywhere (q / inf = 0).
 *
 * Layout of one slice (36 * G * C bytes, everything little-endian):
 *   packed  [G][32][C] uint8: byte (g, j, c) holds rows 64g+2j (high nibble)
 *           and 64g+2j+1 (low nibble) of column c
 *   mins    [G][C] fp16
 *   scales  [G][C] fp16
 * A weight is one slice; the cache is one slice per (position, sequence,
 * head), time-major like the fp16 cache, so positions [t0, t1) are one
 * contiguous byte range. Inputs must be finite. */
#ifndef FG_Q4_H
#define FG_Q4_H

#include <stddef.h>
#include <stdint.h>

#include "fg_fp16.h"

#ifdef __cplusplus   /* the cuda backend's dequantizers read FG_Q4_GROUP (cuda_fmt_dq.cuh) */
extern "C" {
#endif

#define FG_Q4_GROUP 64

/* Groups along N. */
static inline uint64_t fg_q4_groups(uint64_t N) { return (N + FG_Q4_GROUP - 1) / FG_Q4_GROUP; }
/* Bytes of one compressed (N, C) slice. */
static inline uint64_t fg_q4_slice_bytes(uint64_t N, uint64_t C) { return 36 * fg_q4_groups(N) * C; }

/* Compress x (N, C) fp16 into one slice at dst (fg_q4_slice_bytes bytes). */
void fg_q4_pack(const fg_half *x, int N, int C, uint8_t *dst);

/* Expand one slice into y (N, C) fp16, or into fp32 (values fp16 holds). */
void fg_q4_expand(const uint8_t *src, int N, int C, fg_half *y);
void fg_q4_expand_f32(const uint8_t *src, int N, int C, float *y);
/* Rows [r0, r1) of the slice's expansion into y (r1 - r0, C), fp16 or fp32:
 * for expanding a weight a block of rows at a time, straight into what a
 * GEMM reads (kernels/fg_gemm.h, fg_gemm_q4w). */
void fg_q4_expand_rows(const uint8_t *src, int N, int C, int r0, int r1, fg_half *y);
void fg_q4_expand_rows_f32(const uint8_t *src, int N, int C, int r0, int r1, float *y);
/* fg_q4_expand_rows computed as the definition reads, one value at a time
 * with a true division: the reference the fast forms are tested against. */
void fg_q4_expand_rows_ref(const uint8_t *src, int N, int C, int r0, int r1, fg_half *y);
/* For tests: expand with at most level 0 (portable), 1 (AVX2) or 2 (AVX-512,
 * the default) of what the CPU has. */
void fg_q4_limit_simd(int level);

#ifdef __cplusplus
}
#endif
#endif

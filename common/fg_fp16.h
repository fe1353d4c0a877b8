/* fg_fp16.h - IEEE binary16 <-> binary32 conversion. Every tensor that crosses
 * a tier or a layer boundary is fp16 (docs/ARCHITECTURE.md, "Numerics"); these functions are the
 * single rounding point, so all processes round identically (round to nearest
 * even, as F16C's _MM_FROUND_TO_NEAREST_INT and numpy's astype do). F16C is
 * used when the CPU has it, a portable bit-exact fallback otherwise. */
#ifndef FG_FP16_H
#define FG_FP16_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint16_t fg_half;

float   fg_half_to_float(fg_half h);
fg_half fg_float_to_half(float f);
float   fg_bf16_to_float(uint16_t b);

void fg_half_to_float_n(const fg_half *src, float *dst, size_t n);
void fg_float_to_half_n(const float *src, fg_half *dst, size_t n);
/* x[i] = half(x[i]) in place: the fp16 rounding of a float tensor. */
void fg_round_fp16_n(float *x, size_t n);

/* 1 if the F16C path is in use (for logs and tests of the fallback). */
int fg_fp16_have_f16c(void);
/* Force the portable path (tests compare both). */
void fg_fp16_force_portable(int on);

#ifdef __cplusplus
}
#endif

#endif

/* fg_fmt.h - the table of weight storage formats. A tensor's format is a
 * property of the tensor (fg_spec.fmt): one GGUF file mixes them (a Q4_K_M
 * file keeps some ffn_down and attn_v in Q6_K, the head in Q6_K, norms in
 * F32), and FlexGen's own 4-bit group-wise scheme (--compress-weight,
 * common/fg_q4.h) is one row here. The loader, the tier store, the memory
 * plan, the op checker, the cost model and the kernels all read this table;
 * nobody else knows a format's sizes.
 *
 * Every format but Q4G64 is one of ggml's (their block layouts in llama.cpp's
 * ggml-common.h): a matrix [out, in] (ggml ne = [in, out]) is `out` rows,
 * each in / block blocks of block_bytes bytes, rows back to back, so rows
 * [r0, r1) are one byte range and a row permutation moves whole rows. Q4G64
 * groups along `out` instead (fg_q4.h): its bytes are fg_q4_slice_bytes.
 *
 * Values. fg_fmt_to_f32 gives, for every ggml format, exactly the fp32
 * values of gguf-py's `dequantize` (gguf-py/gguf/quants.py, numpy float32
 * arithmetic: each product and sum one fp32 rounding, in the order written
 * there; this file is compiled without FMA contraction so that holds). The
 * kernels multiply those fp32 values (kernels/fg_gemm.h). F16 and Q4G64 are
 * the engine's own: fp16 values, and fg_q4_expand's fp16 values. */
#ifndef FG_FMT_H
#define FG_FMT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus   /* the cuda backend's kernels (gpu_worker/cuda/cuda_fmt.cu) read the enum */
extern "C" {
#define FG_FMT_STATIC_ASSERT static_assert
#else
#define FG_FMT_STATIC_ASSERT _Static_assert
#endif

/* The order is the store's on-disk dtype (minus one) and the nibble in a
 * model description: append only. */
typedef enum {
    FG_FMT_F16 = 0,   /* fp16 (the engine's default) */
    FG_FMT_Q4G64,     /* FlexGen 4-bit, groups of 64 along out (fg_q4.h) */
    FG_FMT_F32,
    FG_FMT_BF16,
    FG_FMT_Q8_0,
    FG_FMT_Q4_0,
    FG_FMT_Q4_1,
    FG_FMT_Q5_0,
    FG_FMT_Q5_1,
    FG_FMT_Q2_K,
    FG_FMT_Q3_K,
    FG_FMT_Q4_K,
    FG_FMT_Q5_K,
    FG_FMT_Q6_K,
    FG_FMT_MXFP4,
    FG_FMT_COUNT
} fg_fmt;
FG_FMT_STATIC_ASSERT(FG_FMT_COUNT <= 16, "a format is a nibble in fg_model_desc");

typedef void (*fg_fmt_fn)(const uint8_t *src, float *dst, uint64_t n);

typedef struct {
    const char *name;     /* "Q4_K", ggml's spelling; "Q4G64"; "F16" */
    int ggml_type;        /* ggml's type id, -1 for Q4G64 */
    int block;            /* values per block along `in` (Q4G64: 64 along out) */
    int block_bytes;      /* bytes per block */
    /* n values (n % block == 0) from src, at a block boundary, into dst as
     * fp32; NULL for Q4G64 (fg_q4.h expands it) */
    fg_fmt_fn to_f32;
} fg_fmt_info;

/* NULL for a number outside the table. */
const fg_fmt_info *fg_fmt_get(int fmt);
const char *fg_fmt_name(int fmt);   /* "?" outside the table */
/* The format named `name` (fg_fmt_name's spelling), -1 for none. */
int fg_fmt_by_name(const char *name);
/* The format of a ggml type id, -1 when the table has none (IQ*, TQ*, ...). */
int fg_fmt_of_ggml(uint32_t ggml_type);
/* A ggml block format (not F16, not Q4G64): 1. */
static inline int fg_fmt_is_ggml_block(int fmt) { return fmt >= FG_FMT_F32 && fmt < FG_FMT_COUNT; }
/* One of ggml's quantized formats, which a matrix is held in as it is (F32
 * and BF16 matrices are held fp16): 1. */
static inline int fg_fmt_is_ggml_quant(int fmt) { return fmt >= FG_FMT_Q8_0 && fmt < FG_FMT_COUNT; }
/* A set of formats as a mask, 1 << fmt each. */
#define FG_FMT_BIT(fmt) (1u << (fmt))
FG_FMT_STATIC_ASSERT(FG_FMT_COUNT <= 32, "a set of formats is a 32-bit mask");
/* The formats of the GGUF files people download (Q4_K_M mixes Q4_K and
 * Q6_K, Q5_K_M Q5_K and Q6_K; Q8_0, Q4_0): those whose GEMM rates a
 * profile measures where nobody names others (the gpu worker's --profile,
 * `flexgen profile`; a run measures its own model's). */
#define FG_FMT_PROFILE_DEFAULT "Q8_0,Q4_K,Q6_K,Q5_K,Q4_0"
/* "Q4_K,Q6_K" (names as fg_fmt_name spells them; "none" for none) into a
 * mask of ggml quantized formats; -1 (*bad the offending name) for a name
 * that is not one. F16, always measured, is accepted and left out. */
int fg_fmt_parse_list(const char *list, uint32_t *mask, const char **bad);
/* A mask as "Q4_K,Q6_K" ("none" for none), in format order. */
void fg_fmt_list_text(uint32_t mask, char *out, size_t cap);

/* Bytes of a matrix [out, in] in fmt (in % block == 0 for ggml formats; a
 * 1-D tensor is out = 1); 0 when in is not a whole number of blocks. */
uint64_t fg_fmt_bytes(int fmt, uint64_t out, uint64_t in);
/* Bytes of one row of `in` values (ggml formats, F16). */
uint64_t fg_fmt_row_bytes(int fmt, uint64_t in);

/* n values of fmt (a ggml format or F16) at a block boundary into fp32:
 * the AVX-512 form where the CPU has it and fg_fmt_x86.c has one (the same
 * bits), else the portable one (the table's to_f32). */
void fg_fmt_to_f32(int fmt, const void *src, float *dst, uint64_t n);
/* `bytes` of fmt (whole blocks; not Q4G64, which fg_q4_pack makes) at dst
 * as random valid blocks, the same for the same seed: every byte random but
 * each block's scales (fp16 d and min, Q6_K's d, MXFP4's exponent; F16,
 * BF16 and F32 values themselves) set small and finite, so no value is
 * denormal, infinite or NaN. What a kernel's speed is measured on
 * (flexgen-fmt-bench, the gpu worker's --profile): it does not depend on
 * the values beyond that. */
void fg_fmt_fill_random(int fmt, void *dst, uint64_t bytes, uint64_t seed);
/* Tests: 0 = the portable forms only, 1 = the fast ones where they exist
 * (the default). */
void fg_fmt_use_simd(int on);
/* fg_fmt_x86.c: the fast form of fmt, NULL where there is none. */
fg_fmt_fn fg_fmt__fast(int fmt);

#ifdef __cplusplus
}
#endif
#endif

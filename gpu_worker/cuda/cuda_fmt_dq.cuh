// cuda_fmt_dq.cuh - the device dequantizers of every weight format of
// common/fg_fmt.h, one per format, for cuda_fmt.cu's kernels. Each follows
// its function in common/fg_fmt.c (the ggml block layouts of llama.cpp's
// ggml-common.h, gguf-py's order of operations): fp16 scales widened
// exactly, integer codes converted exactly, then every product and
// difference one fp32 rounding, written as __fmul_rn / __fadd_rn /
// __fsub_rn, which nvcc never contracts into an FMA (cuda_fmt.cu is also
// built with -fmad=false); denormals are kept (no -ftz, no fast math:
// MXFP4's smallest scales are fp32 subnormals). So a value here is
// fg_fmt_to_f32's bit for bit, and Q4G64's fg_q4_expand's.
//
// Everything is __host__ __device__: on the host the intrinsics are the
// plain IEEE operations (the file that includes this built without
// contraction), so tests/gpu/cuda_fmt_host.cu runs this very source on the
// CPU against fg_fmt.c where no GPU is (the device build is cuda_fmt_check's).
#ifndef FG_CUDA_FMT_DQ_CUH
#define FG_CUDA_FMT_DQ_CUH

#include <cstdint>
#include <cstring>
#include <cuda_fp16.h>

#include "cuda_fmt.h"
#include "fg_fmt.h"
#include "fg_q4.h"

#define FG_HD __host__ __device__ __forceinline__
#ifdef __CUDA_ARCH__   // the host compiler does not know the device's pragma
#define FG_UNROLL _Pragma("unroll")
#else
#define FG_UNROLL
#endif

namespace fg_dq {

constexpr int kVec = FG_CUK_FMT_VEC;          // values dequantized at a time
constexpr int kQ4Rows = FG_Q4_GROUP;          // Q4G64: rows of a group
constexpr int kQ4PairBytes = FG_Q4_GROUP / 2; // Q4G64: bytes of a group's column (two rows a byte)

static_assert(FG_FMT_COUNT == 15, "a format added to common/fg_fmt.h needs its dequantizer here");

// ---- loads: a block's fields sit at any byte offset (blocks of 17, 22, 110 bytes) ----

FG_HD uint32_t ld16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
FG_HD uint32_t ld32(const uint8_t *p) { return ld16(p) | ld16(p + 2) << 16; }
FG_HD float half_at(const uint8_t *p) { return __half2float(__ushort_as_half((unsigned short)ld16(p))); }

// One IEEE fp32 operation, rounded to nearest even, never fused.
#ifdef __CUDA_ARCH__
FG_HD float mul(float a, float b) { return __fmul_rn(a, b); }
FG_HD float add(float a, float b) { return __fadd_rn(a, b); }
FG_HD float sub(float a, float b) { return __fsub_rn(a, b); }
FG_HD float quot(float a, float b) { return __fdiv_rn(a, b); }
FG_HD float bits_f32(uint32_t u) { return __uint_as_float(u); }
#else
FG_HD float mul(float a, float b) { return a * b; }
FG_HD float add(float a, float b) { return a + b; }
FG_HD float sub(float a, float b) { return a - b; }
FG_HD float quot(float a, float b) { return a / b; }
FG_HD float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
#endif
FG_HD float round16(float v) { return __half2float(__float2half_rn(v)); }

// ---- the dequantizers ---------------------------------------------------------
// Fmt<F>::run(b, j, w): values j .. j + kVec - 1 of the block at b (j % kVec
// == 0, so the run lies in one block, one half of a 32-block and one
// sub-block of 16 or 32 of a k-quant) into w, as fg_fmt.c's function of F.
// kBlock, kBytes: a block's values along `in` and its bytes (the formats
// without blocks are taken kVec values at a time).

template <int F>
struct Fmt;

template <>
struct Fmt<FG_FMT_F16> {
    static constexpr int kBlock = kVec, kBytes = 2 * kVec;
    FG_HD static void run(const uint8_t *b, int, float *w) {
FG_UNROLL
        for (int i = 0; i < kVec; i++) w[i] = half_at(b + 2 * i);
    }
};

template <>
struct Fmt<FG_FMT_F32> {
    static constexpr int kBlock = kVec, kBytes = 4 * kVec;
    FG_HD static void run(const uint8_t *b, int, float *w) {
FG_UNROLL
        for (int i = 0; i < kVec; i++) w[i] = bits_f32(ld32(b + 4 * i));
    }
};

// BF16: the upper half of an fp32
template <>
struct Fmt<FG_FMT_BF16> {
    static constexpr int kBlock = kVec, kBytes = 2 * kVec;
    FG_HD static void run(const uint8_t *b, int, float *w) {
FG_UNROLL
        for (int i = 0; i < kVec; i++) w[i] = bits_f32(ld16(b + 2 * i) << 16);
    }
};

// Q8_0: fp16 d, 32 int8 q; x = q * d
template <>
struct Fmt<FG_FMT_Q8_0> {
    static constexpr int kBlock = 32, kBytes = 34;
    FG_HD static void run(const uint8_t *b, int j, float *w) {
        float d = half_at(b);
FG_UNROLL
        for (int i = 0; i < kVec; i++) w[i] = mul((float)(int8_t)b[2 + j + i], d);
    }
};

// The 32-blocks' nibbles: value j < 16 the low nibble of byte j, value
// 16 + j its high one.
FG_HD int nib(const uint8_t *qs, int v) { return qs[v & 15] >> (v & 16 ? 4 : 0) & 15; }

// Q4_0: fp16 d, 16 bytes of nibbles; x = d * (q - 8)
template <>
struct Fmt<FG_FMT_Q4_0> {
    static constexpr int kBlock = 32, kBytes = 18;
    FG_HD static void run(const uint8_t *b, int j, float *w) {
        float d = half_at(b);
FG_UNROLL
        for (int i = 0; i < kVec; i++) w[i] = mul(d, (float)(nib(b + 2, j + i) - 8));
    }
};

// Q4_1: fp16 d, fp16 m, nibbles; x = d * q + m
template <>
struct Fmt<FG_FMT_Q4_1> {
    static constexpr int kBlock = 32, kBytes = 20;
    FG_HD static void run(const uint8_t *b, int j, float *w) {
        float d = half_at(b), m = half_at(b + 2);
FG_UNROLL
        for (int i = 0; i < kVec; i++) w[i] = add(mul(d, (float)nib(b + 4, j + i)), m);
    }
};

// Q5_0: fp16 d, u32 qh (bit v: value v's fifth bit), nibbles; x = d * (q - 16)
template <>
struct Fmt<FG_FMT_Q5_0> {
    static constexpr int kBlock = 32, kBytes = 22;
    FG_HD static void run(const uint8_t *b, int j, float *w) {
        float d = half_at(b);
        uint32_t qh = ld32(b + 2);
FG_UNROLL
        for (int i = 0; i < kVec; i++) {
            int v = j + i, q = nib(b + 6, v) | (int)(qh >> v & 1) << 4;
            w[i] = mul(d, (float)(q - 16));
        }
    }
};

// Q5_1: fp16 d, fp16 m, u32 qh, nibbles; x = d * q + m
template <>
struct Fmt<FG_FMT_Q5_1> {
    static constexpr int kBlock = 32, kBytes = 24;
    FG_HD static void run(const uint8_t *b, int j, float *w) {
        float d = half_at(b), m = half_at(b + 2);
        uint32_t qh = ld32(b + 4);
FG_UNROLL
        for (int i = 0; i < kVec; i++) {
            int v = j + i, q = nib(b + 8, v) | (int)(qh >> v & 1) << 4;
            w[i] = add(mul(d, (float)q), m);
        }
    }
};

// Q2_K: scales[16] (low nibble scale, high nibble min, per 16 values), qs[64]
// (value 128g + 32s + l: bits 2s of byte 32g + l), fp16 d at 80, dmin at 82;
// x = (d * sc) * q - (dmin * m)
template <>
struct Fmt<FG_FMT_Q2_K> {
    static constexpr int kBlock = 256, kBytes = 84;
    FG_HD static void run(const uint8_t *b, int j, float *w) {
        float d = half_at(b + 80), dmin = half_at(b + 82);
        int sc = b[j / 16], g = j / 128, s = j % 128 / 32, l = j % 32;
        float dl = mul(d, (float)(sc & 15)), ml = mul(dmin, (float)(sc >> 4));
        const uint8_t *qs = b + 16 + 32 * g + l;
FG_UNROLL
        for (int i = 0; i < kVec; i++) w[i] = sub(mul(dl, (float)(qs[i] >> (2 * s) & 3)), ml);
    }
};

// Q3_K: hmask[32] (bit k of byte l: value 32k + l's high bit), qs[64] as
// Q2_K, 12 bytes of 16 signed 6-bit scales, fp16 d at 108; q = low - 4
// where the high bit is 0; x = (d * scale) * q
template <>
struct Fmt<FG_FMT_Q3_K> {
    static constexpr int kBlock = 256, kBytes = 110;
    FG_HD static void run(const uint8_t *b, int j, float *w) {
        const uint8_t *sc = b + 96;
        float d = half_at(b + 108);
        int k = j / 16, g = j / 128, s = j % 128 / 32, l = j % 32, hbit = j / 32;
        int lo = (k < 8 ? sc[k] : sc[k - 8] >> 4) & 15, hi = sc[8 + k % 4] >> (2 * (k / 4)) & 3;
        float ds = mul(d, (float)((lo | hi << 4) - 32));
        const uint8_t *qs = b + 32 + 32 * g + l, *hm = b + l;
FG_UNROLL
        for (int i = 0; i < kVec; i++) {
            int q = qs[i] >> (2 * s) & 3, h = hm[i] >> hbit & 1;
            w[i] = mul(ds, (float)(q - ((h ^ 1) << 2)));
        }
    }
};

// The 6-bit scale and min of sub-block sb of a Q4_K/Q5_K block (12 bytes at s).
FG_HD void k_scale_min(const uint8_t *s, int sb, int *sc, int *mn) {
    if (sb < 4) {
        *sc = s[sb] & 63;
        *mn = s[sb + 4] & 63;
    } else {
        *sc = (s[sb + 4] & 15) | (s[sb - 4] >> 2 & 48);
        *mn = (s[sb + 4] >> 4) | (s[sb] >> 2 & 48);
    }
}

// Q4_K: fp16 d, fp16 dmin, scales[12], qs[128] (sub-block 2c the low
// nibbles of bytes 32c.., 2c + 1 the high ones); x = (d * sc) * q - (dmin * m)
template <>
struct Fmt<FG_FMT_Q4_K> {
    static constexpr int kBlock = 256, kBytes = 144;
    FG_HD static void run(const uint8_t *b, int j, float *w) {
        float d = half_at(b), dmin = half_at(b + 2);
        int sb = j / 32, sc, mn;
        k_scale_min(b + 4, sb, &sc, &mn);
        float ds = mul(d, (float)sc), dm = mul(dmin, (float)mn);
        const uint8_t *q = b + 16 + 32 * (sb / 2) + j % 32;
        int sh = 4 * (sb % 2);
FG_UNROLL
        for (int i = 0; i < kVec; i++) w[i] = sub(mul(ds, (float)(q[i] >> sh & 15)), dm);
    }
};

// Q5_K: fp16 d, fp16 dmin, scales[12], qh[32] (bit s of byte l: value
// 32s + l's fifth bit), qs[128] as Q4_K
template <>
struct Fmt<FG_FMT_Q5_K> {
    static constexpr int kBlock = 256, kBytes = 176;
    FG_HD static void run(const uint8_t *b, int j, float *w) {
        float d = half_at(b), dmin = half_at(b + 2);
        int sb = j / 32, sc, mn;
        k_scale_min(b + 4, sb, &sc, &mn);
        float ds = mul(d, (float)sc), dm = mul(dmin, (float)mn);
        const uint8_t *qh = b + 16 + j % 32, *q = b + 48 + 32 * (sb / 2) + j % 32;
        int sh = 4 * (sb % 2);
FG_UNROLL
        for (int i = 0; i < kVec; i++) {
            int v = (q[i] >> sh & 15) | (qh[i] >> sb & 1) << 4;
            w[i] = sub(mul(ds, (float)v), dm);
        }
    }
};

// Q6_K: ql[128] (value 128g + 64n + t: nibble n of byte 64g + t), qh[64]
// (its 2 high bits: bits 2k of byte 32g + l for value 128g + 32k + l), int8
// scales[16], fp16 d at 208; x = (d * scale) * (q - 32)
template <>
struct Fmt<FG_FMT_Q6_K> {
    static constexpr int kBlock = 256, kBytes = 210;
    FG_HD static void run(const uint8_t *b, int j, float *w) {
        float d = half_at(b + 208);
        int g = j / 128, r = j % 128;
        float ds = mul(d, (float)(int8_t)b[192 + j / 16]);
        const uint8_t *ql = b + 64 * g + r % 64, *qh = b + 128 + 32 * g + r % 32;
        int shl = 4 * (r / 64), shh = 2 * (r / 32);
FG_UNROLL
        for (int i = 0; i < kVec; i++) {
            int q = (ql[i] >> shl & 15) | (qh[i] >> shh & 3) << 4;
            w[i] = mul(ds, (float)(q - 32));
        }
    }
};

// MXFP4: an e8m0 exponent e (scale 2^(e - 128), e < 2 the fp32 subnormals,
// as fg_fmt.c), 16 bytes of e2m1 codes laid out as Q4_0; x = scale *
// kvalue[code], kvalues doubled: 0 1 2 3 4 6 8 12, bit 3 the sign
template <>
struct Fmt<FG_FMT_MXFP4> {
    static constexpr int kBlock = 32, kBytes = 17;
    FG_HD static void run(const uint8_t *b, int j, float *w) {
        uint32_t e = b[0], bits = e < 2 ? 0x00200000u << e : (e - 1) << 23;
        float d = bits_f32(bits);
FG_UNROLL
        for (int i = 0; i < kVec; i++) {
            int c = nib(b + 1, j + i), m = c & 7, mag = m < 4 ? m : (2 + (m & 1)) << ((m >> 1) - 1);
            w[i] = mul(d, (float)(c & 8 ? -mag : mag));
        }
    }
};

// A matrix (out, in) in its format.
struct Mat {
    const uint8_t *w;
    int64_t in, out;
};

// Values v0 .. v0 + kVec - 1 of row o of m.
template <int F>
FG_HD void dq(const Mat &m, int64_t o, int64_t v0, float *w) {
    using T = Fmt<F>;
    const uint8_t *row = m.w + o * (m.in / T::kBlock * T::kBytes);
    T::run(row + v0 / T::kBlock * T::kBytes, (int)(v0 % T::kBlock), w);
}

// Q4G64 (common/fg_q4.h): rows grouped by 64 along out; packed [G][32][in]
// (row 2k of a group the high nibble), mins [G][in] fp16, scales [G][in]
// fp16; y = fp16(fp16(q * (1 / scale)) + min), as fg_q4.c's expansion (the
// reciprocal product and the quotient round to the same fp16: q4_fast).
template <>
FG_HD void dq<FG_FMT_Q4G64>(const Mat &m, int64_t o, int64_t v0, float *w) {
    int64_t G = (m.out + kQ4Rows - 1) / kQ4Rows, g = o / kQ4Rows, C = m.in;
    const uint8_t *p = m.w + (g * kQ4PairBytes + o % kQ4Rows / 2) * C + v0;
    const uint8_t *mins = m.w + G * kQ4PairBytes * C + 2 * (g * C + v0), *scales = mins + 2 * G * C;
    int sh = o % 2 ? 0 : 4;
FG_UNROLL
    for (int i = 0; i < kVec; i++) {
        float rcp = quot(1.0f, half_at(scales + 2 * i));
        w[i] = round16(add(round16(mul((float)(p[i] >> sh & 15), rcp)), half_at(mins + 2 * i)));
    }
}

// ---- a compressed KV cache: head slices (d, 1) of fg_q4.h --------------------------
// A cache slice is one head's d values grouped along d (C = 1): packed
// [G][32] (row 2j of a group the high nibble), mins [G] fp16, scales [G]
// fp16, G = ceil(d / 64), 36 G bytes.

constexpr int kQ4SliceBytesPerGroup = 36;   // 32 packed, a min and a scale

// Row r of a head slice of d rows, expanded as dq<FG_FMT_Q4G64> expands a
// weight's (fg_q4_expand's fp16 value, as fp32).
FG_HD float q4_slice_value(const uint8_t *slice, int d, int r) {
    int G = (d + kQ4Rows - 1) / kQ4Rows, g = r / kQ4Rows;
    const uint8_t *mins = slice + G * kQ4PairBytes;
    int q = slice[g * kQ4PairBytes + r % kQ4Rows / 2] >> (r % 2 ? 0 : 4) & 15;
    float rcp = quot(1.0f, half_at(mins + 2 * (G + g)));
    return round16(add(round16(mul((float)q, rcp)), half_at(mins + 2 * g)));
}

// Group g of a head slice packed from v (its 64 values in fp32, those past
// the slice's d rows +0.0), as fg_q4_pack: min and max (the first attaining
// each), s = 15 / (max - min) (+inf when equal: every code 0), q =
// rint(clamp((v - min) s, 0, 15)) half to even, each operation one fp32
// rounding; the min and fp16(s) stored (+inf where s overflows fp16).
FG_HD void q4_pack_group(const float *v, uint8_t *slice, int d, int g) {
    int G = (d + kQ4Rows - 1) / kQ4Rows;
    float mn = v[0], mx = v[0];
    for (int i = 1; i < kQ4Rows; i++) {
        if (v[i] < mn) mn = v[i];
        if (v[i] > mx) mx = v[i];
    }
    float range = sub(mx, mn), s = quot(15.0f, range);
    uint8_t *packed = slice + g * kQ4PairBytes;
    for (int j = 0; j < kQ4PairBytes; j++) {
        int q[2] = {0, 0};
        for (int t = 0; t < 2 && range != 0.0f; t++) {
            float x = mul(sub(v[2 * j + t], mn), s);
            x = x < 0.0f ? 0.0f : x > 15.0f ? 15.0f : x;
            q[t] = (int)rintf(x);
        }
        packed[j] = (uint8_t)(q[0] << 4 | q[1]);
    }
    uint16_t m16 = __half_as_ushort(__float2half_rn(mn)), s16 = __half_as_ushort(__float2half_rn(s));
    uint8_t *mins = slice + G * kQ4PairBytes;
    mins[2 * g] = (uint8_t)(m16 & 0xff), mins[2 * g + 1] = (uint8_t)(m16 >> 8);
    mins[2 * (G + g)] = (uint8_t)(s16 & 0xff), mins[2 * (G + g) + 1] = (uint8_t)(s16 >> 8);
}

}   // namespace fg_dq

// Every format, for a switch over the template instances.
#define FG_CUK_FORMATS(X)                                                                                  \
    X(FG_FMT_F16) X(FG_FMT_Q4G64) X(FG_FMT_F32) X(FG_FMT_BF16) X(FG_FMT_Q8_0) X(FG_FMT_Q4_0) X(FG_FMT_Q4_1) \
        X(FG_FMT_Q5_0) X(FG_FMT_Q5_1) X(FG_FMT_Q2_K) X(FG_FMT_Q3_K) X(FG_FMT_Q4_K) X(FG_FMT_Q5_K)           \
            X(FG_FMT_Q6_K) X(FG_FMT_MXFP4)

#endif

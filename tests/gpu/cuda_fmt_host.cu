// cuda_fmt_host.cu - the cuda backend's dequantizers, compiled from their
// own source (gpu_worker/cuda/cuda_fmt_dq.cuh, __host__ __device__) for
// the host and run on the CPU, against common/fg_fmt.c: every value of
// every format bit for bit, fp32 and rounded to fp16 (the prefill tile),
// on random bytes (every code and scale bit pattern, NaN and inf scales
// too: NaN equals NaN) and realistic blocks, rows addressed as the kernels
// address them (several blocks a row, an odd row count; Q4G64 a last group
// of 44 rows), against both the portable and the fast (AVX-512) forms; and
// a compressed KV cache's head slices packed and expanded (fg_q4.c).
//
// It needs no GPU, so it runs wherever CUDA is built. It checks the
// layouts, indices and order of operations the kernels compute with; that
// the device build computes each operation as the host does (the rounded
// intrinsics, no FMA, denormals kept) is cuda_fmt_check's to show on a GPU.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cuda_fmt_dq.cuh"
#include "fg_common.h"
#include "fmt_fill.h"

namespace {

uint64_t rng = 0xd0e5;

bool nan32(float f) { return f != f; }
bool nan16(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }

// W (out, in) through the device dequantizer of F, run by run as a thread of
// the kernels takes it: fp32, and fp16 as the tile stores it.
template <int F>
void device_rows(const uint8_t *W, int out, int in, float *f32, uint16_t *f16) {
    fg_dq::Mat m = {W, in, out};
    for (int o = 0; o < out; o++)
        for (int v0 = 0; v0 < in; v0 += fg_dq::kVec) {
            float w[fg_dq::kVec];
            fg_dq::dq<F>(m, o, v0, w);
            for (int i = 0; i < fg_dq::kVec; i++) {
                size_t k = (size_t)o * in + v0 + i;
                f32[k] = w[i];
                f16[k] = __half_as_ushort(__float2half_rn(w[i]));
            }
        }
}

void device_rows_of(int fmt, const uint8_t *W, int out, int in, float *f32, uint16_t *f16) {
    switch (fmt) {
#define ROWS(f) \
    case f: device_rows<f>(W, out, in, f32, f16); break;
        FG_CUK_FORMATS(ROWS)
#undef ROWS
    default: fg_exit_on(fg_err_set(FG_EINPUT, "format %d has no device dequantizer", fmt));
    }
}

void cpu_rows(int fmt, const uint8_t *W, int out, int in, float *f32, uint16_t *f16) {
    size_t n = (size_t)out * in;
    if (fmt == FG_FMT_Q4G64) {
        fg_q4_expand_rows_f32(W, out, in, 0, out, f32);
        fg_q4_expand_rows(W, out, in, 0, out, f16);
        return;
    }
    uint64_t rb = fg_fmt_row_bytes(fmt, (uint64_t)in);
    for (int r = 0; r < out; r++) fg_fmt_to_f32(fmt, W + (size_t)r * rb, f32 + (size_t)r * in, (uint64_t)in);
    for (size_t i = 0; i < n; i++) f16[i] = fg_float_to_half(f32[i]);
}

bool check(int fmt, int out, int in, bool realistic, bool simd) {
    uint64_t wb = fg_fmt_bytes(fmt, (uint64_t)out, (uint64_t)in);
    size_t n = (size_t)out * in;
    uint8_t *W = (uint8_t *)malloc(wb);
    float *h32 = (float *)malloc(4 * n), *g32 = (float *)malloc(4 * n);
    uint16_t *h16 = (uint16_t *)malloc(2 * n), *g16 = (uint16_t *)malloc(2 * n);
    if (realistic) fmt_fill(W, fmt, out, in, 0.05f, &rng);
    else fmt_fill_bytes(W, wb, &rng);
    fg_fmt_use_simd(simd);
    fg_q4_limit_simd(simd ? 2 : 0);
    cpu_rows(fmt, W, out, in, h32, h16);
    device_rows_of(fmt, W, out, in, g32, g16);
    size_t bad = 0, first = n, nans = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t a, b;
        memcpy(&a, &h32[i], 4), memcpy(&b, &g32[i], 4);
        bool e = (nan32(h32[i]) ? !nan32(g32[i]) : a != b) || (nan16(h16[i]) ? !nan16(g16[i]) : h16[i] != g16[i]);
        nans += nan32(h32[i]);
        if (e && !bad++) first = i;
    }
    const char *what = realistic ? "realistic" : "random bytes";
    if (bad)
        printf("FAIL %s %s (%d, %d), %s CPU forms: %zu values differ; first [%zu, %zu]: fg_fmt %.9g (fp16 0x%04x), "
               "device source %.9g (0x%04x)\n", fg_fmt_name(fmt), what, out, in, simd ? "fast" : "portable", bad,
               first / in, first % in, (double)h32[first], h16[first], (double)g32[first], g16[first]);
    else
        printf("ok   %s %s (%d, %d), %s CPU forms: fp32 and fp16 bitwise equal (%zu NaN)\n", fg_fmt_name(fmt), what,
               out, in, simd ? "fast" : "portable", nans);
    free(W), free(h32), free(g32), free(h16), free(g16);
    return !bad;
}

// A compressed cache's head slices (d values, C = 1) packed and expanded by
// the device source (q4_pack_group, q4_slice_value) against fg_q4_pack and
// fg_q4_expand, bit for bit: uniform values, a constant group, one large
// value among small ones, a scale fp16 cannot hold, and d not a multiple of
// 64 (the padded group).
bool check_cache(int d, int kind) {
    constexpr int kMaxD = 256;   // the largest head here
    int G = (d + 63) / 64;
    size_t nb = fg_q4_slice_bytes((uint64_t)d, 1);
    fg_half x[kMaxD] = {0}, hy[kMaxD] = {0};
    uint8_t hs[36 * kMaxD / 64] = {0}, gs[36 * kMaxD / 64] = {0};
    for (int i = 0; i < d; i++) {
        float f = (float)(fmt_fill_urand(&rng) * 4 - 2);
        if (kind == 1) f = 0.75f;                       // constant: scale +inf, every code 0
        if (kind == 2) f = i == d / 3 ? 300.0f : f / 64;   // one outlier
        if (kind == 3) f = f > 0 ? 0.00006103515625f : 0.0f;   // a range of 2^-14: fp16(15 / range) is +inf
        x[i] = fg_float_to_half(f);
    }
    fg_q4_pack(x, d, 1, hs);
    fg_q4_expand(hs, d, 1, hy);
    for (int g = 0; g < G; g++) {
        float v[64];
        for (int i = 0; i < 64; i++) v[i] = 64 * g + i < d ? fg_half_to_float(x[64 * g + i]) : 0.0f;
        fg_dq::q4_pack_group(v, gs, d, g);
    }
    int bad_bytes = memcmp(hs, gs, nb) != 0, bad_vals = 0;
    for (int r = 0; r < d; r++)
        bad_vals += __half_as_ushort(__float2half_rn(fg_dq::q4_slice_value(hs, d, r))) != hy[r];
    static const char *const kinds[] = {"uniform", "constant", "outlier", "scale overflowing fp16"};
    printf("%s cache head slice d %d %s: packed bytes %s, expanded values %s\n", bad_bytes || bad_vals ? "FAIL" : "ok  ",
           d, kinds[kind], bad_bytes ? "differ" : "equal", bad_vals ? "differ" : "equal");
    return !bad_bytes && !bad_vals;
}

}   // namespace

int main() {
    bool ok = true;
    for (int fmt = 0; fmt < FG_FMT_COUNT; fmt++) {
        const fg_fmt_info *f = fg_fmt_get(fmt);
        // rows of three k-quant blocks or seventeen 32-blocks; Q4G64 groups along out: the last of 44 rows
        int in = f->block == 256 ? 768 : 544, out = 37;
        if (fmt == FG_FMT_Q4G64) in = 40, out = 300;
        for (int simd = 0; simd < 2; simd++) {
            ok &= check(fmt, out, in, false, simd);
            ok &= check(fmt, out, in, true, simd);
        }
    }
    for (int d : {64, 80, 128, 256})
        for (int kind = 0; kind < 4; kind++) ok &= check_cache(d, kind);
    printf("cuda_fmt_host: %s\n", ok ? "the device dequantizers' source equals fg_fmt.c and fg_q4.c" : "FAIL");
    return ok ? 0 : 1;
}

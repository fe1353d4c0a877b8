// cuda_fmt.cu - the weight formats on the device (see cuda_fmt.h): the
// kernels built on the dequantizers of cuda_fmt_dq.cuh, rows (the
// embedding's gather, the prefill tile) and the GEMV (decode). Which one a
// Linear runs is cuda_linear.c's choice.
//
// Built with -fmad=false (CMakeLists.txt): the dequantizers' products and
// sums must not fuse (cuda_fmt_dq.cuh). Only the GEMV's sums use FMA, by
// name (__fmaf_rn): they need not follow the CPU's order, only the values
// they sum must be the CPU's.
//
// Shapes: W (out, in) in its format; x (rows, in) fp16; y (rows, out).
#include "cuda_fmt.h"

#include <cstdint>
#include <cuda_fp16.h>

#include "cuda_fmt_dq.cuh"

namespace {

using namespace fg_dq;

constexpr int kWarp = 32;                     // threads of a warp
constexpr unsigned kFullMask = 0xffffffffu;   // every lane of a warp in a shuffle
constexpr int kThreads = 256;                 // a block's threads
constexpr int kGemvWarps = kThreads / kWarp;  // output rows per GEMV block, a warp each
constexpr int kPass = FG_CUK_GEMV_PASS_ROWS;  // rows of x a GEMV pass holds in registers
constexpr int64_t kMaxGrid = 1 << 20;         // blocks at most: grid-stride loops cover the rest

// ---- fp16 / fp32 outputs ---------------------------------------------------------

__device__ __forceinline__ float ld_y(const uint16_t *y, size_t i) { return __half2float(__ushort_as_half(y[i])); }
__device__ __forceinline__ float ld_y(const float *y, size_t i) { return y[i]; }
__device__ __forceinline__ void st_y(uint16_t *y, size_t i, float v) { y[i] = __half_as_ushort(__float2half_rn(v)); }
__device__ __forceinline__ void st_y(float *y, size_t i, float v) { y[i] = v; }

// Two fp16 values in a word, the first in the low half (little-endian memory order).
__device__ __forceinline__ uint32_t pack2(float a, float b) {
    return (uint32_t)__half_as_ushort(__float2half_rn(a)) | (uint32_t)__half_as_ushort(__float2half_rn(b)) << 16;
}
__device__ __forceinline__ float lo16(uint32_t u) { return __half2float(__ushort_as_half((unsigned short)(u & 0xffff))); }
__device__ __forceinline__ float hi16(uint32_t u) { return __half2float(__ushort_as_half((unsigned short)(u >> 16))); }
static_assert(kVec == 8, "a run of fp16 values is one uint4");

// kVec values to d: fp16 as one 16-byte store where d is aligned for it
// (the tile), else one at a time.
__device__ __forceinline__ void st_run(uint16_t *d, const float *w) {
    if ((reinterpret_cast<uintptr_t>(d) & 15) == 0) {
        *reinterpret_cast<uint4 *>(d) =
            make_uint4(pack2(w[0], w[1]), pack2(w[2], w[3]), pack2(w[4], w[5]), pack2(w[6], w[7]));
        return;
    }
#pragma unroll
    for (int i = 0; i < kVec; i++) st_y(d, i, w[i]);
}
__device__ __forceinline__ void st_run(float *d, const float *w) {
#pragma unroll
    for (int i = 0; i < kVec; i++) d[i] = w[i];
}

// kVec fp16 values of x at p as fp32: one 16-byte load where aligned.
__device__ __forceinline__ void ld_x(const uint16_t *p, bool vec, float *xf) {
    if (vec) {
        uint4 u = *reinterpret_cast<const uint4 *>(p);
        xf[0] = lo16(u.x), xf[1] = hi16(u.x), xf[2] = lo16(u.y), xf[3] = hi16(u.y);
        xf[4] = lo16(u.z), xf[5] = hi16(u.z), xf[6] = lo16(u.w), xf[7] = hi16(u.w);
        return;
    }
#pragma unroll
    for (int i = 0; i < kVec; i++) xf[i] = __half2float(__ushort_as_half(p[i]));
}

#define GRID_STRIDE(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

unsigned grid_for(int64_t n) {
    int64_t g = (n + kThreads - 1) / kThreads;
    return (unsigned)(g < 1 ? 1 : g > kMaxGrid ? kMaxGrid : g);
}

// ---- rows: the gather and the tile --------------------------------------------------

// dst (n, in) = rows ids[r] (or o0 + r) of m; a thread per run of kVec values.
template <int F, typename Y>
__global__ void k_rows(Y *dst, const int32_t *ids, Mat m, int64_t o0, int64_t n, int32_t *bad) {
    int64_t per = m.in / kVec;
    GRID_STRIDE(t, n * per) {
        int64_t r = t / per, v0 = t % per * kVec, o = ids ? (int64_t)ids[r] : o0 + r;
        float w[kVec];
        if (o < 0 || o >= m.out) {   // an id outside the vocabulary: zeros, and the flag
            if (v0 == 0) atomicMin(bad, (int32_t)r);
#pragma unroll
            for (int i = 0; i < kVec; i++) w[i] = 0.0f;
        } else {
            dq<F>(m, o, v0, w);
        }
        st_run(dst + r * m.in + v0, w);
    }
}

// ---- the GEMV ---------------------------------------------------------------------

// y (rows, out) = alpha x W^T + beta y. Warp k of block b owns output o =
// b * kGemvWarps + k: each lane dequantizes runs of kVec values of row o,
// lane l the runs at l * kVec + j * kWarp * kVec (a k-quant's whole block
// per step of the warp, a 32-block's eight), multiplies them into kPass rows
// of x at once, and the warp sums its lanes by a butterfly. The row's
// blocks come from device memory once; the next pass of kPass rows finds
// them in cache.
template <int F, typename Y>
__global__ void k_gemv(Y *y, const uint16_t *__restrict__ x, Mat m, int rows, float alpha, float beta, bool xvec) {
    int lane = threadIdx.x % kWarp;
    int64_t o = (int64_t)blockIdx.x * kGemvWarps + threadIdx.x / kWarp;
    if (o >= m.out) return;   // o is the whole warp's: no lane of it is left at a shuffle
    for (int r0 = 0; r0 < rows; r0 += kPass) {
        int nr = rows - r0 < kPass ? rows - r0 : kPass;
        float acc[kPass];
#pragma unroll
        for (int r = 0; r < kPass; r++) acc[r] = 0.0f;
        for (int64_t v0 = (int64_t)lane * kVec; v0 < m.in; v0 += kWarp * kVec) {
            float w[kVec];
            dq<F>(m, o, v0, w);
#pragma unroll
            for (int r = 0; r < kPass; r++) {
                if (r >= nr) break;
                float xf[kVec];
                ld_x(x + (size_t)(r0 + r) * m.in + v0, xvec, xf);
#pragma unroll
                for (int i = 0; i < kVec; i++) acc[r] = __fmaf_rn(w[i], xf[i], acc[r]);
            }
        }
#pragma unroll
        for (int r = 0; r < kPass; r++)
            for (int off = kWarp / 2; off; off >>= 1) acc[r] = add(acc[r], __shfl_xor_sync(kFullMask, acc[r], off));
        if (lane == 0)
#pragma unroll   // acc stays in registers: no index into it is left to run time
            for (int r = 0; r < kPass; r++) {
                if (r >= nr) break;
                size_t i = (size_t)(r0 + r) * m.out + o;
                float v = mul(alpha, acc[r]);
                st_y(y, i, beta != 0.0f ? add(v, mul(beta, ld_y(y, i))) : v);
            }
    }
}

template <typename Y>
int launch_rows(Y *dst, const int32_t *ids, Mat m, int fmt, int64_t o0, int64_t n, int32_t *bad, cudaStream_t s) {
    unsigned grid = grid_for(n * (m.in / kVec));
    switch (fmt) {
#define ROWS(f) \
    case f: k_rows<f, Y><<<grid, kThreads, 0, s>>>(dst, ids, m, o0, n, bad); break;
        FG_CUK_FORMATS(ROWS)
#undef ROWS
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

template <typename Y>
int launch_gemv(Y *y, const uint16_t *x, Mat m, int fmt, int rows, float alpha, float beta, cudaStream_t s) {
    unsigned grid = (unsigned)((m.out + kGemvWarps - 1) / kGemvWarps);
    bool xvec = (reinterpret_cast<uintptr_t>(x) & 15) == 0;   // rows of in % 8 == 0 values keep x's alignment
    switch (fmt) {
#define GEMV(f) \
    case f: k_gemv<f, Y><<<grid, kThreads, 0, s>>>(y, x, m, rows, alpha, beta, xvec); break;
        FG_CUK_FORMATS(GEMV)
#undef GEMV
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

}   // namespace

extern "C" int fg_cuk_fmt_rows(uint16_t *dst16, float *dst32, const int32_t *ids, const void *W, int fmt, int in,
                               int64_t out, int64_t o0, int64_t n, int32_t *bad, cudaStream_t s) {
    if (in <= 0 || in % kVec || (!dst16 == !dst32)) return (int)cudaErrorInvalidValue;
    Mat m = {static_cast<const uint8_t *>(W), in, out};
    return dst16 ? launch_rows(dst16, ids, m, fmt, o0, n, bad, s) : launch_rows(dst32, ids, m, fmt, o0, n, bad, s);
}

extern "C" int fg_cuk_fmt_gemv(void *y, int y32, const uint16_t *x, const void *W, int fmt, int rows, int in,
                               int out, float alpha, float beta, cudaStream_t s) {
    if (in <= 0 || in % kVec || rows < 1 || out < 1) return (int)cudaErrorInvalidValue;
    Mat m = {static_cast<const uint8_t *>(W), in, out};
    return y32 ? launch_gemv(static_cast<float *>(y), x, m, fmt, rows, alpha, beta, s)
               : launch_gemv(static_cast<uint16_t *>(y), x, m, fmt, rows, alpha, beta, s);
}

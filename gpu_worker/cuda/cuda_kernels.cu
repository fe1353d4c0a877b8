// cuda_kernels.cu - the cuda backend's own kernels (see cuda_kernels.h):
// LayerNorm, RMSNorm (fp16 or fp32 out: Qwen3's per-head q/k norms, a
// router's input), bias rows and the residual for cuBLAS's C, ReLU,
// SwiGLU, rounding (with a residual added first), the embedding with
// positions, rotary embeddings, the cache store (fp16, or FlexGen's 4-bit
// head slices) and a compressed cache's expansion, the causal masked
// softmax (with a sliding window), decode attention over the cache
// (grouped kv heads, fp16 or compressed), argmax. Each mirrors a CPU
// function of kernels/ (named in its comment) so the two backends agree to
// fp16 rounding; sums that the CPU keeps in double stay double here.
#include "cuda_kernels.h"

#include <cfloat>
#include <cstdint>
#include <cuda_fp16.h>

#include "cuda_fmt_dq.cuh"   // a compressed cache's head slices: fg_q4.h's packing and expansion

namespace {

constexpr int kThreads = 256;                 // a block's threads for most kernels
constexpr int kWarp = 32;                     // threads of a warp, and warps a block's reduction holds
constexpr unsigned kFullMask = 0xffffffffu;   // every lane of a warp in a shuffle
constexpr int64_t kMaxGrid = 1 << 20;         // blocks at most: grid-stride loops cover the rest
constexpr float kLnEps = 1e-5f;               // FG_LN_EPS (kernels/fg_ops.h), fg_layernorm's epsilon

__device__ __forceinline__ float f16(const uint16_t *p, size_t i) {
    return __half2float(__ushort_as_half(p[i]));
}
__device__ __forceinline__ uint16_t to16(float x) { return __half_as_ushort(__float2half_rn(x)); }
__device__ __forceinline__ float ldx(const uint16_t *p, size_t i) { return f16(p, i); }
__device__ __forceinline__ float ldx(const float *p, size_t i) { return p[i]; }

// Sum (or max) over the block; every thread gets the result.
template <typename T, bool kMax>
__device__ T block_reduce(T v) {
    __shared__ T sh[kWarp];
    for (int o = kWarp / 2; o; o >>= 1) {
        T u = __shfl_down_sync(kFullMask, v, o);
        v = kMax ? (u > v ? u : v) : v + u;
    }
    int lane = threadIdx.x % kWarp, wid = threadIdx.x / kWarp, nw = (blockDim.x + kWarp - 1) / kWarp;
    __syncthreads();   // sh may still be read by the previous call
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    if (wid == 0) {
        v = lane < nw ? sh[lane] : (kMax ? sh[0] : T(0));
        for (int o = kWarp / 2; o; o >>= 1) {
            T u = __shfl_down_sync(kFullMask, v, o);
            v = kMax ? (u > v ? u : v) : v + u;
        }
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    return sh[0];
}

unsigned grid_for(int64_t n) {
    int64_t g = (n + kThreads - 1) / kThreads;
    return (unsigned)(g < 1 ? 1 : g > kMaxGrid ? kMaxGrid : g);
}

#define GRID_STRIDE(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

// ---- LayerNorm (fg_layernorm: mean, then variance, in double) ----------------

template <typename T>
__global__ void k_layernorm(uint16_t *y, const T *x, const uint16_t *w, const uint16_t *b, int dim, int row_mul,
                            int row_add) {
    const T *xr = x + ((size_t)blockIdx.x * row_mul + row_add) * dim;
    uint16_t *yr = y + (size_t)blockIdx.x * dim;
    double s = 0;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) s += ldx(xr, i);
    double mean = block_reduce<double, false>(s) / dim;
    double v = 0;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        double d = ldx(xr, i) - mean;
        v += d * d;
    }
    double var = block_reduce<double, false>(v) / dim;
    float rstd = (float)(1.0 / sqrt(var + (double)kLnEps)), m = (float)mean;
    // each thread reads then writes its own elements: y may be x
    for (int i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = to16((ldx(xr, i) - m) * rstd * f16(w, i) + f16(b, i));
}

// ---- RMSNorm (fg_rmsnorm: the mean square in double) ------------------------------

// Into y16 (rounded) and/or y32 (fp32, the host's value itself), either NULL.
template <typename T>
__global__ void k_rmsnorm(uint16_t *y16, float *y32, const T *x, const uint16_t *w, float eps, int dim, int row_mul,
                          int row_add) {
    const T *xr = x + ((size_t)blockIdx.x * row_mul + row_add) * dim;
    size_t yo = (size_t)blockIdx.x * dim;
    double s = 0;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        double v = ldx(xr, i);
        s += v * v;
    }
    float rstd = (float)(1.0 / sqrt(block_reduce<double, false>(s) / dim + (double)eps));
    // each thread reads then writes its own elements: y may be x
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = ldx(xr, i) * rstd * f16(w, i);
        if (y16) y16[yo + i] = to16(v);
        if (y32) y32[yo + i] = v;
    }
}

// ---- elementwise -----------------------------------------------------------------

__global__ void k_bias_rows32(float *dst, const uint16_t *bias, int64_t n, int cols) {
    GRID_STRIDE(i, n) dst[i] = bias ? f16(bias, i % cols) : 0.0f;
}

// fg_swiglu: g / (1 + exp(-g)) * u, fp32 from the fp16 GEMM outputs
__global__ void k_swiglu16(uint16_t *g, const uint16_t *u, int64_t n) {
    GRID_STRIDE(i, n) {
        float x = f16(g, i);
        g[i] = to16(x / (1.0f + expf(-x)) * f16(u, i));
    }
}

__global__ void k_bias_rows16(uint16_t *dst, const uint16_t *bias, int64_t n, int cols) {
    GRID_STRIDE(i, n) dst[i] = bias[i % cols];
}

__global__ void k_resid_init(float *y, const uint16_t *h, const uint16_t *bias, int64_t n, int cols) {
    GRID_STRIDE(i, n) y[i] = f16(h, i) + (bias ? f16(bias, i % cols) : 0.0f);
}

// fg_relu: x > 0 ? x : 0 (NaN and -0 become +0)
__global__ void k_relu16(uint16_t *x, int64_t n) {
    GRID_STRIDE(i, n) if (!(f16(x, i) > 0.0f)) x[i] = 0;
}

__global__ void k_round16(uint16_t *y, const float *x, int64_t n) {
    GRID_STRIDE(i, n) y[i] = to16(x[i]);
}

// fg_add then the rounding: h + acc in fp32, rounded once (y may be h)
__global__ void k_resid_round16(uint16_t *y, const uint16_t *h, const float *acc, int64_t n) {
    GRID_STRIDE(i, n) y[i] = to16(__fadd_rn(f16(h, i), acc[i]));
}

// ---- embedding (fg_opt_embed, fg_opt_positions) ---------------------------------

__global__ void k_embed_gather(uint16_t *e, const int32_t *ids, const uint16_t *E, int64_t n, int D, int V,
                               int32_t *bad) {
    GRID_STRIDE(i, n) {
        int64_t r = i / D;
        int32_t id = ids[r];
        if (id < 0 || id >= V) {
            atomicMin(bad, (int32_t)r);
            e[i] = 0;
        } else {
            e[i] = E[(int64_t)id * D + i % D];
        }
    }
}

// One block per row r = b*S + i: its position from the mask, then H sums.
__global__ void k_embed_pos(uint16_t *h, const float *e32, const int32_t *ids, const uint16_t *E, const uint16_t *P,
                            const uint8_t *mask, int mask_stride, int S, int past, int H, int V, int32_t *bad) {
    int r = blockIdx.x, b = r / S, i = r % S;
    const uint8_t *m = mask + (size_t)b * mask_stride;
    float c = 0;
    for (int t = threadIdx.x; t <= past + i; t += blockDim.x) c += m[t] != 0;
    int count = (int)block_reduce<float, false>(c), real = m[past + i] != 0;
    int pos = count * real - 1 + 2;
    int32_t id = ids[r];
    uint16_t *hr = h + (size_t)r * H;
    if (!e32 && (id < 0 || id >= V)) {
        if (threadIdx.x == 0) atomicMin(bad, r);
        for (int j = threadIdx.x; j < H; j += blockDim.x) hr[j] = 0;
        return;
    }
    const uint16_t *pr = P + (size_t)pos * H;
    for (int j = threadIdx.x; j < H; j += blockDim.x) {
        float base = e32 ? e32[(size_t)r * H + j] : f16(E, (size_t)id * H + j);
        hr[j] = to16(base + f16(pr, j));
    }
}

// ---- rotary (fg_rope_positions, fg_rope_apply) ----------------------------------------

// One block per row r = b*S + i: its position from the mask (a real
// token's: the real tokens before it; a pad's: 1), then each (head, pair)
// of x32 (rows, nh*d) rotated in fp32, scaled, rounded once into y16.
__global__ void k_rope16(uint16_t *y, const float *x, const uint8_t *mask, int mask_stride, int S, int past, int nh,
                         int d, fg_cuk_rope f, float scale) {
    int r = blockIdx.x, b = r / S, i = r % S, half = d / 2;
    const uint8_t *m = mask + (size_t)b * mask_stride;
    float c = 0;
    for (int t = threadIdx.x; t <= past + i; t += blockDim.x) c += m[t] != 0;
    int count = (int)block_reduce<float, false>(c), pos = m[past + i] ? count - 1 : 1;
    const float *xr = x + (size_t)r * nh * d;
    uint16_t *yr = y + (size_t)r * nh * d;
    for (int j = threadIdx.x; j < nh * half; j += blockDim.x) {
        int h = j / half, k = j % half;
        float ang = (float)pos * f.inv_freq[k], cs = cosf(ang), sn = sinf(ang);
        float a = xr[h * d + k], bb = xr[h * d + k + half];
        yr[h * d + k] = to16((a * cs - bb * sn) * scale);
        yr[h * d + k + half] = to16((bb * cs + a * sn) * scale);
    }
}

// ---- attention (fg_opt_attn_core, fg_attention_gqa) -------------------------------

__global__ void k_cache_store(uint16_t *cache, const uint16_t *x, int64_t n, int B, int S, int past, int H) {
    GRID_STRIDE(e, n) {
        int64_t r = e / H;
        int j = (int)(e % H), b = (int)(r / S), i = (int)(r % S);
        cache[((int64_t)(past + i) * B + b) * H + j] = x[e];
    }
}

// fg_opt.c's cache_store_q4: thread t packs group t % G of head (t / G) %
// KV of row t / (G KV) (= b S + i) into that head's slice at position
// past + i; the group's rows past d are +0.0, as fg_q4_pack pads them.
__global__ void k_cache_store_q4(uint8_t *cache, const uint16_t *x, int64_t n, int B, int S, int past, int KV, int d,
                                 int G, int64_t slice) {
    GRID_STRIDE(t, n) {
        int g = (int)(t % G), h = (int)(t / G % KV);
        int64_t r = t / G / KV;
        int b = (int)(r / S), i = (int)(r % S);
        float v[fg_dq::kQ4Rows];
        for (int j = 0; j < fg_dq::kQ4Rows; j++) {
            int row = g * fg_dq::kQ4Rows + j;
            v[j] = row < d ? f16(x, (size_t)r * KV * d + (size_t)h * d + row) : 0.0f;
        }
        fg_dq::q4_pack_group(v, cache + (((int64_t)(past + i) * B + b) * KV + h) * slice, d, g);
    }
}

// Where attention reads keys or values: an fp16 cache (Tmax, B, KV*d), or a
// compressed one (Tmax, B, KV) of head slices for positions before past and
// the step's own fp16 rows (B*S, KV*d) from past on (fg_attention_gqa_q4's
// order: the step attends to its k and v as computed, stored compressed
// after).
struct KvSrc {
    const uint16_t *c16;   // the fp16 cache, or NULL
    const uint8_t *cq;     // the compressed cache (c16 NULL)
    const uint16_t *now;   // with cq: the step's rows
    int B, S, past, KV, d;
    int64_t slice;         // with cq: a head slice's bytes
    // Element j of kv head g of sequence b at position t.
    __device__ float at(int b, int g, int t, int j) const {
        if (c16) return f16(c16, ((size_t)t * B + b) * KV * d + (size_t)g * d + j);
        if (t >= past) return f16(now, ((size_t)b * S + t - past) * KV * d + (size_t)g * d + j);
        return fg_dq::q4_slice_value(cq + (((int64_t)t * B + b) * KV + g) * slice, d, j);
    }
};

// (T, d) of kv head g of sequence b from a compressed cache and the step's
// rows (KvSrc), fp16 (exact: every value is one), for prefill's GEMMs.
__global__ void k_cache_expand(uint16_t *y, KvSrc src, int b, int g, int64_t n) {
    GRID_STRIDE(t, n) y[t] = to16(src.at(b, g, (int)(t / src.d), (int)(t % src.d)));
}

// The first key slot a query at pos sees under a sliding window (0: none).
__device__ __forceinline__ int window_lo(int pos, int window) { return window && pos - window + 1 > 0 ? pos - window + 1 : 0; }

// fg_ops.c's masked_softmax on one row of T scores over keys [lo, pos], by
// one block: into p16 (fp16) where given, else in place in sc.
__device__ void softmax_row(float *sc, uint16_t *p16, const uint8_t *mb, int T, int pos, int lo) {
    int lim = pos + 1 < T ? pos + 1 : T;
    float mx = -FLT_MAX, any = 0;
    for (int t = lo + threadIdx.x; t < lim; t += blockDim.x)
        if (mb[t]) mx = fmaxf(mx, sc[t]), any = 1;
    mx = block_reduce<float, true>(mx);
    if (block_reduce<float, false>(any) == 0) {
        for (int t = threadIdx.x; t < T; t += blockDim.x) {
            if (p16) p16[t] = to16(1.0f / (float)T);
            else sc[t] = 1.0f / (float)T;
        }
        return;
    }
    double s = 0;
    for (int t = threadIdx.x; t < T; t += blockDim.x) {
        float e = t >= lo && t < lim && mb[t] ? expf(sc[t] - mx) : 0.0f;
        if (!p16) sc[t] = e;
        s += e;
    }
    float inv = (float)(1.0 / block_reduce<double, false>(s));
    // each thread revisits its own t: sc[t] holds e where p16 is NULL
    for (int t = threadIdx.x; t < T; t += blockDim.x) {
        if (p16) p16[t] = to16((t >= lo && t < lim && mb[t] ? expf(sc[t] - mx) : 0.0f) * inv);
        else sc[t] *= inv;
    }
}

__global__ void k_softmax(uint16_t *p16, const float *scores, const uint8_t *mb, int sr, int T, int past, int i0,
                          int window) {
    int r = blockIdx.x, pos = past + i0 + r % sr;
    // scores are read only: softmax_row writes p16 alone when given one
    softmax_row(const_cast<float *>(scores) + (size_t)r * T, p16 + (size_t)r * T, mb, T, pos, window_lo(pos, window));
}

constexpr int kDecodeThreads = 128, kDecodeMaxT = 8192;

// One block per (row, query head h); h reads kv head h / (nh / nkv). q and
// ctx rows are nh*d wide, the cache's nkv*d.
__global__ void k_attn_decode(uint16_t *ctx, const uint16_t *q, KvSrc kc, KvSrc vc, const uint8_t *mask,
                              int mask_stride, int S, int past, int nh, int nkv, int d, int window) {
    extern __shared__ float sm[];   // q (d), then scores (T)
    int h = blockIdx.x % nh, r = blockIdx.x / nh, b = r / S, i = r % S, T = past + S, g = h / (nh / nkv);
    int QD = nh * d;
    float *qs = sm, *sc = sm + d;
    for (int j = threadIdx.x; j < d; j += blockDim.x) qs[j] = f16(q, (size_t)r * QD + h * d + j);
    __syncthreads();
    int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, nw = blockDim.x / kWarp;
    for (int t = warp; t < T; t += nw) {
        float acc = 0;
        for (int j = lane; j < d; j += kWarp) acc += qs[j] * kc.at(b, g, t, j);
        for (int o = kWarp / 2; o; o >>= 1) acc += __shfl_down_sync(kFullMask, acc, o);
        if (lane == 0) sc[t] = acc;
    }
    __syncthreads();
    softmax_row(sc, nullptr, mask + (size_t)b * mask_stride, T, past + i, window_lo(past + i, window));
    __syncthreads();
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        float acc = 0;
        for (int t = 0; t < T; t++) acc += sc[t] * vc.at(b, g, t, j);
        ctx[(size_t)r * QD + h * d + j] = to16(acc);
    }
}

// ---- argmax (fg_argmax: the lowest index among the largest) ------------------------

__global__ void k_argmax(int32_t *ids, const float *logits, int V) {
    const float *x = logits + (size_t)blockIdx.x * V;
    __shared__ float sv[kThreads];
    __shared__ int si[kThreads];
    float bv = -INFINITY;
    int bi = V;
    for (int t = threadIdx.x; t < V; t += blockDim.x)
        if (x[t] > bv || bi == V) bv = x[t], bi = t;
    sv[threadIdx.x] = bv, si[threadIdx.x] = bi;
    __syncthreads();
    for (int o = blockDim.x / 2; o; o >>= 1) {
        if (threadIdx.x < o) {
            float v2 = sv[threadIdx.x + o];
            int i2 = si[threadIdx.x + o];
            if (i2 < V && (si[threadIdx.x] == V || v2 > sv[threadIdx.x] ||
                           (v2 == sv[threadIdx.x] && i2 < si[threadIdx.x])))
                sv[threadIdx.x] = v2, si[threadIdx.x] = i2;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) ids[blockIdx.x] = si[0];
}

int done() { return (int)cudaGetLastError(); }

}   // namespace

extern "C" int fg_cuk_layernorm(uint16_t *y16, const uint16_t *x16, const float *x32, const uint16_t *w,
                                const uint16_t *b, int rows, int dim, int row_mul, int row_add, cudaStream_t s) {
    if (x16) k_layernorm<uint16_t><<<rows, kThreads, 0, s>>>(y16, x16, w, b, dim, row_mul, row_add);
    else k_layernorm<float><<<rows, kThreads, 0, s>>>(y16, x32, w, b, dim, row_mul, row_add);
    return done();
}

extern "C" int fg_cuk_rmsnorm(uint16_t *y16, const uint16_t *x16, const float *x32, const uint16_t *w, float eps,
                              int rows, int dim, int row_mul, int row_add, cudaStream_t s) {
    if (x16) k_rmsnorm<uint16_t><<<rows, kThreads, 0, s>>>(y16, nullptr, x16, w, eps, dim, row_mul, row_add);
    else k_rmsnorm<float><<<rows, kThreads, 0, s>>>(y16, nullptr, x32, w, eps, dim, row_mul, row_add);
    return done();
}

extern "C" int fg_cuk_rmsnorm_f32(uint16_t *y16, float *y32, const uint16_t *x16, const float *x32, const uint16_t *w,
                                  float eps, int rows, int dim, cudaStream_t s) {
    // a block of whole warps, no more than the row has elements (a head of 64 or 128: not 256 threads)
    int threads = (dim + kWarp - 1) / kWarp * kWarp;
    threads = threads > kThreads ? kThreads : threads;
    if (x16) k_rmsnorm<uint16_t><<<rows, threads, 0, s>>>(y16, y32, x16, w, eps, dim, 1, 0);
    else k_rmsnorm<float><<<rows, threads, 0, s>>>(y16, y32, x32, w, eps, dim, 1, 0);
    return done();
}

extern "C" int fg_cuk_bias_rows32(float *dst32, const uint16_t *bias, int rows, int n, cudaStream_t s) {
    int64_t m = (int64_t)rows * n;
    k_bias_rows32<<<grid_for(m), kThreads, 0, s>>>(dst32, bias, m, n);
    return done();
}

extern "C" int fg_cuk_swiglu16(uint16_t *g16, const uint16_t *u16, int64_t n, cudaStream_t s) {
    k_swiglu16<<<grid_for(n), kThreads, 0, s>>>(g16, u16, n);
    return done();
}

extern "C" int fg_cuk_rope16(uint16_t *y16, const float *x32, const uint8_t *mask, int mask_stride, int B, int S,
                             int past, int n_heads, int head_dim, const fg_cuk_rope *f, float scale, cudaStream_t s) {
    if (head_dim / 2 > FG_CUK_ROPE_MAX_HALF) return (int)cudaErrorInvalidValue;
    k_rope16<<<B * S, kThreads, 0, s>>>(y16, x32, mask, mask_stride, S, past, n_heads, head_dim, *f, scale);
    return done();
}

extern "C" int fg_cuk_bias_rows16(uint16_t *dst16, const uint16_t *bias, int rows, int n, cudaStream_t s) {
    int64_t m = (int64_t)rows * n;
    k_bias_rows16<<<grid_for(m), kThreads, 0, s>>>(dst16, bias, m, n);
    return done();
}

extern "C" int fg_cuk_resid_init(float *y32, const uint16_t *h16, const uint16_t *bias, int rows, int n,
                                 cudaStream_t s) {
    int64_t m = (int64_t)rows * n;
    k_resid_init<<<grid_for(m), kThreads, 0, s>>>(y32, h16, bias, m, n);
    return done();
}

extern "C" int fg_cuk_relu16(uint16_t *x16, int64_t n, cudaStream_t s) {
    k_relu16<<<grid_for(n), kThreads, 0, s>>>(x16, n);
    return done();
}

extern "C" int fg_cuk_round16(uint16_t *y16, const float *x32, int64_t n, cudaStream_t s) {
    k_round16<<<grid_for(n), kThreads, 0, s>>>(y16, x32, n);
    return done();
}

extern "C" int fg_cuk_resid_round16(uint16_t *y16, const uint16_t *h16, const float *acc32, int64_t n, cudaStream_t s) {
    k_resid_round16<<<grid_for(n), kThreads, 0, s>>>(y16, h16, acc32, n);
    return done();
}

extern "C" int fg_cuk_embed_gather(uint16_t *e16, const int32_t *ids, const uint16_t *E, int rows, int D, int V,
                                   int32_t *bad, cudaStream_t s) {
    int64_t n = (int64_t)rows * D;
    k_embed_gather<<<grid_for(n), kThreads, 0, s>>>(e16, ids, E, n, D, V, bad);
    return done();
}

extern "C" int fg_cuk_embed_pos(uint16_t *h16, const float *e32, const int32_t *ids, const uint16_t *E,
                                const uint16_t *P, const uint8_t *mask, int mask_stride, int B, int S, int past, int H,
                                int V, int32_t *bad, cudaStream_t s) {
    k_embed_pos<<<B * S, kThreads, 0, s>>>(h16, e32, ids, E, P, mask, mask_stride, S, past, H, V, bad);
    return done();
}

extern "C" int fg_cuk_cache_store(uint16_t *cache, const uint16_t *x16, int B, int S, int past, int H,
                                  cudaStream_t s) {
    int64_t n = (int64_t)B * S * H;
    k_cache_store<<<grid_for(n), kThreads, 0, s>>>(cache, x16, n, B, S, past, H);
    return done();
}

extern "C" int fg_cuk_softmax(uint16_t *p16, const float *scores, const uint8_t *mask_b, int rows, int sr, int T,
                              int past, int i0, int window, cudaStream_t s) {
    k_softmax<<<rows, kThreads, 0, s>>>(p16, scores, mask_b, sr, T, past, i0, window);
    return done();
}

extern "C" int fg_cuk_decode_max_T(void) { return kDecodeMaxT; }

namespace {

int launch_decode(uint16_t *ctx16, const uint16_t *q16, KvSrc k, KvSrc v, const uint8_t *mask, int mask_stride, int B,
                  int S, int past, const fg_cuk_attn_shape *sh, cudaStream_t s) {
    size_t smem = sizeof(float) * ((size_t)sh->head_dim + (size_t)(past + S));
    k_attn_decode<<<B * S * sh->n_heads, kDecodeThreads, smem, s>>>(ctx16, q16, k, v, mask, mask_stride, S, past,
                                                                    sh->n_heads, sh->n_kv_heads, sh->head_dim,
                                                                    sh->window);
    return done();
}

KvSrc q4_src(const uint8_t *cq, const uint16_t *now, int B, int S, int past, int KV, int d) {
    return KvSrc{nullptr, cq, now, B, S, past, KV, d, (int64_t)fg_q4_slice_bytes((uint64_t)d, 1)};
}

}   // namespace

extern "C" int fg_cuk_attn_decode(uint16_t *ctx16, const uint16_t *q16, const uint16_t *kc, const uint16_t *vc,
                                  const uint8_t *mask, int mask_stride, int B, int S, int past,
                                  const fg_cuk_attn_shape *sh, cudaStream_t s) {
    KvSrc k = {kc, nullptr, nullptr, B, S, past, sh->n_kv_heads, sh->head_dim, 0}, v = k;
    v.c16 = vc;
    return launch_decode(ctx16, q16, k, v, mask, mask_stride, B, S, past, sh, s);
}

extern "C" int fg_cuk_attn_decode_q4(uint16_t *ctx16, const uint16_t *q16, const uint8_t *kq, const uint8_t *vq,
                                     const uint16_t *k16, const uint16_t *v16, const uint8_t *mask, int mask_stride,
                                     int B, int S, int past, const fg_cuk_attn_shape *sh, cudaStream_t s) {
    return launch_decode(ctx16, q16, q4_src(kq, k16, B, S, past, sh->n_kv_heads, sh->head_dim),
                         q4_src(vq, v16, B, S, past, sh->n_kv_heads, sh->head_dim), mask, mask_stride, B, S, past, sh,
                         s);
}

extern "C" int fg_cuk_cache_store_q4(uint8_t *cache, const uint16_t *x16, int B, int S, int past, int KV, int d,
                                     cudaStream_t s) {
    int G = (d + fg_dq::kQ4Rows - 1) / fg_dq::kQ4Rows;
    int64_t n = (int64_t)B * S * KV * G;
    k_cache_store_q4<<<grid_for(n), kThreads, 0, s>>>(cache, x16, n, B, S, past, KV, d, G,
                                                      (int64_t)fg_q4_slice_bytes((uint64_t)d, 1));
    return done();
}

extern "C" int fg_cuk_cache_expand(uint16_t *y16, const uint8_t *cq, const uint16_t *x16, int b, int g, int B, int S,
                                   int past, int KV, int d, cudaStream_t s) {
    int64_t n = (int64_t)(past + S) * d;
    k_cache_expand<<<grid_for(n), kThreads, 0, s>>>(y16, q4_src(cq, x16, B, S, past, KV, d), b, g, n);
    return done();
}

extern "C" int fg_cuk_argmax(int32_t *ids, const float *logits, int B, int V, cudaStream_t s) {
    k_argmax<<<B, kThreads, 0, s>>>(ids, logits, V);
    return done();
}

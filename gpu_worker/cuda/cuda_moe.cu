// cuda_moe.cu - a sparse layer's routing on the device (see cuda_moe.h):
// the router's logits, softmax and top k per row, the counting sort of the
// rows by expert, an expert's gather and weighted scatter. Each mirrors
// kernels/fg_moe.c; sums run in a fixed order and nothing uses atomics, so
// a route is the same bits in every op that computes it.
#include "cuda_moe.h"

#include <cmath>
#include <cstdint>
#include <cuda_fp16.h>

namespace {

constexpr int kWarp = 32;                     // threads of a warp
constexpr unsigned kFullMask = 0xffffffffu;   // every lane of a warp in a shuffle
constexpr int kThreads = 256;                 // a block's threads
constexpr int kBlockWarps = kThreads / kWarp; // warps of a block: the router's experts, top k's rows
constexpr int kRouterRows = 8;                // rows of x a router warp sums at once (registers)
constexpr int kMaxGridY = 65535;              // gridDim.y at most: the router loops over the rest
constexpr int kSortThreads = FG_CUK_MOE_MAX_EXPERTS;   // one thread per expert
constexpr int kSortTile = 4096;               // selections staged in shared memory at a time
constexpr int64_t kMaxGrid = 1 << 20;         // blocks at most: grid-stride loops cover the rest

static_assert(FG_CUK_MOE_MAX_EXPERTS <= kWarp * 32, "top k: a lane's taken experts fit one 32-bit mask");
static_assert(kSortThreads <= 1024, "sort: one block of one thread per expert");

__device__ __forceinline__ float f16(const uint16_t *p, size_t i) { return __half2float(__ushort_as_half(p[i])); }

#define GRID_STRIDE(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

unsigned grid_for(int64_t n) {
    int64_t g = (n + kThreads - 1) / kThreads;
    return (unsigned)(g < 1 ? 1 : g > kMaxGrid ? kMaxGrid : g);
}

// ---- router (fg_moe.c route_rows: x W^T, fp32) ----------------------------------

// Warp w of block (bx, by) owns expert bx * kBlockWarps + w and rows of x
// from by * kRouterRows on, kRouterRows at a time (gridDim.y such tiles
// apart): lane l sums elements l, l + 32, ... of each row, then a butterfly.
__global__ void k_router(float *logits, const float *__restrict__ x, const uint16_t *__restrict__ W, int rows, int H,
                         int E) {
    int lane = threadIdx.x % kWarp, e = blockIdx.x * kBlockWarps + threadIdx.x / kWarp;
    if (e >= E) return;   // e is the whole warp's: no lane is left at a shuffle
    const uint16_t *w = W + (size_t)e * H;
    for (int r0 = blockIdx.y * kRouterRows; r0 < rows; r0 += gridDim.y * kRouterRows) {
        int nr = rows - r0 < kRouterRows ? rows - r0 : kRouterRows;
        float acc[kRouterRows];
#pragma unroll
        for (int r = 0; r < kRouterRows; r++) acc[r] = 0.0f;
        for (int i = lane; i < H; i += kWarp) {
            float wi = f16(w, i);
#pragma unroll
            for (int r = 0; r < kRouterRows; r++) {
                if (r >= nr) break;
                acc[r] = __fmaf_rn(wi, x[(size_t)(r0 + r) * H + i], acc[r]);
            }
        }
#pragma unroll
        for (int r = 0; r < kRouterRows; r++)
            for (int o = kWarp / 2; o; o >>= 1) acc[r] += __shfl_xor_sync(kFullMask, acc[r], o);
        if (lane == 0)
#pragma unroll   // acc stays in registers: no index into it is left to run time
            for (int r = 0; r < kRouterRows; r++) {
                if (r >= nr) break;
                logits[(size_t)(r0 + r) * E + e] = acc[r];
            }
    }
}

// ---- softmax and top k (fg_moe_route) -----------------------------------------------

// One warp per row; lane l holds experts l, l + 32, ... (at most 32 of
// them: its taken ones are bits of one mask). Each of the k rounds takes
// the largest p not yet taken, the lower expert on equal values; a value
// that compares false with everything (NaN) is taken only where nothing
// else is left, as the host's scan does. Lane 0's choice is broadcast, so
// the warp agrees even where comparisons are not a total order.
__global__ void k_topk(int32_t *sel, float *wt, float *p, int rows, int E, int k, int renorm) {
    int lane = threadIdx.x % kWarp, r = blockIdx.x * kBlockWarps + threadIdx.x / kWarp;
    if (r >= rows) return;   // r is the whole warp's
    float *pr = p + (size_t)r * E;
    float m = -INFINITY, sum = 0.0f;
    for (int e = lane; e < E; e += kWarp) m = pr[e] > m ? pr[e] : m;
    for (int o = kWarp / 2; o; o >>= 1) {
        float u = __shfl_xor_sync(kFullMask, m, o);
        m = u > m ? u : m;
    }
    for (int e = lane; e < E; e += kWarp) sum += pr[e] = expf(pr[e] - m);
    for (int o = kWarp / 2; o; o >>= 1) sum += __shfl_xor_sync(kFullMask, sum, o);
    for (int e = lane; e < E; e += kWarp) pr[e] = pr[e] / sum;
    uint32_t taken = 0;   // bit i: expert lane + 32 i
    float total = 0.0f;
    for (int j = 0; j < k; j++) {
        float bv = 0.0f;
        int bi = -1;
        for (int e = lane, i = 0; e < E; e += kWarp, i++)
            if (!(taken >> i & 1) && (bi < 0 || pr[e] > bv)) bv = pr[e], bi = e;
        for (int o = kWarp / 2; o; o >>= 1) {
            float ov = __shfl_xor_sync(kFullMask, bv, o);
            int oi = __shfl_xor_sync(kFullMask, bi, o);
            if (oi >= 0 && (bi < 0 || ov > bv || (ov == bv && oi < bi))) bv = ov, bi = oi;
        }
        bv = __shfl_sync(kFullMask, bv, 0);
        bi = __shfl_sync(kFullMask, bi, 0);
        if (bi % kWarp == lane) taken |= 1u << (bi / kWarp);
        total += bv;
        if (lane == 0) sel[(size_t)r * k + j] = bi, wt[(size_t)r * k + j] = bv;
    }
    if (renorm && lane == 0)
        for (int j = 0; j < k; j++) wt[(size_t)r * k + j] = wt[(size_t)r * k + j] / total;
}

// ---- the counting sort (fg_moe_mlp) ------------------------------------------------

// One block; thread e counts expert e's selections over tiles of sel in
// shared memory (every thread reads the same word: a broadcast), thread 0
// turns the counts into starts, and a second pass writes each expert's
// slots in ascending order.
__global__ void k_sort(int32_t *counts, int32_t *starts, int32_t *order, const int32_t *sel, int n, int E) {
    __shared__ int32_t tile[kSortTile];
    __shared__ int32_t base[FG_CUK_MOE_MAX_EXPERTS + 1];
    int e = threadIdx.x, c = 0;
    for (int t0 = 0; t0 < n; t0 += kSortTile) {
        int m = n - t0 < kSortTile ? n - t0 : kSortTile;
        __syncthreads();   // the tile before is read by every thread
        for (int i = threadIdx.x; i < m; i += blockDim.x) tile[i] = sel[t0 + i];
        __syncthreads();
        if (e < E)
            for (int i = 0; i < m; i++) c += tile[i] == e;
    }
    if (e < E) base[e] = c, counts[e] = c;
    __syncthreads();
    if (threadIdx.x == 0) {
        int s = 0;
        for (int i = 0; i < E; i++) {
            int ci = base[i];
            base[i] = s, s += ci;
        }
        base[E] = s;
    }
    __syncthreads();
    if (!order) return;   // the same for every thread of the block
    for (int i = threadIdx.x; i <= E; i += blockDim.x) starts[i] = base[i];
    int at = e < E ? base[e] : 0;
    for (int t0 = 0; t0 < n; t0 += kSortTile) {
        int m = n - t0 < kSortTile ? n - t0 : kSortTile;
        __syncthreads();
        for (int i = threadIdx.x; i < m; i += blockDim.x) tile[i] = sel[t0 + i];
        __syncthreads();
        if (e < E)
            for (int i = 0; i < m; i++)
                if (tile[i] == e) order[at++] = t0 + i;
    }
}

// ---- an expert's rows in and its outputs back ---------------------------------------

__global__ void k_gather(uint16_t *xg, const uint16_t *x, const int32_t *slots, int64_t n, int k, int H) {
    GRID_STRIDE(t, n) {
        int64_t i = t / H;
        int d = (int)(t % H);
        xg[t] = x[(int64_t)(slots[i] / k) * H + d];
    }
}

__global__ void k_scatter(float *acc, const float *y, const int32_t *slots, const float *wt, int64_t n, int k, int H) {
    GRID_STRIDE(t, n) {
        int64_t i = t / H;
        int d = (int)(t % H), slot = slots[i];
        float *dst = acc + (int64_t)(slot / k) * H + d;
        *dst = __fadd_rn(*dst, __fmul_rn(wt[slot], y[t]));
    }
}

// an expert's outputs computed elsewhere (the cpu worker's, MLP_SPLIT): y
// (n, H) row i = given (rows * k, H) row slots[i]
__global__ void k_take(float *y, const float *given, const int32_t *slots, int64_t n, int H) {
    GRID_STRIDE(t, n) {
        int64_t i = t / H;
        int d = (int)(t % H);
        y[t] = given[(int64_t)slots[i] * H + d];
    }
}

int done() { return (int)cudaGetLastError(); }

}   // namespace

extern "C" int fg_cuk_moe_router(float *logits, const float *x32, const uint16_t *W, int rows, int H, int E,
                                 cudaStream_t s) {
    if (rows < 1 || H < 1 || E < 1) return (int)cudaErrorInvalidValue;
    int tiles = (rows + kRouterRows - 1) / kRouterRows;
    dim3 grid((unsigned)((E + kBlockWarps - 1) / kBlockWarps), (unsigned)(tiles < kMaxGridY ? tiles : kMaxGridY));
    k_router<<<grid, kThreads, 0, s>>>(logits, x32, W, rows, H, E);
    return done();
}

extern "C" int fg_cuk_moe_topk(int32_t *sel, float *wt, float *p, int rows, int E, int k, int renorm, cudaStream_t s) {
    if (rows < 1 || E < 1 || E > FG_CUK_MOE_MAX_EXPERTS || k < 1 || k > E) return (int)cudaErrorInvalidValue;
    k_topk<<<(unsigned)((rows + kBlockWarps - 1) / kBlockWarps), kThreads, 0, s>>>(sel, wt, p, rows, E, k, renorm);
    return done();
}

extern "C" int fg_cuk_moe_sort(int32_t *counts, int32_t *starts, int32_t *order, const int32_t *sel, int n, int E,
                               cudaStream_t s) {
    if (n < 0 || E < 1 || E > FG_CUK_MOE_MAX_EXPERTS || !starts != !order) return (int)cudaErrorInvalidValue;
    k_sort<<<1, kSortThreads, 0, s>>>(counts, starts, order, sel, n, E);
    return done();
}

extern "C" int fg_cuk_moe_gather(uint16_t *xg16, const uint16_t *x16, const int32_t *slots, int n, int k, int H,
                                 cudaStream_t s) {
    int64_t m = (int64_t)n * H;
    k_gather<<<grid_for(m), kThreads, 0, s>>>(xg16, x16, slots, m, k, H);
    return done();
}

extern "C" int fg_cuk_moe_take(float *y32, const float *given, const int32_t *slots, int n, int H, cudaStream_t s) {
    int64_t m = (int64_t)n * H;
    k_take<<<grid_for(m), kThreads, 0, s>>>(y32, given, slots, m, H);
    return done();
}

extern "C" int fg_cuk_moe_scatter(float *acc32, const float *y32, const int32_t *slots, const float *wt, int n, int k,
                                  int H, cudaStream_t s) {
    int64_t m = (int64_t)n * H;
    k_scatter<<<grid_for(m), kThreads, 0, s>>>(acc32, y32, slots, wt, m, k, H);
    return done();
}

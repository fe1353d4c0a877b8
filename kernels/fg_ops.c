/* fg_ops.c - CPU kernels: LayerNorm, RMSNorm, ReLU, SwiGLU, residual adds,
 * attention over an fp16 KV cache with grouped kv heads and an optional
 * sliding window (one pool task per sequence and query head). */
#include "fg_ops.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fg_common.h"
#include "fg_pool.h"
#include "fg_q4.h"

static _Thread_local double gemm_s;

double fg_ops_gemm_seconds(void) { return gemm_s; }
void fg_ops_gemm_reset(void) { gemm_s = 0; }
void fg_ops_gemm_add(double seconds) { gemm_s += seconds; }

void fg_layernorm(float *y, const float *x, const fg_half *w16, const fg_half *b16, int rows, int dim) {
    float *w = fg_xmalloc(sizeof(float) * 2 * (size_t)dim), *b = w + dim;
    fg_half_to_float_n(w16, w, (size_t)dim);
    fg_half_to_float_n(b16, b, (size_t)dim);
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * dim;
        float *yr = y + (size_t)r * dim;
        /* two passes, mean then variance, accumulated in double */
        double mean = 0;
        for (int i = 0; i < dim; i++) mean += xr[i];
        mean /= dim;
        double var = 0;
        for (int i = 0; i < dim; i++) {
            double d = xr[i] - mean;
            var += d * d;
        }
        var /= dim;
        float rstd = (float)(1.0 / sqrt(var + FG_LN_EPS));
        float m = (float)mean;
        for (int i = 0; i < dim; i++) yr[i] = (xr[i] - m) * rstd * w[i] + b[i];
    }
    free(w);
}

void fg_relu(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = x[i] > 0 ? x[i] : 0;
}

void fg_add(float *y, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

/* Softmax of row (T) over keys lo <= t <= pos with mask[t] = 1 (lo > 0
 * under a sliding window); masked keys get weight 0. Equal to setting them
 * to the most negative float first (Hugging Face), without feeding exp()
 * huge arguments; a row with no visible key is uniform over all T, as that
 * softmax of all-equal scores is. */
static void masked_softmax(float *row, int T, int pos, int lo, const uint8_t *mask) {
    int lim = pos + 1 < T ? pos + 1 : T, any = 0;
    float mx = -FLT_MAX;
    for (int t = lo; t < lim; t++)
        if (mask[t]) {
            mx = row[t] > mx ? row[t] : mx;
            any = 1;
        }
    if (!any) {
        for (int t = 0; t < T; t++) row[t] = 1.0f / (float)T;
        return;
    }
    double sum = 0;
    for (int t = 0; t < T; t++) {
        float e = t >= lo && t < lim && mask[t] ? expf(row[t] - mx) : 0.0f;
        row[t] = e;
        sum += e;
    }
    float inv = (float)(1.0 / sum);
    for (int t = 0; t < lim; t++) row[t] *= inv;
}

typedef struct {
    float *ctx;
    const float *q;
    const fg_half *kc, *vc;
    const uint8_t *kq, *vq;     /* compressed cache (fg_attention_q4), else NULL */
    const float *kn, *vn;       /* with kq: the step's k, v (B, S, KV*d) */
    const uint8_t *mask;
    int Tmax, mask_stride, B, S, past;
    fg_attn_shape sh;
} attn_job;

/* One (sequence, query head) pair; query head h reads kv head h / (A / KV).
 * q and ctx rows are A*d wide, k, v and the cache's KV*d. */
static void attn_task(void *p, int task) {
    const attn_job *j = p;
    int A = j->sh.n_heads, b = task / A, h = task % A, d = j->sh.head_dim, g = h / (A / j->sh.n_kv_heads);
    int QD = A * d, KD = j->sh.n_kv_heads * d, S = j->S, T = j->past + S, W = j->sh.window;
    static _Thread_local float *buf;
    static _Thread_local size_t cap;
    size_t need = (size_t)T * d * 2 + (size_t)S * T;
    if (need > cap) {
        free(buf);
        buf = fg_alloc_tensor(sizeof(float) * need);
        cap = need;
    }
    float *kf = buf, *vf = kf + (size_t)T * d, *sc = vf + (size_t)T * d;   /* (T,d) (T,d) (S,T) */
    const uint8_t *mb = j->mask + (size_t)b * j->mask_stride;
    /* time-major cache: position t of sequence b at row t * B + b */
    size_t row = (size_t)j->B * KD;
    if (j->kq) {   /* the past expanded from head slices, then the step's own rows */
        uint64_t slice = fg_q4_slice_bytes((uint64_t)d, 1);
        for (int t = 0; t < j->past; t++) {
            size_t at = (((size_t)t * j->B + b) * j->sh.n_kv_heads + g) * slice;
            fg_q4_expand_f32(j->kq + at, d, 1, kf + (size_t)t * d);
            fg_q4_expand_f32(j->vq + at, d, 1, vf + (size_t)t * d);
        }
        for (int i = 0; i < S; i++) {
            size_t at = ((size_t)b * S + i) * KD + (size_t)g * d;
            memcpy(kf + (size_t)(j->past + i) * d, j->kn + at, sizeof(float) * d);
            memcpy(vf + (size_t)(j->past + i) * d, j->vn + at, sizeof(float) * d);
        }
    } else {
        const fg_half *kb = j->kc + (size_t)b * KD + (size_t)g * d;
        const fg_half *vb = j->vc + (size_t)b * KD + (size_t)g * d;
        for (int t = 0; t < T; t++) {
            fg_half_to_float_n(kb + (size_t)t * row, kf + (size_t)t * d, (size_t)d);
            fg_half_to_float_n(vb + (size_t)t * row, vf + (size_t)t * d, (size_t)d);
        }
    }
    const float *qb = j->q + (size_t)b * S * QD + (size_t)h * d;   /* (S, d), row stride QD */
    float *cb = j->ctx + (size_t)b * S * QD + (size_t)h * d;       /* (S, d), row stride QD */
    if (S == 1) cblas_sgemv(CblasRowMajor, CblasNoTrans, T, d, 1.0f, kf, d, qb, 1, 0.0f, sc, 1);
    else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, S, T, d, 1.0f, qb, QD, kf, d, 0.0f, sc, T);
    for (int i = 0; i < S; i++) {
        int pos = j->past + i, lo = W && pos - W + 1 > 0 ? pos - W + 1 : 0;
        masked_softmax(sc + (size_t)i * T, T, pos, lo, mb);
    }
    if (S == 1) cblas_sgemv(CblasRowMajor, CblasTrans, T, d, 1.0f, vf, d, sc, 1, 0.0f, cb, 1);
    else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, S, d, T, 1.0f, sc, T, vf, d, 0.0f, cb, QD);
}

void fg_attention_gqa(float *ctx, const float *q, const fg_half *kc, const fg_half *vc, int Tmax,
                      const uint8_t *mask, int mask_stride, int B, int S, int past, const fg_attn_shape *sh) {
    double t0 = fg_now();
    attn_job j = {.ctx = ctx, .q = q, .kc = kc, .vc = vc, .mask = mask, .Tmax = Tmax, .mask_stride = mask_stride,
                  .B = B, .S = S, .past = past, .sh = *sh};
    fg_pool_run(B * sh->n_heads, attn_task, &j);
    gemm_s += fg_now() - t0;
}

void fg_attention_gqa_q4(float *ctx, const float *q, const float *k, const float *v, const void *kc, const void *vc,
                         const uint8_t *mask, int mask_stride, int B, int S, int past, const fg_attn_shape *sh) {
    double t0 = fg_now();
    attn_job j = {.ctx = ctx, .q = q, .kq = kc, .vq = vc, .kn = k, .vn = v, .mask = mask,
                  .mask_stride = mask_stride, .B = B, .S = S, .past = past, .sh = *sh};
    fg_pool_run(B * sh->n_heads, attn_task, &j);
    gemm_s += fg_now() - t0;
}

void fg_attention(float *ctx, const float *q, const fg_half *kc, const fg_half *vc, int Tmax,
                  const uint8_t *mask, int mask_stride, int B, int S, int past, int H, int n_heads) {
    fg_attn_shape sh = {.n_heads = n_heads, .n_kv_heads = n_heads, .head_dim = H / n_heads, .window = 0};
    fg_attention_gqa(ctx, q, kc, vc, Tmax, mask, mask_stride, B, S, past, &sh);
}

void fg_attention_q4(float *ctx, const float *q, const float *k, const float *v, const void *kc, const void *vc,
                     const uint8_t *mask, int mask_stride, int B, int S, int past, int H, int n_heads) {
    fg_attn_shape sh = {.n_heads = n_heads, .n_kv_heads = n_heads, .head_dim = H / n_heads, .window = 0};
    fg_attention_gqa_q4(ctx, q, k, v, kc, vc, mask, mask_stride, B, S, past, &sh);
}

void fg_rmsnorm(float *y, const float *x, const fg_half *w16, float eps, int rows, int dim) {
    float *w = fg_xmalloc(sizeof(float) * (size_t)dim);
    fg_half_to_float_n(w16, w, (size_t)dim);
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * dim;
        float *yr = y + (size_t)r * dim;
        double ss = 0;   /* the mean square accumulated in double, as fg_layernorm's moments */
        for (int i = 0; i < dim; i++) ss += (double)xr[i] * xr[i];
        float rstd = (float)(1.0 / sqrt(ss / dim + (double)eps));
        for (int i = 0; i < dim; i++) yr[i] = xr[i] * rstd * w[i];
    }
    free(w);
}

void fg_swiglu(float *g, const float *u, size_t n) {
    for (size_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

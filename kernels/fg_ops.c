/* fg_ops.c - CPU kernels: LayerNorm, Linear (sgemm), ReLU, attention over an
 * fp16 KV cache. Single-threaded apart from OpenBLAS's own threads. */
#include "fg_ops.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fg_common.h"

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

void fg_softmax(float *x, int n) {
    float mx = -FLT_MAX;
    for (int i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++) x[i] *= inv;
}

/* Softmax of row (T) over keys t <= pos with mask[t] = 1; masked keys get
 * weight 0. Equal to setting them to the most negative float first (Hugging
 * Face), without feeding exp() huge arguments; a row with no visible key is
 * uniform over all T, as that softmax of all-equal scores is. */
static void masked_softmax(float *row, int T, int pos, const uint8_t *mask) {
    int lim = pos + 1 < T ? pos + 1 : T, any = 0;
    float mx = -FLT_MAX;
    for (int t = 0; t < lim; t++)
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
        float e = t < lim && mask[t] ? expf(row[t] - mx) : 0.0f;
        row[t] = e;
        sum += e;
    }
    float inv = (float)(1.0 / sum);
    for (int t = 0; t < lim; t++) row[t] *= inv;
}

void fg_attention(float *ctx, const float *q, const fg_half *kc, const fg_half *vc, int Tmax,
                  const uint8_t *mask, int mask_stride, int B, int S, int past, int H, int n_heads) {
    int d = H / n_heads, T = past + S;
    float *kf = fg_alloc_tensor(sizeof(float) * (size_t)T * d);   /* (T, d) one head's keys */
    float *vf = fg_alloc_tensor(sizeof(float) * (size_t)T * d);   /* (T, d) one head's values */
    float *sc = fg_alloc_tensor(sizeof(float) * (size_t)S * T);   /* (S, T) scores */
    for (int b = 0; b < B; b++) {
        const uint8_t *mb = mask + (size_t)b * mask_stride;
        for (int h = 0; h < n_heads; h++) {
            const fg_half *kb = kc + (size_t)b * Tmax * H + (size_t)h * d;
            const fg_half *vb = vc + (size_t)b * Tmax * H + (size_t)h * d;
            for (int t = 0; t < T; t++) {
                fg_half_to_float_n(kb + (size_t)t * H, kf + (size_t)t * d, (size_t)d);
                fg_half_to_float_n(vb + (size_t)t * H, vf + (size_t)t * d, (size_t)d);
            }
            const float *qb = q + (size_t)b * S * H + (size_t)h * d;   /* (S, d), row stride H */
            float *cb = ctx + (size_t)b * S * H + (size_t)h * d;       /* (S, d), row stride H */
            double t0 = fg_now();
            if (S == 1) cblas_sgemv(CblasRowMajor, CblasNoTrans, T, d, 1.0f, kf, d, qb, 1, 0.0f, sc, 1);
            else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, S, T, d, 1.0f, qb, H, kf, d, 0.0f, sc, T);
            gemm_s += fg_now() - t0;
            for (int i = 0; i < S; i++)
                masked_softmax(sc + (size_t)i * T, T, past + i, mb);
            t0 = fg_now();
            if (S == 1) cblas_sgemv(CblasRowMajor, CblasTrans, T, d, 1.0f, vf, d, sc, 1, 0.0f, cb, 1);
            else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, S, d, T, 1.0f, sc, T, vf, d, 0.0f, cb, H);
            gemm_s += fg_now() - t0;
        }
    }
    free(kf);
    free(vf);
    free(sc);
}

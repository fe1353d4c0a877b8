/* fg_moe.c - a sparse layer's router and experts on the CPU (see fg_moe.h). */
#include "fg_moe.h"

#include <math.h>
#include <string.h>

#include "fg_common.h"
#include "fg_fmt.h"

/* ws->moe, per row: the router's E logits, k selections, k weights, k
 * entries of the expert-ordered row list, and three H-wide rows (gathered
 * input, an expert's output, the sum); then E counts and E + 1 starts. */
uint64_t fg_moe_ws_floats(const fg_model_config *c, int max_rows) {
    if (!c->n_experts) return 0;
    uint64_t E = (uint64_t)c->n_experts, k = (uint64_t)c->experts_per_token, H = (uint64_t)c->hidden;
    return (uint64_t)max_rows * (E + 3 * k + 3 * H) + 2 * E + 1;
}

/* Softmax of one row of n logits in place (fp32, the maximum taken off). */
static void softmax_row(float *p, int n) {
    float m = p[0], sum = 0;
    for (int i = 1; i < n; i++) m = p[i] > m ? p[i] : m;
    for (int i = 0; i < n; i++) sum += p[i] = expf(p[i] - m);
    for (int i = 0; i < n; i++) p[i] /= sum;
}

void fg_moe_route(int32_t *sel, float *wt, float *logits, int rows, const fg_model_config *c) {
    int E = c->n_experts, k = c->experts_per_token;
    int renorm = c->router == FG_ROUTER_MIXTRAL || (c->router == FG_ROUTER_QWEN3_MOE && c->moe_norm_topk);
    FG_ASSERT(c->router == FG_ROUTER_MIXTRAL || c->router == FG_ROUTER_QWEN3_MOE);
    for (int r = 0; r < rows; r++) {
        float *p = logits + (size_t)r * E, sum = 0;
        int32_t *s = sel + (size_t)r * k;
        float *w = wt + (size_t)r * k;
        softmax_row(p, E);
        for (int j = 0; j < k; j++) {   /* the j-th best not yet taken; ties to the lower number */
            int best = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int i = 0; i < j; i++) taken |= s[i] == e;
                if (!taken && (best < 0 || p[e] > p[best])) best = e;
            }
            s[j] = best, w[j] = p[best], sum += p[best];
        }
        for (int j = 0; renorm && j < k; j++) w[j] /= sum;
    }
}

/* Expert e's slice of stacked layer role `which` (rows of its matrix): its
 * bytes start e times one expert's bytes in. */
static const void *expert_w(const fg_layer_w *w, int which, int fmt, int e, int out, int in) {
    return (const uint8_t *)w->w[which] + (size_t)e * fg_fmt_bytes(fmt, (uint64_t)out, (uint64_t)in);
}

/* The router of x's rows: its logits (fp32, F16 weights) and the route,
 * into ws->moe (logits, then wt, then sel); what fg_moe_mlp and
 * fg_moe_counts both run, so the counts name exactly the experts the MLP
 * reads. */
static void route_rows(const float *x, int rows, const fg_model_config *c, const fg_layer_w *w, fg_opt_ws *ws,
                       float **wt, int32_t **sel) {
    int E = c->n_experts, k = c->experts_per_token, H = c->hidden;
    FG_ASSERT(rows <= ws->max_rows && w->w[FG_LW_ROUTER_W]);
    float *logits = ws->moe;
    *wt = logits + (size_t)rows * E;
    *sel = (int32_t *)(*wt + (size_t)rows * k);
    fg_gemm_fmt(logits, x, w->w[FG_LW_ROUTER_W], FG_FMT_F16, NULL, rows, H, E);
    fg_moe_route(*sel, *wt, logits, rows, c);
}

void fg_moe_counts(int32_t *counts, const float *x, int rows, const fg_model_config *c, const fg_layer_w *w,
                   fg_opt_ws *ws) {
    float *wt;
    int32_t *sel;
    route_rows(x, rows, c, w, ws, &wt, &sel);
    memset(counts, 0, sizeof(int32_t) * (size_t)c->n_experts);
    for (int i = 0; i < rows * c->experts_per_token; i++) counts[sel[i]]++;
}

/* The route of x's rows and the rows by expert (a counting sort: within
 * an expert, ascending row): order[start[e] .. start[e + 1]) are the
 * choices i = row * k + j that picked expert e. All in ws->moe. */
typedef struct {
    float *wt;
    int32_t *sel, *order, *start;
    float *xg, *yo, *acc;   /* (rows, H) each: gathered rows, an expert's outputs, the sum */
} moe_rows;

static void rows_by_expert(const float *x, int rows, const fg_model_config *c, const fg_layer_w *w, fg_opt_ws *ws,
                           moe_rows *m) {
    int E = c->n_experts, k = c->experts_per_token, H = c->hidden;
    route_rows(x, rows, c, w, ws, &m->wt, &m->sel);
    m->order = m->sel + (size_t)rows * k;
    m->xg = (float *)(m->order + (size_t)rows * k), m->yo = m->xg + (size_t)rows * H, m->acc = m->yo + (size_t)rows * H;
    int32_t *count = (int32_t *)(m->acc + (size_t)rows * H);
    m->start = count + E;
    memset(count, 0, sizeof(int32_t) * (size_t)E);
    for (int i = 0; i < rows * k; i++) count[m->sel[i]]++;
    m->start[0] = 0;
    for (int e = 0; e < E; e++) m->start[e + 1] = m->start[e] + count[e];
    for (int e = 0; e < E; e++) count[e] = m->start[e];
    for (int i = 0; i < rows * k; i++) m->order[count[m->sel[i]]++] = i;   /* i = row * k + j */
}

/* Expert e's outputs on its n rows: m->yo (n, H) = down(silu(gate x) * up
 * x) for the rows gathered in order; its matrices are the ws's stacks at
 * slice e - base (a band of the stacks starts at expert base). */
static void expert_rows(const moe_rows *m, int e, int base, int n, const float *x, const fg_model_config *c,
                        const fg_layer_w *w, fg_opt_ws *ws) {
    int k = c->experts_per_token, H = c->hidden, F = c->moe_ffn_dim;
    int f1 = fg_config_fmt(c, fg_spec_layer(0, FG_LW_FC1_W)), f2 = fg_config_fmt(c, fg_spec_layer(0, FG_LW_FC2_W));
    int fu = fg_config_fmt(c, fg_spec_layer(0, FG_LW_UP_W));
    float *gate = ws->ff, *up = ws->ff + (size_t)n * F;
    FG_ASSERT(2 * F <= fg_opt_ws_ff(c));
    for (int i = 0; i < n; i++)
        memcpy(m->xg + (size_t)i * H, x + (size_t)(m->order[m->start[e] + i] / k) * H, sizeof(float) * (size_t)H);
    fg_gemm_fmt(gate, m->xg, expert_w(w, FG_LW_FC1_W, f1, e - base, F, H), f1, NULL, n, H, F);
    fg_gemm_fmt(up, m->xg, expert_w(w, FG_LW_UP_W, fu, e - base, F, H), fu, NULL, n, H, F);
    fg_swiglu(gate, up, (size_t)n * F);
    fg_gemm_fmt(m->yo, gate, expert_w(w, FG_LW_FC2_W, f2, e - base, H, F), f2, NULL, n, F, H);
}

void fg_moe_mlp_given(float *y, const float *x, int rows, const fg_model_config *c, const fg_layer_w *w,
                      fg_opt_ws *ws, int g_lo, int g_n, const float *given) {
    int E = c->n_experts, k = c->experts_per_token, H = c->hidden;
    moe_rows m;
    rows_by_expert(x, rows, c, w, ws, &m);
    memset(m.acc, 0, sizeof(float) * (size_t)rows * H);
    for (int e = 0; e < E; e++) {
        int n = m.start[e + 1] - m.start[e], from_given = given && e >= g_lo && e < g_lo + g_n;
        if (!n) continue;
        if (!from_given) expert_rows(&m, e, 0, n, x, c, w, ws);
        for (int i = 0; i < n; i++) {
            int slot = m.order[m.start[e] + i];
            float g = m.wt[slot], *dst = m.acc + (size_t)(slot / k) * H;
            const float *src = from_given ? given + (size_t)slot * H : m.yo + (size_t)i * H;
            for (int d = 0; d < H; d++) dst[d] += g * src[d];
        }
    }
    memcpy(y, m.acc, sizeof(float) * (size_t)rows * H);
}

void fg_moe_mlp(float *y, const float *x, int rows, const fg_model_config *c, const fg_layer_w *w, fg_opt_ws *ws) {
    fg_moe_mlp_given(y, x, rows, c, w, ws, 0, 0, NULL);
}

void fg_moe_band(float *out, const float *x, int rows, const fg_model_config *c, const fg_layer_w *band,
                 fg_opt_ws *ws, int lo, int n_band) {
    int H = c->hidden;
    moe_rows m;
    rows_by_expert(x, rows, c, band, ws, &m);
    for (int e = lo; e < lo + n_band; e++) {
        int n = m.start[e + 1] - m.start[e];
        if (!n) continue;
        expert_rows(&m, e, lo, n, x, c, band, ws);
        for (int i = 0; i < n; i++)
            memcpy(out + (size_t)m.order[m.start[e] + i] * H, m.yo + (size_t)i * H, sizeof(float) * (size_t)H);
    }
}

/* backend_ops_check.c - every op of the gpu worker's table on both backends,
 * in the manner of ggml's test-backend-ops: the same random inputs laid out
 * by fg_op_args_layout (the op table's slots) are uploaded to the host
 * backend (the reference: the fg_opt functions the reference engine runs)
 * and to the cuda backend, each op runs through the backend's slot, and
 * every output (and the KV cache an attention op writes, and SAMPLE's
 * generator states) comes back and is compared. Exits 77 (ctest: skipped)
 * where no CUDA device can be opened; with --probe, only says that (0 or
 * 77) for the GPU test scripts; with --formats, runs the format sweep
 * below instead of the F16 one.
 *
 * Shapes: OPT-125M (pre-LayerNorm) and OPT-350M (post-LayerNorm, project_in
 * and project_out) with one layer, at a padded prefill (B 3, S 9: the
 * strided-batched GEMM attention), decode (B 4, S 1, past 20: the decode
 * kernel), a short multi-token step (B 2, S 3, past 5), and long prefills
 * whose score tiles do not fit the workspace at once (B 1, S 130: tiles of
 * heads; S 600: tiles of query rows). The Llama family's shapes, one layer
 * each: TinyLlama (grouped kv heads 32:4), Llama 3.2 1B (32:8, llama3
 * rope, tied head), Qwen2.5 7B (q/k/v biases, 28:4) and Mistral 7B with
 * its window cut to 64 slots (so S 130 reaches past it): RMSNorm, rotary,
 * SwiGLU, grouped and windowed attention, an untied head; Qwen3 0.6B (q/k
 * norms, head_dim 128 so q is twice as wide as h, tied head). Mixtures of
 * experts, one layer shrunk to H 512 (moe_shapes below): Mixtral-like (8
 * experts, top 2, renormalised), Qwen3-MoE-like (32 experts, top 8,
 * norm_topk_prob false, q/k norms) and that model's dense layer, every op
 * including MOE_ROUTE, at the steps above but S 600: at S 130 an expert
 * gets about 32 rows (cuBLAS), at the others at most 16 (the GEMV). These
 * kernels compile here without a GPU; this program is what first runs
 * them. A 4-bit KV cache (--compress-cache): ATTN and LAYER on OPT-125M,
 * TinyLlama, Mistral (window, d 128) and Qwen3 0.6B shapes, every step.
 * --host-self runs the experts' part and OPT-125M's 4-bit cache with the
 * host backend on both sides: where no GPU is, it checks this program's
 * own routing bounds (below) against the host's routes, and its cache
 * comparison's reading of the slices.
 *
 * Tolerances, and why. Bitwise: EMBED without project_in (both add the
 * same two fp16 values in fp32 and round once), and SAMPLE (the same fp32
 * logits in; argmax with the same tie rule, or the host's own sampler and
 * generator). Everything else: the cuda backend stores what the host keeps
 * in fp32 between GEMMs as fp16 (a LayerNorm's output, fc1's, the softmax
 * weights of prefill attention, project_out's; for the Llama family an
 * RMSNorm's output and the gate and up projections, before SwiGLU's
 * product, itself rounded for the down projection; q and k round once,
 * after rotary, on both sides), so each such tensor
 * carries one more rounding, a relative error of at most 2^-11 = 4.9e-4
 * per element (RMS about 2.8e-4), and both sum in different orders (fp32,
 * ~1e-6 relative). An output rounds to fp16 once more on each side, so it
 * may differ by one ulp (2^-11 relative). A block chains at most three
 * such roundings before its output (LayerNorm -> q, k, v -> weights ->
 * ctx), so the RMS relative error stays near 1e-3 and the normalised
 * squared error sum((g-h)^2) / sum(h^2) near 1e-6: the check allows 1e-5.
 * The largest single difference is held to 2^-6 of the tensor's largest
 * magnitude (16 fp16 ulps there), which catches a wrong element, a wrong
 * position or a wrong mask without failing on one unlucky rounding.
 * Qwen3's q/k norms act on the fp32 projections on both sides and add no
 * rounding. A sparse layer's MLP: the router reads the same fp32 x on both
 * sides, so its logits differ by summation order only; the experts run as
 * the dense gated MLP does (x, gate and up, their SwiGLU product rounded
 * to fp16 on the cuda side; fp32 expert outputs weighted and summed in
 * ascending expert order on both sides), so the budget above holds for
 * every row routed alike. Rows near a routing tie are left out of the
 * comparison and MOE_ROUTE's counts are checked against bounds instead:
 * "routing near-ties" below states the bound and why.
 *
 * Formats (--formats). A Llama-family layer (tinyllama's kinds: RMSNorm,
 * rotary, SwiGLU, GQA 8:2, untied head), OPT-125m's (pre-LayerNorm, learned
 * positions, tied head) and OPT-350m's (post-LayerNorm, project_in/out),
 * shrunk to H 512 and V 2048 (OPT-350m: V only) so that every row is whole
 * k-quant blocks, with every matrix of the layer and the model-level ones
 * (embedding, projections, head) in one format: each ggml format, F32,
 * BF16, and FlexGen's Q4G64 (--compress-weight: the layer's matrices).
 * Every op at 1 and 3 rows (decode: the dequantizing GEMV), 20 rows of
 * decode (the fp16 tiles and cuBLAS, the LM head's too) and a prefill of
 * 80 rows; the two sparse shapes' MLP, LAYER and MOE_ROUTE too (each
 * expert's slice of the stacks in that format, its GEMV or tiles by its
 * own row count; under Q4G64 each expert its own slice; the router stays
 * F16). Same tolerances, and why they still hold: at up to
 * FG_CUDA_GEMV_MAX_ROWS rows the GEMV multiplies the weights' exact values
 * (the host's: cuda_fmt_check holds the dequantizers to them bitwise), so
 * only the summation order differs from the F16 case; above, the tile rounds
 * each weight to fp16 once more, a relative 2^-11 at most (RMS 2^-11 / 3^0.5
 * of the output for random weights: 2.8e-4, one more rounding of the size
 * the F16 budget already counts per GEMM; none for Q4G64, whose values are
 * fp16). EMBED stays bitwise without project_in: the host and the gather
 * both take the exact dequantized value, add the same position row in fp32
 * and round once. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fg_backend.h"
#include "fg_devsize.h"
#include "fg_fmt.h"
#include "fg_q4.h"
#include "fg_sample.h"
#include "fmt_fill.h"

/* The settings check_sample gives SAMPLE's even rows (the odd ones are greedy). */
static float sample_temp, sample_top_p = 1.0f;

#define NMSE_TOL 1e-5
#define MAX_TOL (1.0 / 64)

typedef struct {
    const fg_backend *be;
    void *ctx;
} side;

static void *side_ptr(void *ctx, fg_shm_handle h) {
    side *s = ctx;
    return s->be->dev_ptr(s->ctx, h.offset);
}

/* ---- inputs ----------------------------------------------------------------- */

static uint64_t rng_state = 0x1234567;
static double urand(void) {   /* [0, 1) */
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * (1.0 / 9007199254740992.0);
}
static float uni(float lo, float hi) { return lo + (hi - lo) * (float)urand(); }

static void fill_half(fg_half *p, uint64_t n, float lo, float hi) {
    for (uint64_t i = 0; i < n; i++) p[i] = fg_float_to_half(uni(lo, hi));
}

/* A matrix's values in [-a, a): the token embedding's 0.1, the others'
 * variance 1/in so activations stay O(1). */
static float matrix_range(int lw, int which, const fg_spec *sp) {
    return !lw && which == FG_GW_EMBED_TOKENS ? 0.1f : sqrtf(3.0f / (float)sp->dims[1]);
}

/* A weight by its role: LayerNorm scales near 1, biases small, the position
 * table as the embedding's output, matrices in their format (fmt_fill.h). */
static void fill_weight(uint8_t *p, uint64_t nbytes, int lw, int which, const fg_spec *sp, int fmt) {
    int is_ln = lw ? which == FG_LW_LN1_W || which == FG_LW_LN2_W || which == FG_LW_QN_W || which == FG_LW_KN_W
                   : which == FG_GW_FINAL_LN_W;
    uint64_t n = nbytes / 2;
    if (is_ln) return fill_half((fg_half *)p, n, 0.9f, 1.1f);
    if (sp->ndim == 1) return fill_half((fg_half *)p, n, -0.1f, 0.1f);
    if (!lw && which == FG_GW_EMBED_POS) return fill_half((fg_half *)p, n, -0.5f, 0.5f);
    /* a stack of experts: each expert's matrix on its own (a Q4G64 stack is one slice per expert) */
    int parts = sp->experts > 0 ? sp->experts : 1, out = (int)(sp->dims[0] / parts), in = (int)sp->dims[1];
    uint64_t each = nbytes / (uint64_t)parts;
    for (int e = 0; e < parts; e++) fmt_fill(p + (uint64_t)e * each, fmt, out, in, matrix_range(lw, which, sp), &rng_state);
}

/* A compressed cache (--compress-cache): every head slice packed from
 * values in [-1, 1), so its mins and scales are what a store makes. */
static void fill_cache_q4(uint8_t *d, uint64_t nbytes, const fg_model_config *c) {
    int hd = c->head_dim;
    uint64_t slice = fg_q4_slice_bytes((uint64_t)hd, 1);
    fg_half *x = malloc(sizeof(fg_half) * (size_t)(hd > 0 ? hd : 1));
    if (!x) fg_exit_on(fg_err_set(FG_ERUNTIME, "out of memory"));
    for (uint64_t at = 0; at + slice <= nbytes; at += slice) {
        fill_half(x, (uint64_t)hd, -1, 1);
        fg_q4_pack(x, hd, 1, d + at);
    }
    free(x);
}

static void fill(const fg_msg *m, uint8_t *img, const fg_op_step *p, const fg_model_config *c) {
    const fg_msg_compute *mc = &m->u.compute;
    const fg_op_info *oi = fg_op_info_get(mc->op);
    fg_spec *specs = fg_specs_new(c);
    for (uint32_t i = 0; i < mc->n_in; i++) {
        const fg_op_slot *s = &oi->in[i];
        fg_shm_handle h = mc->in[i];
        uint8_t *d = img + h.offset;
        switch (s->kind) {
        case FG_SLOT_ACT: fill_half((fg_half *)d, h.nbytes / 2, -2, 2); break;
        case FG_SLOT_CACHE:
            if (c->compress_cache) fill_cache_q4(d, h.nbytes, c);
            else fill_half((fg_half *)d, h.nbytes / 2, -1, 1);
            break;
        case FG_SLOT_IDS:
            for (uint64_t k = 0; k < h.nbytes / 4; k++) ((int32_t *)d)[k] = (int32_t)(urand() * c->vocab_size);
            break;
        case FG_SLOT_MASK:   /* sequence b left-padded by b % 3 positions */
            for (uint32_t b = 0; b < p->B; b++)
                for (uint32_t t = 0; t < p->mask_stride; t++) d[(size_t)b * p->mask_stride + t] = t >= b % 3;
            break;
        case FG_SLOT_LOGITS:
            for (uint64_t k = 0; k < h.nbytes / 4; k++) ((float *)d)[k] = uni(-4, 4);
            break;
        case FG_SLOT_RNG:
            for (uint64_t k = 0; k < h.nbytes / sizeof(fg_sample_row); k++)   /* SAMPLE's settings, and greedy rows between */
                ((fg_sample_row *)d)[k] = (fg_sample_row){(uint64_t)(urand() * 9e15), k % 2 ? 0.0f : sample_temp,
                                                          k % 2 ? 1.0f : sample_top_p};
            break;
        case FG_SLOT_ECOUNT:   /* an output only */
        case FG_SLOT_XW:       /* no op of these checks takes a band of experts */
            memset(d, 0, h.nbytes);
            break;
        case FG_SLOT_EOUT:     /* MLP_SPLIT's given outputs: any finite values */
            for (uint64_t q = 0; q < h.nbytes / 4; q++) ((float *)d)[q] = uni(-1, 1);
            break;
        case FG_SLOT_LW:
        case FG_SLOT_GW: {
            int lw = s->kind == FG_SLOT_LW, idx = lw ? fg_spec_layer(0, s->which) : fg_spec_global(s->which);
            if (h.nbytes) fill_weight(d, h.nbytes, lw, s->which, &specs[idx], fg_config_fmt(c, idx));
            break;
        }
        }
    }
    free(specs);
}

/* ---- running one op on one side ------------------------------------------------- */

/* The image uploaded, op run, the whole layout read back into out. */
static fg_status run_side(side *s, const fg_msg *m, const fg_op_init *init, const fg_model_config *c, const uint8_t *img,
                          uint64_t end, uint8_t *out, fg_status *op_st) {
    fg_status st = s->be->device_init(s->ctx, init, c);
    if (!st) st = s->be->set_async(s->ctx, 0, img, end, 1);
    if (!st) st = s->be->synchronize(s->ctx, 1);
    fg_op_args a;
    if (!st) st = fg_op_args_parse(NULL, m, side_ptr, s, &a);
    if (st) return st;
    *op_st = s->be->ops[FG_OPI(a.op)](s->ctx, &a);
    if (!st) st = s->be->synchronize(s->ctx, 0);
    if (!st) st = s->be->get_async(s->ctx, out, 0, end, 2);
    if (!st) st = s->be->synchronize(s->ctx, 2);
    return st;
}

/* ---- comparing ---------------------------------------------------------------- */

/* skip: rows of row_elems elements left out (routing near-ties), or NULL. */
static int compare(const char *what, const char *slot, fg_slot_kind kind, const uint8_t *h, const uint8_t *g,
                   uint64_t n, int exact, const uint8_t *skip, uint64_t row_elems) {
    if (kind == FG_SLOT_IDS || kind == FG_SLOT_RNG || exact) {
        int ok = !memcmp(h, g, n);
        printf("%s %s %s: %s\n", ok ? "ok  " : "FAIL", what, slot, ok ? "bitwise equal" : "not bitwise equal");
        return ok;
    }
    int f16 = kind != FG_SLOT_LOGITS;
    uint64_t cnt = n / (f16 ? 2 : 4);
    double se = 0, sr = 0, mx = 0, mref = 0;
    for (uint64_t i = 0; i < cnt; i++) {
        if (skip && skip[i / row_elems]) continue;
        double r = f16 ? fg_half_to_float(((const fg_half *)h)[i]) : ((const float *)h)[i];
        double x = f16 ? fg_half_to_float(((const fg_half *)g)[i]) : ((const float *)g)[i];
        if (!isfinite(x)) x = 1e30;
        se += (x - r) * (x - r), sr += r * r;
        mx = fmax(mx, fabs(x - r)), mref = fmax(mref, fabs(r));
    }
    double nmse = sr > 0 ? se / sr : se;
    int ok = nmse <= NMSE_TOL && mx <= MAX_TOL * mref;
    printf("%s %s %s: nmse %.2e (tol %.0e), max |cuda - host| %.3g (tol %.3g)\n", ok ? "ok  " : "FAIL", what, slot,
           nmse, NMSE_TOL, mx, MAX_TOL * mref);
    return ok;
}

/* A compressed cache an attention op wrote (Tmax, B, KV head slices):
 * outside [past, past+S) bitwise the input on both sides. The step's
 * slices are packed from k and v, which differ between the backends as
 * any fp16 output does (the budget above: 2^-6 of the magnitude at most),
 * so each group's min (one of its values) is held to 2^-6 of the group's
 * largest magnitude and its step 1 / scale (its range / 15) to 2 2^-6 / 15
 * of it; each code to one step of the other side's, and at most 2% of the
 * codes may differ (a value 2^-11 off, the common case, moves (x - min) s
 * by at most 15 2^-11 < 1% of a step: about that share of codes lands on
 * the other side of a .5; a wrong slice, position or nibble order moves
 * most of them). */
static int compare_q4_cache(const char *what, const char *slot, const uint8_t *h, const uint8_t *g, uint64_t n,
                            const fg_op_step *p, const fg_model_config *c) {
    int d = c->head_dim, KV = c->n_kv_heads, G = (d + FG_Q4_GROUP - 1) / FG_Q4_GROUP;
    uint64_t slice = fg_q4_slice_bytes((uint64_t)d, 1), pos = (uint64_t)p->B * KV * slice;   /* a position's bytes */
    uint64_t lo = p->past * pos, hi = (p->past + p->S) * pos;
    int outside = memcmp(h, g, lo) || memcmp(h + hi, g + hi, n - hi);
    fg_half *eh = malloc(sizeof(fg_half) * (size_t)d), *eg = malloc(sizeof(fg_half) * (size_t)d);
    if (!eh || !eg) fg_exit_on(fg_err_set(FG_ERUNTIME, "out of memory"));
    uint64_t codes = 0, flips = 0, far = 0, fields = 0;
    for (uint64_t at = lo; at < hi; at += slice) {
        fg_q4_expand(h + at, d, 1, eh), fg_q4_expand(g + at, d, 1, eg);
        const fg_half *mh = (const fg_half *)(h + at + 32 * (uint64_t)G), *mg = (const fg_half *)(g + at + 32 * (uint64_t)G);
        for (int k = 0; k < G; k++) {
            double gmax = 0;
            for (int r = k * FG_Q4_GROUP; r < d && r < (k + 1) * FG_Q4_GROUP; r++)
                gmax = fmax(gmax, fmax(fabs(fg_half_to_float(eh[r])), fabs(fg_half_to_float(eg[r]))));
            double dmin = fabs(fg_half_to_float(mh[k]) - fg_half_to_float(mg[k]));
            double dstep = fabs(1.0 / fg_half_to_float(mh[G + k]) - 1.0 / fg_half_to_float(mg[G + k]));
            fields += !(dmin <= ldexp(gmax, -6)) || !(dstep <= 2 * ldexp(gmax, -6) / 15);
            for (int r = k * FG_Q4_GROUP; r < d && r < (k + 1) * FG_Q4_GROUP; r++) {
                int sh = r % 2 ? 0 : 4, byte = k * FG_Q4_GROUP / 2 + r % FG_Q4_GROUP / 2;
                int qh = h[at + byte] >> sh & 15, qg = g[at + byte] >> sh & 15;
                codes++, flips += qh != qg, far += abs(qh - qg) > 1;
            }
        }
    }
    free(eh), free(eg);
    int ok = !outside && !far && !fields && flips * 50 <= codes + 50;
    printf("%s %s %s (4-bit): %s outside the step; %" PRIu64 " of %" PRIu64 " codes differ (tol 2%% + 1), %" PRIu64
           " by more than one, %" PRIu64 " groups' min or scale beyond tolerance\n", ok ? "ok  " : "FAIL", what, slot,
           outside ? "NOT bitwise equal" : "bitwise equal", flips, codes, far, fields);
    return ok;
}

/* ---- routing near-ties (a sparse layer's MLP, LAYER and MOE_ROUTE) ------------------ */

/* Both backends route a row from the same fp32 x = RMSNorm(h) (the cuda
 * backend's router reads the norm's unrounded output, not its fp16 copy)
 * with fp32 sums in different orders, so each side's logits are within
 * eps = (H + 8) 2^-24 S of the exact ones, S = max over experts of sum_i
 * |x_i w_ei| (H - 1 roundings of a dot product in any order, with or
 * without FMA, plus 3 of x: rstd and two products), and the softmax keeps
 * their order up to delta = 16 2^-24 (1 + max |l|) (the subtracted maximum,
 * expf's 2 ulps, one division by the same sum). A row whose exact k-th and
 * (k+1)-th logits are more than 2 eps + delta apart is routed alike by both
 * (the "certain" rows); the others are routing near-ties, where a 1-ulp
 * difference may choose another expert, a discontinuity no tolerance on
 * the output absorbs: their outputs are not compared, and MOE_ROUTE's
 * counts are held to the certain rows' counts plus at most one per such row
 * and expert. With none, the counts must be equal. LAYER routes its
 * attention block's output, which differs between the backends: each
 * side's is taken from the ATTN op run on the same inputs (the same
 * kernels on the same shapes, so LAYER's own), and a row is certain when
 * both sides' exact routes agree with that margin. */
typedef struct {
    int rows, unsure;     /* rows routed; of them near a tie */
    uint8_t *skip;        /* (rows): 1 for a routing near-tie */
    int32_t *lo, *hi;     /* (E): each expert's count from the certain rows; plus every near-tie row */
    double margin;        /* the smallest gap / bound of a certain row */
} routes;

static void routes_free(routes *rt) {
    free(rt->skip), free(rt->lo), free(rt->hi);
    memset(rt, 0, sizeof *rt);
}

/* Row hr's exact route (double): top (E) flags its k experts (the k largest
 * logits, ties to the lower expert), *gap the k-th minus the (k+1)-th,
 * *bound 2 eps + delta above. x (H), l (E) scratch. */
static void exact_route(const fg_model_config *c, const fg_half *hr, const fg_half *ln2, const fg_half *router,
                        uint8_t *top, double *gap, double *bound, double *x, double *l) {
    int H = c->hidden, E = c->n_experts, k = c->experts_per_token;
    const double u = 1.0 / 16777216;   /* 2^-24: fp32's unit roundoff */
    double ss = 0, smax = 0, lmax = 0;
    for (int i = 0; i < H; i++) {
        double v = fg_half_to_float(hr[i]);
        ss += v * v;
    }
    double rstd = 1.0 / sqrt(ss / H + (double)c->norm_eps);
    for (int i = 0; i < H; i++) x[i] = fg_half_to_float(hr[i]) * rstd * fg_half_to_float(ln2[i]);
    for (int e = 0; e < E; e++) {
        double a = 0, sa = 0;
        for (int i = 0; i < H; i++) {
            double t = x[i] * fg_half_to_float(router[(size_t)e * H + i]);
            a += t, sa += fabs(t);
        }
        l[e] = a, smax = fmax(smax, sa), lmax = fmax(lmax, fabs(a));
    }
    for (int e = 0; e < E; e++) top[e] = 0;
    double kth = 0, next = -INFINITY;
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < E; e++)
            if (!top[e] && (best < 0 || l[e] > l[best])) best = e;
        top[best] = 1, kth = l[best];
    }
    for (int e = 0; e < E; e++)
        if (!top[e] && l[e] > next) next = l[e];
    *gap = kth - next;   /* +inf where k = E */
    *bound = 2 * (H + 8) * u * smax + 16 * u * (1 + lmax);
}

/* The routes of R rows of MLP input: h_host and h_cuda each side's (the
 * same pointer where both read the same h). */
static void route_bounds(const fg_model_config *c, const fg_half *h_host, const fg_half *h_cuda, const fg_half *ln2,
                         const fg_half *router, int R, routes *rt) {
    int H = c->hidden, E = c->n_experts;
    rt->rows = R, rt->unsure = 0, rt->margin = INFINITY;
    rt->skip = calloc((size_t)R, 1), rt->lo = calloc((size_t)E, 4), rt->hi = calloc((size_t)E, 4);
    double *x = malloc(sizeof(double) * (size_t)H), *l = malloc(sizeof(double) * (size_t)E);
    uint8_t *t1 = malloc((size_t)E), *t2 = malloc((size_t)E);
    if (!rt->skip || !rt->lo || !rt->hi || !x || !l || !t1 || !t2) fg_exit_on(fg_err_set(FG_ERUNTIME, "out of memory"));
    for (int r = 0; r < R; r++) {
        double g1, b1, g2, b2;
        exact_route(c, h_host + (size_t)r * H, ln2, router, t1, &g1, &b1, x, l);
        exact_route(c, h_cuda + (size_t)r * H, ln2, router, t2, &g2, &b2, x, l);
        int sure = g1 > b1 && g2 > b2 && !memcmp(t1, t2, (size_t)E);
        if (sure) rt->margin = fmin(rt->margin, fmin(g1 / b1, g2 / b2));
        else rt->skip[r] = 1, rt->unsure++;
        for (int e = 0; e < E; e++) rt->lo[e] += sure && t1[e], rt->hi[e] += sure ? t1[e] : 1;
    }
    free(x), free(l), free(t1), free(t2);
}

/* MOE_ROUTE's counts (E int32): each side within the certain rows' bounds
 * and summing to R k; equal where no row is near a tie. */
static int compare_counts(const char *what, const int32_t *ch, const int32_t *cg, const routes *rt,
                          const fg_model_config *c) {
    int E = c->n_experts, ok = 1;
    int64_t sh = 0, sg = 0;
    for (int e = 0; e < E; e++) {
        sh += ch[e], sg += cg[e];
        ok &= ch[e] >= rt->lo[e] && ch[e] <= rt->hi[e] && cg[e] >= rt->lo[e] && cg[e] <= rt->hi[e];
    }
    int64_t want = (int64_t)rt->rows * c->experts_per_token;
    ok &= sh == want && sg == want;
    int equal = !memcmp(ch, cg, sizeof(int32_t) * (size_t)E);
    if (!rt->unsure) ok &= equal;
    printf("%s %s counts: %s (%d rows, %d near a routing tie; smallest certain gap %.3g x its bound)\n",
           ok ? "ok  " : "FAIL", what,
           equal ? "equal" : ok ? "differ only where near-tie rows may" : "differ beyond the near-tie rows", rt->rows,
           rt->unsure, rt->margin);
    if (!ok)
        for (int e = 0; e < E; e++)
            if (ch[e] != cg[e] || ch[e] < rt->lo[e] || ch[e] > rt->hi[e])
                printf("     expert %d: host %d, cuda %d, certain rows' bounds [%d, %d]\n", e, ch[e], cg[e], rt->lo[e],
                       rt->hi[e]);
    return ok;
}

/* The index of op info oi's input slot `name` (-1: none). */
static int slot_of(const fg_op_info *oi, const char *name) {
    for (int i = 0; i < oi->n_in; i++)
        if (!strcmp(oi->in[i].name, name)) return i;
    return -1;
}

static fg_status run_side(side *s, const fg_msg *m, const fg_op_init *init, const fg_model_config *c, const uint8_t *img,
                          uint64_t end, uint8_t *out, fg_status *op_st);

/* LAYER's MLP input on one side: the ATTN op on the LAYER image's attention
 * slots (copied by name), its h out into h1 (R, H). */
static int attn_of_layer(side *sd, const fg_op_step *p, const fg_msg *ml, const uint8_t *imgl, const fg_model_config *c,
                         fg_half *h1) {
    fg_msg ma;
    uint64_t end;
    fg_exit_on(fg_op_args_layout(FG_OP_ATTN, p, 0, NULL, NULL, &ma, &end, NULL));
    const fg_op_info *oa = fg_op_info_get(FG_OP_ATTN), *ol = fg_op_info_get(FG_OP_LAYER);
    uint8_t *img = calloc(end, 1), *out = malloc(end);
    if (!img || !out) fg_exit_on(fg_err_set(FG_ERUNTIME, "out of memory"));
    for (int i = 0; i < oa->n_in; i++) {
        int j = slot_of(ol, oa->in[i].name);
        FG_ASSERT(j >= 0 && ml->u.compute.in[j].nbytes == ma.u.compute.in[i].nbytes);
        memcpy(img + ma.u.compute.in[i].offset, imgl + ml->u.compute.in[j].offset, ma.u.compute.in[i].nbytes);
    }
    fg_op_init init = {.model = p->model, .max_rows = p->B * p->S, .arena_bytes = end};
    fg_status st = FG_OK, op_st = FG_OK;
    st = run_side(sd, &ma, &init, c, img, end, out, &op_st);
    if (!st && !op_st) memcpy(h1, out + ma.u.compute.out[0].offset, ma.u.compute.out[0].nbytes);
    free(img), free(out);
    return !st && !op_st;
}

/* The routes of a sparse layer's op (MLP, LAYER, MOE_ROUTE) on image img. */
static int op_routes(side *host, side *cuda, uint32_t op, const fg_op_step *p, const fg_msg *m, const uint8_t *img,
                     const fg_model_config *c, routes *rt) {
    const fg_op_info *oi = fg_op_info_get(op);
    const fg_msg_compute *mc = &m->u.compute;
    int R = (int)(p->B * p->S), ln2 = slot_of(oi, "ln2_w"), router = slot_of(oi, "router"), hs = slot_of(oi, "h");
    const fg_half *wl = (const fg_half *)(img + mc->in[ln2].offset), *wr = (const fg_half *)(img + mc->in[router].offset);
    if (op != FG_OP_LAYER) {
        const fg_half *h = (const fg_half *)(img + mc->in[hs].offset);
        route_bounds(c, h, h, wl, wr, R, rt);
        return 1;
    }
    fg_half *hh = malloc(mc->in[hs].nbytes), *hg = malloc(mc->in[hs].nbytes);
    int ok = hh && hg && attn_of_layer(host, p, m, img, c, hh) && attn_of_layer(cuda, p, m, img, c, hg);
    if (ok) route_bounds(c, hh, hg, wl, wr, R, rt);
    else printf("FAIL %s: the ATTN op for LAYER's routes failed: %s\n", fg_op_name(op), fg_err_msg());
    free(hh), free(hg);
    return ok;
}

/* Op `op` at step p, both sides, every output and written input compared. */
static const char *model_name;   /* the model being checked, for the report */

static int check_op(side *host, side *cuda, uint32_t op, const fg_op_step *p, const fg_msg *m, uint64_t end,
                    const char *label, int want_einput) {
    fg_model_config c;
    fg_exit_on(fg_config_from_desc(&p->model, "check", &c));
    uint8_t *img = malloc(end), *oh = malloc(end), *og = malloc(end);
    if (!img || !oh || !og) fg_exit_on(fg_err_set(FG_ERUNTIME, "out of memory"));
    fill(m, img, p, &c);
    if (want_einput) ((int32_t *)(img + m->u.compute.in[0].offset))[p->B * p->S - 1] = c.vocab_size;   /* EMBED: one id past V */
    fg_op_init init = {.model = p->model, .max_rows = p->B * p->S, .arena_bytes = end, .budget_bytes = 0};
    fg_status sh = FG_OK, sg = FG_OK;
    char what[160];
    snprintf(what, sizeof what, "%s %s %s", fg_op_name(op), model_name, label);
    int ok = 1;
    if (run_side(host, m, &init, &c, img, end, oh, &sh) || run_side(cuda, m, &init, &c, img, end, og, &sg)) {
        printf("FAIL %s: %s\n", what, fg_err_msg());
        ok = 0;
    } else if (want_einput) {
        ok = sh == FG_EINPUT && sg == FG_EINPUT;
        printf("%s %s: an id outside the vocabulary is refused by both (host %d, cuda %d)\n", ok ? "ok  " : "FAIL", what,
               sh, sg);
    } else if (sh || sg) {
        printf("FAIL %s: host status %d, cuda status %d: %s\n", what, sh, sg, fg_err_msg());
        ok = 0;
    } else {
        const fg_op_info *oi = fg_op_info_get(op);
        const fg_msg_compute *mc = &m->u.compute;
        int exact_embed = op == FG_OP_EMBED && !fg_config_has_proj(&c);
        routes rt = {0};
        int routed = fg_config_layer_sparse(&c, 0) && (op == FG_OP_MLP || op == FG_OP_LAYER || op == FG_OP_MOE_ROUTE);
        int have = !routed || op_routes(host, cuda, op, p, m, img, &c, &rt);
        ok &= have;
        if (routed && have && op != FG_OP_MOE_ROUTE && rt.unsure)
            printf("     %s: %d of %d rows near a routing tie, not compared\n", what, rt.unsure, rt.rows);
        for (int i = 0; have && i < oi->n_out; i++) {
            if (oi->out[i].kind == FG_SLOT_ECOUNT) {
                ok &= compare_counts(what, (const int32_t *)(oh + mc->out[i].offset),
                                     (const int32_t *)(og + mc->out[i].offset), &rt, &c);
                continue;
            }
            ok &= compare(what, oi->out[i].name, oi->out[i].kind, oh + mc->out[i].offset, og + mc->out[i].offset,
                          mc->out[i].nbytes, exact_embed || op == FG_OP_SAMPLE, routed ? rt.skip : NULL,
                          (uint64_t)c.hidden);
        }
        for (int i = 0; have && i < oi->n_in; i++)   /* what an op writes in place: the cache, the generators */
            if (oi->in[i].kind == FG_SLOT_CACHE && c.compress_cache)
                ok &= compare_q4_cache(what, oi->in[i].name, oh + mc->in[i].offset, og + mc->in[i].offset,
                                       mc->in[i].nbytes, p, &c);
            else if (oi->in[i].kind == FG_SLOT_CACHE || oi->in[i].kind == FG_SLOT_RNG)
                ok &= compare(what, oi->in[i].name, oi->in[i].kind, oh + mc->in[i].offset, og + mc->in[i].offset,
                              mc->in[i].nbytes, 0, NULL, 0);
        routes_free(&rt);
    }
    free(img), free(oh), free(og);
    return ok;
}

/* SAMPLE's layout by hand (fg_op_args_layout takes steps only). */
typedef struct {
    fg_shm_handle h[3];
    int next;
} placed;
static fg_shm_handle next_h(void *ctx, const fg_op_info *oi, const fg_op_slot *s) { return ((placed *)ctx)->h[((placed *)ctx)->next++]; }

static int check_sample(side *host, side *cuda, const fg_model_desc *md, int V, uint32_t B, float temp, float top_p) {
    fg_op_sample sp = {.step = {.model = *md, .B = B, .S = 1}, .temperature = temp, .top_p = top_p};
    sample_temp = temp, sample_top_p = top_p;
    uint64_t nl = (uint64_t)B * V * 4, a = FG_SHM_ALIGN, o1 = (nl + a - 1) / a * a;
    uint64_t o2 = o1 + (sizeof(fg_sample_row) * B + a - 1) / a * a;
    placed pl = {.h = {{FG_SEG_DEVICE, 0, nl}, {FG_SEG_DEVICE, o1, sizeof(fg_sample_row) * B}, {FG_SEG_DEVICE, o2, 4ull * B}}};
    fg_msg m;
    fg_op_build(&m, FG_OP_SAMPLE, 0, 0, &sp, sizeof sp, next_h, &pl);
    char label[64];
    snprintf(label, sizeof label, "B %u temperature %.1f top-p %.2f", B, (double)temp, (double)top_p);
    return check_op(host, cuda, FG_OP_SAMPLE, &sp.step, &m, o2 + a, label, 0);
}

/* ---- mixtures of experts ------------------------------------------------------------ */

/* One layer each, from a published model's kinds shrunk to H 512 and V
 * 2048 (the host's experts and every format then run in seconds):
 * Mixtral-like (8 experts of 1024, top 2, renormalised; GQA 8:2, d 64) and
 * Qwen3-MoE-like (32 experts of 256, top 8 not renormalised:
 * norm_topk_prob false; q/k norms; d 128, so q is twice as wide as h; GQA
 * 8:2), and the latter's dense layer (mlp_only_layers: its own ffn_dim
 * 1536 beside the experts' 256, the workspace sized for the larger). */
typedef struct {
    const char *label, *base;
    int H, heads, kv, d, F, Fe, E, k, norm_topk, sparse;
} moe_shape;
static const moe_shape moe_shapes[] = {
    {"mixtral-like-8x1024-top2", "mixtral-8x7b", 512, 8, 2, 64, 1024, 1024, 8, 2, 1, 1},
    {"qwen3-moe-like-32x256-top8-nonorm", "qwen3-30b-a3b", 512, 8, 2, 128, 1536, 256, 32, 8, 0, 1},
    {"qwen3-moe-like-dense-layer", "qwen3-30b-a3b", 512, 8, 2, 128, 1536, 256, 32, 8, 0, 0},
};
#define MOE_SHAPES (sizeof moe_shapes / sizeof moe_shapes[0])
#define MOE_VOCAB 2048

static void moe_config(const moe_shape *ms, fg_model_config *c) {
    fg_exit_on(fg_config_by_name(ms->base, c));
    c->n_layers = 1, c->vocab_size = MOE_VOCAB;
    c->hidden = c->word_embed_proj_dim = ms->H, c->n_heads = ms->heads, c->n_kv_heads = ms->kv, c->head_dim = ms->d;
    c->ffn_dim = ms->F, c->moe_ffn_dim = ms->Fe, c->n_experts = ms->E, c->experts_per_token = ms->k;
    c->moe_norm_topk = ms->norm_topk;
    c->bos_id = 1, c->pad_id = 0, c->n_eos = 1, c->eos_ids[0] = 2;   /* inside the shrunk vocabulary */
    fg_config_set_sparse(c, 0, ms->sparse);
    fg_exit_on(fg_config_validate(c, ms->label));
}

/* ---- the format sweep (--formats) ----------------------------------------------- */

/* fmt in each of the first n nibbles: every matrix of a description's slots. */
static uint32_t nibbles(int fmt, int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint32_t)fmt << (4 * i);
    return v;
}

static int check_formats(side *host, side *cuda) {
    static const int fmts[] = {FG_FMT_Q8_0, FG_FMT_Q4_0, FG_FMT_Q4_1, FG_FMT_Q5_0, FG_FMT_Q5_1,
                               FG_FMT_Q2_K, FG_FMT_Q3_K, FG_FMT_Q4_K, FG_FMT_Q5_K, FG_FMT_Q6_K,
                               FG_FMT_MXFP4, FG_FMT_F32, FG_FMT_BF16, FG_FMT_Q4G64};
    /* H, heads, kv heads, F (0: the model's own), V */
    static const struct {
        const char *name;
        int H, heads, kv, F, V;
    } models[] = {{"tinyllama-1.1b", 512, 8, 2, 1536, 2048}, {"opt-125m", 512, 8, 8, 2048, 2048}, {"opt-350m", 0, 0, 0, 0, 2048}};
    static const struct {
        uint32_t B, S, past;
        const char *label;
    } steps[] = {
        {1, 1, 7, "1 row (GEMV)"},
        {3, 1, 20, "3 rows (GEMV)"},
        {20, 1, 4, "decode B 20 (fp16 tiles + cuBLAS)"},
        {2, 40, 0, "prefill B 2 S 40 (fp16 tiles + cuBLAS)"},
    };
    const uint32_t ops[] = {FG_OP_EMBED, FG_OP_ATTN, FG_OP_ATTN_QKV, FG_OP_ATTN_OUT, FG_OP_MLP, FG_OP_LAYER, FG_OP_LM_HEAD};
    /* the sparse shapes: the ops that read the experts (their attention is the dense Llama layer's above) */
    const uint32_t moe_ops[] = {FG_OP_MLP, FG_OP_LAYER, FG_OP_MOE_ROUTE};
    const size_t n_dense = sizeof models / sizeof models[0], n_moe = 2;   /* moe_shapes' sparse ones */
    int ok = 1;
    char name[96];
    for (size_t mi = 0; mi < n_dense + n_moe; mi++)
        for (size_t fi = 0; fi < sizeof fmts / sizeof fmts[0]; fi++) {
            fg_model_config c;
            int moe = mi >= n_dense;
            if (moe) {
                moe_config(&moe_shapes[mi - n_dense], &c);
            } else {
                fg_exit_on(fg_config_by_name(models[mi].name, &c));
                c.n_layers = 1;
                if (models[mi].H) {
                    c.hidden = c.word_embed_proj_dim = models[mi].H;
                    c.n_heads = models[mi].heads, c.n_kv_heads = models[mi].kv;
                    c.head_dim = models[mi].H / models[mi].heads;
                    c.ffn_dim = models[mi].F;
                }
                c.vocab_size = models[mi].V;
            }
            int f = fmts[fi];
            /* the layer's matrices (each expert its own slice); embedding, head and router stay F16 */
            if (f == FG_FMT_Q4G64) c.compress_weight = 1;
            else c.fmt_layer = nibbles(f, 7), c.fmt_global = nibbles(f, 4);
            snprintf(name, sizeof name, "%s-shape %s", moe ? moe_shapes[mi - n_dense].label : models[mi].name,
                     fg_fmt_name(f));
            model_name = name;
            fg_model_desc md = fg_config_desc(&c);
            const uint32_t *op_list = moe ? moe_ops : ops;
            size_t n_ops = moe ? sizeof moe_ops / sizeof moe_ops[0] : sizeof ops / sizeof ops[0];
            for (size_t si = 0; si < sizeof steps / sizeof steps[0]; si++)
                for (size_t oi = 0; oi < n_ops; oi++) {
                    uint32_t T = steps[si].past + steps[si].S;
                    fg_op_step p = {.model = md, .B = steps[si].B, .S = steps[si].S, .past = steps[si].past,
                                    .Tmax = T + 3, .mask_stride = T + 1};
                    fg_msg m;
                    uint64_t end;
                    fg_exit_on(fg_op_args_layout(op_list[oi], &p, 0, NULL, NULL, &m, &end, NULL));
                    ok &= check_op(host, cuda, op_list[oi], &p, &m, end, steps[si].label, 0);
                }
        }
    return ok;
}

int main(int argc, char **argv) {
    int probe = argc > 1 && !strcmp(argv[1], "--probe");   /* for scripts: is there a GPU? */
    int formats = argc > 1 && !strcmp(argv[1], "--formats");
    int self = argc > 1 && !strcmp(argv[1], "--host-self");   /* the experts' checks, host against host */
    if (!self && fg_devsize_usable("cuda")) {
        printf("%s: no CUDA device: skipped\n", probe ? "cuda probe" : "backend_ops_check");
        return 77;
    }
    if (probe) return 0;
    fg_log_set_level(FG_LOG_WARN);   /* not a DEVICE_INIT line per op */
    side host = {&fg_backend_host, NULL}, cuda = {self ? &fg_backend_host : fg_backend_find("cuda"), NULL};
    char info[512];
    if (!cuda.be) fg_exit_on(FG_EINPUT);
    fg_exit_on(host.be->open(&host.ctx, info, sizeof info));
    fg_exit_on(cuda.be->open(&cuda.ctx, info, sizeof info));
    printf("backend_ops_check: host vs %s%s\n", self ? "host (--host-self: the comparisons' own check)" : info,
           formats ? ", weight formats" : "");
    int ok = 1;
    if (formats) {
        ok = check_formats(&host, &cuda);
        goto out;
    }
    /* the Llama family too: GQA 32:4 (TinyLlama), GQA 32:8 with llama3 rope
     * and a tied head (Llama 3.2 1B), Qwen2.5's q/k/v biases at GQA 7:1,
     * and Mistral 7B's shape with its window cut to 64 slots, so that the
     * prefill steps below reach past it */
    const char *models[] = {"opt-125m",   "opt-350m",   "tinyllama-1.1b", "llama-3.2-1b",
                            "qwen2.5-7b", "mistral-7b", "qwen3-0.6b"};
    struct {
        uint32_t B, S, past;
        const char *label;
    } steps[] = {
        {3, 9, 0, "prefill B 3 S 9 (GEMM attention)"},
        {4, 1, 20, "decode B 4 past 20 (decode kernel)"},
        {2, 3, 5, "B 2 S 3 past 5 (decode kernel, 3 queries)"},
        {1, 130, 0, "prefill S 130 (tiles of heads)"},
        {1, 600, 0, "prefill S 600 (tiles of query rows)"},
    };
    const uint32_t ops[] = {FG_OP_EMBED, FG_OP_ATTN, FG_OP_ATTN_QKV, FG_OP_ATTN_OUT, FG_OP_MLP, FG_OP_LAYER, FG_OP_LM_HEAD};
    for (size_t mi = 0; !self && mi < sizeof models / sizeof models[0]; mi++) {
        fg_model_config c;
        fg_exit_on(fg_config_by_name(models[mi], &c));
        model_name = models[mi];
        c.n_layers = 1;
        if (c.sliding_window) c.sliding_window = 64;
        fg_model_desc md = fg_config_desc(&c);
        for (size_t si = 0; si < sizeof steps / sizeof steps[0]; si++)
            for (size_t oi = 0; oi < sizeof ops / sizeof ops[0]; oi++) {
                if (steps[si].S == 600 && ops[oi] != FG_OP_ATTN) continue;   /* the tiling is ATTN's alone */
                uint32_t T = steps[si].past + steps[si].S;
                fg_op_step p = {.model = md, .B = steps[si].B, .S = steps[si].S, .past = steps[si].past,
                                .Tmax = T + 3, .mask_stride = T + 1};
                fg_msg m;
                uint64_t end;
                fg_exit_on(fg_op_args_layout(ops[oi], &p, 0, NULL, NULL, &m, &end, NULL));
                ok &= check_op(&host, &cuda, ops[oi], &p, &m, end, steps[si].label, 0);
                if (ops[oi] == FG_OP_EMBED && si == 0) ok &= check_op(&host, &cuda, ops[oi], &p, &m, end, "bad id", 1);
            }
        ok &= check_sample(&host, &cuda, &md, c.vocab_size, 5, 0, 1);
        ok &= check_sample(&host, &cuda, &md, c.vocab_size, 5, 0.8f, 0.9f);
        ok &= check_sample(&host, &cuda, &md, c.vocab_size, 5, 1.3f, 1);
    }
    /* a compressed cache (--compress-cache): the ops that read and write it,
     * MHA (OPT), GQA (TinyLlama), a window and head_dim 128 (Mistral), q/k
     * norms (Qwen3), every step: the decode kernel expanding as it reads,
     * the GEMMs on a kv head expanded at a time (S 600: the longest) */
    const char *q4_models[] = {"opt-125m", "tinyllama-1.1b", "mistral-7b", "qwen3-0.6b"};
    const uint32_t q4_ops[] = {FG_OP_ATTN, FG_OP_LAYER};
    char q4_name[96];
    size_t n_q4 = self ? 1 : sizeof q4_models / sizeof q4_models[0];   /* --host-self: the smallest */
    for (size_t mi = 0; mi < n_q4; mi++) {
        fg_model_config c;
        fg_exit_on(fg_config_by_name(q4_models[mi], &c));
        snprintf(q4_name, sizeof q4_name, "%s 4-bit cache", q4_models[mi]);
        model_name = q4_name;
        c.n_layers = 1, c.compress_cache = 1;
        if (c.sliding_window) c.sliding_window = 64;
        fg_model_desc md = fg_config_desc(&c);
        for (size_t si = 0; si < sizeof steps / sizeof steps[0]; si++)
            for (size_t oi = 0; oi < sizeof q4_ops / sizeof q4_ops[0]; oi++) {
                if (steps[si].S == 600 && q4_ops[oi] != FG_OP_ATTN) continue;
                uint32_t T = steps[si].past + steps[si].S;
                fg_op_step p = {.model = md, .B = steps[si].B, .S = steps[si].S, .past = steps[si].past,
                                .Tmax = T + 3, .mask_stride = T + 1};
                fg_msg m;
                uint64_t end;
                fg_exit_on(fg_op_args_layout(q4_ops[oi], &p, 0, NULL, NULL, &m, &end, NULL));
                ok &= check_op(&host, &cuda, q4_ops[oi], &p, &m, end, steps[si].label, 0);
            }
    }
    /* mixtures of experts: every op of the table on a sparse layer (MOE_ROUTE
     * too; a dense layer has no route), the steps above but the longest */
    const uint32_t moe_ops[] = {FG_OP_EMBED,     FG_OP_ATTN,  FG_OP_ATTN_QKV, FG_OP_ATTN_OUT,
                                FG_OP_MLP,       FG_OP_LAYER, FG_OP_LM_HEAD,  FG_OP_MOE_ROUTE};
    for (size_t mi = 0; mi < MOE_SHAPES; mi++) {
        fg_model_config c;
        moe_config(&moe_shapes[mi], &c);
        model_name = moe_shapes[mi].label;
        fg_model_desc md = fg_config_desc(&c);
        for (size_t si = 0; si < sizeof steps / sizeof steps[0]; si++)
            for (size_t oi = 0; oi < sizeof moe_ops / sizeof moe_ops[0]; oi++) {
                if (steps[si].S == 600 || (moe_ops[oi] == FG_OP_MOE_ROUTE && !moe_shapes[mi].sparse)) continue;
                uint32_t T = steps[si].past + steps[si].S;
                fg_op_step p = {.model = md, .B = steps[si].B, .S = steps[si].S, .past = steps[si].past,
                                .Tmax = T + 3, .mask_stride = T + 1};
                fg_msg m;
                uint64_t end;
                fg_exit_on(fg_op_args_layout(moe_ops[oi], &p, 0, NULL, NULL, &m, &end, NULL));
                ok &= check_op(&host, &cuda, moe_ops[oi], &p, &m, end, steps[si].label, 0);
            }
    }
out:
    host.be->close(host.ctx);
    cuda.be->close(cuda.ctx);
    printf("backend_ops_check: %s\n", ok ? "all ops agree" : "FAIL");
    return ok ? 0 : 1;
}

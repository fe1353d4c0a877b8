/* gpu_profile.c - `flexgen-gpu-worker --profile [--json] [--quick]
 * [--device NAME] [--model NAME | --shape DESC] [--gpu-mem SIZE]
 * [--formats LIST [--formats-only]]`: the gpu tier measured
 * alone (no coordinator), for the cost model. It goes through what the
 * worker's commands run: the backend --device names, opened and given an
 * arena by its own open and device_init; each op laid out by
 * fg_op_args_layout (the op table's slots, checked and resolved by
 * fg_op_args_parse, as a command's are), uploaded from a shm segment with
 * set_async, and run by fg_gpu_run_op, the end of every compute command
 * (the backend's slot, then synchronize). Progress goes to the log
 * (stderr); stdout gets one JSON object (--json) or a short summary.
 *
 * The JSON object's keys (rates in 10^12 FLOP/s or 10^9 B/s):
 *   backend              the backend measured (fg_backend.name, --device)
 *   info                 its open() text, as the worker's READY carries it
 *   shares_host_cpu      true when the backend computes and copies on the
 *                        host's CPU cores, those of the cpu and disk workers,
 *                        so its work does not overlap theirs (the host
 *                        backend); false for a device of its own
 *   model, hidden, ffn, heads
 *                        --model (default opt-1.3b), or "shape" for --shape
 *                        DESC (a run's own model), and its H, F, heads
 *   mm_fmt               {"Q4_K": [{"rows": R, "TFLOPS": x}], ...} for R = 1,
 *                        2, 4 ... 256, 1024: the same as mm with every
 *                        matrix of the layer in one ggml format (random
 *                        valid blocks, fg_fmt_fill_random), counted as the
 *                        same FLOPs, for each format of --formats LIST
 *                        (names as common/fg_fmt.h spells them; default
 *                        FG_FMT_PROFILE_DEFAULT; "none": none) that the
 *                        backend runs and the shape holds (a row of each
 *                        matrix whole blocks; others are left out, saying
 *                        why in the log, and in mm_fmt_none: an array of
 *                        their names). With --formats-only, only these
 *                        (and the keys naming the backend and the shape):
 *                        what a run adds to a shape measured before
 *   mm_q4                [{"rows": R, "TFLOPS": x}] for R = 1, 4, 16, 64, 256,
 *                        1024: the same with --compress-weight's 4-bit
 *                        weights, counted as the same FLOPs, so mm_q4 / mm
 *                        is what expanding them costs (absent where the
 *                        backend refuses compressed weights)
 *   mm                   [{"rows": R, "TFLOPS": x}] for R = 1, 2, 4 ... 2048:
 *                        the LAYER op (what the engine runs per decoder
 *                        layer: LayerNorms, q k v o projections, fc1, fc2,
 *                        the conversions) on R = B*S rows with no context,
 *                        counted as its GEMMs' R fg_config_layer_flops FLOPs
 *                        (OPT: 2 R (4 H^2 + 2 H F)), so
 *                        the rate carries every per-row cost of a layer but
 *                        attention over a cache
 *   attn_decode_GBps     the ATTN op at decode (B 8, S 1, past 1023: a
 *                        1024-position context) less its projections as mm
 *                        predicts them: k and v cache bytes read, 4 B ctx KV
 *                        (KV = n_kv_heads * head_dim; OPT: H),
 *                        per second of attention
 *   attn_prefill_TFLOPS  the ATTN op at prefill (B 1, S 512, past 0) less its
 *                        projections: 2 B S^2 Q FLOPs (Q = n_heads * head_dim;
 *                        QK^T and AV, causal: half of 4 B S^2 Q) per second
 *   h2d_GBps, d2h_GBps   set_async (stream 1) and get_async (stream 2) of
 *                        copy_bytes between a shm segment (registered with
 *                        register_host where the backend has it) and the
 *                        arena, each followed by synchronize
 *   copy_bytes           256 MiB (64 MiB with --quick)
 *   max_rows, gpu_mem_bytes
 *                        the DEVICE_INIT the profile ran under: workspace
 *                        rows, and arena + workspace bytes
 *   quick                true with --quick: fewer repetitions and smaller
 *                        copies, for tests; not the real measurement
 * and on the cuda backend, the baselines its figures are held against:
 *   mm_bare              [{"rows": R, "TFLOPS": x}]: the layer's six GEMMs
 *                        as bare cublasGemmEx calls of the same shapes (no
 *                        LayerNorm, bias, residual or attention), so mm /
 *                        mm_bare is what a layer keeps of cuBLAS's rate
 *   h2d_pinned_GBps, d2h_pinned_GBps
 *                        cudaMemcpyAsync of copy_bytes from and to
 *                        cudaMallocHost memory: what the copies from the
 *                        registered shm segment should reach
 * Each figure is the median of runs after an untimed one: at least 5 and
 * 0.2 s of each point (3 runs with --quick; copies 5 or 3). */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "fg_devsize.h"
#include "fg_fmt.h"
#include "fg_profile.h"
#include "gpu_ops.h"
#ifdef FG_HAVE_CUDA
#include "cuda/fg_cuda.h"
#endif

#define PROG "flexgen-gpu-worker"
#define USAGE                                                                                                     \
    PROG " --profile [--device NAME] [--model NAME | --shape DESC] [--gpu-mem SIZE] [--formats LIST [--formats-only]]" \
         " [--quick] [--json]"

static const uint32_t mm_rows[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048};
#define N_MM (sizeof mm_rows / sizeof mm_rows[0])
/* mm_fmt's rows: mm's to 256 (a decode batch), then one compute-bound
 * point (past it the cost model holds the last rate): each format's table
 * costs a fraction of mm's at a large shape */
static const uint32_t fmt_rows[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 1024};
#define N_FMT_ROWS (sizeof fmt_rows / sizeof fmt_rows[0])

#define MAX_ROWS 2048u         /* mm_rows' largest: the workspace's rows */
#define MM_MAX_SEQS 64u        /* mm's rows as sequences; more rows become tokens of these */
#define DEC_B 8u
#define DEC_CTX 1024u
#define PRE_S 512u
#define COPY_BYTES (256ull << 20)
#define QUICK_COPY_BYTES (64ull << 20)
#define ATTN_MAX_PROJ_SHARE 0.9   /* of an ATTN op's time, at most this is taken off as its projections */

typedef struct {
    const char *device;   /* --device; NULL: fg_devsize_default() */
    uint64_t budget;      /* --gpu-mem; 0: what the profile needs */
    uint32_t formats;     /* --formats: 1 << fmt for each ggml format to measure */
    int formats_only;     /* --formats-only */
} gpu_flags;

/* --formats LIST into *mask; -1 after saying what is wrong. */
static int parse_formats(const char *list, uint32_t *mask) {
    const char *bad = NULL;
    if (!fg_fmt_parse_list(list, mask, &bad)) return 0;
    fprintf(stderr, PROG ": --formats: '%s' is not a ggml quantized format (Q8_0, Q4_K, Q6_K, ...)\n", bad);
    return -1;
}

static int gpu_flag(void *ctx, const char *flag, const char *val) {
    gpu_flags *f = ctx;
    if (!strcmp(flag, "--formats-only")) return f->formats_only = 1, 1;
    if (!val || (strcmp(flag, "--device") && strcmp(flag, "--gpu-mem") && strcmp(flag, "--formats"))) return 0;
    if (!strcmp(flag, "--device")) {
        f->device = val;
    } else if (!strcmp(flag, "--formats")) {
        if (parse_formats(val, &f->formats)) return -1;
    } else if (fg_parse_size(val, &f->budget) != FG_OK || f->budget == 0) {
        fprintf(stderr, PROG ": --gpu-mem: expected a size like 3G or 512M, got '%s'\n", val);
        return -1;
    }
    return 2;
}

typedef struct {
    fg_profile_args pa;
    const fg_backend *be;
    void *ctx;
    char info[FG_MSG_INFO_MAX + 1];   /* open()'s text */
    fg_model_desc model;
    uint8_t *image;      /* the shm segment's data: op tensors before upload, copy buffer */
    uint64_t image_bytes;
    fg_op_args a;        /* the op being timed */
    uint64_t copy_bytes;
} gprof;

/* Arena offset -> device pointer; the arena holds every layout (main). */
static void *arena_ptr(void *ctx, fg_shm_handle h) {
    gprof *g = ctx;
    return g->be->dev_ptr(g->ctx, h.offset);
}

static fg_op_step step_of(const gprof *g, uint32_t B, uint32_t S, uint32_t past) {
    return (fg_op_step){.model = g->model, .B = B, .S = S, .past = past, .Tmax = past + S, .mask_stride = past + S};
}

/* The steps measured: mm's rows (B = R up to MM_MAX_SEQS rows, then
 * MM_MAX_SEQS sequences of R / MM_MAX_SEQS tokens, whose attention over a
 * few dozen positions is noise beside the GEMMs), decode, prefill. */
static fg_op_step mm_step(const gprof *g, uint32_t R) {
    return R <= MM_MAX_SEQS ? step_of(g, R, 1, 0) : step_of(g, MM_MAX_SEQS, R / MM_MAX_SEQS, 0);
}

/* Lay op out at the arena's start, fill it through the shm image and
 * upload it: g->a is then ready to run. weights 0: the image holds the
 * op's weights already (the same op was laid out before: its weights come
 * first, at the same offsets for every step). */
static fg_status prepare(gprof *g, uint32_t op, const fg_op_step *p, int weights) {
    fg_msg m;
    uint64_t end;
    fg_status st = fg_op_args_layout(op, p, 0, arena_ptr, g, &m, &end, &g->a);
    if (st || (st = fg_profile_fill(&m, g->image, &g->pa, weights))) return st;
    if ((st = g->be->set_async(g->ctx, 0, g->image, end, 1))) return st;
    return g->be->synchronize(g->ctx, 1);
}

static fg_status run_op(void *ctx) {
    gprof *g = ctx;
    return fg_gpu_run_op(g->be, g->ctx, &g->a, 0);
}

/* The median seconds of op at step p (prepare's weights). */
static fg_status time_op(gprof *g, uint32_t op, const fg_op_step *p, int weights, double *t) {
    fg_status st = prepare(g, op, p, weights);
    return st ? st : fg_profile_median(&g->pa, run_op, g, FG_PROFILE_POINT_SECONDS, t);
}

static fg_status h2d(void *ctx) {
    gprof *g = ctx;
    fg_status st = g->be->set_async(g->ctx, 0, g->image, g->copy_bytes, 1);
    return st ? st : g->be->synchronize(g->ctx, 1);
}

static fg_status d2h(void *ctx) {
    gprof *g = ctx;
    fg_status st = g->be->get_async(g->ctx, g->image, 0, g->copy_bytes, 2);
    return st ? st : g->be->synchronize(g->ctx, 2);
}

/* The mm rate at R rows, linear in log R between the measured points. */
static double mm_at(const double *tflops, double R) {
    double rows[N_MM];
    for (size_t i = 0; i < N_MM; i++) rows[i] = mm_rows[i];
    return fg_log_interp(rows, tflops, (int)N_MM, R);
}

/* The attention part of an ATTN op that took op_s seconds on `rows` rows.
 * No op of the table runs the attention core alone on the gpu (ATTN_CORE is
 * the cpu worker's), so the core's time is the whole op's less what its
 * projections (q, k, v and out: 2 rows (2 H Q + 2 H KV) FLOPs, Q = A*d and
 * KV = n_kv_heads*d, 8 rows H^2 for OPT) take at the rate mm
 * measured for as many rows. That prediction comes from other runs, so on a
 * noisy machine it can exceed the op itself: at most ATTN_MAX_PROJ_SHARE of
 * the op is taken off, which keeps the figure positive and finite. */
static double attn_seconds(const gprof *g, const double *tflops, double op_s, double rows) {
    const fg_model_config *c = &g->pa.cfg;
    double H = c->hidden, Q = fg_config_q_dim(c), KV = fg_config_kv_dim(c);
    double proj_s = 2 * rows * (2 * H * Q + 2 * H * KV) / (mm_at(tflops, rows) * 1e12);
    return op_s - fmin(proj_s, ATTN_MAX_PROJ_SHARE * op_s);
}

#ifdef FG_HAVE_CUDA
/* ---- the cuda backend's baselines ---- */
typedef struct {
    const fg_cuda_baselines *f;   /* the cuda module's */
    fg_cuda_bench *b;
    int rows;
} bare_ctx;

static fg_status bare_gemms(void *ctx) { bare_ctx *x = ctx; return x->f->layer_gemms(x->b, x->rows); }
static fg_status bare_h2d(void *ctx) { bare_ctx *x = ctx; return x->f->pinned_copy(x->b, 1); }
static fg_status bare_d2h(void *ctx) { bare_ctx *x = ctx; return x->f->pinned_copy(x->b, 0); }

/* mm_bare, h2d_pinned_GBps, d2h_pinned_GBps into o. */
static fg_status cuda_baselines(gprof *g, json_t *o) {
    const fg_model_config *c = &g->pa.cfg;
    double H = c->hidden, F = c->ffn_dim, t = 0;
    bare_ctx x = {fg_backend_cuda_sym(FG_CUDA_BASELINES_SYM), NULL, 0};
    if (!x.f) return fg_err_set(FG_ERUNTIME, "the cuda module has no %s", FG_CUDA_BASELINES_SYM);
    fg_status st = x.f->bench_new(c->hidden, c->ffn_dim, (int)MAX_ROWS, g->copy_bytes, &x.b);
    json_t *mm = json_array();
    for (size_t i = 0; i < N_MM && !st; i++) {
        x.rows = (int)mm_rows[i];
        if ((st = fg_profile_median(&g->pa, bare_gemms, &x, FG_PROFILE_POINT_SECONDS, &t))) break;
        double tf = 2.0 * mm_rows[i] * (4 * H * H + 2 * H * F) / t / 1e12;
        fg_info("profile: bare cuBLAS layer GEMMs at %" PRIu32 " rows: %.3f ms, %.4f TFLOPS", mm_rows[i], t * 1e3, tf);
        json_array_append_new(mm, json_pack("{s:i, s:f}", "rows", (int)mm_rows[i], "TFLOPS", tf));
    }
    double h2d = 0, d2h = 0;
    if (!st && !(st = fg_profile_median(&g->pa, bare_h2d, &x, 0, &t))) h2d = (double)g->copy_bytes / t / 1e9;
    if (!st && !(st = fg_profile_median(&g->pa, bare_d2h, &x, 0, &t))) d2h = (double)g->copy_bytes / t / 1e9;
    if (x.b) x.f->bench_destroy(&x.b);
    if (st) {
        json_decref(mm);
        return st;
    }
    fg_info("profile: cudaMallocHost copies: h2d %.3f GB/s, d2h %.3f GB/s", h2d, d2h);
    json_object_set_new(o, "mm_bare", mm);
    json_object_set_new(o, "h2d_pinned_GBps", json_real(h2d));
    json_object_set_new(o, "d2h_pinned_GBps", json_real(d2h));
    return FG_OK;
}
#endif

/* The LAYER op at each of n row counts, its GEMMs' FLOPs per second into
 * tflops[] and appended to mm as {"rows", "TFLOPS"}; `what` names the
 * weights in the log. */
static fg_status layer_rates(gprof *g, const uint32_t *rows, size_t n, const char *what, double *tflops, json_t *mm) {
    double t = 0;
    fg_status st = FG_OK;
    for (size_t i = 0; i < n && !st; i++) {
        fg_op_step p = mm_step(g, rows[i]);
        if ((st = time_op(g, FG_OP_LAYER, &p, i == 0, &t))) break;
        tflops[i] = rows[i] * fg_config_layer_flops(&g->pa.cfg) / t / 1e12;
        fg_info("profile: LAYER%s at %" PRIu32 " rows: %.3f ms, %.4f TFLOPS", what, rows[i], t * 1e3, tflops[i]);
        json_array_append_new(mm, json_pack("{s:i, s:f}", "rows", (int)rows[i], "TFLOPS", tflops[i]));
    }
    return st;
}

/* All the figures into *out. */
static fg_status measure(gprof *g, json_t **out) {
    const fg_model_config *c = &g->pa.cfg;
    double Q = fg_config_q_dim(c), KV = fg_config_kv_dim(c), t = 0, tflops[N_MM] = {0};
    json_t *mm = json_array();
    fg_status st = layer_rates(g, mm_rows, N_MM, "", tflops, mm);
    double dec_GBps = 0, pre_TFLOPS = 0, h2d_GBps = 0, d2h_GBps = 0;
    fg_op_step dec = step_of(g, DEC_B, 1, DEC_CTX - 1), pre = step_of(g, 1, PRE_S, 0);
    if (!st && !(st = time_op(g, FG_OP_ATTN, &dec, 1, &t))) {
        double s = attn_seconds(g, tflops, t, DEC_B);
        dec_GBps = 4.0 * DEC_B * DEC_CTX * KV / s / 1e9;   /* the fp16 k and v of the kv heads read */
        fg_info("profile: ATTN decode B=%u ctx=%u: %.3f ms, %.3f ms of attention, %.3f GB/s", DEC_B, DEC_CTX,
                t * 1e3, s * 1e3, dec_GBps);
    }
    if (!st && !(st = time_op(g, FG_OP_ATTN, &pre, 0, &t))) {
        double s = attn_seconds(g, tflops, t, PRE_S);
        pre_TFLOPS = 2.0 * PRE_S * PRE_S * Q / s / 1e12;
        fg_info("profile: ATTN prefill S=%u: %.3f ms, %.3f ms of attention, %.4f TFLOPS", PRE_S, t * 1e3, s * 1e3,
                pre_TFLOPS);
    }
    if (!st && !(st = fg_profile_median(&g->pa, h2d, g, 0, &t))) h2d_GBps = (double)g->copy_bytes / t / 1e9;
    if (!st && !(st = fg_profile_median(&g->pa, d2h, g, 0, &t))) d2h_GBps = (double)g->copy_bytes / t / 1e9;
    if (st) {
        json_decref(mm);
        return st;
    }
    fg_info("profile: copies of %" PRIu64 " bytes: h2d %.3f GB/s, d2h %.3f GB/s", g->copy_bytes, h2d_GBps, d2h_GBps);
    *out = json_pack("{s:s, s:s, s:b, s:s, s:i, s:i, s:i, s:o, s:f, s:f, s:f, s:f, s:I, s:i, s:I, s:b}", "backend",
                     g->be->name, "info", g->info, "shares_host_cpu", g->be->shares_host_cpu, "model", c->name,
                     "hidden", c->hidden, "ffn", c->ffn_dim, "heads", c->n_heads, "mm", mm, "attn_decode_GBps",
                     dec_GBps, "attn_prefill_TFLOPS", pre_TFLOPS, "h2d_GBps", h2d_GBps, "d2h_GBps", d2h_GBps,
                     "copy_bytes", (json_int_t)g->copy_bytes, "max_rows", (int)MAX_ROWS, "gpu_mem_bytes",
                     (json_int_t)g->be->mem_bytes(g->ctx, 1), "quick", g->pa.quick);
#ifdef FG_HAVE_CUDA
    if (!strcmp(g->be->name, "cuda") && (st = cuda_baselines(g, *out))) {
        json_decref(*out);
        *out = NULL;
        return st;
    }
#endif
    return FG_OK;
}

/* The LAYER op's rates at `rows` with every matrix of the layer in fmt
 * (FG_FMT_Q4G64: --compress-weight's 4-bit, packed as the tier store packs
 * it), under DEVICE_INIT again with that model description, into *out (an
 * array of {"rows", "TFLOPS"}). *out NULL, with the reason in the log,
 * where the backend refuses the format or the shape cannot be held in it. */
static fg_status measure_fmt(gprof *g, uint64_t budget, int fmt, const uint32_t *rows, size_t n, json_t **out) {
    fg_model_config q = g->pa.cfg, one;
    *out = NULL;
    if (fmt == FG_FMT_Q4G64) {
        q.compress_weight = 1;
    } else {
        q.fmt_layer = 0;
        for (int slot = 0; slot < FG_CONFIG_FMT_LAYER_SLOTS; slot++) q.fmt_layer |= (uint32_t)fmt << (4 * slot);
    }
    fg_op_init init = {.model = fg_config_desc(&q), .max_rows = MAX_ROWS, .arena_bytes = g->image_bytes,
                       .budget_bytes = budget};
    fg_status st = fg_config_from_desc(&init.model, "profile", &one);
    if (st || (st = g->be->device_init(g->ctx, &init, &one))) {
        fg_info("profile: no %s weights on the %s backend at this shape (%s): left out", fg_fmt_name(fmt), g->be->name,
                fg_err_msg());
        return FG_OK;
    }
    fg_model_desc saved = g->model;
    fg_model_config saved_cfg = g->pa.cfg;
    g->model = init.model, g->pa.cfg = q;
    double tflops[N_MM];
    char what[32];
    snprintf(what, sizeof what, " with %s weights", fg_fmt_name(fmt));
    json_t *mm = json_array();
    st = layer_rates(g, rows, n, what, tflops, mm);
    g->model = saved, g->pa.cfg = saved_cfg;
    if (st) json_decref(mm);
    else *out = mm;
    return st;
}

/* mm_q4 (a backend that refuses compressed weights leaves it out) and
 * mm_fmt of the formats in mask into o; mm_fmt_none the formats of mask
 * it left out. */
static fg_status measure_formats(gprof *g, uint64_t budget, int q4, uint32_t mask, json_t *o) {
    static const uint32_t q4_rows[] = {1, 4, 16, 64, 256, 1024};
    json_t *t = NULL, *by = json_object(), *none = json_array();
    fg_status st = q4 ? measure_fmt(g, budget, FG_FMT_Q4G64, q4_rows, sizeof q4_rows / sizeof q4_rows[0], &t) : FG_OK;
    if (t) json_object_set_new(o, "mm_q4", t);
    for (int f = 0; f < FG_FMT_COUNT && !st; f++) {
        if (!(mask & FG_FMT_BIT(f)) || (st = measure_fmt(g, budget, f, fmt_rows, N_FMT_ROWS, &t))) continue;
        if (t) json_object_set_new(by, fg_fmt_name(f), t);
        else json_array_append_new(none, json_string(fg_fmt_name(f)));
    }
    if (!st && json_object_size(by)) json_object_set(o, "mm_fmt", by);
    if (!st && json_array_size(none)) json_object_set(o, "mm_fmt_none", none);
    json_decref(by), json_decref(none);
    return st;
}

/* --formats-only: the formats' tables, and what names the backend and the shape. */
static fg_status measure_formats_only(gprof *g, uint64_t budget, uint32_t mask, json_t **out) {
    const fg_model_config *c = &g->pa.cfg;
    *out = json_pack("{s:s, s:s, s:b, s:s, s:i, s:i, s:i, s:b}", "backend", g->be->name, "info", g->info,
                     "shares_host_cpu", g->be->shares_host_cpu, "model", c->name, "hidden", c->hidden, "ffn",
                     c->ffn_dim, "heads", c->n_heads, "quick", g->pa.quick);
    fg_status st = measure_formats(g, budget, 0, mask, *out);
    if (st) json_decref(*out), *out = NULL;
    return st;
}

static void print_summary(const json_t *j) {
#define NUM(k) json_number_value(json_object_get(j, k))
    printf("gpu profile: %s\n", json_string_value(json_object_get(j, "info")));
    printf("  %s shapes (H %d, F %d, %d heads)%s\n", json_string_value(json_object_get(j, "model")),
           (int)NUM("hidden"), (int)NUM("ffn"), (int)NUM("heads"),
           json_is_true(json_object_get(j, "quick")) ? ", --quick: not the real measurement" : "");
    const json_t *mm = json_object_get(j, "mm");
    if (mm) printf("  layer GEMMs (mm)   ");
    for (size_t i = 0, n = json_array_size(mm); i < n; i++) {
        if (i % 3 && i != n - 1) continue;   /* rows 1, 8, 64, 512 and the last */
        const json_t *pt = json_array_get(mm, i);
        printf("%s%d rows %.3f", i ? ", " : "", (int)json_number_value(json_object_get(pt, "rows")),
               json_number_value(json_object_get(pt, "TFLOPS")));
    }
    if (mm) printf(" TFLOPS\n");
    const json_t *q4 = json_object_get(j, "mm_q4");
    if (q4) {
        printf("  4-bit weights      ");
        for (size_t i = 0, n = json_array_size(q4); i < n; i++) {
            const json_t *pt = json_array_get(q4, i);
            printf("%s%d rows %.3f", i ? ", " : "", (int)json_number_value(json_object_get(pt, "rows")),
                   json_number_value(json_object_get(pt, "TFLOPS")));
        }
        printf(" TFLOPS (a layer's GEMM FLOPs; the weights expanded beside them)\n");
    }
    const char *name;
    json_t *t;
    json_object_foreach(json_object_get(j, "mm_fmt"), name, t) {
        printf("  %-6s weights     ", name);
        for (size_t i = 0, n = json_array_size(t); i < n; i++) {
            if (i % 3 && i != n - 1) continue;   /* rows 1, 8, 64 and the last */
            const json_t *pt = json_array_get(t, i);
            printf("%s%d rows %.3f", i ? ", " : "", (int)json_number_value(json_object_get(pt, "rows")),
                   json_number_value(json_object_get(pt, "TFLOPS")));
        }
        printf(" TFLOPS\n");
    }
    if (!json_object_get(j, "mm")) {   /* --formats-only */
        printf("  (--json prints every point)\n");
        return;
    }
    printf("  attention decode   %8.3f GB/s of KV cache (B %u, context %u)\n", NUM("attn_decode_GBps"), DEC_B, DEC_CTX);
    printf("  attention prefill  %8.4f TFLOPS (S %u)\n", NUM("attn_prefill_TFLOPS"), PRE_S);
    printf("  copies             %8.3f GB/s host to device, %.3f GB/s device to host (%.0f MiB)\n", NUM("h2d_GBps"),
           NUM("d2h_GBps"), NUM("copy_bytes") / (1 << 20));
    const json_t *bare = json_object_get(j, "mm_bare");
    if (bare) {
        printf("  bare cuBLAS        ");
        for (size_t i = 0, n = json_array_size(bare); i < n; i++) {
            if (i % 3 && i != n - 1) continue;
            const json_t *pt = json_array_get(bare, i), *lp = json_array_get(mm, i);
            double b = json_number_value(json_object_get(pt, "TFLOPS"));
            printf("%s%d rows %.3f (layer %.0f%%)", i ? ", " : "", (int)json_number_value(json_object_get(pt, "rows")),
                   b, b > 0 ? 100 * json_number_value(json_object_get(lp, "TFLOPS")) / b : 0.0);
        }
        printf(" TFLOPS\n");
        printf("  pinned copies      %8.3f GB/s host to device, %.3f GB/s device to host (cudaMallocHost)\n",
               NUM("h2d_pinned_GBps"), NUM("d2h_pinned_GBps"));
    }
    if (json_is_true(json_object_get(j, "shares_host_cpu")))
        printf("  runs on the host's CPU cores: no overlap with the cpu and disk workers\n");
    printf("  (--json prints every point)\n");
#undef NUM
}

int fg_gpu_profile_main(int argc, char **argv) {
    gprof g = {.copy_bytes = 0};
    gpu_flags f = {0};
    if (parse_formats(FG_FMT_PROFILE_DEFAULT, &f.formats)) return 2;
    int rc = fg_profile_parse(&g.pa, PROG, argc, argv, gpu_flag, &f, USAGE);
    if (rc) return rc;
    if (!(g.be = fg_backend_find(f.device ? f.device : fg_devsize_default()))) {
        fprintf(stderr, PROG ": --profile: %s\n", fg_err_msg());
        return 2;
    }
    g.model = fg_config_desc(&g.pa.cfg);
    g.copy_bytes = g.pa.quick ? QUICK_COPY_BYTES : COPY_BYTES;

    /* What the tests need: the arena holds the largest op layout, then the
     * copy buffer (the same bytes, one after the other); the workspace is
     * the backend's for MAX_ROWS rows, as the coordinator's plan counts it. */
    fg_model_config one;
    fg_status st = fg_config_from_desc(&g.model, "profile", &one);
    fg_op_step steps[N_MM + 2];
    uint32_t ops[N_MM + 2];
    for (size_t i = 0; i < N_MM; i++) steps[i] = mm_step(&g, mm_rows[i]), ops[i] = FG_OP_LAYER;
    steps[N_MM] = step_of(&g, DEC_B, 1, DEC_CTX - 1), ops[N_MM] = FG_OP_ATTN;
    steps[N_MM + 1] = step_of(&g, 1, PRE_S, 0), ops[N_MM + 1] = FG_OP_ATTN;
    g.image_bytes = g.copy_bytes;
    for (size_t i = 0; !st && i < N_MM + 2; i++) {
        fg_msg m;
        uint64_t end;
        st = fg_op_args_layout(ops[i], &steps[i], 0, NULL, NULL, &m, &end, NULL);
        if (end > g.image_bytes) g.image_bytes = end;
    }
    if (st) {
        fprintf(stderr, PROG ": --profile: %s\n", fg_err_msg());
        return 2;
    }
    uint64_t ws = g.be->workspace_bytes(&one, MAX_ROWS), need = g.image_bytes + ws;
    if (f.budget && need > f.budget) {
        fprintf(stderr,
                PROG ": --profile: the %s profile needs an arena of %" PRIu64 " bytes and a workspace of %" PRIu64
                     " (%u rows) = %" PRIu64 " bytes on the %s backend, over --gpu-mem %" PRIu64 "\n",
                g.pa.cfg.name, g.image_bytes, ws, MAX_ROWS, need, g.be->name, f.budget);
        return 2;
    }

    if ((st = g.be->open(&g.ctx, g.info, sizeof g.info))) {
        fprintf(stderr, PROG ": --profile: %s: %s\n", g.be->name, fg_err_msg());
        return 1;
    }
    fg_info("%s", g.info);
    /* the shm segment the data comes from, as the engine's does */
    char run_id[FG_SHM_RUNID_LEN + 1];
    fg_shm_seg *seg = NULL;
    json_t *j = NULL;
    fg_op_init init = {.model = g.model, .max_rows = MAX_ROWS, .arena_bytes = g.image_bytes,
                       .budget_bytes = f.budget ? f.budget : need};
    if (!(st = fg_shm_run_id_new(run_id)) && !(st = fg_shm_create(run_id, "gpu-profile", 0, g.image_bytes, &seg)) &&
        !(st = g.be->register_host ? g.be->register_host(g.ctx, fg_shm_base(seg), fg_shm_size(seg)) : FG_OK) &&
        !(st = g.be->device_init(g.ctx, &init, &one))) {
        g.image = (uint8_t *)fg_shm_base(seg) + FG_SHM_HEADER_BYTES;
        if (f.formats_only) {
            st = measure_formats_only(&g, init.budget_bytes, f.formats, &j);
        } else {
            st = measure(&g, &j);
            if (!st && (st = measure_formats(&g, init.budget_bytes, 1, f.formats, j))) json_decref(j), j = NULL;
        }
    }
    fg_shm_destroy(&seg);
    g.be->close(g.ctx);
    if (st) {
        fprintf(stderr, PROG ": --profile: %s\n", fg_err_msg());
        return st == FG_EINPUT ? 2 : 1;
    }
    return fg_worker_profile_print(j, g.pa.as_json, print_summary);
}

/* eo_test.c - the engine ops through real workers, against the reference
 * engine's path. This program is a coordinator of its own (fg_super): it
 * spawns the gpu and cpu workers, puts random fp16 weights of a small model
 * (OPT, and the Llama family: grouped kv heads, rotary, biases, sliding
 * window) in shm, copies them into the gpu worker's device arena, and runs a prefill and
 * two decode steps of a left-padded batch as the offloading engine will:
 *
 *   EMBED -> per layer (ATTN | ATTN_QKV, q k v to shm, ATTN_CORE on the cpu
 *            worker, ctx back, ATTN_OUT) -> MLP -> LM_HEAD
 *
 * Beside it, in this process, the same step through the fg_fwd functions on
 * fp32 buffers, as coordinator/fg_engine_ref.c calls them. The commands are
 * built from the op table (fg_op_build), each slot resolved by its kind. Hidden states
 * after every layer, both KV caches and the logits must match BITWISE: every
 * op only widens fp16 inputs, calls the same function and narrows outputs
 * that function already rounded, so no tolerance is owed (docs/ARCHITECTURE.md, "Numerics").
 * Both processes run the kernels with the same thread count
 * (FLEXGEN_THREADS), which fixes how the Linear layers split their work.
 *
 *   fg-engine-ops-test bitwise --workers GPU CPU
 *   fg-engine-ops-test errors  --workers GPU CPU
 *
 * errors: commands a coordinator can get wrong are answered with an ERROR
 * naming the op and the slot, and the worker carries on: ops before
 * DEVICE_INIT, DEVICE_INIT over budget (the old arena survives), a repeated
 * DEVICE_INIT (a no-op that keeps the arena's contents), wrong handle sizes,
 * counts and params, absent weights given bytes, ids outside the vocabulary,
 * handles outside the arena. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fg_engine_ops.h"
#include "fg_fwd.h"
#include "fg_sample.h"
#include "fg_super.h"

#define FG_TEST_PREFIX "fg-engine-ops-test: "
#include "fg_test.h"

static int failures;

#define WAIT_MS 60000

/* ---- a model and its placement ------------------------------------------ */

#define L 2       /* decoder layers */
#define STEPS 3   /* prefill + 2 decode steps */
#define NACT 12   /* activation regions */

enum { A_IDS, A_MASK, A_H, A_Q, A_K, A_V, A_CTX, A_LOGITS, A_ZERO, A_KC0 }; /* then kc, vc per layer */

typedef struct {
    const char *label;
    fg_model_config c;
    int B, S;                     /* batch and prompt length */
} variant;

typedef struct {
    const variant *v;
    fg_super *sup;
    int B, S, Tmax, H, V, QD, KD;   /* q and ctx width A*d; k, v and the cache's KV*d */
    fg_spec *sp;
    int nsp;
    /* weights: shm (w_shm) and device (w_dev), by spec index; nbytes 0 if absent */
    fg_shm_handle *w_shm, *w_dev;
    /* activations: shm and device regions, sized for the prefill */
    fg_shm_handle a_shm[A_KC0 + 2 * L], a_dev[A_KC0 + 2 * L];
    fg_op_init init;
} bench;

static uint64_t rng_state;
static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float rng_uniform(void) { return (float)((rng_next() >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f; }

static void *P(bench *b, fg_shm_handle h) {
    void *p = fg_super_ptr(b->sup, h);
    FG_ASSERT(p);
    return p;
}

static fg_shm_handle sized(fg_shm_handle h, uint64_t nbytes) {
    FG_ASSERT(nbytes <= h.nbytes);
    h.nbytes = nbytes;
    return h;
}

static fg_op_model op_model(const fg_model_config *c) { return fg_config_desc(c); }

/* Random fp16 weights: Linear weights and embeddings small, LayerNorm scales
 * near 1, so activations stay in a range where every bit still matters. */
static void fill_weight(fg_half *w, const fg_spec *s) {
    int64_t n = fg_spec_numel(s);
    int ln = strstr(s->name, "norm") != NULL, bias = strstr(s->name, "bias") != NULL;
    for (int64_t i = 0; i < n; i++) {
        float x = rng_uniform();
        float val = ln && !bias ? 1.0f + 0.2f * x : bias ? 0.1f * x : 0.15f * x;
        w[i] = fg_float_to_half(val);
    }
}

static void bench_setup(bench *b, fg_super *sup, const variant *v, int seg_tag) {
    memset(b, 0, sizeof *b);
    b->v = v;
    b->sup = sup;
    b->B = v->B;
    b->S = v->S;
    b->Tmax = v->S + STEPS;   /* one position more than used: unwritten cache must stay as it was */
    b->H = v->c.hidden;
    b->V = v->c.vocab_size;
    b->QD = fg_config_q_dim(&v->c);
    b->KD = fg_config_kv_dim(&v->c);
    b->sp = fg_specs_new(&v->c);
    b->nsp = fg_spec_count(&v->c);
    b->w_shm = fg_xcalloc((size_t)b->nsp, sizeof *b->w_shm);
    b->w_dev = fg_xcalloc((size_t)b->nsp, sizeof *b->w_dev);

    /* regions: device = weights then activations; shm = the same two lists in two segments */
    int nw = 0;
    fg_shm_region *wr = fg_xcalloc((size_t)b->nsp, sizeof *wr);
    for (int i = 0; i < b->nsp; i++)
        if (b->sp[i].present) wr[nw++] = (fg_shm_region){b->sp[i].name, (uint64_t)fg_spec_numel(&b->sp[i]) * 2, 0};
    uint64_t B = (uint64_t)b->B, S = (uint64_t)b->S, H = (uint64_t)b->H, QD = (uint64_t)b->QD, KD = (uint64_t)b->KD;
    static char names[A_KC0 + 2 * L][16] = {"ids", "mask", "h", "q", "k", "v", "ctx", "logits", "zero"};
    int na = A_KC0 + 2 * L;
    fg_shm_region ar[A_KC0 + 2 * L];
    uint64_t cache = (uint64_t)b->Tmax * B * KD * 2;
    uint64_t sizes[A_KC0] = {B * S * 4, B * (uint64_t)b->Tmax, B * S * H * 2, B * S * QD * 2, B * S * KD * 2,
                             B * S * KD * 2, B * S * QD * 2, B * (uint64_t)b->V * 4, cache};
    for (int i = 0; i < na; i++) {
        if (i >= A_KC0) snprintf(names[i], sizeof names[i], "%s%d", (i - A_KC0) % 2 ? "vc" : "kc", (i - A_KC0) / 2);
        ar[i] = (fg_shm_region){names[i], i < A_KC0 ? sizes[i] : cache, 0};
    }
    fg_shm_region *dr = fg_xcalloc((size_t)(nw + na), sizeof *dr);
    memcpy(dr, wr, sizeof *wr * (size_t)nw);
    memcpy(dr + nw, ar, sizeof ar);
    uint64_t wbytes, abytes, dbytes;
    MUST(fg_shm_layout(wr, (size_t)nw, &wbytes));
    MUST(fg_shm_layout(ar, (size_t)na, &abytes));
    MUST(fg_shm_layout(dr, (size_t)(nw + na), &dbytes));
    char segname[32];
    uint32_t seg_w, seg_a;
    snprintf(segname, sizeof segname, "w%d", seg_tag);
    MUST(fg_super_segment_new(sup, segname, wbytes, &seg_w));
    snprintf(segname, sizeof segname, "a%d", seg_tag);
    MUST(fg_super_segment_new(sup, segname, abytes, &seg_a));
    for (int i = 0; i < b->nsp; i++) {
        if (!b->sp[i].present) continue;
        b->w_shm[i] = fg_shm_layout_handle(wr, (size_t)nw, seg_w, b->sp[i].name);
        b->w_dev[i] = fg_shm_layout_handle(dr, (size_t)(nw + na), FG_SEG_DEVICE, b->sp[i].name);
        fill_weight(P(b, b->w_shm[i]), &b->sp[i]);
    }
    for (int i = 0; i < na; i++) {
        b->a_shm[i] = fg_shm_layout_handle(ar, (size_t)na, seg_a, names[i]);
        b->a_dev[i] = fg_shm_layout_handle(dr, (size_t)(nw + na), FG_SEG_DEVICE, names[i]);
    }
    /* device offsets start after a header page as shm's do: the arena covers them */
    b->init = (fg_op_init){.model = op_model(&v->c), .arena_bytes = FG_SHM_HEADER_BYTES + dbytes,
                           .budget_bytes = 0, .max_rows = (uint32_t)(B * S)};
    free(wr);
    free(dr);
}

static void bench_free(bench *b) {
    free(b->sp);
    free(b->w_shm);
    free(b->w_dev);
}

static const fg_half *wptr(bench *b, int spec) { return b->sp[spec].present ? P(b, b->w_shm[spec]) : NULL; }

/* ---- commands ------------------------------------------------------------ */

static fg_msg op_msg(int type, uint32_t op, const fg_shm_handle *in, int n_in, const fg_shm_handle *out, int n_out,
                     const void *params, uint32_t params_len) {
    fg_msg m;
    fg_msg_init(&m, type);
    m.u.compute.op = op;
    for (int i = 0; i < n_in; i++) FG_ASSERT(fg_msg_compute_add_in(&m, in[i]) == 0);
    for (int i = 0; i < n_out; i++) FG_ASSERT(fg_msg_compute_add_out(&m, out[i]) == 0);
    FG_ASSERT(fg_msg_compute_set_params(&m, params, params_len) == 0);
    return m;
}

/* Submit and wait; the completion in *d. */
static fg_status run_msg(fg_super *sup, fg_role role, const fg_msg *m, fg_super_done *d) {
    uint64_t seq;
    memset(d, 0, sizeof *d);
    MUST(fg_super_submit(sup, role, m, NULL, &seq));
    return fg_super_wait(sup, seq, WAIT_MS, d);
}

static void run_ok(fg_super *sup, fg_role role, const fg_msg *m, const char *what) {
    fg_super_done d;
    if (run_msg(sup, role, m, &d) != FG_OK) {
        fprintf(stderr, "fg-engine-ops-test: FAIL: %s: %s\n", what, d.error[0] ? d.error : fg_err_msg());
        exit(1);
    }
}

/* The command must fail with `code` and a message containing each of says[]. */
static void run_err(fg_super *sup, fg_role role, const fg_msg *m, int32_t code, const char *what,
                    const char *say1, const char *say2) {
    fg_super_done d;
    fg_status st = run_msg(sup, role, m, &d);
    CHECK(st == FG_ERUNTIME && d.status == code && (!say1 || strstr(d.error, say1)) &&
              (!say2 || strstr(d.error, say2)),
          "%s: status %d (want ERROR %d with '%s' '%s'), error '%s'", what, st == FG_OK ? 0 : d.status, code,
          say1 ? say1 : "", say2 ? say2 : "", d.error);
    if (st != FG_OK) fprintf(stderr, "  %s -> ERROR %d: %s\n", what, d.status, d.error);
}

static void copy1(bench *b, fg_role role, fg_shm_handle src, fg_shm_handle dst, const char *what) {
    fg_msg m;
    fg_msg_init(&m, FG_MSG_COPY);
    fg_msg_copy_add(&m, src, dst);
    run_ok(b->sup, role, &m, what);
}

static void device_init(bench *b) {
    fg_msg m = op_msg(FG_MSG_COMPUTE, FG_OP_DEVICE_INIT, NULL, 0, NULL, 0, &b->init, sizeof b->init);
    run_ok(b->sup, FG_ROLE_GPU, &m, "DEVICE_INIT");
}

static void upload_weights(bench *b) {
    fg_msg m;
    fg_msg_init(&m, FG_MSG_COPY);
    for (int i = 0; i < b->nsp; i++) {
        if (!b->sp[i].present) continue;
        if (m.u.copy.n == FG_MSG_MAX_HANDLES) {
            run_ok(b->sup, FG_ROLE_GPU, &m, "weight COPY");
            fg_msg_init(&m, FG_MSG_COPY);
        }
        fg_msg_copy_add(&m, b->w_shm[i], b->w_dev[i]);
    }
    if (m.u.copy.n) run_ok(b->sup, FG_ROLE_GPU, &m, "weight COPY");
}

/* ---- one generation, worker and reference side by side -------------------- */

typedef struct {
    fg_opt_ws ws;
    float *h;              /* (B*S, H) */
    fg_half *kc[L], *vc[L];/* (Tmax, B, KV*d) */
    float *logits;         /* (B, V) */
    fg_global_w g;
    fg_layer_w lw[L];
} reference;

static void ref_init(reference *r, bench *b) {
    size_t rows = (size_t)b->B * b->S, cache = (size_t)b->Tmax * b->B * b->KD;
    fg_opt_ws_init(&r->ws, &b->v->c, (int)rows);
    r->h = fg_alloc_tensor(sizeof(float) * rows * b->H);
    r->logits = fg_alloc_tensor(sizeof(float) * (size_t)b->B * b->V);
    for (int l = 0; l < L; l++) {
        r->kc[l] = fg_xcalloc(cache, sizeof(fg_half));
        r->vc[l] = fg_xcalloc(cache, sizeof(fg_half));
        for (int w = 0; w < FG_LW_COUNT; w++) r->lw[l].w[w] = wptr(b, fg_spec_layer(l, w));
    }
    for (int g = 0; g < FG_GW_COUNT; g++) r->g.w[g] = wptr(b, fg_spec_global(g));
}

static void ref_free(reference *r) {
    fg_opt_ws_free(&r->ws);
    free(r->h);
    free(r->logits);
    for (int l = 0; l < L; l++) {
        free(r->kc[l]);
        free(r->vc[l]);
    }
}

/* Worker's fp16 (B*S, H) against the reference's fp32: bit for bit. */
static int same_h(const fg_half *got, const float *want, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++) {
        float g = fg_half_to_float(got[i]);
        if (fg_half_to_float(fg_float_to_half(want[i])) != want[i]) {
            CHECK(0, "%s: reference value %zu (%.9g) is not fp16-exact", what, i, (double)want[i]);
            return 0;
        }
        if (memcmp(&g, &want[i], sizeof g)) {
            CHECK(0, "%s: element %zu is %.9g, reference %.9g", what, i, (double)g, (double)want[i]);
            return 0;
        }
    }
    return 1;
}

static int same_bytes(const void *got, const void *want, size_t n, const char *what) {
    if (!memcmp(got, want, n)) return 1;
    const uint8_t *g = got, *w = want;
    size_t i = 0;
    while (g[i] == w[i]) i++;
    CHECK(0, "%s: first differing byte %zu of %zu", what, i, n);
    return 0;
}

/* The handles of one unit, by slot kind: the commands are built from the op
 * table, so a slot list lives only there. cpu: the cpu worker's op, which
 * takes the shm copies of the mask and the cache. */
typedef struct {
    bench *b;
    int layer, cpu;
    fg_shm_handle h, ids, sids, q, k, v, ctx, kc, vc, rng;
} unit_slots;

static fg_shm_handle resolve_slot(void *ctx, const fg_op_info *oi, const fg_op_slot *s) {
    unit_slots *x = ctx;
    bench *b = x->b;
    int out = s >= oi->out && s < oi->out + oi->n_out;
    switch (s->kind) {
    case FG_SLOT_ACT: {
        const fg_shm_handle a[] = {[FG_ACT_H] = x->h, [FG_ACT_Q] = x->q, [FG_ACT_K] = x->k, [FG_ACT_V] = x->v,
                                   [FG_ACT_CTX] = x->ctx};
        return a[s->which];
    }
    case FG_SLOT_IDS: return out ? x->sids : x->ids;
    case FG_SLOT_MASK: return x->cpu ? b->a_shm[A_MASK] : b->a_dev[A_MASK];
    case FG_SLOT_CACHE: return s->which ? x->vc : x->kc;
    case FG_SLOT_LOGITS: return b->a_dev[A_LOGITS];
    case FG_SLOT_RNG: return x->rng;
    case FG_SLOT_ECOUNT: case FG_SLOT_XW: case FG_SLOT_EOUT: return (fg_shm_handle){0};   /* no expert ops here */
    case FG_SLOT_LW: return b->w_dev[fg_spec_layer(x->layer, s->which)];
    case FG_SLOT_GW: return b->w_dev[fg_spec_global(s->which)];
    }
    return (fg_shm_handle){0};
}

static fg_msg unit_msg(uint32_t op, unit_slots *x, const void *params, uint32_t len) {
    fg_msg m;
    fg_op_build(&m, op, (uint32_t)x->layer, 0, params, len, resolve_slot, x);
    return m;
}

/* One step of generate(), both sides: what its pieces share. */
typedef struct {
    bench *b;
    reference *r;
    int split, step, Sn;
    fg_step st;
    fg_op_step p;
    unit_slots x;
    fg_shm_handle h_shm;
} gen_step;

/* "<variant> <path> step <i>" + more, into what. */
static void label(const gen_step *g, char *what, size_t n, const char *more) {
    snprintf(what, n, "%s %s step %d%s", g->b->v->label, g->split ? "split" : "fused", g->step, more);
}

/* Layer l's attention and MLP on the workers and in this process, the
 * hidden state after each and both caches compared. */
static void layer_step(gen_step *g, int l) {
    bench *b = g->b;
    reference *r = g->r;
    const fg_model_config *c = &b->v->c;
    uint64_t rows = (uint64_t)b->B * g->Sn, qb = rows * b->QD * 2, kb = rows * b->KD * 2;
    size_t cache = (size_t)b->Tmax * b->B * b->KD, n = (size_t)rows * b->H;
    fg_shm_handle kc_shm = b->a_shm[A_KC0 + 2 * l], vc_shm = b->a_shm[A_KC0 + 2 * l + 1];
    unit_slots *x = &g->x;
    char what[160], more[64];
    x->layer = l, x->cpu = 0, x->kc = b->a_dev[A_KC0 + 2 * l], x->vc = b->a_dev[A_KC0 + 2 * l + 1];
    fg_fwd_attn_block(r->h, r->kc[l], r->vc[l], b->Tmax, &g->st, c, &r->lw[l], &r->ws);
    fg_msg m;
    if (!g->split) {
        m = unit_msg(FG_OP_ATTN, x, &g->p, sizeof g->p);
        run_ok(b->sup, FG_ROLE_GPU, &m, "ATTN");
    } else {
        fg_shm_handle q_shm = sized(b->a_shm[A_Q], qb), k_shm = sized(b->a_shm[A_K], kb),
                      v_shm = sized(b->a_shm[A_V], kb), ctx_shm = sized(b->a_shm[A_CTX], qb);
        x->q = sized(b->a_dev[A_Q], qb), x->k = sized(b->a_dev[A_K], kb), x->v = sized(b->a_dev[A_V], kb);
        x->ctx = sized(b->a_dev[A_CTX], qb);
        m = unit_msg(FG_OP_ATTN_QKV, x, &g->p, sizeof g->p);
        run_ok(b->sup, FG_ROLE_GPU, &m, "ATTN_QKV");
        fg_msg_init(&m, FG_MSG_COPY);
        fg_msg_copy_add(&m, x->q, q_shm);
        fg_msg_copy_add(&m, x->k, k_shm);
        fg_msg_copy_add(&m, x->v, v_shm);
        run_ok(b->sup, FG_ROLE_GPU, &m, "q, k, v to shm");
        unit_slots xc = {.b = b, .layer = l, .cpu = 1, .q = q_shm, .k = k_shm, .v = v_shm, .ctx = ctx_shm,
                         .kc = kc_shm, .vc = vc_shm};
        m = unit_msg(FG_OP_ATTN_CORE, &xc, &g->p, sizeof g->p);
        run_ok(b->sup, FG_ROLE_CPU, &m, "ATTN_CORE");
        copy1(b, FG_ROLE_GPU, ctx_shm, x->ctx, "ctx to device");
        m = unit_msg(FG_OP_ATTN_OUT, x, &g->p, sizeof g->p);
        run_ok(b->sup, FG_ROLE_GPU, &m, "ATTN_OUT");
    }
    copy1(b, FG_ROLE_GPU, x->h, g->h_shm, "h to shm");
    snprintf(more, sizeof more, " layer %d: attention", l);
    label(g, what, sizeof what, more);
    same_h(P(b, g->h_shm), r->h, n, what);

    fg_fwd_mlp_block(r->h, &g->st, c, &r->lw[l], &r->ws);
    m = unit_msg(FG_OP_MLP, x, &g->p, sizeof g->p);
    run_ok(b->sup, FG_ROLE_GPU, &m, "MLP");
    copy1(b, FG_ROLE_GPU, x->h, g->h_shm, "h to shm");
    snprintf(more, sizeof more, " layer %d: MLP", l);
    label(g, what, sizeof what, more);
    same_h(P(b, g->h_shm), r->h, n, what);

    /* the cache: where it lives (device for fused, shm for split) */
    if (!g->split) {
        copy1(b, FG_ROLE_GPU, x->kc, kc_shm, "kc to shm");
        copy1(b, FG_ROLE_GPU, x->vc, vc_shm, "vc to shm");
    }
    snprintf(more, sizeof more, " layer %d: k cache", l);
    label(g, what, sizeof what, more);
    same_bytes(P(b, kc_shm), r->kc[l], cache * 2, what);
    what[strlen(what) - 7] = 'v';
    same_bytes(P(b, vc_shm), r->vc[l], cache * 2, what);
}

/* SAMPLE where the logits are, with temperature and top-p: the same ids
 * and generator states as fg_sample here, which is what the reference
 * engine calls. */
static void sample_step(gen_step *g) {
    bench *b = g->b;
    int B = b->B, V = b->V;
    char what[160];
    fg_shm_handle rng_dev = sized(b->a_dev[A_Q], 16ull * B), rng_shm = sized(b->a_shm[A_Q], 16ull * B);
    fg_shm_handle sids_dev = sized(b->a_dev[A_IDS], 4ull * B), sids_shm = sized(b->a_shm[A_CTX], 4ull * B);
    fg_sample_row *rs = P(b, rng_shm), want_rng[64];
    int32_t want_ids[64];
    float *scratch = fg_xmalloc(sizeof(float) * 2 * (size_t)V);
    for (int i = 0; i < B && i < 64; i++) {
        /* each row its own settings: greedy, a temperature, a temperature with top-p */
        fg_sampler_cfg cfg = {.temperature = i % 3 ? 0.8f : 0.0f, .top_p = i % 3 == 2 ? 0.9f : 1.0f};
        fg_rng r;
        fg_rng_init(&r, 1234, (uint64_t)(g->step * B + i));
        rs[i] = (fg_sample_row){r.state, cfg.temperature, cfg.top_p};
        want_ids[i] = fg_sample(g->r->logits + (size_t)i * V, V, &cfg, &r, scratch);
        want_rng[i] = (fg_sample_row){r.state, cfg.temperature, cfg.top_p};
    }
    free(scratch);
    copy1(b, FG_ROLE_GPU, rng_shm, rng_dev, "rng to device");
    fg_op_sample sp = {.step = g->p, .temperature = 0.8f, .top_p = 0.9f};
    sp.step.S = 1;
    g->x.rng = rng_dev, g->x.sids = sids_dev;
    fg_msg m = unit_msg(FG_OP_SAMPLE, &g->x, &sp, sizeof sp);
    run_ok(b->sup, FG_ROLE_GPU, &m, "SAMPLE");
    copy1(b, FG_ROLE_GPU, sids_dev, sids_shm, "sampled ids to shm");
    copy1(b, FG_ROLE_GPU, rng_dev, rng_shm, "rng to shm");
    label(g, what, sizeof what, ": SAMPLE ids");
    same_bytes(P(b, sids_shm), want_ids, 4ull * B, what);
    label(g, what, sizeof what, ": SAMPLE generator states");
    same_bytes(P(b, rng_shm), want_rng, 16ull * B, what);
}

/* Run the variant's generation on the workers with one attention path
 * (split: cpu_cache_compute) and compare with the reference at every layer. */
static void generate(bench *b, int split) {
    const fg_model_config *c = &b->v->c;
    int B = b->B, S = b->S, Tmax = b->Tmax, H = b->H, V = b->V;
    size_t cache = (size_t)Tmax * B * b->KD;
    char what[160];
    reference r;
    ref_init(&r, b);

    /* caches start zeroed on every side, so whole caches compare */
    for (int l = 0; l < 2 * L; l++) {
        memset(P(b, b->a_shm[A_KC0 + l]), 0, cache * 2);
        copy1(b, FG_ROLE_GPU, b->a_shm[A_ZERO], b->a_dev[A_KC0 + l], "zero the device cache");
    }
    /* left-padded prompts: sequence i has S - i % S real tokens; mask (B, Tmax) */
    uint8_t *mask = P(b, b->a_shm[A_MASK]);
    int32_t *ids = P(b, b->a_shm[A_IDS]);
    for (int i = 0; i < B; i++) {
        int pad = i % S;
        for (int t = 0; t < Tmax; t++) mask[i * Tmax + t] = t >= pad;
        for (int t = 0; t < S; t++) ids[i * S + t] = t < pad ? 1 : 4 + (int32_t)(rng_next() % (uint64_t)(V - 4));
    }
    copy1(b, FG_ROLE_GPU, b->a_shm[A_MASK], b->a_dev[A_MASK], "mask to device");

    for (int step = 0; step < STEPS; step++) {
        int Sn = step == 0 ? S : 1, past = step == 0 ? 0 : S + step - 1;
        uint64_t rows = (uint64_t)B * Sn, hb = rows * H * 2;
        gen_step g = {.b = b, .r = &r, .split = split, .step = step, .Sn = Sn,
                      .st = {.B = B, .S = Sn, .past = past, .mask = mask, .mask_stride = Tmax},
                      .p = {.model = op_model(c), .B = (uint32_t)B, .S = (uint32_t)Sn, .past = (uint32_t)past,
                            .Tmax = (uint32_t)Tmax, .mask_stride = (uint32_t)Tmax},
                      .x = {.b = b, .h = sized(b->a_dev[A_H], hb), .ids = sized(b->a_dev[A_IDS], rows * 4)},
                      .h_shm = sized(b->a_shm[A_H], hb)};

        /* embedding */
        copy1(b, FG_ROLE_GPU, sized(b->a_shm[A_IDS], rows * 4), g.x.ids, "ids to device");
        fg_fwd_embed(r.h, ids, &g.st, c, &r.g, &r.ws);
        fg_msg m = unit_msg(FG_OP_EMBED, &g.x, &g.p, sizeof g.p);
        run_ok(b->sup, FG_ROLE_GPU, &m, "EMBED");
        copy1(b, FG_ROLE_GPU, g.x.h, g.h_shm, "h to shm");
        label(&g, what, sizeof what, ": embedding");
        same_h(P(b, g.h_shm), r.h, (size_t)rows * H, what);

        for (int l = 0; l < L; l++) layer_step(&g, l);

        fg_fwd_lm_head(r.logits, r.h, &g.st, c, &r.g, &r.ws);
        g.x.layer = 0;
        m = unit_msg(FG_OP_LM_HEAD, &g.x, &g.p, sizeof g.p);
        run_ok(b->sup, FG_ROLE_GPU, &m, "LM_HEAD");
        copy1(b, FG_ROLE_GPU, b->a_dev[A_LOGITS], b->a_shm[A_LOGITS], "logits to shm");
        label(&g, what, sizeof what, ": logits");
        same_bytes(P(b, b->a_shm[A_LOGITS]), r.logits, sizeof(float) * (size_t)B * V, what);
        sample_step(&g);

        /* greedy next tokens from the reference (the same bits if the above held) */
        for (int i = 0; i < B; i++) {
            const float *lg = r.logits + (size_t)i * V;
            int best = 0;
            for (int t = 1; t < V; t++) best = lg[t] > lg[best] ? t : best;
            ids[i] = best;
        }
    }
    fprintf(stderr, "%s, %s attention: %d steps, B=%d S=%d, hidden states, caches, logits and sampled ids bitwise equal%s\n",
            b->v->label, split ? "split (ATTN_QKV + cpu ATTN_CORE + ATTN_OUT)" : "fused (ATTN)", STEPS, B, S,
            failures ? " (NOT: see above)" : "");
    ref_free(&r);
}

/* ---- the tests ------------------------------------------------------------- */

static fg_model_config small_config(int V, int H, int A, int F, int D, int pre_ln) {
    fg_model_config c = {.family = FG_FAMILY_OPT, .vocab_size = V, .hidden = H, .n_heads = A, .n_kv_heads = A,
                       .head_dim = H / A, .n_layers = L, .ffn_dim = F, .max_pos = 64, .word_embed_proj_dim = D,
                       .pre_ln = pre_ln, .norm_eps = 1e-5f, .qkv_bias = 1, .o_bias = 1, .mlp_bias = 1, .tied = 1,
                       .pad_id = 1, .bos_id = 2, .n_eos = 1, .eos_ids = {2}};
    snprintf(c.name, sizeof c.name, "test-%d-%d", H, D);
    MUST(fg_config_validate(&c, c.name));
    return c;
}

/* A small Llama-family model: A query heads over KV kv heads of d values,
 * optional q/k/v biases (Qwen2), tied head, sliding window, rope scaling. */
static fg_model_config llama_config(int V, int H, int A, int KV, int d, int F, int qkv_bias, int tied, int window,
                                  int scaling) {
    fg_model_config c = {.family = FG_FAMILY_LLAMA, .vocab_size = V, .hidden = H, .n_heads = A, .n_kv_heads = KV,
                       .head_dim = d, .n_layers = L, .ffn_dim = F, .max_pos = 64, .word_embed_proj_dim = H,
                       .pre_ln = 1, .ffn_kind = FG_FFN_SWIGLU, .norm_kind = FG_NORM_RMS, .norm_eps = 1e-5f,
                       .pos_kind = FG_POS_ROPE, .rope_theta = 500000.0f, .rope_scaling = scaling, .rope_factor = 8,
                       .rope_low = 1, .rope_high = 4, .rope_orig_max = 16, .sliding_window = window,
                       .qkv_bias = qkv_bias, .tied = tied, .pad_id = 0, .bos_id = 1, .n_eos = 1, .eos_ids = {2}};
    snprintf(c.name, sizeof c.name, "llama-test-%d-%d-%d", A, KV, d);
    MUST(fg_config_validate(&c, c.name));
    return c;
}

/* c with Qwen3's per-head q/k RMSNorm. */
static fg_model_config with_qk_norm(fg_model_config c) {
    c.qk_norm = 1;
    snprintf(c.name, sizeof c.name, "qwen3-test-%d-%d-%d", c.n_heads, c.n_kv_heads, c.head_dim);
    MUST(fg_config_validate(&c, c.name));
    return c;
}

/* c with every layer a mixture of E experts of Fe, the top k by `router`
 * (renormalised or not: Qwen3-MoE's norm_topk_prob). */
static fg_model_config with_experts(fg_model_config c, int E, int k, int Fe, int router, int norm) {
    c.n_experts = E, c.experts_per_token = k, c.moe_ffn_dim = Fe, c.router = router, c.moe_norm_topk = norm;
    for (int l = 0; l < c.n_layers; l++) fg_config_set_sparse(&c, l, 1);
    snprintf(c.name, sizeof c.name, "moe-test-%d-%d-%d", E, k, Fe);
    MUST(fg_config_validate(&c, c.name));
    return c;
}

static fg_super *start(const char *gpu, const char *cpu) {
    fg_super_opts o = {0};
    o.roles = 1u << FG_ROLE_GPU | 1u << FG_ROLE_CPU;
    o.worker_path[FG_ROLE_GPU] = gpu;
    o.worker_path[FG_ROLE_CPU] = cpu;
    fg_super *sup;
    MUST(fg_super_new(&o, &sup));
    return sup;
}

static void check_no_deaths(fg_super *sup) {
    fg_super_stats s;
    fg_super_get_stats(sup, &s);
    CHECK(s.deaths[FG_ROLE_GPU] == 0 && s.deaths[FG_ROLE_CPU] == 0, "worker deaths: gpu %u cpu %u",
          s.deaths[FG_ROLE_GPU], s.deaths[FG_ROLE_CPU]);
}

static int test_bitwise(fg_super *sup) {
    variant vs[] = {
        {"pre-LN h64", small_config(300, 64, 4, 128, 64, 1), 3, 7},
        {"post-LN + project_in/out h64 d32", small_config(300, 64, 4, 128, 32, 0), 3, 7},
        /* odd sizes; 44 prompt rows take the Linear layers' sgemm path */
        {"odd h90 heads5", small_config(301, 90, 5, 150, 90, 1), 4, 11},
        /* the Llama family: q 256 wide over a 64-wide hidden state, 8 query heads per kv head, llama3 rope */
        {"llama GQA 16:2 d16 llama3", llama_config(300, 64, 16, 2, 16, 96, 0, 0, 0, FG_ROPE_LLAMA3), 3, 7},
        /* one kv head, q/k/v biases, tied head; 44 prompt rows: sgemm */
        {"qwen2-style MQA biases tied", llama_config(301, 64, 4, 1, 16, 80, 1, 1, 0, FG_ROPE_NONE), 4, 11},
        /* a window of 4 cache slots, shorter than the prompt */
        {"mistral-style window 4", llama_config(300, 64, 4, 2, 16, 96, 0, 0, 4, FG_ROPE_LINEAR), 3, 7},
        /* per-head q/k norms, head_dim 16 where hidden / heads is 8; 44 prompt rows: sgemm */
        {"qwen3-style q/k norms GQA 8:2 d16", with_qk_norm(llama_config(300, 64, 8, 2, 16, 96, 0, 0, 0, FG_ROPE_NONE)),
         4, 11},
        /* experts: Mixtral-style 8 of top 2; Qwen3-MoE-style 16 of top 4, not renormalised, with q/k norms
         * (44 prompt rows: an expert's rows take either GEMM path) */
        {"mixtral-style 8 experts top 2", with_experts(llama_config(300, 64, 4, 2, 16, 96, 0, 0, 0, FG_ROPE_NONE), 8, 2,
                                                      48, FG_ROUTER_MIXTRAL, 1), 3, 7},
        {"qwen3-moe-style 16 experts top 4", with_experts(with_qk_norm(llama_config(300, 64, 8, 2, 16, 96, 0, 0, 0,
                                                          FG_ROPE_NONE)), 16, 4, 32, FG_ROUTER_QWEN3_MOE, 0), 4, 11},
    };
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) {
        bench b;
        bench_setup(&b, sup, &vs[i], (int)i);
        device_init(&b);   /* a new model each time: a fresh arena */
        upload_weights(&b);
        generate(&b, 0);
        generate(&b, 1);
        bench_free(&b);
    }
    check_no_deaths(sup);
    return failures;
}

static int test_errors(fg_super *sup) {
    variant v = {"errors", small_config(300, 64, 4, 128, 64, 1), 3, 7};
    bench b;
    bench_setup(&b, sup, &v, 9);
    fg_op_step p = {.model = op_model(&v.c), .B = 3, .S = 7, .past = 0, .Tmax = (uint32_t)b.Tmax,
                    .mask_stride = (uint32_t)b.Tmax};
    uint64_t hb = 3ull * 7 * 64 * 2;
    fg_shm_handle h_dev = sized(b.a_dev[A_H], hb);
    const fg_shm_handle *W = &b.w_dev[fg_spec_layer(0, 0)];
    fg_shm_handle mlp_in[10] = {h_dev};   /* fc1 .. ln2, then up and the router (absent in OPT) */
    for (int w = FG_LW_FC1_W; w <= FG_LW_UP_B; w++) mlp_in[1 + w - FG_LW_FC1_W] = W[w];
    mlp_in[9] = W[FG_LW_ROUTER_W];
    fg_msg m;

    m = op_msg(FG_MSG_COMPUTE, FG_OP_MLP, mlp_in, 10, &h_dev, 1, &p, sizeof p);
    run_err(sup, FG_ROLE_GPU, &m, FG_MSG_EBADCMD, "MLP before DEVICE_INIT", "before DEVICE_INIT", NULL);

    /* the host backend's workspace: fg_opt's scratch and fp32 h for max_rows
     * rows, and SAMPLE's (prob, id) pairs for the vocabulary. One byte over
     * the budget is refused, an exact fit accepted. */
    uint64_t ws = fg_opt_ws_bytes(&v.c, 21) + 4ull * 21 * 64 + 8ull * (uint64_t)v.c.vocab_size;
    fg_op_init big = b.init;
    big.budget_bytes = b.init.arena_bytes + ws - 1;
    m = op_msg(FG_MSG_COMPUTE, FG_OP_DEVICE_INIT, NULL, 0, NULL, 0, &big, sizeof big);
    run_err(sup, FG_ROLE_GPU, &m, FG_MSG_EBADCMD, "DEVICE_INIT one byte over budget", "budget", "workspace");

    b.init.budget_bytes = b.init.arena_bytes + ws;
    device_init(&b);
    upload_weights(&b);
    /* the same DEVICE_INIT again: a no-op; then one over budget: refused;
     * the weights must still be in the arena after both */
    device_init(&b);
    big.arena_bytes = 1ull << 40;
    big.budget_bytes = 1ull << 30;
    m = op_msg(FG_MSG_COMPUTE, FG_OP_DEVICE_INIT, NULL, 0, NULL, 0, &big, sizeof big);
    run_err(sup, FG_ROLE_GPU, &m, FG_MSG_EBADCMD, "DEVICE_INIT of a 1 TiB arena in a 1 GiB budget", "1073741824",
            "1099511627776");
    int e = fg_spec_global(FG_GW_EMBED_TOKENS);
    fg_shm_handle back = b.a_shm[A_LOGITS];   /* the first rows of embed_tokens fit */
    copy1(&b, FG_ROLE_GPU, sized(b.w_dev[e], back.nbytes), back, "embed_tokens back from the device");
    CHECK(!memcmp(P(&b, back), P(&b, b.w_shm[e]), back.nbytes),
          "the arena lost its contents across a repeated or refused DEVICE_INIT");

    /* sizes and counts */
    fg_shm_handle bad_h = sized(b.a_dev[A_H], hb - 2);
    mlp_in[0] = bad_h;
    m = op_msg(FG_MSG_COMPUTE, FG_OP_MLP, mlp_in, 10, &h_dev, 1, &p, sizeof p);
    run_err(sup, FG_ROLE_GPU, &m, FG_MSG_EBADCMD, "MLP with a short h", "MLP: in[0] h", "B*S*H");
    mlp_in[0] = h_dev;
    mlp_in[1].nbytes += 2;
    m = op_msg(FG_MSG_COMPUTE, FG_OP_MLP, mlp_in, 10, &h_dev, 1, &p, sizeof p);
    run_err(sup, FG_ROLE_GPU, &m, FG_MSG_EBADCMD, "MLP with a long fc1_w", "MLP: in[1] fc1_w", "[128, 64]");
    mlp_in[1].nbytes -= 2;
    m = op_msg(FG_MSG_COMPUTE, FG_OP_MLP, mlp_in, 6, &h_dev, 1, &p, sizeof p);
    run_err(sup, FG_ROLE_GPU, &m, FG_MSG_EBADCMD, "MLP with 6 inputs", "MLP takes 10 inputs", NULL);
    m = op_msg(FG_MSG_COMPUTE, FG_OP_MLP, mlp_in, 10, &h_dev, 1, &p, sizeof p - 4);
    run_err(sup, FG_ROLE_GPU, &m, FG_MSG_EBADCMD, "MLP with short params", "params", NULL);
    fg_op_step p2 = p;
    p2.model.v[5] = 256;   /* ffn_dim */
    m = op_msg(FG_MSG_COMPUTE, FG_OP_MLP, mlp_in, 10, &h_dev, 1, &p2, sizeof p2);
    run_err(sup, FG_ROLE_GPU, &m, FG_MSG_EBADCMD, "MLP of another model", "DEVICE_INIT", NULL);
    p2 = p;
    p2.S = 8;
    m = op_msg(FG_MSG_COMPUTE, FG_OP_MLP, mlp_in, 10, &h_dev, 1, &p2, sizeof p2);
    run_err(sup, FG_ROLE_GPU, &m, FG_MSG_EBADCMD, "MLP of more rows than max_rows", "max_rows", NULL);
    fg_shm_handle outside = h_dev;
    outside.offset = b.init.arena_bytes - hb / 2;
    m = op_msg(FG_MSG_COMPUTE, FG_OP_MLP, mlp_in, 10, &outside, 1, &p, sizeof p);
    run_err(sup, FG_ROLE_GPU, &m, FG_MSG_EBADCMD, "MLP writing past the arena", "out[0] h", "arena");

    /* the model has no project_out: that slot must be empty */
    fg_shm_handle lm_in[] = {h_dev, b.w_dev[FG_GW_FINAL_LN_W], b.w_dev[FG_GW_FINAL_LN_B], b.w_dev[FG_GW_FINAL_LN_B],
                             b.w_dev[FG_GW_EMBED_TOKENS], b.w_dev[FG_GW_LM_HEAD]};
    m = op_msg(FG_MSG_COMPUTE, FG_OP_LM_HEAD, lm_in, 6, &b.a_dev[A_LOGITS], 1, &p, sizeof p);
    run_err(sup, FG_ROLE_GPU, &m, FG_MSG_EBADCMD, "LM_HEAD with a project_out the model lacks", "project_out",
            "absent");

    /* data only the op can check, and the step's own numbers */
    int32_t *ids = P(&b, b.a_shm[A_IDS]);
    for (int i = 0; i < 21; i++) ids[i] = i == 20 ? 300 : 5;
    copy1(&b, FG_ROLE_GPU, b.a_shm[A_IDS], b.a_dev[A_IDS], "ids to device");
    fg_shm_handle em_in[] = {b.a_dev[A_IDS], b.a_dev[A_MASK], b.w_dev[FG_GW_EMBED_TOKENS], b.w_dev[FG_GW_EMBED_POS],
                             b.w_dev[FG_GW_PROJ_IN]};
    m = op_msg(FG_MSG_COMPUTE, FG_OP_EMBED, em_in, 5, &h_dev, 1, &p, sizeof p);
    run_err(sup, FG_ROLE_GPU, &m, FG_MSG_EBADCMD, "EMBED of id 300 with V=300", "ids[20] = 300", "vocabulary");
    p2 = p;
    p2.mask_stride = 6;
    em_in[1] = sized(b.a_dev[A_MASK], 18);
    m = op_msg(FG_MSG_COMPUTE, FG_OP_EMBED, em_in, 5, &h_dev, 1, &p2, sizeof p2);
    run_err(sup, FG_ROLE_GPU, &m, FG_MSG_EBADCMD, "EMBED with mask_stride < past+S", "mask_stride", NULL);

    /* the cpu worker's op */
    fg_shm_handle q = sized(b.a_shm[A_Q], hb), k = sized(b.a_shm[A_K], hb), vv = sized(b.a_shm[A_V], hb);
    fg_shm_handle core_in[] = {q, k, vv, sized(b.a_shm[A_KC0], b.a_shm[A_KC0].nbytes - 128), b.a_shm[A_KC0 + 1],
                               b.a_shm[A_MASK]};
    fg_shm_handle ctx = sized(b.a_shm[A_CTX], hb);
    m = op_msg(FG_MSG_CPU_ATTN, FG_OP_ATTN_CORE, core_in, 6, &ctx, 1, &p, sizeof p);
    run_err(sup, FG_ROLE_CPU, &m, FG_MSG_EBADCMD, "ATTN_CORE with a short kc", "ATTN_CORE: in[3] kc", "Tmax*B*KV*d");
    core_in[3] = b.a_shm[A_KC0];
    p2 = p;
    p2.model.v[1] = 65;    /* hidden */
    m = op_msg(FG_MSG_CPU_ATTN, FG_OP_ATTN_CORE, core_in, 6, &ctx, 1, &p2, sizeof p2);
    run_err(sup, FG_ROLE_CPU, &m, FG_MSG_EBADCMD, "ATTN_CORE with hidden 65, 4 heads", "multiple", NULL);
    p2 = p;
    p2.Tmax = 6;
    m = op_msg(FG_MSG_CPU_ATTN, FG_OP_ATTN_CORE, core_in, 6, &ctx, 1, &p2, sizeof p2);
    run_err(sup, FG_ROLE_CPU, &m, FG_MSG_EBADCMD, "ATTN_CORE with Tmax < past+S", "Tmax", NULL);
    m = op_msg(FG_MSG_CPU_ATTN, FG_OP_MLP, mlp_in, 10, &h_dev, 1, &p, sizeof p);
    run_err(sup, FG_ROLE_CPU, &m, FG_MSG_EUNSUPPORTED, "MLP on the cpu worker", "unknown op", NULL);

    /* both workers still serve: a good ATTN_CORE and a good MLP */
    m = op_msg(FG_MSG_CPU_ATTN, FG_OP_ATTN_CORE, core_in, 6, &ctx, 1, &p, sizeof p);
    run_ok(sup, FG_ROLE_CPU, &m, "ATTN_CORE after the errors");
    m = op_msg(FG_MSG_COMPUTE, FG_OP_MLP, mlp_in, 10, &h_dev, 1, &p, sizeof p);
    run_ok(sup, FG_ROLE_GPU, &m, "MLP after the errors");
    check_no_deaths(sup);
    bench_free(&b);
    return failures;
}

static int usage(void) {
    fprintf(stderr, "usage: fg-engine-ops-test bitwise|errors --workers GPU CPU\n");
    return 2;
}

int main(int argc, char **argv) {
    fg_log_init("engine-ops-test");
    if (argc != 5 || strcmp(argv[2], "--workers")) return usage();
    rng_state = 0x5eed;
    fg_super *sup = start(argv[3], argv[4]);
    int rc;
    if (!strcmp(argv[1], "bitwise")) rc = test_bitwise(sup);
    else if (!strcmp(argv[1], "errors")) rc = test_errors(sup);
    else rc = -1;
    fg_super_destroy(&sup);
    if (rc < 0) return usage();
    fprintf(stderr, "fg-engine-ops-test %s: %s\n", argv[1], rc ? "FAIL" : "ok");
    return rc ? 1 : 0;
}

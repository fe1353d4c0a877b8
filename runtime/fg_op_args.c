/* fg_op_args.c - the engine ops' handle slots and their checks (see
 * fg_op_args.h). The slot tables below are fg_engine_ops.h's lists, in the
 * same order; a weight slot's size comes from fg_specs_new(). */
#include "fg_op_args.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Bounds that keep every size product inside uint64 and every row count
 * inside int, far above any real model or batch. */
#define DIM_MAX (1u << 20)
#define ROWS_MAX (1u << 24)

typedef enum {
    K_H,      /* (B*S, H) fp16: h, q, k, v, ctx */
    K_IDS,    /* (B*S) int32 */
    K_MASK,   /* (B, mask_stride) uint8 */
    K_CACHE,  /* (Tmax, B, H) fp16 */
    K_LOGITS, /* (B, V) fp32 */
    K_RNG,    /* (B) u64 generator states */
    K_LW,     /* layer weight FG_LW_<which> */
    K_GW,     /* model weight FG_GW_<which>; 0 bytes where the config has none */
} slot_kind;

typedef struct {
    const char *name;
    slot_kind kind;
    int which;
} slot;

typedef struct {
    uint32_t op;
    const char *name;
    int n_in, n_out;
    slot in[FG_MSG_MAX_HANDLES], out[3];
} op_spec;

#define H_(n) {n, K_H, 0}
#define LW(n, w) {n, K_LW, FG_LW_##w}
#define GW(n, w) {n, K_GW, FG_GW_##w}

static const op_spec specs[] = {
    {FG_OP_EMBED, "EMBED", 5, 1,
     {{"ids", K_IDS, 0}, {"mask", K_MASK, 0}, GW("embed_tokens", EMBED_TOKENS), GW("embed_pos", EMBED_POS),
      GW("project_in", PROJ_IN)},
     {H_("h")}},
    {FG_OP_ATTN, "ATTN", 14, 1,
     {H_("h"), {"mask", K_MASK, 0}, {"kc", K_CACHE, 0}, {"vc", K_CACHE, 0}, LW("q_w", Q_W), LW("q_b", Q_B),
      LW("k_w", K_W), LW("k_b", K_B), LW("v_w", V_W), LW("v_b", V_B), LW("o_w", O_W), LW("o_b", O_B),
      LW("ln1_w", LN1_W), LW("ln1_b", LN1_B)},
     {H_("h")}},
    {FG_OP_ATTN_QKV, "ATTN_QKV", 9, 3,
     {H_("h"), LW("q_w", Q_W), LW("q_b", Q_B), LW("k_w", K_W), LW("k_b", K_B), LW("v_w", V_W), LW("v_b", V_B),
      LW("ln1_w", LN1_W), LW("ln1_b", LN1_B)},
     {H_("q"), H_("k"), H_("v")}},
    {FG_OP_ATTN_OUT, "ATTN_OUT", 6, 1,
     {H_("h"), H_("ctx"), LW("o_w", O_W), LW("o_b", O_B), LW("ln1_w", LN1_W), LW("ln1_b", LN1_B)},
     {H_("h")}},
    {FG_OP_MLP, "MLP", 7, 1,
     {H_("h"), LW("fc1_w", FC1_W), LW("fc1_b", FC1_B), LW("fc2_w", FC2_W), LW("fc2_b", FC2_B),
      LW("ln2_w", LN2_W), LW("ln2_b", LN2_B)},
     {H_("h")}},
    {FG_OP_LM_HEAD, "LM_HEAD", 5, 1,
     {H_("h"), GW("final_ln_w", FINAL_LN_W), GW("final_ln_b", FINAL_LN_B), GW("project_out", PROJ_OUT),
      GW("embed_tokens", EMBED_TOKENS)},
     {{"logits", K_LOGITS, 0}}},
    {FG_OP_LAYER, "LAYER", 20, 1,
     {H_("h"), {"mask", K_MASK, 0}, {"kc", K_CACHE, 0}, {"vc", K_CACHE, 0}, LW("q_w", Q_W), LW("q_b", Q_B),
      LW("k_w", K_W), LW("k_b", K_B), LW("v_w", V_W), LW("v_b", V_B), LW("o_w", O_W), LW("o_b", O_B),
      LW("ln1_w", LN1_W), LW("ln1_b", LN1_B), LW("fc1_w", FC1_W), LW("fc1_b", FC1_B), LW("fc2_w", FC2_W),
      LW("fc2_b", FC2_B), LW("ln2_w", LN2_W), LW("ln2_b", LN2_B)},
     {H_("h")}},
    {FG_OP_SAMPLE, "SAMPLE", 2, 1, {{"logits", K_LOGITS, 0}, {"rng", K_RNG, 0}}, {{"ids", K_IDS, 0}}},
    {FG_OP_ATTN_CORE, "ATTN_CORE", 6, 1,
     {H_("q"), H_("k"), H_("v"), {"kc", K_CACHE, 0}, {"vc", K_CACHE, 0}, {"mask", K_MASK, 0}},
     {H_("ctx")}},
};

static const op_spec *find_spec(uint32_t op) {
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
        if (specs[i].op == op) return &specs[i];
    return NULL;
}

const char *fg_op_name(uint32_t op) {
    static _Thread_local char buf[32];
    if (op == FG_OP_DEVICE_INIT) return "DEVICE_INIT";
    const op_spec *s = find_spec(op);
    if (s) return s->name;
    snprintf(buf, sizeof buf, "op %u", op);
    return buf;
}

fg_status fg_op_model_config(const fg_op_model *m, const char *who, fg_opt_config *c) {
    const uint32_t dims[] = {m->vocab_size, m->hidden, m->n_heads, m->ffn_dim, m->max_pos, m->word_embed_proj_dim};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i] > DIM_MAX)
            return fg_err_set(FG_EINPUT, "%s: model dimension %" PRIu32 " exceeds %u", who, dims[i], DIM_MAX);
    if (m->pre_ln > 1) return fg_err_set(FG_EINPUT, "%s: model pre_ln must be 0 or 1, got %" PRIu32, who, m->pre_ln);
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "op");
    c->vocab_size = (int)m->vocab_size;
    c->hidden = (int)m->hidden;
    c->n_heads = (int)m->n_heads;
    c->n_layers = 1;
    c->ffn_dim = (int)m->ffn_dim;
    c->max_pos = (int)m->max_pos;
    c->word_embed_proj_dim = (int)m->word_embed_proj_dim;
    c->pre_ln = (int)m->pre_ln;
    char origin[64];
    snprintf(origin, sizeof origin, "%s: model", who);
    return fg_config_validate(c, origin);
}

/* The bytes slot s must have, and how to say it. */
static uint64_t slot_bytes(const slot *s, const fg_op_args *a, const fg_spec *sp, char *why, size_t cap) {
    uint64_t B = a->p.B, S = a->p.S, H = a->p.model.hidden, V = a->p.model.vocab_size;
    switch (s->kind) {
    case K_H: snprintf(why, cap, "B*S*H fp16"); return B * S * H * 2;
    case K_IDS: snprintf(why, cap, "B*S int32"); return B * S * 4;
    case K_MASK: snprintf(why, cap, "B*mask_stride uint8"); return B * a->p.mask_stride;
    case K_CACHE: snprintf(why, cap, "Tmax*B*H fp16"); return (uint64_t)a->p.Tmax * B * H * 2;
    case K_LOGITS: snprintf(why, cap, "B*V fp32"); return B * V * 4;
    case K_RNG: snprintf(why, cap, "B u64"); return B * 8;
    case K_LW:
    case K_GW: {
        const fg_spec *t = &sp[s->kind == K_LW ? fg_spec_layer(0, s->which) : fg_spec_global(s->which)];
        if (!t->present) {
            snprintf(why, cap, "absent in this model");
            return 0;
        }
        if (t->ndim == 2)
            snprintf(why, cap, "[%" PRId64 ", %" PRId64 "] fp16", t->dims[0], t->dims[1]);
        else
            snprintf(why, cap, "[%" PRId64 "] fp16", t->dims[0]);
        return (uint64_t)fg_spec_numel(t) * 2;
    }
    }
    return 0;
}

/* Check one slot's size and resolve it; weights also go into lw / gw. */
static fg_status take_slot(fg_worker *w, fg_op_args *a, const slot *s, const char *dir, int i, fg_shm_handle h,
                           const fg_spec *sp, void **ptr) {
    char why[64];
    uint64_t want = slot_bytes(s, a, sp, why, sizeof why);
    if (h.nbytes != want)
        return fg_err_set(FG_EINPUT, "%s: %s[%d] %s has %" PRIu64 " bytes, want %" PRIu64 " (%s)", a->name, dir, i,
                          s->name, h.nbytes, want, why);
    *ptr = NULL;
    if (want) {
        *ptr = fg_worker_ptr(w, h);
        if (!*ptr) {
            char inner[FG_MSG_TEXT_MAX];
            snprintf(inner, sizeof inner, "%s", fg_err_msg());
            return fg_err_set(FG_EINPUT, "%s: %s[%d] %s: %s", a->name, dir, i, s->name, inner);
        }
        unsigned align = s->kind == K_MASK ? 1 : s->kind == K_RNG ? 8 : s->kind == K_IDS || s->kind == K_LOGITS ? 4 : 2;
        if ((uintptr_t)*ptr % align)
            return fg_err_set(FG_EINPUT, "%s: %s[%d] %s at offset %" PRIu64 " is not %u-byte aligned", a->name, dir,
                              i, s->name, h.offset, align);
    }
    if (s->kind == K_LW) a->lw.w[s->which] = *ptr;
    if (s->kind == K_GW) a->gw.w[s->which] = *ptr;
    if (s->kind == K_MASK) a->st.mask = *ptr;
    return FG_OK;
}

/* The step's numbers, against what the op reads. */
static fg_status check_step(const op_spec *os, fg_op_args *a) {
    const fg_op_step *p = &a->p;
    int has_mask = 0, has_cache = 0;
    for (int i = 0; i < os->n_in; i++) {
        has_mask |= os->in[i].kind == K_MASK;
        has_cache |= os->in[i].kind == K_CACHE;
    }
    if (p->B < 1 || p->S < 1 || p->B > DIM_MAX || p->S > DIM_MAX || (uint64_t)p->B * p->S > ROWS_MAX)
        return fg_err_set(FG_EINPUT, "%s: B=%" PRIu32 " S=%" PRIu32 ": need B, S >= 1 and B*S <= %u", os->name, p->B,
                          p->S, ROWS_MAX);
    if (p->past > DIM_MAX) return fg_err_set(FG_EINPUT, "%s: past=%" PRIu32 " is too large", os->name, p->past);
    uint32_t T = p->past + p->S;
    if (has_mask && (p->mask_stride < T || p->mask_stride > DIM_MAX))
        return fg_err_set(FG_EINPUT, "%s: mask_stride=%" PRIu32 " must cover past+S=%" PRIu32, os->name,
                          p->mask_stride, T);
    if (has_cache && (p->Tmax < T || p->Tmax > DIM_MAX))
        return fg_err_set(FG_EINPUT, "%s: Tmax=%" PRIu32 " must cover past+S=%" PRIu32, os->name, p->Tmax, T);
    if (os->op == FG_OP_EMBED && T > p->model.max_pos)
        return fg_err_set(FG_EINPUT, "%s: past+S=%" PRIu32 " exceeds the model's max_pos %" PRIu32, os->name, T,
                          p->model.max_pos);
    a->st = (fg_step){.B = (int)p->B, .S = (int)p->S, .past = (int)p->past, .mask = NULL,
                      .mask_stride = has_mask ? (int)p->mask_stride : 0};
    a->Tmax = has_cache ? (int)p->Tmax : 0;
    return FG_OK;
}

fg_status fg_op_args_parse(fg_worker *w, const fg_msg *cmd, fg_op_args *a) {
    const fg_msg_compute *c = &cmd->u.compute;
    memset(a, 0, sizeof *a);
    const op_spec *os = find_spec(c->op);
    if (!os) return fg_err_set(FG_EINPUT, "%s is not an engine op with tensors", fg_op_name(c->op));
    a->op = c->op;
    a->name = os->name;
    if (c->n_in != (uint32_t)os->n_in || c->n_out != (uint32_t)os->n_out)
        return fg_err_set(FG_EINPUT, "%s takes %d inputs and %d outputs, got %" PRIu32 " and %" PRIu32, os->name,
                          os->n_in, os->n_out, c->n_in, c->n_out);
    size_t want = os->op == FG_OP_SAMPLE ? sizeof(fg_op_sample) : sizeof(fg_op_step);
    if (c->params_len != want)
        return fg_err_set(FG_EINPUT, "%s: params are %" PRIu32 " bytes, want %zu (%s)", os->name, c->params_len, want,
                          os->op == FG_OP_SAMPLE ? "fg_op_sample" : "fg_op_step");
    memcpy(&a->p, c->params, sizeof a->p);
    if (os->op == FG_OP_SAMPLE) {
        fg_op_sample sp;
        memcpy(&sp, c->params, sizeof sp);
        if (!(sp.temperature >= 0 && sp.temperature <= 100) || !(sp.top_p > 0 && sp.top_p <= 1))
            return fg_err_set(FG_EINPUT, "SAMPLE: temperature %g must be in [0, 100] and top_p %g in (0, 1]",
                              (double)sp.temperature, (double)sp.top_p);
        if (a->p.S != 1) return fg_err_set(FG_EINPUT, "SAMPLE: S=%" PRIu32 " must be 1", a->p.S);
        a->temperature = sp.temperature;
        a->top_p = sp.top_p;
    }
    fg_status st = fg_op_model_config(&a->p.model, os->name, &a->cfg);
    if (st) return st;
    if ((st = check_step(os, a))) return st;
    fg_spec *sp = fg_specs_new(&a->cfg);
    for (int i = 0; !st && i < os->n_in; i++) st = take_slot(w, a, &os->in[i], "in", i, c->in[i], sp, &a->in[i]);
    for (int i = 0; !st && i < os->n_out; i++)
        st = take_slot(w, a, &os->out[i], "out", i, c->out[i], sp, &a->out[i]);
    free(sp);
    return st;
}

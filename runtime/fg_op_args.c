/* fg_op_args.c - an engine op's handles checked against the op table (see
 * fg_op_args.h); a weight slot's size comes from fg_specs_new(). */
#include "fg_op_args.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "fg_fmt.h"

/* Bounds that keep every size product inside uint64 and every row count
 * inside int, far above any real model or batch. */
#define DIM_MAX (1u << 20)
#define ROWS_MAX (1u << 24)
#define SAMPLE_MAX_TEMPERATURE 100.0f   /* far past where sampling is uniform noise */

/* The bytes slot s must have, and how to say it. */
static uint64_t slot_bytes(const fg_op_slot *s, const fg_op_args *a, const fg_spec *sp, char *why, size_t cap) {
    uint64_t B = a->p.B, S = a->p.S, H = (uint64_t)a->cfg.hidden, V = (uint64_t)a->cfg.vocab_size;
    switch (s->kind) {
    case FG_SLOT_ACT:   /* the hidden state H wide; q and ctx A*d; k and v KV*d */
        if (s->which == FG_ACT_K || s->which == FG_ACT_V) {
            snprintf(why, cap, "B*S*n_kv_heads*head_dim fp16");
            return B * S * (uint64_t)fg_config_kv_dim(&a->cfg) * sizeof(fg_half);
        }
        if (s->which != FG_ACT_H) {
            snprintf(why, cap, "B*S*n_heads*head_dim fp16");
            return B * S * (uint64_t)fg_config_q_dim(&a->cfg) * sizeof(fg_half);
        }
        snprintf(why, cap, "B*S*H fp16");
        return B * S * H * sizeof(fg_half);
    case FG_SLOT_IDS: snprintf(why, cap, "B*S int32"); return B * S * sizeof(int32_t);
    case FG_SLOT_MASK: snprintf(why, cap, "B*mask_stride uint8"); return B * a->p.mask_stride;
    case FG_SLOT_CACHE:
        snprintf(why, cap, a->cfg.compress_cache ? "Tmax*B*n_kv_heads 4-bit head slices" : "Tmax*B*KV*d fp16");
        return (uint64_t)a->p.Tmax * B * fg_cache_row_bytes(&a->cfg);
    case FG_SLOT_LOGITS: snprintf(why, cap, "B*V fp32"); return B * V * sizeof(float);
    case FG_SLOT_RNG: snprintf(why, cap, "B fg_sample_row"); return B * sizeof(fg_sample_row);
    case FG_SLOT_ECOUNT: snprintf(why, cap, "E int32"); return (uint64_t)a->cfg.n_experts * sizeof(int32_t);
    case FG_SLOT_EOUT:
        snprintf(why, cap, "B*S*k*H fp32");
        return B * S * (uint64_t)a->cfg.experts_per_token * H * sizeof(float);
    case FG_SLOT_XW: {
        int idx = fg_spec_layer(0, s->which);
        if (!sp[idx].experts) {
            snprintf(why, cap, "not a stack of experts");
            return 0;
        }
        snprintf(why, cap, "x_n = %d experts of [%" PRId64 ", %" PRId64 "]", a->x_n, sp[idx].dims[0], sp[idx].dims[1]);
        return (uint64_t)a->x_n * fg_spec_expert_bytes(&a->cfg, sp, idx);
    }
    case FG_SLOT_LW:
    case FG_SLOT_GW: {
        int idx = s->kind == FG_SLOT_LW ? fg_spec_layer(0, s->which) : fg_spec_global(s->which);
        const fg_spec *t = &sp[idx];
        if (!t->present) {
            snprintf(why, cap, "absent in this model");
            return 0;
        }
        if (t->ndim == 2)
            snprintf(why, cap, "[%" PRId64 ", %" PRId64 "] %s", t->dims[0], t->dims[1],
                     fg_fmt_name(fg_config_fmt(&a->cfg, idx)));
        else
            snprintf(why, cap, "[%" PRId64 "] fp16", t->dims[0]);
        return fg_spec_stored_bytes(&a->cfg, sp, idx);
    }
    }
    return 0;
}

fg_status fg_sample_rows_check(const fg_sample_row *rows, int B) {
    for (int b = 0; b < B; b++)
        if (!(rows[b].temperature >= 0 && rows[b].temperature <= SAMPLE_MAX_TEMPERATURE) ||
            !(rows[b].top_p > 0 && rows[b].top_p <= 1))
            return fg_err_set(FG_EINPUT, "SAMPLE: row %d: temperature %g must be in [0, %g] and top_p %g in (0, 1]", b,
                              (double)rows[b].temperature, (double)SAMPLE_MAX_TEMPERATURE, (double)rows[b].top_p);
    return FG_OK;
}

/* The size of one element of a slot of this kind: its pointer's alignment. */
static unsigned elem_bytes(fg_slot_kind k) {
    switch (k) {
    case FG_SLOT_MASK: return sizeof(uint8_t);
    case FG_SLOT_RNG: return sizeof(uint64_t);   /* fg_sample_row starts with its u64 state */
    case FG_SLOT_IDS: case FG_SLOT_ECOUNT: return sizeof(int32_t);
    case FG_SLOT_EOUT: return sizeof(float);
    case FG_SLOT_XW: return 1;   /* blocks of bytes */
    case FG_SLOT_LOGITS: return sizeof(float);
    default: return sizeof(fg_half);   /* fp16 tensors; 4-bit data is packed in bytes beside fp16 scales */
    }
}

/* Check one slot's size and resolve it; weights also go into lw / gw. */
static fg_status take_slot(fg_worker *w, fg_op_dev_ptr_fn dev_ptr, void *dev_ctx, fg_op_args *a,
                           const fg_op_slot *s, const char *dir, int i, fg_shm_handle h, const fg_spec *sp,
                           void **ptr) {
    char why[64];
    uint64_t want = slot_bytes(s, a, sp, why, sizeof why);
    if (h.nbytes != want)
        return fg_err_set(FG_EINPUT, "%s: %s[%d] %s has %" PRIu64 " bytes, want %" PRIu64 " (%s)", a->name, dir, i,
                          s->name, h.nbytes, want, why);
    *ptr = NULL;
    if (want) {
        if (h.segment != FG_SEG_DEVICE) *ptr = fg_worker_ptr(w, h);
        else if (dev_ptr) *ptr = dev_ptr(dev_ctx, h);
        else fg_err_set(FG_EINPUT, "a device handle, but this worker has no device memory");
        if (!*ptr) {
            char inner[FG_MSG_TEXT_MAX];
            snprintf(inner, sizeof inner, "%s", fg_err_msg());
            return fg_err_set(FG_EINPUT, "%s: %s[%d] %s: %s", a->name, dir, i, s->name, inner);
        }
        unsigned align = elem_bytes(s->kind);
        if ((uintptr_t)*ptr % align)
            return fg_err_set(FG_EINPUT, "%s: %s[%d] %s at offset %" PRIu64 " is not %u-byte aligned", a->name, dir,
                              i, s->name, h.offset, align);
    }
    if (s->kind == FG_SLOT_LW || s->kind == FG_SLOT_XW) a->lw.w[s->which] = *ptr;   /* XW: expert x_lo's bytes */
    if (s->kind == FG_SLOT_GW) a->gw.w[s->which] = *ptr;
    if (s->kind == FG_SLOT_MASK) a->st.mask = *ptr;
    return FG_OK;
}

/* The step's numbers, against what the op reads. */
static fg_status check_step(const fg_op_info *os, fg_op_args *a) {
    const fg_op_step *p = &a->p;
    int has_mask = 0, has_cache = 0, has_pos = 0;   /* has_pos: reads the position table */
    for (int i = 0; i < os->n_in; i++) {
        has_pos |= os->in[i].kind == FG_SLOT_GW && os->in[i].which == FG_GW_EMBED_POS;
        has_mask |= os->in[i].kind == FG_SLOT_MASK;
        has_cache |= os->in[i].kind == FG_SLOT_CACHE;
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
    if (has_pos && T > (uint32_t)a->cfg.max_pos)
        return fg_err_set(FG_EINPUT, "%s: past+S=%" PRIu32 " exceeds the model's max_pos %d", os->name, T,
                          a->cfg.max_pos);
    a->st = (fg_step){.B = (int)p->B, .S = (int)p->S, .past = (int)p->past, .mask = NULL,
                      .mask_stride = has_mask ? (int)p->mask_stride : 0};
    a->Tmax = has_cache ? (int)p->Tmax : 0;
    return FG_OK;
}

fg_status fg_op_args_parse(fg_worker *w, const fg_msg *cmd, fg_op_dev_ptr_fn dev_ptr, void *dev_ctx, fg_op_args *a) {
    const fg_msg_compute *c = &cmd->u.compute;
    memset(a, 0, sizeof *a);
    const fg_op_info *os = fg_op_info_get(c->op);
    if (!os || os->params == FG_PARAMS_INIT)
        return fg_err_set(FG_EINPUT, "%s is not an engine op with tensors", fg_op_name(c->op));
    if (cmd->type != fg_op_msg_type(os))
        return fg_err_set(FG_EINPUT, "%s comes as %s, not %s", os->name, fg_msg_type_name(fg_op_msg_type(os)),
                          fg_msg_type_name(cmd->type));
    a->op = c->op;
    a->name = os->name;
    a->info = os;
    if (c->n_in != (uint32_t)os->n_in || c->n_out != (uint32_t)os->n_out)
        return fg_err_set(FG_EINPUT, "%s takes %d inputs and %d outputs, got %" PRIu32 " and %" PRIu32, os->name,
                          os->n_in, os->n_out, c->n_in, c->n_out);
    size_t want = os->params == FG_PARAMS_SAMPLE    ? sizeof(fg_op_sample)
                  : os->params == FG_PARAMS_EXPERTS ? sizeof(fg_op_experts)
                                                    : sizeof(fg_op_step);
    if (c->params_len != want)
        return fg_err_set(FG_EINPUT, "%s: params are %" PRIu32 " bytes, want %zu (%s)", os->name, c->params_len, want,
                          os->params == FG_PARAMS_SAMPLE    ? "fg_op_sample"
                          : os->params == FG_PARAMS_EXPERTS ? "fg_op_experts"
                                                            : "fg_op_step");
    memcpy(&a->p, c->params, sizeof a->p);
    if (os->params == FG_PARAMS_SAMPLE) {
        fg_op_sample sp;
        memcpy(&sp, c->params, sizeof sp);
        if (!(sp.temperature >= 0 && sp.temperature <= SAMPLE_MAX_TEMPERATURE) || !(sp.top_p > 0 && sp.top_p <= 1))
            return fg_err_set(FG_EINPUT, "SAMPLE: temperature %g must be in [0, %g] and top_p %g in (0, 1]",
                              (double)sp.temperature, (double)SAMPLE_MAX_TEMPERATURE, (double)sp.top_p);
        if (a->p.S != 1) return fg_err_set(FG_EINPUT, "SAMPLE: S=%" PRIu32 " must be 1", a->p.S);
        a->temperature = sp.temperature;
        a->top_p = sp.top_p;
    }
    fg_status st = fg_config_from_desc(&a->p.model, os->name, &a->cfg);
    if (st) return st;
    if ((st = check_step(os, a))) return st;
    if (os->params == FG_PARAMS_EXPERTS) {
        fg_op_experts xp;
        memcpy(&xp, c->params, sizeof xp);
        if (!a->cfg.n_experts || xp.x_lo > (uint32_t)a->cfg.n_experts || xp.x_n > (uint32_t)a->cfg.n_experts - xp.x_lo)
            return fg_err_set(FG_EINPUT, "%s: experts [%" PRIu32 ", +%" PRIu32 ") outside the model's %d", os->name,
                              xp.x_lo, xp.x_n, a->cfg.n_experts);
        a->x_lo = (int)xp.x_lo, a->x_n = (int)xp.x_n;
    }
    fg_spec *sp = fg_specs_new(&a->cfg);
    for (int i = 0; !st && i < os->n_in; i++) st = take_slot(w, dev_ptr, dev_ctx, a, &os->in[i], "in", i, c->in[i], sp, &a->in[i]);
    for (int i = 0; !st && i < os->n_out; i++)
        st = take_slot(w, dev_ptr, dev_ctx, a, &os->out[i], "out", i, c->out[i], sp, &a->out[i]);
    free(sp);
    return st;
}

/* fg_op_build's resolver for fg_op_args_layout: the handles placed there, in
 * slot order. */
typedef struct {
    fg_shm_handle h[2 * FG_MSG_MAX_HANDLES];
    int next;
} placed;

static fg_shm_handle next_placed(void *ctx, const fg_op_info *oi, const fg_op_slot *s) {
    placed *pl = ctx;
    return pl->h[pl->next++];
}

fg_status fg_op_args_layout(uint32_t op, const fg_op_step *p, uint64_t base, fg_op_dev_ptr_fn dev_ptr,
                            void *dev_ctx, fg_msg *m, uint64_t *end, fg_op_args *a) {
    const fg_op_info *os = fg_op_info_get(op);
    if (!os || os->params != FG_PARAMS_STEP)
        return fg_err_set(FG_EINPUT, "%s is not an engine op with a step", fg_op_name(op));
    fg_op_args shape = {.op = op, .name = os->name, .info = os, .p = *p};   /* what slot_bytes reads */
    fg_status st = fg_config_from_desc(&p->model, os->name, &shape.cfg);
    if (st || (st = check_step(os, &shape))) return st;
    fg_spec *sp = fg_specs_new(&shape.cfg);
    placed pl = {.next = 0};
    uint64_t off = base;
    char why[64];
    for (int weights = 1; weights >= 0; weights--) {
        for (int i = 0; i < os->n_in + os->n_out; i++) {
            const fg_op_slot *s = i < os->n_in ? &os->in[i] : &os->out[i - os->n_in];
            if ((s->kind == FG_SLOT_LW || s->kind == FG_SLOT_GW) != weights) continue;
            uint64_t n = slot_bytes(s, &shape, sp, why, sizeof why);
            pl.h[i] = (fg_shm_handle){.segment = FG_SEG_DEVICE, .offset = off, .nbytes = n};
            off += (n + FG_SHM_ALIGN - 1) / FG_SHM_ALIGN * FG_SHM_ALIGN;
        }
    }
    free(sp);
    fg_op_build(m, op, 0, 0, p, sizeof *p, next_placed, &pl);
    *end = off;
    return dev_ptr ? fg_op_args_parse(NULL, m, dev_ptr, dev_ctx, a) : FG_OK;
}

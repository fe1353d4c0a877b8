/* fg_engine_ops.c - the op table of fg_engine_ops.h as data, and the one
 * message builder the coordinator uses for every op. */
#include "fg_engine_ops.h"

#include <stdio.h>
#include <string.h>

/* `which` of a slot, by kind: the table writes Q_W, EMBED_TOKENS, H, ... */
#define WHICH_ACT(w) FG_ACT_##w
#define WHICH_LW(w) FG_LW_##w
#define WHICH_GW(w) FG_GW_##w
#define WHICH_IDS(w) w
#define WHICH_MASK(w) w
#define WHICH_CACHE(w) w
#define WHICH_LOGITS(w) w
#define WHICH_RNG(w) w
#define WHICH_ECOUNT(w) w
#define WHICH_XW(w) FG_LW_##w
#define WHICH_EOUT(w) w

#define SLOT(name, kind, which) {#name, FG_SLOT_##kind, WHICH_##kind(which)},
#define SKIP(name, kind, which)
/* each op's slot lists; the {0} ends a list that may be empty */
#define LISTS(name, worker, params)                                        \
    static const fg_op_slot name##_in[] = {FG_SLOTS_##name(SLOT, SKIP){0}}; \
    static const fg_op_slot name##_out[] = {FG_SLOTS_##name(SKIP, SLOT){0}};
FG_ENGINE_OPS(LISTS)

#define COUNT(a) ((int)(sizeof a / sizeof a[0]) - 1)
#define INFO(name, worker, params)                                                                            \
    {FG_OP_##name, #name, FG_ROLE_##worker, FG_PARAMS_##params, COUNT(name##_in), COUNT(name##_out), name##_in, \
     name##_out},
static const fg_op_info infos[] = {FG_ENGINE_OPS(INFO)};

_Static_assert(sizeof infos / sizeof infos[0] == FG_NUM_ENGINE_OPS, "one table entry per op code");

const fg_op_info *fg_op_info_get(uint32_t op) {
    if (op < FG_OP_ENGINE_FIRST || op >= FG_OP_ENGINE_END) return NULL;
    return &infos[FG_OPI(op)];
}

const char *fg_op_name(uint32_t op) {
    static _Thread_local char buf[32];
    const fg_op_info *oi = fg_op_info_get(op);
    if (oi) return oi->name;
    snprintf(buf, sizeof buf, "op %u", op);
    return buf;
}

int fg_op_msg_type(const fg_op_info *oi) { return oi->worker == FG_ROLE_CPU ? FG_MSG_CPU_ATTN : FG_MSG_COMPUTE; }

void fg_op_build(fg_msg *m, uint32_t op, uint32_t layer, uint32_t gpu_batch, const void *params, uint32_t len,
                 fg_op_resolve_fn resolve, void *ctx) {
    const fg_op_info *oi = fg_op_info_get(op);
    fg_msg_init(m, oi ? fg_op_msg_type(oi) : FG_MSG_COMPUTE);
    m->u.compute.op = op;
    m->u.compute.layer = layer;
    m->u.compute.gpu_batch = gpu_batch;
    fg_msg_compute_set_params(m, params, len);
    if (!oi) return;
    for (int i = 0; i < oi->n_in; i++) fg_msg_compute_add_in(m, resolve(ctx, oi, &oi->in[i]));
    for (int i = 0; i < oi->n_out; i++) fg_msg_compute_add_out(m, resolve(ctx, oi, &oi->out[i]));
}

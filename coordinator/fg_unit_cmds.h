/* fg_unit_cmds.h - how many commands each piece of a schedule unit sends
 * to the workers: written once, here, for the two places that must agree.
 * The engine (fg_compute.c, fg_moves.c) asserts after each piece that it
 * sent exactly this many; the cost model (fg_cost.c) charges the profile's
 * per-command cost for them. A change to what a unit issues that is not
 * made here fails the engine's tests at the first unit of that kind. */
#ifndef FG_UNIT_CMDS_H
#define FG_UNIT_CMDS_H

enum {
    /* compute (fg_compute.c) */
    FG_CMDS_LAYER = 1,           /* a decoder layer: LAYER (attention and MLP in one command) */
    FG_CMDS_CPU_ATTN_LAYER = 6,  /* with the cpu worker's attention: ATTN_QKV, COPY q k v out,
                                    ATTN_CORE, COPY ctx in, ATTN_OUT, MLP */
    FG_CMDS_CPU_ATTN = 5,        /* the cpu worker's attention alone: ATTN_QKV, COPY q k v out, ATTN_CORE,
                                    COPY ctx in, ATTN_OUT */
    FG_CMDS_ATTN = 1,            /* the GPU's attention alone: ATTN */
    FG_CMDS_MLP = 1,             /* MLP */
    FG_CMDS_MOE_ROUTE = 2,       /* a sparse layer whose experts load as routed: MOE_ROUTE, COPY its
                                    counts out (then its attention and MLP apart, and its expert loads,
                                    as many as the routing asks: fg_moves.c) */
    FG_CMDS_MOE_CPU = 3,         /* the cpu worker's experts: COPY h out, MOE_CPU, COPY their outputs in
                                    (then MLP_SPLIT, as FG_CMDS_MLP) */
    FG_CMDS_EMBED = 1,           /* EMBED */
    FG_CMDS_LM_HEAD = 3,         /* LM_HEAD, SAMPLE, COPY logits and ids out */
    /* moves (fg_moves.c) */
    FG_CMDS_WEIGHT_COPY = 1,     /* a group's off-GPU weights to its device slot (its DISK_READs apart) */
    FG_CMDS_HIDDEN_MOVE = 1,     /* load_hidden or store_hidden: one COPY */
    FG_CMDS_HIDDEN_DISK = 1,     /* and through the stage: its DISK_READ or DISK_WRITE */
    FG_CMDS_CACHE_MOVE = 1,      /* load_cache or store_cache: one COPY of k and v */
    FG_CMDS_CACHE_DISK = 2,      /* and through the stages: the k and v DISK_READs or DISK_WRITEs */
};

_Static_assert(FG_CMDS_CPU_ATTN_LAYER == FG_CMDS_CPU_ATTN + FG_CMDS_MLP, "CPU attention's layer is its attention and MLP");

#endif

/* fg_plan.h - the memory plan of an offloading run: where every tensor of
 * the model, the KV cache, the activations and the per-batch inputs and
 * outputs lives (the GPU worker's device arena, a shared-memory segment, or
 * the run's spill file on disk), and the device slots the off-GPU ones are
 * loaded into before use. One function, fg_plan_build(), computes all of it
 * from (model config, policy, prompt length, generation length, backend)
 * before anything runs; budgets are checked against it and refused with the
 * numbers. The engine reads it and never places anything itself; the policy
 * search states its memory constraints with the same function, so a policy
 * it picks is never refused by the run.
 *
 * Dimension letters: L decoder layers, K GPU batches per block, B (gbs)
 * sequences per GPU batch, S prompt length (padded), G tokens to generate,
 * Tmax = S + G cache positions, H hidden, V vocabulary, A query heads and KV
 * kv heads of d values (the cache is KV*d wide). Weights and cache
 * are counted in the bytes the tiers hold: compressed under the config's
 * compress_weight / compress_cache (fg_spec_stored_bytes, fg_cache_row_bytes),
 * and the backend's workspace then includes a weight's expansion buffer. */
#ifndef FG_PLAN_H
#define FG_PLAN_H

#include "fg_config.h"
#include "fg_policy.h"

/* Where bytes live. SEG_DEV is the gpu worker's device arena; SEG_W ..
 * SEG_STAGE are shared-memory segments (created by the coordinator, named
 * fg_plan_seg_name); SEG_SPILL is no memory: offsets in the run's spill file
 * in --offload-dir, where disk-tier KV cache and activations live. */
enum {
    SEG_DEV,     /* device arena */
    SEG_W,       /* CPU-tier weights */
    SEG_WGPU,    /* host copy of GPU-resident weights, uploaded once */
    SEG_KV,      /* CPU-tier KV cache */
    SEG_ACT,     /* CPU-tier activations */
    SEG_IO,      /* per-batch ids, masks, logits, generator states; CPU attention's q k v ctx */
    SEG_STAGE,   /* between disk and device: disk-tier weights, cache and activations */
    SEG_SPILL,   /* the spill file */
    NSEG
};
#define FG_PLAN_FIRST_SHM SEG_W
#define FG_PLAN_END_SHM SEG_SPILL   /* shared memory: FIRST_SHM <= seg < END_SHM */
const char *fg_plan_seg_name(int seg);

/* Bytes [off, off + n) of a segment. */
typedef struct {
    int seg;
    uint64_t off, n;
} fg_loc;

/* Bytes [off, off + n) of l. */
static inline fg_loc fg_loc_sub(fg_loc l, uint64_t off, uint64_t n) { return (fg_loc){l.seg, l.off + off, n}; }

/* The share of the model one process computes. A pipeline rank
 * (fg_ring.h) holds decoder layers [lo, hi), the embedding on the first
 * rank and the LM head on the last; its hidden states come from the rank
 * before it where it has no embedding (recv) and go to the next where it
 * has no head (send). fg_stage_whole(): everything, one process. */
typedef struct {
    int lo, hi, embed, head;
} fg_stage;
static inline fg_stage fg_stage_whole(const fg_model_config *c) { return (fg_stage){0, c->n_layers, 1, 1}; }

/* The stacked roles of a sparse layer, in this order: its experts' gate,
 * down and up matrices. */
#define FG_PLAN_STACKS 3
static inline int fg_plan_stack_role(int m) {
    static const int role[FG_PLAN_STACKS] = {FG_LW_FC1_W, FG_LW_FC2_W, FG_LW_UP_W};
    return role[m];
}

/* Double-buffered device slots: the unit computing uses one while the next
 * one's inputs load into the other. A batch's cache and hidden state use
 * the slot of its parity (k % 2); a layer's weights alternate. */
#define FG_NSLOTS 2

typedef struct {
    const fg_model_config *c;
    const fg_spec *sp;               /* (fg_spec_count(c)) the tensors */
    fg_policy p;
    fg_stage st;                     /* what of the model this process computes */
    int L, K, gbs, S, G, Tmax;
    uint64_t used[NSEG];             /* bytes of each segment */
    uint64_t ws_bytes;               /* the backend's workspace beside the arena */

    /* weights, per spec index (absent tensors and those of other stages: tier GPU, 0 bytes) */
    fg_tier *wtier;                  /* (nspec) */
    fg_loc *whome;                   /* (nspec) SEG_DEV (GPU) or SEG_W (CPU); disk: n only */
    fg_loc *wsrc;                    /* (nspec) GPU tier: the SEG_WGPU host copy */
    uint64_t *wslot_off;             /* (nspec) off-GPU: offset inside a weight slot */
    uint64_t wslot_bytes;            /* the largest group's off-GPU bytes */
    fg_loc wslot[FG_NSLOTS];         /* device: a group's off-GPU weights */
    fg_loc wstage[FG_NSLOTS];        /* shm: disk-tier weights read for a slot */
    uint64_t wstage_bytes;           /* the largest group's disk-tier bytes, experts padded */
    int any_disk_weights;

    /* experts: expert e of sparse decoder layer l is a unit of placement
     * of its own, tier etier[l*E + e] (fg_policy_expert_tier); its part of
     * each of the layer's stacks (FC1, FC2, UP: fg_spec.experts) lives in
     * that tier's home, a tier's experts back to back in expert order, so
     * a run of experts is one range. Where every expert of a layer is on
     * the GPU its homes are the whole stacks, which the ops read; else
     * (xview[l]) the ops read each stack in the weight slot, at
     * wslot_off[i] in expert order, whole, and the experts a step needs
     * are copied there from their homes (fg_load_experts; those on the
     * GPU too). On disk, an expert is FG_STORE_ALIGN-aligned in the store
     * and in the slot's stage: expert e of stack x at xstage_off[x] + e *
     * xstage_stride[x] (stride its bytes rounded up), so one read brings a
     * run of them. Stack x = fg_plan_stack(pl, spec index). */
    int E;                           /* experts of a sparse layer (0: a model without) */
    fg_tier *etier;                  /* (L*E) */
    uint8_t *xview;                  /* (L) the stacks are read in the weight slot */
    fg_loc *ehome;                   /* (L*FG_PLAN_STACKS*E) SEG_DEV (GPU), SEG_W (CPU); disk: n only */
    fg_loc *esrc;                    /* (L*FG_PLAN_STACKS*E) GPU tier: its SEG_WGPU host copy */
    uint64_t *xstage_off;            /* (L*FG_PLAN_STACKS) the stack's experts in the stage */
    uint64_t *xstage_stride;         /* (L*FG_PLAN_STACKS) an expert's bytes there, aligned */
    int xtier_count[FG_NTIERS];      /* experts of each sparse layer on each tier */

    /* KV cache: whole layers; one (Tmax, B, KV*d) block per (layer, batch),
     * fp16 or 4-bit (fg_cache_row_bytes per position and sequence) */
    fg_tier *ctier;                  /* (L) */
    fg_loc *kc, *vc;                 /* (L*K) homes */
    fg_loc kslot[FG_NSLOTS], vslot[FG_NSLOTS];    /* device, for an off-GPU cache */
    fg_loc kstage[FG_NSLOTS], vstage[FG_NSLOTS];  /* shm, for a disk-tier cache */

    /* activations: each batch's hidden state (B*S, H) between layers */
    fg_tier atier;
    fg_loc *hhome;                   /* (K) */
    fg_loc hslot[FG_NSLOTS];         /* device, activations off the GPU */
    fg_loc hstage[FG_NSLOTS];        /* shm, activations on disk */

    /* per batch (K): inputs and what comes out */
    fg_loc *ids_dev, *ids_io;        /* (B, S) int32: the prompts, then each token's sampled ids */
    fg_loc *mask_dev, *mask_io;      /* (B, Tmax) uint8 */
    fg_loc *rng_dev, *rng_io;        /* (B) fg_sample_row: generator states and settings */
    fg_loc *logits_io;               /* (B, V) fp32 */
    fg_loc logits_dev[FG_NSLOTS];    /* (B, V) fp32, by parity */
    /* the CPU tier's experts computed by the cpu worker (cpu_expert_compute):
     * experts [xcpu_lo, xcpu_lo + xcpu_n) of every sparse layer (xcpu_n 0:
     * none), never copied to the device; the hidden state goes out to shm
     * by parity (B*S, H) fp16, their outputs (B*S, k, H) fp32 come back */
    int xcpu_lo, xcpu_n;
    fg_loc hx_io[FG_NSLOTS], ycpu_io[FG_NSLOTS], ycpu_dev[FG_NSLOTS];
    /* a split sparse layer's route under FG_EXPERTS_ROUTED (MOE_ROUTE):
     * E int32 counts on the device by parity, out to shm per batch */
    fg_loc counts_dev[FG_NSLOTS], *counts_io;   /* (K) */
    /* CPU attention's exchange (decode: one new token per sequence) */
    fg_loc q_dev, k_dev, v_dev, ctx_dev, q_io, k_io, v_io, ctx_io;   /* (B, A*d) q and ctx, (B, KV*d) k and v, fp16 */
    /* a pipeline stage's hidden states from the rank before (st.embed 0)
     * and to the next (st.head 0): shm, (B*S, H) fp16 each, used in turn */
    fg_loc ring_in[2], ring_out[2];
} fg_plan;

/* The plan for policy p (validated) on model c with prompts padded to S and
 * G new tokens, counting `backend`'s workspace (fg_devsize_workspace_bytes). Refuses
 * (FG_EINPUT) what does not fit gpu_mem / cpu_mem / disk_mem (0: no limit;
 * disk counts the spill file only: the tier store is checked when it is
 * opened), saying how much each tier needs. */
fg_status fg_plan_build(fg_plan *pl, const fg_model_config *c, const fg_spec *sp, const fg_policy *p, int S, int G,
                        const char *backend, uint64_t gpu_mem, uint64_t cpu_mem, uint64_t disk_mem);
/* The same for one stage of a pipeline: only its layers' weights and
 * cache, its end tensors, its ring buffers. */
fg_status fg_plan_build_stage(fg_plan *pl, const fg_model_config *c, const fg_spec *sp, const fg_policy *p, int S,
                              int G, const char *backend, uint64_t gpu_mem, uint64_t cpu_mem, uint64_t disk_mem,
                              const fg_stage *stage);
void fg_plan_free(fg_plan *pl);

/* Model-level tensor i (FG_GW_*) is one a stage holds: the
 * input side (token and position embeddings, project_in) where it has the
 * embedding, the output side (final norm, project_out, the head) where it
 * has the head; the token embedding on both, as the LM_HEAD op carries it
 * (a tied head's matrix) for every model. The engine's plan and the
 * pipeline's cost model (fg_cost_pipe.c) both ask this. */
static inline int fg_stage_holds_global(const fg_stage *st, int i) {
    if (i == FG_GW_EMBED_TOKENS) return st->embed || st->head;
    if (i == FG_GW_EMBED_POS || i == FG_GW_PROJ_IN) return st->embed;
    return st->head;
}

/* Weight group g (-1 the model-level tensors, else a decoder layer) is
 * this stage's; spec index i is present and this stage's. */
static inline int fg_plan_has_group(const fg_plan *pl, int g) {
    return g < 0 ? pl->st.embed || pl->st.head : g >= pl->st.lo && g < pl->st.hi;
}
static inline int fg_plan_spec_here(const fg_plan *pl, int i) {
    if (i < FG_GW_COUNT) return pl->sp[i].present && fg_stage_holds_global(&pl->st, i);
    return pl->sp[i].present && fg_plan_has_group(pl, (i - FG_GW_COUNT) / FG_LW_COUNT);
}

/* Stack number x of spec index i (a stack of experts: fg_spec.experts),
 * l * FG_PLAN_STACKS + m; -1 for any other tensor. Expert e of it is
 * entry x * E + e of ehome and esrc. */
static inline int fg_plan_stack(const fg_plan *pl, int i) {
    if (i < FG_GW_COUNT || !pl->sp[i].experts) return -1;
    int l = (i - FG_GW_COUNT) / FG_LW_COUNT, w = (i - FG_GW_COUNT) % FG_LW_COUNT;
    for (int m = 0; m < FG_PLAN_STACKS; m++)
        if (fg_plan_stack_role(m) == w) return l * FG_PLAN_STACKS + m;
    return -1;
}
/* 1 if spec index i is a stack of a split layer: its experts have homes
 * of their own and the ops read it in the weight slot. */
static inline int fg_plan_split_stack(const fg_plan *pl, int i) {
    int x = fg_plan_stack(pl, i);
    return x >= 0 && pl->xview[x / FG_PLAN_STACKS];
}
/* 1 if expert e (of any sparse layer) is computed by the cpu worker. */
static inline int fg_plan_expert_on_cpu(const fg_plan *pl, int e) {
    return e >= pl->xcpu_lo && e < pl->xcpu_lo + pl->xcpu_n;
}
/* The weight bytes of the plan on each tier, experts by their own tiers,
 * into by[FG_NTIERS]. */
void fg_plan_tier_bytes(const fg_plan *pl, uint64_t by[FG_NTIERS]);

/* Device bytes (arena + workspace) and shared-memory bytes it needs. */
uint64_t fg_plan_gpu_bytes(const fg_plan *pl);
uint64_t fg_plan_shm_bytes(const fg_plan *pl);

/* Schedule layer j (0 embedding, 1..L decoder layers, L+1 LM head). */
static inline int fg_plan_cache_off_gpu(const fg_plan *pl, int j) {   /* its cache lives on the CPU or disk */
    return j >= 1 && j <= pl->L && pl->ctier[j - 1] != FG_TIER_GPU;
}
static inline int fg_plan_cache_on_disk(const fg_plan *pl, int j) {
    return j >= 1 && j <= pl->L && pl->ctier[j - 1] == FG_TIER_DISK;
}

/* "1.50 GiB" / "12.0 MiB" into buf (>= 32 bytes). */
const char *fg_human_bytes(uint64_t b, char *buf);

#endif

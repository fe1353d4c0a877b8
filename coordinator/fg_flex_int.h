/* fg_flex_int.h - the offloading engine's state, shared by its files, as
 * llama2.c splits a model: the plan (fg_plan.h, immutable once built), the
 * command queue (fg_cmdq.h), and the run's state below: what each device
 * slot holds and which commands last touched it. Each file does one job:
 *
 *   fg_engine_flex.c  the block schedule and the run's setup
 *   fg_moves.c        tier moves: load_weight, load_cache, load_hidden,
 *                     store_cache, store_hidden (device <-> shm <-> disk)
 *   fg_compute.c      compute: a unit's ops, built from the op table
 *   fg_sampler.c      a block's inputs, and recording each sampled token
 *
 * Letters: i token (0 is the prefill), j schedule layer (0 embedding,
 * 1..L decoder layers, L+1 LM head), k GPU batch in the block (0..K-1), s a
 * weight slot, p a batch-parity slot (k % 2). */
#ifndef FG_FLEX_INT_H
#define FG_FLEX_INT_H

#include "fg_cmdq.h"
#include "fg_engine_flex.h"
#include "fg_engine_ops.h"
#include "fg_plan.h"
#include "fg_ring.h"
#include "fg_store.h"
#include "fg_unit_cmds.h"

/* One cell of the schedule: token i, schedule layer j, batch k, whose
 * prompts are padded to S_k. */
typedef struct {
    int i, j, k, S_k;
} fg_unit;

/* The commands that last used a buffer: the next command that writes it
 * waits for all of them. (A load writes a slot, a compute reads it, a store
 * reads it, a disk write reads the stage behind it.) */
typedef struct {
    uint64_t write, read[2];
} fg_use;

/* Disk reads of one group load: a tensor each (FG_LW_COUNT), and a run of
 * experts for each stack (FG_PLAN_STACKS) under FG_EXPERTS_ALL. */
#define FG_WSLOT_MAX_DISK (FG_LW_COUNT + FG_PLAN_STACKS)

#define NO_GROUP (-2)   /* a weight slot holding nothing; groups are -1 (model-level) .. L-1 */

/* A weight slot: the device slot a group's off-GPU weights are copied
 * into, and its stage in shared memory for the disk-tier ones. */
typedef struct {
    int group;                      /* the group it holds or is loading, NO_GROUP */
    uint64_t load;                  /* the COPY into the device slot */
    uint64_t last_read;             /* the last compute reading it */
    uint64_t readers_before_load;   /* what the pending COPY waits for: the previous group's last reader */
    uint64_t stage_read;            /* the last COPY out of the stage */
    uint64_t disk[FG_WSLOT_MAX_DISK];   /* disk reads into the stage, in flight */
    int ndisk;
    int copy_pending;               /* the COPY to the device is still to be issued */
    uint64_t prev_readers;          /* the previous group's last reader: every COPY into the slot waits for it */
    uint8_t *xheld;                 /* (E) a sparse group's experts the slot holds or is loading (fg_load_experts) */
    int token;                      /* the block's token the group is loaded for (the report's index) */
} fg_wslot;

/* The slots of one batch parity: its KV cache and hidden-state device
 * slots (with their stages), and its logits buffer. */
typedef struct {
    fg_use kv;        /* kslot/vslot and kstage/vstage of this parity */
    fg_use h;         /* hslot and hstage */
    /* the last COPY out of a stage to the device: a disk read into the
     * stage waits for it on the coordinator (the disk worker cannot wait
     * on the gpu worker), or it would overwrite bytes still being copied */
    uint64_t kvstage_read, hstage_read;
    uint64_t logits_read;   /* the last COPY out of logits_dev */
    uint64_t ycpu_copy;     /* the last COPY of the cpu worker's experts' outputs in (ycpu_io free after it) */
    uint64_t ycpu_read;     /* the last MLP_SPLIT reading ycpu_dev */
} fg_pslot;

/* What a computed unit still has to store: its new cache rows and its
 * hidden state, each behind its compute. */
typedef struct {
    int valid;
    fg_unit u;
    uint64_t attn;    /* the command that wrote its cache rows on the GPU (0: none there) */
    uint64_t last;    /* its last compute */
} fg_pending_store;

typedef struct fg_sampler fg_sampler;

/* A pipeline rank's side of the ring (fg_pipe.c): hidden states in from
 * the rank before and out to the next through two shm buffers each (the
 * plan's ring_in, ring_out), used in turn; the last rank's sampled ids to
 * rank 0. Messages go in schedule order, which every rank shares, so
 * message m of a block is the m-th a rank sends and the m-th its next
 * receives. P == 1: no ring, every function returns at once. */
typedef struct {
    int P, r;                      /* ranks, this rank */
    int Kg;                        /* GPU batches per group: a block is P groups, each in flight on one stage */
    uint64_t out_copy[2];          /* the COPY filling out buffer b, until its send is posted (0: none) */
    uint64_t out_n[2];
    fg_ring_req out_req[2];
    long out_next, out_posted;     /* this block's messages copied out, and posted (in order: MPI keeps
                                      the order of posting); message m uses buffer m % 2 */
    fg_ring_req in_req[2];
    uint64_t in_read[2];           /* the COPY out of in buffer b */
    long in_next, in_posted, in_total;   /* this block's messages: next to take, receives posted, all */
    int32_t *ids_buf;              /* (K*B) the last rank: each batch's ids in flight to rank 0 */
    fg_ring_req *ids_req;          /* (K) */
    uint64_t *ids_copy;            /* (K) rank 0: the COPY of a batch's ids to the device */
    /* figures for the report */
    uint64_t sent, recvd;
    long msgs;
    double wait_s;                 /* blocked on the ring: the pipeline's bubble, seen from this rank */
} fg_pipe;

typedef struct {
    fg_plan pl;
    fg_cmdq q;
    fg_pipe pipe;
    fg_sampler *sm;                /* the block's, while one runs */
    int block_G;                   /* the tokens the running block generates (<= pl.G) */
    fg_super *sup;
    uint32_t seg_idx[NSEG];        /* shm segments' indices */
    fg_wsrc *ws;
    int restarted;                 /* the gpu worker was restarted: the block is redone */
    int progress;                  /* stderr is a terminal */
    char spill[FG_MSG_PATH_MAX + 1];   /* the run's file for disk-tier cache and activations */
    int spill_fd;                      /* holds the spill file's lock (fg_spill.c); -1: none */
    fg_store *store;               /* the tier store of disk-tier weights */
    int *store_file;               /* (nspec) disk tier: its store file (layer or FG_STORE_GLOBALS) */
    uint64_t *store_off;           /* (nspec) offset in it */
    uint64_t *store_sum;           /* (nspec) its checksum */
    uint8_t *store_checked;        /* (nspec) verified once this run */
    uint64_t *xstore_off, *xstore_sum;   /* (L*FG_PLAN_STACKS*E) a disk-tier expert in its layer's file */
    uint8_t *xstore_checked;       /* (L*FG_PLAN_STACKS*E) */
    /* experts, for the report: per token (gen_len), the experts loaded
     * (summed over sparse layers and blocks) and the bytes that moved them */
    fg_expert_stats xs;
    uint8_t *xall;                 /* (E) all ones: every expert (FG_EXPERTS_ALL) */
    uint8_t *xwant;                /* (E) scratch: the experts a batch routed to */
    /* the slots */
    fg_wslot w[FG_NSLOTS];
    int cur_slot;                  /* the weight slot of the group computing */
    fg_pslot par[FG_NSLOTS];
    fg_pending_store ps;           /* the last computed unit's stores, not yet issued */
    /* sampling: one batch at a time behind the LM heads still computing */
    float *samp_max_t, *samp_min_p;   /* (K) per batch: SAMPLE's bounds on its rows' settings */
    uint64_t *sampled_copy;        /* (K) per batch: the copy out of its logits and sampled ids */
    /* batches whose LM head went out, not yet recorded: a FIFO ring of at
     * most K (batch, token) pairs from unrecorded_head */
    int *unrecorded_batch, *unrecorded_token, unrecorded_head, unrecorded_len;
} fg_engine;

/* The engine sent n commands since the queue counted `before`: the number
 * fg_unit_cmds.h gives the cost model for that piece of a unit. */
static inline void fg_cmds_issued(const fg_engine *e, long before, int n) { FG_ASSERT(e->q.commands - before == n); }

/* Handles of plan locations; device locations get FG_SEG_DEVICE. */
fg_shm_handle fg_engine_handle(const fg_engine *e, fg_loc l);
void *fg_engine_ptr(fg_engine *e, fg_loc l);   /* shm locations only */

/* The weight group of schedule layer j: -1 (model-level) for the
 * embedding and the head, else the decoder layer. */
static inline int fg_group_of(const fg_plan *pl, int j) { return j == 0 || j == pl->L + 1 ? -1 : j - 1; }

/* The step params of a unit's ops. */
fg_op_step fg_unit_step(const fg_engine *e, const fg_unit *u);
/* The unit's hidden state on the device (its home on the GPU tier, or the
 * slot of its parity). */
fg_loc fg_unit_hidden(const fg_engine *e, const fg_unit *u);
/* CPU attention for this unit: decode, a CPU-tier cache, cpu_cache_compute. */
int fg_unit_cpu_attn(const fg_plan *pl, const fg_unit *u);

/* ---- fg_moves.c ---- */
/* The device handle of spec idx while its group sits in weight slot s. */
fg_shm_handle fg_weight_handle(const fg_engine *e, int idx, int s);
/* Spec idx's bytes in shared memory, for the cpu worker: a GPU-tier
 * tensor's host copy, a CPU one's home, a disk one in slot s's stage. */
fg_loc fg_weight_host(const fg_engine *e, int idx, int s);
/* Make slot s (holding sparse layer l, split: xview) hold every expert with
 * want[e] set, loading those it does not hold yet from their homes (disk
 * ones through the stage, waited for here). *d gets the last COPY. */
fg_status fg_load_experts(fg_engine *e, int s, int l, const uint8_t *want, fg_deps *d);
/* Start loading group into slot s, for token `token` of the block (what
 * the report counts its bytes to: a prefetch may belong to the next). */
fg_status fg_load_weight(fg_engine *e, int group, int s, int token);
fg_status fg_weight_ready(fg_engine *e, int s, fg_deps *d); /* finish slot s's load; d waits for it */
fg_status fg_weight_poll(fg_engine *e, int s);              /* issue slot s's COPY if its disk reads are in */
fg_status fg_load_cache(fg_engine *e, const fg_unit *u, fg_deps *d);
fg_status fg_load_hidden(fg_engine *e, const fg_unit *u, fg_deps *d);
fg_status fg_store_cache(fg_engine *e, const fg_pending_store *ps);
fg_status fg_store_hidden(fg_engine *e, const fg_pending_store *ps);

/* ---- fg_compute.c ---- */
/* Queue unit u's ops behind d with its weights in slot s; *ps gets its stores. */
fg_status fg_compute(fg_engine *e, const fg_unit *u, int s, const fg_deps *d, fg_pending_store *ps);
/* DEVICE_INIT's params for the plan. */
fg_op_init fg_device_init_params(const fg_plan *pl);

/* ---- fg_sampler.c ---- */
struct fg_sampler {
    const fg_seq_in *in;
    int n, first, G;
    const fg_gen_opts *opt;
    fg_seq_out *out;
    uint8_t *done;            /* (K*B) a sequence has ended */
    fg_gen_stats *stats;
    double t_mark;            /* when the last token was complete (or the block began) */
    uint64_t rd_mark_bytes;   /* the command queue's disk read figures then */
    double rd_mark_s;
};

/* The block's inputs to the device: prompts left-padded per batch, masks,
 * each sequence's generator. S_k (K) gets each batch's padded length. */
fg_status fg_block_inputs(fg_engine *e, fg_sampler *sm, int *S_k);
/* Batch k's LM head of token i went out: record it once its copy is in. */
void fg_sample_enqueue(fg_engine *e, int i, int k);
/* Record the batches whose logits are out already, oldest first; never waits. */
fg_status fg_sample_ready(fg_engine *e, fg_sampler *sm);
/* Record, waiting, the batches up to and including batch k (-1: all). */
fg_status fg_sample_until(fg_engine *e, fg_sampler *sm, int k);

/* fg_spill.c: remove the spill files of runs that are gone from dir, then
 * create `path` and lock it for this run (*fd holds the lock; close it after
 * unlinking the file). */
fg_status fg_spill_claim(const char *dir, const char *path, int *fd);

/* ---- fg_pipe.c ---- */
void fg_pipe_init(fg_engine *e);
void fg_pipe_free(fg_engine *e);
/* Unit u takes its hidden state from the rank before / gives it to the next. */
static inline int fg_pipe_recvs(const fg_engine *e, const fg_unit *u) {
    return e->pipe.P > 1 && !e->pl.st.embed && u->j == e->pl.st.lo + 1;
}
static inline int fg_pipe_sends(const fg_engine *e, const fg_unit *u) {
    return e->pipe.P > 1 && !e->pl.st.head && u->j == e->pl.st.hi;
}
fg_status fg_pipe_block_start(fg_engine *e);
/* Without blocking: post the sends whose copies ended, the receives whose
 * buffers are free. */
fg_status fg_pipe_poll(fg_engine *e);
/* The next hidden state from the rank before (n bytes, unit u): *src gets
 * the shm buffer it is in; fg_pipe_took() names the COPY reading it. */
fg_status fg_pipe_take_hidden(fg_engine *e, const fg_unit *u, uint64_t n, fg_loc *src);
void fg_pipe_took(fg_engine *e, uint64_t copy);
/* Unit ps->u's hidden state to the next rank, behind its compute. */
fg_status fg_pipe_send_hidden(fg_engine *e, const fg_pending_store *ps);
/* Rank 0, an embedding after the prefill: the ids the last rank sampled
 * for its batch onto the device; ld gets the COPY. */
fg_status fg_pipe_load_ids(fg_engine *e, const fg_unit *u, fg_deps *ld);
/* The last rank: token i's ids of batch k just recorded, to rank 0. */
fg_status fg_pipe_send_ids(fg_engine *e, int i, int k);
/* The block's messages are all out; the last rank's outputs of prompts
 * first..first+count-1 reach rank 0. */
fg_status fg_pipe_block_end(fg_engine *e, fg_seq_out *out, int first, int count);

#endif

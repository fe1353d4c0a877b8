/* fg_engine_flex.c - the offloading engine (see fg_engine_flex.h).
 *
 * Plan: every tensor gets a home by the policy (device arena for the GPU
 * tier, shared memory for the CPU tier) and, when it is not on the GPU, a
 * place in one of two device slots it is loaded into before use (weights
 * per layer, KV cache and activations per GPU batch). The plan is computed
 * once, by plan_build(), before anything runs: budgets are checked against
 * it and refused with the numbers.
 *
 * Schedule (zig-zag, DESIGN.md §5): for each token, for each layer (the
 * embedding and the LM head count as layers), the layer's weights are
 * loaded once and serve all GPU batches of the block; `--schedule row` runs
 * one batch through all layers instead, loading each layer for every batch.
 * Commands are issued to the workers in schedule order; the workers report
 * each command's start, end and busy time.
 *
 * Overlap: the gpu worker runs three streams (compute, host-to-device and
 * device-to-host copies); with overlap on, the next group's weights and the
 * next batch's cache and hidden state are loaded while the current unit
 * computes, and stores run behind the compute. The coordinator waits only
 * where a command needs another's result or a slot is about to be reused.
 *
 * Disk tier: weights placed on disk are read from the tier store (converted
 * once into --offload-dir) by the disk worker into a stage in shared memory,
 * then copied to the device with the group's CPU-tier tensors.
 * The KV cache and activations placed on disk live in one spill file per
 * run in --offload-dir (aligned offsets per layer and batch), moved through
 * stages in shared memory; only a step's new cache rows are written (from
 * the 4096-byte boundary below them, as O_DIRECT needs). */
#include "fg_engine_flex.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fg_engine_ops.h"
#include "fg_opt.h"
#include "fg_store.h"
#include "fg_super.h"

/* ---- plan ---------------------------------------------------------------- */

/* SEG_SPILL is no memory: offsets in the run's spill file in --offload-dir,
 * where disk-tier KV cache and activations live. */
enum { SEG_DEV, SEG_W, SEG_WGPU, SEG_KV, SEG_ACT, SEG_IO, SEG_STAGE, SEG_SPILL, NSEG };
static const char *seg_name[NSEG] = {"device", "w", "wgpu", "kv", "act", "io", "stage", "spill"};
#define NSHM SEG_SPILL   /* segments 1..NSHM-1 are shared memory */

typedef struct {
    int seg;
    uint64_t off, n;
} loc;

typedef struct {
    const fg_opt_config *c;
    const fg_spec *sp;
    fg_policy p;
    int L, K, gbs, S, G, Tmax;
    uint64_t used[NSEG];          /* bump allocator per segment */

    fg_tier *wtier;               /* (nspec) */
    loc *whome;                   /* (nspec) device (GPU) or SEG_W (CPU) */
    loc *wsrc;                    /* (nspec) SEG_WGPU host copy of GPU-resident weights */
    uint64_t *wslot_off;          /* (nspec) offset inside a weight slot */
    uint64_t wslot_bytes;
    loc wslot[2];
    loc wstage[2];                /* shared memory the disk worker reads disk-tier weights into */
    int any_disk;
    int *wfile;                   /* (nspec) disk tier: store file (layer or FG_STORE_GLOBALS) */
    uint64_t *wfoff;              /* (nspec) and offset in it */
    uint64_t *wsum;               /* (nspec) and its XXH64 */
    uint8_t *wchecked;            /* (nspec) verified once this run */

    fg_tier *ctier;               /* (L) */
    loc *kc, *vc;                 /* (L*K) home of each (layer, batch) cache */
    loc kslot[2], vslot[2];       /* device slots for off-GPU cache */
    loc kstage[2], vstage[2];     /* shared memory between disk and device for disk-tier cache */

    fg_tier atier;
    loc *hhome;                   /* (K) */
    loc hslot[2];                 /* device slots when activations live off the GPU */
    loc hstage[2];                /* shared memory between disk and device, activations on disk */

    loc *ids_dev, *mask_dev, *ids_io, *mask_io, *logits_io;   /* (K) */
    loc *rng_dev, *rng_io;         /* (K): each sequence's generator state */
    loc logits_dev[2];
    loc q_dev, k_dev, v_dev, ctx_dev, q_io, k_io, v_io, ctx_io;   /* CPU attention exchange */
    uint64_t ws_bytes;
} plan;

static loc place(plan *pl, int seg, uint64_t n) {
    uint64_t start = seg == SEG_DEV ? 0 : FG_SHM_HEADER_BYTES;
    uint64_t off = pl->used[seg] < start ? start : pl->used[seg];
    off = (off + 4095) & ~(uint64_t)4095;
    pl->used[seg] = off + n;
    return (loc){seg, off, n};
}

static void plan_free(plan *pl) {
    free(pl->wtier); free(pl->whome); free(pl->wsrc); free(pl->wslot_off); free(pl->wfile); free(pl->wfoff); free(pl->wsum); free(pl->wchecked);
    free(pl->ctier); free(pl->kc); free(pl->vc); free(pl->hhome);
    free(pl->ids_dev); free(pl->mask_dev); free(pl->ids_io); free(pl->mask_io); free(pl->logits_io);
    free(pl->rng_dev); free(pl->rng_io);
    memset(pl, 0, sizeof *pl);
}

static const char *human(uint64_t b, char *buf) {
    if (b >= (1ull << 30)) sprintf(buf, "%.2f GiB", b / (double)(1ull << 30));
    else sprintf(buf, "%.1f MiB", b / (double)(1ull << 20));
    return buf;
}

static fg_status plan_build(plan *pl, const fg_opt_config *c, const fg_spec *sp, const fg_flex_opts *fo, int S, int G) {
    memset(pl, 0, sizeof *pl);
    const fg_policy *p = &fo->policy;
    pl->c = c, pl->sp = sp, pl->p = *p;
    pl->L = c->n_layers, pl->K = p->num_gpu_batches, pl->gbs = p->gbs, pl->S = S, pl->G = G, pl->Tmax = S + G;
    int n = fg_spec_count(c), L = pl->L, K = pl->K, B = pl->gbs, H = c->hidden;
    if (!(p->h_gpu == 100 || p->h_cpu == 100 || p->h_gpu + p->h_cpu == 0))
        return fg_err_set(FG_EINPUT, "--percent: activations must be all on one tier (HG HC = 100 0, 0 100 or 0 0), "
                                     "as in FlexGen");

    pl->wtier = fg_xcalloc((size_t)n, sizeof *pl->wtier);
    pl->whome = fg_xcalloc((size_t)n, sizeof *pl->whome);
    pl->wsrc = fg_xcalloc((size_t)n, sizeof *pl->wsrc);
    pl->wslot_off = fg_xcalloc((size_t)n, sizeof *pl->wslot_off);
    pl->wfile = fg_xcalloc((size_t)n, sizeof *pl->wfile);
    pl->wfoff = fg_xcalloc((size_t)n, sizeof *pl->wfoff);
    pl->wsum = fg_xcalloc((size_t)n, sizeof *pl->wsum);
    pl->wchecked = fg_xcalloc((size_t)n, 1);
    /* weights: homes, and offsets inside a slot for the non-GPU ones of each layer */
    for (int g = -1; g < L; g++) {
        int first = g < 0 ? 0 : fg_spec_layer(g, 0), count = g < 0 ? FG_GW_COUNT : FG_LW_COUNT;
        uint64_t slot = 0;
        for (int i = first; i < first + count; i++) {
            if (!sp[i].present) continue;
            uint64_t bytes = 2 * (uint64_t)fg_spec_numel(&sp[i]);
            pl->wtier[i] = fg_policy_weight_tier(p, c, sp, g, i);
            if (pl->wtier[i] == FG_TIER_GPU) {
                pl->whome[i] = place(pl, SEG_DEV, bytes);
                pl->wsrc[i] = place(pl, SEG_WGPU, bytes);
            } else {
                if (pl->wtier[i] == FG_TIER_CPU) pl->whome[i] = place(pl, SEG_W, bytes);
                else pl->whome[i] = (loc){SEG_STAGE, 0, bytes}, pl->any_disk = 1;   /* offset: its slot place */
                slot = (slot + 4095) & ~(uint64_t)4095;
                pl->wslot_off[i] = slot;
                slot += bytes;
            }
        }
        if (slot > pl->wslot_bytes) pl->wslot_bytes = slot;
    }
    for (int s = 0; s < 2; s++) pl->wslot[s] = place(pl, SEG_DEV, pl->wslot_bytes);
    if (pl->any_disk)
        for (int s = 0; s < 2; s++) pl->wstage[s] = place(pl, SEG_STAGE, pl->wslot_bytes);

    /* KV cache: whole layers; one (Tmax, gbs, H) fp16 block per (layer, batch) */
    uint64_t cbytes = 2ull * pl->Tmax * B * H;
    pl->ctier = fg_xcalloc((size_t)L, sizeof *pl->ctier);
    pl->kc = fg_xcalloc((size_t)L * K, sizeof *pl->kc);
    pl->vc = fg_xcalloc((size_t)L * K, sizeof *pl->vc);
    int any_cpu_cache = 0, any_disk_cache = 0;
    static const int cache_seg[FG_NTIERS] = {SEG_DEV, SEG_KV, SEG_SPILL};
    for (int l = 0; l < L; l++) {
        pl->ctier[l] = fg_policy_cache_tier(p, c, l);
        any_cpu_cache |= pl->ctier[l] == FG_TIER_CPU;
        any_disk_cache |= pl->ctier[l] == FG_TIER_DISK;
        for (int k = 0; k < K; k++) {
            pl->kc[l * K + k] = place(pl, cache_seg[pl->ctier[l]], cbytes);
            pl->vc[l * K + k] = place(pl, cache_seg[pl->ctier[l]], cbytes);
        }
    }
    if (any_cpu_cache || any_disk_cache)
        for (int s = 0; s < 2; s++) pl->kslot[s] = place(pl, SEG_DEV, cbytes), pl->vslot[s] = place(pl, SEG_DEV, cbytes);
    if (any_disk_cache)
        for (int s = 0; s < 2; s++) pl->kstage[s] = place(pl, SEG_STAGE, cbytes), pl->vstage[s] = place(pl, SEG_STAGE, cbytes);

    /* activations: the hidden state of each batch between layers */
    uint64_t hbytes = 2ull * B * S * H;
    pl->atier = p->h_gpu == 100 ? FG_TIER_GPU : p->h_cpu == 100 ? FG_TIER_CPU : FG_TIER_DISK;
    pl->hhome = fg_xcalloc((size_t)K, sizeof *pl->hhome);
    static const int act_seg[FG_NTIERS] = {SEG_DEV, SEG_ACT, SEG_SPILL};
    for (int k = 0; k < K; k++) pl->hhome[k] = place(pl, act_seg[pl->atier], hbytes);
    if (pl->atier != FG_TIER_GPU)
        for (int s = 0; s < 2; s++) pl->hslot[s] = place(pl, SEG_DEV, hbytes);
    if (pl->atier == FG_TIER_DISK)
        for (int s = 0; s < 2; s++) pl->hstage[s] = place(pl, SEG_STAGE, hbytes);

    /* per-batch inputs and outputs */
    pl->ids_dev = fg_xcalloc((size_t)K, sizeof(loc)); pl->mask_dev = fg_xcalloc((size_t)K, sizeof(loc));
    pl->ids_io = fg_xcalloc((size_t)K, sizeof(loc)); pl->mask_io = fg_xcalloc((size_t)K, sizeof(loc));
    pl->logits_io = fg_xcalloc((size_t)K, sizeof(loc));
    pl->rng_dev = fg_xcalloc((size_t)K, sizeof(loc)); pl->rng_io = fg_xcalloc((size_t)K, sizeof(loc));
    for (int k = 0; k < K; k++) {
        pl->rng_dev[k] = place(pl, SEG_DEV, 8ull * B);
        pl->rng_io[k] = place(pl, SEG_IO, 8ull * B);
        pl->ids_dev[k] = place(pl, SEG_DEV, 4ull * B * S);
        pl->mask_dev[k] = place(pl, SEG_DEV, (uint64_t)B * pl->Tmax);
        pl->ids_io[k] = place(pl, SEG_IO, 4ull * B * S);
        pl->mask_io[k] = place(pl, SEG_IO, (uint64_t)B * pl->Tmax);
        pl->logits_io[k] = place(pl, SEG_IO, 4ull * B * c->vocab_size);
    }
    for (int q = 0; q < 2; q++) pl->logits_dev[q] = place(pl, SEG_DEV, 4ull * B * c->vocab_size);
    if (p->cpu_cache_compute && any_cpu_cache) {
        uint64_t x = 2ull * B * H;   /* decode: one new token per sequence */
        pl->q_dev = place(pl, SEG_DEV, x), pl->k_dev = place(pl, SEG_DEV, x);
        pl->v_dev = place(pl, SEG_DEV, x), pl->ctx_dev = place(pl, SEG_DEV, x);
        pl->q_io = place(pl, SEG_IO, x), pl->k_io = place(pl, SEG_IO, x);
        pl->v_io = place(pl, SEG_IO, x), pl->ctx_io = place(pl, SEG_IO, x);
    }
    /* the backend's fp32 workspace: fg_opt's buffers and the step's hidden
     * state in fp32 (gpu_worker/backend_host.c) */
    pl->ws_bytes = fg_opt_ws_bytes(c, B * S) + 4ull * B * S * H + 8ull * c->vocab_size;   /* + SAMPLE's scratch */

    uint64_t gpu = pl->used[SEG_DEV] + pl->ws_bytes, shm = 0;
    for (int s = 1; s < NSHM; s++) shm += pl->used[s];
    char a[32], b[32];
    if (fo->gpu_mem && gpu > fo->gpu_mem)
        return fg_err_set(FG_EINPUT, "the policy needs %s of GPU memory (weights, cache and activations placed "
                                     "there, two weight slots of %s, workspace %s) but --gpu-mem is %s; lower the GPU "
                                     "percentages or the batch size", human(gpu, a), human(pl->wslot_bytes, b),
                          human(pl->ws_bytes, (char[32]){0}), human(fo->gpu_mem, (char[32]){0}));
    if (fo->cpu_mem && shm > fo->cpu_mem)
        return fg_err_set(FG_EINPUT, "the policy needs %s of CPU memory (shared memory for CPU-tier weights, cache, "
                                     "activations and staging) but --cpu-mem is %s", human(shm, a), human(fo->cpu_mem, b));
    return FG_OK;
}

/* ---- running commands ------------------------------------------------------ */

/* Streams of the gpu worker: commands of one run in order, the three side
 * by side (fg_msg.h), as a GPU's compute stream and its two copy engines. */
enum { ST_COMPUTE = 0, ST_H2D = 1, ST_D2H = 2 };

typedef struct {
    uint64_t seq;
    fg_role role;
    int type, op, stream, layer, batch;
} pending;

/* One finished command, for --trace. */
typedef struct {
    uint64_t start_ns, end_ns;
    int role, stream, type, op, layer, batch;
} trace_ev;

typedef struct {
    int i, j, k, S_k;   /* token, schedule layer, batch, the batch's prompt length */
} unit;

typedef struct {
    int valid;
    unit u;
    uint64_t attn, last;   /* its attention (0: none on the GPU) and last compute */
} pend_store;

typedef struct {
    plan pl;
    fg_super *sup;
    uint32_t seg_idx[NSEG];
    fg_wsrc *ws;
    fg_flex_stats *fs;
    int overlap;
    int restarted;
    pending *pend;                 /* submitted, not yet awaited */
    size_t npend, cappend;
    trace_ev *ev;                  /* --trace: every finished command */
    size_t nev, capev;
    int tracing;
    int progress;                  /* stderr is a terminal */
    /* hazards on double-buffered device slots: the last command touching each */
    int wgroup[2];                 /* weight group a slot holds (-2: none) */
    uint64_t wload[2], wuse[2];    /* its load; the last compute reading it */
    uint64_t wfree[2];             /* the computes the next load into a slot waits for */
    int slot, gcur;                /* the weight slot and group in use (gcur -3: none) */
    uint64_t kvbusy[2], kvbusy2[2], hbusy[2], lgbusy[2];
    char spill[FG_MSG_PATH_MAX + 1];   /* the run's file for disk-tier cache and activations */
    /* disk-tier weights: reads into a stage slot, then one COPY to the device */
    fg_store *store;
    uint64_t wdisk[2][FG_LW_COUNT];
    int nwdisk[2], h2d_pending[2];
    uint64_t stagebusy[2];
    pend_store ps;                 /* stores of the last computed unit, not yet issued */
    /* sampling, one batch at a time behind the LM heads still computing */
    uint64_t *lgcopy;              /* per batch: the copy out of its logits and sampled ids */
    float temperature, top_p;      /* the sampler, run on the gpu worker */
    int *sq_k, *sq_i, sq_head, sq_len;   /* batches whose LM head went out, not yet sampled (FIFO,
                                            at most K), and their tokens */
} engine;

static fg_shm_handle H(const engine *e, loc l) {
    return (fg_shm_handle){.segment = l.seg == SEG_DEV ? FG_SEG_DEVICE : e->seg_idx[l.seg], .offset = l.off,
                           .nbytes = l.n};
}

static fg_shm_handle Hsub(const engine *e, loc l, uint64_t off, uint64_t n) {
    fg_shm_handle h = H(e, l);
    h.offset += off;
    h.nbytes = n;
    return h;
}

static void *P(engine *e, loc l) { return fg_super_ptr(e->sup, H(e, l)); }

/* Wait for command seq (0: nothing) and account for it. */
static fg_status await(engine *e, uint64_t seq) {
    if (!seq) return FG_OK;
    size_t i = 0;
    while (i < e->npend && e->pend[i].seq != seq) i++;
    if (i == e->npend) return FG_OK;   /* awaited before */
    pending pd = e->pend[i];
    fg_role role = pd.role;
    e->pend[i] = e->pend[--e->npend];
    fg_super_done d;
    fg_status st = fg_super_wait(e->sup, seq, -1, &d);
    e->fs->busy_s[role] += (double)(d.end_ns - d.start_ns) * 1e-9;
    if (e->tracing && !st) {
        if (e->nev == e->capev) {
            e->capev = e->capev ? 2 * e->capev : 1024;
            e->ev = realloc(e->ev, e->capev * sizeof *e->ev);
            FG_ASSERT(e->ev);
        }
        e->ev[e->nev++] = (trace_ev){d.start_ns, d.end_ns, role, pd.stream, pd.type, pd.op, pd.layer, pd.batch};
    }
    if (st) return fg_err_set(FG_ERUNTIME, "%s worker: %s", fg_role_name(role), d.error[0] ? d.error : fg_err_msg());
    return FG_OK;
}

static fg_status await_all(engine *e) {
    fg_status st = FG_OK;
    while (e->npend) {
        fg_status s2 = await(e, e->pend[e->npend - 1].seq);
        if (!st) st = s2;
    }
    return st;
}

/* Submit on a stream; without overlap, wait for it at once. *seq gets its
 * number (0 if nothing was sent). */
static fg_status submit(engine *e, fg_role role, fg_msg *m, int stream, uint64_t *seq) {
    if (seq) *seq = 0;
    m->flags |= (uint32_t)stream << FG_MSG_STREAM_SHIFT;
    uint64_t s;
    fg_status st = fg_super_submit(e->sup, role, m, NULL, &s);
    if (st) return st;
    if (e->npend == e->cappend) {
        e->cappend = e->cappend ? 2 * e->cappend : 64;
        e->pend = realloc(e->pend, e->cappend * sizeof *e->pend);
        FG_ASSERT(e->pend);
    }
    int is_cmp = m->type == FG_MSG_COMPUTE || m->type == FG_MSG_CPU_ATTN;
    e->pend[e->npend++] = (pending){s, role, m->type, is_cmp ? (int)m->u.compute.op : -1, stream,
                                    is_cmp ? (int)m->u.compute.layer : -1, is_cmp ? (int)m->u.compute.gpu_batch : -1};
    e->fs->commands++;
    if (m->type == FG_MSG_COPY)
        for (uint32_t i = 0; i < m->u.copy.n; i++) {
            if (m->u.copy.dst[i].segment == FG_SEG_DEVICE) e->fs->h2d_bytes += m->u.copy.dst[i].nbytes;
            else e->fs->d2h_bytes += m->u.copy.dst[i].nbytes;
        }
    if (seq) *seq = s;
    return e->overlap ? FG_OK : await(e, s);
}

/* What a gpu command waits for: per gpu stream, the latest command. The gpu
 * worker holds the command until they end (the message's `after`), so the
 * coordinator queues it at once; a command of the disk or cpu worker cannot
 * be waited for there, so need() waits for it here. */
typedef struct {
    uint64_t s[3];
} deps;

static fg_status need(engine *e, deps *d, uint64_t seq) {
    if (!seq) return FG_OK;
    for (size_t i = 0; i < e->npend; i++)
        if (e->pend[i].seq == seq) {
            if (e->pend[i].role != FG_ROLE_GPU) return await(e, seq);
            int t = e->pend[i].stream;
            if (seq > d->s[t]) d->s[t] = seq;
            return FG_OK;
        }
    return FG_OK;   /* awaited before */
}

/* Submit a gpu command on stream t behind d: its own stream keeps order by
 * itself, the other two streams' commands go into `after`. */
static fg_status submit_gpu(engine *e, fg_msg *m, int t, const deps *d, uint64_t *seq) {
    int n = 0;
    for (int q = 0; q < 3; q++)
        if (q != t && d && d->s[q]) m->after[n++] = d->s[q];
    return submit(e, FG_ROLE_GPU, m, t, seq);
}

static void merge(deps *a, const deps *b) {
    for (int t = 0; t < 3; t++)
        if (b->s[t] > a->s[t]) a->s[t] = b->s[t];
}

static fg_status copy_dep(engine *e, fg_shm_handle src, fg_shm_handle dst, const deps *d, uint64_t *seq) {
    if (seq) *seq = 0;
    if (!src.nbytes) return FG_OK;
    fg_msg m;
    fg_msg_init(&m, FG_MSG_COPY);
    fg_msg_copy_add(&m, src, dst);
    return submit_gpu(e, &m, dst.segment == FG_SEG_DEVICE ? ST_H2D : ST_D2H, d, seq);
}

static fg_status copy1(engine *e, fg_shm_handle src, fg_shm_handle dst, uint64_t *seq) {
    return copy_dep(e, src, dst, NULL, seq);
}

/* Copy and wait. */
static fg_status copy_sync(engine *e, fg_shm_handle src, fg_shm_handle dst) {
    uint64_t s;
    fg_status st = copy1(e, src, dst, &s);
    return st ? st : await(e, s);
}

/* Spill file bytes [off, off + h.nbytes) to or from shared memory h. */
static fg_status spill_io(engine *e, int type, uint64_t off, fg_shm_handle h, uint64_t *seq) {
    fg_msg m;
    fg_msg_init(&m, type);
    m.u.disk.file_offset = off;
    m.u.disk.buf = h;
    memcpy(m.u.disk.path, e->spill, sizeof m.u.disk.path);
    return submit(e, FG_ROLE_DISK, &m, 0, seq);
}

static fg_op_model op_model(const fg_opt_config *c) {
    return (fg_op_model){(uint32_t)c->vocab_size, (uint32_t)c->hidden, (uint32_t)c->n_heads, (uint32_t)c->ffn_dim,
                         (uint32_t)c->max_pos, (uint32_t)c->word_embed_proj_dim, (uint32_t)c->pre_ln};
}

/* The device arena, and the GPU-resident weights uploaded from their host copy. */
static fg_status gpu_setup(engine *e) {
    const plan *pl = &e->pl;
    fg_msg m;
    fg_msg_init(&m, FG_MSG_COMPUTE);
    m.u.compute.op = FG_OP_DEVICE_INIT;
    m.flags = FG_MSG_F_BARRIER;   /* the arena changes under every stream */
    fg_op_init init = {.model = op_model(pl->c), .arena_bytes = pl->used[SEG_DEV],
                       .budget_bytes = pl->used[SEG_DEV] + pl->ws_bytes, .max_rows = (uint32_t)(pl->gbs * pl->S)};
    fg_msg_compute_set_params(&m, &init, sizeof init);
    uint64_t seq;
    fg_status st = submit(e, FG_ROLE_GPU, &m, ST_COMPUTE, &seq);
    if (!st) st = await(e, seq);
    for (int i = 0; !st && i < fg_spec_count(pl->c); i++)
        if (pl->sp[i].present && pl->wtier[i] == FG_TIER_GPU) st = copy1(e, H(e, pl->wsrc[i]), H(e, pl->whome[i]), NULL);
    if (!st) st = await_all(e);
    for (int q = 0; q < 2; q++) e->wgroup[q] = -2, e->h2d_pending[q] = 0, e->nwdisk[q] = 0;
    e->slot = 0, e->gcur = -3;
    return st;
}

/* A restarted gpu worker lost its arena: the block in progress is redone. */
static fg_status on_restore(fg_super *sup, fg_role role, void *ctx) {
    (void)sup;
    engine *e = ctx;
    if (role == FG_ROLE_GPU) {
        e->restarted = 1;
        e->fs->gpu_restarts++;
    }
    return FG_OK;
}

/* Handle of weight idx when its group sits in weight slot s. */
static fg_shm_handle W(const engine *e, int idx, int s) {
    const plan *pl = &e->pl;
    if (!pl->sp[idx].present) return (fg_shm_handle){.segment = FG_SEG_DEVICE, .offset = 0, .nbytes = 0};
    if (pl->wtier[idx] == FG_TIER_GPU) return H(e, pl->whome[idx]);
    return Hsub(e, pl->wslot[s], pl->wslot_off[idx], pl->whome[idx].n);
}

/* Weight group of schedule layer j: -1 (model-level) for the embedding and the head. */
static int group_of(const plan *pl, int j) { return j == 0 || j == pl->L + 1 ? -1 : j - 1; }

/* Make weight slot s hold group g. Disk-tier tensors are read by the disk
 * worker into the slot's stage in shared memory first; the COPY of the whole
 * group to the device (one command, host-to-device stream) follows when they
 * are in: at once without disk tensors, else from finish_load(). */
static fg_status finish_load(engine *e, int s);

static fg_status load_weights(engine *e, int g, int s) {
    const plan *pl = &e->pl;
    if (e->wgroup[s] == g) return FG_OK;
    int first = g < 0 ? 0 : fg_spec_layer(g, 0), count = g < 0 ? FG_GW_COUNT : FG_LW_COUNT;
    /* the COPY into the device slot waits for every compute reading it (on
     * the gpu worker, finish_load); the disk reads into the stage do not */
    e->wfree[s] = e->wuse[s];
    e->wuse[s] = e->wload[s] = 0;
    e->wgroup[s] = -2;
    fg_status st = FG_OK;
    e->nwdisk[s] = 0;
    for (int i = first; i < first + count && !st; i++) {
        if (!pl->sp[i].present || pl->wtier[i] != FG_TIER_DISK) continue;
        if (!e->nwdisk[s] && (st = await(e, e->stagebusy[s]))) break;   /* the stage's last COPY out */
        fg_msg m;
        fg_msg_init(&m, FG_MSG_DISK_READ);
        m.u.disk.file_offset = pl->wfoff[i];
        m.u.disk.buf = Hsub(e, pl->wstage[s], pl->wslot_off[i], pl->whome[i].n);
        snprintf(m.u.disk.path, sizeof m.u.disk.path, "%s", fg_store_path(e->store, pl->wfile[i]));
        st = submit(e, FG_ROLE_DISK, &m, 0, &e->wdisk[s][e->nwdisk[s]++]);
    }
    if (st) return st;
    e->wgroup[s] = g;
    e->h2d_pending[s] = 1;
    return e->nwdisk[s] ? FG_OK : finish_load(e, s);
}

static fg_status finish_load(engine *e, int s) {
    const plan *pl = &e->pl;
    if (!e->h2d_pending[s]) return FG_OK;
    fg_status st = FG_OK;
    for (int q = 0; q < e->nwdisk[s] && !st; q++) st = await(e, e->wdisk[s][q]);
    e->nwdisk[s] = 0;
    e->h2d_pending[s] = 0;
    if (st) return st;
    int g = e->wgroup[s], first = g < 0 ? 0 : fg_spec_layer(g, 0), count = g < 0 ? FG_GW_COUNT : FG_LW_COUNT;
    /* the first time a run reads a tensor from the store, its bytes are
     * checked against the store's checksum: corrupted weights are never used */
    for (int i = first; i < first + count; i++) {
        plan *mp = &e->pl;
        if (!pl->sp[i].present || pl->wtier[i] != FG_TIER_DISK || mp->wchecked[i]) continue;
        const void *p = fg_super_ptr(e->sup, Hsub(e, pl->wstage[s], pl->wslot_off[i], pl->whome[i].n));
        if (!p || fg_store_checksum(p, pl->whome[i].n) != pl->wsum[i]) {
            const char *path = fg_store_path(e->store, pl->wfile[i]);
            fg_store_invalidate(e->store, pl->wfile[i]);   /* the next run rebuilds it */
            return fg_err_set(FG_ERUNTIME, "%s: tensor '%s' at offset %llu does not match its checksum: the tier "
                                           "store is damaged (the file is removed and will be rebuilt on the next run)",
                              path, pl->sp[i].name, (unsigned long long)pl->wfoff[i]);
        }
        mp->wchecked[i] = 1;
    }
    fg_msg m;
    fg_msg_init(&m, FG_MSG_COPY);
    int from_stage = 0;
    for (int i = first; i < first + count; i++) {
        if (!pl->sp[i].present || pl->wtier[i] == FG_TIER_GPU) continue;
        fg_shm_handle src = pl->wtier[i] == FG_TIER_CPU ? H(e, pl->whome[i])
                                                        : Hsub(e, pl->wstage[s], pl->wslot_off[i], pl->whome[i].n);
        from_stage |= pl->wtier[i] == FG_TIER_DISK;
        fg_msg_copy_add(&m, src, W(e, i, s));
    }
    deps d = {{0}};
    if (m.u.copy.n && !(st = need(e, &d, e->wfree[s]))) st = submit_gpu(e, &m, ST_H2D, &d, &e->wload[s]);
    e->wfree[s] = 0;
    if (from_stage) e->stagebusy[s] = e->wload[s];
    return st;
}

/* Disk reads into slot s all in? Then its COPY can go without waiting. */
static fg_status poll_load(engine *e, int s) {
    if (!e->h2d_pending[s]) return FG_OK;
    for (int q = 0; q < e->nwdisk[s]; q++) {
        int t = fg_super_test(e->sup, e->wdisk[s][q]);
        if (t == 0) return FG_OK;
    }
    return finish_load(e, s);
}

static fg_op_step op_step(const engine *e, const unit *u) {
    fg_op_step s = {.model = op_model(e->pl.c), .B = (uint32_t)e->pl.gbs, .Tmax = (uint32_t)e->pl.Tmax,
                    .mask_stride = (uint32_t)e->pl.Tmax};
    s.S = u->i == 0 ? (uint32_t)u->S_k : 1;
    s.past = u->i == 0 ? 0 : (uint32_t)(u->S_k + u->i - 1);
    return s;
}

static void compute_msg(fg_msg *m, int op, const unit *u, const fg_op_step *st) {
    fg_msg_init(m, FG_MSG_COMPUTE);
    m->u.compute.op = (uint32_t)op;
    m->u.compute.layer = (uint32_t)u->j;
    m->u.compute.gpu_batch = (uint32_t)u->k;
    fg_msg_compute_set_params(m, st, sizeof *st);
}

/* Bytes of positions [0, t) of a time-major (Tmax, gbs, H) cache block. */
static uint64_t cache_rows(const plan *pl, int t) { return 2ull * t * pl->gbs * pl->c->hidden; }

/* The layer's cache lives off the GPU (CPU or disk) / on disk. */
static int cpu_cache(const plan *pl, int j) { return j >= 1 && j <= pl->L && pl->ctier[j - 1] != FG_TIER_GPU; }
static int disk_cache(const plan *pl, int j) { return j >= 1 && j <= pl->L && pl->ctier[j - 1] == FG_TIER_DISK; }
static int cpu_attn(const plan *pl, const unit *u) {
    return cpu_cache(pl, u->j) && !disk_cache(pl, u->j) && pl->p.cpu_cache_compute && u->i > 0;
}
static uint64_t hbytes(const engine *e, const unit *u) {
    fg_op_step st = op_step(e, u);
    return 2ull * st.B * st.S * e->pl.c->hidden;
}
static fg_shm_handle hdev(const engine *e, const unit *u) {
    const plan *pl = &e->pl;
    loc l = pl->atier == FG_TIER_GPU ? pl->hhome[u->k] : pl->hslot[u->k % 2];
    return Hsub(e, l, 0, hbytes(e, u));
}

/* The unit's inputs that live off the GPU, onto the device: its hidden state
 * (activations on the CPU) and its KV cache prefix (CPU cache, GPU
 * attention), into the slots of its batch's parity once they are free.
 * What the unit's compute must wait for (the copies, and the stores out of
 * the slots it writes) goes to *ld. */
static fg_status unit_loads(engine *e, const unit *u, deps *ld) {
    const plan *pl = &e->pl;
    int p = u->k % 2;
    fg_status st = FG_OK;
    *ld = (deps){{0}};
    if (pl->atier != FG_TIER_GPU) {   /* the slot is free once its last store ended */
        deps d = {{0}};
        if ((st = need(e, &d, e->hbusy[p]))) return st;
        e->hbusy[p] = 0;
        if (u->j > 0) {
            fg_shm_handle src = Hsub(e, pl->hhome[u->k], 0, hbytes(e, u));
            if (pl->atier == FG_TIER_DISK) {   /* disk -> stage, then stage -> device */
                uint64_t r;
                src = Hsub(e, pl->hstage[p], 0, hbytes(e, u));
                if ((st = spill_io(e, FG_MSG_DISK_READ, pl->hhome[u->k].off, src, &r)) || (st = await(e, r))) return st;
            }
            uint64_t q = 0;
            st = copy_dep(e, src, hdev(e, u), &d, &q);
            e->hbusy[p] = q;
            d.s[ST_H2D] = q;
        }
        merge(ld, &d);   /* the compute writes the slot: it waits for the store out of it too */
    }
    if (!st && cpu_cache(pl, u->j) && !cpu_attn(pl, u)) {
        fg_op_step s = op_step(e, u);
        deps d = {{0}};
        if ((st = need(e, &d, e->kvbusy[p])) || (st = need(e, &d, e->kvbusy2[p]))) return st;
        e->kvbusy[p] = e->kvbusy2[p] = 0;
        if (s.past > 0) {
            int l = u->j - 1;
            uint64_t nb = cache_rows(pl, (int)s.past);
            loc ksrc = pl->kc[l * pl->K + u->k], vsrc = pl->vc[l * pl->K + u->k];
            if (disk_cache(pl, u->j)) {   /* the prefix from disk into the stage first */
                uint64_t r1, r2;
                if ((st = spill_io(e, FG_MSG_DISK_READ, ksrc.off, Hsub(e, pl->kstage[p], 0, nb), &r1)) ||
                    (st = spill_io(e, FG_MSG_DISK_READ, vsrc.off, Hsub(e, pl->vstage[p], 0, nb), &r2)) ||
                    (st = await(e, r1)) || (st = await(e, r2)))
                    return st;
                ksrc = pl->kstage[p], vsrc = pl->vstage[p];
            }
            fg_msg c;
            fg_msg_init(&c, FG_MSG_COPY);
            fg_msg_copy_add(&c, Hsub(e, ksrc, 0, nb), Hsub(e, pl->kslot[p], 0, nb));
            fg_msg_copy_add(&c, Hsub(e, vsrc, 0, nb), Hsub(e, pl->vslot[p], 0, nb));
            uint64_t q = 0;
            st = submit_gpu(e, &c, ST_H2D, &d, &q);
            e->kvbusy[p] = q;
            d.s[ST_H2D] = q;
        }
        merge(ld, &d);
    }
    return st;
}

/* Compute unit u with its weights in slot s, behind `in` (its loads); its
 * stores are left in e->ps. */
static fg_status unit_compute(engine *e, const unit *u, int s, const deps *in) {
    const plan *pl = &e->pl;
    int k = u->k, p = k % 2, L = pl->L, K = pl->K, j = u->j;
    fg_op_step st = op_step(e, u);
    fg_shm_handle h = hdev(e, u), mask = H(e, pl->mask_dev[k]);
    fg_msg m;
    fg_status rc;
    uint64_t last = 0, attn = 0;
    deps d = *in;
    if (j == 0) {   /* ids: the prompts (block start) or what SAMPLE wrote behind the last LM head */
        compute_msg(&m, FG_OP_EMBED, u, &st);
        fg_msg_compute_add_in(&m, Hsub(e, pl->ids_dev[k], 0, 4ull * st.B * st.S));
        fg_msg_compute_add_in(&m, mask);
        fg_msg_compute_add_in(&m, W(e, FG_GW_EMBED_TOKENS, s));
        fg_msg_compute_add_in(&m, W(e, FG_GW_EMBED_POS, s));
        fg_msg_compute_add_in(&m, W(e, FG_GW_PROJ_IN, s));
        fg_msg_compute_add_out(&m, h);
        if ((rc = submit_gpu(e, &m, ST_COMPUTE, &d, &last))) return rc;
    } else if (j == L + 1) {
        /* the logits buffer of this parity, once its last copy out ended */
        if ((rc = need(e, &d, e->lgbusy[p]))) return rc;
        compute_msg(&m, FG_OP_LM_HEAD, u, &st);
        fg_msg_compute_add_in(&m, h);
        fg_msg_compute_add_in(&m, W(e, FG_GW_FINAL_LN_W, s));
        fg_msg_compute_add_in(&m, W(e, FG_GW_FINAL_LN_B, s));
        fg_msg_compute_add_in(&m, W(e, FG_GW_PROJ_OUT, s));
        fg_msg_compute_add_in(&m, W(e, FG_GW_EMBED_TOKENS, s));
        fg_msg_compute_add_out(&m, H(e, pl->logits_dev[p]));
        if ((rc = submit_gpu(e, &m, ST_COMPUTE, &d, &last))) return rc;
        e->wuse[s] = last;
        /* nothing is stored from its hidden-state slot: the next load into
         * the slot waits for this, its last reader (which itself waited for
         * the slot's load, and that for the store before it) */
        if (pl->atier != FG_TIER_GPU) e->hbusy[p] = last;
        /* the next ids, sampled where the logits are: the next token's
         * embedding of this batch follows on the compute stream */
        fg_msg_init(&m, FG_MSG_COMPUTE);
        m.u.compute.op = FG_OP_SAMPLE;
        m.u.compute.layer = (uint32_t)j;
        m.u.compute.gpu_batch = (uint32_t)k;
        fg_op_sample sp = {.step = st, .temperature = e->temperature, .top_p = e->top_p};
        sp.step.S = 1;
        fg_msg_compute_set_params(&m, &sp, sizeof sp);
        fg_msg_compute_add_in(&m, H(e, pl->logits_dev[p]));
        fg_msg_compute_add_in(&m, H(e, pl->rng_dev[k]));
        fg_msg_compute_add_out(&m, Hsub(e, pl->ids_dev[k], 0, 4ull * st.B));
        uint64_t smp;
        if ((rc = submit_gpu(e, &m, ST_COMPUTE, NULL, &smp))) return rc;
        /* logits and ids out for the coordinator to record */
        deps c = {{[ST_COMPUTE] = smp}};
        fg_msg cp;
        fg_msg_init(&cp, FG_MSG_COPY);
        fg_msg_copy_add(&cp, H(e, pl->logits_dev[p]), H(e, pl->logits_io[k]));
        fg_msg_copy_add(&cp, Hsub(e, pl->ids_dev[k], 0, 4ull * st.B), Hsub(e, pl->ids_io[k], 0, 4ull * st.B));
        rc = submit_gpu(e, &cp, ST_D2H, &c, &e->lgbusy[p]);
        e->lgcopy[k] = e->lgbusy[p];   /* recorded once that ends */
        return rc;
    } else {
        int l = j - 1;
        loc kh = pl->kc[l * K + k], vh = pl->vc[l * K + k];
        if (cpu_attn(pl, u)) {
            /* q, k, v on the GPU; attention on the cpu worker, where the cache is */
            uint64_t xb = 2ull * st.B * pl->c->hidden, q1;
            compute_msg(&m, FG_OP_ATTN_QKV, u, &st);
            fg_msg_compute_add_in(&m, h);
            static const int qkv_w[] = {FG_LW_Q_W, FG_LW_Q_B, FG_LW_K_W, FG_LW_K_B, FG_LW_V_W, FG_LW_V_B,
                                        FG_LW_LN1_W, FG_LW_LN1_B};
            for (size_t t = 0; t < 8; t++) fg_msg_compute_add_in(&m, W(e, fg_spec_layer(l, qkv_w[t]), s));
            fg_msg_compute_add_out(&m, H(e, pl->q_dev));
            fg_msg_compute_add_out(&m, H(e, pl->k_dev));
            fg_msg_compute_add_out(&m, H(e, pl->v_dev));
            if ((rc = submit_gpu(e, &m, ST_COMPUTE, &d, &q1))) return rc;
            deps dq = {{[ST_COMPUTE] = q1}};
            fg_msg c;
            fg_msg_init(&c, FG_MSG_COPY);
            fg_msg_copy_add(&c, Hsub(e, pl->q_dev, 0, xb), Hsub(e, pl->q_io, 0, xb));
            fg_msg_copy_add(&c, Hsub(e, pl->k_dev, 0, xb), Hsub(e, pl->k_io, 0, xb));
            fg_msg_copy_add(&c, Hsub(e, pl->v_dev, 0, xb), Hsub(e, pl->v_io, 0, xb));
            if ((rc = submit_gpu(e, &c, ST_D2H, &dq, &q1)) || (rc = await(e, q1))) return rc;
            fg_msg a;
            fg_msg_init(&a, FG_MSG_CPU_ATTN);
            a.u.compute.op = FG_OP_ATTN_CORE;
            a.u.compute.layer = (uint32_t)j;
            a.u.compute.gpu_batch = (uint32_t)k;
            fg_msg_compute_set_params(&a, &st, sizeof st);
            fg_msg_compute_add_in(&a, H(e, pl->q_io));
            fg_msg_compute_add_in(&a, H(e, pl->k_io));
            fg_msg_compute_add_in(&a, H(e, pl->v_io));
            fg_msg_compute_add_in(&a, H(e, kh));
            fg_msg_compute_add_in(&a, H(e, vh));
            fg_msg_compute_add_in(&a, H(e, pl->mask_io[k]));
            fg_msg_compute_add_out(&a, H(e, pl->ctx_io));
            if ((rc = submit(e, FG_ROLE_CPU, &a, 0, &q1)) || (rc = await(e, q1))) return rc;
            if ((rc = copy1(e, H(e, pl->ctx_io), H(e, pl->ctx_dev), &q1))) return rc;
            deps dc = {{[ST_H2D] = q1}};
            compute_msg(&m, FG_OP_ATTN_OUT, u, &st);
            fg_msg_compute_add_in(&m, h);
            fg_msg_compute_add_in(&m, H(e, pl->ctx_dev));
            static const int out_w[] = {FG_LW_O_W, FG_LW_O_B, FG_LW_LN1_W, FG_LW_LN1_B};
            for (size_t t = 0; t < 4; t++) fg_msg_compute_add_in(&m, W(e, fg_spec_layer(l, out_w[t]), s));
            fg_msg_compute_add_out(&m, h);
            if ((rc = submit_gpu(e, &m, ST_COMPUTE, &dc, NULL))) return rc;
        } else {
            /* attention and MLP as one command: half the round trips */
            int cg = !cpu_cache(pl, j);
            compute_msg(&m, FG_OP_LAYER, u, &st);
            fg_msg_compute_add_in(&m, h);
            fg_msg_compute_add_in(&m, mask);
            fg_msg_compute_add_in(&m, cg ? H(e, kh) : H(e, pl->kslot[p]));
            fg_msg_compute_add_in(&m, cg ? H(e, vh) : H(e, pl->vslot[p]));
            static const int layer_w[] = {FG_LW_Q_W,   FG_LW_Q_B,   FG_LW_K_W,   FG_LW_K_B,   FG_LW_V_W,
                                          FG_LW_V_B,   FG_LW_O_W,   FG_LW_O_B,   FG_LW_LN1_W, FG_LW_LN1_B,
                                          FG_LW_FC1_W, FG_LW_FC1_B, FG_LW_FC2_W, FG_LW_FC2_B, FG_LW_LN2_W,
                                          FG_LW_LN2_B};
            for (size_t t = 0; t < 16; t++) fg_msg_compute_add_in(&m, W(e, fg_spec_layer(l, layer_w[t]), s));
            fg_msg_compute_add_out(&m, h);
            if ((rc = submit_gpu(e, &m, ST_COMPUTE, &d, &attn))) return rc;
            last = attn;
        }
        if (!attn) {   /* the CPU-attention path: the MLP on its own */
            compute_msg(&m, FG_OP_MLP, u, &st);
            fg_msg_compute_add_in(&m, h);
            static const int mlp_w[] = {FG_LW_FC1_W, FG_LW_FC1_B, FG_LW_FC2_W, FG_LW_FC2_B, FG_LW_LN2_W, FG_LW_LN2_B};
            for (size_t t = 0; t < 6; t++) fg_msg_compute_add_in(&m, W(e, fg_spec_layer(l, mlp_w[t]), s));
            fg_msg_compute_add_out(&m, h);
            if ((rc = submit(e, FG_ROLE_GPU, &m, ST_COMPUTE, &last))) return rc;
        }
    }
    e->wuse[s] = last;
    /* the unit's stores (its new cache rows, its hidden state) wait for its
     * compute: the loop issues them once the next unit's compute is queued */
    e->ps = (pend_store){1, *u, attn, last};
    return FG_OK;
}

/* The stores of the unit computed last (e->ps): its new KV cache rows back
 * to a CPU- or disk-tier cache, its hidden state back to CPU or disk. Each
 * waits for that unit's compute. */
static fg_status unit_store(engine *e) {
    if (!e->ps.valid) return FG_OK;
    e->ps.valid = 0;
    const plan *pl = &e->pl;
    const unit *u = &e->ps.u;
    int k = u->k, p = k % 2, K = pl->K, j = u->j;
    uint64_t attn = e->ps.attn, last = e->ps.last;
    fg_op_step st = op_step(e, u);
    int act_gpu = pl->atier == FG_TIER_GPU;
    fg_shm_handle h = hdev(e, u);
    fg_status rc;
    if (j >= 1 && j <= pl->L) {
        int l = j - 1;
        loc kh = pl->kc[l * K + k], vh = pl->vc[l * K + k];
    if (attn && cpu_cache(pl, j)) {   /* store the step's new cache rows [past, past+S) */
        deps d = {{0}};
        if ((rc = need(e, &d, attn))) return rc;
        uint64_t o = cache_rows(pl, (int)st.past), nb = cache_rows(pl, (int)st.S);
        int dc = disk_cache(pl, j);
        loc kd = dc ? pl->kstage[p] : kh, vd = dc ? pl->vstage[p] : vh;
        fg_msg c;
        fg_msg_init(&c, FG_MSG_COPY);
        fg_msg_copy_add(&c, Hsub(e, pl->kslot[p], o, nb), Hsub(e, kd, o, nb));
        fg_msg_copy_add(&c, Hsub(e, pl->vslot[p], o, nb), Hsub(e, vd, o, nb));
        if ((rc = submit_gpu(e, &c, ST_D2H, &d, &e->kvbusy[p]))) return rc;
        if (dc) {
            /* then to disk: O_DIRECT wants an aligned start, so from the
             * 4096-byte boundary below the new rows (the stage holds the
             * prefix loaded for this step) */
            uint64_t a0 = o & ~(uint64_t)4095;
            if ((rc = await(e, e->kvbusy[p])) ||
                (rc = spill_io(e, FG_MSG_DISK_WRITE, kh.off + a0, Hsub(e, pl->kstage[p], a0, o + nb - a0),
                               &e->kvbusy[p])) ||
                (rc = spill_io(e, FG_MSG_DISK_WRITE, vh.off + a0, Hsub(e, pl->vstage[p], a0, o + nb - a0),
                               &e->kvbusy2[p])))
                return rc;
        }
    }
    }
    if (!act_gpu) {   /* the hidden state back to the CPU (or via the stage to disk) behind the compute */
        deps d = {{0}};
        if ((rc = need(e, &d, last))) return rc;
        int ad = pl->atier == FG_TIER_DISK;
        fg_shm_handle dst = Hsub(e, ad ? pl->hstage[p] : pl->hhome[k], 0, h.nbytes);
        if ((rc = copy_dep(e, h, dst, &d, &e->hbusy[p]))) return rc;
        if (ad && ((rc = await(e, e->hbusy[p])) ||
                   (rc = spill_io(e, FG_MSG_DISK_WRITE, pl->hhome[k].off, dst, &e->hbusy[p]))))
            return rc;
    }
    return FG_OK;
}

/* ---- a block of K GPU batches ----------------------------------------------- */

/* Account for every command that has ended, so the list of pending ones
 * stays short when nothing waits for them (stores, copies). */
static fg_status reap(engine *e) {
    for (size_t i = 0; i < e->npend;) {
        uint64_t q = e->pend[i].seq;
        if (fg_super_test(e->sup, q) == 1) {
            fg_status st = await(e, q);   /* moves the last entry into i */
            if (st) return st;
        } else {
            i++;
        }
    }
    return FG_OK;
}

typedef struct {
    const fg_seq_in *in;
    int n, first, G;
    const fg_gen_opts *opt;
    fg_seq_out *out;
    uint8_t *done;
    fg_gen_stats *stats;
    double t_mark;   /* when the last token was complete (or the block began) */
} sampler;

/* Record token i of batch k, sampled on the gpu worker, once it and the
 * logits are out. Runs while the next batches compute. */
static fg_status sample_batch(engine *e, sampler *sm, int i, int k) {
    const plan *pl = &e->pl;
    const fg_opt_config *c = pl->c;
    int B = pl->gbs, V = c->vocab_size, G = sm->G;
    fg_status st = await(e, e->lgcopy[k]);
    if (st) return st;
    const float *lg = P(e, pl->logits_io[k]);
    int32_t *ids = P(e, pl->ids_io[k]);
    for (int b = 0; b < B; b++) {
        int q = sm->first + k * B + b, r = k * B + b;
        const float *row = lg + (size_t)b * V;
        int tok = ids[b];
        if (q >= sm->n) continue;
        if (sm->opt->logits && (st = fg_npy_write(sm->opt->logits, ((int64_t)q * G + i) * V, row, (size_t)V)))
            return st;
        if (sm->done[r]) continue;
        fg_seq_out *o = &sm->out[q];
        o->ids[o->n++] = tok;
        if (!sm->opt->ignore_eos && tok == c->eos_id) o->finish = FG_FINISH_EOS, sm->done[r] = 1;
        else if (sm->opt->stop && sm->opt->stop(sm->opt->stop_ctx, q, o->ids, o->n))
            o->finish = FG_FINISH_STOP, sm->done[r] = 1;
    }
    if (k == pl->K - 1) {   /* token i is complete: its time, for the prefill/decode split */
        double now = fg_now();
        if (i == 0) sm->stats->prefill_s += now - sm->t_mark;
        else sm->stats->decode_s += now - sm->t_mark;
        sm->t_mark = now;
    }
    return FG_OK;
}

/* Has command seq ended? Awaited already (no longer pending here), or its
 * DONE is in. Never waits. */
static int has_ended(engine *e, uint64_t seq) {
    size_t i = 0;
    while (i < e->npend && e->pend[i].seq != seq) i++;
    return i == e->npend || fg_super_test(e->sup, seq) == 1;
}

/* Sample the batches whose logits are out already, oldest first, without
 * waiting: issuing the next commands never waits for a DONE to be delivered
 * (on a machine whose cores the compute fills, that can take a scheduler
 * slice). */
static fg_status sample_ready(engine *e, sampler *sm) {
    while (e->sq_len) {
        int t = e->sq_head;
        if (!has_ended(e, e->lgcopy[e->sq_k[t]])) break;
        e->sq_head = (t + 1) % e->pl.K, e->sq_len--;
        fg_status st = sample_batch(e, sm, e->sq_i[t], e->sq_k[t]);
        if (st) return st;
    }
    return FG_OK;
}

/* Sample, waiting, the batches up to and including batch k (-1: all). */
static fg_status sample_until(engine *e, sampler *sm, int k) {
    int found = k < 0;
    for (int q = 0; q < e->sq_len && !found; q++) found = e->sq_k[(e->sq_head + q) % e->pl.K] == k;
    while (found && e->sq_len) {
        int t = e->sq_head, kt = e->sq_k[t];
        e->sq_head = (t + 1) % e->pl.K, e->sq_len--;
        fg_status st = sample_batch(e, sm, e->sq_i[t], kt);
        if (st) return st;
        if (kt == k) break;
    }
    return FG_OK;
}

static fg_status run_block(engine *e, const fg_seq_in *in, int n, int first, const fg_gen_opts *opt,
                           const fg_flex_opts *fo, fg_seq_out *out, fg_gen_stats *stats) {
    const plan *pl = &e->pl;
    const fg_opt_config *c = pl->c;
    int K = pl->K, B = pl->gbs, G = pl->G, L = pl->L, Tm = pl->Tmax;
    int S_k[64];
    FG_ASSERT(K <= 64);
    fg_status st = FG_OK;
    /* inputs: each batch left-padded to its own longest prompt, as the
     * reference engine pads a batch; rows past the prompts are padding */
    for (int k = 0; k < K; k++) {
        int32_t *ids = P(e, pl->ids_io[k]);
        uint8_t *mask = P(e, pl->mask_io[k]);
        S_k[k] = 1;
        for (int b = 0; b < B; b++) {
            int q = first + k * B + b;
            if (q < n && in[q].len > S_k[k]) S_k[k] = in[q].len;
        }
        memset(mask, 0, (size_t)B * Tm);
        for (int b = 0; b < B; b++) {
            int q = first + k * B + b, len = q < n ? in[q].len : 1, pad = S_k[k] - len;
            for (int t = 0; t < S_k[k]; t++) ids[b * S_k[k] + t] = t < pad || q >= n ? c->pad_id : in[q].ids[t - pad];
            for (int t = pad; t < Tm; t++) mask[(size_t)b * Tm + t] = 1;
            if (q < n) {
                free(out[q].ids);
                out[q].ids = fg_xcalloc((size_t)(G ? G : 1), sizeof(int32_t));
                out[q].n = 0;
                out[q].finish = FG_FINISH_LENGTH;
            }
        }
        /* each sequence's generator, as the reference engine seeds it */
        uint64_t *rng = P(e, pl->rng_io[k]);
        for (int b = 0; b < B; b++) {
            fg_rng r;
            fg_rng_init(&r, opt->samp.seed, (uint64_t)(first + k * B + b));
            rng[b] = r.state;
        }
        if ((st = copy_sync(e, Hsub(e, pl->ids_io[k], 0, 4ull * B * S_k[k]), Hsub(e, pl->ids_dev[k], 0, 4ull * B * S_k[k]))) ||
            (st = copy_sync(e, H(e, pl->mask_io[k]), H(e, pl->mask_dev[k]))) ||
            (st = copy_sync(e, H(e, pl->rng_io[k]), H(e, pl->rng_dev[k]))))
            return st;
    }
    uint8_t *done = fg_xcalloc((size_t)K * B, 1);
    int nu = (L + 2) * K;
    unit *order = fg_xcalloc((size_t)nu, sizeof *order);

    sampler sm = {in, n, first, G, opt, out, done, stats, fg_now()};
    for (int k = 0; k < K; k++) e->lgcopy[k] = 0;
    e->sq_head = e->sq_len = 0;
    int more_blocks = first + K * B < n;

    for (int i = 0; i < G && !st; i++) {
        /* the token's units in schedule order */
        int x = 0;
        for (int a = 0; a < (fo->schedule_row ? K : L + 2); a++)
            for (int b = 0; b < (fo->schedule_row ? L + 2 : K); b++) {
                int j = fo->schedule_row ? b : a, k = fo->schedule_row ? a : b;
                order[x++] = (unit){i, j, k, S_k[k]};
            }
        /* weight slots alternate whenever the group changes; the next group
         * is prefetched while the current one computes. The slots carry over
         * tokens and blocks: the head of token i and the embedding of token
         * i+1 share their group, and layer 0 is fetched behind it. */
        deps ld;
        if (!(st = unit_loads(e, &order[0], &ld)))
            for (int u = 0; u < nu && !st; u++) {
                int g = group_of(pl, order[u].j), gnext = -3;
                if (g != e->gcur) {
                    if (e->gcur != -3) e->slot ^= 1;
                    e->gcur = g;
                    if ((st = load_weights(e, g, e->slot))) break;
                    /* the group after this one (FlexGen's load_weight(i, j+1)
                     * at k = 0), past the token's end when more follow */
                    int v = u + 1;
                    while (v < u + nu && group_of(pl, order[v % nu].j) == g) v++;
                    if (v < u + nu && (v < nu || i + 1 < G || more_blocks)) gnext = group_of(pl, order[v % nu].j);
                }
                int slot = e->slot;
                /* an embedding needs its batch's sampled ids */
                /* an LM head overwrites the outputs of its batch's last one:
                 * recorded first (a token ago, long out) */
                if (order[u].j == L + 1 && (st = sample_until(e, &sm, order[u].k))) break;
                /* the unit's compute waits on the gpu worker for its loads */
                deps cd = ld;
                if ((st = finish_load(e, slot)) || (st = need(e, &cd, e->wload[slot]))) break;
                /* compute this unit; then the previous unit's stores (its
                 * compute is done or about to be, and this one is queued) */
                pend_store prev = e->ps;
                e->ps.valid = 0;
                if ((st = unit_compute(e, &order[u], slot, &cd))) break;
                if (prev.valid) {
                    pend_store mine = e->ps;
                    e->ps = prev;
                    st = unit_store(e);
                    e->ps = mine;
                    if (st) break;
                }
                if ((st = poll_load(e, slot ^ 1))) break;
                /* prefetch: the next group's weights, the next unit's inputs */
                if (gnext != -3 && fo->policy.overlap && (st = load_weights(e, gnext, slot ^ 1))) break;
                if (u + 1 < nu) {
                    /* its inputs go into the slots of its batch's parity; when
                     * that is this unit's parity, this unit's stores first */
                    if (order[u + 1].k % 2 == order[u].k % 2 && (st = unit_store(e))) break;
                    if ((st = unit_loads(e, &order[u + 1], &ld))) break;
                }
                /* the batch whose LM head went out before this unit: sampled
                 * now, while this unit computes */
                if (order[u].j == L + 1) {
                    int t = (e->sq_head + e->sq_len++) % K;
                    e->sq_k[t] = order[u].k, e->sq_i[t] = i;
                }
                if ((st = sample_ready(e, &sm))) break;
                if (e->npend > 512 && (st = reap(e))) break;
            }
        if (!st) st = unit_store(e);
        /* the last batch is sampled behind the next token's first unit (its
         * embedding needs the first batch's ids only), or now at the end */
        if (!st && i + 1 == G) st = sample_until(e, &sm, -1);
        if (!st) st = reap(e);
        if (st) break;
        if (e->restarted) {
            st = fg_err_set(FG_ERUNTIME, "gpu worker restarted mid-block");
            break;
        }
        if (e->progress) {   /* a terminal: one self-overwriting line */
            double spent = stats->prefill_s + stats->decode_s;
            long made = stats->generated + (long)(n - first < K * B ? n - first : K * B) * (i + 1);
            long total = (long)n * G;
            double rate = spent > 0 ? made / spent : 0;
            fprintf(stderr, "\rblock %d/%d  token %d/%d  %.1f tokens/s  ETA %.0f s   ", first / (K * B) + 1,
                    (n + K * B - 1) / (K * B), i + 1, G, rate, rate > 0 ? (total - made) / rate : 0.0);
            if (i + 1 == G && first + K * B >= n) fputc('\n', stderr);
        }
    }
    fg_status s2 = await_all(e);
    if (!st) st = s2;
    int real = n - first < K * B ? n - first : K * B;
    if (!st) stats->generated += (long)real * G;
    free(order);
    free(done);
    return st;
}

/* ---- trace ------------------------------------------------------------------ */

static const char *op_name(int op) {
    static const char *n[] = {"device_init", "embed", "attn", "attn_qkv", "attn_out", "mlp", "lm_head", "attn_core",
                              "layer", "sample"};
    int i = op - FG_OP_DEVICE_INIT;
    return i >= 0 && i < (int)(sizeof n / sizeof n[0]) ? n[i] : "op";
}

/* Chrome trace-event JSON (Perfetto opens it): one process per worker, one
 * thread per stream, one complete event per command. */
static fg_status write_trace(const engine *e, const char *path) {
    static const char *stream_name[] = {"compute", "copy h2d", "copy d2h"};
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.partial", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return fg_err_set(FG_EINPUT, "%s: cannot create the trace", tmp);
    uint64_t t0 = e->nev ? e->ev[0].start_ns : 0;
    for (size_t i = 0; i < e->nev; i++) t0 = e->ev[i].start_ns < t0 ? e->ev[i].start_ns : t0;
    fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    for (int r = 0; r < FG_NROLES; r++) {
        fprintf(f, "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, \"args\": {\"name\": \"%s worker\"}},\n", r,
                fg_role_name(r));
        for (int t = 0; t < 3; t++)
            fprintf(f, "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": \"%s\"}},\n",
                    r, t, r == FG_ROLE_GPU ? stream_name[t] : (t ? "other" : "commands"));
    }
    for (size_t i = 0; i < e->nev; i++) {
        const trace_ev *v = &e->ev[i];
        const char *name = v->type == FG_MSG_COPY ? (v->stream == 1 ? "load" : "store")
                           : v->op >= 0       ? op_name(v->op)
                                              : fg_msg_type_name(v->type);
        fprintf(f, "{\"ph\": \"X\", \"name\": \"%s\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, "
                   "\"args\": {\"layer\": %d, \"batch\": %d}}%s\n",
                name, v->role, v->stream, (double)(v->start_ns - t0) / 1e3, (double)(v->end_ns - v->start_ns) / 1e3,
                v->layer, v->batch, i + 1 < e->nev ? "," : "");
    }
    fprintf(f, "]}\n");
    int bad = ferror(f);
    if (fclose(f) || bad || rename(tmp, path)) {
        unlink(tmp);
        return fg_err_set(FG_ERUNTIME, "%s: cannot write the trace", path);
    }
    return FG_OK;
}

/* VmHWM of a process in bytes (0 if unknown). */
static uint64_t vm_hwm(pid_t pid) {
    if (pid <= 0) return 0;
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    uint64_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) kb = strtoull(line + 6, NULL, 10);
    fclose(f);
    return kb * 1024;
}

/* ---- entry ------------------------------------------------------------------ */

fg_status fg_flex_default_policy(const fg_wsrc *ws, fg_flex_opts *fo, int S, int G) {
    const fg_opt_config *c = fg_wsrc_config(ws);
    fg_policy *p = &fo->policy;
    /* everything on the GPU; else weights 100, 95, ... 0 % on the GPU with
     * cache and activations on the CPU: the first that fits both budgets */
    fg_status st = FG_OK;
    for (int w = 105; w >= 0; w -= 5) {
        int all_gpu = w == 105;
        p->w_gpu = all_gpu ? 100 : w, p->w_cpu = 100 - p->w_gpu;
        p->c_gpu = all_gpu ? 100 : 0, p->c_cpu = 100 - p->c_gpu;
        p->h_gpu = all_gpu ? 100 : 0, p->h_cpu = 100 - p->h_gpu;
        plan pl;
        st = plan_build(&pl, c, fg_wsrc_specs(ws), fo, S, G);
        plan_free(&pl);
        if (st == FG_OK) return FG_OK;
    }
    char why[1024];
    snprintf(why, sizeof why, "%s", fg_err_msg());
    return fg_err_set(FG_EINPUT, "no placement fits the budgets, even with all weights on the CPU: %s", why);
}

fg_status fg_engine_flex_run(fg_wsrc *ws, const fg_seq_in *in, int n, const fg_gen_opts *opt,
                             const fg_flex_opts *fo, fg_seq_out *out, fg_gen_stats *stats, fg_flex_stats *fs) {
    memset(stats, 0, sizeof *stats);
    memset(fs, 0, sizeof *fs);
    const fg_opt_config *c = fg_wsrc_config(ws);
    int S = 1;
    for (int q = 0; q < n; q++) S = in[q].len > S ? in[q].len : S;
    engine e = {.ws = ws, .fs = fs, .overlap = fo->policy.overlap, .wgroup = {-2, -2}, .tracing = fo->trace != NULL,
                .progress = isatty(2), .gcur = -3, .temperature = opt->samp.temperature, .top_p = opt->samp.top_p};
    fg_status st = fg_policy_validate(&fo->policy);
    if (!st) st = plan_build(&e.pl, c, fg_wsrc_specs(ws), fo, S, opt->gen_len);
    if (!st) {
        e.lgcopy = fg_xcalloc((size_t)e.pl.K, sizeof *e.lgcopy);
        e.sq_k = fg_xcalloc((size_t)e.pl.K, sizeof *e.sq_k);
        e.sq_i = fg_xcalloc((size_t)e.pl.K, sizeof *e.sq_i);
    }
    if (st) {
        plan_free(&e.pl);
        return st;
    }
    plan *pl = &e.pl;
    fs->gpu_bytes = pl->used[SEG_DEV] + pl->ws_bytes;
    for (int s = 1; s < NSHM; s++) fs->shm_bytes += pl->used[s];
    char desc[256];
    fg_policy_describe(&fo->policy, desc, sizeof desc);
    fg_info("policy: %s; schedule %s", desc, fo->schedule_row ? "row" : "zig-zag block");

    /* the disk worker resolves relative paths under its --offload-dir: every
     * process gets the directory as an absolute path */
    char offdir[FG_MSG_PATH_MAX + 1], cwd[FG_MSG_PATH_MAX + 1];
    int olen = fo->offload_dir[0] == '/' ? snprintf(offdir, sizeof offdir, "%s", fo->offload_dir)
               : getcwd(cwd, sizeof cwd) ? snprintf(offdir, sizeof offdir, "%s/%s", cwd, fo->offload_dir)
                                         : -1;
    if (olen < 0 || (size_t)olen >= sizeof offdir) {
        plan_free(&e.pl);
        free(e.lgcopy);
        free(e.sq_k);
        free(e.sq_i);
        return fg_err_set(FG_EINPUT, "--offload-dir %s: the absolute path is too long or the working directory "
                                     "cannot be read", fo->offload_dir);
    }
    fg_flex_opts fo_abs = *fo;
    fo_abs.offload_dir = offdir;
    fo = &fo_abs;
    fg_super_opts so = {.worker_dir = fo->worker_dir, .offload_dir = fo->offload_dir, .restore = on_restore,
                        .restore_ctx = &e};
    double t0 = fg_now();
    if ((st = fg_super_new(&so, &e.sup))) goto out;
    for (int s = 1; s < NSHM && !st; s++)
        if (pl->used[s]) st = fg_super_segment_new(e.sup, seg_name[s], pl->used[s], &e.seg_idx[s]);
    if (pl->used[SEG_SPILL]) {
        int len = snprintf(e.spill, sizeof e.spill, "%s/spill-%s.bin", fo->offload_dir, fg_super_run_id(e.sup));
        if (len < 0 || (size_t)len >= sizeof e.spill) {
            e.spill[0] = 0;
            st = fg_err_set(FG_EINPUT, "--offload-dir: the path is too long (at most %d bytes with the file name)",
                            FG_MSG_PATH_MAX);
            goto out;
        }
        if (fo->disk_mem && pl->used[SEG_SPILL] > fo->disk_mem) {
            st = fg_err_set(FG_EINPUT, "the KV cache and activations placed on disk need %llu bytes but --disk-mem is %llu",
                            (unsigned long long)pl->used[SEG_SPILL], (unsigned long long)fo->disk_mem);
            goto out;
        }
    }
    if (st) goto out;
    /* disk-tier weights: the tier store in the offload directory, converted
     * once, checked (headers, identity, sizes) on every open */
    if (pl->any_disk) {
        if ((st = fg_store_open_or_build(fo->offload_dir, ws, &e.store))) goto out;
        if (fo->disk_mem && fg_store_total_bytes(e.store) > fo->disk_mem) {
            st = fg_err_set(FG_EINPUT, "the tier store needs %llu bytes in %s but --disk-mem is %llu",
                            (unsigned long long)fg_store_total_bytes(e.store), fo->offload_dir,
                            (unsigned long long)fo->disk_mem);
            goto out;
        }
        for (int f = FG_STORE_GLOBALS; f < pl->L; f++) {
            int nt = 0;
            const fg_store_tensor *t = fg_store_tensors(e.store, f, &nt);
            for (int q = 0; q < nt; q++)
                pl->wfile[t[q].spec] = f, pl->wfoff[t[q].spec] = t[q].offset, pl->wsum[t[q].spec] = t[q].checksum;
        }
    }
    /* weights to their homes: host copies here, GPU ones uploaded by gpu_setup */
    for (int i = 0; i < fg_spec_count(c) && !st; i++) {
        if (!pl->sp[i].present || pl->wtier[i] == FG_TIER_DISK) continue;
        loc home = pl->wtier[i] == FG_TIER_GPU ? pl->wsrc[i] : pl->whome[i];
        st = fg_wsrc_read(ws, i, P(&e, home));
    }
    if (!st) st = gpu_setup(&e);
    stats->load_s = fg_now() - t0;
    int block = pl->K * pl->gbs;
    for (int first = 0; first < n && !st; first += block) {
        int tries = 0;
        for (;;) {
            e.restarted = 0;
            st = run_block(&e, in, n, first, opt, fo, out, stats);
            if (!e.restarted || ++tries > 3) break;
            fg_warn("gpu worker restarted: redoing the block of prompts %d..%d", first, first + block - 1);
            if ((st = gpu_setup(&e))) break;
        }
    }
    if (!st && fo->trace) st = write_trace(&e, fo->trace);
    /* peak resident memory of each process, before the workers exit */
    fs->peak_rss[FG_NROLES] = vm_hwm(getpid());
    for (int r = 0; r < FG_NROLES && e.sup; r++) fs->peak_rss[r] = vm_hwm(fg_super_worker_pid(e.sup, r));
out:
    fg_super_destroy(&e.sup);
    fg_store_destroy(&e.store);
    if (e.spill[0]) unlink(e.spill);
    free(e.pend);
    free(e.lgcopy);
    free(e.sq_k);
    free(e.sq_i);
    free(e.ev);
    plan_free(&e.pl);
    return st;
}

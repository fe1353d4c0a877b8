/* fg_engine_flex.c - the offloading engine (see fg_engine_flex.h): the
 * block schedule, and the run around it (workers, segments, the tier store,
 * weights to their homes, a restarted gpu worker's redo). What goes where
 * is the plan's (fg_plan.c); how bytes move is fg_moves.c; what a unit
 * computes is fg_compute.c; recording tokens is fg_sampler.c.
 *
 * The schedule is FlexGen's Algorithm 1, zig-zag over a block of K GPU
 * batches: for each token, for each layer, every batch of the block runs
 * with the layer's weights loaded once. Its verbs are FlexGen's; the
 * dependencies between them are held on the gpu worker (fg_cmdq.h), so the
 * loop issues work ahead of the device and waits only where a disk or cpu
 * worker command sits in between. `--schedule row` runs one batch through
 * all layers instead (weights reloaded for every batch), as a baseline. */
#include "fg_engine_flex.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fg_devsize.h"
#include "fg_flex_int.h"
#include "fg_fmt.h"

fg_shm_handle fg_engine_handle(const fg_engine *e, fg_loc l) {
    return (fg_shm_handle){.segment = l.seg == SEG_DEV ? FG_SEG_DEVICE : e->seg_idx[l.seg], .offset = l.off,
                           .nbytes = l.n};
}

void *fg_engine_ptr(fg_engine *e, fg_loc l) { return fg_super_ptr(e->sup, fg_engine_handle(e, l)); }

/* ---- the block schedule ------------------------------------------------------
 *
 * Legend: i token (0: the prefill), j schedule layer (0 embedding, 1..L
 * decoder layers, L+1 LM head), k GPU batch of the block, x the unit (j, k)
 * in schedule order, g = group(j) the weights layer j computes with, s the
 * weight slot holding g (two slots: one computes, the other loads).
 *
 * FlexGen, per (i, j, k):            here, per unit x = (j, k) of token i:
 *   load_weight(i, j+1, k)            load_weight: group(j) into slot s (a
 *   load_cache(i, j, k+1)               no-op when prefetched) and, at a
 *   store_hidden(i, j, k-1)             layer's first batch, group(j+1)
 *   load_hidden(i, j, k+1)              into the other slot, before
 *   compute(i, j, k)                  compute(x) behind its loads
 *   store_cache(i, j, k-1)            store_cache, store_hidden (x-1)
 *   sync                              load_cache, load_hidden (x+1)
 *                                     sync: record sampled tokens
 * The next layer's load is issued just before a layer's first compute
 * (the reads only; what waits on the device waits there), so a compute
 * that holds the coordinator (the cpu worker's part) does not hold it
 * back; stores of x-1 go before the loads of x+1, which reuse the slots
 * of x-1's parity. */
static fg_status run_token(fg_engine *e, fg_sampler *sm, int i, const fg_unit *order, int nu, int more_after) {
    const fg_plan *pl = &e->pl;
    fg_pending_store prev = {0}, cur;
    fg_deps ld = {{0}}, cd;
    fg_status st = FG_OK;
    if ((st = fg_load_cache(e, &order[0], &ld)) || (st = fg_load_hidden(e, &order[0], &ld))) return st;
    for (int x = 0; x < nu && !st; x++) {
        const fg_unit *u = &order[x], *next = x + 1 < nu ? &order[x + 1] : NULL;
        int g = fg_group_of(pl, u->j), gnext = NO_GROUP, tnext = i;
        if (g != e->w[e->cur_slot].group) {                  /* load_weight(i, j): a new layer begins */
            e->cur_slot ^= e->w[e->cur_slot].group != NO_GROUP;
            if ((st = fg_load_weight(e, g, e->cur_slot, i))) break;
            /* the group after this one, past the token's end when more follow */
            int v = x + 1;
            while (v < x + nu && fg_group_of(pl, order[v % nu].j) == g) v++;
            if (v < x + nu && (v < nu || more_after)) gnext = fg_group_of(pl, order[v % nu].j), tnext = i + (v >= nu);
        }
        int s = e->cur_slot;
        /* an LM head overwrites what its batch's last one sampled: recorded first */
        if (u->j == pl->L + 1 && (st = fg_sample_until(e, sm, u->k))) break;
        cd = ld;
        if ((st = fg_weight_ready(e, s, &cd))) break;
        /* load_weight(i, j+1) before the compute: a unit the cpu worker has
         * a part in (CPU attention, the CPU's experts) returns only once
         * that part is done, and the next layer's disk reads would wait
         * behind it. Its reads go to the other slot's stage, free since
         * layer j-1's COPY out; its COPY into the slot waits for j-1's
         * readers, all issued by now. */
        if (gnext != NO_GROUP && pl->p.overlap && (st = fg_load_weight(e, gnext, s ^ 1, tnext))) break;
        if ((st = fg_compute(e, u, s, &cd, &cur))) break;                                        /* compute(i, j, k) */
        if ((st = fg_store_cache(e, &prev)) || (st = fg_store_hidden(e, &prev))) break;          /* stores of k-1 */
        prev = cur;
        if ((st = fg_weight_poll(e, s ^ 1))) break;
        if (next) {
            ld = (fg_deps){{0}};
            if (next->k % 2 == u->k % 2) {   /* the same parity's slots: this unit's stores first */
                if ((st = fg_store_cache(e, &prev)) || (st = fg_store_hidden(e, &prev))) break;
                prev.valid = 0;
            }
            if ((st = fg_load_cache(e, next, &ld)) || (st = fg_load_hidden(e, next, &ld))) break;   /* loads of k+1 */
        }
        if (u->j == pl->L + 1) fg_sample_enqueue(e, i, u->k);                                    /* sync */
        if ((st = fg_sample_ready(e, sm)) || (st = fg_pipe_poll(e))) break;
        if (e->q.npend > FG_CMDQ_REAP_AT && (st = fg_cmdq_reap(&e->q))) break;
    }
    if (!st && prev.valid && !(st = fg_store_cache(e, &prev))) st = fg_store_hidden(e, &prev);
    return st;
}

/* The a-th schedule layer this process computes: the embedding, its
 * decoder layers, the LM head (a pipeline stage has some of them). */
static int stage_j(const fg_plan *pl, int a) {
    if (pl->st.embed && a-- == 0) return 0;
    return a < pl->st.hi - pl->st.lo ? pl->st.lo + 1 + a : pl->L + 1;
}

/* Token i's units in schedule order: zig-zag (layer-major) or row
 * (batch-major) over each group of Kg batches in turn (one group, all K
 * batches, outside a pipeline: a pipeline has one group in flight per
 * stage, as FlexGen's num_inner_iterations). Returns their number. */
static int token_order(const fg_engine *e, const fg_flex_opts *fo, int i, const int *S_k, fg_unit *order) {
    const fg_plan *pl = &e->pl;
    int nj = pl->st.embed + pl->st.hi - pl->st.lo + pl->st.head, Kg = e->pipe.Kg, x = 0;
    for (int g = 0; g < pl->K / Kg; g++)
        for (int a = 0; a < (fo->schedule_row ? Kg : nj); a++)
            for (int b = 0; b < (fo->schedule_row ? nj : Kg); b++, x++) {
                int j = stage_j(pl, fo->schedule_row ? b : a), k = g * Kg + (fo->schedule_row ? a : b);
                order[x] = (fg_unit){i, j, k, S_k[k]};
            }
    return x;
}

/* The tokens a block runs for: the most any of its prompts may generate
 * (with per-prompt max_tokens, a block of short requests ends early
 * instead of computing finished rows to the run's longest). */
static int block_tokens(const fg_gen_opts *opt, int first, int count, int G) {
    if (!opt->seq) return G;
    int g = 1;
    for (int q = first; q < first + count; q++) g = fg_gen_max_new(opt, q) > g ? fg_gen_max_new(opt, q) : g;
    return g < G ? g : G;
}

/* One block: the prompts first..first+K*B-1, G tokens each. */
static fg_status run_block(fg_engine *e, const fg_seq_in *in, int n, int first, const fg_gen_opts *opt,
                           const fg_flex_opts *fo, fg_seq_out *out, fg_gen_stats *stats) {
    const fg_plan *pl = &e->pl;
    int K = pl->K, B = pl->gbs, L = pl->L, more_blocks = first + K * B < n;
    int G = e->block_G = block_tokens(opt, first, n - first < K * B ? n - first : K * B, pl->G);
    int *S_k = fg_xcalloc((size_t)K, sizeof *S_k);
    uint8_t *done = fg_xcalloc((size_t)K * B, 1);
    fg_unit *order = fg_xcalloc((size_t)(L + 2) * K, sizeof *order);
    fg_sampler sm = {.in = in, .n = n, .first = first, .G = G, .opt = opt, .out = out, .done = done, .stats = stats};
    fg_status st = fg_block_inputs(e, &sm, S_k);
    e->sm = &sm;
    if (!st) st = fg_pipe_block_start(e);
    sm.t_mark = fg_now(), sm.rd_mark_bytes = e->q.rd_done_bytes, sm.rd_mark_s = e->q.rd_busy_s;
    for (int i = 0; i < G && !st; i++) {
        int nu = token_order(e, fo, i, S_k, order);
        st = run_token(e, &sm, i, order, nu, i + 1 < G || more_blocks);
        /* the last batch is recorded behind the next token's first unit (its
         * embedding needs the first batch's ids only), or now at the end */
        if (!st && i + 1 == G) st = fg_sample_until(e, &sm, -1);
        if (!st) st = fg_cmdq_reap(&e->q);
        if (!st && e->restarted) st = fg_err_set(FG_ERUNTIME, "gpu worker restarted mid-block");
        if (!st && e->progress) {   /* a terminal: one self-overwriting line */
            double spent = stats->prefill_s + stats->decode_s;
            long made = stats->generated + (long)(n - first < K * B ? n - first : K * B) * (i + 1);
            long total = (long)(n - opt->start) * pl->G;   /* a resumed job's finished blocks are not counted */
            double rate = spent > 0 ? made / spent : 0;
            fprintf(stderr, "\rblock %d/%d  token %d/%d  %.1f tokens/s  ETA %.0f s   ", first / (K * B) + 1,
                    (n + K * B - 1) / (K * B), i + 1, G, rate, rate > 0 ? (total - made) / rate : 0.0);
            if (i + 1 == G && !more_blocks) fputc('\n', stderr);
        }
    }
    fg_status s2 = fg_cmdq_await_all(&e->q);
    if (!st) st = s2;
    if (!st) st = fg_pipe_block_end(e, out, first, n - first < K * B ? n - first : K * B);
    e->sm = NULL;
    if (!st) stats->generated += (long)(n - first < K * B ? n - first : K * B) * G;
    free(order);
    free(done);
    free(S_k);
    return st;
}

void fg_expert_stats_free(fg_expert_stats *x) {
    free(x->dense_bytes), free(x->expert_bytes), free(x->expert_disk_bytes), free(x->experts), free(x->routed);
    *x = (fg_expert_stats){0};
}

/* ---- setup ------------------------------------------------------------------ */

/* The device arena, and the GPU-resident weights uploaded from their host copy. */
static fg_status gpu_setup_once(fg_engine *e) {
    const fg_plan *pl = &e->pl;
    fg_msg m;
    fg_msg_init(&m, FG_MSG_COMPUTE);
    m.u.compute.op = FG_OP_DEVICE_INIT;
    m.flags = FG_MSG_F_BARRIER;   /* the arena changes under every stream */
    fg_op_init init = fg_device_init_params(pl);
    fg_msg_compute_set_params(&m, &init, sizeof init);
    uint64_t seq;
    fg_status st = fg_cmdq_submit(&e->q, FG_ROLE_GPU, &m, ST_COMPUTE, &seq);
    if (!st) st = fg_cmdq_await(&e->q, seq);
    for (int i = 0; !st && i < fg_spec_count(pl->c); i++) {
        if (!fg_plan_spec_here(pl, i) || pl->wtier[i] != FG_TIER_GPU) continue;
        fg_msg c;
        fg_msg_init(&c, FG_MSG_COPY);
        int x = fg_plan_stack(pl, i);
        if (!fg_plan_split_stack(pl, i))
            fg_msg_copy_add(&c, fg_engine_handle(e, pl->wsrc[i]), fg_engine_handle(e, pl->whome[i]));
        else if (pl->xtier_count[FG_TIER_GPU]) {   /* its GPU experts: one run, in their home's order */
            size_t e0 = (size_t)x * pl->E;
            while (pl->ehome[e0].seg != SEG_DEV) e0++;
            uint64_t n = (uint64_t)pl->xtier_count[FG_TIER_GPU] * pl->ehome[e0].n;
            fg_msg_copy_add(&c, fg_engine_handle(e, fg_loc_sub(pl->esrc[e0], 0, n)),
                            fg_engine_handle(e, fg_loc_sub(pl->ehome[e0], 0, n)));
        }
        if (c.u.copy.n) st = fg_cmdq_submit_gpu(&e->q, &c, ST_H2D, NULL, NULL);
    }
    if (!st) st = fg_cmdq_await_all(&e->q);
    for (int s = 0; s < FG_NSLOTS; s++) {
        uint8_t *held = e->w[s].xheld;   /* kept: the slot's expert bitmap, emptied */
        if (held) memset(held, 0, (size_t)pl->E);
        e->w[s] = (fg_wslot){.group = NO_GROUP, .xheld = held}, e->par[s] = (fg_pslot){0};
    }
    e->cur_slot = 0;
    return st;
}

/* gpu_setup_once, again while a gpu worker restarted under it: a worker
 * killed after DEVICE_INIT but before the uploads ends is replaced by one
 * without an arena, and the uploads re-issued to it fail. Their failure is
 * void; the abandoned commands end first, then the setup starts over. */
static fg_status gpu_setup(fg_engine *e) {
    for (int tries = 0;; tries++) {
        e->restarted = 0;
        fg_status st = gpu_setup_once(e);
        if (!e->restarted || tries == 3) return st;
        (void)fg_cmdq_await_all(&e->q);
        fg_warn("gpu worker restarted during its setup: setting it up again");
    }
}

/* A restarted gpu worker lost its arena: the block in progress is redone. */
static fg_status on_restore(fg_super *sup, fg_role role, void *ctx) {
    fg_engine *e = ctx;
    if (role == FG_ROLE_GPU) e->restarted = 1;
    return FG_OK;
}

/* Disk-tier weights: the tier store in the offload directory, converted
 * once, checked (headers, identity, sizes) on every open. */
static fg_status open_store(fg_engine *e, const fg_flex_opts *fo) {
    /* tests: a conversion as long as a big model's, on a small one */
    const char *stall = getenv("FLEXGEN_TEST_STORE_STALL_S");
    if (stall && atoi(stall) > 0) {
        fg_warn("FLEXGEN_TEST_STORE_STALL_S: the coordinator sleeps %d s before the tier store", atoi(stall));
        sleep((unsigned)atoi(stall));
    }
    /* a pipeline stage converts and reads only its share */
    const fg_stage *sg = &e->pl.st;
    fg_store_opts so = {.layers_lo = sg->lo, .layers_hi = sg->hi, .skip_globals = !sg->embed && !sg->head};
    fg_status st = fg_store_open_or_build_ex(fo->offload_dir, e->ws, &so, &e->store);
    if (st) return st;
    uint64_t need = 0, off, n;
    for (int f = FG_STORE_GLOBALS; f < e->pl.L; f++)
        if (fg_plan_has_group(&e->pl, f)) fg_store_data_range(e->store, f, &off, &n), need += n;
    if (fo->disk_mem && need > fo->disk_mem)
        return fg_err_set(FG_EINPUT, "the tier store needs %llu bytes in %s but --disk-mem is %llu",
                          (unsigned long long)need, fo->offload_dir, (unsigned long long)fo->disk_mem);
    for (int f = FG_STORE_GLOBALS; f < e->pl.L; f++) {
        int nt = 0;
        const fg_store_tensor *t = fg_store_tensors(e->store, f, &nt);
        for (int q = 0; q < nt; q++) {
            int i = t[q].spec, x = fg_plan_stack(&e->pl, i);
            if (t[q].expert >= 0) {   /* one expert of a stack */
                FG_ASSERT(x >= 0 && t[q].expert < e->pl.E);
                size_t xi = (size_t)x * e->pl.E + (size_t)t[q].expert;
                e->xstore_off[xi] = t[q].offset, e->xstore_sum[xi] = t[q].checksum;
                continue;
            }
            e->store_file[i] = f, e->store_off[i] = t[q].offset, e->store_sum[i] = t[q].checksum;
        }
    }
    return FG_OK;
}

/* A split layer's stack: read whole, each expert to its home (a GPU one's
 * host copy; disk ones are the store's). */
static fg_status read_split_stack(fg_engine *e, int i) {
    const fg_plan *pl = &e->pl;
    int x = fg_plan_stack(pl, i), E = pl->E;
    uint64_t eb = pl->ehome[(size_t)x * E].n;
    uint8_t *buf = fg_xmalloc((size_t)eb * (size_t)E);
    fg_status st = fg_wsrc_read_stored(e->ws, i, buf);
    for (int q = 0; q < E && !st; q++) {
        const fg_loc *h = &pl->ehome[(size_t)x * E + q];
        if (h->seg == SEG_STAGE) continue;
        memcpy(fg_engine_ptr(e, h->seg == SEG_DEV ? pl->esrc[(size_t)x * E + q] : *h), buf + (size_t)q * eb, (size_t)eb);
    }
    free(buf);
    return st;
}

/* Workers, segments, spill file, tier store; weights to their homes (host
 * copies here, GPU ones uploaded by gpu_setup). */
static fg_status setup(fg_engine *e, const fg_flex_opts *fo) {
    fg_plan *pl = &e->pl;
    fg_super_opts so = {.worker_dir = fo->worker_dir, .offload_dir = fo->offload_dir, .gpu_device = fo->device,
                        .attach = fo->attach, .cmd_timeout_ms = fo->cmd_timeout_ms, .restore = on_restore,
                        .restore_ctx = e};
    fg_status st = fg_super_new(&so, &e->sup);
    e->q.sup = e->sup;
    for (int s = FG_PLAN_FIRST_SHM; s < FG_PLAN_END_SHM && !st; s++)
        if (pl->used[s]) st = fg_super_segment_new(e->sup, fg_plan_seg_name(s), pl->used[s], &e->seg_idx[s]);
    if (!st && pl->used[SEG_SPILL]) {
        int len = snprintf(e->spill, sizeof e->spill, "%s/spill-%s.bin", fo->offload_dir, fg_super_run_id(e->sup));
        if (len < 0 || (size_t)len >= sizeof e->spill)
            e->spill[0] = 0, st = fg_err_set(FG_EINPUT, "--offload-dir: the path is too long (at most %d bytes with "
                                                        "the file name)", FG_MSG_PATH_MAX);
        else if ((st = fg_spill_claim(fo->offload_dir, e->spill, &e->spill_fd)))
            e->spill[0] = 0;
    }
    if (!st && pl->any_disk_weights) st = open_store(e, fo);
    for (int i = 0; i < fg_spec_count(pl->c) && !st; i++) {
        if (!fg_plan_spec_here(pl, i)) continue;
        if (fg_plan_split_stack(pl, i)) st = read_split_stack(e, i);
        else if (pl->wtier[i] != FG_TIER_DISK)
            st = fg_wsrc_read_stored(e->ws, i, fg_engine_ptr(e, pl->wtier[i] == FG_TIER_GPU ? pl->wsrc[i] : pl->whome[i]));
    }
    return st ? st : gpu_setup(e);
}

/* The weights' bytes per tier, as the plan holds them, and per format: a
 * quantized file's bytes, not its expansion (docs/CLI.md, "weight bytes");
 * tier: fg_plan_tier_bytes. */
static void log_weight_bytes(const fg_plan *pl, const uint64_t tier[FG_NTIERS]) {
    uint64_t fmt[FG_FMT_COUNT] = {0};
    int nfmt[FG_FMT_COUNT] = {0};
    for (int i = 0; i < fg_spec_count(pl->c); i++) {
        if (!fg_plan_spec_here(pl, i)) continue;
        uint64_t b = fg_spec_stored_bytes(pl->c, pl->sp, i);
        int f = pl->sp[i].ndim == 1 ? FG_FMT_F16 : fg_spec_fmt(pl->c, pl->sp, i);
        fmt[f] += b, nfmt[f]++;
    }
    char by[256] = "";
    size_t n = 0;
    for (int f = 0; f < FG_FMT_COUNT && n < sizeof by; f++)
        if (nfmt[f])
            n += (size_t)snprintf(by + n, sizeof by - n, "%s%s %d tensors %" PRIu64, n ? ", " : "", fg_fmt_name(f),
                                  nfmt[f], fmt[f]);
    fg_info("weight bytes gpu/cpu/disk: %" PRIu64 "/%" PRIu64 "/%" PRIu64 " (%s)", tier[FG_TIER_GPU],
            tier[FG_TIER_CPU], tier[FG_TIER_DISK], by);
}

/* The plan's shared memory fits /dev/shm, or the run is refused before any
 * worker starts: a tmpfs that runs out kills the run later with SIGBUS. */
static fg_status check_shm(const fg_plan *pl) {
    uint64_t need = 0;
    char what[256] = "";
    size_t len = 0;
    for (int s = FG_PLAN_FIRST_SHM; s < FG_PLAN_END_SHM; s++)
        if (pl->used[s]) {
            need += fg_shm_total_bytes(pl->used[s]);
            if (len < sizeof what)
                len += (size_t)snprintf(what + len, sizeof what - len, "%s%s %.1f %s", len ? ", " : "segments ",
                                        fg_plan_seg_name(s), pl->used[s] / (pl->used[s] < 1048576 ? 1024.0 : 1048576.0),
                                        pl->used[s] < 1048576 ? "KiB" : "MiB");
        }
    return fg_shm_check_room(need, what);
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

static fg_status build_plan(fg_plan *pl, const fg_wsrc *ws, const fg_flex_opts *fo, int S, int G) {
    return fg_plan_build(pl, fg_wsrc_config(ws), fg_wsrc_specs(ws), &fo->policy, S, G, fo->device ? fo->device : fg_devsize_default(),
                         fo->gpu_mem, fo->cpu_mem, fo->disk_mem);
}

/* This process's plan: the whole model, or a pipeline rank's stage with
 * its P groups of the policy's K batches in every block. */
static fg_status build_stage_plan(fg_plan *pl, const fg_wsrc *ws, const fg_flex_opts *fo, int S, int G) {
    const fg_model_config *c = fg_wsrc_config(ws);
    int P = fg_ring_size();
    fg_stage st = fg_stage_whole(c);
    fg_policy p = fo->policy;
    if (P > 1) {
        fg_ring_stage(c->n_layers, fg_ring_rank(), P, &st.lo, &st.hi);
        st.embed = fg_ring_rank() == 0, st.head = fg_ring_rank() == P - 1;
        p.num_gpu_batches *= P;
        fg_info("pipeline stage %d of %d: decoder layers %d..%d%s%s; a block is %d groups of %d x %d prompts",
                fg_ring_rank(), P, st.lo, st.hi - 1, st.embed ? ", the embedding" : "", st.head ? ", the LM head" : "",
                P, fo->policy.num_gpu_batches, p.gbs);
    }
    return fg_plan_build_stage(pl, c, fg_wsrc_specs(ws), &p, S, G, fo->device ? fo->device : fg_devsize_default(),
                               fo->gpu_mem, fo->cpu_mem, fo->disk_mem, &st);
}

/* A pipeline's figures: every rank's, gathered on rank 0, whose run's
 * prefill and decode times are the last rank's (where tokens are sampled). */
static fg_status gather_ranks(fg_engine *e, fg_gen_stats *stats, fg_flex_stats *fs) {
    fg_pipe *p = &e->pipe;
    fs->ranks = p->P;
    if (p->P == 1) return FG_OK;
    fg_rank_stats mine = {.rank = p->r, .lo = e->pl.st.lo, .hi = e->pl.st.hi, .wait_s = p->wait_s, .send_s = fg_ring_send_seconds(), .sent = p->sent,
                          .recvd = p->recvd, .msgs = p->msgs, .prefill_s = stats->prefill_s,
                          .decode_s = stats->decode_s, .gpu_bytes = fs->gpu_bytes, .shm_bytes = fs->shm_bytes};
    for (int r = 0; r < 3; r++) mine.busy_s[r] = fs->busy_s[r];
    fg_rank_stats *all = fg_xcalloc((size_t)p->P, sizeof *all);
    fg_status st = fg_ring_gather(&mine, sizeof mine, all, 0);
    if (st || p->r != 0) {
        free(all);
        return st;
    }
    fs->rank = all;
    stats->prefill_s = all[p->P - 1].prefill_s, stats->decode_s = all[p->P - 1].decode_s;
    return FG_OK;
}

#define FIT_RULE_STEP 5   /* percentage points of the weights moved off the GPU from one try to the next */

/* One try of the fit rule: everything on the GPU (all_gpu), or w % of the
 * weights there and the rest, cache and activations on the CPU. FG_OK
 * when its plan fits the budgets; fo->policy is left set to it. */
static fg_status try_fit(const fg_wsrc *ws, fg_flex_opts *fo, int S, int G, int all_gpu, int w) {
    fg_policy *p = &fo->policy;
    p->w_gpu = all_gpu ? 100 : w, p->w_cpu = 100 - p->w_gpu;
    p->c_gpu = all_gpu ? 100 : 0, p->c_cpu = 100 - p->c_gpu;
    p->h_gpu = all_gpu ? 100 : 0, p->h_cpu = 100 - p->h_gpu;
    fg_plan pl;
    fg_status st = build_plan(&pl, ws, fo, S, G);
    fg_plan_free(&pl);
    return st;
}

fg_status fg_flex_default_policy(const fg_wsrc *ws, fg_flex_opts *fo, int S, int G) {
    /* everything on the GPU; else weights 100, 95, ... 0 % on the GPU with
     * cache and activations on the CPU: the first that fits both budgets */
    if (try_fit(ws, fo, S, G, 1, 100) == FG_OK) return FG_OK;
    for (int w = 100; w >= 0; w -= FIT_RULE_STEP)
        if (try_fit(ws, fo, S, G, 0, w) == FG_OK) return FG_OK;
    char why[1024];
    snprintf(why, sizeof why, "%s", fg_err_msg());
    return fg_err_set(FG_EINPUT, "no placement fits the budgets, even with all weights on the CPU: %s", why);
}

/* the engine's per-tensor, per-batch and per-expert bookkeeping, sized by its plan */
static void engine_alloc(fg_engine *e) {
    const fg_plan *pl = &e->pl;
    int nspec = fg_spec_count(pl->c);
    e->store_file = fg_xcalloc((size_t)nspec, sizeof *e->store_file);
    e->store_off = fg_xcalloc((size_t)nspec, sizeof *e->store_off);
    e->store_sum = fg_xcalloc((size_t)nspec, sizeof *e->store_sum);
    e->store_checked = fg_xcalloc((size_t)nspec, 1);
    e->sampled_copy = fg_xcalloc((size_t)pl->K, sizeof *e->sampled_copy);
    e->samp_max_t = fg_xcalloc((size_t)pl->K, sizeof *e->samp_max_t);
    e->samp_min_p = fg_xcalloc((size_t)pl->K, sizeof *e->samp_min_p);
    e->unrecorded_batch = fg_xcalloc((size_t)pl->K, sizeof *e->unrecorded_batch);
    e->unrecorded_token = fg_xcalloc((size_t)pl->K, sizeof *e->unrecorded_token);
    size_t nx = (size_t)pl->L * FG_PLAN_STACKS * (size_t)pl->E;
    e->xstore_off = fg_xcalloc(nx + 1, sizeof *e->xstore_off);
    e->xstore_sum = fg_xcalloc(nx + 1, sizeof *e->xstore_sum);
    e->xstore_checked = fg_xcalloc(nx + 1, 1);
    e->xall = fg_xcalloc((size_t)pl->E + 1, 1);
    for (int q = 0; q < pl->E; q++) e->xall[q] = !fg_plan_expert_on_cpu(pl, q);   /* the cpu worker's stay */
    e->xwant = fg_xcalloc((size_t)pl->E + 1, 1);
    for (int s = 0; s < FG_NSLOTS; s++) e->w[s].xheld = fg_xcalloc((size_t)pl->E + 1, 1);
    e->xs = (fg_expert_stats){.G = pl->G};
    e->xs.dense_bytes = fg_xcalloc((size_t)pl->G, sizeof *e->xs.dense_bytes);
    e->xs.expert_bytes = fg_xcalloc((size_t)pl->G, sizeof *e->xs.expert_bytes);
    e->xs.expert_disk_bytes = fg_xcalloc((size_t)pl->G, sizeof *e->xs.expert_disk_bytes);
    e->xs.experts = fg_xcalloc((size_t)pl->G, sizeof *e->xs.experts);
    e->xs.routed = fg_xcalloc((size_t)pl->G, sizeof *e->xs.routed);
}

fg_status fg_engine_flex_run(fg_wsrc *ws, const fg_seq_in *in, int n, const fg_gen_opts *opt,
                             const fg_flex_opts *fo_in, fg_seq_out *out, fg_gen_stats *stats, fg_flex_stats *fs) {
    memset(stats, 0, sizeof *stats);
    memset(fs, 0, sizeof *fs);
    int S = 1;
    for (int q = 0; q < n; q++) S = in[q].len > S ? in[q].len : S;
    fg_engine e = {.ws = ws, .spill_fd = -1, .progress = isatty(2),
                   .q = {.overlap = fo_in->policy.overlap, .tracing = fo_in->trace != NULL}};
    /* the disk worker resolves relative paths under its --offload-dir: every
     * process gets the directory as an absolute path */
    fg_flex_opts fo = *fo_in;
    if (!fo.device) fo.device = fg_devsize_default();   /* the plan and the worker agree on it */
    fg_info("gpu worker backend: %s%s", fo.device, fo_in->device ? "" : " (the default: cuda where a GPU is found, else host)");
    char offdir[FG_MSG_PATH_MAX + 1], cwd[FG_MSG_PATH_MAX + 1];
    int olen = fo.offload_dir[0] == '/' ? snprintf(offdir, sizeof offdir, "%s", fo.offload_dir)
               : getcwd(cwd, sizeof cwd) ? snprintf(offdir, sizeof offdir, "%s/%s", cwd, fo.offload_dir)
                                         : -1;
    fo.offload_dir = offdir;
    fg_status st = olen < 0 || (size_t)olen >= sizeof offdir
                       ? fg_err_set(FG_EINPUT, "--offload-dir %s: the absolute path is too long or the working "
                                               "directory cannot be read", fo_in->offload_dir)
                       : build_stage_plan(&e.pl, ws, &fo, S, opt->gen_len);
    if (st) goto out;
    fg_pipe_init(&e);
    if (e.pipe.P > 1) e.progress = 0;   /* rank 0 has no tokens/s to show: the report has it */
    const fg_plan *pl = &e.pl;
    engine_alloc(&e);
    fs->gpu_bytes = fg_plan_gpu_bytes(pl);
    fs->shm_bytes = fg_plan_shm_bytes(pl);
    char desc[256];
    fg_policy_describe_ex(&fo.policy, pl->E > 0, desc, sizeof desc);
    fg_info("policy: %s; schedule %s", desc, fo.schedule_row ? "row" : "zig-zag block");
    uint64_t tier[FG_NTIERS];
    fg_plan_tier_bytes(pl, tier);
    fs->disk_weight_bytes = tier[FG_TIER_DISK];
    log_weight_bytes(pl, tier);

    if ((st = check_shm(pl))) goto out;
    double t0 = fg_now();
    st = setup(&e, &fo);
    stats->load_s = fg_now() - t0;
    int block = pl->K * pl->gbs;
    for (int first = opt->start; first < n && !st; first += block) {
        for (int tries = 0;; tries++) {
            /* a gpu worker restarted since its last setup (in the last try,
             * in setup itself, or between blocks) lost its arena: the
             * abandoned commands end first (their results are void), then
             * the device is set up again */
            if (e.restarted) {
                (void)fg_cmdq_await_all(&e.q);
                if ((st = gpu_setup(&e))) break;
            }
            st = run_block(&e, in, n, first, opt, &fo, out, stats);
            if (e.restarted && e.pipe.P > 1) {   /* the other stages went on: one cannot redo a block alone */
                if (!st) st = fg_err_set(FG_ERUNTIME, "rank %d: gpu worker restarted mid-block; a pipeline cannot "
                                                      "redo one stage's block: run again with --resume", e.pipe.r);
                break;
            }
            if (!e.restarted || tries == 3) break;
            fs->gpu_restarts++;
            fg_warn("gpu worker restarted: redoing the block of prompts %d..%d", first, first + block - 1);
        }
        /* the block is whole: journaled before the next one starts */
        if (!st && opt->block_done) st = opt->block_done(opt->block_ctx, first, n - first < block ? n - first : block);
    }
    if (!st && fo.trace) st = fg_cmdq_write_trace(&e.q, fo.trace);
    for (int r = 0; r < FG_NROLES; r++) fs->busy_s[r] = e.q.busy_s[r];
    if (!st) st = gather_ranks(&e, stats, fs);
    fs->commands = e.q.commands, fs->h2d_bytes = e.q.h2d_bytes, fs->d2h_bytes = e.q.d2h_bytes;
    fs->d2d_bytes = e.q.d2d_bytes;
    fs->xs = e.xs, e.xs = (fg_expert_stats){0};
    fs->disk_read_bytes = e.q.disk_read_bytes, fs->disk_write_bytes = e.q.disk_write_bytes;
    /* peak resident memory of each process, before the workers exit */
    fs->peak_rss[FG_NROLES] = vm_hwm(getpid());
    for (int r = 0; r < FG_NROLES && e.sup; r++) fs->peak_rss[r] = vm_hwm(fg_super_worker_pid(e.sup, r));
out:
    fg_super_destroy(&e.sup);
    fg_store_destroy(&e.store);
    if (e.spill[0]) unlink(e.spill);
    if (e.spill_fd >= 0) close(e.spill_fd);   /* after the unlink: no sweep sees it unlocked */
    fg_cmdq_free(&e.q);
    fg_pipe_free(&e);
    free(e.store_file), free(e.store_off), free(e.store_sum), free(e.store_checked);
    free(e.sampled_copy), free(e.samp_max_t), free(e.samp_min_p), free(e.unrecorded_batch), free(e.unrecorded_token);
    free(e.xstore_off), free(e.xstore_sum), free(e.xstore_checked), free(e.xall), free(e.xwant);
    for (int s = 0; s < FG_NSLOTS; s++) free(e.w[s].xheld);
    fg_expert_stats_free(&e.xs);
    fg_plan_free(&e.pl);
    return st;
}

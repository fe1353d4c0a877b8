/* fg_moves.c - the offloading engine's tier moves, FlexGen's load_weight,
 * load_cache, load_hidden, store_cache and store_hidden: bytes between the
 * device slots, their homes in shared memory, and the disk (through a stage
 * in shared memory, as O_DIRECT needs aligned host buffers). Each move is
 * queued behind what it depends on and records itself on the slot it
 * touches (fg_flex_int.h), so the compute that follows can wait for it on
 * the gpu worker. The schedule decides when; this file decides how. */
#include <stdio.h>
#include <string.h>

#include "fg_flex_int.h"

/* The handle of bytes [off, off + n) of plan location l. */
static fg_shm_handle sub_handle(const fg_engine *e, fg_loc l, uint64_t off, uint64_t n) {
    return fg_engine_handle(e, fg_loc_sub(l, off, n));
}

/* Everything that last used buffer u, into d (the next writer waits for
 * it); u is then free. */
static fg_status claim(fg_engine *e, fg_deps *d, fg_use *u) {
    fg_status st = FG_OK;
    if ((st = fg_cmdq_need(&e->q, d, u->write)) || (st = fg_cmdq_need(&e->q, d, u->read[0])) ||
        (st = fg_cmdq_need(&e->q, d, u->read[1])))
        return st;
    *u = (fg_use){0, {0, 0}};
    return FG_OK;
}

/* Spill-file bytes [off, off + h.nbytes) to or from shared memory h. */
static fg_status spill_io(fg_engine *e, int type, uint64_t off, fg_shm_handle h, uint64_t *seq) {
    fg_msg m;
    fg_msg_init(&m, type);
    m.u.disk.file_offset = off;
    m.u.disk.buf = h;
    memcpy(m.u.disk.path, e->spill, sizeof m.u.disk.path);
    return fg_cmdq_submit(&e->q, FG_ROLE_DISK, &m, 0, seq);
}

/* ---- weights -------------------------------------------------------------- */

static void group_range(int g, int *first, int *count) {
    *first = g < 0 ? 0 : fg_spec_layer(g, 0);
    *count = g < 0 ? FG_GW_COUNT : FG_LW_COUNT;
}

/* 1 if the ops read spec idx in the weight slot: an off-GPU tensor, or a
 * stack of experts of a layer whose experts are not all on the GPU. */
static int in_slot(const fg_plan *pl, int idx) {
    int x = fg_plan_stack(pl, idx);
    return x >= 0 ? pl->xview[x / FG_PLAN_STACKS] : pl->wtier[idx] != FG_TIER_GPU;
}

fg_shm_handle fg_weight_handle(const fg_engine *e, int idx, int s) {
    const fg_plan *pl = &e->pl;
    if (!pl->sp[idx].present) return (fg_shm_handle){.segment = FG_SEG_DEVICE, .offset = 0, .nbytes = 0};
    if (!in_slot(pl, idx)) return fg_engine_handle(e, pl->whome[idx]);
    return sub_handle(e, pl->wslot[s], pl->wslot_off[idx], pl->whome[idx].n);
}

fg_loc fg_weight_host(const fg_engine *e, int idx, int s) {
    const fg_plan *pl = &e->pl;
    FG_ASSERT(fg_plan_stack(pl, idx) < 0);   /* dense tensors only: a stack's band is fg_compute's */
    if (!pl->sp[idx].present) return (fg_loc){SEG_IO, 0, 0};
    if (pl->wtier[idx] == FG_TIER_GPU) return pl->wsrc[idx];
    if (pl->wtier[idx] == FG_TIER_CPU) return pl->whome[idx];
    return fg_loc_sub(pl->wstage[s], pl->wslot_off[idx], pl->whome[idx].n);
}

/* ---- experts ----
 * Stack x (fg_plan_stack) of a split layer sits whole in the weight slot,
 * expert e at e times its bytes; its disk experts come through the slot's
 * stage, each aligned, as the store holds them. */

static int stack_spec(int x) { return fg_spec_layer(x / FG_PLAN_STACKS, fg_plan_stack_role(x % FG_PLAN_STACKS)); }

static fg_loc expert_in_slot(const fg_plan *pl, int x, int e, int s) {
    int i = stack_spec(x);
    uint64_t eb = pl->ehome[(size_t)x * pl->E + e].n;
    return fg_loc_sub(pl->wslot[s], pl->wslot_off[i] + (uint64_t)e * eb, eb);
}

static fg_loc expert_in_stage(const fg_plan *pl, int x, int e, int s) {
    return fg_loc_sub(pl->wstage[s], pl->xstage_off[x] + (uint64_t)e * pl->xstage_stride[x],
                      pl->ehome[(size_t)x * pl->E + e].n);
}

/* COPY pairs of one load, a pair extended where both sides run on from
 * the last one (a run of experts of one home), sent FG_MSG_MAX_HANDLES a
 * COPY. */
typedef struct {
    fg_shm_handle *src, *dst;
    int n, cap;
} copy_pairs;

static void pairs_add(copy_pairs *p, fg_shm_handle src, fg_shm_handle dst) {
    if (p->n) {
        fg_shm_handle *ls = &p->src[p->n - 1], *ld = &p->dst[p->n - 1];
        if (ls->segment == src.segment && ld->segment == dst.segment && ls->offset + ls->nbytes == src.offset &&
            ld->offset + ld->nbytes == dst.offset) {
            ls->nbytes += src.nbytes, ld->nbytes += dst.nbytes;
            return;
        }
    }
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 64;
        p->src = fg_xrealloc(p->src, (size_t)p->cap * sizeof *p->src);
        p->dst = fg_xrealloc(p->dst, (size_t)p->cap * sizeof *p->dst);
    }
    p->src[p->n] = src, p->dst[p->n++] = dst;
}

static void pairs_free(copy_pairs *p) { free(p->src), free(p->dst), *p = (copy_pairs){0}; }

/* Commands pairs_submit sends for n pairs. */
static int copies_for(int n) { return (n + FG_MSG_MAX_HANDLES - 1) / FG_MSG_MAX_HANDLES; }

/* The pairs as COPY commands on the host-to-device stream behind d; *last
 * gets the last one (unchanged without pairs). */
static fg_status pairs_submit(fg_engine *e, const copy_pairs *p, const fg_deps *d, uint64_t *last) {
    fg_status st = FG_OK;
    for (int a = 0; a < p->n && !st; a += FG_MSG_MAX_HANDLES) {
        fg_msg m;
        fg_msg_init(&m, FG_MSG_COPY);
        for (int b = a; b < p->n && b < a + FG_MSG_MAX_HANDLES; b++) fg_msg_copy_add(&m, p->src[b], p->dst[b]);
        st = fg_cmdq_submit_gpu(&e->q, &m, ST_H2D, d, last);
    }
    return st;
}

/* Disk reads of the experts of layer l with want[e] that slot s does not
 * hold, into its stage: one read per run of consecutive disk experts of a
 * stack (the store and the stage space them alike). The reads' numbers go
 * to seq (*n of them, at most cap). */
static fg_status expert_reads(fg_engine *e, int s, int l, const uint8_t *want, uint64_t *seq, int *n, int cap) {
    const fg_plan *pl = &e->pl;
    const fg_wslot *w = &e->w[s];
    int E = pl->E;
    const fg_tier *t = pl->etier + (size_t)l * E;
    fg_status st = FG_OK;
    for (int m = 0; m < FG_PLAN_STACKS && !st; m++) {
        int x = l * FG_PLAN_STACKS + m;
        if (!pl->sp[stack_spec(x)].experts) continue;
        for (int e0 = 0; e0 < E && !st;) {
            if (t[e0] != FG_TIER_DISK || !want[e0] || w->xheld[e0]) {
                e0++;
                continue;
            }
            int e1 = e0 + 1;
            while (e1 < E && t[e1] == FG_TIER_DISK && want[e1] && !w->xheld[e1]) e1++;
            FG_ASSERT(*n < cap);
            fg_loc first = expert_in_stage(pl, x, e0, s);
            fg_msg r;
            fg_msg_init(&r, FG_MSG_DISK_READ);
            r.u.disk.file_offset = e->xstore_off[(size_t)x * E + e0];
            r.u.disk.buf = sub_handle(e, first, 0, (uint64_t)(e1 - e0 - 1) * pl->xstage_stride[x] + first.n);
            snprintf(r.u.disk.path, sizeof r.u.disk.path, "%s", fg_store_path(e->store, l));
            st = fg_cmdq_submit(&e->q, FG_ROLE_DISK, &r, 0, &seq[(*n)++]);
            e0 = e1;
        }
    }
    return st;
}

/* The first time a run reads an expert from the store, its bytes are
 * checked against the store's checksum (as check_stage does a tensor). */
static fg_status check_experts(fg_engine *e, int s, int l, const uint8_t *want) {
    const fg_plan *pl = &e->pl;
    int E = pl->E;
    for (int m = 0; m < FG_PLAN_STACKS; m++) {
        int x = l * FG_PLAN_STACKS + m;
        if (!pl->sp[stack_spec(x)].experts) continue;
        for (int q = 0; q < E; q++) {
            size_t xi = (size_t)x * E + q;
            if (pl->etier[(size_t)l * E + q] != FG_TIER_DISK || !want[q] || e->w[s].xheld[q] || e->xstore_checked[xi])
                continue;
            fg_loc at = expert_in_stage(pl, x, q, s);
            const void *p = fg_engine_ptr(e, at);
            if (!p || fg_store_checksum(p, at.n) != e->xstore_sum[xi]) {
                fg_store_invalidate(e->store, l);   /* the next run rebuilds it */
                return fg_err_set(FG_ERUNTIME, "%s: expert %d of '%s' at offset %llu does not match its checksum: the "
                                  "tier store is damaged (the file is removed and will be rebuilt on the next run)",
                                  fg_store_path(e->store, l), q, pl->sp[stack_spec(x)].name,
                                  (unsigned long long)e->xstore_off[xi]);
            }
            e->xstore_checked[xi] = 1;
        }
    }
    return FG_OK;
}

/* The pairs that bring the experts of layer l with want[e] that slot s
 * does not hold into it, from their homes (a GPU one inside the device);
 * they are held from now on. Counted into the run's expert figures. */
static void expert_pairs(fg_engine *e, int s, int l, const uint8_t *want, copy_pairs *p) {
    const fg_plan *pl = &e->pl;
    fg_wslot *w = &e->w[s];
    int E = pl->E, i = w->token;
    const fg_tier *t = pl->etier + (size_t)l * E;
    fg_expert_stats *xs = &e->xs;
    for (int m = 0; m < FG_PLAN_STACKS; m++) {
        int x = l * FG_PLAN_STACKS + m;
        if (!pl->sp[stack_spec(x)].experts) continue;
        for (int q = 0; q < E; q++) {
            if (!want[q] || w->xheld[q]) continue;
            fg_loc src = t[q] == FG_TIER_DISK ? expert_in_stage(pl, x, q, s) : pl->ehome[(size_t)x * E + q];
            pairs_add(p, fg_engine_handle(e, src), fg_engine_handle(e, expert_in_slot(pl, x, q, s)));
            if (xs->expert_bytes && i < xs->G) {
                xs->expert_bytes[i] += src.n;
                if (t[q] == FG_TIER_DISK) xs->expert_disk_bytes[i] += src.n;
            }
        }
    }
    for (int q = 0; q < E; q++)
        if (want[q] && !w->xheld[q]) {
            w->xheld[q] = 1;
            if (xs->experts && i < xs->G) xs->experts[i]++;
        }
}

fg_status fg_load_experts(fg_engine *e, int s, int l, const uint8_t *want, fg_deps *d) {
    const fg_plan *pl = &e->pl;
    fg_wslot *w = &e->w[s];
    FG_ASSERT(w->group == l && pl->xview[l]);
    int cap = FG_PLAN_STACKS * pl->E, n = 0;
    uint64_t *reads = fg_xcalloc((size_t)cap, sizeof *reads);
    copy_pairs p = {0};
    /* the stage's last COPY out (the previous group's) before a read refills it */
    fg_status st = fg_cmdq_await(&e->q, w->stage_read);
    if (!st) st = expert_reads(e, s, l, want, reads, &n, cap);
    for (int q = 0; q < n && !st; q++) st = fg_cmdq_await(&e->q, reads[q]);
    if (!st) st = check_experts(e, s, l, want);
    if (!st) {
        expert_pairs(e, s, l, want, &p);
        fg_deps after = {{0}};
        uint64_t last = 0;
        if (p.n && !(st = fg_cmdq_need(&e->q, &after, w->prev_readers)) && !(st = pairs_submit(e, &p, &after, &last))) {
            w->load = last;
            if (n) w->stage_read = last;
        }
        if (!st) st = fg_cmdq_need(&e->q, d, w->load);
    }
    pairs_free(&p);
    free(reads);
    return st;
}

static fg_status issue_weight_copy(fg_engine *e, int s);

/* Under FG_EXPERTS_ALL: every expert the device computes (not the cpu
 * worker's). */
static const uint8_t *all_experts(fg_engine *e) { return e->xall; }

/* 1 if loading group g into a slot brings its experts too: a split sparse
 * layer under FG_EXPERTS_ALL. */
static int loads_experts_with_group(const fg_plan *pl, int g) {
    return g >= 0 && pl->E && pl->xview[g] && pl->p.expert_load == FG_EXPERTS_ALL;
}

/* Make slot s hold group g: the disk-tier tensors are read into the slot's
 * stage first (not waiting for the slot: only for the stage's last COPY
 * out); the group's COPY to the device follows when they are in, at
 * once without disk tensors. A split sparse layer's experts come along
 * under FG_EXPERTS_ALL, else as batches route (fg_load_experts). */
fg_status fg_load_weight(fg_engine *e, int g, int s, int token) {
    const fg_plan *pl = &e->pl;
    fg_wslot *w = &e->w[s];
    if (w->group == g) return FG_OK;
    w->token = token;
    int first, count;
    group_range(g, &first, &count);
    /* the COPY into the device slot waits for every compute reading it */
    w->readers_before_load = w->prev_readers = w->last_read;
    w->last_read = w->load = 0;
    w->group = NO_GROUP;
    w->ndisk = 0;
    if (pl->E) memset(w->xheld, 0, (size_t)pl->E);
    fg_status st = FG_OK;
    for (int i = first; i < first + count && !st; i++) {
        if (!pl->sp[i].present || pl->wtier[i] != FG_TIER_DISK) continue;
        if (!w->ndisk && (st = fg_cmdq_await(&e->q, w->stage_read))) break;
        fg_msg m;
        fg_msg_init(&m, FG_MSG_DISK_READ);
        m.u.disk.file_offset = e->store_off[i];
        m.u.disk.buf = sub_handle(e, pl->wstage[s], pl->wslot_off[i], pl->whome[i].n);
        snprintf(m.u.disk.path, sizeof m.u.disk.path, "%s", fg_store_path(e->store, e->store_file[i]));
        st = fg_cmdq_submit(&e->q, FG_ROLE_DISK, &m, 0, &w->disk[w->ndisk++]);
    }
    if (!st && loads_experts_with_group(pl, g)) {
        if (!w->ndisk) st = fg_cmdq_await(&e->q, w->stage_read);
        if (!st) st = expert_reads(e, s, g, all_experts(e), w->disk, &w->ndisk, FG_WSLOT_MAX_DISK);
    }
    if (st) return st;
    w->group = g;
    w->copy_pending = 1;
    return w->ndisk ? FG_OK : issue_weight_copy(e, s);
}

/* The first time a run reads a tensor from the store, its bytes are checked
 * against the store's checksum: corrupted weights are never used. */
static fg_status check_stage(fg_engine *e, int s, int first, int count) {
    const fg_plan *pl = &e->pl;
    for (int i = first; i < first + count; i++) {
        if (!pl->sp[i].present || pl->wtier[i] != FG_TIER_DISK || e->store_checked[i]) continue;
        const void *p = fg_engine_ptr(e, fg_loc_sub(pl->wstage[s], pl->wslot_off[i], pl->whome[i].n));
        if (!p || fg_store_checksum(p, pl->whome[i].n) != e->store_sum[i]) {
            const char *path = fg_store_path(e->store, e->store_file[i]);
            fg_store_invalidate(e->store, e->store_file[i]);   /* the next run rebuilds it */
            return fg_err_set(FG_ERUNTIME, "%s: tensor '%s' at offset %llu does not match its checksum: the tier "
                                           "store is damaged (the file is removed and will be rebuilt on the next run)",
                              path, pl->sp[i].name, (unsigned long long)e->store_off[i]);
        }
        e->store_checked[i] = 1;
    }
    return FG_OK;
}

/* The group's disk reads are in (waited for here): its off-GPU tensors'
 * COPY to the device slot, behind the slot's last readers (more than one
 * COPY only for a sparse layer's experts, FG_EXPERTS_ALL). */
static fg_status issue_weight_copy(fg_engine *e, int s) {
    const fg_plan *pl = &e->pl;
    fg_wslot *w = &e->w[s];
    if (!w->copy_pending) return FG_OK;
    fg_status st = FG_OK;
    for (int q = 0; q < w->ndisk && !st; q++) st = fg_cmdq_await(&e->q, w->disk[q]);
    w->ndisk = 0;
    w->copy_pending = 0;
    int first, count, g = w->group, with_x = loads_experts_with_group(pl, g);
    group_range(g, &first, &count);
    if (st || (st = check_stage(e, s, first, count))) return st;
    if (with_x && (st = check_experts(e, s, g, all_experts(e)))) return st;
    copy_pairs p = {0};
    int from_stage = 0;
    uint64_t dense = 0;
    for (int i = first; i < first + count; i++) {
        if (!pl->sp[i].present || pl->wtier[i] == FG_TIER_GPU) continue;
        int disk = pl->wtier[i] == FG_TIER_DISK;
        fg_shm_handle src = disk ? sub_handle(e, pl->wstage[s], pl->wslot_off[i], pl->whome[i].n) : fg_engine_handle(e, pl->whome[i]);
        from_stage |= disk;
        dense += pl->whome[i].n;
        pairs_add(&p, src, fg_weight_handle(e, i, s));
    }
    int ndense = p.n;
    if (with_x) {
        expert_pairs(e, s, g, all_experts(e), &p);
        from_stage |= pl->xtier_count[FG_TIER_DISK] > 0;
    }
    if (e->xs.dense_bytes && w->token < e->xs.G) e->xs.dense_bytes[w->token] += dense;
    fg_deps d = {{0}};
    long before = e->q.commands;
    if (p.n && !(st = fg_cmdq_need(&e->q, &d, w->readers_before_load)) && !(st = pairs_submit(e, &p, &d, &w->load)))
        fg_cmds_issued(e, before, with_x ? copies_for(p.n) : copies_for(ndense) * FG_CMDS_WEIGHT_COPY);
    pairs_free(&p);
    w->readers_before_load = 0;
    if (from_stage) w->stage_read = w->load;
    return st;
}

fg_status fg_weight_ready(fg_engine *e, int s, fg_deps *d) {
    fg_status st = issue_weight_copy(e, s);
    return st ? st : fg_cmdq_need(&e->q, d, e->w[s].load);
}

fg_status fg_weight_poll(fg_engine *e, int s) {
    fg_wslot *w = &e->w[s];
    if (!w->copy_pending) return FG_OK;
    for (int q = 0; q < w->ndisk; q++)
        if (fg_super_test(e->sup, w->disk[q]) == 0) return FG_OK;
    return issue_weight_copy(e, s);
}

/* ---- KV cache and hidden states ------------------------------------------- */

/* Bytes of positions [0, t) of a time-major (Tmax, gbs, H) cache block, as
 * stored (compressed or not): a prefix of positions is one byte range. */
static uint64_t cache_rows(const fg_plan *pl, int t) { return (uint64_t)t * pl->gbs * fg_cache_row_bytes(pl->c); }

/* The unit's KV cache prefix [0, past) from its CPU or disk home into the
 * device slots of its parity (GPU attention over an off-GPU cache), once
 * the slots' last users are done. */
fg_status fg_load_cache(fg_engine *e, const fg_unit *u, fg_deps *ld) {
    const fg_plan *pl = &e->pl;
    if (!fg_plan_cache_off_gpu(pl, u->j) || fg_unit_cpu_attn(pl, u)) return FG_OK;
    int p = u->k % 2;
    fg_deps d = {{0}};
    fg_status st = claim(e, &d, &e->par[p].kv);
    fg_op_step s = fg_unit_step(e, u);
    if (!st && s.past > 0) {
        long before = e->q.commands;
        int l = u->j - 1;
        uint64_t nb = cache_rows(pl, (int)s.past);
        fg_loc ksrc = pl->kc[l * pl->K + u->k], vsrc = pl->vc[l * pl->K + u->k];
        int disk = fg_plan_cache_on_disk(pl, u->j);
        if (disk) {   /* the prefix from disk into the stage first */
            uint64_t r1, r2;
            if ((st = fg_cmdq_await(&e->q, e->par[p].kvstage_read)) ||
                (st = spill_io(e, FG_MSG_DISK_READ, ksrc.off, sub_handle(e, pl->kstage[p], 0, nb), &r1)) ||
                (st = spill_io(e, FG_MSG_DISK_READ, vsrc.off, sub_handle(e, pl->vstage[p], 0, nb), &r2)) ||
                (st = fg_cmdq_await(&e->q, r1)) || (st = fg_cmdq_await(&e->q, r2)))
                return st;
            ksrc = pl->kstage[p], vsrc = pl->vstage[p];
        }
        fg_msg c;
        fg_msg_init(&c, FG_MSG_COPY);
        fg_msg_copy_add(&c, sub_handle(e, ksrc, 0, nb), sub_handle(e, pl->kslot[p], 0, nb));
        fg_msg_copy_add(&c, sub_handle(e, vsrc, 0, nb), sub_handle(e, pl->vslot[p], 0, nb));
        if (!(st = fg_cmdq_submit_gpu(&e->q, &c, ST_H2D, &d, &e->par[p].kv.write)))
            fg_cmds_issued(e, before, FG_CMDS_CACHE_MOVE + disk * FG_CMDS_CACHE_DISK);
        d.s[ST_H2D] = e->par[p].kv.write;
        if (disk) e->par[p].kvstage_read = e->par[p].kv.write;
    }
    fg_deps_merge(ld, &d);
    return st;
}

/* The unit's hidden state from its CPU or disk home into the device slot
 * of its parity. The compute writes that slot too, so it waits for the
 * slot's last users even when nothing is loaded (the embedding). */
/* A pipeline stage's first layer: the hidden state the rank before sent,
 * from its shm buffer to the device. With activations on the GPU the
 * batch's home was last used by this rank's computes and copies out. */
static fg_status load_ring_hidden(fg_engine *e, const fg_unit *u, fg_deps *ld) {
    const fg_plan *pl = &e->pl;
    int p = u->k % 2;
    fg_deps d = {{[ST_COMPUTE] = e->q.last_gpu[ST_COMPUTE], [ST_D2H] = e->q.last_gpu[ST_D2H]}};
    fg_status st = pl->atier == FG_TIER_GPU ? FG_OK : claim(e, &d, &e->par[p].h);
    fg_loc dev = fg_unit_hidden(e, u), src;
    if (st || (st = fg_pipe_take_hidden(e, u, dev.n, &src))) return st;
    fg_msg c;
    fg_msg_init(&c, FG_MSG_COPY);
    fg_msg_copy_add(&c, fg_engine_handle(e, src), fg_engine_handle(e, dev));
    uint64_t seq;
    if ((st = fg_cmdq_submit_gpu(&e->q, &c, ST_H2D, &d, &seq))) return st;
    fg_pipe_took(e, seq);
    if (pl->atier != FG_TIER_GPU) e->par[p].h.write = seq;
    fg_deps in = {{[ST_H2D] = seq}};
    fg_deps_merge(ld, &in);
    return FG_OK;
}

fg_status fg_load_hidden(fg_engine *e, const fg_unit *u, fg_deps *ld) {
    const fg_plan *pl = &e->pl;
    if (fg_pipe_recvs(e, u)) return load_ring_hidden(e, u, ld);
    if (e->pipe.P > 1 && u->j == 0 && u->i > 0) {   /* rank 0: the ids the last rank sampled */
        fg_status st = fg_pipe_load_ids(e, u, ld);
        if (st) return st;
    }
    if (pl->atier == FG_TIER_GPU) return FG_OK;
    int p = u->k % 2;
    fg_deps d = {{0}};
    fg_status st = claim(e, &d, &e->par[p].h);
    if (!st && u->j > 0) {
        long before = e->q.commands;
        fg_loc dev = fg_unit_hidden(e, u);
        fg_shm_handle src = sub_handle(e, pl->hhome[u->k], 0, dev.n);
        int disk = pl->atier == FG_TIER_DISK;
        if (disk) {   /* disk -> stage, then stage -> device */
            uint64_t r;
            src = sub_handle(e, pl->hstage[p], 0, dev.n);
            if ((st = fg_cmdq_await(&e->q, e->par[p].hstage_read)) ||
                (st = spill_io(e, FG_MSG_DISK_READ, pl->hhome[u->k].off, src, &r)) || (st = fg_cmdq_await(&e->q, r)))
                return st;
        }
        fg_msg c;
        fg_msg_init(&c, FG_MSG_COPY);
        fg_msg_copy_add(&c, src, fg_engine_handle(e, dev));
        if (!(st = fg_cmdq_submit_gpu(&e->q, &c, ST_H2D, &d, &e->par[p].h.write)))
            fg_cmds_issued(e, before, FG_CMDS_HIDDEN_MOVE + disk * FG_CMDS_HIDDEN_DISK);
        d.s[ST_H2D] = e->par[p].h.write;
        if (disk) e->par[p].hstage_read = e->par[p].h.write;
    }
    fg_deps_merge(ld, &d);
    return st;
}

/* The step's new cache rows [past, past+S) from the device slots back to
 * the layer's CPU home, or through the stage to disk, behind the compute
 * that wrote them. */
fg_status fg_store_cache(fg_engine *e, const fg_pending_store *ps) {
    const fg_plan *pl = &e->pl;
    const fg_unit *u = &ps->u;
    if (!ps->valid || !ps->attn || !fg_plan_cache_off_gpu(pl, u->j)) return FG_OK;
    int p = u->k % 2, l = u->j - 1;
    fg_use *kv = &e->par[p].kv;
    fg_loc kh = pl->kc[l * pl->K + u->k], vh = pl->vc[l * pl->K + u->k];
    fg_op_step s = fg_unit_step(e, u);
    fg_deps d = {{0}};
    fg_status st = fg_cmdq_need(&e->q, &d, ps->attn);
    if (st) return st;
    long before = e->q.commands;
    uint64_t o = cache_rows(pl, (int)s.past), nb = cache_rows(pl, (int)s.S);
    int disk = fg_plan_cache_on_disk(pl, u->j);
    fg_loc kd = disk ? pl->kstage[p] : kh, vd = disk ? pl->vstage[p] : vh;
    fg_msg c;
    fg_msg_init(&c, FG_MSG_COPY);
    fg_msg_copy_add(&c, sub_handle(e, pl->kslot[p], o, nb), sub_handle(e, kd, o, nb));
    fg_msg_copy_add(&c, sub_handle(e, pl->vslot[p], o, nb), sub_handle(e, vd, o, nb));
    if ((st = fg_cmdq_submit_gpu(&e->q, &c, ST_D2H, &d, &kv->read[0]))) return st;
    if (!disk) {
        fg_cmds_issued(e, before, FG_CMDS_CACHE_MOVE);
        return FG_OK;
    }
    /* then to disk: O_DIRECT wants an aligned start, so from the
     * FG_SHM_ALIGN boundary below the new rows (the stage holds the prefix
     * loaded for this step) */
    uint64_t a0 = o & ~(uint64_t)(FG_SHM_ALIGN - 1);
    if ((st = fg_cmdq_await(&e->q, kv->read[0])) ||
        (st = spill_io(e, FG_MSG_DISK_WRITE, kh.off + a0, sub_handle(e, pl->kstage[p], a0, o + nb - a0), &kv->read[0])) ||
        (st = spill_io(e, FG_MSG_DISK_WRITE, vh.off + a0, sub_handle(e, pl->vstage[p], a0, o + nb - a0), &kv->read[1])))
        return st;
    fg_cmds_issued(e, before, FG_CMDS_CACHE_MOVE + FG_CMDS_CACHE_DISK);
    return FG_OK;
}

/* The hidden state back to its CPU home (or via the stage to disk) behind
 * the unit's last compute. */
fg_status fg_store_hidden(fg_engine *e, const fg_pending_store *ps) {
    const fg_plan *pl = &e->pl;
    if (ps->valid && fg_pipe_sends(e, &ps->u)) return fg_pipe_send_hidden(e, ps);   /* to the next stage */
    if (!ps->valid || pl->atier == FG_TIER_GPU) return FG_OK;
    const fg_unit *u = &ps->u;
    int p = u->k % 2, disk = pl->atier == FG_TIER_DISK;
    fg_use *h = &e->par[p].h;
    fg_loc dev = fg_unit_hidden(e, u);
    fg_deps d = {{0}};
    fg_status st = fg_cmdq_need(&e->q, &d, ps->last);
    if (st) return st;
    long before = e->q.commands;
    fg_shm_handle dst = sub_handle(e, disk ? pl->hstage[p] : pl->hhome[u->k], 0, dev.n);
    fg_msg c;
    fg_msg_init(&c, FG_MSG_COPY);
    fg_msg_copy_add(&c, fg_engine_handle(e, dev), dst);
    if ((st = fg_cmdq_submit_gpu(&e->q, &c, ST_D2H, &d, &h->read[0]))) return st;
    if (disk && ((st = fg_cmdq_await(&e->q, h->read[0])) ||
                 (st = spill_io(e, FG_MSG_DISK_WRITE, pl->hhome[u->k].off, dst, &h->read[0]))))
        return st;
    fg_cmds_issued(e, before, FG_CMDS_HIDDEN_MOVE + disk * FG_CMDS_HIDDEN_DISK);
    return FG_OK;
}

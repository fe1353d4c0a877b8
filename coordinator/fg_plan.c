/* fg_plan.c - the memory plan (see fg_plan.h): a bump allocator per
 * segment, 4096-aligned (O_DIRECT and page pinning), filled in a fixed
 * order so that every process that needs an offset reads it from here. */
#include "fg_plan.h"

#include <stdio.h>
#include <string.h>

#include "fg_devsize.h"
#include "fg_sample.h"
#include "fg_shm.h"

const char *fg_plan_seg_name(int seg) {
    static const char *n[NSEG] = {"device", "w", "wgpu", "kv", "act", "io", "stage", "spill"};
    return seg >= 0 && seg < NSEG ? n[seg] : "?";
}

const char *fg_human_bytes(uint64_t b, char *buf) {
    if (b >= (1ull << 30)) sprintf(buf, "%.2f GiB", b / (double)(1ull << 30));
    else sprintf(buf, "%.1f MiB", b / (double)(1ull << 20));
    return buf;
}


/* n bytes at the end of segment seg (shared memory starts past its header page). */
static fg_loc place(fg_plan *pl, int seg, uint64_t n) {
    uint64_t start = seg >= FG_PLAN_FIRST_SHM && seg < FG_PLAN_END_SHM ? FG_SHM_HEADER_BYTES : 0;
    uint64_t off = fg_shm_align_up(pl->used[seg] < start ? start : pl->used[seg]);
    pl->used[seg] = off + n;
    return (fg_loc){seg, off, n};
}

static fg_loc *locs(int n) { return fg_xcalloc((size_t)n, sizeof(fg_loc)); }

void fg_plan_free(fg_plan *pl) {
    free(pl->wtier); free(pl->whome); free(pl->wsrc); free(pl->wslot_off);
    free(pl->etier); free(pl->xview); free(pl->ehome); free(pl->esrc); free(pl->xstage_off); free(pl->xstage_stride);
    free(pl->ctier); free(pl->kc); free(pl->vc); free(pl->hhome);
    free(pl->ids_dev); free(pl->ids_io); free(pl->mask_dev); free(pl->mask_io);
    free(pl->rng_dev); free(pl->rng_io); free(pl->logits_io); free(pl->counts_io);
    memset(pl, 0, sizeof *pl);
}

uint64_t fg_plan_gpu_bytes(const fg_plan *pl) { return pl->used[SEG_DEV] + pl->ws_bytes; }

uint64_t fg_plan_shm_bytes(const fg_plan *pl) {
    uint64_t n = 0;
    for (int s = FG_PLAN_FIRST_SHM; s < FG_PLAN_END_SHM; s++) n += pl->used[s];
    return n;
}

/* A sparse layer's experts: each expert's tier by the policy, a stack's
 * experts of one tier back to back in that tier's home. Where every expert
 * is on the GPU a stack is an ordinary GPU tensor (its home the whole
 * stack); else the ops read the stacks whole in the weight slot (*slot
 * grows by them) and the disk experts come through the stage, each
 * aligned (*stage grows). */
static void plan_experts(fg_plan *pl, int l, uint64_t *slot, uint64_t *stage) {
    int E = pl->E, view = 0;
    fg_tier *t = pl->etier + (size_t)l * E;
    for (int e = 0; e < E; e++) view |= (t[e] = fg_policy_expert_tier(&pl->p, e, E)) != FG_TIER_GPU;
    pl->xview[l] = (uint8_t)view;
    for (int m = 0; m < FG_PLAN_STACKS; m++) {
        int i = fg_spec_layer(l, fg_plan_stack_role(m)), x = l * FG_PLAN_STACKS + m;
        if (!pl->sp[i].experts) continue;
        uint64_t eb = fg_spec_expert_bytes(pl->c, pl->sp, i), n[FG_NTIERS] = {0}, r[FG_NTIERS] = {0};
        for (int e = 0; e < E; e++) n[t[e]]++;
        fg_loc dev = place(pl, SEG_DEV, n[FG_TIER_GPU] * eb), src = place(pl, SEG_WGPU, n[FG_TIER_GPU] * eb);
        fg_loc cpu = n[FG_TIER_CPU] ? place(pl, SEG_W, n[FG_TIER_CPU] * eb) : (fg_loc){SEG_W, 0, 0};
        for (int e = 0; e < E; e++) {
            fg_loc *h = &pl->ehome[(size_t)x * E + e];
            uint64_t off = r[t[e]]++ * eb;
            if (t[e] == FG_TIER_GPU) *h = fg_loc_sub(dev, off, eb), pl->esrc[(size_t)x * E + e] = fg_loc_sub(src, off, eb);
            else if (t[e] == FG_TIER_CPU) *h = fg_loc_sub(cpu, off, eb);
            else *h = (fg_loc){SEG_STAGE, 0, eb}, pl->any_disk_weights = 1;
        }
        pl->wtier[i] = FG_TIER_GPU;   /* the ops read it on the device: its home, or the slot */
        if (!view) {
            pl->whome[i] = dev, pl->wsrc[i] = src;
            continue;
        }
        pl->whome[i] = (fg_loc){SEG_DEV, 0, (uint64_t)E * eb};   /* n only: the stack lives in the slot */
        *slot = fg_shm_align_up(*slot);
        pl->wslot_off[i] = *slot;
        *slot += (uint64_t)E * eb;
        if (n[FG_TIER_DISK]) {
            pl->xstage_stride[x] = fg_shm_align_up(eb);
            *stage = fg_shm_align_up(*stage);
            pl->xstage_off[x] = *stage;
            *stage += (uint64_t)E * pl->xstage_stride[x];
        }
    }
}

/* Weights: a home per tensor by the policy; the off-GPU tensors of each
 * group (a decoder layer, or the model-level tensors) packed into a slot,
 * the disk-tier ones into the slot's stage at the same offsets (a sparse
 * layer's experts: plan_experts). */
static void plan_weights(fg_plan *pl) {
    const fg_spec *sp = pl->sp;
    int n = fg_spec_count(pl->c), L = pl->L;
    pl->wtier = fg_xcalloc((size_t)n, sizeof *pl->wtier);
    pl->whome = locs(n);
    pl->wsrc = locs(n);
    pl->wslot_off = fg_xcalloc((size_t)n, sizeof *pl->wslot_off);
    pl->E = pl->c->n_experts;
    size_t nx = (size_t)L * FG_PLAN_STACKS;
    pl->etier = fg_xcalloc((size_t)L * (size_t)pl->E + 1, sizeof *pl->etier);
    pl->xview = fg_xcalloc((size_t)L + 1, 1);
    pl->ehome = locs((int)(nx * (size_t)pl->E + 1));
    pl->esrc = locs((int)(nx * (size_t)pl->E + 1));
    pl->xstage_off = fg_xcalloc(nx + 1, sizeof *pl->xstage_off);
    pl->xstage_stride = fg_xcalloc(nx + 1, sizeof *pl->xstage_stride);
    for (int e = 0; e < pl->E; e++) pl->xtier_count[fg_policy_expert_tier(&pl->p, e, pl->E)]++;
    for (int g = -1; g < L; g++) {
        int first = g < 0 ? 0 : fg_spec_layer(g, 0), count = g < 0 ? FG_GW_COUNT : FG_LW_COUNT;
        uint64_t slot = 0, stage = 0;
        fg_policy_weight_tiers(&pl->p, sp, g, pl->wtier + first);
        for (int i = first; i < first + count; i++) {
            if (!fg_plan_spec_here(pl, i)) {
                pl->wtier[i] = FG_TIER_GPU;   /* absent or another stage's: nowhere, 0 bytes */
                continue;
            }
            if (sp[i].experts) continue;   /* plan_experts */
            uint64_t bytes = fg_spec_stored_bytes(pl->c, sp, i);   /* compressed where the run compresses */
            if (pl->wtier[i] == FG_TIER_GPU) {
                pl->whome[i] = place(pl, SEG_DEV, bytes);
                pl->wsrc[i] = place(pl, SEG_WGPU, bytes);
                continue;
            }
            if (pl->wtier[i] == FG_TIER_CPU) pl->whome[i] = place(pl, SEG_W, bytes);
            else pl->whome[i] = (fg_loc){SEG_STAGE, 0, bytes}, pl->any_disk_weights = 1;   /* in the stage of its slot */
            slot = fg_shm_align_up(slot);
            pl->wslot_off[i] = slot;
            slot += bytes;
        }
        stage = slot;   /* the dense disk tensors at their slot offsets */
        if (g >= 0 && fg_plan_has_group(pl, g) && fg_config_layer_sparse(pl->c, g)) plan_experts(pl, g, &slot, &stage);
        if (slot > pl->wslot_bytes) pl->wslot_bytes = slot;
        if (stage > pl->wstage_bytes) pl->wstage_bytes = stage;
    }
    for (int s = 0; s < FG_NSLOTS; s++) pl->wslot[s] = place(pl, SEG_DEV, pl->wslot_bytes);
    if (pl->any_disk_weights)
        for (int s = 0; s < FG_NSLOTS; s++) pl->wstage[s] = place(pl, SEG_STAGE, pl->wstage_bytes);
}

void fg_plan_tier_bytes(const fg_plan *pl, uint64_t by[FG_NTIERS]) {
    for (int t = 0; t < FG_NTIERS; t++) by[t] = 0;
    for (int g = -1; g < pl->L; g++) {   /* -1: the model-level tensors */
        int first = g < 0 ? 0 : fg_spec_layer(g, 0), count = g < 0 ? FG_GW_COUNT : FG_LW_COUNT;
        for (int i = first; i < first + count; i++) {
            if (!fg_plan_spec_here(pl, i)) continue;
            int x = fg_plan_stack(pl, i);
            if (x < 0) by[pl->wtier[i]] += fg_spec_stored_bytes(pl->c, pl->sp, i);
            else
                for (int e = 0; e < pl->E; e++)   /* each expert of the stack by its own tier */
                    by[pl->etier[(size_t)g * pl->E + e]] += pl->ehome[(size_t)x * pl->E + e].n;
        }
    }
}

static void plan_cache(fg_plan *pl) {
    static const int home_seg[FG_NTIERS] = {SEG_DEV, SEG_KV, SEG_SPILL};
    int L = pl->L, K = pl->K, any_off_gpu = 0, any_disk = 0;
    uint64_t bytes = (uint64_t)pl->Tmax * pl->gbs * fg_cache_row_bytes(pl->c);
    pl->ctier = fg_xcalloc((size_t)L, sizeof *pl->ctier);
    pl->kc = locs(L * K);
    pl->vc = locs(L * K);
    for (int l = pl->st.lo; l < pl->st.hi; l++) {   /* the stage's layers; the policy over its share */
        pl->ctier[l] = fg_policy_cache_tier(&pl->p, l - pl->st.lo, pl->st.hi - pl->st.lo);
        any_off_gpu |= pl->ctier[l] != FG_TIER_GPU;
        any_disk |= pl->ctier[l] == FG_TIER_DISK;
        for (int k = 0; k < K; k++) {
            pl->kc[l * K + k] = place(pl, home_seg[pl->ctier[l]], bytes);
            pl->vc[l * K + k] = place(pl, home_seg[pl->ctier[l]], bytes);
        }
    }
    for (int s = 0; s < FG_NSLOTS && any_off_gpu; s++) pl->kslot[s] = place(pl, SEG_DEV, bytes), pl->vslot[s] = place(pl, SEG_DEV, bytes);
    for (int s = 0; s < FG_NSLOTS && any_disk; s++) pl->kstage[s] = place(pl, SEG_STAGE, bytes), pl->vstage[s] = place(pl, SEG_STAGE, bytes);
}

static void plan_activations(fg_plan *pl) {
    static const int home_seg[FG_NTIERS] = {SEG_DEV, SEG_ACT, SEG_SPILL};
    uint64_t bytes = 2ull * pl->gbs * pl->S * pl->c->hidden;
    pl->atier = fg_policy_act_tier(&pl->p);
    pl->hhome = locs(pl->K);
    for (int k = 0; k < pl->K; k++) pl->hhome[k] = place(pl, home_seg[pl->atier], bytes);
    for (int s = 0; s < FG_NSLOTS && pl->atier != FG_TIER_GPU; s++) pl->hslot[s] = place(pl, SEG_DEV, bytes);
    for (int s = 0; s < FG_NSLOTS && pl->atier == FG_TIER_DISK; s++) pl->hstage[s] = place(pl, SEG_STAGE, bytes);
}

static void plan_io(fg_plan *pl) {
    int K = pl->K;
    uint64_t B = (uint64_t)pl->gbs;
    pl->ids_dev = locs(K), pl->ids_io = locs(K), pl->mask_dev = locs(K), pl->mask_io = locs(K);
    pl->rng_dev = locs(K), pl->rng_io = locs(K), pl->logits_io = locs(K);
    for (int k = 0; k < K; k++) {
        pl->rng_dev[k] = place(pl, SEG_DEV, sizeof(fg_sample_row) * B);
        pl->rng_io[k] = place(pl, SEG_IO, sizeof(fg_sample_row) * B);
        pl->ids_dev[k] = place(pl, SEG_DEV, 4 * B * pl->S);
        pl->mask_dev[k] = place(pl, SEG_DEV, B * pl->Tmax);
        pl->ids_io[k] = place(pl, SEG_IO, 4 * B * pl->S);
        pl->mask_io[k] = place(pl, SEG_IO, B * pl->Tmax);
        pl->logits_io[k] = place(pl, SEG_IO, 4 * B * pl->c->vocab_size);
    }
    for (int s = 0; s < FG_NSLOTS; s++) pl->logits_dev[s] = place(pl, SEG_DEV, 4 * B * pl->c->vocab_size);
    int routed = 0;
    for (int l = 0; l < pl->L; l++) routed |= pl->xview[l] && pl->p.expert_load == FG_EXPERTS_ROUTED;
    pl->counts_io = locs(K);
    for (int s = 0; s < FG_NSLOTS && routed; s++) pl->counts_dev[s] = place(pl, SEG_DEV, 4ull * (uint64_t)pl->E);
    for (int k = 0; k < K && routed; k++) pl->counts_io[k] = place(pl, SEG_IO, 4ull * (uint64_t)pl->E);
    int split = 0;
    for (int l = 0; l < pl->L; l++) split |= pl->xview[l];
    if (pl->p.cpu_expert_compute && split && pl->xtier_count[FG_TIER_CPU]) {
        uint64_t hb = 2ull * B * pl->S * pl->c->hidden, yb = 4ull * B * pl->S * pl->c->experts_per_token * pl->c->hidden;
        pl->xcpu_lo = pl->xtier_count[FG_TIER_GPU], pl->xcpu_n = pl->xtier_count[FG_TIER_CPU];
        for (int s = 0; s < FG_NSLOTS; s++) {
            pl->hx_io[s] = place(pl, SEG_IO, hb);
            pl->ycpu_io[s] = place(pl, SEG_IO, yb);
            pl->ycpu_dev[s] = place(pl, SEG_DEV, yb);
        }
    }
    uint64_t hb = 2ull * B * pl->S * pl->c->hidden;
    for (int s = 0; s < 2 && !pl->st.embed; s++) pl->ring_in[s] = place(pl, SEG_IO, hb);
    for (int s = 0; s < 2 && !pl->st.head; s++) pl->ring_out[s] = place(pl, SEG_IO, hb);
    int any_cpu_cache = 0;
    for (int l = 0; l < pl->L; l++) any_cpu_cache |= pl->ctier[l] == FG_TIER_CPU;
    if (pl->p.cpu_cache_compute && any_cpu_cache) {   /* q and ctx A*d wide, k and v KV*d */
        uint64_t xq = 2 * B * (uint64_t)fg_config_q_dim(pl->c), xk = 2 * B * (uint64_t)fg_config_kv_dim(pl->c);
        pl->q_dev = place(pl, SEG_DEV, xq), pl->k_dev = place(pl, SEG_DEV, xk);
        pl->v_dev = place(pl, SEG_DEV, xk), pl->ctx_dev = place(pl, SEG_DEV, xq);
        pl->q_io = place(pl, SEG_IO, xq), pl->k_io = place(pl, SEG_IO, xk);
        pl->v_io = place(pl, SEG_IO, xk), pl->ctx_io = place(pl, SEG_IO, xq);
    }
}

fg_status fg_plan_build(fg_plan *pl, const fg_model_config *c, const fg_spec *sp, const fg_policy *p, int S, int G,
                        const char *backend, uint64_t gpu_mem, uint64_t cpu_mem, uint64_t disk_mem) {
    fg_stage whole = fg_stage_whole(c);
    return fg_plan_build_stage(pl, c, sp, p, S, G, backend, gpu_mem, cpu_mem, disk_mem, &whole);
}

fg_status fg_plan_build_stage(fg_plan *pl, const fg_model_config *c, const fg_spec *sp, const fg_policy *p, int S,
                              int G, const char *backend, uint64_t gpu_mem, uint64_t cpu_mem, uint64_t disk_mem,
                              const fg_stage *stage) {
    memset(pl, 0, sizeof *pl);
    fg_status st = fg_policy_validate(p);
    if (st) return st;
    pl->c = c, pl->sp = sp, pl->p = *p, pl->st = *stage;
    pl->L = c->n_layers, pl->K = p->num_gpu_batches, pl->gbs = p->gbs, pl->S = S, pl->G = G, pl->Tmax = S + G;
    plan_weights(pl);
    plan_cache(pl);
    plan_activations(pl);
    plan_io(pl);
    if ((st = fg_devsize_workspace_bytes(backend, c, (uint32_t)(pl->gbs * S), &pl->ws_bytes))) return st;

    char a[32], b[32], w[32], m[32];
    uint64_t gpu = fg_plan_gpu_bytes(pl), shm = fg_plan_shm_bytes(pl);
    if (gpu_mem && gpu > gpu_mem)
        return fg_err_set(FG_EINPUT, "the policy needs %s of GPU memory (weights, cache and activations placed "
                                     "there, two weight slots of %s, %s workspace %s) but --gpu-mem is %s; lower "
                                     "the GPU percentages or the batch size", fg_human_bytes(gpu, a),
                          fg_human_bytes(pl->wslot_bytes, b), backend, fg_human_bytes(pl->ws_bytes, w),
                          fg_human_bytes(gpu_mem, m));
    if (cpu_mem && shm > cpu_mem)
        return fg_err_set(FG_EINPUT, "the policy needs %s of CPU memory (shared memory for CPU-tier weights, cache, "
                                     "activations and staging) but --cpu-mem is %s", fg_human_bytes(shm, a),
                          fg_human_bytes(cpu_mem, b));
    if (disk_mem && pl->used[SEG_SPILL] > disk_mem)
        return fg_err_set(FG_EINPUT, "the KV cache and activations placed on disk need %s but --disk-mem is %s",
                          fg_human_bytes(pl->used[SEG_SPILL], a), fg_human_bytes(disk_mem, b));
    return FG_OK;
}

/* fg_policy_auto.c - what `--policy auto` needs before its search: whether
 * the choice depends on a profile at all, and how much of the disk a
 * profile must measure. Both are asked of the engine's own memory plan
 * (fg_plan_build), so "fits" means what the run would find. The search is
 * fg_search.c's; measuring, fg_profile_tiers.c's. */
#include "fg_policy_auto.h"

#include "fg_cost.h"
#include "fg_plan.h"

static int fits(const fg_model_config *c, const fg_spec *sp, const fg_search_opts *so, const fg_policy *p,
                uint64_t gpu_mem) {
    fg_plan pl;
    fg_status st = fg_plan_build(&pl, c, sp, p, so->S, so->G, so->backend, gpu_mem, so->cpu_mem, so->disk_mem);
    fg_plan_free(&pl);
    return st == FG_OK;
}

static void place(fg_policy *p, const fg_model_config *c, double gpu, int gbs, int K) {
    *p = (fg_policy){.gbs = gbs, .num_gpu_batches = K, .w_gpu = gpu, .w_cpu = 100 - gpu, .c_gpu = gpu,
                     .c_cpu = 100 - gpu, .h_gpu = gpu, .h_cpu = 100 - gpu, .overlap = 1,
                     .compress_weight = c->compress_weight, .compress_cache = c->compress_cache};
}

/* The GPU batch fixed by so, else the prompts in one batch. */
static int largest_gbs(const fg_search_opts *so) { return so->gbs > 0 ? so->gbs : so->n_prompts > 0 ? so->n_prompts : 1; }

/* The block the prompts make at GPU batch gbs: K batches to hold them all
 * (the given K where fixed). */
static int blocks_of(const fg_search_opts *so, int gbs) {
    int n = so->n_prompts > 0 ? so->n_prompts : 1;
    return so->K > 0 ? so->K : (n + gbs - 1) / gbs;
}

int fg_auto_all_gpu(const fg_model_config *c, const fg_spec *sp, const fg_search_opts *so, fg_policy *p) {
    int gbs = largest_gbs(so);
    for (;;) {
        place(p, c, 100, gbs, blocks_of(so, gbs));
        if (fits(c, sp, so, p, so->gpu_mem)) return 1;
        if (so->gbs > 0 || gbs == 1) return 0;
        gbs = (gbs + 1) / 2;   /* smaller batches: a smaller workspace, the same cache */
    }
}

uint64_t fg_auto_disk_bytes(const fg_model_config *c, const fg_spec *sp, const fg_search_opts *so) {
    /* everything off the GPU on the CPU, at the largest block the prompts
     * make, with any GPU: what the CPU must hold for the disk to stay idle */
    fg_policy p;
    int gbs = largest_gbs(so);
    place(&p, c, 0, gbs, blocks_of(so, gbs));
    return fits(c, sp, so, &p, 0) ? 0 : fg_auto_weight_bytes(c, sp);
}

uint64_t fg_auto_weight_bytes(const fg_model_config *c, const fg_spec *sp) {
    fg_cost_case cs = {0};
    fg_cost_case_weights(&cs, c, sp);
    return (uint64_t)(cs.layer_bytes * c->n_layers + cs.model_bytes);
}

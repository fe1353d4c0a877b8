/* fg_policy.c - placement rules (see fg_policy.h). */
#include "fg_policy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *fg_tier_name(fg_tier t) {
    static const char *n[] = {"gpu", "cpu", "disk"};
    return t >= 0 && t < FG_NTIERS ? n[t] : "?";
}

/* FlexGen's get_choice: the first band whose cumulative percentage exceeds cur. */
static fg_tier choose(double cur, double gpu, double cpu) {
    if (cur < gpu) return FG_TIER_GPU;
    if (cur < gpu + cpu) return FG_TIER_CPU;
    return FG_TIER_DISK;
}

fg_status fg_policy_validate(const fg_policy *p) {
    const double v[6] = {p->w_gpu, p->w_cpu, p->c_gpu, p->c_cpu, p->h_gpu, p->h_cpu};
    static const char *what[3] = {"weight", "cache", "activation"};
    if (p->x_set) {
        if (!(p->x_gpu >= 0 && p->x_gpu <= 100 && p->x_cpu >= 0 && p->x_cpu <= 100))
            return fg_err_set(FG_EINPUT, "--percent-experts: %g %g, expected percentages in [0, 100]", p->x_gpu, p->x_cpu);
        if (p->x_gpu + p->x_cpu > 100 + 1e-9)
            return fg_err_set(FG_EINPUT, "--percent-experts: GPU %g + CPU %g is over 100 (the rest goes to disk)",
                              p->x_gpu, p->x_cpu);
    }
    if (p->expert_load != FG_EXPERTS_ROUTED && p->expert_load != FG_EXPERTS_ALL)
        return fg_err_set(FG_EINPUT, "expert load %d: expected routed or all", (int)p->expert_load);
    for (int i = 0; i < 6; i++)
        if (!(v[i] >= 0 && v[i] <= 100))
            return fg_err_set(FG_EINPUT, "--percent: value %d is %g, expected a percentage in [0, 100]", i + 1, v[i]);
    for (int i = 0; i < 3; i++)
        if (v[2 * i] + v[2 * i + 1] > 100 + 1e-9)
            return fg_err_set(FG_EINPUT, "--percent: %s GPU %g + CPU %g is over 100 (the rest goes to disk)", what[i],
                              v[2 * i], v[2 * i + 1]);
    if (!(p->h_gpu == 100 || p->h_cpu == 100 || p->h_gpu + p->h_cpu == 0))
        return fg_err_set(FG_EINPUT, "--percent: activations must be all on one tier (HG HC = 100 0, 0 100 or 0 0), "
                                     "as in FlexGen");
    if (p->gbs < 1) return fg_err_set(FG_EINPUT, "--gpu-batch-size must be >= 1");
    if (p->num_gpu_batches < 1 || p->num_gpu_batches > FG_MAX_GPU_BATCHES)
        return fg_err_set(FG_EINPUT, "--num-gpu-batches must be in [1, %d]", FG_MAX_GPU_BATCHES);
    return FG_OK;
}

/* Bytes of spec i as the dense rule counts them: 0 for a stack of experts,
 * which are placed one by one (fg_policy_expert_tier). */
static double dense_bytes(const fg_model_config *held, const fg_spec *specs, int i) {
    return specs[i].experts ? 0 : (double)fg_spec_stored_bytes(held, specs, i);
}

void fg_policy_weight_tiers(const fg_policy *p, const fg_spec *specs, int layer, fg_tier *tiers) {
    int first = layer < 0 ? 0 : fg_spec_layer(layer, 0), count = layer < 0 ? FG_GW_COUNT : FG_LW_COUNT;
    double total = 0, before = 0;
    fg_model_config held = {.compress_weight = p->compress_weight};   /* all fg_spec_stored_bytes reads of it */
    for (int i = first; i < first + count; i++) total += dense_bytes(&held, specs, i);
    for (int i = first; i < first + count; i++) {
        double sz = dense_bytes(&held, specs, i);
        double mid = total > 0 ? 100.0 * (before + sz / 2) / total : 0;
        tiers[i - first] = choose(mid, p->w_gpu, p->w_cpu);
        before += sz;
    }
}

void fg_policy_expert_pct(const fg_policy *p, double *gpu, double *cpu) {
    *gpu = p->x_set ? p->x_gpu : p->w_gpu;
    *cpu = p->x_set ? p->x_cpu : p->w_cpu;
}

fg_tier fg_policy_expert_tier(const fg_policy *p, int e, int E) {
    double g, c;
    fg_policy_expert_pct(p, &g, &c);
    return choose(100.0 * (e + 0.5) / E, g, c);
}

fg_tier fg_policy_cache_tier(const fg_policy *p, int layer, int n_layers) {
    return choose(100.0 * (layer + 0.5) / n_layers, p->c_gpu, p->c_cpu);
}

fg_tier fg_policy_act_tier(const fg_policy *p) { return choose(50, p->h_gpu, p->h_cpu); }

fg_status fg_policy_parse_percent(fg_policy *p, const char *first, int argc, char **argv, int *optind) {
    if (*optind + 5 > argc) return fg_err_set(FG_EINPUT, "--percent takes six numbers: WG WC CG CC HG HC");
    double v[6];
    for (int i = 0; i < 6; i++) {
        const char *s = i ? argv[*optind + i - 1] : first;
        char *end;
        errno = 0;
        v[i] = strtod(s, &end);
        if (end == s || *end || errno)
            return fg_err_set(FG_EINPUT, "--percent: value %d '%s' is not a number (want WG WC CG CC HG HC)", i + 1, s);
    }
    *optind += 5;
    p->w_gpu = v[0], p->w_cpu = v[1], p->c_gpu = v[2], p->c_cpu = v[3], p->h_gpu = v[4], p->h_cpu = v[5];
    return FG_OK;
}

fg_status fg_policy_parse_percent_experts(fg_policy *p, const char *first, int argc, char **argv, int *optind) {
    if (*optind + 1 > argc) return fg_err_set(FG_EINPUT, "--percent-experts takes two numbers: XG XC");
    double v[2];
    for (int i = 0; i < 2; i++) {
        const char *s = i ? argv[*optind] : first;
        char *end;
        errno = 0;
        v[i] = strtod(s, &end);
        if (end == s || *end || errno)
            return fg_err_set(FG_EINPUT, "--percent-experts: value %d '%s' is not a number (want XG XC)", i + 1, s);
    }
    *optind += 1;
    p->x_set = 1, p->x_gpu = v[0], p->x_cpu = v[1];
    return FG_OK;
}

fg_status fg_policy_parse_expert_load(fg_policy *p, const char *v) {
    if (!strcmp(v, "routed")) p->expert_load = FG_EXPERTS_ROUTED;
    else if (!strcmp(v, "all")) p->expert_load = FG_EXPERTS_ALL;
    else return fg_err_set(FG_EINPUT, "--expert-load: expected routed or all, got '%s'", v);
    return FG_OK;
}

void fg_policy_describe_ex(const fg_policy *p, int with_experts, char *buf, size_t len) {
    char ex[96] = "";
    if (with_experts) {
        double g, c;
        fg_policy_expert_pct(p, &g, &c);
        snprintf(ex, sizeof ex, ", experts %g/%g/%g %s%s", g, c, 100 - g - c,
                 p->expert_load == FG_EXPERTS_ALL ? "loaded all" : "loaded as routed",
                 p->cpu_expert_compute ? ", cpu experts computed there" : "");
    }
    snprintf(buf, len,
             "gbs %d x %d batches; weights gpu/cpu/disk %g/%g/%g%s, cache %g/%g/%g, activations %g/%g/%g%s%s%s%s",
             p->gbs, p->num_gpu_batches, p->w_gpu, p->w_cpu, 100 - p->w_gpu - p->w_cpu, ex, p->c_gpu, p->c_cpu,
             100 - p->c_gpu - p->c_cpu, p->h_gpu, p->h_cpu, 100 - p->h_gpu - p->h_cpu,
             p->cpu_cache_compute ? ", cpu attention" : "", p->overlap ? ", overlap" : ", no overlap",
             p->compress_weight ? ", 4-bit weights" : "", p->compress_cache ? ", 4-bit cache" : "");
}

void fg_policy_describe(const fg_policy *p, char *buf, size_t len) { fg_policy_describe_ex(p, 0, buf, len); }

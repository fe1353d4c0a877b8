/* cmd_policy.c - `flexgen policy`: the policy the search picks for a
 * model, a workload and memory budgets on a hardware profile, as `flexgen
 * run` flags, with its predicted prefill and decode time, throughput,
 * bottlenecks and memory per tier; and the model's arithmetic the FlexGen
 * paper opens with. Given --percent (and batch sizes), it scores that
 * policy instead of searching. With --stages P, the same on a pipeline of
 * P such machines (fg_cost_pipe.h). */
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "fg_devsize.h"
#include "fg_fmt.h"
#include "fg_cmds.h"
#include "fg_cost_pipe.h"
#include "fg_policy_auto.h"
#include "fg_profile_run.h"
#include "fg_prompt_enc.h"
#include "fg_search.h"
#include "fg_weights.h"

typedef struct {
    const char *model_dir, *dummy, *hardware, *offload_dir, *device, *prompt_ids, *prompts, *chat_template;
    const char *tokenizer;   /* --tokenizer FILE: instead of the model's */
    int S, G, n_prompts, truncate, json, have_percent, gbs, K, cpu_attn;
    int xload, xcpu;                       /* --expert-load, --cpu-expert-compute: fixed; -1: searched */
    int stages;                            /* machines in a pipeline (1: one) */
    double net_gbit, net_latency_us;       /* > 0, >= 0: the network, over the profile's */
    int compress_weight, compress_cache;   /* allowed (searched), or used (--percent) */
    uint64_t gpu_mem, cpu_mem, disk_mem;
    fg_policy p;
} policy_args;

static void usage(FILE *f) {
    fprintf(f,
        "usage: flexgen policy (--model DIR | --dummy NAME) (--prompt-len S | --prompts FILE [--truncate]\n"
        "                      | --prompt-ids FILE) [--gen-len N] [--num-prompts N] [--hardware PROFILE|PRESET]\n"
        "                      [--gpu-mem SIZE] [--cpu-mem SIZE] [--disk-mem SIZE] [--offload-dir DIR]\n"
        "                      [--device NAME] [--json] [--stages P [--net-gbps G] [--net-latency-us U]]\n"
        "                      [--percent WG WC CG CC HG HC --gpu-batch-size N --num-gpu-batches N\n"
        "                       [--cpu-cache-compute]] [--compress-weight] [--compress-cache]\n"
        "                      [--percent-experts XG XC] [--expert-load routed|all] [--cpu-expert-compute]\n\n"
        "Searches the policy (placement of weights, KV cache and activations, GPU batch size, batches\n"
        "per block, CPU attention) with the highest predicted throughput within the budgets, and prints\n"
        "it as flexgen run flags with its predicted times. With --percent, scores that policy instead.\n\n"
        "  --prompt-len S      prompt length (tokens, padded)\n"
        "  --prompts FILE      or the job's prompts, as flexgen run reads them (text or JSONL, tokenized\n"
        "                      with the model's tokenizer; --truncate as in flexgen run): their count\n"
        "                      and longest length; --chat-template FILE and --tokenizer FILE\n"
        "                      as in flexgen run\n"
        "  --prompt-ids FILE   or the job's prompts as token ids (a JSON list of lists)\n"
        "  --gen-len N         new tokens per prompt (default 32)\n"
        "  --num-prompts N     prompts in the job (default: as many as the best block holds)\n"
        "  --hardware X        a profile (flexgen profile --out FILE) or a preset: flexgen-t4\n"
        "                      (FlexGen's constants for a T4); default: this machine's profile,\n"
        "                      measured first if there is none\n"
        "  --gpu-mem, --cpu-mem, --disk-mem SIZE   budgets (default: no limit), e.g. 16G\n"
        "  --compress-weight, --compress-cache   allow 4-bit weights / KV cache: the search tries\n"
        "                      the policy with and without each and keeps the faster (with --percent:\n"
        "                      score the policy with them)\n"
        "  --stages P          the same on a pipeline of P machines, each with this hardware and these\n"
        "                      budgets (per machine), as mpirun -np P flexgen run runs it: machine r\n"
        "                      holds layers [r*L/P, (r+1)*L/P), the embedding on the first and the LM\n"
        "                      head on the last; a block is P groups of --num-gpu-batches batches. Prints\n"
        "                      each stage's time, the network's, the bottleneck (default 1: one machine)\n"
        "  --net-gbps G        the network between two machines, Gbit/s a link (default: 8 x the profile's\n"
        "                      network.GBps, else 10; flexgen-t4: 32)\n"
        "  --net-latency-us U  a message's one-way latency in microseconds (default: the profile's\n"
        "                      network.latency_us, else 50; flexgen-t4: 100)\n"
        "  --percent-experts XG XC, --expert-load routed|all, --cpu-expert-compute   a mixture of\n"
        "                      experts: its experts' placement (with --percent), how the off-GPU ones\n"
        "                      load and whether the cpu worker computes the CPU's (each given is kept\n"
        "                      in a search too, else both are tried), as flexgen run takes them\n"
        "  --json              one JSON object on stdout\n");
}

/* A number > 0 (zero_ok: >= 0). */
static fg_status parse_num(const char *flag, const char *v, int zero_ok, double *out) {
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !isfinite(x) || x < 0 || (x == 0 && !zero_ok))
        return fg_err_set(FG_EINPUT, "%s: expected a number %s 0, got '%s'", flag, zero_ok ? ">=" : ">", v);
    *out = x;
    return FG_OK;
}

static fg_status parse(int argc, char **argv, policy_args *a) {
    enum { O_MODEL = 256, O_DUMMY, O_S, O_G, O_N, O_PIDS, O_HW, O_GPU, O_CPU, O_DISK, O_OFF, O_DEV, O_JSON, O_PCT,
           O_GBS, O_NGB, O_CA, O_CW, O_CC, O_PROMPTS, O_TRUNC, O_CHAT, O_STAGES, O_NETG, O_NETL, O_TOK, O_XPCT, O_XLOAD,
           O_XCPU };
    static const struct option opts[] = {
        {"model", required_argument, 0, O_MODEL},       {"dummy", required_argument, 0, O_DUMMY},
        {"prompt-len", required_argument, 0, O_S},      {"gen-len", required_argument, 0, O_G},
        {"num-prompts", required_argument, 0, O_N},     {"prompt-ids", required_argument, 0, O_PIDS},
        {"hardware", required_argument, 0, O_HW},       {"gpu-mem", required_argument, 0, O_GPU},
        {"cpu-mem", required_argument, 0, O_CPU},       {"disk-mem", required_argument, 0, O_DISK},
        {"offload-dir", required_argument, 0, O_OFF},   {"device", required_argument, 0, O_DEV},
        {"json", no_argument, 0, O_JSON},               {"percent", required_argument, 0, O_PCT},
        {"gpu-batch-size", required_argument, 0, O_GBS}, {"num-gpu-batches", required_argument, 0, O_NGB},
        {"cpu-cache-compute", no_argument, 0, O_CA},    {"help", no_argument, 0, 'h'},
        {"compress-weight", no_argument, 0, O_CW},      {"compress-cache", no_argument, 0, O_CC},
        {"prompts", required_argument, 0, O_PROMPTS},   {"truncate", no_argument, 0, O_TRUNC},
        {"chat-template", required_argument, 0, O_CHAT},   {"stages", required_argument, 0, O_STAGES},
        {"tokenizer", required_argument, 0, O_TOK},
        {"net-gbps", required_argument, 0, O_NETG},     {"net-latency-us", required_argument, 0, O_NETL},
        {"percent-experts", required_argument, 0, O_XPCT}, {"expert-load", required_argument, 0, O_XLOAD},
        {"cpu-expert-compute", no_argument, 0, O_XCPU},
        {0, 0, 0, 0},
    };
    *a = (policy_args){.G = 32, .offload_dir = "flexgen-offload", .cpu_attn = -1, .stages = 1, .net_latency_us = -1,
                       .xload = -1, .xcpu = -1};
    opterr = 0;
    optind = 1;
    int o;
    fg_status st = FG_OK;
    while (!st && (o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (o) {
        case O_MODEL: a->model_dir = optarg; break;
        case O_DUMMY: a->dummy = optarg; break;
        case O_S: st = fg_parse_int("--prompt-len", optarg, 1, 1 << 20, &a->S); break;
        case O_G: st = fg_parse_int("--gen-len", optarg, 1, 1 << 20, &a->G); break;
        case O_N: st = fg_parse_int("--num-prompts", optarg, 1, 1 << 30, &a->n_prompts); break;
        case O_PIDS: a->prompt_ids = optarg; break;
        case O_PROMPTS: a->prompts = optarg; break;
        case O_TRUNC: a->truncate = 1; break;
        case O_CHAT: a->chat_template = optarg; break;
        case O_TOK: a->tokenizer = optarg; break;
        case O_HW: a->hardware = optarg; break;
        case O_GPU: st = fg_parse_size(optarg, &a->gpu_mem); break;
        case O_CPU: st = fg_parse_size(optarg, &a->cpu_mem); break;
        case O_DISK: st = fg_parse_size(optarg, &a->disk_mem); break;
        case O_OFF: a->offload_dir = optarg; break;
        case O_DEV: a->device = optarg; break;
        case O_JSON: a->json = 1; break;
        case O_PCT:
            st = fg_policy_parse_percent(&a->p, optarg, argc, argv, &optind);
            a->have_percent = 1;
            break;
        case O_GBS: st = fg_parse_int("--gpu-batch-size", optarg, 1, 1 << 20, &a->gbs); break;
        case O_NGB: st = fg_parse_int("--num-gpu-batches", optarg, 1, FG_MAX_GPU_BATCHES, &a->K); break;
        case O_CA: a->cpu_attn = 1; break;
        case O_XPCT: st = fg_policy_parse_percent_experts(&a->p, optarg, argc, argv, &optind); break;
        case O_XLOAD: st = fg_policy_parse_expert_load(&a->p, optarg), a->xload = (int)a->p.expert_load; break;
        case O_XCPU: a->xcpu = a->p.cpu_expert_compute = 1; break;
        case O_CW: a->compress_weight = 1; break;
        case O_CC: a->compress_cache = 1; break;
        case O_STAGES: st = fg_parse_int("--stages", optarg, 1, FG_MAX_GPU_BATCHES, &a->stages); break;
        case O_NETG: st = parse_num("--net-gbps", optarg, 0, &a->net_gbit); break;
        case O_NETL: st = parse_num("--net-latency-us", optarg, 1, &a->net_latency_us); break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return fg_err_set(FG_EINPUT, "flexgen policy: unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (st) return st;
    if (optind < argc) return fg_err_set(FG_EINPUT, "flexgen policy: unexpected argument '%s'", argv[optind]);
    if (!a->model_dir == !a->dummy) return fg_err_set(FG_EINPUT, "flexgen policy: give one of --model DIR or --dummy NAME");
    if (!!a->S + !!a->prompt_ids + !!a->prompts != 1)
        return fg_err_set(FG_EINPUT, "flexgen policy: give one of --prompt-len S, --prompts FILE or --prompt-ids FILE");
    if (a->truncate && !a->prompts) return fg_err_set(FG_EINPUT, "flexgen policy: --truncate goes with --prompts FILE");
    if (a->have_percent && !(a->gbs && a->K))
        return fg_err_set(FG_EINPUT, "flexgen policy: --percent scores a policy: give --gpu-batch-size and --num-gpu-batches too");
    if (a->K && a->K * a->stages > FG_MAX_GPU_BATCHES)
        return fg_err_set(FG_EINPUT, "flexgen policy: --num-gpu-batches %d x --stages %d: a block of a pipeline holds a "
                                     "group of GPU batches per stage, at most %d batches", a->K, a->stages, FG_MAX_GPU_BATCHES);
    if (!a->device) a->device = fg_devsize_default();
    return fg_devsize_known(a->device);
}

static const char *gb(double b, char *buf) {
    snprintf(buf, 32, "%.3g GB", b / 1e9);
    return buf;
}

/* The model's arithmetic, FlexGen paper style. */
static json_t *formats_json(const fg_model_config *c, const fg_spec *sp);

static json_t *arithmetic(const fg_model_config *c, const fg_spec *sp, int S, int G, const fg_policy *p) {
    fg_cost_case cs = {0};
    fg_cost_case_weights(&cs, c, sp);
    double H = c->hidden, Q = fg_config_q_dim(c), V = c->vocab_size, L = c->n_layers;
    double per_row = fg_config_layer_flops(c);   /* q, k, v, o and the MLP's matrices, by the description */
    return json_pack("{s:o, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "weight_formats", formats_json(c, sp),
                     "weight_bytes_per_layer", cs.layer_bytes,
                     "weight_bytes_total", cs.layer_bytes * L + cs.model_bytes,
                     "kv_cache_bytes_per_sequence", 2.0 * L * (S + G) * (double)fg_cache_row_bytes(c),
                     "kv_cache_bytes_per_block", 2.0 * L * (S + G) * (double)fg_cache_row_bytes(c) * p->gbs * p->num_gpu_batches,
                     "activation_bytes_per_gpu_batch", 2.0 * p->gbs * S * H,
                     "prefill_flops_per_token", L * (per_row + 2 * S * Q) + 2 * H * V / S,
                     "decode_flops_per_token", L * (per_row + 4 * (S + G / 2.0) * Q) + 2 * H * V);
}

static double num(json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }

/* The weights by storage format (common/fg_fmt.h) as the tiers hold them
 * under the config's compression: {"Q4_K": {"tensors", "bytes"}, ...}, and
 * the smallest and largest decoder layer (a Q4_K_M file's differ). */
static json_t *formats_json(const fg_model_config *c, const fg_spec *sp) {
    json_t *o = json_object();
    for (int i = 0; i < fg_spec_count(c); i++) {
        if (!sp[i].present) continue;
        const char *name = fg_fmt_name(sp[i].ndim == 1 ? FG_FMT_F16 : fg_spec_fmt(c, sp, i));
        json_t *e = json_object_get(o, name);
        if (!e) json_object_set_new(o, name, e = json_pack("{s:i, s:f}", "tensors", 0, "bytes", 0.0));
        json_object_set_new(e, "tensors", json_integer(json_integer_value(json_object_get(e, "tensors")) + 1));
        json_object_set_new(e, "bytes", json_real(num(e, "bytes") + (double)fg_spec_stored_bytes(c, sp, i)));
    }
    double lo = 0, hi = 0;
    for (int l = 0; l < c->n_layers; l++) {
        double b = 0;
        for (int w = 0; w < FG_LW_COUNT; w++) b += (double)fg_spec_stored_bytes(c, sp, fg_spec_layer(l, w));
        lo = l == 0 || b < lo ? b : lo, hi = b > hi ? b : hi;
    }
    return json_pack("{s:o, s:f, s:f}", "by_format", o, "layer_bytes_min", lo, "layer_bytes_max", hi);
}

/* The GEMM rates the cost model charged, by the formats the model's
 * layers and LM head are held in: {"Q4_K": {"layer_flops_per_row",
 * "lm_head", "decode_rows", "decode_TFLOPS", "prefill_rows",
 * "prefill_TFLOPS", "measured"}, ...} at the policy's rows (a decode step:
 * a GPU batch's sequences; prefill: their prompts' tokens). measured false:
 * the profile has no table of that format (F16's stood in). */
static json_t *rates_json(const fg_model_config *c, const fg_spec *sp, const fg_hw *hw, const fg_policy *p, int S) {
    fg_cost_case cs;
    fg_cost_case_weights(&cs, c, sp);
    uint32_t fmts = fg_cost_formats(c, sp);
    json_t *o = json_object();
    const double dec = p->gbs, pre = (double)p->gbs * S;
    for (int f = 0; f < FG_FMT_COUNT; f++)
        if (fmts & FG_FMT_BIT(f))
            json_object_set_new(o, fg_fmt_name(f),
                                json_pack("{s:f, s:b, s:f, s:f, s:f, s:f, s:b}", "layer_flops_per_row", cs.layer_flops[f],
                                          "lm_head", f == cs.head_fmt, "decode_rows", dec, "decode_TFLOPS",
                                          fg_cost_fmt_tflops(hw, &cs, f, dec, 0), "prefill_rows", pre, "prefill_TFLOPS",
                                          fg_cost_fmt_tflops(hw, &cs, f, pre, 1), "measured",
                                          fg_hw_fmt_measured(hw, f)));
    return o;
}

static void print_rates(json_t *rates) {
    const char *k;
    json_t *e;
    int first = 1;
    json_object_foreach(rates, k, e) {
        if (first) printf("  GEMM rates charged (TFLOPS; decode at %g rows / prefill at %g):", num(e, "decode_rows"),
                          num(e, "prefill_rows"));
        printf("%s %s %.4g / %.4g%s%s", first ? "" : ";", k, num(e, "decode_TFLOPS"), num(e, "prefill_TFLOPS"),
               json_is_true(json_object_get(e, "lm_head")) ? " (the LM head's)" : "",
               json_is_true(json_object_get(e, "measured")) ? "" : " (not measured: F16's)");
        first = 0;
    }
    printf("\n");
}

static void print_formats(json_t *f) {
    char b1[32], b2[32];
    const char *k;
    json_t *e;
    printf("  by format:");
    json_object_foreach(json_object_get(f, "by_format"), k, e)
        printf(" %s %d tensors %s;", k, (int)json_integer_value(json_object_get(e, "tensors")), gb(num(e, "bytes"), b1));
    printf(" a layer %s to %s\n", gb(num(f, "layer_bytes_min"), b1), gb(num(f, "layer_bytes_max"), b2));
}

static void print_text(const policy_args *a, const fg_model_config *c, const fg_hw *hw, const fg_search_result *r,
                       json_t *ar, json_t *rates, int S, const fg_pipecost *pp) {
    char b1[32], b2[32], b3[32];
    const fg_policy *p = &r->p;
    printf("model %s (%s): %d layers, hidden %d, %d heads (%d kv), ffn %d, vocab %d; prompt %d, %d new tokens\n",
           c->name, fg_config_family_name(c), c->n_layers, c->hidden, c->n_heads, c->n_kv_heads, c->ffn_dim,
           c->vocab_size, S, a->G);
    printf("  weights %s per layer, %s in all\n", gb(num(ar, "weight_bytes_per_layer"), b1), gb(num(ar, "weight_bytes_total"), b2));
    print_formats(json_object_get(ar, "weight_formats"));
    printf("  KV cache at the end %s per sequence, %s per block; activations %s per GPU batch\n",
           gb(num(ar, "kv_cache_bytes_per_sequence"), b1), gb(num(ar, "kv_cache_bytes_per_block"), b2),
           gb(num(ar, "activation_bytes_per_gpu_batch"), b3));
    printf("  FLOPs per token: prefill %.3g GFLOP, decode %.3g GFLOP\n", num(ar, "prefill_flops_per_token") / 1e9,
           num(ar, "decode_flops_per_token") / 1e9);
    printf("hardware: %s (%s backend%s)\n", hw->source, hw->backend, hw->shares_host_cpu ? ", compute on the host's cores" : "");
    print_rates(rates);
    char ex[128] = "";
    if (c->n_experts) {
        double xg, xc;
        fg_policy_expert_pct(p, &xg, &xc);
        snprintf(ex, sizeof ex, " --percent-experts %g %g --expert-load %s%s", xg, xc,
                 p->expert_load == FG_EXPERTS_ALL ? "all" : "routed", p->cpu_expert_compute ? " --cpu-expert-compute" : "");
    }
    printf("policy%s%s: --percent %g %g %g %g %g %g --gpu-batch-size %d --num-gpu-batches %d%s%s%s%s\n",
           a->have_percent ? " (given)" : "", pp ? " (every stage)" : "", p->w_gpu, p->w_cpu, p->c_gpu, p->c_cpu, p->h_gpu, p->h_cpu, p->gbs,
           p->num_gpu_batches, p->cpu_cache_compute ? " --cpu-cache-compute" : "", ex,
           p->compress_weight ? " --compress-weight" : "", p->compress_cache ? " --compress-cache" : "");
    printf("predicted: %.4g tokens/s; prefill %.4g s (bound by %s), decode %.4g s (bound by %s)%s\n",
           r->pred.throughput, r->pred.prefill_s, fg_cost_res_name(r->pred.pre_bottleneck), r->pred.decode_s,
           fg_cost_res_name(r->pred.gen_bottleneck), a->n_prompts ? "" : " per block");
    printf("memory%s: gpu %s, cpu %s, disk %s\n", pp ? " (the largest stage's, each machine's)" : "", gb((double)r->gpu_bytes, b1), gb((double)r->shm_bytes, b2),
           gb((double)r->disk_bytes, b3));
    if (!a->have_percent) printf("search: %ld cases, %ld LPs, %.3f s\n", r->cases, r->lps, r->seconds);
}

/* The search under each allowed compression (off, and on where allowed),
 * the fastest kept; c is left with the winner's. The cost model charges
 * compressed bytes on every link and tier and the expansion of weights.
 * With a pipeline (pp), its search, and the winner's detail in d. */
static fg_status search_compression(const policy_args *a, fg_model_config *c, const fg_spec *sp, const fg_hw *hw,
                                    const fg_search_opts *so, fg_pipecost *pp, fg_search_result *r, fg_pipecost_detail *d) {
    fg_status st = FG_EINPUT;
    long cases = 0, lps = 0;
    double secs = 0;
    int best_w = 0, best_c = 0;
    char why[512] = "";
    for (int cw = 0; cw <= a->compress_weight; cw++)
        for (int cc = 0; cc <= a->compress_cache; cc++) {
            fg_search_result t;
            c->compress_weight = cw, c->compress_cache = cc;
            fg_status s1 = pp ? fg_pipecost_search(pp, &t, NULL) : fg_search_policy(c, sp, hw, so, &t);
            cases += t.cases, lps += t.lps, secs += t.seconds;
            if (s1) {
                if (!why[0]) snprintf(why, sizeof why, "%s", fg_err_msg());
                continue;
            }
            if (st || t.pred.throughput > r->pred.throughput) *r = t, best_w = cw, best_c = cc, st = FG_OK;
        }
    c->compress_weight = best_w, c->compress_cache = best_c;
    r->cases = cases, r->lps = lps, r->seconds = secs;
    if (st) return fg_err_set(FG_EINPUT, "%s", why);
    fg_search_result again;   /* the winner's stages (the same prediction) */
    return pp ? fg_pipecost_score(pp, &r->p, &again, d) : FG_OK;
}

/* Whether a given policy (--percent) keeps weights or experts on disk. */
static int given_disk(const policy_args *a, const fg_model_config *c) {
    double xg, xc;
    fg_policy_expert_pct(&a->p, &xg, &xc);
    return a->have_percent && (a->p.w_gpu + a->p.w_cpu < 100 || (c->n_experts > 0 && xg + xc < 100));
}

/* Score the given policy (--percent) on one machine or on the pipeline;
 * where it exceeds the budgets, scored without them and said so (over). */
static fg_status score_given(policy_args *a, fg_model_config *c, const fg_spec *sp, const fg_hw *hw,
                             fg_search_opts *so, fg_pipecost *pp, fg_search_result *r, fg_pipecost_detail *d, char *over,
                             size_t n_over) {
    a->p.gbs = a->gbs, a->p.num_gpu_batches = a->K, a->p.cpu_cache_compute = a->cpu_attn == 1, a->p.overlap = 1;
    c->compress_weight = a->p.compress_weight = a->compress_weight;
    c->compress_cache = a->p.compress_cache = a->compress_cache;
    fg_status st = pp ? fg_pipecost_score(pp, &a->p, r, d) : fg_search_score(c, sp, hw, so, &a->p, r);
    if (st == FG_EINPUT && (a->gpu_mem || a->cpu_mem || a->disk_mem)) {   /* scored all the same, said so */
        snprintf(over, n_over, "%s", fg_err_msg());
        so->gpu_mem = so->cpu_mem = so->disk_mem = 0;
        if (pp) {
            fg_pipecost_detail_free(d);
            pp->o.gpu_mem = pp->o.cpu_mem = pp->o.disk_mem = 0;
            st = fg_pipecost_score(pp, &a->p, r, d);
        } else {
            st = fg_search_score(c, sp, hw, so, &a->p, r);
        }
    }
    if (!st && over[0])
        fg_warn("the given policy does not fit the budgets by this engine's memory plan (%s); scored without them", over);
    return st;
}

/* The workload's prompt length and count from --prompts or --prompt-ids,
 * as flexgen run reads them: their count and longest length. */
static void read_workload(const policy_args *a, fg_wsrc *ws, const fg_model_config *c, int *S, int *n) {
    fg_seq_in *in = NULL;
    int nn = 0;
    if (a->prompts) {
        fg_tok *tok = NULL;
        fg_prompt_list text = {0};
        fg_exit_on(fg_prompt_tokenizer(a->model_dir, a->tokenizer, a->dummy != NULL, 1, ws, &tok));
        fg_chat_src chat = {a->model_dir, a->chat_template};
        fg_exit_on(fg_prompt_encode(a->prompts, tok, c, &chat, a->G, a->truncate, &text, &in, &nn));
        fg_prompts_free(&text);
        fg_tok_destroy(&tok);
    } else {
        fg_exit_on(fg_prompt_ids_read(a->prompt_ids, c->vocab_size, &in, &nn));
    }
    *S = 1;
    for (int i = 0; i < nn; i++) *S = in[i].len > *S ? in[i].len : *S;
    fg_prompt_ids_free(in, (size_t)nn);
    if (!*n) *n = nn;
}

static void print_json(const policy_args *a, const fg_model_config *c, const fg_hw *hw, const fg_search_result *r,
                       json_t *ar, json_t *rates, int S, int n, const char *over, const fg_pipecost *pp,
                       const fg_pipecost_detail *d) {
    const fg_policy *p = &r->p;
    json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:o, s:{s:[f,f,f,f,f,f], s:i, s:i, s:b}, s:f, s:f, s:f, s:s, s:s, s:{s:I, s:I, s:I}, s:I, s:I, s:f}",
        "model", c->name, "hardware", hw->source, "over_budget", over, "prompt_len", S, "gen_len", a->G, "prompts", n, "arithmetic", ar,
        "policy", "percent", p->w_gpu, p->w_cpu, p->c_gpu, p->c_cpu, p->h_gpu, p->h_cpu, "gpu_batch_size", p->gbs,
        "num_gpu_batches", p->num_gpu_batches, "cpu_cache_compute", p->cpu_cache_compute,
        "predicted_throughput_tokens_per_s", r->pred.throughput, "predicted_prefill_s", r->pred.prefill_s,
        "predicted_decode_s", r->pred.decode_s, "prefill_bottleneck", fg_cost_res_name(r->pred.pre_bottleneck),
        "decode_bottleneck", fg_cost_res_name(r->pred.gen_bottleneck), "memory_bytes", "gpu", (json_int_t)r->gpu_bytes,
        "cpu", (json_int_t)r->shm_bytes, "disk", (json_int_t)r->disk_bytes, "cases", (json_int_t)r->cases,
        "lps", (json_int_t)r->lps, "search_s", r->seconds);
    json_t *pj = json_object_get(o, "policy");
    if (c->n_experts) {   /* the experts' placement apart from the dense part, and how they load */
        double xg, xc;
        fg_policy_expert_pct(p, &xg, &xc);
        json_object_set_new(pj, "percent_experts", json_pack("[f,f]", xg, xc));
        json_object_set_new(pj, "expert_load", json_string(p->expert_load == FG_EXPERTS_ALL ? "all" : "routed"));
        json_object_set_new(pj, "cpu_expert_compute", json_boolean(p->cpu_expert_compute));
    }
    json_object_set_new(pj, "compress_weight", json_boolean(p->compress_weight));
    json_object_set_new(pj, "compress_cache", json_boolean(p->compress_cache));
    json_object_set(o, "gemm_rates", rates);
    json_object_set_new(o, "prefill_resource_s", fg_cost_res_json(r->pred.pre_res));
    json_object_set_new(o, "decode_resource_s", fg_cost_res_json(r->pred.gen_res));
    if (pp) {   /* a pipeline: memory_bytes is the largest stage's (each machine's budgets) */
        json_object_set_new(o, "stages", json_integer(pp->P));
        json_object_set_new(o, "pipeline", fg_pipecost_json(pp, d));
    }
    char *s = json_dumps(o, JSON_COMPACT);
    printf("%s\n", s);
    free(s);
    json_decref(o);
}

int fg_cmd_policy(int argc, char **argv) {
    policy_args a;
    fg_exit_on(parse(argc, argv, &a));
    int S = a.S, n = a.n_prompts;
    fg_wsrc *ws = NULL;
    fg_exit_on(a.dummy ? fg_wsrc_open_dummy(a.dummy, 0, &ws) : fg_wsrc_open_dir(a.model_dir, NULL, &ws));
    fg_model_config *c = fg_wsrc_config_mut(ws);   /* its compress_* are the choice under study */
    const fg_spec *sp = fg_wsrc_specs(ws);
    fg_exit_on(fg_pipecost_check(c, a.stages));   /* before any measuring */
    if (a.prompt_ids || a.prompts) read_workload(&a, ws, c, &S, &n);
    if (S + a.G > c->max_pos)
        fg_exit_on(fg_err_set(FG_EINPUT, "prompt %d + %d new tokens exceed the model's %d positions", S, a.G, c->max_pos));
    fg_hw hw;
    /* this machine's profile, measured first as far as the choice needs: the disk only where it may be used */
    fg_search_opts need = {.S = S, .G = a.G, .n_prompts = n, .gpu_mem = a.gpu_mem, .cpu_mem = a.cpu_mem,
                           .disk_mem = a.disk_mem, .backend = a.device, .gbs = a.gbs, .K = a.K, .expert_load = a.xload,
                           .cpu_experts = a.xcpu};
    fg_exit_on(fg_profile_for_run(a.hardware, a.offload_dir, a.device, c, fg_cost_formats(c, sp),
                                  given_disk(&a, c) ? fg_auto_weight_bytes(c, sp) : fg_auto_disk_bytes(c, sp, &need), &hw));
    if (a.net_gbit > 0) hw.net_gbps = a.net_gbit / 8;
    if (a.net_latency_us >= 0) hw.net_latency_s = a.net_latency_us * 1e-6;
    /* memory is planned for the backend the hardware was measured with (a
     * preset's GPU), as a run on that hardware would use it */
    fg_search_opts so = {.S = S, .G = a.G, .n_prompts = n, .gpu_mem = a.gpu_mem, .cpu_mem = a.cpu_mem,
                         .disk_mem = a.disk_mem, .backend = hw.backend, .gbs = a.gbs, .K = a.K, .cpu_attn = a.cpu_attn,
                         .expert_load = a.xload, .cpu_experts = a.xcpu};
    fg_pipecost pipe, *pp = NULL;   /* --stages P > 1: P machines */
    if (a.stages > 1) fg_exit_on(fg_pipecost_init(&pipe, c, sp, a.stages, &hw, &so)), pp = &pipe;
    fg_search_result r;
    fg_pipecost_detail d = {0};
    char over[1024] = "";
    if (a.have_percent) fg_exit_on(score_given(&a, c, sp, &hw, &so, pp, &r, &d, over, sizeof over));
    else fg_exit_on(search_compression(&a, c, sp, &hw, &so, pp, &r, &d));
    json_t *ar = arithmetic(c, sp, S, a.G, &r.p), *rates = rates_json(c, sp, &hw, &r.p, S);
    if (a.json) {
        print_json(&a, c, &hw, &r, ar, rates, S, n, over, pp, &d);
    } else {
        print_text(&a, c, &hw, &r, ar, rates, S, pp);
        if (pp) fg_pipecost_print(stdout, pp, &d);
        json_decref(ar);
    }
    json_decref(rates);
    if (pp) fg_pipecost_detail_free(&d), fg_pipecost_free(pp);
    fg_wsrc_destroy(&ws);
    return 0;
}

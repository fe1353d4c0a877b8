/* cmd_run.c - `flexgen run`: load a model, read prompts, generate, write
 * JSONL (and optionally the logits). Every input is validated before any work
 * starts; outputs are written to FILE.partial and renamed only when complete. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fg_cmds.h"
#include "fg_engine_ref.h"

typedef struct {
    const char *model_dir, *dummy, *prompt_ids, *out, *dump_logits, *engine, *report;
    int gen_len, batch, ignore_eos;
    uint64_t seed;
    float temperature, top_p;
} run_args;

static void run_usage(FILE *f) {
    fprintf(f,
        "usage: flexgen run (--model DIR | --dummy NAME) --prompt-ids FILE.json --out FILE.jsonl [options]\n\n"
        "Generate continuations for a batch of prompts.\n\n"
        "model:\n"
        "  --model DIR           Hugging Face OPT directory (config.json + safetensors) or a\n"
        "                        FlexGen numpy directory (opt-30b-np/)\n"
        "  --dummy NAME          seeded random weights of an OPT size (opt-125m ... opt-175b)\n"
        "input / output:\n"
        "  --prompt-ids FILE     pre-tokenized prompts: a JSON list of lists of token ids\n"
        "  --out FILE.jsonl      one object per prompt, in input order\n"
        "  --dump-logits FILE    float32 .npy (prompts, gen_len, vocab): the logits each token came from\n"
        "  --report FILE.json    throughput (generated tokens / (prefill + decode time)), the split,\n"
        "                        time inside BLAS, the run's settings\n"
        "generation:\n"
        "  --gen-len N           new tokens per prompt (default 32)\n"
        "  --gpu-batch-size N    prompts computed together (default: all)\n"
        "  --temperature T       0 = greedy (default 0)\n"
        "  --top-p P             nucleus sampling mass (default 1 = off)\n"
        "  --seed S              sampling seed (default 0); also seeds --dummy weights\n"
        "  --ignore-eos          do not stop at the end-of-sequence token\n"
        "  --engine reference    single-process, all-in-memory engine (the oracle; the only\n"
        "                        engine until the offloading engine lands)\n");
}

static fg_status parse_int(const char *flag, const char *v, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi)
        return fg_err_set(FG_EINPUT, "%s: expected an integer in [%d, %d], got '%s'", flag, lo, hi, v);
    *out = (int)x;
    return FG_OK;
}

static fg_status parse_float(const char *flag, const char *v, float lo, float hi, float *out) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || errno || !(x >= lo && x <= hi))
        return fg_err_set(FG_EINPUT, "%s: expected a number in [%g, %g], got '%s'", flag, lo, hi, v);
    *out = (float)x;
    return FG_OK;
}

static fg_status parse_args(int argc, char **argv, run_args *a) {
    enum { O_MODEL = 256, O_DUMMY, O_PIDS, O_OUT, O_DUMP, O_GEN, O_GBS, O_TEMP, O_TOPP, O_SEED, O_NOEOS, O_ENGINE, O_REPORT };
    static const struct option opts[] = {
        {"model", required_argument, 0, O_MODEL},      {"dummy", required_argument, 0, O_DUMMY},
        {"prompt-ids", required_argument, 0, O_PIDS},  {"out", required_argument, 0, O_OUT},
        {"dump-logits", required_argument, 0, O_DUMP}, {"gen-len", required_argument, 0, O_GEN},
        {"gpu-batch-size", required_argument, 0, O_GBS}, {"temperature", required_argument, 0, O_TEMP},
        {"top-p", required_argument, 0, O_TOPP},       {"seed", required_argument, 0, O_SEED},
        {"ignore-eos", no_argument, 0, O_NOEOS},       {"engine", required_argument, 0, O_ENGINE},
        {"report", required_argument, 0, O_REPORT},        {"help", no_argument, 0, 'h'},                 {0, 0, 0, 0},
    };
    *a = (run_args){.gen_len = 32, .top_p = 1.0f, .engine = "reference"};
    opterr = 0;
    optind = 1;
    int o;
    fg_status st = FG_OK;
    while (!st && (o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (o) {
        case O_MODEL: a->model_dir = optarg; break;
        case O_DUMMY: a->dummy = optarg; break;
        case O_PIDS: a->prompt_ids = optarg; break;
        case O_OUT: a->out = optarg; break;
        case O_DUMP: a->dump_logits = optarg; break;
        case O_GEN: st = parse_int("--gen-len", optarg, 1, 1 << 20, &a->gen_len); break;
        case O_GBS: st = parse_int("--gpu-batch-size", optarg, 1, 1 << 20, &a->batch); break;
        case O_TEMP: st = parse_float("--temperature", optarg, 0, 100, &a->temperature); break;
        case O_TOPP: st = parse_float("--top-p", optarg, 0, 1, &a->top_p); break;
        case O_SEED: {
            char *end;
            errno = 0;
            a->seed = strtoull(optarg, &end, 10);
            if (end == optarg || *end || errno) st = fg_err_set(FG_EINPUT, "--seed: expected an integer, got '%s'", optarg);
            break;
        }
        case O_NOEOS: a->ignore_eos = 1; break;
        case O_ENGINE: a->engine = optarg; break;
        case O_REPORT: a->report = optarg; break;
        case 'h': run_usage(stdout); exit(0);
        default:
            return fg_err_set(FG_EINPUT, "run: unknown or incomplete option '%s' (see flexgen run --help)",
                              argv[optind - 1]);
        }
    }
    if (st) return st;
    if (optind < argc) return fg_err_set(FG_EINPUT, "run: unexpected argument '%s'", argv[optind]);
    if (!!a->model_dir == !!a->dummy) return fg_err_set(FG_EINPUT, "run: give exactly one of --model DIR or --dummy NAME");
    if (!a->prompt_ids) return fg_err_set(FG_EINPUT, "run: --prompt-ids FILE is required");
    if (!a->out) return fg_err_set(FG_EINPUT, "run: --out FILE.jsonl is required");
    if (strcmp(a->engine, "reference"))
        return fg_err_set(FG_EINPUT, "run: --engine '%s' is not available; this build has: reference", a->engine);
    if (a->top_p <= 0) return fg_err_set(FG_EINPUT, "--top-p must be > 0");
    return FG_OK;
}

/* A JSON list of non-empty lists of ids, each in [0, vocab). */
static fg_status read_prompt_ids(const char *path, const fg_opt_config *c, fg_seq_in **out, int *n_out) {
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) {
        if (jerr.line < 0) return fg_err_set(FG_EINPUT, "%s: cannot read: %s", path, jerr.text);
        return fg_err_set(FG_EINPUT, "%s: line %d: not valid JSON: %s", path, jerr.line, jerr.text);
    }
    fg_status st = FG_OK;
    size_t n = json_is_array(root) ? json_array_size(root) : 0;
    if (!n) {
        json_decref(root);
        return fg_err_set(FG_EINPUT, "%s: expected a non-empty JSON list of lists of token ids", path);
    }
    fg_seq_in *in = fg_xcalloc(n, sizeof *in);
    for (size_t i = 0; i < n && !st; i++) {
        json_t *p = json_array_get(root, i);
        size_t m = json_is_array(p) ? json_array_size(p) : 0;
        if (!m) {
            st = fg_err_set(FG_EINPUT, "%s: prompt %zu: expected a non-empty list of token ids", path, i);
            break;
        }
        in[i].ids = fg_xcalloc(m, sizeof(int32_t));
        in[i].len = (int)m;
        for (size_t j = 0; j < m; j++) {
            json_t *x = json_array_get(p, j);
            if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= c->vocab_size) {
                st = fg_err_set(FG_EINPUT, "%s: prompt %zu, token %zu: %s is not a token id in [0, %d)", path, i, j,
                                json_is_integer(x) ? "value" : "entry", c->vocab_size);
                if (json_is_integer(x))
                    fg_err_set(FG_EINPUT, "%s: prompt %zu, token %zu: id %lld is out of range [0, %d)", path, i, j,
                               (long long)json_integer_value(x), c->vocab_size);
                break;
            }
            in[i].ids[j] = (int32_t)json_integer_value(x);
        }
    }
    json_decref(root);
    if (st) {
        for (size_t i = 0; i < n; i++) free(in[i].ids);
        free(in);
        return st;
    }
    *out = in;
    *n_out = (int)n;
    return FG_OK;
}

static fg_status write_jsonl(const char *path, const fg_seq_in *in, const fg_seq_out *out, int n) {
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.partial", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return fg_err_set(FG_EINPUT, "%s: cannot create: %s", tmp, strerror(errno));
    for (int i = 0; i < n; i++) {
        json_t *ids = json_array();
        for (int j = 0; j < out[i].n; j++) json_array_append_new(ids, json_integer(out[i].ids[j]));
        json_t *o = json_pack("{s:i, s:n, s:n, s:i, s:i, s:s, s:o}", "id", i, "prompt", "completion",
                              "prompt_tokens", in[i].len, "output_tokens", out[i].n, "finish_reason",
                              fg_finish_name(out[i].finish), "output_ids", ids);
        char *line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        fprintf(f, "%s\n", line);
        free(line);
        json_decref(o);
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        unlink(tmp);
        return fg_err_set(FG_ERUNTIME, "%s: write failed", tmp);
    }
    if (rename(tmp, path) != 0) {
        unlink(tmp);
        return fg_err_set(FG_ERUNTIME, "%s: cannot rename to %s: %s", tmp, path, strerror(errno));
    }
    return FG_OK;
}

static fg_status write_report(const char *path, const run_args *a, const fg_opt_config *c, int n,
                              const fg_gen_stats *s) {
    double gen_s = s->prefill_s + s->decode_s;
    json_t *o = json_pack("{s:s, s:s, s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:I}", "engine", a->engine,
                          "model", c->name, "prompts", n, "gen_len", a->gen_len, "batch", a->batch ? a->batch : n,
                          "throughput_tokens_per_s", gen_s > 0 ? (double)s->generated / gen_s : 0.0,
                          "prefill_s", s->prefill_s, "decode_s", s->decode_s, "gemm_s", s->gemm_s,
                          "gemm_share", gen_s > 0 ? s->gemm_s / gen_s : 0.0, "load_s", s->load_s,
                          "generated_tokens", (json_int_t)s->generated);
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.partial", path);
    int rc = json_dump_file(o, tmp, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (rc != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        return fg_err_set(FG_EINPUT, "%s: cannot write the report", path);
    }
    return FG_OK;
}

int fg_cmd_run(int argc, char **argv) {
    run_args a;
    fg_exit_on(parse_args(argc, argv, &a));

    fg_wsrc *ws = NULL;
    fg_exit_on(a.dummy ? fg_wsrc_open_dummy(a.dummy, a.seed, &ws) : fg_wsrc_open_dir(a.model_dir, NULL, &ws));
    const fg_opt_config *c = fg_wsrc_config(ws);
    fg_info("model: %s (%d layers, hidden %d, %d heads), %s", c->name, c->n_layers, c->hidden, c->n_heads,
            fg_wsrc_describe(ws));

    fg_seq_in *in = NULL;
    int n = 0;
    fg_exit_on(read_prompt_ids(a.prompt_ids, c, &in, &n));
    for (int i = 0; i < n; i++)
        if (in[i].len + a.gen_len > c->max_pos) {
            fg_err_set(FG_EINPUT, "%s: prompt %d has %d tokens; with --gen-len %d it needs %d positions, "
                                  "the model has %d", a.prompt_ids, i, in[i].len, a.gen_len, in[i].len + a.gen_len,
                       c->max_pos);
            fg_exit_on(FG_EINPUT);
        }

    fg_gen_opts go = {.gen_len = a.gen_len, .batch = a.batch, .ignore_eos = a.ignore_eos,
                      .samp = {.temperature = a.temperature, .top_p = a.top_p, .seed = a.seed}};
    if (a.dump_logits) {
        int64_t shape[3] = {n, a.gen_len, c->vocab_size};
        fg_exit_on(fg_npy_create(a.dump_logits, shape, 3, &go.logits));
    }
    fg_seq_out *out = fg_xcalloc((size_t)n, sizeof *out);
    fg_gen_stats stats;
    fg_status st = fg_engine_ref_run(ws, in, n, &go, out, &stats);
    if (st) {
        fg_npy_abort(&go.logits);
        fg_exit_on(st);
    }
    if (go.logits) fg_exit_on(fg_npy_commit(&go.logits));
    fg_exit_on(write_jsonl(a.out, in, out, n));
    if (a.report) fg_exit_on(write_report(a.report, &a, c, n, &stats));

    double gen_s = stats.prefill_s + stats.decode_s;
    fg_info("generated %ld tokens for %d prompts in %.3f s: %.2f tokens/s (prefill %.3f s, decode %.3f s, "
            "sgemm %.1f%%, weights load %.3f s)",
            stats.generated, n, gen_s, gen_s > 0 ? stats.generated / gen_s : 0.0, stats.prefill_s, stats.decode_s,
            gen_s > 0 ? 100.0 * stats.gemm_s / gen_s : 0.0, stats.load_s);
    for (int i = 0; i < n; i++) {
        free(in[i].ids);
        free(out[i].ids);
    }
    free(in);
    free(out);
    fg_wsrc_destroy(&ws);
    return 0;
}

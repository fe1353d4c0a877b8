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

#include "fg_backend.h"
#include "fg_cmds.h"
#include "fg_profile_run.h"
#include "fg_search.h"
#include "fg_engine_flex.h"
#include "fg_msg.h"
#include "fg_engine_ref.h"
#include "fg_prompts.h"
#include "fg_tokenizer.h"

#define FG_MAX_STOPS 8

typedef struct {
    const char *model_dir, *dummy, *prompts, *prompt_ids, *out, *dump_logits, *engine, *report;
    const char *stop[FG_MAX_STOPS];
    int n_stop;
    int gen_len, batch, ignore_eos, truncate;
    int have_percent, num_gpu_batches, cpu_cache_compute, schedule_row, no_overlap;
    const char *policy;          /* without --percent: "auto" (the search) or "default" (the fit rule) */
    const char *hardware;        /* --hardware: a profile or preset for the cost model */
    fg_flex_opts flex;
    uint64_t seed;
    float temperature, top_p;
} run_args;

static void run_usage(FILE *f) {
    fprintf(f,
        "usage: flexgen run (--model DIR | --dummy NAME) (--prompts FILE | --prompt-ids FILE.json)\n"
        "                   --out FILE.jsonl [options]\n\n"
        "Generate continuations for a batch of prompts.\n\n"
        "model:\n"
        "  --model DIR           Hugging Face OPT directory (config.json + safetensors) or a\n"
        "                        FlexGen numpy directory (opt-30b-np/)\n"
        "  --dummy NAME          seeded random weights of an OPT size (opt-125m ... opt-175b)\n"
        "input / output:\n"
        "  --prompts FILE        text prompts: one a line, or JSONL objects {\"id\": ..., \"prompt\": \"...\"};\n"
        "                        tokenized with the model's vocab.json + merges.txt (--dummy: GPT-2's,\n"
        "                        fetched by scripts/fetch-gpt2-vocab.sh), BOS first as Hugging Face does\n"
        "  --prompt-ids FILE     pre-tokenized prompts: a JSON list of lists of token ids\n"
        "  --truncate            cut prompts longer than the context (max positions - gen-len) from\n"
        "                        the left, keeping BOS, instead of refusing them; reported in the log\n"
        "  --out FILE.jsonl      one object per prompt, in input order\n"
        "  --dump-logits FILE    float32 .npy (prompts, gen_len, vocab): the logits each token came from\n"
        "  --trace FILE.json     Chrome trace events of every command on every worker and stream\n"
        "                        (open in Perfetto); engine flexgen\n"
        "  --report FILE.json    throughput (generated tokens / (prefill + decode time)), the split,\n"
        "                        time inside BLAS, the run's settings\n"
        "generation:\n"
        "  --gen-len N           new tokens per prompt (default 32)\n"
        "  --gpu-batch-size N    prompts per GPU batch (default: 8 for flexgen, all for reference)\n"
        "  --temperature T       0 = greedy (default 0)\n"
        "  --top-p P             nucleus sampling mass (default 1 = off)\n"
        "  --seed S              sampling seed (default 0); also seeds --dummy weights\n"
        "  --ignore-eos          do not stop at the end-of-sequence token\n"
        "  --stop STR            end a sequence when its text contains STR (up to 8 times)\n"
        "  --engine NAME         flexgen (default): the coordinator and its gpu, cpu and disk workers;\n"
        "                        reference: single process, all in memory (the oracle)\n"
        "placement (engine flexgen):\n"
        "  --percent WG WC CG CC HG HC   percent of weights, KV cache and activations on GPU and\n"
        "                        CPU, the rest on disk\n"
        "  --policy auto|default without --percent: auto (default) searches the policy with the cost\n"
        "                        model over this machine's profile (measured once first, then cached:\n"
        "                        see flexgen profile), the --gpu-batch-size, --num-gpu-batches and\n"
        "                        --cpu-cache-compute given fixed; default: everything on the GPU when\n"
        "                        it fits --gpu-mem, else weights into the GPU 5%% at a time, cache and\n"
        "                        activations on the CPU. The choice is logged\n"
        "  --hardware X          the cost model's profile file or preset (flexgen-t4) for --policy auto\n"
        "                        and the report's prediction\n"
        "  --num-gpu-batches N   GPU batches per block (default 1); --gpu-batch-size is per GPU batch\n"
        "  --cpu-cache-compute   decode attention on the CPU worker, where a CPU-tier cache lives\n"
        "  --compress-weight     hold the attention and MLP weight matrices 4-bit (FlexGen's group-wise\n"
        "                        scheme) in every tier; --compress-cache: the KV cache too (both engines)\n"
        "  --schedule block|row  zig-zag block schedule (default), or one GPU batch through all layers\n"
        "  --no-overlap          wait for every load and store (default: overlap them with compute)\n"
        "  --gpu-mem SIZE        GPU memory budget (the gpu worker's arena and workspace), e.g. 2G\n"
        "  --cpu-mem SIZE        CPU memory budget for shared memory (weights, cache, activations)\n"
        "  --disk-mem SIZE       disk budget in --offload-dir\n"
        "  --offload-dir DIR     where the disk tier lives (default: ./flexgen-offload)\n"
        "  --device NAME         the gpu worker's backend: host (the CPU) or cuda (default: cuda where\n"
        "                        it is built and a GPU is found, else host)\n");
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
    enum { O_MODEL = 256, O_DUMMY, O_PIDS, O_OUT, O_DUMP, O_GEN, O_GBS, O_TEMP, O_TOPP, O_SEED, O_NOEOS, O_ENGINE, O_REPORT, O_PROMPTS, O_STOP, O_TRUNC,
          O_PERCENT, O_NGB, O_CPUATTN, O_SCHED, O_GPUMEM, O_CPUMEM, O_DISKMEM, O_OFFDIR, O_NOOVERLAP, O_TRACE, O_DEVICE, O_POLICY, O_HW, O_CW, O_CC };
    static const struct option opts[] = {
        {"model", required_argument, 0, O_MODEL},      {"dummy", required_argument, 0, O_DUMMY},
        {"prompt-ids", required_argument, 0, O_PIDS},  {"out", required_argument, 0, O_OUT},
        {"dump-logits", required_argument, 0, O_DUMP}, {"gen-len", required_argument, 0, O_GEN},
        {"gpu-batch-size", required_argument, 0, O_GBS}, {"temperature", required_argument, 0, O_TEMP},
        {"top-p", required_argument, 0, O_TOPP},       {"seed", required_argument, 0, O_SEED},
        {"ignore-eos", no_argument, 0, O_NOEOS},       {"engine", required_argument, 0, O_ENGINE},
        {"report", required_argument, 0, O_REPORT},    {"prompts", required_argument, 0, O_PROMPTS},
        {"stop", required_argument, 0, O_STOP},        {"truncate", no_argument, 0, O_TRUNC},
        {"percent", required_argument, 0, O_PERCENT},  {"num-gpu-batches", required_argument, 0, O_NGB},
        {"cpu-cache-compute", no_argument, 0, O_CPUATTN}, {"schedule", required_argument, 0, O_SCHED},
        {"gpu-mem", required_argument, 0, O_GPUMEM},   {"cpu-mem", required_argument, 0, O_CPUMEM},
        {"disk-mem", required_argument, 0, O_DISKMEM}, {"offload-dir", required_argument, 0, O_OFFDIR},
        {"no-overlap", no_argument, 0, O_NOOVERLAP},    {"trace", required_argument, 0, O_TRACE},
        {"device", required_argument, 0, O_DEVICE},    {"policy", required_argument, 0, O_POLICY},
        {"hardware", required_argument, 0, O_HW},      {"help", no_argument, 0, 'h'},
        {"compress-weight", no_argument, 0, O_CW},     {"compress-cache", no_argument, 0, O_CC},
        {0, 0, 0, 0},
    };
    *a = (run_args){.gen_len = 32, .top_p = 1.0f, .engine = "flexgen", .policy = "auto"};
    a->flex.offload_dir = "flexgen-offload";
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
        case O_GEN: st = fg_parse_int("--gen-len", optarg, 1, 1 << 20, &a->gen_len); break;
        case O_GBS: st = fg_parse_int("--gpu-batch-size", optarg, 1, 1 << 20, &a->batch); break;
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
        case O_PROMPTS: a->prompts = optarg; break;
        case O_PERCENT:
            st = fg_policy_parse_percent(&a->flex.policy, optarg, argc, argv, &optind);
            a->have_percent = 1;
            break;
        case O_NGB: st = fg_parse_int("--num-gpu-batches", optarg, 1, FG_MAX_GPU_BATCHES, &a->num_gpu_batches); break;
        case O_CPUATTN: a->cpu_cache_compute = 1; break;
        case O_CW: a->flex.policy.compress_weight = 1; break;
        case O_CC: a->flex.policy.compress_cache = 1; break;
        case O_SCHED:
            if (!strcmp(optarg, "row")) a->schedule_row = 1;
            else if (!strcmp(optarg, "block")) a->schedule_row = 0;
            else st = fg_err_set(FG_EINPUT, "--schedule: expected block or row, got '%s'", optarg);
            break;
        case O_GPUMEM: st = fg_parse_size(optarg, &a->flex.gpu_mem); break;
        case O_CPUMEM: st = fg_parse_size(optarg, &a->flex.cpu_mem); break;
        case O_DISKMEM: st = fg_parse_size(optarg, &a->flex.disk_mem); break;
        case O_OFFDIR: a->flex.offload_dir = optarg; break;
        case O_NOOVERLAP: a->no_overlap = 1; break;
        case O_TRACE: a->flex.trace = optarg; break;
        case O_POLICY:
            if (strcmp(optarg, "auto") && strcmp(optarg, "default"))
                st = fg_err_set(FG_EINPUT, "--policy: expected auto or default, got '%s'", optarg);
            a->policy = optarg;
            break;
        case O_HW: a->hardware = optarg; break;
        case O_DEVICE: st = fg_backend_find(optarg) ? FG_OK : FG_EINPUT, a->flex.device = optarg; break;
        case O_TRUNC: a->truncate = 1; break;
        case O_STOP:
            if (a->n_stop == FG_MAX_STOPS) st = fg_err_set(FG_EINPUT, "--stop: at most %d stop strings", FG_MAX_STOPS);
            else if (!*optarg) st = fg_err_set(FG_EINPUT, "--stop: the stop string is empty");
            else a->stop[a->n_stop++] = optarg;
            break;
        case 'h': run_usage(stdout); exit(0);
        default:
            return fg_err_set(FG_EINPUT, "run: unknown or incomplete option '%s' (see flexgen run --help)",
                              argv[optind - 1]);
        }
    }
    if (st) return st;
    if (optind < argc) return fg_err_set(FG_EINPUT, "run: unexpected argument '%s'", argv[optind]);
    if (!!a->model_dir == !!a->dummy) return fg_err_set(FG_EINPUT, "run: give exactly one of --model DIR or --dummy NAME");
    if (!!a->prompts == !!a->prompt_ids)
        return fg_err_set(FG_EINPUT, "run: give exactly one of --prompts FILE or --prompt-ids FILE.json");
    if (!a->out) return fg_err_set(FG_EINPUT, "run: --out FILE.jsonl is required");
    if (strcmp(a->engine, "reference") && strcmp(a->engine, "flexgen"))
        return fg_err_set(FG_EINPUT, "run: --engine '%s' is unknown: flexgen or reference", a->engine);
    if (a->top_p <= 0) return fg_err_set(FG_EINPUT, "--top-p must be > 0");
    return FG_OK;
}

/* A JSON list of non-empty lists of ids, each in [0, vocab). */
static void free_seqs(fg_seq_in *in, size_t n) {
    for (size_t i = 0; i < n; i++) free(in[i].ids);
    free(in);
}

static fg_status read_prompt_ids(const char *path, const fg_opt_config *c, fg_seq_in **out, int *n_out) {
    json_t *root;
    fg_status st = fg_json_load_file(path, &root);
    if (st) return st;
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
        free_seqs(in, n);
        return st;
    }
    *out = in;
    *n_out = (int)n;
    return FG_OK;
}

/* ---- text prompts ---- */

/* Everything the run knows about its prompts besides their ids. */
typedef struct {
    fg_tok *tok;              /* NULL when the model has no tokenizer files */
    fg_prompt_list text;      /* --prompts; empty with --prompt-ids */
    const char *const *stop;  /* --stop strings */
    int n_stop;
} run_io;

static fg_status open_tokenizer(const run_args *a, fg_wsrc *ws, fg_tok **tok) {
    *tok = NULL;
    fg_opt_config *c = fg_wsrc_config_mut(ws);
    if (a->dummy) {
        fg_status st = fg_tok_open_gpt2_cache(tok);
        if (st) return a->prompts || a->n_stop ? st : FG_OK;   /* ids alone need no tokenizer */
        /* GPT-2's vocabulary has one special token for BOS, EOS and padding */
        c->bos_id = c->eos_id = c->pad_id = fg_tok_eos_id(*tok);
        return FG_OK;
    }
    char vj[PATH_MAX];
    snprintf(vj, sizeof vj, "%s/vocab.json", a->model_dir);
    if (access(vj, F_OK) != 0) {
        if (a->prompts || a->n_stop)
            return fg_err_set(FG_EINPUT, "%s: no vocab.json + merges.txt, so text prompts and --stop cannot be "
                                         "tokenized; use --prompt-ids", a->model_dir);
        return FG_OK;
    }
    fg_status st = fg_tok_open_model_dir(a->model_dir, tok);
    if (st) return st;
    if (fg_tok_vocab_size(*tok) > c->vocab_size)
        return fg_err_set(FG_EINPUT, "%s: has %d tokens but the model's vocab_size is %d", vj, fg_tok_vocab_size(*tok),
                          c->vocab_size);
    return FG_OK;
}

/* Tokenize --prompts: BOS, then the text's ids; over-long prompts refused or
 * cut from the left per --truncate. */
static fg_status encode_prompts(const run_args *a, const fg_opt_config *c, run_io *io, fg_seq_in **out, int *n_out) {
    fg_status st = fg_prompts_read(a->prompts, &io->text);
    if (st) return st;
    int n = (int)io->text.n, ctx = c->max_pos - a->gen_len, bos = fg_tok_bos_id(io->tok);
    if (ctx < 2)
        return fg_err_set(FG_EINPUT, "--gen-len %d leaves no room for a prompt in %d positions", a->gen_len, c->max_pos);
    fg_seq_in *in = fg_xcalloc((size_t)n, sizeof *in);
    for (int i = 0; i < n && !st; i++) {
        const fg_prompt *p = &io->text.items[i];
        int32_t *ids = NULL;
        size_t m = 0;
        if ((st = fg_tok_encode(io->tok, p->text, p->len, &ids, &m))) {
            st = fg_err_set(FG_EINPUT, "%s:%d: %s", a->prompts, p->line, fg_err_msg());
            break;
        }
        int has_bos = bos >= 0;
        size_t total = m + (size_t)has_bos;
        size_t keep = total;
        if (total > (size_t)ctx) {
            if (!a->truncate) {
                free(ids);
                st = fg_err_set(FG_EINPUT, "%s:%d: the prompt is %zu tokens; with --gen-len %d the model's %d positions "
                                           "allow %d (use --truncate to cut it from the left)",
                                a->prompts, p->line, total, a->gen_len, c->max_pos, ctx);
                break;
            }
            keep = (size_t)ctx;
            fg_warn("%s:%d: prompt cut from %zu to its last %zu tokens (--truncate)", a->prompts, p->line, total, keep);
        }
        in[i].ids = fg_xmalloc(sizeof(int32_t) * keep);
        in[i].len = (int)keep;
        size_t skip = total - keep, j = 0;
        if (has_bos) in[i].ids[j++] = bos;
        memcpy(in[i].ids + j, ids + skip, sizeof(int32_t) * (keep - j));
        free(ids);
    }
    if (st) {
        free_seqs(in, (size_t)n);
        return st;
    }
    *out = in;
    *n_out = n;
    return FG_OK;
}

/* Text of generated ids: special tokens and ids with no text (OPT's
 * vocab_size is padded past its tokenizer's) left out. Heap string. */
static char *ids_text(fg_tok *tok, const int32_t *ids, int n) {
    int32_t *keep = fg_xmalloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    int m = 0;
    for (int i = 0; i < n; i++) {
        size_t len;
        if (fg_tok_token_bytes(tok, ids[i], &len)) keep[m++] = ids[i];
    }
    char *text = NULL;
    size_t len = 0;
    if (fg_tok_decode(tok, keep, (size_t)m, 1, &text, &len) != FG_OK) text = strdup("");
    free(keep);
    return text;
}

/* Where the first stop string starts in text, or -1. */
static long stop_at(const run_io *io, const char *text) {
    long best = -1;
    for (int k = 0; k < io->n_stop; k++) {
        const char *hit = strstr(text, io->stop[k]);
        if (hit && (best < 0 || hit - text < best)) best = hit - text;
    }
    return best;
}

static int stop_check(void *ctx, int seq, const int32_t *ids, int n) {
    (void)seq;
    run_io *io = ctx;
    char *text = ids_text(io->tok, ids, n);
    long at = stop_at(io, text);
    free(text);
    return at >= 0;
}

static fg_status write_jsonl(const char *path, const run_io *io, const fg_seq_in *in, const fg_seq_out *out, int n) {
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.partial", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return fg_err_set(FG_EINPUT, "%s: cannot create: %s", tmp, strerror(errno));
    for (int i = 0; i < n; i++) {
        json_t *ids = json_array();
        for (int j = 0; j < out[i].n; j++) json_array_append_new(ids, json_integer(out[i].ids[j]));
        json_t *id = io->text.n ? json_loads(io->text.items[i].id_json, JSON_DECODE_ANY, NULL) : json_integer(i);
        json_t *prompt = json_null(), *completion = json_null();
        if (io->tok) {
            char *pt = io->text.n ? strdup(io->text.items[i].text) : ids_text(io->tok, in[i].ids, in[i].len);
            /* the completion is the text before EOS and before any stop string */
            int m = out[i].n - (out[i].finish == FG_FINISH_EOS);
            char *ct = ids_text(io->tok, out[i].ids, m);
            long at = out[i].finish == FG_FINISH_STOP ? stop_at(io, ct) : -1;
            if (at >= 0) ct[at] = 0;
            prompt = json_string(pt);
            completion = json_string(ct);
            free(pt);
            free(ct);
        }
        json_t *o = json_pack("{s:o, s:o, s:o, s:i, s:i, s:s, s:o}", "id", id ? id : json_integer(i), "prompt",
                              prompt ? prompt : json_null(), "completion", completion ? completion : json_null(),
                              "prompt_tokens", in[i].len, "output_tokens", out[i].n, "finish_reason",
                              fg_finish_name(out[i].finish), "output_ids", ids);
        char *line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
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
                              const fg_gen_stats *s, const fg_flex_stats *fs, const fg_search_result *pred) {
    double gen_s = s->prefill_s + s->decode_s;
    json_t *o = json_pack("{s:s, s:s, s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:I}", "engine", a->engine,
                          "model", c->name, "prompts", n, "gen_len", a->gen_len, "batch", a->batch ? a->batch : n,
                          "throughput_tokens_per_s", gen_s > 0 ? (double)s->generated / gen_s : 0.0,
                          "prefill_s", s->prefill_s, "decode_s", s->decode_s, "gemm_s", s->gemm_s,
                          "gemm_share", gen_s > 0 ? s->gemm_s / gen_s : 0.0, "load_s", s->load_s,
                          "generated_tokens", (json_int_t)s->generated);
    if (!strcmp(a->engine, "flexgen")) {
        char d[256];
        fg_policy_describe(&a->flex.policy, d, sizeof d);
        json_object_set_new(o, "policy", json_string(d));
        json_object_set_new(o, "schedule", json_string(a->flex.schedule_row ? "row" : "block"));
        json_object_set_new(o, "peak_gpu_bytes", json_integer((json_int_t)fs->gpu_bytes));
        json_object_set_new(o, "shm_bytes", json_integer((json_int_t)fs->shm_bytes));
        json_object_set_new(o, "h2d_bytes", json_integer((json_int_t)fs->h2d_bytes));
        json_object_set_new(o, "d2h_bytes", json_integer((json_int_t)fs->d2h_bytes));
        json_object_set_new(o, "disk_read_bytes", json_integer((json_int_t)fs->disk_read_bytes));
        json_object_set_new(o, "disk_write_bytes", json_integer((json_int_t)fs->disk_write_bytes));
        json_object_set_new(o, "commands", json_integer(fs->commands));
        json_t *busy = json_object();
        for (int r = 0; r < 3; r++) json_object_set_new(busy, fg_role_name(r), json_real(fs->busy_s[r]));
        json_object_set_new(o, "worker_busy_s", busy);
        json_t *rss = json_object();
        for (int r = 0; r < 3; r++) json_object_set_new(rss, fg_role_name(r), json_integer((json_int_t)fs->peak_rss[r]));
        json_object_set_new(rss, "coordinator", json_integer((json_int_t)fs->peak_rss[3]));
        json_object_set_new(o, "peak_rss_bytes", rss);
        json_object_set_new(o, "gpu_restarts", json_integer(fs->gpu_restarts));
        if (pred->cases) {   /* predicted beside measured, phase by phase */
            json_object_set_new(o, "predicted", json_pack("{s:s, s:f, s:f, s:f, s:s, s:s}", "hardware", a->hardware ? a->hardware : "cached profile",
                "throughput_tokens_per_s", pred->pred.throughput, "prefill_s", pred->pred.prefill_s,
                "decode_s", pred->pred.decode_s, "prefill_bottleneck", fg_cost_res_name(pred->pred.pre_bottleneck),
                "decode_bottleneck", fg_cost_res_name(pred->pred.gen_bottleneck)));
        }
    }
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

/* The policy of a flexgen run: --percent as given; else the search
 * (--policy auto) or the fit rule (--policy default). *pred gets the cost
 * model's prediction when there is hardware to predict with (--hardware, a
 * cached profile, or the one --policy auto measures). */
static fg_status choose_policy(run_args *a, fg_wsrc *ws, int n, int S, fg_search_result *pred) {
    const fg_opt_config *c = fg_wsrc_config(ws);
    fg_policy *p = &a->flex.policy;
    const char *device = a->flex.device ? a->flex.device : fg_backend_default();
    fg_search_opts so = {.S = S, .G = a->gen_len, .n_prompts = n, .gpu_mem = a->flex.gpu_mem, .cpu_mem = a->flex.cpu_mem,
                         .disk_mem = a->flex.disk_mem, .backend = device, .gbs = a->batch, .K = a->num_gpu_batches,
                         .cpu_attn = a->cpu_cache_compute ? 1 : -1};
    char d[256];
    fg_hw hw;
    fg_status st = FG_OK;
    if (!a->have_percent && !strcmp(a->policy, "auto")) {
        if ((st = fg_profile_hw(a->hardware, a->flex.offload_dir, device, &hw)) ||
            (st = fg_search_policy(c, fg_wsrc_specs(ws), &hw, &so, pred)))
            return st;
        int ov = p->overlap;
        *p = pred->p, p->overlap = ov;
        fg_policy_describe(p, d, sizeof d);
        fg_info("policy auto (%s): %s; predicted %.3g tokens/s (prefill %.3g s, decode %.3g s); %ld cases searched in "
                "%.2f s", hw.source, d, pred->pred.throughput, pred->pred.prefill_s, pred->pred.decode_s, pred->cases,
                pred->seconds);
        return FG_OK;
    }
    if (!a->have_percent) {
        if ((st = fg_flex_default_policy(ws, &a->flex, S, a->gen_len))) return st;
        fg_policy_describe(p, d, sizeof d);
        fg_info("no --percent, --policy default: the fit rule chose %s", d);
    }
    /* a prediction beside the run when the hardware is known without measuring */
    char path[PATH_MAX];
    const char *hwsrc = a->hardware;
    if (!hwsrc && !fg_profile_cache_path(a->flex.offload_dir, device, path, sizeof path) && access(path, R_OK) == 0)
        hwsrc = path;
    if (hwsrc && !fg_hw_load(hwsrc, &hw) && !fg_search_score(c, fg_wsrc_specs(ws), &hw, &so, p, pred))
        fg_info("predicted (%s): %.3g tokens/s (prefill %.3g s, decode %.3g s)", hw.source, pred->pred.throughput,
                pred->pred.prefill_s, pred->pred.decode_s);
    return FG_OK;
}

int fg_cmd_run(int argc, char **argv) {
    run_args a;
    fg_exit_on(parse_args(argc, argv, &a));

    fg_wsrc *ws = NULL;
    fg_exit_on(a.dummy ? fg_wsrc_open_dummy(a.dummy, a.seed, &ws) : fg_wsrc_open_dir(a.model_dir, NULL, &ws));
    run_io io = {.stop = a.stop, .n_stop = a.n_stop};
    fg_exit_on(open_tokenizer(&a, ws, &io.tok));
    fg_wsrc_config_mut(ws)->compress_weight = a.flex.policy.compress_weight;   /* the tiers' format, fg_q4.h */
    fg_wsrc_config_mut(ws)->compress_cache = a.flex.policy.compress_cache;
    const fg_opt_config *c = fg_wsrc_config(ws);
    fg_info("model: %s (%d layers, hidden %d, %d heads), %s", c->name, c->n_layers, c->hidden, c->n_heads,
            fg_wsrc_describe(ws));

    fg_seq_in *in = NULL;
    int n = 0;
    if (a.prompts) {
        fg_exit_on(encode_prompts(&a, c, &io, &in, &n));
    } else {
        fg_exit_on(read_prompt_ids(a.prompt_ids, c, &in, &n));
        for (int i = 0; i < n; i++)
            if (in[i].len + a.gen_len > c->max_pos) {
                fg_err_set(FG_EINPUT, "%s: prompt %d has %d tokens; with --gen-len %d it needs %d positions, "
                                      "the model has %d", a.prompt_ids, i, in[i].len, a.gen_len, in[i].len + a.gen_len,
                           c->max_pos);
                fg_exit_on(FG_EINPUT);
            }
    }

    fg_gen_opts go = {.gen_len = a.gen_len, .batch = a.batch, .ignore_eos = a.ignore_eos,
                      .samp = {.temperature = a.temperature, .top_p = a.top_p, .seed = a.seed},
                      .stop = a.n_stop ? stop_check : NULL, .stop_ctx = &io};
    if (a.dump_logits) {
        int64_t shape[3] = {n, a.gen_len, c->vocab_size};
        fg_exit_on(fg_npy_create(a.dump_logits, shape, 3, &go.logits));
    }
    fg_seq_out *out = fg_xcalloc((size_t)n, sizeof *out);
    fg_gen_stats stats;
    fg_status st;
    fg_flex_stats fs = {0};
    fg_search_result pred = {0};   /* the cost model's prediction (cases 0: none) */
    if (!strcmp(a.engine, "reference")) {
        st = fg_engine_ref_run(ws, in, n, &go, out, &stats);
    } else {
        fg_policy *p = &a.flex.policy;
        p->gbs = a.batch ? a.batch : (n < 8 ? n : 8);
        p->num_gpu_batches = a.num_gpu_batches ? a.num_gpu_batches : 1;
        p->cpu_cache_compute = a.cpu_cache_compute;
        p->overlap = !a.no_overlap;
        a.flex.schedule_row = a.schedule_row;
        int S = 1;
        for (int i = 0; i < n; i++) S = in[i].len > S ? in[i].len : S;
        fg_exit_on(choose_policy(&a, ws, n, S, &pred));
        go.batch = p->gbs;
        st = fg_engine_flex_run(ws, in, n, &go, &a.flex, out, &stats, &fs);
    }
    if (st) {
        fg_npy_abort(&go.logits);
        fg_exit_on(st);
    }
    if (go.logits) fg_exit_on(fg_npy_commit(&go.logits));
    fg_exit_on(write_jsonl(a.out, &io, in, out, n));
    if (a.report) fg_exit_on(write_report(a.report, &a, c, n, &stats, &fs, &pred));

    double gen_s = stats.prefill_s + stats.decode_s;
    char extra[160];
    if (!strcmp(a.engine, "reference"))
        snprintf(extra, sizeof extra, "BLAS %.1f%%", gen_s > 0 ? 100.0 * stats.gemm_s / gen_s : 0.0);
    else
        snprintf(extra, sizeof extra, "busy: gpu worker %.2f s, cpu worker %.2f s, disk worker %.2f s", fs.busy_s[0],
                 fs.busy_s[1], fs.busy_s[2]);
    fg_info("generated %ld tokens for %d prompts in %.3f s: %.2f tokens/s (prefill %.3f s, decode %.3f s, %s, "
            "weights load %.3f s)",
            stats.generated, n, gen_s, gen_s > 0 ? stats.generated / gen_s : 0.0, stats.prefill_s, stats.decode_s,
            extra, stats.load_s);
    for (int i = 0; i < n; i++) free(out[i].ids);
    free_seqs(in, (size_t)n);
    free(out);
    fg_prompts_free(&io.text);
    fg_tok_destroy(&io.tok);
    fg_wsrc_destroy(&ws);
    return 0;
}

/* cmd_run_args.c - `flexgen run`'s flags: usage text, parsing, the checks
 * that need nothing but the flags. What the flags mean is cmd_run.c's; what
 * a resumed job takes from its record is cmd_run_job.c's. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_run.h"
#include "fg_devsize.h"
#include "fg_msg.h"
#include "fg_super.h"

#define DEFAULT_GEN_LEN 32         /* --gen-len; run_usage says so */
#define MAX_COUNT_ARG (1 << 20)    /* the largest --gen-len or --gpu-batch-size taken */

static void run_usage_placement(FILE *f);

static void run_usage(FILE *f) {
    fprintf(f,
        "usage: flexgen run (--model DIR | --dummy NAME) (--prompts FILE | --prompt-ids FILE.json)\n"
        "                   --out FILE.jsonl [options]\n\n"
        "Generate continuations for a batch of prompts.\n\n"
        "model:\n"
        "  --model DIR|FILE      Hugging Face directory of an OPT or Llama-family model (config.json +\n"
        "                        safetensors; llama, mistral, qwen2, qwen3, mixtral, qwen3_moe), a\n"
        "                        FlexGen numpy directory (opt-30b-np/), a llama.cpp GGUF file (llama,\n"
        "                        qwen2, qwen3, qwen3moe, Mixtral; F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1\n"
        "                        Q2_K..Q6_K MXFP4 tensors kept in their format), or a llama2.c\n"
        "                        checkpoint (FILE.bin, version 0 or 1: ends a sequence at BOS)\n"
        "  --tokenizer FILE      a tokenizer.json, or llama2.c's tokenizer.bin, instead of the model's\n"
        "  --dummy NAME[:L]      seeded random weights of a published size (opt-125m ... opt-175b,\n"
        "                        tinyllama-1.1b, llama-3.2-1b, llama-2-7b/13b/70b, llama-3.1-8b/70b,\n"
        "                        mistral-7b, qwen2.5-7b, qwen3-0.6b/8b, mixtral-8x7b, qwen3-30b-a3b,\n"
        "                        qwen3-235b-a22b); :L keeps its first L decoder layers\n"
        "input / output:\n"
        "  --prompts FILE        text prompts: one a line, or JSONL objects {\"id\": ..., \"prompt\": \"...\"};\n"
        "                        tokenized with the model's vocab.json + merges.txt (--dummy: GPT-2's,\n"
        "                        fetched by scripts/fetch-gpt2-vocab.sh), BOS first as Hugging Face does\n"
        "                        (a JSONL line may hold a conversation instead, {\"messages\":\n"
        "                        [{\"role\": ..., \"content\": ...}, ...]}: rendered with the model's chat\n"
        "                        template and add_generation_prompt, no BOS added)\n"
        "  --chat-template FILE  render \"messages\" prompts with this Jinja template instead\n"
        "  --prompt-ids FILE     pre-tokenized prompts: a JSON list of lists of token ids\n"
        "  --truncate            cut prompts longer than the context (max positions - gen-len) from\n"
        "                        the left, keeping BOS, instead of refusing them; reported in the log\n"
        "  --out FILE.jsonl      one object per prompt, in input order\n"
        "                        (an OpenAI Batch API file, lines {\"custom_id\", \"method\", \"url\",\n"
        "                        \"body\"}: one Batch API output line per request, each with its own\n"
        "                        max_tokens, temperature, top_p, seed and stop; a bad request gets an\n"
        "                        error line, the others run, and the exit status is 3; see docs/CLI.md)\n"
        "  --batch-order grouped|input  a Batch API file's requests computed grouped by prompt length\n"
        "                        and max_tokens (default; output still in file order), or in file order\n"
        "  --dump-logits FILE    float32 .npy (prompts, gen_len, vocab): the logits each token came from\n"
        "  --trace FILE.json     Chrome trace events of every command on every worker and stream\n"
        "                        (open in Perfetto); engine flexgen\n"
        "  --report FILE.json    throughput (generated tokens / (prefill + decode time)), the split,\n"
        "                        time inside BLAS, the run's settings\n"
        "  --job DIR             the job directory (default: OUT.job beside --out): the run's model\n"
        "                        identity, policy, settings and prompt checksum, and each finished\n"
        "                        block's outputs, fsynced before the next block starts; removed when\n"
        "                        --out is written\n"
        "  --resume              continue the killed job in the job directory: finished blocks are\n"
        "                        skipped, the recorded policy reused; flags not given come from the\n"
        "                        record, and a different model, prompt file or setting is refused\n"
        "                        naming it. Not with --dump-logits\n"
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
        );
    run_usage_placement(f);
}

static void run_usage_placement(FILE *f) {
    fprintf(f,
        "placement (engine flexgen):\n"
        "  --percent WG WC CG CC HG HC   percent of weights, KV cache and activations on GPU and\n"
        "                        CPU, the rest on disk\n"
        "  --percent-experts XG XC   a mixture of experts: percent of each sparse layer's experts on GPU\n"
        "                        and CPU, the rest on disk, placed expert by expert apart from the\n"
        "                        layer's dense part (default: the weights' WG WC)\n"
        "  --expert-load routed|all  off-GPU experts: routed (default) loads, once a batch has been\n"
        "                        routed, only the experts it chose that its layer's slot lacks; all\n"
        "                        loads every one with the layer, prefetched during the layer before\n"
        "  --cpu-expert-compute  the experts placed on the CPU computed there by the cpu worker (the\n"
        "                        batch's hidden state goes to them, their outputs come back), never\n"
        "                        copied to the GPU\n"
        "  --policy auto|default without --percent: auto (default) puts everything on the GPU where it\n"
        "                        all fits --gpu-mem, else searches the policy with the cost model over\n"
        "                        this machine's profile (cached; a first run measures only what the\n"
        "                        choice depends on: see flexgen profile), the --gpu-batch-size,\n"
        "                        --num-gpu-batches and --cpu-cache-compute given fixed; default: all\n"
        "                        on the GPU when it fits --gpu-mem, else weights into the GPU 5%% at a\n"
        "                        time, cache and activations on the CPU. The choice is logged\n"
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
        "                        it is built and a GPU is found, else host)\n"
        "  --attach ROLE         gpu, cpu or disk: spawn the other workers and wait for this one to be\n"
        "                        started by hand (e.g. under gdb) with the command the log prints;\n"
        "                        killed and started again by hand, it continues the run\n"
        "  --cmd-timeout SECONDS a worker that owes commands and answers none for this long, though\n"
        "                        it heartbeats, is stuck: replaced and its commands sent again\n"
        "                        (default %d; 0: no deadline)\n"
        "pipeline (mpirun -np P flexgen run ...; built with MPI):\n"
        "  rank r runs decoder layers [r*L/P, (r+1)*L/P) (the embedding on rank 0, the LM head on the\n"
        "  last) with its own workers, placement and budgets (--policy auto: searched for its stage,\n"
        "  with memory for P groups; see flexgen policy --stages P): mpirun's 'A : B' form gives ranks their\n"
        "  own flags. A block is P groups of --num-gpu-batches x --gpu-batch-size prompts, one group in\n"
        "  flight per stage; rank 0's batch sizes hold on every rank. Rank 0 owns the job (--out, --job,\n"
        "  --resume with the same mpirun line, --report with every rank's figures); --trace writes\n"
        "  FILE.rankR per rank. Every rank reads the model and prompts at the same paths\n", FG_SUPER_CMD_TIMEOUT_MS / 1000);
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

/* One option (getopt_long's code o, its argument in optarg) into a. */
static fg_status apply_option(int o, run_args *a, int argc, char **argv) {
    fg_status st = FG_OK;
    switch (o) {
    case O_JOB: a->job = optarg; break;
    case O_RESUME: a->resume = 1; break;
    case O_MODEL: a->model_dir = optarg; break;
    case O_DUMMY: a->dummy = optarg; break;
    case O_PIDS: a->prompt_ids = optarg; break;
    case O_OUT: a->out = optarg; break;
    case O_DUMP: a->dump_logits = optarg; break;
    case O_GEN: st = fg_parse_int("--gen-len", optarg, 1, MAX_COUNT_ARG, &a->gen_len); break;
    case O_GBS: st = fg_parse_int("--gpu-batch-size", optarg, 1, MAX_COUNT_ARG, &a->batch); break;
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
    case O_CHAT: a->chat_template = optarg; break;
    case O_TOK: a->tokenizer = optarg; break;
    case O_PERCENT:
        st = fg_policy_parse_percent(&a->flex.policy, optarg, argc, argv, &optind);
        a->have_percent = 1;
        break;
    case O_XPCT: st = fg_policy_parse_percent_experts(&a->flex.policy, optarg, argc, argv, &optind); break;
    case O_XLOAD: st = fg_policy_parse_expert_load(&a->flex.policy, optarg); break;
    case O_XCPU: a->flex.policy.cpu_expert_compute = 1; break;
    case O_NGB: st = fg_parse_int("--num-gpu-batches", optarg, 1, FG_MAX_GPU_BATCHES, &a->num_gpu_batches); break;
    case O_CPUATTN: a->cpu_cache_compute = 1; break;
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
    case O_CW: a->flex.policy.compress_weight = 1; break;
    case O_CC: a->flex.policy.compress_cache = 1; break;
    case O_ATTACH: {
        int r = fg_role_from_name(optarg);
        if (r < 0) st = fg_err_set(FG_EINPUT, "--attach: expected gpu, cpu or disk, got '%s'", optarg);
        else a->flex.attach |= 1u << r;
        break;
    }
    case O_DEVICE: st = fg_devsize_usable(optarg), a->flex.device = optarg; break;
    case O_CMDTIMEOUT: {
        int sec = 0;
        st = fg_parse_int("--cmd-timeout", optarg, 0, INT_MAX / 1000, &sec);
        a->flex.cmd_timeout_ms = sec ? sec * 1000 : -1;
        break;
    }
    case O_TRUNC: a->truncate = 1; break;
    case O_BORDER:
        if (strcmp(optarg, "grouped") && strcmp(optarg, "input"))
            st = fg_err_set(FG_EINPUT, "--batch-order: expected grouped or input, got '%s'", optarg);
        a->batch_input_order = !strcmp(optarg, "input");
        break;
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
    return st;
}

/* What no single option can say: pairs that exclude each other, and what
 * --resume needs. */
static fg_status check_args(int argc, char **argv, const run_args *a) {
    if (optind < argc) return fg_err_set(FG_EINPUT, "run: unexpected argument '%s'", argv[optind]);
    if (a->model_dir && a->dummy) return fg_err_set(FG_EINPUT, "run: give one of --model DIR or --dummy NAME, not both");
    if (a->prompts && a->prompt_ids)
        return fg_err_set(FG_EINPUT, "run: give one of --prompts FILE or --prompt-ids FILE.json, not both");
    if (a->resume && !a->job && !a->out)
        return fg_err_set(FG_EINPUT, "run: --resume needs --job DIR (or the --out FILE whose FILE.job it continues)");
    if (a->resume && a->dump_logits)
        return fg_err_set(FG_EINPUT, "run: --dump-logits cannot be resumed: the logits of a job's finished blocks "
                                     "are not kept (run the job again without --resume)");
    if (!a->resume) return fg_run_check_inputs(a);
    if (strcmp(a->engine, "reference") && strcmp(a->engine, "flexgen"))
        return fg_err_set(FG_EINPUT, "run: --engine '%s' is unknown: flexgen or reference", a->engine);
    if (a->top_p <= 0) return fg_err_set(FG_EINPUT, "--top-p must be > 0");
    return FG_OK;
}

fg_status fg_run_parse_args(int argc, char **argv, run_args *a) {
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
        {"hardware", required_argument, 0, O_HW},      {"job", required_argument, 0, O_JOB},
        {"attach", required_argument, 0, O_ATTACH},    {"cmd-timeout", required_argument, 0, O_CMDTIMEOUT},
        {"compress-weight", no_argument, 0, O_CW},     {"compress-cache", no_argument, 0, O_CC},
        {"resume", no_argument, 0, O_RESUME},          {"help", no_argument, 0, 'h'},
        {"chat-template", required_argument, 0, O_CHAT}, {"tokenizer", required_argument, 0, O_TOK},
        {"batch-order", required_argument, 0, O_BORDER}, {"percent-experts", required_argument, 0, O_XPCT},
        {"expert-load", required_argument, 0, O_XLOAD}, {"cpu-expert-compute", no_argument, 0, O_XCPU},
        {0, 0, 0, 0},
    };
    *a = (run_args){.gen_len = DEFAULT_GEN_LEN, .top_p = 1.0f, .engine = "flexgen", .policy = "auto"};
    a->flex.offload_dir = "flexgen-offload";
    opterr = 0;
    optind = 1;
    int o;
    fg_status st = FG_OK;
    while (!st && (o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (o >= O_MODEL) a->given |= RUN_GIVEN(o);
        st = apply_option(o, a, argc, argv);
    }
    return st ? st : check_args(argc, argv, a);
}

fg_status fg_run_check_inputs(const run_args *a) {
    if (!a->model_dir && !a->dummy) return fg_err_set(FG_EINPUT, "run: give exactly one of --model DIR or --dummy NAME");
    if (!a->prompts && !a->prompt_ids)
        return fg_err_set(FG_EINPUT, "run: give exactly one of --prompts FILE or --prompt-ids FILE.json");
    if (!a->out) return fg_err_set(FG_EINPUT, "run: --out FILE.jsonl is required");
    return FG_OK;
}

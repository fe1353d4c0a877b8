/* cmd_run.h - what `flexgen run` was asked: its flags parsed and checked
 * (cmd_run_args.c), shared by the run itself (cmd_run.c) and its job record
 * (cmd_run_job.c). */
#ifndef FG_CMD_RUN_H
#define FG_CMD_RUN_H

#include <jansson.h>
#include <stdio.h>

#include "fg_engine_flex.h"

#define FG_MAX_STOPS 8
#define FG_RUN_DEFAULT_GBS 8   /* flexgen's --gpu-batch-size when not given (at most the prompt count; run_usage says 8) */

typedef struct {
    uint64_t given;              /* RUN_GIVEN(O_...) bits: the flags on the command line */
    const char *job;             /* --job DIR: NULL = OUT.job beside --out */
    int resume;                  /* --resume: continue the job in the job directory */
    const char *model_dir, *dummy, *prompts, *prompt_ids, *out, *dump_logits, *engine, *report;
    const char *chat_template;   /* --chat-template FILE: renders "messages" prompts instead of the model's */
    const char *tokenizer;       /* --tokenizer FILE: a tokenizer.json or llama2.c tokenizer.bin, not the model's */
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

/* Option codes (getopt_long's values); RUN_GIVEN(code) is its bit in `given`. */
enum { O_MODEL = 256, O_DUMMY, O_PIDS, O_OUT, O_DUMP, O_GEN, O_GBS, O_TEMP, O_TOPP, O_SEED, O_NOEOS, O_ENGINE,
       O_REPORT, O_PROMPTS, O_STOP, O_TRUNC, O_PERCENT, O_NGB, O_CPUATTN, O_SCHED, O_GPUMEM, O_CPUMEM, O_DISKMEM,
       O_OFFDIR, O_NOOVERLAP, O_TRACE, O_DEVICE, O_POLICY, O_HW, O_JOB, O_RESUME, O_ATTACH, O_CW, O_CC, O_CHAT, O_TOK,
       O_CMDTIMEOUT };
#define RUN_GIVEN(o) (1ull << ((o) - O_MODEL))

/* Parse and check the flags; FG_EINPUT naming the flag. --help exits 0. */
fg_status fg_run_parse_args(int argc, char **argv, run_args *a);

/* Whether the job directory's record or the flags name the inputs: with
 * --resume, --model/--dummy, --prompts/--prompt-ids and --out may come from
 * the record (cmd_run_job.c), so they are checked after it is read. */
fg_status fg_run_check_inputs(const run_args *a);

/* ---- the job directory (cmd_run_job.c) ---- */

/* --job DIR, or OUT.job beside --out. */
fg_status fg_run_job_dir(const run_args *a, char *buf, size_t len);
/* XXH3 of the prompt file's bytes (--prompts or --prompt-ids). */
fg_status fg_run_prompts_sum(const run_args *a, uint64_t *sum);
/* This run's record: identity, inputs, settings, the policy as it will run. */
json_t *fg_run_job_record(const run_args *a, uint64_t model_id, uint64_t prompts_sum, int n, int block);
/* --resume: the flags not given taken from the job's record (inputs, --out,
 * settings, the policy); then the inputs checked as without --resume. */
fg_status fg_run_job_apply(run_args *a, const json_t *rec);
/* FG_EINPUT listing what differs when this run's record is not the job's. */
fg_status fg_run_job_check(const char *dir, const json_t *job, const json_t *run);

#endif

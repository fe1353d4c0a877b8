/* cmd_run.h - what `flexgen run` was asked: its flags parsed and checked
 * (cmd_run_args.c), shared by the run itself (cmd_run.c) and its job record
 * (cmd_run_job.c). */
#ifndef FG_CMD_RUN_H
#define FG_CMD_RUN_H

#include <jansson.h>
#include <stdio.h>

#include "fg_engine_flex.h"
#include "fg_prompts.h"
#include "fg_ring.h"

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
    int batch_input_order;       /* --batch-order input: a Batch API file's requests run in file order, not grouped */
} run_args;

/* Option codes (getopt_long's values); RUN_GIVEN(code) is its bit in `given`. */
enum { O_MODEL = 256, O_DUMMY, O_PIDS, O_OUT, O_DUMP, O_GEN, O_GBS, O_TEMP, O_TOPP, O_SEED, O_NOEOS, O_ENGINE,
       O_REPORT, O_PROMPTS, O_STOP, O_TRUNC, O_PERCENT, O_NGB, O_CPUATTN, O_SCHED, O_GPUMEM, O_CPUMEM, O_DISKMEM,
       O_OFFDIR, O_NOOVERLAP, O_TRACE, O_DEVICE, O_POLICY, O_HW, O_JOB, O_RESUME, O_ATTACH, O_CW, O_CC, O_CHAT, O_TOK,
       O_CMDTIMEOUT, O_BORDER, O_XPCT, O_XLOAD, O_XCPU };
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

/* ---- OpenAI Batch API files (cmd_run_batch.c) ---- */

typedef struct {
    const fg_prompt_list *text;   /* the file: its requests in text->req */
    int n;                        /* requests that run: the engine's prompts */
    int *order;                   /* (n) engine prompt e is request order[e] */
    fg_seq_opts *seq;             /* (n) each one's max tokens, sampler, generator */
    int gen_len;                  /* the most any of them may generate */
    int failed;                   /* requests that failed before running (error lines) */
    uint64_t job_key;             /* the ids' key: model identity and prompt file */
    long long created;            /* the prompt file's modification time */
    const char *model;            /* the loaded model's name: each body's "model" */
    int model_logged;             /* a request naming another model was logged */
} run_batch;

/* The requests that run, grouped (--batch-order grouped: by max_tokens,
 * then prompt length) or in file order; *in (text->n, file order) becomes
 * the engine's prompts (*n, engine order). A prompt that does not fit
 * max_pos beside the file's longest max_tokens fails; failed requests are
 * logged. */
void fg_run_batch_plan(const run_args *a, fg_prompt_list *text, int max_pos, fg_seq_in **in, int *n, run_batch *b);
/* The stop strings of engine prompt e: its request's, else --stop's. */
int fg_run_batch_stops(const run_batch *b, const run_args *a, int e, const char *const **stops);
/* The ids' key and "created", from the job's model and prompt file. */
fg_status fg_run_batch_ids(const run_args *a, uint64_t model_id, uint64_t prompts_sum, run_batch *b);
/* The output line of engine prompt e ('\n' included, heap). */
char *fg_run_batch_line(const run_batch *b, int e, const char *content, fg_finish f, int prompt_tokens,
                        int completion_tokens);
/* fg_job_out_fn (ctx: the run_batch): the journal's lines back at their
 * requests' lines, failed requests' error lines between. */
fg_status fg_run_batch_output(void *ctx, const char *journal, size_t len, char **out, size_t *out_len);
void fg_run_batch_free(run_batch *b);

#endif

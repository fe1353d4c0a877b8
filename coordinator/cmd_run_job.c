/* cmd_run_job.c - what `flexgen run` records of itself in its job directory
 * (fg_job.h) and what `--resume` takes back from it. The record holds
 * everything the outputs depend on: the model's identity
 * (fg_wsrc_identity), the prompt file's XXH3 and count, the engine, the
 * generation settings and the policy actually run (with --policy auto the
 * search's choice), so a resumed run computes its remaining blocks exactly
 * as the killed one would have. Paths are kept to fill in what a resume
 * leaves out, but compared by content (identity, checksum), not by name.
 * The offload directory, budgets and device are recorded under
 * "resources" for a resume that names none, and never compared: they change
 * no output. --trace, --report and --hardware are the resumed run's own. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "cmd_run.h"
#include "fg_job.h"

fg_status fg_run_job_dir(const run_args *a, char *buf, size_t len) {
    int w = a->job ? snprintf(buf, len, "%s", a->job) : snprintf(buf, len, "%s.job", a->out);
    if (w < 0 || (size_t)w >= len) return fg_err_set(FG_EINPUT, "--job: the path is too long");
    return FG_OK;
}

static fg_status file_sum(const char *path, uint64_t *sum) {
    char *data;
    size_t len;
    fg_status st = fg_read_file(path, &data, &len);
    if (st) return st;
    *sum = XXH3_64bits(data, len);
    free(data);
    return FG_OK;
}

fg_status fg_run_prompts_sum(const run_args *a, uint64_t *sum) {
    return file_sum(a->prompts ? a->prompts : a->prompt_ids, sum);
}

/* p made absolute; a file not yet there (--out) by its directory's path. */
static json_t *abs_path(const char *p) {
    if (!p) return json_null();
    char buf[PATH_MAX], dir[PATH_MAX], full[2 * PATH_MAX];
    if (realpath(p, buf)) return json_string(buf);
    const char *slash = strrchr(p, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - p) : 1, slash ? (slash == p ? "/" : p) : ".");
    if (!realpath(dir, buf)) return json_string(p);
    snprintf(full, sizeof full, "%s/%s", strcmp(buf, "/") ? buf : "", slash ? slash + 1 : p);
    return json_string(full);
}

static json_t *hex64(uint64_t v) {
    char s[20];
    snprintf(s, sizeof s, "%016llx", (unsigned long long)v);
    return json_string(s);
}

json_t *fg_run_job_record(const run_args *a, uint64_t model_id, uint64_t prompts_sum, int n, int block) {
    json_t *stop = json_array();
    for (int i = 0; i < a->n_stop; i++) json_array_append_new(stop, json_string(a->stop[i]));
    char seed[24];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)a->seed);
    json_t *pol;
    if (!strcmp(a->engine, "flexgen")) {
        const fg_policy *p = &a->flex.policy;
        pol = json_pack("{s:i, s:i, s:[f,f,f,f,f,f], s:b, s:b, s:s, s:s}", "gbs", p->gbs, "num_gpu_batches",
                        p->num_gpu_batches, "percent", p->w_gpu, p->w_cpu, p->c_gpu, p->c_cpu, p->h_gpu, p->h_cpu,
                        "cpu_cache_compute", p->cpu_cache_compute, "overlap", p->overlap, "schedule",
                        a->flex.schedule_row ? "row" : "block", "expert_load",
                        p->expert_load == FG_EXPERTS_ALL ? "all" : "routed");
        json_object_set_new(pol, "percent_experts", p->x_set ? json_pack("[f,f]", p->x_gpu, p->x_cpu) : json_null());
        json_object_set_new(pol, "cpu_expert_compute", json_boolean(p->cpu_expert_compute));
    } else {
        pol = json_pack("{s:i}", "batch", a->batch);   /* 0: all prompts at once */
    }
    json_t *r = json_object();
    json_object_set_new(r, "format", json_string("flexgen-job 1"));
    json_object_set_new(r, "model", abs_path(a->model_dir));
    json_object_set_new(r, "dummy", a->dummy ? json_string(a->dummy) : json_null());
    json_object_set_new(r, "model_identity", hex64(model_id));
    json_object_set_new(r, "prompts", abs_path(a->prompts));
    json_object_set_new(r, "prompt_ids", abs_path(a->prompt_ids));
    json_object_set_new(r, "prompts_xxh3", hex64(prompts_sum));
    json_object_set_new(r, "prompts_count", json_integer(n));
    /* --chat-template renders "messages" prompts: which file, and (compared) what it held */
    uint64_t tsum = 0;
    if (a->chat_template) {
        json_object_set_new(r, "chat_template", abs_path(a->chat_template));
        json_object_set_new(r, "chat_template_xxh3", file_sum(a->chat_template, &tsum) ? json_null() : hex64(tsum));
    }
    /* --tokenizer makes the prompts' ids: which file, and (compared) what it held */
    if (a->tokenizer) {
        uint64_t ksum = 0;
        json_object_set_new(r, "tokenizer", abs_path(a->tokenizer));
        json_object_set_new(r, "tokenizer_xxh3", file_sum(a->tokenizer, &ksum) ? json_null() : hex64(ksum));
    }
    json_object_set_new(r, "out", abs_path(a->out));
    json_object_set_new(r, "engine", json_string(a->engine));
    json_object_set_new(r, "gen_len", json_integer(a->gen_len));
    json_object_set_new(r, "temperature", json_real(a->temperature));
    json_object_set_new(r, "top_p", json_real(a->top_p));
    json_object_set_new(r, "seed", json_string(seed));
    json_object_set_new(r, "ignore_eos", json_boolean(a->ignore_eos));
    json_object_set_new(r, "truncate", json_boolean(a->truncate));
    /* a Batch API file's requests in the journal: grouped or in file order */
    json_object_set_new(r, "batch_order", json_string(a->batch_input_order ? "input" : "grouped"));
    json_object_set_new(r, "stop", stop);
    json_object_set_new(r, "compress_weight", json_boolean(a->flex.policy.compress_weight));   /* both engines */
    json_object_set_new(r, "compress_cache", json_boolean(a->flex.policy.compress_cache));
    json_object_set_new(r, "policy", pol);
    json_object_set_new(r, "block_prompts", json_integer(block));
    /* where and within what the job ran: taken by a resume that names none, never compared */
    const fg_flex_opts *f = &a->flex;
    json_object_set_new(r, "resources", json_pack("{s:o, s:I, s:I, s:I, s:s?}", "offload_dir", abs_path(f->offload_dir),
                        "gpu_mem", (json_int_t)f->gpu_mem, "cpu_mem", (json_int_t)f->cpu_mem, "disk_mem",
                        (json_int_t)f->disk_mem, "device", f->device));
    return r;
}

/* A recorded field of the expected type (JSON_TRUE: a boolean; JSON_REAL:
 * a number; null only where `nullable`), or FG_EINPUT naming it. */
static fg_status field(const json_t *obj, const char *key, json_type want, int nullable, json_t **v) {
    *v = json_object_get(obj, key);
    if (*v && (json_typeof(*v) == want || (want == JSON_TRUE && json_is_boolean(*v)) ||
               (want == JSON_REAL && json_is_number(*v)) || (nullable && json_is_null(*v))))
        return FG_OK;
    return fg_err_set(FG_EINPUT, "job.json: field '%s' is missing or of the wrong type", key);
}

/* Unless the flag was given: v = obj[key], checked, then the statements. */
#define TAKE(flag, obj, key, type, nullable, ...)                       \
    do {                                                                 \
        if (!(a->given & RUN_GIVEN(flag))) {                             \
            json_t *v;                                                   \
            if ((st = field(obj, key, type, nullable, &v))) return st;   \
            __VA_ARGS__;                                                 \
        }                                                                \
    } while (0)

fg_status fg_run_job_apply(run_args *a, const json_t *rec) {
    json_t *fmt, *pol, *res;
    fg_status st;
    if ((st = field(rec, "format", JSON_STRING, 0, &fmt)) || (st = field(rec, "policy", JSON_OBJECT, 0, &pol)) ||
        (st = field(rec, "resources", JSON_OBJECT, 0, &res)))
        return st;
    if (strcmp(json_string_value(fmt), "flexgen-job 1"))
        return fg_err_set(FG_EINPUT, "job.json: format is '%s', not 'flexgen-job 1'", json_string_value(fmt));
    /* inputs: a pair (--model/--dummy, --prompts/--prompt-ids) is taken whole or not at all */
    if (!(a->given & (RUN_GIVEN(O_MODEL) | RUN_GIVEN(O_DUMMY)))) {
        TAKE(O_MODEL, rec, "model", JSON_STRING, 1, a->model_dir = json_string_value(v));
        TAKE(O_DUMMY, rec, "dummy", JSON_STRING, 1, a->dummy = json_string_value(v));
    }
    if (!(a->given & (RUN_GIVEN(O_PROMPTS) | RUN_GIVEN(O_PIDS)))) {
        TAKE(O_PROMPTS, rec, "prompts", JSON_STRING, 1, a->prompts = json_string_value(v));
        TAKE(O_PIDS, rec, "prompt_ids", JSON_STRING, 1, a->prompt_ids = json_string_value(v));
    }
    TAKE(O_OUT, rec, "out", JSON_STRING, 0, a->out = json_string_value(v));
    if (json_object_get(rec, "chat_template"))
        TAKE(O_CHAT, rec, "chat_template", JSON_STRING, 1, a->chat_template = json_string_value(v));
    if (json_object_get(rec, "tokenizer"))
        TAKE(O_TOK, rec, "tokenizer", JSON_STRING, 1, a->tokenizer = json_string_value(v));
    /* settings */
    TAKE(O_ENGINE, rec, "engine", JSON_STRING, 0, a->engine = json_string_value(v));
    TAKE(O_GEN, rec, "gen_len", JSON_INTEGER, 0, a->gen_len = (int)json_integer_value(v));
    TAKE(O_TEMP, rec, "temperature", JSON_REAL, 0, a->temperature = (float)json_number_value(v));
    TAKE(O_TOPP, rec, "top_p", JSON_REAL, 0, a->top_p = (float)json_number_value(v));
    TAKE(O_SEED, rec, "seed", JSON_STRING, 0, a->seed = strtoull(json_string_value(v), NULL, 10));
    TAKE(O_NOEOS, rec, "ignore_eos", JSON_TRUE, 0, a->ignore_eos = json_is_true(v));
    TAKE(O_TRUNC, rec, "truncate", JSON_TRUE, 0, a->truncate = json_is_true(v));
    if (json_object_get(rec, "batch_order"))   /* a record without it predates Batch API files: grouped */
        TAKE(O_BORDER, rec, "batch_order", JSON_STRING, 0, a->batch_input_order = !strcmp(json_string_value(v), "input"));
    TAKE(O_CW, rec, "compress_weight", JSON_TRUE, 0, a->flex.policy.compress_weight = json_is_true(v));
    TAKE(O_CC, rec, "compress_cache", JSON_TRUE, 0, a->flex.policy.compress_cache = json_is_true(v));
    TAKE(O_STOP, rec, "stop", JSON_ARRAY, 0, {
        a->n_stop = 0;
        for (size_t i = 0; i < json_array_size(v) && a->n_stop < (int)(sizeof a->stop / sizeof *a->stop); i++)
            if (json_is_string(json_array_get(v, i))) a->stop[a->n_stop++] = json_string_value(json_array_get(v, i));
    });
    /* where the job ran */
    TAKE(O_OFFDIR, res, "offload_dir", JSON_STRING, 1, if (json_is_string(v)) a->flex.offload_dir = json_string_value(v));
    TAKE(O_GPUMEM, res, "gpu_mem", JSON_INTEGER, 0, a->flex.gpu_mem = (uint64_t)json_integer_value(v));
    TAKE(O_CPUMEM, res, "cpu_mem", JSON_INTEGER, 0, a->flex.cpu_mem = (uint64_t)json_integer_value(v));
    TAKE(O_DISKMEM, res, "disk_mem", JSON_INTEGER, 0, a->flex.disk_mem = (uint64_t)json_integer_value(v));
    /* null where the run took the default (no --device: cuda where a GPU is found, else host), and it is
     * the default again; a record without the key predates it */
    if (json_object_get(res, "device")) TAKE(O_DEVICE, res, "device", JSON_STRING, 1, a->flex.device = json_string_value(v));
    /* the policy the job ran, not a new search: the blocks stay the same */
    if (strcmp(a->engine, "flexgen")) {
        TAKE(O_GBS, pol, "batch", JSON_INTEGER, 0, a->batch = (int)json_integer_value(v));
        return fg_run_check_inputs(a);
    }
    fg_policy *p = &a->flex.policy;
    TAKE(O_PERCENT, pol, "percent", JSON_ARRAY, 0, {
        double *f[6] = {&p->w_gpu, &p->w_cpu, &p->c_gpu, &p->c_cpu, &p->h_gpu, &p->h_cpu};
        if (json_array_size(v) != 6) return fg_err_set(FG_EINPUT, "job.json: policy.percent: expected 6 numbers");
        for (int i = 0; i < 6; i++) *f[i] = json_number_value(json_array_get(v, (size_t)i));
        a->have_percent = 1;
    });
    TAKE(O_GBS, pol, "gbs", JSON_INTEGER, 0, a->batch = (int)json_integer_value(v));
    TAKE(O_NGB, pol, "num_gpu_batches", JSON_INTEGER, 0, a->num_gpu_batches = (int)json_integer_value(v));
    TAKE(O_CPUATTN, pol, "cpu_cache_compute", JSON_TRUE, 0, a->cpu_cache_compute = json_is_true(v));
    TAKE(O_NOOVERLAP, pol, "overlap", JSON_TRUE, 0, a->no_overlap = !json_is_true(v));
    TAKE(O_SCHED, pol, "schedule", JSON_STRING, 0, a->schedule_row = !strcmp(json_string_value(v), "row"));
    if (json_object_get(pol, "expert_load")) {   /* a record without it predates experts as units */
        TAKE(O_XLOAD, pol, "expert_load", JSON_STRING, 0, {
            fg_status xs = fg_policy_parse_expert_load(p, json_string_value(v));
            if (xs) return fg_err_set(FG_EINPUT, "job.json: policy.expert_load: %s", fg_err_msg());
        });
        TAKE(O_XCPU, pol, "cpu_expert_compute", JSON_TRUE, 0, p->cpu_expert_compute = json_is_true(v));
        TAKE(O_XPCT, pol, "percent_experts", JSON_ARRAY, 1, if (json_is_array(v)) {
            if (json_array_size(v) != 2) return fg_err_set(FG_EINPUT, "job.json: policy.percent_experts: expected 2 numbers");
            p->x_set = 1, p->x_gpu = json_number_value(json_array_get(v, 0)), p->x_cpu = json_number_value(json_array_get(v, 1));
        });
    }
    return fg_run_check_inputs(a);
}

fg_status fg_run_job_check(const char *dir, const json_t *job, const json_t *run) {
    /* where the inputs live may change (a moved model, another --out); what they are may not */
    static const char *const paths[] = {"model", "dummy", "prompts", "prompt_ids", "out", "resources", "chat_template",
                                        "tokenizer", NULL};
    char diff[2048];
    if (!fg_job_diff(job, run, paths, diff, sizeof diff)) return FG_OK;
    return fg_err_set(FG_EINPUT, "--resume: %s was started with another model, prompt file or settings: %s (run it "
                                 "with the job's, or start afresh without --resume)", dir, diff);
}

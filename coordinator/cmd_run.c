/* cmd_run.c - `flexgen run`: load a model, read prompts, generate, write
 * JSONL (and optionally the logits). Every input is validated before any work
 * starts. Outputs go block by block into the job directory's journal
 * (fg_job.h; what is recorded and resumed is cmd_run_job.c's), and --out is
 * written from it, through FILE.partial and a rename, only when complete.
 * The flags are cmd_run_args.c's. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fg_devsize.h"
#include "fg_cmds.h"
#include "fg_policy_auto.h"
#include "fg_profile_run.h"
#include "fg_search.h"
#include "fg_engine_flex.h"
#include "fg_msg.h"
#include "fg_engine_ref.h"
#include "fg_prompt_enc.h"

#include "cmd_run.h"
#include "fg_fs.h"
#include "fg_job.h"
#include "fg_ring.h"
#include "fg_shm.h"

/* ---- text prompts ---- */

/* Everything the run knows about its prompts besides their ids. */
typedef struct {
    fg_tok *tok;              /* NULL when the model has no tokenizer files */
    fg_prompt_list text;      /* --prompts; empty with --prompt-ids */
    const char *const *stop;  /* --stop strings */
    int n_stop;
    const run_batch *batch;   /* a Batch API file's requests (engine order), else NULL */
    const run_args *a;
} run_io;

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

/* Where the first of prompt q's stop strings starts in text, or -1. */
static long stop_at(const run_io *io, int q, const char *text) {
    const char *const *stop = io->stop;
    int n_stop = io->batch ? fg_run_batch_stops(io->batch, io->a, q, &stop) : io->n_stop;
    long best = -1;
    for (int k = 0; k < n_stop; k++) {
        const char *hit = strstr(text, stop[k]);
        if (hit && (best < 0 || hit - text < best)) best = hit - text;
    }
    return best;
}

static int stop_check(void *ctx, int seq, const int32_t *ids, int n) {
    run_io *io = ctx;
    char *text = ids_text(io->tok, ids, n);
    long at = stop_at(io, seq, text);
    free(text);
    return at >= 0;
}

/* The completion of prompt i: the text before EOS and before any stop
 * string (heap; NULL without a tokenizer). */
static char *completion_text(const run_io *io, const fg_seq_out *out, int i) {
    if (!io->tok) return NULL;
    int m = out[i].n - (out[i].finish == FG_FINISH_EOS);
    char *ct = ids_text(io->tok, out[i].ids, m);
    long at = out[i].finish == FG_FINISH_STOP ? stop_at(io, i, ct) : -1;
    if (at >= 0) ct[at] = 0;
    return ct;
}

/* The output line of prompt i, '\n' included (heap string). */
static char *format_line(const run_io *io, const fg_seq_in *in, const fg_seq_out *out, int i) {
    if (io->batch) {   /* a Batch API request's response line */
        char *ct = completion_text(io, out, i);
        char *line = fg_run_batch_line(io->batch, i, ct, out[i].finish, in[i].len, out[i].n);
        free(ct);
        return line;
    }
    json_t *ids = json_array();
    for (int j = 0; j < out[i].n; j++) json_array_append_new(ids, json_integer(out[i].ids[j]));
    json_t *id = io->text.n ? json_loads(io->text.items[i].id_json, JSON_DECODE_ANY, NULL) : json_integer(i);
    json_t *prompt = json_null(), *completion = json_null();
    if (io->tok) {
        char *pt = io->text.n ? strdup(io->text.items[i].text) : ids_text(io->tok, in[i].ids, in[i].len);
        char *ct = completion_text(io, out, i);
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
    json_decref(o);
    size_t len = strlen(line);
    line = realloc(line, len + 2);
    line[len] = '\n', line[len + 1] = 0;
    return line;
}

/* The job's side of a run: each finished block's lines go to the journal. */
typedef struct {
    fg_job *job;
    const run_io *io;
    const fg_seq_in *in;
    fg_seq_out *out;
    int n, block;
} run_journal;

static fg_status journal_block(void *ctx, int first, int count) {
    run_journal *rj = ctx;
    size_t len = 0, cap = 4096;
    char *buf = fg_xmalloc(cap);
    for (int i = first; i < first + count; i++) {
        char *line = format_line(rj->io, rj->in, rj->out, i);
        size_t m = strlen(line);
        if (len + m > cap) buf = realloc(buf, cap = 2 * (len + m));
        memcpy(buf + len, line, m), len += m;
        free(line);
        free(rj->out[i].ids);   /* journaled: the run keeps no more than a block of outputs */
        rj->out[i].ids = NULL;
    }
    fg_status st = fg_job_append(rj->job, first, count, buf, len);
    free(buf);
    if (!st)
        fg_info("job: block %d/%d (prompts %d..%d) journaled", first / rj->block + 1, (rj->n + rj->block - 1) / rj->block,
                first, first + count - 1);
    return st;
}

/* Weight loads per token (index 0 the prefill), summed over layers and
 * blocks: bytes copied to the device for dense parts and for experts, the
 * experts' disk share, and how many experts (a mixture of experts). */
static json_t *weight_loads_json(const fg_expert_stats *x) {
    json_t *steps = json_array();
    uint64_t dense = 0, ex = 0, exd = 0;
    long nx = 0, nr = 0;
    for (int i = 0; i < x->G; i++) {
        json_array_append_new(steps, json_pack("{s:i, s:I, s:I, s:I, s:I, s:I}", "token", i, "dense_bytes",
                                               (json_int_t)x->dense_bytes[i], "expert_bytes", (json_int_t)x->expert_bytes[i],
                                               "expert_disk_bytes", (json_int_t)x->expert_disk_bytes[i], "experts",
                                               (json_int_t)x->experts[i], "routed_experts", (json_int_t)x->routed[i]));
        dense += x->dense_bytes[i], ex += x->expert_bytes[i], exd += x->expert_disk_bytes[i];
        nx += x->experts[i], nr += x->routed[i];
    }
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:o}", "dense_bytes", (json_int_t)dense, "expert_bytes", (json_int_t)ex,
                     "expert_disk_bytes", (json_int_t)exd, "experts", (json_int_t)nx, "routed_experts", (json_int_t)nr,
                     "per_token", steps);
}

static fg_status write_report(const char *path, const run_args *a, const fg_model_config *c, int n, int resumed,
                              const fg_gen_stats *s, const fg_flex_stats *fs, const fg_search_result *pred) {
    double gen_s = s->prefill_s + s->decode_s;
    /* the batch the run computed: a flexgen run's GPU batch (the policy's,
     * which --policy auto chose where no --gpu-batch-size was given) */
    int batch = !strcmp(a->engine, "flexgen") ? a->flex.policy.gbs : a->batch ? a->batch : n;
    double bubble = 0;
    json_t *o = json_pack("{s:s, s:s, s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:I}", "engine", a->engine,
                          "model", c->name, "prompts", n, "gen_len", a->gen_len, "batch", batch,
                          "throughput_tokens_per_s", gen_s > 0 ? (double)s->generated / gen_s : 0.0,
                          "prefill_s", s->prefill_s, "decode_s", s->decode_s, "gemm_s", s->gemm_s,
                          "gemm_share", gen_s > 0 ? s->gemm_s / gen_s : 0.0, "load_s", s->load_s,
                          "generated_tokens", (json_int_t)s->generated);
    json_object_set_new(o, "resumed_prompts", json_integer(resumed));   /* journaled before, not computed here */
    if (!strcmp(a->engine, "flexgen")) {
        char d[256];
        fg_policy_describe_ex(&a->flex.policy, c->n_experts > 0, d, sizeof d);
        json_object_set_new(o, "policy", json_string(d));
        json_object_set_new(o, "schedule", json_string(a->flex.schedule_row ? "row" : "block"));
        json_object_set_new(o, "peak_gpu_bytes", json_integer((json_int_t)fs->gpu_bytes));
        json_object_set_new(o, "shm_bytes", json_integer((json_int_t)fs->shm_bytes));
        json_object_set_new(o, "h2d_bytes", json_integer((json_int_t)fs->h2d_bytes));
        json_object_set_new(o, "d2h_bytes", json_integer((json_int_t)fs->d2h_bytes));
        json_object_set_new(o, "disk_read_bytes", json_integer((json_int_t)fs->disk_read_bytes));
        json_object_set_new(o, "disk_write_bytes", json_integer((json_int_t)fs->disk_write_bytes));
        json_t *rd = json_object();   /* the rate the disk delivered while reads were in flight, by phase */
        for (int ph = 0; ph < 2; ph++)
            json_object_set_new(rd, ph ? "decode" : "prefill",
                                json_pack("{s:I, s:f, s:f}", "bytes", (json_int_t)s->disk_rd_bytes[ph], "seconds",
                                          s->disk_rd_s[ph], "GBps",
                                          s->disk_rd_s[ph] > 0 ? s->disk_rd_bytes[ph] / s->disk_rd_s[ph] / 1e9 : 0.0));
        json_object_set_new(o, "disk_reads", rd);
        json_object_set_new(o, "d2d_bytes", json_integer((json_int_t)fs->d2d_bytes));
        json_object_set_new(o, "commands", json_integer(fs->commands));
        if (fs->xs.G) json_object_set_new(o, "weight_loads", weight_loads_json(&fs->xs));
        json_t *busy = json_object();
        for (int r = 0; r < 3; r++) json_object_set_new(busy, fg_role_name(r), json_real(fs->busy_s[r]));
        json_object_set_new(o, "worker_busy_s", busy);
        json_t *rss = json_object();
        for (int r = 0; r < 3; r++) json_object_set_new(rss, fg_role_name(r), json_integer((json_int_t)fs->peak_rss[r]));
        json_object_set_new(rss, "coordinator", json_integer((json_int_t)fs->peak_rss[3]));
        json_object_set_new(o, "peak_rss_bytes", rss);
        json_object_set_new(o, "gpu_restarts", json_integer(fs->gpu_restarts));
        if (fs->ranks > 1 && fs->rank) {   /* a pipeline: each rank's share of the time */
            json_t *ranks = json_array();
            for (int r = 0; r < fs->ranks; r++) {
                const fg_rank_stats *x = &fs->rank[r];
                json_t *rb = json_object();
                for (int w = 0; w < 3; w++) json_object_set_new(rb, fg_role_name(w), json_real(x->busy_s[w]));
                json_array_append_new(ranks, json_pack("{s:i, s:[i,i], s:o, s:f, s:f, s:I, s:I, s:I, s:I, s:I}", "rank", r,
                    "layers", x->lo, x->hi, "worker_busy_s", rb, "ring_wait_s", x->wait_s, "ring_send_s", x->send_s, "sent_bytes",
                    (json_int_t)x->sent, "received_bytes", (json_int_t)x->recvd, "messages", (json_int_t)x->msgs,
                    "peak_gpu_bytes", (json_int_t)x->gpu_bytes, "shm_bytes", (json_int_t)x->shm_bytes));
                bubble += x->wait_s;
            }
            json_object_set_new(o, "pipeline", json_pack("{s:i, s:o, s:f}", "ranks", fs->ranks, "per_rank", ranks,
                                                         "mean_ring_wait_s", bubble / fs->ranks));
        }
        if (pred->cases) {   /* predicted beside measured, phase by phase */
            json_object_set_new(o, "predicted", json_pack("{s:s, s:f, s:f, s:f, s:s, s:s}", "hardware", a->hardware ? a->hardware : "cached profile",
                "throughput_tokens_per_s", pred->pred.throughput, "prefill_s", pred->pred.prefill_s,
                "decode_s", pred->pred.decode_s, "prefill_bottleneck", fg_cost_res_name(pred->pred.pre_bottleneck),
                "decode_bottleneck", fg_cost_res_name(pred->pred.gen_bottleneck)));
            json_t *pp = json_object_get(o, "predicted");   /* what each resource is busy for: the bottleneck's margin */
            json_object_set_new(pp, "prefill_resource_s", fg_cost_res_json(pred->pred.pre_res));
            json_object_set_new(pp, "decode_resource_s", fg_cost_res_json(pred->pred.gen_res));
        }
    }
    fg_fs_atomic file;
    int bad = fg_fs_atomic_fopen(&file, path, 0) != FG_OK;
    if (!bad && json_dumpf(o, file.f, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0) bad = 1, fg_fs_atomic_abort(&file);
    if (!bad) bad = fg_fs_atomic_commit(&file) != FG_OK;
    json_decref(o);
    if (bad) return fg_err_set(FG_EINPUT, "%s: cannot write the report", path);
    return FG_OK;
}

/* The experts' placement the command line gave (--percent-experts), over
 * a searched policy's (how they load, the search took as given). */
static void keep_expert_flags(fg_policy *p, const fg_policy *given) {
    if (given->x_set) p->x_set = 1, p->x_gpu = given->x_gpu, p->x_cpu = given->x_cpu;
}

/* The policy of a flexgen run: --percent as given; else the search
 * (--policy auto) or the fit rule (--policy default). *pred gets the cost
 * model's prediction when there is hardware to predict with (--hardware, a
 * cached profile, or the one --policy auto measures). */
static fg_status choose_policy(run_args *a, fg_wsrc *ws, const fg_model_config *c, int n, int S,
                               fg_search_result *pred) {
    fg_policy *p = &a->flex.policy;
    const fg_policy given = *p;
    const char *device = a->flex.device ? a->flex.device : fg_devsize_default();
    fg_search_opts so = {.S = S, .G = a->gen_len, .n_prompts = n, .gpu_mem = a->flex.gpu_mem, .cpu_mem = a->flex.cpu_mem,
                         .disk_mem = a->flex.disk_mem, .backend = device, .gbs = a->batch, .K = a->num_gpu_batches,
                         .cpu_attn = a->cpu_cache_compute ? 1 : -1, .groups = fg_ring_size(),
                         .expert_load = a->given & RUN_GIVEN(O_XLOAD) ? (int)p->expert_load : -1,
                         .cpu_experts = a->given & RUN_GIVEN(O_XCPU) ? 1 : -1};
    char d[256];
    fg_hw hw;
    fg_status st = FG_OK;
    if (!a->have_percent && !strcmp(a->policy, "auto") && !a->hardware &&
        fg_auto_all_gpu(c, fg_wsrc_specs(ws), &so, &pred->p)) {
        /* the whole run fits the GPU budget: all on the GPU, whatever a profile would say */
        int ov = p->overlap;
        *p = pred->p, p->overlap = ov;
        keep_expert_flags(p, &given);
        fg_policy_describe(p, d, sizeof d);
        fg_info("policy auto: %s (everything fits the GPU budget: no profile needed)", d);
    } else if (!a->have_percent && !strcmp(a->policy, "auto")) {
        if ((st = fg_search_least_fits(c, fg_wsrc_specs(ws), &so)) ||
            (st = fg_profile_for_run(a->hardware, a->flex.offload_dir, device, c,
                                     fg_cost_formats(c, fg_wsrc_specs(ws)),
                                     fg_auto_disk_bytes(c, fg_wsrc_specs(ws), &so), &hw)) ||
            (st = fg_search_policy(c, fg_wsrc_specs(ws), &hw, &so, pred)))
            return st;
        int ov = p->overlap;
        *p = pred->p, p->overlap = ov;
        keep_expert_flags(p, &given);
        fg_policy_describe_ex(p, c->n_experts > 0, d, sizeof d);
        fg_info("policy auto (%s): %s; predicted %.3g tokens/s (prefill %.3g s, decode %.3g s); %ld cases searched in "
                "%.2f s", hw.source, d, pred->pred.throughput, pred->pred.prefill_s, pred->pred.decode_s, pred->cases,
                pred->seconds);
        return FG_OK;
    }
    if (!a->have_percent && strcmp(a->policy, "auto")) {
        if ((st = fg_flex_default_policy(ws, &a->flex, S, a->gen_len))) return st;
        fg_policy_describe(p, d, sizeof d);
        fg_info("no --percent, --policy default: the fit rule chose %s", d);
    }
    /* a prediction beside the run when the hardware is known without measuring */
    char path[PATH_MAX];
    const char *hwsrc = a->hardware;
    if (!hwsrc && !fg_profile_cache_path(a->flex.offload_dir, device, path, sizeof path) && access(path, R_OK) == 0)
        hwsrc = path;
    if (!hwsrc || fg_hw_load_for(hwsrc, c, &hw)) return FG_OK;
    fg_profile_streamed(&hw, fg_auto_weight_bytes(c, fg_wsrc_specs(ws)));   /* where the policy puts weights on disk */
    if (!fg_search_score(c, fg_wsrc_specs(ws), &hw, &so, p, pred))
        fg_info("predicted (%s): %.3g tokens/s (prefill %.3g s, decode %.3g s)", hw.source, pred->pred.throughput,
                pred->pred.prefill_s, pred->pred.decode_s);
    return FG_OK;
}

/* The weights (with the run's compression flags in their config) and,
 * where the model has tokenizer files and the run needs them, its
 * tokenizer. Exits on failure, as the rest of fg_cmd_run's steps. */
static fg_wsrc *open_model(const run_args *a, run_io *io) {
    fg_wsrc *ws = NULL;
    fg_exit_on(a->dummy ? fg_wsrc_open_dummy(a->dummy, a->seed, &ws) : fg_wsrc_open_dir(a->model_dir, NULL, &ws));
    fg_exit_on(fg_prompt_tokenizer(a->model_dir, a->tokenizer, a->dummy != NULL, a->prompts || a->n_stop, ws, &io->tok));
    fg_wsrc_config_mut(ws)->compress_weight = a->flex.policy.compress_weight;   /* the tiers' format, fg_q4.h */
    fg_wsrc_config_mut(ws)->compress_cache = a->flex.policy.compress_cache;
    const fg_model_config *c = fg_wsrc_config(ws);
    fg_info("model: %s (%s: %d layers, hidden %d, %d heads, %d kv heads), %s", c->name, fg_config_family_name(c),
            c->n_layers, c->hidden, c->n_heads, c->n_kv_heads, fg_wsrc_describe(ws));
    return ws;
}

/* The prompts as ids: --prompts encoded, or --prompt-ids read and checked
 * against the context. */
static void read_prompts(const run_args *a, run_io *io, const fg_model_config *c, fg_seq_in **in, int *n) {
    if (a->prompts) {
        fg_chat_src chat = {a->model_dir, a->chat_template};
        fg_exit_on(fg_prompt_encode(a->prompts, io->tok, c, &chat, a->gen_len, a->truncate, &io->text, in, n));
        return;
    }
    fg_exit_on(fg_prompt_ids_read(a->prompt_ids, c->vocab_size, in, n));
    for (int i = 0; i < *n; i++)
        if ((*in)[i].len + a->gen_len > c->max_pos) {
            fg_err_set(FG_EINPUT, "%s: prompt %d has %d tokens; with --gen-len %d it needs %d positions, "
                                  "the model has %d", a->prompt_ids, i, (*in)[i].len, a->gen_len,
                       (*in)[i].len + a->gen_len, c->max_pos);
            fg_exit_on(FG_EINPUT);
        }
}

/* The offloading engine's policy (flags, search or fit rule) and the
 * batch it sets in go; the block size (prompts per journaled block). */
static int plan_flexgen(run_args *a, fg_wsrc *ws, const fg_seq_in *in, int n, fg_gen_opts *go, fg_search_result *pred) {
    fg_policy *p = &a->flex.policy;
    /* the default GPU batch: no group of a pipeline's block all padding */
    int per_group = (n + fg_ring_size() - 1) / fg_ring_size();
    p->gbs = a->batch ? a->batch : (per_group < FG_RUN_DEFAULT_GBS ? per_group : FG_RUN_DEFAULT_GBS);
    p->num_gpu_batches = a->num_gpu_batches ? a->num_gpu_batches : 1;
    p->cpu_cache_compute = a->cpu_cache_compute;
    p->overlap = !a->no_overlap;
    a->flex.schedule_row = a->schedule_row;
    int S = 1;
    for (int i = 0; i < n; i++) S = in[i].len > S ? in[i].len : S;
    if (a->resume) fg_info("--resume: the job's policy, not a new search");
    int P = fg_ring_size();
    if (P == 1) {
        fg_exit_on(choose_policy(a, ws, fg_wsrc_config(ws), n, S, pred));
    } else {
        /* a pipeline rank: its own policy for its stage, under its own
         * budgets; the block's shape (gbs, K) is rank 0's on every rank */
        fg_model_config sc = *fg_wsrc_config(ws);
        int lo, hi, shape[2];
        fg_ring_stage(sc.n_layers, fg_ring_rank(), P, &lo, &hi);
        sc.n_layers = hi - lo;
        if (fg_ring_rank() == 0) fg_exit_on(choose_policy(a, ws, &sc, n, S, pred));
        shape[0] = p->gbs, shape[1] = p->num_gpu_batches;
        fg_exit_on(fg_ring_bcast(shape, sizeof shape, 0));
        if (fg_ring_rank() != 0) {
            if ((a->batch && a->batch != shape[0]) || (a->num_gpu_batches && a->num_gpu_batches != shape[1]))
                fg_exit_on(fg_err_set(FG_EINPUT, "rank %d: --gpu-batch-size %d --num-gpu-batches %d, but rank 0 runs "
                                                 "%d x %d: every stage computes the same blocks", fg_ring_rank(),
                                      a->batch ? a->batch : p->gbs, a->num_gpu_batches ? a->num_gpu_batches : 1,
                                      shape[0], shape[1]));
            a->batch = p->gbs = shape[0], a->num_gpu_batches = p->num_gpu_batches = shape[1];
            fg_exit_on(choose_policy(a, ws, &sc, n, S, pred));
        }
    }
    go->batch = p->gbs;
    return p->gbs * p->num_gpu_batches * P;
}

/* The job: recorded (or checked against its record, jobrec, on --resume)
 * before any block runs; go->start is where the engine begins. */
static void open_job(const run_args *a, const json_t *jobrec, fg_wsrc *ws, int n, int block, run_journal *rj,
                     fg_gen_opts *go) {
    char jobdir[PATH_MAX];
    uint64_t psum;
    fg_exit_on(fg_run_prompts_sum(a, &psum));
    json_t *rec = fg_run_job_record(a, fg_wsrc_identity(ws), psum, n, block);
    fg_exit_on(fg_run_job_dir(a, jobdir, sizeof jobdir));
    if (a->resume) {
        fg_exit_on(fg_run_job_check(jobdir, jobrec, rec));
        fg_exit_on(fg_job_resume(jobdir, n, block, &rj->job, &go->start));
        char done[64] = "", rest[64] = "nothing left to compute";
        if (go->start) snprintf(done, sizeof done, " (prompts 0..%d), not recomputed", go->start - 1);
        if (go->start < n) snprintf(rest, sizeof rest, "computing prompts %d..%d", go->start, n - 1);
        fg_info("job %s: resuming: %d of %d blocks finished%s; %s", jobdir, (go->start + block - 1) / block,
                (n + block - 1) / block, done, rest);
    } else {
        fg_exit_on(fg_job_start(jobdir, rec, n, block, &rj->job));
    }
    json_decref(rec);
    go->block_done = journal_block, go->block_ctx = rj;
}

/* The engine over the prompts not yet journaled. */
static fg_status run_engine(run_args *a, fg_wsrc *ws, const fg_seq_in *in, int n, const fg_gen_opts *go,
                            fg_seq_out *out, fg_gen_stats *stats, fg_flex_stats *fs) {
    if (go->start == n) {   /* every block was journaled before the kill: only the output is left to write */
        fg_shm_sweep();     /* what the dead run left, as a run that starts workers would sweep it */
        if (!strcmp(a->engine, "flexgen")) fg_spill_sweep(a->flex.offload_dir);
        return FG_OK;
    }
    if (!strcmp(a->engine, "reference")) return fg_engine_ref_run(ws, in, n, go, out, stats);
    return fg_engine_flex_run(ws, in, n, go, &a->flex, out, stats, fs);
}

/* What this run's decode read from its tier store, and how fast, into this
 * machine's profile (fg_profile_note_stream): the next --policy auto takes
 * the disk's rate from it rather than from the test file the host caches. */
static void note_stream(const run_args *a, const fg_gen_stats *stats, const fg_flex_stats *fs) {
    if (strcmp(a->engine, "flexgen") || a->hardware || fs->ranks > 1 || !fs->disk_weight_bytes) return;
    const char *device = a->flex.device ? a->flex.device : fg_devsize_default();
    if (fg_profile_note_stream(a->flex.offload_dir, device, fs->disk_weight_bytes, stats->disk_rd_bytes,
                               stats->disk_rd_s))
        fg_warn("the disk's streaming rate could not be kept in the profile: %s", fg_err_msg());
}

static void log_summary(const run_args *a, int n, const fg_gen_opts *go, const fg_gen_stats *stats,
                        const fg_flex_stats *fs) {
    double gen_s = stats->prefill_s + stats->decode_s;
    char extra[160];
    if (!strcmp(a->engine, "reference"))
        snprintf(extra, sizeof extra, "BLAS %.1f%%", gen_s > 0 ? 100.0 * stats->gemm_s / gen_s : 0.0);
    else
        snprintf(extra, sizeof extra, "busy: gpu worker %.2f s, cpu worker %.2f s, disk worker %.2f s", fs->busy_s[0],
                 fs->busy_s[1], fs->busy_s[2]);
    fg_info("generated %ld tokens for %d prompts in %.3f s: %.2f tokens/s (prefill %.3f s, decode %.3f s, %s, "
            "weights load %.3f s)",
            stats->generated, n - go->start, gen_s, gen_s > 0 ? stats->generated / gen_s : 0.0, stats->prefill_s,
            stats->decode_s, extra, stats->load_s);
    for (int r = 0; r < fs->ranks && fs->rank; r++)
        fg_info("rank %d: decoder layers %d..%d; busy: gpu worker %.2f s, cpu worker %.2f s, disk worker %.2f s; "
                "waited on the ring %.2f s; sent %.1f MB, received %.1f MB", r, fs->rank[r].lo, fs->rank[r].hi - 1,
                fs->rank[r].busy_s[0], fs->rank[r].busy_s[1], fs->rank[r].busy_s[2], fs->rank[r].wait_s,
                fs->rank[r].sent / 1e6, fs->rank[r].recvd / 1e6);
}

/* --resume: the job's record, read by rank 0 and given to every rank of a
 * pipeline (the job directory need not be visible to the others). */
static json_t *resume_record(const run_args *a) {
    json_t *jobrec = NULL;
    char *text = NULL;
    uint64_t len = 0;
    if (fg_ring_rank() == 0) {
        char jobdir[PATH_MAX];
        fg_exit_on(fg_run_job_dir(a, jobdir, sizeof jobdir));
        fg_exit_on(fg_job_read_record(jobdir, &jobrec));
        if (fg_ring_size() == 1) return jobrec;
        text = json_dumps(jobrec, JSON_COMPACT);
        len = strlen(text) + 1;
    }
    fg_exit_on(fg_ring_bcast(&len, sizeof len, 0));
    if (fg_ring_rank() != 0) text = fg_xcalloc(len, 1);
    fg_exit_on(fg_ring_bcast(text, len, 0));
    if (fg_ring_rank() != 0 && !(jobrec = json_loads(text, 0, NULL)))
        fg_exit_on(fg_err_set(FG_ERUNTIME, "rank %d: the job record from rank 0 does not parse", fg_ring_rank()));
    free(text);
    return jobrec;
}

/* A pipeline (mpirun -np P): what a run of several ranks cannot do, refused
 * on every rank before any work; each rank's --trace its own file. */
static void check_pipeline(run_args *a, const fg_model_config *c) {
    int P = fg_ring_size();
    if (P == 1) return;
    if (strcmp(a->engine, "flexgen"))
        fg_exit_on(fg_err_set(FG_EINPUT, "run: --engine %s under mpirun: only the flexgen engine runs as a pipeline",
                              a->engine));
    if (a->dump_logits)
        fg_exit_on(fg_err_set(FG_EINPUT, "run: --dump-logits under mpirun: the logits stay on the last rank; run "
                                         "without mpirun to dump them"));
    if (P > c->n_layers)
        fg_exit_on(fg_err_set(FG_EINPUT, "run: %d ranks for %d decoder layers: a stage needs at least one layer",
                              P, c->n_layers));
    if (a->flex.trace) {
        static char path[PATH_MAX];
        snprintf(path, sizeof path, "%s.rank%d", a->flex.trace, fg_ring_rank());
        a->flex.trace = path;
    }
}

int fg_cmd_run(int argc, char **argv) {
    run_args a;
    fg_exit_on(fg_run_parse_args(argc, argv, &a));
    fg_exit_on(fg_ring_init());   /* mpirun -np P: this process is one rank of a pipeline */
    int rank = fg_ring_rank();
    json_t *jobrec = NULL;   /* --resume: the job's record; its strings fill in a's */
    if (a.resume) {
        jobrec = resume_record(&a);
        fg_exit_on(fg_run_job_apply(&a, jobrec));
    }
    run_io io = {.stop = a.stop, .n_stop = a.n_stop, .a = &a};
    fg_wsrc *ws = open_model(&a, &io);
    const fg_model_config *c = fg_wsrc_config(ws);
    fg_seq_in *in = NULL;
    int n = 0;
    read_prompts(&a, &io, c, &in, &n);
    check_pipeline(&a, c);

    fg_gen_opts go = {.gen_len = a.gen_len, .batch = a.batch, .ignore_eos = a.ignore_eos,
                      .samp = {.temperature = a.temperature, .top_p = a.top_p, .seed = a.seed},
                      .stop = a.n_stop ? stop_check : NULL, .stop_ctx = &io};
    run_batch batch = {.model = c->name};
    int default_gen = a.gen_len;
    if (io.text.req) {   /* a Batch API file: the requests that run, grouped, each with its own settings */
        if (a.dump_logits)
            fg_exit_on(fg_err_set(FG_EINPUT, "run: --dump-logits with a Batch API file: its requests generate "
                                             "different lengths; dump the logits of a prompt file"));
        fg_run_batch_plan(&a, &io.text, c->max_pos, &in, &n, &batch);
        io.batch = &batch;
        go.seq = batch.seq, go.stop = stop_check;
        /* the plan and the policy are sized for the longest request; the
         * record keeps --gen-len, the default of requests without max_tokens */
        go.gen_len = a.gen_len = batch.gen_len;
    }
    fg_search_result pred = {0};   /* the cost model's prediction (cases 0: none) */
    int block = a.batch ? a.batch : n ? n : 1;
    if (!strcmp(a.engine, "flexgen") && n) block = plan_flexgen(&a, ws, in, n, &go, &pred);
    a.gen_len = default_gen;
    run_journal rj = {.io = &io, .in = in, .n = n, .block = block};
    if (rank == 0) open_job(&a, jobrec, ws, n, block, &rj, &go);   /* a pipeline's job is rank 0's */
    if (rank == 0 && io.text.req) {
        uint64_t psum;
        fg_exit_on(fg_run_prompts_sum(&a, &psum));
        fg_exit_on(fg_run_batch_ids(&a, fg_wsrc_identity(ws), psum, &batch));
    }
    fg_exit_on(fg_ring_bcast(&go.start, sizeof go.start, 0));

    if (a.dump_logits) {
        int64_t shape[3] = {n, a.gen_len, c->vocab_size};
        fg_exit_on(fg_npy_create(a.dump_logits, shape, 3, &go.logits));
    }
    fg_seq_out *out = fg_xcalloc((size_t)(n ? n : 1), sizeof *out);   /* a Batch API file may run none */
    rj.out = out;
    fg_gen_stats stats = {0};
    fg_flex_stats fs = {0};
    fg_status st = run_engine(&a, ws, in, n, &go, out, &stats, &fs);
    if (st) {
        fg_npy_abort(&go.logits);
        fg_job_close(&rj.job);
        fg_exit_on(st);
    }
    if (go.logits) fg_exit_on(fg_npy_commit(&go.logits));
    if (rank == 0) {
        fg_exit_on(fg_job_finish_as(&rj.job, a.out, io.batch ? fg_run_batch_output : NULL, &batch));
        if (a.report) fg_exit_on(write_report(a.report, &a, c, n, go.start, &stats, &fs, &pred));
        log_summary(&a, n, &go, &stats, &fs);
        note_stream(&a, &stats, &fs);
    }
    fg_ring_finish();
    /* some requests failed (their error lines are in --out): not a clean run, not a failed one */
    int rc = batch.failed ? 3 : 0;
    if (rank == 0 && batch.failed)
        fg_warn("%d of %d requests failed: their error lines are in %s (exit status 3)", batch.failed,
                (int)io.text.n, a.out);
    fg_run_batch_free(&batch);
    free(fs.rank);
    fg_expert_stats_free(&fs.xs);
    for (int i = 0; i < n; i++) free(out[i].ids);
    fg_prompt_ids_free(in, (size_t)n);
    free(out);
    json_decref(jobrec);
    fg_prompts_free(&io.text);
    fg_tok_destroy(&io.tok);
    fg_wsrc_destroy(&ws);
    return rank == 0 ? rc : 0;
}

/* cmd_run_batch.c - an OpenAI Batch API file through `flexgen run`: the
 * requests that run, grouped so that a block holds requests of like
 * max_tokens and prompt length (a block then ends with its longest request
 * and pads little), each with its own settings (fg_seq_opts); their output
 * lines, in the Batch API's shape; and --out made from the journal with
 * every request back at its line, failed ones as error lines. Ids and
 * "created" derive from the job (the prompt file's XXH3 and time, the
 * model's identity), never from the clock, so a resumed job writes the
 * bytes an uninterrupted one does. Requests are read by fg_batch.c. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "cmd_run.h"

typedef struct {
    int max_new, len, i;
} req_key;

/* Like max_tokens together, then like prompt lengths, then file order (a
 * total order: the grouping is the same on every rank and every resume). */
static int by_work(const void *x, const void *y) {
    const req_key *a = x, *b = y;
    if (a->max_new != b->max_new) return a->max_new - b->max_new;
    if (a->len != b->len) return a->len - b->len;
    return a->i - b->i;
}

/* The engine left-pads a batch's prompts to its longest and runs a block
 * for its longest request, and each step's positions must fit the model's
 * (EMBED checks past + S): so every prompt must fit beside the file's
 * longest max_tokens, as a prompt file's must beside --gen-len. A request
 * that fits with its own max_tokens but not with that one fails, named. */
static void fail_past_context(const run_args *a, fg_prompt_list *text, const fg_seq_in *in, int max_pos) {
    int m = (int)text->n, g = 1, gi = -1;
    for (int i = 0; i < m; i++) {
        const fg_batch_req *r = &text->req[i];
        int want = r->max_tokens ? r->max_tokens : a->gen_len;
        if (!r->err_code && want > g) g = want, gi = i;
    }
    for (int i = 0; i < m; i++)
        if (!text->req[i].err_code && in[i].len + g > max_pos)
            fg_batch_fail(&text->req[i], "context_length_exceeded", "%s:%d: the prompt is %d tokens; the longest "
                          "max_tokens of the file (%d, line %d) leaves %d of the model's %d positions (a batch's "
                          "prompts are padded together)", a->prompts, text->items[i].line, in[i].len, g,
                          gi >= 0 ? text->items[gi].line : 0, max_pos - g, max_pos);
}

void fg_run_batch_plan(const run_args *a, fg_prompt_list *text, int max_pos, fg_seq_in **in, int *n, run_batch *b) {
    int m = (int)text->n;
    fail_past_context(a, text, *in, max_pos);
    b->text = text;
    b->order = fg_xcalloc((size_t)(m ? m : 1), sizeof *b->order);
    b->seq = fg_xcalloc((size_t)(m ? m : 1), sizeof *b->seq);
    req_key *keys = fg_xcalloc((size_t)(m ? m : 1), sizeof *keys);
    int k = 0;
    for (int i = 0; i < m; i++) {
        const fg_batch_req *r = &text->req[i];
        if (r->err_code) {
            b->failed++;
            if (fg_ring_rank() == 0) fg_warn("request failed: %s", r->err_msg);
            continue;
        }
        if (r->model && strcmp(r->model, b->model) && !b->model_logged && fg_ring_rank() == 0) {
            fg_info("%s:%d: the request names model \"%s\": every request is answered by the loaded model, \"%s\" "
                    "(the field is not checked)", a->prompts, text->items[i].line, r->model, b->model);
            b->model_logged = 1;
        }
        keys[k++] = (req_key){r->max_tokens ? r->max_tokens : a->gen_len, (*in)[i].len, i};
    }
    if (!a->batch_input_order) qsort(keys, (size_t)k, sizeof *keys, by_work);
    fg_seq_in *eng = fg_xcalloc((size_t)(k ? k : 1), sizeof *eng);
    b->gen_len = 1;
    for (int e = 0; e < k; e++) {
        int i = keys[e].i;
        const fg_batch_req *r = &text->req[i];
        b->order[e] = i;
        eng[e] = (*in)[i];
        (*in)[i].ids = NULL;   /* moved */
        /* a seeded request's generator is its seed's alone (the same output in any batch, any file); an
         * unseeded one's is the run's --seed at the request's line */
        b->seq[e] = (fg_seq_opts){keys[e].max_new,
                                  {r->has_temperature ? r->temperature : a->temperature,
                                   r->has_top_p ? r->top_p : a->top_p, r->has_seed ? r->seed : a->seed},
                                  r->has_seed ? 0 : (uint64_t)i};
        if (keys[e].max_new > b->gen_len) b->gen_len = keys[e].max_new;
    }
    free(keys);
    fg_prompt_ids_free(*in, (size_t)m);
    *in = eng;
    *n = b->n = k;
}

int fg_run_batch_stops(const run_batch *b, const run_args *a, int e, const char *const **stops) {
    const fg_batch_req *r = &b->text->req[b->order[e]];
    if (!r->has_stop) {
        *stops = a->stop;
        return a->n_stop;
    }
    *stops = (const char *const *)r->stop;
    return r->n_stop;
}

fg_status fg_run_batch_ids(const run_args *a, uint64_t model_id, uint64_t prompts_sum, run_batch *b) {
    struct stat sb;
    if (stat(a->prompts, &sb) != 0) return fg_err_set(FG_EINPUT, "%s: cannot stat the prompt file", a->prompts);
    uint64_t k[2] = {model_id, prompts_sum};
    b->job_key = XXH3_64bits(k, sizeof k);
    b->created = (long long)sb.st_mtime;
    return FG_OK;
}

/* "PREFIX" + 16 hex digits of the request's hash under the job's key. */
static json_t *derived_id(const run_batch *b, int i, const char *prefix) {
    char key[32], s[64];
    const char *k = b->text->req[i].custom_id;
    if (!k) snprintf(key, sizeof key, "#%d", i), k = key;   /* no custom_id: its place in the file */
    uint64_t h = XXH3_64bits_withSeed(k, strlen(k), b->job_key ^ XXH3_64bits(prefix, strlen(prefix)));
    snprintf(s, sizeof s, "%s%016llx", prefix, (unsigned long long)h);
    return json_string(s);
}

static char *dump_line(json_t *o) {
    char *line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
    json_decref(o);
    if (!line) fg_exit_on(fg_err_set(FG_ERUNTIME, "out of memory writing an output line"));
    size_t len = strlen(line);
    line = realloc(line, len + 2);
    line[len] = '\n', line[len + 1] = 0;
    return line;
}

char *fg_run_batch_line(const run_batch *b, int e, const char *content, fg_finish f, int prompt_tokens,
                        int completion_tokens) {
    int i = b->order[e], chat = b->text->req[i].kind == FG_BATCH_CHAT;
    json_t *text = content ? json_string(content) : json_null();
    const char *finish = fg_finish_name(f);
    /* "refusal": null as OpenAI writes it (its clients' ChatCompletionMessage requires the key) */
    json_t *choice = chat ? json_pack("{s:i, s:{s:s, s:o, s:n}, s:n, s:s}", "index", 0, "message", "role", "assistant",
                                      "content", text, "refusal", "logprobs", "finish_reason", finish)
                          : json_pack("{s:i, s:o, s:n, s:s}", "index", 0, "text", text, "logprobs", "finish_reason",
                                      finish);
    json_t *body = json_pack("{s:o, s:s, s:I, s:s, s:[o], s:{s:i, s:i, s:i}}", "id",
                             derived_id(b, i, chat ? "chatcmpl-" : "cmpl-"), "object",
                             chat ? "chat.completion" : "text_completion", "created", (json_int_t)b->created, "model",
                             b->model, "choices", choice, "usage", "prompt_tokens", prompt_tokens, "completion_tokens",
                             completion_tokens, "total_tokens", prompt_tokens + completion_tokens);
    return dump_line(json_pack("{s:o, s:s, s:{s:i, s:o, s:o}, s:n}", "id", derived_id(b, i, "batch_req_"),
                               "custom_id", b->text->req[i].custom_id, "response", "status_code", 200, "request_id",
                               derived_id(b, i, "req_"), "body", body, "error"));
}

/* The output line of failed request i. */
static char *error_line(const run_batch *b, int i) {
    const fg_batch_req *r = &b->text->req[i];
    return dump_line(json_pack("{s:o, s:o, s:n, s:{s:s, s:s}}", "id", derived_id(b, i, "batch_req_"), "custom_id",
                               r->custom_id ? json_string(r->custom_id) : json_null(), "response", "error", "code",
                               r->err_code, "message", r->err_msg));
}

fg_status fg_run_batch_output(void *ctx, const char *journal, size_t len, char **out, size_t *out_len) {
    const run_batch *b = ctx;
    int m = (int)b->text->n;
    const char **at = fg_xcalloc((size_t)(m ? m : 1), sizeof *at);   /* request i's journal line, or NULL */
    size_t *n_at = fg_xcalloc((size_t)(m ? m : 1), sizeof *n_at), pos = 0;
    int e = 0;
    for (; pos < len && e < b->n; e++) {
        const char *nl = memchr(journal + pos, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - journal - pos) + 1 : len - pos;
        at[b->order[e]] = journal + pos, n_at[b->order[e]] = n;
        pos += n;
    }
    fg_status st = FG_OK;
    if (e != b->n || pos != len)
        st = fg_err_set(FG_ERUNTIME, "the journal holds %d lines for %d requests that ran", e, b->n);
    size_t cap = len + 4096, used = 0;
    char *buf = fg_xmalloc(cap);
    for (int i = 0; i < m && !st; i++) {
        char *err = at[i] ? NULL : error_line(b, i);
        const char *s = err ? err : at[i];
        size_t n = err ? strlen(err) : n_at[i];
        if (used + n > cap) buf = realloc(buf, cap = 2 * (used + n));
        memcpy(buf + used, s, n), used += n;
        free(err);
    }
    free(at), free(n_at);
    if (st) {
        free(buf);
        return st;
    }
    *out = buf, *out_len = used;
    return FG_OK;
}

void fg_run_batch_free(run_batch *b) {
    free(b->order);
    free(b->seq);
    memset(b, 0, sizeof *b);
}

/* fg_batch.c - Batch API request lines in, response lines out (see
 * fg_batch.h): each field of a request checked and taken, or the request
 * failed naming the file, line and field. The output lines are
 * cmd_run_batch.c's. */
#include "fg_batch.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fg_config.h"

int fg_batch_line_is_request(const char *s, size_t n) {
    json_t *o = json_loadb(s, n, 0, NULL);
    int yes = json_is_object(o) && json_object_get(o, "custom_id");
    json_decref(o);
    return yes;
}

void fg_batch_fail(fg_batch_req *r, const char *code, const char *fmt, ...) {
    if (r->err_code) return;   /* the first reason found is the one reported */
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    r->err_code = strdup(code);
    r->err_msg = strdup(buf);
}

/* A message's content: a string, or a list of {"type": "text", "text"}
 * parts joined with "\n" (vLLM's rule for text-only content). NULL with
 * r failed otherwise. */
static char *message_text(const char *path, int line, size_t i, const json_t *c, fg_batch_req *r) {
    if (json_is_string(c)) return strdup(json_string_value(c));
    if (!json_is_array(c)) {
        fg_batch_fail(r, "invalid_request", "%s:%d: body.messages[%zu].content must be a string or a list of text "
                      "parts, got %s", path, line, i, c ? fg_json_kind(c) : "nothing");
        return NULL;
    }
    size_t len = 0, k;
    json_t *part;
    json_array_foreach(c, k, part) {
        json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
        if (!json_is_string(type) || strcmp(json_string_value(type), "text") || !json_is_string(text)) {
            fg_batch_fail(r, "unsupported_parameter", "%s:%d: body.messages[%zu].content[%zu]: only {\"type\": "
                          "\"text\", \"text\": ...} parts are supported", path, line, i, k);
            return NULL;
        }
        len += json_string_length(text) + 1;
    }
    char *s = fg_xmalloc(len + 1);
    size_t at = 0;
    json_array_foreach(c, k, part) {
        json_t *text = json_object_get(part, "text");
        if (k) s[at++] = '\n';
        memcpy(s + at, json_string_value(text), json_string_length(text));
        at += json_string_length(text);
    }
    s[at] = 0;
    return s;
}

/* body.messages: a non-empty list of {"role": string, "content"}; the
 * contents made strings for the chat template. */
static void take_messages(const char *path, int line, const json_t *m, fg_batch_req *r, char **messages) {
    if (!json_is_array(m) || !json_array_size(m)) {
        fg_batch_fail(r, "invalid_request", "%s:%d: body.messages must be a non-empty list of messages, got %s", path,
                      line, m ? (json_is_array(m) ? "an empty list" : fg_json_kind(m)) : "nothing");
        return;
    }
    json_t *out = json_array();
    size_t i;
    json_t *x;
    json_array_foreach(m, i, x) {
        if (!json_is_object(x) || !json_is_string(json_object_get(x, "role"))) {
            fg_batch_fail(r, "invalid_request", "%s:%d: body.messages[%zu] must be an object with a string \"role\"",
                          path, line, i);
            break;
        }
        char *text = message_text(path, line, i, json_object_get(x, "content"), r);
        if (!text) break;
        json_t *copy = json_deep_copy(x);
        json_object_set_new(copy, "content", json_string(text));
        free(text);
        json_array_append_new(out, copy);
    }
    if (!r->err_code) *messages = json_dumps(out, JSON_COMPACT);
    json_decref(out);
}

/* body.prompt: a string, a list of one string, or a list of token ids. */
static void take_prompt(const char *path, int line, const json_t *p, fg_batch_req *r, char **text) {
    if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0))) p = json_array_get(p, 0);
    if (json_is_string(p)) {
        *text = strdup(json_string_value(p));
        return;
    }
    size_t n = json_is_array(p) ? json_array_size(p) : 0;
    if (!n) {
        fg_batch_fail(r, "invalid_request", "%s:%d: body.prompt must be a string or a non-empty list of token ids, "
                      "got %s", path, line, p ? (json_is_array(p) ? "an empty list" : fg_json_kind(p)) : "nothing");
        return;
    }
    r->ids = fg_xcalloc(n, sizeof *r->ids);
    r->n_ids = (int)n;
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(p, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > INT32_MAX) {
            fg_batch_fail(r, json_is_string(x) ? "unsupported_parameter" : "invalid_request",
                          "%s:%d: body.prompt[%zu]: %s", path, line, i,
                          json_is_string(x) ? "a list of several prompts is n > 1 requests; give one prompt a line"
                                            : "not a token id");
            return;
        }
        r->ids[i] = (int32_t)json_integer_value(x);
    }
    *text = strdup("");
}

/* A field whose value is its neutral default asks nothing of the engine. */
static int neutral(const char *key, const json_t *v) {
    if (json_is_null(v)) return 1;
    static const char *const falsy[] = {"stream", "logprobs", "echo", "parallel_tool_calls", NULL};
    for (int i = 0; falsy[i]; i++)
        if (!strcmp(key, falsy[i])) return json_is_false(v) || (json_is_integer(v) && !json_integer_value(v));
    static const char *const zero[] = {"presence_penalty", "frequency_penalty", "top_logprobs", NULL};
    for (int i = 0; zero[i]; i++)
        if (!strcmp(key, zero[i])) return json_is_number(v) && json_number_value(v) == 0;
    if (!strcmp(key, "n") || !strcmp(key, "best_of")) return json_is_integer(v) && json_integer_value(v) == 1;
    if (!strcmp(key, "user") || !strcmp(key, "metadata") || !strcmp(key, "store")) return 1;   /* no effect on output */
    return 0;
}

/* Fail r and return: the first reason is the one reported. */
#define FAIL(...)                          \
    do {                                   \
        fg_batch_fail(r, __VA_ARGS__);     \
        return;                            \
    } while (0)

/* body's sampling and length fields; anything else not neutral fails r. */
static void take_settings(const char *path, int line, json_t *body, fg_batch_req *r) {
    const char *key;
    json_t *v;
    json_object_foreach(body, key, v) {
        if (!strcmp(key, "messages") || !strcmp(key, "prompt")) continue;
        if (!strcmp(key, "model")) {
            if (json_is_string(v)) r->model = strdup(json_string_value(v));
        } else if (!strcmp(key, "max_tokens") || !strcmp(key, "max_completion_tokens")) {
            if (json_is_null(v)) continue;
            if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 1 << 20)
                FAIL("invalid_request", "%s:%d: body.%s must be a positive integer, got %s", path,
                                     line, key, json_is_integer(v) ? "a smaller one" : fg_json_kind(v));
            /* max_completion_tokens is the newer name; given both, it rules */
            if (!r->max_tokens || !strcmp(key, "max_completion_tokens")) r->max_tokens = (int)json_integer_value(v);
        } else if (!strcmp(key, "temperature")) {
            if (json_is_null(v)) continue;
            if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > 2)
                FAIL("invalid_request", "%s:%d: body.temperature must be a number in [0, 2]", path,
                                     line);
            r->temperature = (float)json_number_value(v), r->has_temperature = 1;
        } else if (!strcmp(key, "top_p")) {
            if (json_is_null(v)) continue;
            if (!json_is_number(v) || !(json_number_value(v) > 0) || json_number_value(v) > 1)
                FAIL("invalid_request", "%s:%d: body.top_p must be a number in (0, 1]", path, line);
            r->top_p = (float)json_number_value(v), r->has_top_p = 1;
        } else if (!strcmp(key, "seed")) {
            if (json_is_null(v)) continue;
            if (!json_is_integer(v))
                FAIL("invalid_request", "%s:%d: body.seed must be an integer, got %s", path, line,
                                     fg_json_kind(v));
            r->seed = (uint64_t)json_integer_value(v), r->has_seed = 1;
        } else if (!strcmp(key, "stop")) {
            if (json_is_null(v)) continue;
            json_t *one = json_is_string(v) ? json_pack("[O]", v) : json_incref(v);
            size_t i;
            json_t *s;
            if (!json_is_array(one) || json_array_size(one) > FG_BATCH_MAX_STOPS) {
                json_decref(one);
                FAIL("invalid_request", "%s:%d: body.stop must be a string or a list of at most %d "
                                     "strings", path, line, FG_BATCH_MAX_STOPS);
            }
            r->has_stop = 1;
            json_array_foreach(one, i, s) {
                if (!json_is_string(s) || !json_string_length(s)) {
                    json_decref(one);
                    FAIL("invalid_request", "%s:%d: body.stop[%zu] must be a non-empty string", path,
                                         line, i);
                }
                r->stop[r->n_stop++] = strdup(json_string_value(s));
            }
            json_decref(one);
        } else if (!neutral(key, v)) {
            FAIL("unsupported_parameter", "%s:%d: body.%s: not supported by this engine (it would "
                                 "be ignored; remove it or give its default)", path, line, key);
        }
    }
}

void fg_batch_parse_line(const char *path, int lineno, const char *s, size_t n, fg_batch_req *r, char **text,
                         char **messages) {
    memset(r, 0, sizeof *r);
    *text = NULL, *messages = NULL;
    json_error_t jerr;
    json_t *o = json_loadb(s, n, JSON_REJECT_DUPLICATES, &jerr);
    json_t *id = json_object_get(o, "custom_id"), *method = json_object_get(o, "method");
    json_t *url = json_object_get(o, "url"), *body = json_object_get(o, "body");
    if (json_is_string(id)) r->custom_id = strdup(json_string_value(id));
    const char *u = json_is_string(url) ? json_string_value(url) : "";
    if (!o) {
        fg_batch_fail(r, "invalid_json", "%s:%d: not JSON (column %d: %s)", path, lineno, jerr.column, jerr.text);
    } else if (!json_is_object(o)) {
        fg_batch_fail(r, "invalid_request", "%s:%d: expected a request object {\"custom_id\", \"method\", \"url\", "
                      "\"body\"}, got %s", path, lineno, fg_json_kind(o));
    } else if (!json_is_string(id)) {
        fg_batch_fail(r, "invalid_request", "%s:%d: custom_id must be a string, got %s", path, lineno,
                      id ? fg_json_kind(id) : "nothing");
    } else if (method && (!json_is_string(method) || strcmp(json_string_value(method), "POST"))) {
        fg_batch_fail(r, "invalid_request", "%s:%d: method must be \"POST\"", path, lineno);
    } else if (strcmp(u, "/v1/chat/completions") && strcmp(u, "/v1/completions")) {
        fg_batch_fail(r, "invalid_url", "%s:%d: url %s: only /v1/chat/completions and /v1/completions are served",
                      path, lineno, json_is_string(url) ? u : "missing");
    } else if (!json_is_object(body)) {
        fg_batch_fail(r, "invalid_request", "%s:%d: body must be an object, got %s", path, lineno,
                      body ? fg_json_kind(body) : "nothing");
    } else {
        r->kind = strcmp(u, "/v1/chat/completions") ? FG_BATCH_COMPLETION : FG_BATCH_CHAT;
        json_t *m = json_object_get(body, "messages"), *p = json_object_get(body, "prompt");
        if (r->kind == FG_BATCH_CHAT && p)
            fg_batch_fail(r, "invalid_request", "%s:%d: body.prompt in a chat request: give messages", path, lineno);
        else if (r->kind == FG_BATCH_COMPLETION && m)
            fg_batch_fail(r, "invalid_request", "%s:%d: body.messages in a completions request: give prompt", path,
                          lineno);
        else if (r->kind == FG_BATCH_CHAT)
            take_messages(path, lineno, m, r, messages);
        else
            take_prompt(path, lineno, p, r, text);
        take_settings(path, lineno, body, r);
    }
    json_decref(o);
    if (r->err_code) {   /* a failed request runs nothing */
        free(*text), free(*messages);
        *messages = NULL;
    }
    if (r->err_code || !*text) *text = strdup("");
}

fg_status fg_batch_check_unique(const char *path, const fg_batch_req *r, const int *lines, size_t n) {
    /* sorted indices by custom_id: a duplicate sits next to its twin */
    size_t *ix = fg_xcalloc(n ? n : 1, sizeof *ix), m = 0;
    for (size_t i = 0; i < n; i++)
        if (r[i].custom_id) ix[m++] = i;
    for (size_t i = 1; i < m; i++)   /* insertion sort by id, then line: files are thousands of lines, not millions */
        for (size_t j = i; j > 0 && strcmp(r[ix[j - 1]].custom_id, r[ix[j]].custom_id) > 0; j--) {
            size_t t = ix[j];
            ix[j] = ix[j - 1], ix[j - 1] = t;
        }
    fg_status st = FG_OK;
    for (size_t i = 1; i < m && !st; i++)
        if (!strcmp(r[ix[i - 1]].custom_id, r[ix[i]].custom_id)) {
            int a = lines[ix[i - 1]], b = lines[ix[i]];
            st = fg_err_set(FG_EINPUT, "%s:%d: custom_id \"%s\" is also line %d's: each request needs its own, so "
                            "that its output can be told apart (nothing was run)", path, a > b ? a : b,
                            r[ix[i]].custom_id, a > b ? b : a);
        }
    free(ix);
    return st;
}

void fg_batch_req_free(fg_batch_req *r) {
    free(r->custom_id);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->ids);
    free(r->model);
    free(r->err_code);
    free(r->err_msg);
    memset(r, 0, sizeof *r);
}

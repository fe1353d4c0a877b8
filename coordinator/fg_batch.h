/* fg_batch.h - OpenAI Batch API files through `flexgen run --prompts`: the
 * requests of an input file, one a line, {"custom_id", "method": "POST",
 * "url", "body"}, read as vLLM's run_batch reads them.
 *
 * A request is /v1/chat/completions (body.messages; a message's content a
 * string or a list of text parts, joined with "\n" as vLLM joins them) or
 * /v1/completions (body.prompt: a string, or a list of token ids). Its own
 * settings: max_tokens (or max_completion_tokens), temperature, top_p, seed,
 * stop (a string or a list of at most FG_BATCH_MAX_STOPS); where absent the
 * run's flags hold (--gen-len, --temperature, --top-p, --stop; the run's
 * --seed with the request's line as its generator's key). body.model is
 * not checked: the loaded model answers every request, its name is the
 * output's "model", and a request naming another is logged once.
 *
 * What a request asks that the engine cannot honour (n other than 1, tools,
 * logprobs, response_format, stream, penalties, ...) makes it fail, as a line
 * that is not JSON, lacks custom_id or body, or names another url or method:
 * the request keeps its place with an error line and the others run. Only a
 * custom_id given twice refuses the whole file (FG_EINPUT naming both lines),
 * since the outputs could not be told apart.
 *
 * Not here: tokenizing and the context rule (fg_prompt_enc.c, which fail a
 * request with fg_batch_fail), grouping, the run and the output lines
 * (cmd_run_batch.c). */
#ifndef FG_BATCH_H
#define FG_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "fg_common.h"

#define FG_BATCH_MAX_STOPS 4   /* OpenAI's limit on "stop" */

typedef enum { FG_BATCH_CHAT, FG_BATCH_COMPLETION } fg_batch_kind;

typedef struct {
    char *custom_id;          /* NULL where the line has none (a failed request) */
    fg_batch_kind kind;
    int max_tokens;           /* 0: the run's --gen-len */
    int has_temperature, has_top_p, has_seed, has_stop;
    float temperature, top_p;
    uint64_t seed;
    char *stop[FG_BATCH_MAX_STOPS];
    int n_stop;
    int32_t *ids;             /* a completion's prompt given as token ids (n_ids), else NULL */
    int n_ids;
    char *model;              /* body.model as given, or NULL */
    char *err_code, *err_msg; /* a failed request: why (the message names file and line); else NULL */
} fg_batch_req;

/* Whether a JSONL line is a Batch API request line: an object with
 * "custom_id" (what tells a batch file from a prompt file). */
int fg_batch_line_is_request(const char *s, size_t n);

/* One line of a batch file into *r and the prompt's text or conversation:
 * *text (heap, "" for a chat request) and *messages (compact JSON with
 * string contents, or NULL). Never fails: a bad line is a failed request. */
void fg_batch_parse_line(const char *path, int lineno, const char *s, size_t n, fg_batch_req *r, char **text,
                         char **messages);

/* Fail request r (when it has not failed yet): code and a message, printf-style. */
void fg_batch_fail(fg_batch_req *r, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* FG_EINPUT naming the file and both lines when a custom_id is given twice. */
fg_status fg_batch_check_unique(const char *path, const fg_batch_req *r, const int *lines, size_t n);

void fg_batch_req_free(fg_batch_req *r);

#endif

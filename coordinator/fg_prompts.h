/* fg_prompts.h - reading the prompts file of `flexgen run --prompts FILE`,
 * and the pre-tokenized prompts of --prompt-ids FILE (at the end).
 *
 * Two formats, told apart by the first non-blank line:
 *  - plain text: one prompt a line ("\r\n" endings accepted); empty lines at
 *    the end of the file are not prompts, empty lines before other prompts
 *    are (empty prompts); the id of a prompt is its 0-based line index;
 *  - JSONL, when that line starts with '{': one object a line,
 *    {"id": <any JSON value>, "prompt": "<string>"}, other keys ignored, blank
 *    lines skipped; "id" defaults to the 0-based line index. Instead of
 *    "prompt" a line may hold a conversation, "messages": [{"role": "...",
 *    "content": "..."}, ...] (a non-empty list of objects with string role
 *    and content; their other keys are kept), to be rendered with the
 *    model's chat template (fg_prompt_enc.h);
 *  - an OpenAI Batch API file, when the first line that is JSON at all is
 *    an object with "custom_id" (fg_batch.h): one request a line, a bad
 *    line a failed request (req[i].err_code) that keeps its place, not an
 *    error of the file; a custom_id given twice is FG_EINPUT;
 * A file with no prompt (empty or only white space), invalid UTF-8, malformed
 * JSON, neither or both of "prompt" and "messages", a non-string "prompt",
 * a malformed "messages" are FG_EINPUT with a message naming the file and the
 * 1-based line number.
 *
 * Not here: tokenizing, the over-long-prompt rule and the output file, which
 * belong to the run command. */
#ifndef FG_PROMPTS_H
#define FG_PROMPTS_H

#include <stddef.h>

#include "fg_batch.h"
#include "fg_common.h"
#include "fg_gen.h"

typedef struct {
    char *id_json; /* the id as compact JSON text: 0, "q-17", {"a":1}, ... */
    char *text;    /* the prompt, UTF-8, NUL-terminated ("" for messages, until rendered) */
    size_t len;    /* bytes in text, without the NUL */
    int line;      /* 1-based line of the file it came from */
    char *messages; /* a "messages" line's list as compact JSON, else NULL */
} fg_prompt;

typedef struct {
    fg_prompt *items; /* (n) in file order */
    size_t n;
    int jsonl;        /* 1 when the file was read as JSONL */
    fg_batch_req *req; /* (n) a Batch API file's requests, else NULL; id_json is the custom_id */
} fg_prompt_list;

fg_status fg_prompts_read(const char *path, fg_prompt_list *out);
void fg_prompts_free(fg_prompt_list *l);

/* --prompt-ids FILE: a JSON list of non-empty lists of token ids, each in
 * [0, vocab_size). *out (n_out entries) is freed with fg_prompt_ids_free.
 * FG_EINPUT naming the file, the prompt and the token. */
fg_status fg_prompt_ids_read(const char *path, int vocab_size, fg_seq_in **out, int *n_out);
void fg_prompt_ids_free(fg_seq_in *in, size_t n);

#endif

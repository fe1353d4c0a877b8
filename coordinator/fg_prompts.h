/* fg_prompts.h - reading the prompts file of `flexgen run --prompts FILE`.
 *
 * Two formats, told apart by the first non-blank line:
 *  - plain text: one prompt a line ("\r\n" endings accepted); empty lines at
 *    the end of the file are not prompts, empty lines before other prompts
 *    are (empty prompts); the id of a prompt is its 0-based line index;
 *  - JSONL, when that line starts with '{': one object a line,
 *    {"id": <any JSON value>, "prompt": "<string>"}, other keys ignored, blank
 *    lines skipped; "id" defaults to the 0-based line index.
 * A file with no prompt (empty or only white space), invalid UTF-8, malformed
 * JSON, a missing or non-string "prompt" are FG_EINPUT with a message naming
 * the file and the 1-based line number.
 *
 * Not here: tokenizing, the over-long-prompt rule and the output file, which
 * belong to the run command. */
#ifndef FG_PROMPTS_H
#define FG_PROMPTS_H

#include <stddef.h>

#include "fg_common.h"

typedef struct {
    char *id_json; /* the id as compact JSON text: 0, "q-17", {"a":1}, ... */
    char *text;    /* the prompt, UTF-8, NUL-terminated */
    size_t len;    /* bytes in text, without the NUL */
    int line;      /* 1-based line of the file it came from */
} fg_prompt;

typedef struct {
    fg_prompt *items; /* (n) in file order */
    size_t n;
    int jsonl;        /* 1 when the file was read as JSONL */
} fg_prompt_list;

fg_status fg_prompts_read(const char *path, fg_prompt_list *out);
void fg_prompts_free(fg_prompt_list *l);

#endif

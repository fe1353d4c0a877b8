/* fuzz_prompts.c - libFuzzer target for the prompts file of `flexgen run
 * --prompts` (coordinator/fg_prompts.c, fg_prompts_read), plain text and
 * JSONL. Properties: no crash or leak (ASan); every prompt read is UTF-8 of
 * its stated length, its id is JSON, a conversation ("messages") a JSON list
 * with an empty text, and lines ascend. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "fg_prompts.h"
#include "fg_tokenizer.h"
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)fz_dir();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fz_write(0, "prompts.txt", data, size);
    fg_prompt_list l;
    if (fg_prompts_read(path, &l) != FG_OK) return 0;
    if (l.n == 0) abort();
    for (size_t i = 0; i < l.n; i++) {
        const fg_prompt *p = &l.items[i];
        size_t bad;
        if (p->text[p->len] != 0 || !fg_tok_utf8_valid(p->text, p->len, &bad)) abort();
        if (i && p->line <= l.items[i - 1].line) abort();
        json_t *id = json_loads(p->id_json, JSON_DECODE_ANY, NULL);   /* cmd_run parses it back */
        if (!id) abort();
        json_decref(id);
        json_t *m = p->messages ? json_loads(p->messages, 0, NULL) : NULL;   /* fg_prompt_chat renders it */
        if (p->messages && (!json_is_array(m) || p->len)) abort();
        json_decref(m);
    }
    fg_prompts_free(&l);
    return 0;
}

/* test_prompts.c - prints what fg_prompts_read makes of a prompts file, one
 * JSON object a line ({"id": ..., "line": N, "prompt": "..."}, and
 * "messages": [...] for a conversation), or its error
 * with the exit status `flexgen run` gives it (2 for bad input). run_cli.sh
 * holds the output against what each format's rules say. */
#include <jansson.h>
#include <stdio.h>

#include "fg_prompts.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_prompts FILE\n");
        return 2;
    }
    fg_prompt_list l;
    fg_exit_on(fg_prompts_read(argv[1], &l));
    for (size_t i = 0; i < l.n; i++) {
        json_t *s = json_stringn(l.items[i].text, l.items[i].len);
        char *p = json_dumps(s, JSON_ENCODE_ANY | JSON_ENSURE_ASCII);
        printf("{\"id\": %s, \"line\": %d, \"prompt\": %s%s%s}\n", l.items[i].id_json, l.items[i].line, p,
               l.items[i].messages ? ", \"messages\": " : "", l.items[i].messages ? l.items[i].messages : "");
        free(p);
        json_decref(s);
    }
    printf("# %s, %zu prompts\n", l.jsonl ? "jsonl" : "text", l.n);
    fg_prompts_free(&l);
    return 0;
}

/* fuzz_chat_template.c - libFuzzer target for chat templates
 * (tokenizer/fg_chat.h): fg_tmpl_parse, then fg_tmpl_render. The input is a
 * template, optionally followed by a NUL byte and the render's variables as
 * JSON (else a small conversation). Properties: no crash, leak or hang
 * (ASan, the renderer's own bounds, kept small here so runs stay fast); a
 * failure is FG_EINPUT with a message naming the template; an output is
 * NUL-terminated UTF-8 of its stated length. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "fg_chat.h"
#include "fg_tokenizer.h"
#include "fuzz_util.h"

static json_t *default_vars;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)fz_dir();
    default_vars = json_loads("{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", "
                              "\"content\": \" Hi {{ there }} \\u00e9\\n\"}, {\"role\": \"assistant\", \"content\": "
                              "\"<think>\\nhm\\n</think>\\n\\nHello\"}], \"add_generation_prompt\": true, \"bos_token\": "
                              "\"<s>\", \"eos_token\": \"</s>\", \"tools\": [{\"name\": \"f\", \"n\": 1.5}]}",
                              0, NULL);
    if (!default_vars) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *src = (const char *)data;
    const char *nul = memchr(src, 0, size);
    size_t tlen = nul ? (size_t)(nul - src) : size;
    json_t *vars = nul ? json_loadb(nul + 1, size - tlen - 1, 0, NULL) : NULL;
    if (!json_is_object(vars)) {
        json_decref(vars);
        vars = json_incref(default_vars);
    }
    fg_tmpl *t;
    fg_status st = fg_tmpl_parse(src, tlen, "fuzz", &t);
    if (st) {
        if (st != FG_EINPUT || strncmp(fg_err_msg(), "fuzz", 4) || t) abort();
    } else {
        fg_tmpl_set_limits(t, 200000, (size_t)32 << 20, (size_t)1 << 20);
        char *out = NULL;
        size_t len = 0, bad;
        st = fg_tmpl_render(t, vars, &out, &len);
        if (st && (st != FG_EINPUT || out || strncmp(fg_err_msg(), "fuzz:", 5))) abort();
        if (!st && (out[len] != 0 || !fg_tok_utf8_valid(out, len, &bad))) abort();
        free(out);
        fg_tmpl_destroy(&t);
    }
    json_decref(vars);
    return 0;
}

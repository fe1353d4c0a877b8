/* cmd_tokenize.c - `flexgen tokenize`: all of stdin as one text -> one JSON
 * array of token ids on stdout, or with --decode a JSON array of ids -> the
 * text. BOS is prepended as the model's tokenizer does it (Hugging Face's OPT
 * tokenizer puts </s> first; the GPT-2 vocabulary of the dummy models uses
 * <|endoftext|>), unless --no-bos. The tokenizer itself is tokenizer/. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "fg_cmds.h"
#include "fg_common.h"
#include "fg_tokenizer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: flexgen tokenize (--model DIR | --gpt2) [--decode] [--no-bos] [--keep-special]\n"
            "\n"
            "Reads all of stdin as one UTF-8 text and prints its token ids as one JSON array.\n"
            "\n"
            "  --model DIR     the tokenizer of a Hugging Face model directory (vocab.json,\n"
            "                  merges.txt); with an OPT vocabulary, </s> is prepended as BOS\n"
            "  --gpt2          GPT-2's vocabulary (the dummy models'), from the FlexGen cache\n"
            "                  (scripts/fetch-gpt2-vocab.sh); BOS is <|endoftext|>\n"
            "  --decode        read a JSON array of ids instead and print the text\n"
            "  --no-bos        do not prepend BOS\n"
            "  --keep-special  with --decode, print special tokens (</s>, <pad>, ...) too;\n"
            "                  by default they are skipped\n");
}

/* All of stdin, NUL-terminated. */
static fg_status read_stdin(char **data, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = fg_xmalloc(cap);
    for (;;) {
        if (n + 1 >= cap) {
            char *b = fg_xmalloc(cap * 2);
            memcpy(b, buf, n);
            free(buf);
            buf = b;
            cap *= 2;
        }
        size_t k = fread(buf + n, 1, cap - n - 1, stdin);
        n += k;
        if (k == 0) break;
    }
    if (ferror(stdin)) {
        free(buf);
        return fg_err_set(FG_ERUNTIME, "stdin: read failed");
    }
    buf[n] = 0;
    *data = buf;
    *len = n;
    return FG_OK;
}

static fg_status encode(fg_tok *t, const char *text, size_t len, int32_t bos) {
    size_t bad;
    if (!fg_tok_utf8_valid(text, len, &bad)) {
        int line = 1;
        size_t start = 0;
        for (size_t i = 0; i < bad; i++)
            if (text[i] == '\n') line++, start = i + 1;
        return fg_err_set(FG_EINPUT, "stdin:%d: invalid UTF-8 at byte %zu of the line (byte "
                          "offset %zu)", line, bad - start + 1, bad);
    }
    int32_t *ids;
    size_t n;
    fg_status st = fg_tok_encode(t, text, len, &ids, &n);
    if (st) return st;
    putchar('[');
    if (bos >= 0) printf("%d%s", bos, n ? "," : "");
    for (size_t i = 0; i < n; i++) printf(i ? ",%d" : "%d", ids[i]);
    puts("]");
    free(ids);
    return FG_OK;
}

static fg_status decode(fg_tok *t, const char *json, size_t len, int skip_special) {
    json_error_t jerr;
    json_t *a = json_loadb(json, len, 0, &jerr);
    if (!a)
        return fg_err_set(FG_EINPUT, "stdin:%d:%d: malformed JSON: %s (expected an array of "
                          "token ids)", jerr.line, jerr.column, jerr.text);
    fg_status st = FG_OK;
    int32_t *ids = NULL;
    if (!json_is_array(a)) {
        st = fg_err_set(FG_EINPUT, "stdin: expected a JSON array of token ids");
        goto out;
    }
    size_t n = json_array_size(a);
    ids = fg_xmalloc((n ? n : 1) * sizeof *ids);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
            st = fg_err_set(FG_EINPUT, "stdin: element %zu: expected a token id (an integer >= 0)", i);
            goto out;
        }
        ids[i] = (int32_t)json_integer_value(v);
    }
    char *text;
    size_t tlen;
    st = fg_tok_decode(t, ids, n, skip_special, &text, &tlen);
    if (st) {
        char msg[512]; /* the slot cannot be both source and target */
        snprintf(msg, sizeof msg, "%s", fg_err_msg());
        st = fg_err_set(st, "stdin: %s", msg);
        goto out;
    }
    fwrite(text, 1, tlen, stdout);
    free(text);
out:
    free(ids);
    json_decref(a);
    return st;
}

int fg_cmd_tokenize(int argc, char **argv) {
    const char *model = NULL;
    int gpt2 = 0, do_decode = 0, no_bos = 0, keep_special = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--model") && i + 1 < argc) {
            model = argv[++i];
        } else if (!strncmp(a, "--model=", 8)) {
            model = a + 8;
        } else if (!strcmp(a, "--gpt2")) {
            gpt2 = 1;
        } else if (!strcmp(a, "--decode")) {
            do_decode = 1;
        } else if (!strcmp(a, "--no-bos")) {
            no_bos = 1;
        } else if (!strcmp(a, "--keep-special")) {
            keep_special = 1;
        } else {
            fprintf(stderr, "flexgen: error: tokenize: %s '%s'\n",
                    !strcmp(a, "--model") ? "missing DIR after" : "unknown option", a);
            usage(stderr);
            return 2;
        }
    }
    if (!model == !gpt2) {
        fprintf(stderr, "flexgen: error: tokenize: give exactly one of --model DIR and --gpt2\n");
        usage(stderr);
        return 2;
    }
    fg_tok *t = NULL;
    fg_exit_on(gpt2 ? fg_tok_open_gpt2_cache(&t) : fg_tok_open_model_dir(model, &t));
    char *in = NULL;
    size_t len = 0;
    fg_exit_on(read_stdin(&in, &len));
    /* A model directory gets BOS only when its tokenizer adds one: OPT's does
     * (</s>); a GPT-2 directory's does not. */
    int32_t bos = -1;
    if (!no_bos) bos = gpt2 ? fg_tok_bos_id(t) : fg_tok_id(t, "</s>");
    fg_status st = do_decode ? decode(t, in, len, !keep_special) : encode(t, in, len, bos);
    free(in);
    fg_tok_destroy(&t);
    fg_exit_on(st);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "flexgen: error: tokenize: writing stdout failed\n");
        return 1;
    }
    return 0;
}

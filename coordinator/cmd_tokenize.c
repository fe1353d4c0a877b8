/* cmd_tokenize.c - `flexgen tokenize`: all of stdin as one text -> one JSON
 * array of token ids on stdout, or with --decode a JSON array of ids -> the
 * text, or with --prompts FILE each prompt of a prompts file -> its ids as
 * `flexgen run` feeds them (fg_prompt_encode, the run's own code). BOS is
 * prepended as the model's tokenizer does it (Hugging Face's OPT tokenizer
 * puts </s> first; the GPT-2 vocabulary of the dummy models uses
 * <|endoftext|>; a tokenizer.json's post-processor or add_bos_token decides
 * for it), unless --no-bos. The tokenizer itself is tokenizer/. */
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fg_cmds.h"
#include "fg_common.h"
#include "fg_config.h"
#include "fg_prompt_enc.h"
#include "fg_tokenizer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: flexgen tokenize (--model DIR | --tokenizer FILE | --gpt2) [--decode] [--no-bos] [--keep-special]\n"
            "                        [--split-special] [--prompts FILE [--gen-len N] [--truncate] [--chat-template F]]\n"
            "\n"
            "Reads all of stdin as one UTF-8 text and prints its token ids as one JSON array.\n"
            "\n"
            "  --model DIR      the tokenizer of a Hugging Face model directory: tokenizer.json\n"
            "                   (with tokenizer_config.json) when it has one, else vocab.json +\n"
            "                   merges.txt; BOS as the tokenizer adds it (an OPT vocabulary:\n"
            "                   </s>; tokenizer.json: its post-processor or add_bos_token)\n"
            "  --tokenizer FILE a tokenizer.json, or llama2.c's tokenizer.bin (BOS <s> put\n"
            "                   first, as llama2.c does); with --model, instead of its tokenizer\n"
            "  --gpt2           GPT-2's vocabulary (the dummy models'), from the FlexGen cache\n"
            "                   (scripts/fetch-gpt2-vocab.sh); BOS is <|endoftext|>\n"
            "  --decode         read a JSON array of ids instead and print the text\n"
            "  --no-bos         do not add BOS (nor a tokenizer.json's other special tokens)\n"
            "  --keep-special   with --decode, print special tokens (</s>, <pad>, ...) too;\n"
            "                   by default they are skipped\n"
            "  --split-special  a tokenizer.json's special tokens written in the text\n"
            "                   (<|im_start|>, <s>, ...) are encoded as text, not as their ids\n"
            "  --prompts FILE   print, one JSON array per line, the ids each prompt of a\n"
            "                   prompts file (text or JSONL) becomes, exactly as `flexgen run`\n"
            "                   feeds them; prompts longer than the context of DIR's config.json\n"
            "                   (max positions minus --gen-len, default 32) are refused, or cut\n"
            "                   with --truncate; without a config.json there is no limit. A\n"
            "                   \"messages\" line is rendered with the model's chat template first\n"
            "  --chat-template FILE  that template instead of the model's (as flexgen run takes it)\n");
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

static fg_status encode(fg_tok *t, const char *text, size_t len, int32_t bos, unsigned flags) {
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
    fg_status st = fg_tok_encode_ex(t, text, len, flags, &ids, &n);
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

/* --prompts: the run's own encoding of a prompts file, one array a line. The
 * context is DIR's config.json's, as a run of that model would have it. */
static fg_status encode_prompts(fg_tok *t, const char *model, const char *chat_template, const char *path, int gen_len,
                                int truncate) {
    fg_model_config c = {.max_pos = INT_MAX / 2};
    char cfg[PATH_MAX];
    if (model && snprintf(cfg, sizeof cfg, "%s/config.json", model) < (int)sizeof cfg && access(cfg, F_OK) == 0 &&
        fg_config_load_json(cfg, &c) != FG_OK) {
        fg_info("%s; prompts are not checked against a context length", fg_err_msg());
        c.max_pos = INT_MAX / 2;
    }
    fg_prompt_list text = {0};
    fg_seq_in *in = NULL;
    int n = 0;
    fg_chat_src chat = {model, chat_template};   /* "messages" prompts: rendered as the run renders them */
    fg_status st = fg_prompt_encode(path, t, &c, &chat, gen_len, truncate, &text, &in, &n);
    for (int i = 0; i < n && !st; i++) {
        putchar('[');
        for (int k = 0; k < in[i].len; k++) printf(k ? ",%d" : "%d", in[i].ids[k]);
        puts("]");
    }
    if (in) fg_prompt_ids_free(in, (size_t)n);
    fg_prompts_free(&text);
    return st;
}

typedef struct {
    const char *model, *tokenizer, *prompts, *chat_template;
    int gpt2, decode, no_bos, keep_special, split_special, truncate, gen_len;
} tok_args;

/* 0: parsed; 1: --help printed; 2: bad usage (printed). */
static int parse(int argc, char **argv, tok_args *a) {
    *a = (tok_args){.gen_len = 32};
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(s, "--help") || !strcmp(s, "-h")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(s, "--model") && more) a->model = argv[++i];
        else if (!strncmp(s, "--model=", 8)) a->model = s + 8;
        else if (!strcmp(s, "--prompts") && more) a->prompts = argv[++i];
        else if (!strcmp(s, "--tokenizer") && more) a->tokenizer = argv[++i];
        else if (!strcmp(s, "--chat-template") && more) a->chat_template = argv[++i];
        else if (!strcmp(s, "--gen-len") && more) {
            if (fg_parse_int("--gen-len", argv[++i], 1, 1 << 20, &a->gen_len)) {
                fprintf(stderr, "flexgen: error: tokenize: %s\n", fg_err_msg());
                return 2;
            }
        } else if (!strcmp(s, "--gpt2")) a->gpt2 = 1;
        else if (!strcmp(s, "--decode")) a->decode = 1;
        else if (!strcmp(s, "--no-bos")) a->no_bos = 1;
        else if (!strcmp(s, "--keep-special")) a->keep_special = 1;
        else if (!strcmp(s, "--split-special")) a->split_special = 1;
        else if (!strcmp(s, "--truncate")) a->truncate = 1;
        else {
            int arg = !strcmp(s, "--model") || !strcmp(s, "--prompts") || !strcmp(s, "--gen-len") ||
                      !strcmp(s, "--chat-template") || !strcmp(s, "--tokenizer");
            fprintf(stderr, "flexgen: error: tokenize: %s '%s'\n", arg ? "missing value after" : "unknown option", s);
            usage(stderr);
            return 2;
        }
    }
    const char *bad = !(a->model || a->tokenizer) == !a->gpt2 ? "give --model DIR or --tokenizer FILE (or both), or --gpt2"
                      : a->prompts && (a->decode || a->no_bos || a->split_special)
                          ? "--prompts prints what `flexgen run` feeds: not with --decode, --no-bos or --split-special"
                          : NULL;
    if (bad) {
        fprintf(stderr, "flexgen: error: tokenize: %s\n", bad);
        usage(stderr);
        return 2;
    }
    return 0;
}

int fg_cmd_tokenize(int argc, char **argv) {
    tok_args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc == 1 ? 0 : 2;
    fg_tok *t = NULL;
    fg_exit_on(a.gpt2 ? fg_tok_open_gpt2_cache(&t)
                      : a.tokenizer ? fg_tok_open_file(a.tokenizer, &t) : fg_tok_open_model_dir(a.model, &t));
    fg_status st;
    if (a.prompts) {
        st = encode_prompts(t, a.model, a.chat_template, a.prompts, a.gen_len, a.truncate);
    } else {
        char *in = NULL;
        size_t len = 0;
        fg_exit_on(read_stdin(&in, &len));
        /* A vocab.json directory gets BOS only when its tokenizer adds one:
         * OPT's does (</s>); a GPT-2 directory's does not. A tokenizer.json
         * says itself (fg_tok_prefix_ids). */
        int32_t bos = -1;
        if (!a.no_bos && !fg_tok_is_hf(t)) bos = a.gpt2 ? fg_tok_bos_id(t) : fg_tok_id(t, "</s>");
        unsigned flags = (a.split_special ? 0 : FG_TOK_PARSE_SPECIAL) |
                         (a.no_bos || !fg_tok_is_hf(t) ? 0 : FG_TOK_ADD_SPECIAL);
        st = a.decode ? decode(t, in, len, !a.keep_special) : encode(t, in, len, bos, flags);
        free(in);
    }
    fg_tok_destroy(&t);
    fg_exit_on(st);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "flexgen: error: tokenize: writing stdout failed\n");
        return 1;
    }
    return 0;
}

/* test_tok_gguf.c - the GGUF tokenizer (tokenizer/fg_tok_gguf.c) against
 * llama.cpp's own test vectors: test_tok_gguf VOCAB.gguf INP OUT encodes
 * each input of INP (separated by "\n__ggml_vocab_test__\n" lines, as
 * llama.cpp's tests/test-tokenizer-0.cpp reads them) without BOS and with
 * special tokens in the text taken as text (llama.cpp's add_special = false,
 * parse_special = false), and compares with the ids of the same line of
 * OUT, written by llama.cpp's tooling from the reference tokenizer. Prints
 * "NAME: K/N identical"; exit 1 on any difference (the first is shown),
 * 2 when the vocabulary is refused (the message names key and value). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fg_tokenizer.h"

static char *slurp(const char *p, size_t *n) {
    char *d = NULL;
    if (fg_read_file(p, &d, n)) {
        fprintf(stderr, "%s\n", fg_err_msg());
        exit(2);
    }
    return d;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: test_tok_gguf VOCAB.gguf INP OUT\n");
        return 2;
    }
    fg_tok *t;
    fg_status st = fg_tok_open_gguf(argv[1], &t);
    if (st) {
        fprintf(stderr, "%s\n", fg_err_msg());
        return 2;
    }
    size_t ni, no;
    char *inp = slurp(argv[2], &ni), *out = slurp(argv[3], &no);
    const char *sep = "\n__ggml_vocab_test__\n";
    size_t seplen = strlen(sep), pos = 0, ok = 0, total = 0;
    char *ol = out;
    int bad = 0;
    while (pos < ni) {
        char *nx = strstr(inp + pos, sep);
        size_t len = nx ? (size_t)(nx - (inp + pos)) : ni - pos;
        char *eol = strchr(ol, '\n');
        if (!eol) eol = ol + strlen(ol);
        int32_t want[4096];
        size_t nw = 0;
        for (char *p = ol; p < eol && nw < 4096;) {
            char *e;
            long v = strtol(p, &e, 10);
            if (e == p) break;
            want[nw++] = (int32_t)v;
            p = e;
        }
        int32_t *ids;
        size_t n;
        fg_status es = fg_tok_encode_ex(t, inp + pos, len, 0, &ids, &n);
        int same = !es && n == nw && !memcmp(ids, want, n * sizeof *ids);
        total++;
        ok += same;
        if (!same && !bad++) {
            fprintf(stderr, "%s: input %zu (\"%.*s\") differs:\n  got ", argv[1], total - 1, (int)len,
                    inp + pos);
            for (size_t i = 0; !es && i < n; i++) fprintf(stderr, " %d", ids[i]);
            fprintf(stderr, "\n  want");
            for (size_t i = 0; i < nw; i++) fprintf(stderr, " %d", want[i]);
            fprintf(stderr, "\n");
        }
        if (!es) free(ids);
        ol = *eol ? eol + 1 : eol;
        if (!nx) break;
        pos = (size_t)(nx - inp) + seplen;
    }
    const char *name = strrchr(argv[1], '/');
    printf("%s: %zu/%zu identical\n", name ? name + 1 : argv[1], ok, total);
    free(inp);
    free(out);
    fg_tok_destroy(&t);
    return ok == total ? 0 : 1;
}

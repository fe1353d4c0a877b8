/* test_tok_gguf.c - the GGUF tokenizer (tokenizer/fg_tok_gguf.c) against
 * llama.cpp.
 *
 *   test_tok_gguf VOCAB.gguf INP OUT
 *       llama.cpp's own test vectors: encodes each input of INP (separated
 *       by "\n__ggml_vocab_test__\n" lines, as llama.cpp's
 *       tests/test-tokenizer-0.cpp reads them) without BOS and with special
 *       tokens in the text taken as text (llama.cpp's add_special = false,
 *       parse_special = false), and compares with the ids of the same line
 *       of OUT, written by llama.cpp's tooling from the reference tokenizer.
 *       Prints "NAME: K/N identical"; exit 1 on any difference (the first is
 *       shown), 2 when the vocabulary is refused (the message names key and
 *       value).
 *   test_tok_gguf corpus VOCAB.gguf CORPUS.json ORACLE.json all|all+clean|no-u2581
 *       A corpus (a JSON array of strings) against llama.cpp's tokenizer
 *       (ORACLE.json from gguf_llamacpp_oracle.mjs: per document "plain" and
 *       "special" ids and "detok", llama.cpp's detokenization of "plain"):
 *       no BOS added on either side; ids without FG_TOK_PARSE_SPECIAL ==
 *       "plain", with it == "special"; decode(plain ids) == "detok" (with
 *       all+clean: after the clean-up of spaces llama.cpp's detokenize
 *       applies to that vocabulary, clean_spaces below; our decode never
 *       does, it is lossy); and decode(encode(x)) == x on every document
 *       (all, all+clean) or on those without U+2581 (no-u2581: SentencePiece
 *       vocabularies, whose decoding turns that character into a space).
 *       Prints the counts; exit 1 on any difference (the first few are
 *       shown), 2 for a refused vocabulary or a malformed file. */
#include <jansson.h>
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

static int cmd_corpus(const char *vocab, const char *corpus, const char *oracle, const char *round);

int main(int argc, char **argv) {
    if (argc == 6 && !strcmp(argv[1], "corpus")) return cmd_corpus(argv[2], argv[3], argv[4], argv[5]);
    if (argc != 4) {
        fprintf(stderr, "usage: test_tok_gguf VOCAB.gguf INP OUT | corpus VOCAB.gguf CORPUS.json ORACLE.json "
                        "all|all+clean|no-u2581\n");
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

/* ---- corpus mode ---- */

typedef struct {
    size_t docs, bytes, ids, bad_ids, bad_detok, round_checked, bad_round;
} corpus_counts;

static json_t *load_array(const char *path) {
    json_error_t e;
    json_t *a = json_load_file(path, JSON_ALLOW_NUL, &e);
    if (!a || !json_is_array(a)) {
        fprintf(stderr, "%s:%d: %s\n", path, e.line, a ? "expected a JSON array" : e.text);
        exit(2);
    }
    return a;
}

/* Whether IDS equal the oracle's list WANT; prints the first difference of the first few documents. */
static int same_ids(const char *what, size_t doc, const int32_t *ids, size_t n, const json_t *want,
                    size_t *nbad) {
    size_t nw = json_array_size(want), k = 0;
    while (k < n && k < nw && ids[k] == json_integer_value(json_array_get(want, k))) k++;
    if (k == n && n == nw) return 1;
    if ((*nbad)++ < 5) {
        fprintf(stderr, "document %zu: %s ids differ at token %zu of %zu (ours) / %zu (llama.cpp):\n  ours     ", doc,
                what, k, n, nw);
        for (size_t i = k; i < n && i < k + 8; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n  llama.cpp");
        for (size_t i = k; i < nw && i < k + 8; i++)
            fprintf(stderr, " %lld", (long long)json_integer_value(json_array_get(want, i)));
        fprintf(stderr, "\n");
    }
    return 0;
}

/* Whether text A (LA bytes) equals B; prints where the first few differ. */
static int same_text(const char *what, size_t doc, const char *a, size_t la, const char *b, size_t lb,
                     size_t *nbad) {
    if (la == lb && !memcmp(a, b, la)) return 1;
    if ((*nbad)++ < 5) {
        size_t k = 0;
        while (k < la && k < lb && a[k] == b[k]) k++;
        fprintf(stderr, "document %zu: %s differs at byte %zu: \"%.*s\" vs \"%.*s\"\n", doc, what, k,
                (int)(la - k < 40 ? la - k : 40), a + k, (int)(lb - k < 40 ? lb - k : 40), b + k);
    }
    return 0;
}

/* llama.cpp's clean_up_tokenization_spaces, as llama_vocab::impl::detokenize does it (src/llama-vocab.cpp, a
 * literal port, in place on T of N bytes; returns the new length): " ?", " !", " .", " ," lose the space; " ' "
 * both; " 's", " 'm", " 're", " 've" the space before the apostrophe. */
static size_t clean_spaces(char *text, size_t n) {
    size_t total1 = n, total = n ? 1 : 0;
    for (size_t i = 1; i < total1; ++i) {
        const char x = text[i];
        if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) total--;
        text[total++] = x;
    }
    size_t total2 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < total2; ++i) {
        const char x = text[i];
        if (x == '\'' && i + 1 < total2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
            total--;
            text[++i] = '\0';
        }
        text[total++] = x;
    }
    size_t total3 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < total3; ++i) {
        const char x = text[i];
        if (text[i - 1] == ' ' && x == '\'' && i + 1 < total3) {
            const char x1 = text[i + 1];
            if (x1 == 's' || x1 == 'm') total--;
            else if (i + 2 < total3 && ((x1 == 'r' && text[i + 2] == 'e') || (x1 == 'v' && text[i + 2] == 'e')))
                total--;
        }
        text[total++] = x;
    }
    return total;
}

static void corpus_doc(fg_tok *t, size_t i, const json_t *doc, const json_t *want, int spm, int clean,
                       corpus_counts *c) {
    const char *text = json_string_value(doc);
    size_t len = json_string_length(doc);
    const json_t *plain = json_object_get(want, "plain"), *special = json_object_get(want, "special"),
                 *detok = json_object_get(want, "detok");
    if (!text || !json_is_array(plain) || !json_is_array(special) || !json_is_string(detok)) {
        fprintf(stderr, "document %zu: not a string, or the oracle's entry lacks plain, special or detok\n", i);
        exit(2);
    }
    int32_t *ids, *sids;
    size_t n, ns;
    fg_exit_on(fg_tok_encode_ex(t, text, len, 0, &ids, &n));
    fg_exit_on(fg_tok_encode_ex(t, text, len, FG_TOK_PARSE_SPECIAL, &sids, &ns));
    c->docs++;
    c->bytes += len;
    c->ids += json_array_size(plain) + json_array_size(special);
    same_ids("plain", i, ids, n, plain, &c->bad_ids);
    same_ids("parse-special", i, sids, ns, special, &c->bad_ids);
    char *dec;
    size_t dl;
    fg_exit_on(fg_tok_decode(t, ids, n, 0, &dec, &dl));
    if (!spm || !strstr(text, "\xe2\x96\x81")) {
        c->round_checked++;
        same_text("decode(encode(x)) vs x", i, dec, dl, text, len, &c->bad_round);
    }
    if (clean) dl = clean_spaces(dec, dl);
    same_text("decode vs llama.cpp's detokenize", i, dec, dl, json_string_value(detok), json_string_length(detok),
              &c->bad_detok);
    free(dec);
    free(ids);
    free(sids);
}

static int cmd_corpus(const char *vocab, const char *corpus, const char *oracle, const char *round) {
    int spm = !strcmp(round, "no-u2581"), clean = !strcmp(round, "all+clean");
    if (!spm && !clean && strcmp(round, "all")) {
        fprintf(stderr, "test_tok_gguf corpus: the last argument is all, all+clean or no-u2581, not '%s'\n", round);
        return 2;
    }
    fg_tok *t;
    if (fg_tok_open_gguf(vocab, &t)) {
        fprintf(stderr, "%s\n", fg_err_msg());
        return 2;
    }
    json_t *docs = load_array(corpus), *want = load_array(oracle);
    if (json_array_size(docs) != json_array_size(want)) {
        fprintf(stderr, "%s has %zu documents, %s %zu\n", corpus, json_array_size(docs), oracle,
                json_array_size(want));
        return 2;
    }
    corpus_counts c = {0};
    for (size_t i = 0; i < json_array_size(docs); i++)
        corpus_doc(t, i, json_array_get(docs, i), json_array_get(want, i), spm, clean, &c);
    const char *name = strrchr(vocab, '/');
    printf("%s: %zu documents, %zu bytes, %zu ids compared (plain and parse-special), %zu id lists differ; "
           "decode == llama.cpp's detokenize%s in %zu/%zu; decode(encode(x)) == x in %zu/%zu checked (%s)\n",
           name ? name + 1 : vocab, c.docs, c.bytes, c.ids, c.bad_ids, clean ? " (its clean-up of spaces applied)" : "",
           c.docs - c.bad_detok, c.docs,
           c.round_checked - c.bad_round, c.round_checked, round);
    json_decref(docs);
    json_decref(want);
    fg_tok_destroy(&t);
    return c.bad_ids || c.bad_detok || c.bad_round ? 1 : 0;
}

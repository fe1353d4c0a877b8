/* test_tok_hf.c - the C side of the tokenizer.json tests.
 *
 *   test_tok_hf unit TMPDIR
 *       No network: small tokenizer.json files written into TMPDIR (a
 *       Llama-3-like byte-level one, a Llama-2-like SentencePiece one, odd
 *       Splits), with ids derived by hand from their few merges; the added
 *       tokens' rules; BOS/EOS from the post-processor, tokenizer_config.json
 *       and generation_config.json; and every refusal naming file and part
 *       (tests/tokenizer/tok_hf_unit.c).
 *   test_tok_hf corpus MODEL_DIR CORPUS.json OUT.json
 *       Encodes each document as transformers does by default (special
 *       tokens in the text honoured, the template's BOS/EOS added), again with
 *       the word cache off (same ids), and without either; writes
 *       [{"ids": [...], "text": decode(ids), "plain": decode(plain ids)}, ...]
 *       for compare_hf.py to hold against the JavaScript oracle. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fg_tokenizer.h"

int tok_hf_unit(const char *dir);   /* tok_hf_unit.c */

static json_t *ids_json(const int32_t *ids, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, json_integer(ids[i]));
    return a;
}

static json_t *text_json(fg_tok *t, const int32_t *ids, size_t n) {
    char *s;
    size_t len;
    fg_exit_on(fg_tok_decode(t, ids, n, 0, &s, &len));
    json_t *j = json_stringn(s, len);
    free(s);
    return j;
}

static int cmd_corpus(const char *dir, const char *in, const char *out) {
    fg_tok *t;
    double t0 = fg_now();
    fg_exit_on(fg_tok_open_model_dir(dir, &t));
    double t_load = fg_now() - t0;
    json_error_t jerr;
    json_t *docs = json_load_file(in, JSON_ALLOW_NUL, &jerr);
    if (!docs || !json_is_array(docs)) {
        fprintf(stderr, "%s:%d: %s\n", in, jerr.line, docs ? "expected an array" : jerr.text);
        return 1;
    }
    json_t *res = json_array();
    int bad = 0;
    double t_enc = 0;
    size_t bytes = 0;
    for (size_t i = 0; i < json_array_size(docs); i++) {
        json_t *d = json_array_get(docs, i);
        const char *text = json_string_value(d);
        size_t len = json_string_length(d);
        int32_t *ids, *ids2, *plain;
        size_t n, n2, np;
        unsigned flags = FG_TOK_PARSE_SPECIAL | FG_TOK_ADD_SPECIAL;
        fg_tok_set_cache(t, 1);
        double e0 = fg_now();
        fg_exit_on(fg_tok_encode_ex(t, text, len, flags, &ids, &n));
        t_enc += fg_now() - e0;
        bytes += len;
        fg_tok_set_cache(t, 0);
        fg_exit_on(fg_tok_encode_ex(t, text, len, flags, &ids2, &n2));
        fg_tok_set_cache(t, 1);
        fg_exit_on(fg_tok_encode(t, text, len, &plain, &np));
        if (n != n2 || memcmp(ids, ids2, n * sizeof *ids)) {
            fprintf(stderr, "FAIL document %zu: the word cache changes the ids\n", i);
            bad++;
        }
        json_t *o = json_object();
        json_object_set_new(o, "ids", ids_json(ids, n));
        json_object_set_new(o, "text", text_json(t, ids, n));
        json_object_set_new(o, "plain", text_json(t, plain, np));
        json_array_append_new(res, o);
        free(ids);
        free(ids2);
        free(plain);
    }
    if (json_dump_file(res, out, JSON_COMPACT)) {
        fprintf(stderr, "cannot write %s\n", out);
        return 1;
    }
    printf("test_tok_hf corpus: %s: %zu documents, loaded in %.2f s, encoded %.2f MB/s (first pass)\n", dir,
           json_array_size(docs), t_load, t_enc > 0 ? (double)bytes / 1e6 / t_enc : 0.0);
    json_decref(res);
    json_decref(docs);
    fg_tok_destroy(&t);
    return bad ? 1 : 0;
}

int main(int argc, char **argv) {
    fg_log_init("test-tok-hf");
    if (argc == 3 && !strcmp(argv[1], "unit")) return tok_hf_unit(argv[2]);
    if (argc == 5 && !strcmp(argv[1], "corpus")) return cmd_corpus(argv[2], argv[3], argv[4]);
    fprintf(stderr, "usage: test_tok_hf unit TMPDIR | corpus MODEL_DIR CORPUS.json OUT.json\n");
    return 2;
}

/* fg_tok_bench.c - `flexgen-tok-bench`: encoding throughput of the C
 * tokenizer on a corpus (a JSON array of strings, one document each), with
 * the word cache on and off. Each run starts with an empty cache and encodes
 * every document in turn, as the coordinator encodes a prompts file (a
 * tokenizer.json's special tokens in the text honoured, as there). Prints
 * one JSON object; bench/bench_tokenizer.sh and bench/bench_tokenizer_hf.sh
 * compare it with JavaScript tokenizers on the same corpus. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fg_tokenizer.h"

static void usage(FILE *f) {
    fprintf(f, "usage: flexgen-tok-bench (--gpt2 | --model DIR) [--runs N] CORPUS.json\n"
               "Encodes every document of CORPUS.json (a JSON array of strings) N times\n"
               "(default 5) with the word cache on, then off; prints MB/s as JSON.\n");
}

/* Encodes all documents; returns seconds and fills a checksum of the ids so the
 * two cache modes can be compared cheaply. */
static double run_once(fg_tok *t, json_t *docs, size_t *n_tok, uint64_t *sum) {
    *n_tok = 0;
    *sum = 0;
    unsigned flags = fg_tok_is_hf(t) ? FG_TOK_PARSE_SPECIAL : 0;
    double t0 = fg_now();
    for (size_t i = 0; i < json_array_size(docs); i++) {
        json_t *d = json_array_get(docs, i);
        int32_t *ids;
        size_t n;
        fg_exit_on(fg_tok_encode_ex(t, json_string_value(d), json_string_length(d), flags, &ids, &n));
        for (size_t k = 0; k < n; k++) *sum = *sum * 1000003u + (uint32_t)ids[k];
        *n_tok += n;
        free(ids);
    }
    return fg_now() - t0;
}

int main(int argc, char **argv) {
    fg_log_init("tok-bench");
    const char *model = NULL, *corpus = NULL;
    int gpt2 = 0, runs = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--gpt2")) gpt2 = 1;
        else if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--help")) { usage(stdout); return 0; }
        else if (argv[i][0] != '-' && !corpus) corpus = argv[i];
        else { usage(stderr); return 2; }
    }
    if (!corpus || gpt2 == !!model || runs < 1 || runs > 1000) {
        usage(stderr);
        return 2;
    }
    fg_tok *t;
    double t_load = fg_now();
    fg_exit_on(gpt2 ? fg_tok_open_gpt2_cache(&t) : fg_tok_open_model_dir(model, &t));
    double load_s = fg_now() - t_load;
    json_error_t jerr;
    json_t *docs = json_load_file(corpus, JSON_ALLOW_NUL, &jerr);
    if (!docs || !json_is_array(docs)) {
        fprintf(stderr, "flexgen-tok-bench: error: %s:%d: %s\n", corpus, jerr.line,
                docs ? "expected a JSON array of strings" : jerr.text);
        return 2;
    }
    size_t bytes = 0;
    for (size_t i = 0; i < json_array_size(docs); i++) {
        json_t *d = json_array_get(docs, i);
        if (!json_is_string(d)) {
            fprintf(stderr, "flexgen-tok-bench: error: %s: document %zu is not a string\n", corpus, i);
            return 2;
        }
        bytes += json_string_length(d);
    }

    double *mbps[2] = {fg_xmalloc(sizeof(double) * (size_t)runs), fg_xmalloc(sizeof(double) * (size_t)runs)};
    size_t n_tok[2] = {0, 0};
    uint64_t sum[2] = {0, 0};
    for (int mode = 0; mode < 2; mode++) { /* 0: cache on, 1: off */
        for (int r = 0; r < runs; r++) {
            fg_tok_set_cache(t, mode == 0);
            double s = run_once(t, docs, &n_tok[mode], &sum[mode]);
            mbps[mode][r] = (double)bytes / 1e6 / s;
        }
    }
    if (sum[0] != sum[1] || n_tok[0] != n_tok[1]) {
        fprintf(stderr, "flexgen-tok-bench: error: ids differ with and without the cache\n");
        return 1;
    }
    printf("{\"docs\": %zu, \"bytes\": %zu, \"tokens\": %zu, \"runs\": %d, \"jit\": %s, \"load_s\": %.3f",
           json_array_size(docs), bytes, n_tok[0], runs, fg_tok_jit(t) ? "true" : "false", load_s);
    const char *names[2] = {"cache", "nocache"};
    for (int mode = 0; mode < 2; mode++) {
        printf(", \"%s_mbps\": [", names[mode]);
        for (int r = 0; r < runs; r++) printf("%s%.3f", r ? ", " : "", mbps[mode][r]);
        double med = fg_median(mbps[mode], runs);
        printf("], \"%s_median_mbps\": %.3f", names[mode], med);
    }
    printf("}\n");
    free(mbps[0]);
    free(mbps[1]);
    json_decref(docs);
    fg_tok_destroy(&t);
    return 0;
}

/* fg_gen.h - what every engine takes and gives: tokenized prompts in,
 * generated ids and timings out. The reference engine and the offloading
 * engine share it, so `flexgen run` and the tests treat them alike. */
#ifndef FG_GEN_H
#define FG_GEN_H

#include "fg_npy.h"
#include "fg_sample.h"
#include "fg_weights.h"

typedef struct {
    int32_t *ids;  /* prompt token ids (BOS included when the tokenizer adds one) */
    int len;
} fg_seq_in;

typedef enum { FG_FINISH_LENGTH, FG_FINISH_EOS, FG_FINISH_STOP } fg_finish;

typedef struct {
    int32_t *ids;  /* generated ids, up to and including EOS when it ended the sequence */
    int n;
    fg_finish finish;
} fg_seq_out;

/* A block's outputs are complete (prompts first..first+count-1): a
 * resumable job journals them here, before the engine starts the next. */
typedef fg_status (*fg_block_fn)(void *ctx, int first, int count);

/* Ends a sequence early (stop strings): returns 1 when ids[0..n) should stop. */
typedef int (*fg_stop_fn)(void *ctx, int seq, const int32_t *ids, int n);

typedef struct {
    int gen_len;              /* new tokens per prompt */
    int batch;                /* sequences computed together */
    fg_sampler_cfg samp;
    int ignore_eos;           /* keep going past EOS (benchmarks, oracle tests) */
    fg_npy_writer *logits;    /* optional: (prompts, gen_len, vocab) float32 */
    fg_stop_fn stop;          /* optional */
    void *stop_ctx;
    int start;                /* first prompt to compute, a block boundary: a resumed job's finished
                                 blocks come before it (each prompt's generator is seeded by its
                                 index, so skipping them changes nothing after) */
    fg_block_fn block_done;   /* optional, after every block */
    void *block_ctx;
} fg_gen_opts;

typedef struct {
    double load_s;            /* weights read and converted */
    double prefill_s, decode_s;
    double gemm_s;            /* inside sgemm/sgemv (Linear, attention, LM head) */
    long generated;           /* tokens generated (gen_len per prompt, as FlexGen counts) */
} fg_gen_stats;

/* Sequence finish reason as the output JSONL writes it. */
const char *fg_finish_name(fg_finish f);

#endif

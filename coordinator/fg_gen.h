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

/* One prompt's own settings (a Batch API request's: fg_batch.h), in place
 * of the run's: at most max_new tokens, its sampler, and its generator,
 * fg_rng_init(samp.seed, rng_key), keyed by the request and not by where
 * it lands, so its samples are the same in whatever batch it runs. */
typedef struct {
    int max_new;              /* 1..gen_len */
    fg_sampler_cfg samp;
    uint64_t rng_key;
} fg_seq_opts;

typedef struct {
    int gen_len;              /* new tokens per prompt (with seq: the most any prompt asks) */
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
    const fg_seq_opts *seq;   /* optional (one per prompt); NULL: every prompt gen_len tokens, samp, and
                                 the generator fg_rng_init(samp.seed, its index) */
} fg_gen_opts;

/* Prompt q's sampler settings and its generator, as every engine starts it. */
static inline fg_sampler_cfg fg_gen_sampler(const fg_gen_opts *o, int q, fg_rng *r) {
    fg_sampler_cfg c = o->seq ? o->seq[q].samp : o->samp;
    fg_rng_init(r, c.seed, o->seq ? o->seq[q].rng_key : (uint64_t)q);
    return c;
}

/* The tokens prompt q may generate. */
static inline int fg_gen_max_new(const fg_gen_opts *o, int q) { return o->seq ? o->seq[q].max_new : o->gen_len; }

typedef struct {
    double load_s;            /* weights read and converted */
    double prefill_s, decode_s;
    double gemm_s;            /* inside sgemm/sgemv (Linear, attention, LM head) */
    long generated;           /* tokens generated (gen_len per prompt, as FlexGen counts) */
    /* the offloading engine's disk reads by phase (0 prefill, 1 decode):
     * their bytes and the seconds at least one was in flight */
    uint64_t disk_rd_bytes[2];
    double disk_rd_s[2];
} fg_gen_stats;

/* Sequence finish reason as the output JSONL writes it. */
const char *fg_finish_name(fg_finish f);

#endif

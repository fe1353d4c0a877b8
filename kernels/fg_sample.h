/* fg_sample.h - choosing the next token from a row of logits: greedy,
 * temperature and top-p (nucleus) with a seeded per-sequence generator, so a
 * sequence's samples do not depend on how prompts were batched. */
#ifndef FG_SAMPLE_H
#define FG_SAMPLE_H

#include <stdint.h>

typedef struct {
    float temperature;   /* 0 = greedy */
    float top_p;         /* 1 = off */
    uint64_t seed;
} fg_sampler_cfg;

typedef struct {
    uint64_t state;
} fg_rng;

/* One sequence's sampler as the SAMPLE op holds it in its RNG slot: the
 * generator's state and the sequence's own settings, so the sequences of
 * one batch may each sample their own way (a Batch API file's requests).
 * 16 bytes, no padding: the same bytes on every backend. */
typedef struct {
    uint64_t state;
    float temperature;   /* 0 = greedy */
    float top_p;         /* 1 = off */
} fg_sample_row;
_Static_assert(sizeof(fg_sample_row) == 16, "fg_sample_row: no hidden padding");

/* The generator of sequence `index` of a run seeded with `seed`. */
void fg_rng_init(fg_rng *r, uint64_t seed, uint64_t index);
double fg_rng_uniform(fg_rng *r);   /* [0, 1) */

/* Index of the largest logit; the lowest index on ties (numpy's argmax). */
int fg_argmax(const float *logits, int n);

/* Greedy when cfg->temperature == 0; otherwise softmax(logits / T) cut to the
 * smallest set of tokens whose mass reaches top_p, then one draw. scratch has
 * room for 2*n floats/ints. Does not modify logits. */
int fg_sample(const float *logits, int n, const fg_sampler_cfg *cfg, fg_rng *rng, void *scratch);

#endif

/* fg_sample.c - greedy, temperature and top-p sampling (see fg_sample.h). */
#include "fg_sample.h"

#include <math.h>
#include <stdlib.h>

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void fg_rng_init(fg_rng *r, uint64_t seed, uint64_t index) {
    uint64_t s = seed * 0x2545f4914f6cdd1dULL + index;
    r->state = splitmix(&s);
}

double fg_rng_uniform(fg_rng *r) { return (double)(splitmix(&r->state) >> 11) * (1.0 / 9007199254740992.0); }

int fg_argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

typedef struct {
    float p;
    int id;
} prob_id;

static int by_prob_desc(const void *a, const void *b) {
    const prob_id *x = a, *y = b;
    if (x->p != y->p) return x->p < y->p ? 1 : -1;
    return x->id - y->id;
}

int fg_sample(const float *logits, int n, const fg_sampler_cfg *cfg, fg_rng *rng, void *scratch) {
    if (cfg->temperature <= 0) return fg_argmax(logits, n);
    prob_id *pi = scratch;
    float mx = logits[fg_argmax(logits, n)];
    double sum = 0;
    for (int i = 0; i < n; i++) {
        pi[i].p = expf((logits[i] - mx) / cfg->temperature);
        pi[i].id = i;
        sum += pi[i].p;
    }
    int keep = n;
    if (cfg->top_p < 1.0f) {
        qsort(pi, (size_t)n, sizeof *pi, by_prob_desc);
        double acc = 0, cut = cfg->top_p * sum;
        for (keep = 0; keep < n;) {
            acc += pi[keep++].p;
            if (acc >= cut) break;
        }
        sum = acc;
    }
    double u = fg_rng_uniform(rng) * sum, acc = 0;
    for (int i = 0; i < keep; i++) {
        acc += pi[i].p;
        if (u < acc) return pi[i].id;
    }
    return pi[keep - 1].id;
}

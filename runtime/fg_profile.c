/* fg_profile.c - the pieces the gpu and cpu workers' --profile share (see
 * fg_profile.h). */
#include "fg_profile.h"

#include <stdlib.h>
#include <string.h>

#include "fg_fmt.h"
#include "fg_sample.h"
#include "fg_weights.h"

#define DEFAULT_MODEL "opt-1.3b"
#define MAX_REPS 1000     /* timed runs of one point at most, however fast it is */
#define MIN_REPS 5        /* timed runs of one point at least: a median of 5 */
#define QUICK_REPS 3      /* --quick (tests): a median of 3, no minimum time */

int fg_profile_parse(fg_profile_args *pa, const char *program, int argc, char **argv, fg_profile_flag_fn own,
                     void *own_ctx, const char *usage) {
    memset(pa, 0, sizeof *pa);
    pa->program = program;
    const char *model = DEFAULT_MODEL, *shape = NULL;
    int used;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--profile")) {
            /* the mode itself */
        } else if (!strcmp(a, "--json")) {
            pa->as_json = 1;
        } else if (!strcmp(a, "--quick")) {
            pa->quick = 1;
        } else if (!strcmp(a, "--model") && val) {
            model = argv[++i];
        } else if (!strcmp(a, "--shape") && val) {
            shape = argv[++i];
        } else if (own && (used = own(own_ctx, a, val)) != 0) {
            if (used < 0) return 2;
            i += used - 1;
        } else {
            fprintf(stderr, "%s: --profile: unknown or incomplete option '%s'\nusage: %s\n", program, a, usage);
            return 2;
        }
    }
    if (shape ? fg_config_from_desc_text(shape, "--shape", &pa->cfg) != FG_OK
              : fg_config_by_name(model, &pa->cfg) != FG_OK) {
        fprintf(stderr, "%s: --profile: %s\n", program, fg_err_msg());
        return 2;
    }
    if (shape) snprintf(pa->cfg.name, sizeof pa->cfg.name, "shape");
    return 0;
}

fg_status fg_profile_median(const fg_profile_args *pa, fg_profile_fn fn, void *ctx, double min_seconds,
                            double *seconds) {
    int min_reps = pa->quick ? QUICK_REPS : MIN_REPS;
    if (pa->quick) min_seconds = 0;
    fg_status st = fn(ctx);   /* the untimed run */
    if (st) return st;
    double *t = fg_xmalloc(MAX_REPS * sizeof *t), start = fg_now();
    int n = 0;
    while (n < MAX_REPS && (n < min_reps || fg_now() - start < min_seconds)) {
        double t0 = fg_now();
        if ((st = fn(ctx))) break;
        t[n++] = fg_now() - t0;
    }
    if (!st) *seconds = fg_median(t, n);
    free(t);
    return st;
}

#define FILL_SEED 0x5eed   /* any fixed seed: the same contents every run */
#define FILL_CHUNK 1024    /* floats converted at a time, on the stack */

/* n halves uniform in [-1, 1), from a generator keyed by the slot. */
static void fill_uniform(fg_half *dst, uint64_t n, uint64_t key) {
    fg_rng r;
    fg_rng_init(&r, FILL_SEED, key);
    float buf[FILL_CHUNK];
    for (uint64_t i0 = 0; i0 < n; i0 += FILL_CHUNK) {
        size_t m = n - i0 < FILL_CHUNK ? (size_t)(n - i0) : FILL_CHUNK;
        for (size_t i = 0; i < m; i++) buf[i] = (float)(2 * fg_rng_uniform(&r) - 1);
        fg_float_to_half_n(buf, dst + i0, m);
    }
}

fg_status fg_profile_fill(const fg_msg *m, void *image, const fg_profile_args *pa, int weights) {
    const fg_msg_compute *c = &m->u.compute;
    const fg_op_info *oi = fg_op_info_get(c->op);
    if (!oi) return fg_err_set(FG_EINPUT, "%s is not an engine op", fg_op_name(c->op));
    fg_wsrc *dummy = NULL;
    fg_model_config plain = pa->cfg;
    plain.compress_weight = 0;
    fg_status st = fg_wsrc_open_dummy_config(&plain, 1, &dummy);
    if (!st) fg_wsrc_config_mut(dummy)->compress_weight = pa->cfg.compress_weight;   /* read as the tiers hold them */
    for (uint32_t i = 0; !st && i < c->n_in; i++) {
        const fg_op_slot *s = &oi->in[i];
        fg_shm_handle h = c->in[i];
        uint8_t *p = (uint8_t *)image + h.offset;
        if (!h.nbytes) continue;
        switch (s->kind) {
        case FG_SLOT_LW:
        case FG_SLOT_GW: {
            int idx = s->kind == FG_SLOT_LW ? fg_spec_layer(0, s->which) : fg_spec_global(s->which);
            int fmt = fg_spec_fmt(fg_wsrc_config(dummy), fg_wsrc_specs(dummy), idx);
            if (!weights) break;
            /* a ggml format's blocks: no dummy weights are made in them (a
             * GGUF file's are its own), and a kernel's speed is all we need */
            if (fg_wsrc_specs(dummy)[idx].ndim == 2 && fg_fmt_is_ggml_block(fmt)) fg_fmt_fill_random(fmt, p, h.nbytes, i + 1);
            else st = fg_wsrc_read_stored(dummy, idx, p);
            break;
        }
        case FG_SLOT_ACT:
        case FG_SLOT_CACHE: fill_uniform((fg_half *)p, h.nbytes / sizeof(fg_half), i); break;
        case FG_SLOT_MASK: memset(p, 1, h.nbytes); break;
        default: memset(p, 0, h.nbytes); break;
        }
    }
    fg_wsrc_destroy(&dummy);
    return st;
}

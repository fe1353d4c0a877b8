/* fg_engine_ref.c - the single-process reference engine (see fg_engine_ref.h).
 * Weights: every tensor read once and kept as the tiers hold them (fp16, or
 * 4-bit with compress_weight). Prompts are run in batches of opt->batch,
 * left-padded to the longest prompt of the batch as Hugging Face pads; the
 * KV cache is (Tmax, B, H) per layer, fp16 or 4-bit (compress_cache). */
#include "fg_engine_ref.h"

#include <string.h>

#include "fg_fwd.h"

const char *fg_finish_name(fg_finish f) {
    switch (f) {
    case FG_FINISH_EOS: return "stop";
    case FG_FINISH_STOP: return "stop";
    default: return "length";
    }
}

typedef struct {
    fg_half **tensors;                /* by spec index, NULL if absent */
    fg_global_w g;
    fg_layer_w *layers;               /* (L) */
    fg_model_config *lcfg;            /* (L) the config with each layer's formats (fg_config_set_formats) */
    fg_model_config gcfg;             /* with the model-level formats */
} ref_weights;

static fg_status load_weights(fg_wsrc *ws, ref_weights *rw) {
    const fg_model_config *c = fg_wsrc_config(ws);
    const fg_spec *sp = fg_wsrc_specs(ws);
    int n = fg_spec_count(c);
    rw->tensors = fg_xcalloc((size_t)n, sizeof *rw->tensors);
    for (int i = 0; i < n; i++) {
        if (!sp[i].present) continue;
        rw->tensors[i] = fg_alloc_tensor((size_t)fg_spec_stored_bytes(c, sp, i));
        fg_status st = fg_wsrc_read_stored(ws, i, rw->tensors[i]);
        if (st) return st;
    }
    for (int g = 0; g < FG_GW_COUNT; g++) rw->g.w[g] = rw->tensors[fg_spec_global(g)];
    rw->layers = fg_xcalloc((size_t)c->n_layers, sizeof *rw->layers);
    for (int l = 0; l < c->n_layers; l++)
        for (int w = 0; w < FG_LW_COUNT; w++) rw->layers[l].w[w] = rw->tensors[fg_spec_layer(l, w)];
    rw->lcfg = fg_xcalloc((size_t)c->n_layers, sizeof *rw->lcfg);
    for (int l = 0; l < c->n_layers; l++) rw->lcfg[l] = *c, fg_config_set_formats(&rw->lcfg[l], sp, l);
    rw->gcfg = *c;
    fg_config_set_formats(&rw->gcfg, sp, -1);
    return FG_OK;
}

static void free_weights(ref_weights *rw, int n) {
    if (rw->tensors)
        for (int i = 0; i < n; i++) free(rw->tensors[i]);
    free(rw->tensors);
    free(rw->layers);
    free(rw->lcfg);
}

/* One batch of `B` prompts starting at in[first]. */
static fg_status run_batch(const fg_model_config *c, const ref_weights *rw, const fg_seq_in *in, int first, int B,
                           const fg_gen_opts *opt, fg_seq_out *out, fg_gen_stats *stats) {
    int H = c->hidden, V = c->vocab_size, L = c->n_layers, G = opt->gen_len;
    int S = 0;
    for (int b = 0; b < B; b++) S = in[first + b].len > S ? in[first + b].len : S;
    int Tmax = S + G;
    fg_status st = FG_OK;

    /* inputs, left-padded: ids (B, S), mask (B, Tmax) */
    int32_t *ids = fg_xcalloc((size_t)B * S, sizeof *ids);
    uint8_t *mask = fg_xcalloc((size_t)B * Tmax, 1);
    for (int b = 0; b < B; b++) {
        const fg_seq_in *p = &in[first + b];
        int pad = S - p->len;
        for (int t = 0; t < S; t++) ids[b * S + t] = t < pad ? c->pad_id : p->ids[t - pad];
        for (int t = pad; t < Tmax; t++) mask[(size_t)b * Tmax + t] = 1;
    }
    void **kc = fg_xcalloc((size_t)L, sizeof *kc), **vc = fg_xcalloc((size_t)L, sizeof *vc);
    for (int l = 0; l < L; l++) {
        kc[l] = fg_alloc_tensor((size_t)B * Tmax * fg_cache_row_bytes(c));   /* (Tmax, B, H) */
        vc[l] = fg_alloc_tensor((size_t)B * Tmax * fg_cache_row_bytes(c));
    }
    float *h = fg_alloc_tensor(sizeof(float) * (size_t)B * S * H);          /* (B, S, H) */
    float *logits = fg_alloc_tensor(sizeof(float) * (size_t)B * V);         /* (B, V) */
    void *scratch = fg_alloc_tensor(sizeof(float) * 2 * (size_t)V);
    int32_t *next = fg_xcalloc((size_t)B, sizeof *next);
    fg_rng *rng = fg_xcalloc((size_t)B, sizeof *rng);
    fg_sampler_cfg *samp = fg_xcalloc((size_t)B, sizeof *samp);
    for (int b = 0; b < B; b++) {
        samp[b] = fg_gen_sampler(opt, first + b, &rng[b]);
        out[first + b].ids = fg_xcalloc((size_t)(G ? G : 1), sizeof(int32_t));
        out[first + b].n = 0;
        out[first + b].finish = FG_FINISH_LENGTH;
    }
    uint8_t *done = fg_xcalloc((size_t)B, 1);
    fg_opt_ws ws;
    fg_opt_ws_init(&ws, c, B * S);

    for (int i = 0; i < G; i++) {
        double t0 = fg_now();
        fg_step step = {.B = B, .S = i == 0 ? S : 1, .past = i == 0 ? 0 : S + i - 1, .mask = mask, .mask_stride = Tmax};
        const int32_t *step_ids = i == 0 ? ids : next;
        fg_fwd_embed(h, step_ids, &step, &rw->gcfg, &rw->g, &ws);
        for (int l = 0; l < L; l++) {
            fg_fwd_attn_block(h, kc[l], vc[l], Tmax, &step, &rw->lcfg[l], &rw->layers[l], &ws);
            fg_fwd_mlp_block(h, &step, &rw->lcfg[l], &rw->layers[l], &ws);
        }
        fg_fwd_lm_head(logits, h, &step, &rw->gcfg, &rw->g, &ws);
        for (int b = 0; b < B; b++) {
            const float *lg = logits + (size_t)b * V;
            int tok = fg_sample(lg, V, &samp[b], &rng[b], scratch);
            next[b] = tok;
            if (opt->logits && (st = fg_npy_write(opt->logits, ((int64_t)(first + b) * G + i) * V, lg, (size_t)V)))
                goto out;
            fg_seq_out *o = &out[first + b];
            if (done[b]) continue;  /* finished sequences keep computing; their tokens are not kept */
            o->ids[o->n++] = tok;
            if (!opt->ignore_eos && fg_config_is_eos(c, tok)) {
                o->finish = FG_FINISH_EOS;
                done[b] = 1;
            } else if (opt->stop && opt->stop(opt->stop_ctx, first + b, o->ids, o->n)) {
                o->finish = FG_FINISH_STOP;
                done[b] = 1;
            } else if (o->n == fg_gen_max_new(opt, first + b)) {
                done[b] = 1;   /* its own max_tokens: finish stays "length" */
            }
        }
        double dt = fg_now() - t0;
        if (i == 0) stats->prefill_s += dt;
        else stats->decode_s += dt;
    }
    stats->generated += (long)B * G;
out:
    fg_opt_ws_free(&ws);
    for (int l = 0; l < L; l++) {
        free(kc[l]);
        free(vc[l]);
    }
    free(kc); free(vc); free(h); free(logits); free(scratch); free(next); free(rng); free(samp); free(done);
    free(ids); free(mask);
    return st;
}

fg_status fg_engine_ref_run(fg_wsrc *ws, const fg_seq_in *in, int n, const fg_gen_opts *opt, fg_seq_out *out,
                            fg_gen_stats *stats) {
    const fg_model_config *c = fg_wsrc_config(ws);
    memset(stats, 0, sizeof *stats);
    ref_weights rw = {0};
    double t0 = fg_now();
    fg_status st = load_weights(ws, &rw);
    stats->load_s = fg_now() - t0;
    fg_ops_gemm_reset();
    int batch = opt->batch > 0 ? opt->batch : n;
    for (int first = opt->start; !st && first < n; first += batch) {   /* a batch is the job's block */
        int B = n - first < batch ? n - first : batch;
        st = run_batch(c, &rw, in, first, B, opt, out, stats);
        if (!st && opt->block_done) st = opt->block_done(opt->block_ctx, first, B);
    }
    stats->gemm_s = fg_ops_gemm_seconds();
    free_weights(&rw, fg_spec_count(c));
    return st;
}

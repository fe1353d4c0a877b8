/* fg_sampler.c - a block's inputs onto the device, and the recording of
 * each token the gpu worker sampled (SAMPLE runs behind each LM head, where
 * the logits are): ids into the outputs, logits into --dump-logits, EOS and
 * stop strings, the prefill/decode split of the time. Recording runs batch
 * by batch while later batches compute, and never waits unless asked to. */
#include <string.h>

#include "fg_flex_int.h"
#include "fg_npy.h"
#include "fg_sample.h"

/* Copy shm location src to device location dst and wait. */
static fg_status upload(fg_engine *e, fg_loc src, fg_loc dst) {
    fg_msg m;
    fg_msg_init(&m, FG_MSG_COPY);
    fg_msg_copy_add(&m, fg_engine_handle(e, src), fg_engine_handle(e, dst));
    uint64_t s;
    fg_status st = fg_cmdq_submit_gpu(&e->q, &m, ST_H2D, NULL, &s);
    return st ? st : fg_cmdq_await(&e->q, s);
}

fg_status fg_block_inputs(fg_engine *e, fg_sampler *sm, int *S_k) {
    const fg_plan *pl = &e->pl;
    const fg_model_config *c = pl->c;
    int B = pl->gbs, Tm = pl->Tmax, G = sm->G;
    for (int k = 0; k < pl->K; k++) {
        /* each batch left-padded to its own longest prompt, as the reference
         * engine pads a batch; rows past the prompts are padding */
        int32_t *ids = fg_engine_ptr(e, pl->ids_io[k]);   /* (B, S_k) */
        uint8_t *mask = fg_engine_ptr(e, pl->mask_io[k]); /* (B, Tmax) */
        fg_sample_row *rng = fg_engine_ptr(e, pl->rng_io[k]);  /* (B) */
        e->samp_max_t[k] = 0, e->samp_min_p[k] = 1;
        S_k[k] = 1;
        for (int b = 0; b < B; b++) {
            int q = sm->first + k * B + b;
            if (q < sm->n && sm->in[q].len > S_k[k]) S_k[k] = sm->in[q].len;
        }
        memset(mask, 0, (size_t)B * Tm);
        for (int b = 0; b < B; b++) {
            int q = sm->first + k * B + b, real = q < sm->n, len = real ? sm->in[q].len : 1, pad = S_k[k] - len;
            for (int t = 0; t < S_k[k]; t++) ids[b * S_k[k] + t] = t < pad || !real ? c->pad_id : sm->in[q].ids[t - pad];
            for (int t = pad; t < Tm; t++) mask[(size_t)b * Tm + t] = 1;
            if (real) {
                fg_seq_out *o = &sm->out[q];
                free(o->ids);
                o->ids = fg_xcalloc((size_t)(G ? G : 1), sizeof(int32_t));
                o->n = 0;
                o->finish = FG_FINISH_LENGTH;
            }
            /* each sequence's generator and settings, as the reference engine
             * starts them; a padding row samples greedily */
            fg_rng r;
            fg_sampler_cfg cfg = real ? fg_gen_sampler(sm->opt, q, &r) : (fg_sampler_cfg){0, 1, 0};
            if (!real) r.state = 0;
            rng[b] = (fg_sample_row){r.state, cfg.temperature, cfg.top_p};
            if (cfg.temperature > e->samp_max_t[k]) e->samp_max_t[k] = cfg.temperature;
            if (cfg.top_p < e->samp_min_p[k]) e->samp_min_p[k] = cfg.top_p;
        }
        fg_status st;
        if ((st = upload(e, fg_loc_sub(pl->ids_io[k], 0, 4ull * B * S_k[k]), fg_loc_sub(pl->ids_dev[k], 0, 4ull * B * S_k[k]))) ||
            (st = upload(e, pl->mask_io[k], pl->mask_dev[k])) || (st = upload(e, pl->rng_io[k], pl->rng_dev[k])))
            return st;
    }
    for (int k = 0; k < pl->K; k++) e->sampled_copy[k] = 0;
    e->unrecorded_head = e->unrecorded_len = 0;
    return FG_OK;
}

/* Record token i of batch k once it and its logits are out. */
static fg_status record(fg_engine *e, fg_sampler *sm, int i, int k) {
    const fg_plan *pl = &e->pl;
    int B = pl->gbs, V = pl->c->vocab_size;
    fg_status st = fg_cmdq_await(&e->q, e->sampled_copy[k]);
    if (st) return st;
    const float *lg = fg_engine_ptr(e, pl->logits_io[k]);   /* (B, V) */
    const int32_t *ids = fg_engine_ptr(e, pl->ids_io[k]);   /* (B) */
    for (int b = 0; b < B; b++) {
        int q = sm->first + k * B + b, r = k * B + b;
        if (q >= sm->n) continue;
        if (sm->opt->logits &&
            (st = fg_npy_write(sm->opt->logits, ((int64_t)q * sm->G + i) * V, lg + (size_t)b * V, (size_t)V)))
            return st;
        if (sm->done[r]) continue;
        fg_seq_out *o = &sm->out[q];
        o->ids[o->n++] = ids[b];
        if (!sm->opt->ignore_eos && fg_config_is_eos(pl->c, ids[b])) o->finish = FG_FINISH_EOS, sm->done[r] = 1;
        else if (sm->opt->stop && sm->opt->stop(sm->opt->stop_ctx, q, o->ids, o->n))
            o->finish = FG_FINISH_STOP, sm->done[r] = 1;
        else if (o->n == fg_gen_max_new(sm->opt, q))
            sm->done[r] = 1;   /* its own max_tokens: finish stays "length" */
    }
    if ((st = fg_pipe_send_ids(e, i, k))) return st;   /* a pipeline's rank 0 embeds them next */
    if (k == pl->K - 1) {   /* token i is complete: its time, for the prefill/decode split */
        double now = fg_now();
        if (i == 0) sm->stats->prefill_s += now - sm->t_mark;
        else sm->stats->decode_s += now - sm->t_mark;
        sm->t_mark = now;
        sm->stats->disk_rd_bytes[i > 0] += e->q.rd_done_bytes - sm->rd_mark_bytes;
        sm->stats->disk_rd_s[i > 0] += e->q.rd_busy_s - sm->rd_mark_s;
        sm->rd_mark_bytes = e->q.rd_done_bytes, sm->rd_mark_s = e->q.rd_busy_s;
    }
    return FG_OK;
}

void fg_sample_enqueue(fg_engine *e, int i, int k) {
    int t = (e->unrecorded_head + e->unrecorded_len++) % e->pl.K;
    e->unrecorded_batch[t] = k, e->unrecorded_token[t] = i;
}

/* Take the oldest batch off the queue and record it. */
static fg_status record_oldest(fg_engine *e, fg_sampler *sm, int *k) {
    int t = e->unrecorded_head;
    e->unrecorded_head = (t + 1) % e->pl.K, e->unrecorded_len--;
    *k = e->unrecorded_batch[t];
    return record(e, sm, e->unrecorded_token[t], *k);
}

fg_status fg_sample_ready(fg_engine *e, fg_sampler *sm) {
    fg_status st = FG_OK;
    int k;
    while (!st && e->unrecorded_len && fg_cmdq_ended(&e->q, e->sampled_copy[e->unrecorded_batch[e->unrecorded_head]]))
        st = record_oldest(e, sm, &k);
    return st;
}

fg_status fg_sample_until(fg_engine *e, fg_sampler *sm, int k) {
    int found = k < 0;
    for (int q = 0; q < e->unrecorded_len && !found; q++)
        found = e->unrecorded_batch[(e->unrecorded_head + q) % e->pl.K] == k;
    fg_status st = FG_OK;
    for (int kt = -1; found && !st && e->unrecorded_len && (k < 0 || kt != k);)
        st = record_oldest(e, sm, &kt);
    return st;
}

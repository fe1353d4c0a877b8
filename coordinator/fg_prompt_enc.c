/* fg_prompt_enc.c - text prompts and conversations to token ids, shared by
 * `flexgen run`, `flexgen policy` and `flexgen tokenize --prompts` (see
 * fg_prompt_enc.h). */
#include "fg_prompt_enc.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

fg_status fg_prompt_open_tok(const char *model_dir, const char *tok_file, int dummy, int need, fg_tok **tok) {
    *tok = NULL;
    if (tok_file) return fg_tok_open_file(tok_file, tok);
    if (dummy) {
        fg_status st = fg_tok_open_gpt2_cache(tok);
        return st && need ? st : FG_OK;   /* ids alone need no tokenizer */
    }
    size_t ml = strlen(model_dir);
    if (ml > 5 && !strcmp(model_dir + ml - 5, ".gguf")) {
        /* a GGUF file's own tokenizer (tokenizer.ggml.*); ids alone need none */
        fg_status st = fg_tok_open_model_dir(model_dir, tok);
        return st && need ? st : FG_OK;
    }
    char tj[PATH_MAX], vj[PATH_MAX];
    snprintf(tj, sizeof tj, "%s/tokenizer.json", model_dir);
    snprintf(vj, sizeof vj, "%s/vocab.json", model_dir);
    if (access(tj, F_OK) != 0 && access(vj, F_OK) != 0) {
        if (need)
            return fg_err_set(FG_EINPUT, "%s: no tokenizer.json and no vocab.json + merges.txt, so text prompts and "
                                         "--stop cannot be tokenized; give one with --tokenizer FILE (a "
                                         "tokenizer.json or llama2.c's tokenizer.bin), or use --prompt-ids",
                              model_dir);
        return FG_OK;
    }
    return fg_tok_open_model_dir(model_dir, tok);
}

fg_status fg_prompt_tokenizer(const char *model_dir, const char *tok_file, int dummy, int need, fg_wsrc *ws,
                             fg_tok **tok) {
    fg_status st = fg_prompt_open_tok(model_dir, tok_file, dummy, need, tok);
    if (st || !*tok) return st;
    fg_model_config *c = fg_wsrc_config_mut(ws);
    if (dummy && !tok_file && fg_tok_vocab_size(*tok) > c->vocab_size) {   /* a dummy whose vocabulary cannot hold GPT-2's */
        fg_tok_destroy(tok);
        return need ? fg_err_set(FG_EINPUT, "--dummy %s: its vocabulary (%d) cannot hold GPT-2's, so text prompts "
                                            "and --stop cannot be tokenized; use --prompt-ids", c->name, c->vocab_size)
                    : FG_OK;
    }
    if (dummy && !tok_file) {
        /* GPT-2's vocabulary has one special token for BOS, EOS and padding */
        c->bos_id = c->eos_ids[0] = c->pad_id = fg_tok_eos_id(*tok);
        c->n_eos = 1;
        return FG_OK;
    }
    if (fg_tok_vocab_size(*tok) > c->vocab_size)
        return fg_err_set(FG_EINPUT, "%s: the tokenizer has %d tokens but the model's vocab_size is %d",
                          tok_file ? tok_file : model_dir, fg_tok_vocab_size(*tok), c->vocab_size);
    return FG_OK;
}

/* "PATH:LINE: WHAT" before the message in the error slot. */
static fg_status at_line(fg_status st, const char *path, int line, const char *what) {
    return fg_err_set(st, "%s:%d: %s%s", path, line, what, fg_err_msg());
}

/* A "messages" prompt: its text becomes the conversation rendered with the
 * chat template (opened at the first such prompt). */
static fg_status render_chat(const char *path, fg_prompt *p, fg_tok *tok, const fg_chat_src *chat,
                             fg_prompt_chat **pc) {
    fg_status st = FG_OK;
    if (!*pc) st = chat ? fg_prompt_chat_open(chat, tok, pc) : fg_err_set(FG_EINPUT, "no chat template here");
    if (st) return at_line(st, path, p->line, "a \"messages\" prompt needs the chat template: ");
    char *text;
    size_t len;
    if ((st = fg_prompt_chat_render(*pc, p->messages, &text, &len)))
        return at_line(st, path, p->line, "rendering the chat template: ");
    free(p->text);
    p->text = text, p->len = len;
    return FG_OK;
}

/* One prompt: prefix, text ids, suffix, cut from the left to CTX. A
 * rendered conversation gets neither prefix nor suffix: the template wrote
 * the special tokens the model wants, as apply_chat_template does. */
/* budget names what set gen_len: "--gen-len", or a request's "max_tokens". */
static fg_status encode_one(fg_tok *tok, const fg_prompt *p, const char *path, int ctx, int gen_len, const char *budget,
                            int max_pos, int truncate, int *too_long, fg_seq_in *in) {
    const int32_t *pre, *suf;
    size_t n_pre = fg_tok_prefix_ids(tok, &pre), n_suf = fg_tok_suffix_ids(tok, &suf);
    if (p->messages) n_pre = n_suf = 0;
    int32_t *ids = NULL;
    size_t m = 0;
    if (fg_tok_encode_ex(tok, p->text, p->len, FG_TOK_PARSE_SPECIAL, &ids, &m))
        return at_line(FG_EINPUT, path, p->line, "");
    size_t total = n_pre + m + n_suf, keep = total;
    if (!total) {
        free(ids);
        return fg_err_set(FG_EINPUT, "%s:%d: the prompt has no tokens (it is empty and the tokenizer adds no BOS)",
                          path, p->line);
    }
    if (total > (size_t)ctx) {
        *too_long = !truncate;
        if (!truncate) {
            free(ids);
            return fg_err_set(FG_EINPUT, "%s:%d: the prompt is %zu tokens; with %s %d the model's %d positions "
                                         "allow %d (use --truncate to cut it from the left)",
                              path, p->line, total, budget, gen_len, max_pos, ctx);
        }
        if ((size_t)ctx < n_pre + n_suf + 1) {
            free(ids);
            return fg_err_set(FG_EINPUT, "%s:%d: %s %d leaves %d positions, fewer than the tokenizer's %zu "
                                         "special tokens and one of text", path, p->line, budget, gen_len, ctx,
                              n_pre + n_suf);
        }
        keep = (size_t)ctx;
        fg_warn("%s:%d: prompt cut from %zu to its last %zu tokens (--truncate)", path, p->line, total, keep);
    }
    size_t text_keep = keep - n_pre - n_suf;
    in->ids = fg_xmalloc(sizeof(int32_t) * (keep ? keep : 1));
    in->len = (int)keep;
    memcpy(in->ids, pre, sizeof(int32_t) * n_pre);
    memcpy(in->ids + n_pre, ids + (m - text_keep), sizeof(int32_t) * text_keep);
    memcpy(in->ids + n_pre + text_keep, suf, sizeof(int32_t) * n_suf);
    free(ids);
    return FG_OK;
}

/* A Batch API request (fg_batch.h): rendered and encoded as a prompt is,
 * against the context its own max_tokens leaves; whatever would refuse a
 * prompt fails the request alone, which then has no ids. */
static void encode_request(fg_tok *tok, fg_prompt *p, fg_batch_req *r, const char *path, const fg_model_config *c,
                           const fg_chat_src *chat, int gen_len, int truncate, fg_prompt_chat **pc, fg_seq_in *in) {
    int want = r->max_tokens ? r->max_tokens : gen_len, ctx = c->max_pos - want;
    if (r->err_code) return;
    if (ctx < 1) {
        fg_batch_fail(r, "context_length_exceeded", "%s:%d: %d tokens to generate leave no room for a prompt in the "
                      "model's %d positions", path, p->line, want, c->max_pos);
        return;
    }
    if (r->ids) {   /* a completion given as token ids: no tokenizer, the ids as they are */
        for (int t = 0; t < r->n_ids; t++)
            if (r->ids[t] >= c->vocab_size) {
                fg_batch_fail(r, "invalid_request", "%s:%d: body.prompt[%d]: id %d is out of range [0, %d)", path,
                              p->line, t, r->ids[t], c->vocab_size);
                return;
            }
        if (r->n_ids > ctx) {
            fg_batch_fail(r, "context_length_exceeded", "%s:%d: the prompt is %d tokens; with max_tokens %d the "
                          "model's %d positions allow %d", path, p->line, r->n_ids, want, c->max_pos, ctx);
            return;
        }
        in->ids = fg_xmalloc(sizeof(int32_t) * (size_t)r->n_ids);
        memcpy(in->ids, r->ids, sizeof(int32_t) * (size_t)r->n_ids);
        in->len = r->n_ids;
        return;
    }
    if (!tok) {
        fg_batch_fail(r, "invalid_request", "%s:%d: the model has no tokenizer: only a completion's token ids can run",
                      path, p->line);
        return;
    }
    int too_long = 0;
    fg_status st = p->messages ? render_chat(path, p, tok, chat, pc) : FG_OK;
    if (!st) st = encode_one(tok, p, path, ctx, want, r->max_tokens ? "max_tokens" : "--gen-len", c->max_pos, truncate,
                             &too_long, in);
    if (st == FG_ERUNTIME) fg_exit_on(st);   /* not the request's fault: the run stops */
    if (st) fg_batch_fail(r, too_long ? "context_length_exceeded" : "invalid_request", "%s", fg_err_msg());
}

fg_status fg_prompt_encode(const char *path, fg_tok *tok, const fg_model_config *c, const fg_chat_src *chat,
                           int gen_len, int truncate, fg_prompt_list *text, fg_seq_in **out, int *n_out) {
    fg_status st = fg_prompts_read(path, text);
    if (st) return st;
    if (text->req) {
        fg_seq_in *in = fg_xcalloc(text->n ? text->n : 1, sizeof *in);
        fg_prompt_chat *pc = NULL;
        for (size_t i = 0; i < text->n; i++)
            encode_request(tok, &text->items[i], &text->req[i], path, c, chat, gen_len, truncate, &pc, &in[i]);
        fg_prompt_chat_close(&pc);
        *out = in;
        *n_out = (int)text->n;
        return FG_OK;
    }
    int n = (int)text->n, ctx = c->max_pos - gen_len;
    if (ctx < 2)
        return fg_err_set(FG_EINPUT, "--gen-len %d leaves no room for a prompt in %d positions", gen_len, c->max_pos);
    fg_seq_in *in = fg_xcalloc((size_t)n, sizeof *in);
    fg_prompt_chat *pc = NULL;
    for (int i = 0; i < n && !st; i++) {
        fg_prompt *p = &text->items[i];
        if (!p->messages || !(st = render_chat(path, p, tok, chat, &pc)))
            st = encode_one(tok, p, path, ctx, gen_len, "--gen-len", c->max_pos, truncate, &(int){0}, &in[i]);
    }
    fg_prompt_chat_close(&pc);
    if (st) {
        fg_prompt_ids_free(in, (size_t)n);
        return st;
    }
    *out = in;
    *n_out = n;
    return FG_OK;
}

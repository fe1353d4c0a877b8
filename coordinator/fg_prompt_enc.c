/* fg_prompt_enc.c - text prompts to token ids, shared by `flexgen run` and
 * `flexgen policy` (see fg_prompt_enc.h). */
#include "fg_prompt_enc.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

fg_status fg_prompt_tokenizer(const char *model_dir, int dummy, int need, fg_wsrc *ws, fg_tok **tok) {
    *tok = NULL;
    fg_opt_config *c = fg_wsrc_config_mut(ws);
    if (dummy) {
        fg_status st = fg_tok_open_gpt2_cache(tok);
        if (st) return need ? st : FG_OK;   /* ids alone need no tokenizer */
        if (fg_tok_vocab_size(*tok) > c->vocab_size) {   /* a dummy whose vocabulary cannot hold GPT-2's */
            fg_tok_destroy(tok);
            return need ? fg_err_set(FG_EINPUT, "--dummy %s: its vocabulary (%d) cannot hold GPT-2's, so text "
                                                "prompts and --stop cannot be tokenized; use --prompt-ids",
                                     c->name, c->vocab_size)
                        : FG_OK;
        }
        /* GPT-2's vocabulary has one special token for BOS, EOS and padding */
        c->bos_id = c->eos_ids[0] = c->pad_id = fg_tok_eos_id(*tok);
        c->n_eos = 1;
        return FG_OK;
    }
    char vj[PATH_MAX];
    snprintf(vj, sizeof vj, "%s/vocab.json", model_dir);
    if (access(vj, F_OK) != 0) {
        if (need)
            return fg_err_set(FG_EINPUT, "%s: no vocab.json + merges.txt, so text prompts and --stop cannot be "
                                         "tokenized; use --prompt-ids", model_dir);
        return FG_OK;
    }
    fg_status st = fg_tok_open_model_dir(model_dir, tok);
    if (st) return st;
    if (fg_tok_vocab_size(*tok) > c->vocab_size)
        return fg_err_set(FG_EINPUT, "%s: has %d tokens but the model's vocab_size is %d", vj, fg_tok_vocab_size(*tok),
                          c->vocab_size);
    return FG_OK;
}

/* FG_EINPUT or ST: "PATH:LINE: WHAT: " before the message in the error slot (copied first: it is the slot). */
static fg_status at_line(fg_status st, const char *path, int line, const char *what) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", fg_err_msg());
    return fg_err_set(st, "%s:%d: %s%s", path, line, what, msg);
}

/* A "messages" prompt: its text becomes the conversation rendered with the chat template (opened at the
 * first such prompt), and its ids that text's. The special tokens the template writes (<|im_start|>, BOS)
 * are to be encoded as the tokens they name: the encoder that does so replaces fg_tok_encode here. */
static fg_status encode_chat(const char *path, fg_prompt *p, fg_tok *tok, const fg_chat_src *chat,
                             fg_prompt_chat **pc, int32_t **ids, size_t *m) {
    fg_status st = FG_OK;
    if (!*pc) st = chat ? fg_prompt_chat_open(chat, tok, pc) : fg_err_set(FG_EINPUT, "no chat template here");
    if (st) return at_line(st, path, p->line, "a \"messages\" prompt needs the chat template: ");
    char *text;
    size_t len;
    if ((st = fg_prompt_chat_render(*pc, p->messages, &text, &len)))
        return at_line(st, path, p->line, "rendering the chat template: ");
    free(p->text);
    p->text = text, p->len = len;
    if ((st = fg_tok_encode(tok, p->text, p->len, ids, m))) return at_line(FG_EINPUT, path, p->line, "");
    return FG_OK;
}

fg_status fg_prompt_encode(const char *path, fg_tok *tok, const fg_opt_config *c, const fg_chat_src *chat,
                           int gen_len, int truncate, fg_prompt_list *text, fg_seq_in **out, int *n_out) {
    fg_status st = fg_prompts_read(path, text);
    if (st) return st;
    int n = (int)text->n, ctx = c->max_pos - gen_len, bos = fg_tok_bos_id(tok);
    if (ctx < 2)
        return fg_err_set(FG_EINPUT, "--gen-len %d leaves no room for a prompt in %d positions", gen_len, c->max_pos);
    fg_seq_in *in = fg_xcalloc((size_t)n, sizeof *in);
    fg_prompt_chat *pc = NULL;
    for (int i = 0; i < n && !st; i++) {
        fg_prompt *p = &text->items[i];
        int32_t *ids = NULL;
        size_t m = 0;
        if (p->messages && (st = encode_chat(path, p, tok, chat, &pc, &ids, &m))) break;
        if (!p->messages && (st = fg_tok_encode(tok, p->text, p->len, &ids, &m))) {
            st = at_line(FG_EINPUT, path, p->line, "");
            break;
        }
        /* BOS first, unless the chat template wrote it (or chose not to) */
        int has_bos = p->messages ? m && bos >= 0 && ids[0] == bos : bos >= 0;
        const int32_t *body = ids + (p->messages && has_bos);
        m -= (size_t)(p->messages && has_bos);
        size_t total = m + (size_t)has_bos;
        size_t keep = total;
        if (!total) {
            free(ids);
            st = fg_err_set(FG_EINPUT, "%s:%d: the prompt has no tokens", path, p->line);
            break;
        }
        if (total > (size_t)ctx) {
            if (!truncate) {
                free(ids);
                st = fg_err_set(FG_EINPUT, "%s:%d: the prompt is %zu tokens; with --gen-len %d the model's %d positions "
                                           "allow %d (use --truncate to cut it from the left)",
                                path, p->line, total, gen_len, c->max_pos, ctx);
                break;
            }
            keep = (size_t)ctx;
            fg_warn("%s:%d: prompt cut from %zu to its last %zu tokens (--truncate)", path, p->line, total, keep);
        }
        in[i].ids = fg_xmalloc(sizeof(int32_t) * keep);
        in[i].len = (int)keep;
        size_t skip = total - keep, j = 0;
        if (has_bos) in[i].ids[j++] = bos;
        memcpy(in[i].ids + j, body + skip, sizeof(int32_t) * (keep - j));
        free(ids);
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

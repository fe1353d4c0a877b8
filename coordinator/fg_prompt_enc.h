/* fg_prompt_enc.h - text prompts (--prompts FILE, fg_prompts.h) to token
 * ids with the model's tokenizer, as `flexgen run` feeds them to the model
 * and `flexgen policy` sizes a workload from them. */
#ifndef FG_PROMPT_ENC_H
#define FG_PROMPT_ENC_H

#include "fg_prompt_chat.h"
#include "fg_prompts.h"
#include "fg_tokenizer.h"
#include "fg_weights.h"

/* The tokenizer file tok_file when given (--tokenizer: a tokenizer.json or
 * llama2.c's tokenizer.bin, fg_tok_open_file); else that of a model
 * directory (its tokenizer.json, with tokenizer_config.json and
 * generation_config.json where present; else its vocab.json + merges.txt:
 * fg_tok_open_model_dir), or GPT-2's for a dummy model. *tok stays NULL
 * where there is none and need is 0 (ids alone need no tokenizer); with
 * need, that is FG_EINPUT naming the model. What `flexgen run` and
 * `flexgen tokenize` both open. */
fg_status fg_prompt_open_tok(const char *model_dir, const char *tok_file, int dummy, int need, fg_tok **tok);

/* fg_prompt_open_tok for a run's model: a dummy model's config also takes
 * GPT-2's BOS, EOS and padding ids; a directory's tokenizer must fit the
 * model's vocab_size. */
fg_status fg_prompt_tokenizer(const char *model_dir, const char *tok_file, int dummy, int need, fg_wsrc *ws,
                             fg_tok **tok);

/* Reads `path` into *text and tokenizes each prompt as the model is fed it:
 * the tokenizer's prefix (fg_tok_prefix_ids: BOS where the tokenizer puts
 * one; always for vocab.json + merges.txt, as OPT's tokenizer does), the
 * text's ids (special tokens written in it, such as <|im_start|>, become
 * their ids with a tokenizer.json, as transformers does by default), then
 * its suffix (EOS where add_eos_token says so). A "messages" prompt is first
 * rendered with the chat template CHAT names (fg_prompt_chat.h; its text in
 * *text becomes the rendering), and its ids are the rendering's alone: the
 * template writes BOS where the model wants it, as apply_chat_template
 * does. A prompt that leaves fewer than gen_len of the model's c->max_pos
 * positions is refused (FG_EINPUT naming the file and line), or with
 * truncate cut from the left (prefix and suffix kept). A Batch API file's
 * requests (text->req) are encoded each against its own max_tokens, and
 * what would refuse a prompt fails that request alone (its ids NULL, len 0;
 * fg_batch_fail). *out (n_out) is
 * freed with fg_prompt_ids_free, *text with fg_prompts_free. */
fg_status fg_prompt_encode(const char *path, fg_tok *tok, const fg_model_config *c, const fg_chat_src *chat,
                           int gen_len, int truncate, fg_prompt_list *text, fg_seq_in **out, int *n_out);

#endif

/* fg_prompt_enc.h - text prompts (--prompts FILE, fg_prompts.h) to token
 * ids with the model's tokenizer, as `flexgen run` feeds them to the model
 * and `flexgen policy` sizes a workload from them. */
#ifndef FG_PROMPT_ENC_H
#define FG_PROMPT_ENC_H

#include "fg_prompt_chat.h"
#include "fg_prompts.h"
#include "fg_tokenizer.h"
#include "fg_weights.h"

/* The tokenizer of a model directory (its vocab.json + merges.txt), or
 * GPT-2's for a --dummy model (which also sets the config's BOS, EOS and
 * padding ids). *tok stays NULL where there is none and need is 0 (ids
 * alone need no tokenizer); with need, that is FG_EINPUT naming the dir. */
fg_status fg_prompt_tokenizer(const char *model_dir, int dummy, int need, fg_wsrc *ws, fg_tok **tok);

/* Reads `path` into *text and tokenizes each prompt: BOS, then the text's
 * ids. A "messages" prompt is first rendered with the chat template CHAT
 * names (fg_prompt_chat.h; its text in *text becomes the rendering) and its
 * ids are the rendering's alone: the template writes BOS where the model
 * wants it, as apply_chat_template does. A prompt that leaves fewer than
 * gen_len of the model's positions is refused (FG_EINPUT naming the file and
 * line), or with truncate cut from the left (a leading BOS kept). *out
 * (n_out) is freed with fg_prompt_ids_free, *text with fg_prompts_free. */
fg_status fg_prompt_encode(const char *path, fg_tok *tok, const fg_opt_config *c, const fg_chat_src *chat,
                           int gen_len, int truncate, fg_prompt_list *text, fg_seq_in **out, int *n_out);

#endif

/* fg_prompt_chat.h - a prompt file's "messages" lines (fg_prompts.h) to
 * text with the model's chat template (tokenizer/fg_chat.h), as Hugging
 * Face's apply_chat_template(messages, add_generation_prompt=True) makes it.
 *
 * The template: --chat-template FILE when given; else, for a GGUF file, its
 * metadata's tokenizer.chat_template; else the model directory's
 * chat_template.jinja, else its tokenizer_config.json "chat_template" (a
 * string, or a list of {"name", "template"} of which "default" is taken).
 * bos_token and eos_token come from tokenizer_config.json (a string or
 * {"content": ...}), else (a GGUF file always) from the tokenizer's BOS and
 * EOS tokens. */
#ifndef FG_PROMPT_CHAT_H
#define FG_PROMPT_CHAT_H

#include "fg_chat.h"
#include "fg_tokenizer.h"

/* Where a run's chat template comes from; either may be NULL (--dummy models have no directory). model_dir
 * may be a GGUF file. */
typedef struct {
    const char *model_dir;
    const char *template_path; /* --chat-template FILE */
} fg_chat_src;

typedef struct fg_prompt_chat fg_prompt_chat;

/* Load and parse the template. FG_EINPUT naming the file when there is none, or it does not parse; the
 * message of "none" says how to give one. TOK (may be NULL) supplies the special tokens' defaults. */
fg_status fg_prompt_chat_open(const fg_chat_src *src, const fg_tok *tok, fg_prompt_chat **out);
void fg_prompt_chat_close(fg_prompt_chat **pc);

/* MESSAGES (a JSON list, as fg_prompts keeps it) rendered with add_generation_prompt = true; *text malloc'd. */
fg_status fg_prompt_chat_render(const fg_prompt_chat *pc, const char *messages, char **text, size_t *len);

#endif

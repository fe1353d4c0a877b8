/* fg_tokenizer.h - byte-level BPE (GPT-2's scheme) from a Hugging Face
 * vocab.json + merges.txt, as the OPT models and GPT-2 ship it.
 *
 * Encoding is GPT-2's encoder.py step for step: the text is split by GPT-2's
 * pattern (run by PCRE2 with UTF and UCP), each piece's UTF-8 bytes are mapped
 * through bytes_to_unicode, and the lowest-ranked pair of merges.txt is merged
 * (every occurrence, left to right) until none applies. Ids always come from
 * vocab.json: OPT's file orders them as RoBERTa does (<s>=0, <pad>=1, </s>=2,
 * <unk>=3), GPT-2's does not, and nothing here assumes either.
 *
 * Not here: adding BOS (callers prepend fg_tok_bos_id() where the model wants
 * it), truncation to a context length, and special tokens written inside the
 * text ("</s>" in a prompt is encoded as the characters it is, as GPT-2's
 * encoder does).
 *
 * One fg_tok may be used by one thread at a time (the word cache and the
 * regex match data are per object); open one per thread otherwise. */
#ifndef FG_TOKENIZER_H
#define FG_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "fg_common.h"

typedef struct fg_tok fg_tok;

/* Load a tokenizer. Errors name the file and the line (and column for JSON):
 * FG_EINPUT for a malformed or inconsistent file, FG_ERUNTIME otherwise. */
fg_status fg_tok_new(const char *vocab_json, const char *merges_txt, fg_tok **out);
void fg_tok_destroy(fg_tok **p);

/* vocab.json + merges.txt in DIR (a Hugging Face model directory). */
fg_status fg_tok_open_model_dir(const char *dir, fg_tok **out);

/* GPT-2's files in ${FLEXGEN_CACHE:-$HOME/.cache/flexgen}/gpt2/ (encoder.json,
 * vocab.bpe); FG_EINPUT with a hint to run scripts/fetch-gpt2-vocab.sh when
 * they are missing. The dummy models use this vocabulary. */
fg_status fg_tok_open_gpt2_cache(fg_tok **out);

/* Text (LEN bytes of UTF-8, NUL bytes allowed) -> token ids, no BOS.
 * *ids is malloc'd (free() it), *n its length. Invalid UTF-8 -> FG_EINPUT
 * with the byte offset of the first bad byte. */
fg_status fg_tok_encode(fg_tok *t, const char *text, size_t len, int32_t **ids, size_t *n);

/* Ids -> UTF-8 text (malloc'd, NUL-terminated, *len excludes the NUL).
 * Byte sequences that are not valid UTF-8 (a multi-byte character cut between
 * tokens) become U+FFFD per maximal ill-formed subpart, as Python's
 * errors="replace" and JavaScript's TextDecoder do. With SKIP_SPECIAL, the
 * special tokens (<s>, </s>, <pad>, <unk>, <|endoftext|>) are left out.
 * An id outside the vocabulary -> FG_EINPUT naming its position. */
fg_status fg_tok_decode(fg_tok *t, const int32_t *ids, size_t n, int skip_special,
                        char **text, size_t *len);

/* The raw bytes one token stands for (not necessarily valid UTF-8 alone);
 * NULL if ID is not in the vocabulary. For stop strings and streaming. */
const uint8_t *fg_tok_token_bytes(const fg_tok *t, int32_t id, size_t *len);

/* vocab.json's string for ID (byte-encoded form, e.g. "Ġthe"), or NULL. */
const char *fg_tok_token(const fg_tok *t, int32_t id);

/* Id of a vocab.json string (e.g. "</s>"), or -1 if absent. */
int32_t fg_tok_id(const fg_tok *t, const char *token);

/* One past the largest id in vocab.json (ids need not be dense). */
int32_t fg_tok_vocab_size(const fg_tok *t);

/* Whether ID is one of the special tokens that decode can skip. */
int fg_tok_is_special(const fg_tok *t, int32_t id);

/* The id the model's tokenizer puts first: </s> when the vocabulary has it
 * (OPT, as Hugging Face's OPT tokenizer does), else <|endoftext|> (GPT-2);
 * -1 if neither exists. OPT and GPT-2 use the same token as EOS. */
int32_t fg_tok_bos_id(const fg_tok *t);
int32_t fg_tok_eos_id(const fg_tok *t);

/* Turn the word cache on or off; either way it starts empty (the benchmark
 * measures a cold cache filling up). On by default. */
void fg_tok_set_cache(fg_tok *t, int on);

/* Whether PCRE2 compiled the pre-tokenizer pattern to machine code (JIT);
 * without it matching runs in PCRE2's interpreter, slower (the benchmark
 * reports which one it measured). */
int fg_tok_jit(const fg_tok *t);

/* Check that BUF is UTF-8 as Unicode defines it (no overlong forms, no
 * surrogates, nothing above U+10FFFF). Returns 1 if valid; else 0 and the
 * offset of the first byte of the first ill-formed sequence in *bad. */
int fg_tok_utf8_valid(const char *buf, size_t len, size_t *bad);

#endif

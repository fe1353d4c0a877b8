/* fg_tokenizer.h - BPE tokenizers: GPT-2's byte-level scheme from a Hugging
 * Face vocab.json + merges.txt (OPT, GPT-2), and the BPE models of a Hugging
 * Face tokenizer.json (Llama 2/3, Mistral, Qwen2/3; see fg_tok_open_hf).
 *
 * vocab.json + merges.txt:
 * Encoding is GPT-2's encoder.py step for step: the text is split by GPT-2's
 * pattern (run by PCRE2 with UTF and UCP), each piece's UTF-8 bytes are mapped
 * through bytes_to_unicode, and the lowest-ranked pair of merges.txt is merged
 * (every occurrence, left to right) until none applies. Ids always come from
 * vocab.json: OPT's file orders them as RoBERTa does (<s>=0, <pad>=1, </s>=2,
 * <unk>=3), GPT-2's does not, and nothing here assumes either.
 *
 * Not here: truncation to a context length. For vocab.json + merges.txt,
 * special tokens written inside the text ("</s>" in a prompt) are encoded as
 * the characters they are, as GPT-2's encoder does, and BOS is added only by
 * FG_TOK_ADD_SPECIAL or the caller.
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

/* A Hugging Face tokenizer.json with a BPE model, and optionally its
 * tokenizer_config.json (NULL: none) for bos_token, eos_token, add_bos_token
 * and add_eos_token. What is implemented (docs/ARCHITECTURE.md, tokenizer/):
 *  - model BPE: merges as "a b" strings or [a, b] pairs, byte_fallback
 *    (<0xNN> tokens), unk_token, fuse_unk, ignore_merges;
 *  - normalizer: null, Prepend, Replace with a String pattern, NFC (where
 *    built with libutf8proc), or a Sequence of them;
 *  - pre_tokenizer: null, Split (Regex or String pattern, every behavior,
 *    invert), ByteLevel (use_regex: GPT-2's pattern; add_prefix_space as the
 *    first step), Metaspace (first step; prepend_scheme, split), or a
 *    Sequence of them;
 *  - decoder: ByteLevel, or Metaspace (first), Replace (String),
 *    ByteFallback, Fuse, Strip, or a Sequence of them;
 *  - post_processor: null, TemplateProcessing (single template), ByteLevel,
 *    RobertaProcessing, BertProcessing, or a Sequence of them;
 *  - added_tokens: matched in the text before anything else (leftmost,
 *    longest first), never split; lstrip, rstrip and normalized honoured.
 * Anything else the format allows (WordPiece, Unigram, WordLevel models,
 * other normalizers, pre-tokenizers, decoders, post-processors, single_word
 * added tokens, ...) is refused with FG_EINPUT naming the file and the part
 * ("tokenizer.json: normalizer type 'NFKC' is not supported"): never a silent
 * mis-tokenization. */
fg_status fg_tok_open_hf(const char *tokenizer_json, const char *tokenizer_config_json, fg_tok **out);

/* llama2.c's tokenizer.bin (any model's; fg_tok_l2c.c): encoding and
 * decoding as llama2.c's run.c does them, BOS (1) put first, </s> (2) the
 * EOS. FG_EINPUT naming the file and the token for a bad length, bytes that
 * are not UTF-8, or a file that ends early. */
fg_status fg_tok_open_llama2c(const char *path, fg_tok **out);

/* A tokenizer in one file: a tokenizer.json (its first non-blank byte is
 * "{"), else llama2.c's tokenizer.bin. */
fg_status fg_tok_open_file(const char *path, fg_tok **out);

/* The tokenizer in a GGUF file's metadata (tokenizer.ggml.*): model "llama"
 * (SentencePiece BPE by score, byte fallback, space prefix) or "gpt2"
 * (byte-level BPE with the pre-tokenizer tokenizer.ggml.pre names), as
 * llama.cpp tokenizes them; tokens of type control, unknown and user-defined
 * are added tokens (the first two special); BOS, EOS (with eot and eom) and
 * add_bos_token / add_eos_token as llama.cpp reads them. Anything else
 * (bert, t5, rwkv, an unknown pre-tokenizer name) is FG_EINPUT naming the
 * file, the key and the value. fg_tok_open_gguf_file takes an open reader
 * (model/fg_gguf.h). */
fg_status fg_tok_open_gguf(const char *path, fg_tok **out);
struct fg_gguf;
fg_status fg_tok_open_gguf_file(const struct fg_gguf *g, fg_tok **out);

/* DIR's tokenizer.json (with tokenizer_config.json and generation_config.json
 * where present: fg_tok_load_generation_config) when it has one, else its
 * vocab.json + merges.txt (a Hugging Face model directory). DIR ending in
 * ".gguf" is a GGUF file: fg_tok_open_gguf. */
fg_status fg_tok_open_model_dir(const char *dir, fg_tok **out);

/* Adds the "eos_token_id" of a generation_config.json (an int or a list of
 * ints; absent or null adds nothing) to the EOS ids. FG_EINPUT naming the
 * file for anything else or an id outside the vocabulary. */
fg_status fg_tok_load_generation_config(fg_tok *t, const char *path);

/* Adds ids to the EOS ids (duplicates are dropped). FG_EINPUT for an id
 * outside the vocabulary. */
fg_status fg_tok_add_eos_ids(fg_tok *t, const int32_t *ids, size_t n);

/* 1 when T came from a tokenizer.json, 0 for vocab.json + merges.txt. */
int fg_tok_is_hf(const fg_tok *t);

/* GPT-2's files in ${FLEXGEN_CACHE:-$HOME/.cache/flexgen}/gpt2/ (encoder.json,
 * vocab.bpe); FG_EINPUT with a hint to run scripts/fetch-gpt2-vocab.sh when
 * they are missing. The dummy models use this vocabulary. */
fg_status fg_tok_open_gpt2_cache(fg_tok **out);

/* Text (LEN bytes of UTF-8, NUL bytes allowed) -> token ids, no BOS.
 * *ids is malloc'd (free() it), *n its length. Invalid UTF-8 -> FG_EINPUT
 * with the byte offset of the first bad byte. fg_tok_encode_ex(t, ..., 0, ...). */
fg_status fg_tok_encode(fg_tok *t, const char *text, size_t len, int32_t **ids, size_t *n);

/* Flags of fg_tok_encode_ex. */
#define FG_TOK_PARSE_SPECIAL 1u /* special added tokens written in the text
                                 * ("<|im_start|>") become their ids; without
                                 * it they are encoded as the characters they
                                 * are (non-special added tokens always match) */
#define FG_TOK_ADD_SPECIAL 2u   /* put fg_tok_prefix_ids before the ids and
                                 * fg_tok_suffix_ids after them */

/* fg_tok_encode with FLAGS. A vocab.json + merges.txt tokenizer has no added
 * tokens, so PARSE_SPECIAL changes nothing there. */
fg_status fg_tok_encode_ex(fg_tok *t, const char *text, size_t len, unsigned flags, int32_t **ids,
                           size_t *n);

/* What the tokenizer puts before and after a text's ids (FG_TOK_ADD_SPECIAL):
 * tokenizer.json: its post_processor's single template (TemplateProcessing's
 * special tokens around $A; RobertaProcessing's cls and sep), where
 * tokenizer_config.json's add_bos_token / add_eos_token, when given, decide
 * instead whether bos_token / eos_token are there (as transformers'
 * LlamaTokenizerFast does); vocab.json + merges.txt: fg_tok_bos_id() when
 * there is one (OPT's tokenizer puts </s> first), nothing after. Returns the
 * count; *ids points into T. */
size_t fg_tok_prefix_ids(const fg_tok *t, const int32_t **ids);
size_t fg_tok_suffix_ids(const fg_tok *t, const int32_t **ids);

/* The ids that end a generation: tokenizer.json: eos_token of
 * tokenizer_config.json, then whatever fg_tok_load_generation_config and
 * fg_tok_add_eos_ids added; vocab.json + merges.txt: fg_tok_eos_id(). */
size_t fg_tok_eos_ids(const fg_tok *t, const int32_t **ids);

/* Ids -> UTF-8 text (malloc'd, NUL-terminated, *len excludes the NUL).
 * Byte sequences that are not valid UTF-8 (a multi-byte character cut between
 * tokens) become U+FFFD per maximal ill-formed subpart, as Python's
 * errors="replace" and JavaScript's TextDecoder do. With SKIP_SPECIAL, the
 * special tokens are left out: vocab.json + merges.txt: <s>, </s>, <pad>,
 * <unk>, <|endoftext|>; tokenizer.json: the added tokens marked special.
 * A tokenizer.json's decoder is applied (a Strip after Fuse takes Llama 2's
 * leading space off the text); clean_up_tokenization_spaces is not (it is
 * lossy). An id outside the vocabulary -> FG_EINPUT naming its position. */
fg_status fg_tok_decode(fg_tok *t, const int32_t *ids, size_t n, int skip_special,
                        char **text, size_t *len);

/* The raw bytes one token stands for (not necessarily valid UTF-8 alone);
 * NULL if ID is not in the vocabulary. For stop strings and streaming. */
const uint8_t *fg_tok_token_bytes(const fg_tok *t, int32_t id, size_t *len);

/* The vocabulary's string for ID (byte-encoded form, e.g. "Ġthe"; "▁the" for
 * SentencePiece-style vocabularies; an added token's content), or NULL. */
const char *fg_tok_token(const fg_tok *t, int32_t id);

/* Id of a vocabulary string (e.g. "</s>", or an added token), or -1 if absent. */
int32_t fg_tok_id(const fg_tok *t, const char *token);

/* One past the largest id in the vocabulary and added tokens (ids need not
 * be dense). */
int32_t fg_tok_vocab_size(const fg_tok *t);

/* Whether ID is one of the special tokens that decode can skip. */
int fg_tok_is_special(const fg_tok *t, int32_t id);

/* vocab.json + merges.txt: the id the model's tokenizer puts first: </s> when
 * the vocabulary has it (OPT, as Hugging Face's OPT tokenizer does), else
 * <|endoftext|> (GPT-2); -1 if neither exists. OPT and GPT-2 use the same
 * token as EOS. tokenizer.json: bos_token of tokenizer_config.json, else the
 * template's first special token, else -1 (whether it is put first is
 * fg_tok_prefix_ids's business); EOS: the first of fg_tok_eos_ids, or -1. */
int32_t fg_tok_bos_id(const fg_tok *t);
int32_t fg_tok_eos_id(const fg_tok *t);

/* Turn the word cache on or off; either way it starts empty (the benchmark
 * measures a cold cache filling up). On by default. */
void fg_tok_set_cache(fg_tok *t, int on);

/* Whether PCRE2 compiled the pre-tokenizer pattern (a tokenizer.json: each
 * of its Split patterns) to machine code (JIT);
 * without it matching runs in PCRE2's interpreter, slower (the benchmark
 * reports which one it measured). */
int fg_tok_jit(const fg_tok *t);

/* Check that BUF is UTF-8 as Unicode defines it (no overlong forms, no
 * surrogates, nothing above U+10FFFF). Returns 1 if valid; else 0 and the
 * offset of the first byte of the first ill-formed sequence in *bad. */
int fg_tok_utf8_valid(const char *buf, size_t len, size_t *bad);

#endif

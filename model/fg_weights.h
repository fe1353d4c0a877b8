/* fg_weights.h - a source of weights of any family (OPT, the Llama family,
 * its mixtures of experts): a Hugging Face directory (model.safetensors, or
 * shards + model.safetensors.index.json), a FlexGen numpy directory (one
 * .npy file per tensor, no extension), a GGUF file, a llama2.c checkpoint,
 * or seeded dummy weights. Opening validates every tensor's name, dtype,
 * shape and byte range against the config; reading gives one tensor at a
 * time, as fp16 (fg_wsrc_read) or as the tiers hold it (fg_wsrc_read_stored:
 * a GGUF file's ggml blocks kept), so a model larger than RAM can be
 * streamed (files are mmap'ed, never slurped). */
#ifndef FG_WEIGHTS_H
#define FG_WEIGHTS_H

#include "fg_config.h"
#include "fg_fp16.h"

typedef struct fg_wsrc fg_wsrc;

/* Open a model directory. The config comes from DIR/config.json, or, for a
 * FlexGen numpy directory without one, from a directory name like
 * "opt-30b-np" (or from name_hint when given). */
fg_status fg_wsrc_open_dir(const char *dir, const char *name_hint, fg_wsrc **out);

/* Seeded random weights with the shapes of a named size of any family
 * (fg_config_by_name: opt-1.3b, llama-2-13b, mixtral-8x7b, ...): for
 * benchmarks and demos. Values: Linear weights and embeddings ~ U with std
 * 0.02 (as Hugging Face initialises OPT), norm weights near 1, small biases.
 * "NAME:LAYERS" keeps the first LAYERS decoder layers (the size's shapes,
 * a shorter model: what `flexgen profile` runs the engine on). */
fg_status fg_wsrc_open_dummy(const char *name, uint64_t seed, fg_wsrc **out);
/* The same for any config (a description's one-layer config, say: what a
 * worker's --profile --shape measures). */
fg_status fg_wsrc_open_dummy_config(const fg_model_config *cfg, uint64_t seed, fg_wsrc **out);

const fg_model_config *fg_wsrc_config(const fg_wsrc *ws);
fg_model_config *fg_wsrc_config_mut(fg_wsrc *ws);   /* e.g. token ids from a tokenizer */
const fg_spec *fg_wsrc_specs(const fg_wsrc *ws);
const char *fg_wsrc_describe(const fg_wsrc *ws);  /* "safetensors (3 shards) in DIR", for messages */

/* Which checkpoint this is, as a 64-bit XXH3 digest of what its tensors are
 * made from, taken from the source itself rather than from its description:
 * the kind of source; the config fields that shape a tensor (name, sizes,
 * pre_ln; not the token ids a tokenizer may adjust); for each file read
 * (safetensors shards, .npy files), in name order, its name, its format
 * header (the safetensors length and JSON header; the .npy magic, version
 * and header dict), and its size and mtime (ns) as seen at open; for dummy
 * weights the seed. A rewritten, re-downloaded or replaced checkpoint gets
 * another identity; the same files moved or copied with their times kept,
 * or new files beside them (tokenizer, README), keep it. Tensor data is not
 * read: a change that keeps every header, size and mtime goes unnoticed. */
uint64_t fg_wsrc_identity(const fg_wsrc *ws);

/* Read spec index `idx` (must be present) into dst: fg_spec_numel halves. */
fg_status fg_wsrc_read(fg_wsrc *ws, int idx, fg_half *dst);

/* Read spec index idx into dst as every tier holds it under the source's
 * config (fg_spec_stored_bytes bytes): fp16; for a weight matrix with
 * compress_weight set, compressed by fg_q4_pack; a GGUF file's matrix in a
 * ggml block format, its blocks (fg_wsrc_stored.c). Only a GGUF source has
 * ggml blocks: a dummy's config naming such a format is the caller's to
 * fill (fg_fmt_fill_random). */
fg_status fg_wsrc_read_stored(fg_wsrc *ws, int idx, void *dst);

void fg_wsrc_destroy(fg_wsrc **ws);

#endif

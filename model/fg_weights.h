/* fg_weights.h - a source of OPT weights: a Hugging Face directory
 * (model.safetensors, or shards + model.safetensors.index.json), a FlexGen
 * numpy directory (one .npy file per tensor, no extension), or seeded dummy
 * weights. Opening validates every tensor's name, dtype, shape and byte range
 * against the config; reading converts one tensor at a time to fp16, so a
 * model larger than RAM can be streamed (files are mmap'ed, never slurped). */
#ifndef FG_WEIGHTS_H
#define FG_WEIGHTS_H

#include "fg_config.h"
#include "fg_fp16.h"

typedef struct fg_wsrc fg_wsrc;

/* Open a model directory. The config comes from DIR/config.json, or, for a
 * FlexGen numpy directory without one, from a directory name like
 * "opt-30b-np" (or from name_hint when given). */
fg_status fg_wsrc_open_dir(const char *dir, const char *name_hint, fg_wsrc **out);

/* Seeded random weights with the shapes of a named OPT size: for benchmarks
 * and demos. Values: Linear weights and embeddings ~ U with std 0.02 (as
 * Hugging Face initialises OPT), LayerNorm weights near 1, small biases. */
fg_status fg_wsrc_open_dummy(const char *name, uint64_t seed, fg_wsrc **out);

const fg_opt_config *fg_wsrc_config(const fg_wsrc *ws);
fg_opt_config *fg_wsrc_config_mut(fg_wsrc *ws);   /* e.g. token ids from a tokenizer */
const fg_spec *fg_wsrc_specs(const fg_wsrc *ws);
const char *fg_wsrc_describe(const fg_wsrc *ws);  /* "safetensors (3 shards) in DIR" */

/* Read spec index `idx` (must be present) into dst: fg_spec_numel halves. */
fg_status fg_wsrc_read(fg_wsrc *ws, int idx, fg_half *dst);

void fg_wsrc_destroy(fg_wsrc **ws);

#endif

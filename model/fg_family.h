/* fg_family.h - what the model module knows of each family (internal to
 * model/): the one description per family that names it. A family gives its
 * sizes by name (--dummy), reads its own config.json, says which kinds its
 * kernels run (validate), and names its tensors in checkpoints. Shapes are
 * not here: fg_specs_new() derives them from the config's fields alone. */
#ifndef FG_FAMILY_H
#define FG_FAMILY_H

#include <jansson.h>

#include "fg_config.h"
#include "fg_gguf.h"

typedef struct {
    int id;                               /* FG_FAMILY_* */
    const char *name;                     /* "opt" */
    const char *const *model_types;       /* config.json model_type values, NULL-terminated */
    /* Fill cfg for size `name` (any "org/" prefix already stripped): 1 if
     * it is one of this family's, else 0. */
    int (*by_name)(const char *name, fg_model_config *cfg);
    void (*list_names)(char *buf, size_t cap);   /* appends " name" per size */
    /* The family's config.json, parsed: fills cfg (defaults of the fields
     * the file leaves out included); dir holds it (generation_config.json). */
    fg_status (*from_json)(json_t *root, const char *path, const char *dir, fg_model_config *cfg);
    /* The kinds and flags its kernels run; FG_EINPUT naming origin. */
    fg_status (*validate)(const fg_model_config *cfg, const char *origin);
    const char *layer_prefix;             /* "decoder.layers.": then "N." and a suffix */
    const char *layer_suffix[FG_LW_COUNT];
    /* A sparse layer's suffix for role w where it differs from
     * layer_suffix: the router's name, or an expert's matrix with %d for
     * its number; NULL where it does not (NULL hook: no experts). */
    const char *(*moe_suffix)(const fg_model_config *cfg, int w);
    const char *global_name[FG_GW_COUNT];
    const char *const *aliases;           /* pairs (other name, canonical name), NULL-terminated */
    /* GGUF (llama.cpp's files; NULL: the family has none): the
     * general.architecture values it reads, its config from the metadata
     * (and the file's tensors where the metadata is silent: biases, a tied
     * head), and llama.cpp's tensor names: "blk.N." then a layer suffix, or a
     * global name ("" where llama.cpp has none). gguf_ignored: tensors
     * from_gguf has already read (rope_freqs), skipped when binding. */
    const char *const *gguf_archs;
    fg_status (*from_gguf)(const fg_gguf *g, const char *arch, fg_model_config *cfg);
    const char *gguf_layer_suffix[FG_LW_COUNT];
    /* A sparse layer's llama.cpp names for the roles that stack its
     * experts (FC1, UP, FC2; "" elsewhere): the merged 3-D tensor
     * (ffn_gate_exps.weight, ne [H, Fe, E]: exactly the stack [E * Fe, H]),
     * and older files' one 2-D tensor per expert, %d its number
     * (ffn_gate.%d.weight). A sparse layer's router is gguf_layer_suffix's. */
    const char *gguf_moe_suffix[FG_LW_COUNT];
    const char *gguf_expert_suffix[FG_LW_COUNT];
    const char *gguf_global_name[FG_GW_COUNT];
    const char *const *gguf_ignored;
    /* Rows of a GGUF tensor of layer role w to unpermute (llama.cpp's Q/K
     * permutation) for architecture arch: the head count, or 0. */
    int (*gguf_unpermute)(const fg_model_config *cfg, const char *arch, int w);
} fg_family;

extern const fg_family fg_family_opt, fg_family_llama;

/* The Llama family's rows of a layer role w (-1: a global tensor) stored in
 * interleaved rotary order, as GGUF's llama architecture and llama2.c
 * checkpoints store q and k: the heads to unpermute with, or 0. */
int fg_family_llama_unpermute_interleaved(const fg_model_config *cfg, int w);
/* The rest of a llama2.c checkpoint's config, once its header has filled
 * the sizes and `tied`: the family's kinds, eps, theta and token ids. */
void fg_family_llama_llama2c(fg_model_config *cfg);

/* The family with id `id`, or NULL. */
const fg_family *fg_family_get(int id);
/* The family that reads GGUF architecture `arch`, or NULL. */
const fg_family *fg_family_of_gguf_arch(const char *arch);

/* config.json fields: required unless has_def (then def_val when absent or
 * null); FG_EINPUT naming the file and the key. */
fg_status fg_json_int(json_t *root, const char *path, const char *key, int has_def, int def_val, int *out);
fg_status fg_json_bool(json_t *root, const char *path, const char *key, int def_val, int *out);
fg_status fg_json_float(json_t *root, const char *path, const char *key, int has_def, double def_val, float *out);
/* An int or a list of ints (eos_token_id) into ids (at most FG_MAX_EOS). */
fg_status fg_json_id_list(json_t *v, const char *path, const char *key, int *ids, int *n);

#endif

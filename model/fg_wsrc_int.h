/* fg_wsrc_int.h - private to model/'s weight sources: the source's state,
 * which fg_weights.c (safetensors, .npy, dummy) and fg_wsrc_gguf.c (GGUF)
 * both fill. Not for other callers: use fg_weights.h. */
#ifndef FG_WSRC_INT_H
#define FG_WSRC_INT_H

#include <limits.h>

#include "fg_gguf.h"
#include "fg_weights.h"

typedef enum { DT_F16, DT_BF16, DT_F32 } dtype;

typedef struct {
    char path[PATH_MAX];
    const uint8_t *map; /* whole file, read-only */
    size_t size;
    int64_t mtime_ns;   /* at open: with size and head, the file's identity */
    size_t head;        /* bytes of format header at the start (safetensors
                           length + JSON, .npy preamble + dict) */
} mapped_file;

typedef enum { WS_SAFETENSORS = 1, WS_NPY = 2, WS_DUMMY = 3, WS_GGUF = 4, WS_LLAMA2C = 5 } wsrc_kind;

typedef struct {
    int file;            /* index into ws->files; -1 = not mapped yet */
    size_t offset;       /* absolute offset of the first byte in the file (GGUF: the tensor's index) */
    dtype dt;
    int unpermute;       /* GGUF, llama2.c: heads whose interleaved Q/K row order to undo, or 0 */
} tensor_loc;

struct fg_wsrc {
    fg_model_config cfg;
    fg_spec *specs;
    tensor_loc *locs;      /* one per spec */
    /* A sparse layer's experts, each its own tensor in a Hugging Face
     * checkpoint (and an older GGUF file): (layer, FC1/FC2/UP, expert) ->
     * where that expert's matrix lives (fg_wsrc__part), file -1 where a
     * whole stack is bound instead.
     * NULL for a model without experts. */
    tensor_loc *parts;
    mapped_file *files;
    int n_files;
    wsrc_kind kind;
    uint64_t seed;
    fg_gguf *gguf;         /* WS_GGUF: the reader (fg_gguf.h), which converts the tensors */
    char desc[PATH_MAX + 64];
};

/* Map path read-only into ws->files (*idx its index). */
fg_status fg_wsrc__map_file(fg_wsrc *ws, const char *path, int *idx);
/* The location of expert e's part of stacked spec idx (fg_spec_is_experts). */
tensor_loc *fg_wsrc__part(fg_wsrc *ws, int idx, int e);
/* 1 if any expert of stacked spec idx has a part bound. */
int fg_wsrc__any_part(fg_wsrc *ws, int idx);
/* FG_EINPUT naming the first present spec with no tensor bound. */
fg_status fg_wsrc__check_complete(fg_wsrc *ws, const char *where);
/* A source of config cfg, no tensor bound yet. */
fg_wsrc *fg_wsrc__alloc(const fg_model_config *cfg);
/* fg_wsrc_gguf.c: a GGUF file as a source; tensor idx read into dst (n values). */
fg_status fg_wsrc__open_gguf(const char *path, fg_wsrc **out);
fg_status fg_wsrc__read_gguf(fg_wsrc *ws, int idx, fg_half *dst, size_t n);
/* A GGUF matrix kept in its ggml format (spec fmt): its bytes as stored,
 * rows un-permuted (fg_spec_stored_bytes bytes). */
fg_status fg_wsrc__read_raw(fg_wsrc *ws, int idx, void *dst);
/* fg_wsrc_llama2c.c: a llama2.c checkpoint as a source (every header
 * field and size checked against the file's length). */
fg_status fg_wsrc__open_llama2c(const char *path, fg_wsrc **out);

#endif

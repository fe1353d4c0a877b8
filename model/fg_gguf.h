/* fg_gguf.h - a reader of GGUF files (llama.cpp's model format, versions 2
 * and 3): the header, every metadata value type (arrays of scalars and
 * strings included), the tensor infos, and tensors converted to fp16.
 *
 * It is a parser of outside input, so every count and length is checked
 * against the file's size before anything is allocated or read, and a bad
 * file gives FG_EINPUT with a message naming the file, the key or tensor,
 * and what is wrong; it never crashes (fuzz/fuzz_gguf.c). The file is
 * mapped read-only; names, keys and scalar strings are NUL-terminated copies,
 * array strings point into the mapping (pointer + length: they may hold NUL).
 *
 * Tensor types read: F32, F16, BF16 (rounded to fp16 with common/fg_fp16.h)
 * and Q8_0 (blocks of 32: an fp16 scale d and 32 int8 q, each value fp16(d *
 * q)). The other ggml types are known for their sizes, so their bounds are
 * checked at open, but reading one is refused, naming it. llama.cpp's
 * converter permutes the rows of attn_q and attn_k (weights and biases) of
 * architecture "llama" for its interleaved rotary layout; the reader undoes
 * it on request (fg_gguf_read_opts.unpermute_heads). Dimensions are ggml's:
 * ne[0] varies fastest, so ne is numpy's (Hugging Face's) shape reversed. */
#ifndef FG_GGUF_H
#define FG_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "fg_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    FG_GGUF_UINT8 = 0, FG_GGUF_INT8 = 1, FG_GGUF_UINT16 = 2, FG_GGUF_INT16 = 3,
    FG_GGUF_UINT32 = 4, FG_GGUF_INT32 = 5, FG_GGUF_FLOAT32 = 6, FG_GGUF_BOOL = 7,
    FG_GGUF_STRING = 8, FG_GGUF_ARRAY = 9, FG_GGUF_UINT64 = 10, FG_GGUF_INT64 = 11,
    FG_GGUF_FLOAT64 = 12,
} fg_gguf_vtype;

/* The ggml tensor types this reader converts (others: fg_gguf_type_name). */
enum { FG_GGML_F32 = 0, FG_GGML_F16 = 1, FG_GGML_Q8_0 = 8, FG_GGML_BF16 = 30 };

#define FG_GGUF_MAX_DIMS 4
#define FG_GGUF_MAX_NAME 63 /* ggml's GGML_MAX_NAME (64) less the NUL */

typedef struct {
    const char *name;              /* owned by the reader */
    int n_dims;                    /* 1 .. FG_GGUF_MAX_DIMS */
    uint64_t ne[FG_GGUF_MAX_DIMS]; /* ne[0] fastest; unused ones are 1 */
    uint32_t type;                 /* ggml type */
    uint64_t numel;
    uint64_t offset;               /* absolute offset in the file */
    uint64_t nbytes;
} fg_gguf_tensor;

typedef struct fg_gguf fg_gguf;

fg_status fg_gguf_open(const char *path, fg_gguf **out);
void fg_gguf_close(fg_gguf **g);
const char *fg_gguf_path(const fg_gguf *g);
uint32_t fg_gguf_version(const fg_gguf *g);
uint32_t fg_gguf_alignment(const fg_gguf *g); /* general.alignment, default 32 */

/* ggml type name ("Q4_K"), or "type N" for an unknown number. */
const char *fg_gguf_type_name(uint32_t type);
/* GGUF value type name ("UINT32", "ARRAY"...). */
const char *fg_gguf_vtype_name(uint32_t vt);

/* ---- metadata: by index ---- */
int64_t fg_gguf_kv_count(const fg_gguf *g);
const char *fg_gguf_kv_key(const fg_gguf *g, int64_t i);
fg_gguf_vtype fg_gguf_kv_type(const fg_gguf *g, int64_t i);
int64_t fg_gguf_find_kv(const fg_gguf *g, const char *key); /* -1 if absent */

/* ---- metadata: by key. Missing keys and wrong types are FG_EINPUT naming
 * the file, the key and the type found. ---- */
/* Any integer type or BOOL; a UINT64 above INT64_MAX is refused. */
fg_status fg_gguf_get_int(const fg_gguf *g, const char *key, int64_t *out);
/* FLOAT32, FLOAT64 or any integer type. */
fg_status fg_gguf_get_float(const fg_gguf *g, const char *key, double *out);
fg_status fg_gguf_get_bool(const fg_gguf *g, const char *key, int *out);
/* A STRING: NUL-terminated copy (len excludes the NUL; the value may itself
 * hold a NUL before len). len may be NULL. */
fg_status fg_gguf_get_string(const fg_gguf *g, const char *key, const char **s, size_t *len);
/* An ARRAY: its element type and length. */
fg_status fg_gguf_get_array(const fg_gguf *g, const char *key, fg_gguf_vtype *elem, uint64_t *n);
/* Element i of an ARRAY, by the same rules as the scalar getters; a string
 * element is not NUL-terminated (it points into the file). */
fg_status fg_gguf_array_int(const fg_gguf *g, const char *key, uint64_t i, int64_t *out);
fg_status fg_gguf_array_float(const fg_gguf *g, const char *key, uint64_t i, double *out);
fg_status fg_gguf_array_string(const fg_gguf *g, const char *key, uint64_t i, const char **s, size_t *len);

/* ---- tensors ---- */
int64_t fg_gguf_tensor_count(const fg_gguf *g);
const fg_gguf_tensor *fg_gguf_tensor_at(const fg_gguf *g, int64_t i);
const fg_gguf_tensor *fg_gguf_find_tensor(const fg_gguf *g, const char *name); /* NULL if absent */

/* Undo the interleaved rotary row order of a q or k projection (llama.cpp's
 * Q/K permutation, which llama2.c checkpoints also have): of `rows` rows of
 * `rowlen` fp16 values split into `heads` heads of d rows, stored row
 * h*d + 2i + s becomes row h*d + s*d/2 + i (the rotate-half layout). -1,
 * x untouched, when the rows do not split into heads of an even size. */
int fg_rows_unpermute(uint16_t *x, uint64_t rows, uint64_t rowlen, int heads);
/* The same for rows of row_bytes bytes each (a row of ggml blocks). */
int fg_rows_unpermute_bytes(void *x, uint64_t rows, uint64_t row_bytes, int heads);

typedef struct {
    /* > 0: undo llama.cpp's Q/K row permutation with this many heads: n_head
     * for attn_q, n_head_kv for attn_k (the converter's rule), for weights
     * and biases alike. Stored row h*d + 2i + s becomes row h*d + s*d/2 + i
     * (d = rows / heads). 0: rows as stored. */
    int unpermute_heads;
    /* 0: a value that is not finite in fp16 (overflow past 65504, or inf or
     * NaN in the file) fails the read, naming the count; 1: it is written as
     * fp16 inf/NaN and only counted. */
    int allow_nonfinite;
} fg_gguf_read_opts;

/* Tensor `name` as n fp16 values in ggml order (row-major, ne[0] fastest),
 * n equal to its element count. Plain form: no unpermuting, non-finite
 * values refused. n_nonfinite (may be NULL) receives the count. */
fg_status fg_gguf_read_f16(const fg_gguf *g, const char *name, uint16_t *dst, size_t n);
fg_status fg_gguf_read_f16_ex(const fg_gguf *g, const char *name, uint16_t *dst, size_t n,
                              const fg_gguf_read_opts *opts, uint64_t *n_nonfinite);

/* Tensor `name`'s bytes as stored (nbytes must be its size), for a format
 * the engine keeps as it is (common/fg_fmt.h: ggml blocks); rows (ne[0]
 * values each: whole blocks) un-permuted with unpermute_heads > 0 as above.
 * A 1-D tensor cannot be un-permuted this way (FG_EINPUT). */
fg_status fg_gguf_read_raw(const fg_gguf *g, const char *name, void *dst, size_t nbytes, int unpermute_heads);

#ifdef __cplusplus
}
#endif

#endif

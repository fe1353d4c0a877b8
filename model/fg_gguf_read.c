/* fg_gguf_read.c - the GGUF reader's typed access (fg_gguf.h): metadata
 * getters that convert between the integer and float types where no value
 * is lost and refuse the rest naming the key and the type found, and the
 * conversion of F32, F16, BF16 and Q8_0 tensors to fp16 (common/fg_fp16.h
 * rounding), with the count of values not finite in fp16 and the undoing of
 * llama.cpp's Q/K row permutation. */
#include <stdlib.h>
#include <string.h>

#include "fg_fp16.h"
#include "fg_gguf_int.h"

static const uint8_t vsize[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

/* A scalar at p: 0 and *out set, or -1 (not that kind of value), or -2 (a
 * UINT64 too large for int64). */
static int scalar_int(uint32_t type, const uint8_t *p, int64_t *out) {
    switch (type) {
    case FG_GGUF_UINT8: case FG_GGUF_BOOL: { uint8_t v; memcpy(&v, p, 1); *out = v; return 0; }
    case FG_GGUF_INT8: { int8_t v; memcpy(&v, p, 1); *out = v; return 0; }
    case FG_GGUF_UINT16: { uint16_t v; memcpy(&v, p, 2); *out = v; return 0; }
    case FG_GGUF_INT16: { int16_t v; memcpy(&v, p, 2); *out = v; return 0; }
    case FG_GGUF_UINT32: { uint32_t v; memcpy(&v, p, 4); *out = v; return 0; }
    case FG_GGUF_INT32: { int32_t v; memcpy(&v, p, 4); *out = v; return 0; }
    case FG_GGUF_INT64: { int64_t v; memcpy(&v, p, 8); *out = v; return 0; }
    case FG_GGUF_UINT64: {
        uint64_t v;
        memcpy(&v, p, 8);
        if (v > (uint64_t)INT64_MAX) return -2;
        *out = (int64_t)v;
        return 0;
    }
    default: return -1;
    }
}

static int scalar_float(uint32_t type, const uint8_t *p, double *out) {
    if (type == FG_GGUF_FLOAT32) { float v; memcpy(&v, p, 4); *out = v; return 0; }
    if (type == FG_GGUF_FLOAT64) { memcpy(out, p, 8); return 0; }
    if (type == FG_GGUF_BOOL) return -1;
    int64_t i;
    int r = scalar_int(type, p, &i);
    if (r == -2) { uint64_t u; memcpy(&u, p, 8); *out = (double)u; return 0; }
    if (r == 0) *out = (double)i;
    return r;
}

static fg_status wrong(const fg_gguf *g, const char *key, const char *elem, uint32_t type, const char *want) {
    return fg_err_set(FG_EINPUT, "%s: metadata '%s'%s is %s, expected %s", fg_gguf_path(g), key, elem,
                      fg_gguf_vtype_name(type), want);
}

fg_status fg_gguf_get_int(const fg_gguf *g, const char *key, int64_t *out) {
    fg_gguf__kv_view v;
    fg_status st = fg_gguf__kv(g, key, &v);
    if (st != FG_OK) return st;
    if (v.type == FG_GGUF_ARRAY || v.type == FG_GGUF_STRING) return wrong(g, key, "", v.type, "an integer");
    int r = scalar_int(v.type, fg_gguf__map(g) + v.off, out);
    if (r == -1) return wrong(g, key, "", v.type, "an integer");
    if (r == -2) return fg_err_set(FG_EINPUT, "%s: metadata '%s' is a UINT64 above 2^63", fg_gguf_path(g), key);
    return FG_OK;
}

fg_status fg_gguf_get_float(const fg_gguf *g, const char *key, double *out) {
    fg_gguf__kv_view v;
    fg_status st = fg_gguf__kv(g, key, &v);
    if (st != FG_OK) return st;
    if (v.type == FG_GGUF_ARRAY || v.type == FG_GGUF_STRING ||
        scalar_float(v.type, fg_gguf__map(g) + v.off, out) != 0)
        return wrong(g, key, "", v.type, "a number");
    return FG_OK;
}

fg_status fg_gguf_get_bool(const fg_gguf *g, const char *key, int *out) {
    fg_gguf__kv_view v;
    fg_status st = fg_gguf__kv(g, key, &v);
    if (st != FG_OK) return st;
    if (v.type != FG_GGUF_BOOL) return wrong(g, key, "", v.type, "BOOL");
    *out = fg_gguf__map(g)[v.off] != 0;
    return FG_OK;
}

fg_status fg_gguf_get_string(const fg_gguf *g, const char *key, const char **s, size_t *len) {
    fg_gguf__kv_view v;
    fg_status st = fg_gguf__kv(g, key, &v);
    if (st != FG_OK) return st;
    if (v.type != FG_GGUF_STRING) return wrong(g, key, "", v.type, "STRING");
    *s = v.str;
    if (len) *len = (size_t)v.str_len;
    return FG_OK;
}

fg_status fg_gguf_get_array(const fg_gguf *g, const char *key, fg_gguf_vtype *elem, uint64_t *n) {
    fg_gguf__kv_view v;
    fg_status st = fg_gguf__kv(g, key, &v);
    if (st != FG_OK) return st;
    if (v.type != FG_GGUF_ARRAY) return wrong(g, key, "", v.type, "ARRAY");
    *elem = (fg_gguf_vtype)v.elem;
    *n = v.n;
    return FG_OK;
}

/* Element i of the ARRAY `key`: its view and the address of its bytes. */
static fg_status element(const fg_gguf *g, const char *key, uint64_t i, fg_gguf__kv_view *v, const uint8_t **p) {
    fg_status st = fg_gguf__kv(g, key, v);
    if (st != FG_OK) return st;
    if (v->type != FG_GGUF_ARRAY) return wrong(g, key, "", v->type, "ARRAY");
    if (i >= v->n)
        return fg_err_set(FG_EINPUT, "%s: metadata '%s' has %llu elements, element %llu asked for", fg_gguf_path(g),
                          key, (unsigned long long)v->n, (unsigned long long)i);
    *p = fg_gguf__map(g) + (v->elem == FG_GGUF_STRING ? v->str_off[i] : v->off + i * vsize[v->elem]);
    return FG_OK;
}

fg_status fg_gguf_array_int(const fg_gguf *g, const char *key, uint64_t i, int64_t *out) {
    fg_gguf__kv_view v;
    const uint8_t *p;
    fg_status st = element(g, key, i, &v, &p);
    if (st != FG_OK) return st;
    int r = v.elem == FG_GGUF_STRING ? -1 : scalar_int(v.elem, p, out);
    if (r == -1) return wrong(g, key, "'s element", v.elem, "an integer");
    if (r == -2) return fg_err_set(FG_EINPUT, "%s: metadata '%s' element %llu is a UINT64 above 2^63",
                                   fg_gguf_path(g), key, (unsigned long long)i);
    return FG_OK;
}

fg_status fg_gguf_array_float(const fg_gguf *g, const char *key, uint64_t i, double *out) {
    fg_gguf__kv_view v;
    const uint8_t *p;
    fg_status st = element(g, key, i, &v, &p);
    if (st != FG_OK) return st;
    if (v.elem == FG_GGUF_STRING || scalar_float(v.elem, p, out) != 0)
        return wrong(g, key, "'s element", v.elem, "a number");
    return FG_OK;
}

fg_status fg_gguf_array_string(const fg_gguf *g, const char *key, uint64_t i, const char **s, size_t *len) {
    fg_gguf__kv_view v;
    const uint8_t *p;
    fg_status st = element(g, key, i, &v, &p);
    if (st != FG_OK) return st;
    if (v.elem != FG_GGUF_STRING) return wrong(g, key, "'s element", v.elem, "STRING");
    uint64_t n;
    memcpy(&n, p, 8); /* the parser checked the length against the file */
    *s = (const char *)p + 8;
    *len = (size_t)n;
    return FG_OK;
}

/* ---- tensors to fp16 ---- */

#define CHUNK 256

/* Convert all of t (stored order) into dst; returns the values not finite in fp16. */
static uint64_t convert(const fg_gguf_tensor *t, const uint8_t *src, uint16_t *dst) {
    float buf[CHUNK];
    uint64_t n = t->numel;
    if (t->type == FG_GGML_F16) {
        memcpy(dst, src, (size_t)n * 2);
    } else if (t->type == FG_GGML_F32 || t->type == FG_GGML_BF16) {
        for (uint64_t i = 0; i < n; i += CHUNK) {
            size_t k = (size_t)(n - i < CHUNK ? n - i : CHUNK);
            if (t->type == FG_GGML_F32) {
                memcpy(buf, src + i * 4, k * 4);
            } else {
                for (size_t j = 0; j < k; j++) {
                    uint16_t b;
                    memcpy(&b, src + (i + j) * 2, 2);
                    buf[j] = fg_bf16_to_float(b);
                }
            }
            fg_float_to_half_n(buf, dst + i, k);
        }
    } else { /* Q8_0: blocks of an fp16 d and 32 int8 q; a value is fp16(d * q) */
        for (uint64_t b = 0; b < n / 32; b++) {
            const uint8_t *blk = src + b * 34;
            uint16_t d16;
            memcpy(&d16, blk, 2);
            float d = fg_half_to_float(d16);
            for (int j = 0; j < 32; j++) buf[j] = d * (float)(int8_t)blk[2 + j];
            fg_float_to_half_n(buf, dst + b * 32, 32);
        }
    }
    uint64_t bad = 0;
    for (uint64_t i = 0; i < n; i++) bad += (dst[i] & 0x7c00) == 0x7c00;
    return bad;
}

int fg_rows_unpermute_bytes(void *x, uint64_t rows, uint64_t row_bytes, int heads) {
    if (heads <= 0 || rows % (uint64_t)heads || (rows / (uint64_t)heads) % 2) return -1;
    uint64_t d = rows / (uint64_t)heads;
    uint8_t *p = x, *tmp = fg_xmalloc((size_t)(rows * row_bytes));
    memcpy(tmp, p, (size_t)(rows * row_bytes));
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t h = r / d, j = r % d;
        uint64_t to = h * d + (j % 2) * (d / 2) + j / 2;
        memcpy(p + to * row_bytes, tmp + r * row_bytes, (size_t)row_bytes);
    }
    free(tmp);
    return 0;
}

int fg_rows_unpermute(uint16_t *x, uint64_t rows, uint64_t rowlen, int heads) {
    return fg_rows_unpermute_bytes(x, rows, rowlen * 2, heads);
}

/* Rows of ne[0] values (one value each for a 1-D tensor). */
static fg_status unpermute(const fg_gguf *g, const fg_gguf_tensor *t, uint16_t *dst, int heads) {
    uint64_t rowlen = t->n_dims == 1 ? 1 : t->ne[0];
    uint64_t rows = t->numel / rowlen;
    if (fg_rows_unpermute(dst, rows, rowlen, heads))
        return fg_err_set(FG_EINPUT, "%s: tensor '%s': %llu rows cannot be split into %d heads of an even size "
                          "(to undo the Q/K permutation)", fg_gguf_path(g), t->name, (unsigned long long)rows, heads);
    return FG_OK;
}

fg_status fg_gguf_read_f16_ex(const fg_gguf *g, const char *name, uint16_t *dst, size_t n,
                              const fg_gguf_read_opts *opts, uint64_t *n_nonfinite) {
    static const fg_gguf_read_opts none = {0, 0};
    if (!opts) opts = &none;
    if (n_nonfinite) *n_nonfinite = 0;
    const fg_gguf_tensor *t = fg_gguf_find_tensor(g, name);
    if (!t) return fg_err_set(FG_EINPUT, "%s: no tensor '%s'", fg_gguf_path(g), name);
    if (t->type != FG_GGML_F32 && t->type != FG_GGML_F16 && t->type != FG_GGML_BF16 && t->type != FG_GGML_Q8_0)
        return fg_err_set(FG_EINPUT, "%s: tensor '%s' is %s: not supported: convert to F16, BF16 or Q8_0",
                          fg_gguf_path(g), name, fg_gguf_type_name(t->type));
    if (t->numel != (uint64_t)n)
        return fg_err_set(FG_EINPUT, "%s: tensor '%s' has %llu values, %zu expected", fg_gguf_path(g), name,
                          (unsigned long long)t->numel, n);
    fg_gguf__prefetch(g, t->offset, (size_t)t->nbytes);
    uint64_t bad = convert(t, fg_gguf__map(g) + t->offset, dst);
    if (n_nonfinite) *n_nonfinite = bad;
    if (bad && !opts->allow_nonfinite)
        return fg_err_set(FG_EINPUT, "%s: tensor '%s' (%s): %llu of %llu values are not finite in fp16 (past "
                          "65504, or inf/NaN in the file)", fg_gguf_path(g), name, fg_gguf_type_name(t->type),
                          (unsigned long long)bad, (unsigned long long)t->numel);
    if (opts->unpermute_heads) return unpermute(g, t, dst, opts->unpermute_heads);
    return FG_OK;
}

fg_status fg_gguf_read_f16(const fg_gguf *g, const char *name, uint16_t *dst, size_t n) {
    return fg_gguf_read_f16_ex(g, name, dst, n, NULL, NULL);
}

fg_status fg_gguf_read_raw(const fg_gguf *g, const char *name, void *dst, size_t nbytes, int unpermute_heads) {
    const fg_gguf_tensor *t = fg_gguf_find_tensor(g, name);
    if (!t) return fg_err_set(FG_EINPUT, "%s: no tensor '%s'", fg_gguf_path(g), name);
    if (t->nbytes != (uint64_t)nbytes)
        return fg_err_set(FG_EINPUT, "%s: tensor '%s' (%s) has %llu bytes, %zu expected", fg_gguf_path(g), name,
                          fg_gguf_type_name(t->type), (unsigned long long)t->nbytes, nbytes);
    fg_gguf__copy(g, t->offset, dst, nbytes);
    if (!unpermute_heads) return FG_OK;
    uint64_t rows = t->n_dims == 1 ? t->ne[0] : t->numel / t->ne[0];
    if (t->n_dims == 1 || fg_rows_unpermute_bytes(dst, rows, nbytes / rows, unpermute_heads))
        return fg_err_set(FG_EINPUT, "%s: tensor '%s': %llu rows cannot be split into %d heads of an even size "
                          "(to undo the Q/K permutation)", fg_gguf_path(g), t->name, (unsigned long long)rows,
                          unpermute_heads);
    return FG_OK;
}

/* fg_gguf_int.h - private to the GGUF reader: what fg_gguf_read.c (metadata
 * getters, tensor conversion) sees of the parsed file that fg_gguf.c holds.
 * Not for other callers: use fg_gguf.h. */
#ifndef FG_GGUF_INT_H
#define FG_GGUF_INT_H

#include "fg_gguf.h"

/* One metadata value, as the parser located it (offsets are absolute). */
typedef struct {
    uint32_t type, elem;     /* value type; ARRAY: element type */
    uint64_t n;              /* ARRAY: element count */
    uint64_t off;            /* the value, or an ARRAY's first element */
    const uint64_t *str_off; /* ARRAY of STRING: each element's length field */
    const char *str;         /* STRING: NUL-terminated copy */
    uint64_t str_len;
} fg_gguf__kv_view;

const uint8_t *fg_gguf__map(const fg_gguf *g);
/* n bytes of the file from off into dst, as memcpy from the map would, but
 * by reads of large chunks, each asked for ahead of its copy (fg_gguf.c). */
void fg_gguf__copy(const fg_gguf *g, uint64_t off, void *dst, size_t n);
/* Asks the kernel to start reading bytes [off, off + n) of the file. */
void fg_gguf__prefetch(const fg_gguf *g, uint64_t off, size_t n);
/* FG_EINPUT naming the file and key when it is missing. */
fg_status fg_gguf__kv(const fg_gguf *g, const char *key, fg_gguf__kv_view *v);

#endif

/* fg_store_int.h - what the tier store's files share and nothing outside
 * store/ sees: the in-memory store and file, the header's fixed sizes, the
 * little-endian field helpers, and each file's entry points. The format
 * itself is described once, in fg_store.h.
 *
 *   fg_store.c         the store as a whole: open (check every file,
 *                      rebuild what is not valid), open read-only,
 *                      verify, read, repair, invalidate, accessors
 *   fg_store_format.c  one file's bytes: its layout, its header encoded,
 *                      and read back with every check the format allows
 *   fg_store_build.c   conversion: a file streamed from the weight source
 *                      through two staging buffers into PATH.partial, then
 *                      synced and renamed by a finalizer thread */
#ifndef FG_STORE_INT_H
#define FG_STORE_INT_H

#include <limits.h>
#include <string.h>

#include "fg_store.h"

#define STORE_MAGIC "FGSTORE\0"
#define HDR_FIXED 320             /* the header's fields before the tensor table */
#define HDR_ENTRY 160             /* one tensor table entry */
#define HDR_MAX (1u << 20)        /* refuse to read a header claiming more */
#define DTYPE_FP16 1
#define DTYPE_Q4 2                /* fg_q4.h: one (dims[0], dims[1]) slice grouped along dims[0] */
#define STORE_NAME_BYTES 64       /* the header's model name field */
#define STORE_DESC_BYTES 176      /* the header's source description field */
#define STORE_ROOT_SLACK 32       /* room kept after root for "/layer-NNN.bin" */

/* One file of the store, as this build lays it out or as its header says. */
typedef struct {
    char path[PATH_MAX];
    int layer;                /* FG_STORE_GLOBALS or 0.. */
    int n;
    fg_store_tensor *t;       /* n */
    uint64_t header_bytes, file_bytes;
} sfile;

struct fg_store {
    char root[PATH_MAX];
    char name[STORE_NAME_BYTES];
    char desc[STORE_DESC_BYTES];
    uint64_t identity;
    int n_layers;
    int compression;          /* the header's code: 0 none, 1 q4g64 */
    sfile *files;             /* n_layers + 1; [0] is globals */
    int qd;                   /* aio queue depth for building and verifying */
    uint64_t req;             /* aio request size */
};

static inline uint64_t store_round_up(uint64_t x) { return (x + FG_STORE_ALIGN - 1) / FG_STORE_ALIGN * FG_STORE_ALIGN; }

/* ---- little-endian fields ---- */

static inline void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t get32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static inline uint64_t get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}
/* A NUL-padded string field of n bytes (at most n - 1 characters kept). */
static inline void put_str(uint8_t *p, size_t n, const char *s) {
    memset(p, 0, n);
    size_t l = strlen(s);
    memcpy(p, s, l < n - 1 ? l : n - 1);
}
static inline void get_str(const uint8_t *p, size_t n, char *out) {
    size_t l = strnlen((const char *)p, n - 1);
    memcpy(out, p, l);
    out[l] = 0;
}

/* ---- fg_store.c ---- */

sfile *fg_store_file_of(const fg_store *s, int file);

/* ---- fg_store_format.c ---- */

/* What a header says, once its own consistency is checked. */
typedef struct {
    uint32_t version, kind, layer, n_layers, compression;
    uint64_t identity;
    char name[STORE_NAME_BYTES], desc[STORE_DESC_BYTES];
    sfile f;                  /* layer, n, t, header_bytes, file_bytes */
} hdr_info;

/* "globals.bin" or "layer-NNN.bin". */
const char *fg_store_file_label(int file, char *buf, size_t n);
/* sf's tensors in spec order, each FG_STORE_ALIGN-aligned, and its sizes
 * (sf->layer set, sf->t allocated here). */
void fg_store_layout_file(const fg_model_config *cfg, const fg_spec *specs, sfile *sf);
/* The header of sf (sf->header_bytes bytes at h), its checksum last. */
void fg_store_encode_header(const fg_store *s, const sfile *sf, uint8_t *h);
/* Read and check one file's header. 0 with *hi filled (free hi->f.t), or
 * 1 with the reason in why: "missing", "stale: ...", "damaged ...", ... */
int fg_store_read_header(const char *path, hdr_info *hi, char *why, size_t whyn);
/* Does the header describe exactly the file this store expects? 1, or 0
 * with the reason in why. */
int fg_store_header_matches(const fg_store *s, const sfile *want, const hdr_info *hi, char *why, size_t whyn);

/* ---- fg_store_build.c ---- */

/* A converter: its aio engine (also what checking reads with), two
 * staging buffers and the finalizer thread. */
typedef struct fg_store_builder fg_store_builder;

fg_status fg_store_builder_new(int qd, uint64_t req, fg_store_builder **out);
fg_aio *fg_store_builder_aio(fg_store_builder *b);
/* Convert the files whose todo[file + 1] is set (n_todo of them, the
 * count of what was missing among them for the log line), with a progress
 * line on stderr unless quiet. Every file written gets its name and the
 * directory is synced, whatever failed; the first error is returned. */
fg_status fg_store_builder_convert(fg_store_builder *b, fg_store *s, fg_wsrc *ws, const int *todo, int n_todo,
                                   int n_missing, int quiet);
/* Rebuild one file, quietly (the directory synced after it). */
fg_status fg_store_builder_rebuild(fg_store_builder *b, fg_store *s, fg_wsrc *ws, sfile *sf);
/* Drain the finalizer, stop its thread, free the engine and the buffers. */
void fg_store_builder_free(fg_store_builder **b);

#endif

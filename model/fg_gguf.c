/* fg_gguf.c - the GGUF reader's parser (fg_gguf.h): a bounded walk over the
 * mapped file (every length and count checked against the bytes left before
 * it is used or allocated), sorted indexes of keys and tensor names for
 * lookup and for refusing duplicates, each tensor's byte range checked
 * against the data section. The metadata getters and the conversion of
 * tensors to fp16 are in fg_gguf_read.c. */
#include "fg_gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fg_gguf_int.h"

typedef struct {
    char *key;
    uint32_t type;     /* value type */
    uint32_t elem;     /* ARRAY: element type */
    uint64_t n;        /* ARRAY: element count */
    uint64_t off;      /* absolute offset of the value (ARRAY: of its first element) */
    uint64_t *str_off; /* ARRAY of STRING: offset of each element's length field */
    char *str;         /* STRING: NUL-terminated copy */
    uint64_t str_len;
} kv_entry;

struct fg_gguf {
    char path[PATH_MAX];
    const uint8_t *map;
    int fd;   /* kept open for the tensors' reads (fg_gguf__copy) */
    uint64_t size;
    uint32_t version, alignment;
    int64_t n_kv, n_t;
    kv_entry *kv;
    fg_gguf_tensor *t;
    int64_t *kv_sorted, *t_sorted; /* indexes ordered by key / name */
    uint64_t data_start;
};

typedef struct {
    const fg_gguf *g;
    uint64_t pos;
} cursor;

/* ---- type tables ---- */

static const char *const vt_names[] = {"UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32",
                                       "BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64"};
static const uint8_t vt_size[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
#define N_VT 13

typedef struct {
    const char *name;
    uint32_t block, bytes; /* values per block, bytes per block; 0 = unknown */
} ggml_type_info;

static const ggml_type_info ggml_types[] = {
    [0] = {"F32", 1, 4},        [1] = {"F16", 1, 2},        [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},     [6] = {"Q5_0", 32, 22},     [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},     [9] = {"Q8_1", 32, 36},     [10] = {"Q2_K", 256, 84},
    [11] = {"Q3_K", 256, 110},  [12] = {"Q4_K", 256, 144},  [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210},  [15] = {"Q8_K", 256, 292},  [16] = {"IQ2_XXS", 256, 66},
    [17] = {"IQ2_XS", 256, 74}, [18] = {"IQ3_XXS", 256, 98}, [19] = {"IQ1_S", 256, 50},
    [20] = {"IQ4_NL", 32, 18},  [21] = {"IQ3_S", 256, 110}, [22] = {"IQ2_S", 256, 82},
    [23] = {"IQ4_XS", 256, 136}, [24] = {"I8", 1, 1},       [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},       [27] = {"I64", 1, 8},       [28] = {"F64", 1, 8},
    [29] = {"IQ1_M", 256, 56},  [30] = {"BF16", 1, 2},      [34] = {"TQ1_0", 256, 54},
    [35] = {"TQ2_0", 256, 66},  [39] = {"MXFP4", 32, 17},
};
#define N_GGML_TYPES (sizeof ggml_types / sizeof ggml_types[0])

const char *fg_gguf_type_name(uint32_t type) {
    static __thread char buf[24];
    if (type < N_GGML_TYPES && ggml_types[type].name) return ggml_types[type].name;
    snprintf(buf, sizeof buf, "type %u", type);
    return buf;
}

const char *fg_gguf_vtype_name(uint32_t vt) {
    static __thread char buf[24];
    if (vt < N_VT) return vt_names[vt];
    snprintf(buf, sizeof buf, "value type %u", vt);
    return buf;
}

/* ---- bounded reads ---- */

static uint64_t left(const cursor *c) { return c->g->size - c->pos; }

static fg_status rd(cursor *c, void *dst, uint64_t n, const char *what) {
    if (n > left(c))
        return fg_err_set(FG_EINPUT, "%s: truncated at byte %llu: %s needs %llu bytes, %llu left", c->g->path,
                          (unsigned long long)c->pos, what, (unsigned long long)n, (unsigned long long)left(c));
    memcpy(dst, c->g->map + c->pos, (size_t)n);
    c->pos += n;
    return FG_OK;
}

static fg_status rd_u32(cursor *c, uint32_t *v, const char *what) { return rd(c, v, 4, what); }
static fg_status rd_u64(cursor *c, uint64_t *v, const char *what) { return rd(c, v, 8, what); }

/* A GGUF string: u64 length, then the bytes. Leaves its offset and length. */
static fg_status rd_str(cursor *c, uint64_t *off, uint64_t *len, const char *what) {
    fg_status st = rd_u64(c, len, what);
    if (st != FG_OK) return st;
    if (*len > left(c))
        return fg_err_set(FG_EINPUT, "%s: %s at byte %llu: string length %llu runs past the end of the file", c->g->path,
                          what, (unsigned long long)(c->pos - 8), (unsigned long long)*len);
    *off = c->pos;
    c->pos += *len;
    return FG_OK;
}

static char *dup_bytes(const uint8_t *p, uint64_t n) {
    char *s = fg_xmalloc((size_t)n + 1);
    memcpy(s, p, (size_t)n);
    s[n] = 0;
    return s;
}

/* ---- metadata ---- */

static fg_status parse_array(cursor *c, kv_entry *e) {
    const char *path = c->g->path;
    fg_status st = rd_u32(c, &e->elem, "an array's element type");
    if (st == FG_OK) st = rd_u64(c, &e->n, "an array's length");
    if (st != FG_OK) return st;
    if (e->elem == FG_GGUF_ARRAY)
        return fg_err_set(FG_EINPUT, "%s: metadata '%s': arrays of arrays are not supported", path, e->key);
    if (e->elem >= N_VT)
        return fg_err_set(FG_EINPUT, "%s: metadata '%s': unknown array element type %u", path, e->key, e->elem);
    e->off = c->pos;
    if (e->elem != FG_GGUF_STRING) {
        if (e->n > left(c) / vt_size[e->elem])
            return fg_err_set(FG_EINPUT, "%s: metadata '%s': %llu %s elements run past the end of the file", path,
                              e->key, (unsigned long long)e->n, vt_names[e->elem]);
        c->pos += e->n * vt_size[e->elem];
        return FG_OK;
    }
    if (e->n > left(c) / 8)
        return fg_err_set(FG_EINPUT, "%s: metadata '%s': %llu strings cannot fit in the %llu bytes left", path,
                          e->key, (unsigned long long)e->n, (unsigned long long)left(c));
    e->str_off = fg_xmalloc((size_t)(e->n ? e->n : 1) * sizeof *e->str_off);
    for (uint64_t i = 0; i < e->n; i++) {
        uint64_t off, len;
        char what[96];
        snprintf(what, sizeof what, "metadata '%.48s' element %llu", e->key, (unsigned long long)i);
        e->str_off[i] = c->pos;
        if ((st = rd_str(c, &off, &len, what)) != FG_OK) return st;
    }
    return FG_OK;
}

static fg_status parse_kv(cursor *c, int64_t i, kv_entry *e) {
    const char *path = c->g->path;
    uint64_t off, len;
    fg_status st = rd_str(c, &off, &len, "a metadata key");
    if (st != FG_OK) return st;
    if (len == 0 || len > 65535)
        return fg_err_set(FG_EINPUT, "%s: metadata key %lld has length %llu (1 to 65535)", path, (long long)i,
                          (unsigned long long)len);
    for (uint64_t k = 0; k < len; k++)
        if (c->g->map[off + k] < 0x20 || c->g->map[off + k] > 0x7e)
            return fg_err_set(FG_EINPUT, "%s: metadata key %lld holds byte 0x%02x: keys are printable ASCII", path,
                              (long long)i, c->g->map[off + k]);
    e->key = dup_bytes(c->g->map + off, len);
    if ((st = rd_u32(c, &e->type, "a metadata value type")) != FG_OK) return st;
    if (e->type >= N_VT)
        return fg_err_set(FG_EINPUT, "%s: metadata '%s' has unknown value type %u", path, e->key, e->type);
    if (e->type == FG_GGUF_ARRAY) return parse_array(c, e);
    if (e->type == FG_GGUF_STRING) {
        char what[80];
        snprintf(what, sizeof what, "metadata '%.60s'", e->key);
        if ((st = rd_str(c, &off, &len, what)) != FG_OK) return st;
        e->off = off;
        e->str = dup_bytes(c->g->map + off, len);
        e->str_len = len;
        return FG_OK;
    }
    e->off = c->pos;
    if (vt_size[e->type] > left(c))
        return fg_err_set(FG_EINPUT, "%s: metadata '%s': its %s value runs past the end of the file", path, e->key,
                          vt_names[e->type]);
    c->pos += vt_size[e->type];
    return FG_OK;
}

/* ---- sorted indexes ---- */

static __thread const fg_gguf *sort_g;
static const char *kv_name(const fg_gguf *g, int64_t i) { return g->kv[i].key; }
static const char *t_name(const fg_gguf *g, int64_t i) { return g->t[i].name; }
static int cmp_kv(const void *a, const void *b) {
    return strcmp(kv_name(sort_g, *(const int64_t *)a), kv_name(sort_g, *(const int64_t *)b));
}
static int cmp_t(const void *a, const void *b) {
    return strcmp(t_name(sort_g, *(const int64_t *)a), t_name(sort_g, *(const int64_t *)b));
}

/* Sort indexes 0..n-1 by name; FG_EINPUT on a duplicate. */
static fg_status build_index(const fg_gguf *g, int64_t n, int64_t **idx, int tensors) {
    *idx = fg_xmalloc((size_t)(n ? n : 1) * sizeof **idx);
    for (int64_t i = 0; i < n; i++) (*idx)[i] = i;
    sort_g = g;
    qsort(*idx, (size_t)n, sizeof **idx, tensors ? cmp_t : cmp_kv);
    const char *(*name)(const fg_gguf *, int64_t) = tensors ? t_name : kv_name;
    for (int64_t i = 1; i < n; i++)
        if (strcmp(name(g, (*idx)[i - 1]), name(g, (*idx)[i])) == 0)
            return fg_err_set(FG_EINPUT, "%s: %s '%s' appears twice", g->path, tensors ? "tensor" : "metadata key",
                              name(g, (*idx)[i]));
    return FG_OK;
}

static int64_t lookup(const fg_gguf *g, const int64_t *idx, int64_t n, const char *name, int tensors) {
    int64_t lo = 0, hi = n - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int r = strcmp(name, tensors ? t_name(g, idx[mid]) : kv_name(g, idx[mid]));
        if (r == 0) return idx[mid];
        if (r < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return -1;
}

/* ---- tensor infos ---- */

static fg_status parse_tensor(cursor *c, int64_t i, fg_gguf_tensor *t) {
    const char *path = c->g->path;
    uint64_t off, len;
    uint32_t nd;
    fg_status st = rd_str(c, &off, &len, "a tensor name");
    if (st != FG_OK) return st;
    if (len == 0 || len > FG_GGUF_MAX_NAME)
        return fg_err_set(FG_EINPUT, "%s: tensor %lld has a name of %llu bytes (1 to %d)", path, (long long)i,
                          (unsigned long long)len, FG_GGUF_MAX_NAME);
    for (uint64_t k = 0; k < len; k++)
        if (c->g->map[off + k] < 0x20)
            return fg_err_set(FG_EINPUT, "%s: tensor %lld's name holds control byte 0x%02x", path, (long long)i,
                              c->g->map[off + k]);
    t->name = dup_bytes(c->g->map + off, len);
    if ((st = rd_u32(c, &nd, "a tensor's dimension count")) != FG_OK) return st;
    if (nd < 1 || nd > FG_GGUF_MAX_DIMS)
        return fg_err_set(FG_EINPUT, "%s: tensor '%s' has %u dimensions (1 to %d)", path, t->name, nd, FG_GGUF_MAX_DIMS);
    t->n_dims = (int)nd;
    t->numel = 1;
    for (int d = 0; d < FG_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (int d = 0; d < t->n_dims; d++) {
        if ((st = rd_u64(c, &t->ne[d], "a tensor dimension")) != FG_OK) return st;
        if (t->ne[d] == 0 || t->ne[d] > ((uint64_t)1 << 62) / t->numel)
            return fg_err_set(FG_EINPUT, "%s: tensor '%s': dimension %d is %llu (0, or the element count overflows)",
                              path, t->name, d, (unsigned long long)t->ne[d]);
        t->numel *= t->ne[d];
    }
    if ((st = rd_u32(c, &t->type, "a tensor type")) != FG_OK) return st;
    if ((st = rd_u64(c, &t->offset, "a tensor offset")) != FG_OK) return st;
    if (t->type >= N_GGML_TYPES || !ggml_types[t->type].name)
        return fg_err_set(FG_EINPUT, "%s: tensor '%s' has unknown ggml type %u", path, t->name, t->type);
    const ggml_type_info *ti = &ggml_types[t->type];
    if (t->ne[0] % ti->block)
        return fg_err_set(FG_EINPUT, "%s: tensor '%s' is %s, whose rows come in blocks of %u, but ne[0] is %llu", path,
                          t->name, ti->name, ti->block, (unsigned long long)t->ne[0]);
    if (t->numel / ti->block > UINT64_MAX / ti->bytes)
        return fg_err_set(FG_EINPUT, "%s: tensor '%s' is too large", path, t->name);
    t->nbytes = t->numel / ti->block * ti->bytes;
    return FG_OK;
}

/* Offsets relative to the data section -> absolute, each checked. */
static fg_status place_tensors(fg_gguf *g) {
    uint64_t data = g->data_start <= g->size ? g->size - g->data_start : 0;
    for (int64_t i = 0; i < g->n_t; i++) {
        fg_gguf_tensor *t = &g->t[i];
        if (t->offset % g->alignment)
            return fg_err_set(FG_EINPUT, "%s: tensor '%s' has offset %llu, not a multiple of the alignment %u", g->path,
                              t->name, (unsigned long long)t->offset, g->alignment);
        if (g->data_start > g->size || t->offset > data || t->nbytes > data - t->offset)
            return fg_err_set(FG_EINPUT,
                              "%s: tensor '%s' (%s, %llu bytes at data offset %llu) runs past the end of the file "
                              "(%llu bytes of data)", g->path, t->name, fg_gguf_type_name(t->type),
                              (unsigned long long)t->nbytes, (unsigned long long)t->offset, (unsigned long long)data);
        t->offset += g->data_start;
    }
    return FG_OK;
}

static fg_status read_alignment(fg_gguf *g) {
    g->alignment = 32;
    int64_t i = fg_gguf_find_kv(g, "general.alignment");
    if (i < 0) return FG_OK;
    if (g->kv[i].type != FG_GGUF_UINT32)
        return fg_err_set(FG_EINPUT, "%s: metadata 'general.alignment' is %s, expected UINT32", g->path,
                          vt_names[g->kv[i].type]);
    uint32_t a;
    memcpy(&a, g->map + g->kv[i].off, 4);
    if (a == 0 || (a & (a - 1)))
        return fg_err_set(FG_EINPUT, "%s: metadata 'general.alignment' is %u, not a power of two", g->path, a);
    g->alignment = a;
    return FG_OK;
}

/* ---- open / close ---- */

static fg_status parse_header(fg_gguf *g, cursor *c) {
    uint32_t magic;
    uint64_t nt, nkv;
    fg_status st = rd_u32(c, &magic, "the magic");
    if (st != FG_OK) return fg_err_set(FG_EINPUT, "%s: not a GGUF file (%llu bytes)", g->path, (unsigned long long)g->size);
    if (memcmp(&magic, "GGUF", 4) != 0) return fg_err_set(FG_EINPUT, "%s: not a GGUF file (bad magic)", g->path);
    if ((st = rd_u32(c, &g->version, "the version")) != FG_OK) return st;
    if (g->version == 0x03000000u || g->version == 0x02000000u)
        return fg_err_set(FG_EINPUT, "%s: a big-endian GGUF file: not supported", g->path);
    if (g->version != 2 && g->version != 3)
        return fg_err_set(FG_EINPUT, "%s: GGUF version %u is not supported (2 or 3)", g->path, g->version);
    if ((st = rd_u64(c, &nt, "the tensor count")) != FG_OK || (st = rd_u64(c, &nkv, "the metadata count")) != FG_OK)
        return st;
    /* Each metadata pair takes at least 13 bytes, each tensor info 32. */
    if (nkv > left(c) / 13 || nt > left(c) / 32)
        return fg_err_set(FG_EINPUT, "%s: %llu metadata pairs and %llu tensors cannot fit in %llu bytes", g->path,
                          (unsigned long long)nkv, (unsigned long long)nt, (unsigned long long)g->size);
    g->n_kv = (int64_t)nkv;
    g->n_t = (int64_t)nt;
    g->kv = fg_xcalloc((size_t)(nkv ? nkv : 1), sizeof *g->kv);
    g->t = fg_xcalloc((size_t)(nt ? nt : 1), sizeof *g->t);
    return FG_OK;
}

static fg_status parse_all(fg_gguf *g) {
    cursor c = {g, 0};
    fg_status st = parse_header(g, &c);
    for (int64_t i = 0; st == FG_OK && i < g->n_kv; i++) st = parse_kv(&c, i, &g->kv[i]);
    if (st == FG_OK) st = build_index(g, g->n_kv, &g->kv_sorted, 0);
    if (st == FG_OK) st = read_alignment(g);
    for (int64_t i = 0; st == FG_OK && i < g->n_t; i++) st = parse_tensor(&c, i, &g->t[i]);
    if (st == FG_OK) st = build_index(g, g->n_t, &g->t_sorted, 1);
    if (st != FG_OK) return st;
    uint64_t pad = (g->alignment - c.pos % g->alignment) % g->alignment;
    g->data_start = c.pos + pad; /* c.pos <= size < 2^63: no overflow */
    return place_tensors(g);
}

fg_status fg_gguf_open(const char *path, fg_gguf **out) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fg_err_set(FG_EINPUT, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return fg_err_set(FG_EINPUT, "%s: not a regular file", path);
    }
    fg_gguf *g = fg_xcalloc(1, sizeof *g);
    g->fd = -1;
    snprintf(g->path, sizeof g->path, "%s", path);
    g->size = (uint64_t)sb.st_size;
    if (g->size > 0) {
        void *m = mmap(NULL, (size_t)g->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            close(fd);
            free(g);
            return fg_err_set(FG_ERUNTIME, "%s: mmap failed: %s", path, strerror(errno));
        }
        g->map = m;
    }
    g->fd = fd;
    fg_status st = parse_all(g);
    if (st != FG_OK) {
        fg_gguf_close(&g);
        return st;
    }
    *out = g;
    return FG_OK;
}

void fg_gguf_close(fg_gguf **gp) {
    fg_gguf *g = *gp;
    if (!g) return;
    for (int64_t i = 0; i < g->n_kv; i++) {
        free(g->kv[i].key);
        free(g->kv[i].str);
        free(g->kv[i].str_off);
    }
    for (int64_t i = 0; i < g->n_t; i++) free((char *)g->t[i].name);
    free(g->kv);
    free(g->t);
    free(g->kv_sorted);
    free(g->t_sorted);
    if (g->map) munmap((void *)g->map, (size_t)g->size);
    if (g->fd >= 0) close(g->fd);
    free(g);
    *gp = NULL;
}

const char *fg_gguf_path(const fg_gguf *g) { return g->path; }
uint32_t fg_gguf_version(const fg_gguf *g) { return g->version; }
uint32_t fg_gguf_alignment(const fg_gguf *g) { return g->alignment; }
int64_t fg_gguf_kv_count(const fg_gguf *g) { return g->n_kv; }
const char *fg_gguf_kv_key(const fg_gguf *g, int64_t i) { return i >= 0 && i < g->n_kv ? g->kv[i].key : NULL; }
fg_gguf_vtype fg_gguf_kv_type(const fg_gguf *g, int64_t i) { return (fg_gguf_vtype)g->kv[i].type; }
int64_t fg_gguf_tensor_count(const fg_gguf *g) { return g->n_t; }
const fg_gguf_tensor *fg_gguf_tensor_at(const fg_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_t ? &g->t[i] : NULL;
}

int64_t fg_gguf_find_kv(const fg_gguf *g, const char *key) {
    return g->kv_sorted ? lookup(g, g->kv_sorted, g->n_kv, key, 0) : -1;
}

const fg_gguf_tensor *fg_gguf_find_tensor(const fg_gguf *g, const char *name) {
    int64_t i = g->t_sorted ? lookup(g, g->t_sorted, g->n_t, name, 1) : -1;
    return i < 0 ? NULL : &g->t[i];
}

/* What fg_gguf_read.c (metadata getters, tensor conversion) needs of the
 * private layout. */
const uint8_t *fg_gguf__map(const fg_gguf *g) { return g->map; }

#define GGUF_COPY_CHUNK ((size_t)16 << 20)   /* a read's size; the next one is asked for ahead */

void fg_gguf__prefetch(const fg_gguf *g, uint64_t off, size_t n) {
    if (g->fd >= 0 && n) (void)posix_fadvise(g->fd, (off_t)off, (off_t)n, POSIX_FADV_WILLNEED);
}

/* Reads, not the map's page faults: a chunk at a time, the next one
 * prefetched meanwhile, with no trap per page. (Measured on this project's
 * virtual host, an 18.5 GB file into shared memory: 179 s against 183 s by
 * the map; what bounds that load is the first touch of fresh shared-memory
 * pages, not the reads.) A read that fails or comes up short (the file
 * changed under us) falls back to the map, which then faults as before. */
void fg_gguf__copy(const fg_gguf *g, uint64_t off, void *dst, size_t n) {
    fg_gguf__prefetch(g, off, n < GGUF_COPY_CHUNK ? n : GGUF_COPY_CHUNK);
    size_t done = 0;
    while (done < n && g->fd >= 0) {
        size_t c = n - done < GGUF_COPY_CHUNK ? n - done : GGUF_COPY_CHUNK;
        if (done + c < n) fg_gguf__prefetch(g, off + done + c, GGUF_COPY_CHUNK);
        ssize_t r = pread(g->fd, (uint8_t *)dst + done, c, (off_t)(off + done));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        done += (size_t)r;
    }
    if (done < n) memcpy((uint8_t *)dst + done, g->map + off + done, n - done);
}

fg_status fg_gguf__kv(const fg_gguf *g, const char *key, fg_gguf__kv_view *v) {
    int64_t i = fg_gguf_find_kv(g, key);
    if (i < 0) return fg_err_set(FG_EINPUT, "%s: metadata '%s' is missing", g->path, key);
    const kv_entry *e = &g->kv[i];
    v->type = e->type;
    v->elem = e->elem;
    v->n = e->n;
    v->off = e->off;
    v->str_off = e->str_off;
    v->str = e->str;
    v->str_len = e->str_len;
    return FG_OK;
}

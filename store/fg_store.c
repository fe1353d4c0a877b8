/* fg_store.c - the tier store (format in fg_store.h): identity, layout,
 * header encoding and checking, conversion (streamed one tensor at a time,
 * double-buffered so reading the source overlaps writing the store), and
 * reads with checksum verification. Leaves the I/O engine to aio/, the
 * checksum's arithmetic to libxxhash and the weight formats to model/. */
#define _GNU_SOURCE
#include "fg_store.h"
#include "fg_fs.h"
#include "fg_q4.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define ALIGN 4096ull
#define MAGIC "FGSTORE\0"
#define HDR_FIXED 320
#define HDR_ENTRY 160
#define HDR_MAX (1u << 20)   /* refuse to read a header claiming more */
#define DTYPE_FP16 1
#define DTYPE_Q4 2   /* fg_q4.h: one (dims[0], dims[1]) slice grouped along dims[0] */

typedef struct {
    char path[PATH_MAX];
    int layer;                /* FG_STORE_GLOBALS or 0.. */
    int n;
    fg_store_tensor *t;       /* n */
    uint64_t header_bytes, file_bytes;
} sfile;

struct fg_store {
    char root[PATH_MAX];
    char name[64];
    char desc[176];
    uint64_t identity;
    int n_layers;
    int compression;
    sfile *files;             /* n_layers + 1; [0] is globals */
    int qd;
    uint64_t req;
};

static uint64_t round_up(uint64_t x) { return (x + ALIGN - 1) / ALIGN * ALIGN; }

/* XXH3 from libxxhash: the reference implementation, with its SIMD paths,
 * rather than a hand-written hash the tests must keep comparing with one. */
uint64_t fg_store_checksum(const void *p, size_t n) { return XXH3_64bits(p, n); }

/* What an older format version lacks, for the message that rebuilds its
 * files ("" for a version this build never wrote). */
static const char *version_change(uint32_t v) {
    if (v == 1) return " (version 1 has XXH64 checksums and another identity; this build checks XXH3)";
    return "";
}

static sfile *file_of(const fg_store *s, int file) {
    FG_ASSERT(file >= FG_STORE_GLOBALS && file < s->n_layers);
    return &s->files[file + 1];
}

static const char *file_label(int file, char *buf, size_t n) {
    if (file == FG_STORE_GLOBALS) snprintf(buf, n, "globals.bin");
    else snprintf(buf, n, "layer-%03d.bin", file);
    return buf;
}

/* ------------------------------------------------------------------ */
/* little-endian fields                                                */
/* ------------------------------------------------------------------ */

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static uint64_t get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}
static void put_str(uint8_t *p, size_t n, const char *s) {
    memset(p, 0, n);
    size_t l = strlen(s);
    memcpy(p, s, l < n - 1 ? l : n - 1);
}
static void get_str(const uint8_t *p, size_t n, char *out) {
    size_t l = strnlen((const char *)p, n - 1);
    memcpy(out, p, l);
    out[l] = 0;
}

/* ------------------------------------------------------------------ */
/* identity                                                            */
/* ------------------------------------------------------------------ */

/* The store's identity: the weight source's own (model/fg_weights.h: its
 * kind, config, file headers, sizes and mtimes) with what this build makes
 * of it, the format version and the compression. Files whose header carries
 * another identity are stale. */
static uint64_t store_identity(const fg_wsrc *ws, const char *compression) {
    uint8_t b[8 + 4 + 32];
    put64(b, fg_wsrc_identity(ws));
    put32(b + 8, FG_STORE_VERSION);
    put_str(b + 12, 32, compression);
    uint64_t id = fg_store_checksum(b, sizeof b);
    fg_debug("tier store identity %016" PRIx64 ": source %016" PRIx64 " (%s), format v%d, compression %s", id,
             get64(b), fg_wsrc_describe(ws), FG_STORE_VERSION, compression);
    return id;
}

/* ------------------------------------------------------------------ */
/* layout and headers                                                  */
/* ------------------------------------------------------------------ */

/* The tensors of one file in spec order, each 4096-aligned. */
static void layout_file(const fg_opt_config *cfg, const fg_spec *specs, sfile *sf) {
    int first, count;
    if (sf->layer == FG_STORE_GLOBALS) first = fg_spec_global(0), count = FG_GW_COUNT;
    else first = fg_spec_layer(sf->layer, 0), count = FG_LW_COUNT;
    sf->t = fg_xcalloc((size_t)count, sizeof *sf->t);
    sf->n = 0;
    for (int i = 0; i < count; i++) {
        const fg_spec *sp = &specs[first + i];
        if (!sp->present) continue;
        fg_store_tensor *t = &sf->t[sf->n++];
        snprintf(t->name, sizeof t->name, "%s", sp->name);
        t->spec = first + i;
        t->ndim = sp->ndim;
        t->dims[0] = sp->dims[0];
        t->dims[1] = sp->ndim == 2 ? sp->dims[1] : 1;
        t->q4 = fg_spec_is_q4(cfg, first + i);
        t->nbytes = fg_spec_stored_bytes(cfg, specs, first + i);
    }
    sf->header_bytes = round_up(HDR_FIXED + (uint64_t)sf->n * HDR_ENTRY);
    uint64_t off = sf->header_bytes;
    for (int i = 0; i < sf->n; i++) {
        sf->t[i].offset = off;
        off = round_up(off + sf->t[i].nbytes);
    }
    sf->file_bytes = off;
}

static void encode_header(const fg_store *s, const sfile *sf, uint8_t *h) {
    memset(h, 0, sf->header_bytes);
    memcpy(h, MAGIC, 8);
    put32(h + 8, FG_STORE_VERSION);
    put32(h + 12, (uint32_t)sf->header_bytes);
    put32(h + 16, sf->layer == FG_STORE_GLOBALS ? 0 : 1);
    put32(h + 20, (uint32_t)sf->layer);
    put32(h + 24, (uint32_t)s->n_layers);
    put32(h + 28, (uint32_t)sf->n);
    put32(h + 32, (uint32_t)s->compression);
    put64(h + 40, s->identity);
    put64(h + 48, sf->file_bytes);
    put64(h + 56, sf->header_bytes);
    put64(h + 64, sf->file_bytes - sf->header_bytes);
    put_str(h + 80, 64, s->name);
    put_str(h + 144, 176, s->desc);
    for (int i = 0; i < sf->n; i++) {
        uint8_t *e = h + HDR_FIXED + (size_t)i * HDR_ENTRY;
        const fg_store_tensor *t = &sf->t[i];
        put_str(e, 96, t->name);
        put32(e + 96, (uint32_t)t->spec);
        put32(e + 100, t->q4 ? DTYPE_Q4 : DTYPE_FP16);
        put32(e + 104, (uint32_t)t->ndim);
        put64(e + 112, (uint64_t)t->dims[0]);
        put64(e + 120, (uint64_t)t->dims[1]);
        put64(e + 128, t->offset);
        put64(e + 136, t->nbytes);
        put64(e + 144, t->checksum);
    }
    put64(h + 72, fg_store_checksum(h, sf->header_bytes));
}

/* What a header says, once its own consistency is checked. */
typedef struct {
    uint32_t version, kind, layer, n_layers, compression;
    uint64_t identity;
    char name[64], desc[176];
    sfile f;                  /* layer, n, t, header_bytes, file_bytes */
} hdr_info;

/* Read and check one file's header. Returns 0 with *hi filled, or 1 with a
 * reason in why (the file is then not usable). */
static int read_header(const char *path, hdr_info *hi, char *why, size_t whyn) {
    memset(hi, 0, sizeof *hi);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, whyn, errno == ENOENT ? "missing" : "unreadable: %s", strerror(errno));
        return 1;
    }
    struct stat st;
    uint8_t *h = NULL;
    int bad = 1;
    if (fstat(fd, &st) != 0) {
        snprintf(why, whyn, "unreadable: fstat: %s", strerror(errno));
        goto out;
    }
    if (st.st_size < (off_t)ALIGN) {
        snprintf(why, whyn, "truncated: %lld bytes, shorter than a header", (long long)st.st_size);
        goto out;
    }
    h = fg_xmalloc(ALIGN);
    ssize_t r = pread(fd, h, ALIGN, 0);
    if (r != (ssize_t)ALIGN) {
        snprintf(why, whyn, "unreadable header: %s", r < 0 ? strerror(errno) : "short read");
        goto out;
    }
    if (memcmp(h, MAGIC, 8)) {
        snprintf(why, whyn, "foreign file (no FGSTORE magic)");
        goto out;
    }
    hi->version = get32(h + 8);
    if (hi->version != FG_STORE_VERSION) {
        snprintf(why, whyn, "stale: format version %u, this build uses %d%s", hi->version, FG_STORE_VERSION,
                 version_change(hi->version));
        goto out;
    }
    uint32_t hb = get32(h + 12);
    if (hb < ALIGN || hb % ALIGN || hb > HDR_MAX) {
        snprintf(why, whyn, "damaged header: header size %u", hb);
        goto out;
    }
    if ((off_t)hb > st.st_size) {
        snprintf(why, whyn, "truncated: %lld bytes, header alone is %u", (long long)st.st_size, hb);
        goto out;
    }
    if (hb > ALIGN) {
        h = realloc(h, hb);
        FG_ASSERT(h);
        r = pread(fd, h + ALIGN, hb - ALIGN, ALIGN);
        if (r != (ssize_t)(hb - ALIGN)) {
            snprintf(why, whyn, "unreadable header: %s", r < 0 ? strerror(errno) : "short read");
            goto out;
        }
    }
    uint64_t sum = get64(h + 72);
    put64(h + 72, 0);
    if (fg_store_checksum(h, hb) != sum) {
        snprintf(why, whyn, "damaged header (checksum mismatch)");
        goto out;
    }
    hi->kind = get32(h + 16);
    hi->layer = get32(h + 20);
    hi->n_layers = get32(h + 24);
    uint32_t n = get32(h + 28);
    hi->compression = get32(h + 32);
    hi->identity = get64(h + 40);
    hi->f.file_bytes = get64(h + 48);
    hi->f.header_bytes = hb;
    hi->f.layer = hi->kind == 0 ? FG_STORE_GLOBALS : (int)hi->layer;
    get_str(h + 80, 64, hi->name);
    get_str(h + 144, 176, hi->desc);
    if (get64(h + 56) != hb || get64(h + 64) != hi->f.file_bytes - hb || hi->f.file_bytes % ALIGN ||
        HDR_FIXED + (uint64_t)n * HDR_ENTRY > hb || hi->kind > 1) {
        snprintf(why, whyn, "damaged header (inconsistent sizes)");
        goto out;
    }
    hi->f.n = (int)n;
    hi->f.t = fg_xcalloc(n ? n : 1, sizeof *hi->f.t);
    uint64_t prev_end = hb;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *e = h + HDR_FIXED + (size_t)i * HDR_ENTRY;
        fg_store_tensor *t = &hi->f.t[i];
        get_str(e, 96, t->name);
        t->spec = (int)get32(e + 96);
        t->ndim = (int)get32(e + 104);
        t->dims[0] = (int64_t)get64(e + 112);
        t->dims[1] = (int64_t)get64(e + 120);
        t->offset = get64(e + 128);
        t->nbytes = get64(e + 136);
        t->checksum = get64(e + 144);
        /* Overflow-proof: a shape whose bytes wrap around 2^64, or an offset
         * near 2^64 whose end wraps below file_bytes, would pass plain sums
         * and send readers far outside the file (found by fuzz/fuzz_store.c). */
        uint64_t numel = 0;
        int wraps = t->dims[0] <= 0 || t->dims[1] <= 0 ||
                    __builtin_mul_overflow((uint64_t)t->dims[0], (uint64_t)t->dims[1], &numel) || numel > UINT64_MAX / 4;
        uint32_t dtype = get32(e + 100);
        t->q4 = dtype == DTYPE_Q4;
        uint64_t want = wraps ? 0 : t->q4 ? fg_q4_slice_bytes((uint64_t)t->dims[0], (uint64_t)t->dims[1]) : numel * 2;
        if ((dtype != DTYPE_FP16 && !(t->q4 && t->ndim == 2)) || (t->ndim != 1 && t->ndim != 2) || wraps ||
            t->nbytes != want || t->offset % ALIGN || t->offset < prev_end ||
            t->offset > hi->f.file_bytes || t->nbytes > hi->f.file_bytes - t->offset) {
            snprintf(why, whyn, "damaged header (tensor %s out of place)", t->name);
            goto out;
        }
        prev_end = t->offset + t->nbytes;
    }
    if ((uint64_t)st.st_size != hi->f.file_bytes) {
        snprintf(why, whyn, "%s: %lld bytes, the header says %" PRIu64,
                 (uint64_t)st.st_size < hi->f.file_bytes ? "truncated" : "damaged (wrong size)",
                 (long long)st.st_size, hi->f.file_bytes);
        goto out;
    }
    bad = 0;
out:
    if (bad) {
        free(hi->f.t);
        hi->f.t = NULL;
    }
    free(h);
    close(fd);
    return bad;
}

/* Does the header describe exactly the file this store expects? */
static int header_matches(const fg_store *s, const sfile *want, const hdr_info *hi, char *why, size_t whyn) {
    if (hi->identity != s->identity) {
        snprintf(why, whyn, "stale: made from another or a changed checkpoint (%s, %s)", hi->name, hi->desc);
        return 0;
    }
    if (hi->compression != (uint32_t)s->compression || hi->n_layers != (uint32_t)s->n_layers ||
        hi->f.layer != want->layer) {
        snprintf(why, whyn, "stale: header describes another file of the model");
        return 0;
    }
    if (hi->f.n != want->n || hi->f.header_bytes != want->header_bytes || hi->f.file_bytes != want->file_bytes) {
        snprintf(why, whyn, "stale: tensor table differs from this build's layout");
        return 0;
    }
    for (int i = 0; i < want->n; i++) {
        const fg_store_tensor *a = &hi->f.t[i], *b = &want->t[i];
        if (strcmp(a->name, b->name) || a->spec != b->spec || a->ndim != b->ndim || a->dims[0] != b->dims[0] ||
            a->dims[1] != b->dims[1] || a->offset != b->offset || a->nbytes != b->nbytes) {
            snprintf(why, whyn, "stale: tensor table differs at %s", b->name);
            return 0;
        }
    }
    return 1;
}

/* ------------------------------------------------------------------ */
/* verification                                                        */
/* ------------------------------------------------------------------ */

fg_status fg_store_verify(const fg_store *s, int file, const void *data) {
    const sfile *sf = file_of(s, file);
    const uint8_t *base = data;
    for (int i = 0; i < sf->n; i++) {
        const fg_store_tensor *t = &sf->t[i];
        uint64_t h = fg_store_checksum(base + (t->offset - sf->header_bytes), t->nbytes);
        if (h != t->checksum)
            return fg_err_set(FG_ERUNTIME, "%s: tensor %s (%" PRIu64 " bytes at offset %" PRIu64
                              "): checksum mismatch (stored %016" PRIx64 ", read %016" PRIx64
                              "): the tier store file is damaged (HINT: it is rebuilt by the next "
                              "flexgen run, or delete it)", sf->path, t->name, t->nbytes, t->offset, t->checksum, h);
    }
    return FG_OK;
}

fg_status fg_store_read(const fg_store *s, fg_aio *aio, int file, void *buf, int verify) {
    const sfile *sf = file_of(s, file);
    fg_aio_file f;
    fg_status st = fg_aio_file_open(sf->path, O_RDONLY, 0, &f);
    if (st) return st;
    st = fg_aio_read(aio, &f, sf->header_bytes, buf, sf->file_bytes - sf->header_bytes);
    fg_aio_file_close(&f);
    if (!st && verify) st = fg_store_verify(s, file, buf);
    return st;
}

/* ------------------------------------------------------------------ */
/* conversion                                                          */
/* ------------------------------------------------------------------ */

/* Conversion streams each file's data region through two staging buffers:
 * tensors are converted into one, back to back with their padding (they are
 * contiguous in the file), and once it holds STAGE_FLUSH bytes it is written
 * as one transfer while the next tensors are converted into the other. A
 * finished file (data and header written) goes to the finalizer thread,
 * which fdatasyncs and renames it while the next file is converted: only a
 * file that is complete on disk ever gets its real name. */
#define STAGE_FLUSH (32ull << 20)

typedef struct fin_item {
    fg_fs_atomic file;        /* the .partial, written and open */
    struct fin_item *next;
} fin_item;

typedef struct {
    fg_aio *aio;
    uint8_t *buf[2];          /* staging buffers, cap bytes each */
    uint64_t cap;
    uint64_t pending[2];      /* the write job of each buffer, 0 = none */
    int cur;                  /* the buffer being filled */
    uint64_t stage_off, stage_len; /* file range staged in buf[cur] */
    /* finalizer thread */
    pthread_t thr;
    int thr_on;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    fin_item *q, *q_tail;
    int closing;
    fg_status fin_st;
    char fin_msg[3 * PATH_MAX];
    /* progress */
    double t0, last;
    uint64_t bytes_done, bytes_total;
    int files_done, files_total;
    int quiet, tty;
    const char *label;
} builder;

static void progress(builder *b, int final) {
    if (b->quiet) return;
    double now = fg_now(), dt = now - b->t0;
    if (!final && !b->tty && now - b->last < 2.0) return;
    b->last = now;
    double mbs = dt > 0 ? b->bytes_done / dt / 1e6 : 0;
    if (b->thr_on) pthread_mutex_lock(&b->mu); /* files_done moves in the finalizer */
    int done = b->files_done;
    if (b->thr_on) pthread_mutex_unlock(&b->mu);
    if (b->tty)
        fprintf(stderr, "\rtier store %s: %d/%d files, %.2f/%.2f GB, %.0f MB/s\033[K%s", b->label, done,
                b->files_total, b->bytes_done / 1e9, b->bytes_total / 1e9, mbs, final ? "\n" : "");
    else
        fg_info("tier store %s: %d/%d files, %.2f/%.2f GB, %.0f MB/s", b->label, done, b->files_total,
                b->bytes_done / 1e9, b->bytes_total / 1e9, mbs);
}

static void *finalizer(void *arg) {
    builder *b = arg;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        while (!b->q && !b->closing) pthread_cond_wait(&b->cv, &b->mu);
        fin_item *it = b->q;
        if (!it) break;
        pthread_mutex_unlock(&b->mu);
        char msg[3 * PATH_MAX] = "";
        fg_status st = fg_fs_atomic_commit(&it->file);   /* synced, then renamed */
        if (st) snprintf(msg, sizeof msg, "%s", fg_err_msg());
        pthread_mutex_lock(&b->mu);
        b->q = it->next;
        if (!b->q) b->q_tail = NULL;
        if (st && !b->fin_st) {
            b->fin_st = st;
            snprintf(b->fin_msg, sizeof b->fin_msg, "%s", msg);
        }
        if (!st) b->files_done++;
        free(it);
        pthread_cond_broadcast(&b->cv);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

static fg_status builder_init(builder *b, int qd, uint64_t req) {
    fg_status st = fg_aio_new(qd, req, &b->aio);
    if (st) return st;
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    if (pthread_create(&b->thr, NULL, finalizer, b) != 0)
        return fg_err_set(FG_ERUNTIME, "tier store: cannot start the finalizer thread");
    b->thr_on = 1;
    return FG_OK;
}

/* Wait for every queued file to be synced and renamed; the first error. */
static fg_status builder_drain(builder *b) {
    if (!b->thr_on) return FG_OK;
    pthread_mutex_lock(&b->mu);
    while (b->q) pthread_cond_wait(&b->cv, &b->mu);
    fg_status st = b->fin_st;
    if (st) fg_err_set(st, "tier store: %s", b->fin_msg);
    pthread_mutex_unlock(&b->mu);
    return st;
}

static void builder_free(builder *b) {
    if (b->thr_on) {
        builder_drain(b);
        pthread_mutex_lock(&b->mu);
        b->closing = 1;
        pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->mu);
        pthread_join(b->thr, NULL);
        pthread_mutex_destroy(&b->mu);
        pthread_cond_destroy(&b->cv);
        b->thr_on = 0;
    }
    fg_aio_destroy(&b->aio);
    free(b->buf[0]);
    free(b->buf[1]);
    b->buf[0] = b->buf[1] = NULL;
}

static fg_status grow(builder *b, uint64_t need) {
    if (need <= b->cap) return FG_OK;
    for (int i = 0; i < 2; i++) {
        free(b->buf[i]);
        b->buf[i] = NULL;
        if (posix_memalign((void **)&b->buf[i], ALIGN, need))
            return fg_err_set(FG_ERUNTIME, "out of memory: two conversion buffers of %" PRIu64 " bytes", need);
    }
    b->cap = need;
    return FG_OK;
}

/* Write what is staged in the current buffer; switch to the other one,
 * waiting for its previous write. */
static fg_status flush_stage(builder *b, const fg_aio_file *f) {
    fg_status st = FG_OK;
    if (b->stage_len) {
        fg_aio_submit(b->aio, FG_AIO_WRITE, f, b->stage_off, b->buf[b->cur], b->stage_len, &b->pending[b->cur]);
        b->stage_len = 0;
    }
    b->cur ^= 1;
    if (b->pending[b->cur]) {
        st = fg_aio_wait(b->aio, b->pending[b->cur]);
        b->pending[b->cur] = 0;
    }
    return st;
}

/* Write one file as <path>.partial and hand it to the finalizer. */
static fg_status build_file(fg_store *s, fg_wsrc *ws, sfile *sf, builder *b) {
    char msg[1024];
    fg_fs_atomic out;
    fg_status st = fg_fs_atomic_name(&out, sf->path, FG_FS_SYNC_FILE);   /* the directory once, at the end */
    if (st) return st;
    const char *partial = out.partial;
    unlink(partial);
    uint64_t biggest = sf->header_bytes;
    for (int i = 0; i < sf->n; i++)
        if (round_up(sf->t[i].nbytes) > biggest) biggest = round_up(sf->t[i].nbytes);
    if ((st = grow(b, biggest + STAGE_FLUSH))) return st;
    fg_aio_file f;
    if ((st = fg_aio_file_open(partial, O_WRONLY | O_CREAT | O_TRUNC, 0600, &f))) return st;
    out.fd = f.fd, f.owned = 0;   /* out closes it: at the commit, or on failure */
    /* Reserve the space up front: a full disk fails here, at once, rather
     * than after minutes of conversion (and blocks come out contiguous). */
    if (fallocate(f.fd, 0, 0, (off_t)sf->file_bytes) != 0 && errno != EOPNOTSUPP && errno != ENOSYS) {
        int e = errno;
        st = fg_err_set(FG_ERUNTIME, "%s: cannot reserve %" PRIu64 " bytes: %s%s", partial, sf->file_bytes,
                        strerror(e), e == ENOSPC ? " (HINT: the offload file system is full; the tier store "
                                                   "needs the model's fp16 size)" : "");
        goto fail;
    }
    b->stage_len = 0;
    for (int i = 0; i < sf->n; i++) {
        fg_store_tensor *t = &sf->t[i];
        uint64_t padded = round_up(t->nbytes);
        if (b->stage_len && (b->stage_len >= STAGE_FLUSH || b->stage_len + padded > b->cap))
            if ((st = flush_stage(b, &f))) goto fail;
        if (!b->stage_len) b->stage_off = t->offset;
        FG_ASSERT(b->stage_off + b->stage_len == t->offset); /* tensors are contiguous */
        uint8_t *p = b->buf[b->cur] + b->stage_len;
        if ((st = fg_wsrc_read_stored(ws, t->spec, p))) goto fail;
        memset(p + t->nbytes, 0, padded - t->nbytes);
        t->checksum = fg_store_checksum(p, t->nbytes);
        b->stage_len += padded;
        b->bytes_done += t->nbytes;
    }
    /* the last stage, then both buffers idle: the header goes last */
    if ((st = flush_stage(b, &f)) || (st = flush_stage(b, &f))) goto fail;
    encode_header(s, sf, b->buf[b->cur]);
    if ((st = fg_aio_write(b->aio, &f, 0, b->buf[b->cur], sf->header_bytes))) goto fail;
    fg_aio_file_close(&f);
    fin_item *it = fg_xcalloc(1, sizeof *it);
    it->file = out;
    pthread_mutex_lock(&b->mu);
    if (b->q_tail) b->q_tail->next = it;
    else b->q = it;
    b->q_tail = it;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return FG_OK;
fail:
    snprintf(msg, sizeof msg, "%s", fg_err_msg());
    /* Drain both buffers whatever happened: the kernel may still read them. */
    for (int k = 0; k < 2; k++)
        if (b->pending[k]) {
            fg_aio_wait(b->aio, b->pending[k]);
            b->pending[k] = 0;
        }
    b->stage_len = 0;
    fg_aio_file_close(&f);
    fg_fs_atomic_abort(&out);
    return fg_err_set(st, "tier store: %s", msg);
}

/* The renames made durable. Best effort, as the files themselves are
 * synced: a failure leaves the error slot as it was. */
static void sync_dir_quietly(const char *dir) {
    char keep[1024];
    snprintf(keep, sizeof keep, "%s", fg_err_msg());
    if (fg_fs_sync_dir(dir)) fg_err_set(FG_OK, "%s", keep);
}

static void remove_partials(const char *root) {
    DIR *d = opendir(root);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        size_t sl = strlen(FG_FS_PARTIAL_SUFFIX);
        if (l > sl && !strcmp(e->d_name + l - sl, FG_FS_PARTIAL_SUFFIX)) {
            char p[PATH_MAX];
            int pn = snprintf(p, sizeof p, "%s/%s", root, e->d_name);
            if (pn < 0 || (size_t)pn >= sizeof p) continue;
            fg_info("tier store: removing an interrupted conversion %s", p);
            unlink(p);
        }
    }
    closedir(d);
}

static fg_store *store_alloc(int n_layers) {
    fg_store *s = fg_xcalloc(1, sizeof *s);
    s->n_layers = n_layers;
    s->files = fg_xcalloc((size_t)n_layers + 1, sizeof *s->files);
    s->qd = 32;
    s->req = 1 << 20;
    return s;
}

void fg_store_destroy(fg_store **p) {
    fg_store *s = *p;
    if (!s) return;
    for (int i = 0; i <= s->n_layers; i++) free(s->files[i].t);
    free(s->files);
    free(s);
    *p = NULL;
}

static void set_path(fg_store *s, sfile *sf) {
    char lab[32];
    /* callers keep root 32 bytes short of PATH_MAX */
    int n = snprintf(sf->path, sizeof sf->path, "%s/%s", s->root, file_label(sf->layer, lab, sizeof lab));
    FG_ASSERT(n > 0 && (size_t)n < sizeof sf->path);
}

/* Check one file against the expected layout (and its data, if asked);
 * on success copy the checksums from its header. */
static int check_file(fg_store *s, sfile *sf, fg_aio *aio, int verify_data, char *why, size_t whyn) {
    hdr_info hi;
    if (read_header(sf->path, &hi, why, whyn)) return 0;
    int ok = header_matches(s, sf, &hi, why, whyn);
    if (ok)
        for (int i = 0; i < sf->n; i++) sf->t[i].checksum = hi.f.t[i].checksum;
    free(hi.f.t);
    if (ok && verify_data) {
        void *buf = NULL;
        if (posix_memalign(&buf, ALIGN, sf->file_bytes - sf->header_bytes)) {
            snprintf(why, whyn, "cannot verify: out of memory");
            return 0;
        }
        int file = sf->layer;
        if (fg_store_read(s, aio, file, buf, 1)) {
            snprintf(why, whyn, "damaged: %s", fg_err_msg());
            ok = 0;
        }
        free(buf);
    }
    return ok;
}

fg_status fg_store_open_or_build(const char *dir, fg_wsrc *ws, fg_store **out) {
    return fg_store_open_or_build_ex(dir, ws, NULL, out);
}

fg_status fg_store_open_or_build_ex(const char *dir, fg_wsrc *ws, const fg_store_opts *o, fg_store **out) {
    *out = NULL;
    fg_store_opts defaults = {0};
    if (!o) o = &defaults;
    /* The config says whether the weights are held 4-bit (compress_weight):
     * a compressed store is its own variant, with its own directory and
     * identity, beside the fp16 one. */
    const fg_opt_config *cfg = fg_wsrc_config(ws);
    const char *comp = cfg->compress_weight ? "q4g64" : "none";
    if (o->compression && strcmp(o->compression, comp))
        return fg_err_set(FG_EINPUT, "tier store: compression '%s' does not match the model's weights ('%s')",
                          o->compression, comp);
    fg_store *s = store_alloc(cfg->n_layers);
    if (o->qd > 0) s->qd = o->qd;
    if (o->req_bytes > 0) s->req = o->req_bytes;
    /* The model id is a single path component: "facebook/opt-1.3b" (a
     * config's _name_or_path) becomes "facebook_opt-1.3b". */
    char id[64];
    snprintf(id, sizeof id, "%s", cfg->name[0] ? cfg->name : "opt");
    for (char *c = id; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' ||
              *c == '_' || (*c == '.' && c != id)))
            *c = '_';
    int n = snprintf(s->root, sizeof s->root, "%s/%s-%s", dir, id, cfg->compress_weight ? "q4g64" : "fp16");
    snprintf(s->name, sizeof s->name, "%s", cfg->name);
    snprintf(s->desc, sizeof s->desc, "%s", fg_wsrc_describe(ws));
    s->compression = cfg->compress_weight ? 1 : 0;
    fg_status st = FG_OK;
    fg_aio *aio = NULL;
    builder b = {0};
    int lock = -1;
    if (n < 0 || (size_t)n >= sizeof s->root - 32) {
        st = fg_err_set(FG_EINPUT, "tier store: offload directory path too long: %s", dir);
        goto out;
    }
    if ((st = fg_fs_mkdirs(s->root, 0700))) goto out;
    s->identity = store_identity(ws, comp);
    const fg_spec *specs = fg_wsrc_specs(ws);
    for (int i = 0; i <= s->n_layers; i++) {
        sfile *sf = &s->files[i];
        sf->layer = i - 1;
        set_path(s, sf);
        layout_file(cfg, specs, sf);
    }

    /* One process checks and builds at a time; others wait, then find the
     * store valid. */
    char lp[PATH_MAX + 8];
    snprintf(lp, sizeof lp, "%s/.lock", s->root);
    lock = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock < 0) {
        st = fg_err_set(FG_ERUNTIME, "%s: cannot create lock file: %s", lp, strerror(errno));
        goto out;
    }
    if (flock(lock, LOCK_EX | LOCK_NB) != 0) {
        fg_info("tier store %s: another process is checking or building it; waiting", s->root);
        while (flock(lock, LOCK_EX) != 0 && errno == EINTR) {}
    }
    remove_partials(s->root);
    if ((st = builder_init(&b, s->qd, s->req))) goto out;
    aio = b.aio;

    int *todo = fg_xcalloc((size_t)s->n_layers + 1, sizeof *todo);
    int n_todo = 0, n_missing = 0;
    for (int i = 0; i <= s->n_layers; i++) {
        char why[512];
        sfile *sf = &s->files[i];
        if (check_file(s, sf, aio, o->verify_data, why, sizeof why)) continue;
        todo[i] = 1;
        n_todo++;
        b.bytes_total += sf->file_bytes;
        if (!strcmp(why, "missing")) n_missing++;
        else fg_warn("tier store: %s is %s; rebuilding it", sf->path, why);
    }
    if (n_todo) {
        b.t0 = b.last = fg_now();
        b.files_total = n_todo;
        b.quiet = o->quiet;
        b.tty = isatty(2);
        b.label = s->root;
        fg_info("tier store %s: converting %d of %d files (%.2f GB; %d missing, %d rebuilt) from %s", s->root,
                n_todo, s->n_layers + 1, b.bytes_total / 1e9, n_missing, n_todo - n_missing, s->desc);
        for (int i = 0; i <= s->n_layers && !st; i++) {
            if (!todo[i]) continue;
            st = build_file(s, ws, &s->files[i], &b);
            progress(&b, 0);
        }
        fg_status fin = builder_drain(&b); /* files already written get their names */
        if (!st) st = fin;
        sync_dir_quietly(s->root); /* for a resumed conversion too */
        if (!st) progress(&b, 1);
        else if (b.tty && !b.quiet) fputc('\n', stderr);
    }
    free(todo);
out:
    builder_free(&b);
    if (lock >= 0) close(lock); /* releases the flock */
    if (st) fg_store_destroy(&s);
    *out = s;
    return st;
}

fg_status fg_store_repair(fg_store *s, fg_wsrc *ws, int file) {
    sfile *sf = file_of(s, file);
    const fg_opt_config *cfg = fg_wsrc_config(ws);
    if (cfg->n_layers != s->n_layers || strcmp(cfg->name, s->name))
        return fg_err_set(FG_EINPUT, "tier store %s: repair with the weights of another model (%s)", s->root,
                          cfg->name);
    builder b = {0};
    fg_status st = builder_init(&b, s->qd, s->req);
    b.quiet = 1;
    fg_warn("tier store: rebuilding %s", sf->path);
    if (!st) st = build_file(s, ws, sf, &b);
    fg_status fin = builder_drain(&b);
    if (!st) st = fin;
    if (!st) sync_dir_quietly(s->root);
    builder_free(&b);
    return st;
}

fg_status fg_store_invalidate(fg_store *s, int file) {
    const sfile *sf = file_of(s, file);
    if (unlink(sf->path) != 0 && errno != ENOENT)
        return fg_err_set(FG_ERUNTIME, "%s: cannot remove the damaged file: %s", sf->path, strerror(errno));
    fg_warn("tier store: removed damaged %s; the next open rebuilds it", sf->path);
    return FG_OK;
}

fg_status fg_store_open(const char *model_dir, fg_store **out) {
    *out = NULL;
    char path[PATH_MAX], why[512];
    hdr_info g;
    if (strlen(model_dir) >= PATH_MAX - 32)
        return fg_err_set(FG_EINPUT, "tier store: directory path too long: %s", model_dir);
    snprintf(path, sizeof path, "%s/globals.bin", model_dir);
    if (read_header(path, &g, why, sizeof why))
        return fg_err_set(FG_ERUNTIME, "tier store: %s is %s", path, why);
    if (g.f.layer != FG_STORE_GLOBALS || g.n_layers > 100000) {
        free(g.f.t);
        return fg_err_set(FG_ERUNTIME, "tier store: %s: not a globals file", path);
    }
    fg_store *s = store_alloc((int)g.n_layers);
    snprintf(s->root, sizeof s->root - 32, "%s", model_dir);
    snprintf(s->name, sizeof s->name, "%s", g.name);
    snprintf(s->desc, sizeof s->desc, "%s", g.desc);
    s->identity = g.identity;
    s->compression = (int)g.compression;
    s->files[0] = g.f;
    set_path(s, &s->files[0]);
    for (int l = 0; l < s->n_layers; l++) {
        sfile *sf = &s->files[l + 1];
        sf->layer = l;
        set_path(s, sf);
        hdr_info hi;
        fg_status st = FG_OK;
        if (read_header(sf->path, &hi, why, sizeof why))
            st = fg_err_set(FG_ERUNTIME, "tier store: %s is %s", sf->path, why);
        else if (hi.identity != g.identity || hi.f.layer != l || hi.n_layers != g.n_layers)
            st = fg_err_set(FG_ERUNTIME, "tier store: %s does not belong with %s (another model or layer)",
                            sf->path, path);
        if (st) {
            free(hi.f.t);
            fg_store_destroy(&s);
            return st;
        }
        sf->n = hi.f.n;
        sf->t = hi.f.t;
        sf->header_bytes = hi.f.header_bytes;
        sf->file_bytes = hi.f.file_bytes;
    }
    *out = s;
    return FG_OK;
}

/* ------------------------------------------------------------------ */
/* accessors                                                           */
/* ------------------------------------------------------------------ */

const char *fg_store_dir(const fg_store *s) { return s->root; }
uint64_t fg_store_identity(const fg_store *s) { return s->identity; }
int fg_store_n_layers(const fg_store *s) { return s->n_layers; }
const char *fg_store_path(const fg_store *s, int file) { return file_of(s, file)->path; }

const fg_store_tensor *fg_store_tensors(const fg_store *s, int file, int *n) {
    const sfile *sf = file_of(s, file);
    *n = sf->n;
    return sf->t;
}

void fg_store_data_range(const fg_store *s, int file, uint64_t *offset, uint64_t *nbytes) {
    const sfile *sf = file_of(s, file);
    *offset = sf->header_bytes;
    *nbytes = sf->file_bytes - sf->header_bytes;
}

uint64_t fg_store_max_data_bytes(const fg_store *s) {
    uint64_t m = 0;
    for (int i = 0; i <= s->n_layers; i++)
        if (s->files[i].file_bytes - s->files[i].header_bytes > m) m = s->files[i].file_bytes - s->files[i].header_bytes;
    return m;
}

uint64_t fg_store_total_bytes(const fg_store *s) {
    uint64_t t = 0;
    for (int i = 0; i <= s->n_layers; i++) t += s->files[i].file_bytes - s->files[i].header_bytes;
    return t;
}

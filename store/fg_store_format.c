/* fg_store_format.c - one tier store file's bytes (format in fg_store.h):
 * where its tensors lie, its header encoded, and a header read back with
 * every check the format allows, so that whatever a reader accepts
 * describes tensors inside the file at sizes that are their shapes'.
 * Leaves the store as a whole (which files, whether they match this
 * build) to fg_store.c, writing the data to fg_store_build.c, and the
 * checksum's arithmetic to libxxhash (fg_store_checksum). */
#define _GNU_SOURCE
#include "fg_store_int.h"
#include "fg_fmt.h"
#include "fg_q4.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

/* What an older format version lacks, for the message that rebuilds its
 * files ("" for a version this build never wrote). */
#define FG_STORE_VERSION_NO_EXPERTS 2   /* read as version 3 without expert entries */

static const char *version_change(uint32_t v) {
    if (v == 1) return " (version 1 has XXH64 checksums and another identity; this build checks XXH3)";
    return "";
}

const char *fg_store_file_label(int file, char *buf, size_t n) {
    if (file == FG_STORE_GLOBALS) snprintf(buf, n, "globals.bin");
    else snprintf(buf, n, "layer-%03d.bin", file);
    return buf;
}

void fg_store_layout_file(const fg_model_config *cfg, const fg_spec *specs, sfile *sf) {
    int first, count;
    if (sf->layer == FG_STORE_GLOBALS) first = fg_spec_global(0), count = FG_GW_COUNT;
    else first = fg_spec_layer(sf->layer, 0), count = FG_LW_COUNT;
    int entries = 0;
    for (int i = 0; i < count; i++) entries += specs[first + i].present ? (specs[first + i].experts ? specs[first + i].experts : 1) : 0;
    sf->t = fg_xcalloc((size_t)entries + 1, sizeof *sf->t);
    sf->n = 0;
    for (int i = 0; i < count; i++) {
        const fg_spec *sp = &specs[first + i];
        if (!sp->present) continue;
        int parts = sp->experts ? sp->experts : 1;   /* a stack: an entry per expert */
        for (int e = 0; e < parts; e++) {
            fg_store_tensor *t = &sf->t[sf->n++];
            snprintf(t->name, sizeof t->name, "%s", sp->name);
            t->spec = first + i;
            t->expert = sp->experts ? e : -1;
            t->ndim = sp->ndim;
            t->dims[0] = sp->dims[0] / parts;
            t->dims[1] = sp->ndim == 2 ? sp->dims[1] : 1;
            t->fmt = fg_spec_fmt(cfg, specs, first + i);
            t->nbytes = sp->experts ? fg_spec_expert_bytes(cfg, specs, first + i) : fg_spec_stored_bytes(cfg, specs, first + i);
        }
    }
    sf->header_bytes = store_round_up(HDR_FIXED + (uint64_t)sf->n * HDR_ENTRY);
    uint64_t off = sf->header_bytes;
    for (int i = 0; i < sf->n; i++) {
        sf->t[i].offset = off;
        off = store_round_up(off + sf->t[i].nbytes);
    }
    sf->file_bytes = off;
}

void fg_store_encode_header(const fg_store *s, const sfile *sf, uint8_t *h) {
    memset(h, 0, sf->header_bytes);
    memcpy(h, STORE_MAGIC, 8);
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
    put_str(h + 80, STORE_NAME_BYTES, s->name);
    put_str(h + 144, STORE_DESC_BYTES, s->desc);
    for (int i = 0; i < sf->n; i++) {
        uint8_t *e = h + HDR_FIXED + (size_t)i * HDR_ENTRY;
        const fg_store_tensor *t = &sf->t[i];
        put_str(e, 96, t->name);
        put32(e + 96, (uint32_t)t->spec);
        put32(e + 100, (uint32_t)t->fmt + 1);   /* DTYPE_FP16, DTYPE_Q4, then the table's order */
        put32(e + 104, (uint32_t)t->ndim);
        put32(e + 108, (uint32_t)(t->expert + 1));
        put64(e + 112, (uint64_t)t->dims[0]);
        put64(e + 120, (uint64_t)t->dims[1]);
        put64(e + 128, t->offset);
        put64(e + 136, t->nbytes);
        put64(e + 144, t->checksum);
    }
    put64(h + 72, fg_store_checksum(h, sf->header_bytes));
}

/* The header's bytes from fd (a file of `size` bytes): its first page, the
 * magic, the version, a sane header size, the rest of it, the checksum.
 * 0 with *hp (malloc'd) and *hbp, or 1 with the reason in why. */
static int load_header(int fd, off_t size, hdr_info *hi, uint8_t **hp, uint32_t *hbp, char *why, size_t whyn) {
    uint8_t *h = NULL;
    int bad = 1;
    if (size < (off_t)FG_STORE_ALIGN) {
        snprintf(why, whyn, "truncated: %lld bytes, shorter than a header", (long long)size);
        goto out;
    }
    h = fg_xmalloc(FG_STORE_ALIGN);
    ssize_t r = pread(fd, h, FG_STORE_ALIGN, 0);
    if (r != (ssize_t)FG_STORE_ALIGN) {
        snprintf(why, whyn, "unreadable header: %s", r < 0 ? strerror(errno) : "short read");
        goto out;
    }
    if (memcmp(h, STORE_MAGIC, 8)) {
        snprintf(why, whyn, "foreign file (no FGSTORE magic)");
        goto out;
    }
    hi->version = get32(h + 8);
    if (hi->version != FG_STORE_VERSION && hi->version != FG_STORE_VERSION_NO_EXPERTS) {
        snprintf(why, whyn, "stale: format version %u, this build uses %d%s", hi->version, FG_STORE_VERSION,
                 version_change(hi->version));
        goto out;
    }
    uint32_t hb = get32(h + 12);
    if (hb < FG_STORE_ALIGN || hb % FG_STORE_ALIGN || hb > HDR_MAX) {
        snprintf(why, whyn, "damaged header: header size %u", hb);
        goto out;
    }
    if ((off_t)hb > size) {
        snprintf(why, whyn, "truncated: %lld bytes, header alone is %u", (long long)size, hb);
        goto out;
    }
    if (hb > FG_STORE_ALIGN) {
        h = realloc(h, hb);
        FG_ASSERT(h);
        r = pread(fd, h + FG_STORE_ALIGN, hb - FG_STORE_ALIGN, FG_STORE_ALIGN);
        if (r != (ssize_t)(hb - FG_STORE_ALIGN)) {
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
    *hbp = hb;
    bad = 0;
out:
    if (bad) free(h);
    else *hp = h;
    return bad;
}

/* The fixed fields of a checksummed header of hb bytes, and that its
 * sizes agree with one another. 0, or 1 with the reason in why. */
static int decode_fixed(const uint8_t *h, uint32_t hb, hdr_info *hi, char *why, size_t whyn) {
    hi->kind = get32(h + 16);
    hi->layer = get32(h + 20);
    hi->n_layers = get32(h + 24);
    uint32_t n = get32(h + 28);
    hi->compression = get32(h + 32);
    hi->identity = get64(h + 40);
    hi->f.file_bytes = get64(h + 48);
    hi->f.header_bytes = hb;
    hi->f.layer = hi->kind == 0 ? FG_STORE_GLOBALS : (int)hi->layer;
    get_str(h + 80, STORE_NAME_BYTES, hi->name);
    get_str(h + 144, STORE_DESC_BYTES, hi->desc);
    if (get64(h + 56) != hb || get64(h + 64) != hi->f.file_bytes - hb || hi->f.file_bytes % FG_STORE_ALIGN ||
        HDR_FIXED + (uint64_t)n * HDR_ENTRY > hb || hi->kind > 1) {
        snprintf(why, whyn, "damaged header (inconsistent sizes)");
        return 1;
    }
    hi->f.n = (int)n;
    return 0;
}

/* The tensor table: each entry a known dtype and rank, its bytes its
 * shape's, aligned, in order and inside the file. 0 with hi->f.t filled,
 * or 1 with the reason in why (hi->f.t is then the caller's to free). */
static int decode_table(const uint8_t *h, hdr_info *hi, char *why, size_t whyn) {
    uint32_t n = (uint32_t)hi->f.n;
    hi->f.t = fg_xcalloc(n ? n : 1, sizeof *hi->f.t);
    uint64_t prev_end = hi->f.header_bytes;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *e = h + HDR_FIXED + (size_t)i * HDR_ENTRY;
        fg_store_tensor *t = &hi->f.t[i];
        get_str(e, 96, t->name);
        t->spec = (int)get32(e + 96);
        t->ndim = (int)get32(e + 104);
        uint32_t expert = get32(e + 108);
        /* no arithmetic on a raw field (0x80000000 - 1 would overflow an int):
         * one out of range becomes -1 / an unknown format, refused below */
        t->expert = expert <= FG_CONFIG_MAX_EXPERTS ? (int)expert - 1 : -1;
        t->dims[0] = (int64_t)get64(e + 112);
        t->dims[1] = (int64_t)get64(e + 120);
        t->offset = get64(e + 128);
        t->nbytes = get64(e + 136);
        t->checksum = get64(e + 144);
        /* Overflow-proof: a shape whose bytes wrap around 2^64, or an offset
         * near 2^64 whose end wraps below file_bytes, would pass plain sums
         * and send readers far outside the file. */
        uint64_t numel = 0;
        int wraps = t->dims[0] <= 0 || t->dims[1] <= 0 ||
                    __builtin_mul_overflow((uint64_t)t->dims[0], (uint64_t)t->dims[1], &numel) || numel > UINT64_MAX / 4;
        uint32_t dtype = get32(e + 100);
        t->fmt = dtype >= 1 && dtype <= FG_FMT_COUNT ? (int)dtype - 1 : -1;
        uint64_t want = wraps || !fg_fmt_get(t->fmt) ? 0 : fg_fmt_bytes(t->fmt, (uint64_t)t->dims[0], (uint64_t)t->dims[1]);
        if (!fg_fmt_get(t->fmt) || (t->fmt != FG_FMT_F16 && t->ndim != 2) || (t->ndim != 1 && t->ndim != 2) || wraps ||
            !want ||
            t->nbytes != want || t->offset % FG_STORE_ALIGN || t->offset < prev_end ||
            (expert && (hi->version == FG_STORE_VERSION_NO_EXPERTS || expert > FG_CONFIG_MAX_EXPERTS)) ||
            t->offset > hi->f.file_bytes || t->nbytes > hi->f.file_bytes - t->offset) {
            snprintf(why, whyn, "damaged header (tensor %s out of place)", t->name);
            return 1;
        }
        prev_end = t->offset + t->nbytes;
    }
    return 0;
}

int fg_store_read_header(const char *path, hdr_info *hi, char *why, size_t whyn) {
    memset(hi, 0, sizeof *hi);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, whyn, errno == ENOENT ? "missing" : "unreadable: %s", strerror(errno));
        return 1;
    }
    struct stat st;
    uint8_t *h = NULL;
    uint32_t hb = 0;
    int bad = 1;
    if (fstat(fd, &st) != 0) {
        snprintf(why, whyn, "unreadable: fstat: %s", strerror(errno));
        goto out;
    }
    if (load_header(fd, st.st_size, hi, &h, &hb, why, whyn) || decode_fixed(h, hb, hi, why, whyn) ||
        decode_table(h, hi, why, whyn))
        goto out;
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

int fg_store_header_matches(const fg_store *s, const sfile *want, const hdr_info *hi, char *why, size_t whyn) {
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
        if (strcmp(a->name, b->name) || a->spec != b->spec || a->expert != b->expert || a->ndim != b->ndim || a->dims[0] != b->dims[0] ||
            a->dims[1] != b->dims[1] || a->offset != b->offset || a->nbytes != b->nbytes) {
            snprintf(why, whyn, "stale: tensor table differs at %s", b->name);
            return 0;
        }
    }
    return 1;
}

/* disk_test.c - tests of the disk tier's libraries (aio/, store/): the aio
 * engine's round trips and fault handling, and the tier store's build /
 * validate / rebuild cycle. The shell wrappers beside this file set up what
 * needs root (a full tmpfs, a loop device that fails reads) and call the
 * subcommands here:
 *
 *   disk_test aio DIR                  round trips, sizes, queue depths, async API
 *   disk_test aio-faults DIR           alignment, missing file, EOF, injected faults
 *   disk_test store DIR CKPT_A CKPT_B  build, verify, damage, stale, resume
 *   disk_test identity DIR CKPT COPY OTHER NPY   when the store is rebuilt
 *   disk_test enospc FULLDIR CKPT      writes into a small full file system
 *   disk_test eio STORE_MODEL_DIR FILE read of a store file whose blocks fail
 *
 * Independence: contents are checked against the weight source read through
 * model/ and against plain pread(), never against fg_aio reading itself; the
 * on-disk format and its checksums are checked by store_format.py, written
 * from fg_store.h, with libxxhash through ctypes.
 * Exit 0 pass, 1 fail, 77 skip. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fg_aio.h"
#include "fg_store.h"
#include "fg_test.h"

static int failures;

/* The status must be `want` and the message must mention each needle. */
static void expect_err(fg_status st, fg_status want, const char *what, const char *n1, const char *n2) {
    const char *m = st ? fg_err_msg() : "(no error)";
    CHECK(st == want, "%s: status %d, want %d: %s", what, st, want, m);
    if (n1) CHECK(strstr(m, n1) != NULL, "%s: message lacks '%s': %s", what, n1, m);
    if (n2) CHECK(strstr(m, n2) != NULL, "%s: message lacks '%s': %s", what, n2, m);
    if (st) fprintf(stderr, "  ok (expected error) %s: %s\n", what, m);
}

static void *xalign(uint64_t n) {
    void *p = NULL;
    if (posix_memalign(&p, FG_AIO_ALIGN, n ? n : 1)) abort();
    return p;
}

static void fill(uint8_t *p, uint64_t n, uint64_t seed) {
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (uint64_t i = 0; i < n; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(p + i, &x, n - i < 8 ? n - i : 8);
    }
}

/* Plain pread of the whole range: the reference reader. */
static int pread_all(const char *path, uint64_t off, uint8_t *p, uint64_t n) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    uint64_t d = 0;
    while (d < n) {
        ssize_t r = pread(fd, p + d, n - d, (off_t)(off + d));
        if (r <= 0) break;
        d += (uint64_t)r;
    }
    close(fd);
    return d == n ? 0 : -1;
}

/* ------------------------------------------------------------------ */
/* aio round trips                                                     */
/* ------------------------------------------------------------------ */

/* Write then read back `len` bytes at `off` with one engine; check the
 * file's bytes with pread and the read-back with the source. */
static void roundtrip(fg_aio *a, const char *path, int buffered, uint64_t off, uint64_t len, uint64_t seed) {
    uint8_t *src = xalign(len), *dst = xalign(len + FG_AIO_ALIGN), *ref = malloc(len ? len : 1);
    fill(src, len, seed);
    memset(dst, 0xEE, len + FG_AIO_ALIGN);
    fg_aio_file f;
    fg_status st = fg_aio_file_open(path, O_RDWR | O_CREAT | (buffered ? FG_AIO_BUFFERED : 0), 0600, &f);
    CHECK(!st, "open %s: %s", path, fg_err_msg());
    if (st) return;
    st = fg_aio_write(a, &f, off, src, len);
    CHECK(!st, "write %" PRIu64 "@%" PRIu64 ": %s", len, off, fg_err_msg());
    CHECK(pread_all(path, off, ref, len) == 0 && !memcmp(ref, src, len),
          "pread sees other bytes than written (%" PRIu64 " at %" PRIu64 ", qd %d req %" PRIu64 ")", len, off,
          fg_aio_qd(a), fg_aio_req_bytes(a));
    st = fg_aio_read(a, &f, off, dst, len);
    CHECK(!st, "read %" PRIu64 "@%" PRIu64 ": %s", len, off, fg_err_msg());
    CHECK(!memcmp(dst, src, len), "read-back differs (%" PRIu64 " at %" PRIu64 ")", len, off);
    /* the tail bounce must not write past len */
    CHECK(dst[len] == 0xEE, "read wrote past the end of the transfer (%" PRIu64 ")", len);
    fg_aio_file_close(&f);
    free(src);
    free(dst);
    free(ref);
}

static int test_aio(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/aio-roundtrip.bin", dir);
    /* unaligned lengths (a partial last block), exact blocks, and transfers
     * of many requests with a partial last request */
    static const uint64_t sizes[] = {1, 100, 4095, 4096, 4097, 65536 + 17, (3u << 20) + 4095, (40u << 20) + 1234};
    static const struct { int qd; uint64_t req; } eng[] = {{1, 4096}, {8, 65536}, {32, 1 << 20}, {64, 128 << 10}};
    for (int buffered = 0; buffered < 2; buffered++)
        for (size_t e = 0; e < sizeof eng / sizeof eng[0]; e++) {
            fg_aio *a;
            fg_status st = fg_aio_new(eng[e].qd, eng[e].req, &a);
            CHECK(!st, "fg_aio_new: %s", fg_err_msg());
            if (st) return 1;
            unlink(path);
            for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
                /* the big transfer (more than qd x req for every engine but
                 * the first) once per engine: it is the slow one */
                int big = sizes[i] > (4u << 20);
                if (big && (eng[e].qd == 1 || buffered)) continue;
                roundtrip(a, path, buffered, 0, sizes[i], i + 10 * e);
                if (!big) roundtrip(a, path, buffered, 7 * FG_AIO_ALIGN, sizes[i], i + 100 * e);
            }
            fg_aio_stats s;
            fg_aio_get_stats(a, &s);
            if (eng[e].qd >= 8 && !buffered) CHECK(s.max_inflight >= 8, "qd %d never had 8 requests in flight (%d)", eng[e].qd,
                                      s.max_inflight);
            CHECK(s.max_inflight <= eng[e].qd, "more than qd in flight: %d > %d", s.max_inflight, eng[e].qd);
            fg_aio_destroy(&a);
            CHECK(a == NULL, "destroy must clear the pointer");
        }

    /* The async API: 12 jobs of mixed sizes queued at once, reported by poll
     * (any order), with the eventfd signalled. */
    fg_aio *a;
    fg_aio_new(16, 256 << 10, &a);
    int efd = fg_aio_eventfd(a);
    CHECK(efd >= 0, "eventfd");
    fg_aio_file f;
    unlink(path);
    CHECK(!fg_aio_file_open(path, O_RDWR | O_CREAT, 0600, &f), "open: %s", fg_err_msg());
    enum { NJ = 12 };
    uint8_t *src[NJ], *dst[NJ];
    uint64_t len[NJ], off[NJ], ids[NJ], pos = 0;
    for (int i = 0; i < NJ; i++) {
        len[i] = (uint64_t)(i + 1) * 300000 + (uint64_t)i * 7;
        off[i] = pos;
        pos += (len[i] + FG_AIO_ALIGN - 1) / FG_AIO_ALIGN * FG_AIO_ALIGN;
        src[i] = xalign(len[i]);
        dst[i] = xalign(len[i]);
        fill(src[i], len[i], 1000 + (uint64_t)i);
        fg_aio_submit(a, FG_AIO_WRITE, &f, off[i], src[i], len[i], &ids[i]);
    }
    CHECK(fg_aio_pending(a) > 0, "jobs pending after submit");
    int seen = 0;
    while (seen < NJ) {
        fg_aio_result r[4];
        int n = fg_aio_poll(a, r, 4, 1000);
        CHECK(n > 0, "poll reported nothing within 1 s");
        if (n <= 0) break;
        for (int k = 0; k < n; k++) CHECK(r[k].status == FG_OK, "async write job %" PRIu64 ": %s", r[k].id, r[k].msg);
        seen += n;
    }
    struct pollfd pfd = {efd, POLLIN, 0};
    CHECK(poll(&pfd, 1, 0) == 1, "the eventfd was not signalled");
    for (int i = 0; i < NJ; i++) fg_aio_submit(a, FG_AIO_READ, &f, off[i], dst[i], len[i], &ids[i]);
    for (int i = NJ - 1; i >= 0; i--) { /* wait out of order: others are kept */
        fg_status st = fg_aio_wait(a, ids[i]);
        CHECK(!st, "async read %d: %s", i, fg_err_msg());
        CHECK(!memcmp(src[i], dst[i], len[i]), "async read %d differs", i);
    }
    CHECK(fg_aio_pending(a) == 0, "nothing pending at the end (%d)", fg_aio_pending(a));
    expect_err(fg_aio_wait(a, 999999), FG_EINPUT, "wait on an unknown id", "no such job", NULL);
    for (int i = 0; i < NJ; i++) {
        free(src[i]);
        free(dst[i]);
    }
    fg_aio_file_close(&f);
    fg_aio_destroy(&a);
    /* bad engine parameters are input errors, not crashes */
    expect_err(fg_aio_new(0, 4096, &a), FG_EINPUT, "qd 0", "queue depth", NULL);
    expect_err(fg_aio_new(4, 1000, &a), FG_EINPUT, "req 1000", "request size", NULL);
    unlink(path);
    return failures ? 1 : 0;
}

/* ------------------------------------------------------------------ */
/* aio faults                                                          */
/* ------------------------------------------------------------------ */

static int test_aio_faults(const char *dir) {
    char path[4096], missing[4096];
    snprintf(path, sizeof path, "%s/aio-faults.bin", dir);
    snprintf(missing, sizeof missing, "%s/no-such-file.bin", dir);
    const uint64_t N = 8u << 20;
    uint8_t *src = xalign(N), *dst = xalign(N);
    fill(src, N, 42);
    fg_aio *a;
    fg_aio_new(8, 256 << 10, &a);
    fg_aio_file f;
    unlink(path);
    CHECK(!fg_aio_file_open(path, O_RDWR | O_CREAT, 0600, &f), "open: %s", fg_err_msg());
    CHECK(!fg_aio_write(a, &f, 0, src, N), "write: %s", fg_err_msg());

    /* Alignment is the caller's contract (shm offsets are 4096-aligned):
     * an input error naming the file and the offset, not EINVAL from deep
     * down and never a crash. */
    expect_err(fg_aio_read(a, &f, 100, dst, 4096), FG_EINPUT, "unaligned offset", path, "offset 100");
    expect_err(fg_aio_read(a, &f, 0, dst + 8, 4096), FG_EINPUT, "unaligned buffer", path, "aligned");
    /* a missing file */
    fg_aio_file m;
    expect_err(fg_aio_file_open(missing, O_RDONLY, 0, &m), FG_ERUNTIME, "missing file", missing,
               "No such file");
    /* reading past the end: a short read that cannot be completed */
    expect_err(fg_aio_read(a, &f, N - 8192, dst, 3 * 4096), FG_ERUNTIME, "read past EOF", path, "too short");
    expect_err(fg_aio_read(a, &f, N - 8192, dst, 8192 + 10), FG_ERUNTIME, "tail past EOF", path, "too short");

    /* EINTR / EAGAIN completions are retried: data intact, retries counted */
    fg_aio_stats s0, s1;
    int retry_errs[] = {EINTR, EAGAIN};
    for (int k = 0; k < 2; k++) {
        fg_aio_get_stats(a, &s0);
        fg_aio_fault fe = {.op = FG_AIO_READ, .err = retry_errs[k], .after = 3, .count = 5};
        fg_aio_set_fault(a, &fe);
        memset(dst, 0, N);
        CHECK(!fg_aio_read(a, &f, 0, dst, N), "read with %s injected: %s", strerror(retry_errs[k]), fg_err_msg());
        CHECK(!memcmp(src, dst, N), "data differs after %s retries", strerror(retry_errs[k]));
        fg_aio_get_stats(a, &s1);
        CHECK(s1.retries - s0.retries == 5, "expected 5 retries, saw %" PRIu64, s1.retries - s0.retries);
    }
    /* short completions are resubmitted for the rest, reads and writes */
    fg_aio_fault fs = {.op = 0, .short_io = 1};
    fg_aio_set_fault(a, &fs);
    fg_aio_get_stats(a, &s0);
    uint8_t *src2 = xalign(N);
    fill(src2, N, 43);
    CHECK(!fg_aio_write(a, &f, 0, src2, N), "write with short completions: %s", fg_err_msg());
    memset(dst, 0, N);
    CHECK(!fg_aio_read(a, &f, 0, dst, N), "read with short completions: %s", fg_err_msg());
    CHECK(!memcmp(src2, dst, N), "data differs after short completions");
    fg_aio_get_stats(a, &s1);
    CHECK(s1.short_ios - s0.short_ios >= 32, "short completions not resubmitted (%" PRIu64 ")",
          s1.short_ios - s0.short_ios);
    /* EIO in the middle of a transfer: an error naming the file and the
     * request's offset; the engine stays usable */
    fg_aio_fault fio_ = {.op = FG_AIO_READ, .err = EIO, .after = 10, .count = 1};
    fg_aio_set_fault(a, &fio_);
    expect_err(fg_aio_read(a, &f, 0, dst, N), FG_ERUNTIME, "injected EIO", path, "Input/output error");
    CHECK(!fg_aio_read(a, &f, 0, dst, N) && !memcmp(src2, dst, N), "engine unusable after EIO: %s", fg_err_msg());
    /* ENOSPC on a write, with the hint */
    fg_aio_fault fn = {.op = FG_AIO_WRITE, .err = ENOSPC, .after = 2, .count = 1};
    fg_aio_set_fault(a, &fn);
    expect_err(fg_aio_write(a, &f, 0, src, N), FG_ERUNTIME, "injected ENOSPC", path, "No space left");
    /* a device that never stops saying EINTR: a bounded number of retries */
    fg_aio_fault forever = {.op = FG_AIO_READ, .err = EINTR};
    fg_aio_set_fault(a, &forever);
    expect_err(fg_aio_read(a, &f, 0, dst, 65536), FG_ERUNTIME, "endless EINTR", path, "offset 0");
    fg_aio_set_fault(a, NULL);
    fg_aio_destroy(&a);

    /* FG_AIO_FAULT reaches engines created later (whole-program tests) */
    setenv("FG_AIO_FAULT", "read:EIO:0:1", 1);
    fg_aio_new(4, 65536, &a);
    unsetenv("FG_AIO_FAULT");
    expect_err(fg_aio_read(a, &f, 0, dst, 65536), FG_ERUNTIME, "FG_AIO_FAULT=read:EIO", path, "Input/output");
    CHECK(!fg_aio_read(a, &f, 0, dst, 65536), "second read after a count=1 fault: %s", fg_err_msg());
    fg_aio_destroy(&a);

    fg_aio_file_close(&f);
    unlink(path);
    free(src);
    free(src2);
    free(dst);
    return failures ? 1 : 0;
}

/* ------------------------------------------------------------------ */
/* the tier store                                                      */
/* ------------------------------------------------------------------ */

static double mtime_of(const char *p) {
    struct stat st;
    if (stat(p, &st) != 0) return -1;
    return (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9;
}

static ino_t ino_of(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 ? st.st_ino : 0;
}

/* Every tensor in every file equals the weight source's, read by plain
 * pread at the offsets in the table; fg_store_read + verify agrees. */
static void check_contents(fg_store *s, fg_wsrc *ws) {
    fg_aio *a;
    fg_aio_new(8, 1 << 20, &a);
    const fg_spec *specs = fg_wsrc_specs(ws);
    for (int file = FG_STORE_GLOBALS; file < fg_store_n_layers(s); file++) {
        int n;
        const fg_store_tensor *t = fg_store_tensors(s, file, &n);
        uint64_t doff, dbytes;
        fg_store_data_range(s, file, &doff, &dbytes);
        uint8_t *data = xalign(dbytes);
        fg_status st = fg_store_read(s, a, file, data, 1);
        CHECK(!st, "store read+verify %s: %s", fg_store_path(s, file), fg_err_msg());
        for (int i = 0; i < n; i++) {
            uint64_t numel = (uint64_t)fg_spec_numel(&specs[t[i].spec]);
            CHECK(t[i].nbytes == numel * 2 && t[i].offset % 4096 == 0, "%s: bad table entry", t[i].name);
            fg_half *want = malloc(numel * 2);
            uint8_t *got = malloc(numel * 2);
            fg_wsrc_read(ws, t[i].spec, want);
            CHECK(pread_all(fg_store_path(s, file), t[i].offset, got, t[i].nbytes) == 0, "pread %s", t[i].name);
            CHECK(!memcmp(want, got, t[i].nbytes), "%s: stored bytes differ from the source", t[i].name);
            CHECK(!memcmp(want, data + (t[i].offset - doff), t[i].nbytes), "%s: aio read differs", t[i].name);
            free(want);
            free(got);
        }
        free(data);
    }
    fg_aio_destroy(&a);
}

static fg_status build(const char *dir, fg_wsrc *ws, int verify, fg_store **s) {
    fg_store_opts o = {.verify_data = verify, .quiet = 1, .qd = 8, .req_bytes = 256 << 10};
    return fg_store_open_or_build_ex(dir, ws, &o, s);
}

/* Overwrite `n` bytes at `off` of a file in place (creating it if needed). */
static void poke(const char *path, uint64_t off, const void *p, size_t n) {
    int fd = open(path, O_WRONLY | O_CREAT, 0600);
    CHECK(fd >= 0 && pwrite(fd, p, n, (off_t)off) == (ssize_t)n, "poke %s", path);
    if (fd >= 0) close(fd);
}

static void flip_byte(const char *path, uint64_t off) {
    uint8_t b;
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0 && pread(fd, &b, 1, (off_t)off) == 1, "read byte of %s", path);
    b ^= 0x40;
    CHECK(pwrite(fd, &b, 1, (off_t)off) == 1, "flip byte of %s", path);
    close(fd);
}

static int test_store(const char *dir, const char *ckpt_a, const char *ckpt_b) {
    fg_wsrc *ws;
    CHECK(!fg_wsrc_open_dir(ckpt_a, NULL, &ws), "open %s: %s", ckpt_a, fg_err_msg());
    if (failures) return 1;
    fg_store *s;
    /* 1. first build, contents equal to the source, a second open keeps
     * every file (no rebuild: same inode, same mtime) */
    CHECK(!build(dir, ws, 0, &s), "build: %s", fg_err_msg());
    if (failures) return 1;
    check_contents(s, ws);
    int L = fg_store_n_layers(s);
    char l1[4096];
    snprintf(l1, sizeof l1, "%s", fg_store_path(s, 1 < L ? 1 : 0));
    double m1 = mtime_of(l1);
    ino_t i1 = ino_of(l1);
    uint64_t ident = fg_store_identity(s);
    fg_store_destroy(&s);
    CHECK(!build(dir, ws, 1, &s), "reopen: %s", fg_err_msg());
    CHECK(mtime_of(l1) == m1 && ino_of(l1) == i1, "a valid file was rebuilt on reopen");
    CHECK(fg_store_identity(s) == ident, "identity changed between opens of the same model");

    /* 2. a flipped data byte: the reader's checksum catches it and names
     * the file and tensor; open with verify_data rebuilds the file */
    int n;
    const fg_store_tensor *t = fg_store_tensors(s, 1 < L ? 1 : 0, &n);
    flip_byte(l1, t[n - 3].offset + 5);
    fg_aio *a;
    fg_aio_new(8, 1 << 20, &a);
    uint64_t doff, dbytes;
    fg_store_data_range(s, 1 < L ? 1 : 0, &doff, &dbytes);
    uint8_t *buf = xalign(fg_store_max_data_bytes(s));
    expect_err(fg_store_read(s, a, 1 < L ? 1 : 0, buf, 1), FG_ERUNTIME, "flipped byte", l1, t[n - 3].name);
    fg_store_destroy(&s);
    CHECK(!build(dir, ws, 1, &s), "rebuild after a flipped byte: %s", fg_err_msg());
    CHECK(ino_of(l1) != i1, "the damaged file was not rebuilt");
    check_contents(s, ws);

    /* 3. a file truncated under an open store: the read fails with the
     * file's name (no short buffer passed off as data); the next open
     * rebuilds it */
    CHECK(truncate(l1, (off_t)(doff + dbytes / 2)) == 0, "truncate");
    expect_err(fg_store_read(s, a, 1 < L ? 1 : 0, buf, 1), FG_ERUNTIME, "truncated under the store", l1,
               "too short");
    fg_store *ro;
    char root[4096];
    snprintf(root, sizeof root, "%s", fg_store_dir(s));
    expect_err(fg_store_open(root, &ro), FG_ERUNTIME, "read-only open of a truncated store", l1, "truncated");
    fg_store_destroy(&s);
    CHECK(!build(dir, ws, 0, &s), "rebuild after truncation: %s", fg_err_msg());
    check_contents(s, ws);

    /* 4. foreign file (bad magic), damaged header byte, stale format
     * version (1: XXH64 checksums; the message says so): each rebuilt */
    poke(l1, 0, "NOTASTORE", 8);
    fg_store_destroy(&s);
    i1 = ino_of(l1);
    CHECK(!build(dir, ws, 0, &s) && ino_of(l1) != i1, "foreign file not rebuilt: %s", fg_err_msg());
    flip_byte(l1, 330); /* inside the first tensor's name */
    fg_store_destroy(&s);
    i1 = ino_of(l1);
    CHECK(!build(dir, ws, 0, &s) && ino_of(l1) != i1, "damaged header not rebuilt: %s", fg_err_msg());
    uint8_t v1[4] = {1, 0, 0, 0};
    poke(l1, 8, v1, 4);
    expect_err(fg_store_open(root, &ro), FG_ERUNTIME, "read-only open of a version 1 file", "format version 1",
               "XXH64");
    fg_store_destroy(&s);
    i1 = ino_of(l1);
    CHECK(!build(dir, ws, 0, &s) && ino_of(l1) != i1, "stale version not rebuilt: %s", fg_err_msg());

    /* 5. resumable: one file missing and a leftover .partial: only that
     * file is built, the partial removed, the others untouched */
    char g[4096], partial[4200];
    snprintf(g, sizeof g, "%s", fg_store_path(s, FG_STORE_GLOBALS));
    double mg = mtime_of(g);
    unlink(l1);
    snprintf(partial, sizeof partial, "%s.partial", fg_store_path(s, 0));
    poke(partial, 0, "junk", 4);
    fg_store_destroy(&s);
    CHECK(!build(dir, ws, 0, &s), "resume: %s", fg_err_msg());
    CHECK(mtime_of(l1) > 0 && mtime_of(g) == mg, "resume rebuilt more (or less) than the missing file");
    CHECK(access(partial, F_OK) != 0, "a .partial file survived the next open");
    check_contents(s, ws);

    /* 6. the read-only open (disk worker side) agrees with the builder */
    CHECK(!fg_store_open(root, &ro), "read-only open: %s", fg_err_msg());
    if (ro) {
        CHECK(fg_store_identity(ro) == fg_store_identity(s) && fg_store_n_layers(ro) == L, "read-only open differs");
        int n1, n2;
        const fg_store_tensor *ta = fg_store_tensors(s, 0, &n1), *tb = fg_store_tensors(ro, 0, &n2);
        CHECK(n1 == n2 && !memcmp(ta, tb, sizeof *ta * (size_t)n1), "tensor tables differ");
        fg_store_destroy(&ro);
    }

    /* 6b. the identity follows the weight files, not their neighbours: a new
     * README leaves the store alone, a re-written (touched) safetensors
     * file makes it stale */
    char extra[4200], weights[4200];
    snprintf(extra, sizeof extra, "%s/README.md", ckpt_a);
    weights[0] = 0;
    DIR *cd = opendir(ckpt_a);
    for (struct dirent *e; cd && (e = readdir(cd));)
        if (strstr(e->d_name, ".safetensors") && !strstr(e->d_name, ".json"))
            snprintf(weights, sizeof weights, "%s/%s", ckpt_a, e->d_name);
    if (cd) closedir(cd);
    CHECK(weights[0], "no safetensors file in %s", ckpt_a);
    poke(extra, 0, "notes", 5);
    fg_store_destroy(&s);
    i1 = ino_of(g);
    CHECK(!build(dir, ws, 0, &s) && ino_of(g) == i1, "a README beside the weights forced a rebuild");
    /* another mtime, as a re-download leaves it */
    struct timespec old_t[2] = {{0, UTIME_OMIT}, {1000000000, 0}};
    CHECK(utimensat(AT_FDCWD, weights, old_t, 0) == 0, "utimensat %s", weights);
    fg_wsrc_destroy(&ws);
    CHECK(!fg_wsrc_open_dir(ckpt_a, NULL, &ws), "reopen %s", ckpt_a);
    fg_store_destroy(&s);
    CHECK(!build(dir, ws, 0, &s) && ino_of(g) != i1, "a changed weight file did not make the store stale");
    CHECK(fg_store_identity(s) != ident, "identity unchanged after the weights changed");
    unlink(extra);

    /* 7. a changed model (checkpoint B: same name, another config and
     * seed): every file is stale and rebuilt; contents follow B */
    fg_wsrc *wb;
    CHECK(!fg_wsrc_open_dir(ckpt_b, NULL, &wb), "open %s: %s", ckpt_b, fg_err_msg());
    if (!failures) {
        fg_store *sb;
        i1 = ino_of(g);
        CHECK(!build(dir, wb, 0, &sb), "build B: %s", fg_err_msg());
        CHECK(fg_store_identity(sb) != ident, "model B has model A's identity");
        CHECK(ino_of(g) != i1, "globals.bin not rebuilt for another model");
        check_contents(sb, wb);
        fg_store_destroy(&sb);
        fg_wsrc_destroy(&wb);
    }
    free(buf);
    fg_aio_destroy(&a);
    fg_store_destroy(&s);
    fg_wsrc_destroy(&ws);
    return failures ? 1 : 0;
}

/* ------------------------------------------------------------------ */
/* the store's identity, from the checkpoint itself                    */
/* ------------------------------------------------------------------ */

static uint64_t identity_of(const char *ckpt) {
    fg_wsrc *ws;
    fg_status st = fg_wsrc_open_dir(ckpt, NULL, &ws);
    CHECK(!st, "open %s: %s", ckpt, fg_err_msg());
    if (st) return 0;
    uint64_t id = fg_wsrc_identity(ws);
    fg_wsrc_destroy(&ws);
    return id;
}

/* Open the store of ckpt under dir, building what is not valid, and check
 * its contents against ckpt. Returns the inode of its globals.bin, which
 * changes exactly when the file is rebuilt (the new one is written beside
 * the old before the rename, so it never gets the old one's inode). */
static ino_t store_of(const char *dir, const char *ckpt) {
    fg_wsrc *ws;
    fg_store *s = NULL;
    ino_t ino = 0;
    CHECK(!fg_wsrc_open_dir(ckpt, NULL, &ws), "open %s: %s", ckpt, fg_err_msg());
    if (failures) return 0;
    CHECK(!build(dir, ws, 0, &s), "build from %s: %s", ckpt, fg_err_msg());
    if (s) {
        check_contents(s, ws);
        ino = ino_of(fg_store_path(s, FG_STORE_GLOBALS));
        fg_store_destroy(&s);
    }
    fg_wsrc_destroy(&ws);
    return ino;
}

/* Overwrite one byte of a file and put its mtime back, so only the byte
 * differs (size and mtime are part of the identity on their own). */
static void poke_keep_mtime(const char *path, uint64_t off, uint8_t b) {
    struct stat before, after;
    CHECK(stat(path, &before) == 0, "stat %s", path);
    poke(path, off, &b, 1);
    struct timespec t[2] = {before.st_atim, before.st_mtim};
    CHECK(utimensat(AT_FDCWD, path, t, 0) == 0, "utimensat %s", path);
    CHECK(stat(path, &after) == 0 && after.st_size == before.st_size &&
              after.st_mtim.tv_sec == before.st_mtim.tv_sec && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec,
          "%s: size or mtime not kept", path);
}

/* The length of a file's format header (safetensors: 8 + JSON; .npy
 * version 1: 10 + dict), which must fit in n, and the header in buf. */
static uint64_t read_head(const char *path, int npy, uint8_t *buf, size_t n) {
    uint64_t hl = 0;
    CHECK(pread_all(path, 0, buf, 10) == 0, "read the head of %s", path);
    if (npy) {
        hl = 10 + (uint64_t)(buf[8] | buf[9] << 8);
    } else {
        for (int i = 7; i >= 0; i--) hl = hl << 8 | buf[i];
        hl += 8;
    }
    CHECK(hl <= n && pread_all(path, 0, buf, hl) == 0, "%s: a header of %" PRIu64 " bytes", path, hl);
    return hl <= n ? hl : 0;
}

/* CKPT: one model.safetensors; COPY: a copy of it with the times kept;
 * OTHER: another checkpoint of the same config (other weights); NPY: a
 * FlexGen numpy directory. The store follows the checkpoint's identity
 * (fg_wsrc_identity), never its description or its path. */
static int test_identity(const char *dir, const char *ckpt, const char *copy, const char *other, const char *npy) {
    /* 1. an unchanged checkpoint: the same identity at every open, and the
     * store is reused; so is a copy elsewhere with its times kept */
    uint64_t id0 = identity_of(ckpt);
    CHECK(id0 && identity_of(ckpt) == id0, "two opens of %s disagree", ckpt);
    ino_t i0 = store_of(dir, ckpt);
    CHECK(store_of(dir, ckpt) == i0, "an unchanged checkpoint rebuilt the store");
    CHECK(identity_of(copy) == id0, "a copy with its times kept has another identity (the path counted)");
    CHECK(store_of(dir, copy) == i0, "a copy with its times kept rebuilt the store");

    /* 2. one byte of the safetensors JSON header ("pt" -> "Pt" in
     * __metadata__: still a valid checkpoint), size and mtime kept: a new
     * identity and a rebuilt store; the byte put back, the old identity */
    char st_path[4200];
    const size_t head_max = 1 << 20;
    uint8_t *head = malloc(head_max);
    snprintf(st_path, sizeof st_path, "%s/model.safetensors", ckpt);
    uint64_t hl = read_head(st_path, 0, head, head_max);
    const uint8_t *pt = memmem(head, hl, "\"pt\"", 4);
    CHECK(pt, "%s: no \"pt\" in its header", st_path);
    if (failures) {
        free(head);
        return 1;
    }
    uint64_t at = (uint64_t)(pt - head) + 1;
    poke_keep_mtime(st_path, at, 'P');
    uint64_t id1 = identity_of(ckpt);
    CHECK(id1 != id0, "a changed safetensors header kept the identity");
    ino_t i1 = store_of(dir, ckpt);
    CHECK(i1 != i0, "a changed safetensors header did not rebuild the store");
    poke_keep_mtime(st_path, at, 'p');
    CHECK(identity_of(ckpt) == id0, "the header put back, the identity did not come back");

    /* 3. the checkpoint replaced by another one of the same config under the
     * same path: new identity (the files' mtimes differ), rebuilt store whose
     * contents follow the new weights (store_of checks them) */
    char saved[4200];
    snprintf(saved, sizeof saved, "%s.saved", ckpt);
    CHECK(rename(ckpt, saved) == 0 && rename(other, ckpt) == 0, "swap %s for %s", ckpt, other);
    CHECK(identity_of(ckpt) != id0 && identity_of(ckpt) != id1, "a replaced checkpoint kept an identity");
    ino_t i2 = store_of(dir, ckpt);
    CHECK(i2 != i1, "a replaced checkpoint did not rebuild the store");
    CHECK(store_of(dir, ckpt) == i2, "the replaced checkpoint, unchanged, rebuilt the store again");
    CHECK(rename(ckpt, other) == 0 && rename(saved, ckpt) == 0, "swap back");
    CHECK(identity_of(ckpt) == id0, "the original back, its identity did not come back");

    /* 4. a numpy directory: one file's .npy header (a padding space of its
     * dict made a tab, still valid), size and mtime kept: a new identity */
    uint64_t n0 = identity_of(npy);
    int tried = 0;
    DIR *d = opendir(npy);
    for (struct dirent *e; d && !tried && (e = readdir(d));) {
        char p[4200];
        if (strncmp(e->d_name, "decoder.", 8)) continue;
        snprintf(p, sizeof p, "%s/%s", npy, e->d_name);
        uint64_t nh = read_head(p, 1, head, head_max);
        if (nh < 12 || head[nh - 2] != ' ') continue;
        tried = 1;
        poke_keep_mtime(p, nh - 2, '\t');
        CHECK(identity_of(npy) != n0, "%s: a changed .npy header kept the identity", p);
        poke_keep_mtime(p, nh - 2, ' ');
        CHECK(identity_of(npy) == n0, "%s: the header put back, the identity did not come back", p);
    }
    if (d) closedir(d);
    free(head);
    CHECK(tried, "%s: no .npy file with a padded header to change", npy);

    /* 5. dummy weights: the name and the seed */
    fg_wsrc *x, *y, *z;
    CHECK(!fg_wsrc_open_dummy("opt-125m", 1, &x) && !fg_wsrc_open_dummy("opt-125m", 2, &y) &&
              !fg_wsrc_open_dummy("opt-350m", 1, &z),
          "open dummies: %s", fg_err_msg());
    if (!failures) {
        fg_wsrc *x2;
        CHECK(!fg_wsrc_open_dummy("opt-125m", 1, &x2), "open dummy: %s", fg_err_msg());
        CHECK(fg_wsrc_identity(x) == fg_wsrc_identity(x2), "two opens of the same dummy disagree");
        CHECK(fg_wsrc_identity(x) != fg_wsrc_identity(y), "the seed does not count");
        CHECK(fg_wsrc_identity(x) != fg_wsrc_identity(z), "the model name does not count");
        fg_wsrc_destroy(&x2);
    }
    fg_wsrc_destroy(&x);
    fg_wsrc_destroy(&y);
    fg_wsrc_destroy(&z);
    return failures ? 1 : 0;
}

/* ------------------------------------------------------------------ */
/* a full file system                                                  */
/* ------------------------------------------------------------------ */

static int test_enospc(const char *dir, const char *ckpt) {
    char path[4096];
    snprintf(path, sizeof path, "%s/fill.bin", dir);
    /* (a) the engine: 16 MiB into an 8 MiB file system */
    const uint64_t N = 16u << 20;
    uint8_t *src = xalign(N);
    fill(src, N, 5);
    fg_aio *a;
    fg_aio_new(8, 1 << 20, &a);
    fg_aio_file f;
    CHECK(!fg_aio_file_open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600, &f), "open: %s", fg_err_msg());
    expect_err(fg_aio_write(a, &f, 0, src, N), FG_ERUNTIME, "write into a full fs", path, "No space left");
    fg_aio_file_close(&f);
    unlink(path);
    fg_aio_destroy(&a);
    free(src);
    /* (b) the store: conversion stops with the file's name; no .partial
     * left, and every file that exists is complete and valid */
    fg_wsrc *ws;
    CHECK(!fg_wsrc_open_dir(ckpt, NULL, &ws), "open %s: %s", ckpt, fg_err_msg());
    if (failures) return 1;
    fg_store *s = NULL;
    fg_status st = build(dir, ws, 0, &s);
    expect_err(st, FG_ERUNTIME, "store into a full fs", ".bin.partial", "No space left");
    CHECK(s == NULL, "no store handed out after a failed build");
    char root[4096];
    snprintf(root, sizeof root, "%s/%s-fp16", dir, fg_wsrc_config(ws)->name);
    DIR *d = opendir(root);
    struct dirent *e;
    int complete = 0;
    while (d && (e = readdir(d))) {
        CHECK(!strstr(e->d_name, ".partial"), "left behind: %s", e->d_name);
        complete += strstr(e->d_name, ".bin") != NULL;
    }
    if (d) closedir(d);
    fprintf(stderr, "  %d complete file(s) fit before the file system filled\n", complete);
    fg_store *ro;
    expect_err(fg_store_open(root, &ro), FG_ERUNTIME, "read-only open of an incomplete store", root, "missing");
    fg_wsrc_destroy(&ws);
    return failures ? 1 : 0;
}

/* ------------------------------------------------------------------ */
/* a read error from the device                                        */
/* ------------------------------------------------------------------ */

static int test_eio(const char *model_dir, const char *file_path) {
    fg_store *s;
    CHECK(!fg_store_open(model_dir, &s), "open: %s", fg_err_msg());
    if (failures) return 1;
    int target = -2;
    for (int f = FG_STORE_GLOBALS; f < fg_store_n_layers(s); f++)
        if (!strcmp(fg_store_path(s, f), file_path)) target = f;
    CHECK(target != -2, "%s is not a file of the store", file_path);
    if (failures) return 1;
    fg_aio *a;
    fg_aio_new(8, 256 << 10, &a);
    uint8_t *buf = xalign(fg_store_max_data_bytes(s));
    expect_err(fg_store_read(s, a, target, buf, 1), FG_ERUNTIME, "device read error", file_path,
               "Input/output error");
    fg_aio_destroy(&a);
    free(buf);
    fg_store_destroy(&s);
    return failures ? 1 : 0;
}

int main(int argc, char **argv) {
    fg_log_init("disk-test");
    if (argc < 2) goto usage;
    const char *cmd = argv[1];
    int rc;
    if (!strcmp(cmd, "aio") && argc == 3) rc = test_aio(argv[2]);
    else if (!strcmp(cmd, "aio-faults") && argc == 3) rc = test_aio_faults(argv[2]);
    else if (!strcmp(cmd, "store") && argc == 5) rc = test_store(argv[2], argv[3], argv[4]);
    else if (!strcmp(cmd, "identity") && argc == 7) rc = test_identity(argv[2], argv[3], argv[4], argv[5], argv[6]);
    else if (!strcmp(cmd, "enospc") && argc == 4) rc = test_enospc(argv[2], argv[3]);
    else if (!strcmp(cmd, "eio") && argc == 4) rc = test_eio(argv[2], argv[3]);
    else goto usage;
    fprintf(stderr, "%s: %s\n", cmd, rc == 0 ? "PASS" : rc == 77 ? "SKIP" : "FAIL");
    return rc;
usage:
    fprintf(stderr, "usage: disk_test aio DIR | aio-faults DIR | store DIR CKPT_A CKPT_B |\n"
                    "       identity DIR CKPT COPY OTHER NPY | enospc FULLDIR CKPT | eio MODEL_DIR FILE\n");
    return 2;
}

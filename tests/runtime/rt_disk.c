/* rt_disk.c - the disk worker's libaio path, driven through the runtime like
 * the coordinator drives it (a disk worker alone under fg_super).
 *
 * disk: round trip of a multi-MB buffer of unaligned length through
 * DISK_WRITE then DISK_READ, into a file under a directory that does not
 * exist yet; many transfers in flight at once on the worker's executors;
 * failures that must come back as ERROR naming the file and the offset (a
 * missing file, a read past the end of a file, a misaligned offset); then
 * the worker again with faults injected by FG_AIO_FAULT in its environment
 * (EIO on reads, ENOSPC on writes: ERROR, and the worker keeps serving;
 * short transfers: resubmitted, data exact).
 *
 * Independence: what the worker wrote is checked with plain pread() on the
 * file here, and what it read against the bytes this test generated, never
 * against the worker reading its own writes alone. */
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt_test.h"

#define SLOT (8ull << 20)                     /* shm bytes per buffer slot */
#define NSLOTS 36
#define BIG ((5ull << 20) + 1234)             /* the round trip: multi-MB, unaligned length */
#define BIG_OFF (3 * 4096ull)                 /* its file offset */
#define NPAR 16                               /* transfers in flight at once */
#define WAIT_MS 30000

typedef struct {
    fg_super *sup;
    uint32_t seg;
    char offload[64];
} rig;

static fg_shm_handle slot(const rig *r, int i, uint64_t nbytes) {
    return (fg_shm_handle){r->seg, FG_SHM_HEADER_BYTES + (uint64_t)i * SLOT, nbytes};
}

static uint8_t *P(rig *r, fg_shm_handle h) {
    uint8_t *p = fg_super_ptr(r->sup, h);
    FG_ASSERT(p);
    return p;
}

static void fill(uint8_t *p, uint64_t n, uint64_t seed) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull | 1;
    for (uint64_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)x;
    }
}

static void rig_start(rig *r, const char *fault) {
    if (fault) setenv("FG_AIO_FAULT", fault, 1);  /* the spawned worker inherits it */
    fg_super_opts o;
    memset(&o, 0, sizeof o);
    o.roles = 1u << FG_ROLE_DISK;
    o.worker_path[FG_ROLE_DISK] = rt_worker[FG_ROLE_DISK];
    o.offload_dir = r->offload;
    RT_MUST(fg_super_new(&o, &r->sup));
    unsetenv("FG_AIO_FAULT");
    RT_MUST(fg_super_segment_new(r->sup, "disk", NSLOTS * SLOT, &r->seg));
}

static void rig_stop(rig *r) {
    fg_super_stats st;
    fg_super_get_stats(r->sup, &st);
    RT_CHECK(st.deaths[FG_ROLE_DISK] == 0, "the disk worker died %u time(s)", st.deaths[FG_ROLE_DISK]);
    fg_super_destroy(&r->sup);
}

static uint64_t submit(rig *r, int type, const char *path, uint64_t off, fg_shm_handle buf) {
    fg_msg m;
    fg_msg_init(&m, type);
    snprintf(m.u.disk.path, sizeof m.u.disk.path, "%s", path);
    m.u.disk.file_offset = off;
    m.u.disk.buf = buf;
    uint64_t seq;
    RT_MUST(fg_super_submit(r->sup, FG_ROLE_DISK, &m, NULL, &seq));
    return seq;
}

/* Run one command; 0 if it succeeded, else its ERROR in d. */
static int run(rig *r, int type, const char *path, uint64_t off, fg_shm_handle buf, fg_super_done *d) {
    fg_status st = fg_super_wait(r->sup, submit(r, type, path, off, buf), WAIT_MS, d);
    return st == FG_OK ? 0 : -1;
}

/* It must fail with `code`, and its text mention each of n1..n3 (NULL: skip). */
static void expect_error(rig *r, const char *what, int type, const char *path, uint64_t off, fg_shm_handle buf,
                         int32_t code, const char *n1, const char *n2, const char *n3) {
    fg_super_done d;
    int rc = run(r, type, path, off, buf, &d);
    const char *needles[3] = {n1, n2, n3};
    int ok = rc != 0 && d.status == code;
    for (int i = 0; i < 3; i++)
        if (needles[i] && !strstr(d.error, needles[i])) ok = 0;
    RT_CHECK(ok, "%s: status %d (want %d), error '%s' (want '%s', '%s', '%s')", what, rc ? d.status : 0, code,
             rc ? d.error : "", n1 ? n1 : "", n2 ? n2 : "", n3 ? n3 : "");
    if (ok) fprintf(stderr, "disk: %s -> ERROR: %s\n", what, d.error);
}

/* The file's bytes [off, off + n) equal p? Read with pread, not the worker. */
static int file_has(const char *path, uint64_t off, const uint8_t *p, uint64_t n) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    uint8_t *q = fg_xmalloc(n ? n : 1);
    uint64_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, q + got, n - got, (off_t)(off + got));
        if (k <= 0) break;
        got += (uint64_t)k;
    }
    close(fd);
    int same = got == n && !memcmp(p, q, n);
    free(q);
    return same;
}

static void roundtrip(rig *r) {
    fg_shm_handle src = slot(r, 0, BIG), dst = slot(r, 1, BIG);
    fill(P(r, src), BIG, 1);
    memset(P(r, dst), 0xAA, BIG);
    fg_super_done d;
    RT_CHECK(run(r, FG_MSG_DISK_WRITE, "new/sub/big.bin", BIG_OFF, src, &d) == 0, "write: %s", d.error);
    char path[256];
    snprintf(path, sizeof path, "%s/new/sub/big.bin", r->offload);
    struct stat sb;
    RT_CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600 && (uint64_t)sb.st_size == BIG_OFF + BIG,
             "%s: mode %o size %lld, want 0600 and %llu", path, sb.st_mode & 0777, (long long)sb.st_size,
             (unsigned long long)(BIG_OFF + BIG));
    RT_CHECK(file_has(path, BIG_OFF, P(r, src), BIG), "%s: the bytes on disk differ from what was written", path);
    RT_CHECK(run(r, FG_MSG_DISK_READ, "new/sub/big.bin", BIG_OFF, dst, &d) == 0, "read: %s", d.error);
    RT_CHECK(!memcmp(P(r, src), P(r, dst), BIG), "round trip of %llu bytes differs", (unsigned long long)BIG);
    fprintf(stderr, "disk: round trip of %llu bytes at offset %llu exact\n", (unsigned long long)BIG,
            (unsigned long long)BIG_OFF);
}

/* NPAR writes in flight at once, then NPAR reads, each its own file and
 * length, so the executors and their engines all run at the same time. */
static void parallel(rig *r) {
    uint64_t seq[NPAR], len[NPAR];
    char name[NPAR][32];
    fg_super_done d;
    for (int i = 0; i < NPAR; i++) {
        len[i] = (1ull << 20) + (uint64_t)i * 4099;
        snprintf(name[i], sizeof name[i], "par-%d", i);
        fill(P(r, slot(r, 2 + i, len[i])), len[i], 100 + (uint64_t)i);
        memset(P(r, slot(r, 2 + NPAR + i, len[i])), 0, len[i]);
    }
    for (int i = 0; i < NPAR; i++) seq[i] = submit(r, FG_MSG_DISK_WRITE, name[i], 0, slot(r, 2 + i, len[i]));
    for (int i = 0; i < NPAR; i++)
        RT_CHECK(fg_super_wait(r->sup, seq[i], WAIT_MS, &d) == FG_OK, "parallel write %d: %s", i, d.error);
    for (int i = 0; i < NPAR; i++) seq[i] = submit(r, FG_MSG_DISK_READ, name[i], 0, slot(r, 2 + NPAR + i, len[i]));
    int same = 0;
    for (int i = 0; i < NPAR; i++) {
        RT_CHECK(fg_super_wait(r->sup, seq[i], WAIT_MS, &d) == FG_OK, "parallel read %d: %s", i, d.error);
        int ok = !memcmp(P(r, slot(r, 2 + i, len[i])), P(r, slot(r, 2 + NPAR + i, len[i])), len[i]);
        RT_CHECK(ok, "parallel round trip %d (%llu bytes) differs", i, (unsigned long long)len[i]);
        same += ok;
    }
    fprintf(stderr, "disk: %d/%d transfers in flight together came back exact\n", same, NPAR);
}

static void bad_transfers(rig *r) {
    fg_shm_handle dst = slot(r, 1, BIG);
    expect_error(r, "read of a missing file", FG_MSG_DISK_READ, "no-such-file", 8192, dst, FG_MSG_EIO,
                 "no-such-file", "cannot open", "offset 8192");
    /* big.bin ends at BIG_OFF + BIG: reading BIG bytes from 1 MiB in runs past it */
    expect_error(r, "read past the end of a file", FG_MSG_DISK_READ, "new/sub/big.bin", 1ull << 20, dst,
                 FG_MSG_EIO, "big.bin", "too short", "offset");
    expect_error(r, "read at a misaligned offset", FG_MSG_DISK_READ, "new/sub/big.bin", 100, dst, FG_MSG_EBADCMD,
                 "big.bin", "offset 100", NULL);
    fg_shm_handle odd = slot(r, 1, 4096);
    odd.offset += 8;
    expect_error(r, "read into a misaligned buffer", FG_MSG_DISK_READ, "new/sub/big.bin", 0, odd, FG_MSG_EBADCMD,
                 "big.bin", "aligned", NULL);
}

/* The worker with FG_AIO_FAULT set: every read fails with EIO (every one,
 * because each executor thread's engine counts its own faults); writes
 * work, and after each failure the worker still serves. */
static void eio(rig *r) {
    fg_shm_handle src = slot(r, 0, BIG), dst = slot(r, 1, BIG);
    pid_t pid = fg_super_worker_pid(r->sup, FG_ROLE_DISK);
    char path[256];
    snprintf(path, sizeof path, "%s/eio.bin", r->offload);
    for (int round = 0; round < 2; round++) {
        fill(P(r, src), BIG, 7 + (uint64_t)round);
        fg_super_done d;
        RT_CHECK(run(r, FG_MSG_DISK_WRITE, "eio.bin", 0, src, &d) == 0, "write with read faults: %s", d.error);
        RT_CHECK(file_has(path, 0, P(r, src), BIG), "%s: the bytes on disk differ from what was written", path);
        expect_error(r, "read with FG_AIO_FAULT=read:EIO", FG_MSG_DISK_READ, "eio.bin", 4096, dst, FG_MSG_EIO,
                     path, "Input/output error", "at offset 4096");
    }
    RT_CHECK(fg_super_worker_pid(r->sup, FG_ROLE_DISK) == pid, "the disk worker was replaced");
}

static void enospc(rig *r) {
    fg_shm_handle src = slot(r, 0, BIG);
    fill(P(r, src), BIG, 3);
    expect_error(r, "write with FG_AIO_FAULT=write:ENOSPC", FG_MSG_DISK_WRITE, "full.bin", 1ull << 20, src,
                 FG_MSG_EIO, "full.bin", "No space left on device", "offset");
    fg_super_done d;
    RT_CHECK(run(r, FG_MSG_DISK_READ, "new/sub/big.bin", BIG_OFF, slot(r, 1, BIG), &d) == 0,
             "read after a failed write: %s", d.error);
}

int rt_test_disk(void) {
    static rig r;
    snprintf(r.offload, sizeof r.offload, "/tmp/fg-rt-disk-XXXXXX");
    RT_CHECK(mkdtemp(r.offload) != NULL, "mkdtemp");

    rig_start(&r, NULL);
    roundtrip(&r);
    parallel(&r);
    bad_transfers(&r);
    roundtrip(&r);  /* still serving, same results */
    rig_stop(&r);

    rig_start(&r, "read:EIO");
    eio(&r);
    rig_stop(&r);

    rig_start(&r, "write:ENOSPC");
    enospc(&r);
    rig_stop(&r);

    /* every request completes short: the engine resubmits the rest */
    rig_start(&r, "any:short");
    roundtrip(&r);
    parallel(&r);
    rig_stop(&r);

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", r.offload);
    RT_CHECK(system(cmd) == 0, "rm offload dir");
    return 0;
}

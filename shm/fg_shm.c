/* fg_shm.c - POSIX shared-memory segments: create, attach with header
 * validation, unlink, the handle table, the layout function and the sweep of
 * segments left by dead runs. Who creates which segment, and when, is the
 * coordinator's business (runtime/fg_super.c); this file only keeps the
 * objects honest. */
#include "fg_shm.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

/* The header at offset 0 of every segment. Native layout: a segment never
 * leaves the machine that made it. The first fields (magic, version, creator)
 * keep their place in every format version so the sweep can read any. */
typedef struct {
    uint64_t magic;                /* FG_SHM_MAGIC, written last at creation */
    uint32_t format_version;       /* FG_SHM_FORMAT_VERSION */
    uint32_t header_bytes;         /* FG_SHM_HEADER_BYTES */
    uint32_t creator_pid;
    uint32_t index;                /* the segment number handles use */
    uint64_t creator_start_ticks;  /* see fg_proc_start_ticks */
    uint64_t total_bytes;          /* header + data, = object size */
    uint64_t data_offset;          /* = header_bytes */
    uint64_t data_bytes;
    uint64_t created_unix_ns;
    char run_id[FG_SHM_RUNID_LEN + 1];
    char segname[FG_SHM_SEGNAME_MAX + 1];
} fg_shm_header;

_Static_assert(sizeof(fg_shm_header) <= FG_SHM_HEADER_BYTES, "header fits its page");

struct fg_shm_seg {
    char name[FG_SHM_NAME_MAX];
    void *base;
    uint64_t size;
    uint32_t index;
    int owner;  /* created here: unlink on destroy */
};

/* ---- run ids and liveness --------------------------------------------- */

fg_status fg_shm_run_id_new(char out[FG_SHM_RUNID_LEN + 1]) {
    uint8_t rnd[FG_SHM_RUNID_LEN / 2];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        return fg_err_set(FG_ERUNTIME, "getrandom failed: %s", strerror(errno));
    for (size_t i = 0; i < sizeof rnd; i++) snprintf(out + 2 * i, 3, "%02x", rnd[i]);
    return FG_OK;
}

/* Reads /proc/PID/stat: state (field 3) and start time (field 22). The
 * command name (field 2) may hold spaces and parentheses, so parse from the
 * last ')'. */
static int proc_stat(pid_t pid, char *state, uint64_t *start) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ') return -1;
    p += 2;
    *state = *p;
    /* fields 3.. follow; start time is field 22, i.e. 19 fields after state */
    for (int f = 3; f < 22; f++) {
        p = strchr(p, ' ');
        if (!p) return -1;
        p++;
    }
    *start = strtoull(p, NULL, 10);
    return 0;
}

uint64_t fg_proc_start_ticks(pid_t pid) {
    char st;
    uint64_t start;
    return proc_stat(pid, &st, &start) == 0 ? start : 0;
}

int fg_proc_alive(pid_t pid, uint64_t start_ticks) {
    char st;
    uint64_t start;
    if (pid <= 0 || proc_stat(pid, &st, &start) != 0) return 0;
    if (st == 'Z' || st == 'X') return 0;
    if (start_ticks && start != start_ticks) return 0;  /* pid reused */
    return 1;
}

/* ---- names ------------------------------------------------------------ */

static int name_part_ok(const char *s, size_t maxlen) {
    size_t n = strlen(s);
    if (n == 0 || n > maxlen) return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!isalnum(c) && c != '_' && c != '.' && c != '-') return 0;
    }
    return 1;
}

fg_status fg_shm_name_make(const char *run_id, const char *segname, char *out) {
    if (!name_part_ok(run_id, FG_SHM_RUNID_LEN))
        return fg_err_set(FG_EINPUT, "bad run id '%s': expected 1..%d of [A-Za-z0-9_.-]",
                          run_id, FG_SHM_RUNID_LEN);
    if (!name_part_ok(segname, FG_SHM_SEGNAME_MAX))
        return fg_err_set(FG_EINPUT, "bad segment name '%s': expected 1..%d of [A-Za-z0-9_.-]",
                          segname, FG_SHM_SEGNAME_MAX);
    snprintf(out, FG_SHM_NAME_MAX, "/" FG_SHM_PREFIX "%s-%s", run_id, segname);
    return FG_OK;
}

/* ---- create / attach / destroy ---------------------------------------- */

uint64_t fg_shm_total_bytes(uint64_t data_bytes) {
    return FG_SHM_HEADER_BYTES + (data_bytes + FG_SHM_ALIGN - 1) / FG_SHM_ALIGN * FG_SHM_ALIGN;
}

fg_status fg_shm_check_room(uint64_t need, const char *what) {
    struct statvfs v;
    if (statvfs("/dev/shm", &v) != 0) return FG_OK;   /* no tmpfs to measure: shm_open says */
    uint64_t avail = (uint64_t)v.f_bavail * v.f_frsize, size = (uint64_t)v.f_blocks * v.f_frsize;
    if (need <= avail) return FG_OK;
    return fg_err_set(FG_ERUNTIME, "shared memory: this run needs %.1f MiB in /dev/shm (%s) but "
                      "only %.1f MiB of its %.1f MiB are free (HINT: enlarge it, e.g. mount -o "
                      "remount,size=%lluM /dev/shm, or docker run --shm-size; or keep less in CPU "
                      "memory: a lower --cpu-mem, or --percent with more on the GPU or disk)",
                      need / 1048576.0, what, avail / 1048576.0, size / 1048576.0,
                      (unsigned long long)((size - avail + need) / 1048576 + 64));
}

fg_status fg_shm_create(const char *run_id, const char *segname, uint32_t index,
                        uint64_t data_bytes, fg_shm_seg **out) {
    char name[FG_SHM_NAME_MAX];
    fg_status st = fg_shm_name_make(run_id, segname, name);
    if (st != FG_OK) return st;
    if (index >= FG_SHM_MAX_SEGMENTS)
        return fg_err_set(FG_EINPUT, "segment index %u too large (max %u)", index,
                          FG_SHM_MAX_SEGMENTS - 1);
    if (data_bytes > (UINT64_MAX >> 2))
        return fg_err_set(FG_EINPUT, "segment %s: size %" PRIu64 " too large", name, data_bytes);
    uint64_t total = fg_shm_total_bytes(data_bytes), data = total - FG_SHM_HEADER_BYTES;

    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return fg_err_set(FG_ERUNTIME, "shm_open(%s): %s%s", name, strerror(errno),
                          errno == EEXIST ? " (HINT: a run id collision or a leftover: "
                                            "remove /dev/shm" : "");
    /* shm_open honours the umask; the mode must be exactly 0600 */
    if (fchmod(fd, 0600) != 0 || ftruncate(fd, (off_t)total) != 0) {
        int e = errno;
        close(fd);
        shm_unlink(name);
        return fg_err_set(FG_ERUNTIME, "sizing shm segment %s to %" PRIu64 " bytes: %s%s", name,
                          total, strerror(e),
                          e == ENOSPC || e == EFBIG ? " (HINT: /dev/shm is too small: "
                                                      "lower --cpu-mem or enlarge /dev/shm)" : "");
    }
    void *base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (base == MAP_FAILED) {
        shm_unlink(name);
        return fg_err_set(FG_ERUNTIME, "mmap of shm segment %s (%" PRIu64 " bytes): %s", name,
                          total, strerror(e));
    }
    fg_shm_header *h = base;
    memset(h, 0, sizeof *h);
    h->format_version = FG_SHM_FORMAT_VERSION;
    h->header_bytes = FG_SHM_HEADER_BYTES;
    h->creator_pid = (uint32_t)getpid();
    h->index = index;
    h->creator_start_ticks = fg_proc_start_ticks(getpid());
    h->total_bytes = total;
    h->data_offset = FG_SHM_HEADER_BYTES;
    h->data_bytes = data;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    h->created_unix_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    snprintf(h->run_id, sizeof h->run_id, "%s", run_id);
    snprintf(h->segname, sizeof h->segname, "%s", segname);
    atomic_thread_fence(memory_order_release);
    h->magic = FG_SHM_MAGIC;  /* last: a half-made segment never validates */

    fg_shm_seg *s = fg_xcalloc(1, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->base = base;
    s->size = total;
    s->index = index;
    s->owner = 1;
    *out = s;
    return FG_OK;
}

/* A mapping's page tables filled in the background (MADV_POPULATE_WRITE),
 * for a process that reads a segment now and then (fg_shm_populate_async),
 * or every page touched now, for one that streams through all of it
 * (fg_mem_prefault). A page's first touch through a new mapping is
 * expensive on a virtualised MMU even after the kernel has filled its page
 * tables, so it belongs in setup, not in the run (figures in
 * docs/ARCHITECTURE.md, section 1). A kernel without MADV_POPULATE_WRITE (EINVAL before 5.14) leaves the
 * faults to the touches. */
typedef struct {
    void *base;
    size_t len;
} populate_job;

static void *populate_main(void *arg) {
    populate_job j = *(populate_job *)arg;
    free(arg);
    (void)madvise(j.base, j.len, MADV_POPULATE_WRITE);   /* a segment unmapped meanwhile: ENOMEM, harmless */
    return NULL;
}

void fg_shm_populate_async(const fg_shm_seg *seg) {
    populate_job *j = malloc(sizeof *j);
    pthread_t t;
    pthread_attr_t at;
    if (!j) return;
    *j = (populate_job){seg->base, (size_t)seg->size};
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &at, populate_main, j) != 0) free(j);
    pthread_attr_destroy(&at);
}

void fg_mem_prefault(void *base, size_t len) {
    (void)madvise(base, len, MADV_POPULATE_WRITE);
    const volatile uint8_t *p = base;
    uint8_t sink = 0;
    for (size_t off = 0; off < len; off += FG_SHM_ALIGN) sink ^= p[off];   /* a read per page: the data may be in use */
    (void)sink;
}

fg_status fg_shm_attach(const char *name, uint32_t expect_index, fg_shm_seg **out) {
    if (strncmp(name, "/" FG_SHM_PREFIX, strlen("/" FG_SHM_PREFIX)) != 0 ||
        strlen(name) >= FG_SHM_NAME_MAX || strchr(name + 1, '/'))
        return fg_err_set(FG_EINPUT, "'%s' is not a FlexGen segment name (expected /%s<run>-<name>)",
                          name, FG_SHM_PREFIX);
    int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0)
        return fg_err_set(FG_ERUNTIME, "cannot open shm segment %s: %s%s", name, strerror(errno),
                          errno == ENOENT ? " (HINT: its coordinator has exited or not created "
                                            "it yet)" : "");
    struct stat sb;
    if (fstat(fd, &sb) != 0 || (uint64_t)sb.st_size < FG_SHM_HEADER_BYTES) {
        close(fd);
        return fg_err_set(FG_ERUNTIME, "shm segment %s is too small to hold a header: "
                          "not a FlexGen segment, refusing it (HINT: rm /dev/shm%s)", name, name);
    }
    if (sb.st_uid != geteuid()) {
        close(fd);
        return fg_err_set(FG_ERUNTIME, "shm segment %s belongs to uid %u, not to us: refusing a "
                          "foreign segment", name, (unsigned)sb.st_uid);
    }
    void *base = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (base == MAP_FAILED)
        return fg_err_set(FG_ERUNTIME, "mmap of shm segment %s: %s", name, strerror(e));

    const fg_shm_header *h = base;
    fg_status st = FG_OK;
    if (h->magic != FG_SHM_MAGIC)
        st = fg_err_set(FG_ERUNTIME, "shm segment %s has no FlexGen header (bad magic): refusing "
                        "a foreign or half-made segment (HINT: rm /dev/shm%s)", name, name);
    else if (h->format_version != FG_SHM_FORMAT_VERSION)
        st = fg_err_set(FG_ERUNTIME, "shm segment %s has format version %u, this build reads %u: "
                        "refusing a segment from another build", name, h->format_version,
                        FG_SHM_FORMAT_VERSION);
    else if (h->header_bytes != FG_SHM_HEADER_BYTES || h->data_offset != FG_SHM_HEADER_BYTES ||
             h->total_bytes != (uint64_t)sb.st_size ||
             h->data_bytes != h->total_bytes - FG_SHM_HEADER_BYTES)
        st = fg_err_set(FG_ERUNTIME, "shm segment %s: header sizes (total %" PRIu64 ", data %"
                        PRIu64 ") do not match the object (%" PRIu64 " bytes): refusing it",
                        name, h->total_bytes, h->data_bytes, (uint64_t)sb.st_size);
    else if (expect_index != UINT32_MAX && h->index != expect_index)
        st = fg_err_set(FG_ERUNTIME, "shm segment %s is segment %u, expected %u", name, h->index,
                        expect_index);
    else if (!fg_proc_alive((pid_t)h->creator_pid, h->creator_start_ticks))
        st = fg_err_set(FG_ERUNTIME, "shm segment %s belongs to a dead run (creator pid %u is "
                        "gone): refusing a stale segment (HINT: the next flexgen run sweeps it)",
                        name, h->creator_pid);
    if (st != FG_OK) {
        munmap(base, (size_t)sb.st_size);
        return st;
    }
    fg_shm_seg *s = fg_xcalloc(1, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->base = base;
    s->size = (uint64_t)sb.st_size;
    s->index = h->index;
    *out = s;
    return FG_OK;
}

void fg_shm_destroy(fg_shm_seg **seg) {
    if (!seg || !*seg) return;
    fg_shm_seg *s = *seg;
    if (s->owner) shm_unlink(s->name);
    munmap(s->base, s->size);
    free(s);
    *seg = NULL;
}

void *fg_shm_base(const fg_shm_seg *seg) { return seg->base; }
uint64_t fg_shm_size(const fg_shm_seg *seg) { return seg->size; }
uint32_t fg_shm_index(const fg_shm_seg *seg) { return seg->index; }
const char *fg_shm_name(const fg_shm_seg *seg) { return seg->name; }

/* ---- table ------------------------------------------------------------ */

struct fg_shm_table {
    fg_shm_seg *segs[FG_SHM_MAX_SEGMENTS];
};

fg_shm_table *fg_shm_table_new(void) { return fg_xcalloc(1, sizeof(fg_shm_table)); }

void fg_shm_table_destroy(fg_shm_table **t) {
    if (!t || !*t) return;
    for (int i = 0; i < FG_SHM_MAX_SEGMENTS; i++) fg_shm_destroy(&(*t)->segs[i]);
    free(*t);
    *t = NULL;
}

fg_status fg_shm_table_add(fg_shm_table *t, fg_shm_seg *seg) {
    if (seg->index >= FG_SHM_MAX_SEGMENTS)
        return fg_err_set(FG_EINPUT, "segment index %u too large", seg->index);
    if (t->segs[seg->index] != seg) fg_shm_destroy(&t->segs[seg->index]);
    t->segs[seg->index] = seg;
    return FG_OK;
}

fg_shm_seg *fg_shm_table_get(const fg_shm_table *t, uint32_t index) {
    return index < FG_SHM_MAX_SEGMENTS ? t->segs[index] : NULL;
}

void *fg_shm_resolve(const fg_shm_table *t, fg_shm_handle h) {
    const fg_shm_seg *s = fg_shm_table_get(t, h.segment);
    if (!s) {
        fg_err_set(FG_EINPUT, "handle names segment %u, which is not mapped here", h.segment);
        return NULL;
    }
    if (h.offset < FG_SHM_HEADER_BYTES || h.offset > s->size || h.nbytes > s->size - h.offset) {
        fg_err_set(FG_EINPUT, "handle {seg %u, off %" PRIu64 ", %" PRIu64 " bytes} leaves the "
                   "data area [%u, %" PRIu64 ") of %s", h.segment, h.offset, h.nbytes,
                   FG_SHM_HEADER_BYTES, s->size, s->name);
        return NULL;
    }
    return (char *)s->base + h.offset;
}

/* ---- layout ----------------------------------------------------------- */

fg_status fg_shm_layout(fg_shm_region *regions, size_t n, uint64_t *data_bytes) {
    uint64_t off = FG_SHM_HEADER_BYTES;
    for (size_t i = 0; i < n; i++) {
        if (!regions[i].name || !regions[i].name[0])
            return fg_err_set(FG_EINPUT, "layout: region %zu has no name", i);
        for (size_t j = 0; j < i; j++)
            if (!strcmp(regions[i].name, regions[j].name))
                return fg_err_set(FG_EINPUT, "layout: region name '%s' used twice", regions[i].name);
        uint64_t sz = regions[i].nbytes;
        if (sz > UINT64_MAX / 4 || off > UINT64_MAX / 4 - sz)
            return fg_err_set(FG_EINPUT, "layout: region '%s' (%" PRIu64 " bytes) overflows",
                              regions[i].name, sz);
        regions[i].offset = off;
        off += (sz + FG_SHM_ALIGN - 1) / FG_SHM_ALIGN * FG_SHM_ALIGN;
    }
    *data_bytes = off - FG_SHM_HEADER_BYTES;
    return FG_OK;
}

fg_shm_handle fg_shm_layout_handle(const fg_shm_region *regions, size_t n, uint32_t segment,
                                   const char *name) {
    fg_shm_handle h = {segment, 0, 0};
    for (size_t i = 0; i < n; i++)
        if (!strcmp(regions[i].name, name)) {
            h.offset = regions[i].offset;
            h.nbytes = regions[i].nbytes;
            break;
        }
    return h;
}

/* ---- sweep ------------------------------------------------------------ */

int fg_shm_sweep(void) {
    DIR *d = opendir("/dev/shm");
    if (!d) return 0;
    int removed = 0;
    struct dirent *de;
    time_t now = time(NULL);
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, FG_SHM_PREFIX, strlen(FG_SHM_PREFIX)) != 0) continue;
        int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) continue;
        struct stat sb;
        fg_shm_header h;
        int have_stat = fstat(fd, &sb) == 0;
        ssize_t got = pread(fd, &h, sizeof h, 0);
        close(fd);
        if (!have_stat || sb.st_uid != geteuid() || !S_ISREG(sb.st_mode)) continue;
        int dead;
        if (got == (ssize_t)sizeof h && h.magic == FG_SHM_MAGIC)
            dead = !fg_proc_alive((pid_t)h.creator_pid, h.creator_start_ticks);
        else  /* no header: a run creating it right now, or debris; give it a minute */
            dead = now - sb.st_mtime > 60;
        if (!dead) continue;
        char name[300];
        snprintf(name, sizeof name, "/%s", de->d_name);
        if (shm_unlink(name) == 0) {
            fg_info("swept stale shm segment %s (creator pid %u is gone)", name,
                    got == (ssize_t)sizeof h ? h.creator_pid : 0);
            removed++;
        }
    }
    closedir(d);
    return removed;
}

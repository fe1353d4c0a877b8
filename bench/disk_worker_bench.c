/* disk_worker_bench.c - fg-bench-disk-worker: sequential bandwidth of the
 * real flexgen-disk-worker, driven through the runtime the way the
 * coordinator drives it (fg_super, shm segments, DISK_READ / DISK_WRITE
 * commands over ZeroMQ, the worker's executor threads and their libaio
 * engines). bench/bench_disk.sh runs it beside fio on the same files.
 *
 *   fg-bench-disk-worker read  FILE       [options]
 *   fg-bench-disk-worker write FILE SIZE  [options]
 *   fg-bench-disk-worker store DIR/MODEL-ID [options]
 *
 *   --chunk SIZE      bytes per DISK_* command (default 64M)
 *   --inflight N      commands kept in flight (default 4: one per executor
 *                     thread of the disk worker)
 *   --worker-dir DIR  where flexgen-disk-worker lives (default: the
 *                     directory of this executable)
 *
 * read / write: one sequential pass over the file (its size rounded down to
 * FG_AIO_ALIGN for read; SIZE for write, creating the file), chunk by chunk, into or
 * out of a ring of `inflight` chunk-sized slots of one shm segment.
 * store: every file's data region (fg_store_data_range) of an existing tier
 * store, split into chunks, into one segment that holds the whole store (a
 * CPU tier holding the model); afterwards every tensor's checksum is checked
 * (outside the timing), so the figure is for bytes that arrived intact.
 *
 * The segment is touched (memset) before timing: a run's segments are made
 * once and reused, so first-touch page faults are not disk time. The clock
 * runs from the first submit to the last completion, on this side.
 *
 * Figures go to stdout as KEY=VALUE lines, GB/s in 10^9 bytes per second;
 * logs to stderr. */
#define _GNU_SOURCE
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fg_store.h"
#include "fg_super.h"

#define WAIT_MS 120000             /* between completions: a stalled device, not a slow one */
#define DEFAULT_CHUNK (64ull << 20)  /* --chunk */
#define DEFAULT_INFLIGHT 4           /* --inflight: one per executor thread of the disk worker */
#define MAX_INFLIGHT 64

/* One DISK_* command of the pass. */
typedef struct {
    int file;              /* store: the file (layer or FG_STORE_GLOBALS); else 0 */
    uint64_t file_offset;
    uint64_t seg_offset;   /* from the segment's start (>= FG_SHM_HEADER_BYTES) */
    uint64_t nbytes;
} piece;

typedef struct {
    fg_super *sup;
    uint32_t seg;
    int type;              /* FG_MSG_DISK_READ or FG_MSG_DISK_WRITE */
    const char *path;      /* read / write: the file */
    const fg_store *store; /* store: its files */
    piece *pc;             /* (npc) in submission order */
    size_t npc, next, done;
    int ring;              /* 1: pieces share `inflight` slots; 0: each has its own */
    uint64_t chunk;
    uint64_t worker_ns;    /* the commands' time on the worker, summed */
} pass;

static void usage(void) {
    fprintf(stderr,
            "usage: fg-bench-disk-worker read FILE [options]\n"
            "       fg-bench-disk-worker write FILE SIZE [options]\n"
            "       fg-bench-disk-worker store DIR/MODEL-ID [options]\n"
            "options: --chunk SIZE (64M)  --inflight N (4)  --worker-dir DIR\n");
    exit(2);
}

static uint64_t size_arg(const char *flag, const char *v) {
    uint64_t x;
    if (fg_parse_size(v, &x) != FG_OK || !x) {
        fprintf(stderr, "fg-bench-disk-worker: %s: expected a size like 64M or 2G, got '%s'\n", flag, v);
        exit(2);
    }
    return x;
}

/* ---- the pass: submit with `inflight` outstanding, refill on completion ---- */

static void submit_piece(pass *p, size_t i) {
    const piece *q = &p->pc[i];
    fg_msg m;
    fg_msg_init(&m, p->type);
    const char *path = p->store ? fg_store_path(p->store, q->file) : p->path;
    snprintf(m.u.disk.path, sizeof m.u.disk.path, "%s", path);
    m.u.disk.file_offset = q->file_offset;
    m.u.disk.buf = (fg_shm_handle){p->seg, q->seg_offset, q->nbytes};
    fg_exit_on(fg_super_submit(p->sup, FG_ROLE_DISK, &m, (void *)(uintptr_t)i, NULL));
}

static void on_done(void *ctx, const fg_super_done *d) {
    pass *p = ctx;
    if (d->status) {
        fprintf(stderr, "fg-bench-disk-worker: %s failed: %s\n", fg_msg_type_name(d->type), d->error);
        exit(1);
    }
    p->done++;
    p->worker_ns += d->end_ns - d->start_ns;
    if (p->next < p->npc) {
        size_t i = p->next++;
        /* in the ring, the next piece takes the slot this one just freed */
        if (p->ring) p->pc[i].seg_offset = p->pc[(uintptr_t)d->user].seg_offset;
        submit_piece(p, i);
    }
}

/* Run every piece with up to `inflight` in flight; seconds it took. */
static double run_pass(pass *p, int inflight) {
    p->next = p->done = 0;
    p->worker_ns = 0;
    double t0 = fg_now();
    while (p->next < p->npc && p->next < (size_t)inflight) {
        if (p->ring) p->pc[p->next].seg_offset = FG_SHM_HEADER_BYTES + p->next * p->chunk;
        submit_piece(p, p->next);
        p->next++;
    }
    double last = t0;   /* of the last completion */
    while (p->done < p->npc) {
        int k = fg_super_poll(p->sup, 1000, on_done, p);
        if (k < 0) {
            fprintf(stderr, "fg-bench-disk-worker: the runtime's socket failed\n");
            exit(1);
        }
        if (k > 0) last = fg_now();
        else if (fg_now() - last > WAIT_MS / 1e3) {
            fprintf(stderr, "fg-bench-disk-worker: no command finished in %d s\n", WAIT_MS / 1000);
            exit(1);
        }
    }
    return fg_now() - t0;
}

/* Pieces of [off, off + n) of one file, at most chunk bytes each. */
static void add_pieces(pass *p, size_t *cap, int file, uint64_t off, uint64_t n, uint64_t *seg_at) {
    for (uint64_t k = 0; k < n; k += p->chunk) {
        if (p->npc == *cap) {
            *cap = *cap ? 2 * *cap : 256;
            p->pc = realloc(p->pc, *cap * sizeof *p->pc);
            FG_ASSERT(p->pc);
        }
        uint64_t len = n - k < p->chunk ? n - k : p->chunk;
        p->pc[p->npc++] = (piece){file, off + k, seg_at ? *seg_at + k : 0, len};
    }
    if (seg_at) *seg_at += n;
}

/* ---- main ---- */

typedef struct {
    const char *mode;            /* "read", "write" or "store" */
    char target[PATH_MAX];       /* the file or the store's directory, absolute */
    uint64_t chunk, write_bytes; /* write_bytes: write's SIZE */
    int inflight;
    const char *worker_dir;
} bench_args;

/* The file of write may not exist yet: its directory made absolute. */
static void resolve_new_file(const char *arg, char *target, size_t len) {
    char tmp[PATH_MAX], dirbuf[PATH_MAX], rdir[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", arg);
    snprintf(dirbuf, sizeof dirbuf, "%s", dirname(tmp));
    if (!realpath(dirbuf, rdir)) {
        fprintf(stderr, "fg-bench-disk-worker: %s: no such directory\n", dirbuf);
        exit(2);
    }
    snprintf(tmp, sizeof tmp, "%s", arg);
    if (snprintf(target, len, "%s/%s", rdir, basename(tmp)) >= (int)len) usage();
}

static void parse_args(int argc, char **argv, bench_args *a) {
    static const struct option opts[] = {
        {"chunk", 1, 0, 'c'}, {"inflight", 1, 0, 'n'}, {"worker-dir", 1, 0, 'w'}, {0, 0, 0, 0}};
    *a = (bench_args){.chunk = DEFAULT_CHUNK, .inflight = DEFAULT_INFLIGHT};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'c': a->chunk = size_arg("--chunk", optarg); break;
        case 'n': a->inflight = atoi(optarg); break;
        case 'w': a->worker_dir = optarg; break;
        default: usage();
        }
    }
    if (optind + 2 > argc || a->chunk % FG_AIO_ALIGN || a->inflight < 1 || a->inflight > MAX_INFLIGHT) usage();
    a->mode = argv[optind];
    if (!strcmp(a->mode, "write")) {
        if (optind + 3 != argc) usage();
        resolve_new_file(argv[optind + 1], a->target, sizeof a->target);
        a->write_bytes = size_arg("SIZE", argv[optind + 2]);
    } else if (!strcmp(a->mode, "read") || !strcmp(a->mode, "store")) {
        if (optind + 2 != argc) usage();
        if (!realpath(argv[optind + 1], a->target)) {
            fprintf(stderr, "fg-bench-disk-worker: %s: not found\n", argv[optind + 1]);
            exit(2);
        }
    } else {
        usage();
    }
}

/* The pass's pieces: every data region of the store, each at its place in
 * one segment that holds them all; or the file in a ring of `inflight`
 * chunks. *total: the bytes moved; *seg_bytes: the segment's size. */
static void plan_pass(const bench_args *a, pass *p, fg_store **store, uint64_t *total, uint64_t *seg_bytes) {
    size_t cap = 0;
    if (!strcmp(a->mode, "store")) {
        fg_exit_on(fg_store_open(a->target, store));
        p->store = *store;
        uint64_t at = FG_SHM_HEADER_BYTES;
        for (int f = FG_STORE_GLOBALS; f < fg_store_n_layers(*store); f++) {
            uint64_t off, n;
            fg_store_data_range(*store, f, &off, &n);
            add_pieces(p, &cap, f, off, n, &at);
        }
        *total = *seg_bytes = fg_store_total_bytes(*store);
        return;
    }
    if (p->type == FG_MSG_DISK_WRITE) {
        *total = a->write_bytes;
    } else {
        struct stat sb;
        if (stat(a->target, &sb) != 0 || sb.st_size < (off_t)FG_AIO_ALIGN) {
            fprintf(stderr, "fg-bench-disk-worker: %s: empty or unreadable\n", a->target);
            exit(2);
        }
        *total = (uint64_t)sb.st_size;
    }
    *total = *total / FG_AIO_ALIGN * FG_AIO_ALIGN;
    p->ring = 1;
    add_pieces(p, &cap, 0, 0, *total, NULL);
    *seg_bytes = (uint64_t)a->inflight * a->chunk;
}

/* A disk worker under its own supervisor, and the segment of seg_bytes it
 * moves bytes through, touched before any clock starts. The segment's
 * data, by its address in this process. */
static uint8_t *start_worker(const bench_args *a, pass *p, uint64_t seg_bytes) {
    /* The worker's --offload-dir: the file's directory (every path sent is
     * absolute, so it only has to exist). */
    char offload[PATH_MAX];
    snprintf(offload, sizeof offload, "%s", a->target);
    if (strcmp(a->mode, "store")) snprintf(offload, sizeof offload, "%s", dirname(offload));
    fg_super_opts o;
    memset(&o, 0, sizeof o);
    o.roles = 1u << FG_ROLE_DISK;
    o.worker_dir = a->worker_dir;
    o.offload_dir = offload;
    if (fg_super_new(&o, &p->sup) != FG_OK) {
        fprintf(stderr, "fg-bench-disk-worker: cannot start flexgen-disk-worker: %s\n"
                        "HINT: build it (cmake --build BUILD) and pass --worker-dir BUILD/bin\n", fg_err_msg());
        exit(1);
    }
    fg_exit_on(fg_super_segment_new(p->sup, "bench", seg_bytes, &p->seg));
    uint8_t *base = fg_super_ptr(p->sup, (fg_shm_handle){p->seg, FG_SHM_HEADER_BYTES, seg_bytes});
    FG_ASSERT(base);
    /* Touch it in chunks, polling between them: a coordinator deaf for
     * FG_HB_LIVENESS heartbeats would declare the worker dead. Not zeros,
     * so what is written is not a zero page that anything could skip. */
    for (uint64_t i = 0; i < seg_bytes; i += a->chunk) {
        memset(base + i, 0xA5, seg_bytes - i < a->chunk ? seg_bytes - i : a->chunk);
        fg_super_poll(p->sup, 0, NULL, NULL);
    }
    return base;
}

/* Every tensor of the store, as read into base, against its checksum: 1
 * when all match. */
static int verify_store(const fg_store *store, const uint8_t *base) {
    uint64_t at = 0;
    for (int f = FG_STORE_GLOBALS; f < fg_store_n_layers(store); f++) {
        uint64_t off, n;
        fg_store_data_range(store, f, &off, &n);
        if (fg_store_verify(store, f, base + at) != FG_OK) {
            fprintf(stderr, "fg-bench-disk-worker: %s\n", fg_err_msg());
            return 0;
        }
        at += n;
    }
    return 1;
}

int main(int argc, char **argv) {
    fg_log_init("bench-disk-worker");
    bench_args a;
    parse_args(argc, argv, &a);
    pass p = {.type = strcmp(a.mode, "write") ? FG_MSG_DISK_READ : FG_MSG_DISK_WRITE, .path = a.target,
              .chunk = a.chunk};
    uint64_t total = 0, seg_bytes;
    fg_store *store = NULL;
    plan_pass(&a, &p, &store, &total, &seg_bytes);
    uint8_t *base = start_worker(&a, &p, seg_bytes);

    double secs = run_pass(&p, a.inflight);
    int verified = store ? verify_store(store, base) : -1;

    const char *key = store ? "store_read" : p.type == FG_MSG_DISK_READ ? "read" : "write";
    fg_super_stats ss;
    fg_super_get_stats(p.sup, &ss);
    printf("%s_GBps=%.4f\nbytes=%" PRIu64 "\nseconds=%.4f\ncommands=%zu\nchunk=%" PRIu64 "\ninflight=%d\n"
           "worker_seconds=%.4f\n", key, total / secs / 1e9, total, secs, p.npc, a.chunk, a.inflight, p.worker_ns / 1e9);
    if (store) printf("files=%d\nverified=%d\n", fg_store_n_layers(store) + 1, verified);
    printf("worker_deaths=%u\n", ss.deaths[FG_ROLE_DISK]);
    fg_super_destroy(&p.sup);
    fg_store_destroy(&store);
    free(p.pc);
    return verified == 0 || ss.deaths[FG_ROLE_DISK] ? 1 : 0;
}

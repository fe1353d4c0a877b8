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
 * 4096 for read; SIZE for write, creating the file), chunk by chunk, into or
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

#define WAIT_MS 120000  /* between completions: a stalled device, not a slow one */

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

int main(int argc, char **argv) {
    fg_log_init("bench-disk-worker");
    static const struct option opts[] = {
        {"chunk", 1, 0, 'c'}, {"inflight", 1, 0, 'n'}, {"worker-dir", 1, 0, 'w'}, {0, 0, 0, 0}};
    uint64_t chunk = 64ull << 20;
    int inflight = 4;
    const char *worker_dir = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'c': chunk = size_arg("--chunk", optarg); break;
        case 'n': inflight = atoi(optarg); break;
        case 'w': worker_dir = optarg; break;
        default: usage();
        }
    }
    if (optind + 2 > argc || chunk % 4096 || inflight < 1 || inflight > 64) usage();
    const char *mode = argv[optind];
    char target[PATH_MAX];
    if (!strcmp(mode, "write")) {
        if (optind + 3 != argc) usage();
        /* the file may not exist yet: resolve its directory */
        char tmp[PATH_MAX], dirbuf[PATH_MAX];
        snprintf(tmp, sizeof tmp, "%s", argv[optind + 1]);
        snprintf(dirbuf, sizeof dirbuf, "%s", dirname(tmp));
        char rdir[PATH_MAX];
        if (!realpath(dirbuf, rdir)) {
            fprintf(stderr, "fg-bench-disk-worker: %s: no such directory\n", dirbuf);
            return 2;
        }
        snprintf(tmp, sizeof tmp, "%s", argv[optind + 1]);
        if (snprintf(target, sizeof target, "%s/%s", rdir, basename(tmp)) >= (int)sizeof target) usage();
    } else if (!strcmp(mode, "read") || !strcmp(mode, "store")) {
        if (optind + 2 != argc) usage();
        if (!realpath(argv[optind + 1], target)) {
            fprintf(stderr, "fg-bench-disk-worker: %s: not found\n", argv[optind + 1]);
            return 2;
        }
    } else {
        usage();
    }

    pass p = {.type = strcmp(mode, "write") ? FG_MSG_DISK_READ : FG_MSG_DISK_WRITE, .path = target,
              .chunk = chunk};
    size_t cap = 0;
    uint64_t total = 0, seg_bytes;
    fg_store *store = NULL;
    if (!strcmp(mode, "store")) {
        fg_exit_on(fg_store_open(target, &store));
        p.store = store;
        uint64_t at = FG_SHM_HEADER_BYTES;
        for (int f = FG_STORE_GLOBALS; f < fg_store_n_layers(store); f++) {
            uint64_t off, n;
            fg_store_data_range(store, f, &off, &n);
            add_pieces(&p, &cap, f, off, n, &at);
        }
        total = fg_store_total_bytes(store);
        seg_bytes = total;
    } else {
        if (p.type == FG_MSG_DISK_WRITE) {
            total = size_arg("SIZE", argv[optind + 2]);
        } else {
            struct stat sb;
            if (stat(target, &sb) != 0 || sb.st_size < 4096) {
                fprintf(stderr, "fg-bench-disk-worker: %s: empty or unreadable\n", target);
                return 2;
            }
            total = (uint64_t)sb.st_size;
        }
        total = total / 4096 * 4096;
        p.ring = 1;
        add_pieces(&p, &cap, 0, 0, total, NULL);
        seg_bytes = (uint64_t)inflight * chunk;
    }

    /* The worker's --offload-dir: the file's directory (every path sent is
     * absolute, so it only has to exist). */
    char offload[PATH_MAX];
    snprintf(offload, sizeof offload, "%s", target);
    if (strcmp(mode, "store")) snprintf(offload, sizeof offload, "%s", dirname(offload));
    fg_super_opts o;
    memset(&o, 0, sizeof o);
    o.roles = 1u << FG_ROLE_DISK;
    o.worker_dir = worker_dir;
    o.offload_dir = offload;
    fg_status st = fg_super_new(&o, &p.sup);
    if (st != FG_OK) {
        fprintf(stderr, "fg-bench-disk-worker: cannot start flexgen-disk-worker: %s\n"
                        "HINT: build it (cmake --build BUILD) and pass --worker-dir BUILD/bin\n", fg_err_msg());
        return 1;
    }
    fg_exit_on(fg_super_segment_new(p.sup, "bench", seg_bytes, &p.seg));
    uint8_t *base = fg_super_ptr(p.sup, (fg_shm_handle){p.seg, FG_SHM_HEADER_BYTES, seg_bytes});
    FG_ASSERT(base);
    /* Touch it in chunks, polling between them: a coordinator deaf for
     * FG_HB_LIVENESS heartbeats would declare the worker dead. Not zeros,
     * so what is written is not a zero page that anything could skip. */
    for (uint64_t i = 0; i < seg_bytes; i += chunk) {
        memset(base + i, 0xA5, seg_bytes - i < chunk ? seg_bytes - i : chunk);
        fg_super_poll(p.sup, 0, NULL, NULL);
    }

    double secs = run_pass(&p, inflight);

    int verified = -1;
    if (store) {
        verified = 1;
        uint64_t at = 0;
        for (int f = FG_STORE_GLOBALS; f < fg_store_n_layers(store) && verified; f++) {
            uint64_t off, n;
            fg_store_data_range(store, f, &off, &n);
            if (fg_store_verify(store, f, base + at) != FG_OK) {
                fprintf(stderr, "fg-bench-disk-worker: %s\n", fg_err_msg());
                verified = 0;
            }
            at += n;
        }
    }

    const char *key = store ? "store_read" : p.type == FG_MSG_DISK_READ ? "read" : "write";
    fg_super_stats ss;
    fg_super_get_stats(p.sup, &ss);
    printf("%s_GBps=%.4f\nbytes=%" PRIu64 "\nseconds=%.4f\ncommands=%zu\nchunk=%" PRIu64 "\ninflight=%d\n"
           "worker_seconds=%.4f\n", key, total / secs / 1e9, total, secs, p.npc, chunk, inflight, p.worker_ns / 1e9);
    if (store) printf("files=%d\nverified=%d\n", fg_store_n_layers(store) + 1, verified);
    printf("worker_deaths=%u\n", ss.deaths[FG_ROLE_DISK]);
    fg_super_destroy(&p.sup);
    fg_store_destroy(&store);
    free(p.pc);
    return verified == 0 || ss.deaths[FG_ROLE_DISK] ? 1 : 0;
}

/* fg_disk_bench.c - flexgen-disk-bench: the disk tier's engine and store,
 * driven alone for benchmarks (bench/bench_disk.sh) and tests. Figures go to
 * stdout as KEY=VALUE lines (profile: one JSON object with --json); logs to
 * stderr.
 *
 *   flexgen-disk-bench profile [--dir DIR] [--size SIZE] [--point-seconds S] [--json]
 *   flexgen-disk-bench read  --file F [--bs 1M] [--qd 32] [--size SIZE] [--buffered]
 *   flexgen-disk-bench write --file F --size SIZE [--bs 1M] [--qd 32] [--buffered]
 *   flexgen-disk-bench checksum [--size 512M]
 *   flexgen-disk-bench store-build (--dummy NAME [--seed N] | --model DIR) --dir DIR [--fresh] [--verify]
 *   flexgen-disk-bench store-read  --store DIR/MODEL-ID [--bs 1M] [--qd 32] [--verify] [--no-prefault]
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fg_aio_profile.h"
#include "fg_store.h"

typedef struct {
    const char *dir, *file, *dummy, *model, *store;
    uint64_t size, bs;
    int qd, json, buffered, fresh, verify, prefault;
    uint64_t seed;
    double point_seconds;
} args;

static void usage(void) {
    fprintf(stderr,
            "usage: flexgen-disk-bench COMMAND [options]\n"
            "  profile [--dir DIR] [--size SIZE] [--point-seconds S] [--json]\n"
            "  read  --file F [--bs 1M] [--qd 32] [--size SIZE] [--buffered]\n"
            "  write --file F --size SIZE [--bs 1M] [--qd 32] [--buffered]\n"
            "  checksum [--size 512M]\n"
            "  store-build (--dummy NAME [--seed N] | --model DIR) --dir DIR [--fresh] [--verify]\n"
            "  store-read --store DIR/MODEL-ID [--bs 1M] [--qd 32] [--verify] [--no-prefault]\n");
    exit(2);
}

static uint64_t size_arg(const char *flag, const char *v) {
    uint64_t x;
    if (fg_parse_size(v, &x) != FG_OK) {
        fprintf(stderr, "flexgen-disk-bench: %s: expected a size like 1M or 4G, got '%s'\n", flag, v);
        exit(2);
    }
    return x;
}

static void parse(int argc, char **argv, args *a) {
    static const struct option opts[] = {
        {"dir", 1, 0, 'd'},   {"file", 1, 0, 'f'},     {"size", 1, 0, 's'},      {"bs", 1, 0, 'b'},
        {"qd", 1, 0, 'q'},    {"json", 0, 0, 'j'},     {"buffered", 0, 0, 'B'},  {"dummy", 1, 0, 'D'},
        {"seed", 1, 0, 'S'},  {"model", 1, 0, 'm'},    {"store", 1, 0, 't'},     {"fresh", 0, 0, 'F'},
        {"verify", 0, 0, 'v'}, {"no-prefault", 0, 0, 'P'}, {"point-seconds", 1, 0, 'p'}, {0, 0, 0, 0}};
    memset(a, 0, sizeof *a);
    a->bs = 1 << 20;
    a->qd = 32;
    a->seed = 1;
    a->prefault = 1;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'd': a->dir = optarg; break;
        case 'f': a->file = optarg; break;
        case 's': a->size = size_arg("--size", optarg); break;
        case 'b': a->bs = size_arg("--bs", optarg); break;
        case 'q': a->qd = atoi(optarg); break;
        case 'j': a->json = 1; break;
        case 'B': a->buffered = 1; break;
        case 'D': a->dummy = optarg; break;
        case 'S': a->seed = strtoull(optarg, NULL, 10); break;
        case 'm': a->model = optarg; break;
        case 't': a->store = optarg; break;
        case 'F': a->fresh = 1; break;
        case 'v': a->verify = 1; break;
        case 'P': a->prefault = 0; break;
        case 'p': a->point_seconds = atof(optarg); break;
        default: usage();
        }
    }
}

/* ---- profile ---- */

static int cmd_profile(const args *a) {
    fg_aio_profile_opts o = {.dir = a->dir, .file_bytes = a->size, .point_seconds = a->point_seconds};
    json_t *j;
    fg_exit_on(fg_aio_profile(&o, &j));
    if (a->json) {
        char *s = json_dumps(j, JSON_COMPACT);
        printf("%s\n", s);
        free(s);
    } else {
        printf("disk_read_GBps=%.4f\ndisk_write_GBps=%.4f\n", json_real_value(json_object_get(j, "disk_read_GBps")),
               json_real_value(json_object_get(j, "disk_write_GBps")));
    }
    json_decref(j);
    return 0;
}

/* ---- sequential read / write of one file ---- */

static int cmd_rw(const args *a, fg_aio_op op) {
    if (!a->file) usage();
    fg_aio_file f;
    int flags = op == FG_AIO_READ ? O_RDONLY : O_WRONLY | O_CREAT;
    fg_exit_on(fg_aio_file_open(a->file, flags | (a->buffered ? FG_AIO_BUFFERED : 0), 0600, &f));
    uint64_t total = a->size;
    if (!total) {
        struct stat st;
        if (fstat(f.fd, &st) != 0 || st.st_size <= 0) {
            fprintf(stderr, "flexgen-disk-bench: %s: empty; pass --size\n", a->file);
            return 2;
        }
        total = (uint64_t)st.st_size;
    }
    total = total / a->bs * a->bs;
    fg_aio *aio;
    fg_exit_on(fg_aio_new(a->qd, a->bs, &aio));
    uint64_t chunk, bytes;
    int nbuf;
    double secs;
    fg_aio_stream_shape(a->bs, a->qd, &chunk, &nbuf);
    fg_exit_on(fg_aio_stream(aio, &f, op, 0, total, chunk, nbuf, 0, &bytes, &secs));
    fg_aio_stats s;
    fg_aio_get_stats(aio, &s);
    const char *name = op == FG_AIO_READ ? "read" : "write";
    printf("%s_GBps=%.4f\nbytes=%" PRIu64 "\nseconds=%.4f\ndirect=%d\nmax_inflight=%d\n", name, bytes / secs / 1e9,
           bytes, secs, f.direct, s.max_inflight);
    fg_aio_destroy(&aio);
    fg_aio_file_close(&f);
    return 0;
}

/* ---- checksum speed ---- */

static int cmd_checksum(const args *a) {
    uint64_t n = a->size ? a->size : (512ull << 20);
    uint8_t *p = fg_alloc_tensor(n);
    for (uint64_t i = 0; i < n; i++) p[i] = (uint8_t)(i * 2654435761u >> 13);
    uint64_t h = fg_store_checksum(p, n), h2 = 0; /* the first pass warms the pages */
    double best = 1e9;
    for (int r = 0; r < 5; r++) {
        double t0 = fg_now();
        h2 = fg_store_checksum(p, n);
        double dt = fg_now() - t0;
        if (dt < best) best = dt;
    }
    FG_ASSERT(h == h2);
    printf("checksum_GBps=%.3f\nbytes=%" PRIu64 "\nhash=%016" PRIx64 "\n", n / best / 1e9, n, h);
    free(p);
    return 0;
}

/* ---- the tier store ---- */

static void remove_store_files(const char *root) {
    DIR *d = opendir(root);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' && strcmp(e->d_name, ".lock")) continue;
        char p[8192];
        snprintf(p, sizeof p, "%s/%s", root, e->d_name);
        unlink(p);
    }
    closedir(d);
}

static int cmd_store_build(const args *a) {
    if (!a->dir || (!a->dummy && !a->model)) usage();
    fg_wsrc *ws;
    fg_exit_on(a->dummy ? fg_wsrc_open_dummy(a->dummy, a->seed, &ws) : fg_wsrc_open_dir(a->model, NULL, &ws));
    if (a->fresh) {
        char root[4096];
        snprintf(root, sizeof root, "%s/%s-fp16", a->dir, fg_wsrc_config(ws)->name);
        remove_store_files(root);
    }
    fg_store_opts o = {.verify_data = a->verify, .qd = a->qd, .req_bytes = a->bs};
    fg_store *s;
    double t0 = fg_now();
    fg_exit_on(fg_store_open_or_build_ex(a->dir, ws, &o, &s));
    double dt = fg_now() - t0;
    printf("store=%s\nbytes=%" PRIu64 "\nseconds=%.3f\nGBps=%.4f\n", fg_store_dir(s), fg_store_total_bytes(s), dt,
           fg_store_total_bytes(s) / dt / 1e9);
    fg_store_destroy(&s);
    fg_wsrc_destroy(&ws);
    return 0;
}

/* Every file's data region into one shared-memory segment laid out like a
 * CPU tier holding the whole model, all files queued at once so the queue
 * stays full across file boundaries, as a disk worker with queued commands
 * runs. */
static int cmd_store_read(const args *a) {
    if (!a->store) usage();
    fg_store *s;
    fg_exit_on(fg_store_open(a->store, &s));
    int nf = fg_store_n_layers(s) + 1;
    uint64_t total = fg_store_total_bytes(s);
    char name[64];
    snprintf(name, sizeof name, "/fg-disk-bench-%d", (int)getpid());
    int shm = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (shm < 0 || ftruncate(shm, (off_t)total) != 0) {
        fprintf(stderr, "flexgen-disk-bench: shm segment of %" PRIu64 " bytes: %s\n", total, strerror(errno));
        return 1;
    }
    shm_unlink(name);
    uint8_t *seg = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, shm, 0);
    close(shm);
    if (seg == MAP_FAILED) {
        fprintf(stderr, "flexgen-disk-bench: mmap %" PRIu64 " bytes: %s\n", total, strerror(errno));
        return 1;
    }
    /* Workers map segments the coordinator already created and touched;
     * first-touch page faults are not disk time. */
    if (a->prefault) memset(seg, 0, total);
    fg_aio *aio;
    fg_exit_on(fg_aio_new(a->qd, a->bs, &aio));
    fg_aio_file *f = fg_xcalloc((size_t)nf, sizeof *f);
    uint64_t *ids = fg_xcalloc((size_t)nf, sizeof *ids), *at = fg_xcalloc((size_t)nf, sizeof *at);
    double t0 = fg_now(), tverify = 0;
    uint64_t pos = 0;
    for (int i = 0; i < nf; i++) {
        uint64_t off, n;
        fg_store_data_range(s, i - 1, &off, &n);
        fg_exit_on(fg_aio_file_open(fg_store_path(s, i - 1), O_RDONLY, 0, &f[i]));
        at[i] = pos;
        fg_aio_submit(aio, FG_AIO_READ, &f[i], off, seg + pos, n, &ids[i]);
        pos += n;
    }
    for (int i = 0; i < nf; i++) {
        fg_exit_on(fg_aio_wait(aio, ids[i]));
        if (a->verify) {
            double tv = fg_now();
            fg_exit_on(fg_store_verify(s, i - 1, seg + at[i]));
            tverify += fg_now() - tv;
        }
    }
    double dt = fg_now() - t0;
    printf("store_read_GBps=%.4f\nbytes=%" PRIu64 "\nfiles=%d\nseconds=%.4f\nverify_seconds=%.4f\ndirect=%d\n",
           total / dt / 1e9, total, nf, dt, tverify, f[0].direct);
    for (int i = 0; i < nf; i++) fg_aio_file_close(&f[i]);
    free(f);
    free(ids);
    free(at);
    fg_aio_destroy(&aio);
    munmap(seg, total);
    fg_store_destroy(&s);
    return 0;
}

int main(int argc, char **argv) {
    fg_log_init("disk-bench");
    if (argc < 2) usage();
    const char *cmd = argv[1];
    args a;
    parse(argc - 1, argv + 1, &a);
    if (!strcmp(cmd, "profile")) return cmd_profile(&a);
    if (!strcmp(cmd, "read")) return cmd_rw(&a, FG_AIO_READ);
    if (!strcmp(cmd, "write")) return cmd_rw(&a, FG_AIO_WRITE);
    if (!strcmp(cmd, "checksum")) return cmd_checksum(&a);
    if (!strcmp(cmd, "store-build")) return cmd_store_build(&a);
    if (!strcmp(cmd, "store-read")) return cmd_store_read(&a);
    usage();
}

/* fg_aio_profile.c - sequential bandwidth of a directory through fg_aio: the
 * streaming loop both the profile and the benchmarks use, and the sweep. */
#include "fg_aio_profile.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

/* Memory bound for one stream's in-flight jobs; 8 x 32 MiB keeps 64 x 4 MiB
 * requests queued, the largest point of the default sweep. */
#define STREAM_CHUNK_MAX (32ull << 20)
#define STREAM_NBUF_MAX 8

#define DEFAULT_FILE_BYTES (1ull << 30)   /* fg_aio_profile_opts.file_bytes 0 */
#define DEFAULT_POINT_SECONDS 0.5         /* fg_aio_profile_opts.point_seconds 0 */
#define LAYOUT_REQ (1 << 20)              /* the test file is first written at this request size */
#define LAYOUT_QD 32                      /* and depth */

void fg_aio_stream_shape(uint64_t req, int qd, uint64_t *chunk, int *nbuf) {
    uint64_t inflight = req * (uint64_t)qd;
    uint64_t c = inflight < STREAM_CHUNK_MAX ? inflight : STREAM_CHUNK_MAX;
    c = c / req * req;
    if (c < req) c = req;
    /* Twice the queue's bytes queued, so the next job's requests are ready
     * the moment the previous job's last ones complete. */
    uint64_t n = (2 * inflight + c - 1) / c;
    if (n < 2) n = 2;
    if (n > STREAM_NBUF_MAX) n = STREAM_NBUF_MAX;
    *chunk = c;
    *nbuf = (int)n;
}

static void fill_random(uint8_t *p, uint64_t n, uint64_t seed) {
    uint64_t x = seed | 1;
    for (uint64_t i = 0; i + 8 <= n; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(p + i, &x, 8);
    }
}

/* The streaming loop over caller-provided buffers (nbuf x chunk, aligned). */
static fg_status stream_bufs(fg_aio *a, const fg_aio_file *f, fg_aio_op op, uint64_t off, uint64_t total,
                             uint64_t chunk, int nbuf, uint8_t **bufs, double max_seconds, uint64_t *bytes_done,
                             double *seconds) {
    uint64_t *ids = fg_xcalloc((size_t)nbuf, sizeof *ids);
    uint64_t *lens = fg_xcalloc((size_t)nbuf, sizeof *lens);
    fg_status st = FG_OK;
    uint64_t next = 0, done = 0;
    double t0 = fg_now();
    int stop = 0, head = 0, count = 0;
    /* A FIFO ring of jobs, one per buffer: wait for the oldest, refill its
     * buffer with the next chunk, so nbuf jobs stay queued. */
    while (count < nbuf && next < total) {
        int i = (head + count++) % nbuf;
        lens[i] = total - next < chunk ? total - next : chunk;
        fg_aio_submit(a, op, f, off + next, bufs[i], lens[i], &ids[i]);
        next += lens[i];
    }
    while (count > 0) {
        int i = head;
        head = (head + 1) % nbuf;
        count--;
        fg_status s = fg_aio_wait(a, ids[i]);
        if (s && !st) st = s; /* keep draining: the other buffers are in use */
        if (!s) done += lens[i];
        if (max_seconds > 0 && fg_now() - t0 > max_seconds) stop = 1;
        if (!st && !stop && next < total) {
            int k = (head + count++) % nbuf;
            lens[k] = total - next < chunk ? total - next : chunk;
            fg_aio_submit(a, op, f, off + next, bufs[k], lens[k], &ids[k]);
            next += lens[k];
        }
    }
    *seconds = fg_now() - t0;
    *bytes_done = done;
    free(ids);
    free(lens);
    return st;
}

static fg_status alloc_bufs(uint64_t chunk, int nbuf, uint8_t **bufs) {
    for (int i = 0; i < nbuf; i++) {
        bufs[i] = NULL;
        if (posix_memalign((void **)&bufs[i], FG_AIO_ALIGN, chunk))
            return fg_err_set(FG_ERUNTIME, "out of memory for %d I/O buffers of %" PRIu64 " bytes", nbuf, chunk);
        /* random bytes (nothing below can compress them), and every page
         * faulted in before any clock starts */
        fill_random(bufs[i], chunk, 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1));
    }
    return FG_OK;
}

fg_status fg_aio_stream(fg_aio *a, const fg_aio_file *f, fg_aio_op op, uint64_t off, uint64_t total,
                        uint64_t chunk, int nbuf, double max_seconds, uint64_t *bytes_done, double *seconds) {
    uint8_t **bufs = fg_xcalloc((size_t)nbuf, sizeof *bufs);
    fg_status st = alloc_bufs(chunk, nbuf, bufs);
    if (!st) st = stream_bufs(a, f, op, off, total, chunk, nbuf, bufs, max_seconds, bytes_done, seconds);
    for (int i = 0; i < nbuf; i++) free(bufs[i]);
    free(bufs);
    return st;
}

/* One sweep point; bufs: STREAM_NBUF_MAX buffers of STREAM_CHUNK_MAX (or
 * the largest request) bytes, shared by all points. */
static fg_status measure(const fg_aio_file *f, fg_aio_op op, uint64_t req, int qd, uint64_t off, uint64_t total,
                         double max_seconds, uint8_t **bufs, uint64_t *bytes, double *secs) {
    fg_aio *a;
    fg_status st = fg_aio_new(qd, req, &a);
    if (st) return st;
    uint64_t chunk;
    int nbuf;
    fg_aio_stream_shape(req, qd, &chunk, &nbuf);
    st = stream_bufs(a, f, op, off, total, chunk, nbuf, bufs, max_seconds, bytes, secs);
    fg_aio_destroy(&a);
    return st;
}

static json_t *point_json(const char *op, uint64_t req, int qd, uint64_t bytes, double secs) {
    return json_pack("{s:s, s:I, s:i, s:f, s:I, s:f}", "op", op, "req_bytes", (json_int_t)req, "qd", qd,
                     "GBps", secs > 0 ? (double)bytes / secs / 1e9 : 0.0, "bytes", (json_int_t)bytes,
                     "seconds", secs);
}

/* The sweep's settings: o's, or the defaults, checked. */
typedef struct {
    const char *dir;
    uint64_t size;                /* the test file, a whole number of the largest request */
    const uint64_t *reqs;
    int n_req;
    const int *qds;
    int n_qd;
    double point_s;
    uint64_t max_req;
    uint64_t engine_req;          /* 0: no pass at the engine's setting */
    int engine_qd;
} sweep_cfg;

static fg_status sweep_config(const fg_aio_profile_opts *o, sweep_cfg *c) {
    static const uint64_t def_req[] = {64 << 10, 256 << 10, 1 << 20, 4 << 20};
    static const int def_qd[] = {1, 4, 16, 32, 64};
    c->dir = o && o->dir ? o->dir : ".";
    c->size = o && o->file_bytes ? o->file_bytes : DEFAULT_FILE_BYTES;
    c->reqs = o && o->req_sizes ? o->req_sizes : def_req;
    c->n_req = o && o->req_sizes ? o->n_req : (int)(sizeof def_req / sizeof def_req[0]);
    c->qds = o && o->qds ? o->qds : def_qd;
    c->n_qd = o && o->qds ? o->n_qd : (int)(sizeof def_qd / sizeof def_qd[0]);
    c->point_s = o && o->point_seconds > 0 ? o->point_seconds : DEFAULT_POINT_SECONDS;
    c->engine_req = o ? o->engine_req : 0;
    c->engine_qd = o ? o->engine_qd : 0;
    c->max_req = 0;
    for (int i = 0; i < c->n_req; i++) {
        if (c->reqs[i] < FG_AIO_ALIGN || c->reqs[i] % FG_AIO_ALIGN)
            return fg_err_set(FG_EINPUT, "profile: request size %" PRIu64 " is not a multiple of %u", c->reqs[i],
                              FG_AIO_ALIGN);
        if (c->reqs[i] > c->max_req) c->max_req = c->reqs[i];
    }
    if (c->engine_req) {
        if (c->engine_req < FG_AIO_ALIGN || c->engine_req % FG_AIO_ALIGN || c->engine_qd < 1)
            return fg_err_set(FG_EINPUT, "profile: the engine's setting (request %" PRIu64 ", depth %d) needs a request "
                              "that is a multiple of %u and a depth of at least 1", c->engine_req, c->engine_qd, FG_AIO_ALIGN);
        if (c->engine_req > c->max_req) c->max_req = c->engine_req;
    }
    c->size = c->size / c->max_req * c->max_req;
    if (c->size < c->max_req) return fg_err_set(FG_EINPUT, "profile: test file smaller than a request");
    return FG_OK;
}

static const char *op_name(int opi) { return opi == FG_AIO_READ ? "read" : "write"; }

/* One whole-file pass of op at (req, qd), appended to the sweep: *gbps. */
static fg_status full_pass(const fg_aio_file *f, int opi, uint64_t req, int qd, uint64_t size, uint8_t **bufs,
                           json_t *sweep, double *gbps) {
    uint64_t bytes;
    double secs;
    fg_status st = measure(f, opi, req, qd, 0, size, 0, bufs, &bytes, &secs);
    if (st) return st;
    *gbps = secs > 0 ? bytes / secs / 1e9 : 0;
    json_array_append_new(sweep, point_json(op_name(opi), req, qd, bytes, secs));
    return FG_OK;
}

/* Every (request, depth) point of op, each for point_s, appended to the
 * sweep; the fastest one's setting in *best_req, *best_qd. Each point
 * continues where the last one stopped (wrapping), so no point re-reads
 * blocks a cache below the file system just saw. */
static fg_status sweep_op(const fg_aio_file *f, int opi, const sweep_cfg *c, uint8_t **bufs, json_t *sweep,
                          uint64_t *best_req, int *best_qd) {
    double best = 0;
    uint64_t cursor = 0, bytes;
    double secs;
    for (int r = 0; r < c->n_req; r++)
        for (int q = 0; q < c->n_qd; q++) {
            uint64_t req = c->reqs[r], off = cursor / req * req;
            if (off >= c->size) off = 0;
            fg_status st = measure(f, opi, req, c->qds[q], off, c->size - off, c->point_s, bufs, &bytes, &secs);
            if (st) return st;
            cursor = off + bytes >= c->size ? 0 : off + bytes;
            double g = secs > 0 ? bytes / secs / 1e9 : 0;
            json_array_append_new(sweep, point_json(op_name(opi), req, c->qds[q], bytes, secs));
            fg_debug("profile: %s req %" PRIu64 " qd %d: %.3f GB/s", op_name(opi), req, c->qds[q], g);
            if (g > best) best = g, *best_req = req, *best_qd = c->qds[q];
        }
    return FG_OK;
}

/* The profile object from what was measured (the sweep is taken over). */
static json_t *profile_json(const sweep_cfg *c, int direct, const double *full, const uint64_t *best_req,
                            const int *best_qd, const double *eng, json_t *sweep) {
    json_t *res = json_pack("{s:f, s:f, s:I, s:i, s:I, s:i, s:s, s:I, s:b, s:o}", "disk_read_GBps", full[1],
                            "disk_write_GBps", full[2], "read_req_bytes", (json_int_t)best_req[1], "read_qd", best_qd[1],
                            "write_req_bytes", (json_int_t)best_req[2], "write_qd", best_qd[2], "dir", c->dir,
                            "file_bytes", (json_int_t)c->size, "direct", direct, "sweep", sweep);
    if (c->engine_req)
        json_object_update_new(res, json_pack("{s:f, s:f, s:I, s:i}", "engine_read_GBps", eng[1], "engine_write_GBps", eng[2],
                                              "engine_req_bytes", (json_int_t)c->engine_req, "engine_qd", c->engine_qd));
    return res;
}

fg_status fg_aio_profile(const fg_aio_profile_opts *o, json_t **out) {
    *out = NULL;
    sweep_cfg c;
    fg_status st = sweep_config(o, &c);
    if (st) return st;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/.flexgen-profile.%d.tmp", c.dir, (int)getpid());
    uint64_t buf_bytes = c.max_req > STREAM_CHUNK_MAX ? c.max_req : STREAM_CHUNK_MAX;
    uint8_t *bufs[STREAM_NBUF_MAX] = {0};
    fg_aio_file f = {.fd = -1};
    json_t *sweep = json_array(), *res = NULL;
    if (!(st = alloc_bufs(buf_bytes, STREAM_NBUF_MAX, bufs)))
        st = fg_aio_file_open(path, O_RDWR | O_CREAT | O_TRUNC, 0600, &f);
    if (st) goto out;
    uint64_t bytes;
    double secs;
    /* Lay the file out (allocated blocks: later writes overwrite in place,
     * as a store's do). */
    fg_info("profile: writing a %.2f GB test file %s", c.size / 1e9, path);
    if ((st = measure(&f, FG_AIO_WRITE, LAYOUT_REQ, LAYOUT_QD, 0, c.size, 0, bufs, &bytes, &secs))) goto out;
    if (fdatasync(f.fd) != 0) {
        st = fg_err_set(FG_ERUNTIME, "%s: fdatasync: %s", path, strerror(errno));
        goto out;
    }
    uint64_t best_req[3] = {0};
    int best_qd[3] = {0};
    for (int opi = FG_AIO_READ; opi <= FG_AIO_WRITE; opi++)
        if ((st = sweep_op(&f, opi, &c, bufs, sweep, &best_req[opi], &best_qd[opi]))) goto out;
    /* The best of many short samples is biased upward by noise: report a
     * full pass over the file at the winning setting instead. */
    double full[3] = {0};
    for (int opi = FG_AIO_READ; opi <= FG_AIO_WRITE; opi++)
        if ((st = full_pass(&f, opi, best_req[opi], best_qd[opi], c.size, bufs, sweep, &full[opi]))) goto out;
    fg_info("profile: read %.3f GB/s (req %" PRIu64 ", qd %d), write %.3f GB/s (req %" PRIu64 ", qd %d)%s",
            full[1], best_req[1], best_qd[1], full[2], best_req[2], best_qd[2],
            f.direct ? "" : " [buffered: no O_DIRECT here]");
    /* The engine does not pick the best setting: it reads and writes at its
     * disk worker's, which may be well below the best. The cost model takes
     * these. */
    double eng[3] = {0};
    for (int opi = FG_AIO_READ; c.engine_req && opi <= FG_AIO_WRITE; opi++)
        if ((st = full_pass(&f, opi, c.engine_req, c.engine_qd, c.size, bufs, sweep, &eng[opi]))) goto out;
    if (c.engine_req)
        fg_info("profile: at the engine's setting (req %" PRIu64 ", qd %d): read %.3f GB/s, write %.3f GB/s",
                c.engine_req, c.engine_qd, eng[1], eng[2]);
    res = profile_json(&c, f.direct, full, best_req, best_qd, eng, sweep);
    sweep = NULL;
out:
    json_decref(sweep);
    if (f.fd >= 0) {
        fg_aio_file_close(&f);
        unlink(path);
    }
    for (int i = 0; i < STREAM_NBUF_MAX; i++) free(bufs[i]);
    *out = res;
    return st;
}

/* fg_aio_profile.c - sequential bandwidth of a directory through fg_aio: the
 * streaming loop both the profile and the benchmarks use, and the sweep. */
#include "fg_aio_profile.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

/* Memory bound for one stream's in-flight jobs; 8 x 32 MiB keeps 64 x 4 MiB
 * requests queued, the largest point of the default sweep. */
#define STREAM_CHUNK_MAX (32ull << 20)
#define STREAM_NBUF_MAX 8

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

fg_status fg_aio_profile(const fg_aio_profile_opts *o, json_t **out) {
    static const uint64_t def_req[] = {64 << 10, 256 << 10, 1 << 20, 4 << 20};
    static const int def_qd[] = {1, 4, 16, 32, 64};
    *out = NULL;
    const char *dir = o && o->dir ? o->dir : ".";
    uint64_t size = o && o->file_bytes ? o->file_bytes : (1ull << 30);
    const uint64_t *reqs = o && o->req_sizes ? o->req_sizes : def_req;
    int n_req = o && o->req_sizes ? o->n_req : 4;
    const int *qds = o && o->qds ? o->qds : def_qd;
    int n_qd = o && o->qds ? o->n_qd : 5;
    double point_s = o && o->point_seconds > 0 ? o->point_seconds : 0.5;
    uint64_t max_req = 0;
    for (int i = 0; i < n_req; i++) {
        if (reqs[i] < FG_AIO_ALIGN || reqs[i] % FG_AIO_ALIGN)
            return fg_err_set(FG_EINPUT, "profile: request size %" PRIu64 " is not a multiple of %u", reqs[i],
                              FG_AIO_ALIGN);
        if (reqs[i] > max_req) max_req = reqs[i];
    }
    if (o && o->engine_req) {
        if (o->engine_req < FG_AIO_ALIGN || o->engine_req % FG_AIO_ALIGN || o->engine_qd < 1)
            return fg_err_set(FG_EINPUT, "profile: the engine's setting (request %" PRIu64 ", depth %d) needs a request "
                              "that is a multiple of %u and a depth of at least 1", o->engine_req, o->engine_qd, FG_AIO_ALIGN);
        if (o->engine_req > max_req) max_req = o->engine_req;
    }
    size = size / max_req * max_req;
    if (size < max_req) return fg_err_set(FG_EINPUT, "profile: test file smaller than a request");

    char path[4096];
    snprintf(path, sizeof path, "%s/.flexgen-profile.%d.tmp", dir, (int)getpid());
    uint64_t buf_bytes = max_req > STREAM_CHUNK_MAX ? max_req : STREAM_CHUNK_MAX;
    uint8_t *bufs[STREAM_NBUF_MAX] = {0};
    fg_aio_file f = {.fd = -1};
    json_t *sweep = json_array(), *res = NULL;
    fg_status st = alloc_bufs(buf_bytes, STREAM_NBUF_MAX, bufs);
    if (!st) st = fg_aio_file_open(path, O_RDWR | O_CREAT | O_TRUNC, 0600, &f);
    if (st) goto out;
    uint64_t bytes;
    double secs;
    /* Lay the file out (allocated blocks: later writes overwrite in place,
     * as a store's do). */
    fg_info("profile: writing a %.2f GB test file %s", size / 1e9, path);
    if ((st = measure(&f, FG_AIO_WRITE, 1 << 20, 32, 0, size, 0, bufs, &bytes, &secs))) goto out;
    if (fdatasync(f.fd) != 0) {
        st = fg_err_set(FG_ERUNTIME, "%s: fdatasync: %s", path, strerror(errno));
        goto out;
    }
    /* Each point continues where the last one stopped (wrapping), so no
     * point re-reads blocks a cache below the file system just saw. */
    double best[3] = {0};
    uint64_t best_req[3] = {0};
    int best_qd[3] = {0};
    for (int opi = FG_AIO_READ; opi <= FG_AIO_WRITE; opi++) {
        uint64_t cursor = 0;
        for (int r = 0; r < n_req; r++)
            for (int q = 0; q < n_qd; q++) {
                uint64_t off = cursor / reqs[r] * reqs[r];
                if (off >= size) off = 0;
                if ((st = measure(&f, opi, reqs[r], qds[q], off, size - off, point_s, bufs, &bytes, &secs))) goto out;
                cursor = off + bytes >= size ? 0 : off + bytes;
                double g = secs > 0 ? bytes / secs / 1e9 : 0;
                json_array_append_new(sweep, point_json(opi == FG_AIO_READ ? "read" : "write", reqs[r], qds[q],
                                                        bytes, secs));
                fg_debug("profile: %s req %" PRIu64 " qd %d: %.3f GB/s", opi == FG_AIO_READ ? "read" : "write",
                         reqs[r], qds[q], g);
                if (g > best[opi]) {
                    best[opi] = g;
                    best_req[opi] = reqs[r];
                    best_qd[opi] = qds[q];
                }
            }
    }
    /* The best of many short samples is biased upward by noise: report a
     * full pass over the file at the winning setting instead. */
    double full[3] = {0};
    for (int opi = FG_AIO_READ; opi <= FG_AIO_WRITE; opi++) {
        if ((st = measure(&f, opi, best_req[opi], best_qd[opi], 0, size, 0, bufs, &bytes, &secs))) goto out;
        full[opi] = secs > 0 ? bytes / secs / 1e9 : 0;
        json_array_append_new(sweep, point_json(opi == FG_AIO_READ ? "read" : "write", best_req[opi],
                                                best_qd[opi], bytes, secs));
    }
    fg_info("profile: read %.3f GB/s (req %" PRIu64 ", qd %d), write %.3f GB/s (req %" PRIu64 ", qd %d)%s",
            full[1], best_req[1], best_qd[1], full[2], best_req[2], best_qd[2],
            f.direct ? "" : " [buffered: no O_DIRECT here]");
    /* The engine does not pick the best setting: it reads and writes at its
     * disk worker's, whose rate can be half the best's. The cost model
     * takes these. */
    double eng[3] = {0};
    for (int opi = FG_AIO_READ; o && o->engine_req && opi <= FG_AIO_WRITE; opi++) {
        if ((st = measure(&f, opi, o->engine_req, o->engine_qd, 0, size, 0, bufs, &bytes, &secs))) goto out;
        eng[opi] = secs > 0 ? bytes / secs / 1e9 : 0;
        json_array_append_new(sweep, point_json(opi == FG_AIO_READ ? "read" : "write", o->engine_req, o->engine_qd,
                                                bytes, secs));
    }
    if (o && o->engine_req)
        fg_info("profile: at the engine's setting (req %" PRIu64 ", qd %d): read %.3f GB/s, write %.3f GB/s",
                o->engine_req, o->engine_qd, eng[1], eng[2]);
    res = json_pack("{s:f, s:f, s:I, s:i, s:I, s:i, s:s, s:I, s:b, s:o}", "disk_read_GBps", full[1],
                    "disk_write_GBps", full[2], "read_req_bytes", (json_int_t)best_req[1], "read_qd", best_qd[1],
                    "write_req_bytes", (json_int_t)best_req[2], "write_qd", best_qd[2], "dir", dir,
                    "file_bytes", (json_int_t)size, "direct", f.direct, "sweep", sweep);
    sweep = NULL;
    if (o && o->engine_req)
        json_object_update_new(res, json_pack("{s:f, s:f, s:I, s:i}", "engine_read_GBps", eng[1], "engine_write_GBps", eng[2],
                                          "engine_req_bytes", (json_int_t)o->engine_req, "engine_qd", o->engine_qd));
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

/* fg_aio_profile.h - how fast the offload directory reads and writes:
 * sequential bandwidth through fg_aio over a sweep of request sizes and
 * queue depths, the disk->CPU and CPU->disk figures the policy's cost model
 * needs. The disk worker's `--profile [--dir DIR] [--json]` calls
 * fg_aio_profile() and prints the object; flexgen-disk-bench does the same
 * standalone. */
#ifndef FG_AIO_PROFILE_H
#define FG_AIO_PROFILE_H

#include <jansson.h>

#include "fg_aio.h"

/* Stream [off, off + total) of f sequentially with `nbuf` jobs of `chunk`
 * bytes queued at once (each into its own aligned buffer, allocated here;
 * write buffers hold pseudo-random bytes, so no layer below can compress or
 * deduplicate them). Stops early once max_seconds (> 0) have passed. */
fg_status fg_aio_stream(fg_aio *aio, const fg_aio_file *f, fg_aio_op op, uint64_t off, uint64_t total,
                        uint64_t chunk, int nbuf, double max_seconds, uint64_t *bytes_done, double *seconds);

/* The chunk and job count fg_aio_stream needs to keep qd requests of
 * req_bytes in flight across job boundaries, in bounded memory. */
void fg_aio_stream_shape(uint64_t req_bytes, int qd, uint64_t *chunk, int *nbuf);

typedef struct {
    const char *dir;             /* where the test file goes (NULL: ".") */
    uint64_t file_bytes;         /* test file size (0: 1 GiB) */
    const uint64_t *req_sizes;   /* NULL: 64K 256K 1M 4M */
    int n_req;
    const int *qds;              /* NULL: 1 4 16 32 64 */
    int n_qd;
    double point_seconds;        /* per sweep point (0: 0.5 s, or the whole file if sooner) */
    uint64_t engine_req;         /* > 0: also a whole-file pass each way at the setting the */
    int engine_qd;               /*   engine runs (the disk worker's request size and depth) */
} fg_aio_profile_opts;

/* Writes a test file in o->dir, sweeps reads and writes, re-measures the
 * best setting of each over the whole file (and the engine's setting, when
 * given), removes the file. *out gets
 *   {"disk_read_GBps", "disk_write_GBps",          (10^9 bytes/s, the re-measured best)
 *    "engine_read_GBps", "engine_write_GBps", "engine_req_bytes",
 *    "engine_qd"                                   (with engine_req: what the engine gets),
 *    "read_req_bytes", "read_qd", "write_req_bytes", "write_qd",
 *    "dir", "file_bytes", "direct" (false: buffered fallback, figures are
 *    the page cache's), "sweep": [{"op", "req_bytes", "qd", "GBps",
 *    "bytes", "seconds"}, ...]}.
 * Progress goes to the log (stderr), never stdout. */
fg_status fg_aio_profile(const fg_aio_profile_opts *o, json_t **out);

#endif

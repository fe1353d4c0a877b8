/* fg_aio.h - asynchronous file I/O on libaio with O_DIRECT: the engine the
 * disk tier reads and writes with, between a file and a 4096-aligned memory
 * buffer (an shm segment, in the disk worker).
 *
 * A transfer ("job") of any size is split into requests of req_bytes; up to
 * qd requests are in flight at once, across all queued jobs in FIFO order,
 * so a queue of jobs keeps the device busy without bubbles between them.
 * Completions are reassembled per job: a short read or write is resubmitted
 * for the rest, EINTR and EAGAIN are retried, and anything else (ENOSPC, EIO,
 * a file that ends too early) fails the job with a message naming the file
 * and the offset. Nothing here exits or aborts on an I/O error; a failed job
 * waits for its own in-flight requests before it is reported, so the caller
 * may reuse the buffer as soon as it sees the result.
 *
 * Alignment (O_DIRECT): the file offset and the buffer address must be
 * multiples of FG_AIO_ALIGN, else the job fails with FG_EINPUT. The length
 * may be anything: a tail that is not a whole block is read through a small
 * bounce buffer (O_DIRECT still), and written with one buffered pwrite (the
 * only bytes that ever touch the page cache; the kernel keeps buffered and
 * direct I/O coherent, flushing that page before a later direct read).
 *
 * Where the file system refuses O_DIRECT (old tmpfs, some FUSE mounts),
 * fg_aio_file_open falls back to buffered I/O with a logged warning; the
 * same code then runs (libaio on a buffered fd completes synchronously).
 *
 * Not thread-safe: one fg_aio per thread. Files (fg_aio_file) may be shared
 * by engines. See fg_aio_profile.h for the bandwidth sweep. */
#ifndef FG_AIO_H
#define FG_AIO_H

#include <stdint.h>

#include "fg_common.h"

#define FG_AIO_ALIGN 4096u

typedef struct fg_aio fg_aio;

typedef enum { FG_AIO_READ = 1, FG_AIO_WRITE = 2 } fg_aio_op;

/* An open file: the fd, whether it is O_DIRECT, and its path for messages. */
typedef struct {
    int fd;
    int direct;   /* 1: fd has O_DIRECT */
    int owned;    /* 1: fg_aio_file_close closes fd */
    char *path;   /* heap; for error messages and the buffered tail fd */
} fg_aio_file;

/* Flags for fg_aio_file_open beside the open(2) access flags. */
#define FG_AIO_BUFFERED 0x40000000  /* do not try O_DIRECT (tests, benchmarks) */

/* open(2) `path` with `flags` (O_RDONLY, O_WRONLY|O_CREAT|O_TRUNC, ...; O_DIRECT
 * and O_CLOEXEC are added) and `mode` for created files. A missing file,
 * EACCES, ... -> FG_ERUNTIME naming the path. */
fg_status fg_aio_file_open(const char *path, int flags, int mode, fg_aio_file *f);
/* Wrap an fd the caller owns; O_DIRECT is read from its flags. `label` names
 * it in messages (NULL: /proc/self/fd/N). */
void fg_aio_file_wrap(int fd, const char *label, fg_aio_file *f);
void fg_aio_file_close(fg_aio_file *f);

/* qd: requests in flight (1..1024); req_bytes: request size, a multiple of
 * FG_AIO_ALIGN. FG_EINPUT for bad values, FG_ERUNTIME if io_setup fails
 * (e.g. /proc/sys/fs/aio-max-nr exhausted). */
fg_status fg_aio_new(int qd, uint64_t req_bytes, fg_aio **out);
void fg_aio_destroy(fg_aio **aio);
int fg_aio_qd(const fg_aio *aio);
uint64_t fg_aio_req_bytes(const fg_aio *aio);

/* Blocking transfers: submit every request (qd in flight), wait for all.
 * Jobs queued before with fg_aio_submit keep running meanwhile. */
fg_status fg_aio_read(fg_aio *aio, const fg_aio_file *f, uint64_t off, void *buf, uint64_t len);
fg_status fg_aio_write(fg_aio *aio, const fg_aio_file *f, uint64_t off, const void *buf, uint64_t len);

/* Non-blocking: queue a job and return its id (> 0) at once. The file and
 * the buffer must stay valid until the job is reported. Returns FG_OK even if
 * the job fails at once (bad alignment): its failure comes out of
 * fg_aio_wait / fg_aio_poll like any other. */
fg_status fg_aio_submit(fg_aio *aio, fg_aio_op op, const fg_aio_file *f, uint64_t off, void *buf,
                        uint64_t len, uint64_t *id);

/* Wait for job `id`; its status is returned and its message (if it failed)
 * put in the thread's error slot. Other jobs finishing meanwhile are kept for
 * later fg_aio_wait / fg_aio_poll calls. FG_EINPUT for an unknown id. */
fg_status fg_aio_wait(fg_aio *aio, uint64_t id);

typedef struct {
    uint64_t id;
    fg_status status;
    char msg[512];  /* "" on success */
} fg_aio_result;

/* Make progress and report up to `max` finished jobs (any order), waiting up
 * to timeout_ms (0: do not wait, < 0: until at least one finishes, or
 * return 0 at once when nothing is queued). Returns the number reported. */
int fg_aio_poll(fg_aio *aio, fg_aio_result *res, int max, int timeout_ms);

/* Jobs queued or in flight and not yet reported. */
int fg_aio_pending(const fg_aio *aio);

/* An eventfd signalled on every request completion, for a caller that
 * multiplexes (zmq_poll on it, then fg_aio_poll(..., 0)). Created on first
 * call; -1 if eventfd is unavailable. Requests submitted before the first
 * call do not signal it. */
int fg_aio_eventfd(fg_aio *aio);

/* ---- fault injection, for tests ----
 * Replaces the result of matching request completions (the transfer itself
 * happened): err != 0 reports -err (EIO, ENOSPC, EINTR, EAGAIN, ...), else
 * short_io reports half the bytes (rounded down to FG_AIO_ALIGN, at least
 * one block) so the rest is resubmitted. `after` matching completions pass
 * untouched first; then `count` are altered (0 = all). op 0 matches both.
 * The environment variable FG_AIO_FAULT="read|write|any:EIO|ENOSPC|EINTR|
 * EAGAIN|short[:after[:count]]" sets the same in every new engine, so a whole
 * program (the disk worker) can be tested. */
typedef struct {
    int op;
    int err;
    int short_io;
    uint64_t after;
    uint64_t count;
} fg_aio_fault;
void fg_aio_set_fault(fg_aio *aio, const fg_aio_fault *fault); /* NULL clears */

/* Counters since fg_aio_new, for tests and profiles. */
typedef struct {
    uint64_t requests;     /* submitted to the kernel, resubmissions included */
    uint64_t retries;      /* EINTR / EAGAIN resubmissions */
    uint64_t short_ios;    /* short completions resubmitted for the rest */
    uint64_t bytes;        /* bytes transferred by finished requests */
    int max_inflight;      /* the most requests ever in flight at once */
} fg_aio_stats;
void fg_aio_get_stats(const fg_aio *aio, fg_aio_stats *st);

#endif

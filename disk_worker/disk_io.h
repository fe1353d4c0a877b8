/* disk_io.h - the disk worker's two handlers, DISK_READ and DISK_WRITE, how a
 * command names its file, the worker's I/O flags, and its --profile mode.
 * disk_aio.c moves the bytes with libaio and O_DIRECT (aio/fg_aio.h);
 * disk_profile.c measures the offload directory. */
#ifndef FG_DISK_IO_H
#define FG_DISK_IO_H

#include "fg_worker.h"

/* Defaults of --qd and --request-size: the fio setting the disk tier is
 * measured against (libaio, direct=1, bs=1M, iodepth=32). Each executor
 * thread has its own engine, so up to threads x qd requests are in flight. */
#define FG_DISK_QD_DEFAULT 32
#define FG_DISK_REQ_DEFAULT (1ull << 20)
#define FG_DISK_THREADS 4   /* executor threads: transfers (a tensor each, say) in flight at once */

/* The file a DISK_* command means: its path if set (relative paths are
 * under the offload directory), else "<offload-dir>/file-<file_id>". */
fg_status fg_disk_path(const fg_worker *w, const fg_msg_disk *d, char *out, size_t cap);

/* Both transfer buf.nbytes bytes (any length) at file_offset; the offset and
 * the shm buffer must be 4096-aligned (O_DIRECT), else EBADCMD. Failures
 * (missing or short file, EIO, ENOSPC, ...) come back naming the file and
 * the offset. */
fg_status fg_disk_read(fg_worker *w, const fg_msg *cmd);   /* file -> shm */
fg_status fg_disk_write(fg_worker *w, const fg_msg *cmd);  /* shm -> file, created 0600,
                                                              missing parent dirs 0700 */

/* fg_worker_def hooks: --qd N and --request-size SIZE; init checks that an
 * aio context can be made; fini releases the per-thread engine key. */
int fg_disk_option(const char *flag, const char *val);
fg_status fg_disk_init(fg_worker *w);
void fg_disk_fini(fg_worker *w);
#define FG_DISK_OPTIONS_HELP                                                              \
    "  --qd N              libaio requests in flight per executor thread (default 32)\n"  \
    "  --request-size SIZE bytes per request, a multiple of 4K (default 1M)\n"            \
    "  --dir DIR           with --profile: the directory to measure (default: the\n"      \
    "                      --offload-dir, else .)\n"                                      \
    "  --size SIZE         with --profile: the test file's size (default 1G)\n"           \
    "  --json              with --profile: one JSON object on stdout\n"

/* `flexgen-disk-worker --profile [--dir DIR] [--size SIZE] [--json]`:
 * fg_aio_profile on DIR; returns the exit status (2: bad flags, DIR missing
 * or unwritable; 1: the measurement failed). */
int fg_disk_profile_main(int argc, char **argv);

#endif

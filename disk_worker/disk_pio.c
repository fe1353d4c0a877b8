/* disk_pio.c - DISK_READ / DISK_WRITE with plain pread and pwrite, one file
 * open per command. Correct and simple; the libaio + O_DIRECT version (many
 * requests in flight, no page cache) replaces this file and keeps
 * disk_io.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "disk_io.h"

fg_status fg_disk_path(const fg_worker *w, const fg_msg_disk *d, char *out, size_t cap) {
    int n;
    if (d->path[0] == '/') n = snprintf(out, cap, "%s", d->path);
    else if (d->path[0]) n = snprintf(out, cap, "%s/%s", fg_worker_offload_dir(w), d->path);
    else n = snprintf(out, cap, "%s/file-%u", fg_worker_offload_dir(w), d->file_id);
    if (n < 0 || (size_t)n >= cap) return fg_err_set(FG_EINPUT, "file path too long");
    return FG_OK;
}

fg_status fg_disk_read(fg_worker *w, const fg_msg *cmd) {
    const fg_msg_disk *d = &cmd->u.disk;
    char path[FG_MSG_PATH_MAX + 512];
    fg_status st = fg_disk_path(w, d, path, sizeof path);
    if (st != FG_OK) return st;
    uint8_t *buf = fg_worker_ptr(w, d->buf);
    if (!buf) return FG_EINPUT;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fg_err_set(FG_ERUNTIME, "%s: cannot open for reading: %s", path, strerror(errno));
    uint64_t done = 0;
    while (done < d->buf.nbytes) {
        ssize_t r = pread(fd, buf + done, d->buf.nbytes - done, (off_t)(d->file_offset + done));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = errno;
            close(fd);
            return r == 0 ? fg_err_set(FG_ERUNTIME, "%s: short read: %" PRIu64 " of %" PRIu64
                                       " bytes at offset %" PRIu64 " (file too short)", path, done,
                                       d->buf.nbytes, d->file_offset)
                          : fg_err_set(FG_ERUNTIME, "%s: read at offset %" PRIu64 ": %s", path,
                                       d->file_offset + done, strerror(e));
        }
        done += (uint64_t)r;
    }
    close(fd);
    return FG_OK;
}

fg_status fg_disk_write(fg_worker *w, const fg_msg *cmd) {
    const fg_msg_disk *d = &cmd->u.disk;
    char path[FG_MSG_PATH_MAX + 512];
    fg_status st = fg_disk_path(w, d, path, sizeof path);
    if (st != FG_OK) return st;
    const uint8_t *buf = fg_worker_ptr(w, d->buf);
    if (!buf) return FG_EINPUT;
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return fg_err_set(FG_ERUNTIME, "%s: cannot open for writing: %s", path, strerror(errno));
    uint64_t done = 0;
    while (done < d->buf.nbytes) {
        ssize_t r = pwrite(fd, buf + done, d->buf.nbytes - done, (off_t)(d->file_offset + done));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            return fg_err_set(FG_ERUNTIME, "%s: write at offset %" PRIu64 ": %s%s", path,
                              d->file_offset + done, strerror(e),
                              e == ENOSPC ? " (HINT: the offload disk is full)" : "");
        }
        done += (uint64_t)r;
    }
    if (close(fd) != 0) return fg_err_set(FG_ERUNTIME, "%s: close: %s", path, strerror(errno));
    return FG_OK;
}

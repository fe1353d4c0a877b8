/* fg_npy.c - incremental float32 .npy writer (format version 1.0). */
#include "fg_npy.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct fg_npy_writer {
    int fd;
    size_t data_off;
    char path[PATH_MAX], tmp[PATH_MAX];
};

fg_status fg_npy_create(const char *path, const int64_t *shape, int ndim, fg_npy_writer **out) {
    fg_npy_writer *w = fg_xcalloc(1, sizeof *w);
    snprintf(w->path, sizeof w->path, "%s", path);
    snprintf(w->tmp, sizeof w->tmp, "%s.partial", path);
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (w->fd < 0) {
        fg_status st = fg_err_set(FG_EINPUT, "%s: cannot create: %s", w->tmp, strerror(errno));
        free(w);
        return st;
    }
    char dict[256];
    int n = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    for (int i = 0; i < ndim; i++) n += snprintf(dict + n, sizeof dict - (size_t)n, "%lld, ", (long long)shape[i]);
    n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
    /* magic(6) + version(2) + len(2) + dict + padding + '\n' is a multiple of 64 */
    size_t total = 10 + (size_t)n + 1;
    total = (total + 63) / 64 * 64;
    char hdr[512];
    memcpy(hdr, "\x93NUMPY\x01\x00", 8);
    uint16_t hl = (uint16_t)(total - 10);
    hdr[8] = (char)(hl & 0xff);
    hdr[9] = (char)(hl >> 8);
    memcpy(hdr + 10, dict, (size_t)n);
    memset(hdr + 10 + n, ' ', total - 10 - (size_t)n);
    hdr[total - 1] = '\n';
    if (pwrite(w->fd, hdr, total, 0) != (ssize_t)total) {
        fg_status st = fg_err_set(FG_ERUNTIME, "%s: write failed: %s", w->tmp, strerror(errno));
        fg_npy_abort(&w);
        return st;
    }
    w->data_off = total;
    *out = w;
    return FG_OK;
}

fg_status fg_npy_write(fg_npy_writer *w, int64_t elem, const float *data, size_t n) {
    const char *p = (const char *)data;
    size_t left = n * sizeof(float);
    off_t off = (off_t)(w->data_off + (size_t)elem * sizeof(float));
    while (left) {
        ssize_t k = pwrite(w->fd, p, left, off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return fg_err_set(FG_ERUNTIME, "%s: write failed: %s", w->tmp, k < 0 ? strerror(errno) : "short write");
        p += k;
        off += k;
        left -= (size_t)k;
    }
    return FG_OK;
}

fg_status fg_npy_commit(fg_npy_writer **wp) {
    fg_npy_writer *w = *wp;
    fg_status st = FG_OK;
    if (close(w->fd) != 0) st = fg_err_set(FG_ERUNTIME, "%s: close failed: %s", w->tmp, strerror(errno));
    else if (rename(w->tmp, w->path) != 0)
        st = fg_err_set(FG_ERUNTIME, "%s: rename to %s failed: %s", w->tmp, w->path, strerror(errno));
    if (st) unlink(w->tmp);
    free(w);
    *wp = NULL;
    return st;
}

void fg_npy_abort(fg_npy_writer **wp) {
    fg_npy_writer *w = *wp;
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    unlink(w->tmp);
    free(w);
    *wp = NULL;
}

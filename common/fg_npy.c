/* fg_npy.c - incremental float32 .npy writer (format version 1.0). */
#include "fg_npy.h"
#include "fg_fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct fg_npy_writer {
    fg_fs_atomic file;   /* PATH.partial until committed */
    size_t data_off;
};

fg_status fg_npy_create(const char *path, const int64_t *shape, int ndim, fg_npy_writer **out) {
    fg_npy_writer *w = fg_xcalloc(1, sizeof *w);
    fg_status st = fg_fs_atomic_open(&w->file, path, 0);
    if (st) {
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
    if (pwrite(w->file.fd, hdr, total, 0) != (ssize_t)total) {
        st = fg_err_set(FG_ERUNTIME, "%s: write failed: %s", w->file.partial, strerror(errno));
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
        ssize_t k = pwrite(w->file.fd, p, left, off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return fg_err_set(FG_ERUNTIME, "%s: write failed: %s", w->file.partial, k < 0 ? strerror(errno) : "short write");
        p += k;
        off += k;
        left -= (size_t)k;
    }
    return FG_OK;
}

fg_status fg_npy_commit(fg_npy_writer **wp) {
    fg_npy_writer *w = *wp;
    fg_status st = fg_fs_atomic_commit(&w->file);
    free(w);
    *wp = NULL;
    return st;
}

void fg_npy_abort(fg_npy_writer **wp) {
    fg_npy_writer *w = *wp;
    if (!w) return;
    fg_fs_atomic_abort(&w->file);
    free(w);
    *wp = NULL;
}

/* fg_fs.c - atomic file writes, mkdir -p and directory syncs (see
 * fg_fs.h). Knows nothing of what the files hold. */
#include "fg_fs.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

fg_status fg_fs_atomic_name(fg_fs_atomic *a, const char *path, int flags) {
    memset(a, 0, sizeof *a);
    a->fd = -1;
    a->flags = flags;
    int n = snprintf(a->path, sizeof a->path, "%s", path);
    snprintf(a->partial, sizeof a->partial, "%s%s", path, FG_FS_PARTIAL_SUFFIX);
    if (n < 0 || (size_t)n >= sizeof a->path)
        return fg_err_set(FG_EINPUT, "%s: path too long", path);
    a->live = 1;
    return FG_OK;
}

fg_status fg_fs_atomic_open(fg_fs_atomic *a, const char *path, int flags) {
    fg_status st = fg_fs_atomic_name(a, path, flags);
    if (st) return st;
    a->fd = open(a->partial, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (a->fd < 0) {
        a->live = 0;
        return fg_err_set(FG_EINPUT, "%s: cannot create: %s", a->partial, strerror(errno));
    }
    return FG_OK;
}

fg_status fg_fs_atomic_fopen(fg_fs_atomic *a, const char *path, int flags) {
    fg_status st = fg_fs_atomic_name(a, path, flags);
    if (st) return st;
    a->f = fopen(a->partial, "w");
    if (!a->f) {
        a->live = 0;
        return fg_err_set(FG_EINPUT, "%s: cannot create: %s", a->partial, strerror(errno));
    }
    a->fd = fileno(a->f);
    return FG_OK;
}

/* Sync (per the flags) and close whatever is open on the partial file. */
static fg_status close_partial(fg_fs_atomic *a) {
    fg_status st = FG_OK;
    if (a->f && (fflush(a->f) != 0 || ferror(a->f)))
        st = fg_err_set(FG_ERUNTIME, "%s: write failed: %s", a->partial, strerror(errno));
    if (!st && a->fd >= 0 && (a->flags & FG_FS_SYNC_FILE) && fsync(a->fd) != 0)
        st = fg_err_set(FG_ERUNTIME, "%s: fsync failed: %s", a->partial, strerror(errno));
    int closed = a->f ? fclose(a->f) : a->fd >= 0 ? close(a->fd) : 0;
    if (closed != 0 && !st) st = fg_err_set(FG_ERUNTIME, "%s: close failed: %s", a->partial, strerror(errno));
    a->f = NULL;
    a->fd = -1;
    return st;
}

fg_status fg_fs_atomic_commit(fg_fs_atomic *a) {
    FG_ASSERT(a->live);
    a->live = 0;
    fg_status st = close_partial(a);
    if (!st && rename(a->partial, a->path) != 0)
        st = fg_err_set(FG_ERUNTIME, "%s: cannot rename to %s: %s", a->partial, a->path, strerror(errno));
    if (st) {
        unlink(a->partial);
        return st;
    }
    return a->flags & FG_FS_SYNC_DIR ? fg_fs_sync_parent(a->path) : FG_OK;
}

void fg_fs_atomic_abort(fg_fs_atomic *a) {
    if (!a->live) return;
    a->live = 0;
    a->flags = 0;   /* nothing to sync */
    (void)close_partial(a);
    unlink(a->partial);
}

fg_status fg_fs_write_all(int fd, const char *label, const void *data, size_t len) {
    const char *p = data;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return fg_err_set(FG_ERUNTIME, "%s: write failed: %s", label, w < 0 ? strerror(errno) : "no progress");
        p += w, len -= (size_t)w;
    }
    return FG_OK;
}

fg_status fg_fs_write_atomic(const char *path, const void *data, size_t len, int flags) {
    fg_fs_atomic a;
    fg_status st = fg_fs_atomic_open(&a, path, flags);
    if (st) return st;
    if ((st = fg_fs_write_all(a.fd, a.partial, data, len))) {
        fg_fs_atomic_abort(&a);
        return st;
    }
    return fg_fs_atomic_commit(&a);
}

fg_status fg_fs_mkdirs(const char *dir, mode_t mode) {
    char tmp[PATH_MAX];
    int n = snprintf(tmp, sizeof tmp, "%s", dir);
    if (n < 0 || (size_t)n >= sizeof tmp) return fg_err_set(FG_EINPUT, "%s: path too long", dir);
    if (n == 0) return fg_err_set(FG_EINPUT, "an empty directory path");
    for (char *p = tmp + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char c = *p;
        *p = '\0';
        if (mkdir(tmp, mode) != 0 && errno != EEXIST)
            return fg_err_set(FG_ERUNTIME, "%s: cannot create directory: %s", tmp, strerror(errno));
        *p = c;
        if (!c) return FG_OK;
    }
}

fg_status fg_fs_sync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        fg_status st = fg_err_set(FG_ERUNTIME, "%s: cannot sync the directory: %s", dir, strerror(errno));
        if (fd >= 0) close(fd);
        return st;
    }
    close(fd);
    return FG_OK;
}

fg_status fg_fs_sync_parent(const char *path) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    return fg_fs_sync_dir(dir);
}

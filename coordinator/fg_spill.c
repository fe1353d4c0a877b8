/* fg_spill.c - the run's spill file (disk-tier KV cache and activations in
 * --offload-dir, spill-<run id>.bin) and what killed runs left of theirs.
 *
 * The coordinator creates its spill file and holds an flock on it for the
 * whole run; the kernel drops the lock when the process dies, SIGKILL
 * included. A spill file that can be locked therefore belongs to no live
 * run and is removed, before this run makes its own: without it every
 * killed and resumed job would leave its cache on disk, as large as the
 * cache placed there. The disk worker opens the file by name (O_CREAT, no
 * truncation) and writes it; it never locks it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fg_flex_int.h"
#include "fg_fs.h"

void fg_spill_sweep(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (strncmp(de->d_name, "spill-", 6) || len < 10 || strcmp(de->d_name + len - 4, ".bin")) continue;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {   /* no live run holds it */
            struct stat sb;
            if (fstat(fd, &sb) == 0 && sb.st_nlink > 0 && unlink(path) == 0)
                fg_info("removed %s, the spill file of a run that is gone (%.1f MB)", path, sb.st_size / 1e6);
        }
        close(fd);
    }
    closedir(d);
}

fg_status fg_spill_claim(const char *dir, const char *path, int *fd_out) {
    fg_spill_sweep(dir);
    if (fg_fs_mkdirs(dir, 0700)) {   /* the directory and any missing parents */
        char why[1024];
        snprintf(why, sizeof why, "%s", fg_err_msg());
        return fg_err_set(FG_EINPUT, "--offload-dir %s: %s", dir, why);
    }
    for (int tries = 0; tries < 3; tries++) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0) return fg_err_set(FG_EINPUT, "%s: cannot create the spill file: %s", path, strerror(errno));
        struct stat sb;
        /* another run's sweep may unlink it between our open and our lock: then again */
        if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &sb) == 0 && sb.st_nlink > 0) {
            *fd_out = fd;
            return FG_OK;
        }
        close(fd);
    }
    return fg_err_set(FG_ERUNTIME, "%s: cannot lock the spill file", path);
}

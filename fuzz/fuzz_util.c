/* fuzz_util.c - scratch files for the fuzz targets (see fuzz_util.h). */
#define _GNU_SOURCE
#include "fuzz_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fg_common.h"

static char scratch[PATH_MAX];

static void remove_scratch(void) {
    DIR *d = opendir(scratch);
    if (!d) return;
    struct dirent *e;
    char p[PATH_MAX + 256];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", scratch, e->d_name);
            unlink(p);
        }
    closedir(d);
    rmdir(scratch);
}

const char *fz_dir(void) {
    if (scratch[0]) return scratch;
    /* Not /dev/shm: that is where the runs' segments live, and tests and the
     * sweep look there; a crashed target leaves its directory behind. */
    const char *base = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(scratch, sizeof scratch, "%s/fg-fuzz-XXXXXX", base);
    if (!mkdtemp(scratch)) {
        perror("fuzz: mkdtemp");
        abort();
    }
    atexit(remove_scratch);
    fg_log_set_level(FG_LOG_ERROR);
    return scratch;
}

const char *fz_write(int slot, const char *name, const void *data, size_t n) {
    static char paths[8][PATH_MAX + 256];
    if (slot < 0 || slot >= 8) abort();
    snprintf(paths[slot], sizeof paths[slot], "%s/%s", fz_dir(), name);
    int fd = open(paths[slot], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        perror(paths[slot]);
        abort();
    }
    const uint8_t *p = data;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) {
            perror(paths[slot]);
            abort();
        }
        p += w, n -= (size_t)w;
    }
    close(fd);
    return paths[slot];
}

void fz_remove(const char *name) {
    char p[PATH_MAX + 256];
    snprintf(p, sizeof p, "%s/%s", fz_dir(), name);
    unlink(p);
}

int fz_split(const uint8_t *data, size_t size, const char *sep, fz_part *parts, int max) {
    size_t ls = strlen(sep);
    int k = 0;
    const uint8_t *p = data, *end = data + size;
    while (k < max - 1) {
        const uint8_t *q = ls && (size_t)(end - p) >= ls ? memmem(p, (size_t)(end - p), sep, ls) : NULL;
        if (!q) break;
        parts[k++] = (fz_part){p, (size_t)(q - p)};
        p = q + ls;
    }
    parts[k++] = (fz_part){p, (size_t)(end - p)};
    return k;
}

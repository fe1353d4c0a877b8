/* disk_profile.c - `flexgen-disk-worker --profile`: how fast the offload
 * directory reads and writes, measured alone (no coordinator) by
 * fg_aio_profile (aio/fg_aio_profile.h), which does the sweep; this file
 * parses the flags, checks the directory and prints the result: one JSON
 * object on stdout with --json, else a short summary. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk_io.h"
#include "fg_aio_profile.h"

#define PROG "flexgen-disk-worker"

/* Can we create files in dir? Exit status 0, or 2 with a message. */
static int check_dir(const char *dir) {
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        fprintf(stderr, PROG ": --profile: directory %s: %s\n", dir, strerror(errno));
        return 2;
    }
    if (!S_ISDIR(sb.st_mode)) {
        fprintf(stderr, PROG ": --profile: %s is not a directory\n", dir);
        return 2;
    }
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/.flexgen-profile-probe.%d", dir, (int)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        fprintf(stderr, PROG ": --profile: cannot create a test file in %s: %s\n"
                        "HINT: profile a directory on the offload disk that you can write to (--dir DIR)\n",
                dir, strerror(errno));
        return 2;
    }
    close(fd);
    unlink(probe);
    return 0;
}

static void print_summary(const json_t *j) {
    const char *dir = json_string_value(json_object_get(j, "dir"));
    int direct = json_is_true(json_object_get(j, "direct"));
    double mib = (double)json_integer_value(json_object_get(j, "file_bytes")) / (1 << 20);
    printf("disk profile of %s (%.0f MiB test file, %s)\n", dir, mib,
           direct ? "O_DIRECT" : "buffered: no O_DIRECT here, figures are the page cache's");
    printf("  read   %8.3f GB/s   request %" PRId64 " KiB, queue depth %d\n",
           json_real_value(json_object_get(j, "disk_read_GBps")),
           (int64_t)json_integer_value(json_object_get(j, "read_req_bytes")) >> 10,
           (int)json_integer_value(json_object_get(j, "read_qd")));
    printf("  write  %8.3f GB/s   request %" PRId64 " KiB, queue depth %d\n",
           json_real_value(json_object_get(j, "disk_write_GBps")),
           (int64_t)json_integer_value(json_object_get(j, "write_req_bytes")) >> 10,
           (int)json_integer_value(json_object_get(j, "write_qd")));
    if (json_object_get(j, "engine_read_GBps"))
        printf("  engine %8.3f GB/s read, %.3f GB/s write at the disk worker's request %" PRId64 " KiB, queue depth %d\n"
               "         (what flexgen run gets; the cost model uses these)\n",
               json_real_value(json_object_get(j, "engine_read_GBps")), json_real_value(json_object_get(j, "engine_write_GBps")),
               (int64_t)json_integer_value(json_object_get(j, "engine_req_bytes")) >> 10,
               (int)json_integer_value(json_object_get(j, "engine_qd")));
    printf("  (%zu sweep points; --json prints them all)\n", json_array_size(json_object_get(j, "sweep")));
}

int fg_disk_profile_main(int argc, char **argv) {
    const char *dir = NULL, *offload = NULL;
    uint64_t size = 0;
    int as_json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--profile")) {
            /* the mode itself */
        } else if (!strcmp(a, "--json")) {
            as_json = 1;
        } else if (!strcmp(a, "--dir") && val) {
            dir = argv[++i];
        } else if (!strcmp(a, "--offload-dir") && val) {
            offload = argv[++i];
        } else if (!strcmp(a, "--size") && val) {
            if (fg_parse_size(val, &size) != FG_OK || size == 0) {
                fprintf(stderr, PROG ": --size: expected a size like 64M or 1G, got '%s'\n", val);
                return 2;
            }
            i++;
        } else {
            fprintf(stderr, PROG ": --profile: unknown or incomplete option '%s'\n"
                            "usage: " PROG " --profile [--dir DIR] [--size SIZE] [--json]\n", a);
            return 2;
        }
    }
    if (!dir) dir = offload ? offload : ".";
    int rc = check_dir(dir);
    if (rc) return rc;

    /* the engine's setting: the disk worker's defaults, which flexgen run
     * uses; its executors each keep qd requests in flight on transfers of
     * their own, taken here as one queue that many deep */
    fg_aio_profile_opts o = {.dir = dir, .file_bytes = size, .engine_req = FG_DISK_REQ_DEFAULT,
                             .engine_qd = FG_DISK_QD_DEFAULT * FG_DISK_THREADS};
    json_t *j = NULL;
    fg_status st = fg_aio_profile(&o, &j);
    if (st != FG_OK) {
        fprintf(stderr, PROG ": %s\n", fg_err_msg());
        return st == FG_EINPUT ? 2 : 1;
    }
    return fg_worker_profile_print(j, as_json, print_summary);
}

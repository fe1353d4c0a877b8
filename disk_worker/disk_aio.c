/* disk_aio.c - DISK_READ / DISK_WRITE on the libaio O_DIRECT engine
 * (aio/fg_aio.h): each command is one fg_aio transfer, split into
 * --request-size requests with --qd in flight, short transfers resubmitted,
 * EINTR/EAGAIN retried, anything else an ERROR reply naming file and offset.
 *
 * fg_aio is not thread-safe, so each executor thread gets its own engine,
 * made on its first command and destroyed when the thread ends; the loop's
 * executors run commands concurrently, so several transfers (and files) keep
 * the device busy at once.
 *
 * Files are opened per command, not cached: an open is microseconds beside a
 * transfer of megabytes, and a descriptor cache could go stale under the
 * worker (a store rebuilt, a file replaced or removed) in ways an open
 * cannot. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "disk_io.h"
#include "fg_aio.h"
#include "fg_fs.h"

/* Set by flags before any thread starts; read-only afterwards. */
static int g_qd = FG_DISK_QD_DEFAULT;
static uint64_t g_req = FG_DISK_REQ_DEFAULT;
static pthread_key_t g_engine_key;  /* this thread's fg_aio */

/* ---- flags, init ------------------------------------------------------ */

int fg_disk_option(const char *flag, const char *val) {
    if (!strcmp(flag, "--qd")) {
        char *end;
        long v = val ? strtol(val, &end, 10) : 0;
        if (!val || *end || v < 1 || v > 1024) {
            fprintf(stderr, "flexgen-disk-worker: --qd: expected a number of requests 1..1024, got '%s'\n",
                    val ? val : "");
            return -1;
        }
        g_qd = (int)v;
        return 2;
    }
    if (!strcmp(flag, "--request-size")) {
        uint64_t v = 0;
        if (!val || fg_parse_size(val, &v) != FG_OK || v < FG_AIO_ALIGN || v % FG_AIO_ALIGN || v > (1ull << 30)) {
            fprintf(stderr, "flexgen-disk-worker: --request-size: expected a multiple of 4K up to 1G "
                            "(e.g. 256K, 1M), got '%s'\n", val ? val : "");
            return -1;
        }
        g_req = v;
        return 2;
    }
    return 0;
}

static void engine_free(void *p) {
    fg_aio *a = p;
    fg_aio_destroy(&a);
}

fg_status fg_disk_init(fg_worker *w) {
    (void)w;
    if (pthread_key_create(&g_engine_key, engine_free) != 0)
        return fg_err_set(FG_ERUNTIME, "pthread_key_create failed");
    /* A kernel without aio room (fs.aio-max-nr) is a setup failure, found
     * here rather than as an ERROR on every command. */
    fg_aio *probe;
    fg_status st = fg_aio_new(g_qd, g_req, &probe);
    if (st != FG_OK) return st;
    fg_aio_destroy(&probe);
    fg_info("libaio engine: %d request(s) of %" PRIu64 " bytes in flight per executor thread", g_qd, g_req);
    return FG_OK;
}

void fg_disk_fini(fg_worker *w) {
    (void)w;
    pthread_key_delete(g_engine_key);  /* the executors' engines went with them */
}

static fg_status engine_get(fg_aio **out) {
    fg_aio *a = pthread_getspecific(g_engine_key);
    if (!a) {
        fg_status st = fg_aio_new(g_qd, g_req, &a);
        if (st != FG_OK) return st;
        pthread_setspecific(g_engine_key, a);
    }
    *out = a;
    return FG_OK;
}

/* ---- files ------------------------------------------------------------ */

fg_status fg_disk_path(const fg_worker *w, const fg_msg_disk *d, char *out, size_t cap) {
    int n;
    if (d->path[0] == '/') n = snprintf(out, cap, "%s", d->path);
    else if (d->path[0]) n = snprintf(out, cap, "%s/%s", fg_worker_offload_dir(w), d->path);
    else n = snprintf(out, cap, "%s/file-%u", fg_worker_offload_dir(w), d->file_id);
    if (n < 0 || (size_t)n >= cap) return fg_err_set(FG_EINPUT, "file path too long");
    return FG_OK;
}

/* The directory part of path into dir; 0 if there is none to make ("f",
 * "/f"). */
static int parent_of(const char *path, char *dir, size_t cap) {
    snprintf(dir, cap, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return 0;
    *slash = '\0';
    return 1;
}

/* Open the command's file: reading, or writing (created 0600, and its
 * missing parent directories with it). Errors name the transfer too. */
static fg_status open_for(const fg_msg *cmd, const char *path, fg_aio_file *f) {
    const fg_msg_disk *d = &cmd->u.disk;
    int writing = cmd->type == FG_MSG_DISK_WRITE;
    int flags = writing ? O_WRONLY | O_CREAT : O_RDONLY;
    fg_status st = fg_aio_file_open(path, flags, 0600, f);
    char dir[FG_MSG_PATH_MAX + 512];
    struct stat sb;
    if (st != FG_OK && writing && parent_of(path, dir, sizeof dir) && stat(dir, &sb) != 0 && errno == ENOENT) {
        st = fg_fs_mkdirs(dir, 0700);   /* the offload directory holds weights and the KV cache: nobody else's */
        if (st == FG_OK) st = fg_aio_file_open(path, flags, 0600, f);
    }
    if (st != FG_OK) {
        char msg[FG_MSG_TEXT_MAX + 1];
        snprintf(msg, sizeof msg, "%s", fg_err_msg());
        return fg_err_set(st, "%s (%s of %" PRIu64 " bytes at offset %" PRIu64 ")", msg,
                          fg_msg_type_name(cmd->type), d->buf.nbytes, d->file_offset);
    }
    return FG_OK;
}

/* ---- handlers --------------------------------------------------------- */

static fg_status transfer(fg_worker *w, const fg_msg *cmd) {
    const fg_msg_disk *d = &cmd->u.disk;
    char path[FG_MSG_PATH_MAX + 512];
    fg_status st = fg_disk_path(w, d, path, sizeof path);
    if (st != FG_OK) return st;
    uint8_t *buf = fg_worker_ptr(w, d->buf);
    if (!buf) return FG_EINPUT;
    fg_aio *aio;
    if ((st = engine_get(&aio)) != FG_OK) return st;
    fg_aio_file f;
    if ((st = open_for(cmd, path, &f)) != FG_OK) return st;
    st = cmd->type == FG_MSG_DISK_READ ? fg_aio_read(aio, &f, d->file_offset, buf, d->buf.nbytes)
                                       : fg_aio_write(aio, &f, d->file_offset, buf, d->buf.nbytes);
    fg_aio_file_close(&f);
    return st;
}

fg_status fg_disk_read(fg_worker *w, const fg_msg *cmd) { return transfer(w, cmd); }
fg_status fg_disk_write(fg_worker *w, const fg_msg *cmd) { return transfer(w, cmd); }

/* fg_fs.h - the file-system idioms every program shares, written once:
 *
 *  - a file written atomically: its bytes go to PATH.partial, which is
 *    renamed to PATH only when complete, so PATH is never seen
 *    half-written; with FG_FS_SYNC_FILE the bytes are fsynced before the
 *    rename, with FG_FS_SYNC_DIR the directory after it (the rename is
 *    then durable too). Three ways in, one way out:
 *      fg_fs_write_atomic()   a buffer already in memory;
 *      fg_fs_atomic_open()    a descriptor to write (or pwrite) as it goes,
 *      fg_fs_atomic_fopen()   or a FILE* (fprintf, jansson's json_dumpf),
 *      fg_fs_atomic_name()    or only the names, for a writer that opens
 *                             the partial file its own way (O_DIRECT) and
 *                             sets a->fd itself;
 *    then fg_fs_atomic_commit() (sync, close, rename) or
 *    fg_fs_atomic_abort() (close, unlink);
 *  - mkdir -p (fg_fs_mkdirs);
 *  - a directory's entries made durable (fg_fs_sync_dir, fg_fs_sync_parent).
 *
 * Errors leave a message naming the file in the error slot (fg_common.h):
 * FG_EINPUT where the partial file cannot be created (a path the user
 * gave), FG_ERUNTIME for the rest. A caller with its own wording (a
 * report, a trace) may set it again after a failure. */
#ifndef FG_FS_H
#define FG_FS_H

#include <limits.h>
#include <stdio.h>
#include <sys/types.h>

#include "fg_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FG_FS_PARTIAL_SUFFIX ".partial"

enum {
    FG_FS_SYNC_FILE = 1,   /* fsync the partial file before the rename */
    FG_FS_SYNC_DIR = 2,    /* fsync PATH's directory after it */
    FG_FS_DURABLE = FG_FS_SYNC_FILE | FG_FS_SYNC_DIR,
};

/* A file being written beside its name. Fill it with one of the three
 * calls below; commit or abort it exactly once (abort after a commit, or
 * on a never-opened one, does nothing). */
typedef struct {
    char path[PATH_MAX];        /* the final name */
    char partial[PATH_MAX + 16];/* PATH.partial, where the bytes go */
    int fd;                     /* open on partial; -1 when closed */
    FILE *f;                    /* the stream over fd (fg_fs_atomic_fopen), else NULL */
    int flags;                  /* FG_FS_* */
    int live;                   /* opened, not yet committed or aborted */
} fg_fs_atomic;

/* Only the names (fd -1): the caller creates a->partial itself, stores its
 * descriptor in a->fd and hands it over (commit and abort close it). */
fg_status fg_fs_atomic_name(fg_fs_atomic *a, const char *path, int flags);
/* PATH.partial created (truncated), mode 0644 before the umask, for write(2). */
fg_status fg_fs_atomic_open(fg_fs_atomic *a, const char *path, int flags);
/* The same as a stdio stream, fopen(PATH.partial, "w"). */
fg_status fg_fs_atomic_fopen(fg_fs_atomic *a, const char *path, int flags);
/* Flush (a stream's write errors fail here), sync per the flags, close,
 * rename to PATH, sync the directory per the flags. On failure the partial
 * file is removed and PATH is left as it was. */
fg_status fg_fs_atomic_commit(fg_fs_atomic *a);
/* Close and remove the partial file. */
void fg_fs_atomic_abort(fg_fs_atomic *a);

/* PATH written from len bytes at data, through the above. */
fg_status fg_fs_write_atomic(const char *path, const void *data, size_t len, int flags);

/* All len bytes to fd (write(2) again after a short write or EINTR);
 * `label` names the file in the message. */
fg_status fg_fs_write_all(int fd, const char *label, const void *data, size_t len);

/* mkdir -p: dir and every missing parent, each with `mode`; an existing
 * one is fine. The message names the component that failed. */
fg_status fg_fs_mkdirs(const char *dir, mode_t mode);

/* fsync a directory, making the entries just created or renamed in it
 * durable; fg_fs_sync_parent syncs the directory that holds path. */
fg_status fg_fs_sync_dir(const char *dir);
fg_status fg_fs_sync_parent(const char *path);

#ifdef __cplusplus
}
#endif

#endif

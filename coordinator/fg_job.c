/* fg_job.c - a resumable job's directory: record, journal, the output at the
 * end (see fg_job.h for the files and their order of writing). Every write
 * that a later step relies on is fsynced first, and every file that must
 * never be seen half-written (the record, the output) is written beside its
 * name and renamed, with the directory fsynced after. */
#include "fg_job.h"
#include "fg_fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

struct fg_job {
    char dir[PATH_MAX], journal[PATH_MAX], record[PATH_MAX];
    int fd;          /* the journal, O_APPEND */
    int lock_fd;     /* the directory, flock'ed while this run owns the job */
    int n, block;    /* prompts; prompts per block */
    int done;        /* prompts journaled */
};

static void remove_job(fg_job *j);

/* One run per job directory: two appending to one journal would interleave
 * their blocks. The lock goes with the process, however it dies. */
static fg_status lock_dir(fg_job *j) {
    j->lock_fd = open(j->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (j->lock_fd < 0) return fg_err_set(FG_EINPUT, "--job %s: cannot open: %s", j->dir, strerror(errno));
    if (flock(j->lock_fd, LOCK_EX | LOCK_NB) != 0)
        return fg_err_set(FG_EINPUT, "--job %s: another flexgen run is using this job directory", j->dir);
    return FG_OK;
}

static void job_paths(fg_job *j, const char *dir) {
    snprintf(j->dir, sizeof j->dir, "%s", dir);
    snprintf(j->journal, sizeof j->journal, "%s/journal.jsonl", dir);
    snprintf(j->record, sizeof j->record, "%s/job.json", dir);
}

fg_status fg_job_read_record(const char *dir, json_t **rec) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/job.json", dir);
    if (access(path, F_OK) != 0)
        return fg_err_set(FG_EINPUT, "%s: no job to resume here (no job.json: none was started, or it finished "
                                     "and its directory was removed)", dir);
    json_error_t err;
    *rec = json_load_file(path, 0, &err);
    if (!*rec || !json_is_object(*rec)) {
        json_decref(*rec);
        *rec = NULL;
        return fg_err_set(FG_EINPUT, "%s: not a job record: %s", path, err.text);
    }
    return FG_OK;
}

/* A value for a message: compact JSON, cut at 80 bytes. */
static void show(const json_t *v, char *buf, size_t len) {
    char *s = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER) : NULL;
    snprintf(buf, len, "%s", s ? s : "(none)");
    if (strlen(buf) > 80) strcpy(buf + 77, "...");
    free(s);
}

int fg_job_diff(const json_t *job, const json_t *run, const char *const *ignore, char *buf, size_t len) {
    int nd = 0;
    size_t at = 0;
    buf[0] = 0;
    for (int pass = 0; pass < 2; pass++) {   /* the job's keys, then keys only this run has */
        const json_t *a = pass ? run : job, *b = pass ? job : run;
        const char *key;
        json_t *va;
        json_object_foreach((json_t *)a, key, va) {
            int skip = 0;
            for (int i = 0; ignore && ignore[i] && !skip; i++) skip = !strcmp(ignore[i], key);
            json_t *vb = json_object_get(b, key);
            if (skip || (pass && vb) || (vb && json_equal(va, vb))) continue;
            char x[96], y[96];
            show(pass ? vb : va, x, sizeof x), show(pass ? va : vb, y, sizeof y);
            int w = snprintf(buf + at, len - at, "%s%s: the job has %s, this run %s", nd ? "; " : "", key, x, y);
            if (w > 0) at = at + (size_t)w < len ? at + (size_t)w : len - 1;
            nd++;
        }
    }
    return nd;
}

/* Whole, parseable lines of the journal: *lines of them, the first `want`
 * ending at byte *end. A line cut short, or one that is not a JSON object
 * (a crash's garbage), ends the count. */
static fg_status scan_journal(const char *path, int want, int *lines, off_t *end) {
    *lines = 0, *end = 0;
    if (access(path, F_OK) != 0) return FG_OK;   /* killed before the journal was made */
    char *data;
    size_t len;
    fg_status st = fg_read_file(path, &data, &len);
    if (st) return st;
    size_t at = 0;
    while (at < len) {
        char *nl = memchr(data + at, '\n', len - at);
        if (!nl) break;
        json_t *o = json_loadb(data + at, (size_t)(nl - data) - at, 0, NULL);
        int ok = json_is_object(o);
        json_decref(o);
        if (!ok) break;
        at = (size_t)(nl - data) + 1;
        if (++*lines == want) *end = (off_t)at;
    }
    free(data);
    return FG_OK;
}

/* Prompts of the finished blocks among `lines` journaled lines. */
static int finished(int lines, int n, int block) { return lines >= n ? n : lines / block * block; }

static fg_status job_open(fg_job *j, int truncate_to_done) {
    j->fd = open(j->journal, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncate_to_done ? 0 : O_TRUNC), 0644);
    if (j->fd < 0) return fg_err_set(FG_EINPUT, "%s: cannot open the journal: %s", j->journal, strerror(errno));
    return FG_OK;
}

fg_status fg_job_start(const char *dir, const json_t *rec, int n, int block, fg_job **out) {
    fg_job *j = fg_xcalloc(1, sizeof *j);
    job_paths(j, dir);
    j->fd = j->lock_fd = -1, j->n = n, j->block = block;
    fg_status st = FG_OK;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        st = fg_err_set(FG_EINPUT, "--job %s: cannot create the job directory: %s", dir, strerror(errno));
        goto out;
    }
    if ((st = lock_dir(j))) goto out;
    /* an earlier job here with finished blocks is work a fresh start would throw away */
    json_t *old = NULL;
    if (access(j->record, F_OK) == 0 && fg_job_read_record(dir, &old) == FG_OK) {
        json_t *on = json_object_get(old, "prompts_count"), *ob = json_object_get(old, "block_prompts");
        int lines = 0;
        off_t end;
        if (json_is_integer(on) && json_is_integer(ob) && json_integer_value(ob) > 0 &&
            !(st = scan_journal(j->journal, -1, &lines, &end))) {
            int on_i = (int)json_integer_value(on), done = finished(lines, on_i, (int)json_integer_value(ob));
            if (done > 0)
                st = fg_err_set(FG_EINPUT, "%s holds an unfinished job with %d of %d prompts done: add --resume to "
                                           "continue it, or remove the directory to start over", dir, done, on_i);
        }
    }
    json_decref(old);
    if (st) goto out;
    /* the old journal goes before the new record names it */
    if (unlink(j->journal) != 0 && errno != ENOENT) {
        st = fg_err_set(FG_EINPUT, "%s: cannot remove: %s", j->journal, strerror(errno));
        goto out;
    }
    char *text = json_dumps(rec, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    size_t tlen = strlen(text);
    text = realloc(text, tlen + 2);
    text[tlen] = '\n', text[tlen + 1] = 0;
    st = fg_fs_write_atomic(j->record, text, tlen + 1, FG_FS_DURABLE);
    free(text);
    if (!st) st = job_open(j, 0);
    if (!st) st = fg_fs_sync_dir(dir);   /* the journal's entry */
out:
    if (st) fg_job_destroy(&j);
    *out = j;
    return st;
}

fg_status fg_job_resume(const char *dir, int n, int block, fg_job **out, int *done) {
    fg_job *j = fg_xcalloc(1, sizeof *j);
    job_paths(j, dir);
    j->fd = j->lock_fd = -1, j->n = n, j->block = block;
    int lines;
    off_t end = 0;
    fg_status st = lock_dir(j);
    if (!st) st = scan_journal(j->journal, -1, &lines, &end);
    if (!st) {
        j->done = finished(lines, n, block);
        st = scan_journal(j->journal, j->done, &lines, &end);
    }
    if (!st) st = job_open(j, 1);
    /* a torn or unfinished block after the finished ones is cut off */
    if (!st && (ftruncate(j->fd, end) != 0 || fsync(j->fd) != 0))
        st = fg_err_set(FG_ERUNTIME, "%s: cannot cut the journal to its %d finished prompts: %s", j->journal, j->done,
                        strerror(errno));
    if (st) fg_job_destroy(&j);
    *out = j;
    *done = st ? 0 : j->done;
    return st;
}

fg_status fg_job_append(fg_job *j, int first, int count, const char *lines, size_t len) {
    if (first != j->done || count <= 0 || first + count > j->n)
        return fg_err_set(FG_ERUNTIME, "%s: prompts %d..%d do not follow the %d journaled", j->journal, first,
                          first + count - 1, j->done);
    fg_status st = fg_fs_write_all(j->fd, j->journal, lines, len);
    if (!st && fdatasync(j->fd) != 0) st = fg_err_set(FG_ERUNTIME, "%s: fdatasync failed: %s", j->journal, strerror(errno));
    if (!st) j->done += count;
    return st;
}

fg_status fg_job_finish(fg_job **jp, const char *out) { return fg_job_finish_as(jp, out, NULL, NULL); }

fg_status fg_job_finish_as(fg_job **jp, const char *out, fg_job_out_fn fn, void *ctx) {
    fg_job *j = *jp;
    if (j->done != j->n)
        return fg_err_set(FG_ERUNTIME, "%s: %d of %d prompts journaled; the output is not complete", j->journal,
                          j->done, j->n);
    char *data;
    size_t len;
    fg_status st = fg_read_file(j->journal, &data, &len);
    if (st) return st;
    if (fn) {
        char *made = NULL;
        size_t mlen = 0;
        st = fn(ctx, data, len, &made, &mlen);
        free(data);
        if (st) return st;
        data = made, len = mlen;
    }
    st = fg_fs_write_atomic(out, data, len, FG_FS_DURABLE);
    free(data);
    if (st) return st;
    remove_job(j);   /* the output is durable: the job is done with */
    fg_job_destroy(jp);
    return FG_OK;
}

static void remove_job(fg_job *j) {
    unlink(j->journal);
    unlink(j->record);
    rmdir(j->dir);   /* fails, harmlessly, when --job DIR holds other files */
}

void fg_job_close(fg_job **jp) {
    if (*jp && (*jp)->done == 0) remove_job(*jp);
    fg_job_destroy(jp);
}

void fg_job_destroy(fg_job **jp) {
    if (!*jp) return;
    if ((*jp)->fd >= 0) close((*jp)->fd);
    if ((*jp)->lock_fd >= 0) close((*jp)->lock_fd);
    free(*jp);
    *jp = NULL;
}

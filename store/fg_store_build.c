/* fg_store_build.c - conversion of a model's weights into tier store files
 * (format in fg_store.h). Each file's data region is streamed from the
 * weight source through two staging buffers into PATH.partial with aio; a
 * finalizer thread syncs and renames finished files while the next one is
 * converted, so a file gets its real name only when complete on disk.
 * Leaves which files to convert, and the directory's sync after the
 * renames, to fg_store.c; the bytes of a header to fg_store_format.c; the
 * I/O engine to aio/ and the weight formats to model/. */
#define _GNU_SOURCE
#include "fg_store_int.h"
#include "fg_fs.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

/* Conversion streams each file's data region through two staging buffers:
 * tensors are converted into one, back to back with their padding (they are
 * contiguous in the file), and once it holds STAGE_FLUSH bytes it is written
 * as one transfer while the next tensors are converted into the other. A
 * finished file (data and header written) goes to the finalizer thread,
 * which syncs and renames it while the next file is converted: only a
 * file that is complete on disk ever gets its real name. */
#define STAGE_FLUSH (32ull << 20)

typedef struct fin_item {
    fg_fs_atomic file;        /* the .partial, written and open */
    struct fin_item *next;
} fin_item;

struct fg_store_builder {
    fg_aio *aio;
    uint8_t *buf[2];          /* staging buffers, cap bytes each */
    uint64_t cap;
    uint64_t pending[2];      /* the write job of each buffer, 0 = none */
    int cur;                  /* the buffer being filled */
    uint64_t stage_off, stage_len; /* file range staged in buf[cur] */
    /* finalizer thread */
    pthread_t thr;
    int thr_on;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    fin_item *q, *q_tail;
    int closing;
    fg_status fin_st;
    char fin_msg[3 * PATH_MAX];
    /* progress */
    double t0, last;
    uint64_t bytes_done, bytes_total;
    int files_done, files_total;
    int quiet, tty;
    const char *label;
};

typedef fg_store_builder builder;

static void progress(builder *b, int final) {
    if (b->quiet) return;
    double now = fg_now(), dt = now - b->t0;
    if (!final && !b->tty && now - b->last < 2.0) return;
    b->last = now;
    double mbs = dt > 0 ? b->bytes_done / dt / 1e6 : 0;
    if (b->thr_on) pthread_mutex_lock(&b->mu); /* files_done moves in the finalizer */
    int done = b->files_done;
    if (b->thr_on) pthread_mutex_unlock(&b->mu);
    if (b->tty)
        fprintf(stderr, "\rtier store %s: %d/%d files, %.2f/%.2f GB, %.0f MB/s\033[K%s", b->label, done,
                b->files_total, b->bytes_done / 1e9, b->bytes_total / 1e9, mbs, final ? "\n" : "");
    else
        fg_info("tier store %s: %d/%d files, %.2f/%.2f GB, %.0f MB/s", b->label, done, b->files_total,
                b->bytes_done / 1e9, b->bytes_total / 1e9, mbs);
}

static void *finalizer(void *arg) {
    builder *b = arg;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        while (!b->q && !b->closing) pthread_cond_wait(&b->cv, &b->mu);
        fin_item *it = b->q;
        if (!it) break;
        pthread_mutex_unlock(&b->mu);
        char msg[3 * PATH_MAX] = "";
        fg_status st = fg_fs_atomic_commit(&it->file);   /* synced, then renamed */
        if (st) snprintf(msg, sizeof msg, "%s", fg_err_msg());
        pthread_mutex_lock(&b->mu);
        b->q = it->next;
        if (!b->q) b->q_tail = NULL;
        if (st && !b->fin_st) {
            b->fin_st = st;
            snprintf(b->fin_msg, sizeof b->fin_msg, "%s", msg);
        }
        if (!st) b->files_done++;
        free(it);
        pthread_cond_broadcast(&b->cv);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

static fg_status builder_init(builder *b, int qd, uint64_t req) {
    fg_status st = fg_aio_new(qd, req, &b->aio);
    if (st) return st;
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    if (pthread_create(&b->thr, NULL, finalizer, b) != 0)
        return fg_err_set(FG_ERUNTIME, "tier store: cannot start the finalizer thread");
    b->thr_on = 1;
    return FG_OK;
}

/* Wait for every queued file to be synced and renamed; the first error. */
static fg_status builder_drain(builder *b) {
    if (!b->thr_on) return FG_OK;
    pthread_mutex_lock(&b->mu);
    while (b->q) pthread_cond_wait(&b->cv, &b->mu);
    fg_status st = b->fin_st;
    if (st) fg_err_set(st, "tier store: %s", b->fin_msg);
    pthread_mutex_unlock(&b->mu);
    return st;
}

static void builder_free(builder *b) {
    if (b->thr_on) {
        builder_drain(b);
        pthread_mutex_lock(&b->mu);
        b->closing = 1;
        pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->mu);
        pthread_join(b->thr, NULL);
        pthread_mutex_destroy(&b->mu);
        pthread_cond_destroy(&b->cv);
        b->thr_on = 0;
    }
    fg_aio_destroy(&b->aio);
    free(b->buf[0]);
    free(b->buf[1]);
    b->buf[0] = b->buf[1] = NULL;
}

static fg_status grow(builder *b, uint64_t need) {
    if (need <= b->cap) return FG_OK;
    for (int i = 0; i < 2; i++) {
        free(b->buf[i]);
        b->buf[i] = NULL;
        if (posix_memalign((void **)&b->buf[i], FG_STORE_ALIGN, need))
            return fg_err_set(FG_ERUNTIME, "out of memory: two conversion buffers of %" PRIu64 " bytes", need);
    }
    b->cap = need;
    return FG_OK;
}

/* Write what is staged in the current buffer; switch to the other one,
 * waiting for its previous write. */
static fg_status flush_stage(builder *b, const fg_aio_file *f) {
    fg_status st = FG_OK;
    if (b->stage_len) {
        fg_aio_submit(b->aio, FG_AIO_WRITE, f, b->stage_off, b->buf[b->cur], b->stage_len, &b->pending[b->cur]);
        b->stage_len = 0;
    }
    b->cur ^= 1;
    if (b->pending[b->cur]) {
        st = fg_aio_wait(b->aio, b->pending[b->cur]);
        b->pending[b->cur] = 0;
    }
    return st;
}

/* Write one file as <path>.partial and hand it to the finalizer. */
static fg_status build_file(fg_store *s, fg_wsrc *ws, sfile *sf, builder *b) {
    char msg[1024];
    uint8_t *stack = NULL;   /* a stack of experts read whole, for its per-expert entries */
    fg_fs_atomic out;
    fg_status st = fg_fs_atomic_name(&out, sf->path, FG_FS_SYNC_FILE);   /* the directory once, at the end */
    if (st) return st;
    const char *partial = out.partial;
    unlink(partial);
    uint64_t biggest = sf->header_bytes;
    for (int i = 0; i < sf->n; i++)
        if (store_round_up(sf->t[i].nbytes) > biggest) biggest = store_round_up(sf->t[i].nbytes);
    if ((st = grow(b, biggest + STAGE_FLUSH))) return st;
    fg_aio_file f;
    if ((st = fg_aio_file_open(partial, O_WRONLY | O_CREAT | O_TRUNC, 0600, &f))) return st;
    out.fd = f.fd, f.owned = 0;   /* out closes it: at the commit, or on failure */
    /* Reserve the space up front: a full disk fails here, at once, rather
     * than after minutes of conversion (and blocks come out contiguous). */
    if (fallocate(f.fd, 0, 0, (off_t)sf->file_bytes) != 0 && errno != EOPNOTSUPP && errno != ENOSYS) {
        int e = errno;
        st = fg_err_set(FG_ERUNTIME, "%s: cannot reserve %" PRIu64 " bytes: %s%s", partial, sf->file_bytes,
                        strerror(e), e == ENOSPC ? " (HINT: the offload file system is full; the tier store "
                                                   "needs the model's fp16 size)" : "");
        goto fail;
    }
    b->stage_len = 0;
    for (int i = 0; i < sf->n; i++) {
        fg_store_tensor *t = &sf->t[i];
        uint64_t padded = store_round_up(t->nbytes);
        if (b->stage_len && (b->stage_len >= STAGE_FLUSH || b->stage_len + padded > b->cap))
            if ((st = flush_stage(b, &f))) goto fail;
        if (!b->stage_len) b->stage_off = t->offset;
        FG_ASSERT(b->stage_off + b->stage_len == t->offset); /* tensors are contiguous */
        uint8_t *p = b->buf[b->cur] + b->stage_len;
        if (t->expert < 0) {
            if ((st = fg_wsrc_read_stored(ws, t->spec, p))) goto fail;
        } else {
            if (t->expert == 0) {
                free(stack);
                stack = fg_xmalloc((size_t)t->nbytes * (size_t)fg_wsrc_specs(ws)[t->spec].experts);
                if ((st = fg_wsrc_read_stored(ws, t->spec, stack))) goto fail;
            }
            memcpy(p, stack + (size_t)t->expert * t->nbytes, t->nbytes);
        }
        memset(p + t->nbytes, 0, padded - t->nbytes);
        t->checksum = fg_store_checksum(p, t->nbytes);
        b->stage_len += padded;
        b->bytes_done += t->nbytes;
    }
    free(stack);
    stack = NULL;
    /* the last stage, then both buffers idle: the header goes last */
    if ((st = flush_stage(b, &f)) || (st = flush_stage(b, &f))) goto fail;
    fg_store_encode_header(s, sf, b->buf[b->cur]);
    if ((st = fg_aio_write(b->aio, &f, 0, b->buf[b->cur], sf->header_bytes))) goto fail;
    fg_aio_file_close(&f);
    fin_item *it = fg_xcalloc(1, sizeof *it);
    it->file = out;
    pthread_mutex_lock(&b->mu);
    if (b->q_tail) b->q_tail->next = it;
    else b->q = it;
    b->q_tail = it;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return FG_OK;
fail:
    free(stack);
    snprintf(msg, sizeof msg, "%s", fg_err_msg());
    /* Drain both buffers whatever happened: the kernel may still read them. */
    for (int k = 0; k < 2; k++)
        if (b->pending[k]) {
            fg_aio_wait(b->aio, b->pending[k]);
            b->pending[k] = 0;
        }
    b->stage_len = 0;
    fg_aio_file_close(&f);
    fg_fs_atomic_abort(&out);
    return fg_err_set(st, "tier store: %s", msg);
}

/* The renames made durable. Best effort, as the files themselves are
 * synced: a failure leaves the error slot as it was. */
static void sync_dir_quietly(const char *dir) {
    char keep[1024];
    snprintf(keep, sizeof keep, "%s", fg_err_msg());
    if (fg_fs_sync_dir(dir)) fg_err_set(FG_OK, "%s", keep);
}

fg_status fg_store_builder_new(int qd, uint64_t req, fg_store_builder **out) {
    builder *b = fg_xcalloc(1, sizeof *b);
    fg_status st = builder_init(b, qd, req);
    if (st) fg_store_builder_free(&b);
    *out = b;
    return st;
}

fg_aio *fg_store_builder_aio(fg_store_builder *b) { return b->aio; }

void fg_store_builder_free(fg_store_builder **bp) {
    if (!*bp) return;
    builder_free(*bp);
    free(*bp);
    *bp = NULL;
}

fg_status fg_store_builder_convert(fg_store_builder *b, fg_store *s, fg_wsrc *ws, const int *todo, int n_todo,
                                   int n_missing, int quiet) {
    b->t0 = b->last = fg_now();
    b->files_total = n_todo;
    b->quiet = quiet;
    b->tty = isatty(2);
    b->label = s->root;
    for (int i = 0; i <= s->n_layers; i++)
        if (todo[i]) b->bytes_total += s->files[i].file_bytes;
    fg_info("tier store %s: converting %d of %d files (%.2f GB; %d missing, %d rebuilt) from %s", s->root, n_todo,
            s->n_layers + 1, b->bytes_total / 1e9, n_missing, n_todo - n_missing, s->desc);
    fg_status st = FG_OK;
    for (int i = 0; i <= s->n_layers && !st; i++) {
        if (!todo[i]) continue;
        st = build_file(s, ws, &s->files[i], b);
        progress(b, 0);
    }
    fg_status fin = builder_drain(b); /* files already written get their names */
    if (!st) st = fin;
    sync_dir_quietly(s->root); /* the renames, for a resumed conversion too */
    if (!st) progress(b, 1);
    else if (b->tty && !b->quiet) fputc('\n', stderr);
    return st;
}

fg_status fg_store_builder_rebuild(fg_store_builder *b, fg_store *s, fg_wsrc *ws, sfile *sf) {
    b->quiet = 1;
    fg_status st = build_file(s, ws, sf, b);
    fg_status fin = builder_drain(b);
    if (!st) st = fin;
    if (!st) sync_dir_quietly(s->root);
    return st;
}

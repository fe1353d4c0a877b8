/* fg_aio.c - the libaio engine behind fg_aio.h: jobs split into requests,
 * a fixed pool of qd request slots shared by all queued jobs, completions
 * reassembled (short transfers resubmitted, EINTR/EAGAIN retried, errors
 * turned into a message naming the file and the offset). Leaves placement
 * (which file, which offset) to its callers: the tier store and the disk
 * worker. */
#define _GNU_SOURCE /* O_DIRECT */
#include "fg_aio.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libaio.h>
#include <stdarg.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A request that keeps failing with EINTR/EAGAIN (or writes 0 bytes) is
 * retried this often before its job fails: a device that makes no progress
 * for that long is broken, not busy. */
#define FG_AIO_MAX_RETRIES 64
/* io_submit refusing everything with EAGAIN while nothing of ours is in
 * flight (the system-wide aio limit): back off this long per try, this
 * many times, then fail the request. */
#define FG_AIO_SUBMIT_BACKOFF_US 1000
#define FG_AIO_SUBMIT_TRIES 5000

/* ------------------------------------------------------------------ */
/* jobs and request slots                                              */
/* ------------------------------------------------------------------ */

typedef struct job {
    uint64_t id;
    fg_aio_op op;
    int fd, direct;
    const char *path;     /* borrowed from the caller's fg_aio_file */
    uint64_t off, len;    /* the whole transfer */
    uint8_t *buf;         /* (len) bytes, FG_AIO_ALIGN-aligned */
    uint64_t body_len;    /* the part read/written by direct requests */
    uint64_t carved;      /* bytes of the body already split into requests */
    int tail_pending;     /* a read tail request still to issue */
    uint8_t *bounce;      /* (FG_AIO_ALIGN) read tail bounce buffer */
    int pieces;           /* requests in flight or waiting to be resubmitted */
    int failed;
    fg_status st;
    char msg[512];
    struct job *next;
} job;

typedef struct {
    struct iocb cb;
    job *j;
    uint64_t off, len;
    uint8_t *buf;
    int is_tail;
    int retries;
} slot;

struct fg_aio {
    io_context_t ctx;
    int qd;
    uint64_t req;
    slot *slots;          /* qd */
    int *free_slots;      /* stack of free indices */
    int n_free;
    struct iocb **ready;  /* prepared, not yet accepted by io_submit (<= qd) */
    int n_ready;
    int inflight;         /* accepted by the kernel, not yet reaped */
    struct io_event *events; /* qd */
    job *queue, *queue_tail; /* unfinished jobs, FIFO */
    job *done, *done_tail;   /* finished, not yet reported */
    int n_jobs;              /* queued + done */
    uint64_t next_id;
    int efd;
    fg_aio_fault fault;
    int fault_on;
    uint64_t fault_seen, fault_hits;
    fg_aio_stats stats;
};

static const char *op_name(fg_aio_op op) { return op == FG_AIO_READ ? "read" : "write"; }

static void job_fail(job *j, fg_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void job_fail(job *j, fg_status st, const char *fmt, ...) {
    if (j->failed) return; /* the first error is the one worth reporting */
    j->failed = 1;
    j->st = st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->msg, sizeof j->msg, fmt, ap);
    va_end(ap);
}

static const char *errno_hint(int e) {
    switch (e) {
    case ENOSPC: return " (HINT: the offload file system is full: free space or lower --disk-mem)";
    case EDQUOT: return " (HINT: disk quota exceeded)";
    case EIO: return " (HINT: a device error: see dmesg; the file may sit on a bad sector)";
    case EINVAL: return " (HINT: O_DIRECT needs aligned offsets, lengths and buffers)";
    default: return "";
    }
}

static int64_t file_size(int fd) {
    struct stat st;
    return fstat(fd, &st) == 0 ? (int64_t)st.st_size : -1;
}

/* ------------------------------------------------------------------ */
/* files                                                               */
/* ------------------------------------------------------------------ */

fg_status fg_aio_file_open(const char *path, int flags, int mode, fg_aio_file *f) {
    static int warned;
    memset(f, 0, sizeof *f);
    f->fd = -1;
    int buffered = (flags & FG_AIO_BUFFERED) != 0;
    flags &= ~FG_AIO_BUFFERED;
    const char *what = (flags & O_ACCMODE) == O_RDONLY ? "reading" : "writing";
    int fd = -1, direct = 0;
    if (!buffered) {
        fd = open(path, flags | O_DIRECT | O_CLOEXEC, mode);
        if (fd >= 0) direct = 1;
        else if (errno != EINVAL)
            return fg_err_set(FG_ERUNTIME, "%s: cannot open for %s: %s", path, what, strerror(errno));
    }
    if (fd < 0) {
        fd = open(path, flags | O_CLOEXEC, mode);
        if (fd < 0) return fg_err_set(FG_ERUNTIME, "%s: cannot open for %s: %s", path, what, strerror(errno));
        if (!buffered && !warned++)
            fg_warn("%s: the file system does not support O_DIRECT; using buffered I/O "
                    "(tier data goes through the page cache; bandwidth figures mean little)", path);
    }
    f->fd = fd;
    f->direct = direct;
    f->owned = 1;
    f->path = strdup(path);
    FG_ASSERT(f->path);
    return FG_OK;
}

void fg_aio_file_wrap(int fd, const char *label, fg_aio_file *f) {
    char buf[64];
    memset(f, 0, sizeof *f);
    f->fd = fd;
    int fl = fcntl(fd, F_GETFL);
    f->direct = fl >= 0 && (fl & O_DIRECT);
    if (!label) {
        snprintf(buf, sizeof buf, "/proc/self/fd/%d", fd);
        label = buf;
    }
    f->path = strdup(label);
    FG_ASSERT(f->path);
}

void fg_aio_file_close(fg_aio_file *f) {
    if (f->owned && f->fd >= 0) close(f->fd);
    free(f->path);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

/* ------------------------------------------------------------------ */
/* engine                                                              */
/* ------------------------------------------------------------------ */

static void parse_fault_env(fg_aio *a) {
    const char *e = getenv("FG_AIO_FAULT");
    if (!e || !*e) return;
    char op[16] = "", kind[16] = "";
    unsigned long long after = 0, count = 0;
    if (sscanf(e, "%15[^:]:%15[^:]:%llu:%llu", op, kind, &after, &count) < 2) {
        fg_warn("FG_AIO_FAULT=%s: expected OP:KIND[:AFTER[:COUNT]]; ignored", e);
        return;
    }
    fg_aio_fault f = {0};
    f.op = !strcasecmp(op, "read") ? FG_AIO_READ : !strcasecmp(op, "write") ? FG_AIO_WRITE : 0;
    if (!strcasecmp(kind, "eio")) f.err = EIO;
    else if (!strcasecmp(kind, "enospc")) f.err = ENOSPC;
    else if (!strcasecmp(kind, "eintr")) f.err = EINTR;
    else if (!strcasecmp(kind, "eagain")) f.err = EAGAIN;
    else if (!strcasecmp(kind, "short")) f.short_io = 1;
    else {
        fg_warn("FG_AIO_FAULT=%s: unknown fault kind '%s'; ignored", e, kind);
        return;
    }
    f.after = after;
    f.count = count;
    fg_warn("fault injection on: FG_AIO_FAULT=%s", e);
    fg_aio_set_fault(a, &f);
}

fg_status fg_aio_new(int qd, uint64_t req_bytes, fg_aio **out) {
    *out = NULL;
    if (qd < 1 || qd > 1024) return fg_err_set(FG_EINPUT, "aio queue depth %d: expected 1..1024", qd);
    if (req_bytes < FG_AIO_ALIGN || req_bytes % FG_AIO_ALIGN || req_bytes > (1ull << 30))
        return fg_err_set(FG_EINPUT, "aio request size %" PRIu64 ": expected a multiple of %u up to 1G",
                          req_bytes, FG_AIO_ALIGN);
    fg_aio *a = fg_xcalloc(1, sizeof *a);
    int r = io_setup(qd, &a->ctx);
    if (r < 0) {
        free(a);
        return fg_err_set(FG_ERUNTIME, "io_setup(%d): %s%s", qd, strerror(-r),
                          r == -EAGAIN ? " (HINT: raise /proc/sys/fs/aio-max-nr or lower the queue depth)" : "");
    }
    a->qd = qd;
    a->req = req_bytes;
    a->slots = fg_xcalloc((size_t)qd, sizeof *a->slots);
    a->free_slots = fg_xmalloc(sizeof(int) * (size_t)qd);
    for (int i = 0; i < qd; i++) a->free_slots[i] = qd - 1 - i;
    a->n_free = qd;
    a->ready = fg_xmalloc(sizeof(struct iocb *) * (size_t)qd);
    a->events = fg_xmalloc(sizeof(struct io_event) * (size_t)qd);
    a->next_id = 1;
    a->efd = -1;
    parse_fault_env(a);
    *out = a;
    return FG_OK;
}

int fg_aio_qd(const fg_aio *a) { return a->qd; }
uint64_t fg_aio_req_bytes(const fg_aio *a) { return a->req; }
int fg_aio_pending(const fg_aio *a) { return a->n_jobs; }
void fg_aio_get_stats(const fg_aio *a, fg_aio_stats *st) { *st = a->stats; }

void fg_aio_set_fault(fg_aio *a, const fg_aio_fault *f) {
    a->fault_on = f != NULL;
    if (f) a->fault = *f;
    a->fault_seen = a->fault_hits = 0;
}

int fg_aio_eventfd(fg_aio *a) {
    if (a->efd < 0) a->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return a->efd;
}

static void prep(fg_aio *a, slot *s) {
    if (s->j->op == FG_AIO_READ) io_prep_pread(&s->cb, s->j->fd, s->buf, s->len, (long long)s->off);
    else io_prep_pwrite(&s->cb, s->j->fd, s->buf, s->len, (long long)s->off);
    s->cb.data = s;
    if (a->efd >= 0) io_set_eventfd(&s->cb, a->efd);
    FG_ASSERT(a->n_ready < a->qd);
    a->ready[a->n_ready++] = &s->cb;
}

static void release(fg_aio *a, slot *s) {
    s->j->pieces--;
    s->j = NULL;
    a->free_slots[a->n_free++] = (int)(s - a->slots);
}

/* Move finished jobs from the queue to the done list, keeping FIFO order. */
static void retire(fg_aio *a) {
    job **pp = &a->queue, *prev = NULL;
    while (*pp) {
        job *j = *pp;
        int finished = j->pieces == 0 && (j->failed || (j->carved == j->body_len && !j->tail_pending));
        if (!finished) {
            prev = j;
            pp = &j->next;
            continue;
        }
        *pp = j->next;
        if (a->queue_tail == j) a->queue_tail = prev;
        j->next = NULL;
        free(j->bounce);
        j->bounce = NULL;
        if (a->done_tail) a->done_tail->next = j;
        else a->done = j;
        a->done_tail = j;
    }
}

/* Split queued jobs into requests while request slots are free. */
static void carve(fg_aio *a) {
    for (job *j = a->queue; j && a->n_free > 0; j = j->next) {
        if (j->failed) continue;
        while (a->n_free > 0 && (j->carved < j->body_len || j->tail_pending)) {
            slot *s = &a->slots[a->free_slots[--a->n_free]];
            memset(s, 0, sizeof *s);
            s->j = j;
            if (j->carved < j->body_len) {
                uint64_t n = j->body_len - j->carved;
                if (n > a->req) n = a->req;
                s->off = j->off + j->carved;
                s->buf = j->buf + j->carved;
                s->len = n;
                j->carved += n;
            } else {
                s->off = j->off + j->body_len;
                s->buf = j->bounce;
                s->len = FG_AIO_ALIGN;
                s->is_tail = 1;
                j->tail_pending = 0;
            }
            j->pieces++;
            prep(a, s);
        }
    }
}

static void complete(fg_aio *a, slot *s, long res);

/* Hand prepared requests to the kernel. */
static void submit_ready(fg_aio *a) {
    int tries = 0;
    while (a->n_ready > 0) {
        int r = io_submit(a->ctx, a->n_ready, a->ready);
        if (r > 0) {
            a->stats.requests += (uint64_t)r;
            a->inflight += r;
            if (a->inflight > a->stats.max_inflight) a->stats.max_inflight = a->inflight;
            memmove(a->ready, a->ready + r, sizeof(struct iocb *) * (size_t)(a->n_ready - r));
            a->n_ready -= r;
            continue;
        }
        if (r == -EINTR) continue;
        if (r == -EAGAIN || r == 0) {
            if (a->inflight > 0) return; /* retried after the next completions */
            if (++tries < FG_AIO_SUBMIT_TRIES) {
                usleep(FG_AIO_SUBMIT_BACKOFF_US);
                continue;
            }
        }
        /* The first request was refused outright (EBADF, EINVAL, ..., or
         * EAGAIN for seconds): complete it with that error, no retry; the
         * rest are tried again. */
        slot *s = a->ready[0]->data;
        memmove(a->ready, a->ready + 1, sizeof(struct iocb *) * (size_t)(a->n_ready - 1));
        a->n_ready--;
        s->retries = FG_AIO_MAX_RETRIES;
        complete(a, s, r == 0 ? -EAGAIN : r);
        tries = 0;
    }
}

static long apply_fault(fg_aio *a, slot *s, long res) {
    const fg_aio_fault *f = &a->fault;
    if (!a->fault_on || (f->op && f->op != (int)s->j->op)) return res;
    if (a->fault_seen++ < f->after) return res;
    if (f->count && a->fault_hits >= f->count) return res;
    if (f->err) {
        a->fault_hits++;
        return -f->err;
    }
    if (f->short_io && res > (long)FG_AIO_ALIGN) {
        a->fault_hits++;
        long half = (res / 2) & ~(long)(FG_AIO_ALIGN - 1);
        return half < (long)FG_AIO_ALIGN ? (long)FG_AIO_ALIGN : half;
    }
    return res;
}

/* One request finished with `res` (bytes, or -errno). */
static void complete(fg_aio *a, slot *s, long res) {
    job *j = s->j;
    res = apply_fault(a, s, res);
    if ((res == -EINTR || res == -EAGAIN) && s->retries < FG_AIO_MAX_RETRIES && !j->failed) {
        s->retries++;
        a->stats.retries++;
        prep(a, s);
        return;
    }
    if (res < 0) {
        int e = (int)-res;
        job_fail(j, FG_ERUNTIME, "%s: %s error at offset %" PRIu64 ": %s%s%s (transfer of %" PRIu64
                 " bytes at offset %" PRIu64 ")", j->path, op_name(j->op), s->off, strerror(e),
                 (e == EINTR || e == EAGAIN) ? ", still after many retries" : "", errno_hint(e), j->len,
                 j->off);
        release(a, s);
        return;
    }
    a->stats.bytes += (uint64_t)res;
    if (s->is_tail) {
        uint64_t need = j->len - j->body_len;
        if ((uint64_t)res >= need) memcpy(j->buf + j->body_len, j->bounce, need);
        else
            job_fail(j, FG_ERUNTIME, "%s: file too short: it ends at offset %" PRIu64 " (size %" PRId64
                     "), inside the transfer of %" PRIu64 " bytes at offset %" PRIu64
                     " (truncated or never fully written)", j->path, s->off + (uint64_t)res,
                     file_size(j->fd), j->len, j->off);
        release(a, s);
        return;
    }
    if ((uint64_t)res < s->len && !j->failed) {
        int eof = j->op == FG_AIO_READ && (res == 0 || (j->direct && res % FG_AIO_ALIGN));
        if (eof) {
            job_fail(j, FG_ERUNTIME, "%s: file too short: it ends at offset %" PRIu64 " (size %" PRId64
                     "), inside the transfer of %" PRIu64 " bytes at offset %" PRIu64
                     " (truncated or never fully written)", j->path, s->off + (uint64_t)res,
                     file_size(j->fd), j->len, j->off);
        } else if (res == 0 && ++s->retries > FG_AIO_MAX_RETRIES) {
            job_fail(j, FG_ERUNTIME, "%s: write at offset %" PRIu64 " makes no progress (0 bytes, %d tries)",
                     j->path, s->off, FG_AIO_MAX_RETRIES);
        } else {
            s->off += (uint64_t)res;
            s->buf += res;
            s->len -= (uint64_t)res;
            a->stats.short_ios++;
            prep(a, s);
            return;
        }
    }
    release(a, s);
}

/* Reap completions: wait for at least min_nr (within ts, NULL = forever). */
static void reap(fg_aio *a, int min_nr, struct timespec *ts) {
    if (a->inflight == 0) return;
    if (min_nr > a->inflight) min_nr = a->inflight;
    int r = io_getevents(a->ctx, min_nr, a->qd, a->events, ts);
    if (r == -EINTR) return;
    FG_ASSERT(r >= 0); /* EFAULT/EINVAL would be a bug here, not an I/O error */
    a->inflight -= r;
    for (int i = 0; i < r; i++) complete(a, a->events[i].data, (long)a->events[i].res);
}

/* Carve, submit, retire: everything that needs no waiting. */
static void progress(fg_aio *a) {
    carve(a);
    submit_ready(a);
    retire(a);
}

fg_status fg_aio_submit(fg_aio *a, fg_aio_op op, const fg_aio_file *f, uint64_t off, void *buf,
                        uint64_t len, uint64_t *id) {
    FG_ASSERT(op == FG_AIO_READ || op == FG_AIO_WRITE);
    job *j = fg_xcalloc(1, sizeof *j);
    j->id = a->next_id++;
    j->op = op;
    j->fd = f->fd;
    j->direct = f->direct;
    j->path = f->path ? f->path : "(unnamed file)";
    j->off = off;
    j->len = len;
    j->buf = buf;
    if (f->fd < 0) {
        job_fail(j, FG_EINPUT, "%s: %s on a file that is not open", j->path, op_name(op));
    } else if (off % FG_AIO_ALIGN) {
        job_fail(j, FG_EINPUT, "%s: %s at offset %" PRIu64 ": the offset is not a multiple of %u "
                 "(O_DIRECT needs aligned offsets)", j->path, op_name(op), off, FG_AIO_ALIGN);
    } else if ((uintptr_t)buf % FG_AIO_ALIGN) {
        job_fail(j, FG_EINPUT, "%s: %s at offset %" PRIu64 ": the memory buffer %p is not %u-aligned "
                 "(O_DIRECT needs aligned buffers)", j->path, op_name(op), off, buf, FG_AIO_ALIGN);
    } else {
        j->body_len = j->direct ? len & ~(uint64_t)(FG_AIO_ALIGN - 1) : len;
        uint64_t tail = len - j->body_len;
        if (tail && op == FG_AIO_READ) {
            if (posix_memalign((void **)&j->bounce, FG_AIO_ALIGN, FG_AIO_ALIGN)) FG_ASSERT(0 && "out of memory");
            j->tail_pending = 1;
        } else if (tail) {
            /* The partial last block goes through the page cache: O_DIRECT
             * cannot write part of a block, and writing a whole one would
             * clobber or extend the file past the transfer. */
            char proc[64];
            snprintf(proc, sizeof proc, "/proc/self/fd/%d", f->fd);
            int bfd = open(proc, O_WRONLY | O_CLOEXEC);
            uint64_t done = 0, toff = off + j->body_len;
            int e = bfd < 0 ? errno : 0;
            while (!e && done < tail) {
                ssize_t w = pwrite(bfd, j->buf + j->body_len + done, tail - done, (off_t)(toff + done));
                if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
                if (w <= 0) e = w < 0 ? errno : ENOSPC;
                else done += (uint64_t)w;
            }
            if (bfd >= 0) close(bfd);
            if (e)
                job_fail(j, FG_ERUNTIME, "%s: write error at offset %" PRIu64 ": %s%s (transfer of %" PRIu64
                         " bytes at offset %" PRIu64 ")", j->path, toff + done, strerror(e), errno_hint(e),
                         len, off);
        }
    }
    if (a->queue_tail) a->queue_tail->next = j;
    else a->queue = j;
    a->queue_tail = j;
    a->n_jobs++;
    *id = j->id;
    progress(a);
    return FG_OK;
}

static job *take_done(fg_aio *a, uint64_t id) {
    job *prev = NULL;
    for (job *j = a->done; j; prev = j, j = j->next) {
        if (id && j->id != id) continue;
        if (prev) prev->next = j->next;
        else a->done = j->next;
        if (a->done_tail == j) a->done_tail = prev;
        a->n_jobs--;
        return j;
    }
    return NULL;
}

static int queued(const fg_aio *a, uint64_t id) {
    for (const job *j = a->queue; j; j = j->next)
        if (j->id == id) return 1;
    return 0;
}

fg_status fg_aio_wait(fg_aio *a, uint64_t id) {
    if (id == 0) return fg_err_set(FG_EINPUT, "aio: no such job 0");
    for (;;) {
        progress(a);
        job *j = take_done(a, id);
        if (j) {
            fg_status st = j->failed ? j->st : FG_OK;
            if (st) fg_err_set(st, "%s", j->msg);
            free(j);
            return st;
        }
        if (!queued(a, id)) return fg_err_set(FG_EINPUT, "aio: no such job %" PRIu64, id);
        /* A queued job always has requests in flight or ready to submit. */
        FG_ASSERT(a->inflight > 0 || a->n_ready > 0);
        reap(a, 1, NULL);
    }
}

int fg_aio_poll(fg_aio *a, fg_aio_result *res, int max, int timeout_ms) {
    progress(a);
    if (!a->done && a->queue) {
        if (timeout_ms < 0) {
            while (!a->done && a->queue) {
                reap(a, 1, NULL);
                progress(a);
            }
        } else if (timeout_ms > 0) {
            struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};
            reap(a, 1, &ts);
        }
    }
    struct timespec zero = {0, 0};
    reap(a, 0, &zero);
    progress(a);
    int n = 0;
    while (n < max) {
        job *j = take_done(a, 0);
        if (!j) break;
        res[n].id = j->id;
        res[n].status = j->failed ? j->st : FG_OK;
        snprintf(res[n].msg, sizeof res[n].msg, "%s", j->failed ? j->msg : "");
        free(j);
        n++;
    }
    return n;
}

static fg_status blocking(fg_aio *a, fg_aio_op op, const fg_aio_file *f, uint64_t off, void *buf, uint64_t len) {
    uint64_t id;
    fg_status st = fg_aio_submit(a, op, f, off, buf, len, &id);
    return st ? st : fg_aio_wait(a, id);
}

fg_status fg_aio_read(fg_aio *a, const fg_aio_file *f, uint64_t off, void *buf, uint64_t len) {
    return blocking(a, FG_AIO_READ, f, off, buf, len);
}

fg_status fg_aio_write(fg_aio *a, const fg_aio_file *f, uint64_t off, const void *buf, uint64_t len) {
    return blocking(a, FG_AIO_WRITE, f, off, (void *)buf, len);
}

void fg_aio_destroy(fg_aio **p) {
    fg_aio *a = *p;
    if (!a) return;
    /* The kernel may still be writing into callers' buffers: drain first. */
    while (a->inflight > 0) reap(a, a->inflight, NULL);
    io_destroy(a->ctx);
    for (job *j = a->queue, *n; j; j = n) {
        n = j->next;
        free(j->bounce);
        free(j);
    }
    for (job *j = a->done, *n; j; j = n) {
        n = j->next;
        free(j);
    }
    if (a->efd >= 0) close(a->efd);
    free(a->slots);
    free(a->free_slots);
    free(a->ready);
    free(a->events);
    free(a);
    *p = NULL;
}

/* fg_common.c - the error slot, logging, allocation and small parsers that
 * every process links. Nothing here knows about models or tiers. */
#include "fg_common.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static _Thread_local char err_buf[1024];
static const char *log_role = "flexgen";
static fg_log_level log_level = FG_LOG_INFO;

fg_status fg_err_set(fg_status st, const char *fmt, ...) {
    /* formatted aside first: an argument may be fg_err_msg() itself (a message wrapping the one before) */
    char msg[sizeof err_buf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(err_buf, msg, sizeof err_buf);
    return st;
}

const char *fg_err_msg(void) { return err_buf[0] ? err_buf : "unknown error"; }

void fg_exit_on(fg_status st) {
    if (st == FG_OK) return;
    fprintf(stderr, "flexgen: error: %s\n", fg_err_msg());
    exit(st == FG_EINPUT ? 2 : 1);
}

void fg_log_init(const char *role) {
    log_role = role;
    const char *env = getenv("FLEXGEN_LOG");
    if (env) {
        if (!strcmp(env, "debug")) log_level = FG_LOG_DEBUG;
        else if (!strcmp(env, "warn")) log_level = FG_LOG_WARN;
        else if (!strcmp(env, "error")) log_level = FG_LOG_ERROR;
    }
}

void fg_log_set_level(fg_log_level lvl) { log_level = lvl; }

void fg_log(fg_log_level lvl, const char *fmt, ...) {
    static const char *names[] = {"debug", "info", "warn", "error"};
    if (lvl < log_level) return;
    char line[2048];
    int n = snprintf(line, sizeof line, "[%s %d] %s: ", log_role, (int)getpid(), names[lvl]);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof line) vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);   /* one write per line: no interleaving */
}

void *fg_xmalloc_at(size_t n, const char *file, int line) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "flexgen: out of memory allocating %zu bytes at %s:%d\n"
                        "HINT: lower --cpu-mem or the batch size\n", n, file, line);
        exit(1);
    }
    return p;
}

void *fg_xcalloc_at(size_t n, size_t sz, const char *file, int line) {
    void *p = calloc(n ? n : 1, sz ? sz : 1);
    if (!p) {
        fprintf(stderr, "flexgen: out of memory allocating %zu x %zu bytes at %s:%d\n"
                        "HINT: lower --cpu-mem or the batch size\n", n, sz, file, line);
        exit(1);
    }
    return p;
}

void *fg_xrealloc_at(void *p, size_t n, const char *file, int line) {
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fprintf(stderr, "flexgen: out of memory growing a buffer to %zu bytes at %s:%d\n"
                        "HINT: lower --cpu-mem or the batch size\n", n, file, line);
        exit(1);
    }
    return q;
}

void *fg_alloc_tensor(size_t nbytes) {
    void *p = NULL;
    size_t n = (nbytes + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, n ? n : 64) != 0) {
        fprintf(stderr, "flexgen: out of memory allocating a %zu-byte tensor\n"
                        "HINT: lower the batch size or use a smaller model\n", nbytes);
        exit(1);
    }
    return p;
}

double fg_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int fg_remove_flat_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        unlinkat(dirfd(d), de->d_name, 0);
    }
    closedir(d);
    return rmdir(dir);
}

double fg_log_interp(const double *xs, const double *ys, int n, double x) {
    if (x <= xs[0]) return ys[0];
    for (int i = 1; i < n; i++)
        if (x <= xs[i]) {
            double f = (log(x) - log(xs[i - 1])) / (log(xs[i]) - log(xs[i - 1]));
            return ys[i - 1] + f * (ys[i] - ys[i - 1]);
        }
    return ys[n - 1];
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double fg_median(double *v, int n) {
    FG_ASSERT(n > 0);
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

fg_status fg_parse_size(const char *s, uint64_t *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || v < 0 || !isfinite(v))
        return fg_err_set(FG_EINPUT, "bad size '%s': expected a number with an optional K/M/G/T suffix", s);
    double mul = 1;
    switch (toupper((unsigned char)*end)) {
    case '\0': break;
    case 'K': mul = 1024.0; end++; break;
    case 'M': mul = 1024.0 * 1024; end++; break;
    case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default:
        return fg_err_set(FG_EINPUT, "bad size '%s': unknown suffix '%c' (use K, M, G or T)", s, *end);
    }
    if (*end == 'B' || *end == 'b') end++;
    if (*end) return fg_err_set(FG_EINPUT, "bad size '%s': trailing characters", s);
    *out = (uint64_t)(v * mul);
    return FG_OK;
}

fg_status fg_read_file(const char *path, char **data, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return fg_err_set(FG_EINPUT, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return fg_err_set(FG_EINPUT, "%s: not a regular file", path);
    }
    size_t n = (size_t)st.st_size;
    char *buf = fg_xmalloc(n + 1);
    if (n && fread(buf, 1, n, f) != n) {
        free(buf);
        fclose(f);
        return fg_err_set(FG_ERUNTIME, "%s: read failed", path);
    }
    fclose(f);
    buf[n] = 0;
    *data = buf;
    *len = n;
    return FG_OK;
}

fg_status fg_parse_int(const char *flag, const char *v, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi)
        return fg_err_set(FG_EINPUT, "%s: expected an integer in [%d, %d], got '%s'", flag, lo, hi, v);
    *out = (int)x;
    return FG_OK;
}

/* fg_common.h - status codes, the error message slot, check macros and
 * logging shared by every FlexGen process.
 *
 * Two error policies:
 *  - library code (loaders, parsers, anything a worker calls at run time)
 *    returns an fg_status and leaves a message in the thread's error slot via
 *    fg_err_set(); it never exits;
 *  - program entry points turn a status into an exit code with fg_exit_on():
 *    FG_EINPUT -> exit 2 (bad usage or input), FG_ERUNTIME -> exit 1.
 * FG_ASSERT is for internal invariants only: it prints file:line and aborts. */
#ifndef FG_COMMON_H
#define FG_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    FG_OK = 0,
    FG_ERUNTIME = -1, /* the system failed: I/O error, out of memory, ... */
    FG_EINPUT = -2,   /* the user's input is wrong: a file, a flag, a field */
} fg_status;

/* The error slot: one message per thread, set where the error is detected,
 * read by whoever reports it. Formatting follows printf. */
fg_status fg_err_set(fg_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
const char *fg_err_msg(void);

/* Print "flexgen: error: <slot>" and exit 2 or 1 per the status (no-op on OK). */
void fg_exit_on(fg_status st);

/* Logging: one function, levels, every line tagged with role and pid. */
typedef enum { FG_LOG_DEBUG, FG_LOG_INFO, FG_LOG_WARN, FG_LOG_ERROR } fg_log_level;
void fg_log_init(const char *role);          /* "coordinator", "gpu", ... */
void fg_log_set_level(fg_log_level lvl);
void fg_log(fg_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define fg_debug(...) fg_log(FG_LOG_DEBUG, __VA_ARGS__)
#define fg_info(...)  fg_log(FG_LOG_INFO, __VA_ARGS__)
#define fg_warn(...)  fg_log(FG_LOG_WARN, __VA_ARGS__)

/* Internal invariant: never for input validation. */
#define FG_ASSERT(cond)                                                        \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "flexgen: internal error at %s:%d: %s\n",          \
                    __FILE__, __LINE__, #cond);                                \
            abort();                                                           \
        }                                                                      \
    } while (0)

/* Allocation that cannot fail quietly: on OOM prints file:line and a hint. */
void *fg_xmalloc_at(size_t n, const char *file, int line);
void *fg_xcalloc_at(size_t n, size_t sz, const char *file, int line);
void *fg_xrealloc_at(void *p, size_t n, const char *file, int line);
#define fg_xmalloc(n) fg_xmalloc_at((n), __FILE__, __LINE__)
#define fg_xcalloc(n, sz) fg_xcalloc_at((n), (sz), __FILE__, __LINE__)
#define fg_xrealloc(p, n) fg_xrealloc_at((p), (n), __FILE__, __LINE__)

/* 64-byte aligned allocation for tensors (AVX-512 friendly); free with free(). */
void *fg_alloc_tensor(size_t nbytes);

/* Wall clock in seconds, monotonic. */
double fg_now(void);

/* y at x from n > 0 points (xs ascending, > 0): linear in log(x) between
 * them, held at the ends. For rate tables measured at sizes 1, 2, 4 ... */
double fg_log_interp(const double *xs, const double *ys, int n, double x);

/* The median of v[0..n), n > 0: the middle value, or the mean of the two
 * middle ones when n is even. Sorts v in place. The one median of every
 * timing (profiles, calibration, benchmarks). */
double fg_median(double *v, int n);

/* Parse "512M", "16G", "1.5T", "4096" into bytes. Returns FG_EINPUT on junk. */
fg_status fg_parse_size(const char *s, uint64_t *out);
/* A decimal integer in [lo, hi] for flag `flag`; FG_EINPUT saying so. */
fg_status fg_parse_int(const char *flag, const char *v, int lo, int hi, int *out);

/* Remove dir and the files in it; a subdirectory is left alone (someone
 * else put it there), and then so is dir. 0, or -1 with errno. */
int fg_remove_flat_dir(const char *dir);

/* Read a whole file into a NUL-terminated heap buffer. */
fg_status fg_read_file(const char *path, char **data, size_t *len);

#ifdef __cplusplus
}
#endif

#endif

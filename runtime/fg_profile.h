/* fg_profile.h - what the gpu and cpu workers' `--profile` share. Each
 * measures its tier alone, with no coordinator, through the code its
 * commands run (gpu_worker/gpu_profile.c, cpu_worker/cpu_profile.c), and
 * prints one JSON object with --json (nothing else on stdout; progress goes
 * to the log on stderr) or a short summary. The disk worker's --profile is
 * disk_worker/disk_profile.c.
 *
 * Shared here: the flags both take (--json, --quick, --model NAME, --shape
 * DESC), the median timer, and random contents for an op's tensors as
 * fg_op_args_layout (runtime/fg_op_args.h) places them. The printing is
 * every worker's: fg_worker_profile_print (fg_worker.h). */
#ifndef FG_PROFILE_H
#define FG_PROFILE_H

#include <jansson.h>

#include "fg_op_args.h"

/* The flags both profiles take, for their --help (options_help). */
#define FG_PROFILE_OPTIONS_HELP                                                              \
    "  --model NAME        with --profile: the model size whose shapes to measure\n"         \
    "                      (default opt-1.3b)\n"                                             \
    "  --shape DESC        with --profile: instead of --model, a layer shape as the\n"      \
    "                      model description (FAMILY,V0,...,V16; what a run passes)\n"      \
    "  --quick             with --profile: fewer repetitions and smaller buffers, for\n"     \
    "                      tests; not the real measurement\n"                                \
    "  --json              with --profile: one JSON object on stdout\n"

typedef struct {
    const char *program;   /* "flexgen-gpu-worker", for messages */
    int as_json;           /* --json */
    int quick;             /* --quick */
    fg_model_config cfg;     /* --model's config (default opt-1.3b), or --shape's one-layer config */
} fg_profile_args;

/* A profile's own flag (fg_worker_def.option's contract): the arguments it
 * took (1 or 2), 0 for a flag it does not know, -1 after printing why the
 * value is bad. */
typedef int (*fg_profile_flag_fn)(void *ctx, const char *flag, const char *val);

/* Parse a `--profile` argv into *pa: the shared flags, then own's (may be
 * NULL). Returns 0, or 2 (bad usage) after printing why and `usage`. */
int fg_profile_parse(fg_profile_args *pa, const char *program, int argc, char **argv, fg_profile_flag_fn own,
                     void *own_ctx, const char *usage);

/* One run of what is measured; FG_OK or a failure with its message. */
typedef fg_status (*fg_profile_fn)(void *ctx);

/* How long at least one point is measured for, beside the repetitions. */
#define FG_PROFILE_POINT_SECONDS 0.2

/* The median seconds of fn(ctx): one untimed run (pages touched, caches
 * warm), then runs until there are at least 5 and min_seconds have passed
 * (with --quick: 3, whatever the time). Fails with fn's failure. */
fg_status fg_profile_median(const fg_profile_args *pa, fg_profile_fn fn, void *ctx, double min_seconds,
                            double *seconds);

/* Random contents for the tensors of m, a message fg_op_args_layout built
 * with base 0, written at their offsets into image (host memory of the
 * layout's bytes): weights as the model's dummy checkpoint has them
 * (fg_wsrc_open_dummy: std 0.02, LayerNorm weights near 1; a matrix in a
 * ggml block format random valid blocks, fg_fmt_fill_random), activations and
 * caches uniform in [-1, 1), masks all 1 (every position a real token),
 * other inputs zero; outputs are left alone. weights 0 skips the weights
 * (already in place for another step of the same op). */
fg_status fg_profile_fill(const fg_msg *m, void *image, const fg_profile_args *pa, int weights);

#endif

/* fg_profile_run.h - this machine's hardware profile, which the policy
 * search reads (fg_hw.h): where it is cached, measuring it (each worker's
 * --profile alone, fg_profile_tiers.c; the engine calibration,
 * fg_profile_calib.c), and what a run measures of it before its first
 * token (only what its choice depends on).
 *
 * One profile per machine, backend and offload filesystem serves every
 * model size: the shape-dependent figures are kept per layer shape
 * measured ("shapes", fg_hw.h, keyed by hidden, q and kv widths, ffn size
 * and kind), and a run of another size takes its own where measured, else
 * the nearest with its kind of MLP (measuring its own where there is
 * none). */
#ifndef FG_PROFILE_RUN_H
#define FG_PROFILE_RUN_H

#include <jansson.h>

#include "fg_common.h"
#include "fg_config.h"
#include "fg_hw.h"

#define CALIB_ROUNDS 3          /* the engine calibration's default rounds */
#define CALIB_MAX_ROUNDS 9
/* `flexgen profile`'s disk test file: larger than a virtual disk's host
 * caches, as a model of tens of GB is. */
#define FG_PROFILE_DISK_TEST_BYTES (8ull << 30)
/* A run's own disk test: the bytes its tier store holds, within these. */
#define FG_PROFILE_DISK_MIN_BYTES (256ull << 20)
/* A disk figure is reused for runs that read up to this many times its test
 * file; past that a cache that held the small file may not hold theirs. */
#define FG_PROFILE_DISK_REUSE 4

typedef struct {
    const char *offload_dir;     /* the disk tier measured */
    const char *device;          /* the gpu worker's backend */
    const char *model;           /* the size whose layer shape the gpu and cpu tiers are measured at */
    const fg_model_config *shape;  /* instead of model's: this config's layer shape (a run's own model) */
    uint32_t formats;            /* the ggml quantized formats (FG_FMT_BIT each) whose GEMM rates are measured
                                    at that shape: a run's model's; `flexgen profile`'s FG_FMT_PROFILE_DEFAULT or --formats */
    uint64_t disk_test_bytes;    /* the disk test file (0: no disk test) */
    int new_shape;               /* measure o->model's shape where missing (0: only into a profile with none) */
    int quick;                   /* fewer repetitions (tests) */
    int calibrate;               /* run the engine calibration after the tiers */
    int rounds;                  /* the engine calibration's rounds (0: CALIB_ROUNDS, 1 with quick) */
    const char *keep_runs;       /* a directory the calibration runs' prompts, reports and logs stay in
                                    (NULL: a scratch one, removed) */
} fg_profile_opts;

/* ~/.cache/flexgen/profile-HOST-DEVICE-devMAJOR.MINOR.json
 * (XDG_CACHE_HOME honoured): one per machine, backend and filesystem of
 * the offload directory (created with its parents if missing). */
fg_status fg_profile_cache_path(const char *offload_dir, const char *device, char *out, size_t cap);

/* Measure what o asks and write it into the profile at path: the tiers at
 * o->shape's or o->model's layer shape (where new_shape and that shape is
 * not measured yet, or without new_shape where no shape with its kind of
 * MLP is), the GEMM rates of o->formats the shape a run takes lacks (at its
 * own shape, added to it; where it would take another's, its own shape
 * measured whole: a format's rate at one shape does not stand for
 * another's), the disk with a test file of
 * o->disk_test_bytes (if asked and not measured with one at least a
 * FG_PROFILE_DISK_REUSE-th as large), the calibration if asked. fresh:
 * start from nothing rather than the file. Written atomically. */
fg_status fg_profile_measure(const fg_profile_opts *o, const char *path, int fresh);

/* Whether the cached profile at path already holds all that o would
 * measure (the shape where new_shape, the disk, the engine calibration
 * where asked), of this format and backend. */
int fg_profile_complete(const fg_profile_opts *o, const char *path);

/* The hardware for a run's policy search of config c, whose weights are
 * held in `formats` (fg_cost_formats): `hardware` (a profile file or
 * preset) if given, at c's layer shape where it has shapes, a warning
 * naming the formats it has no rates for (F16's stand in; a preset's
 * figures serve every format); else this machine's cached profile,
 * measured first as far as the run needs: the tiers at c's own shape where
 * no shape with c's kind of MLP is measured yet, the GEMM rates of c's
 * ggml formats where the shape it takes lacks them, and the disk where
 * disk_bytes > 0 (the bytes the run may read from disk; the test file is
 * sized to them). */
fg_status fg_profile_for_run(const char *hardware, const char *offload_dir, const char *device,
                             const fg_model_config *c, uint32_t formats, uint64_t disk_bytes, fg_hw *hw);
/* fg_hw_disk_streamed for a run that may keep disk_bytes on disk, said in
 * the log where it applies (fg_profile_for_run does it). */
void fg_profile_streamed(fg_hw *hw, uint64_t disk_bytes);

/* The calibration: prof's "engine" section, measured against prof itself
 * (written to path before each run, without the figures that run
 * measures). A model too large for this host at two layers: no section. */
fg_status fg_profile_calibrate(const fg_profile_opts *o, json_t *prof, const char *path);

/* Whether prof holds the figures of c's layer shape. */
int fg_profile_has_shape(json_t *prof, const fg_model_config *c);

/* prof to path, through PATH.partial and a rename. */
fg_status fg_profile_write_json(json_t *prof, const char *path);

/* A run read bytes[ph] from disk in s[ph] seconds of reads in flight in
 * each phase (0 prefill, 1 decode), its tier store holding store_bytes:
 * recorded as this machine's cached profile's disk.stream
 * (fg_hw_disk_streamed) where the store is larger than the disk's test
 * file and its decode read at least FG_PROFILE_STREAM_MIN_BYTES (its
 * prefill's rate beside it where that read as much); no profile, no disk
 * section: nothing. */
#define FG_PROFILE_STREAM_MIN_BYTES (1ull << 30)
fg_status fg_profile_note_stream(const char *offload_dir, const char *device, uint64_t store_bytes,
                                 const uint64_t bytes[2], const double s[2]);

#endif

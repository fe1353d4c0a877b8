/* fg_profile_run.h - the hardware profile `flexgen profile` writes and the
 * policy search reads (cmd_profile.c): where it is cached, and measuring
 * it (each worker's --profile alone, merged). */
#ifndef FG_PROFILE_RUN_H
#define FG_PROFILE_RUN_H

#include "fg_common.h"
#include "fg_hw.h"

typedef struct {
    const char *offload_dir;     /* the disk tier measured */
    const char *device;          /* the gpu worker's backend */
    const char *model;           /* OPT size whose shapes the GEMMs take */
    uint64_t disk_test_bytes;    /* the disk test file */
    int quick;                   /* fewer repetitions (tests) */
    int rounds;                  /* the engine calibration's rounds (0: 3, 1 with quick) */
    const char *keep_runs;       /* a directory the calibration runs' prompts, reports and logs stay in
                                    (NULL: a scratch one, removed) */
} fg_profile_opts;

/* ~/.cache/flexgen/profile-HOST-DEVICE-devMAJOR.MINOR-MODEL.json
 * (XDG_CACHE_HOME honoured): one per machine, backend, filesystem of the
 * offload directory (created if missing) and model size: a layer's rate
 * depends on its shapes (opt-13b's 630 MB layer does not stay in a cache
 * the way opt-1.3b's 100 MB partly does), so a big model is not predicted
 * from a small one's figures. MODEL is an OPT size name
 * (fg_config_nearest_size). */
fg_status fg_profile_cache_path(const char *offload_dir, const char *device, const char *model, char *out, size_t cap);

/* Measure and write the profile to path (atomically). */
fg_status fg_profile_run(const fg_profile_opts *o, const char *path);

/* The hardware for a policy search: `hardware` (a profile file or preset)
 * if given, else this machine's cached profile for offload_dir, device and
 * the OPT size `model`, measured first if there is none. */
fg_status fg_profile_hw(const char *hardware, const char *offload_dir, const char *device, const char *model,
                        fg_hw *hw);

#endif

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
} fg_profile_opts;

/* ~/.cache/flexgen/profile-HOST-DEVICE-devMAJOR.MINOR.json (XDG_CACHE_HOME
 * honoured): one per machine, backend and filesystem of the offload
 * directory (created if missing). */
fg_status fg_profile_cache_path(const char *offload_dir, const char *device, char *out, size_t cap);

/* Measure and write the profile to path (atomically). */
fg_status fg_profile_run(const fg_profile_opts *o, const char *path);

/* The hardware for a policy search: `hardware` (a profile file or preset)
 * if given, else this machine's cached profile for offload_dir and device,
 * measured first if there is none. */
fg_status fg_profile_hw(const char *hardware, const char *offload_dir, const char *device, fg_hw *hw);

#endif

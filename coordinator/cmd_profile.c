/* cmd_profile.c - `flexgen profile`: the command line. It measures every
 * tier with its worker alone at a model size's layer shape, the disk with a
 * large test file, and then the engine itself against those figures (the
 * calibration), into this machine's cached profile (fg_profile_run.h),
 * adding to what is there: a run measures only what its own policy depends
 * on, and this is the explicit, full measurement for those who want it. */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fg_devsize.h"
#include "fg_cmds.h"
#include "fg_fmt.h"
#include "fg_fs.h"
#include "fg_profile_run.h"

static void usage(FILE *f) {
    fprintf(f,
        "usage: flexgen profile [--offload-dir DIR] [--device NAME] [--model NAME] [--formats LIST]\n"
        "                       [--out FILE] [--reprofile] [--disk-test-size SIZE] [--quick]\n\n"
        "Measures each tier with its worker alone (flexgen-{gpu,cpu,disk}-worker --profile) at a model\n"
        "size's layer shape, the disk with a large test file and the runtime's per-command cost, then\n"
        "runs the engine itself (flexgen run, up to 18 short runs; 6 with --quick) against those\n"
        "figures to learn what they miss, and writes one JSON profile for the policy's cost model.\n"
        "Run it on an otherwise idle machine: it measures speed. `flexgen run --policy auto` measures\n"
        "only what its own choice depends on (no engine runs, a disk test sized to its model, no disk\n"
        "test where nothing goes to disk); this is the full measurement.\n"
        "Without --out the profile is cached per machine, backend and offload filesystem (the path is\n"
        "printed) and serves every model size: a new --model adds its layer shape to it. What is\n"
        "already there is reused until --reprofile.\n\n"
        "  --offload-dir DIR       the disk tier to measure (default ./flexgen-offload; created)\n"
        "  --device NAME           the gpu worker's backend (default: as flexgen run picks)\n"
        "  --model NAME            OPT size whose layer shape the GEMMs use (default opt-1.3b; a run\n"
        "                          of another size takes the measured shape nearest its own)\n"
        "  --formats LIST          the ggml weight formats whose layer GEMM rates are measured beside\n"
        "                          F16's (default " FG_FMT_PROFILE_DEFAULT "; none: none; a run of a\n"
        "                          GGUF model measures the formats it holds where they are missing)\n"
        "  --disk-test-size SIZE   the disk test file (default 8G: larger than the host's cache\n"
        "                          of a virtual disk is what a big model sees)\n"
        "  --rounds N              the engine calibration's rounds, each figure the median of N runs\n"
        "                          (1-%d; default %d, 1 with --quick)\n"
        "  --keep-runs DIR         keep the calibration runs' prompts, reports and logs in DIR (created)\n"
        "  --quick                 fewer repetitions, small buffers (tests; not for real use)\n",
        CALIB_MAX_ROUNDS, CALIB_ROUNDS);
}

int fg_cmd_profile(int argc, char **argv) {
    fg_profile_opts o = {.offload_dir = "flexgen-offload", .model = "opt-1.3b",
                         .disk_test_bytes = FG_PROFILE_DISK_TEST_BYTES, .new_shape = 1, .calibrate = 1};
    const char *out = NULL, *formats = FG_FMT_PROFILE_DEFAULT, *bad = NULL;
    int reprofile = 0;
    enum { O_OFF = 256, O_DEV, O_MODEL, O_OUT, O_RE, O_SIZE, O_QUICK, O_ROUNDS, O_KEEP, O_FMT };
    static const struct option opts[] = {
        {"offload-dir", required_argument, 0, O_OFF}, {"device", required_argument, 0, O_DEV},
        {"model", required_argument, 0, O_MODEL},     {"out", required_argument, 0, O_OUT},
        {"reprofile", no_argument, 0, O_RE},          {"disk-test-size", required_argument, 0, O_SIZE},
        {"quick", no_argument, 0, O_QUICK},           {"help", no_argument, 0, 'h'},
        {"rounds", required_argument, 0, O_ROUNDS},   {"keep-runs", required_argument, 0, O_KEEP},
        {"formats", required_argument, 0, O_FMT},     {0, 0, 0, 0},
    };
    opterr = 0;
    optind = 1;
    int c;
    fg_status st = FG_OK;
    while (!st && (c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case O_OFF: o.offload_dir = optarg; break;
        case O_DEV: o.device = optarg; break;
        case O_MODEL: o.model = optarg; break;
        case O_OUT: out = optarg; break;
        case O_RE: reprofile = 1; break;
        case O_SIZE: st = fg_parse_size(optarg, &o.disk_test_bytes); break;
        case O_QUICK: o.quick = 1; break;
        case O_ROUNDS: st = fg_parse_int("--rounds", optarg, 1, CALIB_MAX_ROUNDS, &o.rounds); break;
        case O_KEEP: o.keep_runs = optarg; break;
        case O_FMT: formats = optarg; break;
        case 'h': usage(stdout); return 0;
        default:
            fprintf(stderr, "flexgen profile: unknown or incomplete option '%s'\n\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (!st && optind < argc) st = fg_err_set(FG_EINPUT, "flexgen profile: unexpected argument '%s'", argv[optind]);
    if (!st && fg_fmt_parse_list(formats, &o.formats, &bad))
        st = fg_err_set(FG_EINPUT, "--formats: '%s' is not a ggml quantized format (Q8_0, Q4_K, Q6_K, ...)", bad);
    if (!st && o.keep_runs) {   /* before minutes of measuring, not after */
        struct stat sb;
        if (fg_fs_mkdirs(o.keep_runs, 0700) || stat(o.keep_runs, &sb) != 0 || !S_ISDIR(sb.st_mode) ||
            access(o.keep_runs, W_OK | X_OK) != 0)
            st = fg_err_set(FG_EINPUT, "--keep-runs %s: not a directory this user can write", o.keep_runs);
    }
    fg_model_config cfg;
    if (!st) st = fg_config_by_name(o.model, &cfg);
    if (!o.device) o.device = fg_devsize_default();
    if (!st) st = fg_devsize_usable(o.device);
    char path[PATH_MAX];
    if (!st && !out) st = fg_profile_cache_path(o.offload_dir, o.device, path, sizeof path);
    if (!st && out) snprintf(path, sizeof path, "%s", out);
    if (!st && !reprofile && !out && fg_profile_complete(&o, path)) {
        printf("%s\n", path);
        fg_info("a profile of this machine is cached: %s (--reprofile measures again)", path);
        return 0;
    }
    if (!st) st = fg_profile_measure(&o, path, reprofile || out);
    if (st) {
        fprintf(stderr, "flexgen profile: error: %s\n", fg_err_msg());
        return st == FG_EINPUT ? 2 : 1;
    }
    printf("%s\n", path);
    return 0;
}


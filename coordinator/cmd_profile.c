/* cmd_profile.c - `flexgen profile`: measure every tier, each worker alone
 * (its own `--profile --json`, one after the other so they do not disturb
 * each other), plus what a command costs through the runtime, and write
 * one JSON profile: {"flexgen_profile": 1, "host", "cores", "offload_dir",
 * "model", "gpu": {...}, "cpu": {...}, "disk": {...}, "runtime": {"cmd_s",
 * "rtt_s"}}.
 * The profile is cached per machine, backend and the filesystem of the
 * offload directory (fg_profile_cache_path: the disk is what is measured,
 * not the directory) and reused until --reprofile; the cost model
 * (fg_hw.h) reads it.
 *
 * The disk is measured with a test file much larger than a small run
 * touches (default 8 GiB, --disk-test-size): a virtual disk cached by its
 * host reads a 1 GiB file far faster than it streams a model of tens of GB,
 * and the cost model must see the latter. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <sys/sysmacros.h>

#include "fg_backend.h"
#include "fg_cmds.h"
#include "fg_engine_ops.h"
#include "fg_profile_run.h"
#include "fg_super.h"
#include "fg_super_proc.h"

fg_status fg_profile_cache_path(const char *offload_dir, const char *device, const char *model, char *out, size_t cap) {
    char host[256] = "host";
    struct stat sb;
    if (mkdir(offload_dir, 0700) != 0 && errno != EEXIST)
        return fg_err_set(FG_EINPUT, "--offload-dir %s: cannot create it: %s", offload_dir, strerror(errno));
    if (stat(offload_dir, &sb) != 0) return fg_err_set(FG_EINPUT, "--offload-dir %s: %s", offload_dir, strerror(errno));
    gethostname(host, sizeof host - 1);
    const char *base = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char dir[PATH_MAX];
    if (base && base[0]) snprintf(dir, sizeof dir, "%s/flexgen", base);
    else snprintf(dir, sizeof dir, "%s/.cache/flexgen", home && home[0] ? home : "/tmp");
    snprintf(out, cap, "%s/profile-%s-%s-dev%u.%u-%s.json", dir, host, device, major(sb.st_dev), minor(sb.st_dev),
             model);
    return FG_OK;
}

/* mkdir -p, mode 0700; errors surface when the file is written. */
static void mkdirs(char *dir) {
    for (char *p = dir + 1; *p; p++)
        if (*p == '/') *p = 0, mkdir(dir, 0700), *p = '/';
    mkdir(dir, 0700);
}

/* Run argv (a worker's --profile --json) and parse its stdout as one JSON object. */
static fg_status run_json(char *const argv[], json_t **out) {
    int fd[2];
    if (pipe(fd) != 0) return fg_err_set(FG_ERUNTIME, "pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) return fg_err_set(FG_ERUNTIME, "fork: %s", strerror(errno));
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]), close(fd[1]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fd[1]);
    size_t len = 0, cap = 4096;
    char *buf = fg_xcalloc(cap, 1);
    ssize_t r;
    while ((r = read(fd[0], buf + len, cap - len - 1)) > 0)
        if ((len += (size_t)r) + 1 == cap) {
            buf = realloc(buf, cap *= 2);
            FG_ASSERT(buf);
        }
    close(fd[0]);
    buf[len] = 0;
    int status = 0;
    waitpid(pid, &status, 0);
    fg_status st = FG_OK;
    json_error_t err;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        st = fg_err_set(WIFEXITED(status) && WEXITSTATUS(status) == 2 ? FG_EINPUT : FG_ERUNTIME,
                        "%s --profile failed (exit status %d; its message is above)", argv[0],
                        WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    else if (!(*out = json_loads(buf, 0, &err)) || !json_is_object(*out))
        st = fg_err_set(FG_ERUNTIME, "%s --profile --json printed no JSON object: %s", argv[0], err.text);
    free(buf);
    return st;
}

/* What a command costs through the runtime, NOPs to the gpu worker:
 * *cmd_s with 8 in flight, as the engine keeps the worker fed; *rtt_s one
 * at a time, as where the coordinator waits for a result (CPU attention). */
static fg_status measure_cmd(const char *device, double *cmd_s, double *rtt_s) {
    fg_super_opts so = {.gpu_device = device};
    fg_super *sup = NULL;
    fg_status st = fg_super_new(&so, &sup);
    for (int depth = 8; depth >= 1 && !st; depth -= 7) {
        const int n = depth == 8 ? 4000 : 1000;
        uint64_t seqs[8] = {0};
        double t0 = fg_now();
        for (int i = 0; i < n + depth && !st; i++) {
            if (i >= depth && (st = fg_super_wait(sup, seqs[i % depth], 30000, &(fg_super_done){0}))) break;
            if (i < n) {
                fg_msg m;
                fg_msg_init(&m, FG_MSG_COMPUTE);
                m.u.compute.op = FG_OP_NOP;
                st = fg_super_submit(sup, FG_ROLE_GPU, &m, NULL, &seqs[i % depth]);
            }
        }
        *(depth == 8 ? cmd_s : rtt_s) = (fg_now() - t0) / n;
    }
    fg_super_destroy(&sup);
    return st;
}

fg_status fg_profile_run(const fg_profile_opts *o, const char *path) {
    const char *roles[3] = {"gpu", "cpu", "disk"};
    json_t *prof = json_object();
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    json_object_set_new(prof, "flexgen_profile", json_integer(1));
    json_object_set_new(prof, "host", json_string(host));
    json_object_set_new(prof, "cores", json_integer(sysconf(_SC_NPROCESSORS_ONLN)));
    json_object_set_new(prof, "offload_dir", json_string(o->offload_dir));
    json_object_set_new(prof, "model", json_string(o->model));
    json_object_set_new(prof, "created", json_integer((json_int_t)time(NULL)));
    fg_status st = FG_OK;
    char size[32];
    snprintf(size, sizeof size, "%llu", (unsigned long long)o->disk_test_bytes);
    for (int r = 0; r < 3 && !st; r++) {
        char prog[64], exe[PATH_MAX];
        snprintf(prog, sizeof prog, "flexgen-%s-worker", roles[r]);
        if ((st = fg_sup_worker_path(NULL, NULL, prog, exe, sizeof exe))) break;
        char *argv[12] = {exe, "--profile", "--json"};
        int a = 3;
        if (r == FG_ROLE_GPU) argv[a++] = "--device", argv[a++] = (char *)o->device;
        if (r != FG_ROLE_DISK) argv[a++] = "--model", argv[a++] = (char *)o->model;
        if (r == FG_ROLE_DISK) argv[a++] = "--dir", argv[a++] = (char *)o->offload_dir, argv[a++] = "--size", argv[a++] = size;
        if (o->quick && r != FG_ROLE_DISK) argv[a++] = "--quick";
        fg_info("profiling the %s tier: %s", roles[r], exe);
        json_t *j = NULL;
        if (!(st = run_json(argv, &j))) json_object_set_new(prof, roles[r], j);
    }
    double cmd_s = 0, rtt_s = 0;
    if (!st && !(st = measure_cmd(o->device, &cmd_s, &rtt_s)))
        json_object_set_new(prof, "runtime", json_pack("{s:f, s:f}", "cmd_s", cmd_s, "rtt_s", rtt_s));
    if (!st) {
        char dir[PATH_MAX], tmp[PATH_MAX + 16];
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0, mkdirs(dir);
        snprintf(tmp, sizeof tmp, "%s.partial", path);
        if (json_dump_file(prof, tmp, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0 || rename(tmp, path) != 0) {
            unlink(tmp);
            st = fg_err_set(FG_ERUNTIME, "%s: cannot write the profile", path);
        }
    }
    json_decref(prof);
    return st;
}

static void usage(FILE *f) {
    fprintf(f,
        "usage: flexgen profile [--offload-dir DIR] [--device NAME] [--model NAME] [--out FILE]\n"
        "                       [--reprofile] [--disk-test-size SIZE] [--quick]\n\n"
        "Measures each tier with its worker alone (flexgen-{gpu,cpu,disk}-worker --profile) and the\n"
        "runtime's per-command cost, and writes one JSON profile for the policy's cost model.\n"
        "Without --out it is cached per machine, backend, offload filesystem and model size (the path\n"
        "is printed) and reused until --reprofile.\n\n"
        "  --offload-dir DIR       the disk tier to measure (default ./flexgen-offload)\n"
        "  --device NAME           the gpu worker's backend (default: as flexgen run picks)\n"
        "  --model NAME            OPT size whose shapes the GEMMs use (default opt-1.3b; flexgen run\n"
        "                          and policy measure the size nearest their model's)\n"
        "  --disk-test-size SIZE   the disk test file (default 8G: larger than the host's cache\n"
        "                          of a virtual disk is what a big model sees)\n"
        "  --quick                 fewer repetitions, small buffers (tests; not for real use)\n");
}

int fg_cmd_profile(int argc, char **argv) {
    fg_profile_opts o = {.offload_dir = "flexgen-offload", .model = "opt-1.3b", .disk_test_bytes = 8ull << 30};
    const char *out = NULL;
    int reprofile = 0;
    enum { O_OFF = 256, O_DEV, O_MODEL, O_OUT, O_RE, O_SIZE, O_QUICK };
    static const struct option opts[] = {
        {"offload-dir", required_argument, 0, O_OFF}, {"device", required_argument, 0, O_DEV},
        {"model", required_argument, 0, O_MODEL},     {"out", required_argument, 0, O_OUT},
        {"reprofile", no_argument, 0, O_RE},          {"disk-test-size", required_argument, 0, O_SIZE},
        {"quick", no_argument, 0, O_QUICK},           {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
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
        case 'h': usage(stdout); return 0;
        default:
            fprintf(stderr, "flexgen profile: unknown or incomplete option '%s'\n\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (!st && optind < argc) st = fg_err_set(FG_EINPUT, "flexgen profile: unexpected argument '%s'", argv[optind]);
    fg_opt_config cfg;
    if (!st) st = fg_config_by_name(o.model, &cfg);
    if (!o.device) o.device = fg_backend_default();
    if (!st) st = fg_backend_usable(o.device);
    char path[PATH_MAX];
    if (!st && !out) st = fg_profile_cache_path(o.offload_dir, o.device, cfg.name, path, sizeof path);
    if (!st && out) snprintf(path, sizeof path, "%s", out);
    if (!st && !reprofile && !out && access(path, R_OK) == 0) {
        printf("%s\n", path);
        fg_info("a profile of this machine is cached: %s (--reprofile measures again)", path);
        return 0;
    }
    if (!st) st = fg_profile_run(&o, path);
    if (st) {
        fprintf(stderr, "flexgen profile: error: %s\n", fg_err_msg());
        return st == FG_EINPUT ? 2 : 1;
    }
    printf("%s\n", path);
    return 0;
}

fg_status fg_profile_hw(const char *hardware, const char *offload_dir, const char *device, const char *model,
                        fg_hw *hw) {
    if (hardware) return fg_hw_load(hardware, hw);
    char path[PATH_MAX];
    fg_status st = fg_profile_cache_path(offload_dir, device, model, path, sizeof path);
    if (st) return st;
    if (access(path, R_OK) != 0) {
        fg_info("no profile of this machine for %s shapes yet: measuring every tier once (a few minutes; cached "
                "in %s)", model, path);
        fg_profile_opts o = {.offload_dir = offload_dir, .device = device, .model = model,
                             .disk_test_bytes = 8ull << 30};
        if ((st = fg_profile_run(&o, path))) return st;
    }
    return fg_hw_load(path, hw);
}

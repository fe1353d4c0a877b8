/* fg_profile_tiers.c - this machine's profile file: where it is cached,
 * the tiers measured by their workers alone (each its own `--profile
 * --json`, one after the other so they do not disturb each other) and by
 * a runtime round trip, merged into one JSON object, and what a run
 * measures of it before its first token. The engine calibration is
 * fg_profile_calib.c's; reading the profile, fg_hw.c's.
 *
 * The file: {"flexgen_profile": 2, "host", "cores", "offload_dir",
 * "created", "gpu": {the gpu worker's --profile of the first shape},
 * "cpu": {...}, "runtime": {"cmd_s", "rtt_s"}, "shapes": [{model, hidden,
 * q_dim, kv_dim, ffn, ffn_kind (the key: a model's layer shape), heads, mm,
 * mm_q4, mm_fmt, mm_fmt_none, attn_decode_GBps, attn_prefill_TFLOPS}, ...],
 * "disk": {... "file_bytes"} (only once a run or `flexgen profile` needed
 * the disk), "engine": {...} (only from `flexgen profile`)}. Each part is
 * measured once, when first needed, and kept: a shape per layer shape (a
 * run measures its own where the profile has none with its kind of MLP,
 * through the workers' --profile --shape, so any model is measured at its
 * own), a weight format's GEMM rates at a shape once a run holds weights
 * in it or `flexgen profile` asks (mm_fmt; mm_fmt_none the formats asked
 * for that the backend or the shape could not run, not asked again), the
 * disk again only for a run that reads far more than its test file. A
 * profile written before the formats were measured loads as it is; a run
 * of a quantized model adds its formats to it. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fg_devsize.h"
#include "fg_engine_ops.h"
#include "fg_fs.h"
#include "fg_profile_run.h"
#include "fg_super.h"
#include "fg_super_proc.h"

#define PROFILE_FORMAT 2

fg_status fg_profile_cache_path(const char *offload_dir, const char *device, char *out, size_t cap) {
    char host[256] = "host";
    struct stat sb;
    fg_status st = fg_fs_mkdirs(offload_dir, 0700);
    if (st) return fg_err_set(FG_EINPUT, "--offload-dir %s: %s", offload_dir, fg_err_msg());
    if (stat(offload_dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return fg_err_set(FG_EINPUT, "--offload-dir %s: not a directory", offload_dir);
    gethostname(host, sizeof host - 1);
    const char *base = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char dir[PATH_MAX];
    if (base && base[0]) snprintf(dir, sizeof dir, "%s/flexgen", base);
    else snprintf(dir, sizeof dir, "%s/.cache/flexgen", home && home[0] ? home : "/tmp");
    snprintf(out, cap, "%s/profile-%s-%s-dev%u.%u.json", dir, host, device, major(sb.st_dev), minor(sb.st_dev));
    return FG_OK;
}

fg_status fg_profile_write_json(json_t *prof, const char *path) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    fg_fs_atomic a;
    fg_status st = slash && slash != dir ? (*slash = 0, fg_fs_mkdirs(dir, 0700)) : FG_OK;
    if (st || (st = fg_fs_atomic_fopen(&a, path, 0))) return st;
    if (json_dumpf(prof, a.f, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0) {
        fg_fs_atomic_abort(&a);
        return fg_err_set(FG_ERUNTIME, "%s: cannot write the profile", path);
    }
    return fg_fs_atomic_commit(&a);
}

/* ---- measuring ---------------------------------------------------------------- */

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
    if (WIFSIGNALED(status))   /* no message of its own: the kernel's OOM killer, say */
        st = fg_err_set(FG_ERUNTIME, "%s --profile was killed by signal %d (%s)", argv[0], WTERMSIG(status),
                        strsignal(WTERMSIG(status)));
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        st = fg_err_set(WIFEXITED(status) && WEXITSTATUS(status) == 2 ? FG_EINPUT : FG_ERUNTIME,
                        "%s --profile failed (exit status %d; its message is above)", argv[0],
                        WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    else if (!(*out = json_loads(buf, 0, &err)) || !json_is_object(*out))
        st = fg_err_set(FG_ERUNTIME, "%s --profile --json printed no JSON object: %s", argv[0], err.text);
    free(buf);
    return st;
}

/* NOP commands to the gpu worker: pipelined as the engine keeps it fed, and
 * one at a time as where the coordinator waits for a result. */
#define RT_PIPELINE_DEPTH 8
#define RT_PIPELINED_CMDS 4000
#define RT_WAITED_CMDS 1000

/* What a command costs through the runtime: *cmd_s with RT_PIPELINE_DEPTH
 * in flight, *rtt_s one at a time. */
static fg_status measure_cmd(const char *device, double *cmd_s, double *rtt_s) {
    fg_super_opts so = {.gpu_device = device};
    fg_super *sup = NULL;
    fg_status st = fg_super_new(&so, &sup);
    const int depths[2] = {RT_PIPELINE_DEPTH, 1}, counts[2] = {RT_PIPELINED_CMDS, RT_WAITED_CMDS};
    double *outs[2] = {cmd_s, rtt_s};
    for (int d = 0; d < 2 && !st; d++) {
        const int depth = depths[d], n = counts[d];
        uint64_t seqs[RT_PIPELINE_DEPTH] = {0};
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
        *outs[d] = (fg_now() - t0) / n;
    }
    fg_super_destroy(&sup);
    return st;
}

/* One worker's --profile --json with extra flags (NULL-terminated). */
static fg_status worker_profile(const char *role, const char *const *flags, json_t **out) {
    char prog[64], exe[PATH_MAX];
    snprintf(prog, sizeof prog, "flexgen-%s-worker", role);
    fg_status st = fg_sup_worker_path(NULL, NULL, prog, exe, sizeof exe);
    if (st) return st;
    char *argv[16] = {exe, "--profile", "--json"};
    int a = 3;
    for (int i = 0; flags[i] && a < 15; i++) argv[a++] = (char *)flags[i];
    argv[a] = NULL;
    return run_json(argv, out);
}

/* ---- progress: each step announced with an estimate of the time left ---------- */

typedef struct {
    int i, n;
    double left_s;   /* the estimates of the steps not yet done */
} progress;

static void step_begin(progress *p, const char *what, double est_s) {
    fg_info("profile [%d/%d]: %s (about %.0f s; about %.0f s left in all)", ++p->i, p->n, what, est_s, p->left_s);
}

/* Rough priors for the estimates: a layer's GEMM table at hidden h on a
 * backend that computes on the host's cores grows with h^2. */
static double est_gpu_s(const fg_model_config *c, int quick, const char *device) {
    double r = (double)c->hidden / 768;
    return (quick ? 0.5 : 1) * (strcmp(device, "host") ? 15 : 6 + 10 * r * r);
}
/* a format's GEMM table: fewer and smaller row counts than the tier's mm, no attention or copies */
#define EST_FMT_SHARE 0.5
static double est_fmt_s(const fg_model_config *c, int quick, const char *device, uint32_t formats) {
    return EST_FMT_SHARE * __builtin_popcount(formats) * est_gpu_s(c, quick, device);
}
#define EST_CPU_S 5.0
#define EST_RUNTIME_S 2.0
static double est_disk_s(uint64_t bytes) { return 2 + 40 * (double)bytes / 1e9; }   /* write, then a sweep of reads */

/* ---- the profile file ----------------------------------------------------------- */

static json_t *new_profile(const fg_profile_opts *o) {
    json_t *prof = json_object();
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    json_object_set_new(prof, "flexgen_profile", json_integer(PROFILE_FORMAT));
    json_object_set_new(prof, "host", json_string(host));
    json_object_set_new(prof, "cores", json_integer(sysconf(_SC_NPROCESSORS_ONLN)));
    json_object_set_new(prof, "offload_dir", json_string(o->offload_dir));
    json_object_set_new(prof, "created", json_integer((json_int_t)time(NULL)));
    return prof;
}

/* The cached profile at path, if it is one of this format and backend;
 * else a new one. */
static json_t *load_profile(const fg_profile_opts *o, const char *path, int fresh) {
    json_t *prof = NULL;
    if (!fresh && access(path, R_OK) == 0 && fg_json_load_file(path, &prof) == FG_OK) {
        const char *be = json_string_value(json_object_get(json_object_get(prof, "gpu"), "backend"));
        if (json_integer_value(json_object_get(prof, "flexgen_profile")) == PROFILE_FORMAT && be &&
            !strcmp(be, o->device))
            return prof;
        fg_info("%s: another format or backend: measured afresh", path);
        json_decref(prof);
    }
    return new_profile(o);
}

/* The distance of the nearest of prof's shapes to c's (fg_hw_shape_distance;
 * no shapes: HUGE_VAL), *entry that shape (NULL: none; may be NULL). The
 * first of equals, as fg_hw.c takes it. */
static double nearest_shape(json_t *prof, const fg_model_config *c, json_t **entry) {
    json_t *s, *best_e = NULL;
    size_t i;
    double best = HUGE_VAL, d;
    json_array_foreach(json_object_get(prof, "shapes"), i, s) {
        if (fg_hw_shape_distance("profile", s, c, &d) == FG_OK && d < best) best = d, best_e = s;
    }
    if (entry) *entry = best_e;
    return best;
}

/* The formats of `want` a shapes[] entry has no GEMM table for (nor has
 * tried: mm_fmt_none). */
static uint32_t formats_missing(json_t *entry, uint32_t want) {
    uint32_t have = 0;
    const char *name;
    json_t *v;
    size_t i;
    json_object_foreach(json_object_get(entry, "mm_fmt"), name, v) {
        int f = fg_fmt_by_name(name);
        if (f >= 0) have |= FG_FMT_BIT(f);
    }
    json_array_foreach(json_object_get(entry, "mm_fmt_none"), i, v) {
        int f = json_is_string(v) ? fg_fmt_by_name(json_string_value(v)) : -1;
        if (f >= 0) have |= FG_FMT_BIT(f);
    }
    return want & ~have;
}

int fg_profile_has_shape(json_t *prof, const fg_model_config *c) { return nearest_shape(prof, c, NULL) == 0; }

/* The shape-dependent part of a gpu worker's profile, keyed by c's layer
 * shape (fg_hw_shape_distance reads the key). */
static json_t *shape_of(json_t *gpu, const fg_model_config *c) {
    static const char *const keys[] = {"heads", "mm", "mm_q4", "mm_fmt", "mm_fmt_none", "attn_decode_GBps",
                                       "attn_prefill_TFLOPS"};
    json_t *s = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i}", "model", c->name, "hidden", c->hidden, "q_dim",
                          fg_config_q_dim(c), "kv_dim", fg_config_kv_dim(c), "ffn", c->ffn_dim, "ffn_kind", c->ffn_kind);
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        json_t *v = json_object_get(gpu, keys[i]);
        if (v) json_object_set(s, keys[i], v);
    }
    return s;
}

/* The tiers at c's shape: the gpu worker's figures of the shape, and the
 * cpu worker's and the runtime's where not measured yet. */
static fg_status measure_shape(const fg_profile_opts *o, const fg_model_config *c, json_t *prof, progress *pg) {
    const char *q = o->quick ? "--quick" : NULL;
    /* the model's own layer shape, by name or (any model) as its description */
    char desc[512];
    fg_config_desc_text(c, desc, sizeof desc);
    const char *mflag = o->shape ? "--shape" : "--model", *mval = o->shape ? desc : o->model;
    char fmts[128];
    fg_fmt_list_text(o->formats, fmts, sizeof fmts);
    const char *gflags[] = {"--device", o->device, mflag, mval, "--formats", fmts, q, NULL};
    char what[256];
    double est = est_gpu_s(c, o->quick, o->device) + est_fmt_s(c, o->quick, o->device, o->formats);
    snprintf(what, sizeof what, "the gpu tier (%s backend) at %s's layer shape%s%s", o->device, c->name,
             o->formats ? ", GEMMs with weights in " : "", o->formats ? fmts : "");
    step_begin(pg, what, est);
    pg->left_s -= est;
    json_t *gpu = NULL;
    fg_status st = worker_profile("gpu", gflags, &gpu);
    if (st) return st;
    if (!json_object_get(prof, "shapes")) json_object_set_new(prof, "shapes", json_array());
    json_array_append_new(json_object_get(prof, "shapes"), shape_of(gpu, c));
    if (!json_object_get(prof, "gpu")) json_object_set(prof, "gpu", gpu);
    json_decref(gpu);
    if (!json_object_get(prof, "cpu")) {
        const char *cflags[] = {mflag, mval, q, NULL};
        step_begin(pg, "the cpu tier", EST_CPU_S);
        pg->left_s -= EST_CPU_S;
        json_t *cpu = NULL;
        if ((st = worker_profile("cpu", cflags, &cpu))) return st;
        json_object_set_new(prof, "cpu", cpu);
    }
    if (!json_object_get(prof, "runtime")) {
        double cmd_s = 0, rtt_s = 0;
        step_begin(pg, "a command's round trip", EST_RUNTIME_S);
        pg->left_s -= EST_RUNTIME_S;
        if ((st = measure_cmd(o->device, &cmd_s, &rtt_s))) return st;
        json_object_set_new(prof, "runtime", json_pack("{s:f, s:f}", "cmd_s", cmd_s, "rtt_s", rtt_s));
    }
    return FG_OK;
}

/* The GEMM rates of `missing` formats at c's own shape, measured alone
 * (the gpu worker's --formats-only) and added to its shapes[] entry. */
static fg_status measure_formats(const fg_profile_opts *o, const fg_model_config *c, json_t *entry, uint32_t missing,
                                 progress *pg) {
    char desc[512], fmts[128], what[256];
    fg_config_desc_text(c, desc, sizeof desc);
    fg_fmt_list_text(missing, fmts, sizeof fmts);
    const char *gflags[] = {"--device", o->device, o->shape ? "--shape" : "--model", o->shape ? desc : o->model,
                            "--formats", fmts, "--formats-only", o->quick ? "--quick" : NULL, NULL};
    double est = est_fmt_s(c, o->quick, o->device, missing);
    snprintf(what, sizeof what, "the gpu tier's GEMMs with weights in %s at %s's layer shape", fmts, c->name);
    step_begin(pg, what, est);
    pg->left_s -= est;
    json_t *gpu = NULL;
    fg_status st = worker_profile("gpu", gflags, &gpu);
    if (st) return st;
    const char *keys[2] = {"mm_fmt", "mm_fmt_none"};
    for (int k = 0; k < 2; k++) {   /* merged into the entry's */
        json_t *add = json_object_get(gpu, keys[k]), *have = json_object_get(entry, keys[k]);
        if (!add) continue;
        if (!have) json_object_set(entry, keys[k], add);
        else if (k == 0) json_object_update(have, add);
        else json_array_extend(have, add);
    }
    json_decref(gpu);
    return FG_OK;
}

static fg_status measure_disk(const fg_profile_opts *o, json_t *prof, progress *pg) {
    char size[32], what[PATH_MAX + 64];
    snprintf(size, sizeof size, "%llu", (unsigned long long)o->disk_test_bytes);
    const char *flags[] = {"--dir", o->offload_dir, "--size", size, NULL};
    snprintf(what, sizeof what, "the disk, %.2f GB test file in %s", o->disk_test_bytes / 1e9, o->offload_dir);
    step_begin(pg, what, est_disk_s(o->disk_test_bytes));
    pg->left_s -= est_disk_s(o->disk_test_bytes);
    json_t *disk = NULL;
    fg_status st = worker_profile("disk", flags, &disk);
    if (st) return st;
    json_t *stream = json_object_get(json_object_get(prof, "disk"), "stream");   /* what runs measured: kept */
    if (stream) json_object_set(disk, "stream", stream);
    json_object_set_new(prof, "disk", disk);
    return FG_OK;
}

/* Whether the disk must be measured for a test file of `want` bytes. */
static int disk_stale(json_t *prof, uint64_t want) {
    double had = json_number_value(json_object_get(json_object_get(prof, "disk"), "file_bytes"));
    return want > 0 && !(had > 0 && had * FG_PROFILE_DISK_REUSE >= (double)want);
}

/* What of o's measurements prof lacks (LACK_* bits): the one rule for a
 * run, `flexgen profile` and the measuring itself. *fmt_missing: with
 * LACK_FMT, the formats of o->formats c's own shape (*own) lacks. */
enum { LACK_SHAPE = 1, LACK_DISK = 2, LACK_ENGINE = 4, LACK_FMT = 8 };
static unsigned lacks(json_t *prof, const fg_profile_opts *o, const fg_model_config *c, json_t **own,
                      uint32_t *fmt_missing) {
    /* c's own shape where new_shape; else one with c's kind of MLP */
    json_t *entry = NULL;
    double near = nearest_shape(prof, c, &entry);
    int shape = o->new_shape ? near > 0 : !(near < FG_HW_SHAPE_OTHER_KIND);
    /* the shape taken lacks a format: added to c's own; another's is not
     * c's: its own measured whole */
    uint32_t missing = shape ? 0 : formats_missing(entry, o->formats);
    if (missing && near > 0) shape = 1, missing = 0;
    *own = entry, *fmt_missing = missing;
    return (shape ? LACK_SHAPE : 0) | (missing ? LACK_FMT : 0) | (disk_stale(prof, o->disk_test_bytes) ? LACK_DISK : 0) |
           (o->calibrate && !json_object_get(prof, "engine") ? LACK_ENGINE : 0);
}

/* The config whose layer shape o measures: o->shape, else o->model's. */
static fg_status opts_config(const fg_profile_opts *o, fg_model_config *c) {
    if (o->shape) return *c = *o->shape, FG_OK;
    return fg_config_by_name(o->model, c);
}

int fg_profile_complete(const fg_profile_opts *o, const char *path) {
    fg_model_config c;
    if (access(path, R_OK) != 0 || opts_config(o, &c) != FG_OK) return 0;
    json_t *prof = load_profile(o, path, 0), *own;
    uint32_t missing;
    unsigned lack = lacks(prof, o, &c, &own, &missing);
    json_decref(prof);
    return lack == 0;
}

fg_status fg_profile_measure(const fg_profile_opts *o, const char *path, int fresh) {
    fg_model_config c;
    fg_status st = opts_config(o, &c);
    if (st) return st;
    json_t *prof = load_profile(o, path, fresh), *own;
    uint32_t missing;
    unsigned lack = lacks(prof, o, &c, &own, &missing);
    int shape = !!(lack & LACK_SHAPE), fmt = !!(lack & LACK_FMT), disk = !!(lack & LACK_DISK);
    progress pg = {.n = shape + fmt + !json_object_get(prof, "cpu") + !json_object_get(prof, "runtime") + disk};
    pg.left_s = (shape ? est_gpu_s(&c, o->quick, o->device) + est_fmt_s(&c, o->quick, o->device, o->formats) : 0) +
                est_fmt_s(&c, o->quick, o->device, missing) + (!json_object_get(prof, "cpu") ? EST_CPU_S : 0) +
                (!json_object_get(prof, "runtime") ? EST_RUNTIME_S : 0) + (disk ? est_disk_s(o->disk_test_bytes) : 0);
    if (shape) st = measure_shape(o, &c, prof, &pg);
    if (!st && fmt) st = measure_formats(o, &c, own, missing, &pg);
    if (!st && disk) st = measure_disk(o, prof, &pg);
    if (!st && o->calibrate) {
        /* the tiers' profile at a scratch path the calibration runs read */
        char tiers[PATH_MAX + 16];
        snprintf(tiers, sizeof tiers, "%s.tiers", path);
        st = fg_profile_calibrate(o, prof, tiers);
        unlink(tiers);
    }
    if (!st) st = fg_profile_write_json(prof, path);
    json_decref(prof);
    return st;
}

/* A profile given to a run (--hardware FILE) that lacks a rate of the
 * model's formats: said, since nothing measures it here. */
static void warn_formats(const fg_hw *hw, uint32_t formats) {
    uint32_t missing = 0;
    for (int f = 0; f < FG_FMT_COUNT; f++)
        if (formats & FG_FMT_BIT(f) && fg_fmt_is_ggml_quant(f) && !fg_hw_fmt_measured(hw, f)) missing |= FG_FMT_BIT(f);
    if (!missing || (hw->mm_prefill_tflops > 0 && hw->mm_decode_tflops > 0)) return;   /* a preset's serve every format */
    char names[128];
    fg_fmt_list_text(missing, names, sizeof names);
    fg_warn("%s has no GEMM rates with weights in %s at this model's layer shape: F16's stand in (HINT: without "
            "--hardware a run measures them into this machine's profile)", hw->source, names);
}

void fg_profile_streamed(fg_hw *hw, uint64_t disk_bytes) {
    double test_gbps = hw->disk_read_gbps;
    if (fg_hw_disk_streamed(hw, disk_bytes))
        fg_info("profile: the disk at %.2f GB/s, as a run streaming a %.1f GB tier store read it (the %.1f GB test "
                "file read at %.2f GB/s: a file that size a virtual disk's host may hold in its caches)",
                hw->disk_read_gbps, hw->disk_stream_bytes / 1e9, hw->disk_test_bytes / 1e9, test_gbps);
}

fg_status fg_profile_for_run(const char *hardware, const char *offload_dir, const char *device,
                             const fg_model_config *c, uint32_t formats, uint64_t disk_bytes, fg_hw *hw) {
    fg_status st;
    if (hardware) {
        if ((st = fg_hw_load_for(hardware, c, hw))) return st;
        warn_formats(hw, formats);
        fg_profile_streamed(hw, disk_bytes);
        return FG_OK;
    }
    char path[PATH_MAX];
    if ((st = fg_profile_cache_path(offload_dir, device, path, sizeof path))) return st;
    uint64_t test = disk_bytes < FG_PROFILE_DISK_MIN_BYTES ? FG_PROFILE_DISK_MIN_BYTES
                    : disk_bytes > FG_PROFILE_DISK_TEST_BYTES ? FG_PROFILE_DISK_TEST_BYTES : disk_bytes;
    uint32_t quant = 0;   /* F16's rates are mm, FlexGen 4-bit's mm_q4: every shape has them */
    for (int f = 0; f < FG_FMT_COUNT; f++)
        if (fg_fmt_is_ggml_quant(f)) quant |= formats & FG_FMT_BIT(f);
    fg_profile_opts o = {.offload_dir = offload_dir, .device = device, .model = c->name, .shape = c,
                         .formats = quant, .disk_test_bytes = disk_bytes ? test : 0};
    if (!fg_profile_complete(&o, path)) {
        fg_info("measuring what this run's policy depends on (cached in %s; `flexgen profile` measures more: "
                "other shapes, the engine's own figures)", path);
        if ((st = fg_profile_measure(&o, path, 0))) return st;
    }
    if ((st = fg_hw_load_for(path, c, hw))) return st;
    fg_profile_streamed(hw, disk_bytes);
    warn_formats(hw, formats);   /* a format the backend or the shape could not run (mm_fmt_none) */
    if (hw->shape_hidden && !hw->shape_own)
        fg_info("profile: the gpu figures of the measured layer shape nearest this model's (%s's, hidden %d for %d; "
                "`flexgen profile --model NAME` measures a size's own)", hw->shape_model, hw->shape_hidden, c->hidden);
    return FG_OK;
}

fg_status fg_profile_note_stream(const char *offload_dir, const char *device, uint64_t store_bytes,
                                 const uint64_t bytes[2], const double s[2]) {
    char path[PATH_MAX];
    json_t *prof = NULL;
    const uint64_t read_bytes = bytes[1];
    const double read_s = s[1];
    if (!(read_bytes >= FG_PROFILE_STREAM_MIN_BYTES && read_s > 0) ||
        fg_profile_cache_path(offload_dir, device, path, sizeof path) || access(path, R_OK) != 0 ||
        fg_json_load_file(path, &prof))
        return FG_OK;   /* nothing to add to */
    json_t *disk = json_object_get(prof, "disk");
    double test = json_number_value(json_object_get(disk, "file_bytes"));
    fg_status st = FG_OK;
    if (json_is_object(disk) && test > 0 && (double)store_bytes > test) {
        json_t *rec = json_pack("{s:f, s:I, s:I, s:f, s:I}", "read_GBps", read_bytes / read_s / 1e9, "store_bytes",
                                (json_int_t)store_bytes, "read_bytes", (json_int_t)read_bytes, "read_s", read_s,
                                "measured", (json_int_t)time(NULL));
        if (bytes[0] >= FG_PROFILE_STREAM_MIN_BYTES && s[0] > 0)   /* the prefill's, the compute heavier beside it */
            json_object_set_new(rec, "prefill_read_GBps", json_real(bytes[0] / s[0] / 1e9));
        json_object_set_new(disk, "stream", rec);
        st = fg_profile_write_json(prof, path);
    }
    json_decref(prof);
    return st;
}

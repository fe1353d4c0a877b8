/* cmd_profile.c - `flexgen profile`: measure every tier, each worker alone
 * (its own `--profile --json`, one after the other so they do not disturb
 * each other), plus what a command costs through the runtime, and write
 * one JSON profile: {"flexgen_profile": 1, "host", "cores", "offload_dir",
 * "model", "gpu": {...}, "cpu": {...}, "disk": {...}, "runtime": {"cmd_s",
 * "rtt_s"}, "engine": {...}}; the last is the engine run on the size (or
 * its first layers) against the rest (the calibration below).
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
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <sys/sysmacros.h>

#include "fg_devsize.h"
#include "fg_cmds.h"
#include "fg_cost.h"
#include "fg_engine_ops.h"
#include "fg_profile_run.h"
#include "fg_super.h"
#include "fg_super_proc.h"
#include "fg_weights.h"

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

/* ---- the engine calibration --------------------------------------------------
 *
 * Each tier measured alone is not the whole story on a host whose cores
 * the workers share: a decode op that takes 3.5 ms alone takes 4-5 ms
 * inside a run, where the coordinator, the copies and the other workers
 * wake on the same cores; a copy that streams at 15 GB/s alone moves a
 * layer's weights at about 10 GB/s beside the compute it overlaps; and a
 * unit whose attention the cpu worker computes waits on two relays. So the
 * profile ends by running the engine itself (`flexgen run`, a child) on the
 * profiled size (or, where that does not fit this host twice over, its
 * first layers) against the tiers' figures, and records what the cost
 * model missed (fg_hw.h, "engine"), each figure the median of `rounds`
 * runs (--rounds, default 3; 1 with --quick). Each round runs every kind
 * once, in the order below, so that a slow spell of the host (they last
 * minutes) falls on one run of each figure, which the median sets aside,
 * not on every run of one. Each run predicts with the other kinds'
 * figures measured so far (their medians) but without its own, so that
 * every run of a figure measures the same ratio, against the tiers'
 * figures alone (a run predicted with its own figure from the rounds
 * before would measure only what is left beyond it, near 1 or 0, and pull
 * the median there):
 *   1. everything on the GPU tier: the compute stream's measured / predicted
 *      time, decode and prefill;
 *   2. the weights on the CPU tier, one batch of 8 (copies dominate): a
 *      copy's measured / predicted seconds, decode and prefill;
 *   3. where the whole model runs and its store is smaller than the disk
 *      test file, its weights on disk: a disk transfer's measured /
 *      predicted seconds (the store this size's runs read, at its own size:
 *      a small store may sit in a virtual disk's host cache, which the
 *      large test file is made to miss; a larger store, or a model run on
 *      its first layers, keeps the test file's rate, what a large model
 *      sees);
 *   4. the cache on the CPU tier, with and without CPU attention: the
 *      seconds per decode unit each path adds beyond that. */

typedef struct {
    const fg_profile_opts *o;
    char dir[PATH_MAX];       /* scratch: prompts, reports, logs */
    char model[sizeof ((fg_opt_config *)0)->name + 16];   /* NAME:LAYERS */
} calib;

/* What one calibration run measured, and what the cost model predicted for
 * it, by phase (0 prefill, 1 decode). */
typedef struct {
    double m[2], p[2];
    double copy_p[2];              /* predicted seconds of copies (cpu->gpu and gpu->cpu) */
    double disk_p[2], comp_p[2];   /* predicted seconds of the disk, of the compute stream */
    int copy_bound[2], disk_bound[2];   /* the predicted bottleneck is a copy, the disk */
} calib_meas;

/* The prompts of a run of n sequences at `ids`: 32 tokens of arbitrary ids
 * each. */
static fg_status write_ids(const char *ids, int n) {
    FILE *f = fopen(ids, "w");
    if (!f) return fg_err_set(FG_ERUNTIME, "%s: %s", ids, strerror(errno));
    for (int i = 0; i < n; i++) {
        fprintf(f, i ? ",[2" : "[[2");
        for (int t = 1; t < 32; t++) fprintf(f, ",%d", 4 + (i * 7919 + t * 104729) % 40000);
        fprintf(f, "]");
    }
    if ((fprintf(f, "]\n") < 0) + fclose(f)) return fg_err_set(FG_ERUNTIME, "%s: cannot write", ids);
    return FG_OK;
}

static double report_num(json_t *r, const char *a, const char *b, const char *c) {
    json_t *v = json_object_get(r, a);
    if (b) v = json_object_get(v, b);
    if (c) v = json_object_get(v, c);
    return json_number_value(v);
}

/* One engine run, K batches of B, G tokens, with `percent` (and CPU
 * attention when ca) against the profile at hw. */
static fg_status calib_run(calib *cb, const char *hw, const char *tag, int K, int B, int G,
                           const char *const percent[6], int ca, calib_meas *r) {
    char exe[PATH_MAX], ids[PATH_MAX + 16], rep[PATH_MAX + 32], out[PATH_MAX + 32], log[PATH_MAX + 32];
    char gen[16], gbs[16], nb[16];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return fg_err_set(FG_ERUNTIME, "/proc/self/exe: %s", strerror(errno));
    exe[n] = 0;
    snprintf(ids, sizeof ids, "%s/ids-%d.json", cb->dir, K * B);
    snprintf(rep, sizeof rep, "%s/%s.report.json", cb->dir, tag);
    snprintf(out, sizeof out, "%s/%s.jsonl", cb->dir, tag);
    snprintf(log, sizeof log, "%s/%s.log", cb->dir, tag);
    snprintf(gen, sizeof gen, "%d", G), snprintf(gbs, sizeof gbs, "%d", B), snprintf(nb, sizeof nb, "%d", K);
    char *argv[40] = {exe, "run", "--dummy", cb->model, "--prompt-ids", ids, "--gen-len", gen, "--ignore-eos",
                      "--gpu-batch-size", gbs, "--num-gpu-batches", nb, "--hardware", (char *)hw, "--report", rep,
                      "--out", out, "--offload-dir", (char *)cb->o->offload_dir, "--device", (char *)cb->o->device,
                      "--percent"};
    int a = 0;
    while (argv[a]) a++;
    for (int i = 0; i < 6; i++) argv[a++] = (char *)percent[i];
    if (ca) argv[a++] = "--cpu-cache-compute";
    argv[a] = NULL;
    fg_status st = access(ids, R_OK) == 0 ? FG_OK : write_ids(ids, K * B);   /* once per size */
    if (st) return st;
    pid_t pid = fork();
    if (pid < 0) return fg_err_set(FG_ERUNTIME, "fork: %s", strerror(errno));
    if (pid == 0) {
        FILE *f = freopen(log, "w", stderr);
        if (!f || !freopen("/dev/null", "w", stdout)) _exit(127);
        execv(exe, argv);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char line[512] = "", last[512] = "(no message)";
        FILE *f = fopen(log, "r");
        while (f && fgets(line, sizeof line, f))
            if (strstr(line, "error")) snprintf(last, sizeof last, "%s", line);
        if (f) fclose(f);
        last[strcspn(last, "\n")] = 0;
        return fg_err_set(FG_ERUNTIME, "the engine calibration run (%s, --dummy %s) failed (status %d): %s", tag,
                          cb->model, WIFEXITED(status) ? WEXITSTATUS(status) : -1, last);
    }
    json_t *j = NULL;
    if ((st = fg_json_load_file(rep, &j))) return st;
    static const char *const ph[2][3] = {{"prefill_s", "prefill_resource_s", "prefill_bottleneck"},
                                         {"decode_s", "decode_resource_s", "decode_bottleneck"}};
    for (int i = 0; i < 2; i++) {
        r->m[i] = report_num(j, ph[i][0], NULL, NULL), r->p[i] = report_num(j, "predicted", ph[i][0], NULL);
        r->copy_p[i] = report_num(j, "predicted", ph[i][1], fg_cost_res_name(R_H2D)) +
                       report_num(j, "predicted", ph[i][1], fg_cost_res_name(R_D2H));
        r->disk_p[i] = report_num(j, "predicted", ph[i][1], fg_cost_res_name(R_DISK));
        r->comp_p[i] = report_num(j, "predicted", ph[i][1], fg_cost_res_name(R_COMPUTE));
        const char *bn = json_string_value(json_object_get(json_object_get(j, "predicted"), ph[i][2]));
        r->copy_bound[i] = bn && (!strcmp(bn, fg_cost_res_name(R_H2D)) || !strcmp(bn, fg_cost_res_name(R_D2H)));
        r->disk_bound[i] = bn && !strcmp(bn, fg_cost_res_name(R_DISK));
    }
    json_decref(j);
    if (!(r->m[0] > 0) || !(r->p[0] > 0) || !(r->m[1] > 0) || !(r->p[1] > 0))
        return fg_err_set(FG_ERUNTIME, "%s: the calibration run's report lacks measured and predicted prefill_s and decode_s",
                          rep);
    return FG_OK;
}

static fg_status write_json(json_t *j, const char *path) {
    char tmp[PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s.partial", path);
    if (json_dump_file(j, tmp, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        return fg_err_set(FG_ERUNTIME, "%s: cannot write the profile", path);
    }
    return FG_OK;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double clamp(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }

/* The disk factor f that makes a phase of disk seconds D (at the disk's
 * own rates) beside compute seconds C take m, as the cost model sees it
 * with contention c (fg_cost_disk_compute_s, which grows with f); 0 where
 * the compute alone takes m or longer (no figure). */
static double fit_disk_factor(double c, double D, double C, double m) {
    double lo = 1e-3, hi = 100;
    if (!(D > 0) || fg_cost_disk_compute_s(lo * D, C, c) >= m || fg_cost_disk_compute_s(hi * D, C, c) <= m) return 0;
    for (int i = 0; i < 100; i++) {
        double mid = sqrt(lo * hi);
        *(fg_cost_disk_compute_s(mid * D, C, c) < m ? &lo : &hi) = mid;
    }
    return sqrt(lo * hi);
}

/* b's predicted seconds beyond its measured ones at contention c, with the
 * disk factor a gives for that c; past the c where a's compute alone
 * explains a there is no factor: too large */
static double over_b(double c, const calib_meas *a, const calib_meas *b) {
    double f = fit_disk_factor(c, a->disk_p[1], a->comp_p[1], a->m[1]);
    return f > 0 ? fg_cost_disk_compute_s(f * b->disk_p[1], b->comp_p[1], c) - b->m[1] : HUGE_VAL;
}

/* The contention c in [0, 1] and the disk factor *f that explain two runs
 * of the same weights on disk: a, with little compute beside the reads,
 * gives f for each c; b, with more, the c whose f predicts it (bisection:
 * its prediction grows with c while b has more compute than a). -1 where
 * they cannot: a's compute alone takes its time, or b does not have more
 * compute than a. */
static double fit_contention(const calib_meas *a, const calib_meas *b, double *f) {
    if (!(b->comp_p[1] > 1.2 * a->comp_p[1]) || !(fit_disk_factor(0, a->disk_p[1], a->comp_p[1], a->m[1]) > 0))
        return -1;
    double lo = 0, hi = 1;
    if (over_b(0, a, b) >= 0) {
        /* c = 0: b is no slower than a full overlap */
    } else if (over_b(1, a, b) < 0) lo = 1;
    else
        for (int i = 0; i < 60; i++) {   /* over_b(lo) < 0 <= over_b(hi) */
            double mid = (lo + hi) / 2;
            *(over_b(mid, a, b) < 0 ? &lo : &hi) = mid;
        }
    *f = fit_disk_factor(lo, a->disk_p[1], a->comp_p[1], a->m[1]);   /* > 0: at lo = 0 checked above, else over_b(lo) < 0 */
    return *f > 0 ? lo : -1;
}

#define CALIB_ROUNDS 3       /* the default */
#define CALIB_MAX_ROUNDS 9

/* engine[k] = *fig = the median of v[0..n), clamped; nothing where n is 0
 * (*fig keeps the figure's default: no effect) */
static void set_fig(json_t *eng, const char *k, double *v, int n, double lo, double hi, double *fig) {
    if (n) json_object_set_new(eng, k, json_real(*fig = clamp(median(v, n), lo, hi)));
}

/* Write prof to path as the next run is to read it: without figures
 * key[f0..f1], the ones that run measures. */
static fg_status write_for_run(json_t *prof, const char *path, const char *const *key, int f0, int f1) {
    json_t *c = json_deep_copy(prof);
    if (!c) return fg_err_set(FG_ERUNTIME, "%s: out of memory", path);
    json_t *eng = json_object_get(c, "engine");
    for (int f = f0; f <= f1; f++) json_object_del(eng, key[f]);
    fg_status st = write_json(c, path);
    json_decref(c);
    return st;
}

/* The "engine" section of prof, measured against prof itself (written to
 * path before each run, without the figures that run measures). A model
 * too large for this host's memory at two layers is not run: no section. */
static fg_status calibrate(const fg_profile_opts *o, json_t *prof, const char *path) {
    fg_wsrc *ws = NULL;   /* the size's tensors (no weights are made) */
    fg_status st = fg_wsrc_open_dummy(o->model, 0, &ws);
    if (st) return st;
    const fg_opt_config c = *fg_wsrc_config(ws);
    fg_cost_case cs = {0};
    fg_cost_case_weights(&cs, &c, fg_wsrc_specs(ws));
    fg_wsrc_destroy(&ws);
    double layer = cs.layer_bytes, globals = cs.model_bytes;
    double ram = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    calib cb = {.o = o};
    /* the runs take K = 4 batches of B, as a block commonly has (a run's
     * one-off costs spread as in use), the cache runs too: what a CPU-tier
     * cache adds is the residual over the decode factor, so it is measured
     * at the shape that factor was (opt-1.3b here: 2 batches hid it, 4
     * added 1.7 ms a unit) */
    const int rounds = o->rounds ? o->rounds : o->quick ? 1 : CALIB_ROUNDS, K = 4, B = 8;
    /* the whole model where its weights fit twice (their host copy and the
     * device arena) in a quarter of this host's memory: per layer, a
     * 24-layer opt-1.3b decoded 30% slower than a 6-layer one here, the
     * larger arena's page walks; else as many layers as 1.5 GB holds, at
     * least 2 */
    int L = c.n_layers;
    if (2 * (L * layer + globals) > 0.25 * ram) {
        L = (int)(1.5e9 / layer);
        L = L < 2 ? 2 : L > c.n_layers ? c.n_layers : L;
    }
    if (2 * (L * layer + globals) > 0.4 * ram) {
        fg_info("profile: %s at %d layers needs %.1f GB of this host's %.1f GB: no engine calibration (the tiers' "
                "figures alone)", o->model, L, 2 * (L * layer + globals) / 1e9, ram / 1e9);
        return FG_OK;
    }
    if (L < c.n_layers) snprintf(cb.model, sizeof cb.model, "%s:%d", c.name, L);
    else snprintf(cb.model, sizeof cb.model, "%s", c.name);
    if (o->keep_runs) {
        snprintf(cb.dir, sizeof cb.dir, "%s", o->keep_runs);   /* made and checked with the options */
    } else {
        const char *tmpd = getenv("TMPDIR");
        snprintf(cb.dir, sizeof cb.dir, "%s/flexgen-calib.XXXXXX", tmpd && tmpd[0] ? tmpd : "/tmp");
        if (!mkdtemp(cb.dir))
            return fg_err_set(FG_ERUNTIME, "%s: cannot create a scratch directory: %s", cb.dir, strerror(errno));
    }
    static const char *const all_gpu[6] = {"100", "0", "100", "0", "100", "0"};
    static const char *const weights_cpu[6] = {"0", "100", "100", "0", "100", "0"};
    static const char *const weights_disk[6] = {"0", "0", "100", "0", "100", "0"};
    static const char *const cache_cpu[6] = {"100", "0", "0", "100", "100", "0"};
    const int shared = json_is_true(json_object_get(json_object_get(prof, "gpu"), "shares_host_cpu"));
    const int G = o->quick ? 4 : 16, Gd = G < 8 ? G : 8;   /* a disk-bound token is slow */
    const int disk = L == c.n_layers && L * layer + globals < (double)o->disk_test_bytes;
    enum { F_DEC, F_PRE, F_COPY, F_PCOPY, F_DISK, F_DC, F_CA, F_CL, F_COUNT };
    static const char *const key[F_COUNT] = {"decode_compute_factor", "prefill_compute_factor", "copy_factor",
                                             "prefill_copy_factor", "disk_factor", "disk_contention",
                                             "cpu_attn_unit_s", "cache_load_unit_s"};
    double v[F_COUNT][CALIB_MAX_ROUNDS];   /* each figure's value by round (n[f] of them) */
    double fig[F_COUNT] = {1, 1, 1, 1, 1, 0, 0, 0};   /* the figures (as fg_hw_load defaults those not measured) */
    int n[F_COUNT] = {0};
    calib_meas m, md;
    char tag[32];
    /* decode units per K x B run: (G - 1) tokens, K batches, L layers */
    const double units = (double)(G - 1) * K * L;
    json_t *eng = json_object();
    json_object_set_new(prof, "engine", eng);
    fg_info("profile: the engine itself, on %d layers of %s (%s%d runs)", L, c.name, disk ? "up to " : "",
            (disk ? 6 : 4) * rounds);
    /* round by round, each run against the profile without its own
     * figures (above) */
    for (int i = 0; i < rounds && !st; i++) {
        /* 1. the compute stream */
        snprintf(tag, sizeof tag, "gpu-%d", i);
        if ((st = write_for_run(prof, path, key, F_DEC, F_PRE)) ||
            (st = calib_run(&cb, path, tag, K, B, G, all_gpu, 0, &m)))
            break;
        v[F_DEC][n[F_DEC]++] = m.m[1] / m.p[1], v[F_PRE][n[F_PRE]++] = m.m[0] / m.p[0];
        for (int f = F_DEC; f <= F_PRE; f++) set_fig(eng, key[f], v[f], n[f], 0.5, 4, &fig[f]);
        /* 2. the copies, each phase: the time a run took beyond its
         * prediction, over the seconds it predicted for copies, where they
         * share the cores with the compute (the host backend); where copies
         * bound the phase, the whole ratio; where they overlap the compute on
         * an engine of their own (a GPU's) and do not bound it, nothing */
        snprintf(tag, sizeof tag, "copy-%d", i);
        if ((st = write_for_run(prof, path, key, F_COPY, F_PCOPY)) ||
            (st = calib_run(&cb, path, tag, 1, B, G, weights_cpu, 0, &m)))
            break;
        for (int ph = 0; ph < 2; ph++) {
            int f = ph ? F_COPY : F_PCOPY;
            if (m.copy_bound[ph]) v[f][n[f]++] = m.m[ph] / m.p[ph];
            else if (shared && m.copy_p[ph] > 0) v[f][n[f]++] = 1 + (m.m[ph] - m.p[ph]) / m.copy_p[ph];
        }
        for (int f = F_COPY; f <= F_PCOPY; f++) set_fig(eng, key[f], v[f], n[f], 0.5, 4, &fig[f]);
        /* 3. the disk (where its decode is disk-bound), twice: with little
         * compute beside the reads (1 batch), and with about as much as
         * the reads take (K batches); the pair gives the disk's factor and
         * how far the reads and the compute slow each other (fit_contention;
         * where the second run does not tell, the first's ratio alone) */
        if (disk) {
            snprintf(tag, sizeof tag, "disk-%d", i);
            if ((st = write_for_run(prof, path, key, F_DISK, F_DC)) ||
                (st = calib_run(&cb, path, tag, 1, B, Gd, weights_disk, 0, &m)))
                break;
            if (m.disk_bound[1]) {
                snprintf(tag, sizeof tag, "disk-compute-%d", i);
                if ((st = calib_run(&cb, path, tag, K, B, Gd, weights_disk, 0, &md))) break;
                double f = 0, dc = fit_contention(&m, &md, &f);
                if (dc >= 0) v[F_DISK][n[F_DISK]++] = f, v[F_DC][n[F_DC]++] = dc;
                else v[F_DISK][n[F_DISK]++] = m.m[1] / m.p[1];
            }
            set_fig(eng, key[F_DISK], v[F_DISK], n[F_DISK], 0.25, 4, &fig[F_DISK]);
            set_fig(eng, key[F_DC], v[F_DC], n[F_DC], 0, 1, &fig[F_DC]);
        }
        /* 4. a cache on the CPU tier, attended there and loaded from there:
         * one profile without both figures serves both runs */
        snprintf(tag, sizeof tag, "cpu-attn-%d", i);
        if ((st = write_for_run(prof, path, key, F_CA, F_CL)) ||
            (st = calib_run(&cb, path, tag, K, B, G, cache_cpu, 1, &m)))
            break;
        v[F_CA][n[F_CA]++] = m.m[1] > m.p[1] ? (m.m[1] - m.p[1]) / units : 0;
        snprintf(tag, sizeof tag, "cache-load-%d", i);
        if ((st = calib_run(&cb, path, tag, K, B, G, cache_cpu, 0, &m))) break;
        v[F_CL][n[F_CL]++] = m.m[1] > m.p[1] ? (m.m[1] - m.p[1]) / units : 0;
        for (int f = F_CA; f <= F_CL; f++) set_fig(eng, key[f], v[f], n[f], 0, 0.999, &fig[f]);
    }
    if (!st) {
        json_object_set_new(eng, "model", json_string(cb.model));
        json_object_set_new(eng, "rounds", json_integer(rounds));
        fg_info("profile: in the engine, decode compute takes %.2fx the tiers' figures, prefill compute %.2fx, a "
                "copy %.2fx in decode and %.2fx in prefill, a disk transfer %.2fx%s, and beside compute the disk "
                "and the compute each add %.2f of the other's seconds%s; a decode unit adds %.3f ms with CPU "
                "attention, %.3f ms with its cache loaded from the CPU (medians of %d runs)",
                fig[F_DEC], fig[F_PRE], fig[F_COPY], fig[F_PCOPY], fig[F_DISK],
                n[F_DISK] ? "" : disk ? " (not measured: the run was not disk-bound)"
                                      : " (the test file's rate: the store is larger, or only its first layers run)",
                fig[F_DC], n[F_DC] ? "" : " (not measured)", fig[F_CA] * 1e3, fig[F_CL] * 1e3, rounds);
    } else {
        json_object_del(prof, "engine");   /* a part-measured section is not kept */
    }
    if (!o->keep_runs) fg_remove_flat_dir(cb.dir);
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
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0, mkdirs(dir);
    /* the tiers' profile, at a scratch path the calibration runs read, then
     * with the engine's figures at path */
    char tiers[PATH_MAX + 16];
    snprintf(tiers, sizeof tiers, "%s.tiers", path);
    if (!st) st = calibrate(o, prof, tiers);
    unlink(tiers);
    if (!st) st = write_json(prof, path);
    json_decref(prof);
    return st;
}

static void usage(FILE *f) {
    fprintf(f,
        "usage: flexgen profile [--offload-dir DIR] [--device NAME] [--model NAME] [--out FILE]\n"
        "                       [--reprofile] [--disk-test-size SIZE] [--quick]\n\n"
        "Measures each tier with its worker alone (flexgen-{gpu,cpu,disk}-worker --profile) and the\n"
        "runtime's per-command cost, then runs the engine itself (flexgen run, 15 short runs; 5 with\n"
        "--quick) against those figures to learn what they miss, and writes one JSON profile for the\n"
        "policy's cost model. Run it on an otherwise idle machine: it measures speed.\n"
        "Without --out it is cached per machine, backend, offload filesystem and model size (the path\n"
        "is printed) and reused until --reprofile.\n\n"
        "  --offload-dir DIR       the disk tier to measure (default ./flexgen-offload)\n"
        "  --device NAME           the gpu worker's backend (default: as flexgen run picks)\n"
        "  --model NAME            OPT size whose shapes the GEMMs use (default opt-1.3b; flexgen run\n"
        "                          and policy measure the size nearest their model's)\n"
        "  --disk-test-size SIZE   the disk test file (default 8G: larger than the host's cache\n"
        "                          of a virtual disk is what a big model sees)\n"
        "  --rounds N              the engine calibration's rounds, each figure the median of N runs\n"
        "                          (1-%d; default %d, 1 with --quick)\n"
        "  --keep-runs DIR         keep the calibration runs' prompts, reports and logs in DIR (created)\n"
        "  --quick                 fewer repetitions, small buffers (tests; not for real use)\n",
        CALIB_MAX_ROUNDS, CALIB_ROUNDS);
}

int fg_cmd_profile(int argc, char **argv) {
    fg_profile_opts o = {.offload_dir = "flexgen-offload", .model = "opt-1.3b", .disk_test_bytes = 8ull << 30};
    const char *out = NULL;
    int reprofile = 0;
    enum { O_OFF = 256, O_DEV, O_MODEL, O_OUT, O_RE, O_SIZE, O_QUICK, O_ROUNDS, O_KEEP };
    static const struct option opts[] = {
        {"offload-dir", required_argument, 0, O_OFF}, {"device", required_argument, 0, O_DEV},
        {"model", required_argument, 0, O_MODEL},     {"out", required_argument, 0, O_OUT},
        {"reprofile", no_argument, 0, O_RE},          {"disk-test-size", required_argument, 0, O_SIZE},
        {"quick", no_argument, 0, O_QUICK},           {"help", no_argument, 0, 'h'},
        {"rounds", required_argument, 0, O_ROUNDS},   {"keep-runs", required_argument, 0, O_KEEP},
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
        case O_ROUNDS: st = fg_parse_int("--rounds", optarg, 1, CALIB_MAX_ROUNDS, &o.rounds); break;
        case O_KEEP: o.keep_runs = optarg; break;
        case 'h': usage(stdout); return 0;
        default:
            fprintf(stderr, "flexgen profile: unknown or incomplete option '%s'\n\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (!st && optind < argc) st = fg_err_set(FG_EINPUT, "flexgen profile: unexpected argument '%s'", argv[optind]);
    char keep[PATH_MAX];
    if (!st && o.keep_runs) {   /* before minutes of measuring, not after */
        snprintf(keep, sizeof keep, "%s", o.keep_runs);
        mkdirs(keep);
        struct stat sb;
        if (stat(keep, &sb) != 0 || !S_ISDIR(sb.st_mode) || access(keep, W_OK | X_OK) != 0)
            st = fg_err_set(FG_EINPUT, "--keep-runs %s: not a directory this user can write", o.keep_runs);
    }
    fg_opt_config cfg;
    if (!st) st = fg_config_by_name(o.model, &cfg);
    if (!o.device) o.device = fg_devsize_default();
    if (!st) st = fg_devsize_usable(o.device);
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

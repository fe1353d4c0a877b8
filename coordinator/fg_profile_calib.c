/* fg_profile_calib.c - the engine calibration of `flexgen profile`: the
 * engine itself run against the tiers' figures, recording what they miss
 * (the profile's "engine" section; fg_hw.h reads it). Measuring the tiers
 * and the profile file are fg_profile_tiers.c's.
 *
 * Each tier measured alone is not the whole story where the workers share
 * the host's cores: inside a run an op wakes beside the coordinator, the
 * copies and the other workers, a copy streams beside the compute it
 * overlaps, and a unit attended by the cpu worker waits on two relays.
 * So the calibration runs the engine itself (`flexgen run`, a child) on
 * the profiled size (or, where that does not fit this host twice over, its
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
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fg_cost.h"
#include "fg_profile_run.h"
#include "fg_weights.h"

typedef struct {
    const fg_profile_opts *o;
    char dir[PATH_MAX];       /* scratch: prompts, reports, logs */
    char model[sizeof ((fg_model_config *)0)->name + 16];   /* NAME:LAYERS */
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

/* engine[k] = *fig = the median of v[0..n), clamped; nothing where n is 0
 * (*fig keeps the figure's default: no effect) */
static void set_fig(json_t *eng, const char *k, double *v, int n, double lo, double hi, double *fig) {
    if (n) json_object_set_new(eng, k, json_real(*fig = clamp(fg_median(v, n), lo, hi)));
}

/* Write prof to path as the next run is to read it: without figures
 * key[f0..f1], the ones that run measures. */
static fg_status write_for_run(json_t *prof, const char *path, const char *const *key, int f0, int f1) {
    json_t *c = json_deep_copy(prof);
    if (!c) return fg_err_set(FG_ERUNTIME, "%s: out of memory", path);
    json_t *eng = json_object_get(c, "engine");
    for (int f = f0; f <= f1; f++) json_object_del(eng, key[f]);
    fg_status st = fg_profile_write_json(c, path);
    json_decref(c);
    return st;
}


/* The calibration's figures, in the order of their runs. */
enum { F_DEC, F_PRE, F_COPY, F_PCOPY, F_DISK, F_DC, F_CA, F_CL, F_COUNT };
static const char *const fig_key[F_COUNT] = {"decode_compute_factor", "prefill_compute_factor", "copy_factor",
                                              "prefill_copy_factor", "disk_factor", "disk_contention",
                                              "cpu_attn_unit_s", "cache_load_unit_s"};

/* The runs take K batches of B, as a block commonly has (a run's one-off
 * costs spread as in use), the cache runs too: what a CPU-tier cache adds
 * is the residual over the decode factor, so it is measured at the shape
 * that factor was. */
#define CALIB_K 4
#define CALIB_B 8
/* The whole model runs where its weights fit twice (host copy and device
 * arena) in this share of the host's memory (a larger arena's page walks
 * slow every layer: a model's own depth is what predicts it); else its
 * first layers, as many as CALIB_PART_BYTES hold, at least 2; not at all
 * past CALIB_MAX_RAM_SHARE. */
#define CALIB_WHOLE_RAM_SHARE 0.25
#define CALIB_PART_BYTES 1.5e9
#define CALIB_MAX_RAM_SHARE 0.4

/* What the calibration measures with, and what it has measured so far. */
typedef struct {
    calib cb;
    json_t *prof, *eng;
    const char *path;
    int L, G, Gd, disk, shared;
    double units;                           /* decode units per K x B run: (G - 1) tokens, K batches, L layers */
    double v[F_COUNT][CALIB_MAX_ROUNDS];    /* each figure's value by round (n[f] of them) */
    double fig[F_COUNT];                    /* the figures (as fg_hw_load defaults those not measured) */
    int n[F_COUNT];
} calib_state;

/* The layers to run and the scratch directory; *skip where the size does
 * not fit this host at two layers (no section). */
static fg_status calib_setup(const fg_profile_opts *o, calib_state *s, int *skip) {
    fg_wsrc *ws = NULL;   /* the size's tensors (no weights are made) */
    fg_status st = fg_wsrc_open_dummy(o->model, 0, &ws);
    if (st) return st;
    const fg_model_config c = *fg_wsrc_config(ws);
    fg_cost_case cs = {0};
    fg_cost_case_weights(&cs, &c, fg_wsrc_specs(ws));
    fg_wsrc_destroy(&ws);
    double layer = cs.layer_bytes, globals = cs.model_bytes;
    double ram = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    int L = c.n_layers;
    if (2 * (L * layer + globals) > CALIB_WHOLE_RAM_SHARE * ram) {
        L = (int)(CALIB_PART_BYTES / layer);
        L = L < 2 ? 2 : L > c.n_layers ? c.n_layers : L;
    }
    *skip = 2 * (L * layer + globals) > CALIB_MAX_RAM_SHARE * ram;
    if (*skip) {
        fg_info("profile: %s at %d layers needs %.1f GB of this host's %.1f GB: no engine calibration (the tiers' "
                "figures alone)", o->model, L, 2 * (L * layer + globals) / 1e9, ram / 1e9);
        return FG_OK;
    }
    s->L = L;
    if (L < c.n_layers) snprintf(s->cb.model, sizeof s->cb.model, "%s:%d", c.name, L);
    else snprintf(s->cb.model, sizeof s->cb.model, "%s", c.name);
    s->G = o->quick ? 4 : 16, s->Gd = s->G < 8 ? s->G : 8;   /* a disk-bound token is slow */
    s->disk = L == c.n_layers && L * layer + globals < (double)o->disk_test_bytes;
    s->units = (double)(s->G - 1) * CALIB_K * L;
    if (o->keep_runs) {
        snprintf(s->cb.dir, sizeof s->cb.dir, "%s", o->keep_runs);   /* made and checked with the options */
    } else {
        const char *tmpd = getenv("TMPDIR");
        snprintf(s->cb.dir, sizeof s->cb.dir, "%s/flexgen-calib.XXXXXX", tmpd && tmpd[0] ? tmpd : "/tmp");
        if (!mkdtemp(s->cb.dir))
            return fg_err_set(FG_ERUNTIME, "%s: cannot create a scratch directory: %s", s->cb.dir, strerror(errno));
    }
    return FG_OK;
}

static void calib_set(calib_state *s, int f, double lo, double hi) {
    set_fig(s->eng, fig_key[f], s->v[f], s->n[f], lo, hi, &s->fig[f]);
}

/* One more measured value x of figure f. */
static void calib_add(calib_state *s, int f, double x) { s->v[f][s->n[f]++] = x; }

/* calib_run of K batches of CALIB_B, G tokens, named NAME-I in the scratch
 * directory. */
static fg_status calib_named(calib_state *s, const char *name, int i, int K, int G, const char *const percent[6],
                             int ca, calib_meas *m) {
    char tag[32];
    snprintf(tag, sizeof tag, "%s-%d", name, i);
    return calib_run(&s->cb, s->path, tag, K, CALIB_B, G, percent, ca, m);
}

/* 1. the compute stream; 2. the copies, each phase: the time a run took
 * beyond its prediction, over the seconds it predicted for copies, where
 * they share the cores with the compute (the host backend); where copies
 * bound the phase, the whole ratio; where they overlap the compute on an
 * engine of their own (a GPU's) and do not bound it, nothing. */
static fg_status calib_compute_copy(calib_state *s, int i) {
    static const char *const all_gpu[6] = {"100", "0", "100", "0", "100", "0"};
    static const char *const weights_cpu[6] = {"0", "100", "100", "0", "100", "0"};
    calib_meas m;
    fg_status st;
    if ((st = write_for_run(s->prof, s->path, fig_key, F_DEC, F_PRE)) ||
        (st = calib_named(s, "gpu", i, CALIB_K, s->G, all_gpu, 0, &m)))
        return st;
    calib_add(s, F_DEC, m.m[1] / m.p[1]);
    calib_add(s, F_PRE, m.m[0] / m.p[0]);
    for (int f = F_DEC; f <= F_PRE; f++) calib_set(s, f, 0.5, 4);
    if ((st = write_for_run(s->prof, s->path, fig_key, F_COPY, F_PCOPY)) ||
        (st = calib_named(s, "copy", i, 1, s->G, weights_cpu, 0, &m)))
        return st;
    for (int ph = 0; ph < 2; ph++) {
        int f = ph ? F_COPY : F_PCOPY;
        if (m.copy_bound[ph]) calib_add(s, f, m.m[ph] / m.p[ph]);
        else if (s->shared && m.copy_p[ph] > 0) calib_add(s, f, 1 + (m.m[ph] - m.p[ph]) / m.copy_p[ph]);
    }
    for (int f = F_COPY; f <= F_PCOPY; f++) calib_set(s, f, 0.5, 4);
    return FG_OK;
}

/* 3. the disk (where its decode is disk-bound), twice: with little compute
 * beside the reads (1 batch), and with about as much as the reads take (K
 * batches); the pair gives the disk's factor and how far the reads and the
 * compute slow each other (fit_contention; where the second run does not
 * tell, the first's ratio alone). */
static fg_status calib_disk(calib_state *s, int i) {
    static const char *const weights_disk[6] = {"0", "0", "100", "0", "100", "0"};
    calib_meas m, md;
    fg_status st;
    if ((st = write_for_run(s->prof, s->path, fig_key, F_DISK, F_DC)) ||
        (st = calib_named(s, "disk", i, 1, s->Gd, weights_disk, 0, &m)))
        return st;
    if (m.disk_bound[1]) {
        if ((st = calib_named(s, "disk-compute", i, CALIB_K, s->Gd, weights_disk, 0, &md))) return st;
        double f = 0, dc = fit_contention(&m, &md, &f);
        if (dc >= 0) calib_add(s, F_DISK, f), calib_add(s, F_DC, dc);
        else calib_add(s, F_DISK, m.m[1] / m.p[1]);
    }
    calib_set(s, F_DISK, 0.25, 4);
    calib_set(s, F_DC, 0, 1);
    return FG_OK;
}

/* 4. a cache on the CPU tier, attended there and loaded from there: one
 * profile without both figures serves both runs. */
static fg_status calib_cache(calib_state *s, int i) {
    static const char *const cache_cpu[6] = {"100", "0", "0", "100", "100", "0"};
    calib_meas m;
    fg_status st;
    if ((st = write_for_run(s->prof, s->path, fig_key, F_CA, F_CL)) ||
        (st = calib_named(s, "cpu-attn", i, CALIB_K, s->G, cache_cpu, 1, &m)))
        return st;
    calib_add(s, F_CA, m.m[1] > m.p[1] ? (m.m[1] - m.p[1]) / s->units : 0);
    if ((st = calib_named(s, "cache-load", i, CALIB_K, s->G, cache_cpu, 0, &m))) return st;
    calib_add(s, F_CL, m.m[1] > m.p[1] ? (m.m[1] - m.p[1]) / s->units : 0);
    for (int f = F_CA; f <= F_CL; f++) calib_set(s, f, 0, 0.999);
    return FG_OK;
}

static void calib_log(const calib_state *s, int rounds) {
    const double *fig = s->fig;
    fg_info("profile: in the engine, decode compute takes %.2fx the tiers' figures, prefill compute %.2fx, a "
            "copy %.2fx in decode and %.2fx in prefill, a disk transfer %.2fx%s, and beside compute the disk "
            "and the compute each add %.2f of the other's seconds%s; a decode unit adds %.3f ms with CPU "
            "attention, %.3f ms with its cache loaded from the CPU (medians of %d runs)",
            fig[F_DEC], fig[F_PRE], fig[F_COPY], fig[F_PCOPY], fig[F_DISK],
            s->n[F_DISK] ? "" : s->disk ? " (not measured: the run was not disk-bound)"
                                        : " (the test file's rate: the store is larger, or only its first layers run)",
            fig[F_DC], s->n[F_DC] ? "" : " (not measured)", fig[F_CA] * 1e3, fig[F_CL] * 1e3, rounds);
}

fg_status fg_profile_calibrate(const fg_profile_opts *o, json_t *prof, const char *path) {
    calib_state s = {.cb = {.o = o}, .prof = prof, .path = path, .fig = {1, 1, 1, 1, 1, 0, 0, 0}};
    int skip = 0;
    fg_status st = calib_setup(o, &s, &skip);
    if (st || skip) return st;
    const int rounds = o->rounds ? o->rounds : o->quick ? 1 : CALIB_ROUNDS;
    s.shared = json_is_true(json_object_get(json_object_get(prof, "gpu"), "shares_host_cpu"));
    s.eng = json_object();
    json_object_set_new(prof, "engine", s.eng);
    fg_info("profile: the engine itself, on %d layers of %s (%s%d runs)", s.L, o->model, s.disk ? "up to " : "",
            (s.disk ? 6 : 4) * rounds);
    /* round by round, each run against the profile without its own figures */
    for (int i = 0; i < rounds && !st; i++)
        if (!(st = calib_compute_copy(&s, i)) && (!s.disk || !(st = calib_disk(&s, i)))) st = calib_cache(&s, i);
    if (!st) {
        json_object_set_new(s.eng, "model", json_string(s.cb.model));
        json_object_set_new(s.eng, "rounds", json_integer(rounds));
        calib_log(&s, rounds);
    } else {
        json_object_del(prof, "engine");   /* a part-measured section is not kept */
    }
    if (!o->keep_runs) fg_remove_flat_dir(s.cb.dir);
    return st;
}

/* rt_kill.c - the kill tests.
 *
 * kill: a workload of deterministic commands (COPY, the AXPY test op on the
 * gpu and cpu workers, DISK_WRITE then DISK_READ on the disk worker) reads
 * inputs in shm and writes outputs in shm. Each round SIGKILLs one worker
 * mid-run, after freezing it with SIGSTOP and sending it more commands, so
 * that commands it surely has not run are in flight (the last round leaves
 * the gpu worker frozen, so only the heartbeat can tell). The supervisor
 * must restart it,
 * call the restore hook, re-issue what was in flight, and every output must
 * be exactly what the round's inputs give. After destroy no segment and no
 * run dir of the run may remain. Before the rounds, the coordinator stays
 * away from its socket for longer than the liveness window and must not
 * declare anyone dead for its own silence.
 *
 * coordkill: the same workload in a child coordinator ("victim"), killed
 * mid-run. SIGTERM and SIGINT: it must clean up on its way out (workers,
 * segments, run dir). SIGKILL: its workers must go (death signal), its
 * segments and run dir stay behind, and the next run's fg_super_new must
 * sweep them. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rt_test.h"

#define N 512                  /* commands of each kind per round */
#define B (32 * 1024)          /* bytes per buffer: 8192 floats */
#define ROUND_TIMEOUT_MS 60000

enum { K_GCOPY, K_GAXPY, K_CCOPY, K_CAXPY, K_DWRITE, K_DREAD, K_STATE, NKINDS };
static const char *const kind_names[NKINDS] = {"gcopy", "gaxpy", "ccopy", "caxpy",
                                               "dwrite", "dread", "state"};
static const fg_role kind_role[NKINDS] = {FG_ROLE_GPU, FG_ROLE_GPU, FG_ROLE_CPU, FG_ROLE_CPU,
                                          FG_ROLE_DISK, FG_ROLE_DISK, FG_ROLE_GPU};

typedef struct {
    fg_super *sup;
    uint32_t seg_in, seg_out;
    fg_shm_handle x[N], y[N], out[NKINDS][N];  /* out[K_DWRITE] unused */
    int round;
    float alpha;
    /* per round */
    size_t submitted[FG_NROLES], completed[FG_NROLES];
    size_t total_left;
    int restore_calls[FG_NROLES];
} workload;

static void *P(workload *w, fg_shm_handle h) {
    void *p = fg_super_ptr(w->sup, h);
    FG_ASSERT(p);
    return p;
}

/* Exact in fp32: small integers and halves, so the worker's arithmetic and
 * ours agree to the bit. */
static float xval(int i, int j) { return (float)((i * 7 + j) % 1000); }
static float yval(int i, int j) { return (float)((i + j * 3) % 977); }

static void setup(workload *w) {
    static char names[2 * N + NKINDS * N][16];
    static fg_shm_region rin[2 * N], rout[NKINDS * N];
    for (int i = 0; i < N; i++) {
        snprintf(names[2 * i], 16, "x%d", i);
        snprintf(names[2 * i + 1], 16, "y%d", i);
        rin[2 * i] = (fg_shm_region){names[2 * i], B, 0};
        rin[2 * i + 1] = (fg_shm_region){names[2 * i + 1], B, 0};
    }
    for (int k = 0; k < NKINDS; k++)
        for (int i = 0; i < N; i++) {
            char *nm = names[2 * N + k * N + i];
            snprintf(nm, 16, "%s%d", kind_names[k], i);
            rout[k * N + i] = (fg_shm_region){nm, B, 0};
        }
    uint64_t in_bytes, out_bytes;
    RT_MUST(fg_shm_layout(rin, 2 * N, &in_bytes));
    RT_MUST(fg_shm_layout(rout, NKINDS * N, &out_bytes));
    RT_MUST(fg_super_segment_new(w->sup, "in", in_bytes, &w->seg_in));
    RT_MUST(fg_super_segment_new(w->sup, "out", out_bytes, &w->seg_out));
    for (int i = 0; i < N; i++) {
        w->x[i] = fg_shm_layout_handle(rin, 2 * N, w->seg_in, names[2 * i]);
        w->y[i] = fg_shm_layout_handle(rin, 2 * N, w->seg_in, names[2 * i + 1]);
        float *x = P(w, w->x[i]), *y = P(w, w->y[i]);
        for (int j = 0; j < B / 4; j++) {
            x[j] = xval(i, j);
            y[j] = yval(i, j);
        }
        for (int k = 0; k < NKINDS; k++)
            w->out[k][i] = fg_shm_layout_handle(rout, NKINDS * N, w->seg_out,
                                                names[2 * N + k * N + i]);
    }
}

static void *tag(int kind, int i) { return (void *)(uintptr_t)((uintptr_t)kind << 32 | (uint32_t)i); }

static void submit(workload *w, int kind, int i) {
    fg_msg m;
    fg_shm_handle disk_src = w->round % 2 ? w->y[i] : w->x[i];
    switch (kind) {
    case K_GCOPY:
    case K_CCOPY:
    case K_STATE:
        fg_msg_init(&m, FG_MSG_COPY);
        fg_msg_copy_add(&m, kind == K_CCOPY ? w->y[i] : w->x[i], w->out[kind][i]);
        break;
    case K_GAXPY:
    case K_CAXPY:
        fg_msg_init(&m, kind == K_GAXPY ? FG_MSG_COMPUTE : FG_MSG_CPU_ATTN);
        m.u.compute.op = FG_OP_AXPY;
        m.u.compute.layer = (uint32_t)i;
        fg_msg_compute_add_in(&m, kind == K_GAXPY ? w->x[i] : w->y[i]);
        fg_msg_compute_add_in(&m, kind == K_GAXPY ? w->y[i] : w->x[i]);
        fg_msg_compute_add_out(&m, w->out[kind][i]);
        fg_msg_compute_set_params(&m, &w->alpha, sizeof w->alpha);
        break;
    case K_DWRITE:
    case K_DREAD:
        fg_msg_init(&m, kind == K_DWRITE ? FG_MSG_DISK_WRITE : FG_MSG_DISK_READ);
        snprintf(m.u.disk.path, sizeof m.u.disk.path, "d%d", i);
        m.u.disk.file_offset = (uint64_t)(i % 4) * B;
        m.u.disk.buf = kind == K_DWRITE ? disk_src : w->out[K_DREAD][i];
        break;
    }
    fg_role role = kind_role[kind];
    RT_MUST(fg_super_submit(w->sup, role, &m, tag(kind, i), NULL));
    w->submitted[role]++;
    w->total_left++;
}

static void on_done(void *ctx, const fg_super_done *d) {
    workload *w = ctx;
    int kind = (int)((uintptr_t)d->user >> 32), i = (int)((uintptr_t)d->user & 0xffffffffu);
    RT_CHECK(d->status == 0, "%s %d failed: %s", kind_names[kind], i, d->error);
    w->completed[d->role]++;
    w->total_left--;
    if (kind == K_DWRITE && d->status == 0) submit(w, K_DREAD, i);  /* read what was written */
}

/* The engine's part in a restart: put back what lived only in the dead
 * worker. Here: one COPY standing for "reload the GPU-resident weights". */
static fg_status restore(fg_super *sup, fg_role role, void *ctx) {
    workload *w = ctx;
    w->restore_calls[role]++;
    if (role == FG_ROLE_GPU) {
        fg_msg m;
        fg_msg_init(&m, FG_MSG_COPY);
        fg_msg_copy_add(&m, w->x[0], w->out[K_STATE][0]);
        w->submitted[role]++;
        w->total_left++;
        return fg_super_submit(sup, role, &m, tag(K_STATE, 0), NULL);
    }
    return FG_OK;
}

static void start_round(workload *w, int round) {
    w->round = round;
    w->alpha = 0.5f + (float)round;
    memset(w->submitted, 0, sizeof w->submitted);
    memset(w->completed, 0, sizeof w->completed);
    for (int k = 0; k < NKINDS; k++)
        if (k != K_STATE)
            for (int i = 0; i < N; i++) memset(P(w, w->out[k][i]), 0xAA, B);
    for (int i = 0; i < N; i++) {
        submit(w, K_GCOPY, i);
        submit(w, K_GAXPY, i);
        submit(w, K_CCOPY, i);
        submit(w, K_CAXPY, i);
        submit(w, K_DWRITE, i);
    }
}

static int verify_round(workload *w) {
    int bad = 0;
    for (int i = 0; i < N && bad < 5; i++) {
        const float *gc = P(w, w->out[K_GCOPY][i]), *ga = P(w, w->out[K_GAXPY][i]);
        const float *cc = P(w, w->out[K_CCOPY][i]), *ca = P(w, w->out[K_CAXPY][i]);
        const float *dr = P(w, w->out[K_DREAD][i]);
        for (int j = 0; j < B / 4; j++) {
            float x = xval(i, j), y = yval(i, j);
            float want[5] = {x, w->alpha * x + y, y, w->alpha * y + x, w->round % 2 ? y : x};
            float got[5] = {gc[j], ga[j], cc[j], ca[j], dr[j]};
            for (int k = 0; k < 5; k++)
                if (got[k] != want[k]) {
                    RT_CHECK(0, "round %d: output %d of command %d, element %d: %g, want %g",
                             w->round, k, i, j, (double)got[k], (double)want[k]);
                    bad++;
                    break;
                }
            if (bad) break;
        }
    }
    return bad == 0;
}

/* The victim's share of the round, once more. */
static void resend(workload *w, fg_role victim) {
    for (int i = 0; i < N; i++)
        for (int k = 0; k < NKINDS; k++)
            if (kind_role[k] == victim && k != K_DREAD && k != K_STATE) submit(w, k, i);
}

/* Run the round's commands to completion; once the victim has answered at
 * least one, send it `sig`. Returns what it owed then. */
static size_t run_round(workload *w, fg_role victim, int sig) {
    size_t owed_at_kill = 0;
    int sent = 0;
    uint64_t start = (uint64_t)(fg_now() * 1000);
    while (w->total_left) {
        int n = fg_super_poll(w->sup, 1000, on_done, w);
        RT_CHECK(n >= 0, "poll: %s", fg_err_msg());
        if (n < 0) break;
        if (!sent && w->completed[victim] > 0) {
            /* Mid-run: freeze it, so that what it has done is done, then give
             * it the same (idempotent) commands again, which it surely has
             * not run, and only then kill it, or leave it frozen for the
             * heartbeat to find. */
            pid_t pid = fg_super_worker_pid(w->sup, victim);
            RT_CHECK(pid > 0, "no %s worker pid", fg_role_name(victim));
            if (pid > 0) kill(pid, SIGSTOP);
            resend(w, victim);
            owed_at_kill = w->submitted[victim] - w->completed[victim];
            if (pid > 0 && sig != SIGSTOP) kill(pid, sig);
            sent = 1;
        }
        if ((uint64_t)(fg_now() * 1000) - start > ROUND_TIMEOUT_MS) {
            RT_CHECK(0, "round %d: %zu command(s) still open after %d ms", w->round,
                     w->total_left, ROUND_TIMEOUT_MS);
            break;
        }
    }
    return owed_at_kill;
}

/* Commands a worker cannot run come back as ERROR with a reason, and the
 * worker carries on. */
static void bad_commands(workload *w) {
    struct {
        fg_role role;
        fg_msg m;
        int32_t code;
        const char *says;
    } cases[6];
    int n = 0;
    fg_shm_handle past = w->x[N - 1];
    past.offset += (uint64_t)B * 4;  /* beyond the segment */
    fg_shm_handle half = w->x[0];
    half.nbytes /= 2;

    fg_msg_init(&cases[n].m, FG_MSG_COMPUTE);
    cases[n].m.u.compute.op = 999;
    cases[n].role = FG_ROLE_GPU, cases[n].code = FG_MSG_EUNSUPPORTED;
    cases[n++].says = "unknown op 999";
    fg_msg_init(&cases[n].m, FG_MSG_CPU_ATTN);
    cases[n].m.u.compute.op = 12345;
    cases[n].role = FG_ROLE_CPU, cases[n].code = FG_MSG_EUNSUPPORTED;
    cases[n++].says = "unknown op 12345";
    fg_msg_init(&cases[n].m, FG_MSG_DISK_READ);
    cases[n].m.u.disk.buf = w->x[0];
    cases[n].role = FG_ROLE_GPU, cases[n].code = FG_MSG_EUNSUPPORTED;
    cases[n++].says = "does not handle DISK_READ";
    fg_msg_init(&cases[n].m, FG_MSG_COPY);
    fg_msg_copy_add(&cases[n].m, past, w->out[K_GCOPY][0]);
    cases[n].role = FG_ROLE_GPU, cases[n].code = FG_MSG_EBADCMD;
    cases[n++].says = "leaves the data area";
    fg_msg_init(&cases[n].m, FG_MSG_COPY);
    fg_msg_copy_add(&cases[n].m, half, w->out[K_CCOPY][0]);
    cases[n].role = FG_ROLE_CPU, cases[n].code = FG_MSG_EBADCMD;
    cases[n++].says = "destination";
    fg_msg_init(&cases[n].m, FG_MSG_DISK_READ);
    snprintf(cases[n].m.u.disk.path, sizeof cases[n].m.u.disk.path, "no-such-file");
    cases[n].m.u.disk.buf = w->out[K_DREAD][0];
    cases[n].role = FG_ROLE_DISK, cases[n].code = FG_MSG_EIO;
    cases[n++].says = "no-such-file: cannot open";

    for (int i = 0; i < n; i++) {
        uint64_t seq;
        fg_super_done d;
        RT_MUST(fg_super_submit(w->sup, cases[i].role, &cases[i].m, NULL, &seq));
        fg_status st = fg_super_wait(w->sup, seq, 30000, &d);
        RT_CHECK(st == FG_ERUNTIME && d.status == cases[i].code && strstr(d.error, cases[i].says),
                 "bad command %d: status %d (want %d), error '%s' (want '%s')", i, d.status,
                 cases[i].code, d.error, cases[i].says);
    }
    fg_super_stats st;
    fg_super_get_stats(w->sup, &st);
    RT_CHECK(st.deaths[0] + st.deaths[1] + st.deaths[2] == 0, "a bad command killed a worker");
    fprintf(stderr, "kill: %d malformed commands answered with ERROR, workers alive\n", n);
}

static void make_opts(fg_super_opts *o, const char *offload) {
    memset(o, 0, sizeof *o);
    for (int r = 0; r < FG_NROLES; r++) o->worker_path[r] = rt_worker[r];
    o->offload_dir = offload;
}

int rt_test_kill(void) {
    char offload[] = "/tmp/fg-rt-kill-XXXXXX";
    RT_CHECK(mkdtemp(offload) != NULL, "mkdtemp");
    static workload w;
    fg_super_opts o;
    make_opts(&o, offload);
    o.restore = restore;
    o.restore_ctx = &w;
    double t0 = fg_now();
    RT_MUST(fg_super_new(&o, &w.sup));
    fprintf(stderr, "kill: workers ready in %.0f ms, run %s\n", (fg_now() - t0) * 1e3,
            fg_super_run_id(w.sup));
    setup(&w);
    char run_id[FG_SHM_RUNID_LEN + 1], run_dir[RT_PATH_MAX];
    snprintf(run_id, sizeof run_id, "%s", fg_super_run_id(w.sup));
    snprintf(run_dir, sizeof run_dir, "%s", fg_super_run_dir(w.sup));
    RT_CHECK(rt_count_shm(run_id) == 2 && rt_dir_exists(run_dir), "segments/run dir missing");

    bad_commands(&w);

    /* a coordinator that does not poll for longer than the liveness window
     * (busy with something else) must still find its workers alive: their
     * heartbeats wait in its socket */
    usleep((FG_HB_LIVENESS + 1) * FG_HB_INTERVAL_MS * 1000);
    fg_super_poll(w.sup, 0, NULL, NULL);
    fg_super_stats sb;
    fg_super_get_stats(w.sup, &sb);
    RT_CHECK(sb.deaths[0] + sb.deaths[1] + sb.deaths[2] == 0,
             "workers declared dead after the coordinator was busy for %d ms",
             (FG_HB_LIVENESS + 1) * FG_HB_INTERVAL_MS);

    struct { fg_role victim; int sig; } rounds[] = {
        {FG_ROLE_GPU, SIGKILL}, {FG_ROLE_CPU, SIGKILL}, {FG_ROLE_DISK, SIGKILL},
        {FG_ROLE_GPU, SIGSTOP},
    };
    pid_t old_pids[FG_NROLES];
    for (size_t r = 0; r < sizeof rounds / sizeof rounds[0]; r++) {
        fg_super_stats s0, s1;
        fg_super_get_stats(w.sup, &s0);
        fg_role v = rounds[r].victim;
        for (int k = 0; k < FG_NROLES; k++) old_pids[k] = fg_super_worker_pid(w.sup, (fg_role)k);
        if (r == 0) memset(P(&w, w.out[K_STATE][0]), 0, B);
        double ts = fg_now();
        start_round(&w, (int)r);
        size_t owed = run_round(&w, v, rounds[r].sig);
        double dt = fg_now() - ts;
        fg_super_get_stats(w.sup, &s1);
        int ok = verify_round(&w);
        fprintf(stderr, "kill: round %zu: %s of the %s worker with %zu of its commands "
                "unanswered; %llu re-issued; %zu commands in %.2f s; outputs %s\n", r,
                rounds[r].sig == SIGKILL ? "SIGKILL" : "SIGSTOP", fg_role_name(v), owed,
                (unsigned long long)(s1.reissued - s0.reissued),
                w.submitted[0] + w.submitted[1] + w.submitted[2], dt, ok ? "exact" : "WRONG");
        RT_CHECK(owed > 0, "round %zu: the %s worker owed nothing when signalled", r,
                 fg_role_name(v));
        RT_CHECK(s1.deaths[v] == s0.deaths[v] + 1 && s1.restarts[v] == s0.restarts[v] + 1,
                 "round %zu: deaths %u->%u restarts %u->%u", r, s0.deaths[v], s1.deaths[v],
                 s0.restarts[v], s1.restarts[v]);
        RT_CHECK(s1.reissued > s0.reissued, "round %zu: nothing re-issued", r);
        RT_CHECK(s1.failed == s0.failed, "round %zu: %llu failed", r,
                 (unsigned long long)(s1.failed - s0.failed));
        pid_t np = fg_super_worker_pid(w.sup, v);
        RT_CHECK(np > 0 && np != old_pids[v], "round %zu: %s worker pid %d -> %d", r,
                 fg_role_name(v), (int)old_pids[v], (int)np);
        RT_CHECK(rt_wait_gone(old_pids[v], 10000) == 0, "old %s worker %d still alive",
                 fg_role_name(v), (int)old_pids[v]);
        for (int k = 0; k < FG_NROLES; k++)
            if (k != (int)v)
                RT_CHECK(fg_super_worker_pid(w.sup, (fg_role)k) == old_pids[k],
                         "round %zu: the %s worker was restarted too", r, fg_role_name(k));
    }
    RT_CHECK(w.restore_calls[FG_ROLE_GPU] == 2 && w.restore_calls[FG_ROLE_CPU] == 1 &&
             w.restore_calls[FG_ROLE_DISK] == 1, "restore calls %d %d %d",
             w.restore_calls[0], w.restore_calls[1], w.restore_calls[2]);
    RT_CHECK(!memcmp(P(&w, w.out[K_STATE][0]), P(&w, w.x[0]), B), "restored state differs");

    pid_t last[FG_NROLES];
    for (int k = 0; k < FG_NROLES; k++) last[k] = fg_super_worker_pid(w.sup, (fg_role)k);
    fg_super_destroy(&w.sup);
    for (int k = 0; k < FG_NROLES; k++)
        RT_CHECK(rt_wait_gone(last[k], 10000) == 0, "%s worker outlived destroy", fg_role_name(k));
    RT_CHECK(rt_count_shm(run_id) == 0, "%d segment(s) of run %s left", rt_count_shm(run_id),
             run_id);
    RT_CHECK(!rt_dir_exists(run_dir), "run dir %s left", run_dir);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", offload);
    RT_CHECK(system(cmd) == 0, "rm offload dir");
    return 0;
}

/* ---- coordinator killed ----------------------------------------------- */

static void victim_done(void *ctx, const fg_super_done *d) {
    workload *w = ctx;
    int kind = (int)((uintptr_t)d->user >> 32), i = (int)((uintptr_t)d->user & 0xffffffffu);
    w->completed[d->role]++;
    w->total_left--;
    if (kind == K_DWRITE) submit(w, K_DREAD, i);
}

int rt_test_victim(void) {
    char offload[] = "/tmp/fg-rt-victim-XXXXXX";
    if (!mkdtemp(offload)) return 1;
    static workload w;
    fg_super_opts o;
    make_opts(&o, offload);
    RT_MUST(fg_super_new(&o, &w.sup));
    setup(&w);
    printf("RUN %s %s %s %d %d %d\n", fg_super_run_id(w.sup), fg_super_run_dir(w.sup), offload,
           (int)fg_super_worker_pid(w.sup, FG_ROLE_GPU), (int)fg_super_worker_pid(w.sup, FG_ROLE_CPU),
           (int)fg_super_worker_pid(w.sup, FG_ROLE_DISK));
    fflush(stdout);
    int said_busy = 0;
    for (int round = 0;; round++) {  /* until SIGKILLed */
        start_round(&w, round);
        while (w.total_left) {
            fg_super_poll(w.sup, 1000, victim_done, &w);
            if (!said_busy && w.completed[0] + w.completed[1] + w.completed[2] > 100) {
                printf("BUSY\n");
                fflush(stdout);
                said_busy = 1;
            }
        }
    }
}

/* Read one line from fd within timeout_ms. */
static int read_line(int fd, char *buf, size_t cap, int timeout_ms) {
    size_t n = 0;
    uint64_t deadline = (uint64_t)(fg_now() * 1000) + (uint64_t)timeout_ms;
    while (n + 1 < cap) {
        uint64_t t = (uint64_t)(fg_now() * 1000);
        if (t >= deadline) return -1;
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, (int)(deadline - t)) <= 0) return -1;
        if (read(fd, buf + n, 1) != 1) return -1;
        if (buf[n] == '\n') break;
        n++;
    }
    buf[n] = 0;
    return 0;
}

/* Start a victim coordinator, wait until it is busy, send it `sig`. Fills
 * in what it reported; returns 0 if it died by that signal. */
typedef struct {
    char run_id[64], run_dir[RT_PATH_MAX], offload[RT_PATH_MAX];
    int pids[FG_NROLES];
} victim_info;

static int kill_victim(const char *self, int sig, victim_info *v) {
    memset(v, 0, sizeof *v);
    int pfd[2];
    RT_CHECK(pipe(pfd) == 0, "pipe");
    pid_t child = fork();
    if (child == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]);
        close(pfd[1]);
        signal(SIGINT, SIG_DFL);  /* a background shell may have ignored them */
        signal(SIGTERM, SIG_DFL);
        execl(self, self, "victim", "--workers", rt_worker[0], rt_worker[1], rt_worker[2],
              (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    char line[2048] = "";
    RT_CHECK(read_line(pfd[0], line, sizeof line, 60000) == 0 &&
             sscanf(line, "RUN %63s %511s %511s %d %d %d", v->run_id, v->run_dir, v->offload,
                    &v->pids[0], &v->pids[1], &v->pids[2]) == 6,
             "victim did not start: '%s'", line);
    RT_CHECK(read_line(pfd[0], line, sizeof line, 60000) == 0 && !strcmp(line, "BUSY"),
             "victim not busy: '%s'", line);
    kill(child, sig);
    int ws = 0;
    waitpid(child, &ws, 0);
    close(pfd[0]);
    RT_CHECK(WIFSIGNALED(ws) && WTERMSIG(ws) == sig, "victim did not die by signal %d "
             "(status 0x%x)", sig, ws);
    fprintf(stderr, "coordkill: coordinator of run %s got %s mid-run\n", v->run_id,
            strsignal(sig));
    /* its workers follow it: death signal (SIGKILL) or its cleanup (others) */
    for (int r = 0; r < FG_NROLES; r++)
        RT_CHECK(v->pids[r] > 0 && rt_wait_gone(v->pids[r], 10000) == 0,
                 "the victim's %s worker (pid %d) outlived it", fg_role_name(r), v->pids[r]);
    return 0;
}

static void remove_offload(const victim_info *v) {
    char cmd[RT_PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", v->offload);
    RT_CHECK(v->offload[0] && system(cmd) == 0, "rm %s", v->offload);
}

int rt_test_coordkill(const char *self) {
    /* orphaned workers are re-parented to us, so we can watch them die */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    victim_info v;

    /* SIGTERM and SIGINT: the coordinator cleans up on its way out */
    int sigs[] = {SIGTERM, SIGINT};
    for (int i = 0; i < 2; i++) {
        kill_victim(self, sigs[i], &v);
        RT_CHECK(rt_count_shm(v.run_id) == 0, "%s left %d segment(s)", strsignal(sigs[i]),
                 rt_count_shm(v.run_id));
        RT_CHECK(!rt_dir_exists(v.run_dir), "%s left run dir %s", strsignal(sigs[i]), v.run_dir);
        fprintf(stderr, "coordkill: nothing left behind after %s\n", strsignal(sigs[i]));
        remove_offload(&v);
    }

    /* SIGKILL: no chance to clean up; the next run sweeps */
    kill_victim(self, SIGKILL, &v);
    int left = rt_count_shm(v.run_id);
    RT_CHECK(left == 2, "expected the victim's 2 segments left behind, found %d", left);
    RT_CHECK(rt_dir_exists(v.run_dir), "expected the victim's run dir %s left behind", v.run_dir);
    fprintf(stderr, "coordkill: left behind: %d segment(s), run dir %s; workers gone\n", left,
            v.run_dir);
    fg_super_opts o;
    memset(&o, 0, sizeof o);
    o.manual = 1;  /* the sweep is what is tested; no workers needed */
    fg_super *sup = NULL;
    RT_MUST(fg_super_new(&o, &sup));
    RT_CHECK(rt_count_shm(v.run_id) == 0, "sweep left %d segment(s) of run %s",
             rt_count_shm(v.run_id), v.run_id);
    RT_CHECK(!rt_dir_exists(v.run_dir), "sweep left run dir %s", v.run_dir);
    char mine[RT_PATH_MAX];
    snprintf(mine, sizeof mine, "%s", fg_super_run_dir(sup));
    fg_super_destroy(&sup);
    RT_CHECK(!rt_dir_exists(mine), "run dir %s left after destroy", mine);
    fprintf(stderr, "coordkill: the next run swept them\n");
    remove_offload(&v);
    return 0;
}

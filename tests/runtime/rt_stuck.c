/* rt_stuck.c - a worker stuck in a command, and a second worker for a role
 * already held.
 *
 * stuck: the gpu worker's executor never returns from its 5th command
 * (FLEXGEN_FAULT=gpu:hang:5:ONCE) while its I/O thread keeps heartbeating.
 * With a command deadline of 2 s the supervisor declares it dead for that,
 * not for silence, and names the command in the log; the spawned worker is
 * killed and restarted, what it owed is re-issued and every output is
 * right. A worker idle past the deadline is not stuck. A hand-started
 * worker stuck the same way is told to go, leaves by itself though an
 * executor is still inside the command, and its successor started by hand
 * gets the commands.
 *
 * duplicate: a second hand-started worker for a role whose worker lives is
 * refused: it exits 2 saying who holds the role and how to take it over,
 * and the holder keeps the role and its commands. Once the holder has
 * exited, a new one takes the role at once (before its silence is noticed).
 * A hand-started worker for a role the run spawned is refused too, pointing
 * at --attach. */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rt_test.h"

#define NF 1024              /* floats per buffer */
#define NCMD 8               /* AXPYs per batch */
#define HANG_AT 5            /* the worker's 5th command: SHM_MAP is its first */
#define DEADLINE_MS 2000
#define WAIT_MS 30000

typedef struct {
    fg_super *sup;
    fg_shm_handle x, y, out[NCMD];
} bufs;

static void make_bufs(bufs *b) {
    uint32_t seg;
    RT_MUST(fg_super_segment_new(b->sup, "s", (2 + NCMD) * NF * 4, &seg));
    char names[2 + NCMD][8];
    fg_shm_region reg[2 + NCMD];
    for (int i = 0; i < 2 + NCMD; i++) {
        snprintf(names[i], sizeof names[i], "b%d", i);
        reg[i] = (fg_shm_region){names[i], NF * 4, 0};
    }
    uint64_t bytes;
    RT_MUST(fg_shm_layout(reg, 2 + NCMD, &bytes));
    b->x = fg_shm_layout_handle(reg, 2 + NCMD, seg, names[0]);
    b->y = fg_shm_layout_handle(reg, 2 + NCMD, seg, names[1]);
    for (int i = 0; i < NCMD; i++) b->out[i] = fg_shm_layout_handle(reg, 2 + NCMD, seg, names[2 + i]);
    float *x = fg_super_ptr(b->sup, b->x), *y = fg_super_ptr(b->sup, b->y);
    for (int j = 0; j < NF; j++) x[j] = (float)j, y[j] = (float)(NF - j);
}

/* NCMD AXPYs on role's worker (out[i] = (i + 1) x + y), all waited for;
 * 1 if every one succeeded with the right output. */
static int axpy_batch(bufs *b, fg_role role) {
    for (int i = 0; i < NCMD; i++) {
        memset(fg_super_ptr(b->sup, b->out[i]), 0, NF * 4);
        rt_submit_axpy(b->sup, role, b->x, b->y, b->out[i], (float)(i + 1));
    }
    fg_status st = fg_super_wait_all(b->sup, WAIT_MS);
    fg_super_poll(b->sup, 0, NULL, NULL);   /* take the completions */
    RT_CHECK(st == FG_OK, "AXPY batch: %s", fg_err_msg());
    const float *x = fg_super_ptr(b->sup, b->x), *y = fg_super_ptr(b->sup, b->y);
    for (int i = 0; i < NCMD; i++) {
        const float *o = fg_super_ptr(b->sup, b->out[i]);
        for (int j = 0; j < NF; j++)
            if (o[j] != (float)(i + 1) * x[j] + y[j]) {
                RT_CHECK(0, "AXPY %d: element %d is %g", i, j, (double)o[j]);
                return 0;
            }
    }
    return st == FG_OK;
}

/* Our stderr (the supervisor's log) into a file until log_end. */
typedef struct {
    char path[64];
    int saved;
} log_capture;

static void log_begin(log_capture *c, const char *tag) {
    snprintf(c->path, sizeof c->path, "/tmp/fg-rt-%s-XXXXXX", tag);
    int fd = mkstemp(c->path);
    c->saved = dup(2);
    dup2(fd, 2);
    close(fd);
}

static char *log_end(log_capture *c) {
    char *s = rt_slurp(c->path);
    dup2(c->saved, 2);
    close(c->saved);
    unlink(c->path);
    fputs(s, stderr);   /* for whoever reads the test's output */
    return s;
}

/* A spawned worker stuck in a command: declared dead by the deadline,
 * restarted, its commands re-issued. */
static void stuck_spawned(const char *once) {
    char fault[256];
    snprintf(fault, sizeof fault, "gpu:hang:%d:%s", HANG_AT, once);
    setenv("FLEXGEN_FAULT", fault, 1);   /* the spawned workers inherit it */
    fg_super_opts o = {.roles = 1u << FG_ROLE_GPU, .cmd_timeout_ms = DEADLINE_MS};
    o.worker_path[FG_ROLE_GPU] = rt_worker[FG_ROLE_GPU];
    bufs b = {0};
    log_capture cap;
    log_begin(&cap, "stuck");
    RT_MUST(fg_super_new(&o, &b.sup));
    make_bufs(&b);
    pid_t first = fg_super_worker_pid(b.sup, FG_ROLE_GPU);
    double t0 = fg_now();
    int ok = axpy_batch(&b, FG_ROLE_GPU);
    double dt = fg_now() - t0;
    fg_super_stats st;
    fg_super_get_stats(b.sup, &st);
    RT_CHECK(ok && st.deaths[FG_ROLE_GPU] == 1 && st.restarts[FG_ROLE_GPU] == 1 && st.reissued > 0 && st.failed == 0,
             "stuck: ok %d deaths %u restarts %u reissued %llu failed %llu", ok, st.deaths[FG_ROLE_GPU],
             st.restarts[FG_ROLE_GPU], (unsigned long long)st.reissued, (unsigned long long)st.failed);
    RT_CHECK(dt >= DEADLINE_MS / 1e3 && dt < DEADLINE_MS / 1e3 + 10, "stuck: the batch took %.1f s", dt);
    RT_CHECK(rt_wait_gone(first, 10000) == 0, "the stuck worker %d outlived its death", (int)first);

    /* idle past the deadline: owing nothing is not being stuck */
    fg_super_poll(b.sup, DEADLINE_MS + 500, NULL, NULL);
    ok = axpy_batch(&b, FG_ROLE_GPU);
    fg_super_get_stats(b.sup, &st);
    RT_CHECK(ok && st.deaths[FG_ROLE_GPU] == 1, "after an idle spell: ok %d, deaths %u", ok, st.deaths[FG_ROLE_GPU]);
    fg_super_destroy(&b.sup);
    unsetenv("FLEXGEN_FAULT");
    char *log = log_end(&cap);
    char want[64];
    snprintf(want, sizeof want, "(pid %d) is stuck in COMPUTE AXPY seq ", (int)first);
    RT_CHECK(strstr(log, want) && strstr(log, "unanswered for") && strstr(log, "--cmd-timeout"),
             "no '%s...unanswered for' line in the log", want);
    RT_CHECK(!strstr(log, "was silent"), "declared dead for silence, not by the command deadline");
    free(log);
    fprintf(stderr, "stuck: a spawned worker stuck in its command %d replaced after %.1f s; outputs exact\n", HANG_AT,
            dt);
}

/* A hand-started worker stuck in a command: told to go (it leaves though
 * an executor is still inside the command), and its successor gets the
 * commands. */
static void stuck_manual(const char *once) {
    fg_super_opts o = {.manual = 1, .roles = 1u << FG_ROLE_GPU, .cmd_timeout_ms = DEADLINE_MS};
    bufs b = {0};
    RT_MUST(fg_super_new(&o, &b.sup));
    const char *ep = fg_super_endpoint(b.sup);
    make_bufs(&b);
    char fault[256], werr[] = "/tmp/fg-rt-stuck-werr-XXXXXX";
    close(mkstemp(werr));
    snprintf(fault, sizeof fault, "gpu:hang:%d:%s", HANG_AT, once);
    pid_t w1 = rt_start_worker(rt_worker[FG_ROLE_GPU], ep, NULL, werr, fault);
    RT_MUST(fg_super_wait_ready(b.sup, WAIT_MS));
    for (int i = 0; i < NCMD; i++) rt_submit_axpy(b.sup, FG_ROLE_GPU, b.x, b.y, b.out[i], (float)(i + 1));
    int ws = rt_pump_until_exit(b.sup, w1, WAIT_MS);
    char *wlog = rt_slurp(werr);
    unlink(werr);
    RT_CHECK(ws != -1 && WIFEXITED(ws) && WEXITSTATUS(ws) == 1, "the stuck hand-started worker: wait status %d "
             "(want exit 1)", ws);
    RT_CHECK(strstr(wlog, "still inside a command"), "the stuck worker did not say why it left: %s", wlog);
    free(wlog);
    pid_t w2 = rt_start_worker(rt_worker[FG_ROLE_GPU], ep, NULL, NULL, NULL);
    RT_CHECK(fg_super_wait_all(b.sup, WAIT_MS) == FG_OK, "after the successor: %s", fg_err_msg());
    fg_super_poll(b.sup, 0, NULL, NULL);
    RT_CHECK(axpy_batch(&b, FG_ROLE_GPU), "the successor's batch");
    fg_super_destroy(&b.sup);
    waitpid(w2, &ws, 0);
    RT_CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "the successor after SHUTDOWN: status %d", ws);
    fprintf(stderr, "stuck: a hand-started worker stuck in a command left by itself; its successor took over\n");
}

int rt_test_stuck(void) {
    char dir[] = "/tmp/fg-rt-stuck-XXXXXX", once[64];
    RT_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(once, sizeof once, "%s/once", dir);
    stuck_spawned(once);
    unlink(once);
    stuck_manual(once);
    unlink(once);
    rmdir(dir);
    return 0;
}

/* ---- a second worker for a role --------------------------------------- */

/* Start a worker for role by hand; it must be refused: exit 2, its stderr
 * saying the role is held by pid holder and `hint`. */
static void expect_refused(fg_super *sup, fg_role role, pid_t holder, const char *hint) {
    char werr[] = "/tmp/fg-rt-dup-werr-XXXXXX", held[96];
    close(mkstemp(werr));
    pid_t w = rt_start_worker(rt_worker[role], fg_super_endpoint(sup), NULL, werr, NULL);
    int ws = rt_pump_until_exit(sup, w, WAIT_MS);
    char *msg = rt_slurp(werr);
    unlink(werr);
    snprintf(held, sizeof held, "the %s role of this run is held by pid %d", fg_role_name(role), (int)holder);
    RT_CHECK(ws != -1 && WIFEXITED(ws) && WEXITSTATUS(ws) == 2, "a second %s worker: wait status %d (want exit 2)",
             fg_role_name(role), ws);
    RT_CHECK(strstr(msg, "refused by the coordinator") && strstr(msg, held) && strstr(msg, hint),
             "the second %s worker did not say '%s' and '%s': %s", fg_role_name(role), held, hint, msg);
    RT_CHECK(fg_super_worker_pid(sup, role) == holder, "the %s role moved from pid %d to %d", fg_role_name(role),
             (int)holder, (int)fg_super_worker_pid(sup, role));
    fprintf(stderr, "duplicate: %s", msg);
    free(msg);
}

int rt_test_duplicate(void) {
    /* a hand-started holder */
    fg_super_opts o = {.manual = 1, .roles = 1u << FG_ROLE_GPU};
    bufs b = {0};
    RT_MUST(fg_super_new(&o, &b.sup));
    make_bufs(&b);
    pid_t w1 = rt_start_worker(rt_worker[FG_ROLE_GPU], fg_super_endpoint(b.sup), NULL, NULL, NULL);
    RT_MUST(fg_super_wait_ready(b.sup, WAIT_MS));
    char hint[32];
    snprintf(hint, sizeof hint, "kill %d", (int)w1);
    expect_refused(b.sup, FG_ROLE_GPU, w1, hint);
    RT_CHECK(axpy_batch(&b, FG_ROLE_GPU), "the holder's batch after the refusal");
    fg_super_stats st;
    fg_super_get_stats(b.sup, &st);
    RT_CHECK(st.deaths[FG_ROLE_GPU] == 0 && st.refused == 1, "deaths %u refused %u", st.deaths[FG_ROLE_GPU],
             st.refused);

    /* the holder gone: its successor takes the role at once */
    kill(w1, SIGKILL);
    waitpid(w1, NULL, 0);
    double t0 = fg_now();
    pid_t w2 = rt_start_worker(rt_worker[FG_ROLE_GPU], fg_super_endpoint(b.sup), NULL, NULL, NULL);
    while (fg_super_worker_pid(b.sup, FG_ROLE_GPU) != w2 && fg_now() - t0 < 10) fg_super_poll(b.sup, 50, NULL, NULL);
    double dt = fg_now() - t0;
    RT_CHECK(fg_super_worker_pid(b.sup, FG_ROLE_GPU) == w2, "the successor %d did not take the role", (int)w2);
    RT_CHECK(dt < FG_HB_LIVENESS * FG_HB_INTERVAL_MS / 1e3, "the successor waited %.1f s, for the silence", dt);
    RT_CHECK(axpy_batch(&b, FG_ROLE_GPU), "the successor's batch");
    fg_super_destroy(&b.sup);
    waitpid(w2, NULL, 0);
    fprintf(stderr, "duplicate: the holder killed, its successor took the role after %.2f s\n", dt);

    /* a spawned holder */
    fg_super_opts so = {.roles = 1u << FG_ROLE_CPU};
    so.worker_path[FG_ROLE_CPU] = rt_worker[FG_ROLE_CPU];
    fg_super *sup = NULL;
    RT_MUST(fg_super_new(&so, &sup));
    expect_refused(sup, FG_ROLE_CPU, fg_super_worker_pid(sup, FG_ROLE_CPU), "--attach cpu");
    fg_super_destroy(&sup);
    return 0;
}

/* rt_manual.c - workers attached by hand, as a developer would under a
 * debugger: the coordinator waits instead of spawning; a worker speaking
 * another protocol version is refused with a clear message on both sides;
 * a right one is accepted and runs commands; when it dies the coordinator
 * waits for the next hand-started one and re-issues to it; SHUTDOWN at
 * destroy makes it exit 0. Then the same over tcp on loopback. */
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rt_test.h"

#define NF 1024  /* floats per buffer */

static pid_t start_worker(const char *ep, const char *version, const char *errfile) {
    return rt_start_worker(rt_worker[FG_ROLE_GPU], ep, version, errfile, NULL);
}

#define slurp rt_slurp

static uint64_t submit_axpy(fg_super *sup, fg_shm_handle x, fg_shm_handle y, fg_shm_handle out,
                            float alpha) {
    return rt_submit_axpy(sup, FG_ROLE_GPU, x, y, out, alpha);
}

static int check_axpy(fg_super *sup, fg_shm_handle x, fg_shm_handle y, fg_shm_handle out,
                      float alpha) {
    const float *px = fg_super_ptr(sup, x), *py = fg_super_ptr(sup, y), *po = fg_super_ptr(sup, out);
    for (int j = 0; j < NF; j++)
        if (po[j] != alpha * px[j] + py[j]) return 0;
    return 1;
}

typedef struct {
    fg_shm_handle x, y, out;
} bufs;

static bufs make_bufs(fg_super *sup) {
    uint32_t seg;
    RT_MUST(fg_super_segment_new(sup, "m", 3 * NF * 4, &seg));
    fg_shm_region reg[] = {{"x", NF * 4, 0}, {"y", NF * 4, 0}, {"out", NF * 4, 0}};
    uint64_t bytes;
    RT_MUST(fg_shm_layout(reg, 3, &bytes));
    bufs b = {fg_shm_layout_handle(reg, 3, seg, "x"), fg_shm_layout_handle(reg, 3, seg, "y"),
              fg_shm_layout_handle(reg, 3, seg, "out")};
    float *x = fg_super_ptr(sup, b.x), *y = fg_super_ptr(sup, b.y);
    for (int j = 0; j < NF; j++) {
        x[j] = (float)j;
        y[j] = (float)(NF - j);
    }
    return b;
}

static int restores;
static fg_status count_restore(fg_super *sup, fg_role role, void *ctx) {
    (void)sup;
    (void)role;
    (void)ctx;
    restores++;
    return FG_OK;
}

#define pump_until_exit rt_pump_until_exit

int rt_test_manual(void) {
    fg_super_opts o;
    memset(&o, 0, sizeof o);
    o.manual = 1;
    o.roles = 1u << FG_ROLE_GPU;
    o.restore = count_restore;
    fg_super *sup = NULL;
    RT_MUST(fg_super_new(&o, &sup));
    const char *ep = fg_super_endpoint(sup);
    fprintf(stderr, "manual: coordinator waits at %s\n", ep);
    bufs b = make_bufs(sup);

    /* A: a worker speaking protocol version 99 is refused, both sides say so */
    char werr[] = "/tmp/fg-rt-manual-werr-XXXXXX", cerr[] = "/tmp/fg-rt-manual-cerr-XXXXXX";
    close(mkstemp(werr));
    int cfd = mkstemp(cerr);
    int saved = dup(2);
    dup2(cfd, 2);
    pid_t bad = start_worker(ep, "99", werr);
    int ws = pump_until_exit(sup, bad, 30000);
    dup2(saved, 2);
    close(saved);
    close(cfd);
    char *wmsg = slurp(werr), *cmsg = slurp(cerr);
    unlink(werr);
    unlink(cerr);
    RT_CHECK(ws != -1 && WIFEXITED(ws) && WEXITSTATUS(ws) == 2,
             "wrong-version worker: wait status %d (want exit 2)", ws);
    char want_w[128], want_c[128];
    snprintf(want_w, sizeof want_w, "speaks protocol version %u, this worker speaks 99", FG_PROTO_VERSION);
    snprintf(want_c, sizeof want_c, "refused a worker 'gpu': it speaks protocol version 99, this coordinator speaks %u",
             FG_PROTO_VERSION);
    RT_CHECK(strstr(wmsg, "refused") && strstr(wmsg, want_w), "worker side did not say why: '%s'", wmsg);
    RT_CHECK(strstr(cmsg, want_c), "coordinator side did not say why: '%s'", cmsg);
    fg_super_stats st;
    fg_super_get_stats(sup, &st);
    RT_CHECK(st.refused >= 1 && fg_super_worker_pid(sup, FG_ROLE_GPU) == 0, "not refused");
    fprintf(stderr, "manual: worker said:      %s", wmsg);
    fprintf(stderr, "manual: coordinator said: %s", cmsg);
    free(wmsg);
    free(cmsg);

    /* B: the right version is accepted and works */
    pid_t w1 = start_worker(ep, NULL, NULL);
    RT_MUST(fg_super_wait_ready(sup, 30000));
    RT_CHECK(fg_super_worker_pid(sup, FG_ROLE_GPU) == w1, "ready pid %d, started %d",
             (int)fg_super_worker_pid(sup, FG_ROLE_GPU), (int)w1);
    uint64_t seq = submit_axpy(sup, b.x, b.y, b.out, 3.0f);
    RT_CHECK(fg_super_wait(sup, seq, 30000, NULL) == FG_OK, "axpy: %s", fg_err_msg());
    RT_CHECK(check_axpy(sup, b.x, b.y, b.out, 3.0f), "axpy output wrong");
    fprintf(stderr, "manual: hand-started worker pid %d accepted, command done\n", (int)w1);

    /* C: it dies; the coordinator notices by heartbeat, waits, and gives the
     * queued command to the next hand-started worker */
    kill(w1, SIGKILL);
    waitpid(w1, NULL, 0);
    seq = submit_axpy(sup, b.x, b.y, b.out, 5.0f);
    double t0 = fg_now();
    while (fg_super_worker_pid(sup, FG_ROLE_GPU) != 0 && fg_now() - t0 < 20)
        fg_super_poll(sup, 200, NULL, NULL);
    RT_CHECK(fg_super_worker_pid(sup, FG_ROLE_GPU) == 0, "dead worker not noticed");
    fprintf(stderr, "manual: death noticed after %.1f s of silence\n", fg_now() - t0);
    pid_t w2 = start_worker(ep, NULL, NULL);
    RT_CHECK(fg_super_wait(sup, seq, 30000, NULL) == FG_OK, "re-issued axpy: %s", fg_err_msg());
    RT_CHECK(check_axpy(sup, b.x, b.y, b.out, 5.0f), "re-issued axpy output wrong");
    fg_super_get_stats(sup, &st);
    RT_CHECK(st.deaths[FG_ROLE_GPU] == 1 && st.restarts[FG_ROLE_GPU] == 0 && restores == 1,
             "deaths %u restarts %u restores %d", st.deaths[FG_ROLE_GPU],
             st.restarts[FG_ROLE_GPU], restores);

    /* D: destroy says SHUTDOWN; the worker exits 0 */
    char run_dir[RT_PATH_MAX];
    snprintf(run_dir, sizeof run_dir, "%s", fg_super_run_dir(sup));
    fg_super_destroy(&sup);
    waitpid(w2, &ws, 0);
    RT_CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "worker after SHUTDOWN: status %d", ws);
    RT_CHECK(!rt_dir_exists(run_dir), "run dir left");

    /* E: tcp on loopback */
    o.endpoint = "tcp://127.0.0.1:*";
    RT_MUST(fg_super_new(&o, &sup));
    ep = fg_super_endpoint(sup);
    RT_CHECK(!strncmp(ep, "tcp://127.0.0.1:", 16), "tcp endpoint %s", ep);
    b = make_bufs(sup);
    pid_t w3 = start_worker(ep, NULL, NULL);
    RT_MUST(fg_super_wait_ready(sup, 30000));
    seq = submit_axpy(sup, b.x, b.y, b.out, 7.0f);
    RT_CHECK(fg_super_wait(sup, seq, 30000, NULL) == FG_OK, "tcp axpy: %s", fg_err_msg());
    RT_CHECK(check_axpy(sup, b.x, b.y, b.out, 7.0f), "tcp axpy output wrong");
    fg_super_destroy(&sup);
    waitpid(w3, &ws, 0);
    RT_CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "tcp worker after SHUTDOWN: status %d", ws);
    fprintf(stderr, "manual: tcp endpoint %s ok\n", "tcp://127.0.0.1:*");
    return 0;
}

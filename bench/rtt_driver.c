/* rtt_driver.c - fg-bench-rtt: command round trips coordinator -> worker ->
 * DONE through the real supervisor and worker loop (submit, ROUTER/DEALER
 * over ipc://, the worker's queue and executor thread, DONE, completion).
 * The command is COMPUTE FG_OP_NOP, so what is measured is the runtime's own
 * per-command overhead, the floor under every command the engine issues.
 *
 *   fg-bench-rtt --worker PATH [-n COUNT] [--depth D[,D...]] [--endpoint EP]
 *   fg-bench-rtt --raw [-n COUNT]
 *
 * --raw is the floor under the floor: a bare ROUTER/DEALER ping-pong between
 * two processes over ipc:// with 24-byte frames, no runtime at all.
 *
 * Depth 1: submit, wait, repeat (latency). Depth D: keep D in flight
 * (throughput; latency is then submit-to-completion including queueing). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "fg_super.h"

typedef struct {
    fg_super *sup;
    uint64_t *lat;  /* ns, one per command */
    size_t n, done, submitted;
} run;

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void submit_nop(run *r) {
    fg_msg m;
    fg_msg_init(&m, FG_MSG_COMPUTE);
    m.u.compute.op = FG_OP_NOP;
    fg_exit_on(fg_super_submit(r->sup, FG_ROLE_GPU, &m, NULL, NULL));
    r->submitted++;
}

static void on_done(void *ctx, const fg_super_done *d) {
    run *r = ctx;
    if (d->status) {
        fprintf(stderr, "fg-bench-rtt: command failed: %s\n", d->error);
        exit(1);
    }
    r->lat[r->done++] = d->complete_ns - d->submit_ns;
    if (r->submitted < r->n) submit_nop(r);
}

static void report(const char *what, run *r, double secs) {
    qsort(r->lat, r->n, sizeof *r->lat, cmp_u64);
    double sum = 0;
    for (size_t i = 0; i < r->n; i++) sum += (double)r->lat[i];
    printf("%-12s n=%zu  p50 %7.1f us  p99 %7.1f us  mean %7.1f us  max %8.1f us  %9.0f cmds/s\n",
           what, r->n, (double)r->lat[r->n / 2] / 1e3, (double)r->lat[r->n * 99 / 100] / 1e3,
           sum / (double)r->n / 1e3, (double)r->lat[r->n - 1] / 1e3, (double)r->n / secs);
    fflush(stdout);
}

/* Bare ZeroMQ ping-pong between two processes: what the runtime costs on
 * top of the transport. */
static int raw_pingpong(size_t n) {
    char dir[] = "/tmp/fg-bench-rtt-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char ep[128];
    snprintf(ep, sizeof ep, "ipc://%s/s", dir);
    pid_t p = fork();
    if (p == 0) {
        void *c = zmq_ctx_new(), *s = zmq_socket(c, ZMQ_DEALER);
        zmq_setsockopt(s, ZMQ_ROUTING_ID, "w", 1);
        zmq_connect(s, ep);
        char b[64];
        zmq_send(s, "hi", 2, 0);
        for (;;) {
            int k = zmq_recv(s, b, sizeof b, 0);
            if (k <= 1) break;
            zmq_send(s, b, (size_t)k, 0);
        }
        zmq_close(s);
        zmq_ctx_term(c);
        _exit(0);
    }
    void *c = zmq_ctx_new(), *s = zmq_socket(c, ZMQ_ROUTER);
    zmq_bind(s, ep);
    char id[64], b[64], msg[24] = {0};
    zmq_recv(s, id, sizeof id, 0);
    zmq_recv(s, b, sizeof b, 0);
    run r = {0};
    r.n = n;
    r.lat = fg_xmalloc(n * sizeof *r.lat);
    double t0 = fg_now();
    for (size_t i = 0; i < n; i++) {
        double a = fg_now();
        zmq_send(s, "w", 1, ZMQ_SNDMORE);
        zmq_send(s, msg, sizeof msg, 0);
        zmq_recv(s, id, sizeof id, 0);
        zmq_recv(s, b, sizeof b, 0);
        r.lat[i] = (uint64_t)((fg_now() - a) * 1e9);
    }
    double secs = fg_now() - t0;
    zmq_send(s, "w", 1, ZMQ_SNDMORE);
    zmq_send(s, "x", 1, 0);
    waitpid(p, NULL, 0);
    zmq_close(s);
    zmq_ctx_term(c);
    char sock[160];
    snprintf(sock, sizeof sock, "%s/s", dir);
    unlink(sock);
    rmdir(dir);
    printf("bare zmq ipc ping-pong, no runtime\n");
    report("raw depth 1", &r, secs);
    free(r.lat);
    return 0;
}

int main(int argc, char **argv) {
    fg_log_init("bench-rtt");
    fg_log_set_level(FG_LOG_WARN);
    const char *worker = NULL, *endpoint = NULL, *depths = "1,8,64";
    size_t n = 100000;
    int raw = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--worker") && i + 1 < argc) worker = argv[++i];
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) n = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--depth") && i + 1 < argc) depths = argv[++i];
        else if (!strcmp(argv[i], "--endpoint") && i + 1 < argc) endpoint = argv[++i];
        else if (!strcmp(argv[i], "--raw")) raw = 1;
        else {
            fprintf(stderr, "usage: fg-bench-rtt --worker PATH [-n COUNT] [--depth D[,D...]] "
                            "[--endpoint EP]\n       fg-bench-rtt --raw [-n COUNT]\n");
            return 2;
        }
    }
    if (raw && n >= 100) return raw_pingpong(n);
    if (!worker || n < 100) {
        fprintf(stderr, "fg-bench-rtt: --worker PATH (the gpu worker) and -n >= 100 needed\n");
        return 2;
    }
    fg_super_opts o;
    memset(&o, 0, sizeof o);
    o.roles = 1u << FG_ROLE_GPU;
    o.worker_path[FG_ROLE_GPU] = worker;
    o.endpoint = endpoint;
    run r = {0};
    fg_exit_on(fg_super_new(&o, &r.sup));
    printf("round trips over %s, COMPUTE(NOP) to the gpu worker\n", fg_super_endpoint(r.sup));
    r.lat = fg_xmalloc(n * sizeof *r.lat);

    /* warm up: page in, let the scheduler settle */
    for (int i = 0; i < 2000; i++) {
        r.n = 1;
        r.done = r.submitted = 0;
        submit_nop(&r);
        fg_exit_on(fg_super_wait_all(r.sup, 30000));
        fg_super_poll(r.sup, 0, NULL, NULL);
    }

    char list[256];
    snprintf(list, sizeof list, "%s", depths);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        size_t depth = strtoull(tok, NULL, 10);
        if (!depth) continue;
        r.n = n;
        r.done = r.submitted = 0;
        double t0 = fg_now();
        if (depth == 1) {
            for (size_t i = 0; i < n; i++) {
                uint64_t seq;
                fg_msg m;
                fg_msg_init(&m, FG_MSG_COMPUTE);
                m.u.compute.op = FG_OP_NOP;
                fg_exit_on(fg_super_submit(r.sup, FG_ROLE_GPU, &m, NULL, &seq));
                fg_super_done d;
                fg_exit_on(fg_super_wait(r.sup, seq, 30000, &d));
                r.lat[r.done++] = d.complete_ns - d.submit_ns;
            }
        } else {
            for (size_t i = 0; i < depth && r.submitted < n; i++) submit_nop(&r);
            while (r.done < n)
                if (fg_super_poll(r.sup, 30000, on_done, &r) < 0) fg_exit_on(FG_ERUNTIME);
        }
        double secs = fg_now() - t0;
        char what[32];
        snprintf(what, sizeof what, "depth %zu", depth);
        report(what, &r, secs);
    }
    fg_super_destroy(&r.sup);
    free(r.lat);
    return 0;
}

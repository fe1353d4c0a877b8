/* rt_guard.c - who may talk to a run, and how long a role is kept alive.
 *
 * peer: the run directory is 0700 and the shm segments 0600, both ours;
 * a process of another user (uid 65534, made by setuid in a child: needs
 * root, else exit 77) cannot attach a worker: not through the 0700 run
 * directory, and not when the directory and socket are opened to everyone
 * either, since the control socket checks its peer's uid (SO_PEERCRED):
 * a raw connect() of that user gets the socket closed without ZeroMQ's
 * greeting, and a real worker of that user never gets READY through. A
 * worker of our own user, started the same way, does.
 *
 * deaths: a role whose worker dies again and again, answering commands in
 * between (so it never dies "in a row"), is given up after max_deaths
 * deaths in the run: its next command fails with FG_SUPER_EGAVEUP and the
 * reason. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rt_test.h"

#define NOBODY 65534

static void become(uid_t uid) {
    if (uid == getuid()) return;
    if (setgroups(0, NULL) != 0 || setgid(uid) != 0 || setuid(uid) != 0) _exit(126);
}

/* A worker of user uid, its stderr to errfile. */
static pid_t start_worker(const char *ep, uid_t uid, const char *errfile) {
    pid_t p = fork();
    if (p == 0) {
        int fd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0666);
        dup2(fd, 2);
        close(fd);
        become(uid);
        const char *path = rt_worker[FG_ROLE_CPU];
        execl(path, path, "--connect", ep, (char *)NULL);
        _exit(127);
    }
    return p;
}

/* As user uid: connect to the Unix socket and wait for ZeroMQ's greeting.
 * Returns 1 if greeted (accepted), 0 if the socket was closed on us, -1 if
 * connect itself failed (errno in *err). */
static int raw_connect(const char *path, uid_t uid, int *err) {
    int pfd[2];
    if (pipe(pfd) != 0) return -1;
    pid_t p = fork();
    if (p == 0) {
        close(pfd[0]);
        become(uid);
        int s = socket(AF_UNIX, SOCK_STREAM, 0);
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
        int res[2] = {-1, 0};
        if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
            res[1] = errno;
        } else {
            struct pollfd q = {s, POLLIN, 0};
            unsigned char b;
            res[0] = poll(&q, 1, 3000) == 1 && read(s, &b, 1) == 1 && b == 0xff;  /* ZMTP signature */
        }
        ssize_t n = write(pfd[1], res, sizeof res);
        (void)n;
        _exit(0);
    }
    close(pfd[1]);
    int res[2] = {-1, 0};
    ssize_t n = read(pfd[0], res, sizeof res);
    close(pfd[0]);
    waitpid(p, NULL, 0);
    if (n != (ssize_t)sizeof res) return -1;
    *err = res[1];
    return res[0];
}

/* Pump for ms; 1 if the role's worker said READY meanwhile. */
static int ready_within(fg_super *sup, fg_role role, int ms) {
    double end = fg_now() + ms / 1e3;
    while (fg_now() < end) {
        if (fg_super_worker_pid(sup, role)) return 1;
        fg_super_poll(sup, 100, NULL, NULL);
    }
    return fg_super_worker_pid(sup, role) != 0;
}

static mode_t mode_of(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_mode & 07777 : (mode_t)-1;
}

int rt_test_peer(void) {
    if (geteuid() != 0) {
        fprintf(stderr, "SKIP: needs root to act as another user\n");
        return 77;
    }
    /* a runtime directory of this test's own: the shared /tmp/flexgen-UID
     * that other runs use is never loosened */
    char xdg[] = "/tmp/fg-rt-peer-XXXXXX";
    if (!mkdtemp(xdg)) {
        fprintf(stderr, "fg-rt-test: FAIL mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    setenv("XDG_RUNTIME_DIR", xdg, 1);
    fg_super_opts o = {.manual = 1, .roles = 1u << FG_ROLE_CPU};
    fg_super *sup = NULL;
    RT_MUST(fg_super_new(&o, &sup));
    const char *ep = fg_super_endpoint(sup), *dir = fg_super_run_dir(sup);
    uint32_t seg;
    RT_MUST(fg_super_segment_new(sup, "guard", 4096, &seg));
    char shm[128], base[RT_PATH_MAX];
    snprintf(shm, sizeof shm, "/dev/shm/flexgen-%s-guard", fg_super_run_id(sup));
    snprintf(base, sizeof base, "%s", dir);
    *strrchr(base, '/') = 0;
    RT_CHECK(mode_of(dir) == 0700, "run dir %s has mode %o, want 700", dir, mode_of(dir));
    RT_CHECK(mode_of(base) == 0700, "%s has mode %o, want 700", base, mode_of(base));
    RT_CHECK(mode_of(shm) == 0600, "segment %s has mode %o, want 600", shm, mode_of(shm));

    /* 1: through the 0700 directory: not even connect() gets there */
    int err = 0;
    int r = raw_connect(ep + 6, NOBODY, &err);
    RT_CHECK(r == -1 && err == EACCES, "uid %d connect through the 0700 run dir: %d (%s)", NOBODY, r,
             strerror(err));
    char werr[] = "/tmp/fg-rt-guard-XXXXXX";
    close(mkstemp(werr));
    chmod(werr, 0666);
    pid_t w = start_worker(ep, NOBODY, werr);
    RT_CHECK(!ready_within(sup, FG_ROLE_CPU, 2000), "a worker of uid %d attached through the 0700 run dir",
             NOBODY);
    kill(w, SIGKILL);
    waitpid(w, NULL, 0);

    /* 2: the directories and the socket opened to all: refused by uid */
    chmod(xdg, 0711);
    chmod(base, 0711);
    chmod(dir, 0711);
    chmod(ep + 6, 0777);
    r = raw_connect(ep + 6, NOBODY, &err);
    RT_CHECK(r == 0, "uid %d with the socket opened: %s", NOBODY,
             r == 1 ? "ZeroMQ greeted it (accepted)" : strerror(err));
    w = start_worker(ep, NOBODY, werr);
    RT_CHECK(!ready_within(sup, FG_ROLE_CPU, 3000), "a worker of uid %d attached to an open socket", NOBODY);
    kill(w, SIGKILL);
    waitpid(w, NULL, 0);
    fprintf(stderr, "peer: uid %d refused (connect through 0700: EACCES; opened socket: closed "
                    "before the greeting; its worker never READY)\n", NOBODY);

    /* our own user, same way in: accepted (the check above can fail) */
    r = raw_connect(ep + 6, getuid(), &err);
    RT_CHECK(r == 1, "our own uid was not greeted: %d (%s)", r, strerror(err));
    w = start_worker(ep, getuid(), werr);
    RT_CHECK(ready_within(sup, FG_ROLE_CPU, 10000), "a worker of our own uid did not attach");
    fg_super_destroy(&sup);
    waitpid(w, NULL, 0);
    unlink(werr);
    rmdir(base);
    rmdir(xdg);
    return 0;
}

/* Submit a COPY of 4 KiB on the cpu worker and wait for it. */
static fg_status copy_once(fg_super *sup, uint32_t seg, fg_super_done *d) {
    fg_msg m;
    fg_msg_init(&m, FG_MSG_COPY);
    fg_msg_copy_add(&m, (fg_shm_handle){seg, FG_SHM_HEADER_BYTES, 4096},
                    (fg_shm_handle){seg, FG_SHM_HEADER_BYTES + 4096, 4096});
    uint64_t seq;
    fg_status st = fg_super_submit(sup, FG_ROLE_CPU, &m, NULL, &seq);
    return st ? st : fg_super_wait(sup, seq, 30000, d);
}

int rt_test_deaths(void) {
    fg_super_opts o = {.roles = 1u << FG_ROLE_CPU, .max_deaths = 3};
    o.worker_path[FG_ROLE_CPU] = rt_worker[FG_ROLE_CPU];
    fg_super *sup = NULL;
    RT_MUST(fg_super_new(&o, &sup));
    uint32_t seg;
    RT_MUST(fg_super_segment_new(sup, "d", 8192, &seg));
    fg_super_done d;
    int deaths = 0;
    fg_status st = FG_OK;
    for (int round = 0; round < 6 && st == FG_OK; round++) {
        st = copy_once(sup, seg, &d);   /* answered: never "in a row" */
        if (st != FG_OK) break;
        pid_t p = fg_super_worker_pid(sup, FG_ROLE_CPU);
        kill(p, SIGKILL);
        deaths++;
        fg_super_stats s;
        do {
            fg_super_poll(sup, 50, NULL, NULL);
            fg_super_get_stats(sup, &s);
        } while (s.deaths[FG_ROLE_CPU] < (uint32_t)deaths);
    }
    RT_CHECK(deaths == 3, "given up after %d deaths, want 3", deaths);
    RT_CHECK(st != FG_OK && strstr(fg_err_msg(), "the cpu worker is gone: it died 3 times in this run"),
             "after 3 deaths: %s", st == FG_OK ? "the command still ran" : fg_err_msg());
    fprintf(stderr, "deaths: %s\n", fg_err_msg());
    fg_super_destroy(&sup);
    return 0;
}

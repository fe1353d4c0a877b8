/* rt_main.c - fg-rt-test's entry point and the helpers its tests share.
 *
 *   fg-rt-test proto                          protocol self-test + shm self-test
 *   fg-rt-test kill      --workers G C D      SIGKILL/SIGSTOP workers mid-flight
 *   fg-rt-test coordkill --workers G C D      SIGKILL the coordinator, then sweep
 *   fg-rt-test manual    --workers G C D      --connect by hand, version refusal
 *   fg-rt-test disk      --workers G C D      the disk worker's libaio path and its errors
 *   fg-rt-test after     --workers G C D      cross-stream dependencies on the gpu worker
 *   fg-rt-test peer      --workers G C D      another user cannot attach (root; else 77)
 *   fg-rt-test deaths    --workers G C D      a role given up after max_deaths deaths
 *   fg-rt-test stuck     --workers G C D      a worker stuck in a command: the command deadline
 *   fg-rt-test duplicate --workers G C D      a second worker for a role held is refused
 *   fg-rt-test victim    --workers G C D      (internal: coordkill's coordinator)
 *   fg-rt-test corpus DIR                     seed the decoder fuzzer's corpus */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rt_test.h"

int rt_failures;
const char *rt_worker[FG_NROLES];

int rt_count_shm(const char *run_id) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "flexgen-%s-", run_id);
    DIR *d = opendir("/dev/shm");
    if (!d) return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (!strncmp(de->d_name, prefix, strlen(prefix))) n++;
    closedir(d);
    return n;
}

int rt_dir_exists(const char *dir) {
    struct stat sb;
    return stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int rt_wait_gone(pid_t pid, int timeout_ms) {
    int fd = pidfd_open(pid, 0);
    if (fd < 0) return errno == ESRCH ? 0 : -1;
    struct pollfd p = {fd, POLLIN, 0};
    int rc = poll(&p, 1, timeout_ms);
    close(fd);
    if (rc == 1) {
        waitpid(pid, NULL, WNOHANG);  /* reap it if it is ours */
        return 0;
    }
    return -1;
}

pid_t rt_start_worker(const char *path, const char *ep, const char *version, const char *errfile, const char *fault) {
    pid_t p = fork();
    if (p == 0) {
        if (errfile) {
            int fd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0600);
            dup2(fd, 2);
            close(fd);
        }
        if (fault) setenv("FLEXGEN_FAULT", fault, 1);
        else unsetenv("FLEXGEN_FAULT");
        if (version) execl(path, path, "--connect", ep, "--protocol-version", version, (char *)NULL);
        else execl(path, path, "--connect", ep, (char *)NULL);
        _exit(127);
    }
    return p;
}

char *rt_slurp(const char *path) {
    char *data = NULL;
    size_t len;
    if (fg_read_file(path, &data, &len) != FG_OK) return strdup("");
    return data;
}

uint64_t rt_submit_axpy(fg_super *sup, fg_role role, fg_shm_handle x, fg_shm_handle y, fg_shm_handle out,
                        float alpha) {
    fg_msg m;
    fg_msg_init(&m, role == FG_ROLE_CPU ? FG_MSG_CPU_ATTN : FG_MSG_COMPUTE);
    m.u.compute.op = FG_OP_AXPY;
    fg_msg_compute_add_in(&m, x);
    fg_msg_compute_add_in(&m, y);
    fg_msg_compute_add_out(&m, out);
    fg_msg_compute_set_params(&m, &alpha, sizeof alpha);
    uint64_t seq = 0;
    RT_MUST(fg_super_submit(sup, role, &m, NULL, &seq));
    return seq;
}

int rt_pump_until_exit(fg_super *sup, pid_t pid, int timeout_ms) {
    double end = fg_now() + timeout_ms / 1e3;
    while (fg_now() < end) {
        int ws;
        if (waitpid(pid, &ws, WNOHANG) == pid) return ws;
        fg_super_poll(sup, 100, NULL, NULL);
    }
    return -1;
}

static int usage(void) {
    fprintf(stderr, "usage: fg-rt-test proto\n"
                    "       fg-rt-test kill|coordkill|manual|disk|after|peer|deaths|stuck|duplicate --workers GPU CPU DISK\n");
    return 2;
}

int main(int argc, char **argv) {
    fg_log_init("rt-test");
    if (argc < 2) return usage();
    const char *mode = argv[1];
    if (!strcmp(mode, "proto")) {
        int rc = fg_msg_selftest(1);
        rc |= rt_test_shm();
        fprintf(stderr, "fg-rt-test proto: %s\n", rc ? "FAIL" : "ok");
        return rc ? 1 : 0;
    }
    if (!strcmp(mode, "corpus") && argc == 3) {
        mkdir(argv[2], 0700);
        return fg_msg_write_samples(argv[2]) == 0 ? 0 : 1;
    }
    if (argc != 6 || strcmp(argv[2], "--workers")) return usage();
    for (int r = 0; r < FG_NROLES; r++) rt_worker[r] = argv[3 + r];
    int rc;
    if (!strcmp(mode, "kill")) rc = rt_test_kill();
    else if (!strcmp(mode, "coordkill")) rc = rt_test_coordkill(argv[0]);
    else if (!strcmp(mode, "victim")) return rt_test_victim();
    else if (!strcmp(mode, "manual")) rc = rt_test_manual();
    else if (!strcmp(mode, "disk")) rc = rt_test_disk();
    else if (!strcmp(mode, "after")) rc = rt_test_after();
    else if (!strcmp(mode, "deaths")) rc = rt_test_deaths();
    else if (!strcmp(mode, "stuck")) rc = rt_test_stuck();
    else if (!strcmp(mode, "duplicate")) rc = rt_test_duplicate();
    else if (!strcmp(mode, "peer")) {
        if ((rc = rt_test_peer()) == 77) return 77;
    }
    else return usage();
    rc |= rt_failures != 0;
    fprintf(stderr, "fg-rt-test %s: %s\n", mode, rc ? "FAIL" : "ok");
    return rc ? 1 : 0;
}

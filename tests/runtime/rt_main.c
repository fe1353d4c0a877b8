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
 *   fg-rt-test victim    --workers G C D      (internal: coordkill's coordinator)
 *   fg-rt-test corpus DIR                     seed the decoder fuzzer's corpus */
#include <dirent.h>
#include <errno.h>
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

static int usage(void) {
    fprintf(stderr, "usage: fg-rt-test proto\n"
                    "       fg-rt-test kill|coordkill|manual|disk|after|peer|deaths --workers GPU CPU DISK\n");
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
    else if (!strcmp(mode, "peer")) {
        if ((rc = rt_test_peer()) == 77) return 77;
    }
    else return usage();
    rc |= rt_failures != 0;
    fprintf(stderr, "fg-rt-test %s: %s\n", mode, rc ? "FAIL" : "ok");
    return rc ? 1 : 0;
}

/* fg_super_proc.c - run directories, worker spawning and emergency cleanup
 * for the supervisor (see fg_super_proc.h). Nothing here speaks the
 * protocol. */
#include "fg_super_proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fg_msg.h"
#include "fg_shm.h"

/* ---- run directory ---------------------------------------------------- */

static fg_status run_base(char *out, size_t cap) {
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    struct stat sb;
    if (xdg && xdg[0] == '/' && stat(xdg, &sb) == 0 && S_ISDIR(sb.st_mode) &&
        access(xdg, W_OK) == 0)
        snprintf(out, cap, "%s/flexgen", xdg);
    else
        snprintf(out, cap, "/tmp/flexgen-%u", (unsigned)geteuid());
    if (mkdir(out, 0700) != 0 && errno != EEXIST)
        return fg_err_set(FG_ERUNTIME, "cannot create %s: %s", out, strerror(errno));
    if (lstat(out, &sb) != 0)
        return fg_err_set(FG_ERUNTIME, "cannot stat %s: %s", out, strerror(errno));
    if (!S_ISDIR(sb.st_mode) || sb.st_uid != geteuid() || (sb.st_mode & 077))
        return fg_err_set(FG_ERUNTIME, "%s is not a private directory of ours (mode %03o, uid "
                          "%u): refusing to put control sockets there (HINT: remove it)", out,
                          (unsigned)(sb.st_mode & 0777), (unsigned)sb.st_uid);
    return FG_OK;
}

fg_status fg_sup_rundir_make(const char *run_id, char *dir, size_t cap) {
    char base[FG_SUP_PATH_MAX];
    fg_status st = run_base(base, sizeof base);
    if (st != FG_OK) return st;
    int n = snprintf(dir, cap, "%s/run-%s", base, run_id);
    if (n < 0 || (size_t)n >= cap) return fg_err_set(FG_ERUNTIME, "run dir path too long");
    if (mkdir(dir, 0700) != 0)
        return fg_err_set(FG_ERUNTIME, "cannot create run dir %s: %s", dir, strerror(errno));
    char owner[FG_SUP_PATH_MAX + 16];
    snprintf(owner, sizeof owner, "%s/owner", dir);
    FILE *f = fopen(owner, "w");
    if (!f) {
        rmdir(dir);
        return fg_err_set(FG_ERUNTIME, "cannot write %s: %s", owner, strerror(errno));
    }
    fprintf(f, "%d %llu\n", (int)getpid(), (unsigned long long)fg_proc_start_ticks(getpid()));
    fclose(f);
    return FG_OK;
}

void fg_sup_rundir_remove(const char *dir) {
    if (dir && dir[0]) fg_remove_flat_dir(dir);
}

int fg_sup_rundir_sweep(void) {
    char base[FG_SUP_PATH_MAX];
    if (run_base(base, sizeof base) != FG_OK) return 0;
    DIR *d = opendir(base);
    if (!d) return 0;
    int removed = 0;
    time_t now = time(NULL);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, "run-", 4) != 0) continue;
        char dir[FG_SUP_PATH_MAX + 300], owner[FG_SUP_PATH_MAX + 320];
        snprintf(dir, sizeof dir, "%s/%s", base, de->d_name);
        snprintf(owner, sizeof owner, "%s/owner", dir);
        struct stat sb;
        if (lstat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode) || sb.st_uid != geteuid()) continue;
        int pid = 0;
        unsigned long long ticks = 0;
        FILE *f = fopen(owner, "r");
        int parsed = f && fscanf(f, "%d %llu", &pid, &ticks) == 2;
        if (f) fclose(f);
        int dead = parsed ? !fg_proc_alive(pid, ticks) : now - sb.st_mtime > 60;
        if (dead && fg_remove_flat_dir(dir) == 0) {
            fg_info("swept stale run dir %s (owner pid %d is gone)", dir, pid);
            removed++;
        }
    }
    closedir(d);
    return removed;
}

/* ---- worker programs -------------------------------------------------- */

fg_status fg_sup_worker_path(const char *explicit_path, const char *dir, const char *program,
                             char *out, size_t cap) {
    char self[PATH_MAX];
    const char *where;
    if (explicit_path) {
        snprintf(out, cap, "%s", explicit_path);
        where = "the path given";
    } else {
        if (!dir) dir = getenv("FLEXGEN_WORKER_DIR");
        if (!dir || !dir[0]) {
            ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
            if (n <= 0) return fg_err_set(FG_ERUNTIME, "cannot read /proc/self/exe: %s", strerror(errno));
            self[n] = 0;
            dir = dirname(self);
            where = "the directory of this program";
        } else {
            where = "the worker directory";
        }
        snprintf(out, cap, "%s/%s", dir, program);
    }
    if (access(out, X_OK) != 0)
        return fg_err_set(FG_EINPUT, "cannot run %s (%s, from %s): %s (HINT: build every target, "
                          "or set FLEXGEN_WORKER_DIR to the directory holding the "
                          "flexgen-*-worker programs)", program, out, where, strerror(errno));
    return FG_OK;
}

fg_status fg_sup_spawn(char *const argv[], pid_t *pid, int *pidfd) {
    pid_t parent = getpid();
    char msg[FG_SUP_PATH_MAX + 64];  /* formatted now: the child may not call printf */
    int msglen = snprintf(msg, sizeof msg, "flexgen: cannot exec worker program %s\n", argv[0]);
    if (msglen < 0 || (size_t)msglen >= sizeof msg) msglen = (int)sizeof msg - 1;
    pid_t p = fork();
    if (p < 0) return fg_err_set(FG_ERUNTIME, "fork: %s", strerror(errno));
    if (p == 0) {
        /* child: async-signal-safe calls only (the parent has threads) */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);  /* dispositions: exec resets ours */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1);  /* the coordinator died already */
        execv(argv[0], argv);
        ssize_t w = write(2, msg, (size_t)msglen);
        (void)w;
        _exit(127);
    }
    *pid = p;
    *pidfd = pidfd_open(p, 0);
    return FG_OK;
}

void fg_sup_describe_exit(int ws, char *out, size_t cap) {
    if (WIFEXITED(ws))
        snprintf(out, cap, "exited with status %d", WEXITSTATUS(ws));
    else if (WIFSIGNALED(ws))
        snprintf(out, cap, "killed by signal %d (%s)", WTERMSIG(ws), strsignal(WTERMSIG(ws)));
    else
        snprintf(out, cap, "stopped (status 0x%x)", ws);
}

/* ---- cleanup on signals and exit() ------------------------------------ */

#define MAX_RECORDS 4

struct fg_sup_cleanup {
    pid_t owner;  /* a forked child that calls exit() must not clean up our run */
    char run_dir[FG_SUP_PATH_MAX];
    char owner_path[FG_SUP_PATH_MAX + 16];
    char ctl_path[FG_SUP_PATH_MAX + 16];
    char shm_paths[FG_SHM_MAX_SEGMENTS][FG_SHM_NAME_MAX + 16];  /* "/dev/shm/flexgen-..." */
    volatile sig_atomic_t nshm;
    volatile pid_t pids[FG_NROLES];
};

static fg_sup_cleanup *volatile records[MAX_RECORDS];
static struct sigaction old_int, old_term;
static int installed_int, installed_term, atexit_registered;
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;

/* Async-signal-safe: getpid, kill, unlink, rmdir only. */
static void run_cleanup(fg_sup_cleanup *c) {
    if (getpid() != c->owner) return;
    for (int r = 0; r < FG_NROLES; r++)
        if (c->pids[r] > 0) kill(c->pids[r], SIGKILL);
    for (int i = 0; i < c->nshm; i++) unlink(c->shm_paths[i]);
    if (c->ctl_path[0]) unlink(c->ctl_path);
    if (c->owner_path[0]) unlink(c->owner_path);
    if (c->run_dir[0]) rmdir(c->run_dir);
}

static void run_all(void) {
    for (int i = 0; i < MAX_RECORDS; i++)
        if (records[i]) run_cleanup(records[i]);
}

/* Installed only where the disposition was the default (terminate): clean
 * up, then terminate by the same signal as before. A program with its own
 * handler keeps it, and cleans up through fg_super_destroy or exit(). */
static void on_signal(int sig) {
    run_all();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void on_exit_hook(void) { run_all(); }

/* Record edits happen with the signals blocked, so the handler never sees
 * half a path. */
static void block(sigset_t *old) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &s, old);
}

static void unblock(const sigset_t *old) { pthread_sigmask(SIG_SETMASK, old, NULL); }

/* Take over sig if nobody handles it yet. */
static int install(int sig, struct sigaction *old) {
    struct sigaction cur;
    if (sigaction(sig, NULL, &cur) != 0 || (cur.sa_flags & SA_SIGINFO) ||
        cur.sa_handler != SIG_DFL)
        return 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    return sigaction(sig, &sa, old) == 0;
}

fg_sup_cleanup *fg_sup_cleanup_new(const char *run_dir, int install_handlers) {
    fg_sup_cleanup *c = fg_xcalloc(1, sizeof *c);
    c->owner = getpid();
    snprintf(c->run_dir, sizeof c->run_dir, "%s", run_dir);
    snprintf(c->owner_path, sizeof c->owner_path, "%s/owner", run_dir);
    sigset_t old;
    pthread_mutex_lock(&reg_mu);
    block(&old);
    for (int i = 0; i < MAX_RECORDS; i++)
        if (!records[i]) {
            records[i] = c;
            break;
        }
    if (install_handlers) {
        if (!installed_int) installed_int = install(SIGINT, &old_int);
        if (!installed_term) installed_term = install(SIGTERM, &old_term);
    }
    if (!atexit_registered) {
        atexit(on_exit_hook);
        atexit_registered = 1;
    }
    unblock(&old);
    pthread_mutex_unlock(&reg_mu);
    return c;
}

void fg_sup_cleanup_set_ctl(fg_sup_cleanup *c, const char *ipc_path) {
    sigset_t old;
    block(&old);
    snprintf(c->ctl_path, sizeof c->ctl_path, "%s", ipc_path);
    unblock(&old);
}

void fg_sup_cleanup_add_shm(fg_sup_cleanup *c, const char *shm_name) {
    if (c->nshm >= FG_SHM_MAX_SEGMENTS) return;
    sigset_t old;
    block(&old);
    snprintf(c->shm_paths[c->nshm], sizeof c->shm_paths[0], "/dev/shm%s", shm_name);
    c->nshm = c->nshm + 1;
    unblock(&old);
}

void fg_sup_cleanup_set_pid(fg_sup_cleanup *c, int role, pid_t pid) {
    if (role >= 0 && role < FG_NROLES) c->pids[role] = pid;
}

void fg_sup_cleanup_destroy(fg_sup_cleanup **cp) {
    if (!cp || !*cp) return;
    sigset_t old;
    pthread_mutex_lock(&reg_mu);
    block(&old);
    int left = 0;
    for (int i = 0; i < MAX_RECORDS; i++) {
        if (records[i] == *cp) records[i] = NULL;
        else if (records[i]) left++;
    }
    if (!left && installed_int) {
        sigaction(SIGINT, &old_int, NULL);
        installed_int = 0;
    }
    if (!left && installed_term) {
        sigaction(SIGTERM, &old_term, NULL);
        installed_term = 0;
    }
    unblock(&old);
    pthread_mutex_unlock(&reg_mu);
    free(*cp);
    *cp = NULL;
}

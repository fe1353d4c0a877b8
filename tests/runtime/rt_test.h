/* rt_test.h - the runtime test driver (fg-rt-test): a coordinator of its own
 * that exercises shm, the protocol, the workers and the supervisor. Each
 * test is one subcommand; ctest runs them (CMakeLists.txt). */
#ifndef RT_TEST_H
#define RT_TEST_H

#include <stdio.h>
#include <stdlib.h>

#include "fg_super.h"

#define RT_PATH_MAX 512

extern int rt_failures;

/* RT_CHECK and RT_MUST: fg_test.h's CHECK and MUST, counting in rt_failures. */
#define FG_TEST_PREFIX "fg-rt-test: "
#define FG_TEST_FAILURES rt_failures
#include "fg_test.h"
#define RT_CHECK CHECK
#define RT_MUST MUST

/* Worker programs, from --workers GPU CPU DISK. */
extern const char *rt_worker[FG_NROLES];

/* Leftovers of a run: shm objects named for it, and its run dir. */
int rt_count_shm(const char *run_id);
int rt_dir_exists(const char *dir);

/* Wait (without sleeping blind) until process pid is gone; 0 ok, -1 timeout. */
int rt_wait_gone(pid_t pid, int timeout_ms);

/* A worker program started by hand: path --connect ep [--protocol-version
 * version], its stderr to errfile (NULL: ours), FLEXGEN_FAULT=fault (NULL:
 * none). */
pid_t rt_start_worker(const char *path, const char *ep, const char *version, const char *errfile, const char *fault);
/* A file's contents (heap; "" if unreadable). */
char *rt_slurp(const char *path);
/* Submit out = alpha*x + y (the AXPY test op) on the gpu or cpu worker. */
uint64_t rt_submit_axpy(fg_super *sup, fg_role role, fg_shm_handle x, fg_shm_handle y, fg_shm_handle out,
                        float alpha);
/* Run the supervisor until child pid exits; its wait status, or -1. */
int rt_pump_until_exit(fg_super *sup, pid_t pid, int timeout_ms);

int rt_test_shm(void);
int rt_test_kill(void);
int rt_test_coordkill(const char *self);
int rt_test_victim(void);
int rt_test_manual(void);
int rt_test_disk(void);
int rt_test_after(void);
int rt_test_peer(void);
int rt_test_deaths(void);
int rt_test_stuck(void);
int rt_test_duplicate(void);

#endif

/* fg_super_proc.h - the process-level chores of supervision, kept apart from
 * the protocol logic in fg_super.c: the private run directory and the sweep
 * of dead runs' directories, finding and spawning worker programs, and the
 * cleanup that runs on SIGINT/SIGTERM/exit(). Internal to the coordinator. */
#ifndef FG_SUPER_PROC_H
#define FG_SUPER_PROC_H

#include <stddef.h>
#include <sys/types.h>

#include "fg_common.h"

#define FG_SUP_PATH_MAX 512

/* ---- run directory ---------------------------------------------------- */

/* Make <base>/run-<run_id> (0700) with an "owner" file (pid, start time),
 * where base is $XDG_RUNTIME_DIR/flexgen or /tmp/flexgen-<uid>, itself 0700
 * and ours (refused otherwise). */
fg_status fg_sup_rundir_make(const char *run_id, char *dir, size_t cap);

/* Remove a run dir made above: its files, then the dir. */
void fg_sup_rundir_remove(const char *dir);

/* Remove run dirs whose owner is dead. Returns how many. */
int fg_sup_rundir_sweep(void);

/* ---- worker programs -------------------------------------------------- */

/* Resolve the path of `program` (e.g. "flexgen-gpu-worker"): explicit path,
 * else dir, else $FLEXGEN_WORKER_DIR, else the directory of /proc/self/exe.
 * Checks that it is executable. */
fg_status fg_sup_worker_path(const char *explicit_path, const char *dir, const char *program,
                             char *out, size_t cap);

/* fork + exec argv[0] with the death signal tied to this thread. *pidfd is
 * a pollable descriptor that becomes readable when the child exits, or -1
 * where the kernel has none (then poll waitpid). */
fg_status fg_sup_spawn(char *const argv[], pid_t *pid, int *pidfd);

/* "exited with status 3", "killed by signal 9 (Killed)". */
void fg_sup_describe_exit(int wstatus, char *out, size_t cap);

/* ---- cleanup on signals and exit() ------------------------------------ */

/* One record per live fg_super: what to remove and whom to kill if the
 * process goes down without fg_super_destroy. All paths are stored so the
 * signal handler only calls async-signal-safe functions. Handlers are
 * installed for SIGINT/SIGTERM only where nobody handles them yet. */
typedef struct fg_sup_cleanup fg_sup_cleanup;

fg_sup_cleanup *fg_sup_cleanup_new(const char *run_dir, int install_handlers);
void fg_sup_cleanup_set_ctl(fg_sup_cleanup *c, const char *ipc_path);
void fg_sup_cleanup_add_shm(fg_sup_cleanup *c, const char *shm_name);  /* "/flexgen-..." */
void fg_sup_cleanup_set_pid(fg_sup_cleanup *c, int role, pid_t pid);  /* 0: none */
/* Forget the record (after a normal destroy did the work); restores the
 * signal handlers when it was the last one. */
void fg_sup_cleanup_destroy(fg_sup_cleanup **c);

#endif

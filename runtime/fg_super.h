/* fg_super.h - worker supervision: the coordinator's side of the runtime.
 *
 * One fg_super per run. It sweeps what dead runs left behind, makes a private
 * run directory (0700), binds a ROUTER (ipc://<rundir>/ctl by default), starts
 * the three workers (or waits for ones started by hand with --connect),
 * creates the run's shm segments and tells every worker to map them, and then
 * carries commands: submit assigns a sequence number and sends (or queues),
 * poll/wait deliver completions.
 *
 * Supervision (Paranoid Pirate): heartbeats both ways every FG_HB_INTERVAL_MS;
 * a worker silent for FG_HB_LIVENESS intervals, a spawned one that exits,
 * or one that owes commands and answers none for cmd_timeout_ms while it
 * heartbeats (stuck in a command) is declared dead. A spawned worker is
 * restarted (a role that dies
 * max_restarts + 1 times in a row without answering a command, or
 * max_deaths times in the run, is given up: its commands fail with
 * FG_SUPER_EGAVEUP and the reason); a hand-started one is waited for, with
 * its exact command line in the log. A worker that sends a message that
 * does not decode, or says it got one, is treated as dead: a command or
 * its reply may be lost in it. When the new one says READY it gets the segment maps, then the
 * restore hook runs (the engine re-sends state, e.g. GPU-resident weights),
 * then every command it had in flight is re-issued. Commands are idempotent,
 * so a re-issued one is harmless. The worker's epoch travels in the top 16
 * bits of each command's flags and is echoed back, so a late reply from a dead
 * incarnation never completes a command re-issued to its successor.
 * A role has one worker: a second process that says READY for a role whose
 * worker lives is refused (FG_MSG_EROLE: it exits 2 with the holder's pid
 * and how to take over); after the holder's death a new one is taken.
 *
 * Threading: one thread, the owner, drives a fg_super (submit/poll/wait
 * from the same thread, and not from inside a completion callback's poll).
 * A heartbeat thread of the supervisor's own pumps it whenever the owner has
 * not for half a heartbeat interval, under the supervisor's lock, so the
 * owner may work as long as it likes between calls (a tier-store
 * conversion, loading weights) without its workers leaving for silence or
 * being declared dead. What that thread cannot do for the owner waits for
 * the owner's next call: a restart (spawned workers die with the thread
 * that spawned them, PR_SET_PDEATHSIG, so create the fg_super on a thread
 * that lives as long as the run) and a restarted worker's restore hook.
 *
 * Cleanup: destroy shuts the workers down, unlinks the segments and removes
 * the run directory; so does exit() while one is alive, and SIGINT/SIGTERM
 * where the program has no handler of its own for them (a program that has
 * one calls fg_super_destroy or exit() from its shutdown path). What a
 * SIGKILLed coordinator leaves is swept by the next run's fg_super_new.
 *
 * Errors: functions return fg_status with a message in fg_err_msg(); none
 * exits. */
#ifndef FG_SUPER_H
#define FG_SUPER_H

#include <stdint.h>
#include <sys/types.h>

#include "fg_common.h"
#include "fg_msg.h"
#include "fg_shm.h"

typedef struct fg_super fg_super;

/* One finished command, as poll and wait hand it over. */
typedef struct {
    uint64_t seq;
    fg_role role;
    int type;                       /* the command's fg_msg_type */
    int32_t status;                 /* 0 ok; else FG_MSG_E* from the worker's ERROR,
                                       or FG_SUPER_EGAVEUP */
    char error[FG_MSG_TEXT_MAX + 1];/* "" when status is 0 */
    uint64_t start_ns, end_ns;      /* on the worker, CLOCK_MONOTONIC */
    uint64_t busy_ns;               /* the worker's busy time so far */
    uint64_t submit_ns, complete_ns;/* on the coordinator, CLOCK_MONOTONIC */
    uint32_t reissues;              /* times it was sent again to a new worker */
    void *user;                     /* as given to submit */
} fg_super_done;

#define FG_SUPER_EGAVEUP 100        /* the role's worker could not be kept alive */

typedef void (*fg_super_done_fn)(void *ctx, const fg_super_done *d);

/* Called when a restarted worker of `role` is ready and has its segment maps,
 * before its in-flight commands are re-issued. Submit what it needs (e.g.
 * COPYs that reload GPU-resident weights); do not poll or wait here. An error
 * gives up on the role. */
typedef fg_status (*fg_super_restore_fn)(fg_super *sup, fg_role role, void *ctx);

/* The command deadline's default: a worker that owes commands and has
 * answered none for this long is stuck. Ten minutes is well past any one
 * command of the largest model on the slowest tier (a layer's disk read or
 * prefill on the CPU takes seconds to a minute), so only a handler that
 * never returns meets it. */
#define FG_SUPER_CMD_TIMEOUT_MS (10 * 60 * 1000)

/* All zero is a good default. */
typedef struct {
    unsigned roles;              /* bitmask of 1u << FG_ROLE_*; 0 = all three */
    int manual;                  /* 1: start nothing, wait for workers run by hand */
    unsigned attach;             /* roles (1u << FG_ROLE_*) started by hand, the
                                    others spawned; fg_super_new prints each one's
                                    command line and waits for it without limit */
    const char *endpoint;        /* NULL: ipc://<rundir>/ctl, which refuses peers of
                                    another user. Or e.g. "tcp://127.0.0.1:*" (port
                                    chosen by the OS); host * means 127.0.0.1. tcp
                                    has no peer credentials: any local user may
                                    connect to a loopback port */
    const char *worker_dir;      /* where flexgen-*-worker live. NULL:
                                    $FLEXGEN_WORKER_DIR, else the directory of
                                    this executable */
    const char *worker_path[FG_NROLES]; /* full path per role; beats worker_dir */
    const char *offload_dir;     /* passed to the disk worker as --offload-dir */
    const char *gpu_device;      /* passed to the gpu worker as --device (NULL: its default) */
    int ready_timeout_ms;        /* spawned worker: exec to READY. 0: 30000 */
    int max_restarts;            /* deaths in a row with no command done before
                                    giving up on a role. 0: 5 */
    int max_deaths;              /* deaths of a role in the whole run before
                                    giving up on it. 0: 20 */
    int cmd_timeout_ms;          /* the command deadline: a worker that owes
                                    commands and answers none for this long is
                                    declared dead and replaced. 0:
                                    FG_SUPER_CMD_TIMEOUT_MS; < 0: none */
    int no_signal_handlers;      /* 1: leave SIGINT/SIGTERM alone even where
                                    they have no handler */
    fg_super_restore_fn restore;
    void *restore_ctx;
} fg_super_opts;

typedef struct {
    uint64_t submitted, completed, failed, reissued;
    uint32_t deaths[FG_NROLES], restarts[FG_NROLES];
    uint32_t refused;            /* workers turned away (version, role) */
} fg_super_stats;

/* Sweep dead runs, make the run dir, bind, spawn and wait until every
 * spawned worker is READY (manual: return at once; see wait_ready). */
fg_status fg_super_new(const fg_super_opts *opts, fg_super **out);

/* Shut workers down (SHUTDOWN, then SIGKILL after a grace period), unlink
 * the segments, remove the run dir, restore signal handlers. NULLs *sup. */
void fg_super_destroy(fg_super **sup);

/* Wait until every managed role has a READY worker. timeout_ms < 0: forever. */
fg_status fg_super_wait_ready(fg_super *sup, int timeout_ms);

const char *fg_super_endpoint(const fg_super *sup);  /* what workers --connect to */
const char *fg_super_run_id(const fg_super *sup);
const char *fg_super_run_dir(const fg_super *sup);
pid_t fg_super_worker_pid(fg_super *sup, fg_role role);  /* 0 if none ready */
void fg_super_get_stats(fg_super *sup, fg_super_stats *st);
size_t fg_super_inflight(fg_super *sup);  /* submitted, not yet delivered */

/* Create shm segment "/flexgen-<runid>-<segname>" with data_bytes after its
 * header; every worker maps it (now, and again after a restart). *index is
 * the segment number for handles. */
fg_status fg_super_segment_new(fg_super *sup, const char *segname, uint64_t data_bytes,
                               uint32_t *index);

/* The coordinator's pointer to a handle's bytes (NULL if out of range). */
void *fg_super_ptr(fg_super *sup, fg_shm_handle h);

/* Queue a command (COPY, DISK_*, COMPUTE, CPU_ATTN; type and body filled in,
 * seq and flags other than FG_MSG_F_BARRIER are set here) for `role`. Sent at
 * once if that worker is ready, else when it is. *seq (may be NULL) gets the
 * number its completion will carry. */
fg_status fg_super_submit(fg_super *sup, fg_role role, const fg_msg *cmd, void *user,
                          uint64_t *seq);

/* Run the supervisor for up to timeout_ms (0: just what is ready; < 0: until
 * something completes), then hand every finished command not already taken
 * by wait to cb (may be NULL: dropped). Returns how many were handed over,
 * or -1 on a socket failure. cb may submit. */
int fg_super_poll(fg_super *sup, int timeout_ms, fg_super_done_fn cb, void *ctx);

/* Run the supervisor until command `seq` finishes (timeout_ms < 0: no limit)
 * and take its completion (it is then not handed to poll). FG_OK if it
 * succeeded; FG_ERUNTIME if it failed (out->status, out->error) or timed
 * out; FG_EINPUT if seq is unknown or already taken. out may be NULL. */
fg_status fg_super_wait(fg_super *sup, uint64_t seq, int timeout_ms, fg_super_done *out);

/* Without blocking: 1 if command seq has finished (take it with wait), 0 if
 * not yet, -1 if seq is unknown or taken. */
int fg_super_test(fg_super *sup, uint64_t seq);

/* Wait for every submitted command; FG_ERUNTIME names the first failure. */
fg_status fg_super_wait_all(fg_super *sup, int timeout_ms);

#endif

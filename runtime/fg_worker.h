/* fg_worker.h - the loop every worker runs, so that each worker's main.c
 * only lists what it can do.
 *
 * A worker is a DEALER (identity = role name) connected to the coordinator's
 * ROUTER. The loop's I/O thread owns the socket: it sends READY, answers
 * heartbeats, queues commands and sends one DONE or ERROR per command. Commands
 * run on `threads` executor threads, so heartbeats flow while a long command
 * runs. SHM_MAP is built in; commands flagged FG_MSG_F_BARRIER and SHM_MAP run
 * alone (after every earlier command ended, before any later one starts).
 *
 * Error policy: setup problems (bad flags, no socket) exit with a message;
 * anything a command does wrong comes back as an ERROR reply and the worker
 * carries on. Handlers return fg_status and leave the reason in fg_err_msg()
 * (per thread): FG_EINPUT -> ERROR code FG_MSG_EBADCMD, FG_ERUNTIME ->
 * FG_MSG_EIO. A type or op with no handler -> FG_MSG_EUNSUPPORTED,
 * "unknown op N". */
#ifndef FG_WORKER_H
#define FG_WORKER_H

#include "fg_common.h"
#include "fg_msg.h"
#include "fg_shm.h"

typedef struct fg_worker fg_worker;

/* Runs one command on an executor thread. */
typedef fg_status (*fg_worker_fn)(fg_worker *w, const fg_msg *cmd);

/* One op of COMPUTE or CPU_ATTN. */
typedef struct {
    uint32_t op;       /* FG_OP_* */
    const char *name;  /* for logs */
    fg_worker_fn fn;
} fg_worker_op;

/* What a worker program is. */
typedef struct {
    fg_role role;
    const char *program;   /* "flexgen-gpu-worker" */
    const char *summary;   /* one line for --help */
    const char *info;      /* READY info, e.g. "host backend" */
    uint64_t caps;         /* FG_CAP_* */
    int threads;           /* executor threads, >= 1; 1 keeps commands in order */
    int ordered_streams;   /* 1: commands of one stream (FG_MSG_STREAM) run in
                              order, different streams concurrently; 0: any
                              queued command may start on an idle executor */
    fg_worker_fn handlers[FG_MSG_NTYPES];  /* COPY, DISK_READ, ...; NULL: unsupported */
    const fg_worker_op *compute_ops;       /* COMPUTE, by op */
    size_t n_compute_ops;
    const fg_worker_op *attn_ops;          /* CPU_ATTN, by op */
    size_t n_attn_ops;
    /* Optional: after flags are parsed, before READY (a backend opens its
     * device here) and after the loop ends. A failing init is a setup
     * failure: the worker exits 1 with the message. */
    fg_status (*init)(fg_worker *w);
    void (*fini)(fg_worker *w);
    /* Optional: a shm segment was just mapped at [base, base + size) (a
     * backend registers it with the device for DMA). A failure refuses the
     * SHM_MAP with the message. */
    fg_status (*on_map)(fg_worker *w, void *base, uint64_t size);
    /* Optional: flags of this worker beside the loop's own. Called with each
     * flag the loop does not know and the argument after it (NULL if none);
     * returns how many arguments it took (1 or 2), 0 for a flag it does not
     * know either, or -1 after printing why the value is bad (exit 2). Runs
     * before init. options_help: their lines for --help. */
    int (*option)(const char *flag, const char *val);
    const char *options_help;
    /* Optional: `--profile` anywhere in argv hands the whole argv to this,
     * which measures the tier alone, prints the profile and returns the exit
     * status (every worker has one: disk_profile.c, gpu_profile.c,
     * cpu_profile.c). NULL: --profile says "not implemented yet" and exits 2. */
    int (*profile)(int argc, char **argv);
} fg_worker_def;

/* For a profile's last step: print j, one JSON object and a newline when
 * as_json (nothing else goes to stdout), else summary(j); free j. Returns
 * the exit status: 0, or 1 if stdout fails. */
struct json_t;
int fg_worker_profile_print(struct json_t *j, int as_json, void (*summary)(const struct json_t *j));

/* Parse argv (--connect ENDPOINT, --offload-dir DIR, --help, --profile,
 * hidden --protocol-version N, and def->option's flags), run the loop (or
 * def->profile), return the exit status. */
int fg_worker_main(const fg_worker_def *def, int argc, char **argv);

/* For handlers. */
/* A shm handle's bytes; NULL + fg_err_set if out of range or a device
 * handle (FG_SEG_DEVICE: the gpu worker's backend resolves those). */
void *fg_worker_ptr(fg_worker *w, fg_shm_handle h);
/* READY's info text (from init: the backend and device it opened). */
void fg_worker_set_info(fg_worker *w, const char *info);
const char *fg_worker_offload_dir(const fg_worker *w); /* "." unless --offload-dir */
void fg_worker_set_ctx(fg_worker *w, void *ctx);    /* backend state, from init */
void *fg_worker_ctx(const fg_worker *w);

/* Handlers more than one worker uses (fg_worker_ops.c). */
fg_status fg_worker_copy(fg_worker *w, const fg_msg *cmd);      /* COPY between shm buffers, memmove */
fg_status fg_worker_op_nop(fg_worker *w, const fg_msg *cmd);    /* FG_OP_NOP */
fg_status fg_worker_op_axpy(fg_worker *w, const fg_msg *cmd);   /* FG_OP_AXPY, fp32 */

#endif

/* fg_super_int.h - the supervisor's state, shared by its files and by
 * nobody else: fg_super.c (the protocol: READY, refusals, deaths, restart,
 * re-issue), fg_super_pump.c (the pump and its timers: heartbeats, silence,
 * the command deadline), fg_super_api.c (the window of commands and the
 * public calls on it) and fg_super_start.c (creating and destroying a run,
 * the heartbeat thread, worker command lines).
 *
 * Locking: one recursive mutex guards everything here. Every public call
 * takes it; the heartbeat thread takes it to pump while the owner is away
 * (converting a tier store, loading weights): then s->bg is set, and what
 * must run on the owner's thread (the restore hook, which touches the
 * owner's state, and spawning, whose death signal is tied to the spawning
 * thread) is left due for the owner's next pump. */
#ifndef FG_SUPER_INT_H
#define FG_SUPER_INT_H

#include <pthread.h>
#include <time.h>

#include "fg_super.h"
#include "fg_super_proc.h"

#define DEFAULT_READY_TIMEOUT_MS 30000
#define DEFAULT_MAX_RESTARTS 5
#define DEFAULT_MAX_DEATHS 20    /* deaths of one role in a whole run */
#define SHUTDOWN_GRACE_MS 5000   /* SHUTDOWN to SIGKILL at destroy */
#define WAITPID_POLL_MS 100      /* child checks where there is no pidfd */
#define FG_SUP_ID_MAX 64         /* a worker's routing id: "<role>.<pid>.<nonce>" */
/* The heartbeat thread pumps when the owner has not for this long, so a
 * heartbeat goes out at most about 1.5 intervals apart however long the
 * owner stays away. */
#define HB_THREAD_IDLE_MS (FG_HB_INTERVAL_MS / 2)
#define HB_THREAD_TICK_MS (FG_HB_INTERVAL_MS / 4)

typedef enum { C_PENDING, C_SENT, C_DONE } cmd_state;

typedef struct {
    fg_msg msg;          /* seq set; flags: the caller's BARRIER and stream only */
    fg_role role;
    cmd_state state;
    int internal;        /* an SHM_MAP of the supervisor's: never delivered */
    uint16_t epoch;      /* epoch of the worker it was last sent to */
    uint32_t sends;
    uint64_t sent_ns;    /* when it was last sent, for the command deadline */
    fg_super_done done;
} cmd;

typedef enum { W_ABSENT, W_STARTING, W_READY, W_FAILED } wstate;

typedef struct {
    int managed;
    int manual;                  /* started by hand (--attach, or opts.manual) */
    wstate state;
    char path[FG_SUP_PATH_MAX];  /* program, when spawning or printing how to */
    pid_t child;                 /* our child, 0 if none */
    int pidfd;                   /* -1 if none */
    uint64_t ready_deadline;     /* W_STARTING */
    char id[FG_SUP_ID_MAX];      /* routing id of the incarnation that said READY last */
    pid_t remote_pid;            /* from READY; kept after a death, for revive */
    uint64_t last_seen;
    uint64_t progress_ns;        /* its last reply, or when it last owed nothing */
    uint16_t epoch;              /* bumped on every READY */
    uint32_t readies;
    uint32_t deaths_in_row;      /* deaths with no reply in between */
    uint32_t deaths;             /* in the whole run */
    int spawn_due;               /* died while the heartbeat thread pumped */
    int restore_due;             /* READY again while the heartbeat thread pumped */
    int no_revive;               /* told to go after a protocol fault: wait for a READY */
    char last_death[160];
    char gone[FG_MSG_TEXT_MAX];  /* why it was given up */
} worker;

struct fg_super {
    fg_super_opts opts;
    char run_id[FG_SHM_RUNID_LEN + 1];
    char run_dir[FG_SUP_PATH_MAX];
    char endpoint[FG_SUP_PATH_MAX + 16];
    void *zctx, *router;
    worker w[FG_NROLES];
    fg_shm_table *segs;
    uint32_t nsegs;
    fg_sup_cleanup *cleanup;

    cmd **slots;                 /* the window */
    uint64_t cap, lo, hi;
    uint64_t *fifo;              /* seqs of DONE user commands, in order */
    size_t fifo_cap, fifo_head, fifo_len;
    size_t undone;               /* user commands not DONE */
    size_t undelivered;          /* user commands not yet taken */
    uint64_t next_hb;
    int in_restore;
    fg_super_stats stats;

    pthread_mutex_t mu;          /* recursive; see the top of this file */
    pthread_cond_t hb_cv;
    pthread_t hb_thread;
    int hb_started, hb_stop;
    int bg;                      /* the heartbeat thread is pumping */
    uint64_t last_pump;          /* end of the last pump, either thread */
    uint64_t sent_cmds;          /* commands sent, for FLEXGEN_FAULT=coord:... */
};

static inline uint64_t fg_sup_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define MS(x) ((uint64_t)(x) * 1000000ull)

static inline void fg_sup_lock(fg_super *s) { pthread_mutex_lock(&s->mu); }
static inline void fg_sup_unlock(fg_super *s) { pthread_mutex_unlock(&s->mu); }

/* What the files call of each other. fg_super.c: */
const char *fg_sup_program(int role);
void fg_sup_spawn_role(fg_super *s, int role);
void fg_sup_kill_child(fg_super *s, int role);
void fg_sup_reap(fg_super *s, int role, int wstatus);
void fg_sup_send_plain(fg_super *s, int role, fg_msg_type type);
void fg_sup_send_cmd(fg_super *s, cmd *c, int extra_flags);
void fg_sup_send_map(fg_super *s, int role, uint32_t idx, const fg_shm_seg *seg);
int fg_sup_can_send(const fg_super *s, int role);  /* READY, nothing due before it */
void fg_sup_on_message(fg_super *s, const char *id, int rc, const fg_msg *m);
long fg_sup_finish_ready(fg_super *s, int role);
void fg_sup_role_down(fg_super *s, int role, const char *why);
/* The role's worker is dead (`death`, short, for a give-up message; `why`
 * for the log): a child of ours is killed first; a hand-started one that
 * may still run is asked to go (SHUTDOWN) and never taken back when
 * ask_to_go; then role_down. */
void fg_sup_declare_dead(fg_super *s, int role, const char *death, const char *why, int ask_to_go);
/* If the role's child has exited: collect it, put the role down, 1. */
int fg_sup_collect_child(fg_super *s, int role);
/* fg_super_start.c: */
int fg_sup_worker_argv(fg_super *s, int role, char **argv);  /* NULL-ended; returns argc */
void fg_sup_announce_manual(fg_super *s, int role);
/* fg_super_api.c: */
uint64_t fg_sup_slot_add(fg_super *s, cmd *c);
cmd *fg_sup_slot_get(const fg_super *s, uint64_t seq);
void fg_sup_slot_free(fg_super *s, uint64_t seq);
void fg_sup_fifo_push(fg_super *s, uint64_t seq);
/* fg_super_pump.c: */
int fg_sup_pump(fg_super *s, int timeout_ms);

#endif

/* fg_msg.h - the control-plane protocol between the coordinator and the
 * workers: the one place that lists every message and its fields.
 *
 * Transport: ZeroMQ. The coordinator binds a ROUTER; each worker connects a
 * DEALER whose identity is its role name ("gpu", "cpu", "disk"). One message
 * is one frame (the ROUTER adds the identity frame in front).
 *
 * Every message starts with a fixed little-endian header (40 bytes):
 *
 *   off size field
 *    0   4   magic      0x4d474c46 ("FLGM" as bytes 46 4c 47 4d)
 *    4   2   version    FG_PROTO_VERSION; the first 8 bytes keep this layout
 *                       in every version, so a peer of another version can
 *                       always be told what is wrong
 *    6   2   type       fg_msg_type
 *    8   8   seq        command sequence number (0 for READY, HEARTBEAT,
 *                       SHUTDOWN); a DONE or ERROR carries its command's seq
 *   16   4   flags      FG_MSG_F_*; bits 8..15 the stream (commands of one
 *                       stream run in order); bits 16..31 the worker's epoch, echoed
 *                       in the DONE/ERROR that answers a command
 *   20   4   body_len   bytes after the header; must be exactly what is left
 *   24   8   after[0]   a command runs only once the commands after[0] and
 *   32   8   after[1]   after[1] (sent earlier to the same worker; 0: none)
 *                       have ended: cross-stream dependencies, as a CUDA
 *                       stream waits on another's event, so the coordinator
 *                       can queue a store behind a compute without a round
 *                       trip. Each is 0 or less than seq; 0 in non-commands
 *
 * A handle (20 bytes) is: u32 segment, u64 offset, u64 nbytes (fg_shm.h).
 * Strings travel as u16 length + bytes, no NUL, no embedded NUL.
 *
 * Bodies, in order (all integers little-endian):
 *
 *   READY      w->c  u32 role, u32 proto_version, u32 pid, u32 threads,
 *                    u64 caps (FG_CAP_*), str info (<= FG_MSG_INFO_MAX)
 *   HEARTBEAT  both  (empty)
 *   DONE       w->c  i32 status (0), u64 start_ns, u64 end_ns, u64 busy_ns
 *                    (CLOCK_MONOTONIC ns of the command's start and end, and
 *                    the worker's total busy time so far)
 *   ERROR      both  i32 code (FG_MSG_E*), str text (<= FG_MSG_TEXT_MAX)
 *   SHUTDOWN   c->w  (empty)
 *   SHM_MAP    c->w  u32 segment, u64 size, str name (<= FG_MSG_NAME_MAX):
 *                    attach shm segment `name` as index `segment`; answered
 *                    with DONE or ERROR like a command
 *   COPY       c->w  u32 n (1..FG_MSG_MAX_HANDLES), n x (handle src,
 *                    handle dst): copy each src to its dst (same nbytes).
 *                    The tier copies ("load", "store") of the schedule
 *   DISK_READ  c->w  u32 file_id, u64 file_offset, handle buf, str path
 *   DISK_WRITE c->w  (<= FG_MSG_PATH_MAX): read or write buf.nbytes bytes at
 *                    file_offset of the file. A relative path is under the
 *                    disk worker's --offload-dir; an empty one names the file
 *                    by id, "<offload-dir>/file-<file_id>"
 *   COMPUTE    c->w  u32 op (FG_OP_*), u32 layer, u32 gpu_batch,
 *   CPU_ATTN   c->w  u32 n_in, u32 n_out (each <= FG_MSG_MAX_HANDLES),
 *                    n_in x handle, n_out x handle,
 *                    u32 params_len (<= FG_MSG_MAX_PARAMS), params bytes.
 *                    Generic: a new op needs a new FG_OP_ number, not a new
 *                    message type
 *
 * Every command (SHM_MAP, COPY, DISK_*, COMPUTE, CPU_ATTN) is answered by
 * exactly one DONE or ERROR with the same seq, and is idempotent: it reads
 * fixed inputs and writes fixed outputs, so the coordinator may re-issue it
 * to a restarted worker.
 *
 * Return codes (zproto's convention): 0 ok, -1 nothing there / interrupted /
 * buffer too small, -2 malformed. A decoder never trusts a length. */
#ifndef FG_MSG_H
#define FG_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "fg_shm.h"

#define FG_PROTO_MAGIC 0x4d474c46u
#define FG_PROTO_VERSION 8u   /* 8: MOE_ROUTE, MOE_CPU, MLP_SPLIT and their ECOUNT, XW, EOUT slots; 7: experts in the model description, the router slot, 28 handles */

#define FG_MSG_HEADER_BYTES 40
#define FG_MSG_MAX_AFTER 2
#define FG_MSG_HANDLE_BYTES 20
#define FG_MSG_MAX_HANDLES 28     /* per direction in COMPUTE, pairs in COPY (a whole LAYER: 21 weight roles + h, mask, k and v cache = 25) */
#define FG_MSG_MAX_PARAMS 256     /* bytes of op parameters */
#define FG_MSG_INFO_MAX 128
#define FG_MSG_TEXT_MAX 512
#define FG_MSG_NAME_MAX 255
#define FG_MSG_PATH_MAX 1024
#define FG_MSG_MAX_BYTES 2048     /* no valid message is longer */

/* Heartbeats (Paranoid Pirate): each side sends HEARTBEAT every interval;
 * the coordinator declares a worker dead after FG_HB_LIVENESS silent
 * intervals, a worker gives up on a coordinator after FG_HB_WORKER_LIVENESS
 * (longer: a coordinator busy between polls must not lose its workers). Any
 * message counts as a sign of life. */
#define FG_HB_INTERVAL_MS 1000
#define FG_HB_LIVENESS 3
#define FG_HB_WORKER_LIVENESS 10

typedef enum {
    FG_MSG_READY = 1,
    FG_MSG_HEARTBEAT = 2,
    FG_MSG_DONE = 3,
    FG_MSG_ERROR = 4,
    FG_MSG_SHUTDOWN = 5,
    FG_MSG_SHM_MAP = 6,
    FG_MSG_COPY = 7,
    FG_MSG_DISK_READ = 8,
    FG_MSG_DISK_WRITE = 9,
    FG_MSG_COMPUTE = 10,
    FG_MSG_CPU_ATTN = 11,
    FG_MSG_NTYPES = 12, /* one past the last */
} fg_msg_type;

/* Header flags. Bits 16..31 of a command's flags are the epoch: the
 * coordinator's count of that worker's incarnations. A worker echoes the
 * command's flags in its DONE or ERROR, so a late reply from a dead
 * incarnation is told apart from its successor's. */
#define FG_MSG_F_REISSUE 0x1u  /* a command sent again to a restarted worker */
#define FG_MSG_F_BARRIER 0x2u  /* run alone: after every earlier command ended,
                                  before any later one starts */
/* Bits 8..15: the command's stream. A worker with several executor threads
 * runs the commands of one stream in order and those of different streams
 * concurrently, as a GPU runs its compute stream beside its copy engines. */
#define FG_MSG_STREAM_SHIFT 8
#define FG_MSG_STREAM_MASK 0xff00u
#define FG_MSG_STREAM(flags) ((int)(((flags) & FG_MSG_STREAM_MASK) >> FG_MSG_STREAM_SHIFT))
#define FG_MSG_EPOCH_SHIFT 16
#define FG_MSG_EPOCH(flags) ((uint16_t)((flags) >> FG_MSG_EPOCH_SHIFT))

/* Roles: the DEALER identity is fg_role_name(role). */
typedef enum { FG_ROLE_GPU = 0, FG_ROLE_CPU = 1, FG_ROLE_DISK = 2, FG_NROLES = 3 } fg_role;

/* Capabilities announced in READY. */
#define FG_CAP_COPY (1ull << 0)
#define FG_CAP_COMPUTE (1ull << 1)
#define FG_CAP_CPU_ATTN (1ull << 2)
#define FG_CAP_DISK (1ull << 3)
#define FG_CAP_CUDA (1ull << 4)

/* ERROR codes. */
#define FG_MSG_EBADCMD 1      /* a field is wrong: handle out of range, sizes differ */
#define FG_MSG_EUNSUPPORTED 2 /* this worker has no handler for the type or op */
#define FG_MSG_EIO 3          /* the system failed: read, write, mmap */
#define FG_MSG_EVERSION 4     /* protocol version mismatch: refused */
#define FG_MSG_EROLE 5        /* unknown or unexpected role */

/* Op codes of COMPUTE and CPU_ATTN. 0..99 are runtime test ops; the engine
 * numbers its ops from 100 up. */
#define FG_OP_NOP 0   /* no inputs, no outputs: round-trip benchmarks */
#define FG_OP_AXPY 1  /* out[0] = alpha * in[0] + in[1]; fp32, params: f32 alpha */
#define FG_OP_ENGINE_FIRST 100

typedef struct {
    uint32_t role, proto_version, pid, threads;
    uint64_t caps;
    char info[FG_MSG_INFO_MAX + 1];
} fg_msg_ready;

typedef struct {
    int32_t status;
    uint64_t start_ns, end_ns, busy_ns;
} fg_msg_done;

typedef struct {
    int32_t code;
    char text[FG_MSG_TEXT_MAX + 1];
} fg_msg_error;

typedef struct {
    uint32_t segment;
    uint64_t size;
    char name[FG_MSG_NAME_MAX + 1];
} fg_msg_shm_map;

typedef struct {
    uint32_t n;
    fg_shm_handle src[FG_MSG_MAX_HANDLES], dst[FG_MSG_MAX_HANDLES];
} fg_msg_copy;

typedef struct {                       /* DISK_READ and DISK_WRITE */
    uint32_t file_id;
    uint64_t file_offset;
    fg_shm_handle buf;                 /* nbytes = bytes to transfer */
    char path[FG_MSG_PATH_MAX + 1];    /* "" : name the file by file_id */
} fg_msg_disk;

typedef struct {                       /* COMPUTE and CPU_ATTN */
    uint32_t op, layer, gpu_batch;
    uint32_t n_in, n_out;
    fg_shm_handle in[FG_MSG_MAX_HANDLES], out[FG_MSG_MAX_HANDLES];
    uint32_t params_len;
    uint8_t params[FG_MSG_MAX_PARAMS];
} fg_msg_compute;

typedef struct {
    uint16_t version;  /* on decode: the sender's; encode uses fg_msg_version */
    uint16_t type;     /* fg_msg_type */
    uint64_t seq;
    uint32_t flags;
    uint64_t after[FG_MSG_MAX_AFTER];  /* commands that must end first (0: none) */
    union {
        fg_msg_ready ready;
        fg_msg_done done;
        fg_msg_error error;
        fg_msg_shm_map map;
        fg_msg_copy copy;
        fg_msg_disk disk;
        fg_msg_compute compute;
    } u;
} fg_msg;

/* The version this process speaks (FG_PROTO_VERSION; a worker's hidden
 * --protocol-version flag changes it to test the refusal path). */
extern uint16_t fg_msg_version;

const char *fg_msg_type_name(int type);  /* "COPY", ... or "?" */
const char *fg_role_name(int role);      /* "gpu", "cpu", "disk" or "?" */
int fg_role_from_name(const char *name); /* -1 if unknown */
int fg_msg_is_command(int type);         /* answered by DONE/ERROR */

/* Clear m and set its type. */
void fg_msg_init(fg_msg *m, fg_msg_type type);

/* Builders for the common cases; they return -2 when a list is full. */
int fg_msg_copy_add(fg_msg *m, fg_shm_handle src, fg_shm_handle dst);
int fg_msg_compute_add_in(fg_msg *m, fg_shm_handle h);
int fg_msg_compute_add_out(fg_msg *m, fg_shm_handle h);
int fg_msg_compute_set_params(fg_msg *m, const void *p, uint32_t len);

/* Encode m into buf (cap bytes); *len gets the size. 0 ok, -1 buffer too
 * small, -2 m itself is malformed (count or string too long, bad type). */
int fg_msg_encode(const fg_msg *m, uint8_t *buf, size_t cap, size_t *len);

/* Decode len bytes into m. 0 ok, -2 malformed: short, wrong magic, wrong
 * version, unknown type, body_len not what is left, a count or string
 * length too large or past the end, trailing bytes. */
int fg_msg_decode(const uint8_t *buf, size_t len, fg_msg *m);

/* Read the stable first 8 bytes. 0 ok (magic matched), -2 otherwise. Lets a
 * receiver name the peer's version when decode refused the message. */
int fg_msg_peek(const uint8_t *buf, size_t len, uint16_t *version, uint16_t *type);

/* ---- over ZeroMQ (fg_msg_zmq.c) --------------------------------------- */

/* Send m on a DEALER (identity NULL) or to `identity` on a ROUTER.
 * zmq_flags: 0 or ZMQ_DONTWAIT. 0 ok, -1 send failed (errno from zmq),
 * -2 m is malformed. */
int fg_msg_send(void *sock, const char *identity, const fg_msg *m, int zmq_flags);

/* Receive one message. On a ROUTER pass identity/idcap to get the sender's
 * identity (NUL-terminated, truncated to idcap-1). 0 ok, -1 nothing
 * (EAGAIN with ZMQ_DONTWAIT, EINTR, closed), -2 malformed: then
 * m->version/m->type hold what the header said if the magic matched
 * (version 0 if not), so a version mismatch can be reported. */
int fg_msg_recv(void *sock, char *identity, size_t idcap, fg_msg *m, int zmq_flags);

/* One-line human description, for logs: "COPY seq=12 n=1". */
void fg_msg_describe(const fg_msg *m, char *out, size_t cap);

/* Self-test: every type through encode/decode and over inproc:// and ipc://
 * socket pairs, and the malformed cases. Prints what fails; 0 if all pass. */
int fg_msg_selftest(int verbose);

/* Write one encoded sample of every type into dir (a fuzzing corpus). */
int fg_msg_write_samples(const char *dir);

#endif

/* fg_shm.h - the data plane: POSIX shared-memory segments, tensor handles,
 * the layout function every process calls, and the sweep of dead runs.
 *
 * A segment is a POSIX shm object named "/flexgen-<runid>-<segname>", mode
 * 0600, created by the coordinator and unlinked by it at exit. Its first
 * FG_SHM_HEADER_BYTES hold a header (magic, format version, sizes, index,
 * creator pid and start time); tensors live after it at FG_SHM_ALIGN-aligned
 * offsets.
 * Workers attach by name and refuse a segment whose header does not match
 * (foreign object, other format version, other run, dead creator).
 *
 * Handles {segment, offset, nbytes} are what travel in messages; offset is
 * from the start of the segment (so the first usable offset is
 * FG_SHM_HEADER_BYTES). A table maps segment indices to attached segments and
 * resolves handles to pointers with bounds checks.
 *
 * Errors: functions return fg_status and leave a message in fg_err_msg();
 * none of them exits. */
#ifndef FG_SHM_H
#define FG_SHM_H

#include <stdint.h>
#include <sys/types.h>

#include "fg_common.h"

#define FG_SHM_MAGIC 0x4d48534e4758464cULL /* "LFXGNSHM" little-endian */
#define FG_SHM_FORMAT_VERSION 1u
#define FG_SHM_ALIGN 4096u         /* O_DIRECT and page pinning granularity */
#define FG_SHM_HEADER_BYTES 4096u  /* the header page; data starts here */
#define FG_SHM_PREFIX "flexgen-"   /* every object: /dev/shm/flexgen-... */
#define FG_SHM_RUNID_LEN 16        /* hex characters of a run id */
#define FG_SHM_SEGNAME_MAX 64      /* [A-Za-z0-9_.-], 1..64 characters */
#define FG_SHM_NAME_MAX 96         /* "/flexgen-<runid>-<segname>" + NUL */
#define FG_SHM_MAX_SEGMENTS 63     /* shm segments per run: indices 0..62 */
/* The segment number of a handle into the gpu worker's device memory: never
 * a shm segment, so the two can not collide. Defined here, beside the shm
 * limit, so that there is one place for both. */
#define FG_SEG_DEVICE FG_SHM_MAX_SEGMENTS

/* x rounded up to a multiple of FG_SHM_ALIGN: where the next tensor may start. */
static inline uint64_t fg_shm_align_up(uint64_t x) { return (x + FG_SHM_ALIGN - 1) & ~(uint64_t)(FG_SHM_ALIGN - 1); }

/* A tensor reference: bytes [offset, offset + nbytes) of segment `segment`. */
typedef struct {
    uint32_t segment;
    uint64_t offset;   /* from the segment start, FG_SHM_ALIGN-aligned by layout */
    uint64_t nbytes;
} fg_shm_handle;

/* ---- run ids and process liveness -------------------------------------- */

/* A fresh random run id: FG_SHM_RUNID_LEN hex characters + NUL. */
fg_status fg_shm_run_id_new(char out[FG_SHM_RUNID_LEN + 1]);

/* Start time of a process (field 22 of /proc/PID/stat, clock ticks since
 * boot): with the pid it names one process for good. 0 when there is none. */
uint64_t fg_proc_start_ticks(pid_t pid);

/* 1 if process `pid` exists, is not a zombie and (when start_ticks != 0)
 * started at start_ticks; 0 otherwise. */
int fg_proc_alive(pid_t pid, uint64_t start_ticks);

/* ---- segments ---------------------------------------------------------- */

typedef struct fg_shm_seg fg_shm_seg;

/* Create, size and map "/flexgen-<run_id>-<segname>" with data_bytes of room
 * after the header (rounded up to FG_SHM_ALIGN). The caller owns it: destroy
 * unmaps and unlinks. Fails if the name exists. */
fg_status fg_shm_create(const char *run_id, const char *segname, uint32_t index,
                        uint64_t data_bytes, fg_shm_seg **out);

/* Bytes a segment of data_bytes takes in /dev/shm: header + rounded data. */
uint64_t fg_shm_total_bytes(uint64_t data_bytes);

/* Is there room in /dev/shm (the tmpfs behind shm_open) for need_bytes?
 * tmpfs hands out pages on first touch, so a segment that does not fit is
 * created without complaint and kills the run with SIGBUS later: callers
 * ask first. FG_ERUNTIME with the numbers if not (what: the breakdown, for
 * the message); FG_OK if it fits or /dev/shm cannot be measured. */
fg_status fg_shm_check_room(uint64_t need_bytes, const char *what);

/* Map an existing segment by its full name ("/flexgen-..."). Validates the
 * header: magic, format version, sizes, the expected index (if expect_index
 * != UINT32_MAX) and that the creator is alive. Destroy only unmaps. */
fg_status fg_shm_attach(const char *name, uint32_t expect_index, fg_shm_seg **out);

/* Page tables for the whole mapping, filled by a background thread: for a
 * process that touches a segment here and there. */
void fg_shm_populate_async(const fg_shm_seg *seg);
/* Every page of [base, base+len) touched (read) now, so none faults later
 * inside a run: for memory a process streams through. Costs a first touch
 * per page, which a virtualised MMU makes dear: call it in setup. */
void fg_mem_prefault(void *base, size_t len);

/* Unmap; also unlink when this process created the segment. */
void fg_shm_destroy(fg_shm_seg **seg);

void *fg_shm_base(const fg_shm_seg *seg);        /* start of the mapping (header) */
uint64_t fg_shm_size(const fg_shm_seg *seg);     /* whole mapping, header included */
uint32_t fg_shm_index(const fg_shm_seg *seg);
const char *fg_shm_name(const fg_shm_seg *seg);  /* "/flexgen-<runid>-<segname>" */

/* Build "/flexgen-<run_id>-<segname>" into out (FG_SHM_NAME_MAX bytes),
 * checking both parts. */
fg_status fg_shm_name_make(const char *run_id, const char *segname, char *out);

/* ---- handle resolution -------------------------------------------------- */

/* Segment index -> attached segment. Not thread-safe for add/remove; lookups
 * may run concurrently with each other. */
typedef struct fg_shm_table fg_shm_table;
fg_shm_table *fg_shm_table_new(void);
void fg_shm_table_destroy(fg_shm_table **t);  /* destroys every segment in it */
/* Takes ownership. Replaces (and destroys) a segment already at that index. */
fg_status fg_shm_table_add(fg_shm_table *t, fg_shm_seg *seg);
fg_shm_seg *fg_shm_table_get(const fg_shm_table *t, uint32_t index);

/* Pointer to the handle's bytes, or NULL (message in fg_err_msg()) if the
 * segment is unknown or the range leaves the data area. */
void *fg_shm_resolve(const fg_shm_table *t, fg_shm_handle h);

/* ---- layout ------------------------------------------------------------ */

/* One region to place: name and size in, offset out. */
typedef struct {
    const char *name;  /* unique within one layout call */
    uint64_t nbytes;
    uint64_t offset;   /* out: FG_SHM_ALIGN-aligned, >= FG_SHM_HEADER_BYTES */
} fg_shm_region;

/* Place regions in the given order, each at the next FG_SHM_ALIGN boundary
 * after FG_SHM_HEADER_BYTES. *data_bytes gets the room the segment needs
 * after its header (pass it to fg_shm_create). Deterministic: same list,
 * same offsets, in every process. Refuses duplicate names and overflow. */
fg_status fg_shm_layout(fg_shm_region *regions, size_t n, uint64_t *data_bytes);

/* The handle of region `name` in segment `segment`; nbytes 0 if absent. */
fg_shm_handle fg_shm_layout_handle(const fg_shm_region *regions, size_t n,
                                   uint32_t segment, const char *name);

/* ---- sweep ------------------------------------------------------------- */

/* Unlink every /dev/shm/flexgen-* object whose creator is dead (and, with
 * a header that is not ours at all, that is older than a minute so a run
 * being created is left alone). Returns how many were removed. */
int fg_shm_sweep(void);

#endif

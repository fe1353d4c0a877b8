/* fg_backend.h - the gpu_worker's backends, ggml-style: a backend is one
 * `static const` table of function pointers plus a context pointer, chosen
 * when the worker starts (--device) and named in its READY. The worker never
 * touches device memory itself: copies between shared memory and the
 * device, device pointers and synchronisation are the backend's, beside its
 * ops. gpu_ops.c decodes and checks every command (fg_op_args against the
 * op table: handle counts, sizes against the shapes, arena ranges, rows
 * against the workspace, the model against DEVICE_INIT's) and then calls a
 * slot here, so a backend only moves bytes and computes.
 *
 * The host backend (backend_host.c) is the reference: "device memory" is a
 * heap arena, a copy is a memcpy and its streams are already in order. A
 * cuda backend fills the same table (cudaMemcpyAsync on the copy streams,
 * kernels on the compute stream) and a test runs each op on both.
 *
 * Streams: 0 compute, 1 host-to-device, 2 device-to-host (the command's
 * FG_MSG_STREAM). An async slot may return before the bytes land; the
 * worker calls synchronize(stream) before it answers the command, so a DONE
 * always means done.
 *
 * Op shapes: B sequences, S new tokens each, H hidden, V vocabulary, Tmax
 * cache positions; a->in[i] / a->out[i] are the op's slots in the table's
 * order (fg_engine_ops.h), resolved through dev_ptr; weights also sit in
 * a->lw / a->gw, the mask in a->st.mask. An op's output may be its input (h
 * in place); a backend reads all of an input before it writes an output.
 *
 * Errors: FG_EINPUT for what the command got wrong that only the backend can
 * see (an id outside the vocabulary), FG_ERUNTIME when the device fails;
 * message via fg_err_set. Never exit. */
#ifndef FG_BACKEND_H
#define FG_BACKEND_H

#include "fg_op_args.h"

/* One op: reads a->in, writes a->out. */
typedef fg_status (*fg_backend_op_fn)(void *ctx, const fg_op_args *a);

typedef struct {
    const char *name;  /* "host", "cuda": --device, logs */
    /* 1 when this backend computes and copies on the host's own CPU cores,
     * the ones the cpu and disk workers use, so its work does not overlap
     * theirs (the host backend); 0 for a device of its own (a GPU). The
     * cost model reads it from the gpu worker's --profile. */
    int shares_host_cpu;
    /* The weight formats (common/fg_fmt.h) its ops read, a bit each: an op
     * whose description names another is refused (FG_EINPUT) before it
     * runs. */
    uint32_t formats;

    /* At worker start, before READY: open the device, make *ctx, and say in
     * info (for READY and the coordinator's log) what was opened. A failure
     * is a setup failure (the worker exits with the message). */
    fg_status (*open)(void **ctx, char *info, size_t info_cap);
    /* At worker exit: free everything ctx holds. */
    void (*close)(void *ctx);

    /* Workspace bytes device_init adds to the arena for max_rows rows of
     * model c: the device's function in fg_devsize.h, which the
     * coordinator's memory plan calls too, so the budget it checks is the
     * one the backend allocates. */
    uint64_t (*workspace_bytes)(const fg_model_config *c, uint32_t max_rows);
    /* DEVICE_INIT with params other than the current ones (gpu_ops.c answers
     * a repeat itself). An arena of p->arena_bytes and the workspace, in
     * place of what there was. Over p->budget_bytes (0: no limit) ->
     * FG_EINPUT naming the numbers, and the old arena stays. */
    fg_status (*device_init)(void *ctx, const fg_op_init *p, const fg_model_config *c);
    /* Device bytes (arena + workspace): held now, and the most ever held. */
    uint64_t (*mem_bytes)(const void *ctx, int peak);

    /* ---- data movement; offsets are into the arena, ranges checked by the
     * caller ---- */
    /* Pointer to arena byte `off` as the op kernels take it. */
    void *(*dev_ptr)(void *ctx, uint64_t off);
    /* Optional: make host memory (a shm segment, as it is mapped) a DMA
     * source and destination; NULL where nothing is needed. */
    fg_status (*register_host)(void *ctx, void *host, uint64_t n);
    /* n bytes shm -> device, device -> shm, device -> device, on `stream`. */
    fg_status (*set_async)(void *ctx, uint64_t dst_off, const void *src, uint64_t n, int stream);
    fg_status (*get_async)(void *ctx, void *dst, uint64_t src_off, uint64_t n, int stream);
    fg_status (*copy_async)(void *ctx, uint64_t dst_off, uint64_t src_off, uint64_t n, int stream);
    /* Wait until everything queued on `stream` has ended. */
    fg_status (*synchronize)(void *ctx, int stream);

    /* ---- compute: one slot per engine op, by FG_OPI(op); NULL for an op
     * this backend does not run (DEVICE_INIT is device_init above; the cpu
     * worker's ops have no slot here) ---- */
    fg_backend_op_fn ops[FG_NUM_ENGINE_OPS];
} fg_backend;

/* The backend called `name` (cuda: its module loaded now, once); NULL and a
 * message naming the ones built, or why the module did not load. */
const fg_backend *fg_backend_find(const char *name);
/* A symbol of the cuda module (fg_cuda.h's baselines), loading it; NULL
 * where CUDA is not built or the module does not load. */
void *fg_backend_cuda_sym(const char *name);

/* Which device is built, present or the default, and each one's workspace:
 * fg_devsize.h, shared with the coordinator. */

extern const fg_backend fg_backend_host;
extern const fg_backend fg_backend_cuda;   /* in the cuda module only: reach it through fg_backend_find */

#endif

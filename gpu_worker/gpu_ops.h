/* gpu_ops.h - the gpu_worker's commands as worker handlers: COPY between
 * shared memory and device memory, DEVICE_INIT and the compute ops, all run
 * on the backend chosen at start (fg_backend.h). worker_main.c lists them. */
#ifndef GPU_OPS_H
#define GPU_OPS_H

#include "fg_backend.h"
#include "fg_worker.h"

/* The worker's --device flag (fg_worker_def.option). */
int fg_gpu_option(const char *flag, const char *val);
/* The worker's init and fini hooks: open and close the backend. */
fg_status fg_gpu_open(fg_worker *w);
void fg_gpu_close(fg_worker *w);
/* The worker's on_map hook: the backend registers a shm segment for DMA. */
fg_status fg_gpu_on_map(fg_worker *w, void *base, uint64_t size);

/* COPY: each pair shm -> device, device -> shm, device -> device (or shm ->
 * shm) through the backend, on the command's stream. */
fg_status fg_gpu_copy(fg_worker *w, const fg_msg *cmd);
/* FG_OP_DEVICE_INIT. */
fg_status fg_gpu_device_init(fg_worker *w, const fg_msg *cmd);
/* Every other gpu op of the table: one handler that checks the command and
 * calls the backend's slot for its op. */
fg_status fg_gpu_op(fg_worker *w, const fg_msg *cmd);

/* The end of every compute command, once checked: op a on backend be (its
 * slot, or FG_EINPUT where the backend has none), then a wait for the
 * stream. --profile times this same call. */
fg_status fg_gpu_run_op(const fg_backend *be, void *ctx, const fg_op_args *a, int stream);

/* `flexgen-gpu-worker --profile ...` (gpu_profile.c): the worker's
 * fg_worker_def.profile. */
int fg_gpu_profile_main(int argc, char **argv);

/* Device bytes the backend holds (arena + workspace), now or at peak. */
uint64_t fg_gpu_mem_bytes(fg_worker *w, int peak);

#endif

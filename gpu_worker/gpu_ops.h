/* gpu_ops.h - the gpu_worker's engine ops (fg_engine_ops.h) as worker
 * handlers: DEVICE_INIT and the compute ops, run on the backend chosen at
 * start (fg_backend.h). worker_main.c lists them. */
#ifndef GPU_OPS_H
#define GPU_OPS_H

#include "fg_worker.h"

/* The worker's init and fini hooks: open and close the backend. */
fg_status fg_gpu_open(fg_worker *w);
void fg_gpu_close(fg_worker *w);

/* FG_OP_DEVICE_INIT. */
fg_status fg_gpu_device_init(fg_worker *w, const fg_msg *cmd);
/* FG_OP_EMBED, ATTN, ATTN_QKV, ATTN_OUT, MLP, LM_HEAD: one handler that
 * checks the command and calls the backend's slot for cmd's op. */
fg_status fg_gpu_op(fg_worker *w, const fg_msg *cmd);

/* Device bytes the backend holds (arena + workspace), now or at peak. */
uint64_t fg_gpu_mem_bytes(fg_worker *w, int peak);

#endif

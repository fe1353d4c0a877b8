/* worker_main.c - flexgen-gpu-worker: owns the accelerator. This file only
 * says what the worker can do; the loop (heartbeats, queue, replies) is
 * runtime/fg_worker_loop.c, the engine ops are gpu_ops.c and the compute
 * backends are backend_*.c here (fg_backend.h). Three executor threads run
 * three streams as a GPU does: compute, host-to-device copies and
 * device-to-host copies (the engine tags each command with its stream);
 * within a stream, in order. */
#include "fg_engine_ops.h"
#include "fg_worker.h"
#include "gpu_ops.h"

static const fg_worker_op compute_ops[] = {
    {FG_OP_NOP, "nop", fg_worker_op_nop},
    {FG_OP_AXPY, "axpy", fg_worker_op_axpy},
    {FG_OP_DEVICE_INIT, "device_init", fg_gpu_device_init},
    {FG_OP_EMBED, "embed", fg_gpu_op},
    {FG_OP_ATTN, "attn", fg_gpu_op},
    {FG_OP_ATTN_QKV, "attn_qkv", fg_gpu_op},
    {FG_OP_ATTN_OUT, "attn_out", fg_gpu_op},
    {FG_OP_MLP, "mlp", fg_gpu_op},
    {FG_OP_LAYER, "layer", fg_gpu_op},
    {FG_OP_LM_HEAD, "lm_head", fg_gpu_op},
    {FG_OP_SAMPLE, "sample", fg_gpu_op},
};

int main(int argc, char **argv) {
    static fg_worker_def def = {
        .role = FG_ROLE_GPU,
        .program = "flexgen-gpu-worker",
        .summary = "FlexGen's GPU worker: owns the accelerator's memory and compute.",
        .info = "host backend",
        .caps = FG_CAP_COPY | FG_CAP_COMPUTE,
        .threads = 3,
        .ordered_streams = 1,
        .compute_ops = compute_ops,
        .n_compute_ops = sizeof compute_ops / sizeof compute_ops[0],
        .init = fg_gpu_open,
        .fini = fg_gpu_close,
    };
    def.handlers[FG_MSG_COPY] = fg_worker_copy;
    return fg_worker_main(&def, argc, argv);
}

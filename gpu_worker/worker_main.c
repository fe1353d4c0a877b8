/* worker_main.c - flexgen-gpu-worker: owns the accelerator. This file only
 * says what the worker can do; the loop (heartbeats, queue, replies) is
 * proto/fg_worker_loop.c and the compute backends are backend_*.c here.
 * Commands run on one executor thread, in order, like one compute stream. */
#include "fg_worker.h"

static const fg_worker_op compute_ops[] = {
    {FG_OP_NOP, "nop", fg_worker_op_nop},
    {FG_OP_AXPY, "axpy", fg_worker_op_axpy},
};

int main(int argc, char **argv) {
    static fg_worker_def def = {
        .role = FG_ROLE_GPU,
        .program = "flexgen-gpu-worker",
        .summary = "FlexGen's GPU worker: owns the accelerator's memory and compute.",
        .info = "host backend (runtime test ops)",
        .caps = FG_CAP_COPY | FG_CAP_COMPUTE,
        .threads = 1,
        .compute_ops = compute_ops,
        .n_compute_ops = sizeof compute_ops / sizeof compute_ops[0],
    };
    def.handlers[FG_MSG_COPY] = fg_worker_copy;
    return fg_worker_main(&def, argc, argv);
}

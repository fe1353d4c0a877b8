/* worker_main.c - flexgen-cpu-worker: owns the CPU tier (staging copies and,
 * with cpu_cache_compute, attention over a CPU-resident KV cache). This file
 * only says what the worker can do; the loop is runtime/fg_worker_loop.c and
 * the ops are attn_core.c. Its ops are the op table's cpu ops
 * (fg_engine_ops.h), each served by its kernel in fg_cpu_kernels; anything
 * else is answered "unknown op N". --profile measures the tier alone
 * (cpu_profile.c). */
#include "attn_core.h"
#include "fg_engine_ops.h"
#include "fg_profile.h"
#include "fg_worker.h"

int main(int argc, char **argv) {
    static fg_worker_op ops[2 + FG_NUM_ENGINE_OPS] = {
        {FG_OP_NOP, "nop", fg_worker_op_nop},
        {FG_OP_AXPY, "axpy", fg_worker_op_axpy},
    };
    size_t n = 2;
    for (uint32_t op = FG_OP_ENGINE_FIRST; op < FG_OP_ENGINE_END; op++)
        if (fg_op_info_get(op)->worker == FG_ROLE_CPU) ops[n++] = (fg_worker_op){op, fg_op_name(op), fg_cpu_op};
    static fg_worker_def def = {
        .role = FG_ROLE_CPU,
        .program = "flexgen-cpu-worker",
        .summary = "FlexGen's CPU worker: owns the CPU tier and runs attention over a "
                   "CPU-resident KV cache.",
        .info = "cpu",
        .caps = FG_CAP_COPY | FG_CAP_CPU_ATTN,
        .threads = 1,
        .attn_ops = ops,
        .options_help = FG_PROFILE_OPTIONS_HELP,
        .profile = fg_cpu_profile_main,
    };
    def.n_attn_ops = n;
    def.handlers[FG_MSG_COPY] = fg_worker_copy;
    return fg_worker_main(&def, argc, argv);
}

/* worker_main.c - flexgen-cpu-worker: owns the CPU tier (staging copies and,
 * with cpu_cache_compute, attention over a CPU-resident KV cache). This file
 * only says what the worker can do; the loop is runtime/fg_worker_loop.c and
 * the attention op is attn_core.c. Any other op is answered "unknown op N".
 * --profile measures the tier alone (cpu_profile.c). */
#include "attn_core.h"
#include "fg_engine_ops.h"
#include "fg_profile.h"
#include "fg_worker.h"

int main(int argc, char **argv) {
    static const fg_worker_op attn_ops[] = {
        {FG_OP_NOP, "nop", fg_worker_op_nop},
        {FG_OP_AXPY, "axpy", fg_worker_op_axpy},
        {FG_OP_ATTN_CORE, "ATTN_CORE", fg_cpu_attn_core},
    };
    static fg_worker_def def = {
        .role = FG_ROLE_CPU,
        .program = "flexgen-cpu-worker",
        .summary = "FlexGen's CPU worker: owns the CPU tier and runs attention over a "
                   "CPU-resident KV cache.",
        .info = "cpu",
        .caps = FG_CAP_COPY | FG_CAP_CPU_ATTN,
        .threads = 1,
        .attn_ops = attn_ops,
        .n_attn_ops = sizeof attn_ops / sizeof attn_ops[0],
        .options_help = FG_PROFILE_OPTIONS_HELP,
        .profile = fg_cpu_profile_main,
    };
    def.handlers[FG_MSG_COPY] = fg_worker_copy;
    return fg_worker_main(&def, argc, argv);
}

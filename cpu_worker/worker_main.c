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
#include "fg_shm.h"
#include "fg_worker.h"

/* Every page of a segment touched as it is mapped, as the host backend
 * does: this worker streams through what the CPU tier holds (attention
 * over its KV cache, the experts it computes), and a page's first touch
 * through a new mapping costs about 6 us on a virtualised MMU even with
 * the page tables filled. Touched here, in setup, that cost is not paid
 * inside the first prefill (mixtral-8x7b shapes with 38% of the experts
 * computed here: 0.5 s a layer). */
static fg_status cpu_on_map(fg_worker *w, void *base, uint64_t size) {
    (void)w;
    fg_mem_prefault(base, (size_t)size);
    return FG_OK;
}

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
        .on_map = cpu_on_map,
    };
    def.n_attn_ops = n;
    def.handlers[FG_MSG_COPY] = fg_worker_copy;
    return fg_worker_main(&def, argc, argv);
}

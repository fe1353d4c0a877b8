/* worker_main.c - flexgen-gpu-worker: owns the accelerator. This file only
 * says what the worker can do; the loop (heartbeats, queue, replies) is
 * runtime/fg_worker_loop.c, the commands are gpu_ops.c and the backends are
 * backend_*.c here (fg_backend.h, chosen with --device). Three executor
 * threads run three streams as a GPU does: compute, host-to-device copies
 * and device-to-host copies (the engine tags each command with its stream);
 * within a stream, in order. Its ops are the op table's gpu ops
 * (fg_engine_ops.h), so an op added there is served here unchanged.
 * --profile measures the tier alone (gpu_profile.c). */
#include "fg_engine_ops.h"
#include "fg_fmt.h"
#include "fg_profile.h"
#include "fg_worker.h"
#include "gpu_ops.h"

int main(int argc, char **argv) {
    static fg_worker_op ops[2 + FG_NUM_ENGINE_OPS] = {
        {FG_OP_NOP, "nop", fg_worker_op_nop},
        {FG_OP_AXPY, "axpy", fg_worker_op_axpy},
    };
    size_t n = 2;
    for (uint32_t op = FG_OP_ENGINE_FIRST; op < FG_OP_ENGINE_END; op++) {
        const fg_op_info *oi = fg_op_info_get(op);
        if (oi->worker == FG_ROLE_GPU)
            ops[n++] = (fg_worker_op){op, oi->name, op == FG_OP_DEVICE_INIT ? fg_gpu_device_init : fg_gpu_op};
    }
    static fg_worker_def def = {
        .role = FG_ROLE_GPU,
        .program = "flexgen-gpu-worker",
        .summary = "FlexGen's GPU worker: owns the accelerator's memory and compute.",
        .info = "gpu",
        .caps = FG_CAP_COPY | FG_CAP_COMPUTE,
        .threads = 3,
        .ordered_streams = 1,
        .compute_ops = ops,
        .init = fg_gpu_open,
        .fini = fg_gpu_close,
        .on_map = fg_gpu_on_map,
        .option = fg_gpu_option,
        .options_help = "  --device NAME       the backend: host (the CPU) or cuda (default: cuda where it\n"
                        "                      is built and a GPU is found, else host)\n"
                        "  --gpu-mem SIZE      with --profile: the device memory it may use (default:\n"
                        "                      what it needs: 433M for opt-1.3b on the host backend)\n"
                        "  --formats LIST      with --profile: the ggml quantized formats whose layer GEMM\n"
                        "                      rates to measure beside F16's (default " FG_FMT_PROFILE_DEFAULT ";\n"
                        "                      none: none)\n"
                        "  --formats-only      with --profile: those rates alone (what a run adds to a\n"
                        "                      shape measured before)\n"
                        FG_PROFILE_OPTIONS_HELP,
        .profile = fg_gpu_profile_main,
    };
    def.n_compute_ops = n;
    def.handlers[FG_MSG_COPY] = fg_gpu_copy;
    return fg_worker_main(&def, argc, argv);
}

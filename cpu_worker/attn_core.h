/* attn_core.h - the cpu_worker's engine ops (fg_engine_ops.h's CPU ops):
 * fg_cpu_op checks a command against the op table and runs the op's kernel
 * from fg_cpu_kernels, as the gpu worker runs a backend's slot.
 * --profile (cpu_profile.c) times the same kernels. */
#ifndef ATTN_CORE_H
#define ATTN_CORE_H

#include "fg_op_args.h"
#include "fg_worker.h"

/* A cpu op's kernel: reads a->in, writes a->out. */
typedef fg_status (*fg_cpu_kernel)(const fg_op_args *a);

/* By FG_OPI(op); NULL where the op is not the cpu worker's. */
extern const fg_cpu_kernel fg_cpu_kernels[FG_NUM_ENGINE_OPS];

/* The handler of every cpu op (CPU_ATTN). */
fg_status fg_cpu_op(fg_worker *w, const fg_msg *cmd);

/* ATTN_CORE on a checked command (its kernel; --profile times this call). */
fg_status fg_cpu_attn_core_run(const fg_op_args *a);

/* MOE_CPU on a checked command (moe_cpu.c). */
fg_status fg_cpu_moe_run(const fg_op_args *a);

/* `flexgen-cpu-worker --profile ...` (cpu_profile.c): fg_worker_def.profile. */
int fg_cpu_profile_main(int argc, char **argv);

#endif

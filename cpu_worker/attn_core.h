/* attn_core.h - the cpu_worker's engine op: FG_OP_ATTN_CORE (fg_engine_ops.h),
 * attention where the KV cache lives; and its --profile, which times it. */
#ifndef ATTN_CORE_H
#define ATTN_CORE_H

#include "fg_op_args.h"
#include "fg_worker.h"

/* CPU_ATTN FG_OP_ATTN_CORE. in: q, k, v, kc, vc, mask; out: ctx. */
fg_status fg_cpu_attn_core(fg_worker *w, const fg_msg *cmd);
/* The op itself on a checked command (the handler's last step; --profile
 * times this same call). */
fg_status fg_cpu_attn_core_run(const fg_op_args *a);

/* `flexgen-cpu-worker --profile ...` (cpu_profile.c): the worker's
 * fg_worker_def.profile. */
int fg_cpu_profile_main(int argc, char **argv);

#endif

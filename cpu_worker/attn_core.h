/* attn_core.h - the cpu_worker's engine op: FG_OP_ATTN_CORE (fg_engine_ops.h),
 * attention where the KV cache lives. */
#ifndef ATTN_CORE_H
#define ATTN_CORE_H

#include "fg_worker.h"

/* CPU_ATTN FG_OP_ATTN_CORE. in: q, k, v, kc, vc, mask; out: ctx. */
fg_status fg_cpu_attn_core(fg_worker *w, const fg_msg *cmd);

#endif

/* fg_engine_ref.h - the reference engine: one process, all weights in DRAM
 * as fp32 copies of their fp16 values, batches of prompts run to completion
 * one after another. It is the oracle the offloading engine is compared with,
 * so it favours plainness over speed (but is fast enough to benchmark). */
#ifndef FG_ENGINE_REF_H
#define FG_ENGINE_REF_H

#include "fg_gen.h"

fg_status fg_engine_ref_run(fg_wsrc *ws, const fg_seq_in *in, int n, const fg_gen_opts *opt,
                            fg_seq_out *out, fg_gen_stats *stats);

#endif

/* fg_policy_auto.h - what `--policy auto` (and `flexgen policy`) must know
 * before measuring anything: whether everything fits the GPU budget (then
 * all on the GPU is optimal and no profile is needed), and whether the
 * disk can stay idle (then the profile needs no disk test). */
#ifndef FG_POLICY_AUTO_H
#define FG_POLICY_AUTO_H

#include "fg_search.h"

/* 1 and *p all on the GPU (weights, cache, activations) when the whole
 * run fits the GPU budget, at the GPU batch so fixes or else the largest
 * (the prompts in one batch, halved until it fits); 0 otherwise. */
int fg_auto_all_gpu(const fg_model_config *c, const fg_spec *sp, const fg_search_opts *so, fg_policy *p);

/* 0 when the weights, cache and activations fit the GPU and CPU budgets
 * without the disk at the largest block; else the bytes the run may read
 * from disk (its tier store), which size the profile's disk test. */
uint64_t fg_auto_disk_bytes(const fg_model_config *c, const fg_spec *sp, const fg_search_opts *so);
/* The weights' bytes as held (a quantized file's, not expanded): what a
 * tier store of the whole model holds. */
uint64_t fg_auto_weight_bytes(const fg_model_config *c, const fg_spec *sp);

#endif

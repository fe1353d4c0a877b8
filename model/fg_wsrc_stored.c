/* fg_wsrc_stored.c - a weight as the tiers hold it (fg_spec_fmt): the
 * source's fp16 tensor, compressed here when the config asks for 4-bit
 * weights (a stack of experts expert by expert), or a GGUF file's ggml blocks as they are (rows un-permuted). The
 * one place a weight is quantized, so the tier store, the shm tiers and the
 * reference engine all hold the same bytes. */
#include <stdlib.h>

#include "fg_fmt.h"
#include "fg_q4.h"
#include "fg_wsrc_int.h"

fg_status fg_wsrc_read_stored(fg_wsrc *ws, int idx, void *dst) {
    const fg_model_config *c = fg_wsrc_config(ws);
    const fg_spec *t = &fg_wsrc_specs(ws)[idx];
    int fmt = fg_spec_fmt(c, fg_wsrc_specs(ws), idx);
    if (t->ndim == 2 && fg_fmt_is_ggml_block(fmt)) return fg_wsrc__read_raw(ws, idx, dst);
    if (fmt != FG_FMT_Q4G64) return fg_wsrc_read(ws, idx, dst);
    fg_half *tmp = malloc(sizeof(fg_half) * (size_t)fg_spec_numel(t));
    if (!tmp) return fg_err_set(FG_ERUNTIME, "%s: out of memory compressing %s", fg_wsrc_describe(ws), t->name);
    fg_status st = fg_wsrc_read(ws, idx, tmp);
    /* a stack of experts: each expert's matrix its own slice, so an expert
     * stays one byte range (fg_spec_expert_bytes) */
    int parts = t->experts ? t->experts : 1, rows = (int)(t->dims[0] / parts);
    uint64_t slice = fg_q4_slice_bytes((uint64_t)rows, (uint64_t)t->dims[1]);
    for (int e = 0; !st && e < parts; e++)
        fg_q4_pack(tmp + (size_t)e * rows * (size_t)t->dims[1], rows, (int)t->dims[1], (uint8_t *)dst + (size_t)e * slice);
    free(tmp);
    return st;
}

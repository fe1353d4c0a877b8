/* fg_op_args.h - one engine op's command (fg_engine_ops.h), checked and
 * resolved, for whichever worker runs it: the gpu_worker's backends and the
 * cpu_worker's attention. The slots come from the op table
 * (fg_engine_ops.h); this checks the counts, the params and each handle's
 * size against the shape the params imply, and resolves the handles to
 * pointers. What the tensors hold (ids in
 * range, say) is the op's own business.
 *
 * Errors: FG_EINPUT with a message naming the op and the slot
 * ("ATTN: in[2] kc has 1024 bytes, want 2688 (Tmax*B*H fp16)"). */
#ifndef FG_OP_ARGS_H
#define FG_OP_ARGS_H

#include "fg_engine_ops.h"
#include "fg_fwd.h"
#include "fg_sample.h"
#include "fg_worker.h"

/* A checked op. Pointers index fg_worker_ptr's view of the handles: host
 * memory for shm and for the host backend's arena. */
typedef struct {
    uint32_t op;                              /* FG_OP_* */
    const char *name;                         /* "ATTN" */
    const fg_op_info *info;                   /* its table entry */
    fg_op_step p;                             /* the params as sent */
    fg_model_config cfg;                        /* p.model as a config: name "op", one layer */
    fg_step st;                               /* B, S, past, mask (NULL if the op has none) */
    int Tmax;                                 /* cache ops only */
    fg_layer_w lw;                            /* the layer weights the op takes, others NULL */
    fg_global_w gw;                           /* the model weights the op takes, NULL if absent */
    void *in[FG_MSG_MAX_HANDLES];             /* by slot; NULL for a 0-byte (absent) tensor */
    void *out[FG_MSG_MAX_HANDLES];
    float temperature, top_p;                 /* SAMPLE only */
    int x_lo, x_n;                            /* MOE_CPU, MLP_SPLIT: the cpu worker's experts (fg_op_experts) */
} fg_op_args;

/* SAMPLE's rows (B) as the worker reads them, before any is used: each
 * temperature in [0, 100] and top-p in (0, 1], else FG_EINPUT naming the
 * row. The rows come from the coordinator, so they are outside input here. */
fg_status fg_sample_rows_check(const fg_sample_row *rows, int B);

/* Resolves a device handle (segment FG_SEG_DEVICE) to a pointer the op's
 * kernels use: the gpu worker's backend. NULL + fg_err_set if out of range. */
typedef void *(*fg_op_dev_ptr_fn)(void *ctx, fg_shm_handle h);

/* Check and resolve cmd (COMPUTE or CPU_ATTN) as op cmd->u.compute.op, an
 * engine op with tensors (fg_engine_ops.h's table), arriving on the worker
 * the table names. Shm handles resolve through fg_worker_ptr, device handles
 * through dev_ptr (NULL: this worker has no device memory). */
fg_status fg_op_args_parse(fg_worker *w, const fg_msg *cmd, fg_op_dev_ptr_fn dev_ptr, void *dev_ctx, fg_op_args *a);

/* An op laid out in one block of memory, for a worker measuring itself
 * (--profile) with nothing but the op: the op's tensors get handles of
 * segment FG_SEG_DEVICE at offsets from `base` in the block, each
 * FG_SHM_ALIGN-aligned and as large as its slot's shape, the weights first
 * (so that they stay where they are for every step of one op and model),
 * then the other slots in table order, outputs apart from inputs. *m gets
 * the message the coordinator would send (fg_op_build) and *end the first
 * offset past the layout. With dev_ptr, which resolves a handle into the
 * block (a backend's arena, or plain memory), *a gets the message as the
 * worker sees it: checked and resolved by fg_op_args_parse, the same path as
 * a command's. With dev_ptr NULL, only *m and *end (what the op needs).
 * p->model must be a valid description and the step one the op accepts. */
fg_status fg_op_args_layout(uint32_t op, const fg_op_step *p, uint64_t base, fg_op_dev_ptr_fn dev_ptr,
                            void *dev_ctx, fg_msg *m, uint64_t *end, fg_op_args *a);

#endif

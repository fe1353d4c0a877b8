/* fg_moe.h - a sparse layer's MLP on the CPU (Mixtral, Qwen3-MoE): the
 * router picks k of E experts for each row and the rows routed to an expert
 * go through its gated SiLU MLP together, the outputs summed by the
 * router's weights. Written from modeling_mixtral.py's and
 * modeling_qwen3_moe.py's sparse blocks; fp32 throughout (no rounding point
 * inside the block: the layer rounds h after the residual, as for a dense
 * MLP). The experts' matrices are the stacked FC1/UP/FC2 roles (fg_config.h),
 * each expert's bytes a contiguous slice read by fg_gemm_fmt in the tensor's
 * format. What the rows sum does not depend on where the weights live, so
 * placement invariance holds as for the dense MLP. */
#ifndef FG_MOE_H
#define FG_MOE_H

#include "fg_opt.h"

/* Route rows: logits (rows, E) fp32 in, then for each row the k experts
 * (sel: best first, ties to the lower number) and their weights (wt), by
 * c->router:
 *   MIXTRAL    p = softmax(logits); the top k of p; w = p / sum of those k
 *   QWEN3_MOE  the same, divided by the sum only with c->moe_norm_topk.
 * logits is overwritten with p. sel, wt (rows, k). */
void fg_moe_route(int32_t *sel, float *wt, float *logits, int rows, const fg_model_config *c);

/* y (rows, H) = sum over each row's k experts e of w_e * down_e(silu(gate_e
 * x) * up_e x), the experts' terms added in ascending expert order (as
 * Hugging Face's loop over experts adds them). x (rows, H) is the layer's
 * normalised input; w holds the router ([E, H]) and the stacked experts;
 * scratch in ws (ws->ff for gate and up, ws->moe for the rest). y may be x. */
void fg_moe_mlp(float *y, const float *x, int rows, const fg_model_config *c, const fg_layer_w *w, fg_opt_ws *ws);

/* fg_moe_mlp with the outputs of the experts [g_lo, g_lo + g_n) given
 * rather than computed: given (rows * k, H) holds, at row r's choice j
 * (r * k + j) of one of them, that expert's output on row r (fg_moe_band's,
 * on the cpu worker). Every term is added where and as fg_moe_mlp adds
 * it, so with given outputs equal to its own the sum is bit for bit its. */
void fg_moe_mlp_given(float *y, const float *x, int rows, const fg_model_config *c, const fg_layer_w *w,
                      fg_opt_ws *ws, int g_lo, int g_n, const float *given);

/* The outputs of the experts [lo, lo + n) only: out (rows * k, H) at each
 * choice of one of them, the same values fg_moe_mlp computes for it (the
 * same rows gathered in the same order); other choices untouched. band's
 * stacks start at expert lo (the CPU tier's band of them); its router is
 * the layer's. */
void fg_moe_band(float *out, const float *x, int rows, const fg_model_config *c, const fg_layer_w *band,
                 fg_opt_ws *ws, int lo, int n);

/* counts (E) = how many of x's rows (rows, H: the layer's normalised
 * input) the router sends to each expert: the route fg_moe_mlp takes on
 * the same rows, computed the same way. Scratch in ws->moe. */
void fg_moe_counts(int32_t *counts, const float *x, int rows, const fg_model_config *c, const fg_layer_w *w,
                   fg_opt_ws *ws);

/* Floats of ws->moe for max_rows rows (0 for a model without experts). */
uint64_t fg_moe_ws_floats(const fg_model_config *c, int max_rows);

#endif

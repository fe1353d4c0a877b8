/* cpu_profile.c - `flexgen-cpu-worker --profile [--json] [--quick]
 * [--model NAME | --shape DESC]`: the cpu tier measured alone (no coordinator), for the
 * cost model. Attention goes through what an ATTN_CORE command runs: the op
 * laid out by fg_op_args_layout (the op table's slots, checked and resolved
 * by fg_op_args_parse, as a command's are) and run by fg_cpu_attn_core_run,
 * the handler's own body (q, k, v widened, fg_opt_attn_core over the fp16
 * cache, ctx narrowed). Progress goes to the log (stderr); stdout gets one
 * JSON object (--json) or a short summary.
 *
 * The JSON object's keys (rates in 10^9 B/s):
 *   model, hidden, heads  --model (default opt-1.3b) and its H and heads
 *   threads               the compute threads attention runs on
 *                         (fg_pool_threads: FLEXGEN_THREADS, else the CPUs)
 *   attn_decode_GBps      ATTN_CORE at decode (B 8, S 1, past 1023: a
 *                         1024-position context; cache (Tmax, B, H) fp16,
 *                         time-major): k and v cache bytes read, 4 B ctx H,
 *                         per second
 *   attn_points           [{"B", "ctx", "GBps"}]: the same for B in {1, 8,
 *                         32} and ctx in {32, 256, 1024} (attn_decode_GBps
 *                         is the B 8, ctx 1024 one); a short context pays
 *                         mostly per-sequence and per-head costs, which the
 *                         cost model takes from here
 *   mem_GBps              memcpy between two buffers of mem_bytes: bytes
 *                         copied per second (each read once, written once)
 *   mem_bytes             512 MiB (64 MiB with --quick)
 *   quick                 true with --quick: fewer repetitions and smaller
 *                         buffers, for tests; not the real measurement
 * Each figure is the median of runs after an untimed one: at least 5 and
 * 0.2 s of each attention point, 5 copies (3 runs with --quick). */
#include <inttypes.h>
#include <string.h>

#include "attn_core.h"
#include "fg_pool.h"
#include "fg_profile.h"

#define PROG "flexgen-cpu-worker"
#define USAGE PROG " --profile [--model NAME | --shape DESC] [--quick] [--json]"

static const uint32_t attn_B[] = {1, 8, 32}, attn_ctx[] = {32, 256, 1024};
#define N_B (sizeof attn_B / sizeof attn_B[0])
#define N_CTX (sizeof attn_ctx / sizeof attn_ctx[0])
#define DEC_B 8u
#define DEC_CTX 1024u

typedef struct {
    fg_profile_args pa;
    uint8_t *block;        /* the op's tensors */
    fg_op_args a;          /* the op being timed */
    void *src, *dst;       /* memcpy's buffers */
    uint64_t mem_bytes;
} cprof;

static void *block_ptr(void *ctx, fg_shm_handle h) { return ((cprof *)ctx)->block + h.offset; }

static fg_op_step decode_step(const cprof *c, uint32_t B, uint32_t ctx) {
    return (fg_op_step){.model = fg_config_desc(&c->pa.cfg), .B = B, .S = 1, .past = ctx - 1, .Tmax = ctx,
                        .mask_stride = ctx};
}

static fg_status run_attn(void *ctx) { return fg_cpu_attn_core_run(&((cprof *)ctx)->a); }

static fg_status run_memcpy(void *ctx) {
    cprof *c = ctx;
    memcpy(c->dst, c->src, c->mem_bytes);
    return FG_OK;
}

/* One attention point: GB/s of cache read. */
static fg_status attn_point(cprof *c, uint32_t B, uint32_t ctx, double *GBps) {
    fg_op_step p = decode_step(c, B, ctx);
    fg_msg m;
    uint64_t end;
    double t;
    fg_status st = fg_op_args_layout(FG_OP_ATTN_CORE, &p, 0, block_ptr, c, &m, &end, &c->a);
    if (st || (st = fg_profile_fill(&m, c->block, &c->pa, 1)) ||
        (st = fg_profile_median(&c->pa, run_attn, c, FG_PROFILE_POINT_SECONDS, &t)))
        return st;
    *GBps = 4.0 * B * ctx * fg_config_kv_dim(&c->pa.cfg) / t / 1e9;   /* the fp16 k and v of the kv heads */
    fg_info("profile: ATTN_CORE B=%" PRIu32 " ctx=%" PRIu32 ": %.3f ms, %.3f GB/s", B, ctx, t * 1e3, *GBps);
    return FG_OK;
}

static fg_status measure(cprof *c, json_t **out) {
    /* one block for the largest point */
    uint64_t most = 0, end;
    fg_msg m;
    fg_status st = FG_OK;
    for (size_t i = 0; i < N_B && !st; i++)
        for (size_t k = 0; k < N_CTX && !st; k++) {
            fg_op_step p = decode_step(c, attn_B[i], attn_ctx[k]);
            if (!(st = fg_op_args_layout(FG_OP_ATTN_CORE, &p, 0, NULL, NULL, &m, &end, NULL)) && end > most)
                most = end;
        }
    if (st) return st;
    c->block = fg_alloc_tensor(most);
    json_t *pts = json_array();
    double dec = 0, GBps, t = 0;
    for (size_t i = 0; i < N_B && !st; i++)
        for (size_t k = 0; k < N_CTX && !st; k++) {
            if ((st = attn_point(c, attn_B[i], attn_ctx[k], &GBps))) break;
            if (attn_B[i] == DEC_B && attn_ctx[k] == DEC_CTX) dec = GBps;
            json_array_append_new(pts, json_pack("{s:i, s:i, s:f}", "B", (int)attn_B[i], "ctx", (int)attn_ctx[k],
                                                 "GBps", GBps));
        }
    free(c->block);
    c->block = NULL;
    if (!st) {
        c->src = fg_alloc_tensor(c->mem_bytes);
        c->dst = fg_alloc_tensor(c->mem_bytes);
        memset(c->src, 1, c->mem_bytes);   /* pages in place before the clock */
        memset(c->dst, 0, c->mem_bytes);
        st = fg_profile_median(&c->pa, run_memcpy, c, 0, &t);
        free(c->src);
        free(c->dst);
    }
    if (st) {
        json_decref(pts);
        return st;
    }
    double mem = (double)c->mem_bytes / t / 1e9;
    fg_info("profile: memcpy of %" PRIu64 " bytes: %.3f ms, %.3f GB/s", c->mem_bytes, t * 1e3, mem);
    const fg_model_config *cfg = &c->pa.cfg;
    *out = json_pack("{s:s, s:i, s:i, s:i, s:f, s:o, s:f, s:I, s:b}", "model", cfg->name, "hidden", cfg->hidden,
                     "heads", cfg->n_heads, "threads", fg_pool_threads(), "attn_decode_GBps", dec, "attn_points", pts,
                     "mem_GBps", mem, "mem_bytes", (json_int_t)c->mem_bytes, "quick", c->pa.quick);
    return FG_OK;
}

static void print_summary(const json_t *j) {
#define NUM(k) json_number_value(json_object_get(j, k))
    printf("cpu profile: %d compute threads, %s shapes (H %d, %d heads)%s\n", (int)NUM("threads"),
           json_string_value(json_object_get(j, "model")), (int)NUM("hidden"), (int)NUM("heads"),
           json_is_true(json_object_get(j, "quick")) ? ", --quick: not the real measurement" : "");
    printf("  attention decode  %8.3f GB/s of KV cache (B %u, context %u)\n", NUM("attn_decode_GBps"), DEC_B, DEC_CTX);
    const json_t *pts = json_object_get(j, "attn_points");
    for (size_t i = 0; i < json_array_size(pts); i++) {
        const json_t *pt = json_array_get(pts, i);
        printf("    B %2d, context %4d  %8.3f GB/s\n", (int)json_number_value(json_object_get(pt, "B")),
               (int)json_number_value(json_object_get(pt, "ctx")), json_number_value(json_object_get(pt, "GBps")));
    }
    printf("  memcpy            %8.3f GB/s (%.0f MiB buffers)\n", NUM("mem_GBps"), NUM("mem_bytes") / (1 << 20));
#undef NUM
}

int fg_cpu_profile_main(int argc, char **argv) {
    cprof c = {.block = NULL};
    int rc = fg_profile_parse(&c.pa, PROG, argc, argv, NULL, NULL, USAGE);
    if (rc) return rc;
    c.mem_bytes = (c.pa.quick ? 64ull : 512ull) << 20;
    json_t *j = NULL;
    fg_status st = measure(&c, &j);
    if (st) {
        fprintf(stderr, PROG ": --profile: %s\n", fg_err_msg());
        return st == FG_EINPUT ? 2 : 1;
    }
    return fg_worker_profile_print(j, c.pa.as_json, print_summary);
}

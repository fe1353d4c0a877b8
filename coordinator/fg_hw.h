/* fg_hw.h - the hardware constants the cost model runs on: read from the
 * profile `flexgen profile` writes (each worker's --profile, measured
 * alone, merged into one JSON object), or from a named preset. Bandwidths
 * are 10^9 bytes/s, compute 10^12 FLOP/s, as the profile's keys say.
 *
 * Profile keys read (others are kept in the file for people, not read):
 *   gpu.backend, gpu.shares_host_cpu, gpu.h2d_GBps, gpu.d2h_GBps,
 *   gpu.mm [{rows, TFLOPS}] (a layer's GEMMs by rows, fp16 weights),
 *   gpu.mm_q4 (optional: the same with FlexGen's 4-bit weights), gpu.mm_fmt
 *   (optional: {"Q4_K": [{rows, TFLOPS}], ...}, the same with the weights
 *   in each ggml format measured), gpu.attn_prefill_TFLOPS,
 *   gpu.attn_decode_GBps, cpu.attn_decode_GBps, cpu.attn_points (optional:
 *   [{B, ctx, GBps}], the same by batch size and context), disk.disk_read_GBps,
 *   disk.disk_write_GBps (replaced by disk.engine_read_GBps and
 *   disk.engine_write_GBps where present: the disk at the disk worker's own
 *   request size and queue depth), disk.file_bytes (the test file's size),
 *   disk.stream.read_GBps, disk.stream.prefill_read_GBps and
 *   disk.stream.store_bytes (optional: the rates the last run that streamed
 *   a tier store larger than the test file read it at in its decode and
 *   its prefill, and its store's bytes; fg_hw_disk_streamed),
 *   runtime.cmd_s and runtime.rtt_s (optional: seconds a
 *   command costs in a pipeline, and one waited for), engine.decode_compute_factor,
 *   engine.prefill_compute_factor, engine.copy_factor, engine.prefill_copy_factor,
 *   engine.disk_factor, engine.disk_contention, engine.cpu_attn_unit_s and
 *   engine.cache_load_unit_s (optional: the engine run against the rest, see
 *   cmd_profile.c: decode and prefill compute measured / predicted, a copy's
 *   (decode, prefill) and a disk transfer's measured / predicted seconds, how
 *   far the disk and the compute slow each other where they overlap, and the
 *   seconds a decode unit adds with CPU attention, and with its cache loaded
 *   from off the GPU).
 * A preset may instead give gpu.mm_prefill_TFLOPS / gpu.mm_decode_TFLOPS
 * (FlexGen's constants do not depend on rows) and gpu.d2h_cache_GBps.
 * network.GBps and network.latency_us (optional): one link between two
 * machines of a pipeline (`flexgen policy --stages`), its bandwidth and a
 * message's one-way latency; absent, FG_HW_NET_GBPS and FG_HW_NET_LATENCY_S
 * (nothing measures them: a single machine's run never uses them).
 *
 * A profile serves every model size: "shapes" (optional) holds the
 * shape-dependent figures, one entry per layer shape measured ({model,
 * hidden, q_dim, kv_dim, ffn, ffn_kind, heads, mm, mm_q4, mm_fmt,
 * attn_decode_GBps, attn_prefill_TFLOPS}; an entry without q_dim, kv_dim
 * and ffn_kind is an OPT shape), and a load for a model takes its own
 * layer shape where measured, else the nearest (fg_hw_shape_distance),
 * over the gpu section's own (all its GEMM tables: one shape's figures,
 * never a mix).
 *
 * A weight format without a table of its own (a profile from before the
 * formats were measured, or a --hardware file measured for other models)
 * is charged F16's rate: fg_hw_fmt_measured tells the caller, who says so
 * (a run measures the formats its model holds before it searches:
 * fg_profile_run.h). FlexGen's 4-bit weights without mm_q4 are the cost
 * model's own case (fg_cost.c: F16's rate and an expansion pass). A
 * preset's fixed figures serve every format. "disk" is optional too: a profile measured for a run that
 * keeps nothing on disk has none, and then the disk is modelled as
 * FG_HW_DISK_UNMEASURED_GBPS, too slow for any placement to choose it. */
#ifndef FG_HW_H
#define FG_HW_H

#include <jansson.h>

#include "fg_common.h"
#include "fg_config.h"
#include "fg_fmt.h"

#define FG_HW_MAX_MM 24
/* The rate of a disk the profile did not measure: no placement is worth it. */
#define FG_HW_DISK_UNMEASURED_GBPS 1e-6
/* The network a profile does not name: 10 Gbit/s Ethernet, 50 us a message. */
#define FG_HW_NET_GBPS (10.0 / 8)
#define FG_HW_NET_LATENCY_S 50e-6

/* fg_hw_shape_distance's penalty for an MLP of another kind: larger than any
 * difference of widths. */
#define FG_HW_SHAPE_OTHER_KIND 1000.0

/* GEMM TFLOPS at measured row counts. */
typedef struct {
    int n;                                             /* points (0: not measured) */
    double rows[FG_HW_MAX_MM], tflops[FG_HW_MAX_MM];   /* rows ascending */
} fg_hw_rates;

typedef struct {
    char source[512];           /* the file, or "preset NAME" */
    char backend[32];           /* the gpu worker's backend it was measured with */
    int shares_host_cpu;        /* gpu compute and copies run on the host's cores (host backend) */
    /* a layer's GEMM TFLOPS by rows with its weights in each format
     * (common/fg_fmt.h): F16 gpu.mm, FG_FMT_Q4G64 gpu.mm_q4, the ggml
     * formats gpu.mm_fmt; n 0 where not measured */
    fg_hw_rates mm[FG_FMT_COUNT];
    double mm_prefill_tflops, mm_decode_tflops;   /* > 0: used instead of the tables, every format (presets) */
    double attn_prefill_tflops; /* causal attention core, 2*B*S*S*H FLOPs */
    double attn_decode_gbps;    /* decode attention core on the gpu: bytes of k and v read */
    double h2d_gbps, d2h_gbps, d2h_cache_gbps;
    double cpu_attn_gbps;       /* the cpu worker's decode attention, bytes of k and v read */
    int n_cpu_attn;             /* the same at measured (B, ctx) points (0: cpu_attn_gbps alone) */
    double cpu_attn_B[FG_HW_MAX_MM], cpu_attn_ctx[FG_HW_MAX_MM], cpu_attn_pt_gbps[FG_HW_MAX_MM];
    double disk_read_gbps, disk_write_gbps;
    int disk_measured;          /* 0: no disk section (rates FG_HW_DISK_UNMEASURED_GBPS) */
    double disk_test_bytes;     /* the test file the disk was measured with (0: unknown, a preset) */
    /* disk.stream: the read rates a run got streaming a tier store larger
     * than that test file, in its decode and in its prefill, where the
     * compute beside the reads is heavier (0: none recorded) */
    double disk_stream_gbps, disk_stream_prefill_gbps, disk_stream_bytes;
    double disk_read_prefill_gbps;   /* the read rate charged in prefill (0: disk_read_gbps) */
    int shape_hidden;           /* the measured layer shape the gpu figures are of (0: the gpu section's) */
    int shape_own;              /* 1: that shape is the model's own (fg_hw_shape_distance 0) */
    char shape_model[64];       /* the model it was measured for ("" with shape_hidden 0) */
    double cmd_s;               /* per command, pipelined (0: not modelled) */
    double rtt_s;               /* a command the coordinator waits for, round trip (0: not modelled) */
    double eng_decode_factor;   /* decode compute in the engine / as the tiers predict it (1: none measured) */
    double eng_prefill_factor;  /* the same for prefill's compute (1: none measured) */
    double eng_copy_factor;     /* a decode copy's seconds in the engine / at the tiers' copy rates (1: none measured) */
    double eng_prefill_copy_factor; /* the same in prefill */
    double eng_disk_factor;     /* a disk transfer's seconds in the engine / at the disk's rates (1: none measured) */
    double eng_cpu_attn_unit_s; /* a decode unit with CPU attention: seconds added in the engine */
    double eng_cache_load_unit_s; /* a decode unit whose cache is loaded from the CPU or disk: the same */
    double eng_disk_contention; /* the disk and the compute overlapped: each takes this share of the other's
                                   seconds on top of its own (0: they overlap fully; 1: they take turns) */
    double net_gbps;            /* a pipeline's link between two machines, 10^9 bytes/s like the rest */
    double net_latency_s;       /* a message's one-way latency on it */
} fg_hw;

/* A preset name ("flexgen-t4": FlexGen's constants fitted on a T4, from its
 * cost model) or a profile file. FG_EINPUT naming the file and key. */
fg_status fg_hw_load(const char *what, fg_hw *hw);
/* The same, with the gpu figures of c's layer shape, or of the measured
 * shape nearest it (c NULL: the gpu section's). */
fg_status fg_hw_load_for(const char *what, const fg_model_config *c, fg_hw *hw);
/* How far a profile's shapes[] entry is from c's layer shape: 0 for c's
 * own (hidden, q and kv widths, ffn size and kind equal), else the sum of
 * the widths' |log ratio|, plus FG_HW_SHAPE_OTHER_KIND for another MLP
 * kind. FG_EINPUT naming path for an entry without hidden and ffn. */
fg_status fg_hw_shape_distance(const char *path, json_t *entry, const fg_model_config *c, double *dist);
/* 1 if `what` names a preset. */
int fg_hw_is_preset(const char *what);
/* For a run that may keep disk_bytes of weights on disk: where that is
 * more than the disk's test file, whose reads a virtual disk's host may
 * serve from its caches, the read rates are the ones a run streaming a
 * store larger than that file measured (disk.stream: decode's, and
 * prefill's where recorded), where one did. Returns 1 where it applied. */
int fg_hw_disk_streamed(fg_hw *hw, uint64_t disk_bytes);

/* A layer's GEMM TFLOPS at `rows` rows in the given phase (prefill 1,
 * decode 0) with its weights in format fmt: the preset's figure, else
 * fmt's table interpolated in log(rows) (below its first point the same
 * seconds as there, past its last its last rate), F16's where fmt has none. */
double fg_hw_fmt_tflops(const fg_hw *hw, int fmt, double rows, int prefill);
/* 1 if fmt's rate is its own: its table is measured, or (F16) the
 * preset's figures; 0 where fg_hw_fmt_tflops falls back to F16's. */
int fg_hw_fmt_measured(const fg_hw *hw, int fmt);
/* The cpu worker's decode attention in bytes of k and v per second, for B
 * sequences over a context of ctx: the measured batch size nearest B (in
 * log), its rate interpolated in log(ctx) and held at the ends; without
 * points, cpu_attn_gbps. */
double fg_hw_cpu_attn_gbps(const fg_hw *hw, double B, double ctx);

#endif

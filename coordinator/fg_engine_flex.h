/* fg_engine_flex.h - the offloading engine: the coordinator drives the gpu,
 * cpu and disk workers through FlexGen's block schedule, with weights, KV
 * cache and activations placed over GPU memory (the gpu_worker's arena), CPU
 * DRAM (shared memory) and disk by a policy (docs/ARCHITECTURE.md). */
#ifndef FG_ENGINE_FLEX_H
#define FG_ENGINE_FLEX_H

#include "fg_gen.h"
#include "fg_policy.h"

typedef struct {
    fg_policy policy;
    uint64_t gpu_mem, cpu_mem, disk_mem;  /* budgets, bytes; 0 = unlimited */
    int schedule_row;                      /* 1: one GPU batch through all layers per token */
    const char *offload_dir;
    const char *device;                    /* the gpu worker's backend (--device); NULL: host */
    const char *worker_dir;                /* NULL: beside the flexgen binary */
    const char *trace;                     /* Chrome trace-event JSON of every command, or NULL */
    unsigned attach;                       /* roles (1u << FG_ROLE_*) started by hand (--attach) */
    int cmd_timeout_ms;                    /* the command deadline (--cmd-timeout): 0 the
                                              supervisor's default, < 0 none (fg_super_opts) */
} fg_flex_opts;

/* One rank of a pipeline, for the report (rank 0 gathers them). */
typedef struct {
    int rank, lo, hi;                     /* its decoder layers [lo, hi) */
    double busy_s[3];                     /* its workers' */
    double wait_s;                        /* blocked on the ring: the bubble as this rank sees it */
    double send_s;                        /* its sends in flight, summed (fg_ring_send_seconds) */
    uint64_t sent, recvd;                 /* bytes over the ring */
    long msgs;
    double prefill_s, decode_s;           /* the last rank's are the run's */
    uint64_t gpu_bytes, shm_bytes;
} fg_rank_stats;

/* Weight loads per token (index i of a block: 0 the prefill), summed over
 * layers and blocks: what moved weights to the device, dense parts and
 * experts apart, and how many experts that was. An expert a slot already
 * holds for its layer is not loaded again. NULL arrays: none kept. */
typedef struct {
    int G;                        /* entries: the run's gen_len */
    uint64_t *dense_bytes;        /* (G) a layer's dense weights copied to its slot */
    uint64_t *expert_bytes;       /* (G) experts copied to a slot (from the CPU, the disk's stage, or GPU homes) */
    uint64_t *expert_disk_bytes;  /* (G) of those, read from disk first */
    long *experts;                /* (G) experts copied, one count per (layer, expert) load */
    long *routed;                 /* (G) under FG_EXPERTS_ROUTED: the distinct experts a (layer, block)'s batches chose */
} fg_expert_stats;
void fg_expert_stats_free(fg_expert_stats *x);

/* Extra figures the offloading engine reports beside fg_gen_stats. */
typedef struct {
    uint64_t gpu_bytes, shm_bytes;        /* device arena + workspace; shared memory */
    uint64_t h2d_bytes, d2h_bytes;        /* moved between tiers (as stored: compressed or not) */
    uint64_t disk_read_bytes, disk_write_bytes;   /* the disk worker's reads and writes */
    uint64_t disk_weight_bytes;           /* the weights the plan keeps on disk */
    double busy_s[3];                     /* per worker role, from DONE timings */
    long commands;
    uint64_t peak_rss[4];                 /* VmHWM: gpu, cpu, disk worker, coordinator */
    int gpu_restarts;
    int ranks;                            /* pipeline ranks (1: none) */
    fg_rank_stats *rank;                  /* (ranks) on rank 0 of a pipeline; the caller frees it */
    uint64_t d2d_bytes;                   /* inside the device (GPU-tier experts into a weight slot) */
    fg_expert_stats xs;                   /* the caller frees it (fg_expert_stats_free) */
} fg_flex_stats;

/* The documented default when no --percent is given: everything on the GPU
 * if it fits --gpu-mem, else weights filled into the GPU 5 % at a time (the
 * rest on the CPU) with cache and activations on the CPU. Sets fo->policy's
 * percentages; gbs and batches must be set. */
fg_status fg_flex_default_policy(const fg_wsrc *ws, fg_flex_opts *fo, int S, int G);

/* Remove the spill files that runs now gone left in an offload directory
 * (fg_spill.c; every run does it before making its own), for a run that
 * starts no engine. */
void fg_spill_sweep(const char *offload_dir);

fg_status fg_engine_flex_run(fg_wsrc *ws, const fg_seq_in *in, int n, const fg_gen_opts *opt,
                             const fg_flex_opts *fo, fg_seq_out *out, fg_gen_stats *stats, fg_flex_stats *fs);

#endif

/* fg_store.h - the tier store: a model's weights converted once into the
 * offload directory as per-layer files of 4096-aligned tensors, each in
 * the format the tiers hold it in (fp16; FlexGen's 4-bit where the config
 * compresses weights; a GGUF file's ggml blocks as they are), so the disk
 * tier reads them with O_DIRECT at full bandwidth straight into shm.
 *
 * The coordinator calls fg_store_open_or_build() on first use of a model:
 * every file's header is checked against the checkpoint's identity and the
 * format version; missing, stale (another or a changed checkpoint, another
 * version), foreign (bad magic) and damaged (bad header checksum, wrong
 * size) files are rebuilt, valid ones kept, so an interrupted conversion
 * resumes. Tensor data checksums are checked by whoever reads a file into
 * memory (fg_store_verify, fg_store_checksum), or for the whole store at
 * open with opts.verify_data; a mismatch names the file and the tensor;
 * fg_store_repair rebuilds the file (fg_store_invalidate removes it, for the
 * next open to rebuild). A store is never read as if fine when it is not.
 *
 * ON-DISK FORMAT, version 3 (integers little-endian). Checksums are
 * XXH3_64bits with seed 0 (libxxhash; fg_store_checksum). Version 3 adds
 * one table entry per expert of a sparse layer's stacks (below); a version
 * 2 file is read as one (it has no expert entries: a version 2 file of a
 * model with experts holds whole stacks, so its table differs from this
 * build's and it is rebuilt). Version 1 had XXH64 checksums and an
 * identity read from the source's description: its files are stale and
 * rebuilt on open, as any other version's.
 *
 *   <offload-dir>/<model-id>/      model-id = "<config name>-<format>": "-fp16" for
 *                                  compression none, "-q4g64" for 4-bit weights
 *                                  (compress_weight), e.g. "opt-1.3b-fp16" (characters other than
 *                                  [A-Za-z0-9._-] in the name become '_'); one store per pair,
 *                                  another source of the same name replaces it
 *     globals.bin                  token and position embeddings, project_in/out,
 *                                  final norm, an untied LM head (those the config has)
 *     layer-000.bin .. layer-NNN.bin   decoder layer i: those of its 21 tensor roles
 *                                  the config has, in FG_LW_* order (q, k, v, o, LN1,
 *                                  fc1/gate, fc2/down, LN2, up; each weight, then its bias;
 *                                  then Qwen3's q and k norms, a sparse layer's
 *                                  router; its fc1/fc2/up are the experts' stacks,
 *                                  each stored as one entry per expert, expert
 *                                  after expert: an expert is read alone, or a run
 *                                  of them at once, and checked alone)
 *     .lock                        flock()ed while a process checks or builds
 *     *.partial                    a file being written; never read, replaced
 *                                  on the next build. A file appears under its
 *                                  real name only complete and fsync'ed (rename).
 *
 *   File: [0, header_bytes) header; then the tensors in table order, each at
 *   a multiple of 4096, zero-padded to the next one; the file ends at a
 *   multiple of 4096 (file_bytes). So [data_offset, file_bytes) is one
 *   O_DIRECT read, and tensor t lies at (t.offset - data_offset) in it.
 *
 *   Header (header_bytes, a multiple of 4096, zero-filled past the table):
 *     off size
 *       0    8  magic "FGSTORE\0"
 *       8    4  format version = 3 (2 accepted: the same without expert entries)
 *      12    4  header_bytes
 *      16    4  kind: 0 globals, 1 decoder layer
 *      20    4  layer index (0xFFFFFFFF for globals)
 *      24    4  n_layers of the model
 *      28    4  n_tensors in this file
 *      32    4  compression: 0 none, 1 q4g64 (each layer's fp16 weight matrices,
 *               up to seven, 4-bit, common/fg_q4.h; a ggml-quantized one stays
 *               as it is; everything else fp16)
 *      36    4  reserved, 0
 *      40    8  model identity: XXH3_64bits of 44 bytes: fg_wsrc_identity()
 *               of the weight source (u64; its kind, shaping config fields,
 *               and each weight file's name, format header bytes, size and
 *               mtime, or a dummy's seed: see model/fg_weights.h), the
 *               format version (u32) and the compression name (32 bytes,
 *               NUL-padded). Never derived from the description below.
 *      48    8  file_bytes: the file's exact size (a shorter file is truncated)
 *      56    8  data_offset = header_bytes
 *      64    8  data_bytes = file_bytes - data_offset
 *      72    8  header checksum: XXH3_64bits of the header_bytes bytes of
 *               the header with these 8 bytes zero
 *      80   64  model name, NUL-padded
 *     144  176  weight source description, NUL-padded (messages only)
 *     320  n_tensors x 160, the tensor table:
 *                 0  96  name (canonical spec name, no "model."), NUL-padded
 *                96   4  spec index (fg_specs_new order)
 *               100   4  dtype: the format (common/fg_fmt.h) + 1: 1 = fp16,
 *                          2 = FlexGen 4-bit (fg_q4.h: one slice of (dims[0],
 *                          dims[1]) grouped along dims[0]), 3 F32, 4 BF16,
 *                          5.. ggml's Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K,
 *                          Q3_K, Q4_K, Q5_K, Q6_K, MXFP4 (rows of blocks as
 *                          the GGUF file holds them, Q/K rows un-permuted);
 *                          every dtype but 1 only for ndim 2
 *               104   4  ndim (1 or 2)
 *               108   4  expert: 0 for a whole tensor, else e + 1 for expert e's
 *                          part of a stack (dims that part's: [rows / E, cols];
 *                          the stack's experts in consecutive entries, e = 0 ..)
 *               112   8  dims[0]
 *               120   8  dims[1] (1 when ndim == 1)
 *               128   8  offset from the start of the file (multiple of 4096)
 *               136   8  nbytes = fg_fmt_bytes(format, dims[0], dims[1]): numel x 2
 *                          (fp16), 36 x ceil(dims[0]/64) x dims[1] (4-bit), ...
 *               144   8  XXH3_64bits of those nbytes bytes
 *               152   8  reserved, 0
 */
#ifndef FG_STORE_H
#define FG_STORE_H

#include "fg_aio.h"
#include "fg_weights.h"

#define FG_STORE_VERSION 3
#define FG_STORE_IDENTITY_VERSION 2   /* the identity's: what a tensor's bytes are made from */
#define FG_STORE_ALIGN 4096ull  /* headers, tensors and files are multiples of it (O_DIRECT) */
#define FG_STORE_GLOBALS (-1)   /* the file argument for globals.bin */

typedef struct fg_store fg_store;

typedef struct {
    char name[96];
    int spec;           /* index into fg_wsrc_specs() / fg_specs_new() */
    int ndim;
    int64_t dims[2];
    uint64_t offset;    /* from the start of the file, a multiple of 4096 */
    uint64_t nbytes;    /* fg_fmt_bytes(fmt, dims[0], dims[1]) */
    int fmt;            /* the tensor's format (common/fg_fmt.h): dtype - 1 */
    int expert;         /* -1: a whole tensor; e: expert e's part of spec's stack */
    uint64_t checksum;  /* fg_store_checksum of the nbytes bytes */
} fg_store_tensor;

typedef struct {
    const char *compression;  /* NULL, or "none" / "q4g64", which must match the config's compress_weight */
    int verify_data;          /* also read every file and check its checksums */
    int qd;                   /* aio queue depth for building/verifying (0: 32) */
    uint64_t req_bytes;       /* aio request size (0: 1 MiB) */
    int quiet;                /* no progress line */
    /* a pipeline stage's share: only decoder layers [layers_lo, layers_hi)
     * (both 0: all) and, unless skip_globals, globals.bin are checked and
     * built; the others' tensors are laid out as always but never read */
    int layers_lo, layers_hi, skip_globals;
} fg_store_opts;

/* Check the store of ws's model under `dir` (created if needed) and
 * (re)build every file that is not valid. Errors (ENOSPC, EIO, ...) name the
 * file and leave no file that looks complete. opts may be NULL. */
fg_status fg_store_open_or_build(const char *dir, fg_wsrc *ws, fg_store **out);
fg_status fg_store_open_or_build_ex(const char *dir, fg_wsrc *ws, const fg_store_opts *opts, fg_store **out);

/* Open an existing store read-only, without the weight source (the disk
 * worker, tools): `model_dir` is <offload-dir>/<model-id>. Every file's
 * header must be valid and agree on the identity, else FG_ERUNTIME naming
 * the file (nothing is rebuilt). */
fg_status fg_store_open(const char *model_dir, fg_store **out);

void fg_store_destroy(fg_store **store);

const char *fg_store_dir(const fg_store *s);        /* <offload-dir>/<model-id> */
uint64_t fg_store_identity(const fg_store *s);
int fg_store_n_layers(const fg_store *s);

/* Per file: `file` is a layer index or FG_STORE_GLOBALS. */
const char *fg_store_path(const fg_store *s, int file);
const fg_store_tensor *fg_store_tensors(const fg_store *s, int file, int *n);
/* The file's data region: one read of *nbytes at *offset (both multiples of
 * 4096) brings every tensor of the file into memory. */
void fg_store_data_range(const fg_store *s, int file, uint64_t *offset, uint64_t *nbytes);
/* The largest data region of any file (a buffer size that fits each). */
uint64_t fg_store_max_data_bytes(const fg_store *s);
uint64_t fg_store_total_bytes(const fg_store *s);   /* all files' data regions */

/* The store's checksum of n bytes: XXH3_64bits, seed 0. For a caller that
 * checks one tensor it read against fg_store_tensor.checksum. */
uint64_t fg_store_checksum(const void *p, size_t n);

/* Check the checksums of `data`, the file's data region as read into memory.
 * FG_ERUNTIME naming the file and tensor on a mismatch. Pure: the caller
 * decides whether to retry the read or repair the file. */
fg_status fg_store_verify(const fg_store *s, int file, const void *data);

/* Read a file's data region into buf (4096-aligned, fg_store_data_range
 * bytes) with O_DIRECT through aio; verify it too if asked. */
fg_status fg_store_read(const fg_store *s, fg_aio *aio, int file, void *buf, int verify);

/* After fg_store_verify failed (and a second read did too): rebuild the file
 * now from ws, or, without the weights at hand (the disk worker), remove it
 * so the next fg_store_open_or_build rebuilds it. */
fg_status fg_store_repair(fg_store *s, fg_wsrc *ws, int file);
fg_status fg_store_invalidate(fg_store *s, int file);

#endif

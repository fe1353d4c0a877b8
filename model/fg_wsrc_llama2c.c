/* fg_wsrc_llama2c.c - a llama2.c checkpoint (Karpathy's run.c format) as a
 * weight source: `--model FILE.bin`. Two layouts are read, recognised by
 * their first bytes:
 *   legacy (version 0): seven int32 (dim, hidden_dim, n_layers, n_heads,
 *     n_kv_heads, vocab_size, seq_len; vocab_size negative when a separate
 *     classifier follows), then float32 tensors: token embedding [V, D],
 *     rms_att [L, D], wq [L, D, D], wk [L, KV, D], wv [L, KV, D],
 *     wo [L, D, D], rms_ffn [L, D], w1 [L, F, D], w2 [L, D, F],
 *     w3 [L, F, D], rms_final [D], two rotary tables [seq_len, hs/2]
 *     (skipped: the engine computes its own), then the classifier [V, D];
 *   version 1: uint32 magic 0x616b3432 ("ak42"), int32 version 1, the same
 *     seven int32, a uint8 shared_classifier, zeros to 256 bytes; then
 *     rms_att [L, D], rms_ffn [L, D], rms_final [D], the token embedding,
 *     wq, wk, wv, wo, w1, w2, w3 as above, the classifier unless shared.
 * Version 2 (int8 groups) and anything else are refused, as is a file
 * whose length is not exactly what its header adds up to. The config is
 * the Llama family's (model/fg_family_llama.c: fg_family_llama_llama2c);
 * q and k rows are stored for interleaved rotary pairs, as in a GGUF file,
 * and are unpermuted on read by the same function. Tensors are read as
 * F32 through fg_weights.c's path (fp16, overflow counted). */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fg_family.h"
#include "fg_wsrc_int.h"

#define L2C_MAGIC 0x616b3432u      /* "ak42" as a little-endian uint32 */
#define L2C_LEGACY_HEAD 28         /* seven int32 */
#define L2C_V1_HEAD 256            /* version 1's padded header */

static const char *const field_name[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads",
                                          "vocab_size", "seq_len"};

/* The order a layout writes its tensors in, as (spec role, per layer?):
 * roles are fg_config.h's layer and global indices. */
typedef struct {
    int layer;   /* 1: one tensor per layer, L of them in a row; 0: global */
    int role;    /* FG_LW_* or FG_GW_* */
} l2c_part;

static const l2c_part legacy_order[] = {
    {0, FG_GW_EMBED_TOKENS}, {1, FG_LW_LN1_W}, {1, FG_LW_Q_W}, {1, FG_LW_K_W}, {1, FG_LW_V_W},
    {1, FG_LW_O_W}, {1, FG_LW_LN2_W}, {1, FG_LW_FC1_W}, {1, FG_LW_FC2_W}, {1, FG_LW_UP_W},
    {0, FG_GW_FINAL_LN_W},
};
static const l2c_part v1_order[] = {
    {1, FG_LW_LN1_W}, {1, FG_LW_LN2_W}, {0, FG_GW_FINAL_LN_W}, {0, FG_GW_EMBED_TOKENS}, {1, FG_LW_Q_W},
    {1, FG_LW_K_W}, {1, FG_LW_V_W}, {1, FG_LW_O_W}, {1, FG_LW_FC1_W}, {1, FG_LW_FC2_W}, {1, FG_LW_UP_W},
};

static int32_t rd_i32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Lay the parts out from *off (bytes), binding each spec; *off ends past
 * them. Overflow cannot happen: every size is bounded by the config's
 * validation (FG_CONFIG_DIM_MAX) before this runs. */
static void bind_parts(fg_wsrc *ws, const l2c_part *parts, size_t n, int fi, uint64_t *off) {
    for (size_t i = 0; i < n; i++) {
        int nl = parts[i].layer ? ws->cfg.n_layers : 1;
        for (int l = 0; l < nl; l++) {
            int idx = parts[i].layer ? fg_spec_layer(l, parts[i].role) : fg_spec_global(parts[i].role);
            int w = parts[i].layer ? parts[i].role : -1;
            ws->locs[idx] = (tensor_loc){.file = fi, .offset = (size_t)*off, .dt = DT_F32,
                                         .unpermute = fg_family_llama_unpermute_interleaved(&ws->cfg, w)};
            *off += 4 * (uint64_t)fg_spec_numel(&ws->specs[idx]);
        }
    }
}

/* The model's name: the file's, without its folder and ".bin". */
static void name_from_path(const char *path, char *name, size_t cap) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(b);
    if (n > 4 && !strcmp(b + n - 4, ".bin")) n -= 4;
    snprintf(name, cap, "%.*s", (int)(n < cap ? n : cap - 1), b);
}

fg_status fg_wsrc__open_llama2c(const char *path, fg_wsrc **out) {
    *out = NULL;
    fg_wsrc probe = {0};
    int fi;
    fg_status st = fg_wsrc__map_file(&probe, path, &fi);
    if (st) return st;
    const uint8_t *m = probe.files[0].map;
    uint64_t size = probe.files[0].size;
    fg_wsrc *ws = NULL;
    int version = 0, shared = 0;
    uint64_t head = L2C_LEGACY_HEAD;
    if (size >= 8 && rd_i32(m) == (int32_t)L2C_MAGIC) {
        version = rd_i32(m + 4);
        if (version != 1) {
            st = fg_err_set(FG_EINPUT, "%s: llama2.c checkpoint version %d is not supported (version 0 and 1 "
                                       "float32 checkpoints are; version 2 is int8-quantized: export version 1)",
                            path, version);
            goto out;
        }
        head = L2C_V1_HEAD;
    }
    if (size < head) {
        st = fg_err_set(FG_EINPUT, "%s: %llu bytes: too short for a llama2.c %s header (%llu bytes)", path,
                        (unsigned long long)size, version ? "version 1" : "legacy", (unsigned long long)head);
        goto out;
    }
    const uint8_t *p = m + (version ? 8 : 0);
    int32_t f[7];
    for (int i = 0; i < 7; i++) f[i] = rd_i32(p + 4 * i);
    if (version) {
        shared = m[36];
        if (shared > 1) {
            st = fg_err_set(FG_EINPUT, "%s: header field shared_classifier is %d, expected 0 or 1", path, shared);
            goto out;
        }
    } else {
        shared = f[5] > 0;
        if (f[5] < 0) f[5] = f[5] == INT32_MIN ? 0 : -f[5];   /* 0: refused below, as out of range */
    }
    for (int i = 0; i < 7; i++)
        if (f[i] <= 0 || f[i] > FG_CONFIG_DIM_MAX) {
            st = fg_err_set(FG_EINPUT, "%s: header field %s is %d, expected 1..%d (not a llama2.c checkpoint?)",
                            path, field_name[i], rd_i32(p + 4 * i), FG_CONFIG_DIM_MAX);
            goto out;
        }
    if (f[0] % f[3] || f[3] % f[4]) {
        st = fg_err_set(FG_EINPUT, "%s: header field %s is %d, which does not divide %s %d", path,
                        f[0] % f[3] ? "n_heads" : "n_kv_heads", f[0] % f[3] ? f[3] : f[4],
                        f[0] % f[3] ? "dim" : "n_heads", f[0] % f[3] ? f[0] : f[3]);
        goto out;
    }
    fg_model_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.hidden = f[0], cfg.ffn_dim = f[1], cfg.n_layers = f[2], cfg.n_heads = f[3], cfg.n_kv_heads = f[4];
    cfg.vocab_size = f[5], cfg.max_pos = f[6], cfg.head_dim = f[0] / f[3], cfg.tied = shared;
    if (cfg.n_layers > FG_CONFIG_MAX_LAYERS) {
        st = fg_err_set(FG_EINPUT, "%s: header field n_layers is %d, more than %d", path, cfg.n_layers,
                        FG_CONFIG_MAX_LAYERS);
        goto out;
    }
    name_from_path(path, cfg.name, sizeof cfg.name);
    fg_family_llama_llama2c(&cfg);
    if ((st = fg_config_validate(&cfg, path))) goto out;
    ws = fg_wsrc__alloc(&cfg);
    ws->kind = WS_LLAMA2C;
    ws->files = probe.files, ws->n_files = probe.n_files;
    probe.files = NULL, probe.n_files = 0;
    ws->files[0].head = (size_t)head;
    uint64_t off = head;
    if (version) {
        bind_parts(ws, v1_order, sizeof v1_order / sizeof v1_order[0], 0, &off);
    } else {
        bind_parts(ws, legacy_order, sizeof legacy_order / sizeof legacy_order[0], 0, &off);
        off += 2 * 4 * (uint64_t)cfg.max_pos * (uint64_t)(cfg.head_dim / 2);   /* freq_cis_real, _imag */
    }
    if (!shared) bind_parts(ws, &(l2c_part){0, FG_GW_LM_HEAD}, 1, 0, &off);
    if (off != size) {
        st = fg_err_set(FG_EINPUT, "%s: %llu bytes, but its header (dim %d, hidden_dim %d, n_layers %d, n_heads "
                                   "%d, n_kv_heads %d, vocab_size %d%s, seq_len %d) needs %llu: %s", path,
                        (unsigned long long)size, f[0], f[1], f[2], f[3], f[4], f[5],
                        shared ? "" : " and a classifier", f[6], (unsigned long long)off,
                        off > size ? "truncated" : "trailing bytes or a wrong header");
        goto out;
    }
    snprintf(ws->desc, sizeof ws->desc, "llama2.c checkpoint %s (version %d)", path, version);
    st = fg_wsrc__check_complete(ws, path);
out:
    if (probe.files) {
        for (int i = 0; i < probe.n_files; i++)
            if (probe.files[i].map) munmap((void *)probe.files[i].map, probe.files[i].size);
        free(probe.files);
    }
    if (st) fg_wsrc_destroy(&ws);
    *out = ws;
    return st;
}

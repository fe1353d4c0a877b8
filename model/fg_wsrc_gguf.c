/* fg_wsrc_gguf.c - a GGUF file (llama.cpp's format) as a weight source:
 * `--model FILE.gguf`. The config comes from the metadata through the family
 * of general.architecture (fg_family.h: from_gguf, llama.cpp's tensor
 * names); every tensor is checked against the specs before anything is
 * read; reading converts through model/fg_gguf.h (F32, F16, BF16, Q8_0
 * expanded to fp16(d * q)) and undoes llama.cpp's Q/K row permutation. A
 * sparse layer's experts come as llama.cpp merges them, one 3-D tensor per
 * role whose ne [in, rows, E] is the stack [E * rows, in] byte for byte
 * (rows of whole blocks in any format), or, in older files, one 2-D tensor
 * per expert, bound as the stack's parts. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "fg_family.h"
#include "fg_fmt.h"
#include "fg_wsrc_int.h"

/* The number in name where pattern has "%d" (digits only, nothing else
 * differing), or -1. */
static long match_numbered(const char *name, const char *pat) {
    const char *at = strstr(pat, "%d");
    size_t pre = at ? (size_t)(at - pat) : 0;
    if (!at || strncmp(name, pat, pre) || !isdigit((unsigned char)name[pre])) return -1;
    char *end;
    long v = strtol(name + pre, &end, 10);
    return end - (name + pre) <= 9 && !strcmp(end, at + 2) ? v : -1;
}

/* A GGUF tensor's spec index by the family's llama.cpp names: -1 for a name
 * the model has no tensor for, -2 for one the config has already read;
 * *w its layer role (or -1), *expert the expert whose matrix an older
 * file's per-expert tensor is (or -1). A sparse layer's FC1, UP and FC2 go
 * by the experts' names only, a dense layer's by the dense ones. */
static int gguf_lookup(const fg_family *fam, const fg_wsrc *ws, const char *name, int *w, int *expert) {
    *w = -1, *expert = -1;
    for (const char *const *ig = fam->gguf_ignored; ig && *ig; ig++)
        if (!strcmp(*ig, name)) return -2;
    for (int g = 0; g < FG_GW_COUNT; g++)
        if (*fam->gguf_global_name[g] && !strcmp(name, fam->gguf_global_name[g])) return ws->specs[g].present ? g : -1;
    if (strncmp(name, "blk.", 4)) return -1;
    char *end;
    long l = strtol(name + 4, &end, 10);
    if (end == name + 4 || *end != '.' || l < 0 || l >= ws->cfg.n_layers) return -1;
    for (int k = 0; k < FG_LW_COUNT; k++) {
        int idx = fg_spec_layer((int)l, k), stacked = fg_spec_is_experts(&ws->cfg, idx);
        const char *whole = stacked ? fam->gguf_moe_suffix[k] : fam->gguf_layer_suffix[k];
        const char *part = stacked ? fam->gguf_expert_suffix[k] : NULL;
        long e = part && *part ? match_numbered(end + 1, part) : -1;
        if (!(whole && *whole && !strcmp(end + 1, whole)) && e < 0) continue;
        if (e >= ws->cfg.n_experts) return -1;
        *w = k, *expert = (int)e;
        return ws->specs[idx].present ? idx : -1;
    }
    return -1;
}

/* Tensor t's format: a matrix in one of ggml's block formats stays in it
 * (common/fg_fmt.h); F32, F16 and BF16 matrices, every 1-D tensor and a
 * matrix whose format the description does not carry (the router:
 * fg_config_fmt_slot) are held fp16 (values fp16 cannot hold counted at
 * read). Any other type (IQ*, TQ*, ...) is refused here, before anything is
 * read, and so are an expert's matrix in another format than the experts
 * bound before it (a stack is one format). */
static fg_status gguf_format(fg_wsrc *ws, int idx, const fg_gguf_tensor *t, const char *path, int first) {
    int fmt = fg_fmt_of_ggml(t->type);
    if (fmt < 0)
        return fg_err_set(FG_EINPUT, "%s: tensor '%s' is %s, a type this engine does not hold (it holds F32, F16, "
                          "BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, MXFP4)", path, t->name,
                          fg_gguf_type_name(t->type));
    if (fmt == FG_FMT_F32 || fmt == FG_FMT_BF16) fmt = FG_FMT_F16;
    if (fmt != FG_FMT_F16 && t->n_dims == 1)
        return fg_err_set(FG_EINPUT, "%s: tensor '%s' is a %d-D %s tensor: this engine holds only matrices "
                          "quantized (norms and biases F32, F16 or BF16)", path, t->name, t->n_dims,
                          fg_gguf_type_name(t->type));
    if (fg_config_fmt_slot(idx) < 0) fmt = FG_FMT_F16;
    if (fmt != FG_FMT_F16 && ws->specs[idx].ndim == 2 && !fg_fmt_row_bytes(fmt, t->ne[0]))
        return fg_err_set(FG_EINPUT, "%s: tensor '%s' (%s): rows of %llu values are not whole blocks of %d", path,
                          t->name, fg_gguf_type_name(t->type), (unsigned long long)t->ne[0], fg_fmt_get(fmt)->block);
    if (!first && fmt != ws->specs[idx].fmt)
        return fg_err_set(FG_EINPUT, "%s: tensor '%s' is %s where the layer's other experts are %s: one role's "
                          "experts must share a format", path, t->name, fg_gguf_type_name(t->type),
                          fg_fmt_name(ws->specs[idx].fmt));
    ws->specs[idx].fmt = fmt;
    return FG_OK;
}

/* ggml's ne as text: "[a, b, c]" over n dimensions. */
static const char *ne_str(int n, const uint64_t *ne, char *buf, size_t cap) {
    size_t at = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < n && at < cap; d++)
        at += (size_t)snprintf(buf + at, cap - at, d ? ", %llu" : "%llu", (unsigned long long)ne[d]);
    if (at < cap) snprintf(buf + at, cap - at, "]");
    return buf;
}

/* The ne llama.cpp gives spec s (the Hugging Face shape reversed), or for
 * a stack of E experts [E * rows, in] its merged [in, rows, E] (expert -1)
 * or one expert's [in, rows]: the dimension count. */
static int want_ne(const fg_spec *s, int stacked, int E, int expert, uint64_t ne[3]) {
    ne[0] = (uint64_t)(s->ndim == 2 ? s->dims[1] : s->dims[0]);
    ne[1] = (uint64_t)(s->ndim == 2 ? s->dims[0] : 1), ne[2] = 1;
    if (!stacked) return s->ndim;
    ne[1] /= (uint64_t)E;
    if (expert >= 0) return 2;
    ne[2] = (uint64_t)E;
    return 3;
}

/* llama.cpp's name for spec idx (expert e's own tensor where e >= 0), or
 * "" where the family gives it none. */
static void gguf_name_of(const fg_family *fam, const fg_wsrc *ws, int idx, int e, char *out, size_t cap) {
    *out = 0;
    if (idx < FG_GW_COUNT) {
        snprintf(out, cap, "%s", fam->gguf_global_name[idx]);
        return;
    }
    int l = (idx - FG_GW_COUNT) / FG_LW_COUNT, w = (idx - FG_GW_COUNT) % FG_LW_COUNT;
    const char *suf = !fg_spec_is_experts(&ws->cfg, idx) ? fam->gguf_layer_suffix[w]
                      : e < 0                          ? fam->gguf_moe_suffix[w]
                                                       : fam->gguf_expert_suffix[w];
    if (!suf || !*suf) return;
    const char *at = e >= 0 ? strstr(suf, "%d") : NULL;   /* the pattern's number: e */
    if (at) snprintf(out, cap, "blk.%d.%.*s%d%s", l, (int)(at - suf), suf, e, at + 2);
    else snprintf(out, cap, "blk.%d.%s", l, suf);
}

/* FG_EINPUT naming, by llama.cpp's name and ne, the first tensor the config
 * needs and the file lacks (an expert's own where the others are there). */
static fg_status gguf_check_complete(fg_wsrc *ws, const fg_family *fam, const char *path) {
    for (int i = 0; i < fg_spec_count(&ws->cfg); i++) {
        if (!ws->specs[i].present || ws->locs[i].file >= 0) continue;
        int stacked = fg_spec_is_experts(&ws->cfg, i), e = -1;
        if (stacked && fg_wsrc__any_part(ws, i)) {   /* bound in parts: the first expert missing, if any */
            for (e = 0; e < ws->cfg.n_experts && fg_wsrc__part(ws, i, e)->file >= 0; e++) {}
            if (e == ws->cfg.n_experts) continue;
        }
        char name[128], ne_buf[96];
        uint64_t ne[3];
        int nd = want_ne(&ws->specs[i], stacked, ws->cfg.n_experts, e, ne);
        gguf_name_of(fam, ws, i, e, name, sizeof name);
        return fg_err_set(FG_EINPUT, "%s: missing tensor '%s' (ne %s; %s)", path, *name ? name : ws->specs[i].name,
                          ne_str(nd, ne, ne_buf, sizeof ne_buf), ws->specs[i].name);
    }
    return FG_OK;
}

/* Every tensor of the file against the specs: its name, its shape (ggml's
 * ne is the Hugging Face shape reversed), and where to find it. */
static fg_status gguf_bind(fg_wsrc *ws, const fg_family *fam, const char *arch, int fi) {
    const char *path = ws->files[fi].path;
    for (int64_t i = 0; i < fg_gguf_tensor_count(ws->gguf); i++) {
        const fg_gguf_tensor *t = fg_gguf_tensor_at(ws->gguf, i);
        int w, e, idx = gguf_lookup(fam, ws, t->name, &w, &e);
        if (idx == -2) continue;
        if (idx < 0)
            return fg_err_set(FG_EINPUT, "%s: tensor '%s' is not part of a %s model with this config (%d layers%s%s)",
                              path, t->name, fam->name, ws->cfg.n_layers, ws->cfg.tied ? ", tied head" : "",
                              ws->cfg.n_experts ? ", experts as the file's routers say" : "");
        const fg_spec *s = &ws->specs[idx];
        int stacked = fg_spec_is_experts(&ws->cfg, idx);
        uint64_t ne[3];
        int nd = want_ne(s, stacked, ws->cfg.n_experts, e, ne);
        if (t->n_dims != nd || t->ne[0] != ne[0] || t->ne[1] != ne[1] || t->ne[2] != ne[2]) {
            char a[96], b[96];
            return fg_err_set(FG_EINPUT, "%s: tensor '%s' has ne %s, expected %s from the metadata (%s)", path,
                              t->name, ne_str(t->n_dims, t->ne, a, sizeof a), ne_str(nd, ne, b, sizeof b), s->name);
        }
        int bound_parts = stacked && fg_wsrc__any_part(ws, idx);
        tensor_loc *l = e >= 0 ? fg_wsrc__part(ws, idx, e) : &ws->locs[idx];
        if (l->file >= 0 || (e >= 0 && ws->locs[idx].file >= 0) || (e < 0 && bound_parts))
            return fg_err_set(FG_EINPUT, "%s: tensor '%s' appears twice (or a layer's experts both merged and one "
                                         "by one)", path, t->name);
        fg_status st = gguf_format(ws, idx, t, path, !bound_parts);
        if (st) return st;
        *l = (tensor_loc){.file = fi, .offset = (size_t)i, .dt = DT_F16,
                          .unpermute = w >= 0 ? fam->gguf_unpermute(&ws->cfg, arch, w) : 0};
    }
    return gguf_check_complete(ws, fam, path);
}

/* A GGUF file: the config from its metadata by the family of its
 * general.architecture, then its tensors bound to the specs. The file is
 * also mapped for the identity: its header up to the first tensor (the
 * metadata and the tensor table), its size and mtime. */
fg_status fg_wsrc__open_gguf(const char *path, fg_wsrc **out) {
    fg_gguf *g;
    fg_status st = fg_gguf_open(path, &g);
    if (st) return st;
    const char *arch = NULL;
    const fg_family *fam = NULL;
    fg_model_config cfg;
    memset(&cfg, 0, sizeof cfg);
    if (!(st = fg_gguf_get_string(g, "general.architecture", &arch, NULL)) && !(fam = fg_family_of_gguf_arch(arch)))
        st = fg_err_set(FG_EINPUT, "%s: general.architecture is \"%s\", which this engine does not read (llama, "
                                   "qwen2, qwen3, qwen3moe)", path, arch);
    if (!st) st = fam->from_gguf(g, arch, &cfg);
    if (!st) st = fg_config_validate(&cfg, path);
    if (st) {
        fg_gguf_close(&g);
        return st;
    }
    fg_wsrc *ws = fg_wsrc__alloc(&cfg);
    ws->kind = WS_GGUF;
    ws->gguf = g;
    snprintf(ws->desc, sizeof ws->desc, "GGUF %s (%s)", path, arch);
    int fi;
    if (!(st = fg_wsrc__map_file(ws, path, &fi))) {
        uint64_t head = ws->files[fi].size;
        for (int64_t i = 0; i < fg_gguf_tensor_count(g); i++)
            if (fg_gguf_tensor_at(g, i)->offset < head) head = fg_gguf_tensor_at(g, i)->offset;
        ws->files[fi].head = (size_t)head;
        st = gguf_bind(ws, fam, arch, fi);
    }
    if (st) {
        fg_wsrc_destroy(&ws);
        return st;
    }
    *out = ws;
    return FG_OK;
}

/* Where spec idx lives: its one tensor, or expert e's (a stack bound in
 * parts; e ignored otherwise). */
static const tensor_loc *loc_of(fg_wsrc *ws, int idx, int e) {
    return ws->locs[idx].file >= 0 ? &ws->locs[idx] : fg_wsrc__part(ws, idx, e);
}

static int n_pieces(const fg_wsrc *ws, int idx) { return ws->locs[idx].file >= 0 ? 1 : ws->cfg.n_experts; }

fg_status fg_wsrc__read_raw(fg_wsrc *ws, int idx, void *dst) {
    uint8_t *p = dst;
    for (int e = 0; e < n_pieces(ws, idx); e++) {
        const tensor_loc *l = loc_of(ws, idx, e);
        const fg_gguf_tensor *t = fg_gguf_tensor_at(ws->gguf, (int64_t)l->offset);
        FG_ASSERT(ws->kind == WS_GGUF && fg_fmt_of_ggml(t->type) == ws->specs[idx].fmt);
        fg_status st = fg_gguf_read_raw(ws->gguf, t->name, p, (size_t)t->nbytes, l->unpermute);
        if (st) return st;
        p += t->nbytes;
    }
    return FG_OK;
}

/* A tensor in one of ggml's block formats as fp16 (for a reader that wants
 * every tensor fp16: tools, the fuzz target; and a router the file holds
 * quantized): its blocks dequantized, then rounded. */
static fg_status read_expanded(fg_wsrc *ws, const tensor_loc *l, const fg_gguf_tensor *t, fg_half *dst, size_t n) {
    uint8_t *raw = malloc((size_t)t->nbytes);
    float *f = malloc(n * sizeof(float));
    fg_status st = raw && f ? fg_gguf_read_raw(ws->gguf, t->name, raw, (size_t)t->nbytes, l->unpermute)
                            : fg_err_set(FG_ERUNTIME, "%s: out of memory reading %s", fg_gguf_path(ws->gguf), t->name);
    if (!st) {
        fg_fmt_to_f32(fg_fmt_of_ggml(t->type), raw, f, n);
        fg_float_to_half_n(f, dst, n);
    }
    free(raw);
    free(f);
    return st;
}

/* One tensor of n values as fp16: converted by the reader (F32, F16, BF16,
 * Q8_0 expanded to fp16(d * q)) or dequantized, Q/K rows unpermuted;
 * values fp16 cannot hold are counted in the log, as for safetensors. */
static fg_status read_one(fg_wsrc *ws, const tensor_loc *l, fg_half *dst, size_t n) {
    const fg_gguf_tensor *t = fg_gguf_tensor_at(ws->gguf, (int64_t)l->offset);
    int fmt = fg_fmt_of_ggml(t->type);
    if (fmt != FG_FMT_F16 && fmt != FG_FMT_F32 && fmt != FG_FMT_BF16 && fmt != FG_FMT_Q8_0)
        return read_expanded(ws, l, t, dst, n);
    fg_gguf_read_opts o = {.unpermute_heads = l->unpermute, .allow_nonfinite = 1};
    uint64_t bad = 0;
    fg_status st = fg_gguf_read_f16_ex(ws->gguf, t->name, dst, n, &o, &bad);
    if (!st && bad)
        fg_warn("%s: tensor '%s' (%s): %llu of %zu values are not finite in fp16 (stored as inf or NaN)",
                fg_gguf_path(ws->gguf), t->name, fg_gguf_type_name(t->type), (unsigned long long)bad, n);
    return st;
}

/* Tensor idx of a GGUF source (n values), a stack bound in parts expert
 * after expert. */
fg_status fg_wsrc__read_gguf(fg_wsrc *ws, int idx, fg_half *dst, size_t n) {
    size_t m = n / (size_t)n_pieces(ws, idx);
    for (int e = 0; e < n_pieces(ws, idx); e++) {
        fg_status st = read_one(ws, loc_of(ws, idx, e), dst + (size_t)e * m, m);
        if (st) return st;
    }
    return FG_OK;
}

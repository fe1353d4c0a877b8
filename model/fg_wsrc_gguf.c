/* fg_wsrc_gguf.c - a GGUF file (llama.cpp's format) as a weight source:
 * `--model FILE.gguf`. The config comes from the metadata through the family
 * of general.architecture (fg_family.h: from_gguf, llama.cpp's tensor
 * names); every tensor is checked against the specs before anything is
 * read; reading converts through model/fg_gguf.h (F32, F16, BF16, Q8_0
 * expanded to fp16(d * q)) and undoes llama.cpp's Q/K row permutation. */
#include <stdlib.h>
#include <string.h>

#include "fg_family.h"
#include "fg_fmt.h"
#include "fg_wsrc_int.h"

/* A GGUF tensor's spec index by the family's llama.cpp names: -1 for a name
 * the model has no tensor for, -2 for one the config has already read;
 * *w = its layer role (or -1). */
static int gguf_lookup(const fg_family *fam, const fg_wsrc *ws, const char *name, int *w) {
    *w = -1;
    for (const char *const *ig = fam->gguf_ignored; ig && *ig; ig++)
        if (!strcmp(*ig, name)) return -2;
    for (int g = 0; g < FG_GW_COUNT; g++)
        if (*fam->gguf_global_name[g] && !strcmp(name, fam->gguf_global_name[g])) return ws->specs[g].present ? g : -1;
    if (strncmp(name, "blk.", 4)) return -1;
    char *end;
    long l = strtol(name + 4, &end, 10);
    if (end == name + 4 || *end != '.' || l < 0 || l >= ws->cfg.n_layers) return -1;
    for (int k = 0; k < FG_LW_COUNT; k++)
        if (*fam->gguf_layer_suffix[k] && !strcmp(end + 1, fam->gguf_layer_suffix[k])) {
            *w = k;
            return ws->specs[fg_spec_layer((int)l, k)].present ? fg_spec_layer((int)l, k) : -1;
        }
    return -1;
}

/* Tensor t's format: a matrix in one of ggml's block formats stays in it
 * (common/fg_fmt.h); F32, F16 and BF16 matrices and every 1-D tensor are
 * held fp16 (values fp16 cannot hold counted at read). Any other type
 * (IQ*, TQ*, ...) is refused here, before anything is read. */
static fg_status gguf_format(fg_wsrc *ws, int idx, const fg_gguf_tensor *t, const char *path) {
    int fmt = fg_fmt_of_ggml(t->type);
    if (fmt < 0)
        return fg_err_set(FG_EINPUT, "%s: tensor '%s' is %s, a type this engine does not hold (it holds F32, F16, "
                          "BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, MXFP4)", path, t->name,
                          fg_gguf_type_name(t->type));
    if (fmt == FG_FMT_F32 || fmt == FG_FMT_BF16) fmt = FG_FMT_F16;
    if (fmt != FG_FMT_F16 && t->n_dims != 2)
        return fg_err_set(FG_EINPUT, "%s: tensor '%s' is a %d-D %s tensor: this engine holds only matrices "
                          "quantized (norms and biases F32, F16 or BF16)", path, t->name, t->n_dims,
                          fg_gguf_type_name(t->type));
    if (fmt != FG_FMT_F16 && ws->specs[idx].ndim == 2 && !fg_fmt_row_bytes(fmt, t->ne[0]))
        return fg_err_set(FG_EINPUT, "%s: tensor '%s' (%s): rows of %llu values are not whole blocks of %d", path,
                          t->name, fg_gguf_type_name(t->type), (unsigned long long)t->ne[0], fg_fmt_get(fmt)->block);
    ws->specs[idx].fmt = fmt;
    return FG_OK;
}

/* Every tensor of the file against the specs: its name, its shape (ggml's
 * ne is the Hugging Face shape reversed), and where to find it. */
static fg_status gguf_bind(fg_wsrc *ws, const fg_family *fam, const char *arch, int fi) {
    const char *path = ws->files[fi].path;
    for (int64_t i = 0; i < fg_gguf_tensor_count(ws->gguf); i++) {
        const fg_gguf_tensor *t = fg_gguf_tensor_at(ws->gguf, i);
        int w, idx = gguf_lookup(fam, ws, t->name, &w);
        if (idx == -2) continue;
        if (idx < 0)
            return fg_err_set(FG_EINPUT, "%s: tensor '%s' is not part of a %s model with this config (%d layers%s)",
                              path, t->name, fam->name, ws->cfg.n_layers, ws->cfg.tied ? ", tied head" : "");
        const fg_spec *s = &ws->specs[idx];
        int64_t ne[2] = {s->ndim == 2 ? s->dims[1] : s->dims[0], s->ndim == 2 ? s->dims[0] : 1};
        if (t->n_dims != s->ndim || (int64_t)t->ne[0] != ne[0] || (s->ndim == 2 && (int64_t)t->ne[1] != ne[1]))
            return fg_err_set(FG_EINPUT, "%s: tensor '%s' has ne [%llu, %llu], expected [%lld, %lld] from the "
                                         "metadata (%s)", path, t->name, (unsigned long long)t->ne[0],
                              (unsigned long long)(t->n_dims > 1 ? t->ne[1] : 1), (long long)ne[0],
                              (long long)(s->ndim == 2 ? ne[1] : 1), s->name);
        if (ws->locs[idx].file >= 0) return fg_err_set(FG_EINPUT, "%s: tensor '%s' appears twice", path, t->name);
        fg_status st = gguf_format(ws, idx, t, path);
        if (st) return st;
        ws->locs[idx] = (tensor_loc){.file = fi, .offset = (size_t)i, .dt = DT_F16,
                                     .unpermute = w >= 0 ? fam->gguf_unpermute(&ws->cfg, arch, w) : 0};
    }
    return fg_wsrc__check_complete(ws, path);
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
                                   "qwen2)", path, arch);
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

fg_status fg_wsrc__read_raw(fg_wsrc *ws, int idx, void *dst) {
    const tensor_loc *l = &ws->locs[idx];
    const fg_gguf_tensor *t = fg_gguf_tensor_at(ws->gguf, (int64_t)l->offset);
    FG_ASSERT(ws->kind == WS_GGUF && fg_fmt_of_ggml(t->type) == ws->specs[idx].fmt);
    return fg_gguf_read_raw(ws->gguf, t->name, dst, (size_t)t->nbytes, l->unpermute);
}

/* A ggml-quantized tensor as fp16 (for a reader that wants every tensor
 * fp16: tools, the fuzz target): its blocks dequantized, then rounded. */
static fg_status read_expanded(fg_wsrc *ws, int idx, const fg_gguf_tensor *t, fg_half *dst, size_t n) {
    uint8_t *raw = malloc((size_t)t->nbytes);
    float *f = malloc(n * sizeof(float));
    fg_status st = raw && f ? fg_wsrc__read_raw(ws, idx, raw)
                            : fg_err_set(FG_ERUNTIME, "%s: out of memory reading %s", fg_gguf_path(ws->gguf), t->name);
    if (!st) {
        fg_fmt_to_f32(ws->specs[idx].fmt, raw, f, n);
        fg_float_to_half_n(f, dst, n);
    }
    free(raw);
    free(f);
    return st;
}

/* Tensor idx of a GGUF source: converted by the reader (F32, F16, BF16,
 * Q8_0 expanded to fp16(d * q)), Q/K rows unpermuted; values fp16 cannot
 * hold are counted in the log, as for safetensors. */
fg_status fg_wsrc__read_gguf(fg_wsrc *ws, int idx, fg_half *dst, size_t n) {
    const tensor_loc *l = &ws->locs[idx];
    const fg_gguf_tensor *t = fg_gguf_tensor_at(ws->gguf, (int64_t)l->offset);
    if (ws->specs[idx].fmt != FG_FMT_F16 && ws->specs[idx].fmt != FG_FMT_Q8_0) return read_expanded(ws, idx, t, dst, n);
    fg_gguf_read_opts o = {.unpermute_heads = l->unpermute, .allow_nonfinite = 1};
    uint64_t bad = 0;
    fg_status st = fg_gguf_read_f16_ex(ws->gguf, t->name, dst, n, &o, &bad);
    if (!st && bad)
        fg_warn("%s: tensor '%s' (%s): %llu of %zu values are not finite in fp16 (stored as inf or NaN)",
                fg_gguf_path(ws->gguf), t->name, fg_gguf_type_name(t->type), (unsigned long long)bad, n);
    return st;
}


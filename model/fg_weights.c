/* fg_weights.c - weight sources: safetensors (single or sharded), FlexGen
 * numpy directories and dummy weights, all validated against the config's
 * tensor specs before any tensor is read, and each source's identity (what
 * the tier store keys its files on). */
#include "fg_wsrc_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

static const int dt_size[] = {2, 2, 4};   /* bytes of a value of each dtype */
#define L2C_PROBE_BYTES 64                 /* enough of a file to tell its format */

/* ---- helpers ---- */

fg_status fg_wsrc__map_file(fg_wsrc *ws, const char *path, int *idx) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return fg_err_set(FG_EINPUT, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return fg_err_set(FG_EINPUT, "%s: not a regular file", path);
    }
    const uint8_t *m = NULL;
    if (st.st_size > 0) {
        m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            close(fd);
            return fg_err_set(FG_ERUNTIME, "%s: mmap failed: %s", path, strerror(errno));
        }
    }
    close(fd);
    ws->files = realloc(ws->files, sizeof *ws->files * (size_t)(ws->n_files + 1));
    FG_ASSERT(ws->files);
    mapped_file *f = &ws->files[ws->n_files];
    snprintf(f->path, sizeof f->path, "%s", path);
    f->map = m;
    f->size = (size_t)st.st_size;
    f->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    f->head = 0;
    *idx = ws->n_files++;
    return FG_OK;
}

static int path_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

static const char *shape_str(int ndim, const int64_t *d, char *buf, size_t n) {
    if (ndim == 1) snprintf(buf, n, "[%lld]", (long long)d[0]);
    else if (ndim == 2) snprintf(buf, n, "[%lld, %lld]", (long long)d[0], (long long)d[1]);
    else snprintf(buf, n, "(%d dims)", ndim);
    return buf;
}

/* The MLP roles whose experts a sparse layer stacks, in parts' order. */
static int part_role(int w) { return w == FG_LW_FC1_W ? 0 : w == FG_LW_FC2_W ? 1 : w == FG_LW_UP_W ? 2 : -1; }

tensor_loc *fg_wsrc__part(fg_wsrc *ws, int idx, int e) {
    int l = (idx - FG_GW_COUNT) / FG_LW_COUNT, m = part_role((idx - FG_GW_COUNT) % FG_LW_COUNT);
    FG_ASSERT(ws->parts && m >= 0 && e >= 0 && e < ws->cfg.n_experts);
    return &ws->parts[((size_t)l * 3 + (size_t)m) * (size_t)ws->cfg.n_experts + (size_t)e];
}

/* The name a checkpoint gives expert e of stacked spec s: its "*" the number. */
static void part_name(const fg_spec *s, int e, char *out, size_t cap) {
    const char *star = strchr(s->name, '*');
    snprintf(out, cap, "%.*s%d%s", star ? (int)(star - s->name) : 0, s->name, e, star ? star + 1 : s->name);
}

int fg_wsrc__any_part(fg_wsrc *ws, int idx) {
    for (int e = 0; fg_spec_is_experts(&ws->cfg, idx) && e < ws->cfg.n_experts; e++)
        if (fg_wsrc__part(ws, idx, e)->file >= 0) return 1;
    return 0;
}

/* Check one found tensor against its spec (a whole one, or one expert's
 * share of a stacked one) and record where it lives. */
static fg_status bind_tensor(fg_wsrc *ws, const char *file, const char *name, dtype dt, int ndim,
                             const int64_t *dims, int file_idx, size_t offset) {
    int e, idx = fg_spec_lookup_part(&ws->cfg, ws->specs, name, &e);
    char a[64], b[64];
    if (idx == -1)
        return fg_err_set(FG_EINPUT, "%s: tensor '%s' is not part of a %s model with this config "
                                     "(%d layers, word_embed_proj_dim %d%s)",
                          file, name, fg_config_family_name(&ws->cfg), ws->cfg.n_layers,
                          ws->cfg.word_embed_proj_dim, ws->cfg.qkv_bias ? "" : ", no q/k/v biases");
    if (idx == -2) { /* tied LM head: only its shape must fit */
        if (ndim != 2 || dims[0] != ws->cfg.vocab_size || dims[1] != ws->cfg.word_embed_proj_dim)
            return fg_err_set(FG_EINPUT, "%s: tensor '%s' has shape %s, expected [%d, %d]", file, name,
                              shape_str(ndim, dims, a, sizeof a), ws->cfg.vocab_size, ws->cfg.word_embed_proj_dim);
        return FG_OK;
    }
    const fg_spec *s = &ws->specs[idx];
    int64_t want[2] = {e >= 0 ? s->dims[0] / ws->cfg.n_experts : s->dims[0], s->dims[1]};
    if (ndim != s->ndim || dims[0] != want[0] || (ndim == 2 && dims[1] != want[1]))
        return fg_err_set(FG_EINPUT, "%s: tensor '%s' has shape %s, expected %s from the config", file, name,
                          shape_str(ndim, dims, a, sizeof a), shape_str(s->ndim, want, b, sizeof b));
    tensor_loc *l = e >= 0 ? fg_wsrc__part(ws, idx, e) : &ws->locs[idx];
    if (l->file >= 0 || (e >= 0 && ws->locs[idx].file >= 0) || (e < 0 && fg_wsrc__any_part(ws, idx)))
        return fg_err_set(FG_EINPUT, "%s: tensor '%s' appears twice (also in %s)", file, name,
                          ws->files[l->file >= 0 ? l->file : ws->locs[idx].file >= 0 ? ws->locs[idx].file : file_idx].path);
    *l = (tensor_loc){.file = file_idx, .offset = offset, .dt = dt};
    return FG_OK;
}

/* A present spec with nothing bound: "'NAME' (shape [...])", or for a stack
 * of experts bound in parts, the first missing expert's name and shape. */
static int missing(fg_wsrc *ws, int i, char *what, size_t cap) {
    const fg_spec *s = &ws->specs[i];
    if (!s->present || ws->locs[i].file >= 0) return 0;
    char d1[32] = "";   /* a vector's shape has one number */
    if (s->ndim == 2) snprintf(d1, sizeof d1, ", %lld", (long long)s->dims[1]);
    if (!fg_wsrc__any_part(ws, i)) {
        snprintf(what, cap, "'%s' (shape [%lld%s])", s->name, (long long)s->dims[0], d1);
        return 1;
    }
    for (int e = 0; e < ws->cfg.n_experts; e++)
        if (fg_wsrc__part(ws, i, e)->file < 0) {
            char n[sizeof s->name + 16];
            part_name(s, e, n, sizeof n);
            snprintf(what, cap, "'%s' (shape [%lld%s])", n, (long long)(s->dims[0] / ws->cfg.n_experts), d1);
            return 1;
        }
    return 0;
}

fg_status fg_wsrc__check_complete(fg_wsrc *ws, const char *where) {
    char what[256];
    for (int i = 0; i < fg_spec_count(&ws->cfg); i++)
        if (missing(ws, i, what, sizeof what)) return fg_err_set(FG_EINPUT, "%s: missing tensor %s", where, what);
    return FG_OK;
}

/* ---- safetensors ---- */

typedef struct { uint64_t b, e; const char *name; } span;

static int span_cmp(const void *x, const void *y) {
    const span *a = x, *b = y;
    return a->b < b->b ? -1 : a->b > b->b ? 1 : (a->e < b->e ? -1 : a->e > b->e);
}

static fg_status parse_safetensors(fg_wsrc *ws, const char *path) {
    int fi;
    fg_status st = fg_wsrc__map_file(ws, path, &fi);
    if (st) return st;
    const mapped_file *f = &ws->files[fi];
    if (f->size < 8) return fg_err_set(FG_EINPUT, "%s: truncated: %zu bytes, no safetensors header", path, f->size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | f->map[i];
    if (hlen > f->size - 8)
        return fg_err_set(FG_EINPUT, "%s: header length %llu runs past the end of the file (%zu bytes)", path,
                          (unsigned long long)hlen, f->size);
    ws->files[fi].head = 8 + (size_t)hlen;
    json_error_t jerr;
    json_t *root = json_loadb((const char *)f->map + 8, (size_t)hlen, 0, &jerr);
    if (!root) return fg_err_set(FG_EINPUT, "%s: header is not valid JSON: %s", path, jerr.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return fg_err_set(FG_EINPUT, "%s: header is not a JSON object", path);
    }
    uint64_t data_start = 8 + hlen, data_size = f->size - data_start;
    size_t n = json_object_size(root), ns = 0;
    span *spans = fg_xcalloc(n ? n : 1, sizeof *spans);
    const char *name;
    json_t *t;
    json_object_foreach(root, name, t) {
        if (!strcmp(name, "__metadata__")) continue;
        json_t *jd = json_object_get(t, "dtype"), *js = json_object_get(t, "shape"),
               *jo = json_object_get(t, "data_offsets");
        if (!json_is_object(t) || !json_is_string(jd) || !json_is_array(js) || !json_is_array(jo) ||
            json_array_size(jo) != 2 || !json_is_integer(json_array_get(jo, 0)) ||
            !json_is_integer(json_array_get(jo, 1))) {
            st = fg_err_set(FG_EINPUT, "%s: tensor '%s': header entry needs dtype, shape and two data_offsets", path, name);
            goto out;
        }
        const char *ds = json_string_value(jd);
        dtype dt;
        if (!strcmp(ds, "F16")) dt = DT_F16;
        else if (!strcmp(ds, "BF16")) dt = DT_BF16;
        else if (!strcmp(ds, "F32")) dt = DT_F32;
        else {
            st = fg_err_set(FG_EINPUT, "%s: tensor '%s' has dtype %s; supported: F16, BF16, F32", path, name, ds);
            goto out;
        }
        int ndim = (int)json_array_size(js);
        int64_t dims[8] = {0};
        uint64_t numel = 1;
        if (ndim < 1 || ndim > 8) {
            st = fg_err_set(FG_EINPUT, "%s: tensor '%s' has %d dimensions", path, name, ndim);
            goto out;
        }
        for (int d = 0; d < ndim; d++) {
            json_t *x = json_array_get(js, (size_t)d);
            if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > (1LL << 40)) {
                st = fg_err_set(FG_EINPUT, "%s: tensor '%s' has a bad shape entry", path, name);
                goto out;
            }
            dims[d] = json_integer_value(x);
            numel *= (uint64_t)dims[d];
        }
        json_int_t b = json_integer_value(json_array_get(jo, 0)), e = json_integer_value(json_array_get(jo, 1));
        if (e < b) {
            st = fg_err_set(FG_EINPUT, "%s: tensor '%s' data_offsets [%lld, %lld] begin after they end", path, name,
                            (long long)b, (long long)e);
            goto out;
        }
        if (b < 0 || (uint64_t)e > data_size) {
            st = fg_err_set(FG_EINPUT, "%s: tensor '%s' data_offsets [%lld, %lld] lie outside the data (%llu bytes)",
                            path, name, (long long)b, (long long)e, (unsigned long long)data_size);
            goto out;
        }
        if ((uint64_t)(e - b) != numel * (uint64_t)dt_size[dt]) {
            st = fg_err_set(FG_EINPUT, "%s: tensor '%s' spans %lld bytes but %s x %llu elements need %llu",
                            path, name, (long long)(e - b), ds, (unsigned long long)numel,
                            (unsigned long long)(numel * (uint64_t)dt_size[dt]));
            goto out;
        }
        spans[ns++] = (span){(uint64_t)b, (uint64_t)e, name};
        if ((st = bind_tensor(ws, path, name, dt, ndim, dims, fi, (size_t)(data_start + (uint64_t)b)))) goto out;
    }
    qsort(spans, ns, sizeof *spans, span_cmp);
    for (size_t i = 1; i < ns; i++)
        if (spans[i].b < spans[i - 1].e) {
            st = fg_err_set(FG_EINPUT, "%s: tensors '%s' and '%s' overlap in the data buffer", path,
                            spans[i - 1].name, spans[i].name);
            goto out;
        }
out:
    free(spans);
    json_decref(root);
    return st;
}

static fg_status open_sharded(fg_wsrc *ws, const char *dir, const char *index_path) {
    json_error_t jerr;
    json_t *root = json_load_file(index_path, 0, &jerr);
    if (!root) return fg_err_set(FG_EINPUT, "%s: not valid JSON: line %d: %s", index_path, jerr.line, jerr.text);
    fg_status st = FG_OK;
    json_t *wm = json_object_get(root, "weight_map");
    if (!json_is_object(wm)) {
        st = fg_err_set(FG_EINPUT, "%s: missing object field 'weight_map'", index_path);
        goto out;
    }
    /* Each distinct shard once, in order of first mention. */
    const char *name;
    json_t *v;
    char **seen = NULL;
    int nseen = 0;
    json_object_foreach(wm, name, v) {
        if (!json_is_string(v)) {
            st = fg_err_set(FG_EINPUT, "%s: weight_map['%s'] must be a file name", index_path, name);
            break;
        }
        const char *fn = json_string_value(v);
        if (strchr(fn, '/')) {
            st = fg_err_set(FG_EINPUT, "%s: weight_map['%s'] = '%s' must name a file in the directory",
                            index_path, name, fn);
            break;
        }
        int dup = 0;
        for (int i = 0; i < nseen; i++) dup |= !strcmp(seen[i], fn);
        if (dup) continue;
        seen = realloc(seen, sizeof *seen * (size_t)(nseen + 1));
        seen[nseen++] = strdup(fn);
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", dir, fn);
        if ((st = parse_safetensors(ws, p))) break;
    }
    /* Every tensor the index names must be where it says. */
    if (!st) json_object_foreach(wm, name, v) {
        int e, idx = fg_spec_lookup_part(&ws->cfg, ws->specs, name, &e);
        if (idx < 0) continue;
        const char *fn = json_string_value(v);
        const tensor_loc *l = e >= 0 ? fg_wsrc__part(ws, idx, e) : &ws->locs[idx];
        const char *actual = l->file >= 0 ? ws->files[l->file].path : "";
        size_t la = strlen(actual), lf = strlen(fn);
        if (la < lf || strcmp(actual + la - lf, fn)) {
            st = fg_err_set(FG_EINPUT, "%s: weight_map says '%s' is in %s, but it is not there", index_path, name, fn);
            break;
        }
    }
    for (int i = 0; i < nseen; i++) free(seen[i]);
    free(seen);
    if (!st) snprintf(ws->desc, sizeof ws->desc, "safetensors (%d shards) in %s", nseen, dir);
out:
    json_decref(root);
    return st;
}

/* ---- numpy (.npy) ---- */

static fg_status parse_npy(fg_wsrc *ws, const char *path, const char *name) {
    int fi;
    fg_status st = fg_wsrc__map_file(ws, path, &fi);
    if (st) return st;
    const mapped_file *f = &ws->files[fi];
    const uint8_t *m = f->map;
    if (f->size < 10 || memcmp(m, "\x93NUMPY", 6))
        return fg_err_set(FG_EINPUT, "%s: not a .npy file (bad magic)", path);
    size_t hlen, hoff;
    if (m[6] == 1) { hlen = m[8] | (size_t)m[9] << 8; hoff = 10; }
    else if (m[6] == 2 || m[6] == 3) {
        if (f->size < 12) return fg_err_set(FG_EINPUT, "%s: truncated .npy header", path);
        hlen = m[8] | (size_t)m[9] << 8 | (size_t)m[10] << 16 | (size_t)m[11] << 24;
        hoff = 12;
    } else return fg_err_set(FG_EINPUT, "%s: unsupported .npy version %d", path, m[6]);
    if (hlen > f->size - hoff) return fg_err_set(FG_EINPUT, "%s: .npy header runs past the end of the file", path);
    ws->files[fi].head = hoff + hlen;
    char hdr[4096];
    if (hlen >= sizeof hdr) return fg_err_set(FG_EINPUT, "%s: .npy header too long", path);
    memcpy(hdr, m + hoff, hlen);
    hdr[hlen] = 0;
    dtype dt;
    if (strstr(hdr, "'descr': '<f2'")) dt = DT_F16;
    else if (strstr(hdr, "'descr': '<f4'")) dt = DT_F32;
    else return fg_err_set(FG_EINPUT, "%s: dtype must be '<f2' or '<f4' (header: %s)", path, hdr);
    if (!strstr(hdr, "'fortran_order': False"))
        return fg_err_set(FG_EINPUT, "%s: fortran_order arrays are not supported", path);
    const char *sh = strstr(hdr, "'shape': (");
    if (!sh) return fg_err_set(FG_EINPUT, "%s: .npy header has no shape", path);
    sh += 10;
    int64_t dims[8];
    int ndim = 0;
    uint64_t numel = 1;
    while (*sh && *sh != ')') {
        char *end;
        long long x = strtoll(sh, &end, 10);
        if (end == sh || x < 0 || ndim == 8) return fg_err_set(FG_EINPUT, "%s: bad shape in .npy header", path);
        dims[ndim++] = x;
        numel *= (uint64_t)x;
        sh = end;
        while (*sh == ',' || *sh == ' ') sh++;
    }
    if (ndim == 0) return fg_err_set(FG_EINPUT, "%s: scalar .npy where a tensor was expected", path);
    size_t off = hoff + hlen;
    if ((uint64_t)(f->size - off) != numel * (uint64_t)dt_size[dt])
        return fg_err_set(FG_EINPUT, "%s: holds %zu data bytes, shape needs %llu (truncated?)", path,
                          f->size - off, (unsigned long long)(numel * (uint64_t)dt_size[dt]));
    return bind_tensor(ws, path, name, dt, ndim, dims, fi, off);
}

static fg_status open_npy_dir(fg_wsrc *ws, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return fg_err_set(FG_EINPUT, "%s: cannot open directory: %s", dir, strerror(errno));
    fg_status st = FG_OK;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        const char *nm = e->d_name;
        if (strncmp(nm, "decoder.", 8) && strncmp(nm, "model.decoder.", 14) && strcmp(nm, "lm_head.weight"))
            continue;
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", dir, nm);
        if ((st = parse_npy(ws, p, nm))) break;
        n++;
    }
    closedir(d);
    if (!st && n == 0)
        st = fg_err_set(FG_EINPUT, "%s: no weights found (expected model.safetensors, "
                                   "model.safetensors.index.json, or FlexGen .npy files named decoder.*)", dir);
    if (!st) snprintf(ws->desc, sizeof ws->desc, "FlexGen numpy directory %s", dir);
    return st;
}

/* ---- open / read / destroy ---- */

fg_wsrc *fg_wsrc__alloc(const fg_model_config *cfg) {
    fg_wsrc *ws = fg_xcalloc(1, sizeof *ws);
    ws->cfg = *cfg;
    ws->specs = fg_specs_new(cfg);
    int n = fg_spec_count(cfg);
    ws->locs = fg_xcalloc((size_t)n, sizeof *ws->locs);
    for (int i = 0; i < n; i++) ws->locs[i].file = -1;
    if (cfg->n_experts) {
        size_t np = (size_t)cfg->n_layers * 3 * (size_t)cfg->n_experts;
        ws->parts = fg_xcalloc(np, sizeof *ws->parts);
        for (size_t i = 0; i < np; i++) ws->parts[i].file = -1;
    }
    return ws;
}

/* A model in one file: GGUF by its magic, else a llama2.c checkpoint (which
 * has none: a legacy header is seven sizes, each checked). */
static fg_status open_model_file(const char *path, fg_wsrc **out) {
    uint8_t head[L2C_PROBE_BYTES];
    size_t n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return fg_err_set(FG_EINPUT, "%s: cannot open: %s", path, strerror(errno));
    n = fread(head, 1, sizeof head, f);
    fclose(f);
    if (n >= 4 && !memcmp(head, "GGUF", 4)) return fg_wsrc__open_gguf(path, out);
    return fg_wsrc__open_llama2c(path, out);   /* its header's fields named where they do not hold */
}

fg_status fg_wsrc_open_dir(const char *dir, const char *name_hint, fg_wsrc **out) {
    *out = NULL;
    char p[PATH_MAX];
    struct stat st_dir;
    if (stat(dir, &st_dir) == 0 && S_ISREG(st_dir.st_mode)) return open_model_file(dir, out);
    if (stat(dir, &st_dir) != 0 || !S_ISDIR(st_dir.st_mode))
        return fg_err_set(FG_EINPUT, "%s: not a model directory (or a GGUF file or llama2.c checkpoint)", dir);
    fg_model_config cfg;
    fg_status st;
    snprintf(p, sizeof p, "%s/config.json", dir);
    if (path_exists(p)) {
        if ((st = fg_config_load_json(p, &cfg))) return st;
    } else {
        /* FlexGen numpy directories are named like "opt-30b-np" and carry no config. */
        char base[256];
        const char *b = name_hint;
        if (!b) {
            size_t l = strlen(dir);
            while (l > 1 && dir[l - 1] == '/') l--;
            size_t s = l;
            while (s > 0 && dir[s - 1] != '/') s--;
            snprintf(base, sizeof base, "%.*s", (int)(l - s), dir + s);
            size_t bl = strlen(base);
            if (bl > 3 && !strcmp(base + bl - 3, "-np")) base[bl - 3] = 0;
            b = base;
        }
        if (fg_config_by_name(b, &cfg) != FG_OK)
            return fg_err_set(FG_EINPUT, "%s: no config.json, and the directory name does not name an OPT size "
                                         "(e.g. opt-30b-np)", dir);
    }
    fg_wsrc *ws = fg_wsrc__alloc(&cfg);
    char idx_path[PATH_MAX];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    snprintf(idx_path, sizeof idx_path, "%s/model.safetensors.index.json", dir);
    if (path_exists(p)) {
        ws->kind = WS_SAFETENSORS;
        st = parse_safetensors(ws, p);
        snprintf(ws->desc, sizeof ws->desc, "safetensors %s", p);
        if (!st) st = fg_wsrc__check_complete(ws, p);
    } else if (path_exists(idx_path)) {
        ws->kind = WS_SAFETENSORS;
        st = open_sharded(ws, dir, idx_path);
        if (!st) st = fg_wsrc__check_complete(ws, idx_path);
    } else {
        ws->kind = WS_NPY;
        st = open_npy_dir(ws, dir);
        if (!st) st = fg_wsrc__check_complete(ws, dir);
    }
    if (st) {
        fg_wsrc_destroy(&ws);
        return st;
    }
    *out = ws;
    return FG_OK;
}

fg_status fg_wsrc_open_dummy(const char *name, uint64_t seed, fg_wsrc **out) {
    /* NAME or NAME:LAYERS, the size's shapes with its first LAYERS decoder layers */
    char base[sizeof ((fg_model_config *)0)->name + 16];
    const char *colon = strchr(name, ':');
    snprintf(base, sizeof base, "%.*s", colon ? (int)(colon - name) : (int)strlen(name), name);
    fg_model_config cfg;
    fg_status st = fg_config_by_name(base, &cfg);
    if (st) return st;
    int full = cfg.n_layers;
    if (colon) {
        char flag[sizeof base + 64];
        snprintf(flag, sizeof flag, "--dummy %s: LAYERS after ':' (%s has %d)", name, base, full);
        if ((st = fg_parse_int(flag, colon + 1, 1, full, &cfg.n_layers))) return st;
    }
    if ((st = fg_wsrc_open_dummy_config(&cfg, seed, out)) || cfg.n_layers == full) return st;
    fg_wsrc *ws = *out;
    snprintf(ws->desc, sizeof ws->desc, "dummy %s weights, its first %d of %d layers (seed %llu)", cfg.name,
             cfg.n_layers, full, (unsigned long long)seed);
    return FG_OK;
}

fg_status fg_wsrc_open_dummy_config(const fg_model_config *cfg, uint64_t seed, fg_wsrc **out) {
    fg_wsrc *ws = fg_wsrc__alloc(cfg);
    ws->kind = WS_DUMMY;
    ws->seed = seed;
    snprintf(ws->desc, sizeof ws->desc, "dummy %s weights (seed %llu)", cfg->name, (unsigned long long)seed);
    *out = ws;
    return FG_OK;
}

const fg_model_config *fg_wsrc_config(const fg_wsrc *ws) { return &ws->cfg; }
fg_model_config *fg_wsrc_config_mut(fg_wsrc *ws) { return &ws->cfg; }
const fg_spec *fg_wsrc_specs(const fg_wsrc *ws) { return ws->specs; }
const char *fg_wsrc_describe(const fg_wsrc *ws) { return ws->desc; }

/* Identity fields go in as fixed-width little-endian integers, and every
 * variable-length one behind its length, so no two sources feed the same
 * byte stream. */
static void id_u64(XXH3_state_t *h, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    XXH3_64bits_update(h, b, sizeof b);
}

static void id_bytes(XXH3_state_t *h, const void *p, size_t n) {
    id_u64(h, n);
    XXH3_64bits_update(h, p, n);
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static int file_name_cmp(const void *a, const void *b) {
    const mapped_file *x = *(const mapped_file *const *)a, *y = *(const mapped_file *const *)b;
    return strcmp(base_name(x->path), base_name(y->path));
}

uint64_t fg_wsrc_identity(const fg_wsrc *ws) {
    XXH3_state_t *h = XXH3_createState();
    FG_ASSERT(h && XXH3_64bits_reset(h) == XXH_OK);
    const fg_model_config *c = &ws->cfg;
    id_u64(h, (uint64_t)ws->kind);
    id_bytes(h, c->name, strlen(c->name));
    const int shape[] = {c->vocab_size, c->hidden, c->n_heads, c->n_layers, c->ffn_dim, c->max_pos,
                         c->word_embed_proj_dim, c->pre_ln};
    for (size_t i = 0; i < sizeof shape / sizeof shape[0]; i++) id_u64(h, (uint64_t)(int64_t)shape[i]);
    if (c->family != FG_FAMILY_OPT) {   /* (OPT's identity as it always was: its stores stay valid) */
        fg_model_desc d = fg_config_desc(c);
        d.v[9] &= ~(uint32_t)(FG_DESC_F_COMPRESS_WEIGHT | FG_DESC_F_COMPRESS_CACHE);   /* the run's, not the source's */
        id_u64(h, d.family);
        /* formats: the files' headers; a dense model's as it always was (its stores stay valid) */
        int n = c->n_experts ? FG_MODEL_DESC_SHAPE_N : FG_MODEL_DESC_DENSE_N;
        for (int i = 0; i < n; i++) id_u64(h, d.v[i]);
        for (int l = 0; c->n_experts && l < c->n_layers; l++) id_u64(h, (uint64_t)fg_config_layer_sparse(c, l));
    }
    if (ws->kind == WS_DUMMY) id_u64(h, ws->seed);
    /* name order: readdir's order (npy) and the index's (shards) are not
     * properties of the checkpoint */
    const mapped_file **fs = fg_xcalloc(ws->n_files ? (size_t)ws->n_files : 1, sizeof *fs);
    for (int i = 0; i < ws->n_files; i++) fs[i] = &ws->files[i];
    qsort(fs, (size_t)ws->n_files, sizeof *fs, file_name_cmp);
    id_u64(h, (uint64_t)ws->n_files);
    for (int i = 0; i < ws->n_files; i++) {
        const char *name = base_name(fs[i]->path);
        id_bytes(h, name, strlen(name));
        id_bytes(h, fs[i]->map, fs[i]->head);
        id_u64(h, fs[i]->size);
        id_u64(h, (uint64_t)fs[i]->mtime_ns);
    }
    free(fs);
    uint64_t id = XXH3_64bits_digest(h);
    XXH3_freeState(h);
    return id;
}

/* Counter-based generator: element i of tensor t depends on (seed, t, i)
 * alone, so any slice can be generated in any order. */
static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void fill_dummy(const fg_wsrc *ws, int idx, fg_half *dst) {
    const fg_spec *s = &ws->specs[idx];
    int64_t n = fg_spec_numel(s);
    int is_ln_w = strstr(s->name, "norm.weight") != NULL;   /* OPT's *_layer_norm, Llama's *layernorm, norm */
    int is_bias = s->ndim == 1 && !is_ln_w;
    /* uniform on [-a, a] has std a/sqrt(3) */
    float std = is_bias ? 0.01f : 0.02f, a = std * 1.7320508f, center = is_ln_w ? 1.0f : 0.0f;
    float buf[1024];
    uint64_t key = mix64(ws->seed ^ mix64((uint64_t)idx + 0x9e3779b97f4a7c15ULL));
    for (int64_t i0 = 0; i0 < n; i0 += 1024) {
        int64_t m = n - i0 < 1024 ? n - i0 : 1024;
        for (int64_t i = 0; i < m; i++) {
            uint64_t r = mix64(key + (uint64_t)(i0 + i) * 0x9e3779b97f4a7c15ULL);
            float u = (float)(r >> 40) * (1.0f / 16777216.0f); /* [0, 1) */
            buf[i] = center + a * (2.0f * u - 1.0f);
        }
        fg_float_to_half_n(buf, dst + i0, (size_t)m);
    }
}

/* m floats to fp16, counting the values fp16 cannot hold: finite ones past
 * its range (written as inf) and nonzero ones below its smallest subnormal
 * (written as 0). */
static void narrow_counted(const float *buf, fg_half *dst, size_t m, uint64_t *over, uint64_t *flushed) {
    fg_float_to_half_n(buf, dst, m);
    for (size_t i = 0; i < m; i++) {
        uint16_t e = dst[i] & 0x7fff;
        if (e == 0x7c00 && isfinite(buf[i])) (*over)++;
        else if (e == 0 && buf[i] != 0) (*flushed)++;
    }
}

/* n values of a safetensors or .npy tensor at l into dst, as fp16 (values
 * fp16 cannot hold counted into *over, *flushed). */
static void read_loc(const fg_wsrc *ws, const tensor_loc *l, size_t n, fg_half *dst, uint64_t *over,
                     uint64_t *flushed) {
    const uint8_t *src = ws->files[l->file].map + l->offset;
    if (l->dt == DT_F16) {
        memcpy(dst, src, n * 2);
        return;
    }
    float buf[1024];
    for (size_t i0 = 0; i0 < n; i0 += 1024) {
        size_t m = n - i0 < 1024 ? n - i0 : 1024;
        if (l->dt == DT_F32) memcpy(buf, src + 4 * i0, m * 4);
        else
            for (size_t i = 0; i < m; i++) {
                uint16_t b;
                memcpy(&b, src + 2 * (i0 + i), 2);
                buf[i] = fg_bf16_to_float(b);
            }
        narrow_counted(buf, dst + i0, m, over, flushed);
    }
}

fg_status fg_wsrc_read(fg_wsrc *ws, int idx, fg_half *dst) {
    FG_ASSERT(idx >= 0 && idx < fg_spec_count(&ws->cfg) && ws->specs[idx].present);
    if (ws->kind == WS_DUMMY) {
        fill_dummy(ws, idx, dst);
        return FG_OK;
    }
    if (ws->kind == WS_GGUF) return fg_wsrc__read_gguf(ws, idx, dst, (size_t)fg_spec_numel(&ws->specs[idx]));
    const fg_spec *s = &ws->specs[idx];
    const tensor_loc *l = &ws->locs[idx];
    size_t n = (size_t)fg_spec_numel(s);
    uint64_t over = 0, flushed = 0;
    if (l->file >= 0) read_loc(ws, l, n, dst, &over, &flushed);
    else   /* a stack of experts, each its own tensor: expert after expert */
        for (int e = 0; e < ws->cfg.n_experts; e++) {
            size_t part = n / (size_t)ws->cfg.n_experts;
            l = fg_wsrc__part(ws, idx, e);
            read_loc(ws, l, part, dst + (size_t)e * part, &over, &flushed);
        }
    const mapped_file *f = &ws->files[l->file];
    if (l->unpermute) {
        if (fg_rows_unpermute(dst, (uint64_t)s->dims[0], s->ndim == 2 ? (uint64_t)s->dims[1] : 1, l->unpermute))
            return fg_err_set(FG_EINPUT, "%s: tensor '%s': %lld rows cannot be split into %d heads of an even size "
                              "(to undo the interleaved rotary order)", f->path, s->name, (long long)s->dims[0],
                              l->unpermute);
    }
    if (over || flushed)   /* reported, never hidden: the engine computes on the fp16 values */
        fg_warn("%s: tensor '%s' (%s): %llu of %zu values overflow fp16 (stored as inf), %llu underflow it "
                "(stored as 0)", f->path, s->name, l->dt == DT_BF16 ? "BF16" : "F32",
                (unsigned long long)over, n, (unsigned long long)flushed);
    return FG_OK;
}

void fg_wsrc_destroy(fg_wsrc **p) {
    fg_wsrc *ws = *p;
    if (!ws) return;
    fg_gguf_close(&ws->gguf);
    for (int i = 0; i < ws->n_files; i++)
        if (ws->files[i].map) munmap((void *)ws->files[i].map, ws->files[i].size);
    free(ws->files);
    free(ws->locs);
    free(ws->parts);
    free(ws->specs);
    free(ws);
    *p = NULL;
}

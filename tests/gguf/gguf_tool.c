/* gguf_tool.c - the C GGUF reader (model/fg_gguf.h) driven from the tests
 * (gguf_check.py), which compare what it reads with numpy's reading of the
 * same file:
 *
 *   gguf_tool meta FILE           every metadata pair and tensor info as JSON
 *   gguf_tool dump FILE DIR       each tensor through fg_gguf_read_f16_ex into
 *                                 DIR/<name>.f16 (raw fp16); for architecture
 *                                 llama, attn_q/attn_k un-permuted with
 *                                 {arch}.attention.head_count(_kv)
 *   gguf_tool read FILE NAME [--heads H] [--allow-nonfinite]
 *                                 one tensor; prints its non-finite count
 *   gguf_tool dequant FILE DIR    each tensor of a format the engine keeps
 *                                 (common/fg_fmt.h) read as stored
 *                                 (fg_gguf_read_raw, un-permuted as dump does)
 *                                 and dequantized by fg_fmt_to_f32 into
 *                                 DIR/<name>.f32 (raw fp32)
 *   gguf_tool --portable ...      any command with fg_fmt.h's portable
 *                                 dequantizers only (not the AVX-512 ones)
 *   gguf_tool blocks FMT IN OUT   the raw blocks of format FMT ("Q4_K") in
 *                                 file IN dequantized into OUT (raw fp32)
 *
 * Exit 0, or 2 with the reader's message on stderr for a bad file (the
 * project's FG_EINPUT rule), 1 for anything else. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fg_fmt.h"
#include "fg_gguf.h"

static json_t *scalar_json(const fg_gguf *g, const char *key, uint32_t type) {
    int64_t i;
    double f;
    const char *s;
    size_t n;
    if (type == FG_GGUF_STRING && fg_gguf_get_string(g, key, &s, &n) == FG_OK) return json_stringn(s, n);
    if (type == FG_GGUF_BOOL) {
        int b;
        return fg_gguf_get_bool(g, key, &b) == FG_OK ? json_boolean(b) : NULL;
    }
    if (type == FG_GGUF_FLOAT32 || type == FG_GGUF_FLOAT64)
        return fg_gguf_get_float(g, key, &f) == FG_OK ? json_real(f) : NULL;
    if (fg_gguf_get_int(g, key, &i) == FG_OK) return json_integer(i);
    if (fg_gguf_get_float(g, key, &f) == FG_OK) return json_real(f); /* a UINT64 above 2^63 */
    return NULL;
}

static json_t *array_json(const fg_gguf *g, const char *key) {
    fg_gguf_vtype et;
    uint64_t n;
    if (fg_gguf_get_array(g, key, &et, &n) != FG_OK) return NULL;
    json_t *a = json_array();
    for (uint64_t k = 0; k < n; k++) {
        int64_t i;
        double f;
        const char *s;
        size_t len;
        if (et == FG_GGUF_STRING && fg_gguf_array_string(g, key, k, &s, &len) == FG_OK)
            json_array_append_new(a, json_stringn(s, len));
        else if ((et == FG_GGUF_FLOAT32 || et == FG_GGUF_FLOAT64) && fg_gguf_array_float(g, key, k, &f) == FG_OK)
            json_array_append_new(a, json_real(f));
        else if (et == FG_GGUF_BOOL && fg_gguf_array_int(g, key, k, &i) == FG_OK)
            json_array_append_new(a, json_boolean(i));
        else if (fg_gguf_array_int(g, key, k, &i) == FG_OK)
            json_array_append_new(a, json_integer(i));
        else {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static int cmd_meta(const fg_gguf *g) {
    json_t *root = json_object(), *kv = json_object(), *ts = json_object();
    json_object_set_new(root, "version", json_integer(fg_gguf_version(g)));
    json_object_set_new(root, "alignment", json_integer(fg_gguf_alignment(g)));
    for (int64_t i = 0; i < fg_gguf_kv_count(g); i++) {
        const char *key = fg_gguf_kv_key(g, i);
        uint32_t type = fg_gguf_kv_type(g, i);
        json_t *v = type == FG_GGUF_ARRAY ? array_json(g, key) : scalar_json(g, key, type);
        if (!v) {
            fprintf(stderr, "gguf_tool: metadata '%s' did not read back: %s\n", key, fg_err_msg());
            return 1;
        }
        json_object_set_new(kv, key, json_pack("{s:s,s:o}", "type", fg_gguf_vtype_name(type), "value", v));
    }
    for (int64_t i = 0; i < fg_gguf_tensor_count(g); i++) {
        const fg_gguf_tensor *t = fg_gguf_tensor_at(g, i);
        json_t *ne = json_array();
        for (int d = 0; d < t->n_dims; d++) json_array_append_new(ne, json_integer((json_int_t)t->ne[d]));
        json_object_set_new(ts, t->name, json_pack("{s:s,s:o,s:I,s:I}", "type", fg_gguf_type_name(t->type), "ne", ne,
                                                   "offset", (json_int_t)t->offset, "nbytes", (json_int_t)t->nbytes));
    }
    json_object_set_new(root, "kv", kv);
    json_object_set_new(root, "tensors", ts);
    json_dumpf(root, stdout, JSON_COMPACT);
    printf("\n");
    json_decref(root);
    return 0;
}

static int heads_for(const fg_gguf *g, const char *name) {
    const char *arch;
    if (fg_gguf_get_string(g, "general.architecture", &arch, NULL) != FG_OK || strcmp(arch, "llama")) return 0;
    const char *suffix = strstr(name, ".attn_q.") ? "attention.head_count"
                         : strstr(name, ".attn_k.") ? "attention.head_count_kv" : NULL;
    char key[96];
    int64_t h;
    if (!suffix) return 0;
    snprintf(key, sizeof key, "llama.%s", suffix);
    return fg_gguf_get_int(g, key, &h) == FG_OK ? (int)h : 0;
}

static int cmd_dump(const fg_gguf *g, const char *dir) {
    for (int64_t i = 0; i < fg_gguf_tensor_count(g); i++) {
        const fg_gguf_tensor *t = fg_gguf_tensor_at(g, i);
        uint16_t *buf = malloc((size_t)t->numel * 2);
        fg_gguf_read_opts o = {heads_for(g, t->name), 0};
        fg_status st = fg_gguf_read_f16_ex(g, t->name, buf, (size_t)t->numel, &o, NULL);
        if (st != FG_OK) {
            free(buf);
            fprintf(stderr, "gguf_tool: %s\n", fg_err_msg());
            return st == FG_EINPUT ? 2 : 1;
        }
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.f16", dir, t->name);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(buf, 2, (size_t)t->numel, f) != t->numel || fclose(f) != 0) {
            perror(path);
            free(buf);
            return 1;
        }
        free(buf);
    }
    return 0;
}

static int write_f32(const char *path, const float *x, uint64_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(x, 4, (size_t)n, f) != n || fclose(f) != 0) {
        perror(path);
        return 1;
    }
    return 0;
}

static int cmd_dequant(const fg_gguf *g, const char *dir) {
    for (int64_t i = 0; i < fg_gguf_tensor_count(g); i++) {
        const fg_gguf_tensor *t = fg_gguf_tensor_at(g, i);
        int fmt = fg_fmt_of_ggml(t->type);
        if (fmt < 0) continue;
        uint8_t *raw = malloc((size_t)t->nbytes);
        float *out = malloc((size_t)t->numel * 4);
        fg_status st = fg_gguf_read_raw(g, t->name, raw, (size_t)t->nbytes, t->n_dims > 1 ? heads_for(g, t->name) : 0);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.f32", dir, t->name);
        int rc = st != FG_OK;
        if (st != FG_OK) fprintf(stderr, "gguf_tool: %s\n", fg_err_msg());
        else fg_fmt_to_f32(fmt, raw, out, t->numel), rc = write_f32(path, out, t->numel);
        free(raw);
        free(out);
        if (rc) return st == FG_EINPUT ? 2 : 1;
    }
    return 0;
}

/* blocks FMT IN OUT: no GGUF file around the blocks. */
static int cmd_blocks(const char *name, const char *in, const char *out) {
    int fmt = fg_fmt_by_name(name);
    const fg_fmt_info *fi = fg_fmt_get(fmt);
    if (!fi || !fi->to_f32) return fprintf(stderr, "gguf_tool: no format %s\n", name), 1;
    FILE *f = fopen(in, "rb");
    if (!f) return perror(in), 1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    uint8_t *raw = malloc((size_t)n + 1);
    if (fread(raw, 1, (size_t)n, f) != (size_t)n || n % fi->block_bytes) return fclose(f), fprintf(stderr, "gguf_tool: %s: not whole blocks\n", in), 1;
    fclose(f);
    uint64_t vals = (uint64_t)(n / fi->block_bytes) * (uint64_t)fi->block;
    float *y = malloc((size_t)vals * 4 + 4);
    fg_fmt_to_f32(fmt, raw, y, vals);
    int rc = write_f32(out, y, vals);
    free(raw);
    free(y);
    return rc;
}

static int cmd_read(const fg_gguf *g, int argc, char **argv) {
    fg_gguf_read_opts o = {0, 0};
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--heads") && i + 1 < argc) o.unpermute_heads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--allow-nonfinite")) o.allow_nonfinite = 1;
        else return fprintf(stderr, "gguf_tool: unknown flag %s\n", argv[i]), 1;
    }
    const fg_gguf_tensor *t = fg_gguf_find_tensor(g, argv[3]);
    size_t n = t ? (size_t)t->numel : 1;
    uint16_t *buf = malloc(n * 2);
    uint64_t bad = 0;
    fg_status st = fg_gguf_read_f16_ex(g, argv[3], buf, n, &o, &bad);
    free(buf);
    if (st != FG_OK) {
        fprintf(stderr, "gguf_tool: %s\n", fg_err_msg());
        return st == FG_EINPUT ? 2 : 1;
    }
    printf("nonfinite %llu\n", (unsigned long long)bad);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--portable")) {   /* the dequantizers' portable forms only */
        fg_fmt_use_simd(0);
        argv++, argc--;
    }
    if (argc < 3 || ((!strcmp(argv[1], "dump") || !strcmp(argv[1], "dequant")) && argc != 4) ||
        (!strcmp(argv[1], "read") && argc < 4) || (!strcmp(argv[1], "blocks") && argc != 5)) {
        fprintf(stderr, "usage: gguf_tool meta FILE | dump FILE DIR | dequant FILE DIR | blocks FMT IN OUT | "
                        "read FILE NAME [--heads H] [--allow-nonfinite]\n");
        return 1;
    }
    if (!strcmp(argv[1], "blocks")) return cmd_blocks(argv[2], argv[3], argv[4]);
    fg_gguf *g;
    fg_status st = fg_gguf_open(argv[2], &g);
    if (st != FG_OK) {
        fprintf(stderr, "gguf_tool: %s\n", fg_err_msg());
        return st == FG_EINPUT ? 2 : 1;
    }
    int rc = !strcmp(argv[1], "meta")   ? cmd_meta(g)
             : !strcmp(argv[1], "dump") ? cmd_dump(g, argv[3])
             : !strcmp(argv[1], "dequant") ? cmd_dequant(g, argv[3])
             : !strcmp(argv[1], "read") ? cmd_read(g, argc, argv)
                                        : (fprintf(stderr, "gguf_tool: unknown command %s\n", argv[1]), 1);
    fg_gguf_close(&g);
    return rc;
}

/* fuzz_gguf.c - libFuzzer target for the GGUF reader (model/fg_gguf.c,
 * fg_gguf_read.c): the input is written as a file and opened with
 * fg_gguf_open. Properties: opening never crashes, leaks or reads outside
 * the file (ASan); an opened file answers every metadata getter for every
 * key (the right type or FG_EINPUT, never a crash), every array element, and
 * reads every tensor of at most 2^20 values (a supported type reads, with
 * and without un-permuting, or fails with FG_EINPUT; an unsupported one is
 * refused); and the file as a model (--model FILE.gguf, fg_wsrc_open_dir:
 * the config from the metadata, every tensor bound to the specs) either
 * opens, reads every tensor (a small model's) and gives an identity, or is
 * refused with FG_EINPUT; and the file's tokenizer (tokenizer.ggml.*,
 * tokenizer/fg_tok_gguf.c) either loads, encodes a fixed text to ids inside
 * its vocabulary and decodes them, or is refused with FG_EINPUT. Seeds:
 * fuzz/seeds/gguf, written by
 * tests/ref/gguf_write.py --seeds. */
#include <stdlib.h>
#include <string.h>

#include "fg_gguf.h"
#include "fg_tokenizer.h"
#include "fuzz_tok.h"
#include "fg_weights.h"
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    (void)fz_dir();
    return 0;
}

static void touch_kv(const fg_gguf *g, int64_t i) {
    const char *key = fg_gguf_kv_key(g, i), *s;
    int64_t iv;
    double fv;
    int bv;
    size_t len;
    fg_gguf_vtype et;
    uint64_t n;
    if (fg_gguf_find_kv(g, key) != i) abort(); /* keys are unique: found where listed */
    (void)fg_gguf_get_int(g, key, &iv);
    (void)fg_gguf_get_float(g, key, &fv);
    (void)fg_gguf_get_bool(g, key, &bv);
    if (fg_gguf_get_string(g, key, &s, &len) == FG_OK && s[len] != 0) abort();
    if (fg_gguf_get_array(g, key, &et, &n) != FG_OK) return;
    for (uint64_t k = 0; k < n && k < 4096; k++) {
        (void)fg_gguf_array_int(g, key, k, &iv);
        (void)fg_gguf_array_float(g, key, k, &fv);
        (void)fg_gguf_array_string(g, key, k, &s, &len);
    }
    if (fg_gguf_array_int(g, key, n, &iv) == FG_OK) abort(); /* one past the end */
}

static void touch_tensor(const fg_gguf *g, const fg_gguf_tensor *t) {
    if (fg_gguf_find_tensor(g, t->name) != t) abort();
    if (t->numel > ((uint64_t)1 << 20)) return;
    int supported = t->type == FG_GGML_F32 || t->type == FG_GGML_F16 || t->type == FG_GGML_BF16 ||
                    t->type == FG_GGML_Q8_0;
    uint16_t *buf = malloc((size_t)t->numel * 2);
    uint64_t bad;
    fg_gguf_read_opts o = {0, 1};
    fg_status st = fg_gguf_read_f16_ex(g, t->name, buf, (size_t)t->numel, &o, &bad);
    if (supported != (st == FG_OK)) abort(); /* allow_nonfinite: supported means readable */
    o.unpermute_heads = 2;
    (void)fg_gguf_read_f16_ex(g, t->name, buf, (size_t)t->numel, &o, &bad);
    (void)fg_gguf_read_f16(g, t->name, buf, (size_t)t->numel);
    if (fg_gguf_read_f16(g, t->name, buf, (size_t)t->numel - 1) == FG_OK) abort(); /* wrong count */
    free(buf);
}

/* The file's own tokenizer: loads (then round-trips a text) or FG_EINPUT. */
static void touch_tokenizer(const fg_gguf *g) {
    fg_tok *t = NULL;
    fg_status st = fg_tok_open_gguf_file(g, &t);
    if (st != FG_OK) {
        if (st != FG_EINPUT) abort();
        return;
    }
    static const char text[] = "Hello world, caf\xC3\xA9 \xE2\x98\x83 <s> <|im_start|>\n\t 123";
    fz_tok_roundtrip(t, text, sizeof text - 1, FG_TOK_PARSE_SPECIAL | FG_TOK_ADD_SPECIAL);
    fg_tok_destroy(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fz_write(0, "model.gguf", data, size);
    fg_gguf *g = NULL;
    if (fg_gguf_open(path, &g) != FG_OK) return 0;
    for (int64_t i = 0; i < fg_gguf_kv_count(g); i++) touch_kv(g, i);
    for (int64_t i = 0; i < fg_gguf_tensor_count(g); i++) touch_tensor(g, fg_gguf_tensor_at(g, i));
    (void)fg_gguf_type_name(fg_gguf_tensor_count(g) ? fg_gguf_tensor_at(g, 0)->type : 99);
    touch_tokenizer(g);
    fg_gguf_close(&g);
    fg_wsrc *ws = NULL;
    if (fg_wsrc_open_dir(path, NULL, &ws) != FG_OK) return 0;
    const fg_model_config *c = fg_wsrc_config(ws);
    const fg_spec *sp = fg_wsrc_specs(ws);
    for (int i = 0; i < fg_spec_count(c); i++) {
        if (!sp[i].present || fg_spec_numel(&sp[i]) > (1 << 20)) continue;
        fg_half *buf = malloc(sizeof(fg_half) * (size_t)fg_spec_numel(&sp[i]));
        if (fg_wsrc_read(ws, i, buf) != FG_OK) abort();   /* bound and checked: every tensor reads */
        free(buf);
    }
    (void)fg_wsrc_identity(ws);
    fg_wsrc_destroy(&ws);
    return 0;
}

/* fuzz_tiny.c - the tiny model's files, written from its tensor list (see
 * fuzz_tiny.h). Values are small fp16 numbers; only formats matter here. */
#include "fuzz_tiny.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char fz_tiny_config_json[] =
    "{\"model_type\": \"opt\", \"vocab_size\": 8, \"hidden_size\": 4, \"num_attention_heads\": 1,"
    " \"num_hidden_layers\": 1, \"ffn_dim\": 4, \"max_position_embeddings\": 4,"
    " \"word_embed_proj_dim\": 4, \"do_layer_norm_before\": true, \"activation_function\": \"relu\","
    " \"pad_token_id\": 1, \"bos_token_id\": 2, \"eos_token_id\": 2}";

static fg_opt_config cfg;
static fg_spec *specs;

const fg_opt_config *fz_tiny_config(void) {
    if (!specs) {
        memset(&cfg, 0, sizeof cfg);
        snprintf(cfg.name, sizeof cfg.name, "opt-tiny");
        cfg.vocab_size = 8, cfg.hidden = 4, cfg.n_heads = 1, cfg.n_layers = 1, cfg.ffn_dim = 4;
        cfg.max_pos = 4, cfg.word_embed_proj_dim = 4, cfg.pre_ln = 1;
        cfg.pad_id = 1, cfg.bos_id = 2, cfg.n_eos = 1, cfg.eos_ids[0] = 2;
        cfg.family = FG_FAMILY_OPT, cfg.n_kv_heads = 1, cfg.head_dim = 4, cfg.norm_eps = 1e-5f;
        cfg.qkv_bias = cfg.o_bias = cfg.mlp_bias = cfg.tied = 1;
        specs = fg_specs_new(&cfg);
    }
    return &cfg;
}

const fg_spec *fz_tiny_specs(void) {
    fz_tiny_config();
    return specs;
}

static void fill_f16(uint8_t *p, int64_t numel) {
    for (int64_t i = 0; i < numel; i++) {   /* 0.5 + i/1024, as fp16 bits */
        uint16_t h = (uint16_t)(0x3800 + (i & 0x1ff));
        p[2 * i] = (uint8_t)h, p[2 * i + 1] = (uint8_t)(h >> 8);
    }
}

uint8_t *fz_tiny_npy(int idx, size_t *n) {
    const fg_spec *s = &fz_tiny_specs()[idx];
    char dict[128];
    int l = s->ndim == 1 ? snprintf(dict, sizeof dict, "{'descr': '<f2', 'fortran_order': False, 'shape': (%lld,), }",
                                    (long long)s->dims[0])
                         : snprintf(dict, sizeof dict, "{'descr': '<f2', 'fortran_order': False, 'shape': (%lld, %lld), }",
                                    (long long)s->dims[0], (long long)s->dims[1]);
    size_t hlen = (size_t)l + 1;
    hlen = (10 + hlen + 63) / 64 * 64 - 10;   /* numpy pads the preamble + dict to 64 */
    int64_t numel = fg_spec_numel(s);
    *n = 10 + hlen + (size_t)numel * 2;
    uint8_t *f = malloc(*n);
    memcpy(f, "\x93NUMPY\x01\x00", 8);
    f[8] = (uint8_t)hlen, f[9] = (uint8_t)(hlen >> 8);
    memset(f + 10, ' ', hlen);
    memcpy(f + 10, dict, (size_t)l);
    f[10 + hlen - 1] = '\n';
    fill_f16(f + 10 + hlen, numel);
    return f;
}

uint8_t *fz_tiny_safetensors(size_t *n) {
    const fg_opt_config *c = fz_tiny_config();
    size_t cap = 16384, len = 0;
    char *hdr = malloc(cap);
    uint64_t off = 0;
    len += (size_t)snprintf(hdr + len, cap - len, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < fg_spec_count(c); i++) {
        const fg_spec *s = &specs[i];
        if (!s->present) continue;
        uint64_t nb = (uint64_t)fg_spec_numel(s) * 2;
        char shape[64];
        if (s->ndim == 1) snprintf(shape, sizeof shape, "[%lld]", (long long)s->dims[0]);
        else snprintf(shape, sizeof shape, "[%lld,%lld]", (long long)s->dims[0], (long long)s->dims[1]);
        len += (size_t)snprintf(hdr + len, cap - len, ",\"model.%s\":{\"dtype\":\"F16\",\"shape\":%s,\"data_offsets\":[%llu,%llu]}",
                                s->name, shape, (unsigned long long)off, (unsigned long long)(off + nb));
        off += nb;
    }
    len += (size_t)snprintf(hdr + len, cap - len, "}");
    *n = 8 + len + off;
    uint8_t *f = malloc(*n);
    for (int i = 0; i < 8; i++) f[i] = (uint8_t)((uint64_t)len >> (8 * i));
    memcpy(f + 8, hdr, len);
    fill_f16(f + 8 + len, (int64_t)(off / 2));
    free(hdr);
    return f;
}

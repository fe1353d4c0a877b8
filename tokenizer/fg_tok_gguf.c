/* fg_tok_gguf.c - the tokenizer a GGUF file carries in its metadata
 * (tokenizer.ggml.*), loaded into the same tokenizer object a tokenizer.json
 * gives: this file only translates. The metadata is turned into the
 * tokenizer.json that describes the same tokenizer (an in-memory JSON tree)
 * and handed to the tokenizer.json loader, so the vocabulary, merges,
 * special-token matching, byte fallback and decoding are that loader's code,
 * not a second tokenizer. Two types are implemented, as llama.cpp's
 * src/llama-vocab.cpp defines them:
 *  - "llama" (SentencePiece BPE): tokens, scores and token types. A space
 *    prefix (tokenizer.ggml.add_space_prefix, default true) and " " -> "▁"
 *    become normalizers, as in Hugging Face's Llama 2 tokenizer.json, which
 *    llama.cpp also applies to each piece of text after a special token.
 *    SentencePiece merges by score: the pair whose concatenation is the
 *    highest-scoring token merges first, the leftmost on ties. That is BPE
 *    with one merge per (left, right) split of every token, ranked by the
 *    token's score with equal scores sharing a rank, which the BPE loop
 *    breaks by position (leftmost) exactly as llama.cpp does.
 *  - "gpt2" (byte-level BPE): tokens and merges, and the pre-tokenizer that
 *    tokenizer.ggml.pre names: the regexes of each name are the table below
 *    (llama.cpp's llm_tokenizer_bpe, applied one after another, each
 *    keeping matches and gaps as pieces: Split with "Isolated").
 * Tokens of type control, user-defined and unknown are added tokens matched
 * in the text before BPE (control and unknown only with
 * FG_TOK_PARSE_SPECIAL, as llama.cpp's parse_special); user-defined ones
 * always, as llama.cpp does. Anything else (bert, t5, rwkv, a pre-tokenizer
 * name not in the table, remove_extra_whitespaces) is refused naming the key
 * and its value: never a silent fallback to some other tokenizer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fg_gguf.h"
#include "fg_tok_hf.h"

/* llama.cpp's token types (LLAMA_TOKEN_TYPE_*). */
enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

/* The regexes of llama.cpp's pre-tokenizers, by the names tokenizer.ggml.pre
 * uses (llm_tokenizer_bpe in src/llama-vocab.cpp, whose adapted forms these
 * are), and what else the name sets there. */
typedef struct {
    const char *names;        /* space-separated names of tokenizer.ggml.pre */
    const char *re[6];        /* applied in order; NULL ends */
    int ignore_merges, add_bos;
} fg_tok_gguf_pre;

#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_LLAMA3 "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" \
                  "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* deepseek's CJK pattern: [一-龥ࠀ-一가-퟿]+ less the white space of U+0800-U+4E00 (deepseek-llm below) */
#define RE_DEEPSEEK_CJK "[一-龥\\x{0800}-\\x{167F}\\x{1681}-\\x{1FFF}\\x{200B}-\\x{2027}\\x{202A}-\\x{202E}" \
                        "\\x{2030}-\\x{205E}\\x{2060}-\\x{2FFF}\\x{3001}-\\x{4E00}가-퟿]+"
#define RE_QWEN2 "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" \
                 "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

static const fg_tok_gguf_pre k_pre[] = {
    {"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}, 0, 0},
    {"llama3 llama-v3 llama-bpe falcon3 falcon-h1 pixtral midm-2.0 lfm2 jina-v5-nano", {RE_LLAMA3}, 1, 1},
    {"dbrx smaug-bpe", {RE_LLAMA3}, 0, 0},
    /* deepseek-llm: llama.cpp runs these with std::wregex after turning every
     * non-ASCII white-space character of the text into U+000B (src/unicode.cpp),
     * so no class matches one: U+3000 is out of the third pattern's class and
     * the white space of U+0800-U+4E00 out of the fifth's. Six characters of
     * the second are written as \u escapes, as NFC (which an editor may apply
     * to this file) maps them to others (U+1FD3 to U+0390) and would put a
     * range out of order. */
    {"deepseek-llm",
     {"[\r\n]",
      "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\u1F7Dᾀ-ᾴᾶ-ᾼ\u1FBEῂ-ῄῆ-ῌῐ-\u1FD3ῖ-\u1FDBῠ-Ῥῲ-ῴῶ-ῼ"
      "ℂℇℊ-ℓℕℙ-ℝℤ\u2126ℨ\u212A-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
      "\\s?[!-/:-~！-／：-～‘-‟、-。]+", "\\s+$", RE_DEEPSEEK_CJK, "\\p{N}+"},
     0, 0},
    {"deepseek-coder", {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_DEEPSEEK_CJK, "\\p{N}"}, 0, 0},
    {"deepseek-v3",
     {"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
      "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},
     0, 0},
    {"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"}, 0, 0},
    {"starcoder refact command-r smollm codeshell exaone minerva-7b", {"\\p{N}", RE_GPT2}, 0, 0},
    {"gpt-2 phi-2 jina-es jina-de gigachat jina-v2-es jina-v2-de a.x-4.0 mellum modern-bert mpt olmo jais "
     "trillion granite-docling exaone4",
     {RE_GPT2}, 0, 0},
    {"qwen2 deepseek-r1-qwen kormo f2llmv2 stablelm2 megrez", {RE_QWEN2}, 0, 0},
    {"qwen35",
     {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| "
      "?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     0, 0},
    {"poro-chat bloom gpt3-finnish", {" ?[^(\\s|.,!?…。，、।۔،)]+"}, 0, 0},
};

static const fg_tok_gguf_pre *find_pre(const char *name) {
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof k_pre / sizeof k_pre[0]; i++)
        for (const char *p = k_pre[i].names; *p;) {
            const char *e = strchr(p, ' ');
            size_t l = e ? (size_t)(e - p) : strlen(p);
            if (l == n && !memcmp(p, name, n)) return &k_pre[i];
            p += l + (e != NULL);
        }
    return NULL;
}

/* An optional key: absent -> *out = DEF. */
static fg_status opt_int(const fg_gguf *g, const char *key, int64_t def, int64_t *out) {
    *out = def;
    return fg_gguf_find_kv(g, key) < 0 ? FG_OK : fg_gguf_get_int(g, key, out);
}

static fg_status opt_bool(const fg_gguf *g, const char *key, int def, int *out) {
    *out = def;
    return fg_gguf_find_kv(g, key) < 0 ? FG_OK : fg_gguf_get_bool(g, key, out);
}

/* An array key of N elements, of a numeric type, or absent (*present 0). */
static fg_status opt_array(const fg_gguf *g, const char *key, uint64_t n, int *present) {
    *present = fg_gguf_find_kv(g, key) >= 0;
    if (!*present) return FG_OK;
    fg_gguf_vtype et;
    uint64_t m;
    fg_status st = fg_gguf_get_array(g, key, &et, &m);
    if (st) return st;
    if (et == FG_GGUF_STRING || et == FG_GGUF_ARRAY)
        return fg_err_set(FG_EINPUT, "%s: %s: expected an array of numbers, not of %s", fg_gguf_path(g), key,
                          fg_gguf_vtype_name(et));
    if (m < n)
        return fg_err_set(FG_EINPUT, "%s: %s: %llu values for %llu tokens", fg_gguf_path(g), key,
                          (unsigned long long)m, (unsigned long long)n);
    return FG_OK;
}

typedef struct {
    const fg_gguf *g;
    const char *path;
    int spm;
    uint64_t n;                /* tokens */
    char **tok;                /* NUL-terminated copies */
    size_t *len;
    int *type;
    float *score;
} gguf_vocab;

static void vocab_free(gguf_vocab *v) {
    if (v->tok)
        for (uint64_t i = 0; i < v->n; i++) free(v->tok[i]);
    free(v->tok);
    free(v->len);
    free(v->type);
    free(v->score);
}

static fg_status read_vocab(gguf_vocab *v) {
    const fg_gguf *g = v->g;
    fg_gguf_vtype et;
    fg_status st = fg_gguf_get_array(g, "tokenizer.ggml.tokens", &et, &v->n);
    if (st) return st;
    if (et != FG_GGUF_STRING)
        return fg_err_set(FG_EINPUT, "%s: tokenizer.ggml.tokens: expected an array of strings, not of %s",
                          v->path, fg_gguf_vtype_name(et));
    if (v->n == 0 || v->n >= (1u << 24))
        return fg_err_set(FG_EINPUT, "%s: tokenizer.ggml.tokens: %llu tokens (expected 1 .. %u)", v->path,
                          (unsigned long long)v->n, (1u << 24) - 1);
    int has_type, has_score;
    if ((st = opt_array(g, "tokenizer.ggml.token_type", v->n, &has_type)) ||
        (st = opt_array(g, "tokenizer.ggml.scores", v->n, &has_score)))
        return st;
    v->tok = fg_xcalloc(v->n, sizeof *v->tok);
    v->len = fg_xcalloc(v->n, sizeof *v->len);
    v->type = fg_xcalloc(v->n, sizeof *v->type);
    v->score = fg_xcalloc(v->n, sizeof *v->score);
    for (uint64_t i = 0; i < v->n; i++) {
        const char *s;
        size_t l;
        if ((st = fg_gguf_array_string(g, "tokenizer.ggml.tokens", i, &s, &l))) return st;
        char buf[40];
        if (l == 0) { /* llama.cpp names an empty token so that it stays distinct */
            l = (size_t)snprintf(buf, sizeof buf, "[EMPTY_%llu]", (unsigned long long)i);
            s = buf;
        }
        if (memchr(s, 0, l))
            return fg_err_set(FG_EINPUT, "%s: tokenizer.ggml.tokens[%llu]: a token holds a NUL byte", v->path,
                              (unsigned long long)i);
        v->tok[i] = fg_xmalloc(l + 1);
        memcpy(v->tok[i], s, l);
        v->tok[i][l] = 0;
        v->len[i] = l;
        int64_t ty = TT_NORMAL;
        double sc = 0;
        if (has_type && (st = fg_gguf_array_int(g, "tokenizer.ggml.token_type", i, &ty))) return st;
        if (has_score && (st = fg_gguf_array_float(g, "tokenizer.ggml.scores", i, &sc))) return st;
        if (!isfinite(sc))
            return fg_err_set(FG_EINPUT, "%s: tokenizer.ggml.scores[%llu]: not a finite number", v->path,
                              (unsigned long long)i);
        v->type[i] = (int)ty;
        v->score[i] = (float)sc;
    }
    return FG_OK;
}

/* ---------------------------------------------------------------- the JSON */

static json_t *step(const char *type) {
    json_t *o = json_object();
    json_object_set_new(o, "type", json_string(type));
    return o;
}

static json_t *seq(const char *list, json_t *steps) {
    json_t *o = step("Sequence");
    json_object_set_new(o, list, steps);
    return o;
}

static json_t *replace(const char *from, const char *to) {
    json_t *o = step("Replace"), *p = json_object();
    json_object_set_new(p, "String", json_string(from));
    json_object_set_new(o, "pattern", p);
    json_object_set_new(o, "content", json_string(to));
    return o;
}

/* The tokenizer.json that describes V's tokenizer; NULL with the error set. */
static json_t *build_json(gguf_vocab *v, const fg_tok_gguf_pre *pre, int space_prefix) {
    json_t *root = json_object(), *model = step("BPE"), *vocab = json_object();
    json_t *added = json_array();
    for (uint64_t i = 0; i < v->n; i++) {
        if (json_object_get(vocab, v->tok[i])) {
            json_decref(root), json_decref(model), json_decref(vocab), json_decref(added);
            fg_err_set(FG_EINPUT, "%s: tokenizer.ggml.tokens[%llu]: \"%s\" appears twice (llama.cpp refuses "
                       "this too)", v->path, (unsigned long long)i, v->tok[i]);
            return NULL;
        }
        json_object_set_new(vocab, v->tok[i], json_integer((json_int_t)i));
        int t = v->type[i];
        if (t == TT_CONTROL || t == TT_USER || t == TT_UNKNOWN) {
            json_t *a = json_object();
            json_object_set_new(a, "id", json_integer((json_int_t)i));
            json_object_set_new(a, "content", json_string(v->tok[i]));
            json_object_set_new(a, "special", json_boolean(t != TT_USER));
            json_object_set_new(a, "normalized", json_false());
            json_array_append_new(added, a);
        }
    }
    json_object_set_new(model, "vocab", vocab);
    json_t *merges = json_array();
    if (!v->spm) {
        fg_gguf_vtype et;
        uint64_t n = 0;
        fg_status st = fg_gguf_find_kv(v->g, "tokenizer.ggml.merges") < 0
                           ? fg_err_set(FG_EINPUT, "%s: tokenizer.ggml.merges: missing (tokenizer.ggml.model "
                                        "\"gpt2\" needs it)", v->path)
                           : fg_gguf_get_array(v->g, "tokenizer.ggml.merges", &et, &n);
        if (!st && et != FG_GGUF_STRING)
            st = fg_err_set(FG_EINPUT, "%s: tokenizer.ggml.merges: expected an array of strings", v->path);
        for (uint64_t i = 0; i < n && !st; i++) {
            const char *s;
            size_t l;
            if ((st = fg_gguf_array_string(v->g, "tokenizer.ggml.merges", i, &s, &l))) break;
            json_t *m = json_stringn(s, l);
            if (!m) st = fg_err_set(FG_EINPUT, "%s: tokenizer.ggml.merges[%llu]: not UTF-8", v->path,
                                    (unsigned long long)i);
            else json_array_append_new(merges, m);
        }
        if (st) {
            json_decref(root), json_decref(model), json_decref(added), json_decref(merges);
            return NULL;
        }
    }
    json_object_set_new(model, "merges", merges);
    json_object_set_new(model, "byte_fallback", json_boolean(v->spm));
    json_object_set_new(model, "ignore_merges", json_boolean(pre && pre->ignore_merges));
    json_object_set_new(root, "model", model);
    json_object_set_new(root, "added_tokens", added);
    if (v->spm) {
        json_t *nz = json_array(), *dec = json_array();
        if (space_prefix) {
            json_t *p = step("Prepend");
            json_object_set_new(p, "prepend", json_string("\xe2\x96\x81"));
            json_array_append_new(nz, p);
        }
        json_array_append_new(nz, replace(" ", "\xe2\x96\x81"));
        json_object_set_new(root, "normalizer", seq("normalizers", nz));
        json_array_append_new(dec, replace("\xe2\x96\x81", " "));
        json_array_append_new(dec, step("ByteFallback"));
        json_array_append_new(dec, step("Fuse"));
        if (space_prefix) { /* the prefix space comes off the decoded text */
            json_t *s = step("Strip");
            json_object_set_new(s, "content", json_string(" "));
            json_object_set_new(s, "start", json_integer(1));
            json_object_set_new(s, "stop", json_integer(0));
            json_array_append_new(dec, s);
        }
        json_object_set_new(root, "decoder", seq("decoders", dec));
    } else {
        json_t *pts = json_array();
        for (int i = 0; i < 6 && pre->re[i]; i++) {
            json_t *s = step("Split"), *p = json_object();
            json_object_set_new(p, "Regex", json_string(pre->re[i]));
            json_object_set_new(s, "pattern", p);
            json_object_set_new(s, "behavior", json_string("Isolated"));
            json_object_set_new(s, "invert", json_false());
            json_array_append_new(pts, s);
        }
        json_t *bl = step("ByteLevel");
        json_object_set_new(bl, "add_prefix_space", json_false());
        json_object_set_new(bl, "use_regex", json_false());
        json_array_append_new(pts, bl);
        json_object_set_new(root, "pre_tokenizer", seq("pretokenizers", pts));
        json_object_set_new(root, "decoder", step("ByteLevel"));
    }
    return root;
}

static int score_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x > y ? -1 : x < y;
}

/* SentencePiece's merges: llama.cpp merges into any token of the vocabulary,
 * control and byte tokens included, so every type is here; every split of a token into two tokens, ranked by
 * the token's score (higher first; equal scores one rank). Replaces the
 * (empty) merges the JSON had. */
static void spm_merges(fg_tok *t, const gguf_vocab *v) {
    uint64_t n = v->n;
    /* ranks: the distinct scores, highest first */
    float *sorted = fg_xmalloc(n * sizeof *sorted);
    memcpy(sorted, v->score, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, score_desc);
    size_t pairs = 0;
    for (uint64_t i = 0; i < n; i++) pairs += v->len[i];
    free(t->merges);
    fg_tok_merges_alloc(t, pairs + 1);
    for (uint64_t i = 0; i < n; i++) {
        const char *s = v->tok[i];
        size_t l = v->len[i];
        /* the rank: index of the score among the distinct sorted scores */
        size_t lo = 0, hi = n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (sorted[mid] > v->score[i]) lo = mid + 1;
            else hi = mid;
        }
        for (size_t k = 1; k < l; k++) {
            if (((uint8_t)s[k] & 0xc0) == 0x80) continue; /* inside a character */
            int32_t a = fg_tok_vocab_find(t, s, k), b = fg_tok_vocab_find(t, s + k, l - k);
            if (a >= 0 && b >= 0) fg_tok_merge_put(t, a, b, (int32_t)lo, (int32_t)i);
        }
    }
    free(sorted);
    fg_tok_merges_finish(t);
}


/* An id key (bos_token_id, ...): absent -> DEF; present -> inside the
 * vocabulary. */
static fg_status id_key(const fg_gguf *g, const char *key, int64_t def, uint64_t n, int32_t *out) {
    int64_t v;
    fg_status st = opt_int(g, key, def, &v);
    if (st) return st;
    if (v >= (int64_t)n || v < -1)
        return fg_err_set(FG_EINPUT, "%s: %s: id %lld is outside the vocabulary of %llu tokens", fg_gguf_path(g),
                          key, (long long)v, (unsigned long long)n);
    *out = (int32_t)v;
    return FG_OK;
}

/* The type and pre-tokenizer keys: the supported ones, or the refusal. */
static fg_status check_type(const fg_gguf *g, int *spm, const fg_tok_gguf_pre **pre) {
    const char *path = fg_gguf_path(g), *model, *name = NULL;
    if (fg_gguf_find_kv(g, "tokenizer.ggml.model") < 0)
        return fg_err_set(FG_EINPUT, "%s: tokenizer.ggml.model: missing (the file carries no tokenizer)", path);
    fg_status st = fg_gguf_get_string(g, "tokenizer.ggml.model", &model, NULL);
    if (st) return st;
    *spm = !strcmp(model, "llama");
    *pre = NULL;
    if (!*spm && strcmp(model, "gpt2"))
        return fg_err_set(FG_EINPUT, "%s: tokenizer.ggml.model = \"%s\" is not supported (only \"llama\", "
                          "SentencePiece BPE, and \"gpt2\", byte-level BPE)", path, model);
    if (*spm) return FG_OK;
    if (fg_gguf_find_kv(g, "tokenizer.ggml.pre") >= 0 &&
        (st = fg_gguf_get_string(g, "tokenizer.ggml.pre", &name, NULL)))
        return st;
    /* llama.cpp takes a missing name for "default" (with a warning) */
    if (!(*pre = find_pre(name ? name : "default")))
        return fg_err_set(FG_EINPUT, "%s: tokenizer.ggml.pre = \"%s\" is not supported (not a pre-tokenizer "
                          "this engine knows)", path, name);
    return FG_OK;
}

/* BOS, EOS (eos, eot, eom) and whether BOS / EOS go around a text. */
static fg_status special_ids(fg_tok *t, const fg_gguf *g, const gguf_vocab *v, const fg_tok_gguf_pre *pre) {
    int32_t bos, eos, eot, eom;
    int add_bos, add_eos;
    fg_status st;
    /* llama.cpp's defaults: SentencePiece <s> = 1, </s> = 2, BOS added;
     * gpt2: none, BOS added only for the names that say so */
    if ((st = id_key(g, "tokenizer.ggml.bos_token_id", v->spm ? 1 : -1, v->n, &bos)) ||
        (st = id_key(g, "tokenizer.ggml.eos_token_id", v->spm ? 2 : -1, v->n, &eos)) ||
        (st = id_key(g, "tokenizer.ggml.eot_token_id", -1, v->n, &eot)) ||
        (st = id_key(g, "tokenizer.ggml.eom_token_id", -1, v->n, &eom)) ||
        (st = opt_bool(g, "tokenizer.ggml.add_bos_token", v->spm || (pre && pre->add_bos), &add_bos)) ||
        (st = opt_bool(g, "tokenizer.ggml.add_eos_token", 0, &add_eos)))
        return st;
    fg_tok_hf *hf = t->hf;
    hf->bos_id = bos;
    hf->n_pre = hf->n_suf = 0;
    if (add_bos && bos >= 0) hf->pre[hf->n_pre++] = bos;
    if (add_eos && eos >= 0) hf->suf[hf->n_suf++] = eos;
    int32_t ends[3] = {eos, eot, eom};
    for (int i = 0; i < 3; i++)
        if (ends[i] >= 0 && (st = fg_tok_add_eos_ids(t, &ends[i], 1))) return st;
    return FG_OK;
}

fg_status fg_tok_open_gguf_file(const fg_gguf *g, fg_tok **out) {
    *out = NULL;
    gguf_vocab v = {.g = g, .path = fg_gguf_path(g)};
    const fg_tok_gguf_pre *pre;
    int space_prefix = 0, extra_ws = 0;
    fg_status st = check_type(g, &v.spm, &pre);
    if (!st) st = opt_bool(g, "tokenizer.ggml.add_space_prefix", v.spm, &space_prefix);
    if (!st) st = opt_bool(g, "tokenizer.ggml.remove_extra_whitespaces", 0, &extra_ws);
    if (!st && extra_ws)
        st = fg_err_set(FG_EINPUT, "%s: tokenizer.ggml.remove_extra_whitespaces = true is not supported",
                        v.path);
    if (!st) st = read_vocab(&v);
    json_t *root = st ? NULL : build_json(&v, pre, space_prefix);
    if (!st && !root) st = FG_EINPUT;
    fg_tok *t = NULL;
    if (!st) st = fg_tok_open_hf_root(root, v.path, &t);
    json_decref(root);
    if (!st && v.spm) spm_merges(t, &v);
    if (!st) st = special_ids(t, g, &v, pre);
    vocab_free(&v);
    if (st) {
        fg_tok_destroy(&t);
        return st;
    }
    *out = t;
    return FG_OK;
}

fg_status fg_tok_open_gguf(const char *path, fg_tok **out) {
    fg_gguf *g = NULL;
    *out = NULL;
    fg_status st = fg_gguf_open(path, &g);
    if (!st) st = fg_tok_open_gguf_file(g, out);
    fg_gguf_close(&g);
    return st;
}

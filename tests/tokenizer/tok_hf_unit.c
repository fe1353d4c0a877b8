/* tok_hf_unit.c - unit tests of tokenizer.json support, no network: small
 * tokenizer.json files built here (jansson), written into a directory, and
 * ids derived by hand from their few merges:
 *  - byte-level (Llama 3 style): the Split pattern, merges, ignore_merges,
 *    added tokens (special or not, longest first, lstrip/rstrip), the
 *    template's BOS, add_bos_token / add_eos_token, EOS ids, NFC;
 *  - char mode (Llama 2 style): Prepend/Replace, byte fallback, unk and
 *    fuse_unk, the decoder's Strip, pieces cut at "▁" only where exact;
 *  - each Split behavior and invert, on a toy whose merges show the cuts;
 *  - refusals: every part not implemented names the file and the part. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fg_test.h"
#include "fg_tokenizer.h"

static int failures;
static char dir_[512];

#define SP "\xE2\x96\x81"

static const char *path_of(const char *name) {
    static char p[4][640];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir_, name);
    return p[k];
}

static void put(const char *name, json_t *j) {
    if (json_dump_file(j, path_of(name), JSON_COMPACT)) {
        fprintf(stderr, "cannot write %s\n", path_of(name));
        exit(1);
    }
}

static void put_text(const char *name, const char *text) {
    FILE *f = fopen(path_of(name), "w");
    if (!f || fputs(text, f) < 0 || fclose(f)) exit(1);
}

/* GPT-2's bytes_to_unicode character of byte B as UTF-8. */
static void byte_char(int b, char out[4]) {
    int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE, n = 0;
    for (int i = 0; i < b; i++)
        n += !((i >= '!' && i <= '~') || (i >= 0xA1 && i <= 0xAC) || i >= 0xAE);
    unsigned cp = printable ? (unsigned)b : 256u + (unsigned)n;
    if (cp < 0x80) out[0] = (char)cp, out[1] = 0;
    else out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 63)), out[2] = 0;
}

static json_t *added(int id, const char *content, int special) {
    return json_pack("{s:i,s:s,s:b,s:b,s:b,s:b,s:b}", "id", id, "content", content, "single_word", 0, "lstrip", 0,
                     "rstrip", 0, "normalized", 0, "special", special);
}

/* ---------------------------------------------------------------- the toys */

static const char *const l3_merges[] = {"\xC4\xA0 t", "h e", "\xC4\xA0t he", "i n", "\xC3\x83 \xC2\xA9"};
#define L3_PATTERN "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" \
                   "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* Byte-level: the 256 byte characters are ids 0..255 in byte order; then
 * Ġt 256, he 257, Ġthe 258, in 259, Ã© 260 (é), Ġxyz 261 (no merge makes
 * it); added 300 <|bot|>, 301 <|eot|> (special), 302 <x> (not). */
static json_t *byte_level(void) {
    json_t *vocab = json_object();
    char c[4];
    for (int b = 0; b < 256; b++) byte_char(b, c), json_object_set_new(vocab, c, json_integer(b));
    const char *more[] = {"\xC4\xA0t", "he", "\xC4\xA0the", "in", "\xC3\x83\xC2\xA9", "\xC4\xA0xyz"};
    for (int i = 0; i < 6; i++) json_object_set_new(vocab, more[i], json_integer(256 + i));
    json_t *merges = json_array();
    for (int i = 0; i < 5; i++) json_array_append_new(merges, json_string(l3_merges[i]));
    json_t *bl = json_pack("{s:s,s:b,s:b}", "type", "ByteLevel", "add_prefix_space", 0, "use_regex", 0);
    return json_pack(
        "{s:[o,o,o],s:n,s:{s:s,s:[{s:s,s:{s:s},s:s,s:b},o]},s:o,s:{s:s,s:[{s:{s:s,s:i}},{s:{s:s,s:i}}],"
        "s:{s:{s:[i]}}},s:{s:s,s:n,s:b,s:b,s:o,s:o}}",
        "added_tokens", added(300, "<|bot|>", 1), added(301, "<|eot|>", 1), added(302, "<x>", 0), "normalizer",
        "pre_tokenizer", "type", "Sequence", "pretokenizers", "type", "Split", "pattern", "Regex", L3_PATTERN,
        "behavior", "Isolated", "invert", 0, json_incref(bl), "decoder", bl, "post_processor", "type",
        "TemplateProcessing", "single", "SpecialToken", "id", "<|bot|>", "type_id", 0, "Sequence", "id", "A",
        "type_id", 0, "special_tokens", "<|bot|>", "ids", 300, "model", "type", "BPE", "unk_token", "ignore_merges",
        0, "byte_fallback", 0, "vocab", vocab, "merges", merges);
}

/* Char mode: <unk> 0, <s> 1, </s> 2, <0x00>.. <0xFF> 3..258, ▁ 259, a..z
 * 260..285, ▁t 286, he 287, ▁the 288. */
static json_t *spm(void) {
    json_t *vocab = json_pack("{s:i,s:i,s:i}", "<unk>", 0, "<s>", 1, "</s>", 2);
    char s[16];
    for (int b = 0; b < 256; b++) snprintf(s, sizeof s, "<0x%02X>", b), json_object_set_new(vocab, s, json_integer(3 + b));
    json_object_set_new(vocab, SP, json_integer(259));
    for (int c = 'a'; c <= 'z'; c++) s[0] = (char)c, s[1] = 0, json_object_set_new(vocab, s, json_integer(260 + c - 'a'));
    json_object_set_new(vocab, SP "t", json_integer(286));
    json_object_set_new(vocab, "he", json_integer(287));
    json_object_set_new(vocab, SP "the", json_integer(288));
    return json_pack(
        "{s:[o,o,o],s:{s:s,s:[{s:s,s:s},{s:s,s:{s:s},s:s}]},s:n,s:{s:s,s:[{s:s,s:{s:s},s:s},{s:s},{s:s},"
        "{s:s,s:s,s:i,s:i}]},s:{s:s,s:[{s:{s:s,s:i}},{s:{s:s,s:i}}],s:{s:{s:[i]}}},"
        "s:{s:s,s:s,s:b,s:b,s:o,s:[s,s,s]}}",
        "added_tokens", added(0, "<unk>", 1), added(1, "<s>", 1), added(2, "</s>", 1), "normalizer", "type",
        "Sequence", "normalizers", "type", "Prepend", "prepend", SP, "type", "Replace", "pattern", "String", " ",
        "content", SP, "pre_tokenizer", "decoder", "type", "Sequence", "decoders", "type", "Replace", "pattern",
        "String", SP, "content", " ", "type", "ByteFallback", "type", "Fuse", "type", "Strip", "content", " ",
        "start", 1, "stop", 0, "post_processor", "type", "TemplateProcessing", "single", "SpecialToken", "id",
        "<s>", "type_id", 0, "Sequence", "id", "A", "type_id", 0, "special_tokens", "<s>", "ids", 1, "model",
        "type", "BPE", "unk_token", "<unk>", "fuse_unk", 1, "byte_fallback", 1, "vocab", vocab, "merges",
        SP " t", "h e", SP "t he");
}

static fg_tok *open_json(json_t *j, const char *config) {
    put("tokenizer.json", j);
    json_decref(j);
    if (config) put_text("tokenizer_config.json", config);
    fg_tok *t = NULL;
    fg_status st = fg_tok_open_hf(path_of("tokenizer.json"), config ? path_of("tokenizer_config.json") : NULL, &t);
    CHECK(!st, "load: %s", fg_err_msg());
    if (st) exit(1);
    return t;
}

static void expect(fg_tok *t, const char *text, unsigned flags, const int32_t *want, size_t n_want, const char *what) {
    int32_t *ids = NULL;
    size_t n = 0;
    fg_status st = fg_tok_encode_ex(t, text, strlen(text), flags, &ids, &n);
    int ok = !st && n == n_want && !memcmp(ids, want, n * sizeof *ids);
    if (!ok) {
        fprintf(stderr, "  got (%s):", st ? fg_err_msg() : "ok");
        for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n  want:");
        for (size_t i = 0; i < n_want; i++) fprintf(stderr, " %d", want[i]);
        fprintf(stderr, "\n");
    }
    CHECK(ok, "%s: \"%s\" flags %u", what, text, flags);
    free(ids);
}
#define EXPECT(t, text, flags, what, ...)                                                  \
    do {                                                                                 \
        const int32_t w_[] = {__VA_ARGS__};                                              \
        expect(t, text, flags, w_, sizeof w_ / sizeof *w_, what);                        \
    } while (0)

static void expect_text(fg_tok *t, const int32_t *ids, size_t n, int skip, const char *want, const char *what) {
    char *s = NULL;
    size_t len = 0;
    fg_status st = fg_tok_decode(t, ids, n, skip, &s, &len);
    CHECK(!st && len == strlen(want) && !memcmp(s, want, len), "%s: decoded \"%s\", want \"%s\"", what,
          st ? fg_err_msg() : s, want);
    free(s);
}

/* ---------------------------------------------------------------- byte-level */

static void test_byte_level(void) {
    fg_tok *t = open_json(byte_level(), NULL);
    EXPECT(t, "the", 0, "no space: t + he", 't', 257);
    EXPECT(t, " the", 0, "Ġt + he -> Ġthe", 258);
    EXPECT(t, "the the", 0, "two words", 't', 257, 258);
    EXPECT(t, "Don't", 0, "contraction piece", 'D', 'o', 'n', '\'', 't');
    EXPECT(t, "IT'S", 0, "(?i:'s)", 'I', 'T', '\'', 'S');
    EXPECT(t, "12345", 0, "digits in threes", '1', '2', '3', '4', '5');
    EXPECT(t, " xyz", 0, "no merge makes Ġxyz", 32, 'x', 'y', 'z');
    EXPECT(t, "<|eot|>", 0, "special as text", '<', '|', 'e', 'o', 't', '|', '>');
    EXPECT(t, "<|eot|>", FG_TOK_PARSE_SPECIAL, "special parsed", 301);
    EXPECT(t, "a<x>b", 0, "non-special added always", 'a', 302, 'b');
    EXPECT(t, "the", FG_TOK_ADD_SPECIAL, "template BOS", 300, 't', 257);
    EXPECT(t, "", FG_TOK_ADD_SPECIAL, "empty text: BOS only", 300);
    CHECK(fg_tok_bos_id(t) == 300, "bos %d", fg_tok_bos_id(t));
    CHECK(fg_tok_eos_id(t) == -1, "no eos without a config: %d", fg_tok_eos_id(t));
    CHECK(fg_tok_is_hf(t) && fg_tok_is_special(t, 301) && !fg_tok_is_special(t, 302), "special flags");
    const int32_t ids[] = {300, 't', 257, 258, 301, 302};
    expect_text(t, ids, 6, 0, "<|bot|>the the<|eot|><x>", "decode keeps specials");
    expect_text(t, ids, 6, 1, "the the<x>", "decode skips specials, not <x>");
    fg_tok_destroy(&t);

    /* ignore_merges: a piece that is a token is that token */
    json_t *j = byte_level();
    json_object_set_new(json_object_get(j, "model"), "ignore_merges", json_true());
    t = open_json(j, "{\"add_bos_token\": false, \"add_eos_token\": true, \"eos_token\": {\"content\": \"<|eot|>\"},"
                     " \"bos_token\": \"<|bot|>\", \"model_max_length\": 1000000000000000019884624838656}");
    EXPECT(t, " xyz", 0, "ignore_merges", 261);
    EXPECT(t, " the", FG_TOK_ADD_SPECIAL, "add_bos_token false, add_eos_token true", 258, 301);
    CHECK(fg_tok_bos_id(t) == 300 && fg_tok_eos_id(t) == 301, "bos %d eos %d", fg_tok_bos_id(t), fg_tok_eos_id(t));
    put_text("generation_config.json", "{\"eos_token_id\": [300, 301, 259]}");
    CHECK(!fg_tok_load_generation_config(t, path_of("generation_config.json")), "%s", fg_err_msg());
    const int32_t *eos;
    size_t n_eos = fg_tok_eos_ids(t, &eos);
    CHECK(n_eos == 3 && eos[0] == 301 && eos[1] == 300 && eos[2] == 259, "eos list: %zu", n_eos);
    put_text("generation_config.json", "{\"eos_token_id\": 1000}");
    CHECK(fg_tok_load_generation_config(t, path_of("generation_config.json")) == FG_EINPUT &&
          strstr(fg_err_msg(), "generation_config.json: eos_token_id"), "bad eos: %s", fg_err_msg());
    fg_tok_destroy(&t);

    /* added tokens: longest first, lstrip / rstrip */
    j = byte_level();
    json_t *at = json_object_get(j, "added_tokens");
    json_array_append_new(at, added(303, "<x><x>", 0));
    json_t *s = added(304, "<s>", 1);
    json_object_set_new(s, "lstrip", json_true());
    json_object_set_new(s, "rstrip", json_true());
    json_array_append_new(at, s);
    t = open_json(j, NULL);
    EXPECT(t, "<x><x><x>", 0, "longest first", 303, 302);
    EXPECT(t, "a \t<s>  b", FG_TOK_PARSE_SPECIAL, "lstrip and rstrip take the spaces", 'a', 304, 'b');
    fg_tok_destroy(&t);
}

/* NFC before the pieces: e + U+0301 is é, whose bytes merge (Ã ©). */
static void test_nfc(void) {
    json_t *j = byte_level();
    json_object_set_new(j, "normalizer", json_pack("{s:s}", "type", "NFC"));
    fg_tok *t = NULL;
    put("tokenizer.json", j);
    json_decref(j);
    fg_status st = fg_tok_open_hf(path_of("tokenizer.json"), NULL, &t);
    if (st && strstr(fg_err_msg(), "libutf8proc")) {
        printf("tokenizer.json unit: NFC not built in (no libutf8proc): refused as it should be\n");
        return;
    }
    CHECK(!st, "NFC load: %s", fg_err_msg());
    if (st) return;
    EXPECT(t, "e\xCC\x81", 0, "NFC composes", 260);
    EXPECT(t, "\xC3\xA9", 0, "already NFC", 260);
    fg_tok_destroy(&t);
}

/* ---------------------------------------------------------------- char mode */

static void test_spm(void) {
    fg_tok *t = open_json(spm(), "{\"add_bos_token\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}");
    EXPECT(t, "the", 0, "Prepend ▁, merges", 288);
    EXPECT(t, "the the", FG_TOK_ADD_SPECIAL, "BOS, Replace", 1, 288, 288);
    EXPECT(t, " a", 0, "leading space: ▁▁a", 259, 259, 260);
    EXPECT(t, "\xC3\xA9", 0, "byte fallback", 259, 3 + 0xC3, 3 + 0xA9);
    EXPECT(t, "a<s>b", FG_TOK_PARSE_SPECIAL, "each section normalized", 259, 260, 1, 259, 261);
    EXPECT(t, "a<s>b", 0, "<s> as text", 259, 260, 3 + '<', 278, 3 + '>', 261);
    const int32_t ids[] = {1, 288, 288, 3 + 0xC3, 3 + 0xA9, 259, 3 + 0xE2};
    expect_text(t, ids, 3, 0, "<s> the the", "Strip only at the very start");
    expect_text(t, ids, 3, 1, "the the", "skip <s>, then Strip");
    expect_text(t, ids + 1, 6, 1, "the the\xC3\xA9 \xEF\xBF\xBD", "byte tokens; a cut character is U+FFFD");
    CHECK(fg_tok_eos_id(t) == 2 && fg_tok_bos_id(t) == 1, "bos/eos");
    fg_tok_destroy(&t);

    /* Meta's own Llama 2 file marks <s> normalized: it is found after the
     * normalizer, so a text starting with it keeps Prepend's "▁" before it */
    json_t *nz = spm();
    json_object_set_new(json_array_get(json_object_get(nz, "added_tokens"), 1), "normalized", json_true());
    t = open_json(nz, NULL);
    EXPECT(t, "<s>the", FG_TOK_PARSE_SPECIAL, "normalized <s>", 259, 1, 279, 287);
    EXPECT(t, "a<s>b", FG_TOK_PARSE_SPECIAL, "normalized <s> inside", 259, 260, 1, 261);
    fg_tok_destroy(&t);

    /* no byte fallback: unknown characters are <unk>, fused with fuse_unk */
    json_t *j = spm();
    json_object_set_new(json_object_get(j, "model"), "byte_fallback", json_false());
    t = open_json(j, NULL);
    EXPECT(t, "\xC3\xA9\xC3\xA9" "a\xC3\xA9", 0, "fuse_unk", 259, 0, 260, 0);
    fg_tok_destroy(&t);
    j = spm();
    json_object_set_new(json_object_get(j, "model"), "byte_fallback", json_false());
    json_object_set_new(json_object_get(j, "model"), "fuse_unk", json_false());
    t = open_json(j, NULL);
    EXPECT(t, "\xC3\xA9\xC3\xA9", 0, "no fuse_unk", 259, 0, 0);
    fg_tok_destroy(&t);
    j = spm();
    json_object_set_new(json_object_get(j, "model"), "byte_fallback", json_false());
    json_object_set_new(json_object_get(j, "model"), "unk_token", json_null());
    t = open_json(j, NULL);
    int32_t *ids2;
    size_t n2;
    CHECK(fg_tok_encode(t, "\xC3\xA9", 2, &ids2, &n2) == FG_EINPUT && strstr(fg_err_msg(), "has no token"),
          "no unk: %s", fg_err_msg());
    fg_tok_destroy(&t);

    /* a vocabulary with a token across a "▁" boundary: pieces are not cut */
    j = spm();
    json_t *v = json_object_get(json_object_get(j, "model"), "vocab"), *m = json_object_get(json_object_get(j, "model"), "merges");
    json_object_set_new(v, "a" SP, json_integer(289));
    json_object_set_new(v, "a" SP "b", json_integer(290));
    json_array_insert_new(m, 0, json_string("a " SP));
    json_array_insert_new(m, 1, json_string("a" SP " b"));
    t = open_json(j, NULL);
    EXPECT(t, "a b", 0, "merge across ▁", 259, 290);
    fg_tok_destroy(&t);
}

/* Metaspace instead of the normalizer (newer Mistral and Llama 2 files), as
 * Hugging Face's tokenizers define it: spaces become "▁", which also goes
 * first where prepend_scheme says, unless the section starts with one. */
static json_t *metaspace(const char *scheme, int split) {
    json_t *j = spm();
    json_object_set_new(j, "normalizer", json_null());
    json_object_set_new(j, "pre_tokenizer", json_pack("{s:s,s:s,s:s,s:b}", "type", "Metaspace", "replacement", SP,
                                                      "prepend_scheme", scheme, "split", split));
    return j;
}

static void test_metaspace(void) {
    fg_tok *t = open_json(metaspace("first", 0), NULL);
    EXPECT(t, "the", 0, "Metaspace first", 288);
    EXPECT(t, " the", 0, "a leading space is the ▁", 288);
    EXPECT(t, "a<s>b", FG_TOK_PARSE_SPECIAL, "first: not after <s>", 259, 260, 1, 261);
    EXPECT(t, "<s>the", FG_TOK_PARSE_SPECIAL, "first: text starting with <s>", 1, 279, 287);
    fg_tok_destroy(&t);
    t = open_json(metaspace("always", 0), NULL);
    EXPECT(t, "a<s>b", FG_TOK_PARSE_SPECIAL, "always", 259, 260, 1, 259, 261);
    fg_tok_destroy(&t);
    t = open_json(metaspace("never", 0), NULL);
    EXPECT(t, "the the", 0, "never", 279, 287, 288);
    fg_tok_destroy(&t);
    /* split: cut before each ▁, so the token across "▁" cannot form */
    for (int split = 0; split < 2; split++) {
        json_t *j = metaspace("first", split);
        json_t *m = json_object_get(j, "model"), *v = json_object_get(m, "vocab");
        json_object_set_new(v, "a" SP, json_integer(289));
        json_object_set_new(v, "a" SP "b", json_integer(290));
        json_array_insert_new(json_object_get(m, "merges"), 0, json_string("a " SP));
        json_array_insert_new(json_object_get(m, "merges"), 1, json_string("a" SP " b"));
        t = open_json(j, NULL);
        if (split) EXPECT(t, "a b", 0, "split", 259, 260, 259, 261);
        else EXPECT(t, "a b", 0, "no split", 259, 290);
        fg_tok_destroy(&t);
    }
    /* an added token with normalized: true is found in the normalized text;
     * the parts around it are then pre-tokenized one after the other */
    json_t *n = metaspace("always", 0);
    json_object_set_new(n, "normalizer", json_pack("{s:s,s:{s:s},s:s}", "type", "Replace", "pattern", "String", "  ",
                                                   "content", " "));
    json_t *nt = added(300, "<n>", 0);
    json_object_set_new(nt, "normalized", json_true());
    json_array_append_new(json_object_get(n, "added_tokens"), nt);
    t = open_json(n, NULL);
    EXPECT(t, "a  b<n>c  d  e  f  g", 0, "normalized added token", 259, 260, 259, 261, 300, 259, 262, 259, 263, 259,
           264, 259, 265, 259, 266);
    fg_tok_destroy(&t);

    /* the Metaspace decoder: ▁ is a space, except in the first token */
    json_t *j = metaspace("first", 0);
    json_object_set_new(j, "decoder", json_pack("{s:s,s:s,s:s}", "type", "Metaspace", "replacement", SP,
                                                "prepend_scheme", "first"));
    t = open_json(j, NULL);
    const int32_t a[] = {288, 288}, b[] = {259, 288}, c[] = {1, 288};
    expect_text(t, a, 2, 0, "the the", "Metaspace decoder");
    expect_text(t, b, 2, 0, " the", "the first token's ▁ dropped");
    expect_text(t, c, 2, 0, "<s> the", "<s> first");
    expect_text(t, c, 2, 1, "the", "<s> skipped: the next is first");
    fg_tok_destroy(&t);
}

/* ---------------------------------------------------------------- Split behaviors */

/* a 0, b 1, - 2, c 3, d 4, ab 5, a- 6, -b 7, -- 8; merges (a b) (a -) (- b) (- -) */
static fg_tok *split_toy(const char *pattern_kind, const char *pattern, const char *behavior, int invert) {
    json_t *j = json_pack(
        "{s:[],s:n,s:{s:s,s:{s:s},s:s,s:b},s:n,s:{s:s,s:[{s:s},{s:s}]},"
        "s:{s:s,s:{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i},s:[[s,s],[s,s],[s,s],[s,s]]}}",
        "added_tokens", "normalizer", "pre_tokenizer", "type", "Split", "pattern", pattern_kind, pattern, "behavior",
        behavior, "invert", invert, "post_processor", "decoder", "type", "Sequence", "decoders", "type",
        "ByteFallback", "type", "Fuse", "model", "type", "BPE", "vocab", "a", 0, "b", 1, "-", 2, "c", 3, "d", 4, "ab", 5,
        "a-", 6, "-b", 7, "--", 8, "merges", "a", "b", "a", "-", "-", "b", "-", "-");
    return open_json(j, NULL);
}

static void test_splits(void) {
    fg_tok *t = split_toy("String", "-", "Isolated", 0);
    EXPECT(t, "a-b", 0, "Isolated", 0, 2, 1);
    EXPECT(t, "a--b", 0, "Isolated: each dash alone", 0, 2, 2, 1);
    fg_tok_destroy(&t);
    t = split_toy("String", "-", "Removed", 0);
    EXPECT(t, "a-b", 0, "Removed", 0, 1);
    fg_tok_destroy(&t);
    t = split_toy("String", "-", "MergedWithPrevious", 0);
    EXPECT(t, "a-b", 0, "MergedWithPrevious", 6, 1);
    fg_tok_destroy(&t);
    t = split_toy("String", "-", "MergedWithNext", 0);
    EXPECT(t, "a-b", 0, "MergedWithNext", 0, 7);
    EXPECT(t, "a--b", 0, "MergedWithNext: the first dash alone", 0, 2, 7);
    fg_tok_destroy(&t);
    t = split_toy("String", "-", "Contiguous", 0);
    EXPECT(t, "a--b", 0, "Contiguous", 0, 8, 1);
    fg_tok_destroy(&t);
    t = split_toy("Regex", "\\p{L}+", "Removed", 1);
    EXPECT(t, "ab-cd", 0, "invert Removed keeps the matches", 5, 3, 4);
    fg_tok_destroy(&t);
    t = split_toy("Regex", "[cd]", "Isolated", 1);
    EXPECT(t, "ab-c", 0, "invert Isolated: the same pieces", 5, 2, 3);
    fg_tok_destroy(&t);
    t = split_toy("Regex", "\\s+", "Removed", 0);
    EXPECT(t, "ab\xC2\x85" "ab", 0, "U+0085 is white space (Oniguruma's \\s)", 5, 5);
    fg_tok_destroy(&t);
}

/* Merges that are not causal ((ab a) ranks before the (a b) that makes ab):
 * one merge at a time, Hugging Face's order, gives "abab" -> aba b, where
 * merging every (a b) at once (GPT-2's loop) would give ab ab. Short words
 * (the scan) and long ones (the heap) must both keep that order. */
static void test_merge_order(void) {
    json_t *j = json_pack("{s:[],s:n,s:n,s:n,s:{s:s},s:{s:s,s:{s:i,s:i,s:i,s:i},s:[s,s]}}", "added_tokens",
                          "normalizer", "pre_tokenizer", "post_processor", "decoder", "type", "Fuse", "model", "type",
                          "BPE", "vocab", "a", 0, "b", 1, "ab", 2, "aba", 3, "merges", "ab a", "a b");
    fg_tok *t = open_json(j, NULL);
    EXPECT(t, "abab", 0, "one merge at a time", 3, 1);
    char long_word[53];
    int32_t want[26];
    for (int i = 0; i < 26; i++) long_word[2 * i] = 'a', long_word[2 * i + 1] = 'b', want[i] = i % 2 ? 1 : 3;
    long_word[52] = 0;
    expect(t, long_word, 0, want, 26, "the heap: the same order");
    fg_tok_destroy(&t);
}

/* ---------------------------------------------------------------- refusals */

/* Loads J (and CONFIG) and wants FG_EINPUT with a message naming FILE and
 * holding PART. */
static void refused(json_t *j, const char *config, const char *file, const char *part) {
    put("tokenizer.json", j);
    json_decref(j);
    if (config) put_text("tokenizer_config.json", config);
    fg_tok *t = NULL;
    fg_status st = fg_tok_open_hf(path_of("tokenizer.json"), config ? path_of("tokenizer_config.json") : NULL, &t);
    const char *msg = st ? fg_err_msg() : "(loaded)";
    CHECK(st == FG_EINPUT && strstr(msg, path_of(file)) && strstr(msg, part), "want \"%s\" naming %s, got: %s", part,
          file, msg);
    fg_tok_destroy(&t);
}

static json_t *with(json_t *j, const char *key, json_t *v) {
    json_object_set_new(j, key, v);
    return j;
}

static json_t *with_model(json_t *j, const char *key, json_t *v) {
    json_object_set_new(json_object_get(j, "model"), key, v);
    return j;
}

static void test_refusals(void) {
    const char *tj = "tokenizer.json";
    refused(with_model(spm(), "type", json_string("WordPiece")), NULL, tj, "model type 'WordPiece' is not supported");
    refused(with_model(spm(), "type", json_string("Unigram")), NULL, tj, "model type 'Unigram' is not supported");
    refused(with_model(spm(), "type", json_string("WordLevel")), NULL, tj, "model type 'WordLevel'");
    refused(with(spm(), "normalizer", json_pack("{s:s}", "type", "NFKC")), NULL, tj,
            "normalizer type 'NFKC' is not supported");
    refused(with(spm(), "normalizer", json_pack("{s:s,s:[{s:s,s:s},{s:s}]}", "type", "Sequence", "normalizers",
                                                "type", "Prepend", "prepend", SP, "type", "Lowercase")),
            NULL, tj, "normalizer.normalizers[1] type 'Lowercase' is not supported");
    refused(with(spm(), "normalizer", json_pack("{s:s,s:{s:s},s:s}", "type", "Replace", "pattern", "Regex", " +",
                                                "content", " ")),
            NULL, tj, "Replace with a Regex pattern is not supported");
    refused(with(spm(), "pre_tokenizer", json_pack("{s:s}", "type", "Whitespace")), NULL, tj,
            "pre_tokenizer type 'Whitespace' is not supported");
    refused(with(spm(), "pre_tokenizer", json_pack("{s:s,s:s,s:s}", "type", "Metaspace", "replacement", SP,
                                                   "prepend_scheme", "sometimes")),
            NULL, tj, "prepend_scheme 'sometimes' is not supported");
    refused(with(spm(), "pre_tokenizer", json_pack("{s:s,s:{s:s},s:s}", "type", "Split", "pattern", "Regex", "\\w+",
                                                   "behavior", "Isolated")),
            NULL, tj, "escape \\w");
    refused(with(spm(), "pre_tokenizer", json_pack("{s:s,s:{s:s},s:s}", "type", "Split", "pattern", "Regex", " ",
                                                   "behavior", "Bogus")),
            NULL, tj, "behavior 'Bogus' is not supported");
    refused(with(spm(), "decoder", json_null()), NULL, tj, "decoder null is not supported");
    refused(with(spm(), "decoder", json_pack("{s:s}", "type", "WordPiece")), NULL, tj,
            "decoder type 'WordPiece' is not supported");
    refused(with(byte_level(), "decoder", json_pack("{s:s}", "type", "Fuse")), NULL, tj,
            "only the ByteLevel decoder");
    refused(with(spm(), "post_processor", json_pack("{s:s}", "type", "Bogus")), NULL, tj,
            "post_processor type 'Bogus' is not supported");
    refused(with_model(spm(), "dropout", json_real(0.1)), NULL, tj, "model.dropout");
    refused(with_model(spm(), "continuing_subword_prefix", json_string("##")), NULL, tj,
            "model.continuing_subword_prefix");
    refused(with_model(spm(), "merges", json_pack("[s]", "x" SP " q")), NULL, tj, "model.merges[0]");
    json_t *j = spm();
    json_object_set_new(json_array_get(json_object_get(j, "added_tokens"), 1), "single_word", json_true());
    refused(j, NULL, tj, "single_word added tokens are not supported");
    refused(spm(), "{\"add_bos_token\": true}", "tokenizer_config.json", "add_bos_token is true but there is no bos_token");
    refused(spm(), "{\"bos_token\": \"<bos>\"}", "tokenizer_config.json", "bos_token \"<bos>\" is not a token");
    put_text(tj, "{\"model\": {\"type\": \"BPE\",\n \"vocab\": }");
    fg_tok *t = NULL;
    CHECK(fg_tok_open_hf(path_of(tj), NULL, &t) == FG_EINPUT && strstr(fg_err_msg(), ":2:"), "malformed JSON: %s",
          fg_err_msg());
}

/* A model directory with both kinds of files: tokenizer.json wins. */
static void test_model_dir(void) {
    json_t *j = byte_level();
    put("tokenizer.json", j);
    json_decref(j);
    put_text("vocab.json", "{\"a\": 0}");
    put_text("merges.txt", "#version: 0.2\n");
    put_text("tokenizer_config.json", "{\"eos_token\": \"<|eot|>\"}");
    put_text("generation_config.json", "{\"eos_token_id\": 300}");
    fg_tok *t = NULL;
    CHECK(!fg_tok_open_model_dir(dir_, &t), "%s", fg_err_msg());
    if (!t) return;
    const int32_t *eos;
    size_t n = fg_tok_eos_ids(t, &eos);
    CHECK(fg_tok_is_hf(t) && n == 2 && eos[0] == 301 && eos[1] == 300, "tokenizer.json, config and generation "
          "config");
    fg_tok_destroy(&t);
}

int tok_hf_unit(const char *dir) {
    snprintf(dir_, sizeof dir_, "%s", dir);
    test_byte_level();
    test_nfc();
    test_spm();
    test_splits();
    test_metaspace();
    test_merge_order();
    test_refusals();
    test_model_dir();
    if (!failures) printf("tokenizer.json unit tests: all passed\n");
    return failures ? 1 : 0;
}

/* fg_tok_split.c - a tokenizer.json's pre_tokenizer: Split (a Regex or
 * String pattern, each of the five behaviors, invert) and ByteLevel (with
 * use_regex, GPT-2's pattern), alone or in a Sequence, run over a section of
 * text into pieces for BPE.
 *
 * Hugging Face's tokenizers run Split patterns with Oniguruma; here PCRE2
 * runs them (UTF, UCP, JIT) after fg_tok_regex_translate has rewritten what
 * the two read differently: \s and \S become \p{White_Space} and its
 * negation (Oniguruma's Unicode \s is exactly White_Space, PCRE2's adds
 * U+180E), \uHHHH becomes \x{HHHH}, \v a vertical tab; ^ and $ are line
 * anchors in Oniguruma's Ruby syntax, so the pattern compiles MULTILINE.
 * Constructs whose meaning differs and are not rewritten (\w, \b, \h, \R,
 * POSIX brackets, class intersection, (?m) ...) are refused, naming them. */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <string.h>

#include "fg_tok_hf.h"

/* ---------------------------------------------------------------- pattern translation */

typedef struct {
    char *p;
    size_t n, cap;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = fg_xmalloc(cap);
        if (b->n) memcpy(q, b->p, b->n);
        free(b->p);
        b->p = q, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static fg_status refuse(sbuf *b, const char *path, const char *where, const char *what, size_t at) {
    free(b->p);
    return fg_err_set(FG_EINPUT, "%s: %s: the pattern's %s (at character %zu) is not supported "
                      "(Oniguruma and PCRE2 read it differently)", path, where, what, at);
}

/* One escape at IN[i] == '\\'; returns the characters consumed, or 0 after
 * refusing. */
static size_t escape(const char *in, size_t i, sbuf *b, const char *path, const char *where, fg_status *st) {
    char c = in[i + 1];
    char what[32];
    switch (c) {
    case 's': sb_put(b, "\\p{White_Space}", 15); return 2;
    case 'S': sb_put(b, "\\P{White_Space}", 15); return 2;
    case 'v': sb_put(b, "\\x{0B}", 6); return 2;
    case 'p': case 'P': {
        const char *close = in[i + 2] == '{' ? strchr(in + i + 2, '}') : NULL;
        if (!close) break;
        sb_put(b, in + i, (size_t)(close - (in + i)) + 1);
        return (size_t)(close - (in + i)) + 1;
    }
    case 'u': {
        size_t k = 2;
        while (k < 6 && strchr("0123456789abcdefABCDEF", in[i + k]) && in[i + k]) k++;
        if (k != 6) break;
        sb_put(b, "\\x{", 3);
        sb_put(b, in + i + 2, 4);
        sb_put(b, "}", 1);
        return 6;
    }
    case 'x': case 'n': case 'r': case 't': case 'f': case 'a': case 'e': case 'd': case 'D':
    case 'A': case 'z': case 'Z':
        sb_put(b, in + i, 2);
        return 2;
    default:
        if (c && !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) {
            sb_put(b, in + i, 2);   /* an escaped punctuation character: itself */
            return 2;
        }
    }
    snprintf(what, sizeof what, "escape \\%c", c ? c : ' ');
    *st = refuse(b, path, where, what, i);
    return 0;
}

fg_status fg_tok_regex_translate(const char *in, const char *path, const char *where, char **out) {
    sbuf b = {0};
    sb_put(&b, "", 0);
    int in_class = 0;
    fg_status st = FG_OK;
    for (size_t i = 0; in[i];) {
        char c = in[i];
        if (c == '\\') {
            size_t k = escape(in, i, &b, path, where, &st);
            if (!k) return st;
            i += k;
            continue;
        }
        if (in_class && c == '[')
            return refuse(&b, path, where, "nested character class", i);
        if (in_class && c == '&' && in[i + 1] == '&')
            return refuse(&b, path, where, "class intersection &&", i);
        if (!in_class && c == '(' && in[i + 1] == '?') {
            /* options: only i (and -i) mean the same in both */
            size_t k = i + 2;
            while (in[k] == 'i' || in[k] == '-' || in[k] == 'm' || in[k] == 'x') {
                if (in[k] == 'm' || in[k] == 'x') return refuse(&b, path, where, "option (?m) or (?x)", i);
                k++;
            }
        }
        if (c == '[' && !in_class) {
            in_class = 1;
            sb_put(&b, in + i, 1);
            i++;
            if (in[i] == '^') sb_put(&b, in + i++, 1);
            if (in[i] == ']') sb_put(&b, in + i++, 1);   /* a literal ] first */
            continue;
        }
        if (c == ']' && in_class) in_class = 0;
        sb_put(&b, in + i, 1);
        i++;
    }
    *out = b.p;
    return FG_OK;
}

fg_status fg_tok_split_compile(fg_tok_split *s, const char *pattern, const char *path, const char *where) {
    char *pc;
    fg_status st = fg_tok_regex_translate(pattern, path, where, &pc);
    if (st) return st;
    int code;
    PCRE2_SIZE off;
    pcre2_compile_context *cc = pcre2_compile_context_create(NULL);
    pcre2_set_newline(cc, PCRE2_NEWLINE_LF);
    s->re = pcre2_compile((PCRE2_SPTR)pc, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE,
                          &code, &off, cc);
    pcre2_compile_context_free(cc);
    if (!s->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        st = fg_err_set(FG_EINPUT, "%s: %s: PCRE2 rejects the pattern (as \"%s\") at %zu: %s", path, where,
                        pc, (size_t)off, (const char *)msg);
        free(pc);
        return st;
    }
    free(pc);
    s->jit = pcre2_jit_compile(s->re, PCRE2_JIT_COMPLETE) == 0;
    s->md = pcre2_match_data_create_from_pattern(s->re, NULL);
    if (!s->md) return fg_err_set(FG_ERUNTIME, "tokenizer: out of memory for PCRE2 match data");
    return FG_OK;
}

/* ---------------------------------------------------------------- parsing */

static const char *const behaviors[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext",
                                        "Contiguous"};

static fg_status parse_split(fg_tok_split *s, json_t *o, const char *path, const char *where) {
    json_t *pat = json_object_get(o, "pattern");
    const char *rx = json_string_value(json_object_get(pat, "Regex"));
    json_t *lit = json_object_get(pat, "String");
    const char *beh = json_string_value(json_object_get(o, "behavior"));
    json_t *inv = json_object_get(o, "invert");
    if ((!rx && !json_is_string(lit)) || (inv && !json_is_boolean(inv)))
        return fg_err_set(FG_EINPUT, "%s: %s: expected a pattern {\"Regex\": ...} or {\"String\": ...} "
                          "and a boolean invert", path, where);
    int k = -1;
    for (int i = 0; beh && i < 5; i++)
        if (!strcmp(beh, behaviors[i])) k = i;
    s->beh = (fg_tok_behavior)k;
    if (k < 0)
        return fg_err_set(FG_EINPUT, "%s: %s: behavior '%s' is not supported", path, where, beh ? beh : "(none)");
    s->invert = json_is_true(inv);
    if (rx) return fg_tok_split_compile(s, rx, path, where);
    s->lit_len = json_string_length(lit);
    if (!s->lit_len) return fg_err_set(FG_EINPUT, "%s: %s: empty String pattern", path, where);
    s->lit = fg_xmalloc(s->lit_len + 1);
    memcpy(s->lit, json_string_value(lit), s->lit_len + 1);
    return FG_OK;
}

/* Metaspace (Hugging Face's since tokenizers 0.19): in each section, spaces
 * become the replacement; it is put first too where prepend_scheme says
 * ("always", or "first": only in a section that starts the text) and the
 * section does not start with it already; with split, the section is then
 * cut before each replacement (MergedWithNext). Old files have
 * add_prefix_space instead of prepend_scheme. */
static fg_status parse_metaspace(fg_tok_hf *hf, json_t *o, const char *path, const char *where, int first) {
    json_t *rep = json_object_get(o, "replacement"), *sch = json_object_get(o, "prepend_scheme");
    json_t *aps = json_object_get(o, "add_prefix_space"), *split = json_object_get(o, "split");
    const char *s = json_string_value(sch);
    if (!first)
        return fg_err_set(FG_EINPUT, "%s: %s: Metaspace after another pre-tokenizer is not supported", path, where);
    if (!json_is_string(rep) || !json_string_length(rep) || (sch && !s) || (aps && !json_is_boolean(aps)) ||
        (split && !json_is_boolean(split)))
        return fg_err_set(FG_EINPUT, "%s: %s: Metaspace needs a string \"replacement\" (prepend_scheme a string, "
                          "add_prefix_space and split booleans)", path, where);
    hf->meta_scheme = s ? (!strcmp(s, "never") ? 0 : !strcmp(s, "first") ? 1 : !strcmp(s, "always") ? 2 : -1)
                        : (aps && !json_is_true(aps) ? 0 : 2);
    if (hf->meta_scheme < 0)
        return fg_err_set(FG_EINPUT, "%s: %s: prepend_scheme '%s' is not supported", path, where, s);
    hf->meta_rep_len = json_string_length(rep);
    hf->meta_rep = fg_xmalloc(hf->meta_rep_len + 1);
    memcpy(hf->meta_rep, json_string_value(rep), hf->meta_rep_len + 1);
    if (split && !json_is_true(split)) return FG_OK;
    fg_tok_split *sp = &hf->split[hf->n_split++];
    sp->beh = FG_SPLIT_MERGED_NEXT;
    sp->lit_len = hf->meta_rep_len;
    sp->lit = fg_xmalloc(sp->lit_len + 1);
    memcpy(sp->lit, hf->meta_rep, sp->lit_len + 1);
    return FG_OK;
}

/* A pre_tokenizer step (fg_tok_step_fn; CTX is the fg_tok_hf). */
static fg_status parse_step(void *ctx, json_t *o, const char *type, const char *path, const char *where,
                            size_t i) {
    fg_tok_hf *hf = ctx;
    int first = i == 0;
    if (!strcmp(type, "Metaspace")) return parse_metaspace(hf, o, path, where, first);
    if (hf->byte_level)
        return fg_err_set(FG_EINPUT, "%s: %s: a pre-tokenizer after ByteLevel is not supported", path, where);
    if (hf->n_split == FG_TOK_MAX_STEPS)
        return fg_err_set(FG_EINPUT, "%s: %s: more than %d steps", path, where, FG_TOK_MAX_STEPS);
    if (!strcmp(type, "Split")) return parse_split(&hf->split[hf->n_split++], o, path, where);
    if (strcmp(type, "ByteLevel"))
        return fg_err_set(FG_EINPUT, "%s: %s type '%s' is not supported", path, where, type);
    json_t *aps = json_object_get(o, "add_prefix_space"), *ur = json_object_get(o, "use_regex");
    if ((aps && !json_is_boolean(aps)) || (ur && !json_is_boolean(ur)))
        return fg_err_set(FG_EINPUT, "%s: %s: add_prefix_space and use_regex must be booleans", path, where);
    if (json_is_true(aps) && !first)
        return fg_err_set(FG_EINPUT, "%s: %s: ByteLevel add_prefix_space after another pre-tokenizer is not "
                          "supported", path, where);
    hf->prefix_space = json_is_true(aps);
    hf->byte_level = 1;
    if (ur && !json_is_true(ur)) return FG_OK;
    fg_tok_split *s = &hf->split[hf->n_split++];
    s->beh = FG_SPLIT_ISOLATED;
    return fg_tok_compile_gpt2(NULL, &s->re, &s->md, &s->jit);
}

fg_status fg_tok_parse_pretok(fg_tok_hf *hf, json_t *pt, const char *path) {
    return fg_tok_json_steps(pt, path, "pre_tokenizer", "pretokenizers", parse_step, hf);
}

/* ---------------------------------------------------------------- running */

void fg_tok_pieces_push(fg_tok_pieces *p, size_t off, size_t len) {
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 256;
        size_t *o = fg_xmalloc(cap * sizeof *o), *l = fg_xmalloc(cap * sizeof *l);
        if (p->n) {
            memcpy(o, p->off, p->n * sizeof *o);
            memcpy(l, p->len, p->n * sizeof *l);
        }
        free(p->off);
        free(p->len);
        p->off = o, p->len = l, p->cap = cap;
    }
    p->off[p->n] = off;
    p->len[p->n++] = len;
}

/* Pieces of one step, combined by its behavior before they go to the next
 * step: pend is the piece being built, held a delimiter waiting for the
 * piece after it (MergedWithNext). */
typedef struct {
    fg_tok_hf *hf;
    const uint8_t *buf;
    size_t base;
    int next;
    fg_tok_pieces *out;
    fg_status st;
    size_t ps, pe;
    int pend, pend_delim, prev_delim;
} split_run;

static void emit(split_run *r, size_t s, size_t e) {
    if (e > s && !r->st) r->st = fg_tok_pretok(r->hf, r->buf + s, e - s, r->next, r->base + s, r->out);
}

static void segment(split_run *r, fg_tok_behavior beh, size_t s, size_t e, int delim) {
    if (e <= s) return;
    switch (beh) {
    case FG_SPLIT_ISOLATED: emit(r, s, e); break;
    case FG_SPLIT_REMOVED: if (!delim) emit(r, s, e); break;
    case FG_SPLIT_MERGED_PREV:
        if (delim && !r->prev_delim && r->pend) r->pe = e;
        else {
            if (r->pend) emit(r, r->ps, r->pe);
            r->ps = s, r->pe = e, r->pend = 1;
        }
        break;
    case FG_SPLIT_MERGED_NEXT:
        if (delim) {
            if (r->pend) emit(r, r->ps, r->pe);
            r->ps = s, r->pe = e, r->pend = 1;
        } else if (r->pend) {
            emit(r, r->ps, e);
            r->pend = 0;
        } else {
            emit(r, s, e);
        }
        break;
    case FG_SPLIT_CONTIGUOUS:
        if (r->pend && r->pend_delim == delim) r->pe = e;
        else {
            if (r->pend) emit(r, r->ps, r->pe);
            r->ps = s, r->pe = e, r->pend = 1, r->pend_delim = delim;
        }
        break;
    }
    r->prev_delim = delim;
}

/* Next match of S in buf[pos..n): [*ms, *me); 0 when there is none. */
static int find(fg_tok_split *s, const uint8_t *buf, size_t n, size_t pos, size_t *ms, size_t *me,
                fg_status *st) {
    if (s->lit) {
        const uint8_t *hit = memmem(buf + pos, n - pos, s->lit, s->lit_len);
        if (!hit) return 0;
        *ms = (size_t)(hit - buf), *me = *ms + s->lit_len;
        return 1;
    }
    /* Valid UTF-8 (checked once by the encoder), so no check per call. */
    int rc = s->jit ? pcre2_jit_match(s->re, buf, n, pos, 0, s->md, NULL)
                    : pcre2_match(s->re, buf, n, pos, PCRE2_NO_UTF_CHECK, s->md, NULL);
    if (rc == PCRE2_ERROR_NOMATCH) return 0;
    if (rc < 0) {
        *st = fg_err_set(FG_ERUNTIME, "tokenizer: pre-tokenizer pattern failed at byte %zu (PCRE2 %d)", pos, rc);
        return 0;
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
    *ms = ov[0], *me = ov[1];
    return 1;
}

fg_status fg_tok_pretok(fg_tok_hf *hf, const uint8_t *buf, size_t n, int from, size_t base,
                        fg_tok_pieces *out) {
    if (from == hf->n_split) {
        if (n) fg_tok_pieces_push(out, base, n);
        return FG_OK;
    }
    fg_tok_split *s = &hf->split[from];
    split_run r = {.hf = hf, .buf = buf, .base = base, .next = from + 1, .out = out};
    size_t prev = 0, pos = 0, ms, me;
    while (pos <= n && !r.st && find(s, buf, n, pos, &ms, &me, &r.st)) {
        if (me == ms) {   /* an empty match delimits nothing: step one character */
            pos = ms + 1;
            while (pos < n && (buf[pos] & 0xC0) == 0x80) pos++;
            continue;
        }
        segment(&r, s->beh, prev, ms, s->invert);
        segment(&r, s->beh, ms, me, !s->invert);
        prev = pos = me;
    }
    segment(&r, s->beh, prev, n, s->invert);
    if (r.pend) emit(&r, r.ps, r.pe);
    return r.st;
}

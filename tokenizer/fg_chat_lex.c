/* fg_chat_lex.c - a chat template's text to tokens, as @huggingface/jinja's
 * lexer makes them (fg_chat.h): first its preprocessing (one trailing
 * newline dropped; lstrip_blocks: spaces and tabs before a {% or {# at the
 * start of a line removed; trim_blocks: the newline after a %} or #}
 * removed), then text runs between tags and the tokens inside tags, with
 * whitespace control ({%- strips the white space before it, -%} the white
 * space after it) applied to the text tokens. Every byte keeps the line it
 * had in the template, so messages name the line the author sees. Also the
 * UTF-8 helpers the other files use. */
#include <string.h>

#include "fg_chat_int.h"

/* ---- UTF-8 ---- */

uint32_t fg_chat_utf8_get(const char *s, size_t n, size_t *len) {
    const unsigned char *u = (const unsigned char *)s;
    if (u[0] < 0x80 || n < 2) return *len = 1, u[0];
    if (u[0] < 0xE0) return *len = 2, ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
    if (u[0] < 0xF0 || n < 4) {
        if (n < 3) return *len = 1, u[0];
        return *len = 3, ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
    }
    *len = 4;
    return ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) | ((uint32_t)(u[2] & 0x3F) << 6) |
           (u[3] & 0x3F);
}

size_t fg_chat_utf8_put(uint32_t cp, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) return o[0] = (unsigned char)cp, 1;
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

static int is_ws_cp(uint32_t c) {
    if (c <= 32) return c == 32 || (c >= 9 && c <= 13);
    return c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

size_t fg_chat_ws_at(const char *s, size_t n) {
    if (!n) return 0;
    size_t len;
    uint32_t c = fg_chat_utf8_get(s, n, &len);
    return is_ws_cp(c) ? len : 0;
}

size_t fg_chat_ws_before(const char *s, size_t n) {
    size_t end = n;
    while (end) {
        size_t st = end - 1; /* back to the first byte of the last character */
        while (st && ((unsigned char)s[st] & 0xC0) == 0x80 && end - st < 4) st--;
        if (!fg_chat_ws_at(s + st, end - st) || fg_chat_ws_at(s + st, end - st) != end - st) break;
        end = st;
    }
    return n - end;
}

/* ---- preprocessing ---- */

typedef struct {
    char *s;
    int *ln; /* the template line of each byte */
    size_t n;
} pp_text;

static int line_start(const pp_text *t, size_t i) {
    if (i == 0) return 1;
    unsigned char c = (unsigned char)t->s[i - 1];
    if (c == '\n' || c == '\r') return 1;
    /* U+2028 and U+2029 end lines for JavaScript's multiline ^ too */
    return i >= 3 && (unsigned char)t->s[i - 3] == 0xE2 && (unsigned char)t->s[i - 2] == 0x80 &&
           (c == 0xA8 || c == 0xA9);
}

/* lstrip_blocks, then trim_blocks, each a pass from t into a copy (the
 * arena's) that replaces it: the rules read the text as it was before them. */
static void preprocess(fg_chat_parser *p, pp_text *t) {
    for (int pass = 0; pass < 2; pass++) {
        pp_text o = {fg_chat_alloc(p->arena, t->n + 1), fg_chat_alloc(p->arena, (t->n + 1) * sizeof(int)), 0};
        if (!o.s || !o.ln) fg_chat_parse_fail(p, 1, "out of memory");
        for (size_t i = 0; i < t->n;) {
            if (pass == 0 && line_start(t, i)) {
                size_t j = i;
                while (j < t->n && (t->s[j] == ' ' || t->s[j] == '\t')) j++;
                if (j > i && j + 1 < t->n && t->s[j] == '{' && (t->s[j + 1] == '#' || t->s[j + 1] == '%' ||
                                                                 t->s[j + 1] == '-'))
                    i = j;
            }
            int drop = pass == 1 && i + 2 < t->n && (t->s[i] == '#' || t->s[i] == '%' || t->s[i] == '-') &&
                       t->s[i + 1] == '}' && t->s[i + 2] == '\n';
            size_t k = drop ? 2 : 1;
            memcpy(o.s + o.n, t->s + i, k);
            memcpy(o.ln + o.n, t->ln + i, k * sizeof(int));
            o.n += k;
            i += k + (size_t)drop;
        }
        *t = o;
    }
}

/* ---- tokens ---- */

typedef struct {
    fg_chat_parser *p;
    pp_text t;
    size_t pos;
    size_t cap;
    int curly; /* depth of { } inside an expression: "}}" there closes a dict, not the expression */
} lexer;

static int line_at(const lexer *L, size_t pos) {
    if (!L->t.n) return 1;
    return L->t.ln[pos < L->t.n ? pos : L->t.n - 1];
}

static void push(lexer *L, int type, const char *s, size_t n, int line) {
    fg_chat_parser *p = L->p;
    if (p->ntok == L->cap) {
        L->cap = L->cap ? 2 * L->cap : 256;
        fg_chat_tok *v = fg_chat_alloc(p->arena, L->cap * sizeof *v);
        if (!v) fg_chat_parse_fail(p, line, "out of memory");
        if (p->ntok) memcpy(v, p->toks, p->ntok * sizeof *v);
        p->toks = v;
    }
    p->toks[p->ntok++] = (fg_chat_tok){type, line, s, n};
}

static int last_type(const lexer *L) {
    return L->p->ntok ? L->p->toks[L->p->ntok - 1].type : -1;
}

/* {%- and {{- and {#-: the text token before loses its trailing white space (and goes if that was all). */
static void strip_before(lexer *L) {
    fg_chat_parser *p = L->p;
    if (!p->ntok || p->toks[p->ntok - 1].type != TK_TEXT) return;
    fg_chat_tok *k = &p->toks[p->ntok - 1];
    k->n -= fg_chat_ws_before(k->s, k->n);
    if (!k->n) p->ntok--;
}

static void skip_ws(lexer *L) {
    size_t w;
    while (L->pos < L->t.n && (w = fg_chat_ws_at(L->t.s + L->pos, L->t.n - L->pos))) L->pos += w;
}

/* White space inside a tag; the template may not end there. */
static void skip_ws_in_tag(lexer *L) {
    skip_ws(L);
    if (L->pos >= L->t.n) fg_chat_parse_fail(L->p, line_at(L, L->pos), "the template ends inside a tag");
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '_';
}

/* Text up to the next {%, {{ or {#. */
static int lex_text(lexer *L) {
    size_t end = L->pos;
    const char *s = L->t.s;
    while (end < L->t.n) {
        const char *b = memchr(s + end, '{', L->t.n - end);
        if (!b) {
            end = L->t.n;
            break;
        }
        end = (size_t)(b - s);
        if (end + 1 < L->t.n && (s[end + 1] == '%' || s[end + 1] == '{' || s[end + 1] == '#')) break;
        end++;
    }
    if (end == L->pos) return 0;
    push(L, TK_TEXT, s + L->pos, end - L->pos, line_at(L, L->pos));
    L->pos = end;
    return 1;
}

static void lex_comment(lexer *L) {
    int line = line_at(L, L->pos);
    L->pos += 2;
    int strip_b = L->pos < L->t.n && L->t.s[L->pos] == '-';
    if (strip_b) L->pos++;
    const char *s = L->t.s + L->pos, *e = NULL;
    for (size_t i = L->pos; i + 1 < L->t.n && !e; i++)
        if (L->t.s[i] == '#' && L->t.s[i + 1] == '}') e = L->t.s + i;
    if (!e) fg_chat_parse_fail(L->p, line, "a comment {# is never closed by #}");
    size_t n = (size_t)(e - s);
    int strip_a = n && s[n - 1] == '-';
    if (strip_b) strip_before(L);
    push(L, TK_COMMENT, s, n - (size_t)strip_a, line);
    L->pos += n + 2;
    if (strip_a) skip_ws(L);
}

static int hex4(const char *s, size_t n, unsigned *v) {
    *v = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int d = is_digit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
        if (d < 0) return 0;
        *v = *v * 16 + (unsigned)d;
    }
    return 1;
}

/* \xHH or \uHHHH at s (after the backslash): the code point, a surrogate pair joined; 0 if malformed. */
static size_t lex_hex_escape(lexer *L, size_t i, uint32_t *cp, int line) {
    const char *s = L->t.s;
    size_t n = s[i] == 'x' ? 2 : 4;
    unsigned v;
    if (i + 1 + n > L->t.n || !hex4(s + i + 1, n, &v))
        fg_chat_parse_fail(L->p, line, "invalid escape \\%c in a string (\\x takes 2 hex digits, \\u 4)", s[i]);
    size_t used = 1 + n;
    if (v >= 0xD800 && v < 0xDC00) { /* a high surrogate: only with its low half, \uDCxx, right after it */
        unsigned lo;
        if (i + used + 6 > L->t.n || s[i + used] != '\\' || s[i + used + 1] != 'u' ||
            !hex4(s + i + used + 2, 4, &lo) || lo < 0xDC00 || lo > 0xDFFF)
            fg_chat_parse_fail(L->p, line, "a string has a lone surrogate \\u%04x", v);
        v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
        used += 6;
    } else if (v >= 0xDC00 && v < 0xE000) {
        fg_chat_parse_fail(L->p, line, "a string has a lone surrogate \\u%04x", v);
    }
    *cp = v;
    return used;
}

/* A string literal at pos (its quote): the value after escapes. */
static void lex_string(lexer *L) {
    const char *s = L->t.s;
    char q = s[L->pos];
    int line = line_at(L, L->pos);
    size_t i = L->pos + 1;
    char *v = fg_chat_alloc(L->p->arena, L->t.n - L->pos + 1); /* escapes never lengthen: \xHH is <= 2 bytes */
    if (!v) fg_chat_parse_fail(L->p, line, "out of memory");
    size_t n = 0;
    for (;;) {
        if (i >= L->t.n) fg_chat_parse_fail(L->p, line, "a string is never closed by %c", q);
        char c = s[i];
        if (c == q) break;
        if (c != '\\') {
            v[n++] = c, i++;
            continue;
        }
        if (++i >= L->t.n) fg_chat_parse_fail(L->p, line, "a string is never closed by %c", q);
        static const char from[] = "ntrbfv'\"\\", to[] = "\n\t\r\b\f\v'\"\\";
        const char *k = s[i] ? strchr(from, s[i]) : NULL;
        if (k) {
            v[n++] = to[k - from], i++;
        } else if (s[i] == 'x' || s[i] == 'u') {
            uint32_t cp;
            i += lex_hex_escape(L, i, &cp, line);
            n += fg_chat_utf8_put(cp, v + n);
        } else {
            fg_chat_parse_fail(L->p, line, "unsupported escape \\%c in a string", s[i]);
        }
    }
    v[n] = 0;
    push(L, TK_STR, v, n, line);
    L->pos = i + 1;
}

/* Digits, and a fraction unless right after a dot (x.0.1 is two items). From `from` (a sign, or pos). */
static void lex_number(lexer *L, size_t from, int line) {
    const char *s = L->t.s;
    while (L->pos < L->t.n && is_digit(s[L->pos])) L->pos++;
    if (L->pos >= L->t.n) fg_chat_parse_fail(L->p, line, "the template ends inside a tag");
    if (last_type(L) != TK_DOT && s[L->pos] == '.' && L->pos + 1 < L->t.n && is_digit(s[L->pos + 1])) {
        L->pos++;
        while (L->pos < L->t.n && is_digit(s[L->pos])) L->pos++;
        if (L->pos >= L->t.n) fg_chat_parse_fail(L->p, line, "the template ends inside a tag");
    }
    push(L, TK_NUM, s + from, L->pos - from, line);
}

/* - or + where an operand is expected: a signed number, or a unary operator. */
static int lex_sign(lexer *L) {
    int last = last_type(L);
    if (last == TK_NAME || last == TK_NUM || last == TK_STR || last == TK_RPAREN || last == TK_RBRACKET) return 0;
    int line = line_at(L, L->pos);
    size_t from = L->pos++;
    if (L->pos < L->t.n && is_digit(L->t.s[L->pos])) {
        lex_number(L, from, line);
    } else {
        if (L->pos >= L->t.n) fg_chat_parse_fail(L->p, line, "the template ends inside a tag");
        push(L, TK_UNARY, L->t.s + from, 1, line);
    }
    return 1;
}

/* The punctuation and operators, longest first where two share a start. */
static int lex_symbol(lexer *L) {
    static const struct { const char *s; int type; } rules[] = {
        {"{%", TK_OPEN_STMT}, {"%}", TK_CLOSE_STMT}, {"{{", TK_OPEN_EXPR}, {"}}", TK_CLOSE_EXPR},
        {"(", TK_LPAREN}, {")", TK_RPAREN}, {"{", TK_LBRACE}, {"}", TK_RBRACE}, {"[", TK_LBRACKET},
        {"]", TK_RBRACKET}, {",", TK_COMMA}, {".", TK_DOT}, {":", TK_COLON}, {"|", TK_PIPE},
        {"<=", TK_CMP}, {">=", TK_CMP}, {"==", TK_CMP}, {"!=", TK_CMP}, {"<", TK_CMP}, {">", TK_CMP},
        {"+", TK_ADD}, {"-", TK_ADD}, {"~", TK_ADD}, {"**", TK_POW}, {"*", TK_MUL}, {"//", TK_MUL},
        {"/", TK_MUL}, {"%", TK_MUL}, {"=", TK_EQUALS},
    };
    const char *s = L->t.s + L->pos;
    size_t left = L->t.n - L->pos;
    for (size_t r = 0; r < sizeof rules / sizeof *rules; r++) {
        size_t n = strlen(rules[r].s);
        if (rules[r].type == TK_CLOSE_EXPR && L->curly > 0) continue;
        if (n > left || memcmp(s, rules[r].s, n)) continue;
        int t = rules[r].type;
        if (t == TK_OPEN_EXPR) L->curly = 0;
        if (t == TK_LBRACE) L->curly++;
        if (t == TK_RBRACE) L->curly--;
        push(L, t, s, n, line_at(L, L->pos));
        L->pos += n;
        return 1;
    }
    return 0;
}

/* {%-, {{- or a comment at a {; 0 if none of those. */
static int lex_open(lexer *L) {
    const char *s = L->t.s + L->pos;
    size_t left = L->t.n - L->pos;
    if (left < 2 || s[0] != '{') return 0;
    if (s[1] == '#') {
        lex_comment(L);
        return 1;
    }
    if (left < 3 || s[2] != '-' || (s[1] != '%' && s[1] != '{')) return 0;
    strip_before(L);
    push(L, s[1] == '%' ? TK_OPEN_STMT : TK_OPEN_EXPR, s, 2, line_at(L, L->pos));
    if (s[1] == '{') L->curly = 0;
    L->pos += 3;
    return 1;
}

/* -%} or -}}: the tag closes and the white space after it goes. */
static int lex_close_strip(lexer *L) {
    const char *s = L->t.s + L->pos;
    if (L->t.n - L->pos < 3 || s[0] != '-' || s[2] != '}' || (s[1] != '%' && s[1] != '}')) return 0;
    push(L, s[1] == '%' ? TK_CLOSE_STMT : TK_CLOSE_EXPR, s + 1, 2, line_at(L, L->pos));
    L->pos += 3;
    skip_ws(L);
    return 1;
}

void fg_chat_lex(fg_chat_parser *p, const char *src, size_t len) {
    lexer L = {.p = p};
    if (len && src[len - 1] == '\n') len--; /* one trailing newline is not part of the output */
    L.t.s = fg_chat_alloc(p->arena, len + 1);
    L.t.ln = fg_chat_alloc(p->arena, (len + 1) * sizeof(int));
    if (!L.t.s || !L.t.ln) fg_chat_parse_fail(p, 1, "out of memory");
    int line = 1;
    for (size_t i = 0; i < len; i++) {
        L.t.s[i] = src[i], L.t.ln[i] = line;
        line += src[i] == '\n';
    }
    L.t.n = len;
    preprocess(p, &L.t);
    while (L.pos < L.t.n) {
        int last = last_type(&L);
        if ((last < 0 || last == TK_CLOSE_STMT || last == TK_CLOSE_EXPR || last == TK_COMMENT) && lex_text(&L))
            continue;
        if (lex_open(&L)) continue;
        skip_ws_in_tag(&L);
        char c = L.t.s[L.pos];
        if (lex_close_strip(&L)) continue;
        if (c == '-' || c == '+') {
            if (last == TK_TEXT || last < 0)
                fg_chat_parse_fail(p, line_at(&L, L.pos), "unexpected character '%c'", c);
            if (lex_sign(&L)) continue;
        }
        if (lex_symbol(&L)) continue;
        int ln = line_at(&L, L.pos);
        if (c == '\'' || c == '"') {
            lex_string(&L);
        } else if (is_digit(c)) {
            lex_number(&L, L.pos, ln);
        } else if (is_word(c)) {
            size_t from = L.pos;
            while (L.pos < L.t.n && is_word(L.t.s[L.pos])) L.pos++;
            if (L.pos >= L.t.n) fg_chat_parse_fail(p, ln, "the template ends inside a tag");
            push(&L, TK_NAME, L.t.s + from, L.pos - from, ln);
        } else {
            size_t cl;
            fg_chat_utf8_get(L.t.s + L.pos, L.t.n - L.pos, &cl);
            fg_chat_parse_fail(p, ln, "unexpected character '%.*s'", (int)cl, L.t.s + L.pos);
        }
    }
    push(&L, TK_END, "", 0, line_at(&L, L.t.n));
}

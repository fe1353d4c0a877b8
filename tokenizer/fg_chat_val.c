/* fg_chat_val.c - the values a chat template computes with, and the arena
 * they live in: undefined, none, booleans, 64-bit integers, doubles, UTF-8
 * strings, lists, dicts (insertion-ordered, like JSON objects as jansson
 * keeps them) and namespaces (the one value a template changes in place).
 * Values never change after they are made, so lists and slices share items.
 * Also how values turn into text: printed by {{ }} (none and undefined print
 * nothing, booleans true/false, lists and dicts as JSON), joined by ~ and +,
 * and written by tojson, each as @huggingface/jinja writes them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fg_chat_int.h"

#define MAX_NEST 256 /* lists in lists: printing, JSON and comparison recurse */

/* ---- arena ---- */

struct fg_chat_chunk {
    fg_chat_chunk *next;
    size_t cap, used;
    _Alignas(16) char data[];
};

void *fg_chat_alloc(fg_chat_arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (!n) n = 16;
    if (a->limit && (n > a->limit || a->used > a->limit - n)) return NULL;
    fg_chat_chunk *h = a->head;
    if (!h || h->cap - h->used < n) {
        size_t cap = n > (64u << 10) ? n : (64u << 10);
        h = malloc(sizeof *h + cap);
        if (!h) return NULL;
        h->cap = cap, h->used = 0;
        if (n > (16u << 10) && a->head) { /* a big block goes behind the current chunk, which keeps filling */
            h->next = a->head->next;
            a->head->next = h;
        } else {
            h->next = a->head;
            a->head = h;
        }
    }
    void *p = h->data + h->used;
    h->used += n;
    a->used += n;
    return p;
}

void fg_chat_arena_free(fg_chat_arena *a) {
    for (fg_chat_chunk *h = a->head, *nx; h; h = nx) {
        nx = h->next;
        free(h);
    }
    a->head = NULL;
    a->used = 0;
}

void *fg_chat_ralloc(fg_chat_ctx *c, size_t n) {
    void *p = fg_chat_alloc(&c->arena, n);
    if (!p) fg_chat_fail(c, "rendering needs more than %zu MiB of memory", c->arena.limit >> 20);
    return p;
}

/* ---- values ---- */

fg_chat_val fg_chat_undef = {.kind = V_UNDEF}, fg_chat_none = {.kind = V_NONE},
            fg_chat_true = {.kind = V_BOOL, .u.b = 1}, fg_chat_false = {.kind = V_BOOL, .u.b = 0};

static fg_chat_val *new_val(fg_chat_ctx *c, int kind) {
    fg_chat_val *v = fg_chat_ralloc(c, sizeof *v);
    memset(v, 0, sizeof *v);
    v->kind = kind;
    return v;
}

fg_chat_val *fg_chat_vint(fg_chat_ctx *c, int64_t i) {
    fg_chat_val *v = new_val(c, V_INT);
    v->u.i = i;
    return v;
}

fg_chat_val *fg_chat_vfloat(fg_chat_ctx *c, double f) {
    fg_chat_val *v = new_val(c, V_FLOAT);
    v->u.f = f;
    return v;
}

fg_chat_val *fg_chat_vbool(int b) { return b ? &fg_chat_true : &fg_chat_false; }

fg_chat_val *fg_chat_vstr_ref(fg_chat_ctx *c, const char *s, size_t n) {
    fg_chat_val *v = new_val(c, V_STR);
    v->u.s.p = s, v->u.s.n = n;
    return v;
}

fg_chat_val *fg_chat_vstr(fg_chat_ctx *c, const char *s, size_t n) {
    char *d = fg_chat_ralloc(c, n + 1);
    if (n) memcpy(d, s, n);
    d[n] = 0;
    return fg_chat_vstr_ref(c, d, n);
}

fg_chat_val *fg_chat_vlist(fg_chat_ctx *c, size_t n) {
    fg_chat_val *v = new_val(c, V_LIST);
    if (n > ((size_t)1 << 40)) fg_chat_fail(c, "a list of %zu items is too long", n);
    v->u.l.v = fg_chat_ralloc(c, (n ? n : 1) * sizeof *v->u.l.v);
    v->u.l.n = n;
    for (size_t i = 0; i < n; i++) v->u.l.v[i] = &fg_chat_undef;
    return v;
}

fg_chat_val *fg_chat_vdict(fg_chat_ctx *c, int kind) { return new_val(c, kind); }

fg_chat_val *fg_chat_dict_get(const fg_chat_val *d, const char *k, size_t kn) {
    for (size_t i = 0; i < d->u.d.n; i++)
        if (d->u.d.e[i].kn == kn && !memcmp(d->u.d.e[i].k, k, kn)) return d->u.d.e[i].v;
    return NULL;
}

void fg_chat_dict_set(fg_chat_ctx *c, fg_chat_val *d, const char *k, size_t kn, fg_chat_val *v) {
    for (size_t i = 0; i < d->u.d.n; i++)
        if (d->u.d.e[i].kn == kn && !memcmp(d->u.d.e[i].k, k, kn)) {
            d->u.d.e[i].v = v;
            return;
        }
    if (d->u.d.n == d->u.d.cap) {
        size_t cap = d->u.d.cap ? 2 * d->u.d.cap : 8;
        fg_chat_entry *e = fg_chat_ralloc(c, cap * sizeof *e);
        if (d->u.d.n) memcpy(e, d->u.d.e, d->u.d.n * sizeof *e);
        d->u.d.e = e, d->u.d.cap = cap;
    }
    d->u.d.e[d->u.d.n++] = (fg_chat_entry){k, kn, v};
}

fg_chat_val *fg_chat_from_json(fg_chat_ctx *c, const json_t *j, int depth) {
    if (depth > MAX_NEST) fg_chat_fail(c, "the variables are nested more than %d deep", MAX_NEST);
    switch (json_typeof(j)) {
    case JSON_STRING: return fg_chat_vstr_ref(c, json_string_value(j), json_string_length(j));
    case JSON_INTEGER: return fg_chat_vint(c, json_integer_value(j));
    case JSON_REAL: return fg_chat_vfloat(c, json_real_value(j));
    case JSON_TRUE: return &fg_chat_true;
    case JSON_FALSE: return &fg_chat_false;
    case JSON_NULL: return &fg_chat_none;
    case JSON_ARRAY: {
        fg_chat_val *l = fg_chat_vlist(c, json_array_size(j));
        for (size_t i = 0; i < l->u.l.n; i++) l->u.l.v[i] = fg_chat_from_json(c, json_array_get(j, i), depth + 1);
        return l;
    }
    case JSON_OBJECT: {
        fg_chat_val *d = fg_chat_vdict(c, V_DICT);
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)j, k, x) fg_chat_dict_set(c, d, k, strlen(k), fg_chat_from_json(c, x, depth + 1));
        return d;
    }
    }
    return &fg_chat_undef;
}

const char *fg_chat_kind_name(const fg_chat_val *v) {
    static const char *const names[] = {"undefined", "none", "boolean", "integer", "float", "string", "list", "dict",
                                        "namespace"};
    return names[v->kind];
}

int fg_chat_truthy(const fg_chat_val *v) {
    switch (v->kind) {
    case V_BOOL: return v->u.b;
    case V_INT: return v->u.i != 0;
    case V_FLOAT: return v->u.f != 0 && !isnan(v->u.f);
    case V_STR: return v->u.s.n > 0;
    case V_LIST: return v->u.l.n > 0;
    case V_DICT: return v->u.d.n > 0;
    case V_NS: return 1;
    default: return 0;
    }
}

static int numeric(const fg_chat_val *v) { return v->kind == V_INT || v->kind == V_FLOAT || v->kind == V_BOOL; }
static double num(const fg_chat_val *v) {
    return v->kind == V_FLOAT ? v->u.f : v->kind == V_INT ? (double)v->u.i : v->u.b;
}

int fg_chat_equal(fg_chat_ctx *c, const fg_chat_val *a, const fg_chat_val *b, int depth) {
    if (depth > MAX_NEST) fg_chat_fail(c, "values nested more than %d deep", MAX_NEST);
    if (a->kind <= V_NONE || b->kind <= V_NONE) return a->kind <= V_NONE && b->kind <= V_NONE;
    if (numeric(a) && numeric(b)) {
        if (a->kind != V_FLOAT && b->kind != V_FLOAT)
            return (a->kind == V_INT ? a->u.i : a->u.b) == (b->kind == V_INT ? b->u.i : b->u.b);
        return num(a) == num(b);
    }
    if (a->kind != b->kind) return 0;
    switch (a->kind) {
    case V_STR: return a->u.s.n == b->u.s.n && !memcmp(a->u.s.p, b->u.s.p, a->u.s.n);
    case V_LIST:
        if (a->u.l.n != b->u.l.n) return 0;
        for (size_t i = 0; i < a->u.l.n; i++)
            if (!fg_chat_equal(c, a->u.l.v[i], b->u.l.v[i], depth + 1)) return 0;
        return 1;
    case V_DICT:
        if (a->u.d.n != b->u.d.n) return 0;
        for (size_t i = 0; i < a->u.d.n; i++) {
            const fg_chat_val *y = fg_chat_dict_get(b, a->u.d.e[i].k, a->u.d.e[i].kn);
            if (!y || !fg_chat_equal(c, a->u.d.e[i].v, y, depth + 1)) return 0;
        }
        return 1;
    default: return a == b;
    }
}

/* ---- text ---- */

void fg_chat_buf_add(fg_chat_buf *b, const char *s, size_t n) {
    if (b->cap - b->n < n) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap - b->n < n) {
            if (cap > ((size_t)1 << 40)) fg_chat_fail(b->c, "a string grows too long");
            cap *= 2;
        }
        char *p = fg_chat_ralloc(b->c, cap);
        if (b->n) memcpy(p, b->p, b->n);
        b->p = p, b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
}

fg_chat_val *fg_chat_buf_val(fg_chat_buf *b) {
    fg_chat_buf_add(b, "", 1); /* the NUL: strings are C strings too */
    return fg_chat_vstr_ref(b->c, b->p, b->n - 1);
}

static void add_str(fg_chat_buf *b, const char *s) { fg_chat_buf_add(b, s, strlen(s)); }

void fg_chat_js_number(double f, char out[40]) {
    if (isnan(f)) return (void)strcpy(out, "NaN");
    if (isinf(f)) return (void)strcpy(out, f > 0 ? "Infinity" : "-Infinity");
    if (f == 0) return (void)strcpy(out, "0");
    char e[40], digits[24];
    int prec = 1;
    for (; prec <= 17; prec++) { /* the shortest digits that read back as f */
        snprintf(e, sizeof e, "%.*e", prec - 1, f);
        if (strtod(e, NULL) == f) break;
    }
    const char *s = e + (f < 0);
    int k = 0;
    for (; *s && *s != 'e'; s++)
        if (*s != '.') digits[k++] = *s;
    while (k > 1 && digits[k - 1] == '0') k--;
    digits[k] = 0;
    int n = atoi(s + 1) + 1; /* f = 0.digits x 10^n */
    char o[64]; /* at most 25 bytes are written (sign, 21 digits or 17 and a point or an exponent) */
    if (k <= n && n <= 21)
        snprintf(o, sizeof o, "%s%.*s", digits, n - k, "000000000000000000000");
    else if (0 < n && n <= 21)
        snprintf(o, sizeof o, "%.*s.%s", n, digits, digits + n);
    else if (-6 < n && n <= 0)
        snprintf(o, sizeof o, "0.%.*s%s", -n, "000000", digits);
    else
        snprintf(o, sizeof o, "%c%s%s%s%+d", digits[0], k > 1 ? "." : "", digits + 1, "e", n - 1);
    snprintf(out, 40, "%s%.37s", f < 0 ? "-" : "", o);
}

/* How {{ }} prints a float: an integral one with ".0" (1.0, -0.0), others as JavaScript does. */
static void float_text(double f, char out[40]) {
    if (f == 0 && signbit(f)) strcpy(out, "-0.0");
    else if (isfinite(f) && f == floor(f) && fabs(f) < 1e21) snprintf(out, 40, "%.1f", f);
    else fg_chat_js_number(f, out);
}

void fg_chat_concat_part(fg_chat_buf *b, const fg_chat_val *v) {
    char t[40];
    switch (v->kind) {
    case V_STR: fg_chat_buf_add(b, v->u.s.p, v->u.s.n); return;
    case V_INT: snprintf(t, sizeof t, "%lld", (long long)v->u.i); break;
    case V_FLOAT: fg_chat_js_number(v->u.f, t); break;
    case V_BOOL: strcpy(t, v->u.b ? "true" : "false"); break;
    default: fg_chat_fail(b->c, "cannot join a %s to a string", fg_chat_kind_name(v));
    }
    add_str(b, t);
}

void fg_chat_print(fg_chat_buf *b, const fg_chat_val *v) {
    char t[40];
    fg_chat_json_opts o = {-1, 0, 0, 0, ", ", ": "};
    switch (v->kind) {
    case V_UNDEF:
    case V_NONE: return;
    case V_FLOAT: float_text(v->u.f, t), add_str(b, t); return;
    case V_LIST:
    case V_DICT:
    case V_NS: fg_chat_json(b, v, &o, 0); return;
    default: fg_chat_concat_part(b, v);
    }
}

/* A JSON string: JSON.stringify's escapes (and with ensure_ascii, \uXXXX for everything from U+007F on). */
static void json_str(fg_chat_buf *b, const char *s, size_t n, int ascii) {
    fg_chat_buf_add(b, "\"", 1);
    size_t run = 0; /* bytes copied as they are, pending */
    for (size_t i = 0; i < n;) {
        unsigned char ch = (unsigned char)s[i];
        size_t len = 1;
        uint32_t cp = ch < 0x80 ? ch : fg_chat_utf8_get(s + i, n - i, &len);
        char esc[16] = "";
        if (cp == '"' || cp == '\\') snprintf(esc, sizeof esc, "\\%c", (char)cp);
        else if (cp == '\n') strcpy(esc, "\\n");
        else if (cp == '\r') strcpy(esc, "\\r");
        else if (cp == '\t') strcpy(esc, "\\t");
        else if (cp == '\b') strcpy(esc, "\\b");
        else if (cp == '\f') strcpy(esc, "\\f");
        else if (cp < 0x20 || (ascii && cp >= 0x7F && cp < 0x10000)) snprintf(esc, sizeof esc, "\\u%04x", cp);
        else if (ascii && cp >= 0x10000)
            snprintf(esc, sizeof esc, "\\u%04x\\u%04x", 0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + ((cp - 0x10000) & 0x3FF));
        if (*esc) {
            fg_chat_buf_add(b, s + i - run, run);
            run = 0;
            add_str(b, esc);
        } else {
            run += len;
        }
        i += len;
    }
    fg_chat_buf_add(b, s + n - run, run);
    fg_chat_buf_add(b, "\"", 1);
}

static void newline_indent(fg_chat_buf *b, int indent, int depth) {
    fg_chat_buf_add(b, "\n", 1);
    for (int i = 0; i < indent * depth; i++) fg_chat_buf_add(b, " ", 1);
}

static int key_cmp(const void *x, const void *y) {
    const fg_chat_entry *a = *(const fg_chat_entry *const *)x, *b = *(const fg_chat_entry *const *)y;
    int r = memcmp(a->k, b->k, a->kn < b->kn ? a->kn : b->kn);
    return r ? r : (a->kn > b->kn) - (a->kn < b->kn);
}

/* A list's or dict's items, [..] or {..}, one a line when indenting. */
static void json_container(fg_chat_buf *b, const fg_chat_val *v, const fg_chat_json_opts *o, int depth) {
    int dict = v->kind != V_LIST;
    size_t n = dict ? v->u.d.n : v->u.l.n;
    const fg_chat_entry **ents = NULL;
    if (dict && n) {
        ents = fg_chat_ralloc(b->c, n * sizeof *ents);
        for (size_t i = 0; i < n; i++) ents[i] = &v->u.d.e[i];
        if (o->sort_keys) qsort(ents, n, sizeof *ents, key_cmp);
    }
    fg_chat_buf_add(b, dict ? "{" : "[", 1);
    for (size_t i = 0; i < n; i++) {
        if (i) add_str(b, o->item_sep);
        if (o->indent > 0) newline_indent(b, o->indent, depth + 1);
        if (dict) {
            json_str(b, ents[i]->k, ents[i]->kn, o->ensure_ascii);
            add_str(b, o->key_sep);
        }
        fg_chat_json(b, dict ? ents[i]->v : v->u.l.v[i], o, depth + 1);
    }
    if (o->indent > 0 && n) newline_indent(b, o->indent, depth);
    fg_chat_buf_add(b, dict ? "}" : "]", 1);
}

void fg_chat_json(fg_chat_buf *b, const fg_chat_val *v, const fg_chat_json_opts *o, int depth) {
    char t[40];
    if (depth > MAX_NEST) fg_chat_fail(b->c, "values nested more than %d deep", MAX_NEST);
    switch (v->kind) {
    case V_UNDEF: add_str(b, o->undef_null ? "null" : "undefined"); return;
    case V_NONE: add_str(b, "null"); return;
    case V_FLOAT:
        if (isfinite(v->u.f)) fg_chat_js_number(v->u.f, t);
        else strcpy(t, "null");
        add_str(b, t);
        return;
    case V_STR: json_str(b, v->u.s.p, v->u.s.n, o->ensure_ascii); return;
    case V_LIST:
    case V_DICT:
    case V_NS: json_container(b, v, o, depth); return;
    default: fg_chat_concat_part(b, v);
    }
}

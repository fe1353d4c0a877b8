/* fg_chat_str.c - the string work of chat templates, on UTF-8 by code
 * points: strip/lstrip/rstrip and the trim filter (without an argument
 * JavaScript's white space, as @huggingface/jinja trims; with one, Python's
 * str.strip(chars)), split (Python's str.split, with and without a
 * separator, and maxsplit), replace (Python's str.replace, count included;
 * an empty old string inserts between code points), upper/lower (one-to-one
 * Unicode case mappings from the C.UTF-8 locale, ASCII where that locale is
 * missing), slices, and code point counts. */
#define _GNU_SOURCE
#include <locale.h>
#include <pthread.h>
#include <string.h>
#include <wctype.h>

#include "fg_chat_int.h"

size_t fg_chat_cp_count(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

/* Whether the code point at s is one of chars (a UTF-8 string); its length in *len. */
static int in_set(const char *s, size_t n, const fg_chat_val *chars, size_t *len) {
    uint32_t cp = fg_chat_utf8_get(s, n, len);
    for (size_t i = 0, l; i < chars->u.s.n; i += l)
        if (fg_chat_utf8_get(chars->u.s.p + i, chars->u.s.n - i, &l) == cp) return 1;
    return 0;
}

fg_chat_val *fg_chat_str_strip(fg_chat_ctx *c, const fg_chat_val *x, const fg_chat_val *chars, int left, int right) {
    const char *s = x->u.s.p;
    size_t b = 0, e = x->u.s.n, len;
    int set = chars && chars->kind == V_STR;
    while (left && b < e) {
        size_t w = set ? (in_set(s + b, e - b, chars, &len) ? len : 0) : fg_chat_ws_at(s + b, e - b);
        if (!w) break;
        b += w;
    }
    if (right && !set) e -= fg_chat_ws_before(s + b, e - b);
    while (right && set && e > b) {
        size_t st = e - 1;
        while (st > b && ((unsigned char)s[st] & 0xC0) == 0x80) st--;
        if (!in_set(s + st, e - st, chars, &len)) break;
        e = st;
    }
    return fg_chat_vstr_ref(c, s + b, e - b);
}

static void push_part(fg_chat_ctx *c, fg_chat_val **list, size_t *cap, const char *s, size_t n) {
    fg_chat_val *l = *list;
    if (l->u.l.n == *cap) {
        *cap *= 2;
        fg_chat_val **v = fg_chat_ralloc(c, *cap * sizeof *v);
        memcpy(v, l->u.l.v, l->u.l.n * sizeof *v);
        l->u.l.v = v;
    }
    l->u.l.v[l->u.l.n++] = fg_chat_vstr_ref(c, s, n);
}

fg_chat_val *fg_chat_str_split(fg_chat_ctx *c, const fg_chat_val *x, const fg_chat_val *sep, int64_t maxsplit) {
    const char *s = x->u.s.p;
    size_t n = x->u.s.n, cap = 8, pos = 0;
    fg_chat_val *l = fg_chat_vlist(c, cap);
    l->u.l.n = 0;
    if (sep->kind == V_STR) {
        if (!sep->u.s.n) fg_chat_fail(c, "split: empty separator");
        for (int64_t k = 0; maxsplit < 0 || k < maxsplit; k++) {
            const char *hit = n - pos >= sep->u.s.n ? memmem(s + pos, n - pos, sep->u.s.p, sep->u.s.n) : NULL;
            if (!hit) break;
            push_part(c, &l, &cap, s + pos, (size_t)(hit - (s + pos)));
            pos = (size_t)(hit - s) + sep->u.s.n;
        }
        push_part(c, &l, &cap, s + pos, n - pos);
        return l;
    }
    /* no separator: runs of white space split, and none at either end makes an empty item */
    for (;;) {
        size_t w;
        while (pos < n && (w = fg_chat_ws_at(s + pos, n - pos))) pos += w;
        if (pos >= n) break;
        size_t end = pos;
        while (end < n && !fg_chat_ws_at(s + end, n - end)) end++;
        if (maxsplit >= 0 && (int64_t)l->u.l.n >= maxsplit) end = n;
        push_part(c, &l, &cap, s + pos, end - pos);
        pos = end;
    }
    return l;
}

fg_chat_val *fg_chat_str_replace(fg_chat_ctx *c, const fg_chat_val *x, const fg_chat_val *from, const fg_chat_val *to,
                                 int64_t count) {
    const char *s = x->u.s.p;
    size_t n = x->u.s.n, pos = 0, len;
    fg_chat_buf b = {c, NULL, 0, 0};
    for (int64_t k = 0; count < 0 || k < count; k++) {
        if (!from->u.s.n) { /* before every code point, and at the end */
            fg_chat_buf_add(&b, to->u.s.p, to->u.s.n);
            if (pos >= n) {
                pos = n + 1;
                break;
            }
            fg_chat_utf8_get(s + pos, n - pos, &len);
            fg_chat_buf_add(&b, s + pos, len);
            pos += len;
            continue;
        }
        const char *hit = n - pos >= from->u.s.n ? memmem(s + pos, n - pos, from->u.s.p, from->u.s.n) : NULL;
        if (!hit) break;
        fg_chat_buf_add(&b, s + pos, (size_t)(hit - (s + pos)));
        fg_chat_buf_add(&b, to->u.s.p, to->u.s.n);
        pos = (size_t)(hit - s) + from->u.s.n;
    }
    if (pos < n) fg_chat_buf_add(&b, s + pos, n - pos);
    return fg_chat_buf_val(&b);
}

static locale_t utf8_locale;
static pthread_once_t utf8_once = PTHREAD_ONCE_INIT;
static void open_locale(void) { utf8_locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0); }

fg_chat_val *fg_chat_str_case(fg_chat_ctx *c, const fg_chat_val *x, int upper) {
    pthread_once(&utf8_once, open_locale);
    fg_chat_buf b = {c, NULL, 0, 0};
    char enc[4];
    for (size_t i = 0, len; i < x->u.s.n; i += len) {
        uint32_t cp = fg_chat_utf8_get(x->u.s.p + i, x->u.s.n - i, &len), m = cp;
        if (cp < 0x80 || !utf8_locale) {
            if (upper && cp >= 'a' && cp <= 'z') m = cp - 32;
            if (!upper && cp >= 'A' && cp <= 'Z') m = cp + 32;
        } else {
            m = (uint32_t)(upper ? towupper_l((wint_t)cp, utf8_locale) : towlower_l((wint_t)cp, utf8_locale));
        }
        fg_chat_buf_add(&b, enc, fg_chat_utf8_put(m, enc));
    }
    return fg_chat_buf_val(&b);
}

/* One of Python's slice indices over n items made concrete (PySlice_AdjustIndices): V, or DEF when none. */
static int64_t slice_index(int64_t n, const fg_chat_val *v, int64_t step, int64_t def) {
    if (v->kind != V_INT) return def;
    int64_t i = v->u.i;
    if (i < 0) {
        i += n; /* no overflow: i < 0 <= n */
        if (i < 0) return step < 0 ? -1 : 0;
    }
    if (i >= n) return step < 0 ? n - 1 : n;
    return i;
}

fg_chat_val *fg_chat_slice(fg_chat_ctx *c, const fg_chat_val *x, const fg_chat_val *start, const fg_chat_val *stop,
                           const fg_chat_val *step) {
    const fg_chat_val *p[3] = {start, stop, step};
    for (int i = 0; i < 3; i++)
        if (p[i]->kind != V_INT && p[i]->kind != V_NONE && p[i]->kind != V_UNDEF)
            fg_chat_fail(c, "a slice takes integers, not a %s", fg_chat_kind_name(p[i]));
    if (x->kind != V_LIST && x->kind != V_STR) fg_chat_fail(c, "cannot slice a %s", fg_chat_kind_name(x));
    int64_t st = step->kind == V_INT ? step->u.i : 1, a, b;
    if (st == 0) fg_chat_fail(c, "a slice step cannot be zero");
    size_t *offs = NULL; /* a string's code point offsets, and its length at the end */
    int64_t n;
    if (x->kind == V_LIST) {
        n = (int64_t)x->u.l.n;
    } else {
        n = (int64_t)fg_chat_cp_count(x->u.s.p, x->u.s.n);
        offs = fg_chat_ralloc(c, ((size_t)n + 1) * sizeof *offs);
        for (size_t i = 0, k = 0, len; i <= x->u.s.n; i += len, k++) {
            offs[k] = i;
            if (i == x->u.s.n) break;
            fg_chat_utf8_get(x->u.s.p + i, x->u.s.n - i, &len);
        }
    }
    a = slice_index(n, start, st, st > 0 ? 0 : n - 1);
    b = slice_index(n, stop, st, st > 0 ? n : -1);
    int64_t count = st > 0 ? (b > a ? (b - a + st - 1) / st : 0) : (a > b ? (a - b - st - 1) / -st : 0);
    if (x->kind == V_LIST) {
        fg_chat_val *l = fg_chat_vlist(c, (size_t)count);
        for (int64_t i = 0; i < count; i++) l->u.l.v[i] = x->u.l.v[a + i * st];
        return l;
    }
    fg_chat_buf buf = {c, NULL, 0, 0};
    for (int64_t i = 0; i < count; i++) {
        int64_t k = a + i * st;
        fg_chat_buf_add(&buf, x->u.s.p + offs[k], offs[k + 1] - offs[k]);
    }
    return fg_chat_buf_val(&buf);
}

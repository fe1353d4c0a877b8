/* fg_chat_func.c - the library a chat template may call: the filters,
 * tests, methods and functions of this subset (fg_chat.h lists them), each
 * with the signature the parser checks calls against, and what it does, as
 * @huggingface/jinja does it (tojson as json.dumps writes, with indent,
 * ensure_ascii, sort_keys and separators). A wrong type at render time is
 * FG_EINPUT naming the filter or method and the type. */
#include <string.h>

#include "fg_chat_int.h"

#define MAX_RANGE 10000000

static const fg_chat_sig filters[F_COUNT_] = {
    [F_TRIM] = {"trim", 0, 0, NULL},         [F_LENGTH] = {"length", 0, 0, NULL},
    [F_TOJSON] = {"tojson", 0, 0, "indent,ensure_ascii,sort_keys,separators"},
    [F_STRING] = {"string", 0, 0, NULL},     [F_DEFAULT] = {"default", 0, 2, "boolean"},
    [F_FIRST] = {"first", 0, 0, NULL},       [F_LAST] = {"last", 0, 0, NULL},
    [F_UPPER] = {"upper", 0, 0, NULL},       [F_LOWER] = {"lower", 0, 0, NULL},
    [F_JOIN] = {"join", 0, 1, NULL},         [F_ITEMS] = {"items", 0, 0, NULL},
    [F_LIST] = {"list", 0, 0, NULL},         [F_REVERSE] = {"reverse", 0, 0, NULL},
    [F_SAFE] = {"safe", 0, 0, NULL},
};
static const fg_chat_sig tests[T_COUNT_] = {
    [T_DEFINED] = {"defined", 0, 0, NULL}, [T_UNDEFINED] = {"undefined", 0, 0, NULL}, [T_NONE] = {"none", 0, 0, NULL},
    [T_STRING] = {"string", 0, 0, NULL},   [T_NUMBER] = {"number", 0, 0, NULL},       [T_INTEGER] = {"integer", 0, 0, NULL},
    [T_BOOLEAN] = {"boolean", 0, 0, NULL}, [T_TRUE] = {"true", 0, 0, NULL},           [T_FALSE] = {"false", 0, 0, NULL},
    [T_MAPPING] = {"mapping", 0, 0, NULL}, [T_ITERABLE] = {"iterable", 0, 0, NULL},   [T_SEQUENCE] = {"sequence", 0, 0, NULL},
    [T_ODD] = {"odd", 0, 0, NULL},         [T_EVEN] = {"even", 0, 0, NULL},
};
static const fg_chat_sig methods[M_COUNT_] = {
    [M_STARTSWITH] = {"startswith", 1, 1, NULL}, [M_ENDSWITH] = {"endswith", 1, 1, NULL},
    [M_STRIP] = {"strip", 0, 1, NULL},           [M_LSTRIP] = {"lstrip", 0, 1, NULL},
    [M_RSTRIP] = {"rstrip", 0, 1, NULL},         [M_SPLIT] = {"split", 0, 2, NULL},
    [M_REPLACE] = {"replace", 2, 3, "count"},    [M_UPPER] = {"upper", 0, 0, NULL},
    [M_LOWER] = {"lower", 0, 0, NULL},           [M_ITEMS] = {"items", 0, 0, NULL},
    [M_KEYS] = {"keys", 0, 0, NULL},             [M_VALUES] = {"values", 0, 0, NULL},
    [M_GET] = {"get", 1, 2, NULL},
};
static const fg_chat_sig funcs[G_COUNT_] = {
    [G_RAISE] = {"raise_exception", 1, 1, NULL},
    [G_NAMESPACE] = {"namespace", 0, 1, "*"},
    [G_RANGE] = {"range", 1, 3, NULL},
};

int fg_chat_lookup(int kind, const char *s, size_t n, const fg_chat_sig **sig) {
    static const fg_chat_sig *const tables[] = {filters, tests, methods, funcs};
    static const int counts[] = {F_COUNT_, T_COUNT_, M_COUNT_, G_COUNT_};
    for (int i = 0; i < counts[kind]; i++)
        if (strlen(tables[kind][i].name) == n && !memcmp(tables[kind][i].name, s, n)) {
            *sig = &tables[kind][i];
            return i;
        }
    return -1;
}

/* The keyword argument NAME of a call, or NULL. */
static fg_chat_val *kwarg(const fg_chat_args *a, const char *name) {
    for (size_t i = 0; i < a->nkw; i++)
        if (a->kwn[i]->n == strlen(name) && !memcmp(a->kwn[i]->s, name, a->kwn[i]->n)) return a->kw[i];
    return NULL;
}

static fg_chat_val *want(fg_chat_ctx *c, fg_chat_val *v, int kind, const char *what) {
    if (v->kind != kind)
        fg_chat_fail(c, "%s: expected a %s, got a %s", what, fg_chat_kind_name(&(fg_chat_val){.kind = kind}),
                     fg_chat_kind_name(v));
    return v;
}

/* ---- filters ---- */

static fg_chat_val *f_tojson(fg_chat_ctx *c, fg_chat_val *x, const fg_chat_args *a) {
    fg_chat_json_opts o = {-1, 0, 0, 1, ", ", ": "};
    fg_chat_val *v;
    if ((v = kwarg(a, "indent")) && v->kind != V_NONE) o.indent = (int)want(c, v, V_INT, "tojson indent")->u.i;
    if (o.indent > 100) o.indent = 100;
    if ((v = kwarg(a, "ensure_ascii"))) o.ensure_ascii = want(c, v, V_BOOL, "tojson ensure_ascii")->u.b;
    if ((v = kwarg(a, "sort_keys"))) o.sort_keys = want(c, v, V_BOOL, "tojson sort_keys")->u.b;
    if (o.indent > 0) o.item_sep = ",";
    if ((v = kwarg(a, "separators")) && v->kind != V_NONE) {
        if (v->kind != V_LIST || v->u.l.n != 2 || v->u.l.v[0]->kind != V_STR || v->u.l.v[1]->kind != V_STR)
            fg_chat_fail(c, "tojson separators: expected two strings");
        /* copies: the separators are C strings, a slice of a string is not */
        o.item_sep = fg_chat_vstr(c, v->u.l.v[0]->u.s.p, v->u.l.v[0]->u.s.n)->u.s.p;
        o.key_sep = fg_chat_vstr(c, v->u.l.v[1]->u.s.p, v->u.l.v[1]->u.s.n)->u.s.p;
    }
    fg_chat_buf b = {c, NULL, 0, 0};
    fg_chat_json(&b, x, &o, 0);
    return fg_chat_buf_val(&b);
}

static fg_chat_val *f_join(fg_chat_ctx *c, fg_chat_val *x, const fg_chat_args *a) {
    fg_chat_val *sep = a->npos ? want(c, a->pos[0], V_STR, "join separator") : NULL;
    fg_chat_buf b = {c, NULL, 0, 0};
    if (x->kind == V_STR) { /* its characters */
        for (size_t i = 0, len; i < x->u.s.n; i += len) {
            fg_chat_utf8_get(x->u.s.p + i, x->u.s.n - i, &len);
            if (i && sep) fg_chat_buf_add(&b, sep->u.s.p, sep->u.s.n);
            fg_chat_buf_add(&b, x->u.s.p + i, len);
        }
        return fg_chat_buf_val(&b);
    }
    want(c, x, V_LIST, "filter 'join'");
    for (size_t i = 0; i < x->u.l.n; i++) {
        if (i && sep) fg_chat_buf_add(&b, sep->u.s.p, sep->u.s.n);
        if (x->u.l.v[i]->kind > V_NONE) fg_chat_concat_part(&b, x->u.l.v[i]); /* none and undefined: "" */
    }
    return fg_chat_buf_val(&b);
}

static fg_chat_val *f_items(fg_chat_ctx *c, const fg_chat_val *x, int what) {
    fg_chat_val *l = fg_chat_vlist(c, x->u.d.n);
    for (size_t i = 0; i < x->u.d.n; i++) {
        fg_chat_val *k = fg_chat_vstr_ref(c, x->u.d.e[i].k, x->u.d.e[i].kn), *v = x->u.d.e[i].v;
        if (what == M_ITEMS) {
            fg_chat_val *p = fg_chat_vlist(c, 2);
            p->u.l.v[0] = k, p->u.l.v[1] = v;
            l->u.l.v[i] = p;
        } else {
            l->u.l.v[i] = what == M_KEYS ? k : v;
        }
    }
    return l;
}

static fg_chat_val *f_default(fg_chat_ctx *c, fg_chat_val *x, const fg_chat_args *a) {
    fg_chat_val *dflt = a->npos ? a->pos[0] : fg_chat_vstr_ref(c, "", 0);
    fg_chat_val *b = a->npos > 1 ? a->pos[1] : kwarg(a, "boolean");
    int boolean = b ? want(c, b, V_BOOL, "default's boolean")->u.b : 0;
    return x->kind == V_UNDEF || (boolean && !fg_chat_truthy(x)) ? dflt : x;
}

fg_chat_val *fg_chat_filter(fg_chat_ctx *c, fg_chat_scope *s, const fg_chat_node *e, fg_chat_val *x) {
    fg_chat_args a;
    fg_chat_eval_args(c, s, e, &a);
    c->line = e->line;
    const char *name = filters[e->op].name;
    int k = x->kind;
    switch (e->op) {
    case F_SAFE: return x;
    case F_TOJSON: return f_tojson(c, x, &a);
    case F_DEFAULT: return f_default(c, x, &a);
    case F_JOIN: return f_join(c, x, &a);
    case F_TRIM:
        if (k == V_STR) return fg_chat_str_strip(c, x, NULL, 1, 1);
        break;
    case F_UPPER:
    case F_LOWER:
        if (k == V_STR) return fg_chat_str_case(c, x, e->op == F_UPPER);
        break;
    case F_LENGTH:
        if (k == V_STR) return fg_chat_vint(c, (int64_t)fg_chat_cp_count(x->u.s.p, x->u.s.n));
        if (k == V_LIST) return fg_chat_vint(c, (int64_t)x->u.l.n);
        if (k == V_DICT) return fg_chat_vint(c, (int64_t)x->u.d.n);
        break;
    case F_STRING:
        if (k != V_UNDEF && k != V_NONE) {
            fg_chat_buf b = {c, NULL, 0, 0};
            fg_chat_print(&b, x);
            return fg_chat_buf_val(&b);
        }
        break;
    case F_FIRST:
    case F_LAST:
        if (k == V_LIST) return !x->u.l.n ? &fg_chat_undef : x->u.l.v[e->op == F_FIRST ? 0 : x->u.l.n - 1];
        break;
    case F_ITEMS:
        if (k == V_DICT) return f_items(c, x, M_ITEMS);
        break;
    case F_LIST:
        if (k == V_LIST) return x;
        break;
    case F_REVERSE:
        if (k == V_LIST) {
            fg_chat_val *l = fg_chat_vlist(c, x->u.l.n);
            for (size_t i = 0; i < x->u.l.n; i++) l->u.l.v[i] = x->u.l.v[x->u.l.n - 1 - i];
            return l;
        }
        break;
    }
    fg_chat_fail(c, "filter '%s' cannot take a %s", name, fg_chat_kind_name(x));
}

/* ---- tests ---- */

int fg_chat_test(fg_chat_ctx *c, int test, const fg_chat_val *x) {
    int k = x->kind;
    switch (test) {
    case T_DEFINED: return k != V_UNDEF;
    case T_UNDEFINED: return k == V_UNDEF;
    case T_NONE: return k == V_NONE;
    case T_STRING: return k == V_STR;
    case T_NUMBER: return k == V_INT || k == V_FLOAT;
    case T_INTEGER: return k == V_INT;
    case T_BOOLEAN: return k == V_BOOL;
    case T_TRUE: return k == V_BOOL && x->u.b;
    case T_FALSE: return k == V_BOOL && !x->u.b;
    case T_MAPPING: return k == V_DICT;
    case T_ITERABLE: return k == V_LIST || k == V_STR;
    case T_SEQUENCE: return k == V_LIST || k == V_STR || k == V_DICT;
    default:
        if (k != V_INT) fg_chat_fail(c, "test '%s' cannot take a %s", tests[test].name, fg_chat_kind_name(x));
        return (x->u.i % 2 != 0) == (test == T_ODD);
    }
}

/* ---- methods ---- */

/* startswith/endswith: a string or a list (tuple) of strings. */
static int affix(fg_chat_ctx *c, const fg_chat_val *x, const fg_chat_val *p, int end) {
    if (p->kind == V_LIST) {
        for (size_t i = 0; i < p->u.l.n; i++)
            if (affix(c, x, want(c, p->u.l.v[i], V_STR, end ? "endswith" : "startswith"), end)) return 1;
        return 0;
    }
    want(c, (fg_chat_val *)p, V_STR, end ? "endswith" : "startswith");
    if (p->u.s.n > x->u.s.n) return 0;
    return !memcmp(x->u.s.p + (end ? x->u.s.n - p->u.s.n : 0), p->u.s.p, p->u.s.n);
}

static int64_t opt_int(fg_chat_ctx *c, const fg_chat_val *v, const char *what) {
    if (!v || v->kind == V_NONE) return -1;
    return want(c, (fg_chat_val *)v, V_INT, what)->u.i;
}

fg_chat_val *fg_chat_method(fg_chat_ctx *c, fg_chat_val *x, int m, const fg_chat_args *a) {
    const char *name = methods[m].name;
    int dict = m >= M_ITEMS;
    if (x->kind != (dict ? V_DICT : V_STR))
        fg_chat_fail(c, "method '%s' is not one of a %s's", name, fg_chat_kind_name(x));
    fg_chat_val *p0 = a->npos ? a->pos[0] : &fg_chat_none;
    switch (m) {
    case M_STARTSWITH:
    case M_ENDSWITH: return fg_chat_vbool(affix(c, x, p0, m == M_ENDSWITH));
    case M_STRIP:
    case M_LSTRIP:
    case M_RSTRIP:
        if (p0->kind != V_NONE) want(c, p0, V_STR, name);
        return fg_chat_str_strip(c, x, p0, m != M_RSTRIP, m != M_LSTRIP);
    case M_SPLIT:
        if (p0->kind != V_NONE) want(c, p0, V_STR, "split separator");
        return fg_chat_str_split(c, x, p0, opt_int(c, a->npos > 1 ? a->pos[1] : NULL, "split maxsplit"));
    case M_REPLACE:
        want(c, a->pos[0], V_STR, "replace"), want(c, a->pos[1], V_STR, "replace");
        return fg_chat_str_replace(c, x, a->pos[0], a->pos[1],
                                   opt_int(c, a->npos > 2 ? a->pos[2] : kwarg(a, "count"), "replace count"));
    case M_UPPER:
    case M_LOWER: return fg_chat_str_case(c, x, m == M_UPPER);
    case M_GET: {
        fg_chat_val *v = fg_chat_dict_get(x, want(c, p0, V_STR, "get")->u.s.p, p0->u.s.n);
        return v ? v : a->npos > 1 ? a->pos[1] : &fg_chat_none;
    }
    default: return f_items(c, x, m);
    }
}

/* ---- functions ---- */

static fg_chat_val *g_namespace(fg_chat_ctx *c, const fg_chat_args *a) {
    fg_chat_val *ns = fg_chat_vdict(c, V_NS);
    if (a->npos) {
        fg_chat_val *src = a->pos[0];
        if (src->kind == V_DICT) {
            for (size_t i = 0; i < src->u.d.n; i++) fg_chat_dict_set(c, ns, src->u.d.e[i].k, src->u.d.e[i].kn, src->u.d.e[i].v);
        } else if (src->kind == V_LIST) {
            for (size_t i = 0; i < src->u.l.n; i++) {
                fg_chat_val *p = src->u.l.v[i];
                if (p->kind != V_LIST || p->u.l.n != 2 || p->u.l.v[0]->kind != V_STR)
                    fg_chat_fail(c, "namespace: expected a dict or a list of [key, value] pairs");
                fg_chat_dict_set(c, ns, p->u.l.v[0]->u.s.p, p->u.l.v[0]->u.s.n, p->u.l.v[1]);
            }
        } else {
            fg_chat_fail(c, "namespace: expected a dict or a list of [key, value] pairs, got a %s",
                         fg_chat_kind_name(src));
        }
    }
    for (size_t i = 0; i < a->nkw; i++) fg_chat_dict_set(c, ns, a->kwn[i]->s, a->kwn[i]->n, a->kw[i]);
    return ns;
}

static fg_chat_val *g_range(fg_chat_ctx *c, const fg_chat_args *a) {
    int64_t v[3] = {0, 0, 1};
    for (size_t i = 0; i < a->npos; i++) v[i + (a->npos == 1)] = want(c, a->pos[i], V_INT, "range")->u.i;
    if (!v[2]) fg_chat_fail(c, "range: the step cannot be zero");
    double n = v[2] > 0 ? ((double)v[1] - (double)v[0]) / (double)v[2] : ((double)v[0] - (double)v[1]) / (double)-v[2];
    if (n > MAX_RANGE) fg_chat_fail(c, "range: more than %d numbers", MAX_RANGE);
    size_t count = n > 0 ? (size_t)__builtin_ceil(n) : 0;
    fg_chat_val *l = fg_chat_vlist(c, count);
    for (size_t i = 0; i < count; i++) l->u.l.v[i] = fg_chat_vint(c, v[0] + (int64_t)i * v[2]);
    return l;
}

fg_chat_val *fg_chat_func(fg_chat_ctx *c, int g, const fg_chat_args *a) {
    if (g == G_NAMESPACE) return g_namespace(c, a);
    if (g == G_RANGE) return g_range(c, a);
    fg_chat_buf b = {c, NULL, 0, 0};
    fg_chat_print(&b, a->pos[0]);
    fg_chat_buf_val(&b);
    fg_chat_fail(c, "raise_exception: %.*s", (int)(b.n - 1 < 400 ? b.n - 1 : 400), b.p);
}

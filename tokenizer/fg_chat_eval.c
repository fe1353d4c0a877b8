/* fg_chat_eval.c - renders a parsed chat template: scopes (a for loop has
 * its own, as in Jinja: what a loop body sets stays in the loop), the
 * statements, and every expression but the library of filters, tests,
 * methods and functions (fg_chat_func.c). Operators follow @huggingface/jinja
 * (none and undefined refuse arithmetic; ~ takes undefined as ""; `x in
 * undefined` is false), with Python's == and % (fg_chat.h). Each step is
 * counted and every allocation comes from one arena with a limit, so a
 * template that loops forever or grows without end stops with FG_EINPUT. */
#define _GNU_SOURCE /* memmem */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fg_chat_int.h"

#define MAX_EVAL_DEPTH 1000

struct fg_chat_scope {
    fg_chat_scope *up;
    fg_chat_entry *v;
    size_t n, cap;
};

_Noreturn void fg_chat_fail(fg_chat_ctx *c, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->st = fg_err_set(FG_EINPUT, "%s:%d: %s", c->t->name, c->line, msg);
    longjmp(c->fail, 1);
}

static fg_chat_val *lookup(const fg_chat_scope *s, const char *k, size_t n) {
    for (; s; s = s->up)
        for (size_t i = 0; i < s->n; i++)
            if (s->v[i].kn == n && !memcmp(s->v[i].k, k, n)) return s->v[i].v;
    return &fg_chat_undef;
}

static void set_var(fg_chat_ctx *c, fg_chat_scope *s, const char *k, size_t n, fg_chat_val *v) {
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].kn == n && !memcmp(s->v[i].k, k, n)) {
            s->v[i].v = v;
            return;
        }
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 8;
        fg_chat_entry *e = fg_chat_ralloc(c, s->cap * sizeof *e);
        if (s->n) memcpy(e, s->v, s->n * sizeof *e);
        s->v = e;
    }
    s->v[s->n++] = (fg_chat_entry){k, n, v};
}

static fg_chat_scope *new_scope(fg_chat_ctx *c, fg_chat_scope *up) {
    fg_chat_scope *s = fg_chat_ralloc(c, sizeof *s);
    memset(s, 0, sizeof *s);
    s->up = up;
    return s;
}

static void step(fg_chat_ctx *c, int line) {
    c->line = line;
    if (++c->steps > c->t->max_steps)
        fg_chat_fail(c, "rendering took more than %zu steps (a loop that does not end?)", c->t->max_steps);
}

/* ---- operators ---- */

static const char *op_name(int op) {
    static const char *const n[] = {"+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">", "<=", ">=", "in", "not in"};
    return n[op];
}

static int is_num(const fg_chat_val *v) { return v->kind == V_INT || v->kind == V_FLOAT; }
static double fnum(const fg_chat_val *v) { return v->kind == V_FLOAT ? v->u.f : (double)v->u.i; }

static fg_chat_val *arith_int(fg_chat_ctx *c, int op, int64_t a, int64_t b) {
    int64_t r = 0;
    int over = 0;
    if ((op == OP_FLOORDIV || op == OP_MOD) && b == 0) fg_chat_fail(c, "integer division or modulo by zero");
    switch (op) {
    case OP_ADD: over = __builtin_add_overflow(a, b, &r); break;
    case OP_SUB: over = __builtin_sub_overflow(a, b, &r); break;
    case OP_MUL: over = __builtin_mul_overflow(a, b, &r); break;
    case OP_FLOORDIV:
        if (a == INT64_MIN && b == -1) over = 1;
        else r = a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
        break;
    default: /* OP_MOD, the sign of the divisor as in Python */
        r = b == -1 ? 0 : a % b;
        if (r && ((r < 0) != (b < 0))) r += b;
    }
    if (over) fg_chat_fail(c, "integer overflow in %lld %s %lld", (long long)a, op_name(op), (long long)b);
    return fg_chat_vint(c, r);
}

static fg_chat_val *arith(fg_chat_ctx *c, int op, const fg_chat_val *l, const fg_chat_val *r) {
    if (op >= OP_LT && op <= OP_GE) {
        double a = fnum(l), b = fnum(r);
        int res = op == OP_LT ? a < b : op == OP_GT ? a > b : op == OP_LE ? a <= b : a >= b;
        if (l->kind == V_INT && r->kind == V_INT) {
            int64_t x = l->u.i, y = r->u.i;
            res = op == OP_LT ? x < y : op == OP_GT ? x > y : op == OP_LE ? x <= y : x >= y;
        }
        return fg_chat_vbool(res);
    }
    if (l->kind == V_INT && r->kind == V_INT && op != OP_DIV) return arith_int(c, op, l->u.i, r->u.i);
    double a = fnum(l), b = fnum(r), x;
    if (b == 0 && (op == OP_DIV || op == OP_FLOORDIV || op == OP_MOD)) fg_chat_fail(c, "division by zero");
    switch (op) {
    case OP_ADD: x = a + b; break;
    case OP_SUB: x = a - b; break;
    case OP_MUL: x = a * b; break;
    case OP_DIV: x = a / b; break;
    case OP_FLOORDIV: x = __builtin_floor(a / b); break;
    default:
        x = __builtin_fmod(a, b);
        if (x != 0 && ((x < 0) != (b < 0))) x += b;
    }
    return fg_chat_vfloat(c, x);
}

static fg_chat_val *concat(fg_chat_ctx *c, const fg_chat_val *l, const fg_chat_val *r) {
    fg_chat_buf b = {c, NULL, 0, 0};
    if (l->kind != V_UNDEF) fg_chat_concat_part(&b, l);
    if (r->kind != V_UNDEF) fg_chat_concat_part(&b, r);
    return fg_chat_buf_val(&b);
}

static int contains(fg_chat_ctx *c, const fg_chat_val *x, const fg_chat_val *in, int *ok) {
    *ok = 1;
    if (in->kind == V_LIST) {
        for (size_t i = 0; i < in->u.l.n; i++)
            if (fg_chat_equal(c, x, in->u.l.v[i], 0)) return 1;
        return 0;
    }
    if (in->kind == V_STR && x->kind == V_STR)
        return x->u.s.n == 0 || (in->u.s.n >= x->u.s.n && memmem(in->u.s.p, in->u.s.n, x->u.s.p, x->u.s.n));
    if ((in->kind == V_DICT || in->kind == V_NS) && x->kind == V_STR)
        return fg_chat_dict_get(in, x->u.s.p, x->u.s.n) != NULL;
    return *ok = 0;
}

static fg_chat_val *binop(fg_chat_ctx *c, int op, fg_chat_val *l, fg_chat_val *r) {
    if (op == OP_EQ || op == OP_NE) return fg_chat_vbool(fg_chat_equal(c, l, r, 0) == (op == OP_EQ));
    if (is_num(l) && is_num(r) && op != OP_CAT && op != OP_IN && op != OP_NOTIN) return arith(c, op, l, r);
    if (l->kind == V_UNDEF || r->kind == V_UNDEF) {
        if (r->kind == V_UNDEF && (op == OP_IN || op == OP_NOTIN)) return fg_chat_vbool(op == OP_NOTIN);
        if (op == OP_CAT && l->kind != V_NONE && r->kind != V_NONE) return concat(c, l, r);
        fg_chat_fail(c, "'%s' on an undefined value", op_name(op));
    }
    if (l->kind == V_NONE || r->kind == V_NONE) fg_chat_fail(c, "'%s' on none", op_name(op));
    if (op == OP_CAT) return concat(c, l, r);
    if (op == OP_ADD && l->kind == V_LIST && r->kind == V_LIST) {
        fg_chat_val *v = fg_chat_vlist(c, l->u.l.n + r->u.l.n);
        if (l->u.l.n) memcpy(v->u.l.v, l->u.l.v, l->u.l.n * sizeof *v->u.l.v);
        if (r->u.l.n) memcpy(v->u.l.v + l->u.l.n, r->u.l.v, r->u.l.n * sizeof *v->u.l.v);
        return v;
    }
    if (op == OP_IN || op == OP_NOTIN) {
        int ok, in = contains(c, l, r, &ok);
        if (ok) return fg_chat_vbool(in == (op == OP_IN));
    } else if (op == OP_ADD && (l->kind == V_STR || r->kind == V_STR)) {
        return concat(c, l, r);
    } else if (op >= OP_LT && op <= OP_GE && l->kind == V_STR && r->kind == V_STR) {
        size_t m = l->u.s.n < r->u.s.n ? l->u.s.n : r->u.s.n;
        int k = memcmp(l->u.s.p, r->u.s.p, m);
        k = k ? k : (l->u.s.n > r->u.s.n) - (l->u.s.n < r->u.s.n);
        return fg_chat_vbool(op == OP_LT ? k < 0 : op == OP_GT ? k > 0 : op == OP_LE ? k <= 0 : k >= 0);
    }
    fg_chat_fail(c, "'%s' between a %s and a %s", op_name(op), fg_chat_kind_name(l), fg_chat_kind_name(r));
}

/* ---- expressions ---- */

/* obj[key] and obj.key: a dict's or namespace's entry, a list's or string's item (negative from the end);
 * undefined where there is none, as in Jinja. */
static fg_chat_val *item(fg_chat_ctx *c, const fg_chat_val *obj, const fg_chat_val *key) {
    if (obj->kind == V_DICT || obj->kind == V_NS) {
        fg_chat_val *v = key->kind == V_STR ? fg_chat_dict_get(obj, key->u.s.p, key->u.s.n) : NULL;
        return v ? v : &fg_chat_undef;
    }
    if (key->kind != V_INT || (obj->kind != V_LIST && obj->kind != V_STR)) return &fg_chat_undef;
    int64_t i = key->u.i;
    if (obj->kind == V_LIST) {
        int64_t n = (int64_t)obj->u.l.n;
        if (i < 0) i += n;
        return i >= 0 && i < n ? obj->u.l.v[i] : &fg_chat_undef;
    }
    int64_t n = (int64_t)fg_chat_cp_count(obj->u.s.p, obj->u.s.n);
    if (i < 0) i += n;
    if (i < 0 || i >= n) return &fg_chat_undef;
    const char *s = obj->u.s.p;
    size_t pos = 0, len = 0;
    for (int64_t k = 0; k <= i; k++) {
        pos += len;
        fg_chat_utf8_get(s + pos, obj->u.s.n - pos, &len);
    }
    return fg_chat_vstr_ref(c, s + pos, len);
}

static fg_chat_val *eval_list(fg_chat_ctx *c, fg_chat_scope *s, const fg_chat_node *e) {
    fg_chat_val *v = fg_chat_vlist(c, e->body.n);
    for (size_t i = 0; i < e->body.n; i++) v->u.l.v[i] = fg_chat_eval(c, s, e->body.v[i]);
    if (e->kind != E_DICT) return v;
    fg_chat_val *d = fg_chat_vdict(c, V_DICT);
    for (size_t i = 0; i < e->body.n; i++) {
        if (v->u.l.v[i]->kind != V_STR)
            fg_chat_fail(c, "a dict key must be a string, not a %s", fg_chat_kind_name(v->u.l.v[i]));
        fg_chat_dict_set(c, d, v->u.l.v[i]->u.s.p, v->u.l.v[i]->u.s.n, fg_chat_eval(c, s, e->alt.v[i]));
    }
    return d;
}

void fg_chat_eval_args(fg_chat_ctx *c, fg_chat_scope *s, const fg_chat_node *call, fg_chat_args *a) {
    a->npos = call->body.n, a->nkw = call->alt.n;
    a->pos = fg_chat_ralloc(c, (a->npos + a->nkw + 1) * sizeof *a->pos);
    a->kw = a->pos + a->npos;
    a->kwn = (const fg_chat_node *const *)call->alt.v;
    for (size_t i = 0; i < a->npos; i++) a->pos[i] = fg_chat_eval(c, s, call->body.v[i]);
    for (size_t i = 0; i < a->nkw; i++) a->kw[i] = fg_chat_eval(c, s, call->alt.v[i]->a);
}

static fg_chat_val *eval_unary(fg_chat_ctx *c, fg_chat_scope *s, const fg_chat_node *e) {
    fg_chat_val *x = fg_chat_eval(c, s, e->a);
    if (e->kind == E_NOT) return fg_chat_vbool(!fg_chat_truthy(x));
    int neg = e->kind == E_NEG;
    if (x->kind == V_FLOAT) return fg_chat_vfloat(c, neg ? -x->u.f : x->u.f);
    if (x->kind == V_BOOL) return fg_chat_vint(c, neg ? -x->u.b : x->u.b);
    if (x->kind != V_INT) fg_chat_fail(c, "unary '%c' on a %s", neg ? '-' : '+', fg_chat_kind_name(x));
    if (neg && x->u.i == INT64_MIN) fg_chat_fail(c, "integer overflow in -(%lld)", (long long)x->u.i);
    return fg_chat_vint(c, neg ? -x->u.i : x->u.i);
}

static fg_chat_val *eval_node(fg_chat_ctx *c, fg_chat_scope *s, const fg_chat_node *e) {
    fg_chat_args a;
    switch (e->kind) {
    case E_STR: return fg_chat_vstr_ref(c, e->s, e->n);
    case E_INT: return fg_chat_vint(c, e->i);
    case E_FLOAT: return fg_chat_vfloat(c, e->f);
    case E_CONST: return e->op == CONST_NONE ? &fg_chat_none : fg_chat_vbool(e->op == CONST_TRUE);
    case E_NAME: return lookup(s, e->s, e->n);
    case E_LIST:
    case E_TUPLE:
    case E_DICT: return eval_list(c, s, e);
    case E_ATTR: {
        fg_chat_val *obj = fg_chat_eval(c, s, e->a);
        fg_chat_val key = {.kind = V_STR, .u.s = {e->s, e->n}};
        return item(c, obj, &key);
    }
    case E_INDEX: {
        fg_chat_val *obj = fg_chat_eval(c, s, e->a);
        return item(c, obj, fg_chat_eval(c, s, e->b));
    }
    case E_SLICE: {
        fg_chat_val *obj = fg_chat_eval(c, s, e->body.v[0]);
        fg_chat_val *p[3];
        const fg_chat_node *part[3] = {e->a, e->b, e->c};
        for (int i = 0; i < 3; i++) p[i] = part[i] ? fg_chat_eval(c, s, part[i]) : &fg_chat_none;
        c->line = e->line;
        return fg_chat_slice(c, obj, p[0], p[1], p[2]);
    }
    case E_CALL: fg_chat_eval_args(c, s, e, &a); c->line = e->line; return fg_chat_func(c, e->op, &a);
    case E_METHOD: {
        fg_chat_val *obj = fg_chat_eval(c, s, e->a);
        fg_chat_eval_args(c, s, e, &a);
        c->line = e->line;
        return fg_chat_method(c, obj, e->op, &a);
    }
    case E_FILTER: return fg_chat_filter(c, s, e, fg_chat_eval(c, s, e->a));
    case E_TEST: {
        fg_chat_val *x = fg_chat_eval(c, s, e->a);
        c->line = e->line;
        return fg_chat_vbool(fg_chat_test(c, e->op, x) != (int)e->i);
    }
    case E_NEG:
    case E_POS:
    case E_NOT: return eval_unary(c, s, e);
    case E_AND:
    case E_OR: {
        fg_chat_val *l = fg_chat_eval(c, s, e->a);
        return fg_chat_truthy(l) == (e->kind == E_AND) ? fg_chat_eval(c, s, e->b) : l;
    }
    case E_BIN: {
        fg_chat_val *l = fg_chat_eval(c, s, e->a), *r = fg_chat_eval(c, s, e->b);
        c->line = e->line;
        return binop(c, e->op, l, r);
    }
    case E_COND:
        if (fg_chat_truthy(fg_chat_eval(c, s, e->b))) return fg_chat_eval(c, s, e->a);
        return e->c ? fg_chat_eval(c, s, e->c) : &fg_chat_undef;
    }
    fg_chat_fail(c, "internal error: node kind %d is not an expression", e->kind);
}

fg_chat_val *fg_chat_eval(fg_chat_ctx *c, fg_chat_scope *s, const fg_chat_node *e) {
    step(c, e->line);
    if (++c->depth > MAX_EVAL_DEPTH) fg_chat_fail(c, "an expression nested more than %d deep", MAX_EVAL_DEPTH);
    fg_chat_val *v = eval_node(c, s, e);
    c->depth--;
    return v;
}

/* ---- statements ---- */

static void render(fg_chat_ctx *c, fg_chat_scope *s, const fg_chat_nodes *body, fg_chat_buf *out);

/* Binds a for or set target: a name, or names from a list of as many items. */
static void bind(fg_chat_ctx *c, fg_chat_scope *s, const fg_chat_node *target, fg_chat_val *v) {
    if (target->kind == E_NAME) return set_var(c, s, target->s, target->n, v);
    if (target->kind == E_ATTR) {
        c->line = target->line;
        fg_chat_val *ns = fg_chat_eval(c, s, target->a);
        if (ns->kind != V_NS)
            fg_chat_fail(c, "cannot set an attribute of a %s (only of a namespace())", fg_chat_kind_name(ns));
        return fg_chat_dict_set(c, ns, target->s, target->n, v);
    }
    if (v->kind != V_LIST || v->u.l.n != target->body.n)
        fg_chat_fail(c, "cannot unpack a %s into %zu names", fg_chat_kind_name(v), target->body.n);
    for (size_t i = 0; i < target->body.n; i++) set_var(c, s, target->body.v[i]->s, target->body.v[i]->n, v->u.l.v[i]);
}

/* What a for loop walks: a list's items, a dict's keys, a string's characters; undefined is empty. */
static fg_chat_val *iterable(fg_chat_ctx *c, fg_chat_val *it) {
    if (it->kind == V_LIST) return it;
    if (it->kind == V_UNDEF) return fg_chat_vlist(c, 0);
    if (it->kind == V_DICT) {
        fg_chat_val *l = fg_chat_vlist(c, it->u.d.n);
        for (size_t i = 0; i < it->u.d.n; i++) l->u.l.v[i] = fg_chat_vstr_ref(c, it->u.d.e[i].k, it->u.d.e[i].kn);
        return l;
    }
    if (it->kind == V_STR) {
        fg_chat_val *l = fg_chat_vlist(c, fg_chat_cp_count(it->u.s.p, it->u.s.n));
        size_t pos = 0, len;
        for (size_t i = 0; i < l->u.l.n; i++, pos += len) {
            fg_chat_utf8_get(it->u.s.p + pos, it->u.s.n - pos, &len);
            l->u.l.v[i] = fg_chat_vstr_ref(c, it->u.s.p + pos, len);
        }
        return l;
    }
    fg_chat_fail(c, "cannot loop over a %s", fg_chat_kind_name(it));
}

static fg_chat_val *loop_var(fg_chat_ctx *c, const fg_chat_val *items, size_t i) {
    size_t n = items->u.l.n;
    fg_chat_val *d = fg_chat_vdict(c, V_DICT);
    fg_chat_dict_set(c, d, "index", 5, fg_chat_vint(c, (int64_t)i + 1));
    fg_chat_dict_set(c, d, "index0", 6, fg_chat_vint(c, (int64_t)i));
    fg_chat_dict_set(c, d, "revindex", 8, fg_chat_vint(c, (int64_t)(n - i)));
    fg_chat_dict_set(c, d, "revindex0", 9, fg_chat_vint(c, (int64_t)(n - i - 1)));
    fg_chat_dict_set(c, d, "first", 5, fg_chat_vbool(i == 0));
    fg_chat_dict_set(c, d, "last", 4, fg_chat_vbool(i + 1 == n));
    fg_chat_dict_set(c, d, "length", 6, fg_chat_vint(c, (int64_t)n));
    fg_chat_dict_set(c, d, "previtem", 8, i ? items->u.l.v[i - 1] : &fg_chat_undef);
    fg_chat_dict_set(c, d, "nextitem", 8, i + 1 < n ? items->u.l.v[i + 1] : &fg_chat_undef);
    return d;
}

static void render_for(fg_chat_ctx *c, fg_chat_scope *up, const fg_chat_node *x, fg_chat_buf *out) {
    fg_chat_scope *s = new_scope(c, up);
    fg_chat_val *all = iterable(c, fg_chat_eval(c, s, x->b));
    fg_chat_val *items = all;
    int tuple = x->a->kind == E_TUPLE;
    if (tuple || x->c) { /* check every item (and with `if`, select them) before the first iteration */
        items = fg_chat_vlist(c, all->u.l.n);
        items->u.l.n = 0;
        for (size_t i = 0; i < all->u.l.n; i++) {
            fg_chat_val *v = all->u.l.v[i];
            c->line = x->line;
            if (tuple && (v->kind != V_LIST || v->u.l.n != x->a->body.n))
                fg_chat_fail(c, "cannot unpack a %s into %zu names", fg_chat_kind_name(v), x->a->body.n);
            if (x->c) {
                fg_chat_scope *t = new_scope(c, s);
                bind(c, t, x->a, v);
                if (!fg_chat_truthy(fg_chat_eval(c, t, x->c))) continue;
            }
            items->u.l.v[items->u.l.n++] = v;
        }
    }
    for (size_t i = 0; i < items->u.l.n; i++) {
        step(c, x->line);
        set_var(c, s, "loop", 4, loop_var(c, items, i));
        bind(c, s, x->a, items->u.l.v[i]);
        render(c, s, &x->body, out);
    }
    if (!items->u.l.n) render(c, s, &x->alt, out);
}

static void render_one(fg_chat_ctx *c, fg_chat_scope *s, const fg_chat_node *x, fg_chat_buf *out) {
    step(c, x->line);
    switch (x->kind) {
    case N_TEXT: fg_chat_buf_add(out, x->s, x->n); break;
    case N_OUT: fg_chat_print(out, fg_chat_eval(c, s, x->a)); break;
    case N_IF: render(c, s, fg_chat_truthy(fg_chat_eval(c, s, x->a)) ? &x->body : &x->alt, out); break;
    case N_FOR: render_for(c, s, x, out); break;
    case N_SET: bind(c, s, x->a, fg_chat_eval(c, s, x->b)); break;
    case N_SETBLOCK: {
        fg_chat_buf b = {c, NULL, 0, 0};
        render(c, s, &x->body, &b);
        bind(c, s, x->a, fg_chat_buf_val(&b));
        break;
    }
    default: fg_chat_fail(c, "internal error: node kind %d is not a statement", x->kind);
    }
    if (out->n > c->t->max_out) fg_chat_fail(c, "the output passes %zu MiB", c->t->max_out >> 20);
}

static void render(fg_chat_ctx *c, fg_chat_scope *s, const fg_chat_nodes *body, fg_chat_buf *out) {
    if (++c->depth > MAX_EVAL_DEPTH) fg_chat_fail(c, "blocks nested more than %d deep", MAX_EVAL_DEPTH);
    for (size_t i = 0; i < body->n; i++) render_one(c, s, body->v[i], out);
    c->depth--;
}

fg_status fg_tmpl_render(const fg_tmpl *t, const json_t *vars, char **out, size_t *len) {
    *out = NULL;
    if (len) *len = 0;
    if (!json_is_object(vars)) return fg_err_set(FG_EINPUT, "%s: the variables must be a JSON object", t->name);
    fg_chat_ctx *c = fg_xcalloc(1, sizeof *c); /* on the heap: longjmp leaves it alone */
    c->t = t;
    c->arena.limit = t->max_mem;
    c->line = 1;
    fg_status st = FG_OK;
    if (setjmp(c->fail)) {
        st = c->st;
    } else {
        fg_chat_scope *g = new_scope(c, NULL);
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)vars, k, v) set_var(c, g, k, strlen(k), fg_chat_from_json(c, v, 0));
        fg_chat_buf b = {c, NULL, 0, 0};
        render(c, g, &t->body, &b);
        *out = fg_xmalloc(b.n + 1);
        if (b.n) memcpy(*out, b.p, b.n);
        (*out)[b.n] = 0;
        if (len) *len = b.n;
    }
    fg_chat_arena_free(&c->arena);
    free(c);
    return st;
}

/* fg_chat_expr.c - expressions of a chat template, by @huggingface/jinja's
 * precedence, loosest first: x if c else y; or; and; not; comparisons with
 * in and not in; + - ~; * / // %; is-tests; |filters; unary - +; then
 * attribute, item, slice and call suffixes on a primary (literal, name,
 * parenthesised expression or tuple, list, dict). Filters, tests, methods and
 * functions are looked up as they are parsed (fg_chat_lookup) and their
 * arguments checked against what they take: an unknown one is refused here,
 * with its line, as is ** and argument unpacking. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fg_chat_int.h"

#define MAX_DEPTH 200

static int tok_is(const fg_chat_parser *p, int type, const char *s) {
    const fg_chat_tok *t = fg_chat_peek(p, 0);
    return t->type == type && (!s || (t->n == strlen(s) && !memcmp(t->s, s, t->n)));
}

static fg_chat_node *node2(fg_chat_parser *p, int kind, int line, fg_chat_node *a, fg_chat_node *b) {
    fg_chat_node *x = fg_chat_new_node(p, kind, line);
    x->a = a, x->b = b;
    return x;
}

/* (args): positional ones in x->body, name=value ones (E_KWARG) in x->alt, checked against sig. */
static void parse_args(fg_chat_parser *p, fg_chat_node *x, const fg_chat_sig *sig, const char *what) {
    fg_chat_expect(p, TK_LPAREN, "(");
    while (!tok_is(p, TK_RPAREN, NULL)) {
        if (tok_is(p, TK_POW, NULL) || tok_is(p, TK_MUL, "*"))
            fg_chat_parse_fail(p, fg_chat_peek(p, 0)->line, "unsupported argument unpacking (* or **)");
        fg_chat_node *a = fg_chat_parse_expr(p);
        if (tok_is(p, TK_EQUALS, NULL)) {
            p->pos++;
            if (a->kind != E_NAME) fg_chat_parse_fail(p, a->line, "a keyword argument needs a name before =");
            fg_chat_node *k = fg_chat_new_node(p, E_KWARG, a->line);
            k->s = a->s, k->n = a->n;
            k->a = fg_chat_parse_expr(p);
            size_t kn = a->n;
            const char *kw = sig->kw;
            int ok = kw && !strcmp(kw, "*"); /* any name */
            for (const char *q = kw; q && *q && !ok; q = strchr(q, ',') ? strchr(q, ',') + 1 : q + strlen(q))
                ok = !strncmp(q, a->s, kn) && (q[kn] == ',' || !q[kn]);
            if (!ok)
                fg_chat_parse_fail(p, a->line, "%s '%s' takes no keyword argument '%.*s'", what, sig->name, (int)kn,
                                   a->s);
            fg_chat_push(p, &x->alt, k);
        } else {
            if (x->alt.n) fg_chat_parse_fail(p, a->line, "a positional argument after keyword arguments");
            fg_chat_push(p, &x->body, a);
        }
        if (!tok_is(p, TK_COMMA, NULL)) break;
        p->pos++;
    }
    fg_chat_expect(p, TK_RPAREN, "',' or )");
    if ((int)x->body.n < sig->min || (int)x->body.n > sig->max)
        fg_chat_parse_fail(p, x->line, "%s '%s' takes %d to %d positional arguments, not %zu", what, sig->name,
                           sig->min, sig->max, x->body.n);
}

/* A name after |, is, or a call: its id among `kind`, or refused. */
static int lookup(fg_chat_parser *p, int kind, const fg_chat_tok *t, const fg_chat_sig **sig) {
    static const char *const what[] = {"filter", "test", "method", "function"};
    int id = fg_chat_lookup(kind, t->s, t->n, sig);
    if (id < 0)
        fg_chat_parse_fail(p, t->line, "unsupported %s '%.*s'", what[kind], (int)(t->n < 40 ? t->n : 40), t->s);
    return id;
}

static fg_chat_node *parse_literal_list(fg_chat_parser *p, int line, int dict) {
    fg_chat_node *x = fg_chat_new_node(p, dict ? E_DICT : E_LIST, line);
    int close = dict ? TK_RBRACE : TK_RBRACKET;
    while (!tok_is(p, close, NULL)) {
        fg_chat_push(p, &x->body, fg_chat_parse_expr(p));
        if (dict) {
            fg_chat_expect(p, TK_COLON, "':' between a key and its value");
            fg_chat_push(p, &x->alt, fg_chat_parse_expr(p));
        }
        if (!tok_is(p, TK_COMMA, NULL)) break;
        p->pos++;
    }
    fg_chat_expect(p, close, dict ? "',' or }" : "',' or ]");
    return x;
}

static fg_chat_node *parse_number(fg_chat_parser *p, const fg_chat_tok *t) {
    char buf[64];
    if (t->n >= sizeof buf) fg_chat_parse_fail(p, t->line, "a number too long: %.20s...", t->s);
    memcpy(buf, t->s, t->n);
    buf[t->n] = 0;
    errno = 0;
    if (memchr(buf, '.', t->n)) {
        fg_chat_node *x = fg_chat_new_node(p, E_FLOAT, t->line);
        x->f = strtod(buf, NULL);
        return x;
    }
    fg_chat_node *x = fg_chat_new_node(p, E_INT, t->line);
    x->i = strtoll(buf, NULL, 10);
    if (errno) fg_chat_parse_fail(p, t->line, "the integer %s is too large", buf);
    return x;
}

fg_chat_node *fg_chat_parse_primary(fg_chat_parser *p) {
    const fg_chat_tok *t = fg_chat_peek(p, 0);
    p->pos++;
    switch (t->type) {
    case TK_NUM: return parse_number(p, t);
    case TK_STR: {
        fg_chat_node *x = fg_chat_new_node(p, E_STR, t->line);
        x->s = t->s, x->n = t->n;
        if (tok_is(p, TK_STR, NULL)) { /* 'a' 'b' is 'ab' */
            size_t n = t->n, k = p->pos;
            for (; p->toks[k].type == TK_STR; k++) n += p->toks[k].n;
            char *s = fg_chat_alloc(p->arena, n + 1);
            if (!s) fg_chat_parse_fail(p, t->line, "out of memory");
            memcpy(s, t->s, t->n);
            for (x->n = t->n; p->toks[p->pos].type == TK_STR; p->pos++)
                memcpy(s + x->n, p->toks[p->pos].s, p->toks[p->pos].n), x->n += p->toks[p->pos].n;
            s[x->n] = 0;
            x->s = s;
        }
        return x;
    }
    case TK_NAME: {
        static const char *const consts[] = {"none", "None", "true", "True", "false", "False"};
        static const char *const words[] = {"and", "or", "not", "in", "is", "if", "else"};
        for (int i = 0; i < 6; i++)
            if (t->n == strlen(consts[i]) && !memcmp(t->s, consts[i], t->n)) {
                fg_chat_node *x = fg_chat_new_node(p, E_CONST, t->line);
                x->op = i < 2 ? CONST_NONE : i < 4 ? CONST_TRUE : CONST_FALSE;
                return x;
            }
        for (int i = 0; i < 7; i++)
            if (t->n == strlen(words[i]) && !memcmp(t->s, words[i], t->n))
                fg_chat_parse_fail(p, t->line, "expected an expression, got '%s'", words[i]);
        fg_chat_node *x = fg_chat_new_node(p, E_NAME, t->line);
        x->s = t->s, x->n = t->n;
        return x;
    }
    case TK_LPAREN: {
        fg_chat_node *x = fg_chat_parse_seq(p, 0);
        fg_chat_expect(p, TK_RPAREN, ")");
        return x;
    }
    case TK_LBRACKET: return parse_literal_list(p, t->line, 0);
    case TK_LBRACE: return parse_literal_list(p, t->line, 1);
    default: break;
    }
    if (t->type == TK_POW) fg_chat_parse_fail(p, t->line, "unsupported operator '**'");
    fg_chat_parse_fail(p, t->line, "expected an expression, got %s",
                       t->type == TK_END ? "the end of the template" : t->type == TK_TEXT ? "text" : "a symbol");
}

/* [i], [a:b:c] (each part optional). */
static fg_chat_node *parse_subscript(fg_chat_parser *p, fg_chat_node *obj, int line) {
    fg_chat_node *part[3] = {0};
    int n = 0, slice = 0;
    while (!tok_is(p, TK_RBRACKET, NULL)) {
        if (n == 3) fg_chat_parse_fail(p, line, "a slice has at most 3 parts");
        if (tok_is(p, TK_COLON, NULL)) {
            part[n++] = NULL;
            p->pos++;
            slice = 1;
            continue;
        }
        part[n++] = fg_chat_parse_expr(p);
        if (tok_is(p, TK_COLON, NULL)) {
            p->pos++;
            slice = 1;
        } else if (!tok_is(p, TK_RBRACKET, NULL)) {
            fg_chat_expect(p, TK_RBRACKET, "]");
        }
    }
    p->pos++;
    if (!n) fg_chat_parse_fail(p, line, "[] needs an index or a slice");
    if (!slice) return node2(p, E_INDEX, line, obj, part[0]);
    fg_chat_node *x = node2(p, E_SLICE, line, part[0], part[1]);
    x->c = part[2];
    fg_chat_push(p, &x->body, obj); /* the sliced value */
    return x;
}

/* A call on x: a function by name, or a method on an object (x.m(...)). */
static fg_chat_node *parse_call(fg_chat_parser *p, fg_chat_node *x) {
    const fg_chat_sig *sig;
    fg_chat_tok name = {TK_NAME, x->line, x->s, x->n};
    fg_chat_node *c;
    if (x->kind == E_NAME) {
        c = fg_chat_new_node(p, E_CALL, x->line);
        c->op = lookup(p, LK_FUNC, &name, &sig);
        parse_args(p, c, sig, "function");
    } else if (x->kind == E_ATTR) {
        c = fg_chat_new_node(p, E_METHOD, x->line);
        c->op = lookup(p, LK_METHOD, &name, &sig);
        c->a = x->a;
        c->s = x->s, c->n = x->n;
        parse_args(p, c, sig, "method");
    } else {
        fg_chat_parse_fail(p, x->line, "unsupported call: only functions by name and methods can be called");
    }
    return c;
}

static fg_chat_node *parse_postfix(fg_chat_parser *p) {
    fg_chat_node *x = fg_chat_parse_primary(p);
    for (;;) {
        const fg_chat_tok *t = fg_chat_peek(p, 0);
        if (t->type == TK_DOT) {
            p->pos++;
            const fg_chat_tok *k = fg_chat_peek(p, 0);
            p->pos++;
            if (k->type == TK_NUM && !memchr(k->s, '.', k->n)) {
                x = node2(p, E_INDEX, t->line, x, parse_number(p, k));
            } else if (k->type == TK_NAME) {
                x = node2(p, E_ATTR, t->line, x, NULL);
                x->s = k->s, x->n = k->n;
            } else {
                fg_chat_parse_fail(p, t->line, "expected a name or an integer after '.'");
            }
        } else if (t->type == TK_LBRACKET) {
            p->pos++;
            x = parse_subscript(p, x, t->line);
        } else if (t->type == TK_LPAREN) {
            x = parse_call(p, x);
        } else {
            return x;
        }
    }
}

static fg_chat_node *parse_unary(fg_chat_parser *p) {
    const fg_chat_tok *t = fg_chat_peek(p, 0);
    if ((t->type == TK_UNARY || t->type == TK_ADD) && t->n == 1 && (t->s[0] == '-' || t->s[0] == '+')) {
        p->pos++;
        if (++p->depth > MAX_DEPTH) fg_chat_parse_fail(p, t->line, "an expression nested more than %d deep", MAX_DEPTH);
        fg_chat_node *x = node2(p, t->s[0] == '-' ? E_NEG : E_POS, t->line, parse_unary(p), NULL);
        p->depth--;
        return x;
    }
    return parse_postfix(p);
}

static fg_chat_node *parse_filters(fg_chat_parser *p) {
    fg_chat_node *x = parse_unary(p);
    while (tok_is(p, TK_PIPE, NULL)) {
        p->pos++;
        const fg_chat_tok *t = fg_chat_expect(p, TK_NAME, "a filter name after |");
        const fg_chat_sig *sig;
        fg_chat_node *f = node2(p, E_FILTER, t->line, x, NULL);
        f->op = lookup(p, LK_FILTER, t, &sig);
        f->s = t->s, f->n = t->n;
        if (tok_is(p, TK_LPAREN, NULL)) parse_args(p, f, sig, "filter");
        else if (sig->min) fg_chat_parse_fail(p, t->line, "filter '%s' needs arguments", sig->name);
        x = f;
    }
    return x;
}

static fg_chat_node *parse_tests(fg_chat_parser *p) {
    fg_chat_node *x = parse_filters(p);
    while (fg_chat_is_name(p, 0, "is")) {
        int line = fg_chat_peek(p, 0)->line;
        p->pos++;
        int neg = fg_chat_is_name(p, 0, "not");
        p->pos += (size_t)neg;
        const fg_chat_tok *t = fg_chat_expect(p, TK_NAME, "a test name after 'is'");
        const fg_chat_sig *sig;
        fg_chat_node *k = node2(p, E_TEST, line, x, NULL);
        k->op = lookup(p, LK_TEST, t, &sig);
        k->i = neg;
        if (tok_is(p, TK_LPAREN, NULL))
            fg_chat_parse_fail(p, t->line, "unsupported test arguments: '%.*s(...)'", (int)t->n, t->s);
        x = k;
    }
    return x;
}

static fg_chat_node *parse_binary(fg_chat_parser *p, int level);

/* Left-associative levels: 0 comparisons and membership, 1 + - ~, 2 * / // %. */
static int binary_op(fg_chat_parser *p, int level) {
    const fg_chat_tok *t = fg_chat_peek(p, 0);
    static const char *const cmp[] = {"==", "!=", "<", ">", "<=", ">="};
    static const int cmp_op[] = {OP_EQ, OP_NE, OP_LT, OP_GT, OP_LE, OP_GE};
    if (level == 0) {
        if (fg_chat_is_name(p, 0, "not") && fg_chat_is_name(p, 1, "in")) return p->pos += 2, OP_NOTIN;
        if (fg_chat_is_name(p, 0, "in")) return p->pos++, OP_IN;
        for (int i = 0; i < 6 && t->type == TK_CMP; i++)
            if (t->n == strlen(cmp[i]) && !memcmp(t->s, cmp[i], t->n)) return p->pos++, cmp_op[i];
        return -1;
    }
    if (level == 1 && t->type == TK_ADD) return p->pos++, t->s[0] == '+' ? OP_ADD : t->s[0] == '-' ? OP_SUB : OP_CAT;
    if (level == 2 && t->type == TK_MUL) {
        p->pos++;
        return t->n == 2 ? OP_FLOORDIV : t->s[0] == '*' ? OP_MUL : t->s[0] == '/' ? OP_DIV : OP_MOD;
    }
    if (level == 2 && t->type == TK_POW) fg_chat_parse_fail(p, t->line, "unsupported operator '**'");
    return -1;
}

static fg_chat_node *parse_binary(fg_chat_parser *p, int level) {
    fg_chat_node *x = level == 2 ? parse_tests(p) : parse_binary(p, level + 1);
    for (;;) {
        int line = fg_chat_peek(p, 0)->line;
        int op = binary_op(p, level);
        if (op < 0) return x;
        fg_chat_node *y = level == 2 ? parse_tests(p) : parse_binary(p, level + 1);
        x = node2(p, E_BIN, line, x, y);
        x->op = op;
    }
}

static fg_chat_node *parse_not(fg_chat_parser *p) {
    if (fg_chat_is_name(p, 0, "not")) {
        int line = fg_chat_peek(p, 0)->line;
        p->pos++;
        if (++p->depth > MAX_DEPTH) fg_chat_parse_fail(p, line, "an expression nested more than %d deep", MAX_DEPTH);
        fg_chat_node *x = node2(p, E_NOT, line, parse_not(p), NULL);
        p->depth--;
        return x;
    }
    return parse_binary(p, 0);
}

static fg_chat_node *parse_logic(fg_chat_parser *p, int or) {
    fg_chat_node *x = or ? parse_logic(p, 0) : parse_not(p);
    while (fg_chat_is_name(p, 0, or ? "or" : "and")) {
        int line = fg_chat_peek(p, 0)->line;
        p->pos++;
        x = node2(p, or ? E_OR : E_AND, line, x, or ? parse_logic(p, 0) : parse_not(p));
    }
    return x;
}

/* x if c else y; x if c alone is undefined when c is false (and filters a for loop's items). */
static fg_chat_node *parse_ifexpr(fg_chat_parser *p) {
    fg_chat_node *x = parse_logic(p, 1);
    if (!fg_chat_is_name(p, 0, "if")) return x;
    int line = fg_chat_peek(p, 0)->line;
    p->pos++;
    fg_chat_node *c = node2(p, E_COND, line, x, parse_logic(p, 1));
    if (fg_chat_is_name(p, 0, "else")) {
        p->pos++;
        c->c = fg_chat_parse_expr(p);
    }
    return c;
}

fg_chat_node *fg_chat_parse_expr(fg_chat_parser *p) {
    int line = fg_chat_peek(p, 0)->line;
    if (++p->depth > MAX_DEPTH) fg_chat_parse_fail(p, line, "an expression nested more than %d deep", MAX_DEPTH);
    fg_chat_node *x = parse_ifexpr(p);
    p->depth--;
    return x;
}

fg_chat_node *fg_chat_parse_seq(fg_chat_parser *p, int primary) {
    fg_chat_node *x = primary ? fg_chat_parse_primary(p) : fg_chat_parse_expr(p);
    if (!tok_is(p, TK_COMMA, NULL)) return x;
    fg_chat_node *t = fg_chat_new_node(p, E_TUPLE, x->line);
    fg_chat_push(p, &t->body, x);
    while (tok_is(p, TK_COMMA, NULL)) {
        p->pos++;
        fg_chat_push(p, &t->body, primary ? fg_chat_parse_primary(p) : fg_chat_parse_expr(p));
    }
    return t;
}

/* fg_chat_parse.c - a chat template's tokens to its syntax tree: the
 * statements (text, {{ }}, if/elif/else, for/else, set, set blocks), the
 * token helpers the expression parser (fg_chat_expr.c) shares, and
 * fg_tmpl_parse/fg_tmpl_destroy. The grammar is @huggingface/jinja's; what
 * this subset does not render (a tag such as include or macro, and in the
 * expression parser an unknown filter, test, method or function) is refused
 * here, with its line, rather than met at render time. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fg_chat_int.h"
#include "fg_tokenizer.h"

#define MAX_DEPTH 200          /* nesting of blocks and expressions */
#define MAX_SRC (4u << 20)     /* a template's bytes */

_Noreturn void fg_chat_parse_fail(fg_chat_parser *p, int line, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->st = fg_err_set(FG_EINPUT, "%s:%d: %s", p->name, line, msg);
    longjmp(p->fail, 1);
}

fg_chat_node *fg_chat_new_node(fg_chat_parser *p, int kind, int line) {
    fg_chat_node *x = fg_chat_alloc(p->arena, sizeof *x);
    if (!x) fg_chat_parse_fail(p, line, "out of memory");
    memset(x, 0, sizeof *x);
    x->kind = kind;
    x->line = line;
    return x;
}

void fg_chat_push(fg_chat_parser *p, fg_chat_nodes *l, fg_chat_node *x) {
    if ((l->n & (l->n - 1)) == 0) { /* 0, 1, 2, 4, ...: full, double it */
        size_t cap = l->n ? 2 * l->n : 1;
        fg_chat_node **v = fg_chat_alloc(p->arena, cap * sizeof *v);
        if (!v) fg_chat_parse_fail(p, x->line, "out of memory");
        if (l->n) memcpy(v, l->v, l->n * sizeof *v);
        l->v = v;
    }
    l->v[l->n++] = x;
}

const fg_chat_tok *fg_chat_peek(const fg_chat_parser *p, size_t ahead) {
    size_t i = p->pos + ahead;
    return &p->toks[i < p->ntok ? i : p->ntok - 1];
}

int fg_chat_is_name(const fg_chat_parser *p, size_t ahead, const char *name) {
    const fg_chat_tok *t = fg_chat_peek(p, ahead);
    return t->type == TK_NAME && t->n == strlen(name) && !memcmp(t->s, name, t->n);
}

/* How a token reads in a message. */
static void describe(const fg_chat_tok *t, char *buf, size_t len) {
    if (t->type == TK_END) snprintf(buf, len, "the end of the template");
    else if (t->type == TK_TEXT) snprintf(buf, len, "text");
    else if (t->type == TK_STR) snprintf(buf, len, "a string");
    else snprintf(buf, len, "'%.*s'", (int)(t->n < 40 ? t->n : 40), t->s);
}

const fg_chat_tok *fg_chat_expect(fg_chat_parser *p, int type, const char *what) {
    const fg_chat_tok *t = fg_chat_peek(p, 0);
    if (t->type != type) {
        char got[64];
        describe(t, got, sizeof got);
        fg_chat_parse_fail(p, t->line, "expected %s, got %s", what, got);
    }
    p->pos++;
    return t;
}

/* {% NAME at the cursor, NAME one of names (NULL-terminated). */
static int at_tag(const fg_chat_parser *p, const char *const *names) {
    if (fg_chat_peek(p, 0)->type != TK_OPEN_STMT) return 0;
    for (; *names; names++)
        if (fg_chat_is_name(p, 1, *names)) return 1;
    return 0;
}

static void parse_any(fg_chat_parser *p, fg_chat_nodes *out);

static const char *const closers[] = {"elif", "else", "endif", "endfor", "endset", "endgeneration", NULL};

/* Statements up to one of the tags in `until`; the template ending first, or another block's end, is an error
 * naming the block. */
static void parse_body(fg_chat_parser *p, fg_chat_nodes *out, const char *const *until, const char *block,
                       int line) {
    while (!at_tag(p, until)) {
        const fg_chat_tok *t = fg_chat_peek(p, 0);
        if (t->type == TK_END)
            fg_chat_parse_fail(p, t->line, "the {%% %s %%} at line %d is never closed by {%% %s %%}", block, line,
                               until[0]);
        if (at_tag(p, closers))
            fg_chat_parse_fail(p, t->line, "{%% %.*s %%} where the {%% %s %%} at line %d needs {%% %s %%} first",
                               (int)fg_chat_peek(p, 1)->n, fg_chat_peek(p, 1)->s, block, line, until[0]);
        parse_any(p, out);
    }
}

/* {% NAME %} (the closing tag of a block). */
static void expect_tag(fg_chat_parser *p, const char *name) {
    char what[64];
    snprintf(what, sizeof what, "{%% %s %%}", name);
    fg_chat_expect(p, TK_OPEN_STMT, what);
    if (!fg_chat_is_name(p, 0, name)) fg_chat_expect(p, -1, what);
    p->pos++;
    fg_chat_expect(p, TK_CLOSE_STMT, "%}");
}

/* After `if` or `elif`: the test, the body and what follows, up to (not including) {% endif %}. */
static fg_chat_node *parse_if(fg_chat_parser *p, int line) {
    static const char *const stops[] = {"endif", "elif", "else", NULL}, *const end[] = {"endif", NULL};
    fg_chat_node *x = fg_chat_new_node(p, N_IF, line);
    x->a = fg_chat_parse_expr(p);
    fg_chat_expect(p, TK_CLOSE_STMT, "%}");
    parse_body(p, &x->body, stops, "if", line);
    if (fg_chat_is_name(p, 1, "elif")) {
        int l2 = fg_chat_peek(p, 0)->line;
        p->pos += 2;
        fg_chat_push(p, &x->alt, parse_if(p, l2));
    } else if (fg_chat_is_name(p, 1, "else")) {
        p->pos += 2;
        fg_chat_expect(p, TK_CLOSE_STMT, "%}");
        parse_body(p, &x->alt, end, "if", line);
    }
    return x;
}

/* A name, or a tuple of names: what for and set bind. */
static int is_target(const fg_chat_node *t, int attr_ok) {
    if (t->kind == E_NAME) return 1;
    if (t->kind == E_ATTR) return attr_ok;
    if (t->kind != E_TUPLE) return 0;
    for (size_t i = 0; i < t->body.n; i++)
        if (t->body.v[i]->kind != E_NAME) return 0;
    return 1;
}

static fg_chat_node *parse_for(fg_chat_parser *p, int line) {
    static const char *const stops[] = {"endfor", "else", NULL}, *const end[] = {"endfor", NULL};
    fg_chat_node *x = fg_chat_new_node(p, N_FOR, line);
    x->a = fg_chat_parse_seq(p, 1);
    if (!is_target(x->a, 0))
        fg_chat_parse_fail(p, line, "{%% for %%} binds a name or names (for x in ..., for k, v in ...)");
    if (!fg_chat_is_name(p, 0, "in")) fg_chat_expect(p, -1, "'in'");
    p->pos++;
    x->b = fg_chat_parse_expr(p);
    if (x->b->kind == E_COND && !x->b->c) { /* for x in xs if cond: a filter on the items */
        x->c = x->b->b;
        x->b = x->b->a;
    }
    if (fg_chat_is_name(p, 0, "recursive")) fg_chat_parse_fail(p, line, "unsupported recursive loop");
    fg_chat_expect(p, TK_CLOSE_STMT, "%}");
    parse_body(p, &x->body, stops, "for", line);
    if (fg_chat_is_name(p, 1, "else")) {
        p->pos += 2;
        fg_chat_expect(p, TK_CLOSE_STMT, "%}");
        parse_body(p, &x->alt, end, "for", line);
    }
    expect_tag(p, "endfor");
    return x;
}

static fg_chat_node *parse_set(fg_chat_parser *p, int line) {
    static const char *const end[] = {"endset", NULL};
    fg_chat_node *target = fg_chat_parse_seq(p, 0);
    if (!is_target(target, 1))
        fg_chat_parse_fail(p, line, "{%% set %%} assigns to a name, names or a namespace attribute (ns.x)");
    fg_chat_node *x;
    if (fg_chat_peek(p, 0)->type == TK_EQUALS) {
        p->pos++;
        x = fg_chat_new_node(p, N_SET, line);
        x->b = fg_chat_parse_seq(p, 0);
        fg_chat_expect(p, TK_CLOSE_STMT, "%}");
    } else {
        x = fg_chat_new_node(p, N_SETBLOCK, line);
        fg_chat_expect(p, TK_CLOSE_STMT, "'=' or %}");
        parse_body(p, &x->body, end, "set", line);
        expect_tag(p, "endset");
    }
    x->a = target;
    return x;
}

static fg_chat_node *parse_tag(fg_chat_parser *p) {
    int line = fg_chat_expect(p, TK_OPEN_STMT, "{%")->line;
    const fg_chat_tok *t = fg_chat_peek(p, 0);
    if (t->type != TK_NAME) {
        char got[64];
        describe(t, got, sizeof got);
        fg_chat_parse_fail(p, t->line, "expected a tag name after {%%, got %s", got);
    }
    p->pos++;
    char name[48];
    snprintf(name, sizeof name, "%.*s", (int)(t->n < 40 ? t->n : 40), t->s);
    if (!strcmp(name, "if")) {
        fg_chat_node *x = parse_if(p, line);
        expect_tag(p, "endif");
        return x;
    }
    if (!strcmp(name, "for")) return parse_for(p, line);
    if (!strcmp(name, "set")) return parse_set(p, line);
    if (!strcmp(name, "generation")) { /* transformers' marker of the assistant's part: renders its body */
        static const char *const end[] = {"endgeneration", NULL};
        fg_chat_node *x = fg_chat_new_node(p, N_IF, line);
        x->a = fg_chat_new_node(p, E_CONST, line);
        x->a->op = CONST_TRUE;
        fg_chat_expect(p, TK_CLOSE_STMT, "%}");
        parse_body(p, &x->body, end, "generation", line);
        expect_tag(p, "endgeneration");
        return x;
    }
    for (const char *const *c = closers; *c; c++)
        if (!strcmp(name, *c)) fg_chat_parse_fail(p, line, "{%% %s %%} without the block it would end", name);
    fg_chat_parse_fail(p, line, "unsupported tag '%s'", name);
}

static void parse_any(fg_chat_parser *p, fg_chat_nodes *out) {
    const fg_chat_tok *t = fg_chat_peek(p, 0);
    if (++p->depth > MAX_DEPTH) fg_chat_parse_fail(p, t->line, "blocks nested more than %d deep", MAX_DEPTH);
    fg_chat_node *x = NULL;
    switch (t->type) {
    case TK_COMMENT: p->pos++; break;
    case TK_TEXT:
        p->pos++;
        x = fg_chat_new_node(p, N_TEXT, t->line);
        x->s = t->s, x->n = t->n;
        break;
    case TK_OPEN_EXPR:
        p->pos++;
        x = fg_chat_new_node(p, N_OUT, t->line);
        x->a = fg_chat_parse_expr(p);
        fg_chat_expect(p, TK_CLOSE_EXPR, "}}");
        break;
    case TK_OPEN_STMT: x = parse_tag(p); break;
    default: {
        char got[64];
        describe(t, got, sizeof got);
        fg_chat_parse_fail(p, t->line, "unexpected %s outside {{ }} and {%% %%}", got);
    }
    }
    p->depth--;
    if (x) fg_chat_push(p, out, x);
}

fg_status fg_tmpl_parse(const char *src, size_t len, const char *name, fg_tmpl **out) {
    *out = NULL;
    if (!name) name = "chat_template";
    size_t bad;
    if (len > MAX_SRC) return fg_err_set(FG_EINPUT, "%s: the template is %zu bytes, more than %u", name, len, MAX_SRC);
    if (!fg_tok_utf8_valid(src, len, &bad))
        return fg_err_set(FG_EINPUT, "%s: the template is not UTF-8 (byte %zu)", name, bad);
    fg_tmpl *t = fg_xcalloc(1, sizeof *t);
    t->name = strdup(name);
    if (!t->name) fg_exit_on(fg_err_set(FG_ERUNTIME, "out of memory"));
    fg_tmpl_set_limits(t, 20000000, (size_t)256 << 20, (size_t)64 << 20);
    fg_chat_parser *p = fg_xcalloc(1, sizeof *p); /* on the heap: longjmp leaves it alone */
    p->name = t->name;
    p->arena = &t->arena;
    fg_status st = FG_OK;
    if (setjmp(p->fail)) {
        st = p->st;
        fg_tmpl_destroy(&t);
    } else {
        fg_chat_lex(p, src, len);
        while (fg_chat_peek(p, 0)->type != TK_END) parse_any(p, &t->body);
    }
    free(p);
    *out = t;
    return st;
}

void fg_tmpl_set_limits(fg_tmpl *t, size_t max_steps, size_t max_mem, size_t max_out) {
    if (max_steps) t->max_steps = max_steps;
    if (max_mem) t->max_mem = max_mem;
    if (max_out) t->max_out = max_out;
}

void fg_tmpl_destroy(fg_tmpl **p) {
    if (!*p) return;
    fg_chat_arena_free(&(*p)->arena);
    free((*p)->name);
    free(*p);
    *p = NULL;
}

/* fg_chat_int.h - what the chat template files share (fg_chat.h is the
 * interface): the arena every parse and render allocates from, the tokens
 * (fg_chat_lex.c), the syntax tree (fg_chat_parse.c, fg_chat_expr.c), the
 * values (fg_chat_val.c) and the render context (fg_chat_eval.c,
 * fg_chat_func.c).
 *
 * Errors inside a parse or a render jump (longjmp) back to fg_tmpl_parse or
 * fg_tmpl_render, which report them: everything allocated in between lives
 * in the arena, freed whole, so nothing leaks on the way out. */
#ifndef FG_CHAT_INT_H
#define FG_CHAT_INT_H

#include <setjmp.h>
#include <stdint.h>

#include "fg_chat.h"

/* ---- arena ---- */

typedef struct fg_chat_chunk fg_chat_chunk;
typedef struct {
    fg_chat_chunk *head;
    size_t used;    /* bytes handed out, all chunks */
    size_t limit;   /* 0: none */
} fg_chat_arena;

/* NULL when the limit would be passed (the caller reports it). */
void *fg_chat_alloc(fg_chat_arena *a, size_t n);
void fg_chat_arena_free(fg_chat_arena *a);

/* ---- UTF-8 ---- */

/* The code point at s (n bytes left, n > 0; the text is valid UTF-8) and its length in *len. */
uint32_t fg_chat_utf8_get(const char *s, size_t n, size_t *len);
size_t fg_chat_utf8_put(uint32_t cp, char *out); /* 1..4 bytes */
/* JavaScript's white space (String.prototype.trim's set): its byte length at s, or 0. */
size_t fg_chat_ws_at(const char *s, size_t n);
/* Byte length of the white space that ends s[0..n). */
size_t fg_chat_ws_before(const char *s, size_t n);

/* ---- tokens ---- */

enum {
    TK_TEXT, TK_COMMENT, TK_NUM, TK_STR, TK_NAME, TK_EQUALS, TK_LPAREN, TK_RPAREN, TK_OPEN_STMT,
    TK_CLOSE_STMT, TK_OPEN_EXPR, TK_CLOSE_EXPR, TK_LBRACKET, TK_RBRACKET, TK_LBRACE, TK_RBRACE, TK_COMMA,
    TK_DOT, TK_COLON, TK_PIPE, TK_ADD, TK_MUL, TK_POW, TK_CMP, TK_UNARY, TK_END
};

typedef struct {
    int type;
    int line;
    const char *s; /* value: text, name, operator, number, or the string after escapes */
    size_t n;
} fg_chat_tok;

/* Everything one parse needs; errors longjmp to `fail`. */
typedef struct {
    const char *name;
    fg_chat_arena *arena;
    jmp_buf fail;
    fg_status st;
    fg_chat_tok *toks;
    size_t ntok, pos;
    int depth; /* nesting of expressions and blocks */
} fg_chat_parser;

_Noreturn void fg_chat_parse_fail(fg_chat_parser *p, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Preprocess (trailing newline, lstrip_blocks, trim_blocks) and lex SRC into p->toks, ending with TK_END. */
void fg_chat_lex(fg_chat_parser *p, const char *src, size_t len);

/* ---- syntax tree ---- */

enum {
    /* statements */
    N_TEXT, N_OUT, N_IF, N_FOR, N_SET, N_SETBLOCK,
    /* expressions */
    E_STR, E_INT, E_FLOAT, E_CONST, E_NAME, E_LIST, E_TUPLE, E_DICT, E_ATTR, E_INDEX, E_SLICE, E_CALL, E_METHOD,
    E_FILTER, E_TEST, E_NEG, E_POS, E_NOT, E_AND, E_OR, E_BIN, E_COND, E_KWARG
};

/* Operators of E_BIN. */
enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_CAT, OP_EQ, OP_NE, OP_LT, OP_GT, OP_LE, OP_GE, OP_IN,
       OP_NOTIN };

typedef struct fg_chat_node fg_chat_node;
typedef struct {
    fg_chat_node **v;
    size_t n;
} fg_chat_nodes;

struct fg_chat_node {
    int kind;
    int line;
    int op;             /* E_BIN operator; the id of a filter, test, method or function; E_CONST's value; negation */
    const char *s;      /* text, string, name, attribute */
    size_t n;
    int64_t i;
    double f;
    fg_chat_node *a, *b, *c; /* operands; N_IF test; N_FOR target (a), iterable (b), condition (c) */
    fg_chat_nodes body;      /* statements; or items, arguments */
    fg_chat_nodes alt;       /* else statements; or dict values, keyword arguments */
};

/* Constants of E_CONST. */
enum { CONST_NONE, CONST_TRUE, CONST_FALSE };

/* Filters, tests, methods and functions, by id (fg_chat_func.c names them). */
enum { F_TRIM, F_LENGTH, F_TOJSON, F_STRING, F_DEFAULT, F_FIRST, F_LAST, F_UPPER, F_LOWER, F_JOIN, F_ITEMS, F_LIST,
       F_REVERSE, F_SAFE, F_COUNT_ };
enum { T_DEFINED, T_UNDEFINED, T_NONE, T_STRING, T_NUMBER, T_INTEGER, T_BOOLEAN, T_TRUE, T_FALSE, T_MAPPING,
       T_ITERABLE, T_SEQUENCE, T_ODD, T_EVEN, T_COUNT_ };
enum { M_STARTSWITH, M_ENDSWITH, M_STRIP, M_LSTRIP, M_RSTRIP, M_SPLIT, M_REPLACE, M_UPPER, M_LOWER, M_ITEMS, M_KEYS,
       M_VALUES, M_GET, M_COUNT_ };
enum { G_RAISE, G_NAMESPACE, G_RANGE, G_COUNT_ };

/* What a filter, method or function takes: min..max positional arguments, and keyword arguments by the names
 * in kw ("indent,sort_keys"; NULL: none). */
typedef struct {
    const char *name;
    int min, max;
    const char *kw;
} fg_chat_sig;
enum { LK_FILTER, LK_TEST, LK_METHOD, LK_FUNC };
/* The id of NAME among the filters (F_), tests (T_), methods (M_) or functions (G_), or -1; *sig its signature. */
int fg_chat_lookup(int kind, const char *s, size_t n, const fg_chat_sig **sig);

fg_chat_node *fg_chat_new_node(fg_chat_parser *p, int kind, int line);
void fg_chat_push(fg_chat_parser *p, fg_chat_nodes *l, fg_chat_node *x);
/* Expressions (fg_chat_expr.c). */
fg_chat_node *fg_chat_parse_expr(fg_chat_parser *p);
fg_chat_node *fg_chat_parse_primary(fg_chat_parser *p);
/* `a, b, ...` (a tuple when there is a comma), of expressions or (primary) of primaries. */
fg_chat_node *fg_chat_parse_seq(fg_chat_parser *p, int primary);
/* Token helpers shared by the two parser files. */
const fg_chat_tok *fg_chat_peek(const fg_chat_parser *p, size_t ahead);
int fg_chat_is_name(const fg_chat_parser *p, size_t ahead, const char *name);
const fg_chat_tok *fg_chat_expect(fg_chat_parser *p, int type, const char *what);

struct fg_tmpl {
    char *name;
    fg_chat_arena arena; /* the tree */
    fg_chat_nodes body;
    size_t max_steps, max_mem, max_out;
};

/* ---- values ---- */

enum { V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_DICT, V_NS };

typedef struct fg_chat_val fg_chat_val;
typedef struct {
    const char *k;
    size_t kn;
    fg_chat_val *v;
} fg_chat_entry;

struct fg_chat_val {
    int kind;
    union {
        int b;
        int64_t i;
        double f;
        struct { const char *p; size_t n; } s;
        struct { fg_chat_val **v; size_t n; } l;
        struct { fg_chat_entry *e; size_t n, cap; } d; /* V_DICT and V_NS (the one that changes) */
    } u;
};

extern fg_chat_val fg_chat_undef, fg_chat_none, fg_chat_true, fg_chat_false;

/* A render; errors longjmp to `fail`. */
typedef struct fg_chat_scope fg_chat_scope;
typedef struct {
    const fg_tmpl *t;
    fg_chat_arena arena; /* values, scopes */
    jmp_buf fail;
    fg_status st;
    char *out;
    size_t n, cap;
    size_t steps;
    int line;  /* of the node being evaluated, for messages */
    int depth; /* of evaluation, bounded: the C stack */
} fg_chat_ctx;

_Noreturn void fg_chat_fail(fg_chat_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void *fg_chat_ralloc(fg_chat_ctx *c, size_t n); /* from the render's arena, or fail */

fg_chat_val *fg_chat_vint(fg_chat_ctx *c, int64_t i);
fg_chat_val *fg_chat_vfloat(fg_chat_ctx *c, double f);
fg_chat_val *fg_chat_vbool(int b);
fg_chat_val *fg_chat_vstr(fg_chat_ctx *c, const char *s, size_t n); /* copies */
fg_chat_val *fg_chat_vstr_ref(fg_chat_ctx *c, const char *s, size_t n); /* does not copy: s outlives the render */
fg_chat_val *fg_chat_vlist(fg_chat_ctx *c, size_t n); /* n items, to fill in */
fg_chat_val *fg_chat_vdict(fg_chat_ctx *c, int kind);
void fg_chat_dict_set(fg_chat_ctx *c, fg_chat_val *d, const char *k, size_t kn, fg_chat_val *v);
fg_chat_val *fg_chat_dict_get(const fg_chat_val *d, const char *k, size_t kn); /* NULL if absent */
fg_chat_val *fg_chat_from_json(fg_chat_ctx *c, const json_t *j, int depth);
const char *fg_chat_kind_name(const fg_chat_val *v);
int fg_chat_truthy(const fg_chat_val *v);
int fg_chat_equal(fg_chat_ctx *c, const fg_chat_val *a, const fg_chat_val *b, int depth);

/* A growing byte string in the render's arena. */
typedef struct {
    fg_chat_ctx *c;
    char *p;
    size_t n, cap;
} fg_chat_buf;
void fg_chat_buf_add(fg_chat_buf *b, const char *s, size_t n);
fg_chat_val *fg_chat_buf_val(fg_chat_buf *b);

/* How {{ v }} prints v (nothing for none and undefined). */
void fg_chat_print(fg_chat_buf *b, const fg_chat_val *v);
/* How ~ and string + write a scalar (a float as JavaScript's Number prints it); lists and dicts fail. */
void fg_chat_concat_part(fg_chat_buf *b, const fg_chat_val *v);
/* JSON as the tojson filter writes it (json.dumps's separators, keys in order); undef_null: undefined as null. */
typedef struct {
    int indent;            /* -1: none */
    int ensure_ascii, sort_keys, undef_null;
    const char *item_sep, *key_sep;
} fg_chat_json_opts;
void fg_chat_json(fg_chat_buf *b, const fg_chat_val *v, const fg_chat_json_opts *o, int depth);
/* JavaScript's Number.prototype.toString. */
void fg_chat_js_number(double f, char out[40]);

/* ---- evaluation (fg_chat_eval.c) and the library (fg_chat_func.c) ---- */

fg_chat_val *fg_chat_eval(fg_chat_ctx *c, fg_chat_scope *s, const fg_chat_node *e);
/* Evaluated positional arguments of a call node (args->body) and keyword arguments (args->alt). */
typedef struct {
    fg_chat_val **pos;
    size_t npos;
    const fg_chat_node *const *kwn; /* E_KWARG nodes: s/n the name */
    fg_chat_val **kw;
    size_t nkw;
} fg_chat_args;
void fg_chat_eval_args(fg_chat_ctx *c, fg_chat_scope *s, const fg_chat_node *call, fg_chat_args *a);
fg_chat_val *fg_chat_filter(fg_chat_ctx *c, fg_chat_scope *s, const fg_chat_node *e, fg_chat_val *x);
int fg_chat_test(fg_chat_ctx *c, int test, const fg_chat_val *x);
fg_chat_val *fg_chat_method(fg_chat_ctx *c, fg_chat_val *obj, int m, const fg_chat_args *a);
fg_chat_val *fg_chat_func(fg_chat_ctx *c, int g, const fg_chat_args *a);
/* Code points of a string; strings are sliced and indexed by them. */
size_t fg_chat_cp_count(const char *s, size_t n);
/* String methods and filters (fg_chat_str.c): trim (JavaScript's white space, or with CHARS those code points),
 * split, replace, case. */
fg_chat_val *fg_chat_str_strip(fg_chat_ctx *c, const fg_chat_val *x, const fg_chat_val *chars, int left, int right);
fg_chat_val *fg_chat_str_split(fg_chat_ctx *c, const fg_chat_val *x, const fg_chat_val *sep, int64_t maxsplit);
fg_chat_val *fg_chat_str_replace(fg_chat_ctx *c, const fg_chat_val *x, const fg_chat_val *from, const fg_chat_val *to,
                                 int64_t count);
fg_chat_val *fg_chat_str_case(fg_chat_ctx *c, const fg_chat_val *x, int upper);
fg_chat_val *fg_chat_slice(fg_chat_ctx *c, const fg_chat_val *x, const fg_chat_val *start, const fg_chat_val *stop,
                           const fg_chat_val *step);

#endif

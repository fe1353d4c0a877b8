/* test_chat.c - the chat template tests' driver (tokenizer/fg_chat.h).
 *   test_chat render TEMPLATE VARS.json     the rendering on stdout; an error on stderr, exit 2
 *   test_chat batch CASES.json OUT.json     CASES: [{"template": ..., "vars": {...}}, ...] ->
 *                                           OUT: [{"out": "..."} or {"error": "..."}, ...] in order
 *   test_chat refuse CASES.json             CASES: [{"template": ..., "error": "substring"}, ...]: each
 *                                           is refused by fg_tmpl_parse with FG_EINPUT and a message
 *                                           holding the substring
 *   test_chat unit                          known answers: the bounds, render-time errors, the parts
 *                                           where this departs from @huggingface/jinja on purpose
 * Exit 0 when all pass. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fg_chat.h"
#include "fg_test.h"

static int failures;

/* Render src with vars (JSON text); *err gets the message on failure. Returns the output or NULL. */
static char *render(const char *src, const char *vars_json, fg_status *st_out, char *err, size_t errlen) {
    fg_tmpl *t;
    json_t *vars = json_loads(vars_json, 0, NULL);
    if (!vars) {
        fprintf(stderr, "bad test vars: %s\n", vars_json);
        exit(1);
    }
    char *out = NULL;
    fg_status st = fg_tmpl_parse(src, strlen(src), "t", &t);
    if (!st) {
        st = fg_tmpl_render(t, vars, &out, NULL);
        fg_tmpl_destroy(&t);
    }
    if (st) snprintf(err, errlen, "%s", fg_err_msg());
    if (st_out) *st_out = st;
    json_decref(vars);
    return out;
}

static void expect_out(const char *src, const char *vars, const char *want) {
    char err[1024] = "";
    fg_status st;
    char *out = render(src, vars, &st, err, sizeof err);
    CHECK(out && !strcmp(out, want), "%s with %s: got '%s' (%s), want '%s'", src, vars, out ? out : "(none)", err, want);
    free(out);
}

static void expect_err(const char *src, const char *vars, const char *want) {
    char err[1024] = "";
    fg_status st;
    char *out = render(src, vars, &st, err, sizeof err);
    CHECK(!out && st == FG_EINPUT && strstr(err, want), "%s with %s: got '%s' / '%s', want an error with '%s'", src,
          vars, out ? out : "(none)", err, want);
    free(out);
}

static int unit(void) {
    /* where this follows Python's Jinja2 rather than the JavaScript (fg_chat.h) */
    expect_out("{{ '  \\nx\\n '.strip('\\n') }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'xxaxx'.rstrip('x') }}", "{}",
               "  \nx\n |axx|xxa");
    expect_out("{{ 'ab'.strip('') }}|{{ ' a '.strip(none) }}", "{}", "ab|a");
    expect_out("{{ 1 == '1' }} {{ [1, 2] == [1, 2] }} {{ {'a': 1} == {'a': 1} }} {{ 1 == 1.0 }}", "{}",
               "false true true true");
    expect_out("{{ -7 % 3 }} {{ 7 % -3 }} {{ -7 // 2 }} {{ -7.5 % 2 }}", "{}", "2 -2 -4 0.5");
    /* Unicode by code points */
    expect_out("{{ 'h\xc3\xa9\xf0\x9f\x98\x80x'|length }} {{ 'h\xc3\xa9\xf0\x9f\x98\x80x'[2] }} "
               "{{ 'h\xc3\xa9\xf0\x9f\x98\x80x'[::-1] }}", "{}",
               "4 \xf0\x9f\x98\x80 x\xf0\x9f\x98\x80\xc3\xa9h");
    expect_out("{{ '\\u00e9\\ud83d\\ude00'|upper }}", "{}", "\xc3\x89\xf0\x9f\x98\x80");
    /* render-time errors name the line */
    expect_err("a\n{{ raise_exception('Roles must alternate') }}", "{}", "t:2: raise_exception: Roles must alternate");
    expect_err("{{ x + 1 }}", "{}", "t:1: '+' on an undefined value");
    expect_err("{{ none ~ 'a' }}", "{}", "'~' on none");
    expect_err("{{ 1 / 0 }}", "{}", "division by zero");
    expect_err("{{ 9223372036854775807 + 1 }}", "{}", "integer overflow");
    expect_err("{{ 'a'|first }}", "{}", "filter 'first' cannot take a string");
    expect_err("{{ 'a'.items() }}", "{}", "method 'items' is not one of a string's");
    expect_err("{% set x.a = 1 %}", "{\"x\": {}}", "only of a namespace");
    expect_err("{% for a, b in [1] %}{% endfor %}", "{}", "cannot unpack a integer into 2 names");
    expect_err("{{ 'a'[1:2:0] }}", "{}", "step cannot be zero");
    /* the bounds: a template is outside input */
    {
        fg_tmpl *t;
        const char *src = "{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}";
        CHECK(!fg_tmpl_parse(src, strlen(src), "t", &t), "parse: %s", fg_err_msg());
        fg_tmpl_set_limits(t, 5000, 0, 0);
        json_t *v = json_object();
        char *out = NULL;
        CHECK(fg_tmpl_render(t, v, &out, NULL) == FG_EINPUT && strstr(fg_err_msg(), "more than 5000 steps"),
              "steps: %s", fg_err_msg());
        fg_tmpl_set_limits(t, 100000, 0, 0);
        CHECK(!fg_tmpl_render(t, v, &out, NULL) && !strcmp(out, ""), "100x100 loops: %s", fg_err_msg());
        free(out);
        json_decref(v);
        fg_tmpl_destroy(&t);
    }
    expect_err("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}"
               "{% endfor %}", "{}", "MiB of memory");
    expect_err("{% set ns = namespace(l=[]) %}{% for i in range(300) %}{% set ns.l = [ns.l] %}{% endfor %}"
               "{{ ns.l|tojson }}", "{}", "nested more than");
    expect_err("{{ range(100000000)|length }}", "{}", "more than 10000000 numbers");
    {
        char vars[2048] = "{\"x\": ";
        for (int i = 0; i < 300; i++) strcat(vars, "[");
        for (int i = 0; i < 300; i++) strcat(vars, "]");
        strcat(vars, "}");
        expect_err("{{ x }}", vars, "nested more than");
    }
    {
        size_t n = 5000;
        char *deep = malloc(3 * n + 16);
        strcpy(deep, "{{ ");
        for (size_t i = 0; i < n; i++) strcat(deep, "(");
        strcat(deep, "1");
        for (size_t i = 0; i < n; i++) strcat(deep, ")");
        strcat(deep, " }}");
        fg_tmpl *t;
        CHECK(fg_tmpl_parse(deep, strlen(deep), "t", &t) == FG_EINPUT && strstr(fg_err_msg(), "nested"),
              "5000 parentheses: %s", fg_err_msg());
        free(deep);
    }
    /* a render of a template is independent of the one before */
    {
        fg_tmpl *t;
        const char *src = "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}"
                          "{{ ns.n }}";
        CHECK(!fg_tmpl_parse(src, strlen(src), "t", &t), "parse: %s", fg_err_msg());
        json_t *v = json_loads("{\"messages\": [1, 2, 3]}", 0, NULL);
        for (int i = 0; i < 2; i++) {
            char *out;
            size_t len;
            CHECK(!fg_tmpl_render(t, v, &out, &len) && len == 1 && !strcmp(out, "3"), "render %d", i);
            free(out);
        }
        json_decref(v);
        fg_tmpl_destroy(&t);
    }
    printf("%s: unit, %d failure(s)\n", failures ? "FAIL" : "ok", failures);
    return failures != 0;
}

static int batch(const char *in, const char *outp) {
    json_error_t e;
    json_t *cases = json_load_file(in, 0, &e), *res = json_array();
    if (!json_is_array(cases)) return fprintf(stderr, "%s: %s\n", in, e.text), 1;
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c) {
        json_t *tj = json_object_get(c, "template"), *vars = json_object_get(c, "vars");
        fg_tmpl *t;
        char *out = NULL;
        size_t len = 0;
        fg_status st = fg_tmpl_parse(json_string_value(tj), json_string_length(tj), "t", &t);
        if (!st) {
            st = fg_tmpl_render(t, vars, &out, &len);
            fg_tmpl_destroy(&t);
        }
        json_array_append_new(res, st ? json_pack("{s:s}", "error", fg_err_msg())
                                       : json_pack("{s:s%}", "out", out, len));
        free(out);
    }
    int rc = json_dump_file(res, outp, JSON_INDENT(1) | JSON_ENSURE_ASCII) != 0;
    json_decref(cases);
    json_decref(res);
    return rc;
}

static int refuse(const char *in) {
    json_error_t e;
    json_t *cases = json_load_file(in, 0, &e);
    if (!json_is_array(cases)) return fprintf(stderr, "%s: %s\n", in, e.text), 1;
    size_t i, ok = 0;
    json_t *c;
    json_array_foreach(cases, i, c) {
        const char *src = json_string_value(json_object_get(c, "template"));
        const char *want = json_string_value(json_object_get(c, "error"));
        fg_tmpl *t;
        fg_status st = fg_tmpl_parse(src, strlen(src), "chat_template", &t);
        if (st == FG_EINPUT && strstr(fg_err_msg(), want)) {
            ok++;
            continue;
        }
        CHECK(0, "case %zu: %s: got %s, want a refusal with '%s'", i, src, st ? fg_err_msg() : "no refusal", want);
        fg_tmpl_destroy(&t);
    }
    printf("%s: %zu of %zu templates refused as expected\n", failures ? "FAIL" : "ok", ok, json_array_size(cases));
    json_decref(cases);
    return failures != 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "unit")) return unit();
    if (argc == 4 && !strcmp(argv[1], "batch")) return batch(argv[2], argv[3]);
    if (argc == 3 && !strcmp(argv[1], "refuse")) return refuse(argv[2]);
    if (argc == 4 && !strcmp(argv[1], "render")) {
        char *src;
        size_t n;
        fg_status st = fg_read_file(argv[2], &src, &n);
        json_error_t e;
        json_t *vars = st ? NULL : json_load_file(argv[3], 0, &e);
        fg_tmpl *t = NULL;
        char *out = NULL;
        size_t len = 0;
        if (!st && !vars) st = fg_err_set(FG_EINPUT, "%s: %s", argv[3], e.text);
        if (!st) st = fg_tmpl_parse(src, n, argv[2], &t);
        if (!st) st = fg_tmpl_render(t, vars, &out, &len);
        if (!st) fwrite(out, 1, len, stdout);
        else fprintf(stderr, "error: %s\n", fg_err_msg());
        free(out);
        free(src);
        fg_tmpl_destroy(&t);
        json_decref(vars);
        return st ? 2 : 0;
    }
    fprintf(stderr, "usage: test_chat render TEMPLATE VARS.json | batch CASES OUT | refuse CASES | unit\n");
    return 2;
}

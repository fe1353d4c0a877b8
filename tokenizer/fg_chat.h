/* fg_chat.h - chat templates: the subset of Jinja that Hugging Face chat
 * templates (tokenizer_config.json's "chat_template") are written in, parsed
 * once and rendered once per conversation.
 *
 * The reference is @huggingface/jinja, the JavaScript Jinja that Hugging Face
 * renders chat templates with, in its chat-template setting (trim_blocks and
 * lstrip_blocks on, one trailing newline of the template dropped). The tests
 * render real templates (Llama 3, Qwen3) and one unit template per construct
 * with it and require the same bytes. Supported:
 *  - {{ expr }}, {% if/elif/else/endif %}, {% for x in xs %} (also
 *    `for k, v in d.items()`, `for x in xs if cond`, {% else %}; `loop.index`,
 *    index0, revindex, revindex0, first, last, length, previtem, nextitem),
 *    {% set x = ... %}, {% set a, b = ... %}, {% set ns.attr = ... %},
 *    {% set x %}...{% endset %}, {% generation %}...{% endgeneration %} (the
 *    marker transformers puts around assistant text: its body renders),
 *    comments, whitespace control ({%- -%} {{- -}} {#- -#});
 *  - literals (strings with escapes, integers, floats, true/false/none in
 *    either case, lists, dicts, tuples), names, attribute and item access,
 *    slices, + - * / // % ~, comparisons, and/or/not, in/not in,
 *    `x if c else y`;
 *  - tests: defined undefined none string number integer boolean true false
 *    mapping iterable sequence odd even;
 *  - filters: trim length tojson string default first last upper lower join
 *    items list reverse safe;
 *  - methods: startswith endswith strip lstrip rstrip split replace upper
 *    lower (strings), items keys values get (dicts);
 *  - functions: raise_exception(msg), namespace(...), range(...).
 * Anything else (a tag such as include or macro, an unknown filter, test,
 * method or function, `**`) is refused by fg_tmpl_parse with FG_EINPUT naming
 * the construct and its line: "NAME:12: unsupported filter 'wordwrap'".
 *
 * Where @huggingface/jinja departs from Python's Jinja2 (which transformers
 * renders with, and so what models were trained on) in a way that reaches
 * real templates, this follows Python: strip/lstrip/rstrip with an argument
 * strip those characters (the JavaScript ignores the argument and strips
 * white space), == between different types is false (no JavaScript loose
 * equality), % takes the sign of the divisor, and strings are indexed,
 * sliced and measured in code points (the JavaScript measures and indexes
 * UTF-16 units). Where the JavaScript fails outright (a loop over a string or
 * an undefined value, < between strings, an integer key on a dict) this
 * renders as Jinja2 does. It follows the JavaScript in how values print: none
 * and undefined print nothing, booleans print as true/false, lists and dicts
 * as JSON. upper/lower use one-to-one case mappings (so 'ß' stays 'ß').
 *
 * Rendering is bounded (steps, memory, output, nesting): a template is outside
 * input, so a loop that does not end or a value that grows without bound is
 * FG_EINPUT, never a hang or a crash. An fg_tmpl is immutable after parsing:
 * several threads may render one at the same time. */
#ifndef FG_CHAT_H
#define FG_CHAT_H

#include <jansson.h>
#include <stddef.h>

#include "fg_common.h"

typedef struct fg_tmpl fg_tmpl;

/* Parse a template; NAME is used in messages ("tokenizer_config.json:chat_template" or a --chat-template path). */
fg_status fg_tmpl_parse(const char *src, size_t len, const char *name, fg_tmpl **out);
void fg_tmpl_destroy(fg_tmpl **p);

/* Render with VARS, a JSON object: {"messages": [...], "add_generation_prompt": bool, "bos_token": "...",
 * "eos_token": "...", ...}. *out malloc'd, NUL-terminated. raise_exception('msg') in the template is FG_EINPUT
 * "NAME:LINE: raise_exception: msg"; so is any error of evaluation (wrong types, the bounds). */
fg_status fg_tmpl_render(const fg_tmpl *t, const json_t *vars, char **out, size_t *len);

/* The bounds of one render (defaults: 20 million steps, 256 MiB of values, 64 MiB of output); 0 keeps a bound
 * as it is. For the fuzzer, which wants small ones. */
void fg_tmpl_set_limits(fg_tmpl *t, size_t max_steps, size_t max_mem, size_t max_out);

#endif

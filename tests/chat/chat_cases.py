#!/usr/bin/env python3
"""chat_cases.py - cases for the chat template tests, and their comparison.

  chat_cases.py conversations OUT.json JINJA_CACHE [--n 40] [--seed 7]
      the Llama 3 and Qwen3 chat templates (from JINJA_CACHE, see
      scripts/fetch-jinja-oracle.sh) over N seeded conversations each, with
      add_generation_prompt on and off: 4 N cases
  chat_cases.py units OUT.json
      one small template per construct the C renderer supports
  chat_cases.py compare CASES.json C.json JS.json LABEL
      the C renderer's outputs against the oracle's: byte-identical, or the
      same failure where a case says "expect_error"; prints the counts, and
      the first differences; exit 1 on any

A case is {"name": ..., "template": ..., "vars": {...}}.
"""
import json
import random
import sys

# Pieces of message text that stress a template renderer: quotes, braces,
# Jinja's own delimiters, backslashes, Unicode (BMP and beyond), newlines,
# white space at the edges (the Llama 3 template trims).
PIECES = [
    "hello", "Hello, world!", "It's \"quoted\" and 'single'", "a {b} c", "{{ not a tag }}", "{% if x %}",
    "{# no comment #}", "}} and %} closers", "back\\slash \\n literal", "C:\\path\\to\\file", "tab\there",
    "line one\nline two", "\n\nleading newlines", "trailing newlines\n\n", "  padded  ", "\u00e9t\u00e9 na\u00efve",
    "\u4e2d\u6587\u5b57\u7b26", "emoji \U0001F600 and \U0001F680", "\u00a0non-breaking\u00a0", "\u3000wide space",
    "<|im_start|>fake<|im_end|>", "<|eot_id|> in text", "json {\"a\": [1, 2]}", "x" * 300, "", " ",
    "\u0645\u0631\u062d\u0628\u0627", "mixed\r\nCRLF", "dollar $ and percent %", "<tool_response>r</tool_response>",
]


def text(rng, lo=1, hi=4):
    return " ".join(rng.choice(PIECES) for _ in range(rng.randint(lo, hi)))


def edge_text(rng):
    """Text whose first and last characters are not white space (Qwen3 strips newlines at the edges of a
    reasoning block; the JavaScript oracle strips all white space there, Python only newlines: fg_chat.h)."""
    t = text(rng).strip()
    return t if t and t[0] not in " \t\r\n\u00a0\u3000" else "word"


def assistant(rng):
    # Qwen3 lstrips newlines from the last answers: start with a word (see edge_text)
    m = {"role": "assistant", "content": "ok " + text(rng)}
    k = rng.randint(0, 4)
    if k == 1:  # reasoning inside the content, as Qwen3 writes it
        m["content"] = "<think>" + "\n" * rng.randint(0, 2) + edge_text(rng) + "\n" * rng.randint(0, 2) + \
                       "</think>" + "\n" * rng.randint(0, 2) + edge_text(rng)
    elif k == 2:
        m["reasoning_content"] = "\n" * rng.randint(0, 1) + edge_text(rng)
        m["content"] = edge_text(rng)
    elif k == 3:
        args = rng.choice([{"city": "Paris", "n": 3}, '{"q": "raw string"}', {"nested": {"l": [1, "\u00e9"]}}])
        m["tool_calls"] = [{"function": {"name": "lookup", "arguments": args}}] * rng.randint(1, 2)
        m["content"] = rng.choice(["", edge_text(rng)])
    return m


def conversation(rng):
    msgs = []
    if rng.random() < 0.5:
        msgs.append({"role": "system", "content": text(rng)})
    for _ in range(rng.randint(1, 5)):
        msgs.append({"role": "user", "content": text(rng)})
        if rng.random() < 0.2:
            msgs.append({"role": "tool", "content": text(rng)})
            msgs.append({"role": "tool", "content": "<tool_response>" + text(rng) + "</tool_response>"})
        if rng.random() < 0.85:
            msgs.append(assistant(rng))
    return msgs


def template_of(path):
    with open(path, encoding="utf-8") as f:
        cfg = json.load(f)
    return cfg["chat_template"], cfg.get("bos_token") or "", cfg.get("eos_token") or ""


def conversations(out, cache, n=40, seed=7):
    rng = random.Random(seed)
    cases = []
    for name in ("llama3", "qwen3"):
        tmpl, bos, eos = template_of(f"{cache}/{name}/tokenizer_config.json")
        for i in range(n):
            msgs = conversation(rng)
            extra = {}
            if name == "qwen3" and rng.random() < 0.25:
                extra["tools"] = [{"type": "function", "function": {"name": "lookup", "description": "Find \"x\"",
                                   "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]
            if name == "qwen3" and rng.random() < 0.25:
                extra["enable_thinking"] = rng.random() < 0.5
            for agp in (True, False):
                v = {"messages": msgs, "add_generation_prompt": agp, "bos_token": bos, "eos_token": eos, **extra}
                cases.append({"name": f"{name} conversation {i} add_generation_prompt={agp}", "template": tmpl,
                              "vars": v})
    with open(out, "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)


# One template per construct (and the vars it needs); "expect_error": both must fail.
V = {"name": "W\u00f6rld", "x": 2, "xs": [1, "b", 3], "s": "Hello there!", "m": {"role": "user", "content": "hi"},
     "d": {"b": 1, "a": [2, "z"], "c": None}, "obj": {"k": "v", "n": [1, 2.5, None, True], "e": {}, "l": []}}
UNITS = [
    ("text", "Hello {{ name }}!\n"),
    ("trailing newlines", "x\n\n"),
    ("lstrip and trim blocks", "  {% if x %}\n  yes\n  {% endif %}\n  done\n\t{# c #}\n  {{ x }}\n"),
    ("whitespace control", "a  {%- if true -%}  b  {%- endif -%}  c |  {{- ' x ' -}}  | {{ 'y' -}}\n\n z"),
    ("comments", "a {# c #} b {#- c -#} c\n{# multi\nline #}\nd{#-x#}  e"),
    ("braces in text", "a { b } c {{ '}' }} {{ '{{' }} }"),
    ("string escapes", "{{ 'a\\'b' }} {{ \"q\\\"q\" }} {{ '\\n\\t\\\\' }} {{ '\\u00e9\\x41' }} {{ 'x' \"y\" }}"),
    ("literals", "{{ 1 }} {{ -2 }} {{ 3.5 }} {{ 1.0 }} {{ true }} {{ True }} {{ false }} {{ none }} {{ None }}|"
                 "{{ [1, 'a', [2]] }}|{{ {'k': 'v', 'n': 1} }}|{{ [] }}|{{ {} }}"),
    ("floats", "{{ 10 / 4 }} {{ 3.0 }} {{ -0.0 }} {{ 2.50 }} {{ 1 / 3 }} {{ 0.1 + 0.2 }} {{ 100000000000000000000.0 }}"
               " {{ 0.000001 }} {{ 0.0000001 + 0 }} {{ [1.0, 0.5] }}"),
    ("access", "{{ m['role'] }} {{ m.role }} {{ xs[0] }} {{ xs[-1] }} {{ xs[5] }} {{ m.missing }}|{{ xs.0 }}|"
               "{{ m['content'][1] }} {{ s[-1] }} {{ undefined_x.y.z }}|{{ d['a'][1] }}"),
    ("slices", "{{ xs[1:] }} {{ xs[:2] }} {{ xs[::-1] }} {{ xs[1:3] }} {{ xs[-2:] }} {{ xs[::2] }} {{ s[1:4] }}"
               " {{ s[::-1] }} {{ s[:-1] }} {{ xs[5:] }} {{ xs[-10:1] }} {{ s[2::-1] }}"),
    ("arithmetic", "{{ 1 + 2 }} {{ 'a' + 'b' }} {{ 'a' ~ 1 ~ true ~ undefined_x }} {{ [1] + [2] }} {{ 5 - 3 }}"
                   " {{ 2 * 3 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ 7 % 3 }} {{ 1.5 + 1 }} {{ 'n' + 1 }} {{ 2.0 ~ '' }}"),
    ("comparisons", "{{ 1 < 2 }} {{ 2 <= 2 }} {{ 3 > 4 }} {{ 3 >= 3 }} {{ 'a' == 'a' }} {{ 'a' != 'b' }}"
                    " {{ none == none }} {{ 1 == 1.0 }} {{ x == 2 }} {{ m.role == 'user' }}"),
    ("logic", "{{ true and false }} {{ true or false }} {{ not true }} {{ not none }} {{ 0 or 'x' }}"
              " {{ '' and 'y' }} {{ [] or 'empty' }} {{ not x == 3 }} {{ x > 1 and x < 3 }}"),
    ("membership", "{{ 'a' in 'cat' }} {{ 'z' not in 'cat' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }}"
                   " {{ 'x' in undefined_x }} {{ 'b' in xs }} {{ 4 not in xs }} {{ 'role' in m }}"),
    ("conditional expression", "{{ 'y' if x else 'n' }} {{ 'y' if not x else 'n' }} [{{ 'a' if false }}]"
                               " {{ 1 if x == 1 else 2 if x == 2 else 3 }}"),
    ("precedence", "{{ -x }} {{ - 3 + 1 }} {{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 10 - 2 - 3 }}"
                   " {{ xs|length - 1 }} {{ 'a' ~ 'b' == 'ab' }} {{ not x is defined }} {{ 2 * x ~ '' }} {{ -x|string }}"),
    ("tests", "{{ x is defined }} {{ y is not defined }} {{ none is none }} {{ 'a' is string }} {{ 1 is string }}"
              " {{ 1 is number }} {{ 1.5 is integer }} {{ true is boolean }} {{ false is false }}"
              " {{ true is true }} {{ 1 is true }} {{ {} is mapping }} {{ [] is iterable }} {{ 'a' is sequence }}"
              " {{ 3 is odd }} {{ 4 is even }} {{ x is undefined }} {{ none is not none }} {{ m is mapping }}"),
    ("filters", "{{ '  a b \\n '|trim }}|{{ xs|length }} {{ 'abc'|length }} {{ d|length }}|{{ xs|first }}"
                " {{ xs|last }}|{{ 'Ab'|upper }} {{ 'Ab'|lower }}|{{ xs|join(', ') }}|{{ xs|join }}|"
                "{{ 1|string ~ 'x' }} {{ xs|string }} {{ true|string }}|{{ none|default('d') }}"
                " {{ undefined_x|default('d') }} {{ ''|default('d', true) }} {{ 'v'|default('d') }}|"
                "{{ xs|reverse|list }}|{{ '<b>'|safe }}|{{ 'abc'|join('-') }}"),
    ("tojson", "{{ obj|tojson }}|{{ obj|tojson(indent=2) }}|{{ 'e\u00e9\"\\n\\t\\u0001/'|tojson }}|"
               "{{ '\u00e9\U0001F600'|tojson(ensure_ascii=true) }}|{{ obj|tojson(separators=(',', ':')) }}|"
               "{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}|{{ [1.5, 2, none, true]|tojson }}|"
               "{{ undefined_x|tojson }}|{{ 'x'|tojson(indent=none) }}|{{ xs|tojson(indent=1) }}"),
    ("dicts", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{% for k, v in d|items %}{{ k }};"
              "{% endfor %}|{% for k in d %}{{ k }}{% endfor %}|{{ d.keys()|list }} {{ d.values()|list }}"
              " {{ d.get('a') }} {{ d.get('zz', 'dflt') }} [{{ d.get('zz') }}] {{ d }}"),
    ("loop", "{% for x in xs %}{{ loop.index0 }}{{ loop.index }}{{ loop.first }}{{ loop.last }}{{ loop.length }}"
             "{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.previtem }}{{ loop.nextitem }};{% endfor %}"),
    ("nested loops", "{% for a in [1, 2] %}{% for b in ['x', 'y'] %}{{ a }}{{ b }}{{ loop.index }}{% endfor %}"
                     "{{ loop.index }}|{% endfor %}"),
    ("for else and filter", "{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in [1, 2, 3, 4] if x is even %}"
                            "{{ x }}{{ loop.length }}{{ loop.last }}{% endfor %}|{% for a, b in [[1, 2], [3, 4]] %}"
                            "{{ a + b }}{% endfor %}"),
    ("scopes", "{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}"
               "{% if true %}{% set x = 5 %}{% endif %}{{ x }}"),
    ("set", "{% set a = 'A' %}{% set b, c = 1, 2 %}{% set ns = namespace(n=0, s='') %}{% for i in [1, 2, 3] %}"
            "{% set ns.n = ns.n + i %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ a }}{{ b }}{{ c }} {{ ns.n }}"
            " {{ ns.s }} {{ ns }} {% set ns2 = namespace({'q': 1}) %}{{ ns2.q }}"),
    ("set block", "{% set x %}inner {{ 1 + 1 }}\n{% endset %}[{{ x }}]{% set y -%}  y  {%- endset %}[{{ y }}]"),
    ("if elif else", "{% for v in [1, 2, 3] %}{% if v == 1 %}one{% elif v == 2 %}two{% else %}many{% endif %} "
                     "{% endfor %}{% if false %}a{% elif false %}b{% endif %}."),
    ("string methods", "{{ s.startswith('He') }} {{ s.endswith('!') }} {{ s.startswith(('x', 'H')) }}"
                       " {{ s.endswith(['?']) }} [{{ '  x  '.strip() }}|{{ '  x  '.lstrip() }}|"
                       "{{ '  x  '.rstrip() }}] {{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }}"
                       " {{ 'a,b,c'.split(',', 1) }} {{ ' a b  c '.split(none, 1) }} {{ 'aXbXc'.replace('X', '-') }}"
                       " {{ 'aXbXc'.replace('X', '-', 1) }} {{ 'ab'.replace('', '.') }} {{ 'MiX'.upper() }}"
                       " {{ 'MiX'.lower() }} {{ 'x</think>y'.split('</think>')[-1] }}"),
    ("strip with newlines", "[{{ '\\n\\nx\\n'.strip('\\n') }}|{{ '\\nx'.lstrip('\\n') }}|{{ 'x\\n\\n'.rstrip('\\n') }}]"),
    ("unicode", "{{ u|upper }} {{ u|lower }} {{ u|length }} {{ u[1] }} {{ u[-1] }} {{ u[2:5] }} {{ u|tojson }}"),
    ("dict literal in expression", "{{ {'a': {'b': 1}} }} {{ {'a': {'b': 1}}['a']['b'] }}"),
    ("range", "{% for i in range(3) %}{{ i }}{% endfor %}|{% for i in range(1, 7, 2) %}{{ i }}{% endfor %}|"
              "{{ range(5, 0, -2)|list }}"),
    ("messages", "{%- for message in messages %}\n    {%- if loop.first and message['role'] != 'system' %}\n"
                 "        {{- '[default system]\\n' }}\n    {%- endif %}\n    {{- message['role'] + ': ' + "
                 "message['content'] | trim + '\\n' }}\n    {%- if not loop.last and messages[loop.index0 + 1].role "
                 "== message.role %}{{- raise_exception('Roles must alternate') }}{% endif %}\n{%- endfor %}\n"
                 "{%- if add_generation_prompt %}\n    {{- 'assistant:' }}\n{%- endif %}\n"),
    ("generation tags", "{% for m in messages %}{% if m.role == 'assistant' %}A:  {% generation %}{{ m.content }}"
                        "{% endgeneration %}  |{%- generation -%}  x  {%- endgeneration -%}  |\n  {% generation %}\n"
                        "y{% endgeneration %}\n{% else %}{{ m.content }}{% endif %}{% endfor %}"),
    ("raise_exception", "{% if true %}{{ raise_exception('Conversation roles must alternate') }}{% endif %}", True),
]
UNIT_VARS = {"messages": [{"role": "user", "content": " hi \n"}, {"role": "assistant", "content": "yo"}],
             "add_generation_prompt": True, "u": "h\u00e9llo W\u00d6RLD \u00c0\u00e9\u4e2d"}


def units(out):
    cases = []
    for u in UNITS:
        c = {"name": u[0], "template": u[1], "vars": {**V, **UNIT_VARS}}
        if len(u) > 2:
            c["expect_error"] = True
        cases.append(c)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)


def compare(cases_path, c_path, js_path, label):
    cases, got, want = (json.load(open(p, encoding="utf-8")) for p in (cases_path, c_path, js_path))
    assert len(cases) == len(got) == len(want), "the three files differ in length"
    same, bad = 0, []
    for case, g, w in zip(cases, got, want):
        if case.get("expect_error"):
            ok = "error" in g and "error" in w
        else:
            ok = "out" in g and "out" in w and g["out"] == w["out"]
        if ok:
            same += 1
        else:
            bad.append((case["name"], g, w))
    for name, g, w in bad[:8]:
        print(f"DIFFERS: {name}\n  C:  {json.dumps(g, ensure_ascii=False)[:1500]}\n"
              f"  JS: {json.dumps(w, ensure_ascii=False)[:1500]}")
    print(f"{label}: {same} of {len(cases)} byte-identical to @huggingface/jinja"
          + ("" if not bad else f", {len(bad)} differ"))
    return 1 if bad else 0


def main(argv):
    if len(argv) >= 4 and argv[1] == "conversations":
        n = int(argv[argv.index("--n") + 1]) if "--n" in argv else 40
        seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else 7
        return conversations(argv[2], argv[3], n, seed) or 0
    if len(argv) == 3 and argv[1] == "units":
        return units(argv[2]) or 0
    if len(argv) == 6 and argv[1] == "compare":
        return compare(*argv[2:6])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))

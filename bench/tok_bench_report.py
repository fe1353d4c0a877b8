#!/usr/bin/python3
"""The tokenizer benchmarks' report (bench_tokenizer.sh, bench_tokenizer_hf.sh):
for each NAME, WORK/NAME.c.json (flexgen-tok-bench) beside WORK/NAME.js.json
(the JavaScript side, whose token count must be the same): MB/s medians of
the C tokenizer with its word cache on and off and of the JavaScript one.

  tok_bench_report.py WORK NAME... [--gpt2]

--gpt2 (GPT-2 against gpt-3-encoder): every ratio, and exit 1 unless the C
tokenizer reaches 5 MB/s and is faster than JS, cache on and off, on every
corpus. Without it (tokenizer.json models): the load times too.
"""
import json
import sys


def main():
    args = sys.argv[1:]
    gpt2 = "--gpt2" in args
    work, *names = [a for a in args if a != "--gpt2"]
    ok = True
    for name in names:
        c = json.load(open(f"{work}/{name}.c.json"))
        js = json.load(open(f"{work}/{name}.js.json"))
        assert c["tokens"] == js["tokens"], f"{name}: token counts differ: C {c['tokens']}, JS {js['tokens']}"
        cm, nm, jm = c["cache_median_mbps"], c["nocache_median_mbps"], js["median_mbps"]
        head = (f"{name}: {c['docs']} documents, {c['bytes'] / 1e6:.2f} MB, {c['tokens']} tokens; {c['runs']} runs "
                f"each on one core (PCRE2 JIT: {c['jit']}, node {js['node']})")
        print(head if gpt2 else head + f"; load: C {c['load_s']:.2f} s, JS {js['load_s']:.2f} s")
        print(f"  C, word cache on    {cm:8.2f} MB/s  median of {c['cache_mbps']}")
        print(f"  C, word cache off   {nm:8.2f} MB/s  median of {c['nocache_mbps']}")
        print(f"  {'JavaScript encoder' if gpt2 else 'JavaScript':18s}  {jm:8.2f} MB/s  median of {js['mbps']}")
        if gpt2:
            print(f"  ratios: C cache / JS {cm / jm:.1f}x, C no cache / JS {nm / jm:.1f}x, "
                  f"cache / no cache {cm / nm:.2f}x")
            ok = ok and min(cm, nm) >= 5 and min(cm, nm) > jm
        else:
            print(f"  ratios: C / JS {cm / jm:.1f}x (cache off: {nm / jm:.1f}x)")
    if gpt2:
        print(f"target (>= 5 MB/s and faster than JS, cache on and off): {'met' if ok else 'NOT met'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

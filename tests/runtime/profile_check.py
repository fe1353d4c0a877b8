#!/usr/bin/python3
"""Check a worker's `--profile --json` output: exactly one line on stdout,
one JSON object (parsed here, independently of the jansson that wrote it),
with the keys the cost model reads for that role, every number finite and
> 0 (booleans apart). The key lists follow the comments at the top of
gpu_worker/gpu_profile.c and cpu_worker/cpu_profile.c.

    profile_check.py gpu|cpu MODEL FILE
"""
import json
import math
import sys

SCALARS = {
    "gpu": ["hidden", "ffn", "heads", "attn_decode_GBps", "attn_prefill_TFLOPS", "h2d_GBps", "d2h_GBps",
            "copy_bytes", "max_rows", "gpu_mem_bytes"],
    "cpu": ["hidden", "heads", "threads", "attn_decode_GBps", "mem_GBps", "mem_bytes"],
}
MM_ROWS = [1 << i for i in range(12)]   # 1 .. 2048
Q4_ROWS = [1, 4, 16, 64, 256, 1024]
FMT_ROWS = [1 << i for i in range(9)] + [1024]   # 1 .. 256, 1024
FORMATS = ["Q4_0", "Q4_K", "Q5_K", "Q6_K", "Q8_0"]   # the default --formats (opt-125m holds every one)


def positive(where, x):
    assert isinstance(x, (int, float)) and not isinstance(x, bool), f"{where}: {x!r} is not a number"
    assert math.isfinite(x) and x > 0, f"{where}: {x!r} is not finite and > 0"


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in SCALARS:
        sys.exit("usage: profile_check.py gpu|cpu MODEL FILE")
    role, model, path = sys.argv[1:]
    text = open(path).read()
    lines = text.splitlines()
    assert len(lines) == 1, f"stdout has {len(lines)} lines, want one JSON object:\n{text[:500]}"
    p = json.loads(text)   # refuses anything after the object
    assert isinstance(p, dict), type(p)
    assert p["model"] == model, p["model"]
    assert p["quick"] is True, p.get("quick")
    for k in SCALARS[role]:
        positive(k, p[k])
    if role == "gpu":
        assert isinstance(p["backend"], str) and p["backend"], p.get("backend")
        assert isinstance(p["info"], str) and p["info"], p.get("info")
        assert isinstance(p["shares_host_cpu"], bool), p.get("shares_host_cpu")
        assert p["shares_host_cpu"] == (p["backend"] == "host"), (p["backend"], p["shares_host_cpu"])
        assert [pt["rows"] for pt in p["mm"]] == MM_ROWS, p["mm"]
        for pt in p["mm"]:
            positive(f"mm rows {pt['rows']}", pt["TFLOPS"])
        if p["backend"] == "host":   # the host backend runs 4-bit and every ggml format
            assert [pt["rows"] for pt in p["mm_q4"]] == Q4_ROWS, p["mm_q4"]
            assert sorted(p["mm_fmt"]) == FORMATS and "mm_fmt_none" not in p, (sorted(p["mm_fmt"]), p.get("mm_fmt_none"))
            for f, t in p["mm_fmt"].items():
                assert [pt["rows"] for pt in t] == FMT_ROWS, (f, t)
                for pt in t:
                    positive(f"mm_fmt {f} rows {pt['rows']}", pt["TFLOPS"])
        assert p["copy_bytes"] == 64 << 20, p["copy_bytes"]
        summary = (f"{p['backend']}: mm {p['mm'][0]['TFLOPS']:.4f}..{p['mm'][-1]['TFLOPS']:.4f} TFLOPS, "
                   f"attn decode {p['attn_decode_GBps']:.3f} GB/s, prefill {p['attn_prefill_TFLOPS']:.4f} TFLOPS, "
                   f"h2d {p['h2d_GBps']:.3f} GB/s, d2h {p['d2h_GBps']:.3f} GB/s")
    else:
        pts = p["attn_points"]
        assert sorted((pt["B"], pt["ctx"]) for pt in pts) == [(b, c) for b in (1, 8, 32) for c in (32, 256, 1024)], pts
        for pt in pts:
            positive(f"attn B {pt['B']} ctx {pt['ctx']}", pt["GBps"])
        dec = [pt["GBps"] for pt in pts if (pt["B"], pt["ctx"]) == (8, 1024)]
        assert dec == [p["attn_decode_GBps"]], (dec, p["attn_decode_GBps"])
        assert p["mem_bytes"] == 64 << 20, p["mem_bytes"]
        summary = (f"{p['threads']} threads: attn decode {p['attn_decode_GBps']:.3f} GB/s, "
                   f"memcpy {p['mem_GBps']:.3f} GB/s")
    print(f"{role} profile ok ({model}): {summary}")


if __name__ == "__main__":
    main()

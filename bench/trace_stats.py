#!/usr/bin/python3
"""Figures from a `flexgen run --trace` file (Chrome trace events):

  coverage   the share of the generation (from the first embedding on) during
             which some worker was busy;
             the rest is time the coordinator and ZeroMQ add (issue, wait,
             sample), the process split's overhead
  per layer  for each decode layer step (one schedule layer of one token):
             wall time from its first command's start to its last's end, the
             compute stream's busy time, and the I/O busy time (disk reads
             and host-to-device copies), and the ratio wall / max(io, compute)

Usage: trace_stats.py TRACE.json [--skip-prefill]  -> one JSON object."""
import json
import statistics
import sys


def union_length(intervals):
    total, end = 0.0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def main():
    ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
    if not ev:
        sys.exit("trace_stats: no events")
    # the run is the generation: from the first embedding on (setup, the
    # arena and the upload of GPU-resident weights, is not part of it)
    first = min((e["ts"] for e in ev if e["name"] == "embed"), default=None)
    if first is not None:
        ev = [e for e in ev if e["ts"] >= first]
    t0 = min(e["ts"] for e in ev)
    t1 = max(e["ts"] + e["dur"] for e in ev)
    busy = union_length([(e["ts"], e["ts"] + e["dur"]) for e in ev])
    # decode layer steps: group compute events by (token, layer). Tokens are
    # not in the events; a new token starts when the layer index drops.
    comp = [e for e in ev if e["pid"] == 0 and e["tid"] == 0 and e["name"] not in ("device_init",)]
    comp.sort(key=lambda e: e["ts"])
    steps, cur, last_layer, token = [], None, None, 0
    for e in comp:
        layer = e["args"]["layer"]
        if last_layer is not None and layer < last_layer:
            token += 1
        if cur is None or cur["layer"] != layer or cur["token"] != token:
            cur = {"token": token, "layer": layer, "start": e["ts"], "end": e["ts"] + e["dur"], "compute": 0.0}
            steps.append(cur)
        cur["end"] = max(cur["end"], e["ts"] + e["dur"])
        cur["compute"] += e["dur"]
        last_layer = layer
    io = [e for e in ev if (e["pid"] == 2) or (e["pid"] == 0 and e["tid"] == 1)]
    ratios = []
    for i, s in enumerate(steps):
        if s["token"] == 0:
            continue   # prefill
        # I/O for this step: what ran between the previous step's end and this one's end
        lo = steps[i - 1]["end"] if i else s["start"]
        span = (lo, s["end"])
        io_busy = union_length([(max(e["ts"], span[0]), min(e["ts"] + e["dur"], span[1]))
                                for e in io if e["ts"] < span[1] and e["ts"] + e["dur"] > span[0]])
        wall = s["end"] - lo
        ratios.append({"wall": wall, "compute": s["compute"], "io": io_busy,
                       "ratio": wall / max(io_busy, s["compute"], 1e-9)})
    out = {"span_s": (t1 - t0) / 1e6, "busy_union_s": busy / 1e6, "coverage": busy / (t1 - t0),
           "uncovered_share": 1 - busy / (t1 - t0), "decode_layer_steps": len(ratios)}
    if ratios:
        out["decode_step_ratio_median"] = statistics.median(r["ratio"] for r in ratios)
        out["decode_step_wall_ms_median"] = statistics.median(r["wall"] for r in ratios) / 1e3
        out["decode_step_compute_ms_median"] = statistics.median(r["compute"] for r in ratios) / 1e3
        out["decode_step_io_ms_median"] = statistics.median(r["io"] for r in ratios) / 1e3
    print(json.dumps(out))


if __name__ == "__main__":
    main()

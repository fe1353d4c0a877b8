#!/bin/sh
# flexgen-disk-worker --profile: with --json, exactly one JSON object on
# stdout (parsed by Python's json, independent of jansson) with positive
# read/write bandwidths, the best setting of each and the sweep behind them;
# the test file is removed afterwards; without --json a short summary; a
# missing directory or a bad flag is bad usage (exit 2).
#   worker_profile.sh DISK_WORKER PYTHON WORKDIR
set -u
[ $# -eq 3 ] || { echo "usage: worker_profile.sh DISK_WORKER PYTHON WORKDIR" >&2; exit 2; }
WK=$1 PY=$2 W=$3
rm -rf "$W" && mkdir -p "$W/dir" || exit 1
trap 'rm -rf "$W"' EXIT

"$WK" --profile --json --size 64M --dir "$W/dir" >"$W/out.json" 2>"$W/err.txt"
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: --profile --json exited $rc"; cat "$W/err.txt"; exit 1; }
"$PY" - "$W/out.json" "$W/dir" <<'PYEOF' || exit 1
import json, os, sys
text = open(sys.argv[1]).read()
lines = text.splitlines()
assert len(lines) == 1, f"stdout has {len(lines)} lines, want one JSON object:\n{text[:500]}"
p = json.loads(text)  # refuses anything after the object
assert isinstance(p, dict), type(p)
for k in ("disk_read_GBps", "disk_write_GBps"):
    assert isinstance(p[k], float) and p[k] > 0, (k, p.get(k))
assert p["file_bytes"] == 64 << 20, p["file_bytes"]
assert os.path.samefile(p["dir"], sys.argv[2]), p["dir"]
assert isinstance(p["direct"], bool)
for op in ("read", "write"):
    assert p[f"{op}_req_bytes"] % 4096 == 0 and p[f"{op}_qd"] >= 1, p
sweep = p["sweep"]
assert len(sweep) >= 2, sweep
for pt in sweep:
    assert pt["op"] in ("read", "write") and pt["req_bytes"] % 4096 == 0 and pt["qd"] >= 1, pt
    assert pt["bytes"] > 0 and pt["seconds"] > 0 and pt["GBps"] > 0, pt
    assert abs(pt["GBps"] - pt["bytes"] / pt["seconds"] / 1e9) <= 1e-6 * pt["GBps"], pt
ops = {pt["op"] for pt in sweep}
assert ops == {"read", "write"}, ops
left = os.listdir(sys.argv[2])
assert not left, f"left behind in the directory: {left}"
print(f"profile ok: read {p['disk_read_GBps']:.3f} GB/s (req {p['read_req_bytes']}, qd {p['read_qd']}), "
      f"write {p['disk_write_GBps']:.3f} GB/s (req {p['write_req_bytes']}, qd {p['write_qd']}), "
      f"{len(sweep)} sweep points, direct={p['direct']}")
PYEOF

# the summary: the offload dir is the default directory
"$WK" --profile --size 8M --offload-dir "$W/dir" >"$W/out.txt" 2>"$W/err.txt" || { echo "FAIL: summary"; cat "$W/err.txt"; exit 1; }
grep -q "read .*GB/s" "$W/out.txt" && grep -q "write .*GB/s" "$W/out.txt" && grep -q "$W/dir" "$W/out.txt" ||
    { echo "FAIL: summary lacks the figures:"; cat "$W/out.txt"; exit 1; }

for bad in "--dir $W/missing" "--size nonsense" "--bogus" "--size 1K --dir $W/dir"; do
    # shellcheck disable=SC2086
    "$WK" --profile $bad >"$W/out.txt" 2>"$W/err.txt"
    rc=$?
    [ $rc -eq 2 ] && [ -s "$W/err.txt" ] && [ ! -s "$W/out.txt" ] ||
        { echo "FAIL: --profile $bad: exit $rc (want 2 with a message, nothing on stdout)"; cat "$W/err.txt"; exit 1; }
    echo "bad usage ok: --profile $bad: $(head -1 "$W/err.txt")"
done
echo "worker_profile: ok"

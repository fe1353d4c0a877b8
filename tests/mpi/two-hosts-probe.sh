#!/bin/bash
# two-hosts-probe.sh [PROBE-BINARY] - runs tests/mpi/mpi_ring_probe under
# scripts/mpi-two-hosts.sh and checks that the two ranks were in the two
# namespaces and that what they sent crossed the veth:
#   rank 0 in <prefix>-h0, rank 1 in <prefix>-h1, the 64 MiB arrived intact,
#   veth end 0: tx_bytes >= rank 0's payload, rx_bytes >= rank 1's,
#   veth end 1: the other way round.
# It prints the probe's bandwidth and latency (8 B and 16 MiB ping-pong).
# Without PROBE-BINARY it compiles the probe with mpicc into a temp dir.
# Exit 0 pass, 1 fail, 77 skip (not root, no ip/mpirun/mpicc, no netns here).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
harness=$here/../../scripts/mpi-two-hosts.sh
prefix=${FLEXGEN_NETNS_PREFIX:-flexgen}
tmp=$(mktemp -d /tmp/two-hosts-probe.XXXXXX)
trap 'rm -rf -- "$tmp"' EXIT

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces)"
for t in ip mpirun unshare; do
    command -v "$t" >/dev/null 2>&1 || skip "'$t' not installed"
done
unshare --net true 2>/dev/null || skip "cannot create a network namespace here (unshare --net fails)"

probe=${1:-}
if [ -z "$probe" ]; then
    command -v mpicc >/dev/null 2>&1 || skip "no probe binary given and no mpicc"
    probe=$tmp/mpi_ring_probe
    mpicc -O2 -Wall -Wextra -o "$probe" "$here/mpi_ring_probe.c" || fail "mpicc failed"
fi
probe=$(cd "$(dirname "$probe")" && pwd)/$(basename "$probe")
[ -x "$probe" ] || fail "$probe is not an executable"

run_probe() {
    rc=0
    "$harness" run -- "$probe" >"$tmp/out" 2>"$tmp/err" || rc=$?
    cat "$tmp/out"
    grep -v '^mpi-two-hosts: +' "$tmp/err"
}
run_probe
# OpenMPI 4.x now and then reports a rank that did finish MPI_Finalize as
# "exiting improperly" (a race between the rank's exit and its finalize
# notice reaching the daemon: open-mpi/ompi#7833, #12607; seen here about
# once in 60 runs). Both ranks having printed their totals, the probe was
# done: run it once more, in full, rather than fail on OpenMPI's shutdown.
if [ $rc -ne 0 ] && grep -q 'exiting improperly' "$tmp/err" &&
   [ "$(grep -c '^probe-total rank=[01] .* ok=1$' "$tmp/out")" -eq 2 ]; then
    echo "NOTE: mpirun exited $rc with OpenMPI's spurious 'exiting improperly' after both ranks finished; running once more"
    run_probe
fi
[ $rc -eq 0 ] || fail "the harness exited $rc"

field() { # LINE-PATTERN KEY
    grep -E "$1" "$tmp/out" "$tmp/err" -h | head -1 | tr ' ' '\n' | sed -n "s/^$2=//p"
}
ns0=$(field '^probe-id rank=0 ' netns); ns1=$(field '^probe-id rank=1 ' netns)
[ "$ns0" = "$prefix-h0" ] || fail "rank 0 ran in netns '$ns0', not $prefix-h0"
[ "$ns1" = "$prefix-h1" ] || fail "rank 1 ran in netns '$ns1', not $prefix-h1"
for r in 0 1; do
    [ "$(field "^probe-total rank=$r " ok)" = 1 ] || fail "rank $r: payload check failed"
done
sent0=$(field '^probe-total rank=0 ' sent); sent1=$(field '^probe-total rank=1 ' sent)
tx0=$(field "counters $prefix-h0/" tx_bytes); rx0=$(field "counters $prefix-h0/" rx_bytes)
tx1=$(field "counters $prefix-h1/" tx_bytes); rx1=$(field "counters $prefix-h1/" rx_bytes)
for v in sent0 sent1 tx0 rx0 tx1 rx1; do
    [[ ${!v} =~ ^[0-9]+$ ]] || fail "could not read $v from the output"
done
echo "check: $prefix-h0 veth tx $tx0 >= rank 0 sent $sent0; rx $rx0 >= rank 1 sent $sent1"
echo "check: $prefix-h1 veth tx $tx1 >= rank 1 sent $sent1; rx $rx1 >= rank 0 sent $sent0"
if [ "$tx0" -lt "$sent0" ] || [ "$rx1" -lt "$sent0" ]; then
    fail "rank 0's bytes did not all cross the veth"
fi
if [ "$tx1" -lt "$sent1" ] || [ "$rx0" -lt "$sent1" ]; then
    fail "rank 1's bytes did not all cross the veth"
fi
echo "PASS: ranks in $ns0 and $ns1, all payload over the veth"

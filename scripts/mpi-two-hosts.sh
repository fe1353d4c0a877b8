#!/bin/bash
# mpi-two-hosts.sh - two MPI "hosts" on one machine: each rank in its own
# network namespace, MPI traffic over TCP across a veth pair between them.
#
#   scripts/mpi-two-hosts.sh run [MPIRUN-OPTIONS...] -- CMD [ARGS...]
#   scripts/mpi-two-hosts.sh teardown [--force]
#   scripts/mpi-two-hosts.sh status
#
# e.g. scripts/mpi-two-hosts.sh run -- build/bin/flexgen run ARGS...
#      scripts/mpi-two-hosts.sh run -x FOO=1 -- build/bin/mpi_ring_probe
#
# The setup, made fresh by every `run` and removed on every exit path:
#
#   netns flexgen-h0                         netns flexgen-h1
#   lo 127.0.0.1, hostname flexgen-h0        lo 127.0.0.1, hostname flexgen-h1
#   own /dev/shm (tmpfs)                     own /dev/shm (tmpfs)
#   flexgen-v0 10.231.0.1/24  <--- veth --->  flexgen-v1 10.231.0.2/24
#   mpirun (the HNP) + rank 0                orted + rank 1
#
# mpirun runs in flexgen-h0: the daemons must reach each other, and the root
# namespace has no route into the pair. Its hostfile names the two addresses,
# one slot each, so 10.231.0.1 is mpirun's own node (rank 0) and 10.231.0.2 is
# "remote": OpenMPI starts an orted there through plm_rsh_agent, which is
# scripts/netns-rsh instead of ssh (it execs `ip netns exec flexgen-h1 ...`).
# Each side also gets a private UTS namespace (unshare --uts) named after its
# netns, so OpenMPI sees two hosts with two names and two session dirs, and a
# private tmpfs on /dev/shm (FLEXGEN_NETNS_SHM=private, the default; =shared
# keeps the machine's), since two hosts share no POSIX shared memory. mpirun
# enters host 0 through the same agent. /tmp, the rest of the filesystem,
# the PIDs and any GPU stay shared.
#
# What goes over the veth, and how it is forced there:
#   --mca btl tcp,self --mca pml ob1  no shared memory (vader) between the
#                                     ranks, no UCX (which would pick it)
#   --mca osc ^ucx                    one-sided MPI without UCX, too
#   --mca btl_tcp_if_include 10.231.0.0/24   rank <-> rank traffic
#   --mca oob_tcp_if_include 10.231.0.0/24   orted <-> mpirun (ORTE's OOB,
#                                     which also carries the PMIx modex);
#                                     PMIx client <-> its own daemon stays on
#                                     the loopback of the rank's namespace
#   --bind-to none                    both "hosts" see the same cores; binding
#                                     would put both ranks on core 0
# Same filesystem on both sides: the command, orted and cwd resolve the same;
# PATH and LD_LIBRARY_PATH are passed with -x. `run` prints the veth byte
# counters before and after, so one can see that the bytes did cross.
#
# Environment: FLEXGEN_NETNS_PREFIX (flexgen: names flexgen-h0/-h1 and
# flexgen-v0/-v1), FLEXGEN_NETNS_SUBNET (10.231.0, a /24 that exists only in
# the namespaces), FLEXGEN_NETNS_MTU (1500), FLEXGEN_MPI_TIMEOUT (600 s for
# mpirun, then SIGTERM, and SIGKILL 10 s later), FLEXGEN_NETNS_SHOW=1 (also
# print `ip -n NS -s link show` of both veth ends before and after),
# FLEXGEN_NETNS_RATE (unset: the veth runs at memory speed; e.g. 1gbit: a
# tc tbf on each end makes it a link of that rate each way, to check a cost
# model against; no added latency, this kernel lacks sch_netem).
# A lock (/run/lock/<prefix>-netns.lock) keeps two runs with one prefix apart;
# set another prefix and subnet to run two at once.
#
# Exit status: CMD's (through mpirun); 124 when the timeout hit; 2 when not
# root or ip/mpirun/unshare/timeout/flock are missing or usage is wrong; 3 when
# the setup failed or another run holds the lock.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
agent=$here/netns-rsh
prefix=${FLEXGEN_NETNS_PREFIX:-flexgen}
subnet=${FLEXGEN_NETNS_SUBNET:-10.231.0}
mtu=${FLEXGEN_NETNS_MTU:-1500}
rate=${FLEXGEN_NETNS_RATE:-}
shm=${FLEXGEN_NETNS_SHM:-private}
mpi_timeout=${FLEXGEN_MPI_TIMEOUT:-600}
ns=("$prefix-h0" "$prefix-h1")
ifs=("$prefix-v0" "$prefix-v1")
addr=("$subnet.1" "$subnet.2")
lockfile=/run/lock/$prefix-netns.lock
workdir=/run/$prefix-netns   # the hostfile; one fixed path, so a teardown
                             # after SIGKILL finds it too
mpirun_pid=
me=mpi-two-hosts

say() { echo "$me: $*" >&2; }
die() { local rc=$1; shift; say "$*"; exit "$rc"; }

usage() {
    sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

check_env() {
    [[ $prefix =~ ^[a-z][a-z0-9-]{0,11}$ ]] ||
        die 2 "FLEXGEN_NETNS_PREFIX '$prefix': 1-12 of [a-z0-9-], from a letter (interface names are at most 15 characters)"
    [[ $subnet =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] ||
        die 2 "FLEXGEN_NETNS_SUBNET '$subnet': the first three octets of a /24, e.g. 10.231.0"
    [[ $mpi_timeout =~ ^[1-9][0-9]*$ ]] || die 2 "FLEXGEN_MPI_TIMEOUT '$mpi_timeout': seconds, a positive integer"
    [[ $mtu =~ ^[1-9][0-9]*$ ]] || die 2 "FLEXGEN_NETNS_MTU '$mtu': a positive integer"
    [[ $shm == private || $shm == shared ]] || die 2 "FLEXGEN_NETNS_SHM '$shm': private or shared"
    [ -z "$rate" ] || [[ $rate =~ ^[1-9][0-9]*(\.[0-9]+)?([kmgt]?bit|[kmgt]?bps)$ ]] ||
        die 2 "FLEXGEN_NETNS_RATE '$rate': a tc rate such as 1gbit, 800mbit, 100mbps"
    [ -z "$rate" ] || command -v tc >/dev/null 2>&1 ||
        die 2 "FLEXGEN_NETNS_RATE needs 'tc' (apt-get install iproute2)"
    [ "$(id -u)" -eq 0 ] ||
        die 2 "must run as root: creating network namespaces and veths needs CAP_SYS_ADMIN and CAP_NET_ADMIN (try sudo)"
    local t
    for t in ip unshare timeout flock "$@"; do
        command -v "$t" >/dev/null 2>&1 ||
            die 2 "'$t' not found in PATH (ip: apt-get install iproute2; mpirun: apt-get install openmpi-bin libopenmpi-dev; unshare, flock: util-linux; timeout: coreutils)"
    done
    [ -x "$agent" ] || die 2 "the rsh agent $agent is missing or not executable"
}

have_ns() { [ -e "/run/netns/$1" ]; }

# Everything this harness may have created, whatever state a killed run left:
# the processes still inside the namespaces (started by a run with this
# prefix), the namespaces (their veth ends go with them) and the work dir.
teardown() {
    local n i
    local -a pids
    # a run interrupted by a signal: mpirun first gets the chance to stop its
    # daemons itself (timeout passes SIGTERM on to it)
    if [ -n "$mpirun_pid" ] && kill -TERM "$mpirun_pid" 2>/dev/null; then
        for i in 1 2 3 4 5 6 7 8 9 10; do
            kill -0 "$mpirun_pid" 2>/dev/null || break
            sleep 0.3
        done
    fi
    mpirun_pid=
    for n in "${ns[@]}"; do
        have_ns "$n" || continue
        mapfile -t pids < <(ip netns pids "$n" 2>/dev/null || true)
        if [ ${#pids[@]} -gt 0 ]; then
            say "stopping what is left in $n: pids ${pids[*]}"
            kill -TERM "${pids[@]}" 2>/dev/null || true
            for i in 1 2 3 4 5 6 7 8 9 10; do
                mapfile -t pids < <(ip netns pids "$n" 2>/dev/null || true)
                [ ${#pids[@]} -eq 0 ] && break
                sleep 0.3
            done
            if [ ${#pids[@]} -gt 0 ]; then
                kill -KILL "${pids[@]}" 2>/dev/null || true
            fi
        fi
        ip netns del "$n" 2>/dev/null || say "warning: could not delete netns $n"
    done
    # the veth is created inside the namespaces, never in the root one, but
    # check: an end left in the root namespace would outlive them (a veth of
    # our name only: anything else by that name is not ours to delete)
    for n in "${ifs[@]}"; do
        if ip -d link show dev "$n" 2>/dev/null | grep -qw veth; then
            ip link del dev "$n" 2>/dev/null || say "warning: could not delete link $n"
        fi
    done
    rm -rf -- "$workdir"
}

setup() {
    local i
    for i in 0 1; do
        ip netns add "${ns[i]}" || die 3 "ip netns add ${ns[i]} failed"
    done
    # both ends are born inside their namespaces: nothing touches the root one
    ip link add "${ifs[0]}" netns "${ns[0]}" mtu "$mtu" type veth \
        peer name "${ifs[1]}" netns "${ns[1]}" mtu "$mtu" ||
        die 3 "could not create the veth pair ${ifs[0]} <-> ${ifs[1]}"
    for i in 0 1; do
        if ! { ip -n "${ns[i]}" link set lo up &&
               ip -n "${ns[i]}" addr add "${addr[i]}/24" dev "${ifs[i]}" &&
               ip -n "${ns[i]}" link set "${ifs[i]}" up; }; then
            die 3 "could not configure ${ifs[i]} in ${ns[i]}"
        fi
    done
    ip -n "${ns[0]}" route get "${addr[1]}" 2>/dev/null | grep -q "dev ${ifs[0]}" ||
        die 3 "in ${ns[0]}, ${addr[1]} is not routed over ${ifs[0]}"
    if [ -n "$rate" ]; then
        # a token bucket on each end's egress: a link of that speed each way
        # (tbf, not netem: this kernel has no sch_netem, so no added delay)
        for i in 0 1; do
            tc -n "${ns[i]}" qdisc add dev "${ifs[i]}" root tbf rate "$rate" \
                burst 256kb latency 100ms ||
                die 3 "tc tbf rate $rate on ${ifs[i]} failed (FLEXGEN_NETNS_RATE, e.g. 1gbit, 800mbit)"
        done
        say "veth limited to $rate each way (tc tbf)"
    fi
}

counter() { # NS IF tx|rx
    ip netns exec "$1" cat "/sys/class/net/$2/statistics/$3_bytes" 2>/dev/null || echo 0
}

show_links() { # before|after: the raw `ip -s link` view of both veth ends
    local i
    for i in 0 1; do
        say "$1 the run: ip -n ${ns[i]} -s link show dev ${ifs[i]}"
        ip -n "${ns[i]}" -s link show dev "${ifs[i]}" >&2 || true
    done
}

take_lock() {
    exec 9>"$lockfile"
    flock -w "${1:-60}" 9
}

cmd_teardown() {
    check_env
    local force=0
    [ "${1:-}" = --force ] && force=1
    if ! take_lock 0; then
        [ $force -eq 1 ] || die 3 "a run with prefix '$prefix' holds $lockfile; it cleans up after itself (use 'teardown --force' to kill it)"
        say "a run holds $lockfile; tearing down anyway (--force)"
    fi
    teardown
    local n left=0
    for n in "${ns[@]}"; do have_ns "$n" && left=1 && say "still there: netns $n"; done
    for n in "${ifs[@]}"; do ip link show dev "$n" >/dev/null 2>&1 && left=1 && say "still there: link $n"; done
    [ $left -eq 0 ] || exit 1
    say "clean: no netns ${ns[*]}, no link ${ifs[*]}"
}

cmd_status() {
    local n
    for n in "${ns[@]}"; do
        if have_ns "$n"; then
            echo "netns $n: present, pids: $(ip netns pids "$n" 2>/dev/null | tr '\n' ' ')"
            ip -n "$n" -br addr 2>/dev/null | sed 's/^/  /'
        else
            echo "netns $n: absent"
        fi
    done
}

cmd_run() {
    local -a mpi_opts=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do mpi_opts+=("$1"); shift; done
    [ "${1:-}" = -- ] || { say "run: missing '--' before the command"; usage; }
    shift
    [ $# -gt 0 ] || { say "run: no command after '--'"; usage; }
    check_env mpirun

    take_lock 60 || die 3 "another run with prefix '$prefix' holds $lockfile (waited 60 s); set FLEXGEN_NETNS_PREFIX and FLEXGEN_NETNS_SUBNET to run beside it"
    trap 'teardown' EXIT
    trap 'exit 129' HUP
    trap 'exit 130' INT
    trap 'exit 143' TERM

    teardown   # whatever a killed run with this prefix left behind
    setup
    mkdir -m 700 "$workdir" || die 3 "cannot create $workdir"
    local hostfile=$workdir/hostfile
    printf '%s slots=1\n%s slots=1\n' "${addr[0]}" "${addr[1]}" >"$hostfile"

    local -a env_opts=(-x PATH)
    [ -n "${LD_LIBRARY_PATH:-}" ] && env_opts+=(-x LD_LIBRARY_PATH)
    # shellcheck disable=SC2054  # "tcp,self" is one argument
    local -a mpirun=(mpirun --allow-run-as-root -np 2
        --hostfile "$hostfile" --map-by node --bind-to none --wdir "$PWD"
        --mca plm rsh
        --mca plm_rsh_agent "$agent"
        --mca plm_rsh_no_tree_spawn 1
        --mca orte_keep_fqdn_hostnames 1
        --mca oob_tcp_if_include "$subnet.0/24"
        --mca btl tcp,self
        --mca btl_tcp_if_include "$subnet.0/24"
        --mca pml ob1
        --mca osc ^ucx
        "${env_opts[@]}" "${mpi_opts[@]}" "$@")
    local shm_kb
    shm_kb=$(df -k --output=size /dev/shm 2>/dev/null | tail -n 1 | tr -d ' ')
    [[ $shm_kb =~ ^[1-9][0-9]*$ ]] || shm_kb=1048576
    export FLEXGEN_NETNS_PREFIX=$prefix FLEXGEN_NETNS_SUBNET=$subnet \
        FLEXGEN_NETNS_SHM=$shm FLEXGEN_NETNS_SHM_KB=$shm_kb

    local i before_tx=() before_rx=() rc=0
    [ "${FLEXGEN_NETNS_SHOW:-0}" = 1 ] && show_links before
    for i in 0 1; do
        before_tx[i]=$(counter "${ns[i]}" "${ifs[i]}" tx)
        before_rx[i]=$(counter "${ns[i]}" "${ifs[i]}" rx)
    done
    say "${ns[0]} (${addr[0]}, mpirun + rank 0) <-> ${ns[1]} (${addr[1]}, rank 1) over ${ifs[0]}/${ifs[1]}, timeout ${mpi_timeout}s"
    say "+ ${mpirun[*]}"
    # mpirun in host 0 (its netns, hostname and /dev/shm, entered the same
    # way as OpenMPI enters host 1: through the agent); fd 9 (the lock) stays here,
    # so a run killed with SIGKILL frees the lock for `teardown`. In the
    # background and waited for, because bash runs a trap only once the
    # foreground child is done: a signal must tear down now, not in 600 s.
    # (<&0: an asynchronous command would get /dev/null as its stdin, and
    # mpirun forwards stdin to rank 0.)
    timeout -k 10 "$mpi_timeout" "$agent" --argv "${addr[0]}" "${mpirun[@]}" 9>&- <&0 &
    mpirun_pid=$!
    wait "$mpirun_pid" || rc=$?
    mpirun_pid=
    [ $rc -eq 124 ] && say "mpirun did not finish within ${mpi_timeout}s; killed"
    for i in 0 1; do
        local tx rx
        tx=$(counter "${ns[i]}" "${ifs[i]}" tx)
        rx=$(counter "${ns[i]}" "${ifs[i]}" rx)
        say "counters ${ns[i]}/${ifs[i]} tx_bytes=$((tx - before_tx[i])) rx_bytes=$((rx - before_rx[i])) (during the run)"
    done
    [ "${FLEXGEN_NETNS_SHOW:-0}" = 1 ] && show_links after
    return $rc
}

case ${1:-} in
    run) shift; cmd_run "$@" ;;
    teardown) shift; cmd_teardown "$@" ;;
    status) cmd_status ;;
    -h|--help|help) usage ;;
    *) usage ;;
esac

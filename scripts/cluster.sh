#!/usr/bin/env bash
# scripts/cluster.sh — a cluster on one machine: N nodes, each a Linux network namespace with its own
# hostname (unshare --uts) and an address on a private subnet, joined by rate-limited links to a
# switch; mpirun runs in a head namespace on the same switch and places ranks on the nodes through an
# rsh launcher agent. Everything lives in namespaces this script creates (nothing is added to the
# machine's own network, /etc/hosts is not touched), so several clusters can exist at once.
#
#   cluster.sh up N [--rate R] [--delay D] [--ranks-per-node K] [--cores-per-node C]
#                                          make nodes node1..nodeN
#   cluster.sh run [--] MPIRUN-ARGS...     mpirun on the cluster (hostfile, agent, TCP on the subnet)
#   cluster.sh down                        remove everything `up` made (also: a dead owner's leftovers)
#   cluster.sh link K down|up              cut or restore node K's link (both ends)
#   cluster.sh rate K R [D]                change node K's link rate (and delay)
#   cluster.sh freeze K | thaw K           stop / continue every process on node K (a frozen machine)
#   cluster.sh kill K                      node K loses power: its link cut, then all on it killed
#   cluster.sh pids K                      the processes running on node K (orted and its ranks)
#   cluster.sh exec K CMD...               run CMD in node K's namespace
#   cluster.sh status                      what exists
#
# R is a tc rate (1gbit, 50mbit; default: none, the veth's own speed), D a netem delay (2ms; default
# none). A link is node K's veth pair: tbf (rate) with netem (delay) as its child, on both ends, so
# traffic is shaped in both directions. Each node has K slots (default 1): `run -np 4` on `up 2
# --ranks-per-node 2` puts ranks 0-1 on node1 and 2-3 on node2.
# With C cores per node, node K has cores (K-1)C .. KC-1 of this machine (modulo its count, so nodes
# share cores when N x C exceeds it): its processes are bound to them (taskset) and see a machine of
# only those (HWLOC_XMLFILE: a topology restricted by lstopo, with HWLOC_THISSYSTEM=1), so StarPU
# and StarZeRO split and bind them as on a node of C cores. Without it every node sees the machine.
# The cluster's name is $SZ_CLUSTER (default "szc"); its files (hostfile, agent, settings) are in
# $SZ_CLUSTER_DIR (default /tmp/starzero-cluster/$SZ_CLUSTER). Namespaces are named <name>-head and
# <name>-nodeK. Where namespaces cannot be made (no root, no CAP_SYS_ADMIN, a sandbox that forbids
# them), `up` says so and exits 77, the status the tests report as skipped.
set -Eeuo pipefail
SZ_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
name=${SZ_CLUSTER:-szc}
top=/tmp/starzero-cluster
state=${SZ_CLUSTER_DIR:-$top/$name}
subnet=10.77.0          # exists only inside this cluster's namespaces
head_addr=$subnet.254

say() { printf '[cluster %s] %s\n' "$name" "$*" >&2; }
die() { say "error: $*"; exit 1; }
usage() { sed -n '2,/^set -Eeuo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

ns_head() { echo "$name-head"; }
ns_node() { echo "$name-node$1"; }
nnodes() { cat "$state/nodes" 2>/dev/null || echo 0; }

# shape DEV NS RATE DELAY: tbf at RATE (burst sized for it) with netem DELAY below it, or either alone
shape() {
    local dev=$1 ns=$2 rate=$3 delay=$4
    ip -n "$ns" link set "$dev" txqueuelen 1000 2>/dev/null || true
    tc -n "$ns" qdisc del dev "$dev" root 2>/dev/null || true
    if [ -n "$rate" ]; then
        tc -n "$ns" qdisc add dev "$dev" root handle 1: tbf rate "$rate" burst 256kb latency 50ms
        [ -z "$delay" ] || tc -n "$ns" qdisc add dev "$dev" parent 1:1 handle 10: netem delay "$delay" limit 100000
    elif [ -n "$delay" ]; then
        tc -n "$ns" qdisc add dev "$dev" root handle 1: netem delay "$delay" limit 100000
    fi
}

# The processes in a namespace (ip netns pids), the ones of this script excluded.
ns_pids() { ip netns pids "$1" 2>/dev/null | grep -vx "$$" || true; }

# Remove a cluster's namespaces and files: its processes first (woken, then killed), so nothing is
# left holding a namespace.
teardown() {
    local nm=$1 dir=$2 p
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$nm-(head|node[0-9]+)$" || true); do
        for p in $(ns_pids "$ns"); do kill -CONT "$p" 2>/dev/null || true; kill -KILL "$p" 2>/dev/null || true; done
    done
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$nm-(head|node[0-9]+)$" || true); do
        for _ in 1 2 3 4 5 6 7 8 9 10; do [ -z "$(ns_pids "$ns")" ] && break; sleep 0.1; done
        ip netns del "$ns" 2>/dev/null || say "warning: could not remove namespace $ns"
    done
    rm -rf "$dir"
}

# Leftovers of clusters whose owner (the shell that ran `up`) is gone: a test killed by its timeout
# cannot run its trap, so the next `up` cleans after it.
reap_orphans() {
    local d o
    [ -d "$top" ] || return 0
    for d in "$top"/*/; do
        [ -f "$d/owner" ] || continue
        o=$(cat "$d/owner")
        if ! kill -0 "$o" 2>/dev/null; then
            say "removing cluster $(basename "$d") (its owner, pid $o, is gone)"
            teardown "$(basename "$d")" "${d%/}"
        fi
    done
}

cmd_up() {
    local n=${1:-} rate= delay= k=1 cores=
    [[ $n =~ ^[1-9][0-9]*$ ]] || usage
    shift
    while [ $# -gt 0 ]; do
        case $1 in
            --rate) rate=$2; shift 2 ;;
            --delay) delay=$2; shift 2 ;;
            --ranks-per-node) k=$2; shift 2 ;;
            --cores-per-node) cores=$2; shift 2 ;;
            *) usage ;;
        esac
    done
    [ "$n" -le 250 ] || die "at most 250 nodes"
    [[ $k =~ ^[1-9][0-9]*$ ]] || die "--ranks-per-node wants a count, not '$k'"
    [ -z "$cores" ] || [[ $cores =~ ^[1-9][0-9]*$ ]] || die "--cores-per-node wants a count, not '$cores'"
    [ -z "$cores" ] || command -v lstopo-no-graphics >/dev/null || die "--cores-per-node needs lstopo-no-graphics (hwloc)"
    [ "$(id -u)" = 0 ] || { say "network namespaces need root here (id -u is $(id -u)); no cluster"; exit 77; }
    for t in ip tc unshare mpirun; do
        command -v "$t" >/dev/null || { say "$t is not installed; no cluster"; exit 77; }
    done
    reap_orphans
    [ ! -e "$state" ] || die "cluster $name exists ($state): run 'cluster.sh down' first, or set SZ_CLUSTER"
    # can we make a namespace and a hostname of our own in it at all?
    local probe="$name-probe$$"
    if ! err=$(ip netns add "$probe" 2>&1) || ! err=$(ip netns exec "$probe" unshare --uts sh -c 'hostname probe' 2>&1); then
        ip netns del "$probe" 2>/dev/null || true
        say "network namespaces are not permitted here ($err); no cluster"
        exit 77
    fi
    if [ -n "$delay" ] && ! ip netns exec "$probe" tc qdisc add dev lo root netem delay "$delay" 2>/dev/null; then
        ip netns del "$probe"
        say "--delay needs tc's netem, which this kernel lacks (CONFIG_NET_SCH_NETEM); no cluster"
        exit 77
    fi
    ip netns del "$probe"
    mkdir -p "$state"
    echo "${SZ_CLUSTER_OWNER:-$PPID}" >"$state/owner"
    trap 'say "up failed; removing what it made"; teardown "$name" "$state"' ERR INT TERM
    local h; h=$(ns_head)
    ip netns add "$h"
    ip -n "$h" link set lo up
    ip -n "$h" link add sw type bridge
    ip -n "$h" addr add "$head_addr/24" dev sw
    ip -n "$h" link set sw up
    : >"$state/hostfile"
    for i in $(seq "$n"); do
        local ns; ns=$(ns_node "$i")
        ip netns add "$ns"
        ip -n "$h" link add "v$i" type veth peer name eth0 netns "$ns"
        ip -n "$h" link set "v$i" master sw
        ip -n "$h" link set "v$i" up
        ip -n "$ns" addr add "$subnet.$i/24" dev eth0
        ip -n "$ns" link set eth0 up
        ip -n "$ns" link set lo up
        shape eth0 "$ns" "$rate" "$delay"
        shape "v$i" "$h" "$rate" "$delay"
        echo "node$i slots=$k" >>"$state/hostfile"
        if [ -n "$cores" ]; then # node i's cores, as a list for taskset and a mask for lstopo
            local ncpu list= mask=0 j c
            ncpu=$(nproc --all)
            for j in $(seq 0 $((cores - 1))); do
                c=$((((i - 1) * cores + j) % ncpu))
                list=$list${list:+,}$c
                mask=$((mask | (1 << c)))
            done
            echo "$list" >"$state/cpus-node$i"
            lstopo-no-graphics --restrict "$(printf '0x%x' "$mask")" --of xml "$state/node$i.xml"
        fi
    done
    echo "$n" >"$state/nodes"
    printf 'rate=%s\ndelay=%s\nranks_per_node=%s\ncores_per_node=%s\nsubnet=%s.0/24\n' "${rate:-none}" "${delay:-none}" \
        "$k" "${cores:-all}" "$subnet" >"$state/settings"
    # the launcher: Open MPI calls it as AGENT HOST COMMAND...; it runs COMMAND on HOST's namespace
    # with HOST as the hostname (what MPI_Get_processor_name and Open MPI's locality see)
    cat >"$state/agent" <<EOF
#!/bin/bash
# rsh agent of cluster $name (scripts/cluster.sh): AGENT HOST COMMAND...
host=\$1; shift
case \$host in node[0-9]*) ;; *) echo "cluster $name: no node \$host" >&2; exit 1 ;; esac
if [ -f "$state/cpus-\$host" ]; then # the node's own cores: bound to them, and all hwloc shows
    ip netns exec "$name-\$host" unshare --uts taskset -c "\$(cat "$state/cpus-\$host")" \\
        env HWLOC_XMLFILE="$state/\$host.xml" HWLOC_THISSYSTEM=1 sh -c "hostname \$host && \$*" &
else
    ip netns exec "$name-\$host" unshare --uts sh -c "hostname \$host && \$*" &
fi
c=\$!
trap 'kill -TERM \$c 2>/dev/null; exit 143' TERM INT HUP
wait \$c
rc=\$?
# a node killed by 'cluster.sh kill' is a machine that lost power: like ssh to it, this agent hears
# nothing more and stays until mpirun ends it
if [ -e "$state/dead-\$host" ]; then while :; do sleep 60 & wait \$!; done; fi
exit \$rc
EOF
    chmod +x "$state/agent"
    # every node reaches every other and the head (bash's /dev/tcp: no ping here)
    for i in $(seq "$n"); do
        local rc=0 # 1: refused, so reached; 124: no answer
        ip netns exec "$(ns_node "$i")" timeout 5 bash -c "exec 3<>/dev/tcp/$head_addr/1" 2>/dev/null || rc=$?
        [ $rc -le 1 ] || die "node$i does not reach the head at $head_addr" 
    done
    trap - ERR INT TERM
    say "up: $n node(s) node1..node$n on $subnet.0/24, $k slot(s) each, rate ${rate:-unlimited}, delay ${delay:-none}, cores ${cores:-all (shared)}"
}

cmd_run() {
    [ -f "$state/hostfile" ] || die "no cluster $name: run 'cluster.sh up N' first"
    [ "${1:-}" != -- ] || shift
    local f=(--oversubscribe --hostfile "$state/hostfile" --mca plm_rsh_agent "$state/agent"
             --mca oob_tcp_if_include "$subnet.0/24" --mca btl_tcp_if_include "$subnet.0/24"
             --mca btl tcp,vader,self)
    [ "$(id -u)" != 0 ] || f+=(--allow-run-as-root)
    # mpirun in the head namespace; the environment reaches the ranks through the agent (its child).
    # The nodes are this machine's hardware: they share its StarPU calibration (bus and perf models,
    # keyed by host name), rather than each measuring its own
    export STARPU_HOSTNAME=${STARPU_HOSTNAME:-$(hostname)}
    ip netns exec "$(ns_head)" mpirun "${f[@]}" "$@" &
    local mp=$!
    trap 'kill -TERM $mp 2>/dev/null; sleep 1; kill -KILL $mp 2>/dev/null; exit 130' INT TERM
    local rc=0
    wait $mp || rc=$?
    trap - INT TERM
    return $rc
}

cmd_down() {
    if [ ! -d "$state" ] && ! ip netns list 2>/dev/null | grep -qE "^$name-(head|node[0-9]+)( |$)"; then
        return 0
    fi
    teardown "$name" "$state"
    say "down"
}

node_arg() {
    [[ ${1:-} =~ ^[1-9][0-9]*$ ]] && [ "$1" -le "$(nnodes)" ] || die "no node '${1:-}' in cluster $name ($(nnodes) nodes)"
}

cmd_link() {
    node_arg "${1:-}"
    case ${2:-} in down|up) ;; *) usage ;; esac
    ip -n "$(ns_head)" link set "v$1" "$2"
    ip -n "$(ns_node "$1")" link set eth0 "$2"
}

# kill K: node K loses power: its link goes down first (nothing it sends reaches anyone, as from a
# dead machine), then every process on it is killed. freeze K / thaw K: every process on node K
# stopped (SIGSTOP) / continued, as a frozen machine.
cmd_kill() {
    node_arg "${1:-}"
    : >"$state/dead-node$1"
    cmd_link "$1" down
    local p
    for p in $(ns_pids "$(ns_node "$1")"); do kill -KILL "$p" 2>/dev/null || true; done
}

cmd_signal() {
    node_arg "${2:-}"
    local p
    for p in $(ns_pids "$(ns_node "$2")"); do kill "-$1" "$p" 2>/dev/null || true; done
}

cmd_rate() {
    node_arg "${1:-}"
    shape eth0 "$(ns_node "$1")" "${2:-}" "${3:-}"
    shape "v$1" "$(ns_head)" "${2:-}" "${3:-}"
}

case ${1:-} in
    up) shift; cmd_up "$@" ;;
    run) shift; cmd_run "$@" ;;
    down) cmd_down ;;
    link) shift; cmd_link "$@" ;;
    rate) shift; cmd_rate "$@" ;;
    kill) shift; cmd_kill "$@" ;;
    freeze) cmd_signal STOP "${2:-}" ;;
    thaw) cmd_signal CONT "${2:-}" ;;
    pids) node_arg "${2:-}"; ns_pids "$(ns_node "$2")" ;;
    exec) node_arg "${2:-}"; k=$2; shift 2; exec ip netns exec "$(ns_node "$k")" "$@" ;;
    status)
        [ -d "$state" ] && { cat "$state/settings"; cat "$state/hostfile"; } || echo "no cluster $name"
        ip netns list | grep -E "^$name-" || true ;;
    *) usage ;;
esac

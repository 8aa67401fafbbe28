# shellcheck shell=bash disable=SC2034
# Settings and helpers shared by the end-to-end cluster scripts (up.sh, down.sh, run.sh). Sourced, not run.
#
# Everything the cluster makes on the machine carries the name herald-e2e, so that teardown can find it
# and leave the rest of the machine alone: the state directories below, the network interfaces, the
# cgroup subtree, the CNI network. Ports are unusual fixed ones, away from the defaults other engineers'
# clusters and tests use.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# The node's address. This machine has no "dummy" link type (CONFIG_DUMMY is off), so the address lives on
# a bridge with no ports; pods reach it through their gateway like any local address. TEST-NET-2, so it
# collides with nothing real.
NODE_IP="${HERALD_E2E_NODE_IP:-198.51.100.10}"
NODE_NAME=herald-e2e
NODE_LINK=herald-e2e
POD_CIDR=10.217.0.0/24
POD_GATEWAY=10.217.0.1
CNI_BRIDGE=herald-cni0
CNI_NETWORK=herald-e2e
SERVICE_CIDR=10.218.0.0/16
KUBERNETES_SERVICE_IP=10.218.0.1
# The messenger simulator's Service gets a fixed ClusterIP: pods reach it without cluster DNS.
SIM_SERVICE_IP=10.218.100.10
# The webhook component's public address (HERALD_PUBLIC_URL), where tenants' own bots post their updates:
# a Service of the test's on a fixed ClusterIP, as a platform team's load balancer would be.
PUBLIC_SERVICE_IP=10.218.100.11
CGROUP_ROOT=herald-e2e

ETCD_CLIENT_PORT=12379
ETCD_PEER_PORT=12380
APISERVER_PORT=16443
CONTROLLER_MANAGER_PORT=27257
SCHEDULER_PORT=27259
KUBELET_PORT=20250
KUBELET_HEALTHZ_PORT=20248
PROXY_METRICS_PORT=27249
PROXY_HEALTHZ_PORT=27256
POSTGRES_PORT=25432
KAFKA_PORT=29092

# State: wiped by teardown. etcd lives on tmpfs: it fsyncs every write, and the disk is shared.
WORK=/var/lib/herald-e2e
RUNDIR=/run/herald-e2e
ETCD_DIR=/dev/shm/herald-e2e-etcd
CONTAINERD_SOCK="$RUNDIR/containerd/containerd.sock"
PIDS="$RUNDIR/pids"
PKI="$WORK/pki"
# Kept after teardown, for reading: logs, the kubeconfig and the environment the test reads.
OUT="$ROOT/bin/e2e"
LOGS="$OUT/logs"
KUBECONFIG_FILE="$OUT/kubeconfig"
ENV_FILE="$OUT/env"
SYSCTL_SAVED="$OUT/sysctl.saved"

# Images: the Herald binary on an empty base (two builds with different digests, for the upgrade), and the
# pause image containerd runs as every pod's sandbox.
IMAGE_REPO=herald-e2e.local/herald
IMAGE_TAGS=(e2e-1 e2e-2)
PAUSE_IMAGE=herald-e2e.local/pause:e2e

# Host settings kubelet and kube-proxy change; saved by up.sh, restored by down.sh.
SYSCTLS=(net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables
	vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys
	kernel.keys.root_maxbytes net.ipv4.conf.all.route_localnet net.netfilter.nf_conntrack_max
	net.netfilter.nf_conntrack_tcp_timeout_established net.netfilter.nf_conntrack_tcp_timeout_close_wait)

log() { printf '%s e2e: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
	log "ERROR: $*"
	exit 1
}

# k8s_dir prints the directory of the Kubernetes binaries (built once, cached under ./bin/k8s).
k8s_dir() { "$ROOT/hack/k8s-binaries.sh" | tail -n 1; }

# start NAME CMD...: runs CMD in its own session in the background, output to $LOGS/NAME.log, its pid in
# $PIDS/NAME.pid.
start() {
	local name="$1"
	shift
	mkdir -p "$PIDS" "$LOGS"
	setsid "$@" >"$LOGS/$name.log" 2>&1 </dev/null &
	echo $! >"$PIDS/$name.pid"
}

# alive NAME: the process started as NAME still runs.
alive() {
	local pid
	pid="$(cat "$PIDS/$1.pid" 2>/dev/null)" || return 1
	kill -0 "$pid" 2>/dev/null
}

# wait_for WHAT SECONDS CMD...: retries CMD every half second until it succeeds.
wait_for() {
	local what="$1" seconds="$2" deadline
	shift 2
	deadline=$((SECONDS + seconds))
	until "$@" >/dev/null 2>&1; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			log "timed out after ${seconds}s waiting for $what"
			return 1
		fi
		sleep 0.5
	done
}

# cgroup_dirs prints the directories of our cgroup subtree: one per v1 hierarchy, or the one of v2.
cgroup_dirs() {
	local d
	for d in /sys/fs/cgroup/"$CGROUP_ROOT" /sys/fs/cgroup/*/"$CGROUP_ROOT"; do
		[ -d "$d" ] && echo "$d"
	done
	return 0
}

kubectl_() { "$KUBECTL" --kubeconfig "$KUBECONFIG_FILE" "$@"; }

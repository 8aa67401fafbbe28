#!/usr/bin/env bash
# Tears the end-to-end cluster down and leaves the machine as it was before hack/e2e/up.sh: pods deleted,
# every process up.sh started stopped (by its recorded pid), kube-proxy's and kubelet's iptables chains
# removed, mounts, network links, cgroups and state directories gone, changed sysctls restored. Safe to run
# at any time, twice in a row, or after a run that crashed half-way. Logs stay in bin/e2e/logs.
#
# Exits non-zero when something was left behind, and says what. No `set -e`: a step that fails must not
# stop the ones after it.
set -uo pipefail
# shellcheck source=hack/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || die "run as root"
mkdir -p "$LOGS"
began=$SECONDS
timings=()
step_began=$SECONDS
# took WHAT: records how long the step since the last one took (printed at the end).
took() {
	timings+=("$1 $((SECONDS - step_began))s")
	step_began=$SECONDS
}
K8S="$(cat "$RUNDIR/k8s-dir" 2>/dev/null || true)"
KUBECTL="$K8S/kubectl"
# (The brackets keep grep from matching its own command line.)
MARKER="/var/lib/herald-e2[e]|/run/herald-e2[e]|/dev/shm/herald-e2[e]"

# ours PID: the process's command line names one of our state directories (a recorded pid may have been
# reused since a crash).
ours() { grep -qaE "$MARKER" "/proc/$1/cmdline" 2>/dev/null; }

# stop NAME [GRACE]: SIGTERM to the process started as NAME, SIGKILL after GRACE seconds.
stop() {
	local name="$1" grace="${2:-10}" pid i
	pid="$(cat "$PIDS/$name.pid" 2>/dev/null)" || return 0
	if kill -0 "$pid" 2>/dev/null && ours "$pid"; then
		kill -TERM "$pid" 2>/dev/null
		for ((i = 0; i < grace * 10; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			log "$name did not stop within ${grace}s: SIGKILL"
			kill -KILL "$pid" 2>/dev/null
			sleep 0.2
		fi
	fi
	rm -f "$PIDS/$name.pid"
}

apiserver_up() {
	[ -x "$KUBECTL" ] && [ -f "$KUBECONFIG_FILE" ] && alive kube-apiserver &&
		timeout 5 "$KUBECTL" --kubeconfig "$KUBECONFIG_FILE" --request-timeout=3s get --raw /readyz >/dev/null 2>&1
}

# 0. The pods' logs, kept with the others for reading.
if [ -d "$WORK/pod-logs" ]; then
	rm -rf "$LOGS/pods"
	mkdir -p "$LOGS/pods"
	cp -r "$WORK/pod-logs/." "$LOGS/pods/" 2>/dev/null
fi

took logs

# 1. Pods, through kubelet, so that each gets its CNI DEL and its mounts undone. The controllers go first:
#    nothing recreates what is deleted.
stop kube-controller-manager 5
stop kube-scheduler 5
if apiserver_up && alive kubelet; then
	log "deleting every pod"
	timeout 90 "$KUBECTL" --kubeconfig "$KUBECONFIG_FILE" delete pods --all --all-namespaces \
		--grace-period=1 --wait=true --timeout=60s >/dev/null 2>&1 || log "pods not all deleted in time; killing the rest"
fi

took pods

# 2. kube-proxy and its rules.
stop kube-proxy 5
if [ -x "$K8S/kube-proxy" ]; then
	timeout 60 "$K8S/kube-proxy" --cleanup >"$LOGS/kube-proxy-cleanup.log" 2>&1 || log "kube-proxy --cleanup failed (see $LOGS/kube-proxy-cleanup.log)"
fi

took kube-proxy

# 3. The control plane. kube-apiserver on etcd 3.4 can hang in graceful shutdown: SIGKILL after a while.
stop kubelet 10
stop kube-apiserver 5
stop etcd 10

took control-plane

# 4. Containers left running (pods kubelet could not delete), then containerd and its shims.
if alive containerd && [ -S "$CONTAINERD_SOCK" ]; then
	ctr_() { timeout 30 ctr --address "$CONTAINERD_SOCK" -n k8s.io "$@"; }
	for task in $(ctr_ tasks ls -q 2>/dev/null); do
		ctr_ tasks kill -a -s SIGKILL "$task" >/dev/null 2>&1
	done
	sleep 1
	for task in $(ctr_ tasks ls -q 2>/dev/null); do
		ctr_ tasks delete -f "$task" >/dev/null 2>&1
	done
	for c in $(ctr_ containers ls -q 2>/dev/null); do
		ctr_ containers delete "$c" >/dev/null 2>&1
	done
fi
stop containerd 10
# Whatever still runs in our cgroup subtree or names our state directories: shims, container processes.
leftover_pids() {
	{
		cgroup_dirs | while IFS= read -r d; do
			find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null
		done
		grep -slaE "$MARKER" /proc/[0-9]*/cmdline | cut -d/ -f3 | grep -vx "$$"
	} | sort -un
}
for _ in 1 2 3; do
	pids="$(leftover_pids)"
	[ -z "$pids" ] && break
	# shellcheck disable=SC2086
	kill -KILL $pids 2>/dev/null
	sleep 0.5
done

took containers

# 5. Host services.
if [ -f "$WORK/postgres/data/postmaster.pid" ]; then
	pg_ctl="$(printf '%s\n' /usr/lib/postgresql/*/bin/pg_ctl | sort -V | tail -n 1)"
	# Fast, not immediate: an immediate stop leaves its shared memory behind.
	if [ -x "$pg_ctl" ]; then
		runuser -u postgres -- "$pg_ctl" stop -m fast -t 20 -D "$WORK/postgres/data" >/dev/null 2>&1 ||
			runuser -u postgres -- "$pg_ctl" stop -m immediate -D "$WORK/postgres/data" >/dev/null 2>&1
	fi
fi
stop kfake 5

took host-services

# 6. Mounts under our directories (container root filesystems, pod volumes, network namespaces), deepest
#    first.
mountpoints() {
	awk '{print $5}' /proc/self/mountinfo | sed 's/\\040/ /g' |
		grep -E "^($WORK|$RUNDIR|$ETCD_DIR|/run/containerd/io.containerd)(/|$)" | awk '{print length, $0}' | sort -rn | cut -d' ' -f2-
}
for _ in 1 2 3; do
	mounts="$(mountpoints)"
	[ -z "$mounts" ] && break
	while IFS= read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
	done <<<"$mounts"
done

took mounts

# 7. Network: pod veths, the CNI bridge, the node's address.
for veth in $(ip -o link show master "$CNI_BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
	ip link delete "$veth" 2>/dev/null
done
for link in "$CNI_BRIDGE" "$NODE_LINK"; do
	ip link show "$link" >/dev/null 2>&1 && ip link delete "$link"
done

took links

# 8. iptables chains kube-proxy and kubelet made (KUBE-*), and the jumps to them; both families.
for ipt in iptables ip6tables; do
	command -v "$ipt" >/dev/null || continue
	for table in filter nat mangle raw; do
		rules="$("$ipt" -t "$table" -S 2>/dev/null)" || continue
		# Jumps from other chains first, then the chains themselves.
		grep -E -- '-j KUBE-' <<<"$rules" | grep -vE '^-A KUBE-' | while IFS= read -r rule; do
			eval "$ipt -t $table ${rule/#-A/-D}" 2>/dev/null
		done
		chains="$(grep -oE '^-N KUBE-[^ ]+' <<<"$rules" | cut -d' ' -f2)"
		for action in -F -X; do
			while IFS= read -r chain; do
				[ -n "$chain" ] && "$ipt" -t "$table" "$action" "$chain" 2>/dev/null
			done <<<"$chains"
		done
	done
done

took iptables

# 9. Our cgroup subtree, deepest first.
cgroup_dirs | while IFS= read -r d; do
	find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
done

took cgroups

# 10. Files: state directories, the CNI results cache, kubelet's log symlinks.
rm -rf "$WORK" "$RUNDIR" "$ETCD_DIR"
if [ -f "$OUT/var-lib-cni.ours" ]; then
	rm -rf /var/lib/cni
	rm -f "$OUT/var-lib-cni.ours"
else
	rm -f /var/lib/cni/results/"$CNI_NETWORK"-* 2>/dev/null
fi
for l in /var/log/containers/*; do
	[ -L "$l" ] && case "$(readlink "$l")" in "$WORK"/*) rm -f "$l" ;; esac
done
rmdir /var/log/containers 2>/dev/null
# containerd 1.6 puts shim sockets under /run/containerd/s whatever its state directory (and ctr its fifos
# under /run/containerd/fifo): with no system containerd running, /run/containerd is ours.
if [ -d /run/containerd ] && [ ! -S /run/containerd/containerd.sock ]; then
	rm -rf /run/containerd
fi

took files

# 11. sysctls kubelet, kube-proxy and up.sh changed.
if [ -f "$SYSCTL_SAVED" ]; then
	while IFS='=' read -r key value; do
		[ -n "$key" ] && sysctl -qw "$key=$value" 2>/dev/null
	done <"$SYSCTL_SAVED"
	rm -f "$SYSCTL_SAVED"
fi

took sysctls

# 12. What is left?
left=()
[ -n "$(leftover_pids)" ] && left+=("processes: $(leftover_pids | tr '\n' ' ')")
[ -n "$(mountpoints)" ] && left+=("mounts: $(mountpoints | tr '\n' ' ')")
for link in "$CNI_BRIDGE" "$NODE_LINK"; do
	ip link show "$link" >/dev/null 2>&1 && left+=("link $link")
done
for ipt in iptables ip6tables; do
	command -v "$ipt" >/dev/null || continue
	for table in filter nat mangle raw; do
		n="$("$ipt" -t "$table" -S 2>/dev/null | grep -c -- 'KUBE-')"
		[ "$n" -gt 0 ] && left+=("$ipt -t $table: $n KUBE- rules")
	done
done
[ -n "$(cgroup_dirs)" ] && left+=("cgroups: $(cgroup_dirs | tr '\n' ' ')")
for d in "$WORK" "$RUNDIR" "$ETCD_DIR"; do
	[ -e "$d" ] && left+=("directory $d")
done
if [ ${#left[@]} -gt 0 ]; then
	log "teardown left behind:"
	printf '  %s\n' "${left[@]}" >&2
	exit 1
fi
log "torn down in $((SECONDS - began)) s (${timings[*]}); the machine is clean"

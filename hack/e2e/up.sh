#!/usr/bin/env bash
# Brings up a real one-node Kubernetes cluster on this machine, without Docker, plus the services Herald
# needs on the host, and writes bin/e2e/env for the end-to-end test (test/e2e):
#
#   containerd (runc, bridge CNI) → etcd → kube-apiserver → kube-controller-manager → kube-scheduler →
#   kubelet → kube-proxy (iptables), with the node at $NODE_IP; PostgreSQL and the Kafka-protocol broker
#   (hack/kfake) listening on $NODE_IP for the pods; the Herald and pause images built locally and
#   imported into containerd. No cluster DNS: pods reach the host services and the messenger simulator's
#   Service by address.
#
# Run as root. Starts with a teardown (hack/e2e/down.sh) of whatever an earlier run left. Installs the
# Debian packages it needs when they are missing. The Kubernetes binaries are built once and cached under
# ./bin/k8s (hack/k8s-binaries.sh); see README.md for the times. What the facts behind each setting are:
# ../shared/k8s-e2e.md.
set -euo pipefail
# shellcheck source=hack/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || die "run as root"
cd "$ROOT"
began=$SECONDS
phase_began=$SECONDS
phase() {
	log "$1 ($((SECONDS - phase_began)) s)"
	phase_began=$SECONDS
}

rm -rf "$LOGS" "$ENV_FILE"
mkdir -p "$OUT" "$LOGS"
if [ -e "$WORK" ] || [ -e "$RUNDIR" ] || ip link show "$NODE_LINK" >/dev/null 2>&1; then
	log "an earlier run left a cluster behind: tearing it down first"
fi
"$ROOT/hack/e2e/down.sh" >/dev/null 2>&1 || "$ROOT/hack/e2e/down.sh" || die "the machine is not clean after an earlier run (see above)"

# --- Packages --------------------------------------------------------------------------------------------
need=()
have() { command -v "$1" >/dev/null 2>&1; }
have containerd || need+=(containerd)
have runc || need+=(runc)
[ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/loopback ] || need+=(containernetworking-plugins)
have iptables || need+=(iptables)
have conntrack || need+=(conntrack)
have socat || need+=(socat)
have ethtool || need+=(ethtool)
have ip || need+=(iproute2)
have etcd || need+=(etcd-server)
have openssl || need+=(openssl)
have curl || need+=(curl)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need+=(postgresql)
if [ ${#need[@]} -gt 0 ]; then
	log "installing ${need[*]}"
	apt-get update -q >"$LOGS/apt.log" 2>&1 || die "apt-get update failed (see $LOGS/apt.log)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >>"$LOGS/apt.log" 2>&1 ||
		die "apt-get install failed (see $LOGS/apt.log)"
	# Debian starts a system PostgreSQL cluster on install; the test runs its own.
	if [[ " ${need[*]} " == *" postgresql "* ]]; then
		(have service && service postgresql stop >/dev/null 2>&1) || true
	fi
fi
phase "packages ready"

# --- Binaries ------------------------------------------------------------------------------------------
K8S="$(k8s_dir)"
KUBECTL="$K8S/kubectl"
mkdir -p "$RUNDIR"
echo "$K8S" >"$RUNDIR/k8s-dir"
for tool in "$ROOT/bin/helm" "$ROOT/bin/crane"; do
	[ -x "$tool" ] || die "$tool is missing: run make tools (make test-e2e does)"
done
mkdir -p "$WORK/bin" "$OUT/image"
go build -o "$OUT/kfake" ./hack/kfake
cp "$OUT/kfake" "$WORK/bin/kfake"
# The image's binary is built as the Dockerfile builds it.
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$OUT/image/herald" ./cmd/herald
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$OUT/image/pause" ./hack/e2e/pause
phase "binaries built"

# --- Host settings -------------------------------------------------------------------------------------
if [ ! -f "$SYSCTL_SAVED" ]; then
	for key in "${SYSCTLS[@]}"; do
		value="$(sysctl -n "$key" 2>/dev/null)" && printf '%s=%s\n' "$key" "$value"
	done >"$SYSCTL_SAVED.tmp"
	mv "$SYSCTL_SAVED.tmp" "$SYSCTL_SAVED"
fi
sysctl -qw net.ipv4.ip_forward=1
sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || log "no net.bridge.bridge-nf-call-iptables: pod-to-Service traffic on the bridge may bypass kube-proxy"
ip link add "$NODE_LINK" type bridge
ip addr add "$NODE_IP/32" dev "$NODE_LINK"
ip link set "$NODE_LINK" up
# ClusterIPs from the host: kube-proxy rewrites the destination after the route is chosen, so the Service
# range needs a route, and it must not be the default one: a connection made before kube-proxy has the
# Service's rules would leave the machine (here a transparent proxy answers 404, and a kept-alive client
# stays on it). Through the node's own port-less bridge such a packet goes nowhere.
ip route add "$SERVICE_CIDR" dev "$NODE_LINK"
# The cgroup subtree every pod goes under (kubelet's cgroupRoot): one place for teardown to empty.
if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
	# cgroup v2 (untested here: this machine has v1 hierarchies).
	mkdir -p "/sys/fs/cgroup/$CGROUP_ROOT"
else
	for h in /sys/fs/cgroup/*/; do
		mountpoint -q "$h" || continue
		mkdir -p "$h$CGROUP_ROOT"
		if [ -f "${h}cpuset.cpus" ]; then
			cat "${h}cpuset.cpus" >"$h$CGROUP_ROOT/cpuset.cpus"
			cat "${h}cpuset.mems" >"$h$CGROUP_ROOT/cpuset.mems"
		fi
	done
fi

# --- Certificates --------------------------------------------------------------------------------------
mkdir -p "$PKI"
(
	cd "$PKI"
	openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3 -subj "/CN=herald-e2e-ca" \
		-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
	sign() { # NAME SUBJECT EXTENSIONS
		openssl req -new -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
		openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3 -out "$1.crt" \
			-extfile <(printf '%b\n' "$3") 2>/dev/null
	}
	sign apiserver "/CN=kube-apiserver" "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,IP:$NODE_IP,IP:$KUBERNETES_SERVICE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
	# One client certificate for every component and the test: system:masters.
	sign admin "/O=system:masters/CN=herald-e2e-admin" "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth"
	openssl genrsa -out sa.key 2048 2>/dev/null
	openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
)
b64() { base64 -w0 <"$1"; }
cat >"$WORK/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: herald-e2e
  cluster:
    server: https://$NODE_IP:$APISERVER_PORT
    certificate-authority-data: $(b64 "$PKI/ca.crt")
users:
- name: herald-e2e-admin
  user:
    client-certificate-data: $(b64 "$PKI/admin.crt")
    client-key-data: $(b64 "$PKI/admin.key")
contexts:
- name: herald-e2e
  context: {cluster: herald-e2e, user: herald-e2e-admin}
current-context: herald-e2e
EOF
cp "$WORK/kubeconfig" "$KUBECONFIG_FILE"
chmod 600 "$KUBECONFIG_FILE"
phase "node address, cgroups and certificates ready"

# containerd's CNI library caches results in /var/lib/cni whatever the configuration: when this run
# creates it, teardown removes it.
[ -e /var/lib/cni ] || touch "$OUT/var-lib-cni.ours"

# --- containerd ------------------------------------------------------------------------------------------
mkdir -p "$WORK/containerd" "$WORK/cni/net.d" "$WORK/cni/ipam" "$RUNDIR/containerd"
cat >"$WORK/containerd/config.toml" <<EOF
version = 2
root = "$WORK/containerd/root"
state = "$RUNDIR/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$CONTAINERD_SOCK"
[plugins."io.containerd.internal.v1.opt"]
  path = "$WORK/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Root here lacks CAP_SYS_RESOURCE: runc fails to raise oom_score_adj ("can't get final child's PID
  # from pipe: EOF") unless containerd keeps it at or above its own.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$RUNDIR/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$WORK/cni/net.d"
EOF
cat >"$WORK/cni/net.d/10-$CNI_NETWORK.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "$CNI_NETWORK",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$CNI_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$WORK/cni/ipam",
        "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$POD_GATEWAY"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
EOF
start containerd containerd --config "$WORK/containerd/config.toml"
wait_for "containerd" 30 ctr --address "$CONTAINERD_SOCK" version || die "containerd did not start (see $LOGS/containerd.log)"
phase "containerd up"

# --- Images --------------------------------------------------------------------------------------------
# No Docker: the layers are tarballs of static binaries, assembled into images by crane against an
# in-memory registry (crane mutate cannot edit a tarball), pulled back into a tarball, imported.
(
	cd "$OUT/image"
	chmod 0755 herald pause
	tar --owner=0 --group=0 --numeric-owner -cf herald-layer.tar herald
	tar --owner=0 --group=0 --numeric-owner -cf pause-layer.tar pause
	crane="$ROOT/bin/crane"
	"$crane" registry serve --address 127.0.0.1:0 >"$LOGS/crane-registry.log" 2>&1 &
	registry_pid=$!
	trap 'kill "$registry_pid" 2>/dev/null' EXIT
	for _ in $(seq 50); do
		port="$(grep -oE 'serving on port [0-9]+' "$LOGS/crane-registry.log" | awk '{print $4}')" && [ -n "$port" ] && break
		sleep 0.1
	done
	[ -n "${port:-}" ] || die "crane registry did not start (see $LOGS/crane-registry.log)"
	reg="127.0.0.1:$port"
	c() { "$crane" --insecure "$@" >>"$LOGS/crane.log" 2>&1; }
	c append -f pause-layer.tar -t "$reg/pause:e2e"
	c mutate --entrypoint /pause --set-platform linux/amd64 -t "$reg/pause:e2e" "$reg/pause:e2e"
	c append -f herald-layer.tar -t "$reg/herald:${IMAGE_TAGS[0]}"
	# As the Dockerfile's image: entrypoint /herald, the distroless nonroot user.
	c mutate --entrypoint /herald --user 65532:65532 --set-platform linux/amd64 -t "$reg/herald:${IMAGE_TAGS[0]}" "$reg/herald:${IMAGE_TAGS[0]}"
	# The second image, for the upgrade: same binary, another digest.
	c mutate --label "dev.herald.e2e.build=${IMAGE_TAGS[1]}" -t "$reg/herald:${IMAGE_TAGS[1]}" "$reg/herald:${IMAGE_TAGS[0]}"
	rm -f images.tar
	c pull "$reg/pause:e2e" "$reg/herald:${IMAGE_TAGS[0]}" "$reg/herald:${IMAGE_TAGS[1]}" images.tar
	ctr_() { ctr --address "$CONTAINERD_SOCK" -n k8s.io "$@"; }
	ctr_ images import images.tar >>"$LOGS/crane.log" 2>&1
	ctr_ images tag --force "$reg/pause:e2e" "$PAUSE_IMAGE" >/dev/null
	ctr_ images rm "$reg/pause:e2e" >/dev/null
	for tag in "${IMAGE_TAGS[@]}"; do
		ctr_ images tag --force "$reg/herald:$tag" "$IMAGE_REPO:$tag" >/dev/null
		ctr_ images rm "$reg/herald:$tag" >/dev/null
	done
) || die "building the images failed (see $LOGS/crane.log)"
phase "images imported: $PAUSE_IMAGE, $IMAGE_REPO:{${IMAGE_TAGS[*]}}"

# --- Control plane -------------------------------------------------------------------------------------
mkdir -p "$ETCD_DIR"
start etcd etcd --name herald-e2e --data-dir "$ETCD_DIR/data" \
	--listen-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
	--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
	--initial-cluster "herald-e2e=http://127.0.0.1:$ETCD_PEER_PORT" --log-level warn
wait_for "etcd" 30 curl -fsS "http://127.0.0.1:$ETCD_CLIENT_PORT/health" || die "etcd did not start (see $LOGS/etcd.log)"

start kube-apiserver "$K8S/kube-apiserver" \
	--etcd-servers "http://127.0.0.1:$ETCD_CLIENT_PORT" \
	--bind-address "$NODE_IP" --advertise-address "$NODE_IP" --secure-port "$APISERVER_PORT" --cert-dir "$WORK/apiserver" \
	--tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" --client-ca-file "$PKI/ca.crt" \
	--service-cluster-ip-range "$SERVICE_CIDR" \
	--service-account-issuer https://kubernetes.default.svc.cluster.local \
	--service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
	--authorization-mode Node,RBAC \
	--kubelet-client-certificate "$PKI/admin.crt" --kubelet-client-key "$PKI/admin.key" \
	--kubelet-preferred-address-types InternalIP,Hostname \
	--profiling=false --v=1
wait_for "kube-apiserver" 120 "$KUBECTL" --kubeconfig "$KUBECONFIG_FILE" get --raw /readyz ||
	die "kube-apiserver did not become ready (see $LOGS/kube-apiserver.log)"
phase "etcd and kube-apiserver ready"

start kube-controller-manager "$K8S/kube-controller-manager" \
	--kubeconfig "$WORK/kubeconfig" --bind-address 127.0.0.1 --secure-port "$CONTROLLER_MANAGER_PORT" --cert-dir "$WORK/controller-manager" \
	--leader-elect=false --root-ca-file "$PKI/ca.crt" --service-account-private-key-file "$PKI/sa.key" \
	--service-cluster-ip-range "$SERVICE_CIDR" --profiling=false --v=1
start kube-scheduler "$K8S/kube-scheduler" \
	--kubeconfig "$WORK/kubeconfig" --bind-address 127.0.0.1 --secure-port "$SCHEDULER_PORT" --cert-dir "$WORK/scheduler" \
	--leader-elect=false --profiling=false --v=1

# --- Node ----------------------------------------------------------------------------------------------
mkdir -p "$WORK/kubelet" "$WORK/pod-logs" "$WORK/kubelet-plugins"
cat >"$WORK/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine mounts every controller but hugetlb on a v1 hierarchy; kubelet refuses cgroup v1 by default.
failCgroupV1: false
# containerd 1.6 does not report its cgroup driver: say it.
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP_ROOT
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
# Nothing can be pulled again: never collect images.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# The disk and memory are shared with other work: evict nothing.
evictionHard: {memory.available: "0%", nodefs.available: "0%", nodefs.inodesFree: "0%", imagefs.available: "0%"}
failSwapOn: false
podLogsDir: $WORK/pod-logs
volumePluginDir: $WORK/kubelet-plugins
serializeImagePulls: false
EOF
start kubelet "$K8S/kubelet" --config "$WORK/kubelet/config.yaml" --kubeconfig "$WORK/kubeconfig" \
	--root-dir "$WORK/kubelet" --cert-dir "$WORK/kubelet/pki" \
	--hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --v=1
# iptables mode. --conntrack-max-per-core=0: leave nf_conntrack_max alone (kube-proxy cannot raise it
# here); the timeouts likewise.
start kube-proxy "$K8S/kube-proxy" --kubeconfig "$WORK/kubeconfig" --hostname-override "$NODE_NAME" \
	--proxy-mode iptables --cluster-cidr "$POD_CIDR" --nodeport-addresses primary \
	--conntrack-max-per-core=0 --conntrack-tcp-timeout-established=0 --conntrack-tcp-timeout-close-wait=0 \
	--metrics-bind-address "127.0.0.1:$PROXY_METRICS_PORT" --healthz-bind-address "127.0.0.1:$PROXY_HEALTHZ_PORT" --v=1
node_ready() {
	[ "$(kubectl_ get node "$NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
wait_for "node $NODE_NAME Ready" 120 node_ready || die "the node did not become Ready (see $LOGS/kubelet.log)"
wait_for "the default ServiceAccount" 60 kubectl_ -n default get serviceaccount default ||
	die "no default ServiceAccount (see $LOGS/kube-controller-manager.log)"
for c in kube-controller-manager kube-scheduler kube-proxy; do
	alive "$c" || die "$c exited (see $LOGS/$c.log)"
done
phase "cluster ready"

# --- Host services -------------------------------------------------------------------------------------
pg_bin="$(dirname "$(printf '%s\n' /usr/lib/postgresql/*/bin/initdb | sort -V | tail -n 1)")"
mkdir -p "$WORK/postgres"
chown postgres:postgres "$WORK/postgres"
touch "$LOGS/postgres.log"
chown postgres "$LOGS/postgres.log"
pg() { runuser -u postgres -- "$@"; }
pg "$pg_bin/initdb" -D "$WORK/postgres/data" -U postgres -A trust -E UTF8 --no-sync --locale=C >"$LOGS/initdb.log" 2>&1 ||
	die "initdb failed (see $LOGS/initdb.log)"
# Pods connect from the pod network; the server listens only on the node address.
echo "host all all 0.0.0.0/0 trust" >>"$WORK/postgres/data/pg_hba.conf"
pg "$pg_bin/pg_ctl" start -w -t 60 -D "$WORK/postgres/data" -l "$LOGS/postgres.log" \
	-o "-c listen_addresses=$NODE_IP -c port=$POSTGRES_PORT -c unix_socket_directories=$WORK/postgres -c max_connections=500 -c dynamic_shared_memory_type=mmap -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
	>/dev/null || die "PostgreSQL did not start (see $LOGS/postgres.log)"
pg "$pg_bin/psql" -qX -h "$NODE_IP" -p "$POSTGRES_PORT" -U postgres -c "CREATE DATABASE herald" >/dev/null
start kfake "$WORK/bin/kfake" -addr "$NODE_IP:$KAFKA_PORT" -advertise "$NODE_IP:$KAFKA_PORT" -prefix herald -partitions 12
wait_for "the Kafka broker" 30 grep -q '^ready ' "$LOGS/kfake.log" || die "kfake did not start (see $LOGS/kfake.log)"
phase "PostgreSQL and the Kafka broker up on $NODE_IP"

cat >"$ENV_FILE" <<EOF
KUBECONFIG=$KUBECONFIG_FILE
HERALD_E2E_KUBECTL=$KUBECTL
HERALD_E2E_HELM=$ROOT/bin/helm
HERALD_E2E_CHART=$ROOT/charts/herald
HERALD_E2E_NODE_IP=$NODE_IP
HERALD_E2E_DATABASE_URL=postgres://postgres@$NODE_IP:$POSTGRES_PORT/herald?sslmode=disable
HERALD_E2E_KAFKA_BROKERS=$NODE_IP:$KAFKA_PORT
HERALD_E2E_SIM_SERVICE_IP=$SIM_SERVICE_IP
HERALD_E2E_PUBLIC_SERVICE_IP=$PUBLIC_SERVICE_IP
HERALD_E2E_IMAGE_REPOSITORY=$IMAGE_REPO
HERALD_E2E_IMAGE_TAGS=${IMAGE_TAGS[*]}
HERALD_E2E_PSQL=$pg_bin/psql
HERALD_E2E_LOGS=$LOGS
EOF
log "cluster up in $((SECONDS - began)) s; environment in $ENV_FILE"

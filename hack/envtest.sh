#!/usr/bin/env bash
# Prints, as the last line of stdout, a directory usable as KUBEBUILDER_ASSETS: it holds kube-apiserver
# and etcd (and kubectl when one is installed). In order of preference:
#   1. $KUBEBUILDER_ASSETS, when it already holds both binaries;
#   2. setup-envtest, when it can download the release binaries;
#   3. kube-apiserver built from the k8s.io/kubernetes module pinned in hack/tools/go.mod (cached in
#      ./bin/k8s, rebuilt only when that version changes; a cold build takes several minutes) and etcd
#      from Debian's etcd-server package (installed when missing and running as root).
# Everything else goes to stderr.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT="$PWD"
log() { echo "envtest: $*" >&2; }
SETUP_ENVTEST_VERSION=v0.25.1
K8S_MODULE_VERSION="$(cd hack/tools && go list -m -f '{{.Version}}' k8s.io/kubernetes)"
K8S_VERSION="${K8S_MODULE_VERSION#v}"
if [ -z "$K8S_MODULE_VERSION" ]; then
	log "cannot read the k8s.io/kubernetes version from hack/tools/go.mod"
	exit 1
fi

has_assets() { [ -x "$1/kube-apiserver" ] && [ -x "$1/etcd" ]; }

# 1. Given by the caller.
if [ -n "${KUBEBUILDER_ASSETS:-}" ] && has_assets "$KUBEBUILDER_ASSETS"; then
	echo "$KUBEBUILDER_ASSETS"
	exit 0
fi

# 2. setup-envtest, which downloads release binaries (fails without access to their bucket).
if [ -z "${HERALD_ENVTEST_NO_DOWNLOAD:-}" ]; then
	if [ ! -x bin/setup-envtest ]; then
		GOBIN="$ROOT/bin" go install "sigs.k8s.io/controller-runtime/tools/setup-envtest@$SETUP_ENVTEST_VERSION" >&2 ||
			log "could not install setup-envtest"
	fi
	if [ -x bin/setup-envtest ]; then
		if dir="$(timeout 120 bin/setup-envtest use "$K8S_VERSION" --bin-dir "$ROOT/bin/envtest" -p path 2>/dev/null)" &&
			has_assets "$dir"; then
			echo "$dir"
			exit 0
		fi
		log "setup-envtest could not provide Kubernetes $K8S_VERSION; building kube-apiserver instead"
	fi
fi

# 3. Build kube-apiserver, take etcd from the distribution.
DIR="$ROOT/bin/k8s"
mkdir -p "$DIR"
if [ -x "$DIR/kube-apiserver" ] && [ "$(cat "$DIR/kube-apiserver.version" 2>/dev/null)" = "$K8S_MODULE_VERSION" ]; then
	log "kube-apiserver $K8S_MODULE_VERSION already built"
else
	log "building kube-apiserver $K8S_MODULE_VERSION from source (several minutes on a cold cache)"
	(cd hack/tools && go build -buildvcs=false -o "$DIR/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver) >&2
	mv "$DIR/kube-apiserver.tmp" "$DIR/kube-apiserver"
	echo "$K8S_MODULE_VERSION" >"$DIR/kube-apiserver.version"
fi

if ! command -v etcd >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		log "installing etcd-server"
		{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends etcd-server; } >&2
	else
		log "etcd is missing: install it (Debian: apt-get install etcd-server) or set KUBEBUILDER_ASSETS"
		exit 1
	fi
fi
ln -sf "$(command -v etcd)" "$DIR/etcd"
if command -v kubectl >/dev/null 2>&1; then
	ln -sf "$(command -v kubectl)" "$DIR/kubectl"
fi
echo "$DIR"

#!/usr/bin/env bash
# Prints, as the last line of stdout, a directory usable as KUBEBUILDER_ASSETS: it holds kube-apiserver
# and etcd (and kubectl when one is installed). In order of preference:
#   1. $KUBEBUILDER_ASSETS, when it already holds both binaries;
#   2. setup-envtest, when it can download the release binaries;
#   3. kube-apiserver built from the k8s.io/kubernetes module pinned in hack/tools/go.mod, together with
#      kubectl and the other binaries of the end-to-end cluster (hack/k8s-binaries.sh: one go build, cached
#      in ./bin/k8s/<k8s version>-<go version>, rebuilt only when a version changes; a cold build takes
#      about 25 minutes), and etcd from Debian's etcd-server package (installed when missing, as root).
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

# 3. Build kube-apiserver (with the other binaries of the end-to-end cluster, in one build shared with
#    make test-e2e: hack/k8s-binaries.sh), take etcd from the distribution.
DIR="$(hack/k8s-binaries.sh | tail -n 1)"

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
# ./bin/k8s itself stays usable as KUBEBUILDER_ASSETS: the test suites fall back to it when run by hand.
for b in kube-apiserver etcd kubectl; do
	ln -sfn "$DIR/$b" "$ROOT/bin/k8s/$b"
done
echo "$DIR"

#!/usr/bin/env bash
# Builds the Kubernetes binaries the tests run — kube-apiserver (envtest and the end-to-end cluster),
# kube-controller-manager, kube-scheduler, kubelet, kube-proxy and kubectl (the end-to-end cluster) — from
# the k8s.io/kubernetes module pinned in hack/tools/go.mod, in ONE go build, so the packages they share are
# compiled once. The result is cached in ./bin/k8s/<k8s version>-<go version>/ and rebuilt only when either
# version changes. Prints that directory as the last line of stdout; everything else goes to stderr.
#
# Cold (empty Go build cache) the build takes about 25 minutes on a busy 2-core machine; see README.md.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT="$PWD"
log() { echo "k8s-binaries: $*" >&2; }

K8S_MODULE_VERSION="$(cd hack/tools && go list -m -f '{{.Version}}' k8s.io/kubernetes)"
if [ -z "$K8S_MODULE_VERSION" ]; then
	log "cannot read the k8s.io/kubernetes version from hack/tools/go.mod"
	exit 1
fi
GO_VERSION="$(go env GOVERSION)"
BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
DIR="$ROOT/bin/k8s/$K8S_MODULE_VERSION-$GO_VERSION"

complete() {
	local b
	[ -f "$DIR/.complete" ] || return 1
	for b in "${BINARIES[@]}"; do
		[ -x "$DIR/$b" ] || return 1
	done
}

mkdir -p "$ROOT/bin/k8s"
# One build at a time: make test and make test-e2e may start together.
exec 9>"$ROOT/bin/k8s/.lock"
flock 9

if complete; then
	log "Kubernetes $K8S_MODULE_VERSION binaries already built with $GO_VERSION"
	echo "$DIR"
	exit 0
fi

# The version ldflags of the Kubernetes release build: without them the binaries report
# v0.0.0-master+$Format:%H$, which kubectl cannot parse and Helm's kubeVersion checks refuse.
major="${K8S_MODULE_VERSION#v}"
major="${major%%.*}"
minor="${K8S_MODULE_VERSION#v*.}"
minor="${minor%%.*}"
ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X $pkg.gitVersion=$K8S_MODULE_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
	ldflags+=" -X $pkg.gitTreeState=clean"
done
pkgs=()
for b in "${BINARIES[@]}"; do
	pkgs+=("k8s.io/kubernetes/cmd/$b")
done

log "building ${BINARIES[*]} $K8S_MODULE_VERSION with $GO_VERSION in one go build (about 25 minutes on a cold build cache)"
tmp="$DIR.tmp"
rm -rf "$tmp"
mkdir -p "$tmp"
start=$SECONDS
(cd hack/tools && go build -buildvcs=false -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}") >&2
echo "$K8S_MODULE_VERSION $GO_VERSION" >"$tmp/.complete"
rm -rf "$DIR"
mv "$tmp" "$DIR"
log "built in $((SECONDS - start)) s"
# Other versions, and the layout before this script (a lone bin/k8s/kube-apiserver), are dropped.
for old in "$ROOT"/bin/k8s/*; do
	if [ -d "$old" ] && [ ! -L "$old" ] && [ "$old" != "$DIR" ]; then
		rm -rf "$old"
	fi
done
rm -f "$ROOT/bin/k8s/kube-apiserver.version"
[ -L "$ROOT/bin/k8s/kube-apiserver" ] || rm -f "$ROOT/bin/k8s/kube-apiserver"
echo "$DIR"

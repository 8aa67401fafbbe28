#!/usr/bin/env bash
# Generates the operator's Kubernetes manifests and code with controller-gen (pinned, installed into ./bin):
#   hack/manifests.sh generate   CRDs into config/crd/bases, the RBAC roles into config/rbac (from the markers of
#                                controllers/ and internal/operator/), deepcopy into api/
#   hack/manifests.sh check      regenerates, then fails if the generated files differ from the committed ones
set -euo pipefail

cd "$(dirname "$0")/.."
CONTROLLER_GEN_VERSION=v0.23.0
CONTROLLER_GEN="$PWD/bin/controller-gen"

install_controller_gen() {
	if [ -x "$CONTROLLER_GEN" ] && "$CONTROLLER_GEN" --version 2>/dev/null | grep -q "$CONTROLLER_GEN_VERSION"; then
		return
	fi
	echo "installing controller-gen $CONTROLLER_GEN_VERSION into ./bin" >&2
	GOBIN="$PWD/bin" go install "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_GEN_VERSION"
}

generate() {
	install_controller_gen
	"$CONTROLLER_GEN" object paths=./api/...
	"$CONTROLLER_GEN" crd rbac:roleName=herald-operator \
		paths=./api/... paths=./controllers/... paths=./internal/operator/... \
		output:crd:artifacts:config=config/crd/bases \
		output:rbac:artifacts:config=config/rbac
}

GENERATED=(api/v1alpha1/zz_generated.deepcopy.go config/crd/bases config/rbac/role.yaml)

case "${1:-generate}" in
generate)
	generate
	;;
check)
	generate
	if ! git diff --exit-code --stat -- "${GENERATED[@]}" ||
		[ -n "$(git status --porcelain --untracked-files=all -- "${GENERATED[@]}")" ]; then
		git status --short -- "${GENERATED[@]}" >&2
		echo "generated manifests are out of date: run 'make manifests' and commit the result" >&2
		exit 1
	fi
	;;
*)
	echo "usage: $0 [generate|check]" >&2
	exit 2
	;;
esac

#!/usr/bin/env bash
# make test-e2e: cluster up (hack/e2e/up.sh) → the end-to-end test (test/e2e) → teardown (hack/e2e/down.sh),
# the teardown always, also when a step fails or the run is interrupted. Exits with the first failure.
#
#   HERALD_E2E_KEEP=1 hack/e2e/run.sh    leave the cluster up after the test (then: hack/e2e/down.sh)
#   HERALD_E2E_RUN=<regexp>              go test -run filter
set -euo pipefail
# shellcheck source=hack/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || die "run as root"
cd "$ROOT"
began=$SECONDS

teardown() {
	local status=$?
	trap - EXIT INT TERM
	if [ -n "${HERALD_E2E_KEEP:-}" ]; then
		log "HERALD_E2E_KEEP is set: the cluster stays up (KUBECONFIG=$KUBECONFIG_FILE); hack/e2e/down.sh removes it"
	else
		local t=$SECONDS
		if ! "$ROOT/hack/e2e/down.sh" && [ "$status" = 0 ]; then status=1; fi
		log "teardown: $((SECONDS - t)) s"
	fi
	log "make test-e2e: $((SECONDS - began)) s in all, exit status $status"
	exit "$status"
}
trap teardown EXIT
trap 'exit 130' INT TERM

t=$SECONDS
"$ROOT/hack/e2e/up.sh"
log "cluster up: $((SECONDS - t)) s"

t=$SECONDS
HERALD_E2E_ENV="$ENV_FILE" go test -count=1 -timeout 20m -v -run "${HERALD_E2E_RUN:-.}" ./test/e2e/ 2>&1 | tee "$LOGS/test.log"
log "test: $((SECONDS - t)) s"

#!/usr/bin/env bash
# Makes sure promtool is on PATH: the tests of the Grafana dashboard and the Prometheus rules
# (test/monitoring) check every PromQL expression and run the alerts' unit tests with it. Installs Debian's
# prometheus package, which ships promtool, when run as root; otherwise says exactly what to install.
set -euo pipefail
if command -v promtool >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "promtool missing: installing Debian's prometheus package" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  # The package starts a Prometheus server on install; the tests need only promtool.
  (command -v service >/dev/null && service prometheus stop >/dev/null 2>&1) || true
  command -v promtool >/dev/null 2>&1 && exit 0
fi
cat >&2 <<'MSG'
promtool is not installed.
Install it with:   sudo apt-get install prometheus     (Debian's package ships promtool)
or put a promtool binary on PATH.
MSG
exit 1

#!/usr/bin/env bash
# Makes sure what the dev tests drive is installed: headless Chromium (the dev console's browser test,
# through the DevTools protocol), curl and jq (the test that runs herald dev's printed walkthrough).
# Installs Debian's packages when run as root, otherwise says exactly what to install.
set -euo pipefail
missing() {
  local pkgs=()
  [ -n "${HERALD_CHROMIUM:-}" ] && [ -x "$HERALD_CHROMIUM" ] || command -v chromium >/dev/null 2>&1 || pkgs+=(chromium)
  command -v curl >/dev/null 2>&1 || pkgs+=(curl)
  command -v jq >/dev/null 2>&1 || pkgs+=(jq)
  echo "${pkgs[@]:-}"
}
need="$(missing)"
if [ -z "$need" ]; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "missing: $need — installing Debian's packages" >&2
  apt-get update -qq
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need >/dev/null
  need="$(missing)"
  [ -z "$need" ] && exit 0
fi
cat >&2 <<MSG
Not installed: $need (the dev console's browser test needs chromium; the walkthrough test curl and jq).
Install them with:   sudo apt-get install $need
(or point HERALD_CHROMIUM at a Chromium or Chrome binary).
MSG
exit 1

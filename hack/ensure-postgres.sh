#!/usr/bin/env bash
# Makes sure the PostgreSQL server binaries (initdb, pg_ctl, postgres) are installed: Herald's tests and
# `herald dev` start private clusters from them. Installs Debian's postgresql package when run as root,
# otherwise says exactly what to install.
set -euo pipefail
have() {
  [ -n "${HERALD_PG_BIN:-}" ] && [ -x "$HERALD_PG_BIN/initdb" ] && return 0
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && return 0
  command -v initdb >/dev/null 2>&1
}
if have; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "PostgreSQL server binaries missing: installing Debian's postgresql package" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
  # Debian starts a system cluster on install; Herald runs its own and does not need it.
  (command -v service >/dev/null && service postgresql stop >/dev/null 2>&1) || true
  have && exit 0
fi
cat >&2 <<'MSG'
PostgreSQL server binaries (initdb, pg_ctl, postgres) are not installed.
Install them with:   sudo apt-get install postgresql
or point HERALD_PG_BIN at the directory that holds them, or set HERALD_DATABASE_URL to an existing server.
MSG
exit 1

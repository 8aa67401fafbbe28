#!/usr/bin/env bash
# chaos-table.sh REPORT DOC: puts the results table that `make chaos` wrote to REPORT into DOC, between the
# lines <!-- chaos-table:begin --> and <!-- chaos-table:end -->, with when, where and on which commit it
# was measured. The table is what the run measured, failures included.
set -euo pipefail
report=$1 doc=$2
grep -q '<!-- chaos-table:begin -->' "$doc" || { echo "$doc has no <!-- chaos-table:begin --> marker" >&2; exit 1; }
table=$(grep '^|' "$report")
[ -n "$table" ] || { echo "$report holds no table" >&2; exit 1; }
cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //' || true)
stamp="Measured by \`make chaos\` on $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown): $(nproc) cores${cpu:+ ($cpu)}, $(free -g 2>/dev/null | awk '/^Mem:/ {print $2 " GiB"}'), load average $(cut -d' ' -f1-3 /proc/loadavg) at the end."
tmp=$(mktemp)
awk -v stamp="$stamp" -v table="$table" '
  /<!-- chaos-table:begin -->/ { print; print ""; print stamp; print ""; print table; print ""; skip = 1; next }
  /<!-- chaos-table:end -->/ { skip = 0 }
  !skip { print }
' "$doc" > "$tmp"
mv "$tmp" "$doc"
echo "table written to $doc"

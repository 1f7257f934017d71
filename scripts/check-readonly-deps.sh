#!/usr/bin/env bash
# Proves that serverfs-mcp's dependency graph (everything but dev-only
# edges, every target) holds nothing that writes, patches or runs
# processes. Read-only is what serverfs-mcp is: this fails CI if a
# write/exec crate or a process-spawning feature ever reaches it.
set -euo pipefail
cd "$(dirname "$0")/.."

forbidden_crates=(serverfs-exec serverfs-patch serverfs-sandbox-write serverfs-dev process-wrap portable-pty)
forbidden_features=('tokio feature "process"' 'rmcp feature "transport-child-process"')

graph() { cargo tree --locked -p serverfs-mcp --target all --prefix none -e "$1" --format '{p}'; }
shipped=$(graph no-dev,features)
with_dev=$(graph all,features)

# Positive controls: the listing does contain what is there, and the same
# query with dev edges sees the test-only process crate, so a miss below
# means "absent", not "the query is broken".
grep -q '^serverfs-core ' <<<"$shipped" || { echo "control failed: serverfs-core not listed"; exit 1; }
grep -q '^process-wrap ' <<<"$with_dev" || { echo "control failed: dev-only process-wrap not listed"; exit 1; }
grep -qF 'tokio feature "process"' <<<"$with_dev" || { echo "control failed: dev-only tokio/process not listed"; exit 1; }

fail=0
for crate in "${forbidden_crates[@]}"; do
  if grep -q "^$crate " <<<"$shipped"; then
    echo "FORBIDDEN: $crate is in serverfs-mcp's dependency graph"; fail=1
  else
    echo "ok: $crate absent"
  fi
done
for f in "${forbidden_features[@]}"; do
  if grep -qF "$f" <<<"$shipped"; then
    echo "FORBIDDEN: $f is enabled for serverfs-mcp"; fail=1
  else
    echo "ok: $f not enabled"
  fi
done
[ "$fail" = 0 ] && echo "readonly-deps: serverfs-mcp has no write/patch/exec crate"
exit $fail

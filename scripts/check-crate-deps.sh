#!/usr/bin/env bash
# The supervisor's guard: serverfs-supervisor is the child side of the
# process boundary, the code every command runs under. It links no other
# crate of this workspace (serverfs-exec, serverfs-core…) and no async
# runtime: supervisor ↛ exec, core, tokio. Fails CI unless its shipped graph
# (every edge but dev-only ones, every target) holds exactly the local crate
# serverfs-supervisor and none of the forbidden third-party crates.
set -euo pipefail
cd "$(dirname "$0")/.."

forbidden=(tokio tokio-util mio futures futures-util async-trait rmcp hyper axum tracing clap)

graph() { cargo tree --locked -p "$1" --target all --prefix none -e no-dev --format '{p}'; }
shipped=$(graph serverfs-supervisor)
fail=0

locals=$(grep -E '^[^ ]+ v[^ ]+ \(/' <<<"$shipped" | cut -d' ' -f1 | sort -u)
if [ "$locals" = serverfs-supervisor ]; then
  echo "ok: serverfs-supervisor links no other crate of the workspace"
else
  echo "FORBIDDEN: serverfs-supervisor links: $(tr '\n' ' ' <<<"$locals")"; fail=1
fi

# Positive control: the same query on serverfs-exec finds tokio and the
# supervisor, so a miss below means "absent", not "the query is broken".
exec_graph=$(graph serverfs-exec)
for control in '^tokio ' '^serverfs-supervisor ' '^serverfs-core '; do
  grep -qE "$control" <<<"$exec_graph" || { echo "control failed: serverfs-exec's graph lacks $control"; exit 1; }
done

for crate in "${forbidden[@]}"; do
  if grep -q "^$crate " <<<"$shipped"; then echo "FORBIDDEN: $crate is in serverfs-supervisor's graph"; fail=1; fi
done
[ "$fail" = 0 ] && echo "ok: serverfs-supervisor's graph has none of: ${forbidden[*]}"
exit $fail

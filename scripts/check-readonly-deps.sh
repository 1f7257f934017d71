#!/usr/bin/env bash
# The read-only guard (read-only is what serverfs-mcp is, not a
# setting). Fails CI unless all of these hold:
#   1. the local (path) crates in serverfs-mcp's shipped graph — every edge
#      but dev-only ones, every target — are EXACTLY the allowlist below,
#      so a write/exec crate cannot slip in under a name nobody denied;
#   2. no third-party process/pty/write crate and no process-spawning
#      feature is in that graph;
#   3. the library and binary code of every allowlisted crate passes clippy
#      with scripts/readonly-clippy/clippy.toml (no process spawning, no
#      std::fs / rustix write calls), nothing in them switches those lints
#      off, and no open asks for write flags.
# Tests are not linted: they write fixtures and spawn the binary on purpose.
#
# When crates are renamed or split, update the arrays below (and nothing
# else): the allowlist is the whole answer to "what does the read-only
# binary link from this repository".
set -euo pipefail
cd "$(dirname "$0")/.."

# The workspace crates serverfs-mcp links, and nothing else.
readonly_crates=(serverfs-core serverfs-search serverfs-tools serverfs-transport serverfs-settings serverfs-mcp)

# Third-party crates that spawn processes, drive ptys, or exist to write
# files; none has a place in a read-only server.
forbidden_crates=(
  process-wrap command-group portable-pty pty-process pty async-process duct subprocess
  expectrl rexpect tokio-pty-process
  tempfile fs_extra remove_dir_all filetime atomicwrites atomic-write-file
)

# Features that would put spawning or unchecked file access in the binary.
# tokio's `fs` reads and writes around serverfs-core's resolver; rustix's
# `runtime` has fork/execve; nix's `process`/`pty`/`fs` spawn and write.
forbidden_features=(
  'tokio feature "process"' 'tokio feature "fs"' 'tokio feature "full"'
  'rmcp feature "transport-child-process"'
  'rustix feature "runtime"'
  'nix feature "process"' 'nix feature "pty"' 'nix feature "fs"'
)

# Open flags that ask for writing; the names a tripwire looks for in the
# allowlisted crates' sources (rustix's openat/openat2 are legitimate for
# reading, so clippy cannot ban them by name).
write_flags='\b(WRONLY|RDWR|CREATE|TRUNC|APPEND|TMPFILE|O_WRONLY|O_RDWR|O_CREAT|O_TRUNC|O_APPEND|O_TMPFILE)\b'

# Lint names whose allow/expect would switch the clippy pass off locally,
# under their current names and the ones clippy renamed them from
# (`disallowed_method`, `disallowed_type` still work, with a warning).
bypass_lints='disallowed[_-]methods?|disallowed[_-]types?|clippy::style|clippy::all'
for control in '#[allow(clippy::disallowed_method)]' '#![expect(clippy::disallowed_types)]'; do
  grep -qE "$bypass_lints" <<<"$control" || { echo "control failed: $control is not caught"; exit 1; }
done

graph() { cargo tree --locked -p serverfs-mcp --target all --prefix none -e "$1" --format '{p}'; }
shipped=$(graph no-dev,features)
with_dev=$(graph all,features)

fail=0
bad() { echo "FORBIDDEN: $*"; fail=1; }

# --- 1. local crates == allowlist --------------------------------------
# `{p}` prints `name vX.Y.Z (/abs/path)` for path crates only.
local_lines=$(grep -E '^[^ ]+ v[^ ]+ \(/' <<<"$shipped" | sed 's/ (\*)$//' | sort -u)
local_names=$(cut -d' ' -f1 <<<"$local_lines" | sort -u)
expected=$(printf '%s\n' "${readonly_crates[@]}" | sort -u)
if [ "$local_names" = "$expected" ]; then
  echo "ok: local crates in serverfs-mcp's graph are exactly: $(tr '\n' ' ' <<<"$local_names")"
else
  bad "local crates in serverfs-mcp's graph differ from the allowlist"
  diff <(echo "$expected") <(echo "$local_names") | sed -n 's/^< /  missing: /p; s/^> /  unexpected: /p' || true
fi

# Positive control: the same query on serverfs-dev must find the writer,
# so an empty or broken query cannot pass check 1 by accident.
dev_locals=$(cargo tree --locked -p serverfs-dev --target all --prefix none -e no-dev --format '{p}' |
  grep -E '^[^ ]+ v[^ ]+ \(/' | cut -d' ' -f1 | sort -u)
if grep -qx serverfs-write <<<"$dev_locals"; then
  echo "ok: positive control: the same query finds serverfs-write in serverfs-dev's graph"
else
  bad "positive control failed: serverfs-write not found in serverfs-dev's graph"
fi

# A bare `cargo build --release` must build serverfs-mcp alone (root
# Cargo.toml, default-members): building it beside another binary unifies
# their features.
defaults=$(cargo metadata --locked --no-deps --format-version 1 |
  python3 -c 'import json,sys; m=json.load(sys.stdin); print(" ".join(sorted(p["name"] for p in m["packages"] if p["id"] in m["workspace_default_members"])))')
if [ "$defaults" = serverfs-mcp ]; then
  echo "ok: default-members is serverfs-mcp alone"
else
  bad "default-members is '$defaults', not serverfs-mcp alone"
fi

# --- 2. third-party crates and features --------------------------------
# Positive controls: the same query with dev edges sees the test-only
# process crates and features, so a miss below means "absent", not "the
# query is broken".
for control in '^process-wrap ' '^tempfile ' 'tokio feature "process"' 'nix feature "process"' 'rmcp feature "transport-child-process"'; do
  grep -qE "$control" <<<"$with_dev" || { echo "control failed: dev graph lacks $control"; exit 1; }
done
denied=0
for crate in "${forbidden_crates[@]}"; do
  if grep -q "^$crate " <<<"$shipped"; then bad "$crate is in serverfs-mcp's dependency graph"; denied=1; fi
done
for f in "${forbidden_features[@]}"; do
  if grep -qF "$f" <<<"$shipped"; then bad "$f is enabled for serverfs-mcp"; denied=1; fi
done
[ "$denied" = 0 ] && echo "ok: none of ${#forbidden_crates[@]} denied crates or ${#forbidden_features[@]} denied features is shipped"

# --- 3. code of the allowlisted crates ---------------------------------
dirs=()
while read -r _ _ path; do
  path=${path#(}; path=${path%)}; dirs+=("${path#"$PWD"/}")
done <<<"$local_lines"

# A local allow/expect of the banned lints (or of the groups holding them)
# would switch the clippy pass off silently; so would a [lints] override.
if hits=$(grep -rnE "$bypass_lints" "${dirs[@]/%//src}" "${dirs[@]/%//Cargo.toml}" Cargo.toml); then
  bad "a read-only crate mentions a lint the guard relies on:"; echo "$hits"
fi
# The workspace lints (unsafe_code = forbid: no raw libc syscalls) must
# reach every allowlisted crate.
for d in "${dirs[@]}"; do
  grep -qzE '\[lints\][[:space:]]*workspace[[:space:]]*=[[:space:]]*true' "$d/Cargo.toml" ||
    bad "$d/Cargo.toml does not inherit the workspace lints"
done
# Write-flag tripwire over whole files, test modules included (a test of
# a read-only crate has no reason to name a write flag either), outside
# comments.
for f in $(find "${dirs[@]/%//src}" -name '*.rs' | sort); do
  if hits=$(grep -nHE "$write_flags" "$f" | grep -vE '^[^:]+:[0-9]+: *//'); then
    bad "an open asks for write flags:"; echo "$hits"
  fi
done

# Clippy with the read-only bans, library and binary targets only.
pkgs=()
for c in "${readonly_crates[@]}"; do pkgs+=(-p "$c"); done
clippy_log=$(mktemp)
trap 'rm -f "$clippy_log"' EXIT
if CLIPPY_CONF_DIR="$PWD/scripts/readonly-clippy" cargo clippy --locked --quiet --keep-going "${pkgs[@]}" --lib --bins \
  -- -D clippy::disallowed_methods -D clippy::disallowed_types >"$clippy_log" 2>&1; then
  # A misspelt path in clippy.toml is only a warning, and bans nothing.
  if grep -q 'does not refer to' "$clippy_log"; then
    bad "scripts/readonly-clippy/clippy.toml names an item that does not exist:"; grep -A3 'does not refer to' "$clippy_log"
  else
    echo "ok: clippy finds no process spawning or file writes in the read-only crates"
  fi
else
  bad "clippy (read-only bans) failed:"; grep -E -A4 '^error' "$clippy_log" | head -80
fi

[ "$fail" = 0 ] && echo "readonly-deps: serverfs-mcp links only ${readonly_crates[*]}; no write, patch or exec code"
exit $fail

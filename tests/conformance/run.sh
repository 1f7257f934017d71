#!/usr/bin/env bash
# Official MCP conformance suite (npm @modelcontextprotocol/conformance, server mode) against
# the release binary, once per protocol era:
#
#   legacy   @modelcontextprotocol/conformance@0.1.16 (npm `latest`), active suite: the
#            2025-06-18 / 2025-11-25 initialize-handshake scenarios;
#            baseline tests/conformance/expected-failures-2025-11-25.yml
#   modern   @modelcontextprotocol/conformance@0.2.0-alpha.12 (newest prerelease),
#            `--requirements 2026-07-28`: exactly the scenarios that revision requires;
#            baseline tests/conformance/expected-failures-2026-07-28.yml
#
# The suite needs Node >= 22; `npx -p node@22.23.3` brings it from the npm registry (this
# machine has Node 20). The baselines list only scenarios that need the suite's own fixture
# tools/resources/prompts (or a capability a read-only file server does not offer), each
# with its reason. The suite itself fails the run on an unexpected failure AND on a stale
# baseline entry (a listed scenario that now passes).
#
# Also asserted here: server-initialize and dns-rebinding-protection pass in their runs.
#
# SERVER=dev runs the same two eras against serverfs-dev (its own baselines,
# expected-failures-dev-*.yml: serverfs-dev serves tools only), and a third run, `tasks`:
# the Tasks extension's ten scenarios one by one (baseline expected-failures-dev-tasks.yml:
# only the checks that need the suite's fixture tools).
#
#   tests/conformance/run.sh                 # both runs
#   tests/conformance/run.sh legacy|modern   # one run (SERVER=dev: also tasks)
#   SERVER=mcp|dev  SERVERFS_BIN=...  CONFORMANCE_OUT=dir (default results/conformance[-dev])
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
server="${SERVER:-mcp}"
case "$server" in
  mcp) suffix="" ;;
  dev) suffix="-dev" ;;
  *) echo "conformance: SERVER is mcp or dev, not $server" >&2; exit 2 ;;
esac
bin="${SERVERFS_BIN:-$repo/target/release/serverfs-$server}"
out="${CONFORMANCE_OUT:-$repo/results/conformance$suffix}"
node_pkg="node@22.23.3"
legacy_pkg="@modelcontextprotocol/conformance@0.1.16"
modern_pkg="@modelcontextprotocol/conformance@0.2.0-alpha.12"
if [[ $# -eq 0 ]]; then
  if [[ "$server" == dev ]]; then set -- legacy modern tasks; else set -- legacy modern; fi
fi
runs=("$@")

if [[ ! -x "$bin" ]]; then
  echo "conformance: binary not found: $bin (cargo build --release --locked -p serverfs-$server)" >&2
  exit 1
fi

tmp="$(mktemp -d -t serverfs-conformance.XXXXXX)"
# The target directory: .ci/run moves it out of /tmp (CARGO_TARGET_DIR).
state="$(mktemp -d "${CARGO_TARGET_DIR:-$repo/target}/conformance-state.XXXXXX")"
server_pid=""
proxy_pid=""
cleanup() {
  for pid in "$server_pid" "$proxy_pid"; do
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$tmp" "$state"
}
trap cleanup EXIT

# Fixture workdir: a few ordinary files. The suite never names them; it only needs a server.
mkdir -p "$tmp/root/docs"
printf '# Conformance fixture\n\nHello.\n' > "$tmp/root/README.md"
printf 'notes\n' > "$tmp/root/docs/notes.txt"

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

start_server() {
  for _attempt in 1 2 3 4 5; do
    port="$(free_port)"
    if [[ "$server" == dev ]]; then
      # Not below /tmp: serverfs-dev refuses a state dir commands can write.
      "$bin" --root "$tmp/root" --state-dir "$state" --listen "127.0.0.1:$port" >"$tmp/server.log" 2>&1 &
    else
      "$bin" --workdir "conf=$tmp/root" --listen "127.0.0.1:$port" >"$tmp/server.log" 2>&1 &
    fi
    server_pid=$!
    for _ in $(seq 1 150); do
      if ! kill -0 "$server_pid" 2>/dev/null; then break; fi
      if curl -fsS -o /dev/null "http://127.0.0.1:$port/healthz" 2>/dev/null; then
        return 0
      fi
      sleep 0.1
    done
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  done
  echo "conformance: serverfs-$server did not become healthy; log:" >&2
  tail -20 "$tmp/server.log" >&2
  return 1
}

# Summarise a results directory against the baseline (and, for --requirements runs, the
# revision's scored scenario list). Exit 1 if a must-pass scenario failed or did not run.
summarise() {
  python3 - "$@" <<'PY'
import json, pathlib, re, sys
label, results_dir, baseline, scored_file, *must_pass = sys.argv[1:]

def yaml_list(path, key):
    """Items of a top-level `key:` block list in a simple YAML file (no PyYAML needed)."""
    items, inside = [], False
    for line in pathlib.Path(path).read_text().splitlines():
        if re.match(r"^\S", line):
            inside = line.split("#")[0].strip() in (f"{key}:", f"{key}: []")
            continue
        m = re.match(r"^\s+-\s+([^\s#]+)", line)
        if inside and m:
            items.append(m.group(1))
    return items

scen = {}
for f in sorted(pathlib.Path(results_dir).rglob("checks.json")):
    name = re.sub(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$", "", f.parent.name)
    name = name[len("server-"):] if name.startswith("server-") else name  # "<mode>-<scenario>"
    try:
        checks = json.loads(f.read_text())
    except ValueError:
        checks = [{"id": name, "status": "FAILURE"}]
    bad = [c.get("id") for c in checks if c.get("status") in ("FAILURE", "WARNING")]
    ok = sum(1 for c in checks if c.get("status") == "SUCCESS")
    scen[name] = (ok, bad)
expected = yaml_list(baseline, "server")
whole = {e for e in expected if ":" not in e}
per_check = {}
for e in expected:
    if ":" in e:
        sc, chk = e.split(":", 1)
        per_check.setdefault(sc, set()).add(chk)
scored = set(yaml_list(scored_file, "server")) if scored_file != "-" else set(scen)
passed, exp_fail, unexpected, unscored_fail = [], [], [], []
for n, (ok, bad) in sorted(scen.items()):
    if n not in scored:
        if bad:
            unscored_fail.append(n)
        continue
    if not bad:
        passed.append(n)
    elif n in whole or (n in per_check and set(bad) <= per_check[n]):
        exp_fail.append(n)
    else:
        unexpected.append(f"{n} {bad}")
n_scored = len([n for n in scen if n in scored])
print(f"conformance[{label}]: {n_scored} scored scenarios: {len(passed)} passed, "
      f"{len(exp_fail)} expected failures (baseline), {len(unexpected)} unexpected"
      + (f"; {len(scen) - n_scored} unscored (extension/pending) run, failing: "
         f"{', '.join(unscored_fail) or 'none'}" if scored_file != "-" else ""))
print(f"conformance[{label}]: passed: {', '.join(passed)}")
for u in unexpected:
    print(f"conformance[{label}]: UNEXPECTED failure: {u}")
rc = 1 if unexpected else 0
for m in must_pass:
    if m not in scen:
        print(f"conformance[{label}]: MUST-PASS scenario {m} did not run"); rc = 1
    elif scen[m][1]:
        print(f"conformance[{label}]: MUST-PASS scenario {m} failed: {scen[m][1]}"); rc = 1
    else:
        print(f"conformance[{label}]: {m} passed ({scen[m][0]} checks)")
sys.exit(rc)
PY
}

# serverfs-dev serves no resources: the resource scenario is serverfs-mcp's.
resource_must_pass=()
[[ "$server" == mcp ]] && resource_must_pass=(sep-2164-resource-not-found)

total_runs=0
failed_runs=0
declare -a lines=()

run_suite() {
  local name="$1" pkg="$2" baseline="$3" requirements="$4"; shift 4
  local extra="" scored="-"
  local dir="$out/$name"
  rm -rf "$dir"; mkdir -p "$dir"
  total_runs=$((total_runs + 1))
  if [[ -n "$requirements" ]]; then
    extra="--requirements $requirements"
    # the revision's frozen list of scored scenarios, shipped inside the npm package
    local entry
    # shellcheck disable=SC2016  # expanded by the shell npx starts, not here
    entry="$(npx -y -p "$node_pkg" -p "$pkg" -c 'readlink -f "$(command -v conformance)"' 2>/dev/null | tail -1)"
    scored="$(dirname "$(dirname "$entry")")/requirements/$requirements.yaml"
    [[ -f "$scored" ]] || { echo "conformance: cannot find $scored" >&2; return 1; }
  fi
  start_server
  local url="http://127.0.0.1:$port/mcp"
  if [[ "$server" == dev ]]; then
    # serverfs-dev without a configured credential admits only the token it
    # drew for this start (its file in the state dir). The suite sends no
    # header of ours, and some scenarios drop the URL's query: a proxy adds
    # the header to every request, changing nothing else.
    local proxy_port; proxy_port="$(free_port)"
    python3 "$here/auth_proxy.py" "$proxy_port" "$port" "$state/local-token.$port" &
    proxy_pid=$!
    for _ in $(seq 1 100); do
      curl -fsS -o /dev/null "http://127.0.0.1:$proxy_port/healthz" 2>/dev/null && break
      sleep 0.1
    done
    url="http://127.0.0.1:$proxy_port/mcp"
  fi
  echo "=== conformance $name: $pkg $extra against $url (baseline $(basename "$baseline")) ==="
  local rc=0 scenario
  if [[ ${#scenarios[@]} -eq 0 ]]; then
    npx -y -p "$node_pkg" -p "$pkg" -c \
      "conformance server --url '$url' $extra --expected-failures '$baseline' -o '$dir'" \
      > "$dir/output.txt" 2>&1 || rc=$?
  else
    # Extension scenarios run one by one (no requirement set lists them).
    for scenario in "${scenarios[@]}"; do
      npx -y -p "$node_pkg" -p "$pkg" -c \
        "conformance server --url '$url' --scenario $scenario --expected-failures '$baseline' -o '$dir'" \
        >> "$dir/output.txt" 2>&1 || rc=$?
    done
  fi
  # the suite's own closing section: summary table + baseline verdict
  grep -v -e '^npm warn' "$dir/output.txt" | sed -n '/=== SUMMARY ===/,$p' | sed 's/\x1b\[[0-9;]*m//g' || true
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "conformance $name: serverfs-$server died during the run; log:"; tail -20 "$tmp/server.log"; rc=1
  fi
  local summary srv_rc=0
  summary="$(summarise "$name" "$dir" "$baseline" "$scored" "$@")" || srv_rc=$?
  echo "$summary"
  lines+=("$summary")
  if [[ $srv_rc -ne 0 ]]; then rc=1; fi
  if [[ $rc -ne 0 ]]; then
    failed_runs=$((failed_runs + 1))
    echo "conformance $name: FAILED (suite exit $rc); full output: $dir/output.txt"
  fi
  kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; server_pid=""
  if [[ -n "$proxy_pid" ]]; then kill "$proxy_pid" 2>/dev/null || true; wait "$proxy_pid" 2>/dev/null || true; proxy_pid=""; fi
}

# The Tasks extension's scenarios (serverfs-dev runs bash as a task).
task_scenarios=(tasks-lifecycle tasks-capability-negotiation tasks-wire-fields
  tasks-request-state-removal tasks-mrtr-input tasks-request-headers tasks-dispatch-and-envelope
  tasks-status-notifications tasks-required-task-error tasks-mrtr-composition)

for r in "${runs[@]}"; do
  scenarios=()
  case "$r" in
    legacy) run_suite legacy-2025-11-25 "$legacy_pkg" "$here/expected-failures$suffix-2025-11-25.yml" "" \
              server-initialize dns-rebinding-protection ;;
    modern) run_suite modern-2026-07-28 "$modern_pkg" "$here/expected-failures$suffix-2026-07-28.yml" \
              2026-07-28 dns-rebinding-protection tools-list http-header-validation "${resource_must_pass[@]}" ;;
    tasks)
      [[ "$server" == dev ]] || { echo "conformance: the tasks run is serverfs-dev's (SERVER=dev)" >&2; exit 2; }
      scenarios=("${task_scenarios[@]}")
      run_suite tasks-extension "$modern_pkg" "$here/expected-failures-dev-tasks.yml" "" ;;
    *) echo "unknown run: $r (legacy|modern|tasks)" >&2; exit 2 ;;
  esac
done

echo
echo "=== conformance recap ==="
for l in "${lines[@]}"; do echo "$l"; done
# one line per suite run (legacy, modern): a run passes when the suite's baseline check
# passes (no unexpected failure, no stale entry) and every must-pass scenario passed
echo "conformance: $((total_runs - failed_runs)) passed, $failed_runs failed"
[[ $failed_runs -eq 0 ]]

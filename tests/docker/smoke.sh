#!/usr/bin/env bash
# Docker smoke test of the Compose deployment, on a real engine.
#
#   bash tests/docker/smoke.sh            (as root, from anywhere in the repo)
#
# Brings up a local engine (../shared/tools/docker-engine.sh, or DOCKER_ENGINE,
# or one already running), builds the
# static binaries and the images offline (no registry is reachable), starts
# compose.yml with tests/docker/compose.smoke.yml (which swaps the official
# tunnel-client image for the test MCP client `serverfs-probe`), and proves
# the isolation claims of the README: healthy, non-root, read-only root and
# mounts, no host port, reachable only on the private network, tools and
# refusals over real MCP, no tunnel secret in serverfs-mcp, missing host path
# refused, clean `down`.
#
# Environment (all optional):
#   SHARED             the shared/ folder (default: <repo>/../shared)
#   DOCKER_ENGINE      a script that starts an engine (default:
#                      $SHARED/tools/docker-engine.sh); without one, an
#                      engine that is already running is used
#   SERVERFS_MCP_BIN   use this static serverfs-mcp instead of building it
#   SERVERFS_PROBE_BIN use this static serverfs-probe instead of building it
#   CARGO_TARGET_DIR   honoured when building
#   SMOKE_KEEP=1       leave the stack and temp dir up on exit (debugging)
#
# Last line: `docker-smoke: N passed, M failed`; exit status 0 iff M = 0.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$REPO"
SHARED=${SHARED:-$REPO/../shared}
ENGINE=${DOCKER_ENGINE:-$SHARED/tools/docker-engine.sh}
PROJECT=serverfs-smoke
PROJECT_MISSING=serverfs-smoke-missing
TRIPLE="$(uname -m)-unknown-linux-gnu"
MCP_IMAGE=serverfs-mcp:smoke
PROBE_IMAGE=serverfs-probe:smoke
export DOCKER_BUILDKIT=1 COMPOSE_DOCKER_CLI_BUILD=1

passed=0
failed=0
log() { printf '\n== %s\n' "$*"; }
pass() { passed=$((passed + 1)); printf 'ok - %s\n' "$1"; }
fail() { failed=$((failed + 1)); printf 'FAIL - %s\n' "$1"; [ $# -lt 2 ] || printf '%s\n' "$2" | sed 's/^/    /' | head -n 40; }
# check NAME CMD...: runs CMD, pass if it exits 0 (its output is shown on failure).
check() {
  local name=$1 out
  shift
  if out=$("$@" 2>&1); then pass "$name"; else fail "$name" "$out"; fi
}

# ---------------------------------------------------------------- engine --
# First, before anything is made: without an engine there is nothing to
# start and nothing to clean up.
log "engine"
if [ -f "$ENGINE" ]; then
  bash "$ENGINE"
elif docker info >/dev/null 2>&1; then
  echo "docker-smoke: $ENGINE not found; using the engine that is already running"
else
  cat >&2 <<EOF
docker-smoke: no Docker engine: none is running, and $ENGINE (which starts one) is not there.
  Run without ../shared in one of these ways:
    - start an engine yourself (any that 'docker info' reaches), then run this again;
    - DOCKER_ENGINE=/path/to/script: a script that starts one;
    - SHARED=/path/to/shared: the folder holding tools/docker-engine.sh;
    - .ci/run only: SKIP_DOCKER=1 skips this step (said in its output).
EOF
  exit 1
fi

tmp=$(mktemp -d /tmp/serverfs-smoke.XXXXXX)
chmod 0755 "$tmp"
# What this run started, so that cleanup removes only that.
built_images=0
started_stack=0

compose() { docker compose -p "$PROJECT" --env-file "$tmp/test.env" -f compose.yml -f tests/docker/compose.smoke.yml "$@"; }

cleanup() {
  local rc=$?
  if [ "${SMOKE_KEEP:-0}" = 1 ]; then
    echo "SMOKE_KEEP=1: left project $PROJECT and $tmp in place"
    exit "$rc"
  fi
  if [ "$started_stack" = 1 ]; then
    for p in "$PROJECT" "$PROJECT_MISSING"; do
      docker compose -p "$p" down -v --remove-orphans --timeout 5 >/dev/null 2>&1 || true
    done
  fi
  if [ "$built_images" = 1 ]; then
    docker image rm -f "$MCP_IMAGE" "$PROBE_IMAGE" >/dev/null 2>&1 || true
  fi
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

missing_tools=()
for t in jq curl file; do command -v "$t" >/dev/null 2>&1 || missing_tools+=("$t"); done
if [ ${#missing_tools[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing_tools[@]}" >/dev/null
fi
# Leftovers of an interrupted earlier run.
for p in "$PROJECT" "$PROJECT_MISSING"; do
  docker compose -p "$p" down -v --remove-orphans --timeout 5 >/dev/null 2>&1 || true
done

# ------------------------------------------------------------- binaries --
log "static binaries"
target_dir=${CARGO_TARGET_DIR:-$REPO/target}
build_static() { # PACKAGE
  RUSTFLAGS='-C target-feature=+crt-static' \
    cargo build --release --locked -p "$1" --target "$TRIPLE"
}
mcp_bin=${SERVERFS_MCP_BIN:-}
if [ -z "$mcp_bin" ]; then
  build_static serverfs-mcp
  mcp_bin="$target_dir/$TRIPLE/release/serverfs-mcp"
fi
probe_bin=${SERVERFS_PROBE_BIN:-}
if [ -z "$probe_bin" ]; then
  # Built on its own so its features (rmcp client, reqwest) never unify into
  # serverfs-mcp's build.
  build_static serverfs-probe
  probe_bin="$target_dir/$TRIPLE/release/serverfs-probe"
fi
mkdir -p target/docker-bin
install -m 0755 "$mcp_bin" target/docker-bin/serverfs-mcp
install -m 0755 "$probe_bin" target/docker-bin/serverfs-probe
for b in serverfs-mcp serverfs-probe; do
  if file -L "target/docker-bin/$b" | grep -q 'static'; then
    pass "$b is statically linked ($(du -h "target/docker-bin/$b" | cut -f1))"
  else
    fail "$b is statically linked" "$(file -L "target/docker-bin/$b")"
  fi
done

# -------------------------------------------------------------- fixture --
log "fixture and test .env"
fixture="$tmp/fixture"
bash tests/docker/make-fixture.sh "$fixture"
missing="$tmp/does-not-exist"
# test.env = .env.example with the smoke values substituted.
set_env() { # FILE KEY VALUE
  local file=$1 key=$2 value=$3
  if grep -q "^$key=" "$file"; then
    KEY="$key" VALUE="$value" awk 'BEGIN{k=ENVIRON["KEY"]"="} index($0,k)==1{print k ENVIRON["VALUE"]; next} {print}' \
      "$file" >"$file.new" && mv "$file.new" "$file"
  else
    printf '%s=%s\n' "$key" "$value" >>"$file"
  fi
}
cp .env.example "$tmp/test.env"
set_env "$tmp/test.env" SERVERFS_IMAGE "$MCP_IMAGE"
set_env "$tmp/test.env" WORKDIR_01_ALIAS test
set_env "$tmp/test.env" WORKDIR_01_PATH "$fixture"
set_env "$tmp/test.env" WORKDIR_01_DESCRIPTION "Smoke-test fixture"
set_env "$tmp/test.env" CONTROL_PLANE_TUNNEL_ID tunnel_0123456789abcdef0123456789abcdef
set_env "$tmp/test.env" CONTROL_PLANE_API_KEY sk-smoke-NOT-A-REAL-KEY
# The bearer token, as docs/deployment.md makes it: two files, each readable
# only by the user of the container that mounts it.
token=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
(umask 077 && printf '%s\n' "$token" >"$tmp/serverfs_token" && printf 'Bearer %s' "$token" >"$tmp/tunnel_authorization")
chown 10001:10001 "$tmp/serverfs_token"
chown 65532:65532 "$tmp/tunnel_authorization"
set_env "$tmp/test.env" SERVERFS_TOKEN_SECRET_FILE "$tmp/serverfs_token"
set_env "$tmp/test.env" TUNNEL_AUTHORIZATION_SECRET_FILE "$tmp/tunnel_authorization"
chmod 600 "$tmp/test.env"
pass "fixture tree and test .env created"

# --------------------------------------------------------------- config --
log "docker compose config"
check "docker compose config (.env.example)" \
  docker compose -p "$PROJECT" --env-file .env.example -f compose.yml config -q
check "docker compose config (test .env)" \
  docker compose -p "$PROJECT" --env-file "$tmp/test.env" -f compose.yml config -q
check "docker compose config (test .env + smoke override)" compose config -q

example_ok=true
for i in $(seq -w 1 16); do
  for k in ALIAS PATH DESCRIPTION; do grep -q "^WORKDIR_${i}_${k}=" .env.example || example_ok=false; done
done
if $example_ok && grep -qx 'CONTROL_PLANE_API_KEY=' .env.example && grep -qx 'CONTROL_PLANE_TUNNEL_ID=' .env.example \
  && grep -qx 'OPENAI_TUNNEL_IMAGE=ghcr.io/openai/tunnel-client:v0.0.14' .env.example; then
  pass ".env.example: 16 slots, tunnel credentials empty, tunnel image pinned"
else
  fail ".env.example: 16 slots, tunnel credentials empty, tunnel image pinned"
fi
if [ -f .empty/.serverfs-disabled ]; then pass ".empty/.serverfs-disabled exists"; else fail ".empty/.serverfs-disabled exists"; fi

cfg=$(docker compose -p "$PROJECT" --env-file "$tmp/test.env" -f compose.yml config --format json)
jqcheck() { # NAME JQ-EXPR (must print true)
  local got
  got=$(jq -r "$2" <<<"$cfg" 2>&1) || true
  if [ "$got" = true ]; then pass "$1"; else fail "$1" "jq $2 -> $got"; fi
}
S='.services["serverfs-mcp"]'
T='.services["openai-tunnel"]'
jqcheck "compose: exactly the services serverfs-mcp and openai-tunnel" '(.services|keys) == ["openai-tunnel","serverfs-mcp"]'
jqcheck "compose: 16 slots, long-syntax bind, read_only, /workdirs/01..16" \
  "[$S.volumes[] | select(.type==\"bind\" and .read_only==true)] | map(.target) == [range(1;17) | \"/workdirs/\" + (if . < 10 then \"0\" else \"\" end) + tostring]"
jqcheck "compose: create_host_path is false on every slot" "[$S.volumes[] | .bind.create_host_path // false] | all(. == false)"
jqcheck "compose: unused slots mount ./.empty" "[$S.volumes[1:][] | .source] | all(endswith(\"/.empty\"))"
jqcheck "compose: serverfs-mcp user 10001:10001, read-only root, cap_drop ALL, no-new-privileges" \
  "$S.user == \"10001:10001\" and $S.read_only == true and $S.cap_drop == [\"ALL\"] and $S.security_opt == [\"no-new-privileges:true\"]"
jqcheck "compose: no published ports, only expose" "($S.ports // []) == [] and ($T.ports // []) == [] and $S.expose == [\"8000\"]"
jqcheck "compose: serverfs-mcp only on serverfs_internal, which is internal" \
  "($S.networks|keys) == [\"serverfs_internal\"] and .networks.serverfs_internal.internal == true"
jqcheck "compose: openai-tunnel on serverfs_internal and tunnel_egress" "($T.networks|keys) == [\"serverfs_internal\",\"tunnel_egress\"]"
jqcheck "compose: serverfs-mcp env has no host path and no tunnel secret" \
  "[$S.environment | keys[] | select(test(\"_PATH\$|^CONTROL_PLANE|^MCP_|API_KEY|TUNNEL\"))] == []"
jqcheck "compose: serverfs-mcp env has only SERVERFS_* and WORKDIR_NN_ALIAS/DESCRIPTION" \
  "[$S.environment | keys[] | select(test(\"^(SERVERFS_[A-Z_]+|WORKDIR_[0-9][0-9]_(ALIAS|DESCRIPTION))\$\") | not)] == []"
jqcheck "compose: tunnel secrets in openai-tunnel, MCP_SERVER_URL internal" \
  "$T.environment.CONTROL_PLANE_API_KEY == \"sk-smoke-NOT-A-REAL-KEY\" and $T.environment.MCP_SERVER_URL == \"http://serverfs-mcp:8000/mcp\""
jqcheck "compose: tunnel image pinned (not latest), non-root user, hardened" \
  "($T.image | test(\"^ghcr.io/openai/tunnel-client:v[0-9]+\\\\.[0-9]+\\\\.[0-9]+\$\")) and $T.user == \"65532:65532\" and $T.cap_drop == [\"ALL\"] and $T.security_opt == [\"no-new-privileges:true\"]"
jqcheck "compose: openai-tunnel waits for serverfs-mcp to be healthy" "$T.depends_on[\"serverfs-mcp\"].condition == \"service_healthy\""
jqcheck "compose: the token reaches serverfs-mcp and the tunnel only as secret files" \
  "$S.environment.SERVERFS_TOKEN_FILE == \"/run/secrets/serverfs_token\" and ($S.environment | has(\"SERVERFS_TOKEN\") | not) and ($S.secrets | map(.source)) == [\"serverfs_token\"] and ($T.secrets | map(.source)) == [\"tunnel_authorization\"] and $T.environment.MCP_EXTRA_HEADERS == \"Authorization: file:/run/secrets/tunnel_authorization\""
jqcheck "compose: no env_file anywhere" '[.services[] | has("env_file")] | all(. == false)'
jqcheck "compose: healthcheck runs the binary's healthcheck" "$S.healthcheck.test == [\"CMD\",\"/serverfs-mcp\",\"healthcheck\"]"
if grep -nE '^\s*env_file|docker\.sock|:latest' compose.yml; then
  fail "compose.yml mentions no env_file, docker.sock or :latest"
else
  pass "compose.yml mentions no env_file, docker.sock or :latest"
fi

# ---------------------------------------------------------------- build --
log "docker compose build (offline: prebuilt binary, probe)"
build_log="$tmp/build.log"
built_images=1
if compose build >"$build_log" 2>&1; then
  pass "docker compose build (no registry pull)"
else
  fail "docker compose build (no registry pull)" "$(tail -n 40 "$build_log")"
  exit 1
fi
if grep -qiE 'load metadata for|pulling|docker\.io/library/rust' "$build_log"; then
  fail "build touched no registry" "$(grep -iE 'load metadata for|pulling|docker.io/library/rust' "$build_log")"
else
  pass "build touched no registry (the Rust builder stage was skipped)"
fi
size=$(docker image inspect -f '{{.Size}}' "$MCP_IMAGE")
size_mb=$(awk -v s="$size" 'BEGIN{printf "%.1f", s/1000000}')
if [ "$size" -lt 15000000 ]; then pass "image $MCP_IMAGE is $size_mb MB (< 15 MB)"; else fail "image $MCP_IMAGE is $size_mb MB (< 15 MB)"; fi
img=$(docker image inspect "$MCP_IMAGE")
if jq -e '.[0].Config | .User == "10001:10001" and .Entrypoint == ["/serverfs-mcp"] and .Healthcheck.Test == ["CMD","/serverfs-mcp","healthcheck"]' <<<"$img" >/dev/null; then
  pass "image: USER 10001:10001, ENTRYPOINT /serverfs-mcp, HEALTHCHECK exec form"
else
  fail "image: USER 10001:10001, ENTRYPOINT /serverfs-mcp, HEALTHCHECK exec form" "$(jq '.[0].Config' <<<"$img")"
fi
# FROM scratch: the only file in the image is the binary.
files=$(docker create "$MCP_IMAGE" | { read -r cid; docker export "$cid" | tar -t | grep -vE '^(dev|proc|sys|etc)/|^(dev|proc|sys|etc)/?$|^\.dockerenv$'; docker rm -f "$cid" >/dev/null; })
if [ "$files" = serverfs-mcp ]; then pass "image holds only /serverfs-mcp (FROM scratch)"; else fail "image holds only /serverfs-mcp (FROM scratch)" "$files"; fi

# ------------------------------------------------------------------- up --
log "docker compose up"
started_stack=1
if out=$(compose up -d --no-build --wait --wait-timeout 120 2>&1); then
  pass "docker compose up -d --wait"
else
  fail "docker compose up -d --wait" "$out"$'\n'"$(compose logs --no-color 2>&1 | tail -n 30)"
  exit 1
fi
mcp_cid=$(compose ps -q serverfs-mcp)
tun_cid=$(compose ps -q openai-tunnel)
mcp=$(docker inspect "$mcp_cid")
tun=$(docker inspect "$tun_cid")

health=$(jq -r '.[0].State.Health.Status' <<<"$mcp")
if [ "$health" = healthy ]; then pass "serverfs-mcp is healthy"; else fail "serverfs-mcp is healthy" "status: $health"; fi
if [ "$(jq -r '.[0].State.Status' <<<"$tun")" = running ]; then
  pass "openai-tunnel (probe) started after serverfs-mcp became healthy and is running"
else
  fail "openai-tunnel (probe) is running" "$(jq '.[0].State' <<<"$tun")"
fi

log "isolation of serverfs-mcp"
if self=$(compose exec -T serverfs-mcp /serverfs-mcp selfcheck 2>&1); then
  pass "selfcheck inside the container exits 0"
else
  fail "selfcheck inside the container exits 0" "$self"
fi
printf '    %s\n' "$self"
selfjq() { # NAME EXPR
  if jq -e "$2" <<<"$self" >/dev/null 2>&1; then pass "$1"; else fail "$1" "$self"; fi
}
selfjq "runs as uid 10001 gid 10001 (not root)" '.uid == 10001 and .gid == 10001'
selfjq "root filesystem is not writable" '.root_writable == false'
selfjq "all 16 workdir mounts are not writable" '(.workdirs | length) == 16 and ([.workdirs[].writable] | all(. == false))'
selfjq "slot 01 is the alias test" '[.workdirs[] | select(.slot == "01")][0].alias == "test"'
selfjq "no tunnel variable is visible inside serverfs-mcp" '(.tunnel_env_visible // .foreign_env_visible) == []'

# Negative control: the same selfcheck must notice a writable mount and a
# tunnel secret when they are there.
mkdir -m 0777 "$tmp/rw"
neg=$(docker run --rm --network none --user 10001:10001 -e CONTROL_PLANE_API_KEY=x \
  -v "$tmp/rw:/workdirs/01" "$MCP_IMAGE" selfcheck 2>&1) && neg_rc=0 || neg_rc=$?
if [ "$neg_rc" -ne 0 ] && jq -e '.ok == false and ([.workdirs[] | select(.slot == "01")][0].writable == true)
    and ((.tunnel_env_visible // .foreign_env_visible) | index("CONTROL_PLANE_API_KEY"))' <<<"$neg" >/dev/null 2>&1; then
  pass "selfcheck negative control: a writable mount and a visible key are reported (exit $neg_rc)"
else
  fail "selfcheck negative control: a writable mount and a visible key are reported" "exit $neg_rc: $neg"
fi

jqm() { # NAME EXPR on docker inspect of serverfs-mcp
  if jq -e "$2" <<<"$mcp" >/dev/null 2>&1; then pass "$1"; else fail "$1" "$(jq -c "${3:-.[0].HostConfig}" <<<"$mcp")"; fi
}
jqm "inspect: user 10001:10001, read-only rootfs, CapDrop ALL, no-new-privileges" \
  '.[0].Config.User == "10001:10001" and .[0].HostConfig.ReadonlyRootfs == true and .[0].HostConfig.CapDrop == ["ALL"] and .[0].HostConfig.SecurityOpt == ["no-new-privileges:true"]'
jqm "inspect: 16 bind mounts on /workdirs, all RW=false" \
  '([.[0].Mounts[] | select(.Destination | startswith("/workdirs/"))] | length) == 16 and ([.[0].Mounts[] | .RW] | all(. == false)) and ([.[0].Mounts[] | .Type] | all(. == "bind"))' '.[0].Mounts'
jqm "inspect: no port published (PortBindings empty, Ports unbound)" \
  '((.[0].HostConfig.PortBindings // {}) | length) == 0 and ([(.[0].NetworkSettings.Ports // {})[] | select(. != null)] | length) == 0' '.[0].NetworkSettings.Ports'
jqm "inspect: attached to the internal network only" \
  "(.[0].NetworkSettings.Networks | keys) == [\"${PROJECT}_serverfs_internal\"]" '.[0].NetworkSettings.Networks | keys'
if [ "$(docker network inspect -f '{{.Internal}}' "${PROJECT}_serverfs_internal")" = true ]; then
  pass "network serverfs_internal is internal (no route out)"
else
  fail "network serverfs_internal is internal (no route out)"
fi
env_mcp=$(jq -r '.[0].Config.Env[]' <<<"$mcp")
if grep -qE '^(CONTROL_PLANE_|OPENAI_|MCP_SERVER_URL|HEALTH_LISTEN_ADDR)|^WORKDIR_[0-9]+_PATH=' <<<"$env_mcp" || grep -qF "$fixture" <<<"$env_mcp"; then
  fail "CONTROL_PLANE_API_KEY, tunnel settings and host paths absent from serverfs-mcp's environment" "$env_mcp"
else
  pass "CONTROL_PLANE_API_KEY, tunnel settings and host paths absent from serverfs-mcp's environment"
fi
if jq -r '.[0].Config.Env[]' <<<"$tun" | grep -qx 'CONTROL_PLANE_API_KEY=sk-smoke-NOT-A-REAL-KEY'; then
  pass "CONTROL_PLANE_API_KEY is set in openai-tunnel only"
else
  fail "CONTROL_PLANE_API_KEY is set in openai-tunnel only"
fi
if jq -e '.[0].Config.User == "65532:65532" and .[0].HostConfig.CapDrop == ["ALL"]' <<<"$tun" >/dev/null; then
  pass "openai-tunnel runs as 65532:65532 with CapDrop ALL"
else
  fail "openai-tunnel runs as 65532:65532 with CapDrop ALL" "$(jq -c '.[0].Config.User, .[0].HostConfig.CapDrop' <<<"$tun")"
fi

# Real writes into serverfs-mcp's own mounts, even as root: all refused.
if out=$(docker run --rm --network none --user 0:0 --volumes-from "$mcp_cid" --entrypoint /serverfs-probe "$PROBE_IMAGE" \
  write-test /workdirs/01 /workdirs/02 /workdirs/16 2>&1); then
  pass "writes into the workdir mounts fail, even as root"
else
  fail "writes into the workdir mounts fail, even as root" "$out"
fi
if [ -z "$(find "$fixture" -name 'serverfs-write-test*')" ]; then pass "host fixture unchanged"; else fail "host fixture unchanged"; fi

log "no host port"
if curl -sS --max-time 3 -o /dev/null http://127.0.0.1:8000/mcp 2>/dev/null; then
  fail "http://127.0.0.1:8000/mcp is not reachable from the host"
else
  pass "http://127.0.0.1:8000/mcp is not reachable from the host (connection refused)"
fi
ps_json=$(compose ps --format json)
if grep -q '"PublishedPort":[1-9]' <<<"$ps_json" || compose ps | grep -q -- '->'; then
  fail "docker compose ps shows no published port" "$(compose ps)"
else
  pass "docker compose ps shows no published port"
fi

log "MCP over the private network (probe in place of openai-tunnel)"
probe_out=$(compose exec -T openai-tunnel /serverfs-probe check http://serverfs-mcp:8000/mcp test 2>&1) && probe_rc=0 || probe_rc=$?
printf '%s\n' "$probe_out" | grep -E '^(ok|FAIL) - ' | sed 's/^/probe: /'
probe_pass=$(grep -c '^ok - ' <<<"$probe_out" || true)
probe_fail=$(grep -c '^FAIL - ' <<<"$probe_out" || true)
passed=$((passed + probe_pass))
failed=$((failed + probe_fail))
if [ "$probe_rc" -ne 0 ] && [ "$probe_fail" -eq 0 ]; then
  fail "probe exited $probe_rc" "$probe_out"
fi

log "one MCP call into Compose, as the README shows it (the binary over stdio in the same container)"
readme_call=$(printf '%s\n' \
  '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}' \
  '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
  '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_workdirs","arguments":{}}}' |
  compose exec -T serverfs-mcp /serverfs-mcp --stdio 2>/dev/null)
if grep -q '"id":2' <<<"$readme_call" && grep -q '"alias":"test"' <<<"$readme_call"; then
  pass "README: docker compose exec -T serverfs-mcp /serverfs-mcp --stdio answers list_workdirs"
else
  fail "README: docker compose exec -T serverfs-mcp /serverfs-mcp --stdio answers list_workdirs" "$readme_call"
fi

log "logs"
logs=$(compose logs --no-color serverfs-mcp 2>&1)
if grep -qF -e "$fixture" -e sk-smoke -e SMOKE-SECRET <<<"$logs"; then
  fail "serverfs-mcp logs hold no host path, key or file secret" "$(grep -F -e "$fixture" -e sk-smoke -e SMOKE-SECRET <<<"$logs")"
else
  pass "serverfs-mcp logs hold no host path, key or file secret"
fi
if grep -q '"tool"' <<<"$logs"; then pass "serverfs-mcp logs tool calls as JSON lines"; else fail "serverfs-mcp logs tool calls as JSON lines" "$(tail -n 5 <<<"$logs")"; fi

# ------------------------------------------------------- misconfiguration --
log "misconfiguration"
cp "$tmp/test.env" "$tmp/missing.env"
set_env "$tmp/missing.env" WORKDIR_02_ALIAS missing
set_env "$tmp/missing.env" WORKDIR_02_PATH "$missing"
if out=$(docker compose -p "$PROJECT_MISSING" --env-file "$tmp/missing.env" -f compose.yml -f tests/docker/compose.smoke.yml \
  up -d --no-build serverfs-mcp 2>&1); then
  fail "a missing host path makes up fail" "$out"
else
  pass "a missing host path makes up fail ($(grep -oiE 'bind source path does not exist|no such file or directory' <<<"$out" | head -n1))"
fi
if [ -e "$missing" ]; then fail "the missing host path was not created"; else pass "the missing host path was not created"; fi
docker compose -p "$PROJECT_MISSING" down -v --remove-orphans --timeout 5 >/dev/null 2>&1 || true

# Alias set but no host path: the slot gets ./.empty and its sentinel, and the
# server must refuse to start, naming the slot (exit 2), not the host path.
cp "$tmp/test.env" "$tmp/orphan.env"
set_env "$tmp/orphan.env" WORKDIR_03_ALIAS orphan
out=$(docker compose -p "$PROJECT_MISSING" --env-file "$tmp/orphan.env" -f compose.yml -f tests/docker/compose.smoke.yml \
  run --rm --no-deps -T serverfs-mcp 2>&1) && rc=0 || rc=$?
if [ "$rc" -eq 2 ] && grep -q 'slot 03' <<<"$out" && ! grep -qF "$REPO" <<<"$out"; then
  pass "alias without host path: start-up refused with exit 2, naming slot 03"
else
  fail "alias without host path: start-up refused with exit 2, naming slot 03" "exit $rc: $out"
fi
docker compose -p "$PROJECT_MISSING" down -v --remove-orphans --timeout 5 >/dev/null 2>&1 || true

# ----------------------------------------------------------------- down --
log "docker compose down -v"
check "docker compose down -v" compose down -v --remove-orphans --timeout 10
left=$(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT"; docker network ls -q --filter "label=com.docker.compose.project=$PROJECT")
if [ -z "$left" ]; then pass "no container or network of the project is left"; else fail "no container or network of the project is left" "$left"; fi

echo
echo "docker-smoke: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

#!/usr/bin/env bash
# deploy/install.sh in a throw-away DESTDIR: installs with a dummy binary,
# checks the files and modes, re-runs (idempotent, the env file is never
# overwritten), verifies the produced unit with `systemd-analyze verify`,
# uninstalls, and asserts the DESTDIR is exactly as before. Also: --dry-run
# writes nothing, a pre-existing env file survives install + uninstall, a
# file the script did not install is never replaced, and a non-root run
# without DESTDIR/--dry-run is refused.
#
#   tests/deploy/install.sh        (needs systemd-analyze: apt-get install -y systemd)
set -euo pipefail
cd "$(dirname "$0")/../.."
installer=$PWD/deploy/install.sh

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }

command -v systemd-analyze >/dev/null || fail "systemd-analyze not found (apt-get install -y systemd)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dummy=$work/serverfs-dev
printf '#!/bin/sh\necho dummy serverfs-dev\n' > "$dummy"
printf '#!/bin/sh\necho dummy supervisor\n' > "$work/serverfs-dev-supervisor"
chmod 0755 "$dummy" "$work/serverfs-dev-supervisor"

# Every path with its type, mode, size and content hash.
snapshot() {
  (cd "$1" && find . -printf '%p %y %m %s\n' | sort) | while read -r path type mode size; do
    if [ "$type" = f ]; then
      echo "$path $type $mode $size $(sha256sum "$1/$path" | cut -d' ' -f1)"
    else
      echo "$path $type $mode"
    fi
  done
}

install_into() { DESTDIR=$1 "$installer" --binary "$dummy" --root "$2" "${@:3}"; }

# ---- 1. install, reinstall, verify, uninstall ------------------------------
dest=$work/dest
mkdir -p "$dest/etc/systemd/system" "$dest/usr/local/bin"
# Things that belong to others and must survive.
echo "other" > "$dest/etc/systemd/system/other.service"
echo "tool" > "$dest/usr/local/bin/other-tool"
before=$(snapshot "$dest")

install_into "$dest" /home/alice/project > "$work/log1"
for f in usr/local/bin/serverfs-dev:755 usr/local/bin/serverfs-dev-supervisor:755 etc/systemd/system/serverfs-dev.service:644 \
  etc/systemd/system/serverfs-dev.service.d/root.conf:644 etc/serverfs-dev/serverfs-dev.env:600 \
  etc/serverfs-dev:700; do
  path=$dest/${f%%:*}
  [ -e "$path" ] || fail "missing $path"
  [ "$(stat -c %a "$path")" = "${f##*:}" ] || fail "$path mode $(stat -c %a "$path"), want ${f##*:}"
done
cmp -s "$dest/etc/systemd/system/serverfs-dev.service" deploy/serverfs-dev.service || fail "unit differs from deploy/"
grep -qx 'SERVERFS_ROOT=/home/alice/project' "$dest/etc/serverfs-dev/serverfs-dev.env" || fail "env file lacks the root"
grep -qx 'ReadWritePaths=/home/alice/project' "$dest/etc/systemd/system/serverfs-dev.service.d/root.conf" || fail "drop-in lacks ReadWritePaths"
grep -qx 'BindPaths=/home/alice/project' "$dest/etc/systemd/system/serverfs-dev.service.d/root.conf" || fail "drop-in lacks BindPaths for a root under /home"
cmp -s "$dest/usr/local/bin/serverfs-dev-supervisor" "$work/serverfs-dev-supervisor" || fail "the supervisor is not the one beside --binary"
ok "install: binary, its supervisor, unit, drop-in, env file (0600) in place"

# Re-run: nothing changes, and an edited env file is kept.
echo "SERVERFS_TOKEN=edited-by-the-admin" >> "$dest/etc/serverfs-dev/serverfs-dev.env"
after1=$(snapshot "$dest")
install_into "$dest" /home/alice/project > "$work/log2"
[ "$(snapshot "$dest")" = "$after1" ] || fail "a second install changed the tree"
grep -q 'kept existing' "$work/log2" || fail "second run did not report keeping the env file"
ok "install again: idempotent, edited env file kept"

# systemd-analyze verify on the produced unit. The DESTDIR has no systemd of
# its own (sysinit.target, ...), so verify runs on a copy of it plus the
# host's systemd units, with --root so that ExecStart= resolves to the
# installed dummy binary and the drop-in is read.
vroot=$work/vroot
mkdir -p "$vroot/usr/lib/systemd"
cp -a "$dest/." "$vroot/"
cp -a /usr/lib/systemd/system "$vroot/usr/lib/systemd/"
verify_out=$(systemd-analyze verify --root="$vroot" serverfs-dev.service 2>&1) || {
  echo "$verify_out"; fail "systemd-analyze verify failed"; }
[ -z "$verify_out" ] || { echo "$verify_out"; fail "systemd-analyze verify printed warnings"; }
ok "systemd-analyze verify --root: no output, exit 0"
echo "systemd-analyze verify output: '${verify_out}'"
# The verifier does read the drop-in: a bad key there is reported.
echo "BogusKey=1" >> "$vroot/etc/systemd/system/serverfs-dev.service.d/root.conf"
systemd-analyze verify --root="$vroot" serverfs-dev.service 2>&1 | grep -q "Unknown key 'BogusKey'" ||
  fail "verify did not read the drop-in"
ok "systemd-analyze verify reads the drop-in (a planted bad key is reported)"
if systemd-analyze security --help 2>/dev/null | grep -q -- --offline; then
  sed -i '$d' "$vroot/etc/systemd/system/serverfs-dev.service.d/root.conf"
  systemd-analyze security --offline=true --root="$vroot" serverfs-dev.service 2>&1 | tail -n 1
fi

# Uninstall: the edited env file is kept (and named); restore it to check
# exactness of everything else, then uninstall removes it too.
DESTDIR=$dest "$installer" --uninstall > "$work/log3"
grep -q 'kept (edited since install' "$work/log3" || fail "edited env file not reported as kept"
[ -f "$dest/etc/serverfs-dev/serverfs-dev.env" ] || fail "edited env file was removed"
[ ! -e "$dest/usr/local/bin/serverfs-dev" ] || fail "binary left behind"
[ ! -e "$dest/usr/local/bin/serverfs-dev-supervisor" ] || fail "supervisor left behind"
[ ! -e "$dest/etc/systemd/system/serverfs-dev.service" ] || fail "unit left behind"
rm "$dest/etc/serverfs-dev/serverfs-dev.env"
rmdir "$dest/etc/serverfs-dev"
[ "$(snapshot "$dest")" = "$before" ] || { diff <(echo "$before") <(snapshot "$dest"); fail "uninstall left a different tree"; }
ok "uninstall: removes what it added, keeps others' files and the edited env file"

# An unedited install is removed completely.
install_into "$dest" /srv/project > /dev/null
grep -q BindPaths "$dest/etc/systemd/system/serverfs-dev.service.d/root.conf" && fail "BindPaths for a root outside /home"
DESTDIR=$dest "$installer" --uninstall > /dev/null
[ "$(snapshot "$dest")" = "$before" ] || { diff <(echo "$before") <(snapshot "$dest"); fail "uninstall left a different tree"; }
ok "install + uninstall: DESTDIR exactly as before"

# ---- 2. a pre-existing env file is neither overwritten nor removed ---------
dest2=$work/dest2
mkdir -p "$dest2/etc/serverfs-dev"
printf 'SERVERFS_ROOT=/srv/mine\nSERVERFS_TOKEN=mine\n' > "$dest2/etc/serverfs-dev/serverfs-dev.env"
chmod 0600 "$dest2/etc/serverfs-dev/serverfs-dev.env"
before2=$(snapshot "$dest2")
DESTDIR=$dest2 "$installer" --binary "$dummy" > /dev/null # root read from the env file
grep -qx 'ReadWritePaths=/srv/mine' "$dest2/etc/systemd/system/serverfs-dev.service.d/root.conf" ||
  fail "root not taken from the existing env file"
grep -qx 'SERVERFS_TOKEN=mine' "$dest2/etc/serverfs-dev/serverfs-dev.env" || fail "env file overwritten"
DESTDIR=$dest2 "$installer" --uninstall > /dev/null
[ "$(snapshot "$dest2")" = "$before2" ] || { diff <(echo "$before2") <(snapshot "$dest2"); fail "pre-existing env case"; }
ok "pre-existing env file: kept through install and uninstall"

# ---- 3. refusals and --dry-run -----------------------------------------------
dest3=$work/dest3
mkdir -p "$dest3/usr/local/bin"
echo "someone else's" > "$dest3/usr/local/bin/serverfs-dev"
before3=$(snapshot "$dest3")
if install_into "$dest3" /srv/p > "$work/log4" 2>&1; then fail "replaced a file it did not install"; fi
grep -q 'was not installed by' "$work/log4" || fail "no reason given for refusing"
ok "refuses to replace a file it did not install"
lone=$work/lone
mkdir "$lone" && cp "$dummy" "$lone/serverfs-dev"
before_lone=$(snapshot "$dest3")
if DESTDIR=$dest3 "$installer" --binary "$lone/serverfs-dev" --root /srv/p > "$work/log6" 2>&1; then
  fail "installed a binary without its supervisor"
fi
grep -q 'no serverfs-dev-supervisor beside' "$work/log6" || fail "no reason given for refusing a lone binary"
[ "$(snapshot "$dest3")" = "$before_lone" ] || fail "a refused lone binary changed the tree"
ok "refuses a binary without its supervisor, changing nothing"
rm "$dest3/usr/local/bin/serverfs-dev"
before3=$(snapshot "$dest3")
DESTDIR=$dest3 "$installer" --dry-run --binary "$dummy" --root /srv/p > "$work/log5"
[ "$(snapshot "$dest3")" = "$before3" ] || fail "--dry-run changed the tree"
grep -q 'would run: install' "$work/log5" || fail "--dry-run printed no plan"
[ "$(tail -n 1 "$work/log5")" = "install.sh: dry run: nothing changed" ] || fail "--dry-run ends with: $(tail -n 1 "$work/log5")"
if grep -q 'done\.' "$work/log5"; then fail "--dry-run says done"; fi
if grep -q 'WARNING' "$work/log5"; then fail "a root outside /tmp is warned about"; fi
ok "--dry-run changes nothing and says so last"
# The unit gives the service a /tmp of its own: a root under /tmp would be an
# empty private one. /var/tmp is the host's (the servers' rendezvous).
DESTDIR=$dest3 "$installer" --dry-run --binary "$dummy" --root /tmp/p > "$work/log5t"
grep -q "WARNING: --root /tmp/p is under /tmp; the unit gives the service a /tmp of its own" "$work/log5t" || fail "no /tmp warning for --root /tmp/p"
DESTDIR=$dest3 "$installer" --dry-run --binary "$dummy" --root /var/tmp/p > "$work/log5v"
if grep -q 'WARNING' "$work/log5v"; then fail "a root under /var/tmp is warned about"; fi
[ "$(snapshot "$dest3")" = "$before3" ] || fail "--dry-run changed the tree"
ok "a root under /tmp is warned about (the service's own /tmp), one under /var/tmp is not"
for bad in relative/path / /etc/foo "/srv/with space"; do
  if install_into "$dest3" "$bad" > /dev/null 2>&1; then fail "accepted --root '$bad'"; fi
done
[ "$(snapshot "$dest3")" = "$before3" ] || fail "a refused install changed the tree"
ok "bad --root values refused before any change"
if DESTDIR=$dest3 "$installer" --uninstall > /dev/null 2>&1; then fail "uninstall without a manifest succeeded"; fi
ok "uninstall without a manifest refused"
if [ "$(id -u)" -eq 0 ] && id nobody > /dev/null 2>&1 && command -v setpriv > /dev/null; then
  if setpriv --reuid=nobody --regid=nogroup --clear-groups sh "$installer" --binary "$dummy" --root /srv/p \
    > "$work/log6" 2>&1; then
    fail "a non-root live install was not refused"
  fi
  grep -q 'must run as root' "$work/log6" || fail "non-root refusal without reason"
  ok "non-root without DESTDIR/--dry-run refused"
fi

# ---- 4. a live install on a host where systemd is not running ---------------
# What a live install would touch, as it stands now.
live_state() {
  ls -ld /etc/serverfs-dev /usr/local/bin/serverfs-dev /usr/local/bin/serverfs-dev-supervisor \
    /etc/systemd/system/serverfs-dev.service /etc/systemd/system/serverfs-dev.service.d 2>&1 || true
  getent passwd serverfs || true
  getent group serverfs || true
}
if [ "$(id -u)" -eq 0 ] && [ ! -d /run/systemd/system ]; then
  before_live=$(live_state)
  code=0
  "$installer" --binary "$dummy" --root /srv/p > "$work/log7" 2>&1 || code=$?
  [ "$code" -eq 2 ] || { cat "$work/log7"; fail "live install without systemd: exit $code, want 2"; }
  grep -q '^install.sh: systemd is not running here' "$work/log7" || fail "no clear reason: $(cat "$work/log7")"
  grep -q 'nothing was changed' "$work/log7" || fail "does not say nothing was changed"
  [ "$(live_state)" = "$before_live" ] || fail "a refused live install changed the system"
  ok "live install without a running systemd: exit 2, nothing changed"
  "$installer" --dry-run --binary "$dummy" --root /srv/p > "$work/log8" 2>&1
  [ "$(live_state)" = "$before_live" ] || fail "a live --dry-run changed the system"
  if ! getent passwd serverfs > /dev/null; then
    grep -q 'would create system user serverfs' "$work/log8" || fail "--dry-run does not say it would create the user"
    if grep -q 'created system user' "$work/log8"; then fail "--dry-run says it created the user"; fi
  fi
  grep -q 'a real install would stop' "$work/log8" || fail "--dry-run does not warn that systemd is not running"
  ok "live --dry-run: says what it would do, changes nothing"
else
  echo "skip: live install checks (need root and a host where systemd is not running)"
fi

if command -v shellcheck > /dev/null; then
  shellcheck -s sh deploy/install.sh && shellcheck tests/deploy/install.sh && ok "shellcheck clean"
else
  echo "skip: shellcheck not installed"
fi
echo "all deploy checks passed"

#!/bin/sh
# Install serverfs-dev as a systemd service (Linux), or remove exactly what
# an earlier run added.
#
#   sudo deploy/install.sh --binary target/release/serverfs-dev --root /srv/project
#   sudo deploy/install.sh --uninstall
#   DESTDIR=/tmp/stage deploy/install.sh --binary ... --root ...   # throw-away root
#   deploy/install.sh --dry-run --binary ... --root ...            # print, change nothing
#
# What it adds (each recorded in a manifest, $DESTDIR/etc/serverfs-dev/.install-manifest):
#   /usr/local/bin/serverfs-dev                                    the binary
#   /usr/local/bin/serverfs-dev-supervisor                         its per-command supervisor (from beside --binary)
#   /etc/systemd/system/serverfs-dev.service                       the unit
#   /etc/systemd/system/serverfs-dev.service.d/root.conf           the root's sandbox paths
#   /etc/serverfs-dev/serverfs-dev.env                             config, 0600, only if absent
#   the system user and group `serverfs`                           only if absent; never under DESTDIR
# Running it again updates the binary and the unit and keeps everything else.
# --uninstall stops and disables the service, then removes what the manifest
# lists: the env file only if it is unchanged since it was installed (an
# edited one is kept and named), directories only if empty. The service's
# state directory (/var/lib/serverfs-dev) is created by systemd, not by this
# script, and is left alone.
set -eu

prog=$(basename "$0")
here=$(cd "$(dirname "$0")" && pwd)

usage() {
  cat <<EOF
usage: $prog [--dry-run] [--binary PATH] [--root DIR] [--user NAME]
       $prog [--dry-run] --uninstall
DESTDIR=DIR installs into a throw-away root (no user, no systemctl).
EOF
}

die() { echo "$prog: $*" >&2; exit 1; }

dry=0
uninstall=0
binary=
root=
user=serverfs
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) dry=1 ;;
    --uninstall) uninstall=1 ;;
    --binary) [ $# -ge 2 ] || die "--binary needs a path"; binary=$2; shift ;;
    --root) [ $# -ge 2 ] || die "--root needs a directory"; root=$2; shift ;;
    --user) [ $# -ge 2 ] || die "--user needs a name"; user=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
  shift
done

dest=${DESTDIR:-}
dest=${dest%/}
if [ -n "$dest" ]; then
  case $dest in /*) ;; *) die "DESTDIR must be an absolute path" ;; esac
  [ -d "$dest" ] || die "DESTDIR $dest is not a directory"
fi
if [ -z "$dest" ] && [ "$dry" -eq 0 ] && [ "$(id -u)" -ne 0 ]; then
  die "must run as root (or with --dry-run, or DESTDIR=... for a throw-away root)"
fi

# systemd's own test for a booted system (sd_booted(3)). A live install
# checks it before it changes anything: without a running systemd the unit
# could never start, and a half-done install would be left behind.
systemd_running() { [ -d /run/systemd/system ]; }
if [ -z "$dest" ] && [ "$uninstall" -eq 0 ] && ! systemd_running; then
  if [ "$dry" -eq 1 ]; then
    echo "$prog: note: systemd is not running here (no /run/systemd/system); a real install would stop at this point"
  else
    echo "$prog: systemd is not running here (no /run/systemd/system): nothing was changed. Install on a host booted with systemd, or use DESTDIR=DIR to stage the files." >&2
    exit 2
  fi
fi

bin_path=/usr/local/bin/serverfs-dev
supervisor_path=/usr/local/bin/serverfs-dev-supervisor
unit_path=/etc/systemd/system/serverfs-dev.service
dropin_dir=/etc/systemd/system/serverfs-dev.service.d
dropin_path=$dropin_dir/root.conf
conf_dir=/etc/serverfs-dev
env_path=$conf_dir/serverfs-dev.env
manifest=$conf_dir/.install-manifest
state_home=/var/lib/serverfs-dev

# Does this run touch the live system (users, systemctl)?
live() { [ -z "$dest" ] && [ "$dry" -eq 0 ]; }

run() {
  if [ "$dry" -eq 1 ]; then
    echo "would run: $*"
  else
    "$@"
  fi
}

note() { echo "$prog: $*"; }

# ---- manifest: lines "KIND PATH [SHA256]", KIND in dir|file|conf|user|group ----
# Kept in memory while running and written once at the end (atomically).
entries=
if [ -f "$dest$manifest" ]; then
  entries=$(cat "$dest$manifest")
fi

recorded() { # KIND NAME
  printf '%s\n' "$entries" | awk -v k="$1" -v p="$2" '$1 == k && $2 == p { found = 1 } END { exit !found }'
}

record() { # KIND NAME [SUM]
  if ! recorded "$1" "$2"; then
    entries=$(printf '%s\n%s' "$entries" "$*" | sed '/^$/d')
  fi
}

write_manifest() {
  if [ "$dry" -eq 1 ]; then
    return
  fi
  if [ -z "$entries" ]; then
    rm -f "$dest$manifest"
    return
  fi
  tmp="$dest$manifest.tmp.$$"
  printf '%s\n' "$entries" > "$tmp"
  chmod 0600 "$tmp"
  mv -f "$tmp" "$dest$manifest"
}

sum() { sha256sum "$1" | cut -d' ' -f1; }

# Creates PATH and any missing parents (0755), recording each one created.
make_dir() { # PATH MODE
  if [ -d "$dest$1" ] || recorded dir "$1"; then
    return
  fi
  parent=$(dirname "$1")
  if [ "$parent" != / ]; then
    make_dir "$parent" 0755
  fi
  run mkdir -m "$2" "$dest$1"
  record dir "$1"
}

# Installs SRC as PATH with MODE; refuses to replace a file this script did
# not install (it could not honestly remove it later).
put_file() { # SRC PATH MODE
  if [ -e "$dest$2" ] && ! recorded file "$2"; then
    die "$dest$2 exists and was not installed by $prog; move it away first"
  fi
  if [ -f "$dest$2" ] && cmp -s "$1" "$dest$2"; then
    note "unchanged: $dest$2"
  else
    run install -m "$3" "$1" "$dest$2"
    [ "$dry" -eq 1 ] || note "installed: $dest$2"
  fi
  record file "$2"
}

# ---------------------------------------------------------------------------
if [ "$uninstall" -eq 1 ]; then
  [ -f "$dest$manifest" ] || die "no manifest at $dest$manifest: nothing was installed by $prog here"
  if live && systemd_running; then
    systemctl disable --now serverfs-dev.service 2>/dev/null || true
  fi
  # Reverse order: files before the directories that hold them.
  reversed=$(printf '%s\n' "$entries" | awk '{ line[NR] = $0 } END { for (i = NR; i >= 1; i--) print line[i] }')
  kept=
  while IFS=' ' read -r kind path digest; do
    [ -n "$kind" ] || continue
    case $kind in
      file)
        if [ -e "$dest$path" ]; then run rm -f "$dest$path"; note "removed: $dest$path"; fi ;;
      conf)
        if [ -e "$dest$path" ]; then
          if [ "$(sum "$dest$path")" = "$digest" ]; then
            run rm -f "$dest$path"; note "removed: $dest$path"
          else
            kept="$kept $dest$path"
            note "kept (edited since install, may hold secrets): $dest$path"
          fi
        fi ;;
      dir)
        if [ "$path" = "$conf_dir" ] && [ "$dry" -eq 0 ]; then
          rm -f "$dest$manifest"
        fi
        if [ -d "$dest$path" ]; then
          if [ "$dry" -eq 1 ]; then
            echo "would run: rmdir $dest$path (if empty)"
          elif rmdir "$dest$path" 2>/dev/null; then
            note "removed: $dest$path"
          else
            note "kept (not empty): $dest$path"
          fi
        fi ;;
      user)
        if live; then
          if userdel "$path"; then note "removed user: $path"; else note "could not remove user $path"; fi
        else
          echo "would run: userdel $path"
        fi ;;
      group)
        if live && getent group "$path" >/dev/null; then
          if groupdel "$path"; then note "removed group: $path"; else note "could not remove group $path"; fi
        elif ! live; then
          echo "would run: groupdel $path"
        fi ;;
      *) note "ignoring unknown manifest line: $kind $path" ;;
    esac
  done <<EOF
$reversed
EOF
  if [ "$dry" -eq 0 ]; then
    rm -f "$dest$manifest"
  fi
  if live && systemd_running; then
    systemctl daemon-reload
  fi
  if [ -n "$kept" ]; then
    note "left in place:$kept"
  fi
  note "the service's state directory $state_home (if any) was created by systemd and is left alone"
  if [ "$dry" -eq 1 ]; then note "dry run: nothing changed"; fi
  exit 0
fi

# ---------------------------------------------------------------------------
# Install.
[ -n "$binary" ] || binary="$here/../target/release/serverfs-dev"
[ -f "$binary" ] || die "no binary at $binary (build it, or pass --binary PATH)"
# The supervisor every command runs under, built beside the binary; always
# installed with it, so the two are never of different releases.
supervisor=$(dirname "$binary")/serverfs-dev-supervisor
[ -f "$supervisor" ] || die "no serverfs-dev-supervisor beside $binary (cargo build --release -p serverfs-dev builds both)"
[ -f "$here/serverfs-dev.service" ] || die "missing $here/serverfs-dev.service"
[ -f "$here/serverfs-dev.env.example" ] || die "missing $here/serverfs-dev.env.example"

case $user in
  *[!a-z0-9_-]*|'') die "--user must be a plain lower-case name" ;;
esac

# The root: from --root, else from the installed env file.
if [ -z "$root" ] && [ -f "$dest$env_path" ]; then
  root=$(sed -n 's/^SERVERFS_ROOT=//p' "$dest$env_path" | tail -n 1)
fi
[ -n "$root" ] || die "--root DIR is required (the project directory the agent works in)"
root=${root%/}
case $root in
  /*) ;;
  *) die "--root must be an absolute path" ;;
esac
case $root in
  *[!A-Za-z0-9._/@+-]*) die "--root may only contain letters, digits and . _ / @ + - (it goes into a unit file)" ;;
esac
# The unit gives the service a /tmp of its own, empty (TemporaryFileSystem=),
# so a root under /tmp would be a different, empty directory.
case $root in
  /tmp|/tmp/*)
    note "WARNING: --root $root is under /tmp; the unit gives the service a /tmp of its own (TemporaryFileSystem=/tmp), so it would see an empty private directory there, not this one; use a directory outside /tmp" ;;
esac
case $root in
  ''|/|/etc|/etc/*|/usr|/usr/*|/bin|/sbin|/lib|/lib64|/boot|/boot/*|/proc|/proc/*|/sys|/sys/*|/dev|/dev/*|/run|/var/lib/serverfs-dev|/var/lib/serverfs-dev/*)
    die "--root $root is a system directory; use a project directory" ;;
esac

# The unit's drop-in for this root.
tmpdir=$(mktemp -d)
trap 'rm -rf "$tmpdir"' EXIT INT TERM
{
  echo "# Written by $prog for SERVERFS_ROOT=$root; run it again with --root to change."
  echo "[Service]"
  echo "ReadWritePaths=$root"
  case $root in
    /home/*|/root/*|/run/user/*)
      echo "# Under a home directory: ProtectHome=tmpfs hides it; bind it back in."
      echo "BindPaths=$root" ;;
  esac
} > "$tmpdir/root.conf"
sed "s|@ROOT@|$root|" "$here/serverfs-dev.env.example" > "$tmpdir/serverfs-dev.env"

if [ -n "$dest" ]; then
  note "installing into DESTDIR=$dest (no user is created, systemctl is not run)"
fi

make_dir /etc 0755
make_dir "$conf_dir" 0700
make_dir /usr/local/bin 0755
make_dir /etc/systemd/system 0755
make_dir "$dropin_dir" 0755

put_file "$binary" "$bin_path" 0755
put_file "$supervisor" "$supervisor_path" 0755
put_file "$here/serverfs-dev.service" "$unit_path" 0644
put_file "$tmpdir/root.conf" "$dropin_path" 0644

if [ -e "$dest$env_path" ]; then
  note "kept existing: $dest$env_path"
  existing_root=$(sed -n 's/^SERVERFS_ROOT=//p' "$dest$env_path" | tail -n 1)
  if [ "$existing_root" != "$root" ]; then
    note "WARNING: $dest$env_path has SERVERFS_ROOT=$existing_root but the unit now allows writes to $root; make them agree"
  fi
else
  run install -m 0600 "$tmpdir/serverfs-dev.env" "$dest$env_path"
  record conf "$env_path" "$(sum "$tmpdir/serverfs-dev.env")"
  [ "$dry" -eq 1 ] || note "installed: $dest$env_path (edit it: auth, allowed hosts)"
fi

if [ -n "$dest" ]; then
  note "DESTDIR: skipped creating user $user"
elif getent passwd "$user" >/dev/null 2>&1; then
  note "user $user exists; kept"
else
  nologin=/usr/sbin/nologin
  [ -x "$nologin" ] || nologin=/sbin/nologin
  group_existed=0
  if getent group "$user" >/dev/null 2>&1; then group_existed=1; fi
  if [ "$group_existed" -eq 1 ]; then
    run useradd --system --gid "$user" --home-dir "$state_home" --no-create-home --shell "$nologin" "$user"
  else
    run useradd --system --user-group --home-dir "$state_home" --no-create-home --shell "$nologin" "$user"
    record group "$user"
  fi
  record user "$user"
  if [ "$dry" -eq 1 ]; then
    note "would create system user $user (home $state_home, created by systemd at start)"
  else
    note "created system user $user (home $state_home, created by systemd at start)"
  fi
fi

if [ "$user" != serverfs ]; then
  note "WARNING: the unit runs as User=serverfs; add a drop-in with User=$user and Group=$user"
fi

write_manifest

if live; then
  systemctl daemon-reload
fi

if [ "$dry" -eq 1 ]; then
  note "dry run: nothing changed"
  exit 0
fi

cat <<EOF
$prog: done. Next:
  1. make $root writable by $user (e.g. chown -R $user: $root)
  2. edit $dest$env_path (authentication, SERVERFS_ALLOWED_HOSTS)
  3. systemctl enable --now serverfs-dev && journalctl -u serverfs-dev -f
EOF

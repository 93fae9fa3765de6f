"""The protocol channel and process-tree test child: answers "ping N" with "pong N" on stdout (the grader's
channel), "spawn" by starting a grandchild that leaves the process group (double fork + setsid, or setpgid where
the filter refuses a new session) and
sleeps, replying with its pid as seen inside; "quit" exits.  Standard library only."""
import os
import sys
import time


def spawn_detached() -> int:
    read, write = os.pipe()
    if os.fork() == 0:
        try:
            os.setsid()
        except OSError:  # the seccomp filter refuses a new session: leave the process group instead
            os.setpgid(0, 0)
        if os.fork() == 0:
            os.write(write, str(os.getpid()).encode())
            os.close(write)
            for fd in (0, 1, 2):
                os.close(fd)
            time.sleep(300)
            os._exit(0)
        os._exit(0)
    os.close(write)
    pid = int(os.read(read, 32))
    os.wait()
    return pid


for line in sys.stdin:
    words = line.split()
    if words[0] == "ping":
        print("pong", words[1], flush=True)
    elif words[0] == "spawn":
        print("spawned", spawn_detached(), flush=True)
    elif words[0] == "quit":
        break

"""A miniature of mha-check's batch zygote (harness/child/zygote.py) for the wall tests of the fork path: the same
`harness.sandbox.confine.confine` call, right after the fork, but the child then runs any script (the zygote's
children only ever serve mha-check's protocol).

    python -I -B forkhost.py PACKAGES_ROOT CONTROL_FD

For each request on the SEQPACKET control socket it forks a child that takes the four passed fds as its
stdin/stdout/stderr and status fd, confines itself and runs the requested script with runpy.  Requests:
{"op": "spawn", "policy", "argv"} with 4 fds -> {"pid"}; {"op": "wait", "pid", "timeout"} -> {"status", "cpu"}.
"""
import json
import os
import runpy
import socket
import sys
import time
import traceback

sys.path.insert(0, sys.argv[1])

from harness.sandbox.confine import confine
from harness.sandbox.policy import Policy


def _child(request, fds, control):
    try:
        control.close()
        stdin, stdout, stderr, status = fds
        os.setsid()
        for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
            os.dup2(fd, target)
            os.close(fd)
        for fd in map(int, os.listdir("/proc/self/fd")):
            if fd > 2 and fd != status:
                try:
                    os.close(fd)
                except OSError:
                    pass
        confine(Policy.from_json(request["policy"]), status)
    except BaseException as e:  # noqa: BLE001
        os.write(2, f"confinement failed: {type(e).__name__}: {e}\n".encode())
        os._exit(126)
    sys.argv = list(request["argv"])
    code = 0
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _wait(pid, timeout):
    end = time.monotonic() + timeout
    while True:
        try:
            done, raw, usage = os.wait4(pid, os.WNOHANG)
        except ChildProcessError:
            return {"status": None}
        if done:
            status = -os.WTERMSIG(raw) if os.WIFSIGNALED(raw) else os.WEXITSTATUS(raw)
            return {"status": status, "cpu": usage.ru_utime + usage.ru_stime}
        if time.monotonic() >= end:
            return {"status": None}
        time.sleep(0.005)


def main():
    control = socket.socket(fileno=int(sys.argv[2]))
    while True:
        data, fds, _, _ = socket.recv_fds(control, 1 << 20, 4)
        if not data:
            return
        request = json.loads(data)
        if request["op"] == "spawn":
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(request, fds, control)
            for fd in fds:
                os.close(fd)
            reply = {"pid": pid}
        else:
            reply = _wait(int(request["pid"]), float(request["timeout"]))
        control.send(json.dumps(reply).encode())


if __name__ == "__main__":
    main()

"""An mha-check command leaves none of its processes running when it returns (harness.sandbox.reaper): one that lost
its parent (a zygote whose grader exited, a template's zygote once the template is killed) is adopted, waited for,
and killed past the grace; a child it had before it adopted is not its to wait for."""
import json
import os
import signal
import subprocess
import sys

from conftest import ROOT

COMMAND = """
import json, os, signal, subprocess, sys, time
from harness.sandbox import reaper
earlier = subprocess.Popen(["sleep", "600"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # not the
# command's: there before it adopted
reaper.adopt()

def orphan(code):
    # a process whose parent ends at once: nobody's child, unless adopted
    r, w = os.pipe()
    middle = os.fork()
    if middle == 0:
        pid = os.fork()
        if pid == 0:
            os.close(r)
            exec(code)
            os._exit(0)
        os.write(w, str(pid).encode())
        os._exit(0)
    os.close(w)
    os.waitpid(middle, 0)
    pid = int(os.read(r, 32))
    os.close(r)
    return pid

ends = orphan("time.sleep(1.0)")  # ends on its own within the grace
stuck = orphan("signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)")  # never ends on its own
killed = reaper.settle(grace=float(sys.argv[1]))
print(json.dumps({"ends": ends, "stuck": stuck, "earlier": earlier.pid, "killed": killed}), flush=True)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_command_waits_for_its_orphans_and_kills_those_that_stay():
    run = subprocess.run([sys.executable, "-c", COMMAND, "5"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stderr[-2000:]
    seen = json.loads(run.stdout)
    try:
        assert not _alive(seen["ends"]) and not _alive(seen["stuck"])  # gone when the command returned
        assert seen["killed"] == [seen["stuck"]]  # the one that ended on its own was waited for, not killed
        assert _alive(seen["earlier"])  # not the command's: left alone
    finally:
        if _alive(seen["earlier"]):
            os.kill(seen["earlier"], signal.SIGKILL)

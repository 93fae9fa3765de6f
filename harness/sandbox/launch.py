"""The launcher of the builtin mechanism, for a single run (a Popen) where bubblewrap is missing or does not work:

    python -I -S -B launch.py STATUS_FD POLICY_JSON -- PROGRAM ARG...

Started by the trusted parent with the parent's privileges (root in a grader); confines itself with
`harness.sandbox.confine.confine` (which writes the isolation record to STATUS_FD and closes it) and then execs
PROGRAM inside.  Exit status 126: the confinement failed and nothing of PROGRAM ran; 127: PROGRAM could not start.
Standard library only (-S: not even site-packages), so that it starts fast and runs nothing it does not need.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from harness.sandbox.confine import confine
from harness.sandbox.policy import Policy


def main(args: list[str]) -> None:
    status_fd, policy_json, separator, *program = args
    if separator != "--" or not program:
        sys.stderr.write("usage: launch.py STATUS_FD POLICY_JSON -- PROGRAM ARG...\n")
        os._exit(2)
    status_fd = int(status_fd)
    os.set_inheritable(status_fd, False)
    try:
        confine(Policy.from_json(policy_json), status_fd, keeper=True)
    except BaseException as e:  # noqa: BLE001 - in whichever of our processes failed: never run PROGRAM
        sys.stderr.write(f"mha-check: confinement failed: {type(e).__name__}: {e}\n")
        sys.stderr.flush()
        os._exit(126)
    try:
        os.execvp(program[0], program)
    except OSError as e:
        sys.stderr.write(f"mha-check: cannot start {program[0]}: {e}\n")
        os._exit(127)


if __name__ == "__main__":
    main(sys.argv[1:])

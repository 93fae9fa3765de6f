"""What a submission may print is the file-size limit of its child (16 MB by default): past it the run stops and its
checks cannot tell, for review, never a failure.  A course whose students leave a lot of printing in their code
raises it with --output-limit, the same option for a single run, `grade` and the autograder
(harness.frontends.options)."""
import json
import shutil
import subprocess
import sys

from conftest import ROOT

LOUD = "import sys\nsys.stdout.write('x' * (3 << 20))  # 3 MB, once, at import\n"


def _mha(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.frontends.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600)


def test_grade_takes_the_output_limit_and_each_child_is_held_to_it(tmp_path):
    subs = tmp_path / "subs"
    (subs / "loud").mkdir(parents=True)
    (subs / "loud" / "attention.py").write_text(LOUD + (ROOT / "examples" / "correct_attention.py").read_text())
    run = _mha("grade", str(subs), "--out", str(tmp_path / "out"), "--jobs", "1", "--output-limit", "1",
               cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads((tmp_path / "out" / "loud.json").read_text())
    undecided = [c for c in report["checks"] if c["status"] == "cannot_tell"]
    assert undecided and "output limit: your code wrote more than 1 MB" in undecided[0]["message"], undecided[:1]
    assert report["needs_review"] is True and not [c for c in report["checks"] if c["status"] == "fail"]
    raised = _mha(str(subs / "loud" / "attention.py"), "--format", "json", "--output-limit", "8", cwd=tmp_path)
    assert raised.returncode == 0 and json.loads(raised.stdout)["passed"] is True, raised.stderr[-2000:]


def test_an_output_limit_out_of_bounds_is_a_usage_error_in_one_line(tmp_path):
    shutil.copy(ROOT / "examples" / "correct_attention.py", tmp_path / "attention.py")
    for args in (["grade", str(tmp_path), "--output-limit", "0"], ["attention.py", "--output-limit", "5000"]):
        run = _mha(*args, cwd=tmp_path)
        assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
        assert "--output-limit must be between 1 and 1024 MB" in run.stderr.strip().splitlines()[-1], run.stderr

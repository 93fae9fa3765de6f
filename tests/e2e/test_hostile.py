"""Hostile submissions: whatever the code does (hang, crash, exit, print, patch, escape), the verdict is not passing,
arrives within the time limit, the JSON stays valid, nothing it started survives, the grader carries on, and
nothing outside the child's scratch folder changed.

The attack submissions (`tests/hostile/*.py` that keep an ESCAPED list) compute the lesson's layer correctly only
when one of their attacks worked: a passing reference-match would mean that a wall gave way.  They are told where
the world is (`context.json` beside them: a classmate's folder, the output folder, a world-readable host file, a
service on localhost), as a student who knows the layout would be.  `World` checks from outside that mha-check's
own files, the installation's site-packages, the classmates' files, the host file and the output folder are as
they were, and that nobody connected to the service.  CI runs this suite as root: the privilege drop is exercised.
"""
from __future__ import annotations

import csv
import hashlib
import importlib.util
import json
import os
import py_compile
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from conftest import ROOT

HOSTILE = sorted((ROOT / "tests" / "hostile").glob("*.py"))
FORGEABLE = sorted((ROOT / "tests" / "hostile" / "forgeable").glob("*.py"))
ATTACKS = [p for p in HOSTILE if "ESCAPED = []" in p.read_text()]
QUICK = ("tool_files", "pth_planting", "proc_parent", "network", "raised_limits", "forged_jacobian", "kill_parent",
         "sleep_forever")  # the single runs of the quick suite (pytest -m "not slow"); every one runs in the full suite
TIME_LIMIT = 20  # the attacks' own seconds (context.json) and the checks, on a loaded machine (our start-up is not
# counted: the limit starts when the worker is ready).  8 was too short with three CPU burners on two cores: a correct
# classmate took 7.6 to 8.8 s and several attacks reached it before reference-match ("time", cannot tell)
# they end only at the limit: a short one will do where nothing else is graded
HANGS = ("sleep_forever", "loop_in_forward", "loop_at_import", "stops_reading", "stops_itself")
HANG_LIMIT = 2
SLACK = 20  # interpreter start-up, restarts after a crash, and a loaded machine: for each process the run starts (a
# submission that stops itself is run in three, each started afresh: 23.5 s with three CPU burners on two cores)
CLASSIFIED = {  # what happened is named as such, not as a generic error
    "sleep_forever": "time limit", "loop_in_forward": "time limit", "loop_at_import": "time limit",
    "stops_reading": "time limit",
    "memory_bomb": "memory limit", "processes_memory": "memory limit",
    "many_mappings": "memory mappings",  # the kernel's memory that no limit counts (red team 17)
    "segfault": "signal SIGSEGV", "os_exit_forward": "exited (status 0)",
    "garbage_fds": "corrupted the channel", "nested_header": "header nested too deeply",  # refused, never a crash
    "failed_mid_frame": "corrupted the channel", "reading_flood": "2000 readings of the parameters",
    "reading_brackets": "800017 characters long",
    "text_flood": "characters long sent, where mha-check's worker sends at most 8192",
    "custom_base_exception": "Evil: boom",  # the type and the arguments, never its endless __str__
}
MARKERS = {"7777.125": f"7777.{os.getpid()}", "8888.125": f"8888.{os.getpid()}"}  # the sleeps that fork_bomb and
# grandchild_escape leave behind, made unique to this run (other checkouts may run the same suite at the same time)
CORRECT = ROOT / "tests" / "zoo" / "correct" / "book_style.py"
WATCHED_PACKAGES = ("harness", "checks", "reference", "mutants")


def survivors() -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(m in cmdline for m in MARKERS.values()) and "pytest" not in cmdline:
            found.append(cmdline)
    return found


def run_cli(*args, timeout=TIME_LIMIT * 4 + SLACK, env=None):
    return subprocess.run([sys.executable, "-m", "harness.frontends.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env)


def submission_text(path: Path) -> str:
    text = path.read_text()
    for old, new in MARKERS.items():
        text = text.replace(old, new)
    return text


def correct_text() -> str:
    return CORRECT.read_text().replace("class MultiHeadAttention", "class MyAttn")


def _digests(folder: Path) -> dict[str, str]:
    out = {}
    for path in sorted(folder.rglob("*")):
        if "__pycache__" in path.parts or path.is_dir():
            continue
        out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else os.readlink(path)
    return out


def _site_folders() -> list[Path]:
    paths = sysconfig.get_paths()
    return sorted({Path(paths["purelib"]), Path(paths["platlib"]), Path(paths["stdlib"])})


class World:
    """What a submission must not touch, and the evidence that it did not: mha-check's own packages, the
    installation's site-packages and standard library folders, the classmates' files, a world-readable host file,
    the output folder, a service on localhost, the grader's temporary folder."""

    def __init__(self, tmp: Path, classmates: list[Path], out: Path):
        self.tmp, self.classmates, self.out = tmp, classmates, out
        self.tmpdir = tmp / "grader-tmp"  # TMPDIR of mha-check: where its scratch folders live
        self.tmpdir.mkdir()
        self.secret = tmp / "host-secret.txt"
        self.secret.write_text("a file of the grading machine\n")
        self.secret.chmod(0o644)
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.listener.setblocking(False)
        self._saved = {p: p.read_bytes() for pkg in WATCHED_PACKAGES for p in (ROOT / pkg).rglob("*")
                       if p.is_file() and "__pycache__" not in p.parts}
        self.before = self.snapshot()

    def context(self, **more) -> dict:
        return {"classmates": [str(c) for c in self.classmates], "secret": str(self.secret), "out": str(self.out),
                "port": self.listener.getsockname()[1], "seconds": 3, **more}

    def snapshot(self) -> dict:
        state = {pkg: _digests(ROOT / pkg) for pkg in WATCHED_PACKAGES}
        for folder in _site_folders():
            state[str(folder)] = sorted(p.name for p in folder.iterdir())
            state[f"{folder} .pth"] = {p.name: p.read_bytes() for p in folder.glob("*.pth")}
        for folder in self.classmates:
            state[str(folder)] = _digests(folder)
        state["secret"] = (self.secret.read_bytes(), self.secret.stat().st_mode)
        return state

    def connections(self) -> int:
        count = 0
        while True:
            try:
                self.listener.accept()[0].close()
                count += 1
            except BlockingIOError:
                return count

    def env(self) -> dict:
        return dict(os.environ, TMPDIR=str(self.tmpdir), MHA_TEST_GRADER_SECRET="hunter2")  # grader_environment.py

    def assert_untouched(self) -> None:
        after = self.snapshot()
        changed = sorted(k for k in after if after[k] != self.before[k])
        assert not changed, f"changed outside the scratch: {changed}"
        assert self.connections() == 0, "a submission reached the service on localhost"
        left = [str(p) for p in self.tmpdir.iterdir()]
        assert not left, f"left in mha-check's temporary folder: {left}"

    def close(self) -> None:
        """Undo what a submission managed to change (only if a wall gave way: the assertion has failed then)."""
        self.listener.close()
        for path, data in self._saved.items():
            if not path.exists() or path.read_bytes() != data:
                path.write_bytes(data)
        for pkg in WATCHED_PACKAGES:
            for path in (ROOT / pkg).rglob("zz_planted*"):
                path.unlink()
        for folder in _site_folders():
            for name in ("zz_planted_by_student.pth", "sitecustomize.py"):
                if (folder / name).exists() and b"hostile" in (folder / name).read_bytes():
                    (folder / name).unlink()


@pytest.fixture
def world(tmp_path):
    classmate = tmp_path / "classmate"
    classmate.mkdir()
    (classmate / "attention.py").write_text(correct_text())
    out = tmp_path / "out"
    out.mkdir()
    (out / "classmate.json").write_text('{"score": 17}\n')
    w = World(tmp_path, [classmate], out)
    yield w
    w.close()


def single_run(world: World, path: Path, *extra, limit=TIME_LIMIT):
    sub = world.tmp / "submission"
    sub.mkdir()
    (sub / "attention.py").write_text(submission_text(path))
    (sub / "context.json").write_text(json.dumps(world.context(reports=["classmate.json"])))
    return run_cli(f"{sub}/attention.py:MyAttn", "--format", "json", "--time-limit", str(limit),
                   "--memory-mb", "1500", *extra, env=world.env())


def _params(paths):
    return [pytest.param(p, id=p.stem, marks=() if p.stem in QUICK else pytest.mark.slow) for p in paths]


@pytest.mark.parametrize("path", _params(HOSTILE))
def test_hostile_submission_fails_in_time_and_touches_nothing(path, world):
    limit = HANG_LIMIT if path.stem in HANGS else TIME_LIMIT
    start = time.monotonic()
    run = single_run(world, path, limit=limit)
    elapsed = time.monotonic() - start
    assert run.returncode == 1, run.stderr[-2000:]
    report = json.loads(run.stdout)  # exactly one JSON object on stdout, whatever the code printed
    assert report["passed"] is False
    assert any(c["status"] in ("fail", "cannot_tell") for c in report["checks"])
    # a limit of mha-check's (time, memory) is not evidence of a bug: it is undecided and marked for a person
    if any(p.get("ours") for p in report["adapter"].get("process", [])):
        assert report["needs_review"] is True
    if path in ATTACKS:  # its output is right only if a wall gave way
        statuses = {c["id"]: c["status"] for c in report["checks"]}
        assert statuses["reference-match"] == "fail", report["student_output"][-2000:]
        assert "walls that gave way: []" in report["student_output"]
    if path.stem in CLASSIFIED:
        said = " ".join(c["message"] for c in report["checks"])
        assert CLASSIFIED[path.stem] in said, said
    assert "Traceback" not in run.stderr
    ends = report["adapter"].get("process", [])  # each ends a process of the run, each started afresh
    assert elapsed < max(1, len(ends)) * (limit + SLACK), f"took {elapsed:.1f} s for {len(ends)} process(es)"
    if path.stem in HANGS:  # cut at the limit asked for, however fast the machine: each end names it
        assert ends and all(re.search(rf"(?<![\d.]){limit:g} s\b", end["message"]) for end in ends), ends
    assert report["isolation"]["summary"]
    assert survivors() == []
    world.assert_untouched()
    assert sorted(p.name for p in world.out.iterdir()) == ["classmate.json"]


def test_forged_jacobian_is_caught_by_the_parents_own_perturbations(world):
    """-100 instead of -inf, and the worker patched to report a zero future Jacobian: the forward perturbations of
    size 1e30 that the parent computes still show the leak."""
    report = json.loads(single_run(world, ROOT / "tests" / "hostile" / "forged_jacobian.py").stdout)
    leak = next(c for c in report["checks"] if c["id"] == "causal-leakage")
    assert leak["status"] == "fail" and "1e30" in leak["message"], leak["message"]
    assert report["diagnosis"]["mutant"] == "finite-fill-100"


def test_the_parents_own_work_is_not_counted_on_the_childs_time(world):
    """Red team 16: 1,024 readings and call styles cost the parent about 6 s of its own work between requests on a
    quiet machine (14 times the child's), and the child's time in all ran on meanwhile: with a limit of 3 s a layer
    whose every forward takes milliseconds was stopped "within 3 s in all".  The child's clock stops between
    requests now: no time limit ends it, and it fails as the wrong layer it is (or cannot be told apart by its
    doubled readings)."""
    run = single_run(world, ROOT / "tests" / "hostile" / "slow_parent.py", limit=3)
    report = json.loads(run.stdout)
    assert [p for p in report["adapter"].get("process", []) if p["kind"] == "time"] == [], report["adapter"]
    statuses = {c["id"]: c["status"] for c in report["checks"]}
    assert statuses["output-shape"] == "pass" and statuses["causal-leakage"] == "pass", statuses  # it ran on
    assert report["passed"] is False
    world.assert_untouched()


REPLAYING = {  # a catalogued mistake behind a forward that replays its own earlier answers: the check that must fail
    "replay_dropout_input": "eval-determinism",  # dropout-in-eval, answers replayed by a hash of input and weights
    "replay_dropout_rows": "eval-determinism",  # dropout-in-eval, each batch row's answer replayed
    "replay_fill_prefix": "causal-leakage",  # finite-fill-100, each prefix's answer replayed, the Jacobian forged
}


@pytest.mark.parametrize("name", sorted(REPLAYING))
def test_a_child_replaying_its_own_answers_fails_the_check_of_its_mistake(name, world):
    """No pass on self-consistency: a child that memoises its answers and replays them whenever an input (a batch
    row, a prefix) comes back agrees with itself everywhere; only the parent's own reference, on weights and inputs
    the child has not answered for before, shows its mistake, and the check made for that mistake fails it."""
    run = single_run(world, ROOT / "tests" / "hostile" / f"{name}.py")
    report = json.loads(run.stdout)
    outcome = next(c for c in report["checks"] if c["id"] == REPLAYING[name])
    assert outcome["status"] == "fail", outcome["message"]
    assert "reference" in outcome["message"], outcome["message"]
    assert report["passed"] is False
    world.assert_untouched()


def test_a_layer_wrong_only_in_float32_fails_reference_match(world):
    """Right in float64, wrong in float32 (no mask, scores / dh) behind a branch on x.dtype: every configuration of
    float64 sees the lesson's layer, and only reference-match's float32 probes (module and input in float32, batches
    and lengths drawn from the seed, against the parent's float64 reference) show it, as a failure that says which
    dtype and by how much beyond which tolerance.  Before that probe it got full marks."""
    report = json.loads(single_run(world, ROOT / "tests" / "hostile" / "float32_only.py").stdout)
    outcome = next(c for c in report["checks"] if c["id"] == "reference-match")
    assert outcome["status"] == "fail", outcome["message"]
    assert "in float32" in outcome["message"] and "relative 0.0001" in outcome["message"], outcome["message"]
    assert outcome["config"]["dtype"] == "float32", outcome["config"]
    assert report["passed"] is False
    assert [c["id"] for c in report["checks"] if c["status"] != "pass"] == ["reference-match"]  # nothing else sees it
    world.assert_untouched()


def test_a_layer_wrong_only_in_float32_training_fails_reference_match(world):
    """Right in float64 and wherever autograd is off, wrong in float32 with autograd on (every training step): the
    float32 probe in eval() mode, without autograd, gave it full marks (red team 7).  The probe now also runs it as
    a training step does, and the failure says so."""
    report = json.loads(single_run(world, ROOT / "tests" / "hostile" / "float32_training_only.py").stdout)
    outcome = next(c for c in report["checks"] if c["id"] == "reference-match")
    assert outcome["status"] == "fail", outcome["message"]
    assert "train() mode with autograd on" in outcome["message"], outcome["message"]
    assert outcome["config"]["dtype"] == "float32", outcome["config"]
    assert report["passed"] is False
    world.assert_untouched()


@pytest.mark.parametrize("name", ["float32_probe_shape", "float32_full_context"])
@pytest.mark.parametrize("seed", ["0", "7"])
def test_a_layer_wrong_in_float32_outside_the_probes_shape_fails_reference_match(world, name, seed):
    """Red team 9: the float32 probe was one public shape (a batch of 4 and 48 of 64 tokens), and a layer wrong in
    float32 at every other shape, or only at n = context_length (every training batch of context_length tokens), had
    full marks.  The probes' batches and lengths are drawn from the seed now, one of them a full context."""
    report = json.loads(single_run(world, ROOT / "tests" / "hostile" / f"{name}.py", "--seed", seed).stdout)
    outcome = next(c for c in report["checks"] if c["id"] == "reference-match")
    assert outcome["status"] == "fail" and "in float32" in outcome["message"], outcome["message"]
    assert outcome["config"]["dtype"] == "float32", outcome["config"]
    assert report["passed"] is False
    assert [c["id"] for c in report["checks"] if c["status"] != "pass"] == ["reference-match"]  # nothing else sees it
    world.assert_untouched()


@pytest.mark.parametrize("seed", ["0", "7"])
def test_a_backward_wrong_only_in_float32_fails_reference_match(world, seed):
    """Red team 9: every forward right, the backward right in float64 and negated in float32 (a custom autograd
    Function: gradient ascent in every training step) had full marks; gradient-match asks float64 only.  The float32
    training step's gradients are compared now, and the failure says float32's differ from float64's."""
    report = json.loads(single_run(world, ROOT / "tests" / "hostile" / "float32_backward_only.py", "--seed",
                                   seed).stdout)
    outcome = next(c for c in report["checks"] if c["id"] == "reference-match")
    assert outcome["status"] == "fail" and "gradients" in outcome["message"], outcome["message"]
    assert "float32" in outcome["message"] and outcome["config"]["dtype"] == "float32", outcome
    assert report["passed"] is False
    assert [c["id"] for c in report["checks"] if c["status"] != "pass"] == ["reference-match"]  # nothing else sees it
    world.assert_untouched()


def test_a_layer_wrong_only_on_an_input_that_is_no_leaf_fails_reference_match(world):
    """Red team 9: the lesson's layer on a leaf input and no mask on the output of another operation (x.grad_fn set,
    as every attention layer's input in a model) had full marks: every input mha-check sent was a leaf.  The float32
    training step feeds x through an operation now, and its output differs from the reference's."""
    report = json.loads(single_run(world, ROOT / "tests" / "hostile" / "nonleaf_input_only.py").stdout)
    outcome = next(c for c in report["checks"] if c["id"] == "reference-match")
    assert outcome["status"] == "fail" and "train() mode" in outcome["message"], outcome["message"]
    assert report["passed"] is False
    world.assert_untouched()


def test_a_layer_wrong_only_at_a_models_head_width_fails_reference_match(world):
    """Red team 9: no mask from a head width of 16 on had full marks (no configuration's heads were wider than 8).
    The full-context float32 probe draws heads 16 to 64 wide, and the failure says the width, in float64 too."""
    report = json.loads(single_run(world, ROOT / "tests" / "hostile" / "wide_heads_only.py").stdout)
    outcome = next(c for c in report["checks"] if c["id"] == "reference-match")
    assert outcome["status"] == "fail" and "wide, as a model's" in outcome["message"], outcome["message"]
    assert "in float64 as in float32" in outcome["message"], outcome["message"]
    assert report["passed"] is False
    world.assert_untouched()


def test_dropout_left_on_in_eval_in_float32_only_fails_reference_match(world):
    """Red team 9: dropout applied in eval() mode in float32 only had full marks (every float32 module was built
    with dropout 0).  The float32 eval() probe's module is built with dropout 0.5, and the failure says so; the same
    mistake in every dtype stays eval-determinism's alone."""
    report = json.loads(single_run(world, ROOT / "tests" / "hostile" / "float32_eval_dropout.py").stdout)
    outcome = next(c for c in report["checks"] if c["id"] == "reference-match")
    assert outcome["status"] == "fail" and "in eval() in float32 only" in outcome["message"], outcome["message"]
    assert [c["id"] for c in report["checks"] if c["status"] != "pass"] == ["reference-match"]
    world.assert_untouched()


def test_a_train_mode_leak_behind_a_forged_jacobian_fails_reference_match(world):
    """Once a documented gap (forgeable: causal-leakage's train-mode evidence is the child's own Jacobian, which
    this layer forges): the float32 probe run as a training step compares its train-mode output with the parent's
    reference, and the leak shows there."""
    report = json.loads(single_run(world, ROOT / "tests" / "hostile" / "train_leak_forged_jacobian.py").stdout)
    outcome = next(c for c in report["checks"] if c["id"] == "reference-match")
    assert outcome["status"] == "fail" and "train() mode" in outcome["message"], outcome["message"]
    assert report["passed"] is False
    world.assert_untouched()


OURS = ("ours_imports", "ours_by_path", "ours_in_memory")  # a correct layer of mha-check's own, reached three ways


def _reached_none(report: dict, name: str) -> None:
    statuses = {c["id"]: c["status"] for c in report["checks"]}
    assert statuses["reference-match"] == "fail", (name, report["student_output"][-2000:])
    assert "walls that gave way: []" in report["student_output"], (name, report["student_output"][-2000:])
    assert report["passed"] is False


def _unfenced(report: dict) -> bool:
    """Neither a mount namespace nor Landlock kept the child away from the host's files."""
    isolation = report["isolation"]
    return "mount" not in isolation["namespaces"] and not isolation.get("landlock", {}).get("in_force")


def test_no_correct_layer_of_ours_within_a_submissions_reach(world, tmp_path):
    """Importing (reference, mutants, the checks' numpy reference, the engine, the template's warm-up layer),
    loading by path (reference/causal_mha.py, a mutant with its bug undone, harness/warmup/rehearsal.py put right)
    and looking in memory (a child forked from the warm template): each gets no correct layer of ours, in a single
    run and in `grade`'s forked children.  Without a mount namespace and without Landlock the files of reference/
    and mutants/ stay readable by path: docs/threat-model.md says so, and this test then asserts exactly that gap."""
    for name in ("ours_imports", "ours_by_path"):
        run = single_run(world, ROOT / "tests" / "hostile" / f"{name}.py")
        report = json.loads(run.stdout)
        if name == "ours_by_path" and _unfenced(report):
            assert "reference/causal_mha.py by path" in report["student_output"]  # the documented gap
            continue
        _reached_none(report, name)
        shutil.rmtree(world.tmp / "submission")
    subs = tmp_path / "subs"
    for name in OURS:
        (subs / name).mkdir(parents=True)
        (subs / name / "attention.py").write_text(submission_text(ROOT / "tests" / "hostile" / f"{name}.py"))
    out = tmp_path / "graded"
    run = run_cli("grade", str(subs), "--out", str(out), "--format", "json", "--jobs", "1", "--target",
                  "attention.py:MyAttn", "--time-limit", str(TIME_LIMIT), timeout=300, env=world.env())
    assert run.returncode == 0, run.stderr[-2000:]
    for name in OURS:
        report = json.loads((out / f"{name}.json").read_text())
        if name == "ours_by_path" and _unfenced(report):
            continue
        _reached_none(report, name)
    world.assert_untouched()


def _bytecode_decoy(folder: Path) -> None:
    """A folder whose attention.py has a -100 fill (causal-leakage fails) beside a link `__pycache__` to a folder
    holding the correct layer compiled as an unchecked-hash .pyc under that name: Python would load the .pyc, never
    looking at the source, so what is graded would not be what a person reads (red team 5)."""
    folder.mkdir(parents=True)
    store = folder / "pyc_store"
    store.mkdir()
    source = folder.parent / "correct_source.py"
    source.write_text(correct_text())
    py_compile.compile(str(source), cfile=str(store / f"attention.{sys.implementation.cache_tag}.pyc"),
                       dfile="attention.py", invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    source.unlink()
    leaky = correct_text().replace("masked_fill_(mask_bool, -torch.inf)", "masked_fill_(mask_bool, -10000.0)")
    assert "-10000.0" in leaky
    (folder / "attention.py").write_text(leaky)
    os.symlink("pyc_store", folder / "__pycache__")


def test_the_code_graded_is_the_source_handed_in_not_a_bytecode_cache(world, tmp_path):
    """A submission's bytecode cache is never what runs: a `__pycache__` link (to a folder of the submission's
    own) holding an unchecked-hash .pyc of correct code beside a wrong attention.py got full marks, in a single
    run and in `grade`."""
    subs = tmp_path / "subs"
    _bytecode_decoy(subs / "alice")
    single = run_cli(f"{subs}/alice/attention.py:MyAttn", "--format", "json", env=world.env())
    report = json.loads(single.stdout)
    statuses = {c["id"]: c["status"] for c in report["checks"]}
    assert report["passed"] is False and statuses["causal-leakage"] == "fail", statuses
    out = tmp_path / "graded"
    run = run_cli("grade", str(subs), "--out", str(out), "--format", "json", "--jobs", "1", "--target",
                  "attention.py:MyAttn", timeout=300, env=world.env())
    assert run.returncode == 0, run.stderr[-2000:]
    row = next(csv.DictReader(open(out / "summary.csv")))
    assert row["passed"] == "False" and row["causal-leakage"] == "fail", row
    world.assert_untouched()



def _compiled_hand_ins(subs: Path) -> dict[str, str]:
    """Submissions whose code, or part of it, is compiled: a helper handed in only as bytecode beside the
    attention.py that imports it, a native module (a copy of the standard library's xxlimited, loaded from a
    sub-folder of the submission; where the installation has one) beside a layer that is right only when that
    module was loaded from the submission, a stale bytecode file beside a correct source, and bytecode alone.
    Returns each one's compiled file, as the report must name it."""
    compiled = {}
    source = subs.parent / "correct_source.py"
    source.write_text(correct_text())
    (subs / "pyc_helper").mkdir(parents=True)
    py_compile.compile(str(source), cfile=str(subs / "pyc_helper" / "helpers.pyc"), dfile="helpers.py")
    (subs / "pyc_helper" / "attention.py").write_text("import helpers\n\n\nclass MyAttn(helpers.MyAttn):\n"
                                                      "    pass\n")
    compiled["pyc_helper"] = "helpers.pyc"
    native = importlib.util.find_spec("xxlimited")
    if native is not None and native.origin and native.origin.endswith(".so"):
        (subs / "native_helper" / "native").mkdir(parents=True)
        shutil.copy(native.origin, subs / "native_helper" / "native" / os.path.basename(native.origin))
        loaded = ("import os\nfrom native import xxlimited\n"
                  "FILL = -torch.inf if os.path.dirname(os.path.dirname(xxlimited.__file__)) == "
                  "os.path.dirname(os.path.abspath(__file__)) else -100.0\n")
        text = correct_text().replace("masked_fill_(mask_bool, -torch.inf)", "masked_fill_(mask_bool, FILL)")
        text = text.replace("import torch.nn as nn\n", "import torch.nn as nn\n" + loaded, 1)
        assert "FILL)" in text and "from native" in text
        (subs / "native_helper" / "attention.py").write_text(text)
        compiled["native_helper"] = f"native/{os.path.basename(native.origin)}"
    (subs / "stale_pyc").mkdir()
    (subs / "stale_pyc" / "attention.py").write_text(correct_text())
    py_compile.compile(str(source), cfile=str(subs / "stale_pyc" / "attention.pyc"), dfile="attention.py")
    compiled["stale_pyc"] = "attention.pyc"
    (subs / "only_pyc").mkdir()
    py_compile.compile(str(source), cfile=str(subs / "only_pyc" / "attention.pyc"), dfile="attention.py")
    compiled["only_pyc"] = "attention.pyc"
    source.unlink()
    return compiled


def _says_left_out(report: dict, name: str) -> None:
    """The report names the compiled file, says why it was left out, and asks a person to look."""
    assert report["needs_review"] is True, report["adapter"]
    said = report["adapter"].get("review", [])
    assert any(name in line and "compiled" in line for line in said), said


def test_compiled_code_is_never_run_and_the_report_says_what_was_left_out(world, tmp_path):
    """Code with no readable source is never run: a grader cannot read it and a similarity check cannot see it.  A
    helper handed in only as bytecode (or as a native module) made a one-line attention.py pass, in a single run
    and in `grade`; now neither is copied into the child's folder, the import fails with the file named, and every
    report that left compiled code out says which file and why, for a person to look (a correct source beside a
    stale .pyc still passes, and is marked for review)."""
    subs = tmp_path / "subs"
    compiled = _compiled_hand_ins(subs)
    single = run_cli(f"{subs}/pyc_helper/attention.py", "--format", "json", env=world.env())
    report = json.loads(single.stdout)
    assert report["passed"] is False, report["checks"][0]
    construct = report["checks"][0]
    assert construct["status"] == "fail" and "helpers.pyc" in construct["message"], construct["message"]
    _says_left_out(report, "helpers.pyc")
    out = tmp_path / "graded"
    run = run_cli("grade", str(subs), "--out", str(out), "--format", "json", "--jobs", "2", timeout=300,
                  env=world.env())
    assert run.returncode == 0, run.stderr[-2000:]
    rows = {r["submission"]: r for r in csv.DictReader(open(out / "summary.csv"))}
    assert set(rows) == set(compiled), rows
    for name, file in compiled.items():
        report = json.loads((out / f"{name}.json").read_text())
        _says_left_out(report, file)
        assert rows[name]["needs_review"] == "True", rows[name]
        assert rows[name]["passed"] == ("True" if name == "stale_pyc" else "False"), (name, report["checks"][0])
        if name != "stale_pyc":
            assert file in report["checks"][0]["message"], (name, report["checks"][0]["message"])
    text = run_cli(f"{subs}/stale_pyc/attention.py", env=world.env()).stdout  # a student trial: every claim decided,
    assert "attention.pyc" in text and "marked for review: a person should look" in text  # yet it said "some claims
    assert "could not be decided" not in text, text  # could not be decided"
    world.assert_untouched()


@pytest.mark.slow
@pytest.mark.parametrize("path", FORGEABLE, ids=[p.stem for p in FORGEABLE])
def test_forgeable_evidence(path, world):
    """The documented gap (docs/threat-model.md): checks that judge what the child reports about itself can be
    fooled by a submission that patches mha-check's worker in its own process.  The same code without the forgery
    fails; with it, it passes."""
    honest = world.tmp / "honest.py"
    honest.write_text(path.read_text().replace('_worker = sys.modules.get("harness.child.worker")', "_worker = None"))
    caught = json.loads(run_cli(f"{honest}:MyAttn", "--format", "json", env=world.env()).stdout)
    assert caught["passed"] is False
    forged = json.loads(run_cli(f"{path}:MyAttn", "--format", "json", env=world.env()).stdout)
    assert forged["passed"] is True, [(c["id"], c["status"]) for c in forged["checks"] if c["status"] != "pass"]
    world.assert_untouched()


def test_isolation_is_reported(tmp_path):
    """Every report says what confined the child: in JSON (measured inside it); in text one line when it was less
    than the full policy (the normal case, full isolation, is not repeated on every student's screen)."""
    run = run_cli(f"{ROOT}/examples/correct_attention.py", "--format", "json", "--only", "construct")
    report = json.loads(run.stdout)
    isolation = report["isolation"]
    protections = " ".join(report["adapter"]["protections"])
    for word in ("separate process", "CPU", "address space", "no core dumps", "throwaway working directory"):
        assert word in protections
    assert isolation["summary"] and isolation["limits_hard_equals_soft"] and isolation["no_new_privs"]
    assert isolation["capabilities_dropped"] and isolation["submission_copy"]["copied_files"] >= 1
    if os.geteuid() == 0:  # CI: the slot's own uid, and (with namespaces) nothing but the view
        assert isolation["uid"] >= 61000 and not isolation["groups"]
        if isolation["namespaces"]:
            assert {"pid", "net", "mount"} <= set(isolation["namespaces"]) and isolation["read_only_root"]
            assert isolation["network_interfaces"] == ["lo"] and isolation["pid_in_namespace"] == 2
    text = run_cli(f"{ROOT}/examples/correct_attention.py", "--only", "construct").stdout
    assert ("isolation: " + isolation["summary"].split(":")[0] in text) is not isolation["full_policy"]


def _grade(world: World, subs: Path, *extra, timeout, limit=TIME_LIMIT):
    return run_cli("grade", str(subs), "--out", str(world.out), "--format", "gradescope", "--time-limit",
                   str(limit), "--memory-mb", "1500", "--jobs", "2", *extra, timeout=timeout, env=world.env())


def _batch(tmp_path: Path, hostile: list[Path], strange_files: bool):
    """Submissions: the hostile ones (each told where the world is), two correct classmates, and, with
    `strange_files`, folders whose attention.py is a FIFO, a symlink to /dev/zero, 3 MB, or deeply nested."""
    subs = tmp_path / "subs"
    classmates = [subs / "classmate_a", subs / "classmate_b"]
    out = tmp_path / "out"
    for folder in classmates:
        folder.mkdir(parents=True)
        (folder / "attention.py").write_text(correct_text())
    world = World(tmp_path, classmates, out)
    for path in hostile:
        folder = subs / path.stem
        folder.mkdir()
        (folder / "attention.py").write_text(submission_text(path))
        (folder / "context.json").write_text(json.dumps(world.context(reports=["classmate_a.results.json",
                                                                                "summary.csv"])))
    if strange_files:
        for name in ("fifo", "dev_zero", "huge", "nested", "rot13", "big_notebook"):
            (subs / name).mkdir()
        (subs / "rot13" / "attention.py").write_text("# coding: rot13\n")  # tokenize raises LookupError
        (subs / "big_notebook" / "lab.ipynb").write_bytes(b"[" + b"{}," * (10 << 20) + b"{}]")  # parsed: 900 MB
        os.mkfifo(subs / "fifo" / "attention.py")
        os.symlink("/dev/zero", subs / "dev_zero" / "attention.py")
        (subs / "huge" / "attention.py").write_text("import torch.nn as nn\nclass A(nn.Module):\n    pass\n"
                                                    + "#" * (3 << 20) + "\n")
        (subs / "nested" / "attention.py").write_text("import torch.nn as nn\nx = " + "(" * 100000 + "1" +
                                                      ")" * 100000 + "\nclass A(nn.Module):\n    pass\n")
    return subs, world


def _check_batch(run, world: World, hostile: list[Path], strange_files: bool, started: float):
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Traceback" not in run.stderr
    rows = {r["submission"]: r for r in csv.DictReader(open(world.out / "summary.csv"))}
    assert {"classmate_a", "classmate_b"} | {p.stem for p in hostile} <= set(rows)
    for name in ("classmate_a", "classmate_b"):  # nothing a classmate did reached them
        assert rows[name]["passed"] == "True", rows[name]
    assert [p.stem for p in hostile if rows[p.stem]["passed"] != "False"] == []
    for path in hostile:
        if path in ATTACKS:
            assert rows[path.stem]["reference-match"] == "fail", rows[path.stem]
    if strange_files:  # never read by the grader: no single file defines an nn.Module class
        for name in ("fifo", "dev_zero", "huge"):
            assert rows[name]["target"] == "" and rows[name]["passed"] == "False", rows[name]
        assert rows["nested"]["passed"] == rows["rot13"]["passed"] == rows["big_notebook"]["passed"] == "False"
    expected = {f"{name}.results.json" for name in rows} | {"summary.csv", "class-report.html", "class-mistakes.csv",
                                                            "mha-check-seed"}  # the batch's drawn seed, for staff
    assert {p.name for p in world.out.iterdir()} - {"class-exercises"} == expected  # no forged report
    for name in rows:
        json.loads((world.out / f"{name}.results.json").read_text())  # valid Gradescope JSON for every one
    assert survivors() == []
    world.assert_untouched()
    print(f"graded {len(rows)} submissions in {time.monotonic() - started:.1f} s")


def test_grade_batch_walls_hold(tmp_path):
    """The attacks on what surrounds a submission in `grade`: classmates' files, the output folder, siblings running
    at the same time (--jobs 2), mha-check's files, the installation, /proc, the network, and files the grader
    itself would have to read to find the target (no --target)."""
    hostile = [p for p in ATTACKS if p.stem in ("classmates", "output_folder", "siblings", "tool_files",
                                                "pth_planting", "proc_parent", "network", "grader_environment")]
    subs, world = _batch(tmp_path, hostile, strange_files=True)
    try:
        started = time.monotonic()
        run = _grade(world, subs, timeout=len(hostile) * (TIME_LIMIT + 10) + 120)
        _check_batch(run, world, hostile, True, started)
    finally:
        world.close()


@pytest.mark.slow
@pytest.mark.parametrize("hangs", [False, True], ids=["attacks", "hangs"])
def test_grade_batch_survives_every_hostile_submission(tmp_path, hangs):
    """Every hostile submission in a batch with two correct classmates.  Those that hang end only at the time limit,
    so they make a batch of their own, beside the rest: its limit is still the one a correct classmate needs on a
    loaded machine (HANG_LIMIT's 2 s gave the classmates beside them "time", cannot tell, in every loaded run)."""
    hostile = [p for p in HOSTILE if (p.stem in HANGS) == hangs]
    subs, world = _batch(tmp_path, hostile, strange_files=False)
    try:
        started = time.monotonic()
        run = _grade(world, subs, "--target", "attention.py:MyAttn", timeout=len(hostile) * (TIME_LIMIT + 10) + 60)
        _check_batch(run, world, hostile, False, started)
        if hangs:
            rows = {r["submission"]: r for r in csv.DictReader(open(world.out / "summary.csv"))}
            assert all("time" in rows[p.stem]["process"] for p in hostile), rows
    finally:
        world.close()


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="plays a root grader")
def test_grade_as_root_without_a_privilege_drop_refuses_to_start(tmp_path):
    """A root that cannot change uid (its bounding set lacks CAP_SETUID/CAP_SETGID, as in a locked-down
    container) must not grade submissions as root, unless told so; then every report says how it ran."""
    subs = tmp_path / "subs" / "student"
    subs.mkdir(parents=True)
    (subs / "attention.py").write_text(correct_text())
    no_setuid = ["setpriv", "--inh-caps=-all", "--bounding-set=-setuid,-setgid", "--", sys.executable, "-m",
                 "harness.frontends.cli", "grade", str(subs.parent), "--out", str(tmp_path / "out"), "--jobs", "1"]
    env = dict(os.environ, TMPDIR=str(tmp_path))
    refused = subprocess.run(no_setuid, capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "--allow-unconfined" in refused.stderr and "unprivileged uid" in refused.stderr
    assert not (tmp_path / "out").exists()
    allowed = subprocess.run(no_setuid + ["--allow-unconfined"], capture_output=True, text=True, timeout=300,
                             cwd=ROOT, env=env)
    assert allowed.returncode == 0, allowed.stderr[-2000:]
    report = json.loads((tmp_path / "out" / "student.json").read_text())
    assert report["passed"] is True and report["isolation"]["uid"] == 0
    assert "ROOT" in report["isolation"]["summary"] and report["isolation"]["capabilities_dropped"]
    single = subprocess.run(no_setuid[:7] + [f"{subs}/attention.py:MyAttn", "--format", "json"], capture_output=True,
                            text=True, timeout=300, cwd=ROOT, env=env)  # a single run: as root, and says so
    report = json.loads(single.stdout)
    assert report["passed"] is True and report["isolation"]["uid"] == 0 and "ROOT" in report["isolation"]["summary"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "subs"]  # no scratch left behind


def _raw_controls(text: str) -> list[str]:
    """Characters a terminal would obey: C0 but newline and tab, DEL, C1."""
    return sorted({repr(ch) for ch in text if (ord(ch) < 32 and ch not in "\n\t") or 0x7F <= ord(ch) < 0xA0})


def test_control_sequences_are_shown_never_obeyed(tmp_path):
    """Escape sequences in what the code prints, in its exception message and in a parameter name reach a text
    report as visible escapes: a single run (verbose, with the code's output) and the batch's text reports."""
    path = ROOT / "tests" / "hostile" / "escape_sequences.py"
    run = run_cli(f"{path}:MyAttn", "--show-output", "--verbose")
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert _raw_controls(run.stdout) == [] and "\\x1b[2J" in run.stdout and "\\x9b31m" in run.stdout
    assert "--- what your code printed ---" in run.stdout
    subs = tmp_path / "subs" / "student"
    subs.mkdir(parents=True)
    (subs / "attention.py").write_text(path.read_text())
    batch = run_cli("grade", str(subs.parent), "--out", str(tmp_path / "out"), "--format", "text", "--jobs", "1")
    text = (tmp_path / "out" / "student.txt").read_text()
    assert batch.returncode == 0 and _raw_controls(text) == [] and "\\x1b[2J" in text


def test_a_hidden_check_never_shows_in_what_students_see(tmp_path):
    """The rubric hides causal-leakage; the submission's only mistake (a fill of -1e4: outputs right to every
    digit, in float32 too; a fill of -100 is seen by reference-match's float32 probe at its wide heads since red
    team 9) is one that check alone reveals.  Nothing a student sees on Gradescope (the summary, the tests that are
    not hidden) names the check, what it found or the mistake; the hidden test itself is there, marked hidden."""
    subs = tmp_path / "subs" / "student"
    subs.mkdir(parents=True)
    leaky = correct_text().replace("masked_fill_(mask_bool, -torch.inf)", "masked_fill_(mask_bool, -10000.0)")
    assert "-10000.0" in leaky
    (subs / "attention.py").write_text(leaky)
    rubric = tmp_path / "rubric.toml"
    rubric.write_text('target = "attention.py:MyAttn"\n[checks.causal-leakage]\nhidden = true\n')
    out = tmp_path / "out"
    run = run_cli("grade", str(subs.parent), "--out", str(out), "--format", "gradescope", "--rubric", str(rubric),
                  "--jobs", "1")
    assert run.returncode == 0, run.stderr[-2000:]
    results = json.loads((out / "student.results.json").read_text())
    hidden = [t for t in results["tests"] if t["visibility"] == "hidden"]
    assert [t["name"].split()[0] for t in hidden] == ["causal-leakage", "mask-fill"] and hidden[0]["status"] == "failed"
    visible = results["output"] + " ".join(t["name"] + t["output"] for t in results["tests"] if t not in hidden)
    for word in ("causal-leakage", "leak", "future", "-10000", "-1e4", "-inf", "such as -10", "masked scores", "gpt-2"):
        assert word not in visible.lower(), word
    single = run_cli(f"{subs}/attention.py:MyAttn", "--format", "gradescope", "--rubric", str(rubric))
    assert json.loads(single.stdout)["output"] == results["output"]
    (tmp_path / "right").mkdir()  # what a student sees is as if the hidden check had passed: mask-fill, which needs
    (tmp_path / "right" / "attention.py").write_text(correct_text())  # causal-leakage, was visible and skipped
    # ("needs a check not shown yet, which did not pass", 0 points), where a correct layer's passed (red team 5)
    passing = json.loads(run_cli(f"{tmp_path}/right/attention.py:MyAttn", "--format", "gradescope", "--rubric",
                                 str(rubric)).stdout)

    def seen(tests):
        return [(t["name"], t["status"], t["score"], t["output"]) for t in tests if t["visibility"] == "visible"]

    assert seen(results["tests"]) == seen(passing["tests"])


@pytest.mark.parametrize("name", ["printed_count", "hangs_when_told"])
def test_what_the_code_does_tells_no_hidden_check(tmp_path, name):
    """Red team 13: the feedback a student is handed (`grade --feedback`) said how many characters the code printed,
    and the code runs once more for every check that runs: mask-fill only where causal-leakage passed.  A layer that
    prints at every forward read 284 characters with its right -inf fill, 225 with -1e4, which only the hidden
    causal-leakage tells apart: its result, told by a length.  What the code printed is not in a student's view
    where the rubric hides a check (the staff's reports keep it).  And a layer that sleeps at a forward only a leak's
    search asks for (hangs_when_told.py) had its feedback "marked for review" (the hidden check: cannot tell): a
    student's view is marked for review by its shown checks alone."""
    hostile = (ROOT / "tests" / "hostile" / "hidden" / f"{name}.py").read_text()
    subs = tmp_path / "subs"
    for student, fill in (("right", 'float("-inf")'), ("leaky", "-10000.0")):
        (subs / student).mkdir(parents=True)
        (subs / student / "attention.py").write_text(hostile.replace('FILL = float("-inf")', f"FILL = {fill}"))
    rubric = tmp_path / "rubric.toml"
    rubric.write_text('target = "attention.py:MyAttn"\n[checks.causal-leakage]\nhidden = true\n')
    out = tmp_path / "out"
    run = run_cli("grade", str(subs), "--out", str(out), "--rubric", str(rubric), "--feedback", "--jobs", "1",
                  "--time-limit", "15")
    assert run.returncode == 0, run.stderr[-2000:]
    reports = {n: json.loads((out / f"{n}.json").read_text()) for n in ("right", "leaky")}
    assert [r["passed"] for r in reports.values()] == [True, False]  # the staff's view: causal-leakage tells them
    if name == "printed_count":
        printed = {n: len(r["student_output"]) for n, r in reports.items()}
        assert printed["right"] != printed["leaky"], printed  # the code saw the difference
    else:
        assert [r["needs_review"] for r in reports.values()] == [False, True]

    def seen(student):  # the isolation block names the slot's uid, which is no part of the grade
        text = (out / "feedback" / f"{student}.txt").read_text()
        return re.sub(r"(?m)^isolation:.*(\n  .*)*$", "isolation", text)

    assert seen("right") == seen("leaky"), (seen("right"), seen("leaky"))


def test_a_shown_check_never_runs_after_a_hidden_one(tmp_path):
    """Red team 13: a probe handed in once on Gradescope, with causal-leakage hidden, raised at its first float32
    forward (reference-match's, a shown check) with the number of forwards it had been asked for: 229 for a right
    fill, 309 for -1e4, the 80 more being causal-leakage's look at the leak it found.  The hidden check's result, in
    a shown check's message.  The rubric's hidden checks run after every shown one, so nothing a shown check finds
    can follow from what a hidden one found or asked."""
    hostile = (ROOT / "tests" / "hostile" / "hidden" / "forwards_told.py").read_text()
    rubric = tmp_path / "rubric.toml"
    rubric.write_text('target = "attention.py:MyAttn"\n[checks.causal-leakage]\nhidden = true\n')
    seen = {}
    for name, fill in (("right", 'float("-inf")'), ("leaky", "-10000.0")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "attention.py").write_text(hostile.replace('FILL = float("-inf")', f"FILL = {fill}"))
        run = run_cli(f"{tmp_path}/{name}/attention.py:MyAttn", "--format", "gradescope", "--rubric", str(rubric),
                      "--seed", "5")  # the probes' sizes are drawn from the seed, and the message says them
        results = json.loads(run.stdout)
        hidden = {t["name"].split()[0]: t["status"] for t in results["tests"] if t["visibility"] != "visible"}
        assert hidden["causal-leakage"] == ("passed" if name == "right" else "failed"), hidden
        seen[name] = [(t["name"], t["status"], t["score"], t["output"]) for t in results["tests"]
                      if t["visibility"] == "visible"], results["output"]
    told = [t for t in seen["right"][0] if "forwards" in t[3]]
    assert told and told[0][0].startswith("reference-match"), seen["right"]  # the probe did speak
    assert seen["right"] == seen["leaky"], [a for a, b in zip(seen["right"][0], seen["leaky"][0]) if a != b]

"""Behaviour kept: every report on the zoos, the real-code zoo, the mutants, the broken targets and the hostile
submissions, field by field, against the snapshot in tests/e2e/golden/behaviour/.

A refactoring must leave each of these reports as it was: every check's status, message, configuration, figures,
fix and details, the adapter's story, the diagnosis and what the code printed.  Left out, because they are not
behaviour of the code under test: the isolation block (this machine's uids, mounts and paths), and the check's
claim and explanation (its declaration, shown verbatim by the catalogue and the tables of docs/checks.md).  Paths and
uids inside messages are written as placeholders.

After a deliberate change of behaviour, regenerate the snapshot and read its diff (`git diff --stat` shows which
targets changed, `git diff` how): MHA_UPDATE_GOLDEN=1 pytest tests/e2e/test_behaviour.py, or `bash .ci/regenerate`,
which regenerates everything derived.
"""
from __future__ import annotations

import json
import math
import os
import re

import pytest

from conftest import REALZOO, ROOT, ZOO, zoo_constants
from harness.frontends import catalogue
from harness.sandbox.limits import Limits

pytestmark = pytest.mark.slow
SNAPSHOT = ROOT / "tests" / "e2e" / "golden" / "behaviour"
HANGS = ("sleep_forever", "loop_in_forward", "loop_at_import", "stops_reading", "stops_itself")  # they end only at
# the time limit:
HANG_LIMITS = Limits(call_seconds=4, total_seconds=8)  # a short one will do (the others keep the default, as a
# loaded machine may need it)
MEMORY_HOGS = ("memory_bomb", "processes_memory")  # they end at the memory stop, whose watch a machine at a load of
# 13 to 15 starved past the default 30 s a request: stopped by time, their snapshots differed (every helper saw it)
MEMORY_LIMITS = Limits(call_seconds=120, total_seconds=240)


def _zoo(folder, group: str) -> dict[str, str]:
    return {f"{group}/{p.stem}": f"{p}:{zoo_constants(p)['TARGET']}" for p in sorted(folder.glob("[a-z]*.py"))}


def _plain(folder, group: str) -> dict[str, str]:
    return {f"{group}/{p.stem}": str(p) for p in sorted(folder.glob("[a-z]*.py"))}


TARGETS: dict[str, tuple[str, dict]] = {
    **{k: (t, {}) for k, t in _zoo(ZOO / "correct", "zoo-correct").items()},
    **{k: (t, {}) for k, t in _zoo(ZOO / "buggy", "zoo-buggy").items()},
    **{k: (t, {}) for k, t in _zoo(ZOO / "ours", "zoo-ours").items()},
    **{k: (t, {}) for k, t in _zoo(REALZOO, "realzoo").items()},
    "reference/CausalMHA": (f"{ROOT / 'reference' / 'causal_mha.py'}:CausalMHA", {}),
    **{f"mutants/{m}": (t, {}) for m, t in sorted(catalogue.mutant_targets().items())},
    **{k: (t, {}) for k, t in _plain(ROOT / "tests" / "bad", "bad").items()},
    **{k: (t, {"limits": HANG_LIMITS} if k.partition("/")[2] in HANGS else
               {"limits": MEMORY_LIMITS} if k.partition("/")[2] in MEMORY_HOGS else {})
       for k, t in _plain(ROOT / "tests" / "hostile", "hostile").items()},
}


@pytest.fixture(scope="module", autouse=True)
def _want(reports):
    for options in ({}, {"limits": HANG_LIMITS}, {"limits": MEMORY_LIMITS}):
        reports.want([t for t, o in TARGETS.values() if o == options], **options)


_SCRATCH = re.compile(r"/tmp/mha-check-[A-Za-z0-9_]+(/scratch)?")
_SURROGATE = re.compile("[\ud800-\udfff]")
_UID = re.compile(r"\b6\d{4}\b")  # a slot's uid (61000 + slot)
_LIBRARIES = re.compile(r"address space \d+ MB")  # the memory budget plus this installation's torch libraries
_TOGETHER = re.compile(r"took \d+ MB together")  # the memory of a child's processes when it was measured
_ONE_MAY = re.compile(r"what one may \(\d+ MB\)")  # the memory budget plus this installation's torch libraries
_PROCESS = re.compile(r"\bprocess \d+ of your code")  # a child's process id (hostile/many_mappings)


def normal(value):
    """`value` with what differs between machines and runs written as placeholders."""
    if isinstance(value, str):
        value = _LIBRARIES.sub("address space <n> MB", value.replace(str(ROOT), "<root>"))
        value = _ONE_MAY.sub("what one may (<n> MB)", _TOGETHER.sub("took <n> MB together", value))
        value = _PROCESS.sub("process <pid> of your code", value)
        return _UID.sub("<uid>", _SCRATCH.sub("<scratch>", value))
    if isinstance(value, dict):
        return {k: normal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normal(v) for v in value]
    return value


AT_THE_LIMIT = ("stops_itself",)  # stopped at every forward, it has spent its time in all when its last fresh
# process starts: whether the time runs out while that process imports the file or builds the layer is a matter of
# milliseconds (the child's clock pauses while the parent works, red team 16), and so is whether its class was read


def _time_spent(data: dict) -> dict:
    """A snapshot without what depends on where the time in all ran out: the time limit's words, the class read."""
    data = json.loads(json.dumps(data))
    data["adapter"].pop("class", None)
    data["adapter"].pop("construction", None)
    for item in data["adapter"].get("process", []) + data["checks"]:
        if str(item.get("message", "")).startswith("time limit: "):
            item["message"] = "time limit: <where the time in all ran out>"
    return data


def snapshot(report) -> dict:
    data = report.to_dict()
    data.pop("isolation", None)
    for check in data["checks"]:
        check.pop("claim", None)
        check.pop("explanation", None)
    return normal(json.loads(json.dumps(data, default=str)))


FIGURES_RTOL = 1e-12  # a figure's last digits (a float64 maximum of differences) move with numpy's build, its
# vectorised loops summing in another order (0.5276481116049911 in a snapshot, 0.5276481116049913 under numpy 2.4.6).  A
# change of our code moves a figure far more than 1e-12 relative, and every verdict and message is still exact.


def differences(old, new, path="") -> list[str]:
    """Every field that differs, by its path in the report (`checks[3].message`)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [d for k in sorted(set(old) | set(new), key=str)
                for d in differences(old.get(k, "<absent>"), new.get(k, "<absent>"), f"{path}.{k}" if path else k)]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [d for i, (o, n) in enumerate(zip(old, new)) for d in differences(o, n, f"{path}[{i}]")]
    if old == new or (isinstance(old, float) and isinstance(new, float) and math.isnan(old) and math.isnan(new)):
        return []
    if isinstance(old, float) and isinstance(new, float) and math.isclose(old, new, rel_tol=FIGURES_RTOL):
        return []
    return [f"{path}: {str(old)[:300]!r} -> {str(new)[:300]!r}"]


def golden_path(name: str):
    return SNAPSHOT / (name.replace("/", "__") + ".json")


def test_every_snapshot_belongs_to_a_target():
    """A target removed or renamed leaves no stale snapshot behind."""
    kept = {golden_path(name).name for name in TARGETS}
    stale = sorted(p.name for p in SNAPSHOT.glob("*.json") if p.name not in kept)
    if stale and os.environ.get("MHA_UPDATE_GOLDEN"):
        for name in stale:
            (SNAPSHOT / name).unlink()
        stale = []
    assert stale == []


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_report_is_as_recorded(name, reports):
    target, options = TARGETS[name]
    got = snapshot(reports(target, **options))
    path = golden_path(name)
    if os.environ.get("MHA_UPDATE_GOLDEN") or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(got, indent=1, sort_keys=True, ensure_ascii=False)
        # a lone surrogate (a hostile exception message) as JSON's escape: UTF-8 cannot hold it, and json reads it back
        path.write_text(_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n")
        if not os.environ.get("MHA_UPDATE_GOLDEN"):
            pytest.fail(f"no snapshot for {name}: written now, commit it after reading it")
        return
    recorded = normal(json.loads(path.read_text()))
    if name.partition("/")[2] in AT_THE_LIMIT:
        recorded, got = _time_spent(recorded), _time_spent(got)
    assert differences(recorded, got) == []

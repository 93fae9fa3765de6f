"""Golden tests of the text report a student reads: the order (verdict, root cause, the checks it explains, the
other checks), 80 columns in every mode (a terminal's width when wider), and a line pointer that names the right
file and line.

The goldens (tests/e2e/golden/*.txt) hold the report's skeleton, not the whole page: every line that carries the
structure, with the figures a check measured left out, so that a change of the shrunk configuration or of a
largest difference does not break them, while a change of order, of a heading or of the pointer does.  After a
deliberate change of the report: MHA_UPDATE_GOLDEN=1 pytest tests/e2e/test_report_text.py, and read the diff.
"""
from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys

import pytest

import mutants
from checks import all_checks
from conftest import ROOT
from harness.engine.records import Isolation
from harness.render import text, view

pytestmark = pytest.mark.usefixtures("warm_single_runs")  # see conftest

GOLDEN = ROOT / "tests" / "e2e" / "golden"
CHECK_IDS = {c.id for c in all_checks()}
LABEL = re.compile(r"^(\s+)(PASS|FAIL|CAN'T TELL|SKIP|N/A)\s+(\S.*?)\s*$")
FIELD = re.compile(r"^  ([a-z][a-z ]*):\s+(.*)$")
KEPT_FIELDS = ("where", "you wrote", "fix", "see also")  # the pointer and the fix: compared word for word


def mutant(name: str) -> str:
    return f"{ROOT / 'mutants' / name}.py:CausalMHA"


# three mutants (identified by numbers with a pointer; by numbers with a pointer elsewhere; by their symptoms,
# with checks that cannot be decided) and one correct class
CASES = {"split-view-order": mutant("split_view_order"), "no-mask": mutant("no_mask"),
         "unused-projection": mutant("unused_projection"),
         "correct": f"{ROOT / 'examples' / 'correct_attention.py'}:MultiHeadAttention"}


@pytest.fixture(scope="module", autouse=True)
def _want(reports):
    reports.want([CASES[case] for case in sorted(CASES)])


def page(reports, case: str, **options) -> str:
    return text.render(view.build(reports(CASES[case])), **options).replace(f"{ROOT}/", "")


def skeleton(report_text: str) -> str:
    """The lines that carry the structure: headings, verdict, root cause, the pointer and the fix, each check's
    status and id (a grouped line with all its ids); a check's own words and figures, and wrapped continuations,
    are left out."""
    out, group = [], None
    for line in report_text.splitlines():
        status, field = LABEL.match(line), FIELD.match(line)
        if group is not None and line.startswith(" " * 13) and all(
                tok in CHECK_IDS for tok in line.strip().rstrip(",").split(", ")):
            group.append(line.strip())  # the ids of a grouped line, wrapped
            continue
        if group:
            out[-1] += " " + " ".join(group)
        group = None
        if status:
            indent, label, rest = status.groups()
            ids = rest.split("  ")[0] if len(indent) == 4 else rest
            if all(tok in CHECK_IDS for tok in ids.rstrip(",").split(", ")):
                out.append(f"{indent}{label} {ids}".rstrip())
                group = []
            else:
                out.append(f"{indent}{label} {rest.split()[0]}")
        elif field:
            name, value = field.groups()
            out.append(f"  {name}: {value}" if name in KEPT_FIELDS else f"  {name}:")
        elif line.startswith("isolation: "):
            out.append("isolation:")  # what confined the child depends on the machine (bwrap or built-in, its uid)
        elif not line.startswith(" "):
            out.append(line)  # headings, verdict, root cause, summary, "built as", the mapping sentence
        elif line.startswith("  it makes ") or line.startswith("  mha-check "):
            out.append(line)
    if group:
        out[-1] += " " + " ".join(group)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("case", sorted(CASES))
def test_skeleton_matches_the_golden(reports, case):
    got = skeleton(page(reports, case))
    golden = GOLDEN / f"report-{case}.txt"
    if os.environ.get("MHA_UPDATE_GOLDEN"):
        golden.write_text(got)
    assert got == golden.read_text(), f"{case}: the report's structure changed (see the module docstring)"


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("mode", [{}, {"verbose": True}, {"quiet": True}, {"colour": True}],
                         ids=["default", "verbose", "quiet", "colour"])
def test_every_line_fits_80_columns(reports, case, mode):
    lines = re.sub(r"\033\[[0-9;]*m", "", page(reports, case, **mode)).splitlines()
    assert max(map(len, lines)) <= 80, [ln for ln in lines if len(ln) > 80]


class _Tty:
    def __init__(self, tty: bool):
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize("tty, columns, want", [(False, 200, 80), (True, 60, 80), (True, 100, 100),
                                                (True, 300, 120)])
def test_the_width_follows_a_terminal_wider_than_80(monkeypatch, tty, columns, want):
    monkeypatch.setenv("COLUMNS", str(columns))
    assert text.terminal_width(_Tty(tty)) == want


def test_a_wider_terminal_gets_longer_lines(reports):
    wide = page(reports, "no-mask", cols=120).splitlines()
    assert max(map(len, wide)) <= 120 and max(map(len, wide)) > 80
    assert len(wide) < len(page(reports, "no-mask").splitlines())


@pytest.mark.parametrize("case", ["split-view-order", "no-mask", "unused-projection"])
def test_order_verdict_root_cause_then_checks(reports, case):
    lines = page(reports, case).splitlines()
    report = reports(CASES[case])
    root = lines.index(next(ln for ln in lines if ln.startswith("Root cause: ")))
    explains = lines.index(next(ln for ln in lines if ln.startswith("  it makes ")))
    math = lines.index("The math")
    assert lines[1].startswith("FAIL: ") and 1 < root < explains < math
    failing = [c.id for c in report.checks if c.status == "fail"]
    listed = [ln.split()[1] for ln in lines[explains + 1:math] if ln.startswith("    FAIL ")]
    assert sorted(listed) == sorted(failing) and listed[0] == mutants.catalogue()[case]["killed_by"][0]
    assert all(f"FAIL       {cid}" not in "\n".join(lines[math:]) for cid in listed)  # said once, under the cause
    assert not any(w in "\n".join(lines) for w in ("←", "<-", "proven", "view-bhnd", "wq "))


@pytest.mark.parametrize("case, bug_file", [("split-view-order", "split_view_order"), ("no-mask", "no_mask")])
def test_pointer_names_the_buggy_line(reports, case, bug_file):
    source = (ROOT / "mutants" / f"{bug_file}.py").read_text().splitlines()
    number = next(i for i, line in enumerate(source, 1) if "# BUG" in line)
    lines = page(reports, case).splitlines()
    assert f"  where:        mutants/{bug_file}.py:{number}" in lines
    wrote = next(i for i, ln in enumerate(lines) if ln.startswith("  you wrote:"))
    shown = " ".join([lines[wrote][len("  you wrote:"):]] + [ln for ln in lines[wrote + 1:] if ln.startswith(" " * 16)
                                                              and not FIELD.match(ln)][:2])
    assert " ".join(source[number - 1].split()) in " ".join(shown.split())


def test_shipped_buggy_example_points_at_the_students_path():
    """As a student runs it: the file as typed, its line 30, the line as written, and both next commands."""
    run = subprocess.run([sys.executable, "-m", "harness.frontends.cli", "examples/buggy_attention.py"],
                         capture_output=True, text=True, cwd=ROOT, timeout=180,
                         env={k: v for k, v in os.environ.items() if k != "NO_COLOR"})
    assert run.returncode == 1, run.stderr
    lines = run.stdout.splitlines()
    assert "\033[" not in run.stdout  # not a terminal: no colour
    assert "  where:        examples/buggy_attention.py:30" in lines
    wrote = next(i for i, ln in enumerate(lines) if ln.startswith("  you wrote:"))
    assert " ".join(" ".join(lines[wrote:wrote + 2]).split()) == \
        "you wrote: queries = queries.view(b, self.num_heads, num_tokens, self.head_dim)"
    assert any(ln.startswith("                mha-check trace examples/buggy_attention.py: every step") for ln in lines)
    assert lines.index("  where:        examples/buggy_attention.py:30") < 20  # the root cause, first screen
    assert max(map(len, lines)) <= 80 and len(lines) <= 44  # 19 checks now (kv-cache, mask-fill): two lines more;
    # and kv-cache's N/A apart from the passes: one more; and where the root cause's failing checks are cut to a line,
    # that -v shows each whole (a student's trial found them cut with no word of where the rest is): one more


def test_correct_class_lists_what_was_verified(reports):
    lines = page(reports, "correct").splitlines()
    assert lines[1] == "PASS: the math is correct and every lesson rule is followed"
    assert not any(ln.startswith("Root cause") for ln in lines)
    for c in all_checks():  # each check on its own line, with its claim, or why it does not apply (no KV cache)
        row = next(ln for ln in lines if LABEL.match(ln) and LABEL.match(ln).group(3).split()[0] == c.id)
        shown = " ".join(" ".join(lines[lines.index(row):][:4]).split())
        said = "does not apply" if c.id == "kv-cache" else " ".join(c.claim.split())[:30]
        assert said in shown, (c.id, shown)
        assert LABEL.match(row).group(2) == ("N/A" if c.id == "kv-cache" else "PASS"), row  # nothing to judge: apart
    assert "18 passed, 0 failed, 1 does not apply" in lines


def test_colour_only_paints_the_labels(reports):
    plain, painted = page(reports, "no-mask"), page(reports, "no-mask", colour=True)
    assert "\033[31mFAIL\033[0m" in painted and "\033[32mPASS\033[0m" in painted
    assert re.sub(r"\033\[[0-9;]*m", "", painted) == plain


def test_no_color_and_dumb_terminals_get_no_colour(monkeypatch):
    from harness.frontends import single_report as cli

    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert cli._colour("text", None)
    monkeypatch.setenv("NO_COLOR", "1")
    assert not cli._colour("text", None)
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("TERM", "dumb")
    assert not cli._colour("text", None) and not cli._colour("json", None)


def test_isolation_is_shown_only_when_weaker_than_the_policy(reports):
    """Full isolation is the normal case: the JSON says it, the student's screen does not; less than the policy (or
    a report that does not say) is shown, with what was missing."""
    report = copy.deepcopy(reports(CASES["correct"]))
    record = {"summary": "bubblewrap: uid 61000, no capabilities", "full_policy": True, "short_of_policy": []}
    report.isolation = Isolation.from_dict(record)
    assert "isolation:" not in text.render(view.build(report))
    assert json.loads(report.to_json())["isolation"]["summary"] == record["summary"]
    for weaker in ({"full_policy": False, "short_of_policy": ["no net namespace"],
                    "summary": "built-in: uid 61000; NO namespaces"}, {"summary": "an old report's line"}):
        report.isolation = Isolation.from_dict(weaker)
        assert "isolation: " + weaker["summary"] in text.render(view.build(report))


@pytest.mark.parametrize("case", ["split-view-order", "no-mask"])
def test_the_verdict_and_the_root_cause_with_its_line_are_on_the_first_screen(reports, case):
    """An 80x30 terminal shows the first 20 lines of a report whole (the prompt takes some): the verdict, the root
    cause and the line it is on must be among them."""
    first = page(reports, case).splitlines()[:20]
    assert first[1].startswith("FAIL: ")
    assert any(ln.startswith("Root cause: ") for ln in first)
    assert any(re.match(r"  where: +mutants/\w+\.py:\d+$", ln) for ln in first)


def _student_run(path, *args) -> list[str]:
    run = subprocess.run([sys.executable, "-m", "harness.frontends.cli", str(path), *args], capture_output=True,
                         text=True, cwd=ROOT, timeout=180)
    assert run.returncode == 1, run.stderr
    return run.stdout.splitlines()


def test_a_typo_is_headlined_as_the_crash_with_the_name_meant(tmp_path):
    """A misspelt attribute in forward: the verdict is the exception, its line and the name meant, not "a bug in the
    math"; the fix is about the name, not about tracing shapes."""
    source = (ROOT / "examples" / "correct_attention.py").read_text()
    typo = tmp_path / "typo.py"
    typo.write_text(source.replace("self.W_query(x)", "self.W_qeury(x)", 1))
    number = next(i for i, ln in enumerate(typo.read_text().splitlines(), 1) if "W_qeury" in ln)
    lines = _student_run(typo)
    head = " ".join(" ".join(lines[1:5]).split())
    assert head.startswith(f"FAIL: your code raised AttributeError at {typo}:{number}: 'MultiHeadAttention' object "
                           "has no attribute 'W_qeury'; did you mean 'W_query'?"), head
    shown = " ".join(" ".join(lines).split())
    assert "bug in the math" not in shown and "mha-check trace" not in shown and "shapes" not in shown
    assert "fix: Use `W_query`, not `W_qeury`" in shown


def test_a_hang_at_import_is_headlined_as_a_hang_at_import(tmp_path):
    hang = tmp_path / "hang.py"
    hang.write_text("while True:\n    pass\n" + (ROOT / "examples" / "correct_attention.py").read_text())
    lines = _student_run(hang, "--time-limit", "10")  # the limit holds the child's own start too: 4 s ran out
    head = " ".join(" ".join(lines[1:4]).split())  # before the file's import began at a load of 11 on 2 cores
    assert head.startswith("CANNOT TELL: your file did not finish importing within 10 s"), head
    assert "look for a loop at module level" in head
    assert "faster" not in " ".join(lines)


def test_words_a_student_alone_can_act_on(reports):
    """A student's trial: "a person should look at this report" (no one to ask, nothing to do), and view-order's
    pass "heads are split with view(B, n, H, dh)" of a layer with no view at all: the pass says what was verified."""
    undecided = " ".join(page(reports, "unused-projection").split())
    assert "a person should look" not in undecided, undecided
    assert "each says what would help; try that, and if nothing helps, show this report to your instructor" \
        in undecided, undecided
    correct = " ".join(page(reports, "correct").split())
    assert "heads are split with view" not in correct, correct
    assert "the heads are merged back in the order they were split" in correct, correct

"""The student's line and the student's fix (issue 28 item 6), on the student-style zoo (tests/zoo/buggy/own_*.py:
one layer per common catalogued mistake, written in a student's own names: `wei`, `tril`, `W_q`, `proj`, `att`,
`F.dropout`, bmm, einsum).

For each: the report names the mistake at the file's own line (LINE), the same line `mha-check trace` marks with
the same mistake; the fix is that line corrected in the file's own names, or the mistake's remedy in words, never
the reference's line (which names `self.dh`, `self.mask`, `scores`, attributes these classes do not have).  Where
the fix is the line corrected, pasting it into a copy of the file makes mha-check pass the copy, every check."""
import re
import shlex
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import checks
import mutants
from checks import Status
from conftest import ZOO, pasted, zoo_constants
from harness.engine import rewrite
from harness.engine.records import Diagnosis
from harness.frontends.options import constructor_args
from harness.frontends.trace import trace
from harness.render import text, view
from harness.render.trace_text import render
from harness.sandbox.pool import Fork
from harness.sandbox.subject import Subject

pytestmark = pytest.mark.slow
OWN = sorted((ZOO / "buggy").glob("own_*.py"))
NOTHING = Diagnosis(None, "none")  # what an unnamed report is read as: no mistake, no line, no fix


def target(path: Path) -> str:
    return f"{path}:{zoo_constants(path)['TARGET']}"


def told(result, root) -> str:
    """The words of the trace mark at the report's line, which the report's own-line fix reads too (heads folded
    into the batch)."""
    return _mark(result, root).get("text", "")


def scores_made(result, root) -> str:
    """The line that made the scores, which the mark carries where they are scaled on a line of their own."""
    return _mark(result, root).get("scores_code", "")


def _mark(result, root) -> dict:
    return next((m for m in result.mistakes if m["mutant"] == root.mutant and result.where(m)[0] == root.at), {})


def marked(result, root) -> set[int]:
    """The lines of the file the trace marks with the report's mistake (a fix noted "likewise the other projection
    split this way" is made on them: the other marked line, not the projection split right)."""
    ats = [result.where(m)[0] for m in result.mistakes if m["mutant"] == root.mutant]
    return {int(at.rsplit(":", 1)[1]) for at in ats if at}


@pytest.fixture(scope="module")
def fixed(reports, traced, tmp_path_factory):
    """The reports of the zoo files, then each file with its report's own-line fix pasted in (a copy)."""
    reports.want([target(p) for p in OWN])
    folder = tmp_path_factory.mktemp("own_fix")
    copies = {}
    for path in OWN:
        root = reports(target(path)).diagnosis or NOTHING
        entry = mutants.catalogue().get(root.mutant, {})
        if root.fix and root.fix_is_code:  # words (the catalogue's remedy, or the mark's for how the line is
            # written: "delete this scaling" for scores scaled twice) are read, not pasted
            copy = folder / path.name
            copy.write_text(pasted(path, [(zoo_constants(path)["LINE"], root.fix, entry["rewrite"],
                                           told(traced[path], root), marked(traced[path], root))]))
            copies[path] = f"{copy}:{zoo_constants(path)['TARGET']}"
    reports.want(list(copies.values()))
    return copies


@pytest.fixture(scope="module")
def traced(reports):
    def one(path):
        with reports.zygotes.take() as zygote:
            return trace(target(path), make_subject=lambda spec, **kw: Subject(spec, start=Fork(zygote), **kw))

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(OWN, pool.map(one, OWN)))


def test_the_student_style_zoo_covers_the_common_mistakes():
    named = {zoo_constants(p)["DIAGNOSIS"] for p in OWN}
    assert len(named) >= 22 and {"no-mask", "mask-not-sliced", "finite-fill", "zero-after-softmax", "mask-no-device",
                                 "dropout-in-eval", "scale-by-sqrt-d", "no-scaling", "softmax-wrong-axis",
                                 "split-view-order", "merge-no-transpose", "view-without-contiguous"} <= named


@pytest.mark.parametrize("path", OWN, ids=[p.stem for p in OWN])
def test_the_report_names_the_mistake_at_the_students_own_line(path, reports):
    want = zoo_constants(path)
    root = reports(target(path)).diagnosis or NOTHING
    line = want.get("WROTE") or path.read_text().splitlines()[want["LINE"] - 1].strip()  # WROTE: a statement over
    # several lines, shown whole, joined (a student's trial was shown its first line, not the argument that was wrong)
    assert (root.mutant, root.at, root.code) == (want["DIAGNOSIS"], f"{path.name}:{want['LINE']}",
                                                                      line)


def _rule_the_report_fails_too(mutant: str | None, report) -> bool:
    """A lesson rule the trace marks (no-divisibility-check at `def __init__` of a layer without the guard) whose
    own check fails in the report too: the report says that rule is broken, beside its root cause, so the two agree
    (the trace marks the rule also where the forward only raised on a width the heads do not divide)."""
    entry = mutants.catalogue().get(mutant or "")
    if not entry:
        return False
    rules = {c.id for c in checks.all_checks() if c.kind == "rule"}
    check = entry["killed_by"][0]
    return check in rules and any(c.id == check and c.status == Status.FAIL for c in report.checks)


@pytest.mark.parametrize("path", OWN, ids=[p.stem for p in OWN])
def test_trace_marks_the_same_mistake_at_the_same_line(path, traced, reports):
    """`trace` once called the softmax-then-`wei * tril` layer no-mask while the report said zero-after-softmax."""
    want = zoo_constants(path)
    result = traced[path]
    report = reports(target(path))
    marks = [(m["mutant"], result.where(m)[0]) for m in result.mistakes  # a mask made in __init__: that line
             if m["mutant"] == want["DIAGNOSIS"] or not _rule_the_report_fails_too(m["mutant"], report)]
    assert {mutant for mutant, _ in marks} == {want["DIAGNOSIS"]}, marks  # the keys' and values' lines too, if
    assert marks[0][1] == f"{path.name}:{want['LINE']}", marks  # the same mistake is there; the report's first


@pytest.mark.parametrize("path", OWN, ids=[p.stem for p in OWN])
def test_the_fix_is_the_students_line_corrected_or_words_never_the_references_line(path, reports, traced):
    root = reports(target(path)).diagnosis
    entry = mutants.catalogue()[root.mutant]
    assert root.fix != entry["fix"]
    if not root.fix_is_code:  # words, where no one-line change of the student's line undoes the mistake
        assert not entry["rewrite"] or rewrite.own_line_fix(entry["rewrite"], root.code, told(traced[path], root),
                                                            scores_made(traced[path], root)) is None
        source = path.read_text()
        assert [w for w in ("self.dh", "self.mask", "(w @ v)") if w in root.fix and w not in source] == []
        return
    assert root.fix == rewrite.own_line_fix(entry["rewrite"], root.code, told(traced[path], root),
                                            scores_made(traced[path], root))
    source = path.read_text()
    assert [w for w in ("self.dh", "self.mask", "scores", "(w @ v)") if w in root.fix and w not in source] == []


@pytest.mark.parametrize("path", [p for p in OWN if zoo_constants(p).get("WROTE")], ids=lambda p: p.stem)
def test_a_statement_over_several_lines_is_shown_whole_by_report_json_and_trace(path, reports, traced):
    """A student's trial was shown `context_vec = F.scaled_dot_product_attention(`, the first of three lines, and
    not the `dropout_p=self.dropout` that was the mistake: "you wrote" (text, JSON) and the trace's line show the
    whole statement, joined, while `where:` stays the line the trace marks."""
    want = zoo_constants(path)
    report = reports(target(path))
    squeezed = "".join(want["WROTE"].split())  # however the text wraps it
    shown = text.render(view.build(report))
    wrote = shown[shown.index("you wrote:"):shown.index("fix:")]
    assert squeezed in "".join(wrote.split()), wrote
    assert f"where: {path}:{want['LINE']}" in " ".join(shown.split())
    assert report.to_dict()["diagnosis"]["code"] == want["WROTE"]
    assert squeezed in "".join(render(traced[path]).split())


@pytest.mark.parametrize("path", [p for p in OWN if zoo_constants(p).get("RAISED_AT")], ids=lambda p: p.stem)
def test_divisibility_says_the_forward_raised_where_it_did(path, reports):
    """A layer with no guard whose forward raises on a width its heads do not divide: the check says so, with the
    line, not that its heads "cover only 6 of the 8 features"; the report points at `def __init__`."""
    report = reports(target(path))
    message = report["divisibility"].message
    assert f"its forward then raised RuntimeError at {path.name}:{zoo_constants(path)['RAISED_AT']}" in message
    assert "cover only" not in message


def test_most_fixes_are_the_students_own_line(reports):
    own = [p.stem for p in OWN if (reports(target(p)).diagnosis or NOTHING).fix_is_code]
    assert len(own) >= 19, own  # all but zero-after-softmax, mask-no-device (their remedies span two lines) and
    # the masks built wrongly in __init__ were told in words until their mutants declared rewrite="diagonal" (their
    # tril/triu corrected, once the catalogue carries it)


@pytest.mark.parametrize("path", OWN, ids=[p.stem for p in OWN])
def test_the_own_line_fix_applied_makes_the_layer_pass(path, fixed, reports):
    if path not in fixed:
        pytest.skip("the fix is in words (not a change of one line)")
    report = reports(fixed[path])
    assert [(c.id, c.status, c.message) for c in report.checks if c.status != "pass"] == []
    assert report.diagnosis is None


FOLLOWS_THE_MODE = '''
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class Careful(nn.Module):
    def __init__(self, d, heads, context_length, dropout=0.1):
        super().__init__()
        assert d % heads == 0  # (without it, its forward raises on a width the heads do not divide: marked)
        self.h, self.p = heads, dropout
        self.qkv = nn.Linear(d, 3 * d)
        self.o = nn.Linear(d, d)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.h, D // self.h).permute(2, 0, 3, 1, 4)
        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        s = (q @ k.transpose(-1, -2) / math.sqrt(D // self.h)).masked_fill(future, float("-inf"))
        w = torch.dropout(s.softmax(-1), self.p, train=self.training)
        w = F.dropout(w, self.p, training=self.training)
        return self.o((w @ v).transpose(1, 2).reshape(B, T, D))
'''


def test_a_dropout_that_follows_the_mode_and_a_mask_made_on_the_inputs_device_are_not_marked(tmp_path, reports):
    """The marks that give dropout-in-eval and mask-no-device their line are not set on the right spellings:
    torch.dropout's own `train=`, F.dropout's `training=self.training`, torch.ones(..., device=x.device)."""
    path = tmp_path / "careful.py"
    path.write_text(FOLLOWS_THE_MODE)
    with reports.zygotes.take() as zygote:
        result = trace(f"{path}:Careful", make_subject=lambda spec, **kw: Subject(spec, start=Fork(zygote), **kw))
    assert result.error is None and result.mistakes == []
    assert [s.label for s in result.steps].count("dropout") == 2


BUGGY = sorted((ZOO / "buggy").glob("[a-z]*.py"))


@pytest.fixture(scope="module")
def traced_zoo(reports):
    reports.want([target(p) for p in BUGGY])

    def one(path):
        with reports.zygotes.take() as zygote:
            return trace(target(path), make_subject=lambda spec, **kw: Subject(spec, start=Fork(zygote), **kw))

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(BUGGY, pool.map(one, BUGGY)))


def test_trace_and_the_report_never_disagree_on_the_buggy_zoo(traced_zoo, reports):
    """Over every buggy zoo layer: a mistake the trace marks is the one the report names, and the report's line is
    one the trace marks for it (trace said no-mask for additive -1e9 masks, a mask on some heads only and
    `wei * tril` after the softmax, and scale-by-sqrt-d for full-width heads, while the reports said otherwise)."""
    disagree = []
    for path in BUGGY:
        report = reports(target(path))
        root = report.diagnosis or NOTHING
        result = traced_zoo[path] if not getattr(root, "trace_options", "") else _traced_as_told(path, root, reports)
        marks = {(m["mutant"], result.where(m)[0]) for m in result.mistakes if m.get("mutant")
                 and (m["mutant"] == root.mutant or not _rule_the_report_fails_too(m["mutant"], report))}
        named = {mutant for mutant, _ in marks}
        # several marks (a leak and a missing projection): the report's root cause is one of them
        wrong_line = root.at and (root.mutant, root.at) not in marks
        # a file whose mistake no mutant is exactly (UNNAMED_OK) may be named nothing, the report pointing at trace's
        # mark (a mask hiding the past is marked as one that keeps the future: the line, not its numbers)
        pointed = root.mutant is None and zoo_constants(path).get("UNNAMED_OK") and "trace marks" in (root.message or
                                                                                                 "")
        if (named and root.mutant not in named and not pointed) or wrong_line:
            disagree.append((path.stem, root.mutant, root.at, sorted(marks, key=str)))
    assert disagree == []


def _traced_as_told(path, root, reports):
    """The trace the report's command asks for, with its options (a Q/K/V bias left out shows only in a build with
    the biases: the report's trace command carries --arg qkv_bias=True)."""
    words = shlex.split(root.trace_options)
    args = constructor_args([w for flag, w in zip(words, words[1:]) if flag == "--arg"])
    with reports.zygotes.take() as zygote:
        return trace(target(path), args=args,
                     make_subject=lambda spec, **kw: Subject(spec, start=Fork(zygote), **kw))


def test_trace_shows_the_line_that_made_a_wrong_mask_buffer(traced):
    """A mask buffer built wrongly in __init__ (triu(ones) with diagonal 0) shows at the masked_fill in forward; the
    line to change, which the report gives too, is the one that built it, and trace says so in its text."""
    path = ZOO / "buggy" / "own_mask_hides_diagonal.py"
    text = render(traced[path])
    assert f"the line to change: {path.name}:21" in text.replace("\n  ", " ")
    assert traced[path].where(traced[path].mistakes[0]) == (
        f"{path.name}:21", 'self.register_buffer("mask", torch.triu(torch.ones(max_seq_len, max_seq_len)).bool())')


ADVICE = re.compile(r"use torch\.(tril|triu)\(\.\.\., diagonal=(-?\d+)\)")


@pytest.mark.parametrize("path", [p for p in OWN if zoo_constants(p)["DIAGNOSIS"] in ("mask-lets-one-future",
                                                                                      "mask-hides-diagonal")],
                         ids=lambda p: p.stem)
def test_trace_and_report_fix_a_mask_diagonal_in_the_same_style(path, reports, traced):
    """A student's trial: for `torch.tril(ones, diagonal=1)` trace said "use torch.triu(..., diagonal=1)" while the
    report's fix kept their tril with diagonal=0.  The trace's advice now names the function the student's line
    uses, with the diagonal the report's fix writes."""
    root = reports(target(path)).diagnosis
    if "a strict comparison" in told(traced[path], root):  # positions compared (`j >= i`): the report's fix too
        assert re.search(r"[^<>=]>[^=]|[^<>=]<[^=]", root.fix) and not re.search(r">=|<=", root.fix), root.fix
        return
    advice = ADVICE.search(told(traced[path], root))
    assert advice, told(traced[path], root)
    function, diagonal = advice.groups()
    assert re.search(rf"\b{function}_?\(", root.fix) and not re.search(
        rf"\b{'triu' if function == 'tril' else 'tril'}_?\(", root.fix), (advice.group(0), root.fix)
    said = re.search(r"diagonal=(-?\d+)|\.(?:tril|triu)_?\((-?\d+)\)", root.fix)
    assert (said and diagonal in said.groups()) or (not said and function == "tril" and diagonal == "0"), root.fix

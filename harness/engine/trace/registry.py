"""The detectors' registry: each known-mistake pattern that a recorded forward can show is found by a function
registered with the ids of the marks it may set (`@detector("mask-after-softmax", ...)`).

Why a registry: the ids are a closed vocabulary shared by three sides.  The detectors set them; the mutants declare
which of them stand for their mistake (`MutantInfo.trace`, checked against this registry when the mutant is
imported, so a misspelt id fails at once instead of never matching); the diagnosis reads them back from a trace.
Registration validates at the door (kebab-case ids, each owned by one detector, no overwrite), and a detector may
set only the ids it registered, so the registry never lists fewer ids than the detectors use.

Order matters: on a step that already has a mark, a later detector's mark replaces it (`Findings.mark`) or gives way
to it (`keep_earlier=True`), as each detector says.  `detectors` states the order: by module, then as declared.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.engine.trace.naming import Namer
from harness.engine.trace.vocabulary import FUSED_MHA

_KEBAB = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")


@dataclass
class Findings:
    """What the detectors found in one recorded forward: marks on operations, marks on the forward as a whole (what
    is missing has no step), and notes (worth saying, not a mistake)."""
    namer: Namer
    ops: list[dict]
    cfg: dict
    complete: bool  # the forward ran to the end (otherwise what is missing after the failing step is not a finding)
    at: dict[int, dict] = field(default_factory=dict)  # operation index -> its mark {"id", "text"[, "title", ...]}
    whole: list[dict] = field(default_factory=list)  # {"id", "step": None, "text"}
    beside: list[tuple[int, dict]] = field(default_factory=list)  # a second mistake's mark on an operation already
    # marked for another (an inverted mask filled with -1e4: one masked_fill, two mistakes)
    notes: list[str] = field(default_factory=list)
    allowed: tuple[str, ...] = ()  # the ids the running detector registered
    output: dict = field(default_factory=dict)  # what the forward returned: "src" (the operation that made it),
    # "returned" ({"at", "code"}: the student's `return` line), each when known

    @property
    def returned_at(self) -> dict:
        """{"at", "code"}: the student's line where forward returns, else the line of the operation that made the
        output, else {} (the place to apply a step that is missing at the end)."""
        if self.output.get("returned"):
            return dict(self.output["returned"])
        src = self.output.get("src")
        op = self.ops[src] if isinstance(src, int) and 0 <= src < len(self.ops) else None
        return {"at": op["at"], "code": op.get("code", "")} if op and op.get("at") not in (None, "?") else {}

    def mark(self, i: int, found: dict, keep_earlier: bool = False, beside: tuple[str, ...] = ()) -> None:
        """Mark operation `i`; `keep_earlier`: unless an earlier detector already marked it; `beside`: the ids of
        earlier marks this one stands beside as a second mistake of the same operation (a fill's value and a mask's
        pattern are two things one masked_fill can get wrong; two readings of one wrong mask, SDPA's boolean
        convention and an inverted mask, are one mistake and keep the earlier mark alone)."""
        self._registered(found["id"])
        if keep_earlier:
            earlier = self.at.setdefault(i, found)
            if earlier is not found and earlier["id"] in beside and all(
                    j != i or m["id"] != found["id"] for j, m in self.beside):
                self.beside.append((i, found))  # both stand: the step shows the first, the mistakes list both
        else:
            self.at[i] = found

    def mark_whole(self, detector_id: str, text: str | dict, where: dict | None = None) -> None:
        """Mark the forward as a whole (something it never does); `where` ({"at", "code"}): the student's line
        where the missing step belongs, when one does.  `text` may be the mark itself ({"text", "title", ...})."""
        self._registered(detector_id)
        mark = text if isinstance(text, dict) else {"text": text}
        self.whole.append({"id": detector_id, "step": None, **mark, **(where or {})})

    def named(self, label: str) -> list[int]:
        """The operations the namer named `label`, in order."""
        return [op["i"] for op in self.ops if self.namer.labels[op["i"]] == label]

    @property
    def fused_sdpa(self) -> bool:
        return any(self.ops[f]["op"] == "scaled_dot_product_attention" for f in self.namer.fused)

    @property
    def fused_mha(self) -> bool:
        return any(self.ops[f]["op"] in FUSED_MHA for f in self.namer.fused)

    def _registered(self, detector_id: str) -> None:
        if detector_id not in self.allowed:
            raise ValueError(f"a detector registered for {list(self.allowed)} set the mark {detector_id!r}: register "
                             "every id a detector may set")


@dataclass(frozen=True)
class Detector:
    ids: tuple[str, ...]  # the marks it may set
    find: Callable[[Findings], None]  # reads the findings' namer and ops, adds marks and notes

    @property
    def name(self) -> str:
        return f"{self.find.__module__}.{self.find.__name__}"


DETECTORS: dict[str, Detector] = {}  # mark id -> the detector that sets it
ORDER: list[Detector] = []  # as registered


def detector(*ids: str) -> Callable:
    """Register the decorated function `find(findings)` as the detector that may set the marks `ids`."""
    if not ids:
        raise ValueError("a detector needs the id of at least one mark")
    for i in ids:
        if not isinstance(i, str) or not _KEBAB.fullmatch(i):
            raise ValueError(f"detector id {i!r} is not kebab-case")
    if len(set(ids)) != len(ids):
        raise ValueError(f"detector ids {list(ids)} repeat an id")
    for i in ids:
        if i in DETECTORS:
            raise ValueError(f"detector id {i!r} is already registered by {DETECTORS[i].name}")

    def register(find: Callable[[Findings], None]) -> Callable[[Findings], None]:
        if not callable(find):
            raise TypeError(f"a detector is a function, not {find!r}")
        entry = Detector(tuple(ids), find)
        ORDER.append(entry)
        DETECTORS.update(dict.fromkeys(ids, entry))
        return find

    return register


def run(namer: Namer, ops: list[dict], cfg: dict, complete: bool, detectors: list[Detector],
        output: dict | None = None) -> Findings:
    """These detectors on one named forward, in this order."""
    findings = Findings(namer, ops, cfg, complete, output=output or {})
    for entry in detectors:
        findings.allowed = entry.ids
        entry.find(findings)
    findings.allowed = ()
    return findings

"""What one recorded forward shows: its operations named by the lesson's steps (`naming`), the known mistakes
marked by the detectors (`detectors`), and the steps a student reads (`steps`).  Pure: no process, no catalogue."""
from __future__ import annotations

from harness.engine.trace import detectors, steps
from harness.engine.trace.naming import Namer
from harness.engine.trace.steps import Step


def analyse(ops: list[dict], cfg: dict, complete: bool = True,
            output: dict | None = None) -> tuple[list[Step], list[dict], list[str]]:
    """Name the recorded operations and find the known mistakes: (steps, mistakes, notes).  `complete`: the
    forward ran to the end (otherwise what is missing after the failing step is not a finding); `output`: what the
    forward returned, as the child saw it ("src": the operation that made it, "returned": the student's line of
    the `return`), when known."""
    namer = Namer(ops, cfg)
    namer.run()
    found = detectors.find(namer, ops, cfg, complete, output)
    listed = sorted([{**m, "step": i + 1} for i, m in found.at.items()] +
                    [{**m, "step": i + 1} for i, m in found.beside], key=lambda m: m["step"])
    return steps.build(namer, ops, found.at), listed + found.whole, found.notes

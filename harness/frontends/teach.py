"""For teachers and curious students: the kill matrix, one mutant's story and diff, and `explain ID`.

Everything here reads the catalogue of mistakes (`mutants.catalogue()`: the measured symptoms and explanations of
every mutant) and the mutants' source files as text, so it answers instantly, without torch.
"""
from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path

import mutants
import reference
from checks import all_checks


def load_fingerprints() -> dict:
    return mutants.catalogue()


def _class_source(path: Path) -> list[str]:
    text = path.read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(text) if line.startswith("class CausalMHA"))
    end = next((i for i in range(start + 1, len(text)) if text[i].startswith(("def ", "class "))), len(text))
    while end > start and not text[end - 1].strip():
        end -= 1
    return text[start:end]


def mutant_diff(mutant_id: str) -> str:
    """The mutant's class against the reference's: the bug, and nothing else."""
    mine = mutants.source_path(mutant_id)
    diff = difflib.unified_diff(_class_source(Path(reference.__file__).parent / "causal_mha.py"), _class_source(mine),
                                "reference/causal_mha.py", f"mutants/{mine.name}", n=1)
    return "".join(diff)


def _checks():
    return all_checks()


def _resolve_mutant(mutant_id: str, prints: dict, also=()) -> str:
    key = mutant_id.replace("_", "-")
    if key not in prints:
        close = difflib.get_close_matches(key, list(prints) + list(also), n=3, cutoff=0.5)
        kind = "check or mutant" if also else "mutant"
        raise LookupError(f"unknown {kind} {mutant_id!r}" + (f"; did you mean {', '.join(close)}?" if close else
                                                              "; `mha-check mutants` lists them"))
    return key


def matrix(fmt: str = "text") -> str:
    prints, checks = load_fingerprints(), [c.id for c in _checks()]
    if fmt == "json":
        rows = [{"id": m, "title": p["title"], "killed_by": p["killed_by"], "failing": p["failing"]}
                for m, p in prints.items()]
        return json.dumps({"checks": checks, "mutants": rows}, indent=2)
    width = max(map(len, prints))
    lines = ["Which check catches which mistake (X: fails, as the mutant declares; x: fails too; .: passes)", "",
             " " * (width + 1) + "".join(f"{i:>3}" for i in range(1, len(checks) + 1))]
    for mid, p in prints.items():
        cells = ["X" if c in p["failing"] and c in p["killed_by"] else "!" if c in p["killed_by"] else
                 "x" if c in p["failing"] else "." for c in checks]
        lines.append(f"{mid:<{width}} " + "".join(f"{cell:>3}" for cell in cells))
    lines += ["", "checks: " + ", ".join(f"{i} {c}" for i, c in enumerate(checks, 1)), "",
              f"{len(prints)} mutants x {len(checks)} checks; `mha-check mutants show ID` for one mistake, "
              "`mha-check explain ID` for the lesson behind it"]
    return "\n".join(lines)


def show(mutant_id: str, fmt: str = "text") -> str:
    prints = load_fingerprints()
    mid = _resolve_mutant(mutant_id, prints)
    p = prints[mid]
    diff = mutant_diff(mid)
    if fmt == "json":
        return json.dumps({"id": mid, **{k: p[k] for k in ("title", "lesson", "symptom", "fix", "killed_by",
                                                           "failing", "variant")}, "diff": diff}, indent=2)
    return "\n".join([f"{mid}: {p['title']}", "", f"lesson:  {p['lesson']}", f"symptom: {p['symptom']}",
                      f"fix:     {p['fix']}", f"caught by: {', '.join(p['killed_by'])}"
                      + (f" (also fails: {', '.join(c for c in p['failing'] if c not in p['killed_by'])})"
                         if set(p["failing"]) - set(p["killed_by"]) else ""), "", diff.rstrip()])


def explain(item_id: str, fmt: str = "text") -> str:
    """A check id or a mutant id: what goes wrong, a tiny worked example with shapes, the fix."""
    checks = {c.id: c for c in _checks()}
    prints = load_fingerprints()
    if item_id in checks:
        c = checks[item_id]
        kills = sorted(m for m, p in prints.items() if item_id in p["killed_by"])
        data = {"id": c.id, "kind": "check", "claim": c.claim, "explanation": c.explanation,
                "example": getattr(c, "example", ""), "fix": c.fix, "catches": kills}
        if fmt == "json":
            return json.dumps(data, indent=2)
        return "\n".join([f"{c.id} (check): {c.claim}", "", c.explanation, "",
                          *(["Worked example:", data["example"].rstrip(), ""] if data["example"] else []),
                          f"Fix: {c.fix}", "", f"Mistakes it catches: {', '.join(kills) or '-'}"])
    mid = _resolve_mutant(item_id, prints, also=checks)
    p = prints[mid]
    example = _mutant_example(mid)
    if fmt == "json":
        return json.dumps({"id": mid, "kind": "mutant", "title": p["title"], "lesson": p["lesson"],
                           "symptom": p["symptom"], "example": example, "fix": p["fix"],
                           "caught_by": p["killed_by"], "diff": mutant_diff(mid)}, indent=2)
    return "\n".join([f"{mid} (mistake): {p['title']}", "", f"The lesson: {p['lesson']}", "",
                      f"What goes wrong: {p['symptom']}", "",
                      *(["Worked example:", example.rstrip(), ""] if example else []),
                      f"Fix: {p['fix']}", "", f"Caught by: {', '.join(p['killed_by'])}", "",
                      mutant_diff(mid).rstrip()])


def _mutant_example(mid: str) -> str:
    return load_fingerprints()[mid].get("example", "")


def main(argv: list[str]) -> int:
    """`mha-check mutants [show ID] [--format json]` and `mha-check explain ID [--format json]`."""
    command = argv[0]
    p = argparse.ArgumentParser(prog=f"mha-check {command}")
    if command == "mutants":
        p.add_argument("action", nargs="?", choices=("show",), help="show one mutant: its story and its diff")
        p.add_argument("id", nargs="?", help="mutant id (see `mha-check mutants`)")
    else:
        p.add_argument("id", help="a check id (mha-check --list-checks) or a mutant id (mha-check mutants)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    args = p.parse_args(argv[1:])
    try:
        if command == "explain":
            print(explain(args.id, args.format))
        elif args.action == "show":
            if not args.id:
                p.error("mutants show needs an ID")
            print(show(args.id, args.format))
        else:
            print(matrix(args.format))
    except LookupError as e:
        print(f"mha-check {command}: error: {e}", file=sys.stderr)
        return 2
    return 0

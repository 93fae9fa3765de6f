"""For teachers and curious students: the kill matrix, one mutant's story and diff, and `explain ID`.

Everything here reads the catalogue of mistakes (`mutants.catalogue()`: the measured symptoms and explanations of
every mutant) and the mutants' source files as text, so it answers instantly, without torch.
"""
from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from pathlib import Path

import mutants
from checks import all_checks
from harness.engine.trace.detectors import DETECTORS, UNCATALOGUED
from harness.frontends import exercises
from harness.render.text import GLUE, WIDTH, wrap, wrap_preformatted


def load_fingerprints() -> dict:
    return mutants.catalogue()


def _class_source(path: Path, name: str = "CausalMHA") -> tuple[list[str], int]:
    """The class's lines in the file, and how many lines of the file come before them."""
    text = path.read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(text) if line.startswith(f"class {name}"))
    end = next((i for i in range(start + 1, len(text)) if text[i].startswith(("def ", "class "))), len(text))
    while end > start and not text[end - 1].strip():
        end -= 1
    return text[start:end], start


_HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@", re.M)


def mutant_diff(mutant_id: str) -> str:
    """The mutant's class against the reference's: the bug, and nothing else; each hunk numbered by the lines of
    the two files (a student's trial opened reference/causal_mha.py at line 10, counted from the class, and found
    another line than the diff's)."""
    mine, ref, name = mutants.source_path(mutant_id), mutants.reference_path(mutant_id), mutants.class_name(mutant_id)
    (theirs, ref_start), (ours, mine_start) = _class_source(ref, name), _class_source(mine, name)
    diff = "".join(difflib.unified_diff(theirs, ours, f"reference/{ref.name}", f"mutants/{mine.name}", n=1))
    return _HUNK.sub(lambda h: f"@@ -{int(h[1]) + ref_start}{h[2] or ''} +{int(h[3]) + mine_start}{h[4] or ''} @@ "
                               f"(reference/{ref.name} from line {int(h[1]) + ref_start}, mutants/{mine.name} from "
                               f"line {int(h[3]) + mine_start}: the mutant's file starts with its story)", diff)


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


def matrix(fmt: str = "text", wide: bool = False) -> str:
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
    return _layout(["\n".join(lines), "", ("checks: " + ", ".join(f"{i}{GLUE}{c}" for i, c in enumerate(checks, 1)), 8),
                    "", (f"{len(prints)} mutants x {len(checks)} checks; `mha-check mutants show ID` for one "
                         "mistake, `mha-check explain ID` for the lesson behind it", "")], wide)


def show(mutant_id: str, fmt: str = "text", wide: bool = False) -> str:
    prints = load_fingerprints()
    mid = _resolve_mutant(mutant_id, prints)
    p = prints[mid]
    diff = mutant_diff(mid)
    if fmt == "json":
        return json.dumps({"id": mid, **{k: p[k] for k in ("title", "lesson", "symptom", "fix", "killed_by",
                                                           "failing", "variant")}, "diff": diff}, indent=2)
    return _layout([(f"{mid}: {p['title']}", ""), "", (f"lesson:  {p['lesson']}", 9),
                    (f"symptom: {p['symptom']}", 9), (f"fix:     {p['fix']}", 9),
                    (f"caught by: {exercises.caught_by(p)}", 11), "", diff.rstrip()], wide)


def explain(item_id: str, fmt: str = "text", wide: bool = False) -> str:
    """A check id or a mutant id: what goes wrong, a tiny worked example with shapes, the fix; within 100 columns
    unless `wide`."""
    checks = {c.id: c for c in _checks()}
    prints = load_fingerprints()
    if item_id in checks:
        c = checks[item_id]
        kills = sorted(m for m, p in prints.items() if item_id in p["killed_by"] or item_id in p["failing"])
        data = {"id": c.id, "kind": "check", "claim": c.claim, "explanation": c.explanation,
                "example": getattr(c, "example", ""), "fix": c.fix, "catches": kills}
        if fmt == "json":
            return json.dumps(data, indent=2)
        return _layout([(f"{c.id} (check): {c.claim}", ""), "", (c.explanation, ""), "",
                        *(["Worked example:", data["example"].rstrip(), ""] if data["example"] else []),
                        (f"Fix: {c.fix}", ""), "", (f"Mistakes it catches: {', '.join(kills) or '-'}", "")], wide)
    mark = item_id.replace("_", "-")
    if mark not in prints and mark in DETECTORS:  # the id of a mark of `mha-check trace` (its JSON's "id")
        return _explain_mark(mark, prints, fmt, wide)
    mid = _resolve_mutant(item_id, prints, also=[*checks, *DETECTORS])
    p = prints[mid]
    example = _mutant_example(mid)
    if fmt == "json":
        return json.dumps({"id": mid, "kind": "mutant", "title": p["title"], "lesson": p["lesson"],
                           "symptom": p["symptom"], "example": example, "fix": p["fix"], "remedy": p.get("remedy", ""),
                           "caught_by": p["killed_by"], "also_fails": exercises.also_fails(p),
                           "diff": mutant_diff(mid)}, indent=2)
    return _layout([(f"{mid} (mistake): {p['title']}", ""), "", (f"The lesson: {p['lesson']}", ""), "",
                    (f"What goes wrong: {p['symptom']}", ""), "",
                    *(["Worked example:", example.rstrip(), ""] if example else []),
                    *([(f"Fix: {p['remedy']}", ""), (f"In the lesson's layer: {p['fix']}", 2)] if p.get("remedy")
                      else [(f"Fix: {p['fix']}", "")]), "", (f"Caught by: {exercises.caught_by(p)}", ""), "",
                    mutant_diff(mid).rstrip()], wide)


def marked_as(mark: str, prints: dict | None = None) -> list[str]:
    """The catalogued mistakes whose trace mark `mark` is (`MutantInfo.trace`), the multi-head layer's first (a
    single-head layer's mark is named after its own `single-*` mutant)."""
    prints = load_fingerprints() if prints is None else prints
    declared = [m for m, p in prints.items() if mark in p.get("trace", ())]
    return sorted(declared, key=lambda m: (mutants.form(m) != "multi-head", m))


def _explain_mark(mark: str, prints: dict, fmt: str, wide: bool) -> str:
    """A trace mark's id (`mha-check trace --format json` gives it as "id", beside "mutant"): the catalogued mistake
    it stands for, explained as that mistake; a mark no mistake declares, in its own words with the mistakes
    nearest to it.  A student's trial: trace marked `dropout-always-on` and `explain` did not know it."""
    declared = marked_as(mark, prints)
    if declared:
        first, others = declared[0], declared[1:]
        said = (f"`{mark}` is the mark `mha-check trace` sets for the mistake {first}"
                + (" (" + "; ".join(f"in a {mutants.form(o)} layer: {o}" for o in others) + ")" if others else "")
                + ".")
        if fmt == "json":
            return json.dumps({**json.loads(explain(first, "json")), "mark": mark, "mistakes": declared}, indent=2)
        return _layout([(said, ""), "", explain(first, "text", wide)], wide)
    text, related = UNCATALOGUED[mark]
    if fmt == "json":
        return json.dumps({"id": mark, "kind": "trace mark", "explanation": text, "mistakes": [],
                           "related": list(related)}, indent=2)
    return _layout([(f"{mark} (a mark of mha-check trace): no catalogued mistake is exactly this one", ""), "",
                    (text, ""), "", (f"Related mistakes: {', '.join(related)} (`mha-check explain ID`)" if related
                                     else "Run `mha-check TARGET` for the checks, which say what is wrong.", "")],
                   wide)


def _layout(blocks: list, wide: bool, width: int = WIDTH) -> str:
    """Blocks as text: a (prose, hanging indent) pair is a paragraph, wrapped to `width` with that indent (an int:
    that many spaces; "": two); a plain string is preformatted (a worked example, a diff), its long lines broken
    by `wrap_preformatted`.  `wide`: every block as it is, on as few lines as it has (the layout before 100
    columns)."""
    out: list[str] = []
    for block in blocks:
        if isinstance(block, tuple):
            text, hang = block
            out += [text.replace(GLUE, " ")] if wide or len(text) <= width else \
                wrap(text, " " * (hang if isinstance(hang, int) else 2), "", width)
        else:
            for line in block.split("\n"):
                out += [line] if wide or len(line) <= width else wrap_preformatted(line, width)
    return "\n".join(out)


def _mutant_example(mid: str) -> str:
    return load_fingerprints()[mid].get("example", "")


def main(argv: list[str]) -> int:
    """`mha-check mutants [show ID] [--format json]`, `mha-check mutants export (ID [--as-exercise] | --all) -o PATH`
    and `mha-check explain ID [--format json] [--wide]`."""
    command = argv[0]
    p = argparse.ArgumentParser(prog=f"mha-check {command}")
    if command == "mutants":
        p.add_argument("action", nargs="?", choices=("show", "export"),
                       help="show: one mutant's story and diff; export: a mutant as a file, or as an exercise")
        p.add_argument("id", nargs="?", help="mutant id (see `mha-check mutants`)")
        p.add_argument("--as-exercise", action="store_true",
                       help="export: a clean exercise file (no answer, no bug marker) and FILE_solution.py")
        p.add_argument("--all", action="store_true", help="export: every mutant as an exercise, into the folder -o "
                                                          "DIR (exercises/ with an index, solutions/)")
        p.add_argument("-o", "--output", metavar="PATH", help="export: the file (or with --all, the folder) to write")
    else:
        p.add_argument("id", help="a check id (mha-check --list-checks), a mutant id (mha-check mutants) or the id "
                                  "of a mark of mha-check trace")
    p.add_argument("--wide", action="store_true", help="no wrapping at 100 columns (long lines stay long)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    args = p.parse_args(argv[1:])
    try:
        if command == "explain":
            print(explain(args.id, args.format, args.wide))
        elif args.action == "export":
            for path in _export(p, args):
                print(f"wrote {path}")
        elif args.action == "show":
            if not args.id:
                p.error("mutants show needs an ID")
            print(show(args.id, args.format, args.wide))
        else:
            print(matrix(args.format, args.wide))
    except BrokenPipeError:
        raise  # `mha-check explain ID | head`: the reader left; the CLI ends quietly (cli.main)
    except (LookupError, OSError) as e:
        print(f"mha-check {command}: error: {e.args[0] if isinstance(e, KeyError) else e}", file=sys.stderr)
        return 2
    return 0


def _export(p: argparse.ArgumentParser, args) -> list[Path]:
    if not args.output:
        p.error("mutants export needs -o FILE (or -o DIR with --all)")
    out = Path(args.output)
    if args.all:
        if args.id:
            p.error("mutants export: give an ID or --all, not both")
        if out.exists() and not out.is_dir():
            p.error(f"-o {out}: with --all, give a folder")
        return exercises.export_all(out)
    if not args.id:
        p.error("mutants export needs an ID (see `mha-check mutants`) or --all")
    if out.is_dir():
        p.error(f"-o {out}: that is a folder; give a file name")
    if not out.parent.is_dir():
        p.error(f"-o {out}: the folder {out.parent} does not exist")
    if not args.as_exercise:
        out.write_text(exercises.annotated(args.id))
        return [out]
    files = exercises.export(args.id, out.name)
    solution = exercises.solution_path(out)
    out.write_text(files.exercise)
    solution.write_text(files.solution)
    return [out, solution]

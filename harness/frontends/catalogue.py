"""`python -m harness.frontends.catalogue`: derive everything that is derived from the mutants and the checks.

- `mutants/catalogue.json`: for every mutant, what its own file declares (INFO) plus the symptoms measured by
  running mha-check on it (the failing checks, and its signature: the specific findings no generic failure has).
- the tables of checks and of mutants in docs/checks.md (the page for checks and mistakes; the README links to it),
  between their `<!-- BEGIN ... -->` / `<!-- END ... -->` markers.

One command for both; `--check` only compares (exit 1 when something is stale), which is what the tests do.
This is a developer's command: it imports the mutant modules (torch) in this process to read their INFO.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import mutants
from checks import all_checks
from harness import PACKAGES_ROOT
from harness.engine.diagnosis import symptoms
from harness.engine.runner import Options, run_checks
from harness.sandbox.pool import Fork, ZygotePool
from harness.sandbox.subject import Subject

CATALOGUE = Path(mutants.__file__).parent / "catalogue.json"
TABLES = Path(PACKAGES_ROOT) / "docs" / "checks.md"  # the page that holds the two derived tables


def declared(info) -> dict:
    """What a mutant's own file declares (INFO), as the catalogue holds it."""
    return {"title": info.title, "lesson": info.lesson, "symptom": info.symptom, "fix": info.fix,
            "example": info.example, "killed_by": list(info.killed_by), "variant": info.variant,
            "trace": list(info.trace), "task": info.task, "topic": info.topic, "rewrite": info.rewrite,
            "remedy": info.remedy, **({"fitted": list(info.fitted)} if info.fitted else {}),
            **({"named_by_trace": True} if info.named_by_trace else {})}


def entry(info, report) -> dict:
    """One mutant's catalogue entry: its declaration and what mha-check measured on it."""
    measured = symptoms(report)
    return {**declared(info), "failing": measured["failing"], "signature": measured["findings"]}


def measure(targets: dict[str, str], jobs: int = 2) -> dict:
    """Reports for {name: target}, each in a child forked from one warm zygote, `jobs` at a time."""
    zygotes = ZygotePool(jobs)
    try:
        def one(spec):
            with zygotes.take() as zygote:
                make = lambda: Subject(spec, start=Fork(zygote))
                return run_checks(spec, Options(diagnose=False), subject=make(), make_subject=make)

        with ThreadPoolExecutor(jobs) as pool:
            return dict(zip(targets, pool.map(one, targets.values())))
    finally:
        zygotes.close()


def mutant_targets() -> dict[str, str]:
    return {mid: f"{mutants.source_path(mid)}:{mutants.class_name(mid)}" for mid in mutants.ids()}


def build_catalogue(reports: dict) -> dict:
    return {mid: entry(mutants.get(mid).INFO, reports[mid]) for mid in sorted(reports)}


def doc_tables(catalogue: dict) -> dict[str, str]:
    """The two derived tables, as markdown: the checks (with the mutants each catches) and the mutants."""
    checks = all_checks()
    rows = ["| id | kind | claim | mutants it kills (first-named check of the mutant) |", "|---|---|---|---|"]
    for c in checks:
        kills = sorted(m for m, e in catalogue.items() if e["killed_by"][0] == c.id)
        rows.append(f"| `{c.id}` | {c.kind} | {c.claim} | {', '.join(kills) or '-'} |")
    mrows = ["| mutant | the mistake | caught by |", "|---|---|---|"]
    for mid, e in catalogue.items():
        mrows.append(f"| `{mid}` | {e['title']} | {', '.join(e['killed_by'])} |")
    return {"checks": "\n".join(rows), "mutants": "\n".join(mrows)}


def with_tables(page: str, tables: dict[str, str]) -> str:
    for name, table in tables.items():
        pattern = re.compile(rf"(<!-- BEGIN {name} table -->\n).*?(\n<!-- END {name} table -->)", re.S)
        if not pattern.search(page):
            raise ValueError(f"{TABLES} has no <!-- BEGIN {name} table --> ... <!-- END {name} table --> markers")
        page = pattern.sub(lambda m, table=table: m.group(1) + table + m.group(2), page)
    return page


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m harness.frontends.catalogue", description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="compare only; exit 1 when anything is stale")
    args = p.parse_args(argv)
    stored = mutants.catalogue()
    now = {mid: {**stored.get(mid, {"failing": [], "signature": []}), **declared(mutants.get(mid).INFO)}
           for mid in mutants.ids()}
    with mutants.measuring(json.loads(json.dumps(now))):  # as catalogue.json would hold it
        fresh = build_catalogue(measure(mutant_targets()))
    page = with_tables(TABLES.read_text(), doc_tables(fresh))
    stale = []
    if json.loads(CATALOGUE.read_text()) != json.loads(json.dumps(fresh)):
        stale.append(str(CATALOGUE))
    if TABLES.read_text() != page:
        stale.append(str(TABLES))
    if args.check:
        print("stale: " + ", ".join(stale) if stale else f"catalogue and the tables of {TABLES.name} are current")
        return 1 if stale else 0
    CATALOGUE.write_text(json.dumps(fresh, indent=1, sort_keys=True) + "\n")
    TABLES.write_text(page)
    print(f"wrote {len(fresh)} mutants to {CATALOGUE} and the tables of {TABLES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

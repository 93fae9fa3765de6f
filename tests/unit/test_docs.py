"""The documentation holds together: every relative link of the README and of docs/*.md reaches a file that exists
(and, with a #fragment, a heading of that page), every page of docs/ can be reached from the README, the README's two
commands stay at its top with the second one verbatim in CI, and the derived tables sit between their markers in the
page the generator writes.

Links inside code (fenced blocks, `inline code`) are text, not links, and are left alone; so are links with a scheme
(https:, mailto:).  Anchors follow GitHub's rule for headings: lower case, punctuation other than - and _ dropped,
spaces as hyphens, a repeated heading numbered -1, -2, ...
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
INLINE_CODE = re.compile(r"(`+).+?\1", re.S)
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def prose(text: str) -> str:
    """The page without its code: fenced blocks and inline code spans are blanked."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def links(page: Path) -> list[str]:
    return LINK.findall(prose(page.read_text()))


def slug(heading: str) -> str:
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text())):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I)


def resolve(page: Path, target: str) -> tuple[Path, str]:
    path, _, fragment = target.partition("#")
    return (page.parent / path).resolve() if path else page, fragment


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_relative_link_resolves(page):
    broken = []
    for target in filter(relative, links(page)):
        where, fragment = resolve(page, target)
        if not where.exists():
            broken.append(f"{target}: no such file {where}")
        elif fragment and where.suffix == ".md" and fragment not in anchors(where):
            broken.append(f"{target}: {where.name} has no heading #{fragment}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_link_checker_sees_links_and_catches_a_broken_one(tmp_path):
    """The checker is not vacuous: it finds the README's links, skips code, and reports a missing file or anchor."""
    assert len([t for t in links(ROOT / "README.md") if relative(t)]) >= 8
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other page\n\n## JSON report (`--format json`)\n\n## Twice\n\n## Twice\n")
    page.write_text("[a](other.md#json-report---format-json) [b](other.md#twice-1) ![c](missing.png)\n"
                    "[d](other.md#nowhere) `[e](ignored.md)`\n```\n[f](ignored-too.md)\n```\n[g](https://x.org/y)\n")
    found = links(page)
    assert found == ["other.md#json-report---format-json", "other.md#twice-1", "missing.png", "other.md#nowhere",
                     "https://x.org/y"]
    bad = [t for t in filter(relative, found)
           if not resolve(page, t)[0].exists() or (resolve(page, t)[1] and resolve(page, t)[1]
                                                   not in anchors(resolve(page, t)[0]))]
    assert bad == ["missing.png", "other.md#nowhere"]


def test_every_docs_page_is_reachable_from_the_readme():
    """A page no link leads to is a page nobody reads: follow the links from the README through docs/."""
    reached, todo = set(), [ROOT / "README.md"]
    while todo:
        page = todo.pop()
        if page in reached:
            continue
        reached.add(page)
        for target in filter(relative, links(page)):
            where, _ = resolve(page, target)
            if where.suffix == ".md" and where.exists() and (ROOT / "docs") in where.parents:
                todo.append(where)
    orphans = sorted(p.name for p in PAGES[1:] if p not in reached)
    assert not orphans, f"docs pages no link from the README leads to: {orphans}"


def test_the_readme_opens_with_its_two_commands_and_ci_runs_the_second_verbatim():
    lines = (ROOT / "README.md").read_text().splitlines()
    commands = [i for i, line in enumerate(lines) if line.startswith("python3 -m venv .venv && ")]
    assert len(commands) == 2 and commands[1] < 25, commands  # at the top, before any section
    first, second = (lines[i] for i in commands)
    assert "mha-check examples/correct_attention.py" in first and "mha-check examples/buggy_attention.py" in first
    assert second.endswith("-m pytest -n 2")
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert second in ci, "the README's test command is not the one .ci/run runs"


def test_the_derived_tables_sit_between_their_markers_in_the_page_the_generator_writes():
    """The generator (`python -m harness.frontends.catalogue`, run by .ci/regenerate) rewrites the tables between
    their markers in docs/checks.md; with the stored catalogue, the page is already what it would write."""
    import mutants
    from harness.frontends import catalogue

    page = catalogue.TABLES.read_text()
    for name in ("checks", "mutants"):
        assert page.count(f"<!-- BEGIN {name} table -->") == 1 and page.count(f"<!-- END {name} table -->") == 1
    assert catalogue.with_tables(page, catalogue.doc_tables(mutants.catalogue())) == page
    readme = (ROOT / "README.md").read_text()
    assert "<!-- BEGIN" not in readme, "a derived table in the README: the generator writes docs/checks.md only"

"""What the command line says about itself: --version, --help naming every subcommand, and defaults that are the
ones the documentation states, the README and every page of docs/ (a default documented in one place and changed in
the other is how 60 s and 120 s drifted apart)."""
import re
import subprocess
import sys
from importlib import metadata

import pytest

from conftest import ROOT
from harness.frontends.cli import SUBCOMMANDS
from harness.frontends.submissions import DEFAULT_PATTERN

pytestmark = pytest.mark.usefixtures("warm_single_runs")  # see conftest

DOC_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DOCS = " ".join(" ".join(page.read_text().split()) for page in DOC_PAGES)
DOCUMENTED = [((), "--time-limit"), ((), "--memory-mb"), ((), "--examples"),
              (("grade",), "--time-limit"), (("grade",), "--memory-mb"), (("grade",), "--jobs"),
              (("grade",), "--out"),
              (("autograder",), "--time-limit"), (("autograder",), "--memory-mb"), (("autograder",), "--examples")]
DEFAULT = re.compile(r"default:? ([^\s;),]+)")


def cli(*args):
    return subprocess.run([sys.executable, "-m", "harness.frontends.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)


def help_default(command: tuple, option: str) -> str:
    """The default an option's --help entry prints (its entry: its line and the deeper-indented lines after it)."""
    lines = cli(*command, "--help").stdout.splitlines()
    start = next(i for i, ln in enumerate(lines) if re.match(rf"\s+(-\w, )?{option}\b", ln))
    entry = [lines[start]]
    for line in lines[start + 1:]:
        if not line.startswith(" " * 8) or line.lstrip().startswith("-"):
            break
        entry.append(line)
    text = re.sub(r"-\s+", "-", " ".join(" ".join(entry).split()))  # argparse wraps at hyphens: mha-\ncheck
    found = DEFAULT.search(text)
    assert found, f"mha-check {' '.join(command)} --help states no default for {option}: {entry}"
    return found.group(1)


def readme_defaults(option: str) -> list[str]:
    """Every default the documentation states for `option`: in the clause after `--option` (up to a bracket, a
    semicolon, a full stop or the next option)."""
    out = []
    for m in re.finditer(rf"`{option}\b", DOCS):
        clause = re.split(r"[);]|\. |`--", DOCS[m.end():m.end() + 200])[0]
        found = DEFAULT.search(clause)
        if found:
            out.append(found.group(1))
    return out


@pytest.mark.parametrize("command, option", DOCUMENTED, ids=[f"{' '.join(c) or 'check'} {o}" for c, o in DOCUMENTED])
def test_documented_defaults_are_the_real_ones(command, option):
    printed = help_default(command, option)
    stated = readme_defaults(option)
    assert stated, f"the documentation states no default for {option}"
    assert set(stated) == {printed}, f"{option}: --help says {printed}, the documentation says {stated}"


def test_default_pattern_is_the_documented_one():
    assert f"`{DEFAULT_PATTERN}`" in DOCS


def test_version_is_the_installed_package_version():
    run = cli("--version")
    assert run.returncode == 0 and run.stdout.strip() == f"mha-check {metadata.version('mha-check')}"


def test_help_lists_every_subcommand_with_one_line():
    text = cli("--help").stdout
    for name, (_, line) in SUBCOMMANDS.items():
        assert re.search(rf"^\s+mha-check {name}\s+{re.escape(line)}$", text, re.M), name
        assert cli(name, "--help").returncode == 0, name


def test_the_readmes_sample_report_is_what_mha_check_prints():
    """The sample at the top of the README is the real report's opening (it once showed a fix line of the past)."""
    text = (ROOT / "README.md").read_text()
    sample = text.split("```\nmha-check examples/buggy_attention.py\n", 1)[1].split("  ...\n```", 1)[0]
    run = cli("examples/buggy_attention.py")
    assert run.stdout.startswith("mha-check examples/buggy_attention.py\n" + sample), run.stdout[:len(sample) + 200]

"""Outputs that stay honest whatever the student's code prints or raises: JUnit is always well-formed XML, control
and bidi characters are shown as visible escapes in every text format, and the student's words never render as
Markdown formatting on Gradescope's page (issue 27, item 6)."""
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

from checks import all_checks
from conftest import ROOT
from harness.engine.report import CheckResult, Report
from harness.render import formats

UNPRINTABLE = ROOT / "tests" / "hostile" / "unprintable.py"
# what XML 1.0 forbids in a document: C0 controls but tab, newline and carriage return; lone surrogates; U+FFFE/FFFF
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
EVERY_BAD = "".join(chr(i) for i in range(32)) + "\x7f\x85\x9b\ud800\udfff\ufffe\uffff"


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "harness.frontends.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def report_saying(message: str, output: str = "", target: str = "attention.py:MyAttn") -> Report:
    """A report whose output-shape check failed with `message` (the student's exception text) and whose code printed
    `output`; the checks that need output-shape skipped, the others passed."""
    results = [CheckResult(c.id, "fail" if c.id == "output-shape" else "pass", c.claim,
                           message if c.id == "output-shape" else "fine", c.kind, fix="fix it") for c in all_checks()]
    report = Report(target, results)
    report.student_output = output
    return report


def test_junit_is_valid_xml_whatever_a_message_or_the_output_holds():
    """Every character XML forbids, in a check's message, the printed output and the target's name, comes out as a
    visible escape: the document encodes as UTF-8 and parses."""
    report = report_saying(f"forward raised ValueError: a{EVERY_BAD}b", output=f"printed{EVERY_BAD}",
                           target=f"att{EVERY_BAD}.py:MyAttn")
    document = formats.junit(report)
    assert NOT_XML.search(document) is None
    root = ET.fromstring(document.encode("utf-8"))
    failure = next(c for c in root.iter("testcase") if c.get("name") == "output-shape").find("failure")
    for shown in ("\\x00", "\\x1b", "\\x7f", "\\ud800", "\\ufffe", "\\uffff"):
        assert shown in failure.get("message") and shown in failure.text and shown in root.find("system-out").text
    assert "\\x0d" in failure.get("message")  # a carriage return is shown, never a line that overwrites another


def test_junit_from_a_hostile_submission_parses():
    """The hostile submission prints, raises and names a parameter with every such character (a lone surrogate
    included): `--format junit` writes a document that an XML parser reads, and no traceback."""
    run = run_cli(f"{UNPRINTABLE}:MyAttn", "--format", "junit")
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr[-3000:]
    root = ET.fromstring(run.stdout.encode("utf-8"))
    failure = next(c for c in root.iter("testcase") if c.get("name") == "output-shape").find("failure")
    assert "\\x1b" in failure.get("message") and "\\x00" in failure.text
    assert "\\x1b" in root.find("system-out").text

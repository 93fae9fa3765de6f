"""`explain`'s diff of a mutant against the reference is numbered by the lines of the two files (a student's trial
opened reference/causal_mha.py at the hunk's line 10, counted from the class, and found another line)."""
import re

import mutants
from harness.frontends.teach import mutant_diff


def test_every_hunk_names_the_lines_of_both_files():
    for mid in mutants.ids():
        old = mutants.reference_path(mid).read_text().splitlines()
        new = mutants.source_path(mid).read_text().splitlines()
        diff = mutant_diff(mid).splitlines()
        for i, line in enumerate(diff):
            hunk = re.match(r"@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@", line)
            if not hunk:
                continue
            a, b = int(hunk[1]) - 1, int(hunk[2]) - 1
            for body in diff[i + 1:]:
                if body.startswith("@@"):
                    break
                if body.startswith(("-", " ")):
                    assert old[a] == body[1:], (mid, a + 1, body)
                    a += 1
                if body.startswith(("+", " ")):
                    assert new[b] == body[1:], (mid, b + 1, body)
                    b += 1


def test_a_hunk_says_in_words_which_file_its_numbers_count():
    """Student trial 20: "@@ -20,3 +44,3 @@" over one statement looked like meaningless numbers."""
    hunk = next(line for line in mutant_diff("mask-hides-past").splitlines() if line.startswith("@@"))
    assert re.fullmatch(r"@@ -(\d+),3 \+(\d+),3 @@ \(reference/causal_mha\.py from line \1, mutants/"
                        r"mask_hides_past\.py from line \2: the mutant's file starts with its story\)", hunk), hunk

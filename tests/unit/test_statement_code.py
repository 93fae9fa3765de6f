"""What a report's "you wrote" and a trace's line show (harness.child.notebook.code_at): a statement written over
several lines whole, joined into one line, capped; and the one-line fix written for such a statement
(harness.engine.rewrite), never for a part of it.  A student's trial was shown `context_vec =
F.scaled_dot_product_attention(`, the first of three lines, without the `dropout_p=self.dropout` that was the bug."""
from __future__ import annotations

import textwrap

import pytest

from harness.child import notebook
from harness.engine import rewrite

SOURCE = textwrap.dedent('''\
    import torch
    class A:
        def __init__(self,
                     d, h):  # the widths
            self.register_buffer("mask", torch.triu(torch.ones(4, 4),
                                                    diagonal=0), persistent=False)
            x = 1
            if (x and
                    d):
                pass
            s = """a
    b"""

        def forward(self, queries, keys, values):
            context_vec = F.scaled_dot_product_attention(
                queries, keys, values, attn_mask=None,  # (no mask: causal)
                dropout_p=self.dropout, is_causal=True)
            y = queries + \\
                keys
            z = torch.cat([
                queries,
                keys,
                values,
                keys,
                values,
                queries,
            ], dim=-1)
            qkv = self.qkv(queries).view(
                2, 3, 4,
            ).permute(2, 0, 1)
            t = (
                queries,
            )
            u = keys[
                0, 1,
            ]
    ''')

SDPA = ("context_vec = F.scaled_dot_product_attention(queries, keys, values, attn_mask=None, dropout_p=self.dropout, "
        "is_causal=True)")


@pytest.fixture()
def code(tmp_path):
    path = tmp_path / "attn.py"
    path.write_text(SOURCE)
    return lambda line: notebook.code_at(str(path), line)


@pytest.mark.parametrize(("line", "shown"), [
    (1, "import torch"),
    (3, "def __init__(self, d, h):"),  # a header over two lines, its comment left out
    (4, "def __init__(self, d, h):"),
    (5, 'self.register_buffer("mask", torch.triu(torch.ones(4, 4), diagonal=0), persistent=False)'),
    (6, 'self.register_buffer("mask", torch.triu(torch.ones(4, 4), diagonal=0), persistent=False)'),
    (7, "x = 1"),
    (8, "if (x and d):"),  # the header, not the whole if
    (10, "pass"),
    (11, 's = """a …'),  # a string over two lines is not joined: the line, and a sign that it goes on
    (15, SDPA), (16, SDPA), (17, SDPA),
    (18, "y = queries + keys"),  # a backslash's continuation
    (20, "z = torch.cat([ …"),  # longer than STATEMENT_LINES: the line, and a sign that it goes on
    # a comma the line break left before its closing bracket goes where it changes nothing (a call, two elements) ...
    (28, "qkv = self.qkv(queries).view(2, 3, 4).permute(2, 0, 1)"), (30, "qkv = self.qkv(queries).view(2, 3, 4)"
                                                                          ".permute(2, 0, 1)"),
    (34, "u = keys[0, 1]"),
    (31, "t = (queries,)"),  # ... and stays where it makes a tuple of one
])
def test_a_statement_over_several_lines_is_shown_whole_and_joined(code, line, shown):
    assert code(line) == shown


@pytest.mark.parametrize(("line", "statement"), [
    (7, ""), (11, ""), (20, ""),  # one line, or not joined: the line is its own place
    (3, "attn.py:3-4"), (4, "attn.py:3-4"), (15, "attn.py:15-17"), (17, "attn.py:15-17"), (30, "attn.py:28-30"),
])
def test_a_joined_statement_has_one_place_for_all_its_lines(tmp_path, line, statement):
    """A trace shows the operations of one statement under one heading: a `.view(` on line 28 and the `.permute(`
    of the same statement on line 30 had been two headings, each showing the whole statement."""
    path = tmp_path / "attn.py"
    path.write_text(SOURCE)
    assert notebook.statement_at(str(path), line) == statement


def test_a_fix_is_written_for_the_whole_statement_or_not_at_all():
    """SDPA's dropout_p, on in eval: the joined statement is corrected as a whole (one line that replaces all of
    it); the statement's first line alone, or a capped one, is no line to correct."""
    assert rewrite.own_line_fix("dropout", SDPA) == SDPA.replace("dropout_p=self.dropout",
                                                                 "dropout_p=self.dropout if self.training else 0.0")
    assert rewrite.own_line_fix("dropout", "context_vec = F.scaled_dot_product_attention(") is None
    assert rewrite.own_line_fix("dropout", "z = torch.cat([ …") is None
    assert rewrite.own_line_fix("diagonal", 'self.register_buffer("mask", torch.triu(torch.ones(4, 4), diagonal=0), '
                                            'persistent=False)') == \
        'self.register_buffer("mask", torch.triu(torch.ones(4, 4), diagonal=1), persistent=False)'


@pytest.mark.parametrize(("line", "fixed"), [
    ("y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.p, is_causal=True)",
     "y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0, is_causal=True)"),
    ("y = F.scaled_dot_product_attention(q, k, v, dropout_p=0.1, is_causal=True)",
     "y = F.scaled_dot_product_attention(q, k, v, dropout_p=0.1 if self.training else 0.0, is_causal=True)"),
    ("y = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0, is_causal=True)", None),  # no dropout at all
    ("y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0)", None),  # right
    ("y = F.scaled_dot_product_attention(q, k, v, is_causal=True)", None),
])
def test_sdpa_dropout_follows_the_mode_in_the_students_own_line(line, fixed):
    assert rewrite.own_line_fix("dropout", line) == fixed

"""The reading proven on the base configuration found again on another (Context._same_layout), where the number of
heads changes the names in the reading: a student's trial (issue 28) had per-head modules with raw (d, d/H)
matrices used as x @ W; proven with two heads (`heads.0.wq.T + heads.1.wq.T`, the orientation told by the shapes), it
was not found again with one head, where every head's matrix is square and both orientations are offered, and the
wrong one was taken: a correct layer failed reference-match and gradient-match at d=2, heads=1."""
import math

import torch
import torch.nn as nn

from harness.child.layouts import discover
from harness.engine.context import Context
from harness.engine.mapping import Mapping
from harness.wire import messages as m


class _Head(nn.Module):
    def __init__(self, d, dh):
        super().__init__()
        self.wq, self.wk, self.wv = (nn.Parameter(torch.randn(d, dh) / math.sqrt(d)) for _ in range(3))


class _Heads(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = nn.ModuleList(_Head(d, d // heads) for _ in range(heads))
        self.wo = nn.Parameter(torch.randn(d, d))
        self.bo = nn.Parameter(torch.zeros(d))


def _infos(d, heads):
    found, problem = discover(_Heads(d, heads), d, d, heads)
    assert found, problem
    return [m.LayoutInfo(lay.describe(), lay.how) for lay in found]


def _context_proven_as(layout: m.LayoutInfo) -> Context:
    ctx = Context.__new__(Context)
    ctx._mapping = Mapping(0, 0, "reference", dict(layout.roles), layout.how)
    ctx._layout_chosen = {}
    return ctx


def test_the_orientation_proven_with_two_heads_is_found_again_with_one():
    base = [lay for lay in _infos(8, 2) if lay.roles["wq"] == "heads.0.wq.T + heads.1.wq.T"
            and lay.roles["wo"] == "wo.T"]
    assert len(base) == 1  # with two heads the shapes tell q, k, v's orientation: only W_o's is open
    one = _infos(2, 1)
    assert {lay.roles["wq"] for lay in one} == {"heads.0.wq", "heads.0.wq.T"}  # square: both offered
    chosen = one[_context_proven_as(base[0])._same_layout(one)].roles
    assert (chosen["wq"], chosen["wk"], chosen["wv"], chosen["wo"]) == (
        "heads.0.wq.T", "heads.0.wk.T", "heads.0.wv.T", "wo.T")


def test_an_exact_match_still_decides_before_a_list_index_is_set_aside():
    """Readings that differ only by which list index plays a role keep being told apart by their names."""
    proven = m.LayoutInfo({"wq": "qkv.0.weight", "wk": "qkv.1.weight", "wv": "qkv.2.weight", "wo": "o.weight"}, "x")
    swapped = m.LayoutInfo({"wq": "qkv.1.weight", "wk": "qkv.0.weight", "wv": "qkv.2.weight", "wo": "o.weight"}, "x")
    same = m.LayoutInfo(dict(proven.roles), "x")
    assert _context_proven_as(proven)._same_layout([swapped, same]) == 1

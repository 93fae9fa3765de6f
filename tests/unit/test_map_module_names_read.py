"""`--map q=linear_q` names a MODULE: its reading's piece is "linear_q", which stands for linear_q.weight (and its
bias).  The report's "your layer also keeps ..., which no reading takes for W_q, W_k, W_v, W_o or a bias" listed
linear_q.weight, linear_k.weight, linear_v.weight and linear_o.weight - the very parameters the user had mapped to
those roles (tests/realzoo/cyberzhg_mha_relu_activation_history_mask_arg.py with the four --map options)."""
import time
from types import SimpleNamespace

import torch.nn as nn

from harness.child.layouts import explicit
from harness.engine.mapping import unread_parameters


class Named(nn.Module):
    def __init__(self, d=8, extra=False):
        super().__init__()
        self.linear_q, self.linear_k, self.linear_v, self.linear_o = (nn.Linear(d, d) for _ in range(4))
        if extra:
            self.gate = nn.Linear(d, d, bias=False)


def _unread(module, mapping):
    layouts, problem = explicit(module, mapping, 8, 8, heads=2)
    assert not problem and layouts
    info = SimpleNamespace(layouts=[SimpleNamespace(roles=lay.describe()) for lay in layouts],
                           params=[SimpleNamespace(name=n, shape=tuple(p.shape)) for n, p in module.named_parameters()])
    return [name for name, _ in unread_parameters(info)]


def test_a_mapped_module_s_weight_and_bias_are_read():
    assert _unread(Named(), {"q": "linear_q", "k": "linear_k", "v": "linear_v", "o": "linear_o"}) == []


def test_a_parameter_no_reading_takes_is_still_told():
    mapping = {"q": "linear_q", "k": "linear_k", "v": "linear_v", "o": "linear_o"}
    assert _unread(Named(extra=True), mapping) == ["gate.weight"]


def test_a_weight_mapped_by_its_parameter_name_brings_its_bias():
    """Student trial 20: `--map o=to_out.weight` left to_out.bias unread, and a correct layer failed param-count with
    "to_out.bias plays no role in the lesson's layer"; a Linear's weight named brings its bias, as its module does."""
    mapping = {"q": "linear_q.weight", "k": "linear_k.weight", "v": "linear_v.weight", "o": "linear_o.weight"}
    assert _unread(Named(), mapping) == []
    layouts, _ = explicit(Named(), mapping, 8, 8, heads=2)
    assert layouts[0].describe()["bo"] == "linear_o.bias"


def test_a_bias_mapped_apart_is_not_replaced_by_the_weight_s_sibling():
    mapping = {"bo": "linear_q.bias", "q": "linear_q.weight", "k": "linear_k.weight", "v": "linear_v.weight",
               "o": "linear_o.weight"}
    layouts, problem = explicit(Named(), mapping, 8, 8, heads=2)
    assert not problem and layouts[0].describe()["bo"] == "linear_q.bias"


def test_a_reading_s_text_is_read_in_linear_time_whatever_the_child_sends():
    """Red team 15: a patched worker's reading with a piece of `[`s and no `]` held the parent for a time quadratic in
    its length (the lazy regex of a bracketed index; 40,000 took five minutes over a run's 250 calls)."""
    info = SimpleNamespace(layouts=[SimpleNamespace(roles={"wq": "W_q.weight + " + "[" * 200_000,
                                                           "wk": "c_attn.weight.T[0:6]", "wv": "qkv[:, 0][1]"})],
                           params=[SimpleNamespace(name=n, shape=(2, 2)) for n in
                                   ("W_q.weight", "c_attn.weight", "qkv", "gate")])
    start = time.thread_time()
    assert [name for name, _ in unread_parameters(info)] == ["gate"]
    assert time.thread_time() - start < 0.5  # quadratic: about 140 s

"""Grouped-query layers built from a config object (Hugging Face's `LlamaAttention(config)`): the zoo's pair
(tests/zoo/correct/gqa_hf_llama_config.py, tests/zoo/buggy/gqa_hf_llama_config_repeat.py) proven against an
independent float64 computation, and the adapter's evidence that such a class is grouped (the settings it read
off mha-check's config object)."""
import importlib.util
import types

import numpy as np
import pytest
import torch

from conftest import ZOO
from harness.child import construct
from harness.engine import grouped
from harness.wire.config import Config


def _zoo(kind: str, name: str):
    path = ZOO / kind / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"zoo_{kind}_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, module.TARGET)


CORRECT = _zoo("correct", "gqa_hf_llama_config")
BUGGY = _zoo("buggy", "gqa_hf_llama_config_repeat")


def _hf_config(d, heads, kv, bias=True):
    """A plain config object, as transformers' LlamaConfig holds them (no head_dim: the class derives it)."""
    return types.SimpleNamespace(hidden_size=d, num_attention_heads=heads, num_key_value_heads=kv,
                                 attention_dropout=0.0, attention_bias=bias)


def _truth(x, heads, weights, pair):
    """Causal grouped-query attention in float64 numpy, one query head at a time: query head h reads key/value head
    pair(h) (h // group for grouped-query attention), scores scaled by 1/sqrt(dh), the future's scores left out of
    the softmax (not filled), the heads concatenated, then W_o."""
    (wq, bq), (wk, bk), (wv, bv), (wo, bo) = weights
    B, n, _ = x.shape
    dh = wq.shape[0] // heads
    q, k, v = x @ wq.T + bq, x @ wk.T + bk, x @ wv.T + bv
    out = np.zeros((B, n, wq.shape[0]))
    for b in range(B):
        for h in range(heads):
            g = pair(h)
            qh, kh, vh = q[b, :, h * dh:(h + 1) * dh], k[b, :, g * dh:(g + 1) * dh], v[b, :, g * dh:(g + 1) * dh]
            for t in range(n):
                s = kh[:t + 1] @ qh[t] / np.sqrt(dh)
                p = np.exp(s - s.max())
                out[b, t, h * dh:(h + 1) * dh] = (p / p.sum()) @ vh[:t + 1]
    return out @ wo.T + bo


def _run(cls, d, heads, kv, seed=0):
    """The layer's output in float64 (its softmax runs in float32 as Hugging Face's does: hence rtol 1e-6 below,
    where a float64 softmax would agree to 1e-12), with its weights."""
    torch.manual_seed(seed)
    m = cls(_hf_config(d, heads, kv)).double().eval()
    x = torch.randn(2, 5, d, dtype=torch.float64)
    with torch.no_grad():
        y, _ = m(x)
    weights = [(lin.weight.detach().numpy(), lin.bias.detach().numpy())
               for lin in (m.q_proj, m.k_proj, m.v_proj, m.o_proj)]
    return x.numpy(), y.numpy(), weights


@pytest.mark.parametrize("d,heads,kv", [(8, 4, 2), (12, 6, 3), (12, 6, 2), (6, 3, 1), (8, 4, 4)])
def test_the_correct_config_layer_is_grouped_query_attention(d, heads, kv):
    x, y, weights = _run(CORRECT, d, heads, kv)
    assert weights[1][0].shape == (kv * d // heads, d)  # narrower K/V: kv_heads · dh rows
    group = heads // kv
    np.testing.assert_allclose(y, _truth(x, heads, weights, lambda h: h // group), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("d,heads,kv", [(8, 4, 2), (12, 6, 3), (12, 6, 2)])
def test_the_buggy_config_layer_pairs_query_heads_with_the_wrong_key_value_heads(d, heads, kv):
    x, y, weights = _run(BUGGY, d, heads, kv)
    group = heads // kv
    right = _truth(x, heads, weights, lambda h: h // group)
    assert np.abs(y - right).max() > 1e-3  # wrong, by far more than rounding
    np.testing.assert_allclose(y, _truth(x, heads, weights, lambda h: h % kv), rtol=1e-6, atol=1e-7)  # tiled


@pytest.mark.parametrize("d,heads,kv", [(6, 3, 1), (8, 4, 4)])
def test_the_buggy_config_layer_is_right_with_one_or_every_key_value_head(d, heads, kv):
    """Why a config with multi-query attention, or as many key/value heads as heads, cannot find it."""
    x, y, weights = _run(BUGGY, d, heads, kv)
    np.testing.assert_allclose(y, _truth(x, heads, weights, lambda h: h // (heads // kv)), rtol=1e-6, atol=1e-7)


def test_the_config_object_records_what_the_class_read():
    cfg = Config(d_in=8, d_out=8, heads=4, context_length=7, kv_heads=2)
    reads: set = set()
    m = construct.build(CORRECT, cfg, {}, construct.read_signature(CORRECT, {}), reads)
    assert m.k_proj.weight.shape == (4, 8)  # built with 2 key/value heads of width 2
    said = construct.config_reads(reads)
    assert said["num_key_value_heads"] == "kv_heads" and said["hidden_size"] == "width"
    assert said["num_attention_heads"] == "heads" and said["head_dim"] == "head_width"
    sig = construct.read_signature(CORRECT, {})
    assert sig.config_param == "config" and not grouped.is_grouped(sig)  # the signature alone cannot say
    assert grouped.is_grouped(sig, said)


def test_a_config_layer_that_reads_no_key_value_heads_is_not_grouped():
    class NanoGPTStyle(torch.nn.Module):
        def __init__(self, config):
            super().__init__()
            self.c_attn = torch.nn.Linear(config.n_embd, 3 * config.n_embd)
            self.heads = config["n_head"]  # read as an item
            _ = "num_key_value_heads" in config  # asking whether a setting exists reads nothing

    cfg = Config(d_in=8, d_out=8, heads=4, context_length=7, kv_heads=2)
    reads: set = set()
    construct.build(NanoGPTStyle, cfg, {}, construct.read_signature(NanoGPTStyle, {}), reads)
    said = construct.config_reads(reads)
    assert said == {"n_embd": "width", "n_head": "heads"}
    assert not grouped.is_grouped(construct.read_signature(NanoGPTStyle, {}), said)


def test_an_arg_for_a_config_objects_key_value_heads_is_a_preference():
    """--arg num_key_value_heads=2 on a config layer: 2 where it divides the heads, as for a parameter (a literal 2
    would make the 3-head configuration refuse to build)."""
    overrides = {"num_key_value_heads": 2}
    sig = construct.read_signature(CORRECT, overrides)
    three = Config(d_in=6, d_out=6, heads=3, context_length=4, kv_heads=None)
    assert construct.config_bag(three, overrides).num_key_value_heads == 3
    assert construct.config_bag(Config(d_in=8, d_out=8, heads=4, context_length=7, kv_heads=2),
                                overrides)["num_key_value_heads"] == 2
    said = {"num_key_value_heads": "kv_heads"}
    assert grouped.preferred_kv(sig, overrides, said) == 2
    assert construct.config_bag(three, {"rope_theta": 500000.0}).rope_theta == 500000.0  # other settings: as given


def test_an_expand_of_several_key_value_heads_is_its_own_finding():
    """mqa-expand-not-repeat's error names its numbers: the heads (4) stretched from the key/value heads (2)."""
    from checks.output_shape import EXPANDED, _raised_finding
    message = ("RuntimeError: The expanded size of the tensor (4) must match the existing size (2) at non-singleton "
               "dimension 1.  Target sizes: [2, 4, 5, 2].  Tensor sizes: [2, 2, 5, 2] (at attn.py:30 in forward)")
    assert _raised_finding(message, Config(d_in=8, d_out=8, heads=4, context_length=7, kv_heads=2)) == EXPANDED
    other = _raised_finding(message, Config(d_in=8, d_out=8, heads=4, context_length=7))  # no key/value heads
    assert other.startswith("raised: ")


REFUSES_GROUPS = '''
import torch
import torch.nn as nn


class Attn(nn.Module):
    """Plain multi-head attention that reads num_key_value_heads only to refuse grouping."""

    def __init__(self, config):
        super().__init__()
        if config.num_key_value_heads != config.num_attention_heads:
            raise ValueError("grouped-query attention is not supported")
        self.h = config.num_attention_heads
        d = config.hidden_size
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.register_buffer("mask", torch.triu(torch.ones(64, 64, dtype=torch.bool), 1))

    def forward(self, x):
        B, n, d = x.shape
        q, k, v = (t.view(B, n, self.h, d // self.h).transpose(1, 2) for t in self.qkv(x).split(d, -1))
        w = ((q @ k.transpose(2, 3)) / (d // self.h) ** 0.5).masked_fill(self.mask[:n, :n], float("-inf"))
        return self.out((w.softmax(-1) @ v).transpose(1, 2).reshape(B, n, d))
'''


def _checked(path, only):
    from harness.child.inprocess import InProcess
    from harness.sandbox.subject import Subject
    from harness.engine.runner import Options, run_checks
    opts = Options(only=only, examples=1, diagnose=False)
    return run_checks(path, opts, subject=Subject(path, opts.overrides, opts.seed, start=InProcess()))


def test_a_config_layer_that_refuses_the_grouped_probe_is_checked_as_plain_attention(tmp_path):
    """Reading num_key_value_heads is evidence of a grouped layer only where the class builds with fewer key/value
    heads: one that refuses them is the plain layer it says it is, never failed for it."""
    path = tmp_path / "refuses.py"
    path.write_text(REFUSES_GROUPS)
    report = _checked(f"{path}:Attn", ["construct", "param-count", "reference-match"])
    assert [(c.id, c.message) for c in report.checks if c.status != "pass"] == []
    assert "grouped" not in report["param-count"].message


def test_the_llama_style_config_layer_is_built_with_two_and_one_key_value_heads():
    report = _checked(str(ZOO / "correct" / "gqa_hf_llama_config.py") + ":LlamaStyleAttention",
                      ["construct", "param-count"])
    assert "grouped-query" in report["param-count"].message
    built = report["construct"].details["built"]
    assert any("kv_heads=2" in b for b in built) and any("kv_heads=1" in b for b in built), built

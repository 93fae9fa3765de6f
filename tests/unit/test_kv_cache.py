"""The kv-cache check on its own, in this process: the ways of driving a cache (harness.child.cache) are found from
the forward's parameters and proved by the numbers; a layer without a cache passes with "does not apply", a cache
mha-check cannot drive is cannot tell, and each cache mistake fails with its own finding."""
from __future__ import annotations

import io
import numpy as np
import pytest
import torch

import mutants
from conftest import ROOT
from harness.child import cache, worker
from harness.child.inprocess import InProcess
from harness.sandbox.subject import Subject
from harness.engine.runner import Options, run_checks
from harness.wire import budget, protocol
from harness.wire import messages as m
from harness.wire.config import Config
from reference.cached_mha import CausalMHA as Cached
from reference.causal_mha import CausalMHA as Plain

CACHED = f"{ROOT / 'reference' / 'cached_mha.py'}:CausalMHA"
PLAIN = f"{ROOT / 'reference' / 'causal_mha.py'}:CausalMHA"

# a correct layer whose cache is an argument handed back and forth (Hugging Face's past_key_value)
HF_STYLE = '''
import torch
import torch.nn as nn


class Attn(nn.Module):
    def __init__(self, d_in, d_out, context_length, num_heads):
        super().__init__()
        self.h, self.dh = num_heads, d_out // num_heads
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(d_in, d_out, bias=False) for _ in range(3))
        self.o_proj = nn.Linear(d_out, d_out)

    def forward(self, x, past_key_value=None, use_cache=False):
        b, n, _ = x.shape
        split = lambda t: t.view(b, n, self.h, self.dh).transpose(1, 2)
        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        if past_key_value is not None:
            k, v = torch.cat([past_key_value[0], k], dim=2), torch.cat([past_key_value[1], v], dim=2)
        keys = k.shape[2]
        future = torch.ones(n, keys, dtype=torch.bool, device=x.device).triu(keys - n + 1)
        w = torch.softmax((q @ k.transpose(2, 3) / self.dh ** 0.5).masked_fill(future, float("-inf")), -1)
        out = self.o_proj((w @ v).transpose(1, 2).reshape(b, n, self.h * self.dh))
        return out, ((k, v) if use_cache else None)
'''

# Meta llama's way: a cache of its own, preallocated, written at start_pos
POSITIONS_STYLE = '''
import torch
import torch.nn as nn


class Attn(nn.Module):
    def __init__(self, d_in, d_out, context_length, num_heads, max_batch_size=4):
        super().__init__()
        self.h, self.dh = num_heads, d_out // num_heads
        self.wq, self.wk, self.wv = (nn.Linear(d_in, d_out, bias=False) for _ in range(3))
        self.wo = nn.Linear(d_out, d_out)
        self.register_buffer("cache_k", torch.zeros(max_batch_size, context_length, num_heads, self.dh),
                             persistent=False)
        self.register_buffer("cache_v", torch.zeros(max_batch_size, context_length, num_heads, self.dh),
                             persistent=False)

    def forward(self, x, start_pos=0):
        b, n, _ = x.shape
        q = self.wq(x).view(b, n, self.h, self.dh)
        self.cache_k[:b, start_pos:start_pos + n] = self.wk(x).view(b, n, self.h, self.dh)
        self.cache_v[:b, start_pos:start_pos + n] = self.wv(x).view(b, n, self.h, self.dh)
        k, v = self.cache_k[:b, :start_pos + n], self.cache_v[:b, :start_pos + n]
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        future = torch.ones(n, start_pos + n, dtype=torch.bool, device=x.device).triu(start_pos + 1)
        w = torch.softmax((q @ k.transpose(2, 3) / self.dh ** 0.5).masked_fill(future, float("-inf")), -1)
        return self.wo((w @ v).transpose(1, 2).reshape(b, n, self.h * self.dh))
'''


def run(target: str, **options):
    opts = Options(only=["kv-cache"], examples=2, diagnose=False, **options)
    return run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))["kv-cache"]


def _written(tmp_path, source: str, name: str = "attn.py") -> str:
    path = tmp_path / name
    path.write_text(source)
    return f"{path}:Attn"


def test_the_ways_of_driving_a_cache_are_found_from_the_forward_and_the_methods():
    torch.manual_seed(0)
    assert cache.find_api(Cached(6, 2, 7)) == (cache.Api("internal", flag="use_cache", reset="reset_cache"), "")
    assert cache.find_api(Plain(6, 2, 7)) == (None, "")

    class Arg(torch.nn.Module):
        def forward(self, x, kv_cache=None):
            return x, kv_cache

    class Needs(torch.nn.Module):
        def forward(self, x, cache):
            return x

    class ResetOnly(torch.nn.Module):
        def forward(self, x):
            return x

        def clear_cache(self):
            pass

    class RotaryOffset(torch.nn.Module):  # a position argument, but no cache anywhere
        def forward(self, x, start_pos=0):
            return x

    assert cache.find_api(Arg()) == (cache.Api("argument", cache_arg="kv_cache"), "")
    assert cache.find_api(Needs())[0] is None and "factory" in cache.find_api(Needs())[1]
    assert cache.find_api(ResetOnly())[0] is None and "clear_cache()" in cache.find_api(ResetOnly())[1]
    assert cache.find_api(RotaryOffset()) == (None, "")


def test_the_worker_decodes_chunk_by_chunk_and_says_when_there_is_no_cache():
    torch.set_default_dtype(torch.float64)
    try:
        w = worker.Worker(own_process=False)
        w.answer(m.Load(CACHED, str(ROOT), submission=False))
        handle = w.answer(m.Build(Config(6, 8, 2, 7).to_dict(), handle=0)).handle
        x = np.random.default_rng(0).standard_normal((2, 5, 6))
        full = w.answer(m.Forward(handle, x)).y
        got = w.answer(m.CacheRun(handle, x, [2, 1, 1, 1]))
        again = w.answer(m.CacheRun(handle, x, [3, 1, 1]))
        plain = worker.Worker(own_process=False)
        plain.answer(m.Load(PLAIN, str(ROOT), submission=False))
        plain.answer(m.Build(Config(6, 8, 2, 7).to_dict(), handle=0))
        none = plain.answer(m.CacheRun(0, x, [2, 1, 1, 1]))
    finally:
        torch.set_default_dtype(torch.float32)
    assert got.kind == "internal" and got.grows and got.raised_at == -1 and "reset_cache()" in got.api
    np.testing.assert_allclose(got.y, full, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(again.y, full, rtol=1e-12, atol=1e-12)
    assert (none.api, none.problem, none.y) == ("", "", None)


def test_the_cache_request_and_its_reply_cross_the_wire_and_fit_the_budget():
    x = np.zeros((2, 5, 6))
    request = m.CacheRun(3, x, [2, 1, 1, 1], reset=False, style=1)
    header, arrays = protocol.decode(io.BytesIO(m.encode_batch([request])))
    (sent,) = m.decode_requests(header, arrays)
    assert (sent.handle, sent.chunks, sent.reset, sent.style) == (3, [2, 1, 1, 1], False, 1)
    assert np.array_equal(sent.x, x)
    reply = m.CacheResult("forward(x, use_cache=True)", "internal", y=np.ones((2, 5, 8)), grows=True)
    header, arrays = protocol.decode(io.BytesIO(m.encode_batch([reply])))
    (back,) = m.decode_replies(header, arrays)
    assert back.api == reply.api and back.grows and np.array_equal(back.y, reply.y)
    assert budget.reply_elements(request, Config(6, 8, 2, 7)) == 2 * 5 * 8


def test_the_cached_reference_passes_and_a_layer_without_a_cache_does_not_apply():
    assert run(CACHED).status == "pass"
    rotary = run(f"{ROOT / 'reference' / 'cached_rotary_mha.py'}:CausalMHA")  # kvcache-rope-*'s reference
    assert rotary.status == "pass" and "is right too" in rotary.message, rotary.message
    plain = run(PLAIN)
    assert plain.status == "pass" and plain.message.startswith("does not apply")
    assert plain.not_applicable and not rotary.not_applicable  # counted apart from the verified passes


@pytest.mark.parametrize("source", [HF_STYLE, POSITIONS_STYLE], ids=["past_key_value", "start_pos"])
def test_correct_caches_in_other_styles_pass(tmp_path, source):
    result = run(_written(tmp_path, source))
    assert result.status == "pass" and "every position" in result.message, result.message


def test_a_cache_argument_that_returns_no_cache_does_not_apply(tmp_path):
    """whisper's self-attention: forward(x, kv_cache=None) returns (out, attention weights), the cache is filled by
    hooks of the model's: decoding with what it returns would blame a correct layer."""
    source = HF_STYLE.replace("past_key_value=None, use_cache=False", "kv_cache=None").replace(
        "if past_key_value is not None:", "if False:").replace("return out, ((k, v) if use_cache else None)",
                                                               "return out, w")
    result = run(_written(tmp_path, source))
    assert result.status == "pass" and result.message.startswith("does not apply"), result.message


def test_attention_weights_returned_beside_a_cache_object_argument_are_not_taken_for_the_cache(tmp_path):
    """Hugging Face's CTRL (tests/realzoo/hf_ctrl_mha_values_first_additive_1e4.py): forward(x, layer_past=None, ...)
    calls layer_past.update(k, v) (a transformers Cache object) and returns (out, attention weights).  The weights,
    (B, H, n, n), hold every token fed, so they were handed back as layer_past and the second call raised
    AttributeError: kv-cache failed a layer whose cache mha-check cannot make."""
    source = HF_STYLE.replace("past_key_value=None, use_cache=False", "layer_past=None, use_cache=False").replace(
        "if past_key_value is not None:\n            k, v = torch.cat([past_key_value[0], k], dim=2), "
        "torch.cat([past_key_value[1], v], dim=2)",
        "if layer_past is not None:\n            k, v = layer_past.update(k, v)").replace(
        "return out, ((k, v) if use_cache else None)", "return out, w")
    assert "layer_past.update" in source and "return out, w" in source
    result = run(_written(tmp_path, source))
    assert result.status == "pass" and result.message.startswith("does not apply"), result.message


def test_keys_and_values_stacked_with_a_head_width_equal_to_the_tokens_are_still_a_cache():
    """GPT-2's `present` is torch.stack((k^T, v)): (2, B, H, tokens, dh).  With heads of width 2 and a prefix of two
    tokens its last two axes are (2, 2), the shape of attention weights too: taken for weights, the cache was never
    handed back and a correct layer failed kv-cache (tests/realzoo/hf_pytorch_pretrained_bert_gpt2_attention.py).
    Weights are told by their rows, which sum to 1."""
    torch.manual_seed(0)
    stacked = torch.randn(2, 2, 3, 2, 2)
    weights = torch.softmax(torch.randn(2, 3, 2, 2), dim=-1)
    assert not cache._attention_weights(stacked, 2, 2)
    assert cache._attention_weights(weights, 2, 2)
    assert not cache._attention_weights(weights, 2, 3)


def test_a_cache_whose_first_call_does_not_reproduce_the_reference_is_cannot_tell(tmp_path):
    source = HF_STYLE.replace("return out, ((k, v) if use_cache else None)",
                              "return (2 * out if use_cache else out), ((k, v) if use_cache else None)")
    result = run(_written(tmp_path, source))
    assert result.status == "cannot_tell" and "empty cache" in result.message and "factory" in result.help


def test_a_cache_whose_first_call_attends_to_the_future_fails_not_cannot_tell(tmp_path):
    """A student's layer read its cache's length after appending the new keys (`start = self.past_k.shape[2]`), so
    on an empty cache the prompt's rows of the mask were cut past it and every token saw the later ones: the first
    call reproduced no reference and kv-cache said cannot tell.  Its output is attention with no causal mask."""
    source = HF_STYLE.replace("triu(keys - n + 1)", "triu(keys - n + 1 + (n if use_cache else 0))")
    result = run(_written(tmp_path, source))
    assert result.status == "fail" and result.details["finding"] == "prefix unmasked", result.message
    assert "before the new keys are appended" in result.fix


@pytest.mark.parametrize("mutant,finding", [("kvcache-mask-not-offset", "mask not offset"),
                                            ("kvcache-wrong-axis", "append shapes"),
                                            ("kvcache-not-reset", "not reset"),
                                            ("kvcache-position-not-advanced", "decode drifts"),
                                            ("kvcache-chunk-unmasked", "chunk unmasked"),
                                            ("kvcache-rope-positions-not-advanced", "rotary positions from 0")])
def test_each_cache_mistake_fails_with_its_own_finding(mutant, finding):
    result = run(f"{mutants.source_path(mutant)}:CausalMHA")
    assert result.status == "fail" and result.details["finding"] == finding, result.message


def test_a_layer_wrong_without_its_cache_is_not_judged_on_its_cache(tmp_path):
    """reference-match reports the layer's mistake; kv-cache does not blame the cache for it."""
    source = (ROOT / "reference" / "cached_mha.py").read_text().replace(" / self.dh ** 0.5", "")
    path = tmp_path / "unscaled.py"
    path.write_text(source)
    result = run(f"{path}:CausalMHA")
    assert result.status == "skip" and "reference-match" in result.message


def test_without_a_certain_mapping_a_layer_without_a_cache_still_does_not_apply(tmp_path):
    source = (ROOT / "reference" / "causal_mha.py").read_text()
    for old, new in [("self.q, self.k, self.v", "self.a, self.b, self.c"),
                     ("split(self.q(x)), split(self.k(x)), split(self.v(x))",
                      "split(self.a(x)), split(self.b(x)), split(self.c(x))"),
                     ("self.out = nn.Linear(d_out, d_out)", "self.mix = nn.Linear(d_out, d_out)"),
                     ("self.out(ctx)", "self.mix(ctx)")]:
        source = source.replace(old, new)
    plain = tmp_path / "odd.py"
    plain.write_text(source)
    result = run(f"{plain}:CausalMHA")
    assert result.status == "pass" and result.message.startswith("does not apply"), result.message


def test_a_chunk_of_new_tokens_is_decoded_too_and_only_the_chunk_mistake_shows_there():
    """kvcache-chunk-unmasked decodes one token per call right (its skipped mask would hide nothing there), and
    fails only on the call of two new tokens after the prefix; the reference passes that call."""
    passed = run(CACHED)
    assert "a chunk of 2 new tokens in one call after the prefix is right too" in passed.message, passed.message
    failed = run(f"{mutants.source_path('kvcache-chunk-unmasked')}:CausalMHA")
    assert "then 2 new tokens in one call" in failed.message and "sees token" in failed.observed


def test_a_mask_sized_to_the_chunk_alone_raises_for_two_new_tokens(tmp_path):
    """rasbt's first KV cache (ch04, before pull request #697): mask[:n, :n] is right for one new token, a (1, 1)
    keep broadcast over every cached key, and does not fit the (2, ptr + 2) scores of two: a failure on evidence."""
    source = (ROOT / "reference" / "cached_mha.py").read_text().replace(
        "self.mask[start:start + n, :k.shape[2]]", "self.mask[:n, :n]")
    result = run(_written(tmp_path, source.replace("class CausalMHA", "class Attn")))
    assert result.status == "fail" and result.details["finding"] == "chunk raised", result.message
    assert "the call with 2 new tokens raised" in result.message


def test_a_layer_given_a_mask_by_mha_check_is_not_fed_a_chunk(tmp_path):
    """A causal mask mha-check gives a call is the chunk's own (n, n): right for a prompt and for one new token, not
    for two after cached ones, so such a layer is decoded one token at a time only, and the message says so."""
    source = HF_STYLE.replace("past_key_value=None, use_cache=False", "mask, past_key_value=None, use_cache=False")
    source = source.replace("        b, n, _ = x.shape", "        b, n, _ = x.shape\n        del mask  # makes its own")
    result = run(_written(tmp_path, source))
    assert result.status == "pass" and "was not tried" in result.message, result.message


def _zoo_class(kind: str, name: str):
    import importlib.util
    from conftest import ZOO
    spec = importlib.util.spec_from_file_location(f"zoo_{kind}_{name}", ZOO / kind / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, module.TARGET)


def _causal_truth(x, m, heads):
    """Causal MHA in float64 numpy, token by token (each query over the keys up to itself), on m's weights."""
    lin = lambda layer, t: t @ layer.weight.detach().numpy().T + layer.bias.detach().numpy()
    q, k, v = lin(m.q_proj, x), lin(m.k_proj, x), lin(m.v_proj, x)
    B, n, d = x.shape
    dh = d // heads
    out = np.zeros((B, n, d))
    for b in range(B):
        for h in range(heads):
            cols = slice(h * dh, (h + 1) * dh)
            for t in range(n):
                s = k[b, :t + 1, cols] @ q[b, t, cols] / np.sqrt(dh)
                p = np.exp(s - s.max())
                out[b, t, cols] = (p / p.sum()) @ v[b, :t + 1, cols]
    return lin(m.out_proj, out)


def _decode_past(m, x, chunks):
    past, outs, fed = None, [], 0
    with torch.no_grad():
        for size in chunks:
            y, past = m(torch.from_numpy(x[:, fed:fed + size]), past_key_value=past, use_cache=True)
            outs.append(y.numpy())
            fed += size
    return np.concatenate(outs, axis=1)


@pytest.mark.parametrize("heads", [2, 4])
def test_the_zoo_past_key_value_pair_against_an_independent_float64_computation(heads):
    """tests/zoo/correct/kv_cache_sdpa_past.py decodes a prompt, 2 new tokens in one call and single tokens as the
    full causal forward does; its buggy sibling decodes single tokens right and lets the chunk's first token see
    the second (exactly the output of attention over tokens 0..3 for token 2)."""
    torch.manual_seed(3)
    right, wrong = _zoo_class("correct", "kv_cache_sdpa_past"), _zoo_class("buggy", "kv_cache_sdpa_past_chunk")
    x = np.random.default_rng(4).standard_normal((2, 6, 8))
    for cls in (right, wrong):
        torch.manual_seed(5)
        m = cls(8, heads).double().eval()
        truth = _causal_truth(x, m, heads)
        np.testing.assert_allclose(m(torch.from_numpy(x))[0].detach().numpy(), truth, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(_decode_past(m, x, [2, 1, 1, 1, 1]), truth, rtol=1e-10, atol=1e-12)
        chunked = _decode_past(m, x, [2, 2, 1, 1])
        if cls is right:
            np.testing.assert_allclose(chunked, truth, rtol=1e-10, atol=1e-12)
        else:
            assert np.abs(chunked[:, 2] - truth[:, 2]).max() > 1e-3
            sees_next = _causal_truth(np.concatenate([x[:, :2], x[:, 3:4], x[:, 2:3]], axis=1), m, heads)[:, 3]
            np.testing.assert_allclose(chunked[:, 2], sees_next, rtol=1e-10, atol=1e-12)  # keys 0..3, order free
            np.testing.assert_allclose(chunked[:, 3], truth[:, 3], rtol=1e-10, atol=1e-12)  # the last sees all


def test_a_cache_dict_passed_as_block_kv_cache_is_driven(tmp_path):
    """nanoVLM's LanguageModelGroupedQueryAttention (its pattern:
    tests/zoo/buggy/gqa_rope_dict_cache_chunk_unmasked.py):
    forward(x, cos, sin, attention_mask=None, block_kv_cache=None) returns (y, {'key': k, 'value': v}), always;
    the name was not known, so kv-cache said "does not apply" and its chunk bug went unseen."""
    source = HF_STYLE.replace("past_key_value=None, use_cache=False", "block_kv_cache=None").replace(
        "if past_key_value is not None:\n            k, v = torch.cat([past_key_value[0], k], dim=2), "
        "torch.cat([past_key_value[1], v], dim=2)",
        "if block_kv_cache is not None:\n            k = torch.cat([block_kv_cache['key'], k], dim=2)\n"
        "            v = torch.cat([block_kv_cache['value'], v], dim=2)").replace(
        "return out, ((k, v) if use_cache else None)", "return out, {'key': k, 'value': v}")
    assert "block_kv_cache['key']" in source and "'value': v}" in source
    result = run(_written(tmp_path, source))
    assert result.status == "pass" and "every position" in result.message, result.message


def _prenorm(source: str) -> str:
    """HF_STYLE with an nn.RMSNorm kept inside the layer, applied to x first (a pre-norm kept inside, as
    speculative-decoding's CausalAttention does: tests/realzoo/lucidrains_speculative_decoding_*)."""
    out = source.replace("        self.o_proj = nn.Linear(d_out, d_out)\n",
                         "        self.o_proj = nn.Linear(d_out, d_out)\n        self.norm = nn.RMSNorm(d_in)\n")
    out = out.replace("        b, n, _ = x.shape\n", "        x = self.norm(x)\n        b, n, _ = x.shape\n", 1)
    assert "self.norm(x)" in out and "nn.RMSNorm" in out
    return out


def test_a_layer_whose_normalisation_is_switched_off_is_decoded_with_its_cache_too(tmp_path):
    """A per-token norm inside the layer is switched off for every check of the math; kv-cache ended in cannot tell
    ("does not decode with the KV cache of a layer whose normalisation it switches off") with advice about --arg and
    factories that could not help.  Switched off for the decode too, a right cache passes and a wrong one fails."""
    right = run(_written(tmp_path, _prenorm(HF_STYLE), "right.py"))
    assert right.status == "pass" and "every position" in right.message, right.message
    wrong = _prenorm(HF_STYLE).replace(".triu(keys - n + 1)", ".triu(1)")  # the mask not offset by the cached keys
    assert wrong != _prenorm(HF_STYLE)
    result = run(_written(tmp_path, wrong, "wrong.py"))
    assert result.status == "fail", result.message


def _mpt_style() -> str:
    """HF_STYLE with MosaicML MPT's convention (llm-foundry's attention, tests/realzoo/mqa_mpt_*): past_key_value=None
    means no cache at all and returns None; an empty tuple starts one, which is handed back holding every token."""
    out = HF_STYLE.replace(
        "        if past_key_value is not None:\n            k, v = torch.cat([past_key_value[0], k], dim=2), "
        "torch.cat([past_key_value[1], v], dim=2)\n",
        "        if past_key_value is not None:\n            if len(past_key_value) != 0:\n                k, v = "
        "torch.cat([past_key_value[0], k], dim=2), torch.cat([past_key_value[1], v], dim=2)\n"
        "            past_key_value = (k, v)\n").replace("past_key_value=None, use_cache=False", "past_key_value=None")
    out = out.replace("return out, ((k, v) if use_cache else None)", "return out, past_key_value")
    assert "len(past_key_value) != 0" in out and "return out, past_key_value" in out
    return out


def test_a_cache_started_by_an_empty_tuple_is_decoded_not_called_absent(tmp_path):
    """With None the layer keeps no cache, so kv-cache said "does not apply: ... the layer keeps no KV cache of its
    own" of a layer that has one.  () is tried where None gives none back: a right cache passes, and says how it was
    driven; a wrong one fails."""
    right = run(_written(tmp_path, _mpt_style(), "right.py"))
    assert right.status == "pass" and "every position" in right.message and "() for a new sequence" in right.message, \
        right.message
    wrong = _mpt_style().replace(".triu(keys - n + 1)", ".triu(1)")
    result = run(_written(tmp_path, wrong, "wrong.py"))
    assert result.status == "fail", result.message


def _object_cache() -> str:
    """HF_STYLE with the cache an object of the layer's own, its keys and values in attributes, made on the first
    call and handed back (qsa-attention's ComplexKVCache: tests/realzoo/qsa_softmax_attention_*)."""
    out = HF_STYLE.replace(
        "        if past_key_value is not None:\n            k, v = torch.cat([past_key_value[0], k], dim=2), "
        "torch.cat([past_key_value[1], v], dim=2)\n",
        "        if past_key_value is not None:\n"
        "            past_key_value.k = torch.cat([past_key_value.k, k], dim=2)\n"
        "            past_key_value.v = torch.cat([past_key_value.v, v], dim=2)\n"
        "            k, v = past_key_value.k, past_key_value.v\n")
    out = out.replace("return out, ((k, v) if use_cache else None)",
                      "if use_cache and past_key_value is None:\n            past_key_value = Store()\n"
                      "            past_key_value.k, past_key_value.v = k, v\n"
                      "        return (out, past_key_value) if use_cache else out")
    out += "\n\nclass Store:\n    pass\n"
    assert "past_key_value.k = torch.cat" in out and "Store()" in out
    return out


def test_a_cache_object_holding_its_tensors_in_attributes_is_decoded(tmp_path):
    """A cache class of the layer's own (tensors in its attributes, not a tuple or a dict): kv-cache said "does not
    apply: ... what it returns does not hold the tokens fed so far: the layer keeps no KV cache of its own".  Its
    tensors are found: a right cache passes, a wrong one fails."""
    right = run(_written(tmp_path, _object_cache(), "right.py"))
    assert right.status == "pass" and "every position" in right.message, right.message
    wrong = _object_cache().replace(".triu(keys - n + 1)", ".triu(1)")
    result = run(_written(tmp_path, wrong, "wrong.py"))
    assert result.status == "fail", result.message


def test_cached_tensors_walks_objects_but_not_modules_or_cycles():
    class Store:
        pass
    s = Store()
    s.k, s.v, s.me = torch.zeros(1, 2, 3), torch.zeros(1, 2, 3), s
    assert len({id(t) for t in cache.cached_tensors(s)}) == 2 and len(cache.cached_tensors(s)) == 2
    assert cache.cached_tensors(torch.nn.Linear(2, 2)) == []


def _dict_in_place() -> str:
    """HF_STYLE with FlexiTransformers' convention (tests/realzoo/flexit_*): the caller hands an empty dict, the layer
    fills kv_cache['k'], kv_cache['v'] in place and returns its output alone; position_offset = tokens cached."""
    out = HF_STYLE.replace("past_key_value=None, use_cache=False", "kv_cache=None, position_offset=0").replace(
        "        if past_key_value is not None:\n            k, v = torch.cat([past_key_value[0], k], dim=2), "
        "torch.cat([past_key_value[1], v], dim=2)\n",
        "        if kv_cache is not None:\n            if 'k' in kv_cache:\n"
        "                k, v = torch.cat([kv_cache['k'], k], dim=2), torch.cat([kv_cache['v'], v], dim=2)\n"
        "            kv_cache['k'], kv_cache['v'] = k, v\n").replace(
        "return out, ((k, v) if use_cache else None)", "return out")
    assert "kv_cache['k'], kv_cache['v'] = k, v" in out and "return out\n" in out
    return out


def test_a_dict_cache_filled_in_place_is_decoded(tmp_path):
    """kv-cache said "does not apply: ... what it returns does not hold the tokens fed so far: the layer keeps no
    KV cache of its own" of a layer that fills the dict it is given (and reads position_offset).  {} is tried after
    (): a right cache passes, saying how it was driven; a wrong one fails."""
    right = run(_written(tmp_path, _dict_in_place(), "right.py"))
    assert right.status == "pass" and "every position" in right.message and "{} for a new sequence" in right.message \
        and "position_offset=" in right.message, right.message
    wrong = _dict_in_place().replace(".triu(keys - n + 1)", ".triu(1)")
    result = run(_written(tmp_path, wrong, "wrong.py"))
    assert result.status == "fail", result.message


def test_a_cache_object_the_caller_must_make_is_cannot_tell_not_absent(tmp_path):
    """zenith-nlp's CausalSelfAttention (tests/realzoo/zenith_*): forward(x, *, cache=None, ...) calls
    cache.update(layer_idx, k, v) on a KVCache the caller makes; with None it keeps nothing, () and {} raise.
    kv-cache said "does not apply: ... the layer keeps no KV cache of its own" - false; it is mha-check's limit."""
    source = HF_STYLE.replace("past_key_value=None, use_cache=False", "cache=None").replace(
        "        if past_key_value is not None:\n            k, v = torch.cat([past_key_value[0], k], dim=2), "
        "torch.cat([past_key_value[1], v], dim=2)\n",
        "        if cache is not None:\n            k, v = cache.update(0, k, v)\n").replace(
        "return out, ((k, v) if use_cache else None)", "return out")
    assert "cache.update(0, k, v)" in source
    result = run(_written(tmp_path, source))
    assert result.status == "cannot_tell" and "object of its own type" in result.message, result.message


LEAKY_SCALED = ROOT / "tests" / "zoo" / "buggy" / "kv_cache_chunk_unmasked_scaled_residual.py"
QSA = ROOT / "tests" / "realzoo" / "qsa_softmax_attention_interleaved_rope_residual_inside_cache_chunk_unmasked.py"


@pytest.mark.parametrize("target", [f"{LEAKY_SCALED}:ScaledResidualCachedAttention", f"{QSA}:SoftmaxAttention"],
                         ids=["zoo-scaled-residual", "realzoo-qsa"])
def test_a_chunk_leak_fails_without_any_reading_of_the_weights(target):
    """x + alpha * attention is reproduced by no reading of the weights, so nothing is compared with the reference;
    yet a chunk of two new tokens after a cached prefix, attended with no mask, makes the first token's output move
    with the second's input, whatever the weights.  Before the weight-free probe both were cannot tell (realzoo17's
    qsa-attention, KNOWN_WRONG)."""
    result = run(target)
    assert result.status == "fail" and result.details["finding"] == "chunk unmasked", result.message
    assert result.details.get("weight_free") and "needs no reading of your weights" in result.message
    assert "sees token" in result.observed


def test_a_right_chunk_mask_behind_a_scaled_residual_stays_cannot_tell(tmp_path):
    """The same layer with every call masked (the new tokens' rows, offset by the cache): the probe finds no leak,
    and agreeing with itself is no pass - without a reading nothing was compared with the reference."""
    source = LEAKY_SCALED.read_text().replace(
        "        if not use_cache or self.pos == 0:\n            att = att.masked_fill(~self.causal[:T, :T], "
        "float(\"-inf\"))",
        "        start = self.pos if use_cache else 0\n"
        "        att = att.masked_fill(~self.causal[start:start + T, :k.shape[2]], float(\"-inf\"))")
    assert "start:start + T" in source
    result = run(_written(tmp_path, source.replace("class ScaledResidualCachedAttention", "class Attn")))
    assert result.status == "cannot_tell", result.message


def test_a_one_token_decode_unlike_the_own_forward_fails_without_any_reading_of_the_weights(tmp_path):
    """x + alpha * attention again (no reading of the weights), now masked on every call but with rows from 0, not
    offset by the cache: token 2 decoded alone sees key 0 only, and a chunk's first token moves with nothing after
    it, so the chunk probe finds no leak.  Yet decoded token t must be the layer's own forward on tokens 0..t at its
    last position (both see the same tokens): it is not, whatever the weights.  Was cannot tell (realzoo19's
    transformer-toolkit MLAttention, whose cached keys are all rotated at the newest position, the same)."""
    source = LEAKY_SCALED.read_text().replace(
        "        if not use_cache or self.pos == 0:\n            att = att.masked_fill(~self.causal[:T, :T], "
        "float(\"-inf\"))",
        "        att = att.masked_fill(~self.causal[:T, :k.shape[2]], float(\"-inf\"))")
    assert ":T, :k.shape[2]]" in source
    result = run(_written(tmp_path, source.replace("class ScaledResidualCachedAttention", "class Attn")))
    assert result.status == "fail" and result.details["finding"] == "decode differs from own forward", \
        result.message
    assert result.details.get("weight_free") and "needs no reading of your weights" in result.message


def test_a_layer_that_takes_positions_but_keeps_no_cache_is_not_failed_by_the_decode_probe(tmp_path):
    """forward(x, start_pos) with nothing kept between calls (torchtune's CausalSelfAttention built without its
    KVCache): decoded one token per call, a token sees itself alone and differs from the forward on the tokens
    before it - but it does not move with those tokens either, so there is no cache to judge, and the probe above
    must not fail it (it did, on realzoo's torchtune entry, before the prefix was replaced in a third decode)."""
    source = LEAKY_SCALED.read_text().replace("def forward(self, x, use_cache=False):",
                                              "def forward(self, x, start_pos=0):\n        use_cache = False")
    assert "start_pos=0" in source
    result = run(_written(tmp_path, source.replace("class ScaledResidualCachedAttention", "class Attn")))
    assert result.status != "fail", result.message

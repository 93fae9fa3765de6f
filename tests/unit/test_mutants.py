"""The mutants themselves: one marked bug each, and the numpy variant each one declares computes what it computes."""
import inspect

import numpy as np
import pytest
import torch

import mutants
from reference import (cached_mha, cached_rotary_mha, causal_attention, causal_mha, grouped_mha, numpy_ref,
                       rotary_mha, variants)

ALL = mutants.all_mutants()
GROUPED = ("gqa-", "mqa-")  # copies of reference/grouped_mha.py (grouped-query attention), not of causal_mha.py
WITH_VARIANT = [m for m in ALL if m.INFO.variant is not None and not m.INFO.id.startswith(GROUPED)]
GROUPED_WITH_VARIANT = [m for m in ALL if m.INFO.variant is not None and m.INFO.id.startswith(GROUPED)]


def _class_lines(module, name: str = "CausalMHA") -> list[str]:
    return [line.rstrip() for line in inspect.getsource(getattr(module, name)).splitlines()]


def _single(mutant) -> bool:
    """A mutant of the single-head CausalAttention (reference/causal_attention.py), not of CausalMHA."""
    return mutants.form(mutant.INFO.id) == "single-head"


def _reference_of(mutant):
    """The reference module a mutant is a copy of (mutants.reference_path): its family member's, or the lesson's."""
    return {"rotary_mha.py": rotary_mha, "cached_mha.py": cached_mha, "causal_attention.py": causal_attention,
            "grouped_mha.py": grouped_mha, "cached_rotary_mha.py": cached_rotary_mha}.get(
        mutants.reference_path(mutant.INFO.id).name, causal_mha)


@pytest.mark.parametrize("mutant", ALL, ids=[m.INFO.id for m in ALL])
def test_every_changed_line_is_marked_as_the_bug(mutant):
    name = mutants.class_name(mutant.INFO.id)
    reference = set(_class_lines(_reference_of(mutant), name))
    changed = [line for line in _class_lines(mutant, name) if line not in reference]
    assert changed, "a mutant must differ from the reference"
    unmarked = [line for line in changed if "# BUG" not in line and not line.strip().startswith(("def ", ")"))]
    assert len(unmarked) <= 2, unmarked  # helper lines next to a marked bug, never a silent second change


@pytest.mark.parametrize("mutant", WITH_VARIANT, ids=[m.INFO.id for m in WITH_VARIANT])
@pytest.mark.parametrize("d_in,d_out,heads,n,ctx", [(6, 6, 2, 4, 7), (5, 12, 3, 5, 5)])
def test_declared_variant_computes_what_the_mutant_computes(mutant, d_in, d_out, heads, n, ctx):
    if "rope" in mutant.INFO.variant and (d_out // heads) % 2:
        pytest.skip("rotary embeddings need an even head width")
    if mutant.INFO.variant.get("residual") and d_in != d_out:
        pytest.skip("x + attn(x) needs the input as wide as the output (the mutant has one width)")
    biased = bool(mutant.INFO.variant.get("bias_left_out"))  # a Q/K/V bias left out: only a layer with them shows it
    torch.manual_seed(0)
    torch.set_default_dtype(torch.float64)
    try:
        if _single(mutant):  # one head of width d_out, no output projection: W_o = I in the numpy reference
            m, heads = mutant.CausalAttention(d_in, d_out, ctx, 0.0).eval(), 1
        else:
            m = mutant.CausalMHA(d_in, heads, ctx, **({} if mutant.INFO.variant.get("residual") else
                                                     {"d_out": d_out}),
                                 **({"qkv_bias": True} if biased else {})).eval()
    finally:
        torch.set_default_dtype(torch.float32)
    get = lambda lin, attr: None if getattr(lin, attr, None) is None else getattr(lin, attr).detach().numpy()
    out = getattr(m, "out", None)
    q, k, v = (m.W_query, m.W_key, m.W_value) if _single(mutant) else (m.q, m.k, m.v)
    w = numpy_ref.Weights(get(q, "weight"), get(k, "weight"), get(v, "weight"),
                          get(out, "weight") if out is not None else np.eye(d_out), bq=get(q, "bias"),
                          bk=get(k, "bias"), bv=get(v, "bias"), bo=get(out, "bias"))
    x = np.random.default_rng(1).standard_normal((2, n, d_in))
    got = m(torch.from_numpy(x)).detach().numpy()
    want = variants.forward(x, heads, w, **mutant.INFO.variant)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, equal_nan=True)
    same_widths = mutant.INFO.variant.get("scale") == "sqrt-d-in" and d_in == d_out  # sqrt(d_in) = sqrt(d_out)
    # -100 differs below rounding: a gradient-only leak
    if (out is not None or _single(mutant)) and mutant.INFO.id != "finite-fill-100" and not same_widths:
        assert not np.allclose(want, numpy_ref.forward(x, heads, w), equal_nan=True)


@pytest.mark.parametrize("mutant", GROUPED_WITH_VARIANT, ids=[m.INFO.id for m in GROUPED_WITH_VARIANT])
@pytest.mark.parametrize("d_in,d_out,heads,kv,n,ctx", [(8, 8, 4, 2, 4, 7), (5, 12, 6, 3, 5, 5), (6, 6, 3, 1, 4, 4)])
def test_declared_grouped_variant_computes_what_the_mutant_computes(mutant, d_in, d_out, heads, kv, n, ctx):
    torch.manual_seed(0)
    torch.set_default_dtype(torch.float64)
    try:
        m = mutant.CausalMHA(d_in, heads, ctx, kv, d_out=d_out).eval()
    finally:
        torch.set_default_dtype(torch.float32)
    get = lambda lin, attr: None if getattr(lin, attr, None) is None else getattr(lin, attr).detach().numpy()
    w = numpy_ref.Weights(get(m.q, "weight"), get(m.k, "weight"), get(m.v, "weight"), get(m.out, "weight"),
                          bo=get(m.out, "bias"))
    x = np.random.default_rng(1).standard_normal((2, n, d_in))
    got = m(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(got, variants.forward(x, heads, w, **mutant.INFO.variant), rtol=1e-9, atol=1e-12)
    if kv not in (1, heads):  # one shared key/value head: every pairing and the first group are all the heads
        assert not np.allclose(got, numpy_ref.forward(x, heads, w))


def test_unknown_mutant_id_suggests_close_matches():
    with pytest.raises(KeyError, match="split-view-order"):
        mutants.get("split-view-ordr")


def test_the_catalogue_is_measured_with_what_the_mutants_declare_now():
    """harness.frontends.catalogue measures the catalogue by running mha-check, which reads the catalogue: inside
    `measuring`, a mutant not yet stored is known by its declaration (a new mutant was once measured as killing
    nothing, its variant unknown to the proof), and the stored catalogue is back afterwards."""
    import mutants

    stored = mutants.catalogue()
    with mutants.measuring({"not-stored-yet": {"variant": {"fill": "-inf"}}}):
        assert mutants.variants() == {"not-stored-yet": {"fill": float("-inf")}}
    assert mutants.catalogue() is stored and "not-stored-yet" not in mutants.variants()

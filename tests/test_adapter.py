"""The adapter: constructor aliases, weight roles by name, explicit --map, and no bug absorbed by the mapping."""
import io

import numpy as np
import pytest

from conftest import ROOT, report_for
from harness.wire import protocol
from harness.child.construct import read_signature
from harness.child.layouts import role_of


@pytest.mark.parametrize("name,role", [
    ("q", "q"), ("W_query", "q"), ("query", "q"), ("q_proj", "q"), ("to_q", "q"), ("Wq", "q"), ("b_q", "q"),
    ("key", "k"), ("W_key", "k"), ("k_proj", "k"), ("value", "v"), ("W_value", "v"), ("v_proj", "v"),
    ("c_attn", "qkv"), ("qkv", "qkv"), ("in_proj", "qkv"), ("W_qkv", "qkv"),
    ("out_proj", "o"), ("c_proj", "o"), ("proj", "o"), ("W_o", "o"), ("out", "o"), ("to_out", "o"), ("dense", "o"),
    ("heads", None), ("dropout", None), ("ln", None),
])
def test_role_of_parameter_names(name, role):
    assert role_of(name) == role


def _sig(fn, **overrides):
    return read_signature(fn, overrides)


def test_signature_lesson_style():
    s = _sig(lambda d, nheads, context_length: None)
    assert s.accepts == {"width": "d", "heads": "nheads", "context_length": "context_length"}
    assert not s.separate_widths and not s.unfillable


def test_signature_book_style_has_separate_widths():
    s = _sig(lambda d_in, d_out, context_length, dropout, num_heads, qkv_bias=False: None)
    assert s.separate_widths and s.accepts["d_in"] == "d_in" and s.accepts["d_out"] == "d_out"
    assert s.accepts["dropout"] == "dropout" and s.accepts["qkv_bias"] == "qkv_bias"


def test_signature_reference_style_d_and_d_out():
    s = _sig(lambda d, nheads, context_length, d_out=None: None)
    assert s.separate_widths and s.accepts["d_in"] == "d" and s.accepts["d_out"] == "d_out"


def test_signature_config_object_and_unknown_required():
    assert _sig(lambda config: None).config_param == "config"
    assert _sig(lambda cfg, extra=1: None).config_param == "cfg"
    s = _sig(lambda embed_dim, num_heads, widget: None)
    assert s.unfillable == ["widget"]
    assert _sig(lambda embed_dim, num_heads, widget: None, widget=3).unfillable == []
    assert _sig(lambda size, num_heads: None, size="@d_out").accepts == {"width": "size", "heads": "num_heads"}


def test_mapping_never_absorbs_a_bug():
    """query-for-keys computes k with W_q: the mapping stays by name, so the module fails instead of passing."""
    report = report_for(f"{ROOT / 'mutants' / 'query_for_keys.py'}:CausalMHA")
    mapping = report.adapter["mapping"]
    assert mapping["layout"]["wq"] == "q.weight" and mapping["layout"]["wk"] == "k.weight"
    assert not mapping["proven"]
    assert report["reference-match"].status == "fail"


def test_unmappable_weights_skip_weight_checks_and_say_how_to_help():
    report = report_for(str(ROOT / "tests" / "fixtures" / "odd_names.py"))
    assert report["reference-match"].status == "skip"
    assert "--map" in report["reference-match"].message
    assert report["causal-leakage"].status == "pass"  # weight-free checks still run
    assert not report.passed


def test_explicit_map_makes_an_odd_module_checkable():
    from harness.engine.runner import run_checks

    good = run_checks(str(ROOT / "tests" / "fixtures" / "odd_names.py"),
                      weight_map={"q": "a.T", "k": "b.T", "v": "c.T", "o": "mix"})
    assert good.passed, [(c.id, c.message) for c in good.checks if c.status != "pass"]
    assert good.adapter["mapping"]["proven"]


def test_smallest_failing_configuration_is_reported():
    report = report_for(f"{ROOT / 'mutants' / 'split_view_order.py'}:CausalMHA")
    cfg = report["view-order"].config
    assert report["view-order"].status == "fail" and "view(B, H, n, dh)" in report["view-order"].message
    assert cfg["heads"] == 2 and cfg["n"] == 2 and cfg["batch"] == 2  # the smallest shape that can show it


def test_protocol_round_trip_and_strictness():
    arrays = {"x": np.arange(6, dtype=np.float64).reshape(2, 3), "m": np.array([True, False])}
    header, back = protocol.decode(io.BytesIO(protocol.encode({"op": "t"}, arrays)))
    assert header == {"op": "t"} and np.array_equal(back["x"], arrays["x"]) and back["m"].dtype == bool
    frame = protocol.encode({"op": "t"}, {"x": np.ones(4)})
    with pytest.raises(EOFError):
        protocol.decode(io.BytesIO(frame[:-3]))  # truncated payload
    bad = b'{"arrays": [{"name": "x", "dtype": "O", "shape": [1]}]}'
    with pytest.raises(protocol.ProtocolError):
        protocol.decode(io.BytesIO(len(bad).to_bytes(4, "big") + bad))  # no object arrays, ever
    with pytest.raises(protocol.ProtocolError):
        protocol.decode(io.BytesIO((protocol.MAX_HEADER + 1).to_bytes(4, "big")))

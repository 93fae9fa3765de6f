"""Reading back what the student's code raised: kind, words, line, and the name a misspelt one most likely meant."""
from checks.output_shape import name_fix
from harness.wire import raised

TYPO = ("AttributeError: 'MultiHeadAttention' object has no attribute 'W_qeury' (at typo.py:38 in forward: "
        "queries = self.W_qeury(x))")


def test_a_typo_is_read_with_its_line_and_the_name_meant():
    r = raised.with_meant(raised.parse(TYPO), raised.attribute_names(["W_query.weight", "W_key.weight",
                                                                       "W_value.weight", "out_proj.bias", "mask"]))
    assert (r.kind, r.at, r.code, r.name, r.meant) == ("AttributeError", "typo.py:38", "queries = self.W_qeury(x)",
                                                        "W_qeury", "W_query")
    assert r.text == "'MultiHeadAttention' object has no attribute 'W_qeury'"


def test_the_deepest_frame_is_the_line_that_raised_and_a_notebook_pointer_is_kept():
    r = raised.parse("NameError: name 'quries' is not defined (at a.py:40 in forward: y = self.f(x); "
                     "a.py:12 in f: return quries @ k; b = 1)")
    assert (r.at, r.code, r.name, r.meant) == ("a.py:12", "return quries @ k; b = 1", "quries", "")
    nb = raised.parse("RuntimeError: boom (at lab.ipynb, code cell 2, line 16 in forward: x = y)")
    assert (nb.at, nb.code, nb.name) == ("lab.ipynb, code cell 2, line 16", "x = y", "")


def test_pythons_own_suggestion_is_used_and_no_name_is_invented():
    r = raised.parse("NameError: name 'quries' is not defined. Did you mean: 'queries'? (at a.py:3 in f: quries)")
    assert (r.text, r.meant) == ("name 'quries' is not defined", "queries")
    far = raised.with_meant(raised.parse("AttributeError: 'M' object has no attribute 'zzz' (at a.py:3 in f: x)"),
                            ["W_query", "mask"])
    assert far.meant == ""
    assert raised.parse("could not load the target") is None
    imported = raised.parse("importing the file raised NameError: name 'np' is not defined (at a.py:2 in <module>: "
                            "x = np)")
    assert (imported.kind, imported.at, imported.name) == ("NameError", "a.py:2", "np")
    assert raised.parse("RuntimeError: shapes differ").at == ""


def test_a_name_asked_of_a_tensor_is_not_called_undefined():
    """aisummer's `assert x.dim_head() == 3` (tests/realzoo): `dim_head` is the module's own; the fix must not tell the
    student to define it, but say it was asked of a tensor and how the module's own is reached."""
    on_tensor = name_fix(raised.parse("AttributeError: 'Tensor' object has no attribute 'dim_head' (at a.py:62 in "
                                      "forward: assert x.dim_head() == 3)"))
    assert "asked of a tensor" in on_tensor and "`self.dim_head`" in on_tensor
    assert "a name your code defines" not in on_tensor
    on_module = name_fix(raised.parse(TYPO))
    assert on_module.startswith("Use a name your code defines, not `W_qeury`")


def test_two_precisions_meeting_get_the_precision_fix_not_the_shapes_one():
    """A layer that computes its softmax in float32 and leaves it there (corext, realzoo9) raises in mha-check's
    float64: the fix says which precision mha-check uses and how to keep the input's, not to follow the shapes."""
    from checks.output_shape import DTYPE_FIX, RAISED_FIX, _raised
    from harness.wire.config import Config
    cfg = Config(d_in=8, d_out=8, heads=2, context_length=7)
    for text in ("RuntimeError: expected scalar type Float but found Double (at attention.py:28 in forward: "
                 "out = torch.matmul(p, v))",
                 "RuntimeError: expected m1 and m2 to have the same dtype, but got: float != double (at a.py:3)",
                 "RuntimeError: Index put requires the source and destination dtypes match, found dtype Float but "
                 "expected Double"):
        assert _raised(text, cfg, None).fix == DTYPE_FIX, text
    assert _raised("RuntimeError: shape '[2, 3, 2, 4]' is invalid for input of size 40 (at a.py:3)", cfg,
                   None).fix == RAISED_FIX

"""mask-buffer on a layer whose forward takes the causal mask from its caller (issue 28, gap 4 of the last trial):
mha-check passes such a layer a mask made on the input's device, so "the causal mask travels with the module"
passed without any evidence about a mask.  The claim does not apply to a mask the layer does not keep, and the pass
must say so; what is still checked (and can fail) is that nothing else the forward uses stays behind."""
from conftest import REALZOO, ROOT
from harness.child.inprocess import InProcess
from harness.engine.runner import Options, run_checks
from harness.sandbox.subject import Subject

ANNOTATED = REALZOO / "harvardnlp_annotated_transformer_mha.py"


def _mask_buffer(target: str):
    opts = Options(only=["mask-buffer"], examples=2, diagnose=False)
    report = run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))
    return report["mask-buffer"]


def test_a_callers_mask_is_not_the_layers_to_move_and_the_pass_says_what_was_checked():
    got = _mask_buffer(f"{ANNOTATED}:MultiHeadedAttention")
    assert got.status == "pass" and got.message.startswith("does not apply to the mask")
    assert "from the caller (mask=" in got.message and "checked instead" in got.message
    assert not got.not_applicable  # it checked the other tensors: a verified pass, not one with nothing to judge


def test_a_layer_with_its_own_mask_buffer_keeps_the_claim():
    got = _mask_buffer(f"{ROOT / 'reference' / 'causal_mha.py'}:CausalMHA")
    assert got.status == "pass" and "does not apply" not in got.message


def test_a_tensor_of_the_layers_own_left_on_the_cpu_still_fails_with_a_callers_mask(tmp_path):
    src = ANNOTATED.read_text()
    src = src.replace("        self.attn = None\n",
                      "        self.attn = None\n        self.gain = torch.ones(d_model)  # a plain attribute\n", 1)
    src = src.replace("        return self.linears[-1](x)", "        return self.linears[-1](x) * self.gain", 1)
    assert src.count("self.gain") == 2
    path = tmp_path / "annotated_gain.py"
    path.write_text(src)
    got = _mask_buffer(f"{path}:MultiHeadedAttention")
    assert got.status == "fail" and "stays on the CPU" in got.message

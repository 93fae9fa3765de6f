"""What mutmut runs against every mutant (see mutation/run.py); NOT part of the main suite (it lives outside tests/).

In mutmut's staging folder `reference` is mutmut's mutated copy, `harness` and `checks` are links to the real
packages.  One test, in three parts, run cheapest first (oracle, lesson, checks) and stopped by the first that notices a
mutant; the record says which one did:

1. checks: the lesson's reference passes every check of mha-check, its worker in this process
   (harness.child.inprocess: the reference is our own code), importing `reference.causal_mha` from the staging
   folder (the module name mutmut's trampolines answer to); the verdicts come from `reference.numpy_ref` (mutated
   too).  A mutant of the torch reference that passes here is a buggy attention layer that every check accepts.
2. lesson: what the lesson promises about the reference itself and the checks deliberately never ask of a student:
   the defaults of CausalMHA(d, heads, context_length) (mha-check always passes d_out, dropout and qkv_bias, and a
   student's defaults are the student's choice: GPT-2 has dropout 0.1 and Q/K/V biases), the error's wording, the
   parameter formula's default.
3. oracle: `reference.numpy_ref` keeps its contract: forward and backward equal torch autograd (an implementation
   independent of reference/causal_mha.py) for the lesson's reshapes and for the two view-order mistakes the
   view-order check recognises, even with huge scores; weights are drawn like nn.Linear's init.  A mutant of the
   oracle that the reference survives can still blind a check to a mistake (the kill matrix): this part catches it
   in milliseconds instead of re-running the thirty hand-made mutants for every mutant.

With MHA_MUTATION_RECORD set (mutation/run.py sets it) the outcome of each part is written there per mutant.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import torch

torch.set_num_threads(1)  # before any torch work: mutmut forks its mutant processes from this one (OpenMP)
torch.set_default_dtype(torch.float64)

TARGET = "reference.causal_mha:CausalMHA"


def _checks(tmp_path) -> list[str]:
    """Every check, with the worker in this process (harness.child.inprocess): the mutated reference is our own
    code, and mutmut's trampolines answer in the process that set MUTANT_UNDER_TEST, so no child is needed; and
    none is started, which keeps a mutant to a second or two."""
    from harness.child.inprocess import InProcess
    from harness.sandbox.subject import Subject
    from harness.engine.runner import Options, run_checks

    # An empty search folder: from mutmut's working folder the worker would find reference/causal_mha.py as a FILE
    # and load it as module `causal_mha`, whose trampolines never match a mutant named reference.causal_mha.*;
    # from here it imports the module `reference.causal_mha`: the staging folder's, already imported.
    report = run_checks(TARGET, Options(diagnose=False), subject=Subject(TARGET, cwd=str(tmp_path), start=InProcess()))
    return [f"{c.id} ({c.status}): {c.message[:200]}" for c in report.checks if c.status != "pass"] + (
        [] if report.passed else ["report.passed is false"])


# -- 2. the lesson's promises about the reference ----------------------------------------------------------------
def _lesson() -> list[str]:
    from reference import param_count_formula
    from reference.causal_mha import CausalMHA

    broken = []
    torch.manual_seed(0)
    try:
        m = CausalMHA(8, 2, 16)  # the lesson's call: d_out = d, no dropout, no Q/K/V bias
    except Exception as e:  # noqa: BLE001
        return [f"CausalMHA(8, 2, 16) raised {type(e).__name__}: {e}"]
    count = sum(p.numel() for p in m.parameters())
    if count != 264:
        broken.append(f"CausalMHA(8, 2, 16) has {count} parameters, not 264 (d_out = d, no Q/K/V bias)")
    if param_count_formula(8, 8) != 264:
        broken.append(f"param_count_formula(8, 8) = {param_count_formula(8, 8)}, not 264 (no Q/K/V bias by default)")
    x = torch.randn(2, 5, 8)
    train = m.train()(x)
    if tuple(train.shape) != (2, 5, 8) or not torch.allclose(train, m.eval()(x), rtol=1e-12, atol=1e-12):
        broken.append("CausalMHA(8, 2, 16) in train() mode differs from eval(): its default dropout is not 0")
    try:
        CausalMHA(8, 3, 16)
        broken.append("CausalMHA(8, 3, 16) was built: 8 is not divisible by 3 heads")
    except ValueError as e:
        if "not divisible" not in str(e):
            broken.append(f"CausalMHA(8, 3, 16) refused with {str(e)!r}, not 'not divisible'")
    return broken


# -- 3. the oracle's contract ------------------------------------------------------------------------------------
def _torch_layer(x, heads, w, split="lesson", merge="lesson", kv_heads=None, rope=None):
    """The layer and the view-order mistakes written directly in torch, independently of reference/: `split` is
    "lesson", "view-bhnd" (every projection split with view(B, H, n, dh)) or "view-bhnd:ROLES" (only those).  The
    family: `kv_heads` key/value heads, each shared by heads // kv_heads consecutive query heads (repeat_interleave),
    and the queries and keys rotated after the split (`rope`: None or (convention, theta))."""
    B, n, _ = x.shape
    d = w["wq"].shape[0]
    dh, kv = d // heads, kv_heads or heads
    wrong = "qkv" if split == "view-bhnd" else split.partition(":")[2]

    def heads_of(r):
        t, h = x @ w["w" + r].T + w["b" + r], heads if r == "q" else kv
        return t.reshape(B, h, n, dh) if r in wrong else t.view(B, n, h, dh).transpose(1, 2)

    q, k, v = (heads_of(r) for r in "qkv")
    if rope is not None:
        q, k = _rotate(q, *rope), _rotate(k, *rope)
    k, v = k.repeat_interleave(heads // kv, dim=1), v.repeat_interleave(heads // kv, dim=1)
    future = torch.ones(n, n, dtype=torch.bool).triu(1)
    p = torch.softmax((q @ k.transpose(-2, -1) / (d // heads) ** 0.5).masked_fill(future, float("-inf")), dim=-1)
    c = p @ v
    c = c.transpose(1, 2).reshape(B, n, d) if merge == "lesson" else c.reshape(B, n, d)
    return c @ w["wo"].T + w["bo"]


def _oracle() -> list[str]:
    from reference import numpy_ref

    broken = []
    rng = np.random.default_rng(5)
    for d_in, d_out, heads, n, qkv_bias, scale in ((5, 6, 2, 4, True, 1.0), (7, 12, 3, 5, False, 1.0),
                                                   (4, 6, 3, 3, True, 400.0)):
        w = numpy_ref.random_weights(rng, d_in, d_out, qkv_bias=qkv_bias)
        w.wq, w.wk = w.wq * scale, w.wk * scale  # 400: scores in the thousands, where a naive softmax overflows
        x = rng.standard_normal((2, n, d_in))
        gy = rng.standard_normal((2, n, d_out))
        for split in ("lesson", "view-bhnd", "view-bhnd:q", "view-bhnd:kv"):
            for merge in ("lesson", "no-transpose"):
                where = (f"d_in={d_in}, d_out={d_out}, heads={heads}, n={n}, bias={qkv_bias}, scale={scale}, "
                         f"{split}/{merge}")
                tw = {r: torch.tensor(w.bias(r) if r[0] == "b" else getattr(w, r), requires_grad=True)
                      for r in numpy_ref.ROLES}
                tx = torch.tensor(x, requires_grad=True)
                ty = _torch_layer(tx, heads, tw, split, merge)
                (ty * torch.tensor(gy)).sum().backward()
                cache = {}
                try:
                    y = numpy_ref.forward(x, heads, w, split=split, merge=merge, cache=cache)
                    g = numpy_ref.backward(gy, w, cache)
                except Exception as e:  # noqa: BLE001
                    broken.append(f"numpy_ref raised {type(e).__name__}: {e} ({where})")
                    continue
                if not np.allclose(y, ty.detach().numpy(), rtol=1e-9, atol=1e-9):
                    broken.append(f"numpy_ref.forward differs from torch ({where})")
                for role in ("x",) + numpy_ref.ROLES:  # a missing bias is a zero one: its gradient too
                    want = (tx if role == "x" else tw[role]).grad.numpy()
                    if not np.allclose(g[role], want, rtol=1e-8, atol=1e-9):
                        broken.append(f"numpy_ref.backward: wrong gradient for {role} ({where})")
    broken += _family_contract(numpy_ref)
    broken += _weights_contract(numpy_ref)
    return broken


def _rotate(t, convention: str, theta: float):
    """Rotary position embedding written directly in torch (positions 0..n-1; pair i turns by theta^(-2i/dh)):
    "interleaved" rotates (t[2i], t[2i+1]), "half" (rotate-half) rotates (t[i], t[i + dh/2])."""
    n, dh = t.shape[-2], t.shape[-1]
    angle = torch.arange(n, dtype=t.dtype)[:, None] * theta ** (-2.0 * torch.arange(dh // 2, dtype=t.dtype) / dh)
    cos, sin = angle.cos(), angle.sin()
    if convention == "interleaved":
        a, b = t[..., 0::2], t[..., 1::2]
        return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)
    a, b = t[..., : dh // 2], t[..., dh // 2:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


def _family_contract(numpy_ref) -> list[str]:
    """numpy_ref's grouped-query and rotary paths (forward and backward) equal torch autograd; the parameter formula
    counts what nn.Linear layers of those shapes hold; random_weights draws W_k and W_v of the asked height."""
    from reference.arithmetic import param_count_formula
    from reference.rotary import Rope

    broken = []
    rng = np.random.default_rng(8)
    for d_in, d_out, heads, kv_heads, n, qkv_bias, rope in (
            (5, 8, 4, 2, 4, True, None), (6, 6, 3, 1, 3, False, None), (4, 8, 2, 2, 5, True, ("interleaved", 10000.0)),
            (4, 8, 2, 2, 5, False, ("half", 500.0)), (6, 8, 4, 2, 4, True, ("half", 10000.0))):
        dh = d_out // heads
        where = f"d_in={d_in}, d_out={d_out}, heads={heads}, kv_heads={kv_heads}, n={n}, bias={qkv_bias}, rope={rope}"
        w = numpy_ref.random_weights(rng, d_in, d_out, qkv_bias=qkv_bias, d_kv=kv_heads * dh)
        if w.wk.shape != (kv_heads * dh, d_in) or (qkv_bias and w.bv.shape != (kv_heads * dh,)):
            broken.append(f"random_weights(d_kv=...): W_k {w.wk.shape}, not ({kv_heads * dh}, {d_in}) ({where})")
            continue
        x, gy = rng.standard_normal((2, n, d_in)), rng.standard_normal((2, n, d_out))
        tw = {r: torch.tensor(w.bias(r) if r[0] == "b" else getattr(w, r), requires_grad=True)
              for r in numpy_ref.ROLES}
        tx = torch.tensor(x, requires_grad=True)
        ty = _torch_layer(tx, heads, tw, kv_heads=kv_heads, rope=rope)
        (ty * torch.tensor(gy)).sum().backward()
        cache = {}
        try:
            y = numpy_ref.forward(x, heads, w, cache=cache, rope=Rope(*rope) if rope else None)
            g = numpy_ref.backward(gy, w, cache)
        except Exception as e:  # noqa: BLE001
            broken.append(f"numpy_ref raised {type(e).__name__}: {e} ({where})")
            continue
        if not np.allclose(y, ty.detach().numpy(), rtol=1e-9, atol=1e-9):
            broken.append(f"numpy_ref.forward differs from torch ({where})")
        for role in ("x",) + numpy_ref.ROLES:
            if not np.allclose(g[role], (tx if role == "x" else tw[role]).grad.numpy(), rtol=1e-8, atol=1e-9):
                broken.append(f"numpy_ref.backward: wrong gradient for {role} ({where})")
    for d_in, d_out, kv, qkv_bias in ((5, 8, 4, True), (5, 8, 4, False), (6, 6, None, True), (3, 9, 3, True)):
        layers = [torch.nn.Linear(d_in, d_out, bias=qkv_bias), torch.nn.Linear(d_in, kv or d_out, bias=qkv_bias),
                  torch.nn.Linear(d_in, kv or d_out, bias=qkv_bias), torch.nn.Linear(d_out, d_out)]
        held = sum(p.numel() for layer in layers for p in layer.parameters())
        if param_count_formula(d_in, d_out, qkv_bias, kv_width=kv) != held:
            broken.append(f"param_count_formula({d_in}, {d_out}, {qkv_bias}, kv_width={kv}) = "
                          f"{param_count_formula(d_in, d_out, qkv_bias, kv_width=kv)}, the layers hold {held}")
    return broken


def _weights_contract(numpy_ref) -> list[str]:
    """random_weights: nn.Linear's shapes and init (uniform in ±1/sqrt(fan_in), centred, spread); the helpers."""
    broken = []
    w = numpy_ref.random_weights(np.random.default_rng(6), 40, 60, qkv_bias=True)
    shapes = {"wq": (60, 40), "wk": (60, 40), "wv": (60, 40), "wo": (60, 60), "bq": (60,), "bk": (60,),
              "bv": (60,), "bo": (60,)}
    for role, shape in shapes.items():
        a = getattr(w, role)
        if a is None or a.shape != shape:
            broken.append(f"random_weights: {role} has shape {None if a is None else a.shape}, not {shape}")
            continue
        bound = 1 / np.sqrt(40 if role in ("wq", "wk", "wv", "bq", "bk", "bv") else 60)
        lo, hi = a.min() / bound, a.max() / bound
        if not (-1 <= lo < -0.8 and 0.8 < hi <= 1 and abs(a.mean()) < 0.2 * bound and a.std() > 0.45 * bound):
            broken.append(f"random_weights: {role} is not uniform in ±1/sqrt(fan_in) (min {lo:.2f}, max {hi:.2f} "
                          f"of the bound, mean {a.mean() / bound:.2f}, std {a.std() / bound:.2f})")
    plain = numpy_ref.random_weights(np.random.default_rng(7), 3, 4, qkv_bias=False)
    if (plain.bq, plain.bk, plain.bv) != (None, None, None) or plain.bo is None:
        broken.append("random_weights(qkv_bias=False): Q/K/V biases must be None and the output bias drawn")
    if numpy_ref.random_weights(np.random.default_rng(7), 3, 4, qkv_bias=False, out_bias=False).bo is not None:
        broken.append("random_weights(out_bias=False) still draws an output bias")
    if sorted(plain.as_dict()) != ["bo", "wk", "wo", "wq", "wv"]:
        broken.append(f"Weights.as_dict() gives {sorted(plain.as_dict())}, not the roles that are present")
    if not (np.array_equal(plain.bias("bq"), np.zeros(4)) and plain.bias("bo") is plain.bo):
        broken.append("Weights.bias: a missing bias must read as zeros, a present one as itself")
    if [numpy_ref.split_for("view-bhnd:qkv", r) for r in "qkv"] != ["view-bhnd"] * 3:
        broken.append("split_for: view-bhnd:qkv must split every projection with view(B, H, n, dh)")
    for bad in ("view-bhnd:x", "view-bhnd:X", "bogus:q"):
        try:
            numpy_ref.split_for(bad, "q")
            broken.append(f"split_for({bad!r}) is accepted: an unknown split or role must be refused")
        except ValueError as e:
            if str(e) != bad:
                broken.append(f"split_for({bad!r}) is refused without naming it: {e}")
        except Exception as e:  # noqa: BLE001 - any other error is a broken contract too
            broken.append(f"split_for({bad!r}) raised {type(e).__name__}, not ValueError")
    mask = numpy_ref.causal_mask(3)
    if mask.dtype != bool or mask.tolist() != [[False, True, True], [False, False, True], [False, False, False]]:
        broken.append(f"causal_mask(3) is not True exactly above the diagonal: {mask.tolist()} ({mask.dtype})")
    return broken


def _record(part: str, broken: list[str]) -> None:
    where, mode = os.environ.get("MHA_MUTATION_RECORD"), os.environ.get("MUTANT_UNDER_TEST", "")
    if not where or not mode or mode in ("stats", "fail"):
        return
    path = Path(where) / f"{mode}.json"
    seen = json.loads(path.read_text()) if path.exists() else {}
    seen[part] = broken
    path.write_text(json.dumps(seen, ensure_ascii=False))


def test_reference_passes_every_check_and_keeps_its_promises(tmp_path):
    """The cheap parts first; the first part that notices a mutant ends the test (the later ones would only add
    time, not a kill).  Unmutated (and in mutmut's stats mode), every part runs."""
    broken = {}
    for part, run in (("oracle", _oracle), ("lesson", _lesson), ("checks", lambda: _checks(tmp_path))):
        try:
            broken[part] = run()
        except Exception as e:  # noqa: BLE001 - a mutant may make anything raise; the record must still say so
            broken[part] = [f"raised {type(e).__name__}: {str(e)[:200]}"]
        _record(part, broken[part])
        if broken[part]:
            break
    assert {part: found for part, found in broken.items() if found} == {}

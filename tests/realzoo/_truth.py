"""Independent ground truth of the real-code zoo, checked against the lesson's functional reference, not by mha-check.

Run: python tests/realzoo/_truth.py (tests/e2e/test_realzoo.py runs it and needs its last line to say that every
entry is verified).
Every entry is built in float64, eval mode, dropout 0 (unless the entry is about dropout); its weights are copied BY HAND
into reference.causal_mha.mha_forward (nn.Linear convention, weight (out, in)).  "correct" entries must agree to 1e-10
for several (B, n) with n < context length, and position t must not change when tokens after t change.  "bug" entries
must show the bug concretely.  One line per entry; a final summary line.
Entries that compute part of the layer in float32 whatever the input dtype (whisper's softmax, lit-llama's RoPE, Kronos's RoPE
cos/sin, llama2.c's RoPE) are compared at relative 1e-5 (FLOAT32_TOL) and say so in their line; their causality checks stay exact.
Some bug demonstrations draw from the global RNG, so their printed magnitudes depend on the set of files (not on pass/fail).
"""
import ast
import importlib.util
import os
import sys
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from reference.causal_mha import mha_forward  # noqa: E402
from reference.rotary_mha import rope_mha_forward  # noqa: E402 - rotary entries: RoPE on q and k per head
from reference.grouped_mha import gqa_forward  # noqa: E402  (grouped-query entries: query head h uses kv head h // group)

HERE = os.path.dirname(os.path.abspath(__file__))
torch.set_default_dtype(torch.float64)
TOL = 1e-10
SHAPES = [(2, 7), (3, 5), (1, 1), (2, 10)]  # context length 10 everywhere
CTX = 10


def load(name):
    spec = importlib.util.spec_from_file_location(name[:-3], os.path.join(HERE, name))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # as an import does: a dataclass under `from __future__ import annotations` looks it up
    spec.loader.exec_module(mod)
    return mod


def consts(name):
    tree = ast.parse(open(os.path.join(HERE, name)).read())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id.isupper():
            try:  # (copied code's own constants may be computed: tinyllama's DEVICE = torch.device(...))
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return out


def randomize(m, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return m


def cmp(call, ref, d_in, shapes=SHAPES):
    """max |call(x) - ref(x)| over shapes, and max change of outputs at positions <= t when tokens > t change."""
    err, leak = 0.0, 0.0
    for i, (B, n) in enumerate(shapes):
        g = torch.Generator().manual_seed(100 + i)
        x = torch.randn(B, n, d_in, generator=g)
        with torch.no_grad():
            y, r = call(x), ref(x)
            err = max(err, (y - r).abs().max().item())
            for t in range(n - 1):
                x2 = x.clone()
                x2[:, t + 1:] = torch.randn(B, n - t - 1, d_in, generator=g)
                leak = max(leak, (call(x2)[:, :t + 1] - y[:, :t + 1]).abs().max().item())
    return err, leak


def ok_line(err, leak):
    good = err < TOL and leak < TOL
    return good, f"max|out-ref|={err:.1e} future-leak={leak:.1e}"


CHECKS = {}


def check(fname):
    def deco(f):
        CHECKS[fname] = f
        return f
    return deco


# ----------------------------------------------------------------------------------------------- correct entries
@check("rasbt_ch03_mha.py")
def _(mod):
    m = randomize(mod.Ch03_MHA(10, 12, CTX, 0.0, 3, qkv_bias=True)).eval()
    ref = lambda x: mha_forward(x, 3, m.W_query.weight, m.W_key.weight, m.W_value.weight, m.out_proj.weight,
                                m.W_query.bias, m.W_key.bias, m.W_value.bias, m.out_proj.bias)
    return ok_line(*cmp(m, ref, 10)) + ("d_in=10 d_out=12 H=3 qkv_bias",)


@check("rasbt_ch03_causal_attention.py")
def _(mod):
    """The single-head form: the lesson's function with one head and no output projection (W_o = I, b_o = 0)."""
    m = randomize(mod.CausalAttention(10, 12, CTX, 0.0, qkv_bias=True)).eval()
    ref = lambda x: mha_forward(x, 1, m.W_query.weight, m.W_key.weight, m.W_value.weight, torch.eye(12),
                                m.W_query.bias, m.W_key.bias, m.W_value.bias, None)
    return ok_line(*cmp(m, ref, 10)) + ("d_in=10 d_out=12 single head qkv_bias",)


@check("rasbt_ch03_mha_wrapper.py")
def _(mod):
    m = randomize(mod.Ch03_MHA_Wrapper(10, 4, CTX, 0.0, 3, qkv_bias=True)).eval()
    cat = lambda a: torch.cat([getattr(h, a).weight for h in m.heads], 0)
    catb = lambda a: torch.cat([getattr(h, a).bias for h in m.heads], 0)
    ref = lambda x: mha_forward(x, 3, cat("W_query"), cat("W_key"), cat("W_value"), m.out_proj.weight,
                                catb("W_query"), catb("W_key"), catb("W_value"), m.out_proj.bias)
    return ok_line(*cmp(m, ref, 10)) + ("per-head d_out=4, H=3 -> lesson D=12 (weights stacked per head)",)


@check("rasbt_sdpa_is_causal.py")
def _(mod):
    m = randomize(mod.MHAPyTorchScaledDotProduct(10, 12, 3, CTX, qkv_bias=True)).eval()
    W, b = m.qkv.weight, m.qkv.bias
    ref = lambda x: mha_forward(x, 3, W[:12], W[12:24], W[24:], m.proj.weight, b[:12], b[12:24], b[24:], m.proj.bias)
    return ok_line(*cmp(m, ref, 10)) + ("fused [q;k;v], SDPA is_causal",)


@check("rasbt_torch_mha_class.py")
def _(mod):
    m = randomize(mod.MHAPyTorchClass(12, 12, 3, CTX, qkv_bias=False)).eval()
    W = m.multihead_attn.in_proj_weight
    wo = m.proj.weight @ m.multihead_attn.out_proj.weight
    ref = lambda x: mha_forward(x, 3, W[:12], W[12:24], W[24:], wo, None, None, None, m.proj.bias)
    return ok_line(*cmp(m, ref, 12)) + ("d_in=d_out=12; wo = proj.W @ out_proj.W",)


@check("rasbt_llama3_gqa.py")
def _(mod):
    m = randomize(mod.GroupedQueryAttention(10, 12, 3, 3)).eval()
    mask = torch.triu(torch.ones(CTX, CTX, dtype=torch.bool), 1)
    cos, sin = torch.ones(CTX, 4), torch.zeros(CTX, 4)
    ref = lambda x: mha_forward(x, 3, m.W_query.weight, m.W_key.weight, m.W_value.weight, m.out_proj.weight)
    return ok_line(*cmp(lambda x: m(x, mask, cos, sin), ref, 10)) + ("num_kv_groups=num_heads, RoPE cos=1 sin=0, bool mask arg",)


@check("karpathy_ng_video_lecture.py")
def _(mod):
    m = randomize(mod.build(12, 3, CTX)).eval()
    cat = lambda a: torch.cat([getattr(h, a).weight for h in m.heads], 0)
    ref = lambda x: mha_forward(x, 3, cat("query"), cat("key"), cat("value"), m.proj.weight, None, None, None, m.proj.bias)
    return ok_line(*cmp(m, ref, 12)) + ("globals set by build()",)


@check("karpathy_llmc_causal_self_attention.py")
def _(mod):
    m = randomize(mod.build(12, 3, CTX)).eval()
    W, b = m.c_attn.weight, m.c_attn.bias
    ref = lambda x: mha_forward(x, 3, W[:12], W[12:24], W[24:], m.c_proj.weight, b[:12], b[12:24], b[24:], m.c_proj.bias)
    return ok_line(*cmp(m, ref, 12)) + ("config object, fused [q;k;v]",)


@check("fareedkhan_mha_heads.py")
def _(mod):
    m = randomize(mod.MultiHeadAttention(3, 12, CTX)).eval()
    cat = lambda a: torch.cat([getattr(h, a).weight for h in m.heads], 0)
    ref = lambda x: mha_forward(x, 3, cat("query"), cat("key"), cat("value"), m.proj.weight, None, None, None, m.proj.bias)
    return ok_line(*cmp(m, ref, 12)) + ("per-head ModuleList",)


@check("harvardnlp_annotated_transformer_mha.py")
def _(mod):
    m = randomize(mod.MultiHeadedAttention(3, 12, dropout=0.0)).eval()
    L = m.linears
    ref = lambda x: mha_forward(x, 3, L[0].weight, L[1].weight, L[2].weight, L[3].weight, L[0].bias, L[1].bias, L[2].bias, L[3].bias)
    call = lambda x: m(x, x, x, mod.subsequent_mask(x.shape[1]))
    return ok_line(*cmp(call, ref, 12)) + ("called as m(x, x, x, subsequent_mask(n)); -1e9 fill",)


# ----------------------------------------------------------------------------------------------- bug entries
@check("rasbt_combined_qkv.py")
def _(mod):
    m = randomize(mod.MultiHeadAttentionCombinedQKV(12, 12, 3, CTX, qkv_bias=True)).eval()
    W, b = m.qkv.weight, m.qkv.bias
    ref = lambda x: mha_forward(x, 3, W[:12], W[12:24], W[24:], m.proj.weight, b[:12], b[12:24], b[24:], m.proj.bias)
    err, leak = cmp(m, ref, 12)
    m2 = mod.MultiHeadAttentionCombinedQKV(10, 12, 3, CTX)
    try:
        m2(torch.randn(2, 5, 10))
        shown, msg = False, "d_in=10 d_out=12 ran without error"
    except RuntimeError as e:
        shown, msg = True, f"d_in=10,d_out=12 constructed fine but forward raised RuntimeError ({str(e)[:60]}...)"
    return shown and err < TOL, f"d_in=d_out: max|out-ref|={err:.1e} leak={leak:.1e}; {msg}", ""


@check("rasbt_mha_einsum_pre_fix.py")
def _(mod):
    m = randomize(mod.MHAEinsum(12, 12, CTX, 0.0, 3, qkv_bias=True)).eval()
    ref = lambda x: mha_forward(x, 3, m.W_query.T, m.W_key.T, m.W_value.T, m.out_proj.weight, m.bias_q, m.bias_k, m.bias_v, m.out_proj.bias)
    err, leak = cmp(m, ref, 12)
    m2 = mod.MHAEinsum(10, 12, CTX, 0.0, 3)
    try:
        m2(torch.randn(2, 5, 10))
        shown, msg = False, "d_in=10 ran"
    except RuntimeError as e:
        shown, msg = True, f"d_in=10,d_out=12 forward raised RuntimeError ({str(e)[:50]}...)"
    return shown and err < TOL, f"d_in=d_out with W used as x@W (Linear weight = W.T): max|out-ref|={err:.1e} leak={leak:.1e}; {msg}", ""


@check("rasbt_sdpa_no_flash.py")
def _(mod):
    m = randomize(mod.MHAPyTorchSDPAWithoutFlash(12, 12, 3, CTX, qkv_bias=True)).eval()
    W, b = m.qkv.weight, m.qkv.bias
    ref = lambda x: mha_forward(x, 3, W[:12], W[12:24], W[24:], m.proj.weight, b[:12], b[12:24], b[24:], m.proj.bias)
    x = torch.randn(2, 6, 12)
    with torch.no_grad():
        y = m(x)
        nan_last = torch.isnan(y[:, -1]).any().item()
        fin = y[:, :-1]
        err = (fin - ref(x)[:, :-1]).abs().max().item()
        x2 = x.clone(); x2[:, 3:] += 1.0
        leak = (m(x2)[:, :3] - y[:, :3]).abs().max().item()
    return err > 1e-3 and leak > 1e-3, f"rows 0..n-2 max|out-ref|={err:.2e}; changing tokens 3.. moves outputs 0..2 by {leak:.2e}; last row NaN={nan_last}", ""


@check("rasbt_bonus_wrapper_no_proj.py")
def _(mod):
    m = randomize(mod.MultiHeadAttentionWrapper(12, 12, CTX, 0.0, 3, qkv_bias=True)).eval()
    x = torch.randn(2, 5, 12)
    with torch.no_grad():
        y = m(x)
    n_params = sum(p.numel() for p in m.parameters())
    cat = lambda a: torch.cat([getattr(h, a).weight for h in m.heads], 0)
    catb = lambda a: torch.cat([getattr(h, a).bias for h in m.heads], 0)
    I = torch.eye(36)
    with torch.no_grad():
        r = mha_forward(x, 3, cat("W_query"), cat("W_key"), cat("W_value"), I, catb("W_query"), catb("W_key"), catb("W_value"), None)
    e = (y - r).abs().max().item()
    return y.shape[-1] == 36 and e < TOL, (f"called as in the benchmark (d_out=embed_dim=12, H=3): output width {y.shape[-1]} != 12, "
                                           f"no out-projection parameters ({n_params} params = 3 x 3*(12*12+12)); equals reference with W_o=I (err {e:.1e})"), ""


@check("karpathy_ng_video_lecture_prefix.py")
def _(mod):
    m = randomize(mod.build(12, 3, CTX)).eval()
    cat = lambda a: torch.cat([getattr(h, a).weight for h in m.heads], 0)
    ref = lambda x: mha_forward(x, 3, cat("query"), cat("key"), cat("value"), m.proj.weight, None, None, None, m.proj.bias)
    err, leak = cmp(m, ref, 12)
    s = (4 / 12) ** 0.5  # scaling q by sqrt(dh/d) turns the reference's 1/sqrt(dh) into 1/sqrt(d)
    ref2 = lambda x: mha_forward(x, 3, cat("query") * s, cat("key"), cat("value"), m.proj.weight, None, None, None, m.proj.bias)
    err2, _ = cmp(m, ref2, 12)
    return err > 1e-3 and leak < TOL and err2 < TOL, f"max|out-ref|={err:.2e} (causal: leak={leak:.1e}); equals the reference with scale 1/sqrt(d_model) (err {err2:.1e})", ""


@check("karpathy_ng_video_lecture_prefix_head.py")
def _(mod):
    """One Head as a single-head layer (one head, W_o = I): scaled by 1/sqrt(d_in) instead of 1/sqrt(d_out)."""
    m = randomize(mod.build_head(10, 4, CTX)).eval()
    eye = torch.eye(4)
    ref = lambda x: mha_forward(x, 1, m.query.weight, m.key.weight, m.value.weight, eye)
    err, leak = cmp(m, ref, 10)
    s = (4 / 10) ** 0.5  # scaling q by sqrt(d_out/d_in) turns the reference's 1/sqrt(d_out) into 1/sqrt(d_in)
    ref2 = lambda x: mha_forward(x, 1, m.query.weight * s, m.key.weight, m.value.weight, eye)
    err2, _ = cmp(m, ref2, 10)
    return err > 1e-3 and leak < TOL and err2 < TOL, f"max|out-ref|={err:.2e} (causal: leak={leak:.1e}); equals the single-head reference with scale 1/sqrt(d_in) (err {err2:.1e})", ""


def _dropout_entry(mod, tuple_out):
    m0 = randomize(mod.build(12, 3, CTX, p_drop=0.0)).eval()
    W, b = m0.c_attn.weight, m0.c_attn.bias
    ref = lambda x: mha_forward(x, 3, W[:12], W[12:24], W[24:], m0.c_proj.weight, b[:12], b[12:24], b[24:], m0.c_proj.bias)
    call0 = (lambda x: m0(x)[0]) if tuple_out else m0
    err, leak = cmp(call0, ref, 12)
    m1 = randomize(mod.build(12, 3, CTX, p_drop=0.5)).eval()
    call1 = (lambda x: m1(x)[0]) if tuple_out else m1
    x = torch.randn(2, 6, 12)
    torch.manual_seed(0)
    with torch.no_grad():
        a, c = call1(x), call1(x)
    diff_runs = (a - c).abs().max().item()
    diff_ref = (a - ref(x)).abs().max().item()
    return (err < TOL and leak < TOL and diff_runs > 1e-3,
            f"p=0 eval: max|out-ref|={err:.1e} leak={leak:.1e}; p=0.5 eval(): two calls differ by {diff_runs:.2e}, vs reference {diff_ref:.2e}", "")


@check("karpathy_nanogpt_pre_dropout_fix.py")
def _(mod):
    return _dropout_entry(mod, tuple_out=False)


@check("suno_bark_causal_self_attention.py")
def _(mod):
    """The dropout bug; and, with its cache, 2 new tokens after a prompt of 3 see each other on the flash path
    (is_causal=False whenever layer_past is given: right for one new token, not for two)."""
    good, msg, cfg = _dropout_entry(mod, tuple_out=True)
    m = randomize(mod.build(12, 3, CTX, p_drop=0.0)).eval()
    W, b = m.c_attn.weight, m.c_attn.bias
    ref = lambda x: mha_forward(x, 3, W[:12], W[12:24], W[24:], m.c_proj.weight, b[:12], b[12:24], b[24:], m.c_proj.bias)
    x = torch.randn(2, 6, 12, generator=torch.Generator().manual_seed(211))
    with torch.no_grad():
        past, outs = None, []
        for chunk in (x[:, :3], x[:, 3:4], x[:, 4:5], x[:, 5:6]):  # one token per call: right
            y, past = m(chunk, layer_past=past, use_cache=True)
            outs.append(y)
        single = (torch.cat(outs, 1) - ref(x)).abs().max().item()
        y0, past = m(x[:, :3], use_cache=True)
        y1, _ = m(x[:, 3:5], layer_past=past, use_cache=True)
        seen = ref(torch.cat([x[:, :3], x[:, 3:5]], 1))  # the reference, token 3 seeing tokens 0..3 only
        chunk_err = (y1[:, 0] - seen[:, 3]).abs().max().item()
        x2 = x.clone()
        x2[:, 4] += 1.0  # change token 4: a causal layer's token 3 does not move
        y1b, _ = m(x2[:, 3:5], layer_past=past, use_cache=True)
        moved = (y1b[:, 0] - y1[:, 0]).abs().max().item()
    return (good and m.flash and single < TOL and chunk_err > 1e-3 and moved > 1e-3,
            msg + f"; cache, one token per call: {single:.1e}; 2 new tokens in one call after a prompt of 3: token 3 "
                  f"off by {chunk_err:.2e} and moved {moved:.2e} by a change of token 4", cfg)


@check("ajhalthor_mha_merge_no_permute.py")
def _(mod):
    m = randomize(mod.MultiHeadAttention(12, 3)).eval()
    W, b, dh = m.qkv_layer.weight, m.qkv_layer.bias, 4
    pick = lambda T, j: torch.cat([T[h * 3 * dh + j * dh: h * 3 * dh + (j + 1) * dh] for h in range(3)], 0)
    ref = lambda x: mha_forward(x, 3, pick(W, 0), pick(W, 1), pick(W, 2), m.linear_layer.weight, pick(b, 0), pick(b, 1), pick(b, 2), m.linear_layer.bias)
    add = lambda n: torch.triu(torch.full((n, n), float("-inf")), 1)
    call = lambda x: m(x, add(x.shape[1]))
    err, leak = cmp(call, ref, 12, shapes=[(2, 7), (3, 5), (2, 10)])
    # a hand-written fixed merge (permute before reshape) with the same weights matches the reference: proves the layout mapping
    def fixed(x):
        B, n, _ = x.shape
        qkv = m.qkv_layer(x).reshape(B, n, 3, 3 * dh).permute(0, 2, 1, 3)
        q, k, v = qkv.chunk(3, dim=-1)
        vals, _ = mod.scaled_dot_product(q, k, v, add(n))
        return m.linear_layer(vals.permute(0, 2, 1, 3).reshape(B, n, 12))
    err_fix, _ = cmp(fixed, ref, 12, shapes=[(2, 7)])
    return err > 1e-3 and leak > 1e-3 and err_fix < TOL, (f"additive -inf mask: max|out-ref|={err:.2e}, future-leak={leak:.2e}; "
                                                         f"same weights with permute(0,2,1,3) before reshape match the reference ({err_fix:.1e}) [per-head q|k|v layout]"), ""


@check("hf_pytorch_pretrained_bert_gpt2_attention.py")
def _(mod):
    m = randomize(mod.build(12, 3, CTX, scale=True)).eval()
    W, b = m.c_attn.weight, m.c_attn.bias  # Conv1D: (in, out), y = x @ W + b
    ref = lambda x: mha_forward(x, 3, W[:, :12].T, W[:, 12:24].T, W[:, 24:].T, m.c_proj.weight.T, b[:12], b[12:24], b[24:], m.c_proj.bias)
    call = lambda x: m(x)[0]
    err, leak = cmp(call, ref, 12)
    # leak: make every real score about -1.2e5 (q = c*u, k = -c*u for all tokens): the masked -1e4 then wins
    with torch.no_grad():
        m.c_attn.weight[:, :24] = 0.0
        u = torch.ones(12)
        m.c_attn.bias[:12] = 100.0 * u
        m.c_attn.bias[12:24] = -100.0 * u
    x = torch.randn(1, 6, 12)
    with torch.no_grad():
        y = call(x)
        x2 = x.clone(); x2[:, 1:] += 3.0
        leak_big = (call(x2)[:, 0] - y[:, 0]).abs().max().item()
        err_big = (y - ref(x)).abs().max().item()
    return err < TOL and leak < TOL and leak_big > 1e-3, (f"ordinary weights: max|out-ref|={err:.1e} leak={leak:.1e}; scores ~ -1.2e5: "
                                                          f"position 0 moves by {leak_big:.2e} when tokens 1.. change, max|out-ref|={err_big:.2e}"), ""


# ----------------------------------------------------------------------------------------------- second batch (added later)
FLOAT32_TOL = 1e-5  # entries that compute part of the layer in float32 (whisper's softmax, lit-llama's and llama2.c's RoPE) - stated per entry


def _lesson_split_attention(x, nheads, wq, wk, wv, bq=None, bk=None, bv=None, scale=True, softmax_dim=-1, causal=True):
    """The lesson's split / scores / softmax / merge with a switchable softmax axis and scaling, WITHOUT the output projection."""
    B, n, _ = x.shape
    lin = torch.nn.functional.linear
    d_out = wq.shape[0]
    dh = d_out // nheads
    split = lambda t: t.view(B, n, nheads, dh).transpose(1, 2)
    q, k, v = split(lin(x, wq, bq)), split(lin(x, wk, bk)), split(lin(x, wv, bv))
    s = q @ k.transpose(2, 3)
    if scale:
        s = s / dh ** 0.5
    if causal:
        s = s.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
    w = torch.softmax(s, dim=softmax_dim)
    return (w @ v).transpose(1, 2).contiguous().view(B, n, d_out)


@check("d2l_multihead_attention_valid_lens.py")
def _(mod):
    msgs, errs, leaks = [], [], []
    for bias in (True, False):
        torch.manual_seed(0)
        m = mod.MultiHeadAttention(12, 3, 0.0, bias=bias)
        x0 = torch.randn(2, 3, 10)
        m(x0, x0, x0, None)  # materialise the LazyLinear layers with d_in = 10
        m = randomize(m).eval()
        g = lambda L: (L.weight, L.bias)
        (wq, bq), (wk, bk), (wv, bv), (wo, bo) = g(m.W_q), g(m.W_k), g(m.W_v), g(m.W_o)
        ref = lambda x: mha_forward(x, 3, wq, wk, wv, wo, bq, bk, bv, bo)
        call = lambda x: m(x, x, x, torch.arange(1, x.shape[1] + 1).repeat(x.shape[0], 1))
        e, l = cmp(call, ref, 10)
        errs.append(e); leaks.append(l); msgs.append(f"bias={bias}: max|out-ref|={e:.1e} leak={l:.1e}")
    good = max(errs) < TOL and max(leaks) < TOL
    return good, "; ".join(msgs), "d_in=10 (LazyLinear) num_hiddens=12 H=3, valid_lens=arange(1..n) per row"


@check("lucidrains_simple_hierarchical_attention.py")
def _(mod):
    m = randomize(mod.Attention(10, dim_head=4, heads=3)).eval()
    W = m.to_qkv.weight
    ref = lambda x: mha_forward(x, 3, W[:12], W[12:24], W[24:], m.to_out.weight)
    return ok_line(*cmp(m, ref, 10)) + ("dim=10 dim_head=4 heads=3 (inner 12), to_out 12->10, no biases, einops shim" +
                                        (" (real einops)" if getattr(mod.rearrange, "__module__", "").startswith("einops") else ""),)


def _per_head_pick(T, j, H, dh):
    return torch.cat([T[h * 3 * dh + j * dh: h * 3 * dh + (j + 1) * dh] for h in range(H)], 0)


@check("uvadlc_tutorial6_mha_per_head_qkv.py")
def _(mod):
    m = randomize(mod.MultiheadAttention(10, 12, 3)).eval()
    W, b = m.qkv_proj.weight, m.qkv_proj.bias
    p = lambda T, j: _per_head_pick(T, j, 3, 4)
    ref = lambda x: mha_forward(x, 3, p(W, 0), p(W, 1), p(W, 2), m.o_proj.weight, p(b, 0), p(b, 1), p(b, 2), m.o_proj.bias)
    call = lambda x: m(x, mask=torch.tril(torch.ones(x.shape[1], x.shape[1])))
    err, leak = cmp(call, ref, 10)
    ref_wrong = lambda x: mha_forward(x, 3, W[:12], W[12:24], W[24:], m.o_proj.weight, b[:12], b[12:24], b[24:], m.o_proj.bias)
    err_wrong, _ = cmp(call, ref_wrong, 10, shapes=[(2, 7)])
    good, msg = ok_line(err, leak)
    return good and err_wrong > 1e-3, msg + f"; [Q;K;V] row-block mapping instead: max|out-ref|={err_wrong:.2e}", "d_in=10 d_out=12 H=3, per-head [q_h;k_h;v_h] layout, mask=tril"


@check("uvadlc_tutorial6_mha_pre_fix.py")
def _(mod):
    m = randomize(mod.MultiheadAttention(12, 12, 3)).eval()
    W, b = m.qkv_proj.weight, m.qkv_proj.bias
    p = lambda T, j: _per_head_pick(T, j, 3, 4)
    ref = lambda x: mha_forward(x, 3, p(W, 0), p(W, 1), p(W, 2), m.o_proj.weight, p(b, 0), p(b, 1), p(b, 2), m.o_proj.bias)
    call = lambda x: m(x, mask=torch.tril(torch.ones(x.shape[1], x.shape[1])))
    err, leak = cmp(call, ref, 12)
    m2 = mod.MultiheadAttention(10, 12, 3)
    try:
        m2(torch.randn(2, 5, 10))
        shown, msg = False, "d_in=10 d_out=12 ran without error"
    except RuntimeError as e:
        shown, msg = True, f"d_in=10,d_out=12 constructed fine but forward raised RuntimeError ({str(e)[:60]}...)"
    return shown and err < TOL and leak < TOL, f"d_in=d_out=12 with mask: max|out-ref|={err:.1e} leak={leak:.1e}; {msg}", ""


@check("openai_whisper_mha.py")
def _(mod):
    m = randomize(mod.MultiHeadAttention(12, 3)).eval()
    mask = torch.empty(CTX, CTX).fill_(float("-inf")).triu_(1)
    ref = lambda x: mha_forward(x, 3, m.query.weight, m.key.weight, m.value.weight, m.out.weight, m.query.bias, None, m.value.bias, m.out.bias)
    err, leak = cmp(lambda x: m(x, mask=mask), ref, 12)
    scale = max(ref(torch.randn(2, 7, 12)).abs().max().item(), 1.0)
    err_nomask, leak_nomask = cmp(m, ref, 12, shapes=[(2, 7)])
    good = err / scale < FLOAT32_TOL and leak < TOL and leak_nomask > 1e-3
    return good, (f"with the decoder's additive mask: max|out-ref|={err:.1e} (float32 softmax; relative {err / scale:.1e} < {FLOAT32_TOL:g}) "
                  f"leak={leak:.1e}; without mask: leak={leak_nomask:.1e}"), "n_state=12 H=3, key has no bias"


@check("timm_attention_is_causal.py")
def _(mod):
    msgs, good = [], True
    for fused in (True, False):
        mod.FUSED = fused
        m = randomize(mod.Attention(10, num_heads=3, attn_head_dim=4, dim_out=12, qkv_bias=True)).eval()
        W, b = m.qkv.weight, m.qkv.bias
        ref = lambda x: mha_forward(x, 3, W[:12], W[12:24], W[24:], m.proj.weight, b[:12], b[12:24], b[24:], m.proj.bias)
        e1, l1 = cmp(lambda x: m(x, is_causal=True), ref, 10)
        e2, l2 = cmp(lambda x: m(x, attn_mask=torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).tril()), ref, 10)
        _, l3 = cmp(m, ref, 10, shapes=[(2, 7)])
        good = good and max(e1, e2, l1, l2) < TOL and l3 > 1e-3
        msgs.append(f"fused={fused}: is_causal=True {e1:.1e}/{l1:.1e}, bool tril mask {e2:.1e}/{l2:.1e}, m(x) leak={l3:.1e}")
    mod.FUSED = True
    return good, "; ".join(msgs) + " (max|out-ref|/leak)", "dim=10 H=3 head_dim=4 dim_out=12 qkv_bias"


@check("karpathy_mingpt_causal_self_attention.py")
def _(mod):
    m = randomize(mod.build(12, 3, CTX)).eval()
    ref = lambda x: mha_forward(x, 3, m.query.weight, m.key.weight, m.value.weight, m.proj.weight,
                                m.query.bias, m.key.bias, m.value.bias, m.proj.bias)
    return ok_line(*cmp(m, ref, 12)) + ("config object via build(), separate key/query/value with bias",)


@check("labml_mha_seq_first.py")
def _(mod):
    m = randomize(mod.MultiHeadAttention(3, 12, dropout_prob=0.0, bias=True)).eval()
    L = lambda p: (p.linear.weight, p.linear.bias)
    (wq, bq), (wk, bk), (wv, bv) = L(m.query), L(m.key), L(m.value)
    ref = lambda x: mha_forward(x, 3, wq, wk, wv, m.output.weight, bq, bk, bv, m.output.bias)

    def call(x):
        xt = x.transpose(0, 1)  # (n, B, d): sequence first
        n = x.shape[1]
        return m(query=xt, key=xt, value=xt, mask=torch.tril(torch.ones(n, n))[:, :, None]).transpose(0, 1)
    return ok_line(*cmp(call, ref, 12)) + ("inputs transposed to (n, B, d), mask tril[:, :, None], output transposed back",)


@check("pbloem_former_selfattention_gpt2.py")
def _(mod):
    m = randomize(mod.SelfAttentionGPT2(12, 3, mask=True)).eval()
    W, b = m.c_attn.weight, m.c_attn.bias
    ref = lambda x: mha_forward(x, 3, W[:12], W[12:24], W[24:], m.c_proj.weight, b[:12], b[12:24], b[24:], m.c_proj.bias)
    err, leak = cmp(m, ref, 12)
    m0 = mod.SelfAttentionGPT2(12, 3)  # default mask=False
    m0.load_state_dict(m.state_dict())
    _, leak0 = cmp(m0.eval(), ref, 12, shapes=[(2, 7)])
    good, msg = ok_line(err, leak)
    return good and leak0 > 1e-3, msg + f"; default mask=False: leak={leak0:.1e}", "emb=12 H=3 mask=True, fused [q;k;v]"


@check("pbloem_former_selfattention_scale_e.py")
def _(mod):
    m = randomize(mod.SelfAttention(12, heads=3, mask=True)).eval()
    ref = lambda x: mha_forward(x, 3, m.toqueries.weight, m.tokeys.weight, m.tovalues.weight, m.unifyheads.weight,
                                None, None, None, m.unifyheads.bias)
    err, leak = cmp(m, ref, 12)
    s = (4 / 12) ** 0.5  # scaling q by sqrt(dh/d) turns the reference's 1/sqrt(dh) into 1/sqrt(d)
    ref2 = lambda x: mha_forward(x, 3, m.toqueries.weight * s, m.tokeys.weight, m.tovalues.weight, m.unifyheads.weight,
                                 None, None, None, m.unifyheads.bias)
    err2, _ = cmp(m, ref2, 12)
    return (err > 1e-3 and leak < TOL and err2 < TOL,
            f"max|out-ref|={err:.2e} (causal: leak={leak:.1e}); equals the reference with scale 1/sqrt(d_model) (err {err2:.1e})", "")


@check("kronos_cross_attention_causal_only_training.py")
def _(mod):
    m = randomize(mod.MultiHeadCrossAttentionWithRoPE(12, 3))
    lin = torch.nn.functional.linear

    def rope_ref(x, causal):  # independent RoPE (rotate-half, base 10000) + lesson attention
        B, n, _ = x.shape
        split = lambda t: t.view(B, n, 3, 4).transpose(1, 2)
        q, k, v = (split(lin(x, L.weight, L.bias)) for L in (m.q_proj, m.k_proj, m.v_proj))
        inv = 1.0 / (10000 ** (torch.arange(0, 4, 2, dtype=torch.float64) / 4))
        ang = torch.arange(n, dtype=torch.float64)[:, None] * inv[None, :]
        cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()
        rot = lambda t: torch.cat([-t[..., 2:], t[..., :2]], -1)
        q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
        s = q @ k.transpose(2, 3) / 2.0
        if causal:
            s = s.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
        return lin((torch.softmax(s, -1) @ v).transpose(1, 2).contiguous().view(B, n, 12), m.out_proj.weight, m.out_proj.bias)

    call = lambda x: m(x, x, x)
    m.train()  # dropout probabilities are 0, so train() only switches is_causal on
    e_tr, l_tr = cmp(call, lambda x: rope_ref(x, True), 12)
    m.eval()
    e_ev, l_ev = cmp(call, lambda x: rope_ref(x, False), 12)
    e_ev_causal, _ = cmp(call, lambda x: rope_ref(x, True), 12, shapes=[(2, 7)])
    scale = max(rope_ref(torch.randn(2, 7, 12), True).abs().max().item(), 1.0)  # the module's cos/sin are float32 (inv_freq .float())
    good = e_tr / scale < FLOAT32_TOL and l_tr < TOL and e_ev / scale < FLOAT32_TOL and l_ev > 1e-3 and e_ev_causal > 1e-3
    return good, (f"train(): equals causal RoPE reference ({e_tr:.1e}, float32 cos/sin), leak={l_tr:.1e}; eval(): equals the BIDIRECTIONAL "
                  f"RoPE reference ({e_ev:.1e}), future-leak={l_ev:.2e}, vs causal reference {e_ev_causal:.2e}"), "d_model=12 H=3, called as m(x, x, x)"


@check("datawhale_ch03_wrapper_softmax_dim1.py")
def _(mod):
    m = randomize(mod.MultiHeadAttentionWrapper(10, 4, CTX, 0.0, 3, qkv_bias=True)).eval()
    cat = lambda a: torch.cat([getattr(h, a).weight for h in m.heads], 0)
    catb = lambda a: torch.cat([getattr(h, a).bias for h in m.heads], 0)
    args = (cat("W_query"), cat("W_key"), cat("W_value"), catb("W_query"), catb("W_key"), catb("W_value"))
    ref = lambda x: mha_forward(x, 3, args[0], args[1], args[2], torch.eye(12), args[3], args[4], args[5], None)
    err, leak = cmp(m, ref, 10)
    wrong_axis = lambda x: _lesson_split_attention(x, 3, *args, softmax_dim=-2)
    err_axis, _ = cmp(m, wrong_axis, 10)
    return (err > 1e-3 and leak > 1e-3 and err_axis < TOL,
            f"vs reference (W_o = I): max|out-ref|={err:.2e}, future-leak={leak:.2e}; equals the lesson's layer with softmax over dim=-2 "
            f"(queries) ({err_axis:.1e})", "3 heads of width 4, no out-proj")


@check("graykode_nlp_tutorial_linear_in_forward.py")
def _(mod):
    m = randomize(mod.build(12, 3)).eval()
    n_params = sum(p.numel() for p in m.parameters())
    mask = lambda x: mod.get_attn_subsequent_mask(x[..., 0]).bool()
    x = torch.randn(2, 6, 12)
    with torch.no_grad():
        a, b = m(x, x, x, mask(x))[0], m(x, x, x, mask(x))[0]
    differ = (a - b).abs().max().item()

    def seeded_call(x, seed=7):
        torch.manual_seed(seed)
        return m(x, x, x, mask(x))[0]

    def seeded_ref(x, seed=7):
        torch.manual_seed(seed)
        fresh = torch.nn.Linear(12, 12)  # the same RNG draws as the nn.Linear built inside forward
        y = mha_forward(x, 3, m.W_Q.weight, m.W_K.weight, m.W_V.weight, fresh.weight, m.W_Q.bias, m.W_K.bias, m.W_V.bias, fresh.bias)
        return torch.nn.functional.layer_norm(y + x, (12,))
    err, leak = cmp(seeded_call, seeded_ref, 12)
    good = differ > 1e-3 and n_params == 3 * (12 * 12 + 12) and err < TOL and leak < TOL
    return good, (f"two eval() calls on the same input differ by {differ:.2e}; {n_params} registered params = W_Q/W_K/W_V only; with the RNG "
                  f"seeded, equals LayerNorm(reference(W_o = that fresh Linear) + x): max|out-ref|={err:.1e} leak={leak:.1e}"), "globals via build(12, 3)"


@check("fuxictr_mha_split_view.py")
def _(mod):
    lin = torch.nn.functional.linear
    res = []
    for use_scale in (True, False):
        m = randomize(mod.MultiHeadAttention(12, num_heads=3, use_residual=False, use_scale=use_scale)).eval()
        call = lambda x: m(x, x, x)[0]

        def view_order(x):  # the split-view-order mistake written out: view(B*H, n, dh) straight from (B, n, H*dh)
            B, n, _ = x.shape
            q, k, v = (lin(x, L.weight).view(B * 3, n, 4) for L in (m.W_q, m.W_k, m.W_v))
            s = q @ k.transpose(1, 2)
            if use_scale:
                s = s / 2.0
            return (torch.softmax(s, -1) @ v).view(B, n, 12).relu()
        correct = lambda x: _lesson_split_attention(x, 3, m.W_q.weight, m.W_k.weight, m.W_v.weight, scale=use_scale, causal=False).relu()
        e_vo, leak = cmp(call, view_order, 12, shapes=[(2, 7), (3, 5), (2, 3)])
        e_ok, _ = cmp(call, correct, 12, shapes=[(2, 7), (3, 5), (2, 3)])
        res.append((use_scale, e_vo, e_ok, leak))
    good = all(e_vo < TOL and e_ok > 1e-3 for _, e_vo, e_ok, _ in res)
    return good, "; ".join(f"use_scale={s}: equals the view(B*H, n, dh) split ({a:.1e}), vs correct split+transpose {b:.2e}, future-leak={l:.1e} (not causal)"
                           for s, a, b, l in res), "use_residual=False, relu output, H=3 dh=4"


@check("lit_llama_causal_self_attention_rope_kvcache.py")
def _(mod):
    m = randomize(mod.build(12, 3, CTX)).eval()
    W = m.c_attn.weight
    ref = lambda x: mha_forward(x, 3, W[:12], W[12:24], W[24:], m.c_proj.weight)
    ident = lambda T: torch.stack([torch.ones(T, 2), torch.zeros(T, 2)], -1)  # RoPE cache with cos=1, sin=0
    tril = lambda T: torch.ones(T, T, dtype=torch.bool).tril()[None, None]
    call = lambda x: m(x, ident(x.shape[1]), tril(x.shape[1]), CTX)[0]
    err, leak = cmp(call, ref, 12)
    scale = max(ref(torch.randn(2, 7, 12)).abs().max().item(), 1.0)
    # real RoPE: full forward vs token-by-token with the KV cache
    x = torch.randn(2, 6, 12)
    rope, mask = mod.causal_inputs(m, 6, dtype=torch.float64)
    with torch.no_grad():
        full = m(x, rope, mask, CTX)[0]
        cache = (torch.zeros(2, 3, CTX, 4), torch.zeros(2, 3, CTX, 4))
        full_rope, full_mask = mod.causal_inputs(m, CTX, dtype=torch.float64)
        steps = []
        for t in range(6):
            pos = torch.tensor([t])
            y, cache = m(x[:, t:t + 1], full_rope.index_select(0, pos), full_mask.index_select(2, pos), CTX, pos, cache)
            steps.append(y)
        inc = torch.cat(steps, 1)
    kv_err = (inc - full).abs().max().item()
    _, leak_rope = cmp(lambda z: m(z, *mod.causal_inputs(m, z.shape[1], dtype=torch.float64), CTX)[0], lambda z: torch.zeros(z.shape[0], z.shape[1], 12), 12)
    good = err / scale < FLOAT32_TOL and leak < TOL and leak_rope < TOL and kv_err < 1e-5
    return good, (f"identity RoPE (cos=1, sin=0) + tril mask: max|out-ref|={err:.1e} (float32 RoPE; relative {err / scale:.1e}) leak={leak:.1e}; "
                  f"real RoPE: leak={leak_rope:.1e}, KV-cache token-by-token vs full forward {kv_err:.1e}"), "NOT drivable as m(x): needs rope, mask, max_seq_length"

# ----------------------------------------------------------------------------------------------- third batch
@check("priyangkarghosh_tllm_casual_self_attention.py")
def _(mod):
    m = randomize(mod.CasualSelfAttention(mod.GPTConfig(n_embd=12, n_head=3, block_size=CTX))).eval()
    W, b = m.c_attn.weight, m.c_attn.bias
    ref = lambda x: mha_forward(x, 3, W[:12], W[12:24], W[24:], m.c_proj.weight, b[:12], b[12:24], b[24:], m.c_proj.bias)
    try:
        mod.CasualSelfAttention(mod.GPTConfig(n_embd=10, n_head=3, block_size=CTX))
        refused = False
    except AssertionError:
        refused = True
    good, msg = ok_line(*cmp(m, ref, 12))
    return good and refused, msg + f"; n_embd=10, n_head=3 refused: {refused}", "config shim GPTConfig(n_embd=12, n_head=3), fused [q;k;v]"


@check("aksionov_nanogptplus_mha_is_decoder.py")
def _(mod):
    m = randomize(mod.build(12, 3, CTX)).eval()
    cat = lambda a: torch.cat([getattr(h, a).weight for h in m.heads], 0)
    ref = lambda x: mha_forward(x, 3, cat("query_weights"), cat("key_weights"), cat("value_weights"), m.projection.weight,
                                None, None, None, m.projection.bias)
    err, leak = cmp(m, ref, 12)
    enc = mod.MultiHeadAttention(12, CTX, None, 3, 0.0, is_decoder=False)
    enc.load_state_dict(m.state_dict())
    _, leak_enc = cmp(enc.eval(), ref, 12, shapes=[(2, 7)])
    try:
        mod.build(10, 3, CTX)
        refused = False
    except ValueError:
        refused = True
    good, msg = ok_line(err, leak)
    return (good and refused and leak_enc > 1e-3,
            msg + f"; d=10, 3 heads (head_size=None) refused: {refused}; is_decoder=False: leak={leak_enc:.1e} (encoder, by design)",
            "build(12, 3, 10): head_size=None, is_decoder=True; per-head ModuleList")


@check("karpathy_llama2c_attention_identity_rope.py")
def _(mod):
    m = randomize(mod.make_identity_rope(12, 3, CTX)).eval()
    a = m.attn
    ref = lambda x: mha_forward(x, 3, a.wq.weight, a.wk.weight, a.wv.weight, a.wo.weight)
    err, leak = cmp(m, ref, 12)
    scale = max(ref(torch.randn(2, 7, 12)).abs().max().item(), 1.0)
    # real RoPE: an independent reference (adjacent pairs (2i, 2i+1) as complex numbers, rotated by t * 10000**(-2i/dh))
    r = randomize(mod.make_real_rope(12, 3, CTX)).eval()
    ra = r.attn
    lin = torch.nn.functional.linear

    def rope_ref(x):
        B, n, _ = x.shape
        split = lambda t: t.view(B, n, 3, 4)
        q, k, v = split(lin(x, ra.wq.weight)), split(lin(x, ra.wk.weight)), split(lin(x, ra.wv.weight))
        theta = 10000.0 ** (-torch.arange(0, 4, 2, dtype=torch.float64) / 4)
        rot = torch.polar(torch.ones(n, 2, dtype=torch.float64), torch.arange(n, dtype=torch.float64)[:, None] * theta[None, :])
        c = lambda t: torch.view_as_real(torch.view_as_complex(t.reshape(B, n, 3, 2, 2).contiguous()) * rot[None, :, None, :]).reshape(B, n, 3, 4)
        q, k, v = c(q).transpose(1, 2), c(k).transpose(1, 2), v.transpose(1, 2)
        s = (q @ k.transpose(2, 3) / 2.0).masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
        return lin((torch.softmax(s, -1) @ v).transpose(1, 2).contiguous().view(B, n, 12), ra.wo.weight)
    err_rope, leak_rope = cmp(r, rope_ref, 12)
    scale_rope = max(rope_ref(torch.randn(2, 7, 12)).abs().max().item(), 1.0)
    err_wrong, _ = cmp(r, lambda x: mha_forward(x, 3, ra.wq.weight, ra.wk.weight, ra.wv.weight, ra.wo.weight), 12, shapes=[(2, 7)])
    built = mod.make_identity_rope(8, 3, CTX)  # no divisibility check: heads of width 2 cover 6 of 8 features
    params = {n: tuple(p.shape) for n, p in built.named_parameters()}
    good = (err / scale < FLOAT32_TOL and leak < TOL and err_rope / scale_rope < FLOAT32_TOL and leak_rope < TOL
            and err_wrong > 1e-3 and params["attn.wq.weight"] == (6, 8) and all(not n.endswith("bias") for n in params))
    return good, (f"identity RoPE: max|out-ref|={err:.1e} (float32 RoPE; relative {err / scale:.1e}) leak={leak:.1e}; "
                  f"real RoPE vs independent complex-pair RoPE reference: {err_rope:.1e} (relative {err_rope / scale_rope:.1e}) leak={leak_rope:.1e}, "
                  f"vs no-RoPE reference {err_wrong:.2e}; dim=8, 3 heads built with wq {params['attn.wq.weight']}, no biases"), \
        "make_identity_rope(12, 3, 10): n_kv_heads = n_heads, SDPA path"


# ----------------------------------------------------------------------------------------------- rotary entries
def _rasbt_llama2_rope(mod, convention, tol=TOL):
    """Both versions of the book's Llama 2 MHA against the rotary reference in their own convention; and not the
    other convention's numbers (so the entry shows which one it is) nor the plain layer's.  The rotate-half version
    computes its frequencies in float32 (`.float()`), so it is compared at FLOAT32_TOL, relative."""
    m = randomize(mod.MultiHeadAttention(12, 12, CTX, 3)).eval()
    ws = (m.W_query.weight, m.W_key.weight, m.W_value.weight, m.out_proj.weight)
    ref = lambda x: rope_mha_forward(x, 3, *ws, convention=convention)
    other = "half" if convention == "interleaved" else "interleaved"
    err, leak = cmp(m, ref, 12)
    err_other, _ = cmp(m, lambda x: rope_mha_forward(x, 3, *ws, convention=other), 12, shapes=[(2, 7)])
    err_plain, _ = cmp(m, lambda x: mha_forward(x, 3, *ws), 12, shapes=[(2, 7)])
    scale = max(ref(torch.randn(2, 7, 12)).abs().max().item(), 1.0)
    good = err / scale < tol and leak < TOL and err_other > 1e-3 and err_plain > 1e-3
    return good, (f"max|out-ref|={err:.1e} (relative {err / scale:.1e}) future-leak={leak:.1e} ({convention} RoPE); vs {other} RoPE "
                  f"{err_other:.2e}, vs no RoPE {err_plain:.2e}"), "d=12 H=3 dh=4, no biases"


@check("rasbt_llama2_mha_rope_interleaved.py")
def _(mod):
    return _rasbt_llama2_rope(mod, "interleaved")


@check("rasbt_llama2_mha_rope_half.py")
def _(mod):
    return _rasbt_llama2_rope(mod, "half", FLOAT32_TOL)
# ----------------------------------------------------------------------------------------------- KV-cache entries
def _rasbt_ref(m, heads):
    return lambda x: mha_forward(x, heads, m.W_query.weight, m.W_key.weight, m.W_value.weight, m.out_proj.weight,
                                 m.W_query.bias, m.W_key.bias, m.W_value.bias, m.out_proj.bias)


def _decoded(step, reset, x, prefix):
    """A prompt of `prefix` tokens, then one token per call; `step(chunk)` -> output, `reset()` starts a sequence."""
    reset()
    with torch.no_grad():
        return torch.cat([step(x[:, :prefix])] + [step(x[:, t:t + 1]) for t in range(prefix, x.shape[1])], 1)


def _cache_err(m, ref, step, reset, d_in):
    """max |decoded - reference| over two sequences (and prompts of 1, 3 and 6 tokens), with a reset between."""
    err = 0.0
    for i, prefix in enumerate((1, 3, 6)):
        x = torch.randn(2, 8, d_in, generator=torch.Generator().manual_seed(200 + i))
        err = max(err, (_decoded(step, reset, x, prefix) - ref(x)).abs().max().item())
    return err


def _chunk_decoded(step, reset, x, prefix, chunk=2):
    """A prompt of `prefix` tokens, then `chunk` new tokens in one call, then one per call: (output, "") or (None,
    the first line of what the call raised)."""
    reset()
    with torch.no_grad():
        try:
            outs = [step(x[:, :prefix]), step(x[:, prefix:prefix + chunk])]
            outs += [step(x[:, t:t + 1]) for t in range(prefix + chunk, x.shape[1])]
        except RuntimeError as e:
            return None, str(e).splitlines()[0]
    return torch.cat(outs, 1), ""


def _internal_cache_entry(mod):
    """(good, line, config) for rasbt's ch04 internal cache; also decodes a chunk of 2 new tokens after a prompt
    of 3: (its error against the reference, or what it raised)."""
    m = randomize(mod.MultiHeadAttention(10, 12, CTX, 0.0, 3, qkv_bias=True)).eval()
    ref = _rasbt_ref(m, 3)
    err, leak = cmp(m, ref, 10)
    cache = _cache_err(m, ref, lambda c: m(c, use_cache=True), m.reset_cache, 10)
    good, msg = ok_line(err, leak)
    x = torch.randn(2, 8, 10, generator=torch.Generator().manual_seed(210))
    chunked, raised = _chunk_decoded(lambda c: m(c, use_cache=True), m.reset_cache, x, 3)
    chunk = (chunked - ref(x)).abs().max().item() if chunked is not None else float("nan")
    return (good and cache < TOL, msg + f" cached-decode-vs-ref={cache:.1e} (prompts 1, 3, 6 then one token per "
            "call, reset_cache() between)", "d_in=10 d_out=12 H=3 qkv_bias"), chunk, raised


@check("rasbt_ch04_kv_cache_mha.py")
def _(mod):
    """BUG (fixed upstream by pull request #697, rasbt_ch04_kv_cache_ptr_mha.py): mask[:n, :n] is right for one new
    token per call, and raises for 2 new tokens after a prompt (scores (2, 5) against a (2, 2) mask)."""
    (good, msg, cfg), _, raised = _internal_cache_entry(mod)
    return (good and "must match" in raised, msg + f"; prompt of 3 then 2 new tokens in one call raises: {raised[:90]}",
            cfg)


@check("rasbt_ch04_kv_cache_ptr_mha.py")
def _(mod):
    (good, msg, cfg), chunk, _ = _internal_cache_entry(mod)
    return good and chunk < TOL, msg + f"; prompt of 3 then 2 new tokens in one call: {chunk:.1e}", cfg


@check("rasbt_pkg_kv_cache_gpt2_mha.py")
def _(mod):
    m = randomize(mod.MultiHeadAttention(10, 12, CTX, 0.0, 3, qkv_bias=True)).eval()
    ref = _rasbt_ref(m, 3)
    err, leak = cmp(lambda x: m(x)[0], ref, 10)
    x = torch.randn(2, 6, 10, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        prompt, cache = m(x[:, :3], use_cache=True)
        prompt_err = (prompt - ref(x)[:, :3]).abs().max().item()
        try:
            m(x[:, 3:4], use_cache=True, cache=cache)
            raised = ""
        except RuntimeError as e:
            raised = str(e).splitlines()[0]
        # the fix of pull request #1048: rows, not columns, of the mask; with it the same decode equals the reference
        fixed = lambda c, kv: _rows_fixed(m, c, kv)
        out, kv = fixed(x[:, :3], None)
        outs = [out]
        for t in range(3, 6):
            out, kv = fixed(x[:, t:t + 1], kv)
            outs.append(out)
        fixed_err = (torch.cat(outs, 1) - ref(x)).abs().max().item()
    good = err < TOL and leak < TOL and prompt_err < TOL and "shape" in raised and fixed_err < TOL
    return good, (f"no cache: max|out-ref|={err:.1e} leak={leak:.1e}; prompt of 3 on an empty cache {prompt_err:.1e}; "
                  f"first decoded token raises: {raised[:90]}; with the mask's rows taken instead (PR #1048) the "
                  f"decode equals the reference: {fixed_err:.1e}"), "d_in=10 d_out=12 H=3 qkv_bias"


def _rows_fixed(m, x, cache):
    """The entry's forward with causal_mask[-num_tokens:, :] (the upstream fix), written out here."""
    b, n, _ = x.shape
    split = lambda t: t.view(b, n, m.num_heads, m.head_dim).transpose(1, 2)
    q, k, v = split(m.W_query(x)), split(m.W_key(x)), split(m.W_value(x))
    if cache is not None:
        k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
    L = k.shape[2]
    mask = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)[-n:, :]
    w = torch.softmax((q @ k.transpose(2, 3)).masked_fill(mask, float("-inf")) / m.head_dim ** 0.5, -1)
    return m.out_proj((w @ v).transpose(1, 2).contiguous().view(b, n, m.d_out)), (k, v)
# ----------------------------------------------------------------------------------------------- grouped-query entries
@check("rasbt_ch04_gqa_kv_cache.py")
def _(mod):
    errs, leaks = [], []
    for kv in (2, 1, 4):
        m = randomize(mod.GroupedQueryAttention(10, 12, 0.0, 4, kv, qkv_bias=True)).eval()
        ref = lambda x, m=m: gqa_forward(x, 4, m.W_query.weight, m.W_key.weight, m.W_value.weight, m.out_proj.weight,
                                         m.W_query.bias, m.W_key.bias, m.W_value.bias, None)
        err, leak = cmp(m, ref, 10)
        errs.append(err)
        leaks.append(leak)
    good, msg = ok_line(max(errs), max(leaks))
    return good, msg, "d_in=10 d_out=12 H=4, num_kv_groups 2, 1, 4, qkv_bias; vs reference.grouped_mha.gqa_forward"


@check("karpathy_llama2c_gqa_identity_rope.py")
def _(mod):
    m = randomize(mod.make_identity_rope_gqa(16, 4, 2, CTX)).eval()
    a = m.attn
    ref = lambda x: gqa_forward(x, 4, a.wq.weight, a.wk.weight, a.wv.weight, a.wo.weight)
    err, leak = cmp(m, ref, 16)
    scale = max(ref(torch.randn(2, 7, 16)).abs().max().item(), 1.0)
    x = torch.randn(2, 7, 16)
    tiled = lambda t: t.view(2, 7, 2, 4).transpose(1, 2).repeat(1, 2, 1, 1)  # the `.repeat` pairing, for contrast
    q = torch.nn.functional.linear(x, a.wq.weight).view(2, 7, 4, 4).transpose(1, 2)
    k, v = tiled(torch.nn.functional.linear(x, a.wk.weight)), tiled(torch.nn.functional.linear(x, a.wv.weight))
    s = (q @ k.transpose(2, 3) / 4 ** 0.5).masked_fill(torch.triu(torch.ones(7, 7, dtype=torch.bool), 1), float("-inf"))
    wrong = torch.nn.functional.linear((torch.softmax(s, -1) @ v).transpose(1, 2).reshape(2, 7, 16), a.wo.weight)
    with torch.no_grad():
        apart = (m(x) - wrong).abs().max().item()
    good = err / scale < FLOAT32_TOL and leak < TOL and apart > 1e-3
    return good, (f"max|out-ref|={err:.1e} (float32 RoPE; relative {err / scale:.1e}) leak={leak:.1e}; "
                  f"vs the .repeat pairing {apart:.2e}"), "make_identity_rope_gqa(16, 4, 2, 10): n_kv_heads=2"



# ----------------------------------------------------------------------------------------------- issue 28 item 7 batch
def _lesson_fill(x, nheads, wq, wk, wv, wo, bq=None, bk=None, bv=None, bo=None, fill=float("-inf")):
    """The lesson's layer with the future's scores REPLACED by `fill` (-inf: the reference itself)."""
    B, n, _ = x.shape
    lin = torch.nn.functional.linear
    d_out = wq.shape[0]
    dh = d_out // nheads
    split = lambda t: t.view(B, n, nheads, dh).transpose(1, 2)
    q, k, v = split(lin(x, wq, bq)), split(lin(x, wk, bk)), split(lin(x, wv, bv))
    s = (q @ k.transpose(2, 3) / dh ** 0.5).masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), fill)
    return lin((torch.softmax(s, -1) @ v).transpose(1, 2).contiguous().view(B, n, d_out), wo, bo)


def _keep_mask(n):
    return torch.ones(n, n, dtype=torch.bool).tril()[None, None]


@check("gordicaleksa_mha_spelled_out_names.py")
def _(mod):
    m = randomize(mod.build(12, 3, 0.0)).eval()
    L = m.qkv_nets
    ref = lambda x: mha_forward(x, 3, L[0].weight, L[1].weight, L[2].weight, m.out_projection_net.weight,
                                L[0].bias, L[1].bias, L[2].bias, m.out_projection_net.bias)
    err, leak = cmp(lambda x: m(x, x, x, _keep_mask(x.shape[1])), ref, 12)
    try:
        mod.build(10, 3, 0.0)
        refused = False
    except AssertionError:
        refused = True
    good, msg = ok_line(err, leak)
    return good and refused, msg + f"; model_dimension=10, 3 heads refused: {refused}", \
        "build(12, 3, 0.0) = MultiHeadedAttention(..., log_attention_weights=False), called as m(x, x, x, tril keep-mask (1, 1, n, n))"


def _hyunwoongko_weights(m):
    g = lambda L: (L.weight, L.bias)
    (wq, bq), (wk, bk), (wv, bv) = g(m.w_q), g(m.w_k), g(m.w_v)
    return wq, wk, wv, bq, bk, bv


@check("hyunwoongko_mha_fill_minus_1e12.py")
def _(mod):
    m = randomize(mod.MultiHeadAttention(12, 3)).eval()
    wq, wk, wv, bq, bk, bv = _hyunwoongko_weights(m)
    wo, bo = m.w_concat.weight, m.w_concat.bias
    call = lambda x: m(x, x, x, mask=torch.ones(x.shape[1], x.shape[1]).tril())  # the model's make_no_peak_mask, 1 = keep
    err, leak = cmp(call, lambda x: mha_forward(x, 3, wq, wk, wv, wo, bq, bk, bv, bo), 12)
    err_fill, _ = cmp(call, lambda x: _lesson_fill(x, 3, wq, wk, wv, wo, bq, bk, bv, bo, fill=-1e-12), 12)
    _, leak_nomask = cmp(lambda x: m(x, x, x), lambda x: torch.zeros(x.shape[0], x.shape[1], 12), 12, shapes=[(2, 7)])
    good = err > 1e-3 and leak > 1e-3 and err_fill < TOL and leak_nomask > 1e-3
    return good, (f"with the keep-mask: max|out-ref|={err:.2e}, future-leak={leak:.2e}; equals the lesson's layer with the "
                  f"future's scores set to -1e-12 ({err_fill:.1e}); without a mask: leak={leak_nomask:.2e}"), "d_model=12 n_head=3"


@check("hyunwoongko_mha_fill_minus_1e4.py")
def _(mod):
    m = randomize(mod.MultiHeadAttention(12, 3)).eval()
    wq, wk, wv, bq, bk, bv = _hyunwoongko_weights(m)
    wo, bo = m.w_concat.weight, m.w_concat.bias
    call = lambda x: m(x, x, x, mask=torch.ones(x.shape[1], x.shape[1]).tril())
    ref = lambda x: mha_forward(x, 3, wq, wk, wv, wo, bq, bk, bv, bo)
    err, leak = cmp(call, ref, 12)
    # make every real score -40000 / sqrt(4) = -2e4 (q = 100 u, k = -100 u for every token): the -1e4 fill then wins
    with torch.no_grad():
        m.w_q.weight.zero_()
        m.w_k.weight.zero_()
        m.w_q.bias.fill_(100.0)
        m.w_k.bias.fill_(-100.0)
    x = torch.randn(1, 6, 12)
    with torch.no_grad():
        y = call(x)
        x2 = x.clone()
        x2[:, 1:] += 3.0
        leak_big = (call(x2)[:, 0] - y[:, 0]).abs().max().item()
        err_fill = (y - _lesson_fill(x, 3, m.w_q.weight, m.w_k.weight, wv, wo, m.w_q.bias, m.w_k.bias, bv, bo,
                                     fill=-10000.0)).abs().max().item()
    good = err < TOL and leak < TOL and leak_big > 1e-3 and err_fill < TOL
    return good, (f"ordinary weights: max|out-ref|={err:.1e} leak={leak:.1e}; scores ~ -2e4: position 0 moves by "
                  f"{leak_big:.2e} when tokens 1.. change (equals the lesson's layer with a -1e4 fill: {err_fill:.1e})"), \
        "d_model=12 n_head=3, keep-mask"


@check("hyunwoongko_mha_first_version.py")
def _(mod):
    m = randomize(mod.MultiHeadAttention(12, 3)).eval()
    wq, wk, wv, bq, bk, bv = _hyunwoongko_weights(m)
    lin = torch.nn.functional.linear

    def seven(x, mask):  # the seven mistakes written out, as reshapes of the projected (B, n, 12) tensors
        B, n, _ = x.shape
        q = lin(x, wq, bq).reshape(B, 3, n, 4)                   # (3) split without transpose
        k = lin(x, wk, bk).reshape(B, 3, 4, n)                   # (3)+(4) keys reshaped, not transposed
        v = lin(x, wv, bv).reshape(B, 3, n, 4)
        s = torch.einsum("bhid,bhdj->bhij", q, k) / 12 ** 0.5   # (2) sqrt(d_model)
        s = torch.where(mask == 0, torch.full_like(s, -1e-12), s)  # (7)
        w = torch.exp(s - s.amax(1, keepdim=True))
        w = w / w.sum(1, keepdim=True)                           # (5) softmax over dim 1, the heads
        return torch.einsum("bhij,bhjd->bhid", w, v).reshape(B, n, 12)  # (6) merge without transpose, (1) no W_o
    call = lambda x: m(x, x, x, mask=torch.ones(x.shape[1], x.shape[1]).tril())
    err_seven, leak = cmp(call, lambda x: seven(x, torch.ones(x.shape[1], x.shape[1]).tril()), 12)
    err_ref, _ = cmp(call, lambda x: mha_forward(x, 3, wq, wk, wv, torch.eye(12), bq, bk, bv, None), 12)
    n_params = sum(p.numel() for p in m.parameters())
    good = err_seven < TOL and err_ref > 1e-3 and leak > 1e-3 and n_params == 3 * (12 * 12 + 12)
    return good, (f"equals the seven mistakes written out ({err_seven:.1e}); vs the causal reference with W_o = I "
                  f"{err_ref:.2e}; future-leak with the keep-mask {leak:.2e}; {n_params} params (no W_o)"), \
        "d_model=12 n_head=3, keep-mask"


def _gqa_rope_ref(x, H, KV, wq, wk, wv, wo, base=10000.0):
    """Grouped-query attention with RoPE on adjacent pairs (2i, 2i+1) as complex numbers turned by t * base**(-2i/dh);
    query head h reads key/value head h // (H // KV).  Independent of the entry's code."""
    B, n, d = x.shape
    dh = d // H
    lin = torch.nn.functional.linear
    q, k, v = lin(x, wq).view(B, n, H, dh), lin(x, wk).view(B, n, KV, dh), lin(x, wv).view(B, n, KV, dh)
    theta = base ** (-torch.arange(0, dh, 2, dtype=torch.float64) / dh)
    rot = torch.polar(torch.ones(n, dh // 2, dtype=torch.float64), torch.arange(n, dtype=torch.float64)[:, None] * theta)
    c = lambda t, h: torch.view_as_real(torch.view_as_complex(t.reshape(B, n, h, dh // 2, 2).contiguous())
                                        * rot[None, :, None, :]).reshape(B, n, h, dh)
    q, k, v = c(q, H).transpose(1, 2), c(k, KV).transpose(1, 2), v.transpose(1, 2)
    g = H // KV
    k, v = k[:, [h // g for h in range(H)]], v[:, [h // g for h in range(H)]]
    s = (q @ k.transpose(2, 3) / dh ** 0.5).masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
    return lin((torch.softmax(s, -1) @ v).transpose(1, 2).contiguous().view(B, n, d), wo)


@check("gptfast_attention_gqa_rope.py")
def _(mod):
    msgs, good = [], True
    for kv in (2, 1, 4):
        m = randomize(mod.make_gqa_rope(16, 4, kv, CTX)).eval()
        a = m.attention
        W = a.wqkv.weight
        wq, wk, wv = W[:16], W[16:16 + 4 * kv], W[16 + 4 * kv:]
        ref = lambda x: _gqa_rope_ref(x, 4, kv, wq, wk, wv, a.wo.weight)
        err, leak = cmp(m, ref, 16)
        scale = max(ref(torch.randn(2, 7, 16)).abs().max().item(), 1.0)
        i = randomize(mod.make_gqa_identity_rope(16, 4, kv, CTX)).eval()
        Wi = i.attention.wqkv.weight
        err_id, leak_id = cmp(i, lambda x: gqa_forward(x, 4, Wi[:16], Wi[16:16 + 4 * kv], Wi[16 + 4 * kv:], i.attention.wo.weight), 16)
        err_norope, _ = cmp(m, lambda x: gqa_forward(x, 4, wq, wk, wv, a.wo.weight), 16, shapes=[(2, 7)])
        ok = err / scale < FLOAT32_TOL and leak < TOL and err_id / scale < FLOAT32_TOL and leak_id < TOL and err_norope > 1e-3
        if kv == 2:  # the `.repeat` pairing (query head h reads kv head h % KV) for contrast
            tiled = lambda t: t[:, [h % kv for h in range(4)]]
            x = torch.randn(2, 7, 16)
            B, n = 2, 7
            with torch.no_grad():  # on the identity-RoPE module, so that only the pairing differs
                ii = i.attention
                Wi2 = ii.wqkv.weight
                q = torch.nn.functional.linear(x, Wi2[:16]).view(B, n, 4, 4).transpose(1, 2)
                kk = torch.nn.functional.linear(x, Wi2[16:24]).view(B, n, kv, 4).transpose(1, 2)
                vv = torch.nn.functional.linear(x, Wi2[24:]).view(B, n, kv, 4).transpose(1, 2)
                s = (q @ tiled(kk).transpose(2, 3) / 2.0).masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
                wrong = torch.nn.functional.linear((torch.softmax(s, -1) @ tiled(vv)).transpose(1, 2).reshape(B, n, 16), ii.wo.weight)
                apart = (i(x) - wrong).abs().max().item()
            ok = ok and apart > 1e-3
            msgs.append(f"vs the .repeat pairing {apart:.2e}")
        good = good and ok
        msgs.append(f"KV={kv}: real RoPE vs independent complex-pair GQA reference {err:.1e} (relative {err / scale:.1e}, "
                    f"float32 RoPE) leak={leak:.1e}; identity RoPE vs gqa_forward {err_id:.1e}; vs no RoPE {err_norope:.2e}")
    try:
        mod.make_gqa_rope(10, 4, 2, CTX)
        refused = False
    except AssertionError:
        refused = True
    return good and refused, "; ".join(msgs) + f"; dim=10, 4 heads refused: {refused}", "make_gqa_rope(16, 4, KV, 10), no biases"


@check("opennmt_mha_keys_first.py")
def _(mod):
    m = randomize(mod.MultiHeadedAttention(3, 12, dropout=0.0)).eval()
    g = lambda L: (L.weight, L.bias)
    (wq, bq), (wk, bk), (wv, bv), (wo, bo) = g(m.linear_query), g(m.linear_keys), g(m.linear_values), g(m.final_linear)
    masked = lambda n: torch.triu(torch.ones(n, n, dtype=torch.bool), 1)[None, None]  # True = masked, (1, 1, n, n)
    call = lambda x: m(x, x, x, masked(x.shape[1]))[0]
    ref = lambda x: mha_forward(x, 3, wq, wk, wv, wo, bq, bk, bv, bo)
    err, leak = cmp(call, ref, 12)
    scale = max(ref(torch.randn(2, 7, 12)).abs().max().item(), 1.0)
    # read by declaration order (first Linear = queries): another module, so the order must come from the names
    err_pos, _ = cmp(call, lambda x: mha_forward(x, 3, wk, wv, wq, wo, bk, bv, bq, bo), 12, shapes=[(2, 7)])
    _, leak_nomask = cmp(lambda x: m(x, x, x)[0], ref, 12, shapes=[(2, 7)])
    good = err / scale < FLOAT32_TOL and leak < TOL and err_pos > 1e-3 and leak_nomask > 1e-3
    return good, (f"with the True-is-masked (1, 1, n, n) mask: max|out-ref|={err:.1e} (float32 softmax; relative "
                  f"{err / scale:.1e}) leak={leak:.1e}; declaration order read as q, k, v instead: {err_pos:.2e}; "
                  f"without a mask: leak={leak_nomask:.1e}"), "head_count=3 model_dim=12, called as m(x, x, x, mask)[0]"



@check("bentrevett_seq2seq_mha_device_arg.py")
def _(mod):
    m = randomize(mod.MultiHeadAttentionLayer(12, 3, 0.0, "cpu")).eval()
    g = lambda L: (L.weight, L.bias)
    (wq, bq), (wk, bk), (wv, bv), (wo, bo) = g(m.fc_q), g(m.fc_k), g(m.fc_v), g(m.fc_o)
    keep = lambda n: torch.ones(n, n, dtype=torch.bool).tril()[None, None]
    err, leak = cmp(lambda x: m(x, x, x, keep(x.shape[1]))[0], lambda x: mha_forward(x, 3, wq, wk, wv, wo, bq, bk, bv, bo), 12)
    m9 = randomize(mod.MultiHeadAttentionLayer(9, 3, 0.0, "cpu")).eval()  # head width 3: sqrt(3) rounded to float32
    f = lambda L: (L.weight, L.bias)
    (aq, cq), (ak, ck), (av, cv), (ao, co) = f(m9.fc_q), f(m9.fc_k), f(m9.fc_v), f(m9.fc_o)
    ref9 = lambda x: mha_forward(x, 3, aq, ak, av, ao, cq, ck, cv, co)
    err9, _ = cmp(lambda x: m9(x, x, x, keep(x.shape[1]))[0], ref9, 9, shapes=[(2, 7)])
    scale9 = max(ref9(torch.randn(2, 7, 9)).abs().max().item(), 1.0)
    # module.to(another device) leaves the plain attribute behind: forward raises there ...
    moved = mod.MultiHeadAttentionLayer(12, 3, 0.0, "cpu").to("meta")
    xm = torch.empty(2, 5, 12, device="meta")
    try:
        moved(xm, xm, xm, keep(5).to("meta"))
        raised = ""
    except (RuntimeError, NotImplementedError) as e:
        raised = str(e).splitlines()[0]
    # ... and the same layer with scale registered as a buffer runs there
    fixed = mod.MultiHeadAttentionLayer(12, 3, 0.0, "cpu")
    scale = fixed.scale
    del fixed.scale
    fixed.register_buffer("scale", scale)
    fixed = fixed.to("meta")
    shape = tuple(fixed(xm, xm, xm, keep(5).to("meta"))[0].shape)
    good = err < TOL and leak < TOL and err9 / scale9 < FLOAT32_TOL and raised != "" and shape == (2, 5, 12)
    return good, (f"with the keep-mask: max|out-ref|={err:.1e} leak={leak:.1e} (head width 4); head width 3: {err9:.1e} "
                  f"(float32 sqrt(3), relative {err9 / scale9:.1e}); after .to('meta') forward raises: {raised[:70]}; "
                  f"with scale registered as a buffer it runs there: {shape}"), "hid_dim=12 n_heads=3 device='cpu'"



def _dkh_rows(W, H, dh, j):
    """Rows of a fused (d k h) weight for q (j=0), k (1) or v (2), in the lesson's head-major order (row h*dh + d)."""
    return W[[(d * 3 + j) * H + h for h in range(H) for d in range(dh)]]


def _aisummer_shim_ok(mod):
    """The entry's rearrange (shim or real einops) against the index formula feature (d*3 + j)*H + h."""
    qkv = torch.randn(2, 5, 3 * 3 * 4)
    q, k, v = tuple(mod.rearrange(qkv, 'b t (d k h ) -> k b h t d ', k=3, h=3))
    want = lambda j: torch.stack([torch.stack([qkv[:, :, (d * 3 + j) * 3 + h] for d in range(4)], -1) for h in range(3)], 1)
    out = torch.randn(2, 3, 5, 4)
    merged = mod.rearrange(out, "b h t d -> b t (h d)")
    return (torch.equal(q, want(0)) and torch.equal(k, want(1)) and torch.equal(v, want(2))
            and torch.equal(merged, out.transpose(1, 2).reshape(2, 5, 12)))


@check("aisummer_mhsa_fused_dkh_layout.py")
def _(mod):
    m = randomize(mod.MultiHeadSelfAttention(10, heads=3, dim_head=4)).eval()
    W = m.to_qvk.weight
    wq, wk, wv = (_dkh_rows(W, 3, 4, j) for j in range(3))
    ref = lambda x: mha_forward(x, 3, wq, wk, wv, m.W_0.weight)
    masked = lambda n: torch.triu(torch.ones(n, n, dtype=torch.bool), 1)
    err, leak = cmp(lambda x: m(x, masked(x.shape[1])), ref, 10)
    err_blocks, _ = cmp(lambda x: m(x, masked(x.shape[1])), lambda x: mha_forward(x, 3, W[:12], W[12:24], W[24:], m.W_0.weight), 10,
                        shapes=[(2, 7)])
    _, leak_nomask = cmp(m, ref, 10, shapes=[(2, 7)])
    shim = _aisummer_shim_ok(mod)
    good, msg = ok_line(err, leak)
    return (good and err_blocks > 1e-3 and leak_nomask > 1e-3 and shim,
            msg + f"; [Q;K;V] row blocks instead: {err_blocks:.2e}; without a mask: leak={leak_nomask:.1e}; rearrange = index "
                  f"formula: {shim}", "dim=10 heads=3 dim_head=4 (inner 12), mask (n, n) True = masked, no biases")


@check("aisummer_mhsa_x_dim_head_typo.py")
def _(mod):
    m = randomize(mod.MultiHeadSelfAttention(12, heads=3)).eval()
    raised = []
    for B, n in SHAPES:
        try:
            m(torch.randn(B, n, 12))
            raised.append("")
        except AttributeError as e:
            raised.append(str(e))
    fixed = load("aisummer_mhsa_fused_dkh_layout.py").MultiHeadSelfAttention(12, heads=3)
    fixed.load_state_dict(m.state_dict())
    W = m.to_qvk.weight
    ref = lambda x: mha_forward(x, 3, *(_dkh_rows(W, 3, 4, j) for j in range(3)), m.W_0.weight)
    err, leak = cmp(lambda x: fixed.eval()(x, torch.triu(torch.ones(x.shape[1], x.shape[1], dtype=torch.bool), 1)), ref, 12)
    good = all(raised) and err < TOL and leak < TOL and _aisummer_shim_ok(mod)
    return good, (f"every call raises AttributeError ({raised[0]!r}, {len(raised)}/{len(SHAPES)} shapes); the same weights in "
                  f"the fixed class (x.dim()) with the mask: max|out-ref|={err:.1e} leak={leak:.1e}"), "dim=12 heads=3"



@check("aisummer_self_attention_single_head.py")
def _(mod):
    """The single-head form: the lesson's function with one head and no output projection (W_o = I, b_o = 0)."""
    m = randomize(mod.SelfAttention(12)).eval()
    W = m.to_qvk.weight
    ref = lambda x: mha_forward(x, 1, W[0::3], W[1::3], W[2::3], torch.eye(12))
    masked = lambda n: torch.triu(torch.ones(n, n, dtype=torch.bool), 1)
    err, leak = cmp(lambda x: m(x, masked(x.shape[1])), ref, 12)
    err_blocks, _ = cmp(lambda x: m(x, masked(x.shape[1])), lambda x: mha_forward(x, 1, W[:12], W[12:24], W[24:], torch.eye(12)),
                        12, shapes=[(2, 7)])
    qkv = torch.randn(2, 5, 12)
    q, k, v = tuple(mod.rearrange(qkv, 'b t (d k) -> k b t d ', k=3))
    shim = torch.equal(q, qkv[..., 0::3]) and torch.equal(k, qkv[..., 1::3]) and torch.equal(v, qkv[..., 2::3])
    good, msg = ok_line(err, leak)
    return (good and err_blocks > 1e-3 and shim, msg + f"; [Q;K;V] row blocks instead: {err_blocks:.2e}; rearrange = index "
            f"formula: {shim}", "dim=12, one head, W_o = I, mask (n, n) True = masked")



def _mamba_ref(m, H, KV, dh):
    """gqa_forward with in_proj split [q (H dh); k (KV dh); v (KV dh)] (the '(two hkv d)' split) and out_proj."""
    W, b = m.in_proj.weight, m.in_proj.bias
    q, k = H * dh, H * dh + KV * dh
    return lambda x: gqa_forward(x, H, W[:q], W[q:k], W[k:], m.out_proj.weight, b[:q], b[q:k], b[k:], m.out_proj.bias)


@check("mamba_mha_causal_flag.py")
def _(mod):
    msgs, good = [], True
    for kv in (None, 2, 1):
        m = randomize(mod.MHA(16, 4, num_heads_kv=kv, causal=True)).eval()
        err, leak = cmp(m, _mamba_ref(m, 4, kv or 4, 4), 16)
        good = good and err < TOL and leak < TOL
        msgs.append(f"num_heads_kv={kv}: max|out-ref|={err:.1e} leak={leak:.1e}")
    m0 = randomize(mod.MHA(16, 4)).eval()  # default causal=False
    _, leak0 = cmp(m0, _mamba_ref(m0, 4, 4, 4), 16, shapes=[(2, 7)])
    try:
        mod.MHA(10, 4)
        refused = False
    except AssertionError:
        refused = True
    return good and leak0 > 1e-3 and refused, "; ".join(msgs) + f"; default causal=False: leak={leak0:.1e}; embed_dim=10, 4 heads refused: {refused}", \
        "embed_dim=16 num_heads=4 causal=True; vs reference.grouped_mha.gqa_forward"


@check("mamba_mha_gqa_kv_not_repeated.py")
def _(mod):
    msgs, good = [], True
    for kv in (None, 1):  # plain MHA, and MQA (the SDPA matmul broadcasts one key/value head)
        m = randomize(mod.MHA(16, 4, num_heads_kv=kv, causal=True)).eval()
        err, leak = cmp(m, _mamba_ref(m, 4, kv or 4, 4), 16)
        good = good and err < TOL and leak < TOL
        msgs.append(f"num_heads_kv={kv}: max|out-ref|={err:.1e} leak={leak:.1e}")
    m2 = randomize(mod.MHA(16, 4, num_heads_kv=2, causal=True)).eval()
    try:
        m2(torch.randn(2, 5, 16))
        raised = ""
    except RuntimeError as e:
        raised = str(e).splitlines()[0]
    fixed = load("mamba_mha_causal_flag.py").MHA(16, 4, num_heads_kv=2, causal=True)
    fixed.load_state_dict(m2.state_dict())
    err_fix, _ = cmp(fixed.eval(), _mamba_ref(m2, 4, 2, 4), 16, shapes=[(2, 7)])
    good = good and raised != "" and err_fix < TOL
    return good, "; ".join(msgs) + f"; num_heads_kv=2 of 4 raises: {raised[:70]}; the fixed class with the same weights: {err_fix:.1e}", \
        "embed_dim=16 num_heads=4 causal=True"


# ----------------------------------------------------------------------------------------------- issue 28 item 7, batch 2
def _future_true(n):
    return torch.triu(torch.ones(n, n, dtype=torch.bool), 1)


@check("open_clip_attention_seq_first_additive_mask.py")
def _(mod):
    """Sequence first: the layer gets x.transpose(0, 1) (n, B, d) and its output is transposed back."""
    m = randomize(mod.Attention(12, num_heads=3)).eval()
    W, b = m.in_proj_weight, m.in_proj_bias
    ref = lambda x: mha_forward(x, 3, W[:12], W[12:24], W[24:], m.out_proj.weight, b[:12], b[12:24], b[24:], m.out_proj.bias)
    additive = lambda n: torch.zeros(n, n).masked_fill(_future_true(n), float("-inf"))
    seq_first = lambda mask: (lambda x: m(x.transpose(0, 1), mask(x.shape[1])).transpose(0, 1))
    err, leak = cmp(seq_first(additive), ref, 12)
    err_b, leak_b = cmp(seq_first(_future_true), ref, 12)
    x = torch.randn(4, 4, 12)
    batch_first = (m(x, additive(4)) - ref(x)).abs().max().item()  # (B, n, d) read as n sequences of length B
    good, msg = ok_line(max(err, err_b), max(leak, leak_b))
    return (good and batch_first > 1e-3,
            msg + f" (additive -inf mask and bool True = masked); a batch-first input read as sequence-first: "
                  f"{batch_first:.1e}", "dim=12 num_heads=3, x (n, B, d), mask (n, n)")


def _fkodom_shim_ok(mod):
    """The einops shim against index formulas, for the patterns the module uses."""
    t = torch.randn(2, 6, 5, 4)  # (b, (h g), n, d) with h=3, g=2
    out = mod.rearrange(t, "b (h g) n d -> b g h n d", g=2)
    ok = all(torch.equal(out[:, g, h], t[:, h * 2 + g]) for h in range(3) for g in range(2))
    x = torch.randn(2, 5, 12)
    ok &= torch.equal(mod.rearrange(x, "b n (h d) -> b n h d", h=3)[:, :, 1, 2], x[:, :, 1 * 4 + 2])
    y = torch.randn(2, 5, 3, 4)
    ok &= torch.equal(mod.rearrange(y, "b n h d -> b n (h d)")[:, :, 1 * 4 + 2], y[:, :, 1, 2])
    ok &= torch.equal(mod.rearrange(y, "b n h d -> b h n d")[:, 2, 1], y[:, 1, 2])
    a, c = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 6, 4)
    ok &= torch.allclose(mod.einsum(a, c, "b h n d, b h s d -> b h n s"), a @ c.transpose(-1, -2))
    return bool(ok)


def _fkodom_group_sum(x, m, H, KV):
    """The pre-fix module written out per head: score of kv head j = sum over its G query heads h = j*G + g of
    q_h . k_j / dh; KV output heads; then norm (if any) and out_proj."""
    B, n, _ = x.shape
    dh = m.q_proj.weight.shape[0] // H
    G = H // KV
    q = torch.nn.functional.linear(x, m.q_proj.weight, m.q_proj.bias)
    k = torch.nn.functional.linear(x, m.k_proj.weight, m.k_proj.bias)
    v = torch.nn.functional.linear(x, m.v_proj.weight, m.v_proj.bias)
    heads = []
    for j in range(KV):
        kj, vj = k[..., j * dh:(j + 1) * dh], v[..., j * dh:(j + 1) * dh]
        s = sum(q[..., (j * G + g) * dh:(j * G + g + 1) * dh] @ kj.transpose(1, 2) for g in range(G)) / dh
        s = s.masked_fill(_future_true(n), float("-inf"))
        heads.append(torch.softmax(s, dim=-1) @ vj)
    ctx = torch.cat(heads, dim=-1)
    if m.norm is not None:
        ctx = m.norm(ctx)
    return m.out_proj(ctx)


@check("fkodom_gqa_groups_summed_pre_fix.py")
def _(mod):
    E, H = 24, 3  # head width 8: the constructor refuses widths that are not a multiple of 8
    call = lambda m: (lambda x: m(x, x, x, is_causal=True)[0])
    # 1) query_heads == kv_heads, layer_norm=False: the lesson's layer with the scores divided by dh, not sqrt(dh)
    m = randomize(mod.MultiheadGQA(E, H, H, layer_norm=False)).eval()
    dh = E // H
    as_dh = lambda x: mha_forward(x, H, m.q_proj.weight / dh ** 0.5, m.k_proj.weight, m.v_proj.weight, m.out_proj.weight,
                                  m.q_proj.bias / dh ** 0.5, m.k_proj.bias, m.v_proj.bias, m.out_proj.bias)
    right = lambda x: mha_forward(x, H, m.q_proj.weight, m.k_proj.weight, m.v_proj.weight, m.out_proj.weight,
                                  m.q_proj.bias, m.k_proj.bias, m.v_proj.bias, m.out_proj.bias)
    err_dh, leak = cmp(call(m), as_dh, E)
    err_right, _ = cmp(call(m), right, E, shapes=[(2, 7)])
    # 2) 4 query heads, 2 kv heads: the group's query heads summed; the lesson's grouping differs
    g = randomize(mod.MultiheadGQA(32, 4, 2, layer_norm=False)).eval()
    err_sum, leak_g = cmp(call(g), lambda x: _fkodom_group_sum(x, g, 4, 2), 32)
    gq = lambda x: gqa_forward(x, 4, g.q_proj.weight, g.k_proj.weight, g.v_proj.weight, torch.eye(16, 32),
                               g.q_proj.bias, g.k_proj.bias, g.v_proj.bias, None)
    widths = (g.out_proj.weight.shape[1], tuple(gq(torch.randn(1, 3, 32)).shape))
    # 3) the default layer_norm=True puts LayerNorm(kv_embed_dim) before out_proj (MAGNETO): written out the same way
    d = randomize(mod.MultiheadGQA(E, H, H)).eval()
    err_ln, _ = cmp(call(d), lambda x: _fkodom_group_sum(x, d, H, H), E, shapes=[(2, 7)])
    _, leak_flag = cmp(lambda x: d(x, x, x)[0], lambda x: _fkodom_group_sum(x, d, H, H), E, shapes=[(2, 7)])
    try:
        mod.MultiheadGQA(8, 4, 4)
        refuses = "head width 2 accepted"
    except ValueError:
        refuses = "head width 2 refused (ValueError: must be divisible by 8)"
    shim = _fkodom_shim_ok(mod)
    shown = (err_dh < TOL and leak < TOL and err_right > 1e-3 and err_sum < TOL and leak_g < TOL and err_ln < TOL
             and leak_flag > 1e-3 and shim and widths[0] == 16)
    return shown, (f"KV=H: scores / dh reproduce it (max {err_dh:.1e}, leak {leak:.1e}), the lesson's / sqrt(dh) differs by "
                   f"{err_right:.1e}; KV=2 of 4: group-summed per-head formula {err_sum:.1e} (leak {leak_g:.1e}), out_proj "
                   f"takes {widths[0]} features (2 heads), not 32; layer_norm default written out: {err_ln:.1e}; "
                   f"is_causal=False leaks {leak_flag:.1e}; {refuses}; shim = index formulas: {shim}"), \
        "embed 24, 3 heads (dh 8); 32, 4 heads, 2 kv heads; is_causal=True"


def _no_mask_forward(x, nheads, wq, wk, wv, wo, bq, bk, bv, bo, scaled):
    """The lesson's function without its causal mask (and, scaled=False, without the 1/sqrt(dh)), per head."""
    B, n, _ = x.shape
    lin = torch.nn.functional.linear
    dh = wq.shape[0] // nheads
    split = lambda t: t.view(B, n, nheads, dh).transpose(1, 2)
    q, k, v = split(lin(x, wq, bq)), split(lin(x, wk, bk)), split(lin(x, wv, bv))
    scores = q @ k.transpose(2, 3) / (dh ** 0.5 if scaled else 1.0)
    return lin((torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(B, n, -1), wo, bo)


@check("torchtitan_llama3_attention_gqa_rope_config.py")
def _(mod):
    """GQA + interleaved (complex) RoPE through the factory, for 2, 1 and 4 key/value heads of 4, against the
    independent _gqa_rope_ref (float32 tables: relative 1e-5); without RoPE the output differs."""
    msgs, good = [], True
    for kv in (2, 1, 4):
        m = randomize(mod.make_gqa_rope(16, 4, kv, CTX)).eval()
        a = m.attention
        ref = lambda x: _gqa_rope_ref(x, 4, kv, a.wq.weight, a.wk.weight, a.wv.weight, a.wo.weight)
        err, leak = cmp(m, ref, 16)
        scale = max(ref(torch.randn(2, 7, 16)).abs().max().item(), 1.0)
        err_norope, _ = cmp(m, lambda x: gqa_forward(x, 4, a.wq.weight, a.wk.weight, a.wv.weight, a.wo.weight), 16,
                            shapes=[(2, 7)])
        good &= err / scale < FLOAT32_TOL and leak < TOL and err_norope > 1e-3
        msgs.append(f"KV={kv}: max|out-ref|={err:.1e} (relative {err / scale:.1e}) leak={leak:.1e}, "
                    f"without RoPE {err_norope:.1e}")
    return good, "; ".join(msgs), "dim=16 n_heads=4, FLOAT32_TOL relative"


@check("lucidrains_dalle_attention_padding_mask_arg.py")
def _(mod):
    """causal=True by default, no mask: the lesson's function with the fused [W_q; W_k; W_v] rows, head width dim_head
    (here 5 with 3 heads on dim 12: inner 15), out projection with bias.  The -finfo.max fill is exact (exp underflows
    to 0).  Its `mask` is a (B, n) padding keep-mask: a (n, n) causal mask given there raises for B != n."""
    m = randomize(mod.Attention(12, CTX, heads=3, dim_head=5)).eval()
    W = m.to_qkv.weight
    ref = lambda x: mha_forward(x, 3, W[:15], W[15:30], W[30:], m.to_out[0].weight, None, None, None, m.to_out[0].bias)
    err, leak = cmp(m, ref, 12)
    x = torch.randn(2, 5, 12)
    keep = torch.ones(2, 5, dtype=torch.bool)
    with torch.no_grad():
        same_with_full_padding = (m(x, mask=keep) - m(x)).abs().max().item()
    try:
        m(x, mask=torch.ones(5, 5, dtype=torch.bool).tril())
        causal_as_mask = "a (n, n) mask ran"
    except RuntimeError:
        causal_as_mask = "a (n, n) causal mask given as `mask` raises (it is read as (B, n) padding)"
    good, msg = ok_line(err, leak)
    return (good and same_with_full_padding < TOL and "raises" in causal_as_mask,
            msg + f"; an all-keep (B, n) padding mask changes nothing ({same_with_full_padding:.1e}); {causal_as_mask}",
            "dim=12 heads=3 dim_head=5 (inner 15), causal=True")


@check("lucidrains_palm_mqa_rope_prenorm_inside.py")
def _(mod):
    """LayerNorm (gamma, zero beta) then multi-query attention: the ONE key/value head of to_kv written as the lesson's
    W_k, W_v with that head's rows repeated for every query head, rotate-half RoPE (relative 1e-5: the rotary table
    is float32), to_out without bias.  Without the norm, or with the usual per-head key rows, it differs."""
    m = randomize(mod.Attention(12, dim_head=4, heads=3)).eval()
    kv = m.to_kv.weight
    wk, wv = kv[:4].repeat(3, 1), kv[4:].repeat(3, 1)
    ln = lambda x: torch.nn.functional.layer_norm(x, (12,), m.norm.gamma, None)
    ref = lambda x: rope_mha_forward(ln(x), 3, m.to_q.weight, wk, wv, m.to_out.weight, convention="half")
    err, leak = cmp(m, ref, 12)
    scale = max(ref(torch.randn(2, 7, 12)).abs().max().item(), 1.0)
    err_no_norm, _ = cmp(m, lambda x: rope_mha_forward(x, 3, m.to_q.weight, wk, wv, m.to_out.weight,
                                                       convention="half"), 12, shapes=[(2, 7)])
    n_params = sum(p.numel() for p in m.parameters())
    good = err / scale < FLOAT32_TOL and leak < TOL and err_no_norm > 1e-3 and n_params == 12 * 12 + 8 * 12 + 12 * 12 + 12
    return good, (f"max|out-ref|={err:.1e} (relative {err / scale:.1e}) future-leak={leak:.1e} against MQA-RoPE(LayerNorm(x)); "
                  f"without the norm {err_no_norm:.1e}; {n_params} parameters (q 144, one k/v head 96, out 144, gamma 12)"), \
        "dim=12 heads=3 dim_head=4, FLOAT32_TOL relative"


def _litgpt_rows(W, heads, kv, dh):
    """[Q; K; V] rows of litgpt's fused attn weight (or bias), laid out group after group as [q..; k; v]."""
    g, width = heads // kv, (heads // kv + 2) * dh
    take = lambda a, b: torch.cat([W[j * width + a:j * width + b] for j in range(kv)])
    return take(0, g * dh), take(g * dh, (g + 1) * dh), take((g + 1) * dh, (g + 2) * dh)


@check("litgpt_causal_self_attention_grouped_qkv.py")
def _(mod):
    """Through the factory (rotary_percentage 1.0, cos/sin as GPT.forward passes them): GQA with rotate-half RoPE
    whose fused rows are per group [q..; k; v]; key/value head g serves query heads g*q_per_kv ..; 2, 1 and 4
    key/value groups of 4 heads (float32 tables: relative 1e-5).  The [Q; K; V] block reading differs."""
    msgs, good = [], True
    for kv in (2, 1, 4):
        m = randomize(mod.make_gqa_rope(16, 4, kv, CTX)).eval()
        a = m.attention
        (wq, wk, wv), (bq, bk, bv) = _litgpt_rows(a.attn.weight, 4, kv, 4), _litgpt_rows(a.attn.bias, 4, kv, 4)
        rep = lambda t: t.reshape(kv, 4, *t.shape[1:]).repeat_interleave(4 // kv, 0).reshape(16, *t.shape[1:])
        ref = lambda x: rope_mha_forward(x, 4, wq, rep(wk), rep(wv), a.proj.weight, bq, rep(bk), rep(bv), a.proj.bias,
                                         convention="half")
        err, leak = cmp(m, ref, 16)
        scale = max(ref(torch.randn(2, 7, 16)).abs().max().item(), 1.0)
        W, b = a.attn.weight, a.attn.bias
        blocks = lambda x: rope_mha_forward(x, 4, W[:16], rep(W[16:16 + 4 * kv]), rep(W[16 + 4 * kv:]), a.proj.weight,
                                            b[:16], rep(b[16:16 + 4 * kv]), rep(b[16 + 4 * kv:]), a.proj.bias,
                                            convention="half")
        err_blocks, _ = cmp(m, blocks, 16, shapes=[(2, 7)])
        good &= err / scale < FLOAT32_TOL and leak < TOL and (kv == 1 or err_blocks > 1e-3)
        msgs.append(f"KV={kv}: max|out-ref|={err:.1e} (relative {err / scale:.1e}) leak={leak:.1e}, "
                    f"read as [Q; K; V] blocks {err_blocks:.1e}")
    return good, "; ".join(msgs), "n_embd=16 n_head=4 (hs 4), rotary_percentage 1.0, FLOAT32_TOL relative"


@check("hf_ctrl_mha_values_first_additive_1e4.py")
def _(mod):
    """Called as CTRLModel calls it, m(x, x, x, triu(ones(n, n), 1)) (values first; all three x here): the lesson's
    function for scores of ordinary size (exp(-1e4) is 0 in float64), and the future leaks in once a future score
    exceeds the query's own by about 1e4 (tokens x1e4, the same weights)."""
    m = randomize(mod.MultiHeadAttention(12, 3)).eval()
    ref = lambda x: mha_forward(x, 3, m.Wq.weight, m.Wk.weight, m.Wv.weight, m.dense.weight, m.Wq.bias, m.Wk.bias,
                                m.Wv.bias, m.dense.bias)
    mask = lambda x: torch.triu(torch.ones(x.shape[1], x.shape[1]), 1)
    call = lambda x: m(x, x, x, mask(x))[0]
    err, leak = cmp(call, ref, 12)
    g = torch.Generator().manual_seed(7)
    x = torch.randn(2, 6, 12, generator=g) * 1e4
    x2 = x.clone()
    x2[:, 1:] = torch.randn(2, 5, 12, generator=g) * 1e4
    with torch.no_grad():
        big_leak = (call(x)[:, 0] - call(x2)[:, 0]).abs().max().item()
        big_ref = (ref(x)[:, 0] - ref(x2)[:, 0]).abs().max().item()
    good, msg = ok_line(err, leak)
    return (good and big_leak > 1e-3 and big_ref < TOL,
            msg + f" with the (n, n) 1-is-masked mask; tokens x1e4: the future changes position 0 by {big_leak:.1e} "
                  f"(the reference's -inf: {big_ref:.1e})", "d_model_size=12 num_heads=3, mask * -1e4 added")


def _palm_lite_block(x, m, heads, dh, doubled):
    """PaLM lite's block written out per head: RMSNorm (norm * dim**-0.5 of the L2 norm, gain g), the fused rows split
    (queries of every head, ONE key/value head used as both keys and values, feed-forward input), scores q . kv *
    dh**-0.5 (twice that when `doubled`, the cached ALiBi branch), plus ALiBi slopes * -|j - i|, causal -inf,
    softmax, @ kv, attn_out, plus SwiGLU feed-forward."""
    B, n, d = x.shape
    xn = x / (x.norm(dim=-1, keepdim=True) * d ** -0.5).clamp(min=1e-8) * m.norm.g
    W = m.fused_attn_ff_proj.weight
    q_all, kv, ff = (torch.nn.functional.linear(xn, W[a:b]) for a, b in
                     ((0, heads * dh), (heads * dh, heads * dh + dh), (heads * dh + dh, W.shape[0])))
    slopes = m.alibi_pos_biases.slopes.reshape(-1)
    pos = torch.arange(n, dtype=x.dtype)
    heads_out = []
    for h in range(heads):
        q = q_all[..., h * dh:(h + 1) * dh]
        s = (q * dh ** -0.5) @ kv.transpose(1, 2)
        s = (2 * s if doubled else s) - slopes[h] * (pos[None, :] - pos[:, None]).abs()
        s = s.masked_fill(_future_true(n), float("-inf"))
        heads_out.append(torch.softmax(s, -1) @ kv)
    a, gate = ff.chunk(2, dim=-1)
    return m.attn_out(torch.cat(heads_out, -1)) + m.ff_out[1](torch.nn.functional.silu(gate) * a)


@check("lucidrains_palm_lite_alibi_cache_pre_fix.py")
def _(mod):
    """The first forward = the block with scores + ALiBi; every later one (same input) = the block with 2 * scores +
    ALiBi (the cached branch returns qk_sim + bias): the module's output depends on how often it was called."""
    m = randomize(mod.ParallelTransformerBlock(12, dim_head=4, heads=3, ff_mult=2)).eval()
    x = torch.randn(2, 6, 12, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        first, second, third = m(x), m(x), m(x)
        err1 = (first - _palm_lite_block(x, m, 3, 4, doubled=False)).abs().max().item()
        err2 = max((y - _palm_lite_block(x, m, 3, 4, doubled=True)).abs().max().item() for y in (second, third))
        drift = (second - first).abs().max().item()
    leak = 0.0  # causal in the cached branch (every call after the first at this length takes it)
    with torch.no_grad():
        for t in range(5):
            x2 = x.clone()
            x2[:, t + 1:] = torch.randn(2, 5 - t, 12)
            leak = max(leak, (m(x2)[:, :t + 1] - third[:, :t + 1]).abs().max().item())
    good = err1 < TOL and err2 < TOL and drift > 1e-3 and leak < TOL
    return good, (f"first call = block with scores + ALiBi ({err1:.1e}); second and third = block with 2 * scores + "
                  f"ALiBi ({err2:.1e}); first vs second differ by {drift:.1e}; future-leak={leak:.1e}"), \
        "dim=12 heads=3 dim_head=4 ff_mult=2"


def _grads(fn, x, params):
    """Gradients of sum(fn(x) * g) for a fixed upstream g, with respect to x and `params`."""
    x = x.clone().requires_grad_(True)
    y = fn(x)
    g = torch.randn(y.shape, generator=torch.Generator().manual_seed(7))
    return torch.autograd.grad((y * g).sum(), [x, *params])


@check("lucidrains_flash_attention_backward_double_scale.py")
def _(mod):
    """Forward = the lesson's layer (causal=True); the hand-written backward differs from autograd through the
    reference (q scaled twice); with W_k = -300 W_q (real scores far below -745) position 0 is nan, the reference's
    finite (the running maximum compared with row_sums)."""
    m = randomize(mod.FlashAttention(dim=12, heads=3, dim_head=4, causal=True)).eval()
    kv = m.to_kv.weight
    ref = lambda x, wq=m.to_q.weight, wk=kv[:12]: mha_forward(x, 3, wq, wk, kv[12:], m.to_out.weight,
                                                                None, None, None, m.to_out.bias)
    good, msg = ok_line(*cmp(m, ref, 12))
    x = torch.randn(2, 7, 12, generator=torch.Generator().manual_seed(3))
    mine = _grads(m, x, [m.to_q.weight, m.to_kv.weight, m.to_out.weight])
    with torch.no_grad():
        wq, wk, wv, wo = (t.clone() for t in (m.to_q.weight, kv[:12], kv[12:], m.to_out.weight))
    wq, wk, wv, wo = (t.requires_grad_(True) for t in (wq, wk, wv, wo))
    theirs = _grads(lambda x: mha_forward(x, 3, wq, wk, wv, wo, None, None, None, m.to_out.bias), x, [wq, wk, wv, wo])
    dx, dq, dkv, do = (a.abs().max().item() for a in (mine[0] - theirs[0], mine[1] - theirs[1],
                                                        mine[2] - torch.cat([theirs[2], theirs[3]]), mine[3] - theirs[4]))
    with torch.no_grad():
        m.to_kv.weight[:12] = -300 * m.to_q.weight
        y, r = m(x), ref(x, wk=-300 * m.to_q.weight)
    nan_at_0 = torch.isnan(y[:, 0]).all().item() and torch.isfinite(r).all().item()
    return (good and dx > 1e-3 and dq > 1e-3 and dkv > 1e-3 and do < TOL and nan_at_0,
            msg + f"; gradients vs autograd through the reference: x {dx:.1e}, W_q {dq:.1e}, W_k/W_v {dkv:.1e}, "
                  f"W_o {do:.1e}; W_k = -300 W_q: position 0 nan={nan_at_0} (reference finite)",
            "dim=12 heads=3 dim_head=4 causal=True")


@check("torchtune_causal_self_attention_dropout_in_eval.py")
def _(mod):
    """attn_dropout=0: GQA with interleaved-pair RoPE (q and k cast to float32: relative 1e-5) for 2, 1 and 4
    key/value heads of 4; BUG (fixed upstream by 665ab3f, #1803): attn_dropout=0.5 is still applied in eval()."""
    msgs, good = [], True
    for kv in (2, 1, 4):
        m = randomize(mod.llama2_self_attention(16, 4, kv, CTX)).eval()
        ref = lambda x: _gqa_rope_ref(x, 4, kv, m.q_proj.weight, m.k_proj.weight, m.v_proj.weight,
                                      m.output_proj.weight)
        scale = max(ref(torch.randn(2, 7, 16)).abs().max().item(), 1.0)
        err, leak = cmp(m, ref, 16)
        good &= err / scale < FLOAT32_TOL and leak < TOL
        msgs.append(f"KV={kv}: relative max|out-ref|={err / scale:.1e} leak={leak:.1e}")
    m = randomize(mod.llama2_self_attention(16, 4, 2, CTX, attn_dropout=0.5)).eval()
    x = torch.randn(2, 7, 16, generator=torch.Generator().manual_seed(5))
    torch.manual_seed(0)
    with torch.no_grad():
        drift = (m(x) - m(x)).abs().max().item()
    good &= drift > 1e-3
    return good, "; ".join(msgs) + f"; attn_dropout=0.5 in eval(): two calls differ by {drift:.1e}", \
        "embed_dim=16 heads=4 kv=2,1,4 FLOAT32_TOL relative"


def _per_head_hidden(x, nheads, wq, wk, wv, wo, bq, bk, bv, bo, hidden, fill):
    """Head by head (no split or merge reshapes): scores / sqrt(dh) with the positions `hidden` (n, n, True =
    hidden) REPLACED by `fill`, softmax over the keys, then the output projection."""
    lin = torch.nn.functional.linear
    dh = wq.shape[0] // nheads
    q, k, v = lin(x, wq, bq), lin(x, wk, bk), lin(x, wv, bv)
    heads = []
    for h in range(nheads):
        cut = slice(h * dh, (h + 1) * dh)
        s = (q[..., cut] @ k[..., cut].transpose(1, 2) / dh ** 0.5).masked_fill(hidden, fill)
        heads.append(torch.softmax(s, -1) @ v[..., cut])
    return lin(torch.cat(heads, -1), wo, bo)


def _torchtext_weights(mha):
    c = mha.in_proj_container
    return (c.query_proj.weight, c.key_proj.weight, c.value_proj.weight, mha.out_proj.weight,
            c.query_proj.bias, c.key_proj.bias, c.value_proj.bias, mha.out_proj.bias)


@check("torchtext_mha_container_seq_first_fill_1e8.py")
def _(mod):
    """Sequence-first (n, B, d) in and out, given the (1, n, n) bool mask True above the diagonal (ScaledDotProduct's
    documented convention, True = not allowed): the lesson's layer exactly (the -1e8 fill underflows to 0 at these
    scores); without a mask the future moves the past."""
    m = randomize(mod.build(12, 3)).eval()
    mask = lambda n: torch.triu(torch.ones(n, n, dtype=torch.bool), 1)[None]
    call = lambda x: m(x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1),
                       attn_mask=mask(x.shape[1]))[0].transpose(0, 1)
    ref = lambda x: mha_forward(x, 3, *_torchtext_weights(m))
    good, msg = ok_line(*cmp(call, ref, 12))
    _, leak_unmasked = cmp(lambda x: m(x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1))[0].transpose(0, 1),
                           ref, 12, shapes=[(2, 7)])
    return (good and leak_unmasked > 1e-3, msg + f"; with no attn_mask the future moves the past by {leak_unmasked:.1e}",
            "embed_dim=12 num_heads=3, seq-first, attn_mask (1, n, n) True = masked")


@check("torchtext_square_subsequent_mask_inverted.py")
def _(mod):
    """BUG: generate_square_subsequent_mask marks the lower triangle WITH the diagonal True, and True is 'not
    allowed': each token sees only the tokens after it, the last one none (every score -1e8: a plain average of all
    values).  The layer is exactly the per-head computation with that mask and fill; the future moves the past."""
    m = randomize(mod.SubsequentMaskedSelfAttention(12, 3)).eval()
    helper = mod.generate_square_subsequent_mask(1, 4)[0]
    told = torch.equal(helper, torch.tril(torch.ones(4, 4, dtype=torch.bool)))  # what the helper returns
    w = _torchtext_weights(m.mha)
    inverted = lambda x: _per_head_hidden(x, 3, *w, torch.tril(torch.ones(x.shape[1], x.shape[1], dtype=torch.bool)),
                                          -1e8)
    err, leak = cmp(m, inverted, 12)
    x = torch.randn(2, 7, 12, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        off = (m(x) - mha_forward(x, 3, *w)).abs().max().item()
    return (told and err < TOL and leak > 1e-3 and off > 1e-3,
            f"helper(1, 4) = tril with diagonal: {told}; max|out - inverted-mask per-head|={err:.1e}; future moves "
            f"the past by {leak:.1e}; off the lesson's layer by {off:.1e}", "embed_dim=12 num_heads=3, batch_first")


@check("picogpt_multihead_rope_per_head.py")
def _(mod):
    """Per-head ModuleList (query/key/value of width 4 each, no bias) with interleaved-pair RoPE (theta 10000, cos/sin
    tables made in float32: relative 1e-5), proj with bias: the rotary reference with the heads' weights stacked."""
    m = randomize(mod.MultiHead(12, 3, CTX, 0.0, 10000.0)).eval()
    cat = lambda a: torch.cat([getattr(h, a).weight for h in m.heads], 0)
    ref = lambda x: rope_mha_forward(x, 3, cat("query"), cat("key"), cat("value"), m.proj.weight, bo=m.proj.bias,
                                     convention="interleaved")
    scale = max(ref(torch.randn(2, 7, 12)).abs().max().item(), 1.0)
    err, leak = cmp(m, ref, 12)
    return (err / scale < FLOAT32_TOL and leak < TOL,
            f"relative max|out-ref|={err / scale:.1e} (float32 RoPE tables) future-leak={leak:.1e}",
            "n_embd=12 n_head=3 rope_base=10000 FLOAT32_TOL relative")


@check("pytorch_dtensor_test_attention_positional_is_causal.py")
def _(mod):
    """wq/wk/wv/wo without bias, SDPA with is_causal passed POSITIONALLY (use_attn_mask=True): the lesson's layer
    with no biases; with dropout_p=0.1 (ModelArgs' default) eval() is still exact; use_attn_mask=False leaks."""
    m = randomize(mod.build(12, 3, CTX)).eval()
    ref = lambda x: mha_forward(x, 3, m.wq.weight, m.wk.weight, m.wv.weight, m.wo.weight)
    good, msg = ok_line(*cmp(m, ref, 12))
    d = randomize(mod.build(12, 3, CTX, dropout_p=0.1)).eval()
    err_drop, _ = cmp(d, lambda x: mha_forward(x, 3, d.wq.weight, d.wk.weight, d.wv.weight, d.wo.weight), 12,
                      shapes=[(2, 7)])
    m.use_attn_mask = False
    _, leak_off = cmp(m, ref, 12, shapes=[(2, 7)])
    return (good and err_drop < TOL and leak_off > 1e-3,
            msg + f"; dropout_p=0.1 in eval {err_drop:.1e}; use_attn_mask=False: future moves the past by {leak_off:.1e}",
            "dim=12 n_heads=3")


def _tinyllama_ref(x, m, emb, ctx, shift):
    """tinyllama's heads, independently: head h has FULL-WIDTH q, k (shared by the heads of its group: the same
    Linear objects) and v of width emb, rotated pair by pair (x_2i, x_2i+1) by position * 10000**(-2 (i - shift) /
    emb); scores / sqrt(emb), causal softmax, the heads concatenated into `linear`."""
    lin = torch.nn.functional.linear
    B, n, _ = x.shape
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    ang = pos * 10000.0 ** (-2.0 * (torch.arange(emb // 2, dtype=torch.float64) - shift) / emb)

    def rot(t):
        a, b = t[..., 0::2], t[..., 1::2]
        out = torch.empty_like(t)
        out[..., 0::2], out[..., 1::2] = a * ang.cos() - b * ang.sin(), a * ang.sin() + b * ang.cos()
        return out
    outs = []
    for h in m.heads:
        q, k, v = rot(lin(x, h.w_q.weight, h.w_q.bias)), rot(lin(x, h.w_k.weight, h.w_k.bias)), lin(x, h.w_v.weight,
                                                                                                  h.w_v.bias)
        s = (q @ k.transpose(1, 2) / emb ** 0.5).masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1),
                                                              float("-inf"))
        outs.append(torch.softmax(s, -1) @ v)
    return lin(torch.cat(outs, -1), m.linear.weight, m.linear.bias)


@check("tinyllama_rope_full_width_heads_shared_qk.py")
def _(mod):
    """BUG, three: (1) the rotation matrix's frequencies are 10000**(-2 (i - 1) / d), off by one (i - 1 for i): the
    output equals the independent computation with that shift (the rotation matrix takes the default dtype) and
    differs from the standard frequencies; (2) every head has the full width emb_dim (parameters grow with the
    heads); (3) gq_ratio shares the QUERY and key projections within a group (the values stay per head), so the heads
    of a group have identical attention weights."""
    m = randomize(mod.roPEMultiAttentionHead(CTX, 12, 4, 2)).eval()
    shifted = lambda x: _tinyllama_ref(x, m, 12, CTX, 1)
    scale = max(shifted(torch.randn(2, 7, 12)).abs().max().item(), 1.0)
    err, leak = cmp(lambda x: m(x, False), shifted, 12)
    x = torch.randn(2, 7, 12, generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        standard = (m(x, False) - _tinyllama_ref(x, m, 12, CTX, 0)).abs().max().item() / scale
    shared = m.heads[0].w_q is m.heads[1].w_q and m.heads[0].w_k is m.heads[1].w_k and \
        m.heads[0].w_v is not m.heads[1].w_v and m.heads[1].w_q is not m.heads[2].w_q
    per_head = [sum(p.numel() for p in mod.roPEMultiAttentionHead(CTX, 12, h, 1).parameters()) for h in (1, 2, 4)]
    return (err / scale < FLOAT32_TOL and leak < TOL and standard > 1e-3 and shared and per_head[0] < per_head[1]
            < per_head[2],
            f"relative max|out - shifted-frequency per-head ref|={err / scale:.1e} (float32 rotation) leak={leak:.1e}; "
            f"with the standard frequencies {standard:.1e}; q/k shared in a group, v not: {shared}; parameters for "
            f"1, 2, 4 heads: {per_head}", "context_window=10 emb_dim=12 n_heads=4 gq_ratio=2 FLOAT32_TOL relative")


@check("nano_gpt_causal_self_attention_unused_bias.py")
def _(mod):
    """nanoGPT's fused c_attn [Q; K; V] with bias, SDPA is_causal=True, c_proj with bias: the lesson's layer exactly
    (the registered tril buffer "bias" is never read)."""
    m = randomize(mod.build(12, 3, CTX)).eval()
    W, b = m.c_attn.weight, m.c_attn.bias
    ref = lambda x: mha_forward(x, 3, W[:12], W[12:24], W[24:], m.c_proj.weight, b[:12], b[12:24], b[24:],
                                m.c_proj.bias)
    return ok_line(*cmp(m, ref, 12)) + ("n_embd=12 n_head=3 block_size=10",)


# ----------------------------------------------------------------------------------------------- realzoo7 (PyPI)
def _n_params(m):
    return sum(p.numel() for p in m.parameters())


@check("nullhawk_simple_transformer_shared_slice_projections.py")
def _(mod):
    """BUG, two: one head_dim x head_dim projection per role shared by the heads and applied to each head's own input
    slice (= block-diagonal W_q, W_k, W_v of that matrix repeated), and the scores divided by sqrt(embed_size) (= the
    query weight times sqrt(head_dim / embed_size) under the lesson's scale).  Called values first with the model's
    tril keep-mask."""
    m = randomize(mod.SelfAttention(12, 3)).eval()
    blocks = {a: torch.block_diag(*[getattr(m, a).weight] * 3) for a in ("queries", "keys", "values")}
    call = lambda x: m(x, x, x, torch.tril(torch.ones(x.shape[1], x.shape[1])))
    ref = lambda x: mha_forward(x, 3, blocks["queries"] * (4 / 12) ** 0.5, blocks["keys"], blocks["values"],
                                m.fc_out.weight, None, None, None, m.fc_out.bias)
    err, leak = cmp(call, ref, 12)
    x = torch.randn(2, 7, 12, generator=torch.Generator().manual_seed(11))
    with torch.no_grad():
        lesson_scale = (call(x) - mha_forward(x, 3, blocks["queries"], blocks["keys"], blocks["values"],
                                              m.fc_out.weight, None, None, None, m.fc_out.bias)).abs().max().item()
    counts = [_n_params(mod.SelfAttention(12, h)) for h in (1, 2, 3, 4)]
    return (err < TOL and leak < TOL and lesson_scale > 1e-3 and counts == sorted(counts, reverse=True)
            and len(set(counts)) == 4,
            f"max|out - block-diagonal ref scaled by sqrt(embed_size)|={err:.1e} leak={leak:.1e}; with the lesson's "
            f"scale {lesson_scale:.1e}; parameters for 1, 2, 3, 4 heads: {counts}", "embed_size=12 heads=3, tril keep-mask")


@check("stackformer_mha_default_mask_type_none.py")
def _(mod):
    """BUG, two: built with the defaults (mask_type=None) and called as documented, m(x, mask=True), it is the
    lesson's layer without its mask (exactly the bidirectional computation; the future moves the past), while
    mask_type=["causal"] gives the lesson's layer exactly; and dropout_p reaches SDPA in eval() (two calls differ)."""
    m = randomize(mod.Multi_Head_Attention(12, 3, dtype=torch.float64)).eval()
    W = m.qkv_proj.weight
    args = (W[:12], W[12:24], W[24:], m.out_proj.weight, None, None, None, None)
    unmasked = lambda x: _no_mask_forward(x, 3, *args, scaled=True)
    err, leak = cmp(lambda x: m(x, mask=True), unmasked, 12)
    c = randomize(mod.Multi_Head_Attention(12, 3, mask_type=["causal"], dtype=torch.float64)).eval()
    Wc = c.qkv_proj.weight
    good_c, msg_c = ok_line(*cmp(c, lambda x: mha_forward(x, 3, Wc[:12], Wc[12:24], Wc[24:], c.out_proj.weight), 12))
    d = mod.Multi_Head_Attention(12, 3, dropout=0.5, mask_type=["causal"], dtype=torch.float64).eval()
    x = torch.randn(2, 7, 12, generator=torch.Generator().manual_seed(12))
    with torch.no_grad():
        drift = (d(x) - d(x)).abs().max().item()
    return (err < TOL and leak > 1e-3 and good_c and drift > 1e-3,
            f"defaults: max|out - unmasked ref|={err:.1e}, the future moves the past by {leak:.1e}; "
            f"mask_type=['causal']: {msg_c}; dropout=0.5 in eval: two calls differ by {drift:.1e}",
            "embed_dim=12 num_heads=3 dtype=float64")


@check("lmt_mha_config_additive_inf_buffer.py")
def _(mod):
    """Fused qkv_proj chunked [Q; K; V], an additive -inf triu buffer, out_proj without bias: the lesson's layer
    exactly, with and without qkv biases."""
    msgs, good = [], True
    for bias in (False, True):
        m = randomize(mod.MultiHeadAttention(mod.ModelConfig(context_length=CTX, num_heads=3, embed_dim=12,
                                                             qkv_bias=bias))).eval()
        W, b = m.qkv_proj.weight, m.qkv_proj.bias
        bs = (b[:12], b[12:24], b[24:]) if bias else (None, None, None)
        ok, msg = ok_line(*cmp(m, lambda x: mha_forward(x, 3, W[:12], W[12:24], W[24:], m.out_proj.weight, *bs), 12))
        good, msgs = good and ok, msgs + [f"qkv_bias={bias}: {msg}"]
    return good, "; ".join(msgs), "embed_dim=12 num_heads=3 context_length=10"


@check("transformer_variants_per_head_softmax_module_mask_arg.py")
def _(mod):
    """Per-head modules (q/k/v without bias) concatenated into out_proj without bias, given the (1, n, n) True =
    ignore mask: the lesson's layer with the heads' weights stacked, exactly; without a mask the future moves the
    past."""
    m = randomize(mod.MultiHeadSelfAttention(12, 3)).eval()
    cat = lambda a: torch.cat([getattr(h, a).weight for h in m.heads], 0)
    ref = lambda x: mha_forward(x, 3, cat("q_proj"), cat("k_proj"), cat("v_proj"), m.out_proj.weight)
    good, msg = ok_line(*cmp(lambda x: m(x, _future_true(x.shape[1])[None]), ref, 12))
    _, leak_unmasked = cmp(m, ref, 12, shapes=[(2, 7)])
    return (good and leak_unmasked > 1e-3, msg + f"; with no mask the future moves the past by {leak_unmasked:.1e}",
            "d_model=12 n_heads=3, mask (1, n, n) True = ignore")


@check("tsai_multihead_attention_frozen_scale_parameter.py")
def _(mod):
    """W_Q/W_K/W_V with biases, keys pre-transposed, a frozen nn.Parameter scale dh ** -0.5, to_out[0] with bias,
    given the bool attn_mask True = masked ((n, n), or (1, n, n) as its docstring says): the lesson's layer exactly;
    without a mask the future moves the past.  The scale parameter is the constant dh ** -0.5 and takes no gradient."""
    m = randomize(mod.MultiheadAttention(12, 3)).eval()
    with torch.no_grad():
        m.sdp_attn.scale.fill_(4 ** -0.5)  # randomize() drew it; the layer's own value is head_dim ** -0.5
    ws = (m.W_Q.weight, m.W_K.weight, m.W_V.weight, m.to_out[0].weight, m.W_Q.bias, m.W_K.bias, m.W_V.bias,
          m.to_out[0].bias)
    ref = lambda x: mha_forward(x, 3, *ws)
    good, msg = ok_line(*cmp(lambda x: m(x, attn_mask=_future_true(x.shape[1]))[0], ref, 12))
    good3, _ = ok_line(*cmp(lambda x: m(x, attn_mask=_future_true(x.shape[1])[None])[0], ref, 12))
    _, leak_unmasked = cmp(lambda x: m(x)[0], ref, 12, shapes=[(2, 7)])
    fresh = mod.MultiheadAttention(12, 3).sdp_attn.scale
    return (good and good3 and leak_unmasked > 1e-3 and not fresh.requires_grad and fresh.item() == 0.5,
            msg + f"; (1, n, n) mask too: {good3}; with no mask the future moves the past by {leak_unmasked:.1e}; "
            f"scale parameter {fresh.item()} requires_grad={fresh.requires_grad}",
            "d_model=12 n_heads=3 qkv_bias=True, attn_mask True = masked")


@check("tsai_tst_mha_mask_argument_dropped.py")
def _(mod):
    """BUG: the mask argument is never passed to the inner attention: given the causal True = masked mask the
    output is the lesson's layer WITHOUT a mask (W_Q, W_K, W_V, W_O, no biases), exactly; the future moves the past."""
    m = randomize(mod._MultiHeadAttention(12, 3, 4, 4)).eval()
    call = lambda x: m(x, x, x, mask=_future_true(x.shape[1]))[0]
    ws = (m.W_Q.weight, m.W_K.weight, m.W_V.weight, m.W_O.weight, None, None, None, None)
    err, leak = cmp(call, lambda x: _no_mask_forward(x, 3, *ws, scaled=True), 12)
    x = torch.randn(2, 7, 12, generator=torch.Generator().manual_seed(13))
    with torch.no_grad():
        off = (call(x) - mha_forward(x, 3, *ws[:4])).abs().max().item()
    return (err < TOL and leak > 1e-3 and off > 1e-3,
            f"max|out - unmasked ref|={err:.1e} with the causal mask given; the future moves the past by {leak:.1e}; "
            f"off the lesson's layer by {off:.1e}", "d_model=12 n_heads=3 d_k=d_v=4, mask True = masked")


def _tft_interpretable(x, m, hidden):
    """TFT's interpretable attention, independently: per head its own query and key projections, ONE shared value
    projection; softmax(q_h k_h^T / sqrt(d_k)) with `hidden` (n, n, True = hidden) removed; the heads' outputs
    averaged (not concatenated), then w_h."""
    lin = torch.nn.functional.linear
    vs = lin(x, m.v_layer.weight, m.v_layer.bias)
    outs = []
    for ql, kl in zip(m.q_layers, m.k_layers):
        q, k = lin(x, ql.weight, ql.bias), lin(x, kl.weight, kl.bias)
        s = (q @ k.transpose(1, 2) / q.shape[-1] ** 0.5).masked_fill(hidden, float("-inf"))
        outs.append(torch.softmax(s, -1) @ vs)
    return lin(torch.stack(outs).mean(0), m.w_h.weight)


@check("pytorch_forecasting_tft_interpretable_mha_heads_averaged.py")
def _(mod):
    """Not the lesson's layer: given the causal True = masked mask it is, exactly, the heads (own W_q, W_k; one
    shared W_v) averaged then w_h; no leak; its parameter count changes with the heads; with ONE head it is the
    lesson's layer with W_o = w_h (so the difference is the averaging and the shared values, not a mask or a scale)."""
    m = randomize(mod.InterpretableMultiHeadAttention(3, 12)).eval()
    call = lambda x: m(x, x, x, mask=_future_true(x.shape[1]))[0]
    err, leak = cmp(call, lambda x: _tft_interpretable(x, m, _future_true(x.shape[1])), 12)
    one = randomize(mod.InterpretableMultiHeadAttention(1, 12)).eval()
    good_one, _ = ok_line(*cmp(lambda x: one(x, x, x, mask=_future_true(x.shape[1]))[0],
                               lambda x: mha_forward(x, 1, one.q_layers[0].weight, one.k_layers[0].weight,
                                                     one.v_layer.weight, one.w_h.weight, one.q_layers[0].bias,
                                                     one.k_layers[0].bias, one.v_layer.bias), 12))
    counts = [_n_params(mod.InterpretableMultiHeadAttention(h, 12)) for h in (1, 2, 3, 4)]
    return (err < TOL and leak < TOL and good_one and len(set(counts)) == 4,
            f"max|out - averaged shared-value heads|={err:.1e} leak={leak:.1e}; one head = the lesson's layer: "
            f"{good_one}; parameters for 1, 2, 3, 4 heads: {counts}", "n_head=3 d_model=12, mask True = masked")


@check("esm_mha_seq_first_rotary_additive_mask.py")
def _(mod):
    """Sequence first, given the additive (n, n) -inf mask: the rotate-half rotary reference (base 10000) with all
    four projections and their biases (q scaled before rotating: the same scores), to relative 1e-5 (inv_freq made
    in float32); without attn_mask the future moves the past."""
    m = randomize(mod.build(12, 3)).eval()
    additive = lambda n: torch.triu(torch.full((n, n), float("-inf")), 1)
    seq = lambda f: (lambda x: f(x.transpose(0, 1)).transpose(0, 1))
    call = seq(lambda t: m(t, t, t, attn_mask=additive(t.shape[0]))[0])
    ws = (m.q_proj.weight, m.k_proj.weight, m.v_proj.weight, m.out_proj.weight, m.q_proj.bias, m.k_proj.bias,
          m.v_proj.bias, m.out_proj.bias)
    ref = lambda x: rope_mha_forward(x, 3, *ws, convention="half")
    scale = max(ref(torch.randn(2, 7, 12)).abs().max().item(), 1.0)
    err, leak = cmp(call, ref, 12)
    _, leak_unmasked = cmp(seq(lambda t: m(t, t, t)[0]), ref, 12, shapes=[(2, 7)])
    return (err / scale < FLOAT32_TOL and leak < TOL and leak_unmasked > 1e-3,
            f"relative max|out-ref|={err / scale:.1e} (float32 inv_freq) future-leak={leak:.1e}; with no attn_mask "
            f"the future moves the past by {leak_unmasked:.1e}", "embed_dim=12 heads=3, (n, B, d), FLOAT32_TOL relative")


def _torchscale_weights(m):
    return (m.q_proj.weight, m.k_proj.weight, m.v_proj.weight, m.out_proj.weight, m.q_proj.bias, m.k_proj.bias,
            m.v_proj.bias, m.out_proj.bias)


def _additive_future(n):
    return torch.triu(torch.full((n, n), float("-inf")), 1)


@check("torchscale_mha_args_additive_mask.py")
def _(mod):
    """DecoderConfig(subln=False), no xPos, given the additive (n, n) -inf attn_mask: the lesson's layer with all
    four biases, to relative 1e-5 (its softmax runs in float32); without attn_mask the future moves the past."""
    m = randomize(mod.build(12, 3)).eval()
    ref = lambda x: mha_forward(x, 3, *_torchscale_weights(m))
    scale = max(ref(torch.randn(2, 7, 12)).abs().max().item(), 1.0)
    err, leak = cmp(lambda x: m(x, x, x, attn_mask=_additive_future(x.shape[1]))[0], ref, 12)
    _, leak_unmasked = cmp(lambda x: m(x, x, x)[0], ref, 12, shapes=[(2, 7)])
    return (err / scale < FLOAT32_TOL and leak < TOL and leak_unmasked > 1e-3,
            f"relative max|out-ref|={err / scale:.1e} (float32 softmax) future-leak={leak:.1e}; with no attn_mask the "
            f"future moves the past by {leak_unmasked:.1e}", "embed_dim=12 heads=3 subln=False FLOAT32_TOL relative")


def _xpos_forward(x, nheads, wq, wk, wv, wo, bq, bk, bv, bo, scale_base=512.0):
    """xPos attention, independently: interleaved rotary pairs at positions 0..n-1 (reference.rotary_mha.rope), then
    each query pair i at position t times zeta_i ** (m_t / scale_base) and each key pair divided by it, zeta_i =
    (2i + 0.4 dh) / (1.4 dh), m_t = t - n // 2 (positions counted from the middle); scores / sqrt(dh), causal."""
    from reference.rotary_mha import rope
    B, n, _ = x.shape
    dh = wq.shape[0] // nheads
    lin = torch.nn.functional.linear
    split = lambda t: t.view(B, n, nheads, dh).transpose(1, 2)
    q, k, v = split(lin(x, wq, bq)), split(lin(x, wk, bk)), split(lin(x, wv, bv))
    zeta = (torch.arange(0, dh, 2, dtype=torch.float64) + 0.4 * dh) / (1.4 * dh)
    middle = torch.arange(n, dtype=torch.float64) - n // 2
    factor = (zeta[None, :] ** (middle[:, None] / scale_base)).repeat_interleave(2, dim=-1)  # (n, dh), pairs interleaved
    q, k = rope(q, "interleaved") * factor, rope(k, "interleaved") / factor
    scores = (q @ k.transpose(2, 3) / dh ** 0.5).masked_fill(_future_true(n), float("-inf"))
    return lin((torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(B, n, -1), wo, bo)


@check("torchscale_mha_xpos_decay.py")
def _(mod):
    """xPos (xpos_rel_pos=True, subln=False), given its additive mask: interleaved RoPE with the per-pair decay
    zeta ** (+-m / 512) on queries and keys, to relative 1e-5 (its sin/cos come from float32 positions); no leak; off
    the plain interleaved rotary reference by a few per cent (no reference of mha-check's computes it)."""
    m = randomize(mod.build_xpos(12, 3)).eval()
    w = _torchscale_weights(m)
    call = lambda x: m(x, x, x, attn_mask=_additive_future(x.shape[1]))[0]
    ref = lambda x: _xpos_forward(x, 3, *w)
    scale = max(ref(torch.randn(2, 7, 12)).abs().max().item(), 1.0)
    err, leak = cmp(call, ref, 12)
    x = torch.randn(2, 10, 12, generator=torch.Generator().manual_seed(14))
    with torch.no_grad():
        plain = (call(x) - rope_mha_forward(x, 3, *w, convention="interleaved")).abs().max().item() / scale
    return (err / scale < FLOAT32_TOL and leak < TOL and plain > 1e-3,
            f"relative max|out - xPos ref|={err / scale:.1e} future-leak={leak:.1e}; relative distance from plain "
            f"interleaved RoPE at n=10: {plain:.1e}", "embed_dim=12 heads=3 scale_base=512 FLOAT32_TOL relative")


@check("baby_llm_attention_gqa_backend_registry.py")
def _(mod):
    """Grouped-query attention with 2, 1 and 4 key/value heads of 4: gqa_forward with q/k/v/o_proj, exactly with the
    default "sdpa" backend (and bias=True), to relative 1e-5 with "eager" (float32 softmax); no leak."""
    msgs, good = [], True
    for kv, bias, backend in ((2, False, "sdpa"), (1, True, "sdpa"), (4, False, "sdpa"), (2, True, "eager")):
        m = randomize(mod.Attention(16, 4, kv, bias=bias, backend=backend)).eval()
        ws = (m.q_proj.weight, m.k_proj.weight, m.v_proj.weight, m.o_proj.weight) + (
            (m.q_proj.bias, m.k_proj.bias, m.v_proj.bias, m.o_proj.bias) if bias else ())
        ref = lambda x: gqa_forward(x, 4, *ws)
        scale = max(ref(torch.randn(2, 7, 16)).abs().max().item(), 1.0)
        err, leak = cmp(m, ref, 16)
        ok = (err < TOL if backend == "sdpa" else err / scale < FLOAT32_TOL) and leak < TOL
        good, msgs = good and ok, msgs + [f"kv={kv} bias={bias} {backend}: {err / scale:.1e} rel, leak {leak:.1e}"]
    return good, "; ".join(msgs), "hidden=16 heads=4; eager at FLOAT32_TOL relative"


@check("transformerkit_mha_mask_arg_fill_1e9.py")
def _(mod):
    """Given create_look_ahead_mask(n) (1, 1, n, n), True = masked: the lesson's layer with all four biases, exactly;
    the -1e9 fill lets the future in once a query's own scores fall below -1e9 (W_k = -W_q, tokens x1e5)."""
    m = randomize(mod.MultiHeadAttention(12, 3, dropout=0.0)).eval()
    ws = (m.W_q.weight, m.W_k.weight, m.W_v.weight, m.W_o.weight, m.W_q.bias, m.W_k.bias, m.W_v.bias, m.W_o.bias)
    call = lambda x: m(x, x, x, mod.create_look_ahead_mask(x.shape[1]))[0]
    good, msg = ok_line(*cmp(call, lambda x: mha_forward(x, 3, *ws), 12))
    big = randomize(mod.MultiHeadAttention(12, 3, dropout=0.0), seed=1).eval()
    with torch.no_grad():
        big.W_k.weight.copy_(-big.W_q.weight)
        big.W_k.bias.copy_(-big.W_q.bias)
    g = torch.Generator().manual_seed(7)
    x = torch.randn(1, 4, 12, generator=g) * 1e5
    x2 = x.clone()
    x2[:, 1:] = torch.randn(1, 3, 12, generator=g) * 1e5
    mask = mod.create_look_ahead_mask(4)
    with torch.no_grad():
        huge_leak = (big(x, x, x, mask)[0][:, 0] - big(x2, x2, x2, mask)[0][:, 0]).abs().max().item()
    return (good and huge_leak > 1e-3,
            msg + f"; with W_k = -W_q and tokens x1e5 the future changes position 0 by {huge_leak:.1e}",
            "d_model=12 n_heads=3 dropout=0, mask (1, 1, n, n) True = masked, -1e9 fill")


# ----------------------------------------------------------------------------------------------- realzoo8 (PyPI wheels)
@check("personal_chat_slm_mha_scale_n_embd.py")
def _(mod):
    """Heads stacked in order, no Q/K/V bias, W_o = proj: the lesson's function with scores / sqrt(n_embd) (W_q scaled
    by sqrt(head_size / n_embd)), exactly; with the lesson's scale it differs; with one head the two agree."""
    m = randomize(mod.MultiHeadAttention(12, 3, CTX, 0.0)).eval()
    cat = lambda a: torch.cat([getattr(h, a).weight for h in m.heads], 0)
    ref = lambda f: (lambda x: mha_forward(x, 3, cat("query") * f, cat("key"), cat("value"), m.proj.weight,
                                           None, None, None, m.proj.bias))
    err, leak = cmp(m, ref((4 / 12) ** 0.5), 12)
    err_lesson, _ = cmp(m, ref(1.0), 12, shapes=[(2, 7)])
    one = randomize(mod.MultiHeadAttention(12, 1, CTX, 0.0)).eval()
    h = one.heads[0]
    good_one, _ = ok_line(*cmp(one, lambda x: mha_forward(x, 1, h.query.weight, h.key.weight, h.value.weight,
                                                          one.proj.weight, None, None, None, one.proj.bias), 12))
    good, msg = ok_line(err, leak)
    return (good and err_lesson > 1e-3 and good_one,
            msg + f" against scores / sqrt(n_embd); with / sqrt(head_size): {err_lesson:.1e}; one head = the "
            f"lesson's layer: {good_one}", "n_embd=12 num_heads=3 (head_size 4) dropout=0")


@check("llm_scratch_lab_mha_spelled_out_d_input.py")
def _(mod):
    """W_query, W_key, W_value (+ biases with qkv_bias), W_o = output with its bias: mha_forward exactly, d_input 10
    and d_output 12."""
    msgs, good = [], True
    for qkv_bias in (False, True):
        m = randomize(mod.MultiHeadAttention(10, 12, 3, CTX, qkv_bias=qkv_bias)).eval()
        b = lambda lin: lin.bias if qkv_bias else None
        ref = lambda x: mha_forward(x, 3, m.W_query.weight, m.W_key.weight, m.W_value.weight, m.output.weight,
                                    b(m.W_query), b(m.W_key), b(m.W_value), m.output.bias)
        ok, msg = ok_line(*cmp(m, ref, 10))
        good, msgs = good and ok, msgs + [f"qkv_bias={qkv_bias}: {msg}"]
    return good, "; ".join(msgs), "d_input=10 d_output=12 num_heads=3"


def _layer_norm(x, ln):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], ln.weight, ln.bias, ln.eps)


@check("labml_retro_self_attention_prenorm_rope_frozen_theta.py")
def _(mod):
    """h + rotate-half rotary MHA (query, key, value, output and their biases) of LayerNorm(h), to relative 1e-5 (theta
    is float32); no leak; is_causal=False lets the future in; theta is frozen and of d_k / 2 elements."""
    m = randomize(mod.SelfAttention(12, 3, 4, True)).eval()
    with torch.no_grad():  # randomize() overwrote the frozen theta too: put the layer's own table back
        m.rotary_pe.theta.copy_(mod.RotaryPositionalEmbeddings(4).theta)
    ws = (m.query.weight, m.key.weight, m.value.weight, m.output.weight, m.query.bias, m.key.bias, m.value.bias,
          m.output.bias)
    ref = lambda x: x + rope_mha_forward(_layer_norm(x, m.norm), 3, *ws, convention="half")
    scale = max(ref(torch.randn(2, 7, 12)).abs().max().item(), 1.0)
    err, leak = cmp(m, ref, 12)
    free = mod.SelfAttention(12, 3, 4, False)
    free.load_state_dict(m.state_dict())
    _, leak_free = cmp(free.eval(), ref, 12, shapes=[(2, 7)])
    theta = m.rotary_pe.theta
    return (err / scale < FLOAT32_TOL and leak < TOL and leak_free > 1e-3 and not theta.requires_grad
            and theta.numel() == 2,
            f"relative max|out-ref|={err / scale:.1e} (float32 theta) future-leak={leak:.1e}; is_causal=False: the "
            f"future moves the past by {leak_free:.1e}; theta frozen, {theta.numel()} elements",
            "d_model=12 n_heads=3 d_k=4, FLOAT32_TOL relative")


@check("megabyte_attention_rmsnorm_inside_attend.py")
def _(mod):
    """MHA(RMSNorm(x)): RMSNorm = x / (||x|| * dim**-0.5) * g, then mha_forward with to_q, to_kv = [W_k; W_v], to_out,
    no biases, exactly; no leak."""
    m = randomize(mod.Attention(dim=12, heads=3, dim_head=4)).eval()
    kv = m.to_kv.weight
    rms = lambda x: x / (x.norm(dim=-1, keepdim=True) * 12 ** -0.5).clamp(min=m.norm.eps) * m.norm.g
    ref = lambda x: mha_forward(rms(x), 3, m.to_q.weight, kv[:12], kv[12:], m.to_out.weight)
    return ok_line(*cmp(m, ref, 12)) + ("dim=12 heads=3 dim_head=4, RMSNorm inside",)


@check("tfs_mt_mha_spelled_out_x_query_keep_mask.py")
def _(mod):
    """Given the decoder's mask triu(ones(B, 1, S, S), 1) == 0 (True = attend): mha_forward with W_Q, W_K, W_V, W_O and
    no biases, exactly; without a mask the future moves the past."""
    m = randomize(mod.MultiHeadAttention(12, 3, dropout_prob=0.0)).eval()
    keep = lambda x: torch.triu(torch.ones((x.shape[0], 1, x.shape[1], x.shape[1])), diagonal=1) == 0
    call = lambda x: m(x_query=x, x_key=x, x_value=x, attention_mask=keep(x))
    ref = lambda x: mha_forward(x, 3, m.W_Q.weight, m.W_K.weight, m.W_V.weight, m.W_O.weight)
    good, msg = ok_line(*cmp(call, ref, 12))
    _, leak_unmasked = cmp(lambda x: m(x, x, x), ref, 12, shapes=[(2, 7)])
    return (good and leak_unmasked > 1e-3, msg + f"; with no mask the future moves the past by {leak_unmasked:.1e}",
            "d_model=12 num_heads=3 dropout=0, mask (B, 1, S, S) True = attend")


@check("gpt_simple_mha_gqa_rope_tables_from_caller.py")
def _(mod):
    """Through the factory: GQA with rotate-half RoPE, W_k and W_v repeated per group, q/k/v/c_proj (and their biases
    with use_bias=True), for 2, 1 and 4 key/value heads of 4 and both SDPA modes, to relative 1e-5 (float32
    inverse frequencies); no leak."""
    msgs, good = [], True
    for kv, bias, mode in ((2, False, "causal"), (1, True, "causal"), (4, False, "causal"), (2, True, "sdpa_mask")):
        m = randomize(mod.GptSimpleAttentionLayer(16, 4, CTX, kv_heads=kv, use_bias=bias, attention_mode=mode)).eval()
        a = m.attn
        rep = lambda t: None if t is None else t.reshape(kv, 4, *t.shape[1:]).repeat_interleave(4 // kv, 0).reshape(
            16, *t.shape[1:])
        bias_of = lambda lin: lin.bias if bias else None
        ref = lambda x: rope_mha_forward(x, 4, a.q_proj.weight, rep(a.k_proj.weight), rep(a.v_proj.weight),
                                         a.c_proj.weight, bias_of(a.q_proj), rep(bias_of(a.k_proj)),
                                         rep(bias_of(a.v_proj)), bias_of(a.c_proj), convention="half")
        scale = max(ref(torch.randn(2, 7, 16)).abs().max().item(), 1.0)
        err, leak = cmp(m, ref, 16)
        ok = err / scale < FLOAT32_TOL and leak < TOL
        good, msgs = good and ok, msgs + [f"kv={kv} bias={bias} {mode}: {err / scale:.1e} rel, leak {leak:.1e}"]
    return good, "; ".join(msgs), "n_embd=16 n_head=4 (dh 4), FLOAT32_TOL relative"


def _neox_rows(t, heads, dk):
    """qkv_lin's weight (or bias) rows read per head, [q_h; k_h; v_h] each 3 * dk rows: (W_q, W_k, W_v) stacked by head."""
    per = t.reshape(heads, 3, dk, *t.shape[1:])
    return tuple(per[:, i].reshape(heads * dk, *t.shape[1:]) for i in range(3))


def _partial_rope_mha(x, heads, wq, wk, wv, wo, bq, bk, bv, bo, rotated, base=10000.0):
    """Attention whose queries and keys have only their first `rotated` features per head turned, rotate-half among
    those (x_i, x_{i + rotated/2}), the others passed through; written out independently of the entry."""
    B, n, _ = x.shape
    dh = wq.shape[0] // heads
    lin = torch.nn.functional.linear
    split = lambda t: t.view(B, n, heads, dh).transpose(1, 2)
    half = rotated // 2
    ang = torch.arange(n, dtype=torch.float64)[:, None] * base ** (-torch.arange(0, rotated, 2) / rotated)[None, :]
    cos, sin = ang.cos(), ang.sin()

    def turn(t):
        a, b, rest = t[..., :half], t[..., half:rotated], t[..., rotated:]
        return torch.cat((a * cos - b * sin, b * cos + a * sin, rest), dim=-1)

    q, k, v = turn(split(lin(x, wq, bq))), turn(split(lin(x, wk, bk))), split(lin(x, wv, bv))
    scores = (q @ k.transpose(2, 3) / dh ** 0.5).masked_fill(_future_true(n), float("-inf"))
    return lin((torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(B, n, -1), wo, bo)


@check("labml_neox_attention_partial_rotary_fill_1e4.py")
def _(mod):
    """Per-head fused rows: rope_percentage 0.0 = mha_forward exactly, 1.0 = the rotate-half rotary reference, 0.25 of
    d_k = 8 = two features turned (relative 1e-5, float32 cos/sin); the -1e4 fill leaks with W_k = -W_q and tokens
    x1e4; an odd number of turned features (one of d_k = 4) widens the head."""
    msgs, good = [], True
    for d, pct in ((12, 0.0), (12, 1.0), (24, 0.25)):
        m = randomize(mod.AttentionLayer(d, 3, rope_percentage=pct)).eval()
        dk = d // 3
        (wq, wk, wv), (bq, bk, bv) = _neox_rows(m.qkv_lin.weight, 3, dk), _neox_rows(m.qkv_lin.bias, 3, dk)
        ws = (wq, wk, wv, m.output.weight, bq, bk, bv, m.output.bias)
        ref = {0.0: lambda x: mha_forward(x, 3, *ws), 1.0: lambda x: rope_mha_forward(x, 3, *ws, convention="half"),
               0.25: lambda x: _partial_rope_mha(x, 3, *ws, rotated=2)}[pct]
        scale = max(ref(torch.randn(2, 7, d)).abs().max().item(), 1.0)
        err, leak = cmp(m, ref, d)
        good &= err / scale < (TOL if pct == 0.0 else FLOAT32_TOL) and leak < TOL
        msgs.append(f"d_k={dk} rope {pct}: relative {err / scale:.1e}, leak {leak:.1e}")
    big = randomize(mod.AttentionLayer(12, 3, rope_percentage=0.0), seed=1).eval()
    with torch.no_grad():
        for t in (big.qkv_lin.weight, big.qkv_lin.bias):
            per = t.view(3, 3, 4, *t.shape[1:])  # (head, q/k/v, dk, ...)
            per[:, 1] = -per[:, 0]
    g = torch.Generator().manual_seed(7)
    x = torch.randn(1, 4, 12, generator=g) * 1e4
    x2 = x.clone()
    x2[:, 1:] = torch.randn(1, 3, 12, generator=g) * 1e4
    with torch.no_grad():
        huge_leak = (big(x)[:, 0] - big(x2)[:, 0]).abs().max().item()
        widened = mod.RoPE(int(4 * 0.25))(torch.randn(1, 3, 2, 4)).shape[-1]
    return (good and huge_leak > 1e-3 and widened == 5,
            "; ".join(msgs) + f"; W_k = -W_q, tokens x1e4: the future changes position 0 by {huge_leak:.1e}; one "
            f"turned feature of d_k = 4 gives heads of width {widened}", "n_heads=3, FLOAT32_TOL relative with RoPE")


# ----------------------------------------------------------------------------------------------- realzoo9 (PyPI wheels)
@check("toyllm_mha_wq_ctx_len_jaxtyped_forward.py")
def _(mod):
    """Wq, Wk, Wv (+ biases with qkv_bias), W_o = out_proj with its bias: mha_forward exactly, d_in 10, d_out 12."""
    msgs, good = [], True
    for qkv_bias in (False, True):
        m = randomize(mod.MultiHeadAttention(10, 12, CTX, 0.0, 3, qkv_bias=qkv_bias)).eval()
        b = lambda lin: lin.bias if qkv_bias else None
        ref = lambda x: mha_forward(x, 3, m.Wq.weight, m.Wk.weight, m.Wv.weight, m.out_proj.weight,
                                    b(m.Wq), b(m.Wk), b(m.Wv), m.out_proj.bias)
        ok, msg = ok_line(*cmp(m, ref, 10))
        good, msgs = good and ok, msgs + [f"qkv_bias={qkv_bias}: {msg}"]
    return good, "; ".join(msgs), "d_in=10 d_out=12 ctx_len=10 n_heads=3"


@check("attnhut_mqa_fused_kv_one_head_causal_flag.py")
def _(mod):
    """causal=True: gqa_forward with one key/value head, W_k = kv rows [0, dh), W_v = rows [dh, 2 dh), W_o = proj (and
    the biases with bias=True), exactly; causal=False lets the future in."""
    msgs, good = [], True
    for bias in (False, True):
        m = randomize(mod.MultiQueryAttention(12, 3, causal=True, bias=bias)).eval()
        kv, kvb = m.kv.weight, m.kv.bias
        b = lambda t: t if bias else None
        ref = lambda x: gqa_forward(x, 3, m.q.weight, kv[:4], kv[4:], m.proj.weight, b(m.q.bias),
                                    b(kvb[:4] if bias else None), b(kvb[4:] if bias else None), b(m.proj.bias))
        ok, msg = ok_line(*cmp(m, ref, 12))
        good, msgs = good and ok, msgs + [f"bias={bias}: {msg}"]
    free = randomize(mod.MultiQueryAttention(12, 3, causal=False))
    fixed = mod.MultiQueryAttention(12, 3, causal=True)
    fixed.load_state_dict(free.state_dict())
    kv = fixed.kv.weight
    _, leak_free = cmp(free.eval(), lambda x: gqa_forward(x, 3, fixed.q.weight, kv[:4], kv[4:], fixed.proj.weight),
                       12, shapes=[(2, 7)])
    return (good and leak_free > 1e-3, "; ".join(msgs) + f"; causal=False: the future moves the past by {leak_free:.1e}",
            "dim=12 num_heads=3 (one kv head of 4)")


def _rotate_half_dtype_probe(m, dtype, d):
    """The layer's forward on an input of `dtype` (module cast with it): None if it runs, else the exception's type."""
    c = type(m)(d, 3, dropout=0.0)
    c.load_state_dict(m.state_dict())
    c = c.to(dtype).eval()
    x = torch.randn(2, 5, d).to(dtype)
    try:
        with torch.no_grad():
            c(x, mask=torch.tril(torch.ones(5, 5)).bool())
        return None
    except RuntimeError as e:
        return type(e).__name__


@check("corext_attention_rope_keep_mask_arg.py")
def _(mod):
    """In float64 the forward raises (float32 probabilities meet float64 values); float16 and bfloat16 raise too; in
    float32, called with tril(ones(n, n)).bool() (True = attend), it is the rotate-half rotary reference with
    qkv_proj's rows as W_q, W_k, W_v and out_proj, no biases, to relative 1e-5 of the float64 reference; no leak;
    without a mask the future moves the past."""
    m = randomize(mod.Attention(12, 3, dropout=0.0)).eval()
    raised = {str(dt).split(".")[-1]: _rotate_half_dtype_probe(m, dt, 12)
              for dt in (torch.float64, torch.float16, torch.bfloat16)}
    m32 = mod.Attention(12, 3, dropout=0.0)
    m32.load_state_dict(m.state_dict())
    m32 = m32.float().eval()
    W = m.qkv_proj.weight
    ref = lambda x: rope_mha_forward(x, 3, W[:12], W[12:24], W[24:], m.out_proj.weight, convention="half")
    keep = lambda n: torch.tril(torch.ones(n, n)).bool()
    call = lambda x: m32(x.float(), mask=keep(x.shape[1])).double()
    scale = max(ref(torch.randn(2, 7, 12)).abs().max().item(), 1.0)
    err, leak = cmp(call, ref, 12)
    _, leak_free = cmp(lambda x: m32(x.float()).double(), ref, 12, shapes=[(2, 7)])
    good = all(raised.values()) and err / scale < FLOAT32_TOL and leak < 1e-6 and leak_free > 1e-3
    return (good, f"raises in {', '.join(k for k, v in raised.items() if v)}; float32 with the mask: relative "
            f"{err / scale:.1e}, leak {leak:.1e}; no mask: the future moves the past by {leak_free:.1e}",
            "dim=12 num_heads=3, float32 run against the float64 reference, FLOAT32_TOL relative")


@check("eztransformer_causal_self_attention_recent_context_window.py")
def _(mod):
    """recent_context=None: the buffer is all True and the plain call is mha_forward WITHOUT a mask (c_attn rows
    [Q; K; V], c_proj, biases) exactly, and the future moves the past; given attn_mask (True = keep) it is the
    lesson's layer. recent_context=2 (block_size 10): the lesson's layer for n <= 6, a window of 6 keys beyond."""
    m = randomize(mod.build_no_window(12, 3, CTX)).eval()
    W, b = m.c_attn.weight, m.c_attn.bias
    ws = (W[:12], W[12:24], W[24:], m.c_proj.weight, b[:12], b[12:24], b[24:], m.c_proj.bias)
    ref = lambda x: mha_forward(x, 3, *ws)
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 7, 12, generator=g)
    with torch.no_grad():
        err_unmasked = (m(x) - _no_mask_forward(x, 3, *ws, scaled=True)).abs().max().item()
    _, leak = cmp(m, ref, 12, shapes=[(2, 7)])
    keep = lambda n: torch.tril(torch.ones(n, n, dtype=torch.bool))
    good_masked, msg_masked = ok_line(*cmp(lambda x: m(x, attn_mask=keep(x.shape[1])), ref, 12))
    win = randomize(mod.CausalSelfAttention(mod.GPTConfig(block_size=CTX, recent_context=2, n_head=3, n_embd=12,
                                                          dropout=0.0))).eval()
    Wn, bn = win.c_attn.weight, win.c_attn.bias
    ref_w = lambda x: mha_forward(x, 3, Wn[:12], Wn[12:24], Wn[24:], win.c_proj.weight, bn[:12], bn[12:24], bn[24:],
                                  win.c_proj.bias)
    short, _ = ok_line(*cmp(win, ref_w, 12, shapes=[(2, 6), (1, 3)]))
    err_long, _ = cmp(win, ref_w, 12, shapes=[(2, 10)])
    all_true = bool(m.bias.all())
    good = err_unmasked < TOL and leak > 1e-3 and good_masked and all_true and short and err_long > 1e-3
    return (good, f"recent_context=None: buffer all True {all_true}, plain call = unmasked attention "
            f"({err_unmasked:.1e}), the future moves the past by {leak:.1e}; with attn_mask (True = keep) {msg_masked};"
            f" recent_context=2: lesson's layer for n <= 6 {short}, off by {err_long:.1e} at n = 10",
            "n_embd=12 n_head=3 block_size=10 bias=True")


@check("flatbuild_attention_gqa_rope_keyword_past_kv.py")
def _(mod):
    """m(x)[0]: the grouped rotate-half rotary reference (k_proj, v_proj repeated per group; the biases with
    bias=True), for 2, 1 and 4 key/value heads of 4, to relative 1e-5 (float32 tables); no leak; a prompt then one
    token through past_kv gives the full call's rows."""
    msgs, good = [], True
    for kv, bias in ((2, False), (1, True), (4, False)):
        m = randomize(mod.Attention(16, 4, kv, max_seq_len=CTX, bias=bias)).eval()
        rep = lambda t: None if t is None else t.reshape(kv, 4, *t.shape[1:]).repeat_interleave(4 // kv, 0).reshape(
            16, *t.shape[1:])
        b = lambda lin: lin.bias if bias else None
        ref = lambda x: rope_mha_forward(x, 4, m.q_proj.weight, rep(m.k_proj.weight), rep(m.v_proj.weight),
                                         m.o_proj.weight, b(m.q_proj), rep(b(m.k_proj)), rep(b(m.v_proj)),
                                         b(m.o_proj), convention="half")
        scale = max(ref(torch.randn(2, 7, 16)).abs().max().item(), 1.0)
        err, leak = cmp(lambda x: m(x)[0], ref, 16)
        x = torch.randn(2, 6, 16)
        with torch.no_grad():
            full = m(x)[0]
            head, cache = m(x[:, :5])
            step, _ = m(x[:, 5:], past_kv=cache)
        cached = (torch.cat([head, step], 1) - full).abs().max().item()
        ok = err / scale < FLOAT32_TOL and leak < TOL and cached < TOL
        good, msgs = good and ok, msgs + [f"kv={kv} bias={bias}: {err / scale:.1e} rel, leak {leak:.1e}, "
                                          f"cache {cached:.1e}"]
    return good, "; ".join(msgs), "hidden_dim=16 n_heads=4 (dh 4), FLOAT32_TOL relative"


# ----------------------------------------------------------------------------------------------- realzoo10 (PyPI wheels)
def _repeat_groups(t, kv, dh, group):
    """A key/value projection's rows (kv * dh, ...) repeated per group: row block j serves query heads j*g .. j*g+g-1."""
    return None if t is None else t.reshape(kv, dh, *t.shape[1:]).repeat_interleave(group, 0).reshape(
        kv * dh * group, *t.shape[1:])


@check("eka_ai_causal_self_attention_gqa_rope_config.py")
def _(mod):
    """rope_mha_forward(convention="half") with q_proj, k_proj / v_proj repeated per group, o_proj (biases with
    bias=True), for 2, 1 and 4 key/value heads of 4 query heads of width 4, to relative 1e-5 (float32 tables); no
    leak."""
    msgs, good = [], True
    for kv, bias in ((2, False), (1, True), (4, False)):
        m = randomize(mod.eka_attention(16, 4, CTX, n_kv_heads=kv, bias=bias)).eval()
        rep = lambda t: _repeat_groups(t, kv, 4, 4 // kv)
        b = lambda lin: lin.bias if bias else None
        ref = lambda x: rope_mha_forward(x, 4, m.q_proj.weight, rep(m.k_proj.weight), rep(m.v_proj.weight),
                                         m.o_proj.weight, b(m.q_proj), rep(b(m.k_proj)), rep(b(m.v_proj)),
                                         b(m.o_proj), convention="half")
        scale = max(ref(torch.randn(2, 7, 16)).abs().max().item(), 1.0)
        err, leak = cmp(m, ref, 16)
        ok = err / scale < FLOAT32_TOL and leak < TOL
        good, msgs = good and ok, msgs + [f"kv={kv} bias={bias}: {err / scale:.1e} rel, leak {leak:.1e}"]
    return good, "; ".join(msgs), "d_model=16 n_heads=4 (dh 4), FLOAT32_TOL relative"


@check("anygpt_causal_self_attention_spelled_out_config.py")
def _(mod):
    """In eval() (its default dropout 0.2 is gated by self.training): mha_forward with c_attn's thirds as W_q, W_k,
    W_v (+ the bias's thirds) and c_proj, exactly, for bias True and False; no leak."""
    msgs, good = [], True
    for bias in (True, False):
        m = randomize(mod.CausalSelfAttention(mod.ModelConfig(embedding_size=12, num_heads=3, block_size=CTX,
                                                              bias=bias))).eval()
        W, b = m.c_attn.weight, m.c_attn.bias
        third = lambda t, i: None if t is None else t[12 * i:12 * (i + 1)]
        ref = lambda x: mha_forward(x, 3, third(W, 0), third(W, 1), third(W, 2), m.c_proj.weight, third(b, 0),
                                    third(b, 1), third(b, 2), m.c_proj.bias)
        ok, msg = ok_line(*cmp(m, ref, 12))
        good, msgs = good and ok, msgs + [f"bias={bias}: {msg}"]
    return good, "; ".join(msgs), "embedding_size=12 num_heads=3 block_size=10 dropout=0.2 (eval)"


def _turn_half(t, sign, theta=10000.0):
    """t (B, H, n, dh) with the pairs (i, i + dh/2) of position p turned by sign * p * theta^(-2i/dh)."""
    n, dh = t.shape[-2], t.shape[-1]
    angles = torch.outer(torch.arange(n, dtype=t.dtype), theta ** (-torch.arange(0, dh, 2, dtype=t.dtype) / dh))
    cos, sin = angles.cos(), sign * angles.sin()
    a, b = t[..., :dh // 2], t[..., dh // 2:]
    return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)


def _roper_forward(x, heads, wqkv, bqkv, wo):
    """RoPER: q, k and v turned by their positions, the weighted sum of each query turned back by its own."""
    B, n, d = x.shape
    dh = d // heads
    q, k, v = torch.nn.functional.linear(x, wqkv, bqkv).split(d, dim=-1)
    q, k, v = (_turn_half(t.view(B, n, heads, dh).transpose(1, 2), +1) for t in (q, k, v))
    scores = (q @ k.transpose(2, 3) / dh ** 0.5).masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1),
                                                             float("-inf"))
    ctx = _turn_half(torch.softmax(scores, dim=-1) @ v, -1)
    return torch.nn.functional.linear(ctx.transpose(1, 2).reshape(B, n, d), wo)


@check("geov_attention_roper_values_rotated.py")
def _(mod):
    """m(x, None)[0] = the RoPER formula (qkv rows [Q; K; V] with their bias, dense without bias) to relative 1e-5
    (the frequencies are float32); no leak; the rotate-half rotary reference, values not turned, differs by ~1."""
    m = randomize(mod.geov_attention(16, 4, CTX)).eval()
    W, b = m.qkv.weight, m.qkv.bias
    ref = lambda x: _roper_forward(x, 4, W, b, m.dense.weight)
    scale = max(ref(torch.randn(2, 7, 16)).abs().max().item(), 1.0)
    err, leak = cmp(lambda x: m(x, None)[0], ref, 16)
    rope = lambda x: rope_mha_forward(x, 4, W[:16], W[16:32], W[32:], m.dense.weight, b[:16], b[16:32], b[32:],
                                      convention="half")
    off, _ = cmp(lambda x: m(x, None)[0], rope, 16, shapes=[(2, 7)])
    good = err / scale < FLOAT32_TOL and leak < TOL and off > 1e-2
    return (good, f"RoPER: {err / scale:.1e} rel, leak {leak:.1e}; the rotary reference (values not turned) is off "
            f"by {off:.1e}", "hidden_size=16 heads=4 (dh 4), FLOAT32_TOL relative")


@check("x_clip_attention_layernorm_after_out_proj.py")
def _(mod):
    """causal=True, eval(): (y - mean) / sqrt(var + 1e-3) * g (eps 1e-3 for float64 input) of mha_forward with
    to_qkv's thirds, no biases, W_o = to_out[0], to relative 1e-5 (float32 softmax); no leak; causal=False leaks."""
    m = randomize(mod.Attention(12, dim_head=4, heads=3, causal=True)).eval()
    W, g = m.to_qkv.weight, m.to_out[1].g

    def ref(x):
        y = mha_forward(x, 3, W[:12], W[12:24], W[24:], m.to_out[0].weight)
        mean, var = y.mean(-1, keepdim=True), y.var(-1, unbiased=False, keepdim=True)
        return (y - mean) / torch.sqrt(var + 1e-3) * g

    scale = max(ref(torch.randn(2, 7, 12)).abs().max().item(), 1.0)
    err, leak = cmp(m, ref, 12)
    free = mod.Attention(12, dim_head=4, heads=3, causal=False)
    free.load_state_dict(m.state_dict())
    _, leak_free = cmp(free.eval(), ref, 12, shapes=[(2, 7)])
    good = err / scale < FLOAT32_TOL and leak < TOL and leak_free > 1e-3
    return (good, f"causal=True: {err / scale:.1e} rel, leak {leak:.1e}; causal=False: the future moves the past by "
            f"{leak_free:.1e}", "dim=12 dim_head=4 heads=3, FLOAT32_TOL relative (float32 softmax)")


@check("rumi_causal_self_attention_spelled_out_finfo_min.py")
def _(mod):
    """mha_forward with qkv_projection's thirds (weights and biases) and output_projection, exactly; no leak."""
    m = randomize(mod.CausalSelfAttention(12, 3, CTX, 0.0)).eval()
    W, b = m.qkv_projection.weight, m.qkv_projection.bias
    ref = lambda x: mha_forward(x, 3, W[:12], W[12:24], W[24:], m.output_projection.weight, b[:12], b[12:24], b[24:],
                                m.output_projection.bias)
    return ok_line(*cmp(m, ref, 12)) + ("embedding_dim=12 num_heads=3 context_length=10",)


@check("bthesis_transformer_mhsa_scale_e_additive_mask.py")
def _(mod):
    """mask=True: mha_forward with W_q = toQueries / sqrt(heads) (scores / sqrt(e)), toKeys, toValues, unifyHeads,
    exactly; the lesson's scale differs; no leak; one head: the lesson's layer; mask=False leaks."""
    m = randomize(mod.MHSelfAttention(12, heads=3, mask=True)).eval()
    ws = lambda q: (q, m.toKeys.weight, m.toValues.weight, m.unifyHeads.weight, None, None, None, m.unifyHeads.bias)
    good_bug, msg = ok_line(*cmp(m, lambda x: mha_forward(x, 3, *ws(m.toQueries.weight / 3 ** 0.5)), 12))
    off, _ = cmp(m, lambda x: mha_forward(x, 3, *ws(m.toQueries.weight)), 12, shapes=[(2, 7)])
    one = randomize(mod.MHSelfAttention(12, heads=1, mask=True)).eval()
    good_one, _ = ok_line(*cmp(one, lambda x: mha_forward(x, 1, one.toQueries.weight, one.toKeys.weight,
                                                         one.toValues.weight, one.unifyHeads.weight, None, None,
                                                         None, one.unifyHeads.bias), 12))
    free = mod.MHSelfAttention(12, heads=3, mask=False)
    free.load_state_dict(m.state_dict())
    _, leak_free = cmp(free.eval(), lambda x: mha_forward(x, 3, *ws(m.toQueries.weight)), 12, shapes=[(2, 7)])
    try:  # the additive mask is made on the CPU whatever the module's device
        mod.MHSelfAttention(12, heads=3, mask=True).to("meta")(torch.zeros(2, 5, 12, device="meta"))
        off_cpu = "runs"
    except RuntimeError:
        off_cpu = "raises"
    good = good_bug and off > 1e-3 and good_one and leak_free > 1e-3 and off_cpu == "raises"
    return (good, f"scores / sqrt(e): {msg}; the lesson's scale is off by {off:.1e}; one head = the lesson's layer "
            f"{good_one}; mask=False: the future moves the past by {leak_free:.1e}; on the meta device forward "
            f"{off_cpu}", "k=12 heads=3 mask=True")



# ----------------------------------------------------------------------------------------------- realzoo11 (PyPI wheels)
def _masked_forward(x, nheads, wq, wk, wv, wo, bq, bk, bv, bo, hidden):
    """The lesson's function with `hidden` (n, n) True where a query may not look; a row with nothing left gets zero
    weights (as torch's SDPA gives it)."""
    B, n, _ = x.shape
    lin = torch.nn.functional.linear
    dh = wq.shape[0] // nheads
    split = lambda t: t.view(B, n, nheads, dh).transpose(1, 2)
    q, k, v = split(lin(x, wq, bq)), split(lin(x, wk, bk)), split(lin(x, wv, bv))
    w = torch.softmax((q @ k.transpose(2, 3) / dh ** 0.5).masked_fill(hidden, float("-inf")), -1)
    w = torch.nan_to_num(w, nan=0.0)
    return lin((w @ v).transpose(1, 2).reshape(B, n, -1), wo, bo)


@check("neuralforecast_attention_layer_sdpa_path_drops_causal_mask.py")
def _(mod):
    """Called as its decoder calls it (attn_mask=None): the lesson's function WITHOUT its mask, exactly, and the future
    moves the past; the same weights in FullAttention(mask_flag=True, output_attention=True) (the einsum path) give the
    lesson's causal layer exactly; a TriangularCausalMask handed to the SDPA path is inverted (B = 1: each token sees
    only later ones)."""
    m = randomize(mod.vanilla_decoder_self_attention(12, 3)).eval()
    ws = (m.query_projection.weight, m.key_projection.weight, m.value_projection.weight, m.out_projection.weight,
          m.query_projection.bias, m.key_projection.bias, m.value_projection.bias, m.out_projection.bias)
    call = lambda x: m(x, x, x, None)[0]
    err, leak = cmp(call, lambda x: _no_mask_forward(x, 3, *ws, scaled=True), 12)
    einsum = mod.AttentionLayer(mod.FullAttention(mask_flag=True, attention_dropout=0.1, output_attention=True), 12, 3)
    einsum.load_state_dict(m.state_dict())
    einsum.eval()
    good_einsum, msg_einsum = ok_line(*cmp(lambda x: einsum(x, x, x, None)[0], lambda x: mha_forward(x, 3, *ws), 12))
    x = torch.randn(1, 6, 12)
    with torch.no_grad():
        inverted = m(x, x, x, mod.TriangularCausalMask(1, 6))[0]
    later = torch.tril(torch.ones(6, 6, dtype=torch.bool))  # hidden: the past and the diagonal
    err_inv = (inverted - _masked_forward(x, 3, *ws, hidden=later)).abs().max().item()
    good = err < TOL and leak > 1e-3 and good_einsum and err_inv < TOL
    return (good, f"attn_mask=None: max|out-no-mask-ref|={err:.1e}, the future moves the past by {leak:.1e}; "
            f"einsum path (output_attention=True): {msg_einsum}; a TriangularCausalMask on the SDPA path = attention "
            f"to later tokens only ({err_inv:.1e})", "hidden_size=12 n_head=3 dropout=0.1 (eval)")


@check("bio_attention_attn_layer_causal_mask_hides_diagonal.py")
def _(mod):
    """causal=True without a mask: the lesson's layer exactly (lin's thirds, to_out); causal=False leaks; causal=True
    with a mask hiding nothing ((B, n) all True, as a padding mask without padding, and (B, n, n) all True): the
    lesson's function with the diagonal hidden too, position 0 = to_out's bias alone."""
    m = randomize(mod.attn_layer(12, 3)).eval()
    W, b = m.lin.weight, m.lin.bias
    ws = (W[:12], W[12:24], W[24:], m.to_out.weight, b[:12], b[12:24], b[24:], m.to_out.bias)
    good, msg = ok_line(*cmp(lambda x: m(x, causal=True), lambda x: mha_forward(x, 3, *ws), 12))
    _, leak_free = cmp(lambda x: m(x), lambda x: mha_forward(x, 3, *ws), 12, shapes=[(2, 7)])
    errs, first = [], 0.0
    for i, (B, n) in enumerate(SHAPES):
        x = torch.randn(B, n, 12, generator=torch.Generator().manual_seed(200 + i))
        strict = _masked_forward(x, 3, *ws, hidden=torch.triu(torch.ones(n, n, dtype=torch.bool)))
        with torch.no_grad():
            for mask in (torch.ones(B, n, dtype=torch.bool), torch.ones(B, n, n, dtype=torch.bool)):
                y = m(x, mask=mask, causal=True)
                errs.append((y - strict).abs().max().item())
                first = max(first, (y[:, 0] - m.to_out.bias).abs().max().item())
    err = max(errs)
    good = good and leak_free > 1e-3 and err < TOL and first < TOL
    return (good, f"causal=True: {msg}; causal=False: the future moves the past by {leak_free:.1e}; causal=True with "
            f"a mask hiding nothing = the diagonal hidden too ({err:.1e}), position 0 = to_out.bias ({first:.1e})",
            "dim=12 nh=3")


@check("recbole_mha_additive_mask_arg_postln_inside.py")
def _(mod):
    """With an additive causal mask (0 / -inf, (B, 1, n, n)) and dropout off: LayerNorm(mha_forward(x) + x) with
    query/key/value/dense and their biases and the LayerNorm's weight, bias and eps, exactly; no leak."""
    m = randomize(mod.MultiHeadAttention(3, 12, 0.0, 0.0, 1e-12)).eval()
    ws = (m.query.weight, m.key.weight, m.value.weight, m.dense.weight, m.query.bias, m.key.bias, m.value.bias,
          m.dense.bias)

    def call(x):
        n = x.shape[1]
        mask = torch.zeros(n, n).masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
        return m(x, mask.expand(x.shape[0], 1, n, n))

    ref = lambda x: torch.nn.functional.layer_norm(mha_forward(x, 3, *ws) + x, (12,), m.LayerNorm.weight,
                                                   m.LayerNorm.bias, 1e-12)
    return ok_line(*cmp(call, ref, 12)) + ("n_heads=3 hidden_size=12 layer_norm_eps=1e-12, additive causal mask",)


@check("espnet_multiheaded_attention_keep_mask_zero_after_softmax.py")
def _(mod):
    """With the (B, n, n) bool tril keep-mask its decoders pass: mha_forward with linear_q/k/v/out and biases,
    exactly, on the default path and with use_sdpa=True; no leak."""
    msgs, good = [], True
    for sdpa in (False, True):
        m = randomize(mod.MultiHeadedAttention(3, 12, 0.0, use_sdpa=sdpa)).eval()
        ws = (m.linear_q.weight, m.linear_k.weight, m.linear_v.weight, m.linear_out.weight, m.linear_q.bias,
              m.linear_k.bias, m.linear_v.bias, m.linear_out.bias)

        def call(x, m=m):
            n = x.shape[1]
            return m(x, x, x, torch.tril(torch.ones(n, n, dtype=torch.bool)).expand(x.shape[0], n, n))

        ok, msg = ok_line(*cmp(call, lambda x, ws=ws: mha_forward(x, 3, *ws), 12))
        good, msgs = good and ok, msgs + [f"use_sdpa={sdpa}: {msg}"]
    return good, "; ".join(msgs), "n_head=3 n_feat=12 dropout_rate=0"


def _timesfm_forward(m, x, heads):
    """TimesFM 2.5's attention written out: [Q; K; V] rows of qkv_proj, rotate-half RoPE (base 10000) on q and k, an
    RMSNorm (eps 1e-6, its scale multiplied directly) on each, q times 1.442695041 / sqrt(dh) * softplus(per-dimension
    scale), causal softmax without any other scale, out."""
    from reference.rotary_mha import rope
    B, n, d = x.shape
    dh = d // heads
    split = lambda t: t.view(B, n, heads, dh).transpose(1, 2)
    q, k, v = (split(t) for t in torch.nn.functional.linear(x, m.qkv_proj.weight).chunk(3, -1))
    rms = lambda t, g: t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6) * g
    q, k = rms(rope(q, "half"), m.query_ln.scale), rms(rope(k, "half"), m.key_ln.scale)
    q = q * (1.442695041 / dh ** 0.5 * torch.nn.functional.softplus(m.per_dim_scale.per_dim_scale))
    future = torch.triu(torch.ones(n, n, dtype=torch.bool), 1)
    w = torch.softmax((q @ k.transpose(2, 3)).masked_fill(future, float("-inf")), -1)
    return torch.nn.functional.linear((w @ v).transpose(1, 2).reshape(B, n, d), m.out.weight)


@check("timesfm_2p5_attention_qk_rmsnorm_per_dim_scale.py")
def _(mod):
    """Every parameter random (the RMSNorm scales and the per-dimension scale too): the written-out formula to
    relative 1e-5 (float32 RoPE timescales); no leak; the plain rotary reference differs."""
    m = randomize(mod.timesfm_2p5_attention(4, 16)).eval()
    ref = lambda x: _timesfm_forward(m, x, 4)
    call = lambda x: m(x)[0]
    scale = max(ref(torch.randn(2, 7, 16)).abs().max().item(), 1.0)
    err, leak = cmp(call, ref, 16)
    W = m.qkv_proj.weight
    plain = lambda x: rope_mha_forward(x, 4, W[:16], W[16:32], W[32:], m.out.weight, convention="half")
    off, _ = cmp(call, plain, 16, shapes=[(2, 7)])
    good = err / scale < FLOAT32_TOL and leak < TOL and off > 1e-3
    return (good, f"formula: {err / scale:.1e} rel, leak {leak:.1e}; the plain rotary reference is off by {off:.1e}",
            "num_heads=4 in_features=16 (dh 4), FLOAT32_TOL relative")


@check("pypots_mha_injected_operator_keep_mask_no_biases.py")
def _(mod):
    """With the (B, n, n) causal keep-mask (1 on and below the diagonal) in eval(): mha_forward with w_qs, w_ks,
    w_vs, fc and no biases, exactly; no leak."""
    m = randomize(mod.decoder_self_attention(12, 3, 4, 4)).eval()

    def call(x):
        n = x.shape[1]
        return m(x, x, x, torch.tril(torch.ones(n, n)).expand(x.shape[0], n, n))[0]

    ref = lambda x: mha_forward(x, 3, m.w_qs.weight, m.w_ks.weight, m.w_vs.weight, m.fc.weight)
    return ok_line(*cmp(call, ref, 12)) + ("d_model=12 n_heads=3 d_k=d_v=4 attn_dropout=0.1 (eval)",)


def _unmasked_mha(x, nheads, wq, wk, wv, wo, bq=None, bk=None, bv=None, bo=None):
    """mha_forward without its causal mask: every position attends to every position."""
    B, n, _ = x.shape
    dh = wq.shape[0] // nheads
    lin = torch.nn.functional.linear
    split = lambda t: t.view(B, n, nheads, dh).transpose(1, 2)
    q, k, v = split(lin(x, wq, bq)), split(lin(x, wk, bk)), split(lin(x, wv, bv))
    w = torch.softmax(q @ k.transpose(2, 3) / dh ** 0.5, dim=-1)
    return lin((w @ v).transpose(1, 2).reshape(B, n, wq.shape[0]), wo, bo)


@check("olm_mha_causal_flag_ignored_pre_fix.py")
def _(mod):
    """Built with causal=True: forward(x) is the unmasked layer exactly (the future leaks); given the (n, n) tril
    keep-mask as `mask`, mha_forward exactly, no leak."""
    m = randomize(mod.MultiHeadAttention(12, 3, causal=True)).eval()
    w = (m.q_proj.weight, m.k_proj.weight, m.v_proj.weight, m.out_proj.weight,
         m.q_proj.bias, m.k_proj.bias, m.v_proj.bias, m.out_proj.bias)
    masked = lambda x: m(x, mask=torch.ones(x.shape[1], x.shape[1]).tril())
    err_mask, leak_mask = cmp(masked, lambda x: mha_forward(x, 3, *w), 12)
    err_flag, leak_flag = cmp(m, lambda x: _unmasked_mha(x, 3, *w), 12)
    good = err_mask < TOL and leak_mask < TOL and err_flag < TOL and leak_flag > 1e-3
    return good, (f"causal=True alone = the unmasked layer ({err_flag:.1e}), future-leak {leak_flag:.2e}; with the "
                  f"keep-mask = mha_forward ({err_mask:.1e}), leak {leak_mask:.1e}"), "embed_dims=12 num_heads=3"


@check("olm_gqa_rope_interleaved_mask_and_causal.py")
def _(mod):
    """num_kv_heads 2, 1, 4 of 4 heads, no biases (the defaults), and 2 with use_bias=True: grouped attention with RoPE on
    interleaved pairs (an independent complex formula), relative 1e-5 (float32 tables); no leak, with or without a
    mask hiding nothing."""
    msgs, good = [], True
    for kv, use_bias in ((2, False), (1, False), (4, False), (2, True)):  # (the other shapes on the first only: time)
        m = randomize(mod.GroupedQueryAttention(16, 4, kv, CTX, use_bias=use_bias)).eval()
        bo = m.out_proj.bias if use_bias else None
        ref = lambda x: _gqa_rope_ref(x, 4, kv, m.q_proj.weight, m.k_proj.weight, m.v_proj.weight,
                                      m.out_proj.weight) + (bo if bo is not None else 0.0)
        scale = max(ref(torch.randn(2, 7, 16)).abs().max().item(), 1.0)
        shapes = SHAPES if not msgs else [(2, 7)]
        err, leak = cmp(m, ref, 16, shapes=shapes)
        err_all, leak_all = cmp(lambda x: m(x, mask=torch.ones(x.shape[1], x.shape[1], dtype=torch.bool)), ref, 16,
                                shapes=[(2, 7)])
        good &= err / scale < FLOAT32_TOL and leak < TOL and err_all / scale < FLOAT32_TOL and leak_all < TOL
        msgs.append(f"kv={kv} bias={use_bias}: {err / scale:.1e} rel")
    return good, "; ".join(msgs) + " (no leak)", "embed_dim=16 num_heads=4 max_seq_len=10, FLOAT32_TOL relative"


@check("dreamgonfly_mha_state_cache_positional_masked_true.py")
def _(mod):
    """forward(x, x, x, (B, n, n) bool True above the diagonal, state=None, cache=False) in eval(): mha_forward with
    the four projections and no biases, exactly; no leak."""
    m = randomize(mod.decoder_self_attention(12, 3, 0.1)).eval()

    def call(x):
        B, n, _ = x.shape
        return m(x, x, x, torch.ones(n, n, dtype=torch.bool).triu(1).expand(B, n, n), None, False)[0]

    ref = lambda x: mha_forward(x, 3, m.query_projection.weight, m.key_projection.weight, m.value_projection.weight,
                                m.final_projection.weight)
    return ok_line(*cmp(call, ref, 12)) + ("d_model=12 n_heads=3 dropout=0.1 (eval)",)


@check("buildnanogpt_causal_self_attention_sdpa_config.py")
def _(mod):
    """Built from GPTConfig(block_size=10, n_head=3, n_embd=12): c_attn rows [W_q; W_k; W_v] with their biases, c_proj;
    mha_forward exactly, no leak."""
    m = randomize(mod.CausalSelfAttention(mod.GPTConfig(block_size=CTX, n_head=3, n_embd=12))).eval()
    W, b = m.c_attn.weight, m.c_attn.bias
    ref = lambda x: mha_forward(x, 3, W[:12], W[12:24], W[24:], m.c_proj.weight, b[:12], b[12:24], b[24:], m.c_proj.bias)
    return ok_line(*cmp(m, ref, 12)) + ("config object n_embd=12 n_head=3, SDPA is_causal=True",)


def _gated_rms(x, w, g, eps=1e-8):
    """x / max(rms(x), eps) * g * sigmoid(x * w), over the last axis (rela's GatedRMSNorm, written out)."""
    rms = (x.pow(2).sum(-1, keepdim=True) / x.shape[-1]).sqrt().clamp(min=eps)
    return x / rms * g * torch.sigmoid(x * w)


@check("lucidrains_rela_relu_attention_gated_rmsnorm.py")
def _(mod):
    """ReLA(dim=12, heads=3, dim_head=4): exactly an independent relu-attention formula (gated RMS norm on the input,
    relu(q k^T / 2) with the future zeroed, gated RMS norm per head, to_out), no leak; the lesson's softmax layer on
    the same normed input and projections differs by O(1)."""
    m = randomize(mod.ReLA(dim=12, heads=3, dim_head=4)).eval()
    Wq, Wk, Wv = m.to_qkv.weight[:12], m.to_qkv.weight[12:24], m.to_qkv.weight[24:]
    out = m.to_out[0]

    def relu_ref(x):
        B, n, _ = x.shape
        xn = _gated_rms(x, m.norm.w, m.norm.g)
        split = lambda t: t.view(B, n, 3, 4).transpose(1, 2)
        q, k, v = split(xn @ Wq.T), split(xn @ Wk.T), split(xn @ Wv.T)
        s = torch.relu(q @ k.transpose(2, 3) / 2.0) * torch.ones(n, n).tril()
        o = _gated_rms(s @ v, m.norm_values.w, m.norm_values.g)
        return o.transpose(1, 2).reshape(B, n, 12) @ out.weight.T + out.bias

    err, leak = cmp(m, relu_ref, 12)
    x = torch.randn(2, 7, 12, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        lesson = mha_forward(_gated_rms(x, m.norm.w, m.norm.g), 3, Wq, Wk, Wv, out.weight, bo=out.bias)
        off = (m(x) - lesson).abs().max().item()
    good = err < TOL and leak < TOL and off > 1e-1
    return good, (f"= relu attention with gated RMS norms ({err:.1e}), future-leak {leak:.1e}; the lesson's softmax "
                  f"layer on the same normed input differs by {off:.2e}"), "dim=12 heads=3 dim_head=4"


@check("lucidrains_feedback_attention_required_memory_tuple.py")
def _(mod):
    """Attention(dim=12, heads=3, dim_head=4) called as forward(x, None), n >= 2: mha_forward with to_q, the two row
    blocks of to_kv and to_out (its bias), exactly, no leak; one token with no memory raises (nothing to attend
    to), which the package never asks."""
    m = randomize(mod.Attention(dim=12, heads=3, dim_head=4)).eval()
    Wkv = m.to_kv.weight
    ref = lambda x: mha_forward(x, 3, m.to_q.weight, Wkv[:12], Wkv[12:], m.to_out.weight, bo=m.to_out.bias)
    err, leak = cmp(lambda x: m(x, None), ref, 12, shapes=[s for s in SHAPES if s[1] > 1])
    try:
        m(torch.randn(1, 1, 12), None)
        one = "one token without memory ran"
        raised = False
    except Exception as e:  # noqa: BLE001
        one, raised = f"one token without memory raises {type(e).__name__}", True
    good, msg = ok_line(err, leak)
    return good and raised, f"{msg} (n >= 2); {one}", "dim=12 heads=3 dim_head=4, memory=None"


@check("lucidrains_x_transformers_first_release_causal_flag.py")
def _(mod):
    """Attention(dim=12, heads=3, causal=True): to_q, to_kv's row blocks [W_k; W_v] (no biases) and to_out with its
    bias: mha_forward exactly, no leak; with the default causal=False the first output moves with later tokens."""
    m = randomize(mod.Attention(12, heads=3, causal=True)).eval()
    Wkv = m.to_kv.weight
    ref = lambda x: mha_forward(x, 3, m.to_q.weight, Wkv[:12], Wkv[12:], m.to_out.weight, bo=m.to_out.bias)
    good, msg = ok_line(*cmp(m, ref, 12))
    m.causal = False
    x = torch.randn(1, 5, 12, generator=torch.Generator().manual_seed(3))
    y = x.clone()
    y[:, -1] += 1.0
    with torch.no_grad():
        moved = (m(x)[:, 0] - m(y)[:, 0]).abs().max().item()
    return good and moved > 1e-6, f"{msg}; causal=False: first output moves by {moved:.1e}", "dim=12 heads=3 causal=True"


@check("transformer_lens_attention_per_head_weights_ignore_1e5.py")
def _(mod):
    """Attention(HookedTransformerConfig(n_layers=1, d_model=12, n_ctx=10, d_head=4, n_heads=3, attn_only=True)):
    W_q's rows for head h are W_Q[h].T (b_Q[h] its bias), W_o = W_O reshaped (12, 12) transposed: mha_forward
    exactly at ordinary scale, no leak; with the input scaled by 300 some visible scores fall below the -1e5 that
    replaces the future, and earlier outputs move with later tokens (the reference's do not)."""
    cfg = mod.HookedTransformerConfig(n_layers=1, d_model=12, n_ctx=CTX, d_head=4, n_heads=3, attn_only=True)
    m = randomize(mod.Attention(cfg)).eval()
    heads = lambda W: W.permute(0, 2, 1).reshape(12, 12)
    args = (heads(m.W_Q), heads(m.W_K), heads(m.W_V), m.W_O.reshape(12, 12).T,
            m.b_Q.reshape(12), m.b_K.reshape(12), m.b_V.reshape(12), m.b_O)
    good, msg = ok_line(*cmp(m, lambda x: mha_forward(x, 3, *args), 12))
    g = torch.Generator().manual_seed(7)
    x = torch.randn(2, 8, 12, generator=g) * 300
    y = x.clone()
    y[:, 4:] = torch.randn(2, 4, 12, generator=g) * 300
    with torch.no_grad():
        leak = (m(x)[:, :4] - m(y)[:, :4]).abs().max().item()
        ref_leak = (mha_forward(x, 3, *args)[:, :4] - mha_forward(y, 3, *args)[:, :4]).abs().max().item()
    good = good and leak > 1e-3 and ref_leak < TOL
    return good, (f"{msg}; input x300: earlier outputs move by {leak:.1e} when later tokens change (the reference's "
                  f"by {ref_leak:.1e}): IGNORE = -1e5 is finite"), "d_model=12 n_heads=3 d_head=4 n_ctx=10"


@check("attn_res_gqa_complex_rope_additive_mask_arg.py")
def _(mod):
    """GroupedQueryAttention(TransformerConfig(d_model=16, n_heads=4, n_kv_heads=2 and 4, max_seq_len=10)) called as
    its model does, forward(x, precompute_rope_freqs(4, T), the additive -inf triu(1) mask): the independent
    complex-pair GQA reference (query head h reads key/value head h // (H // KV)) at float32 precision (the rotation
    runs in float32), no leak; without the mask a first output moves with later tokens (bidirectional by design)."""
    msgs, good = [], True
    for kv in (2, 4):
        cfg = mod.TransformerConfig(d_model=16, n_heads=4, n_kv_heads=kv, max_seq_len=CTX,
                                    attn_res_mode=mod.AttnResMode.NONE)
        m = randomize(mod.GroupedQueryAttention(cfg)).eval()
        freqs = mod.precompute_rope_freqs(cfg.d_head, CTX, cfg.rope_theta)
        causal = lambda n: torch.full((n, n), float("-inf")).triu(1)[None, None]
        call = lambda x, m=m, freqs=freqs: m(x, freqs[:x.shape[1]], causal(x.shape[1]))
        ref = lambda x, m=m, kv=kv: _gqa_rope_ref(x, 4, kv, m.w_q.weight, m.w_k.weight, m.w_v.weight, m.w_o.weight)
        err, leak = cmp(call, ref, 16)
        scale = max(ref(torch.randn(2, 7, 16)).abs().max().item(), 1.0)
        x = torch.randn(1, 5, 16, generator=torch.Generator().manual_seed(4))
        y = x.clone()
        y[:, -1] += 1.0
        with torch.no_grad():
            moved = (m(x, freqs[:5])[:, 0] - m(y, freqs[:5])[:, 0]).abs().max().item()
        good = good and err / scale < FLOAT32_TOL and leak < TOL and moved > 1e-6
        msgs.append(f"KV={kv}: vs complex-pair GQA reference {err:.1e} (relative {err / scale:.1e}, float32 RoPE) "
                    f"leak={leak:.1e}; no mask: first output moves by {moved:.1e}")
    return good, "; ".join(msgs), "d_model=16 n_heads=4 n_kv_heads=2, 4"


def _per_head_ref(x, H, Wq, Wk, Wv, Wo, bq, bk, bv, bo, act=lambda t: t, scale_width=None, causal=True):
    """An independent per-head loop (not mha_forward): head h takes rows h*dh:(h+1)*dh of each projection, `act`
    after every projection (CyberZHG's activation), scores / sqrt(scale_width or dh), the future at -inf."""
    B, n, _ = x.shape
    dh = Wq.shape[0] // H
    q, k, v = (act(x @ W.T + (0 if b is None else b)) for W, b in ((Wq, bq), (Wk, bk), (Wv, bv)))
    outs = []
    for h in range(H):
        cut = slice(h * dh, (h + 1) * dh)
        s = q[..., cut] @ k[..., cut].transpose(-2, -1) / (scale_width or dh) ** 0.5
        if causal:
            s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        outs.append(torch.softmax(s, dim=-1) @ v[..., cut])
    return act(torch.cat(outs, dim=-1) @ Wo.T + (0 if bo is None else bo))


@check("knowlytix_llm_from_scratch_mha_fused_qkv_additive_inf.py")
def _(mod):
    """MultiHeadCausalSelfAttention(12, 3, 10): qkv_proj's three row blocks as W_q, W_k, W_v, out_proj as W_o (no
    biases anywhere): mha_forward exactly and the per-head loop too, no leak."""
    m = randomize(mod.MultiHeadCausalSelfAttention(12, 3, CTX)).eval()
    W = m.qkv_proj.weight
    args = (W[:12], W[12:24], W[24:], m.out_proj.weight)
    err, leak = cmp(m, lambda x: mha_forward(x, 3, *args), 12)
    err2, _ = cmp(m, lambda x: _per_head_ref(x, 3, *args, None, None, None, None), 12, shapes=SHAPES[:1])
    good, msg = ok_line(max(err, err2), leak)
    return good, msg + " (mha_forward and the per-head loop)", "embedding_dim=12 num_heads=3 block_size=10"


@check("scratchgpt_mha_keys_first_scale_embedding_size.py")
def _(mod):
    """MultiHeadAttention(3, 12, 10, 4, 0.0): heads' _query/_key/_value rows stacked head by head, _proj as W_o (its
    bias): exactly the per-head loop with scores / sqrt(12) (the input width), no leak; the lesson's layer (/ sqrt(4))
    differs."""
    m = randomize(mod.MultiHeadAttention(3, 12, CTX, 4, 0.0)).eval()
    cat = lambda role: torch.cat([getattr(h, role).weight for h in m._heads], dim=0)
    args = (cat("_query"), cat("_key"), cat("_value"), m._proj.weight, None, None, None, m._proj.bias)
    err, leak = cmp(m, lambda x: _per_head_ref(x, 3, *args, scale_width=12), 12)
    off, _ = cmp(m, lambda x: mha_forward(x, 3, *args[:4], bo=m._proj.bias), 12, shapes=SHAPES[:1])
    good = err < TOL and leak < TOL and off > 1e-2
    return good, (f"= heads scaled by 1/sqrt(embedding_size) ({err:.1e}), future-leak {leak:.1e}; the lesson's "
                  f"layer differs by {off:.2e}"), "num_heads=3 embedding_size=12 head_size=4"


@check("cyberzhg_mha_relu_activation_history_mask_arg.py")
def _(mod):
    """MultiHeadAttention(12, 3) called as the README does, m(x, x, x, MultiHeadAttention.gen_history_mask(x)):
    with activation=None mha_forward exactly (the -1e9 fill underflows), no leak; with the default activation=F.relu
    exactly the per-head loop with relu after each of the four projections, and the lesson's layer differs; a padding
    mask that differs between batch items is mixed across them (mask.repeat(head_num, 1, 1) against heads folded
    batch-major into the batch axis): batch item 0 alone and in a batch of two give different outputs."""
    lin = lambda m: (m.linear_q.weight, m.linear_k.weight, m.linear_v.weight, m.linear_o.weight,
                     m.linear_q.bias, m.linear_k.bias, m.linear_v.bias, m.linear_o.bias)
    call = lambda m: (lambda x: m(x, x, x, m.gen_history_mask(x)))
    plain = randomize(mod.MultiHeadAttention(12, 3, activation=None)).eval()
    good, msg = ok_line(*cmp(call(plain), lambda x: mha_forward(x, 3, *lin(plain)), 12))
    relu = randomize(mod.MultiHeadAttention(12, 3)).eval()
    err, leak = cmp(call(relu), lambda x: _per_head_ref(x, 3, *lin(relu), act=torch.relu), 12)
    off, _ = cmp(call(relu), lambda x: mha_forward(x, 3, *lin(relu)), 12, shapes=SHAPES[:1])
    x = torch.randn(2, 5, 12, generator=torch.Generator().manual_seed(6))
    mask = torch.stack([torch.tril(torch.ones(5, 5)), torch.ones(5, 5)])  # item 0 causal, item 1 sees everything
    with torch.no_grad():
        mixed = (plain(x, x, x, mask)[0] - plain(x[:1], x[:1], x[:1], mask[:1])[0]).abs().max().item()
    good = good and err < TOL and leak < TOL and off > 1e-2 and mixed > 1e-3
    return good, (f"activation=None: {msg}; default relu: = relu per-head loop ({err:.1e}), leak {leak:.1e}, the "
                  f"lesson's layer differs by {off:.2e}; per-item masks: item 0 moves by {mixed:.1e} beside item 1"), \
        "in_features=12 head_num=3"


@check("gpt_from_scratch_mhattention_sdpa_split_keys_first.py")
def _(mod):
    """MHAttention(10, 12, 3, dropout=0.1, qkv_bias=True) in eval(): qkv's three row blocks and bias thirds as W_q,
    W_k, W_v, proj as W_o (its bias): mha_forward and the per-head loop, no leak (SDPA: float64 rounding only)."""
    m = randomize(mod.MHAttention(10, 12, 3, dropout=0.1, qkv_bias=True)).eval()
    W, b = m.qkv.weight, m.qkv.bias
    args = (W[:12], W[12:24], W[24:], m.proj.weight, b[:12], b[12:24], b[24:], m.proj.bias)
    err, leak = cmp(m, lambda x: mha_forward(x, 3, *args), 10)
    err2, _ = cmp(m, lambda x: _per_head_ref(x, 3, *args), 10, shapes=SHAPES[:1])
    good, msg = ok_line(max(err, err2), leak)
    return good, msg + " (mha_forward and the per-head loop, eval())", "d_in=10 d_out=12 n_heads=3 qkv_bias dropout=0.1"


@check("lucidrains_perceiver_ar_causal_attention_prenorm_unused_dropout.py")
def _(mod):
    """CausalAttention(dim=12, heads=3, dim_head=4, dropout=0.5): mha_forward(layer_norm(x)) with to_qkv's three row
    blocks and to_out (no biases), exactly, no leak, even in train() (the dropout argument is never used); the
    lesson's layer on x itself differs."""
    m = randomize(mod.CausalAttention(dim=12, heads=3, dim_head=4, dropout=0.5))
    W = m.to_qkv.weight
    args = (W[:12], W[12:24], W[24:], m.to_out.weight)
    normed = lambda x: torch.nn.functional.layer_norm(x, (12,), m.norm.weight, m.norm.bias, m.norm.eps)
    err, leak = cmp(m, lambda x: _per_head_ref(normed(x), 3, *args, None, None, None, None), 12)
    off, _ = cmp(m, lambda x: mha_forward(x, 3, *args), 12, shapes=SHAPES[:1])
    good = err < TOL and leak < TOL and off > 1e-2
    return good, (f"= per-head loop on LayerNorm(x) ({err:.1e}, in train()), future-leak {leak:.1e}; without the norm "
                  f"differs by {off:.2e}"), "dim=12 heads=3 dim_head=4 dropout=0.5"


@check("sockeye_mha_self_attention_seq_first_interleaved_kv_on_eval.py")
def _(mod):
    """MultiHeadSelfAttention(12, 3, 12): weights read in train() (ff_in's [Q; K; V] row blocks, ff_out, no biases);
    the sequence-first call m(x.transpose(0, 1), mask=triu(ones, 1).bool())[0].transpose(0, 1): in train() (float64,
    F.multi_head_attention_forward) mha_forward exactly, no leak; after eval() (float32: the interleaved path has no
    float64 fill) ff_in.weight holds other rows and the output is the same at float32 precision, no leak; in eval()
    a float64 input raises KeyError (LARGE_VALUES has no float64 entry)."""
    m = randomize(mod.MultiHeadSelfAttention(12, 3, 12))
    W, Wo = m.ff_in.weight.detach().clone(), m.ff_out.weight.detach().clone()
    ref = lambda x: mha_forward(x, 3, W[:12], W[12:24], W[24:], Wo)
    mask = lambda n: torch.ones(n, n).triu(1).bool()
    call = lambda x: m(x.transpose(0, 1), mask=mask(x.shape[1]))[0].transpose(0, 1)
    err, leak = cmp(call, ref, 12)
    m.eval()
    moved = (m.ff_in.weight - W).abs().max().item()
    try:
        call(torch.randn(1, 3, 12))
        raised = "ran"
    except KeyError as e:
        raised = f"KeyError {e}"
    m32 = m.float()
    call32 = lambda x: m32(x.float().transpose(0, 1), mask=mask(x.shape[1]))[0].transpose(0, 1).double()
    err32, leak32 = cmp(call32, ref, 12)
    scale = max(ref(torch.randn(2, 7, 12)).abs().max().item(), 1.0)
    good = err < TOL and leak < TOL and moved > 1e-3 and err32 / scale < FLOAT32_TOL and leak32 < 1e-6 and \
        raised.startswith("KeyError")
    return good, (f"train(): max|out-ref|={err:.1e} future-leak={leak:.1e}; eval() rewrites ff_in.weight (by up to "
                  f"{moved:.1e}), float32 output vs reference relative {err32 / scale:.1e}, leak {leak32:.1e}; eval() "
                  f"in float64: {raised}"), "depth_att=12 heads=3 depth_out=12"


def _rope_per_head(x, H, Wq, Wk, Wv, Wo, convention, theta=10000.0, bo=None):
    """An independent rotary per-head loop (not rope_mha_forward): head h takes rows h*dh:(h+1)*dh of each projection;
    position p turns the pair (i, i + dh/2) ("half") or (2i, 2i + 1) ("interleaved") by p * theta ** (-2i / dh), in
    float64; scores / sqrt(dh), the future at -inf."""
    B, n, _ = x.shape
    dh = Wq.shape[0] // H
    ang = torch.arange(n, dtype=torch.float64)[:, None] * theta ** (-torch.arange(0, dh, 2, dtype=torch.float64) / dh)
    c, s = ang.cos(), ang.sin()

    def turn(t):
        if convention == "half":
            a, b = t[..., :dh // 2], t[..., dh // 2:]
            return torch.cat([a * c - b * s, a * s + b * c], dim=-1)
        a, b = t[..., 0::2], t[..., 1::2]
        return torch.stack([a * c - b * s, a * s + b * c], dim=-1).flatten(-2)
    outs = []
    for h in range(H):
        cut = slice(h * dh, (h + 1) * dh)
        q, k, v = turn(x @ Wq[cut].T), turn(x @ Wk[cut].T), x @ Wv[cut].T
        sc = (q @ k.transpose(-2, -1) / dh ** 0.5).masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        outs.append(torch.softmax(sc, dim=-1) @ v)
    return torch.cat(outs, dim=-1) @ Wo.T + (0 if bo is None else bo)


@check("lucidrains_speculative_decoding_causal_attention_rope_kv_cache_rmsnorm.py")
def _(mod):
    """Through the factory SpeculativeDecodingAttention(12, 3): out = the rotate-half rotary layer on RMSNorm(x)
    (x / sqrt(mean x^2 + eps) * g, eps = finfo.eps), to_qkv's three row blocks as W_q, W_k, W_v, to_out as W_o, no
    biases; rope_mha_forward and the per-head loop agree, to relative 1e-5 (float32 inverse frequencies); no leak; a
    prompt of 4, then 2 tokens, then 1 with the returned cache = the whole sequence's last rows; the interleaved
    convention differs."""
    m = randomize(mod.SpeculativeDecodingAttention(12, 3)).eval()
    a = m.attn
    W = a.to_qkv.weight
    args = (W[:12], W[12:24], W[24:], a.to_out.weight)
    norm = lambda x: x / (x.pow(2).mean(-1, keepdim=True) + torch.finfo(x.dtype).eps).sqrt() * a.norm.weight
    call = lambda x: m(x)[0]
    ref = lambda x: rope_mha_forward(norm(x), 3, *args, convention="half")
    scale = max(ref(torch.randn(2, 7, 12)).abs().max().item(), 1.0)
    err, leak = cmp(call, ref, 12)
    err2, _ = cmp(call, lambda x: _rope_per_head(norm(x), 3, *args, "half"), 12, shapes=SHAPES[:1])
    off, _ = cmp(call, lambda x: _rope_per_head(norm(x), 3, *args, "interleaved"), 12, shapes=SHAPES[:1])
    x = torch.randn(2, 7, 12, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        whole = call(x)
        y1, c = m(x[:, :4])
        y2, c = m(x[:, 4:6], cache=c)
        y3, c = m(x[:, 6:], cache=c)
    cached = (torch.cat([y1, y2, y3], dim=1) - whole).abs().max().item()
    good = max(err, err2) / scale < FLOAT32_TOL and leak < TOL and cached < 1e-6 and off > 1e-2
    return good, (f"= rotate-half rotary on RMSNorm(x), relative {max(err, err2) / scale:.1e} (rope_mha_forward and "
                  f"the per-head loop), future-leak {leak:.1e}; prompt 4 + 2 + 1 with its cache vs whole "
                  f"{cached:.1e}; interleaved differs by {off:.2e}"), "dim=12 heads=3 dim_head=4, FLOAT32_TOL relative"


@check("mqa_mpt_multi_query_attention_torch_impl_past_key_value.py")
def _(mod):
    """make_mpt_mqa(12, 3) = MultiQueryAttention(12, 3, attn_impl='torch'): Wqkv rows 0:12 as W_q, 12:16 as the ONE
    key head, 16:20 as the ONE value head (and its bias rows), out_proj with its bias: gqa_forward with one key/value
    head and the per-head loop with W_k, W_v repeated for every head, exactly, no leak; a prompt of 4, 2 tokens, 1
    token with past_key_value=() started and handed back = the whole sequence; with None nothing is returned."""
    m = randomize(mod.make_mpt_mqa(12, 3)).eval()
    W, b = m.Wqkv.weight, m.Wqkv.bias
    args = (W[:12], W[12:16], W[16:], m.out_proj.weight, b[:12], b[12:16], b[16:], m.out_proj.bias)
    call = lambda x: m(x)[0]
    err, leak = cmp(call, lambda x: gqa_forward(x, 3, *args), 12)
    rep = lambda t: t.repeat(3, *([1] * (t.dim() - 1)))
    loop = (args[0], rep(args[1]), rep(args[2]), args[3], args[4], rep(args[5]), rep(args[6]), args[7])
    err2, _ = cmp(call, lambda x: _per_head_ref(x, 3, *loop), 12, shapes=SHAPES[:1])
    x = torch.randn(2, 7, 12, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        whole, _, none = m(x)
        y1, _, c = m(x[:, :4], past_key_value=())
        y2, _, c = m(x[:, 4:6], past_key_value=c)
        y3, _, c = m(x[:, 6:], past_key_value=c)
    cached = (torch.cat([y1, y2, y3], dim=1) - whole).abs().max().item()
    good, msg = ok_line(max(err, err2), leak)
    good = good and cached < TOL and none is None
    return good, (msg + f" (gqa_forward, one kv head, and the per-head loop); prompt 4 + 2 + 1 with past_key_value=() "
                  f"vs whole {cached:.1e}; past_key_value=None returns {none}"), "d_model=12 n_heads=3 (dh 4), kv 1"


def _rope_per_head_biased(x, H, Wq, Wk, Wv, Wo, bq, bk, bv, bo, convention, theta=10000.0):
    """_rope_per_head with the biases of q, k, v (added before the turn) and of the output projection."""
    shift = lambda b: 0 if b is None else b
    B, n, _ = x.shape
    dh = Wq.shape[0] // H
    ang = torch.arange(n, dtype=torch.float64)[:, None] * theta ** (-torch.arange(0, dh, 2, dtype=torch.float64) / dh)
    c, s = ang.cos(), ang.sin()

    def turn(t):
        if convention == "half":
            a, b = t[..., :dh // 2], t[..., dh // 2:]
            return torch.cat([a * c - b * s, a * s + b * c], dim=-1)
        a, b = t[..., 0::2], t[..., 1::2]
        return torch.stack([a * c - b * s, a * s + b * c], dim=-1).flatten(-2)
    outs = []
    for h in range(H):
        cut = slice(h * dh, (h + 1) * dh)
        q = turn(x @ Wq[cut].T + shift(bq)[cut] if bq is not None else x @ Wq[cut].T)
        k = turn(x @ Wk[cut].T + shift(bk)[cut] if bk is not None else x @ Wk[cut].T)
        v = x @ Wv[cut].T + (0 if bv is None else bv[cut])
        sc = (q @ k.transpose(-2, -1) / dh ** 0.5).masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        outs.append(torch.softmax(sc, dim=-1) @ v)
    return torch.cat(outs, dim=-1) @ Wo.T + shift(bo)


@check("qsa_softmax_attention_interleaved_rope_residual_inside_cache_chunk_unmasked.py")
def _(mod):
    """SoftmaxAttention(12, 3): out = x + 0.9 * (the interleaved rotary layer with q/k/v/o's biases), to relative 1e-5
    (float32 angles; rope_mha_forward and an independent per-head loop), no leak; the rotate-half convention differs.
    The cache: a prompt of 4 then 1 token per call (use_cache=True, the returned ComplexKVCache handed back) = the
    whole sequence; a prompt of 4 then a chunk of 2 differs at the chunk's FIRST token, whose output moves with the
    second token's input (no mask after a cache)."""
    m = randomize(mod.SoftmaxAttention(12, 3)).eval()
    args = (m.q.weight, m.k.weight, m.v.weight, m.o.weight, m.q.bias, m.k.bias, m.v.bias, m.o.bias)
    ref = lambda x: x + 0.9 * rope_mha_forward(x, 3, *args, convention="interleaved")
    scale = max(ref(torch.randn(2, 7, 12)).abs().max().item(), 1.0)
    err, leak = cmp(m, ref, 12)
    err2, _ = cmp(m, lambda x: x + 0.9 * _rope_per_head_biased(x, 3, *args, "interleaved"), 12, shapes=SHAPES[:1])
    off, _ = cmp(m, lambda x: x + 0.9 * _rope_per_head_biased(x, 3, *args, "half"), 12, shapes=SHAPES[:1])
    x = torch.randn(2, 7, 12, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        whole = m(x)
        y, c = m(x[:, :4], use_cache=True)
        ys = [y]
        for t in range(4, 7):
            y, c = m(x[:, t:t + 1], past_kv=c, use_cache=True)
            ys.append(y)
        one_by_one = (torch.cat(ys, dim=1) - whole).abs().max().item()
        _, c = m(x[:, :4], use_cache=True)
        chunk, _ = m(x[:, 4:6], past_kv=c, use_cache=True)
        chunk_err = (chunk - whole[:, 4:6]).abs().max().item()
        x2 = x.clone()
        x2[:, 5] = torch.randn(2, 12, generator=torch.Generator().manual_seed(8))
        _, c = m(x2[:, :4], use_cache=True)
        chunk2, _ = m(x2[:, 4:6], past_kv=c, use_cache=True)
        moved = (chunk2[:, 0] - chunk[:, 0]).abs().max().item()
    good = max(err, err2) / scale < FLOAT32_TOL and leak < TOL and off > 1e-2 and one_by_one / scale < FLOAT32_TOL \
        and chunk_err > 1e-2 and moved > 1e-2
    return good, (f"no cache: = x + 0.9 * interleaved rotary (biases), relative {max(err, err2) / scale:.1e}, "
                  f"future-leak {leak:.1e}, rotate-half differs by {off:.2e}; cache: 4 + 1 + 1 + 1 vs whole "
                  f"{one_by_one:.1e}, 4 + chunk of 2 vs whole {chunk_err:.2e}, the chunk's first output moved by its "
                  f"second token {moved:.2e}"), "d_model=12 n_heads=3 (d_k 4), FLOAT32_TOL relative"


@check("attention_smithy_mha_spelled_out_injected_causal_method.py")
def _(mod):
    """AttentionSmithyCausalSelfAttention(d, heads): query/key/value/out_weights with their biases = mha_forward and
    the per-head loop, no leak; at d=12, 3 heads (width 4, sqrt exact in float32) exactly; at d=9, 3 heads (width 3:
    the float32 sqrt(3) is off by relative 3e-8) to relative 1e-7."""
    out = []
    for d, tol in ((12, TOL), (9, None)):
        m = randomize(mod.AttentionSmithyCausalSelfAttention(d, 3)).eval()
        a = m.attention
        args = (a.query_weights.weight, a.key_weights.weight, a.value_weights.weight, a.out_weights.weight,
                a.query_weights.bias, a.key_weights.bias, a.value_weights.bias, a.out_weights.bias)
        err, leak = cmp(m, lambda x: mha_forward(x, 3, *args), d)
        err2, _ = cmp(m, lambda x: _per_head_ref(x, 3, *args), d, shapes=SHAPES[:1])
        scale = max(mha_forward(torch.randn(2, 7, d), 3, *args).abs().max().item(), 1.0)
        rel = max(err, err2) / scale
        out.append((rel < (tol or 1e-7) and (tol is None or max(err, err2) < tol) and leak < TOL, rel, leak))
    good = all(o[0] for o in out)
    return good, (f"d=12: max|out-ref| relative {out[0][1]:.1e} (mha_forward and the per-head loop), future-leak "
                  f"{out[0][2]:.1e}; d=9 (head width 3, float32 sqrt(3)): relative {out[1][1]:.1e}, future-leak "
                  f"{out[1][2]:.1e}"), "embedding_dimension=12 and 9, number_of_heads=3, biases"


@check("flexit_mha_rotate_half_rope_plugin_kv_cache_dict_in_place.py")
def _(mod):
    """make_flexit_rotary_attention(12, 3) called (x, x, x, causal keep-mask): the rotate-half rotary layer with the
    four biases, to relative 1e-5 (float32 cos/sin cache; rope_mha_forward and the biased per-head loop), no leak;
    the interleaved convention differs; a prompt of 4, then 2 tokens (the causal mask's rows 4:6 over 6 keys), then
    1, with one dict kv_cache filled in place and position_offset = tokens cached, = the whole sequence."""
    m = randomize(mod.make_flexit_rotary_attention(12, 3)).eval()
    args = (m.q_proj.weight, m.k_proj.weight, m.v_proj.weight, m.out_proj.weight, m.q_proj.bias, m.k_proj.bias,
            m.v_proj.bias, m.out_proj.bias)
    keep = lambda n: torch.ones(n, n, dtype=torch.bool).tril()[None, None]
    call = lambda x: m(x, x, x, keep(x.shape[1]))
    ref = lambda x: rope_mha_forward(x, 3, *args, convention="half")
    scale = max(ref(torch.randn(2, 7, 12)).abs().max().item(), 1.0)
    err, leak = cmp(call, ref, 12)
    err2, _ = cmp(call, lambda x: _rope_per_head_biased(x, 3, *args, "half"), 12, shapes=SHAPES[:1])
    off, _ = cmp(call, lambda x: _rope_per_head_biased(x, 3, *args, "interleaved"), 12, shapes=SHAPES[:1])
    x = torch.randn(2, 7, 12, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        whole = call(x)
        kv = {}
        ys, fed = [], 0
        for size in (4, 2, 1):
            piece = x[:, fed:fed + size]
            mask = keep(fed + size)[:, :, fed:fed + size]
            ys.append(m(piece, piece, piece, mask, kv, fed))
            fed += size
    cached = (torch.cat(ys, dim=1) - whole).abs().max().item()
    good = max(err, err2) / scale < FLOAT32_TOL and leak < TOL and off > 1e-2 and cached / scale < FLOAT32_TOL \
        and kv["k"].shape[2] == 7
    return good, (f"= rotate-half rotary with biases, relative {max(err, err2) / scale:.1e} (rope_mha_forward and the "
                  f"per-head loop), future-leak {leak:.1e}, interleaved differs by {off:.2e}; prompt 4 + 2 + 1 with "
                  f"the dict filled in place vs whole {cached:.1e}"), "d_model=12 n_heads=3 (head_dim 4), FLOAT32_TOL"


@check("deepsuite_gpt_attention_additive_mask_replaces_causal.py")
def _(mod):
    """GPTAttention(12, 3, dropout=0.0): qkv's three row blocks and proj, with biases = mha_forward and the per-head
    loop, no leak; given an all-ones (1, n) mask (the GPT model's padding mask, nothing padded) at batch 1, position
    0's output moves with the last token (the causal mask is replaced by the added mask)."""
    m = randomize(mod.GPTAttention(12, 3, dropout=0.0)).eval()
    W, b = m.qkv.weight, m.qkv.bias
    args = (W[:12], W[12:24], W[24:], m.proj.weight, b[:12], b[12:24], b[24:], m.proj.bias)
    err, leak = cmp(m, lambda x: mha_forward(x, 3, *args), 12)
    err2, _ = cmp(m, lambda x: _per_head_ref(x, 3, *args), 12, shapes=SHAPES[:1])
    x = torch.randn(1, 5, 12, generator=torch.Generator().manual_seed(9))
    x2 = x.clone()
    x2[:, -1] += 1.0
    with torch.no_grad():
        moved = (m(x2, torch.ones(1, 5))[:, 0] - m(x, torch.ones(1, 5))[:, 0]).abs().max().item()
    good, msg = ok_line(max(err, err2), leak)
    return good and moved > 1e-3, (msg + f" (mha_forward and the per-head loop); with a (1, n) mask of ones, "
                                   f"position 0 moves with the last token by {moved:.2e}"), "d_model=12 n_heads=3"


@check("zenith_causal_self_attention_kwonly_rope_buffers_cache_object.py")
def _(mod):
    """CausalSelfAttention(embed_dim=12, num_heads=3, block_size=10): the rotate-half rotary layer with qkv's three row
    blocks and proj, with biases, to relative 1e-5 (float32 cos/sin buffers made before the cast; rope_mha_forward
    and the biased per-head loop), no leak; the interleaved convention differs; a prompt of 4, then 2 tokens, then 1
    with one KVCache(1) and offset = tokens cached = the whole sequence."""
    m = randomize(mod.CausalSelfAttention(embed_dim=12, num_heads=3, block_size=CTX)).eval()
    W, b = m.qkv.weight, m.qkv.bias
    args = (W[:12], W[12:24], W[24:], m.proj.weight, b[:12], b[12:24], b[24:], m.proj.bias)
    ref = lambda x: rope_mha_forward(x, 3, *args, convention="half")
    scale = max(ref(torch.randn(2, 7, 12)).abs().max().item(), 1.0)
    err, leak = cmp(m, ref, 12)
    err2, _ = cmp(m, lambda x: _rope_per_head_biased(x, 3, *args, "half"), 12, shapes=SHAPES[:1])
    off, _ = cmp(m, lambda x: _rope_per_head_biased(x, 3, *args, "interleaved"), 12, shapes=SHAPES[:1])
    x = torch.randn(2, 7, 12, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        whole = m(x)
        kv = mod.KVCache(1)
        ys, fed = [], 0
        for size in (4, 2, 1):
            ys.append(m(x[:, fed:fed + size], cache=kv, offset=fed))
            fed += size
    cached = (torch.cat(ys, dim=1) - whole).abs().max().item()
    good = max(err, err2) / scale < FLOAT32_TOL and leak < TOL and off > 1e-2 and cached / scale < FLOAT32_TOL
    return good, (f"= rotate-half rotary with biases, relative {max(err, err2) / scale:.1e} (rope_mha_forward and the "
                  f"per-head loop), future-leak {leak:.1e}, interleaved differs by {off:.2e}; prompt 4 + 2 + 1 with a "
                  f"KVCache(1) vs whole {cached:.1e}"), "embed_dim=12 num_heads=3 block_size=10, FLOAT32_TOL"


# ----------------------------------------------------------------------------------------------- realzoo18 (PyPI wheels)
def _partial_rope_interleaved(x, heads, wq, wk, wv, wo, rotated, base=10000.0):
    """Attention whose queries and keys have only their first `rotated` features per head turned, in INTERLEAVED pairs
    (x_2i, x_2i+1) by p * base^(-2i / rotated), the others passed through; written out independently of the entry."""
    B, n, _ = x.shape
    dh = wq.shape[0] // heads
    lin = torch.nn.functional.linear
    split = lambda t: t.view(B, n, heads, dh).transpose(1, 2)
    ang = torch.arange(n, dtype=torch.float64)[:, None] * base ** (-torch.arange(0, rotated, 2) / rotated)[None, :]
    cos, sin = ang.cos(), ang.sin()

    def turn(t):
        a, b, rest = t[..., 0:rotated:2], t[..., 1:rotated:2], t[..., rotated:]
        pairs = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
        return torch.cat((pairs, rest), dim=-1)

    q, k, v = turn(split(lin(x, wq))), turn(split(lin(x, wk))), split(lin(x, wv))
    scores = (q @ k.transpose(2, 3) / dh ** 0.5).masked_fill(_future_true(n), float("-inf"))
    return lin((torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(B, n, -1), wo)


@check("hf_gptj_attention_rotate_every_two_keys_first_fill_1e9.py")
def _(mod):
    """build(12, 3, 10) (rotary_dim 64 >= head width 4: every feature turned) = rope_mha_forward interleaved without
    biases, relative 1e-5 (float32 q, k, sin/cos); rotary_dim 4 of head width 8 = the independent partial interleaved
    reference; rotate-half differs; prompt 4 then 2 then 1 through layer_past = whole; the -1e9 fill (before the scale)
    lets the future in once a query's own score is far below -1e9 (W_k = -W_q, tokens x1e6)."""
    msgs, good = [], True
    for d, rd in ((12, 64), (24, 4)):
        m = randomize(mod.build(d, 3, CTX, rotary_dim=rd)).eval()
        ws = (m.q_proj.weight, m.k_proj.weight, m.v_proj.weight, m.out_proj.weight)
        if rd >= d // 3:
            ref = lambda x: rope_mha_forward(x, 3, *ws, convention="interleaved")  # noqa: E731
            off, _ = cmp(lambda x: m(x)[0], lambda x: rope_mha_forward(x, 3, *ws, convention="half"), d,
                         shapes=SHAPES[:1])
        else:
            ref = lambda x: _partial_rope_interleaved(x, 3, *ws, rotated=rd)  # noqa: E731
            off, _ = cmp(lambda x: m(x)[0], lambda x: rope_mha_forward(x, 3, *ws, convention="interleaved"), d,
                         shapes=SHAPES[:1])
        scale = max(ref(torch.randn(2, 7, d)).abs().max().item(), 1.0)
        err, leak = cmp(lambda x: m(x)[0], ref, d)
        x = torch.randn(2, 7, d, generator=torch.Generator().manual_seed(7))
        with torch.no_grad():
            whole, ys, past, fed = m(x)[0], [], None, 0
            for size in (4, 2, 1):
                y, past = m(x[:, fed:fed + size], layer_past=past, use_cache=True)
                ys.append(y)
                fed += size
        cached = (torch.cat(ys, dim=1) - whole).abs().max().item()
        good &= err / scale < FLOAT32_TOL and leak < TOL and off > 1e-2 and cached / scale < FLOAT32_TOL
        msgs.append(f"d={d} rotary_dim={rd}: relative {err / scale:.1e}, leak {leak:.1e}, the other rotation differs by "
                    f"{off:.1e}, prompt 4 + 2 + 1 cached vs whole {cached / scale:.1e}")
    big = randomize(mod.build(8, 2, CTX), seed=1).eval()
    with torch.no_grad():
        big.k_proj.weight.copy_(-big.q_proj.weight)
    g = torch.Generator().manual_seed(7)
    x = torch.randn(1, 4, 8, generator=g) * 1e6
    x2 = x.clone()
    x2[:, 1:] = torch.randn(1, 3, 8, generator=g) * 1e6
    with torch.no_grad():
        huge_leak = (big(x)[0][:, 0] - big(x2)[0][:, 0]).abs().max().item()
    return (good and huge_leak > 1e-3, "; ".join(msgs) + f"; W_k = -W_q, tokens x1e6: the future changes position 0 by "
            f"{huge_leak:.1e} (the -1e9 fill)", "n_heads=3, FLOAT32_TOL relative (float32 scores and rotary)")


@check("hf_gpt_neo_self_attention_keys_first_unscaled_fill_1e9.py")
def _(mod):
    """build(12, 3, 10): = mha_forward with W_q * sqrt(head_dim) (relative 1e-5, float32 scores), not mha_forward with
    its own weights (no scale), no leak; "local" with window_size 3 stops seeing keys 3 back; the -1e9 fill leaks with
    W_k = -W_q and tokens x1e6."""
    m = randomize(mod.build(12, 3, CTX)).eval()
    wq, wk, wv, wo, bo = m.q_proj.weight, m.k_proj.weight, m.v_proj.weight, m.out_proj.weight, m.out_proj.bias
    ref = lambda x: mha_forward(x, 3, wq * 2.0, wk, wv, wo, None, None, None, bo)  # noqa: E731 - head width 4: sqrt 2
    scale = max(ref(torch.randn(2, 7, 12)).abs().max().item(), 1.0)
    err, leak = cmp(lambda x: m(x)[0], ref, 12)
    off, _ = cmp(lambda x: m(x)[0], lambda x: mha_forward(x, 3, wq, wk, wv, wo, None, None, None, bo), 12,
                 shapes=SHAPES[:1])
    loc = randomize(mod.build(12, 3, CTX, attention_type="local", window_size=3)).eval()
    x = torch.randn(1, 6, 12, generator=torch.Generator().manual_seed(3))
    x2 = x.clone()
    x2[:, 1] += 1.0
    with torch.no_grad():
        far = (loc(x2)[0][:, 4:] - loc(x)[0][:, 4:]).abs().max().item()  # positions 4, 5: key 1 is 3 or more back
        near = (loc(x2)[0][:, 1:4] - loc(x)[0][:, 1:4]).abs().max().item()
    big = randomize(mod.build(8, 2, CTX), seed=1).eval()
    with torch.no_grad():
        big.k_proj.weight.copy_(-big.q_proj.weight)
    g = torch.Generator().manual_seed(7)
    x = torch.randn(1, 4, 8, generator=g) * 1e6
    x2 = x.clone()
    x2[:, 1:] = torch.randn(1, 3, 8, generator=g) * 1e6
    with torch.no_grad():
        huge_leak = (big(x)[0][:, 0] - big(x2)[0][:, 0]).abs().max().item()
    good = err / scale < FLOAT32_TOL and leak < TOL and off > 1e-2 and far == 0.0 and near > 1e-3 and huge_leak > 1e-3
    return good, (f"= mha_forward with W_q * sqrt(4), relative {err / scale:.1e}, leak {leak:.1e}; with its own W_q "
                  f"(the lesson's scale) it differs by {off:.2e}; local window 3: key 1 moves positions 1-3 by "
                  f"{near:.1e}, positions 4-5 by {far:.1e}; W_k = -W_q, tokens x1e6: the future changes position 0 by "
                  f"{huge_leak:.1e} (the -1e9 fill)"), "d=12 n_heads=3, FLOAT32_TOL relative (float32 scores)"


@check("fairseq_downsampled_mha_single_head_module_weight_norm_hides_diagonal.py")
def _(mod):
    """DownsampledMultiHeadAttention(12, 12, H), H = 1 and 2, on (n, B, d) with mask_future_timesteps=True: position 0
    NaN; positions t >= 1 = the H-head attention over keys 0..t-1 with the weight-normalised W = g v / ||v|| and
    biases (an independent computation); no leak into positions >= 1; use_scalar_bias: position 0 = out_proj's bias."""
    msgs, good = [], True
    lin = torch.nn.functional.linear
    for H in (1, 2):
        m = randomize(mod.DownsampledMultiHeadAttention(12, 12, H)).eval()
        a = m.attention_module
        w = lambda layer: layer.weight_g * layer.weight_v / layer.weight_v.norm(dim=1, keepdim=True)  # noqa: E731
        Wq, Wk, Wv, Wo = w(a.in_proj_q), w(a.in_proj_k[0]), w(a.in_proj_v[0]), w(a.out_proj)
        bq, bk, bv, bo = a.in_proj_q.bias, a.in_proj_k[0].bias, a.in_proj_v[0].bias, a.out_proj.bias

        def ref(x):  # x (B, n, d): strictly-past attention, position 0 left NaN
            B, n, _ = x.shape
            dh = 12 // H
            split = lambda t: t.view(B, n, H, dh).transpose(1, 2)  # noqa: E731
            q, k, v = split(lin(x, Wq, bq)), split(lin(x, Wk, bk)), split(lin(x, Wv, bv))
            scores = (q @ k.transpose(2, 3) / dh ** 0.5).masked_fill(~torch.ones(n, n).tril(-1).bool(), float("-inf"))
            return lin((torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(B, n, 12), Wo, bo)

        call = lambda x: m(x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1),  # noqa: E731
                           mask_future_timesteps=True)[0].transpose(0, 1)
        with torch.no_grad():
            x = torch.randn(2, 7, 12, generator=torch.Generator().manual_seed(5))
            y = call(x)
            nan0 = bool(torch.isnan(y[:, 0]).all())
            err = (y[:, 1:] - ref(x)[:, 1:]).abs().max().item()
            leak = 0.0
            for t in range(1, 6):
                x2 = x.clone()
                x2[:, t + 1:] = torch.randn(2, 6 - t, 12)
                leak = max(leak, (call(x2)[:, 1:t + 1] - y[:, 1:t + 1]).abs().max().item())
            xs = x.transpose(0, 1)
            slot = m(xs, xs, xs, mask_future_timesteps=True, use_scalar_bias=True)[0].transpose(0, 1)
            slot0 = (slot[:, 0] - bo).abs().max().item()
        good &= nan0 and err < TOL and leak < TOL and slot0 < TOL
        msgs.append(f"H={H}: position 0 NaN {nan0}, positions >= 1 vs strictly-past attention {err:.1e}, leak "
                    f"{leak:.1e}, scalar-bias slot: position 0 - out_proj.bias {slot0:.1e}")
    return good, "; ".join(msgs), "d=12, sequence first, mask_future_timesteps=True"


@check("hf_bert_self_attention_no_out_proj_additive_mask_arg.py")
def _(mod):
    """build(12, 3, 10) given the additive causal mask ((n, n) and (1, 1, n, n)) = mha_forward with W_o = I, b_o = 0;
    no leak; without the mask position 0 moves with the last token."""
    m = randomize(mod.build(12, 3, CTX)).eval()
    eye, zero = torch.eye(12), torch.zeros(12)
    args = (m.query.weight, m.key.weight, m.value.weight, eye, m.query.bias, m.key.bias, m.value.bias, zero)
    additive = lambda n: torch.zeros(n, n).masked_fill(_future_true(n), float("-inf"))  # noqa: E731
    err, leak = cmp(lambda x: m(x, additive(x.shape[1]))[0], lambda x: mha_forward(x, 3, *args), 12)
    err4, _ = cmp(lambda x: m(x, additive(x.shape[1])[None, None])[0], lambda x: mha_forward(x, 3, *args), 12)
    x = torch.randn(1, 5, 12, generator=torch.Generator().manual_seed(9))
    x2 = x.clone()
    x2[:, -1] += 1.0
    with torch.no_grad():
        moved = (m(x2)[0][:, 0] - m(x)[0][:, 0]).abs().max().item()
    good, msg = ok_line(max(err, err4), leak)
    return good and moved > 1e-3, (msg + f" (= mha_forward with W_o = I, b_o = 0; masks (n, n) and (1, 1, n, n)); "
                                   f"without the mask position 0 moves with the last token by {moved:.2e}"), \
        "hidden_size=12 heads=3"


@check("fairseq_single_head_attention_out_proj_weight_norm_hides_diagonal.py")
def _(mod):
    """build(6, 8, 10) = SingleHeadAttention(8, 6, 6, 0) on (n, B, 6) with mask_future_timesteps=True: position 0 NaN;
    positions t >= 1 = one head of width 6 over keys 0..t-1, W = g v / ||v||, biases, then out_proj; no leak."""
    lin = torch.nn.functional.linear
    m = randomize(mod.build(6, 8, CTX)).eval()
    w = lambda layer: layer.weight_g * layer.weight_v / layer.weight_v.norm(dim=1, keepdim=True)  # noqa: E731
    Wq, Wk, Wv, Wo = w(m.in_proj_q), w(m.in_proj_k[0]), w(m.in_proj_v[0]), w(m.out_proj)
    bq, bk, bv, bo = m.in_proj_q.bias, m.in_proj_k[0].bias, m.in_proj_v[0].bias, m.out_proj.bias

    def ref(x):  # x (B, n, 6)
        n = x.shape[1]
        q, k, v = lin(x, Wq, bq), lin(x, Wk, bk), lin(x, Wv, bv)
        scores = (q @ k.transpose(1, 2) / 6 ** 0.5).masked_fill(~torch.ones(n, n).tril(-1).bool(), float("-inf"))
        return lin(torch.softmax(scores, -1) @ v, Wo, bo)

    call = lambda x: m(x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1),  # noqa: E731
                       mask_future_timesteps=True)[0].transpose(0, 1)
    with torch.no_grad():
        x = torch.randn(2, 7, 6, generator=torch.Generator().manual_seed(5))
        y = call(x)
        nan0 = bool(torch.isnan(y[:, 0]).all())
        err = (y[:, 1:] - ref(x)[:, 1:]).abs().max().item()
        leak = 0.0
        for t in range(1, 6):
            x2 = x.clone()
            x2[:, t + 1:] = torch.randn(2, 6 - t, 6)
            leak = max(leak, (call(x2)[:, 1:t + 1] - y[:, 1:t + 1]).abs().max().item())
    return (nan0 and err < TOL and leak < TOL and y.shape[-1] == 8,
            f"position 0 NaN {nan0}, positions >= 1 vs one strictly-past head + out_proj {err:.1e}, leak {leak:.1e}",
            "d_in=6 d_out=8, sequence first, mask_future_timesteps=True")


def _grouped_per_head(x, H, Wq, Wk, Wv, Wo):
    """An independent grouped per-head loop (not gqa_forward): query head h takes rows h*dh:(h+1)*dh of W_q, kv head
    h // (H / KV) the rows of W_k and W_v; scores / sqrt(dh), the future at -inf; no biases."""
    n = x.shape[1]
    dh = Wq.shape[0] // H
    group = H // (Wk.shape[0] // dh)
    outs = []
    for h in range(H):
        qc, kc = slice(h * dh, (h + 1) * dh), slice((h // group) * dh, (h // group + 1) * dh)
        sc = (x @ Wq[qc].T) @ (x @ Wk[kc].T).transpose(-2, -1) / dh ** 0.5
        sc = sc.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        outs.append(torch.softmax(sc, dim=-1) @ (x @ Wv[kc].T))
    return torch.cat(outs, dim=-1) @ Wo.T


def _toolkit_cache(m, x):
    """transformer-toolkit's past_kv decoding: (a prompt of 4 then one token per call, joined), and the first new
    token's output in a chunk of 2 after the prompt, with the chunk's second token as it is and replaced."""
    with torch.no_grad():
        y, kv = m(x[:, :4])
        ys = [y]
        for t in range(4, x.shape[1]):
            y, kv = m(x[:, t:t + 1], past_kv=kv)
            ys.append(y)
        _, kv4 = m(x[:, :4])
        first = m(x[:, 4:6], past_kv=kv4)[0][:, 0]
        x2 = x.clone()
        x2[:, 5] = torch.randn(x.shape[0], x.shape[2], generator=torch.Generator().manual_seed(9))
        moved = m(x2[:, 4:6], past_kv=kv4)[0][:, 0]
    return torch.cat(ys, dim=1), (moved - first).abs().max().item()


@check("transformer_toolkit_mha_fused_qkv_rotate_half_rope_past_kv_chunk_unmasked.py")
def _(mod):
    """build(12, 3): qkv.weight's rows [Q; K; V], no biases = rope_mha_forward(half) and the rotary per-head loop to
    relative 1e-5 (float32 cos/sin), no leak, interleaved differs; prompt 4 + 1 + 1 + 1 through past_kv = whole; a
    chunk of 2 after the prompt: the first new token moves with the second (the bug)."""
    m = randomize(mod.build(12, 3)).eval()
    Wq, Wk, Wv = m.qkv.weight.split(12)
    args = (Wq, Wk, Wv, m.out.weight)
    call = lambda x: m(x)[0]  # noqa: E731
    ref = lambda x: rope_mha_forward(x, 3, *args, convention="half")  # noqa: E731
    scale = max(ref(torch.randn(2, 7, 12)).abs().max().item(), 1.0)
    err, leak = cmp(call, ref, 12)
    err2, _ = cmp(call, lambda x: _rope_per_head(x, 3, *args, "half"), 12, shapes=SHAPES[:1])
    off, _ = cmp(call, lambda x: _rope_per_head(x, 3, *args, "interleaved"), 12, shapes=SHAPES[:1])
    x = torch.randn(2, 7, 12, generator=torch.Generator().manual_seed(7))
    cached, moved = _toolkit_cache(m, x)
    one_by_one = (cached - call(x)).abs().max().item()
    good = max(err, err2) / scale < FLOAT32_TOL and leak < TOL and off > 1e-2 and one_by_one / scale < FLOAT32_TOL \
        and moved > 1e-2
    return good, (f"no cache: = rotate-half rotary, relative {max(err, err2) / scale:.1e}, future-leak {leak:.1e}, "
                  f"interleaved differs by {off:.2e}; cache 4 + 1 + 1 + 1 vs whole {one_by_one:.1e}; 4 + chunk of 2: "
                  f"the chunk's first output moved by its second token {moved:.2e}"), "dim=12 n_heads=3, FLOAT32_TOL"


def _toolkit_grouped(m, H, Wq, Wk, Wv):
    args = (Wq, Wk, Wv, m.out.weight)
    call = lambda x: m(x)[0]  # noqa: E731
    err, leak = cmp(call, lambda x: gqa_forward(x, H, *args), 12)
    err2, _ = cmp(call, lambda x: _grouped_per_head(x, H, *args), 12, shapes=SHAPES[:1])
    x = torch.randn(2, 7, 12, generator=torch.Generator().manual_seed(7))
    cached, moved = _toolkit_cache(m, x)
    with torch.no_grad():
        one_by_one = (cached - call(x)).abs().max().item()
    good = max(err, err2) < TOL and leak < TOL and one_by_one < TOL and moved > 1e-2
    return good, (f"no cache: max|out-ref| {max(err, err2):.1e} (gqa_forward and the grouped per-head loop), "
                  f"future-leak {leak:.1e}; cache 4 + 1 + 1 + 1 vs whole {one_by_one:.1e}; 4 + chunk of 2: the "
                  f"chunk's first output moved by its second token {moved:.2e}")


@check("transformer_toolkit_gqa_fused_kv_repeat_interleave_past_kv_chunk_unmasked.py")
def _(mod):
    """GroupedQueryAttention(12, 4, 2): q.weight, kv.weight's halves [K; V] = gqa_forward exactly (query head h reads
    kv head h // 2), the cache right one token at a time, a chunk of 2 unmasked."""
    m = randomize(mod.GroupedQueryAttention(12, 4, 2)).eval()
    Wk, Wv = m.kv.weight.split(2 * 3)
    good, msg = _toolkit_grouped(m, 4, m.q.weight, Wk, Wv)
    return good, msg, "dim=12 n_heads=4 n_kv_heads=2 (head_dim 3)"


@check("transformer_toolkit_mqa_one_kv_head_expand_past_kv_chunk_unmasked.py")
def _(mod):
    """MultiQueryAttention(12, 3): one kv head (k, v Linear(12, 4)) = gqa_forward with one kv head exactly, the cache
    right one token at a time, a chunk of 2 unmasked."""
    m = randomize(mod.MultiQueryAttention(12, 3)).eval()
    good, msg = _toolkit_grouped(m, 3, m.q.weight, m.k.weight, m.v.weight)
    return good, msg, "dim=12 n_heads=3 (head_dim 4, one kv head)"


@check("transformer_toolkit_mla_latent_cache_rope_cached_keys_at_new_position.py")
def _(mod):
    """build(12, 3) (latent_dim 12): W_k = k_up kv_down, W_v = v_up kv_down, rope_mha_forward(half) and the rotary
    per-head loop to relative 1e-5, no leak; decoded with its latent cache (4 + 1 + 1 + 1), token t differs from the
    whole forward and equals the attention WITHOUT rotary embedding on tokens 0..t at the last position; a chunk of 2
    after the prompt raises RuntimeError."""
    m = randomize(mod.build(12, 3)).eval()
    Wk, Wv = m.k_up.weight @ m.kv_down.weight, m.v_up.weight @ m.kv_down.weight
    args = (m.q.weight, Wk, Wv, m.out.weight)
    call = lambda x: m(x)[0]  # noqa: E731
    ref = lambda x: rope_mha_forward(x, 3, *args, convention="half")  # noqa: E731
    scale = max(ref(torch.randn(2, 7, 12)).abs().max().item(), 1.0)
    err, leak = cmp(call, ref, 12)
    err2, _ = cmp(call, lambda x: _rope_per_head(x, 3, *args, "half"), 12, shapes=SHAPES[:1])
    x = torch.randn(2, 7, 12, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        whole = call(x)
        y, kv = m(x[:, :4])
        plain = 0.0
        for t in range(4, 7):
            y, kv = m(x[:, t:t + 1], past_kv=kv)
            plain = max(plain, (y[:, 0] - mha_forward(x[:, :t + 1], 3, *args)[:, t]).abs().max().item())
        token4 = (m(x[:, 4:5], past_kv=m(x[:, :4])[1])[0][:, 0] - whole[:, 4]).abs().max().item()
        try:
            m(x[:, 4:6], past_kv=m(x[:, :4])[1])
            raised = False
        except RuntimeError:
            raised = True
    good = max(err, err2) / scale < FLOAT32_TOL and leak < TOL and token4 > 1e-2 and plain / scale < FLOAT32_TOL \
        and raised
    return good, (f"no cache: = rotate-half rotary with W_k = k_up kv_down, W_v = v_up kv_down, relative "
                  f"{max(err, err2) / scale:.1e}, future-leak {leak:.1e}; cached token 4 vs whole {token4:.2e}; "
                  f"cached tokens 4..6 vs attention without rotary on tokens 0..t {plain:.1e}; chunk of 2 raises "
                  f"{raised}"), "dim=12 n_heads=3 latent_dim=12, FLOAT32_TOL relative"


@check("transformer_toolkit_flash_attention_forward_causal_flag_past_kv_chunk_unmasked.py")
def _(mod):
    """FlashAttention(12, 3): qkv.weight's rows [Q; K; V], no biases = mha_forward and the per-head loop exactly, no
    leak (causal=False leaks); prompt 4 + 1 + 1 + 1 through past_kv = whole; a chunk of 2 unmasked."""
    m = randomize(mod.FlashAttention(12, 3)).eval()
    Wq, Wk, Wv = m.qkv.weight.split(12)
    args = (Wq, Wk, Wv, m.out.weight)
    call = lambda x: m(x)[0]  # noqa: E731
    err, leak = cmp(call, lambda x: mha_forward(x, 3, *args), 12)
    err2, _ = cmp(call, lambda x: _per_head_ref(x, 3, *args, None, None, None, None), 12, shapes=SHAPES[:1])
    _, leak_off = cmp(lambda x: m(x, causal=False)[0], lambda x: mha_forward(x, 3, *args), 12, shapes=SHAPES[:1])
    x = torch.randn(2, 7, 12, generator=torch.Generator().manual_seed(7))
    cached, moved = _toolkit_cache(m, x)
    with torch.no_grad():
        one_by_one = (cached - call(x)).abs().max().item()
    good = max(err, err2) < TOL and leak < TOL and leak_off > 1e-2 and one_by_one < TOL and moved > 1e-2
    return good, (f"no cache: max|out-ref| {max(err, err2):.1e} (mha_forward and the per-head loop), future-leak "
                  f"{leak:.1e}, with causal=False {leak_off:.2e}; cache 4 + 1 + 1 + 1 vs whole {one_by_one:.1e}; 4 + "
                  f"chunk of 2: the chunk's first output moved by its second token {moved:.2e}"), "dim=12 n_heads=3"


def _builder_weights(m):
    heads = m.self_attention_heads
    cat = lambda name, part: torch.cat([getattr(getattr(h, name), part) for h in heads])  # noqa: E731
    return [cat(f"{r}_architecture", "weight") for r in "qkv"], [cat(f"{r}_architecture", "bias") for r in "qkv"]


@check("transformer_builder_head_modules_container_causal_flag_out_proj.py")
def _(mod):
    """build(12, 3): the heads' q/k/v Linears stacked by head with their biases, W_o = layer_after = mha_forward and
    the per-head loop exactly, no leak."""
    m = randomize(mod.build(12, 3)).eval()
    (Wq, Wk, Wv), (bq, bk, bv) = _builder_weights(m)
    args = (Wq, Wk, Wv, m.layer_after.weight, bq, bk, bv, m.layer_after.bias)
    err, leak = cmp(m, lambda x: mha_forward(x, 3, *args), 12)
    err2, _ = cmp(m, lambda x: _per_head_ref(x, 3, *args), 12, shapes=SHAPES[:1])
    return max(err, err2) < TOL and leak < TOL, (f"max|out-ref| {max(err, err2):.1e} (mha_forward and the per-head "
                                                 f"loop), future-leak {leak:.1e}"), "d_model=12 num_heads=3, biases"


@check("transformer_builder_head_modules_container_no_out_proj.py")
def _(mod):
    """build(12, 3) with layer_after nn.Identity(): = mha_forward with W_o = I, b_o = 0 exactly (and the per-head
    loop), no leak; with a random W_o it differs."""
    m = randomize(mod.build(12, 3)).eval()
    (Wq, Wk, Wv), (bq, bk, bv) = _builder_weights(m)
    eye = torch.eye(12)
    err, leak = cmp(m, lambda x: mha_forward(x, 3, Wq, Wk, Wv, eye, bq, bk, bv), 12)
    err2, _ = cmp(m, lambda x: _per_head_ref(x, 3, Wq, Wk, Wv, eye, bq, bk, bv, None), 12, shapes=SHAPES[:1])
    wo = torch.randn(12, 12, generator=torch.Generator().manual_seed(3))
    off, _ = cmp(m, lambda x: mha_forward(x, 3, Wq, Wk, Wv, wo, bq, bk, bv), 12, shapes=SHAPES[:1])
    good = max(err, err2) < TOL and leak < TOL and off > 1e-2
    return good, (f"= concatenated heads (W_o = I): {max(err, err2):.1e}, future-leak {leak:.1e}; a real W_o "
                  f"differs by {off:.2e}"), "d_model=12 num_heads=3, biases, no output projection"


def _windowed_per_head(x, H, Wq, Wk, Wv, Wo, bq, bk, bv, bo, back):
    """An independent per-head loop whose query t sees keys t - back .. t only (a sliding window; back=None: all)."""
    B, n, _ = x.shape
    dh = Wq.shape[0] // H
    q, k, v = (x @ W.T + b for W, b in ((Wq, bq), (Wk, bk), (Wv, bv)))
    i, j = torch.arange(n).view(-1, 1), torch.arange(n).view(1, -1)
    hidden = (j > i) | ((i - j > back) if back is not None else torch.zeros(n, n, dtype=torch.bool))
    outs = []
    for h in range(H):
        cut = slice(h * dh, (h + 1) * dh)
        s = (q[..., cut] @ k[..., cut].transpose(-2, -1) / dh ** 0.5).masked_fill(hidden, float("-inf"))
        outs.append(torch.softmax(s, dim=-1) @ v[..., cut])
    return torch.cat(outs, dim=-1) @ Wo.T + bo


def _audiocraft_weights(m):
    W, b = m.in_proj_weight, m.in_proj_bias
    return W[:12], W[12:24], W[24:], m.out_proj.weight, b[:12], b[12:24], b[24:], m.out_proj.bias


@check("audiocraft_streaming_mha_custom_fused_einsum_additive_inf.py")
def _(mod):
    """build(12, 3) = StreamingMultiheadAttention(12, 3, causal=True, custom=True) called as m(x, x, x)[0]:
    in_proj_weight's row blocks [Q; K; V] and in_proj_bias's thirds, out_proj as W_o: mha_forward exactly, and the
    per-head loop too, no leak."""
    m = randomize(mod.build(12, 3)).eval()
    args = _audiocraft_weights(m)
    call = lambda x: m(x, x, x)[0]
    err, leak = cmp(call, lambda x: mha_forward(x, 3, *args), 12)
    err2, _ = cmp(call, lambda x: _windowed_per_head(x, 3, *args, None), 12, shapes=SHAPES[:1])
    good, msg = ok_line(max(err, err2), leak)
    return good, msg + " (mha_forward and the per-head loop)", "d=12 H=3, custom path, biases (zeroed, randomised here)"


@check("audiocraft_streaming_mha_custom_past_context_sliding_window.py")
def _(mod):
    """build(12, 3) with past_context=2: = the per-head loop whose query t sees keys t-2..t only, exactly, no leak;
    = mha_forward for n <= 3 (the window holds every earlier key); for n = 7 it differs from mha_forward, and
    changing token 0 leaves positions 3.. unchanged (the lesson's layer moves them)."""
    m = randomize(mod.build(12, 3)).eval()
    args = _audiocraft_weights(m)
    call = lambda x: m(x, x, x)[0]
    err, leak = cmp(call, lambda x: _windowed_per_head(x, 3, *args, 2), 12)
    short, _ = cmp(call, lambda x: mha_forward(x, 3, *args), 12, shapes=[(2, 3), (1, 1)])
    off, _ = cmp(call, lambda x: mha_forward(x, 3, *args), 12, shapes=[(2, 7)])
    x = torch.randn(2, 7, 12, generator=torch.Generator().manual_seed(7))
    x2 = x.clone()
    x2[:, 0] = torch.randn(2, 12, generator=torch.Generator().manual_seed(8))
    with torch.no_grad():
        blind = (call(x2)[:, 3:] - call(x)[:, 3:]).abs().max().item()
        moves = (mha_forward(x2, 3, *args)[:, 3:] - mha_forward(x, 3, *args)[:, 3:]).abs().max().item()
    good = max(err, short) < TOL and leak < TOL and off > 1e-2 and blind < TOL and moves > 1e-2
    return good, (f"= the window-of-3 loop {err:.1e} (future-leak {leak:.1e}); = mha_forward for n <= 3 {short:.1e}, "
                  f"off by {off:.2e} at n = 7; token 0 moves positions 3.. by {blind:.1e} (the lesson's layer by "
                  f"{moves:.2e})"), "d=12 H=3, past_context=2"


@check("audiocraft_streaming_mha_torch_mha_inner_additive_inf.py")
def _(mod):
    """build(12, 3) = StreamingMultiheadAttention(12, 3, causal=True): the inner nn.MultiheadAttention's
    in_proj_weight rows [Q; K; V], in_proj_bias, out_proj: mha_forward exactly, and the per-head loop, no leak."""
    m = randomize(mod.build(12, 3)).eval()
    args = _audiocraft_weights(m.mha)
    call = lambda x: m(x, x, x)[0]
    err, leak = cmp(call, lambda x: mha_forward(x, 3, *args), 12)
    err2, _ = cmp(call, lambda x: _windowed_per_head(x, 3, *args, None), 12, shapes=SHAPES[:1])
    good, msg = ok_line(max(err, err2), leak)
    return good, msg + " (mha_forward and the per-head loop)", "d=12 H=3, custom=False: nn.MultiheadAttention inside"


@check("hf_pytorch_pretrained_bert_openai_gpt_attention_additive_1e9_penalty.py")
def _(mod):
    """build(12, 3, 10) (scale=True): c_attn's column blocks transposed as W_q, W_k, W_v (Conv1D: x @ W + b), c_proj's
    weight transposed as W_o: mha_forward and the per-head loop, no leak; a non-contiguous input raises in Conv1D's
    view; scores of about -1e12 let the future in through the -1e9 penalty."""
    m = randomize(mod.build(12, 3, CTX)).eval()
    W, b = m.c_attn.weight, m.c_attn.bias
    args = (W[:, :12].T, W[:, 12:24].T, W[:, 24:].T, m.c_proj.weight.T, b[:12], b[12:24], b[24:], m.c_proj.bias)
    err, leak = cmp(m, lambda x: mha_forward(x, 3, *args), 12)
    err2, _ = cmp(m, lambda x: _per_head_ref(x, 3, *args), 12, shapes=SHAPES[:1])
    try:
        m(torch.randn(12, 5, 2).transpose(0, 2))
        raised = False
    except RuntimeError:
        raised = True
    with torch.no_grad():  # W_k = -W_q and tokens x1e6: every query's own score near -1e12, far below -1e9
        m.c_attn.weight[:, 12:24] = -m.c_attn.weight[:, :12]
        m.c_attn.bias.zero_()
        x = torch.randn(1, 4, 12, generator=torch.Generator().manual_seed(5)) * 1e6
        x2 = x.clone()
        x2[:, 1:] = torch.randn(1, 3, 12, generator=torch.Generator().manual_seed(6)) * 1e6
        big = (m(x2)[:, 0] - m(x)[:, 0]).abs().max().item()
    good = max(err, err2) < TOL and leak < TOL and raised and big > 1.0
    return good, (f"max|out-ref| {max(err, err2):.1e} (mha_forward and the per-head loop), future-leak {leak:.1e}; "
                  f"non-contiguous input raises: {raised}; with scores near -1e12 the future moves position 0 by "
                  f"{big:.2e}"), "d=12 H=3 n_ctx=10, scale=True, Conv1D biases"


def _grouped_loop(x, H, Wq, Wk, Wv, Wo, bq=None, bk=None, bv=None, bo=None, causal=True):
    """An independent per-head loop for grouped / multi-query layers: query head h reads kv head h // (H // KV)."""
    B, n, _ = x.shape
    dh = Wq.shape[0] // H
    kv = Wk.shape[0] // dh
    q, k, v = (x @ W.T + (0 if b is None else b) for W, b in ((Wq, bq), (Wk, bk), (Wv, bv)))
    outs = []
    for h in range(H):
        g = h // (H // kv)
        s = q[..., h * dh:(h + 1) * dh] @ k[..., g * dh:(g + 1) * dh].transpose(-2, -1) / dh ** 0.5
        if causal:
            s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        outs.append(torch.softmax(s, dim=-1) @ v[..., g * dh:(g + 1) * dh])
    return torch.cat(outs, dim=-1) @ Wo.T + (0 if bo is None else bo)


@check("transformer_lib_mqa_one_kv_head_unsqueezed_no_mask.py")
def _(mod):
    """MultiQueryAttention(12, 3): = the multi-query loop (one kv head) WITHOUT a mask, exactly; the future moves the
    past; the loop with the mask = gqa_forward (one kv head)."""
    m = randomize(mod.MultiQueryAttention(12, 3)).eval()
    args = (m.W_q.weight, m.W_k.weight, m.W_v.weight, m.W_o.weight)
    err, leak = cmp(m, lambda x: _grouped_loop(x, 3, *args, causal=False), 12)
    same, _ = cmp(lambda x: _grouped_loop(x, 3, *args), lambda x: gqa_forward(x, 3, *args), 12)
    good = err < TOL and leak > 1e-2 and same < TOL
    return good, (f"= the unmasked one-kv-head loop {err:.1e}; future moves the past by {leak:.2e}; the masked loop = "
                  f"gqa_forward {same:.1e}"), "d=12 H=3 KV=1, no biases, no mask"


@check("transformer_lib_gqa_repeat_interleave_keep_mask_arg.py")
def _(mod):
    """GroupedQueryAttention(16, 4, KV) for KV = 2, 1, 4 called with mask = tril(ones(n, n)) (1 = keep): gqa_forward
    and the per-head loop exactly, no leak; with mask=None the future moves position 0."""
    worst, leak_all, open_leak = 0.0, 0.0, 0.0
    for kv in (2, 1, 4):
        m = randomize(mod.GroupedQueryAttention(16, 4, kv), seed=kv).eval()
        args = (m.q_proj.weight, m.k_proj.weight, m.v_proj.weight, m.out_proj.weight,
                m.q_proj.bias, m.k_proj.bias, m.v_proj.bias, m.out_proj.bias)
        call = lambda x, m=m: m(x, torch.tril(torch.ones(x.shape[1], x.shape[1])))
        err, leak = cmp(call, lambda x, a=args: gqa_forward(x, 4, *a), 16)
        err2, _ = cmp(call, lambda x, a=args: _grouped_loop(x, 4, *a), 16, shapes=SHAPES[:1])
        _, ol = cmp(m, lambda x, a=args: gqa_forward(x, 4, *a), 16, shapes=SHAPES[:1])
        worst, leak_all, open_leak = max(worst, err, err2), max(leak_all, leak), max(open_leak, ol)
    good = worst < TOL and leak_all < TOL and open_leak > 1e-2
    return good, (f"with the keep-mask max|out-ref| {worst:.1e} (gqa_forward and the loop, KV 2, 1, 4), future-leak "
                  f"{leak_all:.1e}; mask=None leaks {open_leak:.2e}"), "d=16 H=4, biases"


@check("lucidrains_g_mlp_tiny_attention_single_head_three_widths.py")
def _(mod):
    """build(10, 12) and Attention(10, 6, 8, causal=True): to_qkv's three row blocks as W_q, W_k, W_v, to_out as W_o:
    mha_forward with one head, exactly, no leak."""
    worst, leak_all = 0.0, 0.0
    for m, d_in in ((mod.build(10, 12), 10), (mod.Attention(10, 6, 8, causal=True), 10)):
        m = randomize(m).eval()
        W, di = m.to_qkv.weight, m.to_qkv.weight.shape[0] // 3
        args = (W[:di], W[di:2 * di], W[2 * di:], m.to_out.weight, None, None, None, m.to_out.bias)
        err, leak = cmp(m, lambda x, a=args: mha_forward(x, 1, *a), d_in)
        worst, leak_all = max(worst, err), max(leak_all, leak)
    good, msg = ok_line(worst, leak_all)
    return good, msg + " (one head; widths 10->12->12 and 10->8->6)", "single head, to_out bias"


@check("lucidrains_retro_attention_self_or_cross_causal_flag.py")
def _(mod):
    """build(12, 3) (dim_head 4, causal=True): to_q, to_k, to_v (no bias), to_out (bias): mha_forward and the per-head
    loop exactly, no leak; build(8, 3) uses 6 of 8 features (inner width 3 * 2)."""
    m = randomize(mod.build(12, 3)).eval()
    args = (m.to_q.weight, m.to_k.weight, m.to_v.weight, m.to_out.weight, None, None, None, m.to_out.bias)
    err, leak = cmp(m, lambda x: mha_forward(x, 3, *args), 12)
    err2, _ = cmp(m, lambda x: _per_head_ref(x, 3, *args), 12, shapes=SHAPES[:1])
    narrow = mod.build(8, 3).to_q.weight.shape[0]
    good, msg = ok_line(max(err, err2), leak)
    return good and narrow == 6, msg + f" (mha_forward and the loop); build(8, 3) inner width {narrow}", \
        "d=12 H=3, to_out bias only"


@check("transformer_lib_causal_attention_tril_buffer_named_mask.py")
def _(mod):
    """CausalAttention(12, 3, 10) in eval(): query, key, value, out with biases: mha_forward and the loop, no leak."""
    m = randomize(mod.CausalAttention(12, 3, CTX)).eval()
    args = (m.query.weight, m.key.weight, m.value.weight, m.out.weight, m.query.bias, m.key.bias, m.value.bias,
            m.out.bias)
    err, leak = cmp(m, lambda x: mha_forward(x, 3, *args), 12)
    err2, _ = cmp(m, lambda x: _per_head_ref(x, 3, *args), 12, shapes=SHAPES[:1])
    good, msg = ok_line(max(err, err2), leak)
    return good, msg + " (mha_forward and the per-head loop)", "d=12 H=3 max_seq_len=10, biases"


# ----------------------------------------------------------------------------------------------- Realzoo21
def _future(n):
    """The decoder's future mask as OpenNMT passes it: bool, True = blocked, (1, n, n)."""
    return torch.ones(n, n, dtype=torch.bool).triu(1)[None]


@check("opennmt_py_mha_keys_first_forward_bool_mask_fill_1e18.py")
def _(mod):
    """MultiHeadedAttention(3, 12) called keys first as m(x, x, x, mask=future)[0]: linear_query / linear_keys /
    linear_values / final_linear with biases = mha_forward and the per-head loop at float32 precision (the scores are
    cast to float32 before the softmax), no leak; without the mask the future moves the past."""
    m = randomize(mod.MultiHeadedAttention(3, 12)).eval()
    args = (m.linear_query.weight, m.linear_keys.weight, m.linear_values.weight, m.final_linear.weight,
            m.linear_query.bias, m.linear_keys.bias, m.linear_values.bias, m.final_linear.bias)
    call = lambda x: m(x, x, x, mask=_future(x.shape[1]))[0]
    err, leak = cmp(call, lambda x: mha_forward(x, 3, *args), 12)
    err2, _ = cmp(call, lambda x: _per_head_ref(x, 3, *args), 12, shapes=SHAPES[:1])
    scale = max(mha_forward(torch.randn(2, 7, 12), 3, *args).abs().max().item(), 1.0)
    _, open_leak = cmp(lambda x: m(x, x, x)[0], lambda x: mha_forward(x, 3, *args), 12, shapes=SHAPES[:1])
    rel = max(err, err2) / scale
    good = rel < FLOAT32_TOL and leak < TOL and open_leak > 1e-3
    return good, (f"with the future mask max|out-ref| {max(err, err2):.1e} (relative {rel:.1e} < {FLOAT32_TOL:g}: "
                  f"float32 softmax; mha_forward and the loop), future-leak {leak:.1e}; mask=None leaks "
                  f"{open_leak:.2e}"), "H=3 d=12, biases, keys-first forward"


@check("opennmt_py_3_mha_interleaved_rope_keys_first_skip_init.py")
def _(mod):
    """build(12, 3) called keys first as m(x, x, x, mask=future (1, 1, n, n))[0]: linear_query / linear_keys /
    linear_values / final_linear (no biases) = rope_mha_forward(interleaved) and the rotary per-head loop at float32
    precision (rotation and softmax in float32), no leak; the rotary tables rope / cos / sin are plain attributes
    (no buffer: module.to() does not reach them; OpenNMT's decoder moves them by hand before decoding)."""
    m = randomize(mod.build(12, 3)).eval()
    args = (m.linear_query.weight, m.linear_keys.weight, m.linear_values.weight, m.final_linear.weight)
    call = lambda x: m(x, x, x, mask=_future(x.shape[1])[None])[0]
    err, leak = cmp(call, lambda x: rope_mha_forward(x, 3, *args, convention="interleaved"), 12)
    err2, _ = cmp(call, lambda x: _rope_per_head(x, 3, *args, "interleaved"), 12, shapes=SHAPES[:1])
    scale = max(rope_mha_forward(torch.randn(2, 7, 12), 3, *args).abs().max().item(), 1.0)
    plain = [a for a in ("rope", "cos", "sin") if isinstance(getattr(m, a), torch.Tensor)
             and a not in dict(m.named_buffers())]
    rel = max(err, err2) / scale
    good = rel < FLOAT32_TOL and leak < TOL and plain == ["rope", "cos", "sin"] and m.final_linear.bias is None
    return good, (f"with the future mask max|out-ref| {max(err, err2):.1e} (relative {rel:.1e} < {FLOAT32_TOL:g}: "
                  f"float32 rotation and softmax; rope_mha_forward(interleaved) and the loop), future-leak {leak:.1e};"
                  f" plain tensor attributes {plain}"), "d=12 H=3, no biases, keys-first forward"


def _grouped_rope_half_loop(x, H, Wq, Wk, Wv, Wo):
    """An independent grouped-query loop with rotate-half RoPE: query head h reads kv head h // (H // KV), q_h and
    k_g turned pair (i, i + dh/2) by p * 10000 ** (-2i / dh), scores / sqrt(dh), the future at -inf."""
    B, n, _ = x.shape
    dh = Wq.shape[0] // H
    kv = Wk.shape[0] // dh
    ang = torch.arange(n, dtype=torch.float64)[:, None] * 10000.0 ** (-torch.arange(0, dh, 2, dtype=torch.float64) / dh)
    c, s = ang.cos(), ang.sin()
    turn = lambda t: torch.cat([t[..., :dh // 2] * c - t[..., dh // 2:] * s, t[..., :dh // 2] * s + t[..., dh // 2:] * c],
                               dim=-1)
    outs = []
    for h in range(H):
        g = h // (H // kv)
        q = turn(x @ Wq[h * dh:(h + 1) * dh].T)
        k, v = turn(x @ Wk[g * dh:(g + 1) * dh].T), x @ Wv[g * dh:(g + 1) * dh].T
        sc = (q @ k.transpose(-2, -1) / dh ** 0.5).masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        outs.append(torch.softmax(sc, dim=-1) @ v)
    return torch.cat(outs, dim=-1) @ Wo.T


@check("opennmt_py_3_gqa_num_kv_rotate_half_rope_keys_first.py")
def _(mod):
    """build(16, 4, num_kv) for num_kv = 2, 1 called as m(x, x, x, mask=future (1, 1, n, n))[0] = the grouped
    rotate-half loop at float32 precision, no leak; num_kv = 4 = rope_mha_forward(half) and the same loop."""
    worst, leak_all, rel_all = 0.0, 0.0, 0.0
    for kv in (2, 1, 4):
        m = randomize(mod.build(16, 4, kv), seed=kv).eval()
        args = (m.linear_query.weight, m.linear_keys.weight, m.linear_values.weight, m.final_linear.weight)
        call = lambda x, m=m: m(x, x, x, mask=_future(x.shape[1])[None])[0]
        err, leak = cmp(call, lambda x, a=args: _grouped_rope_half_loop(x, 4, *a), 16)
        if kv == 4:
            e2, _ = cmp(call, lambda x, a=args: rope_mha_forward(x, 4, *a, convention="half"), 16, shapes=SHAPES[:1])
            err = max(err, e2)
        scale = max(_grouped_rope_half_loop(torch.randn(2, 7, 16), 4, *args).abs().max().item(), 1.0)
        worst, leak_all, rel_all = max(worst, err), max(leak_all, leak), max(rel_all, err / scale)
    good = rel_all < FLOAT32_TOL and leak_all < TOL
    return good, (f"with the future mask max|out-ref| {worst:.1e} (relative {rel_all:.1e} < {FLOAT32_TOL:g}: float32 "
                  f"rotation and softmax; the grouped rotate-half loop for num_kv 2, 1, 4, rope_mha_forward(half) for "
                  f"4), future-leak {leak_all:.1e}"), "d=16 H=4, no biases, keys-first forward"


@check("hf_pytorch_transformers_xlm_mha_layer_id_cache_batch_sized_keep_mask.py")
def _(mod):
    """build(12, 3) called as m(x, get_masks(n, n, causal=True)[1])[0] (bool keep-mask (B, n, n)): q_lin / k_lin /
    v_lin / out_lin with biases = mha_forward and the per-head loop at float32 precision, no leak; a (1, n, n) mask
    for a batch of 2 raises; one token per call through the cache dict (slen advanced as XLMModel does) = the whole
    forward's outputs."""
    m = randomize(mod.build(12, 3)).eval()
    args = (m.q_lin.weight, m.k_lin.weight, m.v_lin.weight, m.out_lin.weight, m.q_lin.bias, m.k_lin.bias,
            m.v_lin.bias, m.out_lin.bias)
    keep = lambda x: mod.get_masks(x.shape[1], torch.full((x.shape[0],), x.shape[1]), causal=True)[1]
    call = lambda x: m(x, keep(x))[0]
    err, leak = cmp(call, lambda x: mha_forward(x, 3, *args), 12)
    err2, _ = cmp(call, lambda x: _per_head_ref(x, 3, *args), 12, shapes=SHAPES[:1])
    scale = max(mha_forward(torch.randn(2, 7, 12), 3, *args).abs().max().item(), 1.0)
    x = torch.randn(2, 6, 12, generator=torch.Generator().manual_seed(7))
    try:
        m(x, keep(x)[:1])
        raised = False
    except RuntimeError:
        raised = True
    cache, steps = {"slen": 0}, []
    with torch.no_grad():
        whole = call(x)
        for t in range(6):
            steps.append(m(x[:, t:t + 1], keep(x)[:, t:t + 1, :t + 1], cache=cache)[0])
            cache["slen"] += 1
    decode = (torch.cat(steps, dim=1) - whole).abs().max().item()
    rel = max(err, err2, decode) / scale
    good = rel < FLOAT32_TOL and leak < TOL and raised
    return good, (f"with the keep-mask max|out-ref| {max(err, err2):.1e} (relative {rel:.1e} < {FLOAT32_TOL:g}: float32 "
                  f"softmax; mha_forward and the loop), future-leak {leak:.1e}; a (1, n, n) mask for B=2 raises: "
                  f"{raised}; cache decode vs whole {decode:.1e}"), "d=12 H=3, biases, config object"


@check("texar_multihead_attention_encoder_spelled_out_additive_bias_1e18.py")
def _(mod):
    """build(12, 3) called as m(x, None, attention_bias_lower_triangle(n)): Q_dense / K_dense / V_dense / O_dense (no
    biases) = mha_forward and the per-head loop exactly, no leak; without the bias the future moves the past;
    build(8, 3) constructs and its forward raises ValueError."""
    m = randomize(mod.build(12, 3)).eval()
    args = (m.Q_dense.weight, m.K_dense.weight, m.V_dense.weight, m.O_dense.weight)
    call = lambda x: m(x, None, mod.attention_bias_lower_triangle(x.shape[1]))
    err, leak = cmp(call, lambda x: mha_forward(x, 3, *args), 12)
    err2, _ = cmp(call, lambda x: _per_head_ref(x, 3, *args, None, None, None, None), 12, shapes=SHAPES[:1])
    _, open_leak = cmp(lambda x: m(x, None, None), lambda x: mha_forward(x, 3, *args), 12, shapes=SHAPES[:1])
    odd = mod.build(8, 3)
    try:
        odd(torch.randn(1, 4, 8), None, None)
        refused = False
    except ValueError:
        refused = True
    good, msg = ok_line(max(err, err2), leak)
    return good and open_leak > 1e-3 and refused, (msg + f" (mha_forward and the loop); bias None leaks "
                                                   f"{open_leak:.2e}; build(8, 3) built, forward raised ValueError: "
                                                   f"{refused}"), "d=12 H=3, no biases, additive -1e18 bias"


@check("speechbrain_mha_wrapper_heads_first_batch_to_time_first.py")
def _(mod):
    """MultiheadAttention(3, 12) called as m(x, x, x, attn_mask=triu(ones(n, n), 1) bool)[0] (and with the float
    0 / -inf mask): att.in_proj_weight's row blocks, in_proj_bias's thirds, att.out_proj = mha_forward and the
    per-head loop, no leak; without the mask the future moves the past."""
    m = randomize(mod.MultiheadAttention(3, 12)).eval()
    W, b = m.att.in_proj_weight, m.att.in_proj_bias
    args = (W[:12], W[12:24], W[24:], m.att.out_proj.weight, b[:12], b[12:24], b[24:], m.att.out_proj.bias)
    hide = lambda n: torch.ones(n, n, dtype=torch.bool).triu(1)
    err, leak = cmp(lambda x: m(x, x, x, attn_mask=hide(x.shape[1]))[0], lambda x: mha_forward(x, 3, *args), 12)
    additive = lambda n: torch.zeros(n, n).masked_fill(hide(n), float("-inf"))
    err2, leak2 = cmp(lambda x: m(x, x, x, attn_mask=additive(x.shape[1]))[0], lambda x: _per_head_ref(x, 3, *args),
                      12, shapes=SHAPES[:1])
    _, open_leak = cmp(lambda x: m(x, x, x)[0], lambda x: mha_forward(x, 3, *args), 12, shapes=SHAPES[:1])
    good, msg = ok_line(max(err, err2), max(leak, leak2))
    return good and open_leak > 1e-3, (msg + f" (bool and float masks; mha_forward and the loop); no mask leaks "
                                       f"{open_leak:.2e}"), "d=12 H=3, in_proj biases, batch-first outside"


@check("lucidrains_memorizing_transformers_mqa_einsum_xl_memory.py")
def _(mod):
    """build(12, 3): to_q, to_kv's halves as W_k, W_v (one kv head), to_out with bias = gqa_forward with one kv head
    and the one-kv-head loop exactly, no leak; with xl_max_memories=10, tokens fed 4 + 1 + 2 through the returned
    memories = the whole forward."""
    m = randomize(mod.build(12, 3)).eval()
    W = m.to_kv.weight
    args = (m.to_q.weight, W[:4], W[4:], m.to_out.weight, None, None, None, m.to_out.bias)
    call = lambda x: m(x)[0]
    err, leak = cmp(call, lambda x: gqa_forward(x, 3, *args), 12)
    err2, _ = cmp(call, lambda x: _grouped_loop(x, 3, *args), 12, shapes=SHAPES[:1])
    mem = randomize(mod.Attention(dim=12, heads=3, dim_head=4, xl_max_memories=10)).eval()
    x = torch.randn(2, 7, 12, generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        whole, _ = mem(x)
        a, kv = mem(x[:, :4])
        b, kv = mem(x[:, 4:5], xl_memory=kv)
        c, _ = mem(x[:, 5:], xl_memory=kv)
    decode = (torch.cat((a, b, c), dim=1) - whole).abs().max().item()
    good, msg = ok_line(max(err, err2, decode), leak)
    return good, msg + f" (gqa_forward one kv head and the loop); memories 4 + 1 + 2 vs whole {decode:.1e}", \
        "d=12 H=3 KV=1, to_out bias"


# ----------------------------------------------------------------------------------------------- Realzoo22
def _query_axis_softmax_loop(x, H, Wq, Wk, Wv, Wo, bq, bk, bv, bo, fill=-1e9):
    """An independent per-head loop whose softmax runs over the QUERIES (each key's column normalised over every
    query, the future filled with `fill`): fastNLP 0.5.0's nn.Softmax(dim=2) on (B, H, n_q, n_k) scores."""
    B, n, _ = x.shape
    dh = Wq.shape[0] // H
    q, k, v = (x @ W.T + b for W, b in ((Wq, bq), (Wk, bk), (Wv, bv)))
    outs = []
    for h in range(H):
        cut = slice(h * dh, (h + 1) * dh)
        s = q[..., cut] @ k[..., cut].transpose(-2, -1) / dh ** 0.5
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), fill)
        outs.append(torch.softmax(s, dim=-2) @ v[..., cut])
    return torch.cat(outs, dim=-1) @ Wo.T + bo


def _fastnlp05_args(m):
    return (m.q_in.weight, m.k_in.weight, m.v_in.weight, m.out.weight, m.q_in.bias, m.k_in.bias, m.v_in.bias,
            m.out.bias)


def _fastnlp05_call(m):
    """m(x, x, x, mask) with the (B, n, n) bool mask True = masked that fastNLP's attention indexes [:, None]."""
    return lambda x: m(x, x, x, torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1).expand(x.shape[0], -1,
                                                                                                     -1))


@check("fastnlp_0_5_mha_key_size_value_size_softmax_query_axis_pre_fix.py")
def _(mod):
    """MultiHeadAttention(12, 4, 4, 3) (= build(12, 3)) called as m(x, x, x, future mask (B, n, n)): = the per-head
    loop with the softmax over the queries exactly; differs from mha_forward; position 0 moves with later tokens;
    with nn.Softmax(dim=-1) put back into its DotAttention the same weights give mha_forward exactly."""
    m = randomize(mod.build(12, 3)).eval()
    args = _fastnlp05_args(m)
    call = _fastnlp05_call(m)
    err, leak = cmp(call, lambda x: _query_axis_softmax_loop(x, 3, *args), 12)
    off, _ = cmp(call, lambda x: mha_forward(x, 3, *args), 12, shapes=SHAPES[:1])
    m.attention.softmax = torch.nn.Softmax(dim=-1)
    fixed, fixed_leak = cmp(call, lambda x: mha_forward(x, 3, *args), 12)
    good = err < TOL and leak > 1e-3 and off > 1e-3 and fixed < TOL and fixed_leak < TOL
    return good, (f"= the query-axis softmax loop {err:.1e}; future moves the past {leak:.2e}; mha_forward differs "
                  f"by {off:.2e}; with Softmax(dim=-1): {fixed:.1e}, leak {fixed_leak:.1e}"), "d=12 H=3 biases"


@check("fastnlp_0_5_5_mha_key_size_value_size_mask_out_fill_1e9.py")
def _(mod):
    """MultiHeadAttention(12, 4, 4, 3) (= build(12, 3)) called as m(x, x, x, future mask (B, n, n)): = mha_forward
    and the per-head loop exactly, no leak; without the mask the future moves the past; with W_k = -W_q and tokens
    x1e6 the -1e9 fill lets the future in."""
    m = randomize(mod.build(12, 3)).eval()
    args = _fastnlp05_args(m)
    call = _fastnlp05_call(m)
    err, leak = cmp(call, lambda x: mha_forward(x, 3, *args), 12)
    err2, _ = cmp(call, lambda x: _per_head_ref(x, 3, *args), 12, shapes=SHAPES[:1])
    _, open_leak = cmp(lambda x: m(x, x, x), lambda x: mha_forward(x, 3, *args), 12, shapes=SHAPES[:1])
    with torch.no_grad():
        m.k_in.weight.copy_(-m.q_in.weight)
        m.k_in.bias.copy_(-m.q_in.bias)
    big = lambda x: call(x * 1e6)
    _, fill_leak = cmp(big, big, 12, shapes=SHAPES[:1])
    good, msg = ok_line(max(err, err2), leak)
    return good and open_leak > 1e-3 and fill_leak > 1e-3, (
        msg + f" (mha_forward and the loop); no mask leaks {open_leak:.2e}; W_k = -W_q, x1e6: the -1e9 fill leaks "
              f"{fill_leak:.2e}"), "d=12 H=3 biases"


@check("fastnlp_1_mha_key_mask_beside_attn_mask_einsum_heads_last.py")
def _(mod):
    """MultiHeadAttention(12, 3) called as m(x, x, x, attn_mask=tril(ones(n, n)))[0]: q_proj / k_proj / v_proj /
    out_proj with biases = mha_forward and the per-head loop exactly, no leak; with key_mask hiding item 0's last
    token as well = an independent loop with that key at -inf too; without attn_mask the future moves the past."""
    m = randomize(mod.MultiHeadAttention(12, 3)).eval()
    args = (m.q_proj.weight, m.k_proj.weight, m.v_proj.weight, m.out_proj.weight, m.q_proj.bias, m.k_proj.bias,
            m.v_proj.bias, m.out_proj.bias)
    keep = lambda n: torch.ones(n, n).tril()
    call = lambda x: m(x, x, x, attn_mask=keep(x.shape[1]))[0]
    err, leak = cmp(call, lambda x: mha_forward(x, 3, *args), 12)
    err2, _ = cmp(call, lambda x: _per_head_ref(x, 3, *args), 12, shapes=SHAPES[:1])
    _, open_leak = cmp(lambda x: m(x, x, x)[0], lambda x: mha_forward(x, 3, *args), 12, shapes=SHAPES[:1])
    x = torch.randn(2, 6, 12, generator=torch.Generator().manual_seed(7))
    key_mask = torch.ones(2, 6)
    key_mask[0, -1] = 0
    with torch.no_grad():
        got = m(x, x, x, key_mask=key_mask, attn_mask=keep(6))[0]
        q, k, v = (x @ W.T + b for W, b in zip(args[:3], args[4:7]))
        outs = []
        for h in range(3):
            cut = slice(4 * h, 4 * h + 4)
            sc = q[..., cut] @ k[..., cut].transpose(-2, -1) / 2.0
            hide = torch.ones(6, 6, dtype=torch.bool).triu(1) | (key_mask[:, None, :] == 0)
            outs.append(torch.softmax(sc.masked_fill(hide, float("-inf")), -1) @ v[..., cut])
        want = torch.cat(outs, -1) @ args[3].T + args[7]
    padded = (got - want).abs().max().item()
    good, msg = ok_line(max(err, err2, padded), leak)
    return good and open_leak > 1e-3, (msg + f" (mha_forward and the loop); with key_mask {padded:.1e}; no "
                                       f"attn_mask leaks {open_leak:.2e}"), "d=12 H=3 biases, tuple output"


def _trinix_decode_raises(m, x, call_out=lambda r: r):
    """A prompt of 4 with use_cache=True, then the next 1 (and 2) tokens with the cache it returned: (the prompt's
    outputs, the names of the exceptions each decode raised, None where one did not)."""
    with torch.no_grad():
        out, cache = m(x[:, :4], use_cache=True)
        raised = []
        for n in (1, 2):
            try:
                m(x[:, 4:4 + n], past_key_value=cache, use_cache=True)
                raised.append(None)
            except RuntimeError as e:
                raised.append(type(e).__name__)
    return out, raised


@check("trinix_fast_mhsa_causal_flag_kv_cache_reshape_by_key_length.py")
def _(mod):
    """FastMultiHeadSelfAttention(12, 3, causal=True) in eval() (the PyTorch path): qkv_proj's row blocks [Q; K; V]
    with their biases and o_proj = mha_forward and the per-head loop exactly, no leak; the prompt with use_cache=True
    gives the same outputs; decoding 1 or 2 more tokens with its cache raises; its PyTorch path, one query over five
    keys, attends to key 0 alone (triu(ones(1, 5), 1): the mask aligned top-left)."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = randomize(mod.FastMultiHeadSelfAttention(12, 3, causal=True)).eval()
    W, b = m.qkv_proj.weight, m.qkv_proj.bias
    args = (W[:12], W[12:24], W[24:], m.o_proj.weight, b[:12], b[12:24], b[24:], m.o_proj.bias)
    err, leak = cmp(m, lambda x: mha_forward(x, 3, *args), 12)
    err2, _ = cmp(m, lambda x: _per_head_ref(x, 3, *args), 12, shapes=SHAPES[:1])
    x = torch.randn(2, 6, 12, generator=torch.Generator().manual_seed(11))
    out, raised = _trinix_decode_raises(m, x)
    prompt = (out - mha_forward(x[:, :4], 3, *args)).abs().max().item()
    g = torch.Generator().manual_seed(12)
    q, k, v = (torch.randn(2, n, 3, 4, generator=g) for n in (1, 5, 5))
    with torch.no_grad():
        one = m._apply_pytorch_attention(q, k, v)
    first_key_only = (one - v[:, :1]).abs().max().item()
    good, msg = ok_line(max(err, err2, prompt), leak)
    return good and None not in raised and first_key_only < TOL, (
        msg + f" (mha_forward and the loop); prompt with use_cache {prompt:.1e}; decoding 1 / 2 more tokens raised "
              f"{raised[0]} / {raised[1]}; one query over 5 keys = value 0 alone ({first_key_only:.1e})"), \
        "d=12 H=3, qkv and o biases"


def _alibi_grouped_loop(x, H, Wq, Wk, Wv, Wo, bq, bk, bv, bo, slopes):
    """An independent grouped-query loop with ALiBi: query head h reads kv head h // (H // KV), its scaled scores
    get -slopes[h] * (i - j), the future at -inf."""
    B, n, _ = x.shape
    dh = Wq.shape[0] // H
    KV = Wk.shape[0] // dh
    q, k, v = (x @ W.T + b for W, b in ((Wq, bq), (Wk, bk), (Wv, bv)))
    i = torch.arange(n)
    dist = (i[:, None] - i[None, :]).double()
    outs = []
    for h in range(H):
        g = h // (H // KV)
        qs, ks, vs = q[..., h * dh:(h + 1) * dh], k[..., g * dh:(g + 1) * dh], v[..., g * dh:(g + 1) * dh]
        s = qs @ ks.transpose(-2, -1) / dh ** 0.5 - float(slopes[h]) * dist
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        outs.append(torch.softmax(s, dim=-1) @ vs)
    return torch.cat(outs, dim=-1) @ Wo.T + bo


@check("trinix_fast_gqa_alibi_causal_flag_kv_cache_reshape_by_key_length.py")
def _(mod):
    """build(16, 4, num_kv_heads=KV) for KV = 4, 2, 1 in eval(): = the ALiBi grouped loop exactly, no leak; with
    the slopes zeroed = gqa_forward exactly (the bias is all that differs); decoding a token after a cached prompt
    raises."""
    import warnings
    errs, leaks, plain_errs, off = [], [], [], 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for KV in (4, 2, 1):
            m = randomize(mod.build(16, 4, CTX, num_kv_heads=KV)).eval()
            slopes = m.position_embedding.slopes.clone()
            args = (m.q_proj.weight, m.k_proj.weight, m.v_proj.weight, m.o_proj.weight, m.q_proj.bias,
                    m.k_proj.bias, m.v_proj.bias, m.o_proj.bias)
            call = lambda x: m(x)[0]
            e, lk = cmp(call, lambda x: _alibi_grouped_loop(x, 4, *args, slopes), 16)
            errs.append(e)
            leaks.append(lk)
            if KV == 2:
                off, _ = cmp(call, lambda x: gqa_forward(x, 4, *args), 16, shapes=SHAPES[:1])
            m.position_embedding.slopes.zero_()
            plain_errs.append(cmp(call, lambda x: gqa_forward(x, 4, *args), 16)[0])
            m.position_embedding.slopes.copy_(slopes)
        x = torch.randn(2, 6, 16, generator=torch.Generator().manual_seed(13))
        _, raised = _trinix_decode_raises(m, x)
    good, msg = ok_line(max(errs), max(leaks))
    return good and max(plain_errs) < TOL and off > 1e-3 and None not in raised, (
        msg + f" (the ALiBi grouped loop, KV 4, 2, 1; slopes {[float(s) for s in slopes]}); slopes zeroed = "
              f"gqa_forward {max(plain_errs):.1e}; the lesson's layer differs by {off:.2e}; decoding after a cached "
              f"prompt raised {raised[0]} / {raised[1]}"), "d=16 H=4, biases"


@check("joeynmt_mha_heads_first_keys_first_forward_keep_mask.py")
def _(mod):
    """MultiHeadedAttention(3, 12) called keys first as m(x, x, x, mask=subsequent mask (1, n, n) True = keep)[0]:
    q_layer / k_layer / v_layer / output_layer with biases = mha_forward and the per-head loop exactly, no leak; the
    head-averaged weights (return_weights=True) are the lesson's weights' mean; without the mask the future leaks."""
    m = randomize(mod.MultiHeadedAttention(3, 12)).eval()
    args = (m.q_layer.weight, m.k_layer.weight, m.v_layer.weight, m.output_layer.weight, m.q_layer.bias,
            m.k_layer.bias, m.v_layer.bias, m.output_layer.bias)
    keep = lambda n: torch.ones(n, n, dtype=torch.bool).tril().unsqueeze(0)
    call = lambda x: m(x, x, x, mask=keep(x.shape[1]))[0]
    err, leak = cmp(call, lambda x: mha_forward(x, 3, *args), 12)
    err2, _ = cmp(call, lambda x: _per_head_ref(x, 3, *args), 12, shapes=SHAPES[:1])
    _, open_leak = cmp(lambda x: m(x, x, x)[0], lambda x: mha_forward(x, 3, *args), 12, shapes=SHAPES[:1])
    x = torch.randn(2, 5, 12, generator=torch.Generator().manual_seed(14))
    with torch.no_grad():
        _, weights = m(x, x, x, mask=keep(5), return_weights=True)
        q, k = x @ args[0].T + args[4], x @ args[1].T + args[5]
        heads = [torch.softmax((q[..., 4 * h:4 * h + 4] @ k[..., 4 * h:4 * h + 4].transpose(-2, -1) / 2.0)
                               .masked_fill(~keep(5), float("-inf")), -1) for h in range(3)]
    mean_err = (weights - sum(heads) / 3).abs().max().item()
    good, msg = ok_line(max(err, err2, mean_err), leak)
    return good and open_leak > 1e-3, (msg + f" (mha_forward and the loop); averaged weights {mean_err:.1e}; no mask "
                                       f"leaks {open_leak:.2e}"), "d=12 H=3 biases, keys first"


@check("lucidrains_compressive_transformer_self_attention_memories_input_mask_aux_loss.py")
def _(mod):
    """build(12, 3, 10) in eval(), m(x)[0]: to_q, to_kv's halves [K; V], to_out with bias = mha_forward and the
    per-head loop exactly, no leak; the compressor's conv gets no gradient from the output, yet a second segment of
    10 after a memory of 10 runs it (2 compressed rows returned); with segments of 4 (SelfAttention(12, 4, 4, 1, 4, 3)),
    two segments through the returned memory = the whole forward on 8; a non-zero pos_emb changes the output."""
    m = randomize(mod.build(12, 3, CTX)).eval()
    W = m.to_kv.weight
    args = (m.to_q.weight, W[:12], W[12:], m.to_out.weight, None, None, None, m.to_out.bias)
    call = lambda x: m(x)[0]
    err, leak = cmp(call, lambda x: mha_forward(x, 3, *args), 12)
    err2, _ = cmp(call, lambda x: _per_head_ref(x, 3, *args), 12, shapes=SHAPES[:1])
    x = torch.randn(2, 7, 12, generator=torch.Generator().manual_seed(15))
    m(x)[0].square().sum().backward()
    no_grad = m.compress_mem_fn.conv.weight.grad is None
    m.zero_grad()
    seg4 = randomize(mod.SelfAttention(12, 4, 4, 1, 4, 3)).eval()  # segments of 4, a memory of 4
    x8 = torch.randn(2, 8, 12, generator=torch.Generator().manual_seed(18))
    with torch.no_grad():
        whole = m(x)[0]
        a, mem, _ = seg4(x8[:, :4])
        b, _, _ = seg4(x8[:, 4:], memories=mem)
        decode = (torch.cat((a, b), 1) - seg4(x8)[0]).abs().max().item()
        seg = torch.randn(2, 10, 12, generator=torch.Generator().manual_seed(16))
        _, mem1, _ = m(seg)
        _, mem2, _ = m(seg, memories=mem1)
        compressed = mem2.compressed_mem.shape[1]
        pos = torch.randn(3, 30, 4, generator=torch.Generator().manual_seed(17))
        moved = (m(x, pos_emb=pos)[0] - whole).abs().max().item()
    good, msg = ok_line(max(err, err2, decode), leak)
    return good and no_grad and compressed == 2 and moved > 1e-3, (
        msg + f" (mha_forward and the loop); conv grad None: {no_grad}; compressed rows after a second segment: "
              f"{compressed}; segments 4 + 4 through the memory vs whole {decode:.1e}; pos_emb moves the output {moved:.2e}"), \
        "d=12 H=3, to_out bias"


@check("d3rlpy_causal_self_attention_keys_first_pad_mask_required_fill_1e4.py")
def _(mod):
    """CausalSelfAttention(12, 3, 10, 0.0, 0.0) in eval() called as m(x, zeros(B, n)) (no padded step): _q, _k, _v,
    _proj with their biases = mha_forward and the per-head loop to 1e-10, no leak; attention_mask = ones(B, n) gives
    the same output (a constant on every score); padding step 0 (attention_mask 1 there) hides it from the later
    queries (the loop with key 0 removed, for queries 1..); with W_k = -W_q and tokens x1e3 the -10000 fill lets
    the future in."""
    m = randomize(mod.CausalSelfAttention(12, 3, CTX, 0.0, 0.0)).eval()
    args = (m._q.weight, m._k.weight, m._v.weight, m._proj.weight, m._q.bias, m._k.bias, m._v.bias, m._proj.bias)
    call = lambda x: m(x, torch.zeros(x.shape[0], x.shape[1]))
    err, leak = cmp(call, lambda x: mha_forward(x, 3, *args), 12)
    err2, _ = cmp(call, lambda x: _per_head_ref(x, 3, *args), 12, shapes=SHAPES[:1])
    ones, _ = cmp(lambda x: m(x, torch.ones(x.shape[0], x.shape[1])), call, 12)
    x = torch.randn(2, 6, 12, generator=torch.Generator().manual_seed(23))
    pad = torch.zeros(2, 6)
    pad[:, 0] = 1.0
    with torch.no_grad():
        padded = m(x, pad)[:, 1:]
        without = mha_forward(x[:, 1:], 3, *args)
    pad_err = (padded - without).abs().max().item()
    with torch.no_grad():
        m._k.weight.copy_(-m._q.weight)
        m._k.bias.copy_(-m._q.bias)
    big = lambda x: call(x * 1e3)
    _, fill_leak = cmp(big, big, 12, shapes=SHAPES[:1])
    good, msg = ok_line(max(err, err2, ones, pad_err), leak)
    return good and fill_leak > 1e-3, (
        msg + f" (mha_forward and the loop); attention_mask ones vs zeros {ones:.1e}; step 0 padded = the layer on "
              f"steps 1.. {pad_err:.1e}; W_k = -W_q, x1e3: the -10000 fill leaks {fill_leak:.2e}"), \
        "d=12 H=3 biases, keys first"


@check("stable_audio_tools_attention_dim_heads_causal_flag_zero_init_out_sdpa.py")
def _(mod):
    """Attention(12, dim_heads=4, causal=True) in eval(): to_out is all zeros as built (the output is 0); randomised,
    to_qkv's row blocks [Q; K; V] and to_out (no biases) = mha_forward with 3 heads and the per-head loop, no leak;
    Attention(12, dim_heads=4) (causal=False) leaks, and its forward(x, causal=True) = the causal layer's output;
    forward(x, causal=False) on the causal layer leaks."""
    import contextlib
    import io
    with contextlib.redirect_stdout(io.StringIO()):  # the class prints a note when built with causal=True
        m = mod.Attention(12, dim_heads=4, causal=True).eval()
        zero_out = m.to_out.weight.abs().max().item() == 0.0
        randomize(m)
        free = randomize(mod.Attention(12, dim_heads=4)).eval()
    W = m.to_qkv.weight
    args = (W[:12], W[12:24], W[24:], m.to_out.weight, None, None, None, None)
    err, leak = cmp(m, lambda x: mha_forward(x, 3, *args), 12)
    err2, _ = cmp(m, lambda x: _per_head_ref(x, 3, *args), 12, shapes=SHAPES[:1])
    with torch.no_grad():
        free.load_state_dict(m.state_dict())
    _, open_leak = cmp(free, free, 12, shapes=SHAPES[:1])
    flag_err, flag_leak = cmp(lambda x: free(x, causal=True), m, 12)
    _, off_leak = cmp(lambda x: m(x, causal=False), m, 12, shapes=SHAPES[:1])
    good, msg = ok_line(max(err, err2, flag_err), max(leak, flag_leak))
    return good and zero_out and open_leak > 1e-3 and off_leak > 1e-3, (
        msg + f" (mha_forward and the loop); to_out zero as built: {zero_out}; causal=False leaks {open_leak:.2e}, "
              f"forward(causal=True) on it vs the causal layer {flag_err:.1e}; forward(causal=False) leaks "
              f"{off_leak:.2e}"), "d=12 dim_heads=4 (H=3), no biases"


@check("sign_language_translator_causal_mhsa_heads_first_sdpa_fill_mask_view_two_inferred.py")
def _(mod):
    """CausalMultiHeadSelfAttention(3, 12, dropout=0.0, attention_bias=True) in eval(): all_queries_keys_values' row
    blocks [Q; K; V] and projection, with their biases = mha_forward and the per-head loop, no leak; built with
    attention_bias=False, the Q/K/V projections have no bias and the projection keeps one; an input (n, d) without
    batch axis = the batched row; with scaled_dot_product_attention hidden, building raises (the manual path's
    view(-1, -1, L, L))."""
    m = randomize(mod.CausalMultiHeadSelfAttention(3, 12, dropout=0.0, attention_bias=True)).eval()
    W, b = m.all_queries_keys_values.weight, m.all_queries_keys_values.bias
    args = (W[:12], W[12:24], W[24:], m.projection.weight, b[:12], b[12:24], b[24:], m.projection.bias)
    err, leak = cmp(m, lambda x: mha_forward(x, 3, *args), 12)
    err2, _ = cmp(m, lambda x: _per_head_ref(x, 3, *args), 12, shapes=SHAPES[:1])
    plain = mod.CausalMultiHeadSelfAttention(3, 12, dropout=0.0)
    biases = (plain.all_queries_keys_values.bias is None, plain.projection.bias is not None)
    x = torch.randn(1, 5, 12, generator=torch.Generator().manual_seed(24))
    with torch.no_grad():
        unbatched = (m(x[0]) - m(x)[0]).abs().max().item()
    sdpa = torch.nn.functional.scaled_dot_product_attention
    try:
        del torch.nn.functional.scaled_dot_product_attention
        try:
            mod.CausalMultiHeadSelfAttention(3, 12)
            manual = "built"
        except RuntimeError as e:
            manual = "raised" if "inferred" in str(e) else f"raised {e}"
    finally:
        torch.nn.functional.scaled_dot_product_attention = sdpa
    good, msg = ok_line(max(err, err2, unbatched), leak)
    return good and biases == (True, True) and manual == "raised", (
        msg + f" (mha_forward and the loop); attention_bias=False: no Q/K/V bias, projection bias {biases[1]}; "
              f"unbatched vs batched {unbatched:.1e}; without SDPA the constructor {manual} (view(-1, -1, L, L))"), \
        "d=12 H=3, attention_bias=True"


@check("tsl_mha_subclass_causal_flag_logical_and_caller_mask.py")
def _(mod):
    """build(12, 3) in eval(), m(x): the inner nn.MultiheadAttention's in_proj_weight row blocks and out_proj, with
    biases = mha_forward and the per-head loop, no leak; given attn_mask = the causal mask (bool, True = masked) the
    same; given a mask hiding nothing (all False) the future moves the past (logical_and drops the causal mask); given
    the causal mask with key 0 also hidden from queries 1.., key 0 still counts (= the plain call)."""
    m = randomize(mod.build(12, 3)).eval()
    a = m.attention
    W, b = a.in_proj_weight, a.in_proj_bias
    args = (W[:12], W[12:24], W[24:], a.out_proj.weight, b[:12], b[12:24], b[24:], a.out_proj.bias)
    err, leak = cmp(m, lambda x: mha_forward(x, 3, *args), 12)
    err2, _ = cmp(m, lambda x: _per_head_ref(x, 3, *args), 12, shapes=SHAPES[:1])
    future = lambda n: torch.ones(n, n, dtype=torch.bool).triu(1)
    with_causal, _ = cmp(lambda x: m(x, attn_mask=future(x.shape[1])), m, 12)
    _, nothing_leak = cmp(lambda x: m(x, attn_mask=torch.zeros(x.shape[1], x.shape[1], dtype=torch.bool)),
                          m, 12, shapes=SHAPES[:1])
    x = torch.randn(2, 6, 12, generator=torch.Generator().manual_seed(25))
    pad = future(6)
    pad[1:, 0] = True
    with torch.no_grad():
        ignored = (m(x, attn_mask=pad) - m(x)).abs().max().item()
        honoured = (m(x, attn_mask=pad)[:, 1:] - mha_forward(x[:, 1:], 3, *args)).abs().max().item()
    good, msg = ok_line(max(err, err2, with_causal), leak)
    return good and nothing_leak > 1e-3 and ignored < TOL and honoured > 1e-3, (
        msg + f" (mha_forward and the loop); with the causal attn_mask {with_causal:.1e}; a mask hiding nothing "
              f"leaks {nothing_leak:.2e}; key 0 hidden by the caller: = the plain call {ignored:.1e} (the layer "
              f"without key 0 differs by {honoured:.2e})"), "d=12 H=3 biases, one node"


@check("hourglass_attention_causal_flag_padding_mask_named_mask.py")
def _(mod):
    """Attention(12, heads=3, dim_head=4, causal=True) in eval(): to_q, to_kv's halves [K; V], to_out with its bias =
    mha_forward and the per-head loop, no leak; mask = ones(B, n) (nothing padded) the same; key 0 padded (False) is
    hidden from queries 1.. (= the layer on steps 1..); causal=False leaks."""
    m = randomize(mod.Attention(12, heads=3, dim_head=4, causal=True)).eval()
    W = m.to_kv.weight
    args = (m.to_q.weight, W[:12], W[12:], m.to_out.weight, None, None, None, m.to_out.bias)
    err, leak = cmp(m, lambda x: mha_forward(x, 3, *args), 12)
    err2, _ = cmp(m, lambda x: _per_head_ref(x, 3, *args), 12, shapes=SHAPES[:1])
    ones, _ = cmp(lambda x: m(x, mask=torch.ones(x.shape[0], x.shape[1], dtype=torch.bool)), m, 12)
    x = torch.randn(2, 6, 12, generator=torch.Generator().manual_seed(26))
    pad = torch.ones(2, 6, dtype=torch.bool)
    pad[:, 0] = False
    with torch.no_grad():
        padded = (m(x, mask=pad)[:, 1:] - mha_forward(x[:, 1:], 3, *args)).abs().max().item()
    free = mod.Attention(12, heads=3, dim_head=4).eval()
    free.load_state_dict(m.state_dict())
    _, open_leak = cmp(free, free, 12, shapes=SHAPES[:1])
    good, msg = ok_line(max(err, err2, ones, padded), leak)
    return good and open_leak > 1e-3, (
        msg + f" (mha_forward and the loop); mask of ones {ones:.1e}; key 0 padded = the layer on steps 1.. "
              f"{padded:.1e}; causal=False leaks {open_leak:.2e}"), "d=12 H=3 dim_head=4, to_out bias"


@check("rllib_mha_heads_last_einsum_causal_sequence_mask_1e30_no_biases.py")
def _(mod):
    """MultiHeadAttention(12, 12, 3, 4) (in_dim, out_dim, num_heads, head_dim): _qkv_layer's row blocks [Q; K; V] and
    _linear_layer, no biases, = mha_forward and the per-head loop, no leak (always causal); with W_k = -W_q and
    tokens x1e6 (scores near -1e13 on the masked keys, far above -1e30) the finite fill still hides the future.
    The bug: moved to another device (meta here, a GPU in use) the forward raises, its mask made on the CPU."""
    m = randomize(mod.MultiHeadAttention(12, 12, 3, 4)).eval()
    W = m._qkv_layer._model[0].weight
    args = (W[:12], W[12:24], W[24:], m._linear_layer._model[0].weight, None, None, None, None)
    err, leak = cmp(m, lambda x: mha_forward(x, 3, *args), 12)
    err2, _ = cmp(m, lambda x: _per_head_ref(x, 3, *args), 12, shapes=SHAPES[:1])
    n_params = sum(p.numel() for p in m.parameters())
    with torch.no_grad():
        W[12:24].copy_(-W[:12])
    big = lambda x: m(x * 1e6)
    _, fill_leak = cmp(big, big, 12, shapes=SHAPES[:1])
    try:  # the bug: the mask is made in forward on the CPU (torch.arange(1, L + 1) without device=), so the layer
        # moved to another device fails; PyTorch's meta device shows it without a GPU
        m.to("meta")(torch.randn(2, 5, 12, device="meta"))
        moved = "ran"
    except RuntimeError as e:
        moved = str(e).splitlines()[0][:70]
    good, msg = ok_line(max(err, err2), max(leak, fill_leak))
    return good and n_params == 3 * 12 * 12 + 12 * 12 and "device" in moved, (
        msg + f" (mha_forward and the loop); W_k = -W_q, x1e6: the -1e30 fill leaks {fill_leak:.1e}; "
              f"{n_params} parameters (no biases); moved to 'meta': {moved}"), "in=out=12 H=3 head_dim=4, heads last"


@check("nemo_nlp_mha_scale_split_sqrt_sqrt_q_and_k_required_additive_mask_1e4.py")
def _(mod):
    """MultiHeadAttention(12, 3) in eval() called as m(x, x, x, form_attention_mask(ones(B, n), diagonal=0)):
    query_net, key_net, value_net, out_projection with their biases = mha_forward and the per-head loop, no leak;
    the factory `build` gives the same; attention_mask=None leaks; W_k = -W_q with tokens x1e3 lets the future in
    through the -10000 fill; decoder_mask 0 at step 0 hides it from the later queries."""
    m = randomize(mod.MultiHeadAttention(12, 3)).eval()
    mask = lambda x, keep=None: mod.form_attention_mask(
        torch.ones(x.shape[0], x.shape[1]) if keep is None else keep, diagonal=0)
    call = lambda x: m(x, x, x, mask(x))
    args = (m.query_net.weight, m.key_net.weight, m.value_net.weight, m.out_projection.weight,
            m.query_net.bias, m.key_net.bias, m.value_net.bias, m.out_projection.bias)
    err, leak = cmp(call, lambda x: mha_forward(x, 3, *args), 12)
    err2, _ = cmp(call, lambda x: _per_head_ref(x, 3, *args), 12, shapes=SHAPES[:1])
    b = mod.build(12, 3, CTX).eval()
    b.first_sub_layer.load_state_dict(m.state_dict())
    err3, _ = cmp(b, call, 12)
    _, open_leak = cmp(lambda x: m(x, x, x, None), lambda x: m(x, x, x, None), 12, shapes=SHAPES[:1])
    x = torch.randn(2, 6, 12, generator=torch.Generator().manual_seed(24))
    keep = torch.ones(2, 6)
    keep[:, 0] = 0.0
    with torch.no_grad():
        pad_err = (m(x, x, x, mask(x, keep))[:, 1:] - mha_forward(x[:, 1:], 3, *args)).abs().max().item()
        m.key_net.weight.copy_(-m.query_net.weight)
        m.key_net.bias.copy_(-m.query_net.bias)
    big = lambda x: call(x * 1e3)
    _, fill_leak = cmp(big, big, 12, shapes=SHAPES[:1])
    try:
        mod.MultiHeadAttention(8, 3)
        refused = False
    except ValueError:
        refused = True
    good, msg = ok_line(max(err, err2, err3, pad_err), leak)
    return good and open_leak > 1e-3 and fill_leak > 1e-3 and refused, (
        msg + f" (mha_forward and the loop; build {err3:.1e}); mask None leaks {open_leak:.2e}; step 0 padded = the "
              f"layer on steps 1.. {pad_err:.1e}; W_k = -W_q, x1e3: the -10000 fill leaks {fill_leak:.2e}; "
              f"(8, 3) refused"), "hidden 12 H=3, biases, q and k / sqrt(sqrt(4))"


@check("parlai_mha_opt_dict_first_keep_mask_required_incr_state_fill_1e20.py")
def _(mod):
    """MultiHeadAttention({'n_heads': 3, 'embedding_size': 12}) in eval() called as m(x, mask=tril(ones(n, n))
    expanded to (B, n, n))[0]: q_lin, k_lin, v_lin, out_lin with their biases = mha_forward and the per-head loop at
    FLOAT32_TOL relative (the softmax in float32), no leak; a mask of ones leaks; token by token through incr_state
    (each new key's mask (B, 1, 1) of ones) = the whole forward's rows; MultiHeadAttention({}, 3, 12) raises KeyError."""
    m = randomize(mod.MultiHeadAttention({'n_heads': 3, 'embedding_size': 12})).eval()
    causal = lambda x: torch.tril(torch.ones(x.shape[1], x.shape[1])).unsqueeze(0).expand(x.shape[0], -1, -1)
    call = lambda x: m(x, mask=causal(x))[0]
    args = (m.q_lin.weight, m.k_lin.weight, m.v_lin.weight, m.out_lin.weight,
            m.q_lin.bias, m.k_lin.bias, m.v_lin.bias, m.out_lin.bias)
    err, leak = cmp(call, lambda x: mha_forward(x, 3, *args), 12)
    err2, _ = cmp(call, lambda x: _per_head_ref(x, 3, *args), 12, shapes=SHAPES[:1])
    _, open_leak = cmp(lambda x: m(x, mask=torch.ones(x.shape[0], x.shape[1], x.shape[1]))[0],
                       lambda x: m(x, mask=torch.ones(x.shape[0], x.shape[1], x.shape[1]))[0], 12, shapes=SHAPES[:1])
    x = torch.randn(2, 6, 12, generator=torch.Generator().manual_seed(25))
    with torch.no_grad():
        whole = call(x)
        state, rows = None, []
        for t in range(6):
            y, state, _ = m(x[:, t:t + 1], mask=torch.ones(2, 1, 1), incr_state=state)
            rows.append(y)
        inc_err = (torch.cat(rows, 1) - whole).abs().max().item()
        scale = whole.abs().max().item()
    try:
        mod.MultiHeadAttention({}, 3, 12)
        key_error = False
    except KeyError:
        key_error = True
    good = (err / scale < FLOAT32_TOL and err2 / scale < FLOAT32_TOL and inc_err / scale < FLOAT32_TOL
            and leak < TOL and open_leak > 1e-3 and key_error)
    return good, (f"max|out-ref|={err:.1e} (float32 softmax; relative {err / scale:.1e} < {FLOAT32_TOL:g}; the loop "
                  f"{err2:.1e}) future-leak={leak:.1e}; a mask of ones leaks {open_leak:.2e}; token by token through "
                  f"incr_state {inc_err:.1e}; ({{}}, 3, 12) raises KeyError"), "opt n_heads=3 embedding_size=12, biases"


@check("whisperspeech_mha_rotary_positions_required_qk_scale_sdpa_causal_flag.py")
def _(mod):
    """build(12, 3, CTX) (rope=True, positions arange(n), causal=True): query, key (no bias), value, out = rope_mha_forward
    (rotate-half, base 10000) at FLOAT32_TOL relative (inv_freq computed in float32), no leak, and not the plain
    layer's numbers; rope=False = mha_forward exactly; the eval call (causal=False, BaseDecoder's additive
    triu(-inf) mask indexed by the positions) = the training call; causal=False without a mask leaks; qk_scale=4
    (q and k each x2: every score x4) = the layer with W_q and b_q x4.  The bug: moved to another device after a
    forward, the layer raises (its rotary tables cached by that forward stay behind)."""
    b = randomize(mod.build(12, 3, CTX)).eval()
    a = b.attn
    ws = (a.query.weight, a.key.weight, a.value.weight, a.out.weight, a.query.bias, None, a.value.bias, a.out.bias)
    ref = lambda x: rope_mha_forward(x, 3, *ws, convention="half")
    err, leak = cmp(b, ref, 12)
    err_plain, _ = cmp(b, lambda x: mha_forward(x, 3, *ws), 12, shapes=[(2, 7)])
    scale = max(ref(torch.randn(2, 7, 12)).abs().max().item(), 1.0)
    pos = lambda x: torch.arange(x.shape[1])
    mask = torch.empty(2250, 2250).fill_(-torch.inf).triu_(1)
    err_eval, _ = cmp(lambda x: a(x, pos(x), x, pos(x), causal=False, mask=mask), b, 12)
    _, open_leak = cmp(lambda x: a(x, pos(x), x, pos(x)), lambda x: a(x, pos(x), x, pos(x)), 12, shapes=SHAPES[:1])
    plain = randomize(mod.MultiHeadAttention(12, 3)).eval()
    pw = (plain.query.weight, plain.key.weight, plain.value.weight, plain.out.weight, plain.query.bias, None,
          plain.value.bias, plain.out.bias)
    call = lambda m: (lambda x: m(x, pos(x), x, pos(x), causal=True))
    err_norope, leak2 = cmp(call(plain), lambda x: mha_forward(x, 3, *pw), 12)
    four = mod.MultiHeadAttention(12, 3, qk_scale=4).eval()
    four.load_state_dict(plain.state_dict())
    err_four, _ = cmp(call(four), lambda x: mha_forward(x, 3, 4 * pw[0], *pw[1:4], 4 * pw[4], *pw[5:]), 12,
                      shapes=[(2, 7)])
    try:  # the bug: the rotary tables are plain attributes made by the first forward (here on the CPU); the module
        # moved afterwards (meta here, a GPU in use) keeps them there and its forward raises
        b.to("meta")(torch.randn(2, 5, 12, device="meta"))
        moved = "ran"
    except RuntimeError as e:
        moved = str(e).splitlines()[0][:70]
    good = (err / scale < FLOAT32_TOL and max(leak, leak2) < TOL and err_plain > 1e-3 and err_eval < TOL
            and err_norope < TOL and err_four < TOL and open_leak > 1e-3 and "device" in moved)
    return good, (f"max|out-ref|={err:.1e} (rotate-half RoPE; relative {err / scale:.1e} < {FLOAT32_TOL:g}) "
                  f"future-leak={max(leak, leak2):.1e}; vs no RoPE {err_plain:.2e}; rope=False = mha_forward "
                  f"{err_norope:.1e}; eval call with the additive mask {err_eval:.1e}; causal=False leaks "
                  f"{open_leak:.2e}; qk_scale=4 = W_q x4 {err_four:.1e}; moved to 'meta' after a forward: {moved}"), \
        "n_state=12 n_head=3, key without bias"


@check("kosmider_transformer_components_mha_raw_params_heads_first_tgt_mask_padding_mask_dict_cache.py")
def _(mod):
    """build(12, 3, CTX) = MultiHeadAttention(3, 12, 4, 4) in eval() called as m(x, x, tgt_mask=get_causal_mask(n)):
    the raw (in, out) parameters transposed into nn.Linear's convention, no biases, = mha_forward and the per-head
    loop, no leak; tgt_mask None leaks; key_padding_mask hiding key 0 (True) = the layer on steps 1..; one token per
    call through the tutorial's "self_attn" cache (K, V preallocated, cache_len) = the whole forward's rows."""
    m = randomize(mod.build(12, 3, CTX)).eval()
    args = (m.W_Q.T, m.W_K.T, m.W_V.T, m.W_O.T, None, None, None, None)
    call = lambda x: m(x, x, tgt_mask=mod.get_causal_mask(x.shape[1], x.device))
    err, leak = cmp(call, lambda x: mha_forward(x, 3, *args), 12)
    err2, _ = cmp(call, lambda x: _per_head_ref(x, 3, *args), 12, shapes=SHAPES[:1])
    _, open_leak = cmp(lambda x: m(x, x), lambda x: m(x, x), 12, shapes=SHAPES[:1])
    x = torch.randn(2, 6, 12, generator=torch.Generator().manual_seed(27))
    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[:, 0] = True
    with torch.no_grad():
        padded = m(x, x, tgt_mask=mod.get_causal_mask(6, x.device), key_padding_mask=pad)[:, 1:]
        pad_err = (padded - mha_forward(x[:, 1:], 3, *args)).abs().max().item()
        cache = {"mode": "self_attn", "K": torch.zeros(2, 6, 12), "V": torch.zeros(2, 6, 12), "cache_len": 0}
        rows = torch.cat([m(x[:, t:t + 1], x[:, t:t + 1], kv_cache=cache) for t in range(6)], 1)
        cache_err = (rows - call(x)).abs().max().item()
    good, msg = ok_line(max(err, err2, pad_err, cache_err), leak)
    return good and open_leak > 1e-3, (
        msg + f" (mha_forward and the loop); tgt_mask None leaks {open_leak:.2e}; key 0 padded = the layer on steps "
              f"1.. {pad_err:.1e}; one token per call through the cache {cache_err:.1e}"), \
        "hidden 12 H=3 key/value size 4, raw (in, out) parameters"


def main():
    files = sorted(f for f in os.listdir(HERE) if f.endswith(".py") and not f.startswith("_"))
    n_ok = 0
    for f in files:
        c = consts(f)
        try:
            mod = load(f)
            good, msg, extra = CHECKS[f](mod)
        except Exception as e:  # noqa: BLE001
            good, msg, extra = False, "ERROR " + "".join(traceback.format_exception_only(type(e), e)).strip(), ""
        verdict = ("VERIFIED" if good else "NOT VERIFIED")
        n_ok += good
        print(f"{verdict:12s} {f:46s} TRUTH={c['TRUTH']:8s} BUG={c['BUG']!s:34s} {msg}" + (f" [{extra}]" if extra else ""))
    print(f"SUMMARY: {n_ok}/{len(files)} entries verified "
          f"({sum(consts(f)['TRUTH'] == 'correct' for f in files)} correct, {sum(consts(f)['TRUTH'] == 'bug' for f in files)} bug)")


if __name__ == "__main__":
    main()

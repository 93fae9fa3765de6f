"""Builds the causal mask in forward on the default device instead of the input's."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="mask-no-device",
    task="Works on the CPU, but on a GPU forward fails with 'Expected all tensors to be on the same device'.",
    topic="the causal mask",
    title=("Mask created in forward with torch.ones(n, n) without device=x.device: it stays on the CPU when the model "
           "moves"),
    lesson=('Lesson LM3-T4 (causal masking): the causal mask M, "the same for all heads", kept with the module (a '
            'registered buffer)'),
    killed_by=("mask-buffer",),
    symptom=("Works on the CPU; on a GPU the forward fails with 'Expected all tensors to be on the same device', "
             "because the mask is made on the CPU every call."),
    remedy=("Make the mask on the scores' device (pass device= to the call that creates it), or register it once "
            "as a buffer in __init__."),
    trace=("mask-made-without-device",),
    fix="mask = torch.triu(torch.ones(n, n, device=x.device), 1).bool()  # or use the registered buffer",
    example=(
        "forward makes torch.triu(torch.ones(3, 3), 1).bool() on the CPU at every call\n"
        "on the CPU: x (2, 3, 8) -> y (2, 3, 8), nothing wrong\n"
        "after model.to('cuda') the scores (2, 2, 3, 3) are on the GPU and the mask on the CPU: masked_fill fails\n"
        "  mha-check shows it without a GPU, with model.to('meta') and x on 'meta':\n"
        "  RuntimeError: Tensor on device meta is not on the expected device cpu!\n"
        "right: use the registered buffer self.mask[:n, :n], or torch.ones(n, n, device=x.device)"
    ),
)


class CausalMHA(nn.Module):
    def __init__(self, d, nheads, context_length, d_out=None, dropout=0.0, qkv_bias=False):
        super().__init__()
        d_out = d if d_out is None else d_out
        if d_out % nheads != 0:
            raise ValueError(f"d_out={d_out} is not divisible by nheads={nheads}")
        self.h, self.dh = nheads, d_out // nheads
        self.q, self.k, self.v = (nn.Linear(d, d_out, bias=qkv_bias) for _ in range(3))
        self.out = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())

    def forward(self, x):
        B, n, _ = x.shape
        d = self.h * self.dh
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)  # (B, H, n, dh)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(torch.triu(torch.ones(n, n), 1).bool(), float("-inf"))  # BUG: no device=
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)


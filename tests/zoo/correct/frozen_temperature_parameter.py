"""Correct: the scale kept as a FROZEN parameter, nn.Parameter(sqrt(head_dim), requires_grad=False), the scores
divided by it. A frozen parameter is a constant of the layer (it takes no gradient and no optimiser moves it), as a
buffer would be: the parameter count is the lesson's with that one element left out (tsai's PatchTST attention
keeps its head_dim ** -0.5 so).

Style: query/key/value/proj Linear layers, `temperature` as the frozen divisor, a registered tril keep-mask,
masked_fill(tril == 0, -inf), heads split with view + transpose.
"""
import torch
import torch.nn as nn


class FrozenTemperatureAttention(nn.Module):
    def __init__(self, d_model, n_heads, block_size):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads, self.head_dim = n_heads, d_model // n_heads
        self.query = nn.Linear(d_model, d_model, bias=False)
        self.key = nn.Linear(d_model, d_model, bias=False)
        self.value = nn.Linear(d_model, d_model, bias=False)
        self.proj = nn.Linear(d_model, d_model)
        self.temperature = nn.Parameter(torch.tensor(float(self.head_dim)).sqrt(), requires_grad=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        heads = lambda t: t.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
        att = (q @ k.transpose(-2, -1)) / self.temperature
        att = att.masked_fill(self.tril[:T, :T] == 0, float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))


TARGET = "FrozenTemperatureAttention"
EXPECT = ()

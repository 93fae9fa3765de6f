"""Buggy (a student's trial, trials/21 f08): the mask is made by comparing token positions,
`torch.where(j >= i, -inf, 0.0)`, which hides the diagonal too (`>` hides only the future): a token cannot see itself
and the first row is all -inf.  Weights in an nn.ParameterDict used through F.linear.  The line to change is the
comparison, not the one that adds the mask to the scores."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class ParamDictAttention(nn.Module):
    def __init__(self, hidden_size, num_attention_heads, max_position_embeddings):
        super().__init__()
        if hidden_size % num_attention_heads != 0:
            raise ValueError("hidden_size must be a multiple of num_attention_heads")
        self.nh = num_attention_heads
        self.hd = hidden_size // num_attention_heads
        self.max_pos = max_position_embeddings
        self.w = nn.ParameterDict({name: nn.Parameter(torch.empty(hidden_size, hidden_size)) for name in "qkvo"})
        self.b_o = nn.Parameter(torch.zeros(hidden_size))
        for p in self.w.values():
            nn.init.normal_(p, std=0.02)

    def forward(self, x):
        B, T, C = x.shape
        q = F.linear(x, self.w["q"]).view(B, T, self.nh, self.hd).transpose(1, 2)
        k = F.linear(x, self.w["k"]).view(B, T, self.nh, self.hd).transpose(1, 2)
        v = F.linear(x, self.w["v"]).view(B, T, self.nh, self.hd).transpose(1, 2)
        i = torch.arange(T, device=x.device).view(T, 1)
        j = torch.arange(T, device=x.device).view(1, T)
        additive = torch.where(j >= i, float("-inf"), 0.0).to(x.dtype)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.hd) + additive
        probs = F.softmax(scores, dim=-1)
        ctx = (probs @ v).transpose(1, 2).reshape(B, T, C)
        return F.linear(ctx, self.w["o"], self.b_o)


TARGET = "ParamDictAttention"
EXPECT = ("output-shape", "causal-leakage", "reference-match", "gradient-match")
DIAGNOSIS = "mask-hides-diagonal"
LINE = 32

"""Bad as a bare-file target: two unrelated nn.Module classes, so the tool cannot tell which one to check."""
import torch.nn as nn


class AttentionA(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads):
        super().__init__()
        self.proj = nn.Linear(d_in, d_out)

    def forward(self, x):
        return self.proj(x)


class AttentionB(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads):
        super().__init__()
        self.proj = nn.Linear(d_in, d_out)

    def forward(self, x):
        return self.proj(x)

"""Bad: kills its own process from forward with os._exit(3) (the constructor is fine)."""
import os

import torch.nn as nn


class MyAttn(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads):
        super().__init__()
        self.proj = nn.Linear(d_in, d_out)

    def forward(self, x):
        os._exit(3)

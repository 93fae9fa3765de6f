"""Bad: imports a package that does not exist."""
import torch.nn as nn

import attention_helpers_that_do_not_exist  # noqa: F401


class MyAttn(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads):
        super().__init__()

    def forward(self, x):
        return x

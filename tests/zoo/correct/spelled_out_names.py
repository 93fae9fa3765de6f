"""Correct: a layer whose constructor spells every size out in words of its own, as a student writing from the paper
might: `input_dimension`, `output_dimension`, `number_of_heads`, `context_length`, `dropout_probability`.

Style: separate query/key/value nn.Linear (keys declared first), `output_layer`, a bool tril buffer (True = keep)
used with torch.where and -inf, scaling by sqrt of the head width before the mask.  No alias table lists these
names; mha-check must read them by their words and need no --arg.
"""
import math

import torch
import torch.nn as nn

TARGET = "SelfAttention"
EXPECT = ()


class SelfAttention(nn.Module):
    def __init__(self, input_dimension, output_dimension, number_of_heads, context_length, dropout_probability=0.0):
        super().__init__()
        if output_dimension % number_of_heads != 0:
            raise ValueError("output_dimension must be a multiple of number_of_heads")
        self.number_of_heads = number_of_heads
        self.head_dimension = output_dimension // number_of_heads
        self.key = nn.Linear(input_dimension, output_dimension)
        self.query = nn.Linear(input_dimension, output_dimension)
        self.value = nn.Linear(input_dimension, output_dimension)
        self.output_layer = nn.Linear(output_dimension, output_dimension)
        self.attention_dropout = nn.Dropout(dropout_probability)
        self.register_buffer("keep", torch.tril(torch.ones(context_length, context_length, dtype=torch.bool)))

    def forward(self, inputs):
        batch, length, _ = inputs.shape

        def heads(t):
            return t.view(batch, length, self.number_of_heads, self.head_dimension).transpose(1, 2)

        q, k, v = heads(self.query(inputs)), heads(self.key(inputs)), heads(self.value(inputs))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dimension)
        scores = torch.where(self.keep[:length, :length], scores, float("-inf"))
        weights = self.attention_dropout(torch.softmax(scores, dim=-1))
        mixed = (weights @ v).transpose(1, 2).contiguous().view(batch, length, -1)
        return self.output_layer(mixed)

"""Buggy (student style, scale-by-sqrt-d): HF/BERT names (`hidden_size`, `num_attention_heads`,
`transpose_for_scores`, `dense`), the scores made on one line and divided by sqrt(hidden_size) on the next.  Found by
a student's trial: named at the right line, but the fix was words, since the scaling line names no queries; the
trace mark now carries the line that made the scores, whose product names them (`math.sqrt(q.size(-1))`).
"""
import math
import torch
import torch.nn as nn


class SelfAttention(nn.Module):
    def __init__(self, hidden_size, num_attention_heads, max_position_embeddings=128, attention_probs_dropout_prob=0.0):
        super().__init__()
        if hidden_size % num_attention_heads != 0:
            raise ValueError("hidden_size must be a multiple of num_attention_heads")
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.attention_head_size = hidden_size // num_attention_heads
        self.query = nn.Linear(hidden_size, hidden_size)
        self.key = nn.Linear(hidden_size, hidden_size)
        self.value = nn.Linear(hidden_size, hidden_size)
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.dropout = nn.Dropout(attention_probs_dropout_prob)
        mask = torch.full((max_position_embeddings, max_position_embeddings), float("-inf")).triu(1)
        self.register_buffer("causal_mask", mask)

    def transpose_for_scores(self, x):
        new_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return x.view(new_shape).permute(0, 2, 1, 3)

    def forward(self, hidden_states):
        seq_len = hidden_states.size(1)
        q = self.transpose_for_scores(self.query(hidden_states))
        k = self.transpose_for_scores(self.key(hidden_states))
        v = self.transpose_for_scores(self.value(hidden_states))
        scores = torch.matmul(q, k.transpose(-1, -2))
        scores = scores / math.sqrt(self.hidden_size)
        scores = scores + self.causal_mask[:seq_len, :seq_len]
        probs = self.dropout(nn.functional.softmax(scores, dim=-1))
        context = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        context = context.view(context.size()[:-2] + (self.hidden_size,))
        return self.dense(context)


TARGET = "SelfAttention"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "scale-by-sqrt-d"
LINE = 37  # the division by sqrt(hidden_size), on a line of its own

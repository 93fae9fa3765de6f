"""CausalAttention (single head) from the book "Build a Large Language Model (From Scratch)", chapter 3, section 3.5.3.

Source: https://github.com/rasbt/LLMs-from-scratch/blob/80c95987c1c16ce9895ce708dc7b9180317e8599/ch03/01_main-chapter-code/ch03.ipynb (code cell id 60d8c2eb-2d8e-4d2c-99bc-9eef8cc53ca0, class CausalAttention)
Licence: MIT (Copyright (c) 2023-2024 Sebastian Raschka) per LICENSE.txt as stored in the index; newer files in the repo carry an "Apache License 2.0" header, both permissive.
Copied: verbatim (the class only, its trailing spaces kept; the demo lines below the class in the cell are not copied; `import torch` / `import torch.nn as nn` added above). Compared character for character with the notebook as stored in the search index (read_file at the cited commit), not with fetched git history.
Truth: the previous lesson's single-head causal attention: W_query/W_key/W_value Linear(d_in, d_out, bias=qkv_bias), scores queries @ keys.transpose(1, 2), triu(1) float buffer sliced to n and turned into bool, masked_fill_ in place with -inf, softmax(scores / sqrt(d_out), -1), dropout on the weights, no output projection: reference.causal_mha.mha_forward with one head and W_o = I, b_o = 0.
"""
import torch
import torch.nn as nn

TARGET = "CausalAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ()
FORWARD = "x"
NOTES = "Constructor CausalAttention(d_in, d_out, context_length, dropout, qkv_bias=False): no number of heads, so mha-check checks it as the single-head form (harness.wire.form)."
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = "the single-head CausalAttention of the previous lesson, checked as itself: heads=1, no output projection"


class CausalAttention(nn.Module):

    def __init__(self, d_in, d_out, context_length,
                 dropout, qkv_bias=False):
        super().__init__()
        self.d_out = d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key   = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout) # New
        self.register_buffer('mask', torch.triu(torch.ones(context_length, context_length), diagonal=1)) # New

    def forward(self, x):
        b, num_tokens, d_in = x.shape # New batch dimension b
        # For inputs where `num_tokens` exceeds `context_length`, this will result in errors
        # in the mask creation further below.
        # In practice, this is not a problem since the LLM (chapters 4-7) ensures that inputs  
        # do not exceed `context_length` before reaching this forward method. 
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)

        attn_scores = queries @ keys.transpose(1, 2) # Changed transpose
        attn_scores.masked_fill_(  # New, _ ops are in-place
            self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)  # `:num_tokens` to account for cases where the number of tokens in the batch is smaller than the supported context_size
        attn_weights = torch.softmax(
            attn_scores / keys.shape[-1]**0.5, dim=-1
        )
        attn_weights = self.dropout(attn_weights) # New

        context_vec = attn_weights @ values
        return context_vec

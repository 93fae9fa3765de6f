"""llm-scratch-lab's MultiHeadAttention: the book-style causal layer with spelled-out names (d_input, d_output,
num_heads, context_length, qkv_bias; forward(input_tensor)), W_query/W_key/W_value Linear(d_input, d_output,
bias=qkv_bias), an output Linear(d_output, d_output) named `output`, a registered triu(ones, 1) float buffer turned
bool and sliced, masked_fill_(mask, -inf) in place, the scores divided by keys.shape[-1]**0.5 AFTER the mask, and
the head split with view + transpose. The same file's SelfAttention builds nn.Linear(torch.rand(d_input, d_output))
and cannot be constructed (a single head without a mask: not the target).

Source: https://github.com/fpaul787/llm-from-scratch-lab (the PyPI project's homepage), file
llm_scratch_lab/attention.py as released in llm-scratch-lab 0.0.3 on PyPI.
Licence: MIT, LICENSE in the wheel's dist-info (licenses/LICENSE) and "License-Expression: MIT" in its METADATA; the
LICENSE's copyright line reads "Copyright (c) 2025 The Python Packaging Authority" (left from the packaging
tutorial's template; the author named in METADATA is Frantz Paul).
Copied: verbatim from the PyPI wheel llm_scratch_lab==0.0.3 (pip download --no-deps): the whole file
llm_scratch_lab/attention.py (lines 1-89). ADDED: this entry's constants after the imports.
Truth: correct. MultiHeadAttention(d_input, d_output, num_heads, context_length, qkv_bias) is mha_forward with
W_query, W_key, W_value (and their biases with qkv_bias=True), W_o = output with its bias, exactly, for d_input !=
d_output too; no leak. The scale uses `keys.shape[-1]` where `keys` is still the (B, n, H, dh) view (only `key` is
transposed), so it is dh, the lesson's scale. Dividing the masked scores (-inf / c = -inf) changes nothing.
"""
import torch.nn as nn
import torch

TARGET = "MultiHeadAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("spelled-out-names", "scale-after-mask", "in-place-masked-fill")
FORWARD = "input_tensor"
NOTES = ("MultiHeadAttention(d_input, d_output, num_heads, context_length, qkv_bias=False). forward(input_tensor) -> "
         "(B, n, d_output).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = "the lesson's layer under spelled-out names, its scale read from the per-head view"

class SelfAttention(nn.Module):
    """Self-attention mechanism for processing input tensors."""
    def __init__(self, d_input, d_output):
        super().__init__()
        self.W_query = nn.Linear(torch.rand(d_input, d_output))
        self.W_key = nn.Linear(torch.rand(d_input, d_output))
        self.W_value = nn.Linear(torch.rand(d_input, d_output))

    def forward(self, input_tensor):
        """
        Forward pass for self-attention mechanism.
        
        Args:
            input_tensor (torch.Tensor): Input tensor of shape (batch_size, seq_length, d_input).
            This input is the sum of token and position embeddings.
        Returns:
            torch.Tensor: Context vector of shape (batch_size, seq_length, d_output).
        """
        keys = input_tensor @ self.W_key
        queries = input_tensor @ self.W_query
        values = input_tensor @ self.W_value
        attention_scores = queries @ keys.T
        attention_weights = torch.softmax(attention_scores / keys.shape[-1] ** 0.5, dim=-1)
        context_vector = attention_weights @ values
        return context_vector
    

class MultiHeadAttention(nn.Module):
    """
    Multi-head attention mechanism for processing input tensors.

    This combines a Causal Self-Attention mechanism with multiple heads to allow the model to jointly attend to information from different representation subspaces.
    """
    def __init__(self, d_input, d_output, num_heads, context_length, qkv_bias=False):
        super().__init__()
        assert d_output % num_heads == 0, "Output dimension must be divisible by number of heads."

        self.d_input = d_input
        self.d_output = d_output
        self.num_heads = num_heads
        self.context_length = context_length
        self.qkv_bias = qkv_bias #variable to control whether to use bias in the linear layers
        self.head_dim = d_output // num_heads

        self.W_query = nn.Linear(self.d_input, self.d_output, bias=qkv_bias)
        self.W_key = nn.Linear(self.d_input, self.d_output, bias=qkv_bias)
        self.W_value = nn.Linear(self.d_input, self.d_output, bias=qkv_bias)
        self.output = nn.Linear(self.d_output, self.d_output)

        # Create a mask to prevent attention to future tokens
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, input_tensor):
        batch_size, num_tokens, embedding_dim = input_tensor.shape

        # project input tensor to queries, keys, and values
        keys = self.W_key(input_tensor)
        queries = self.W_query(input_tensor)
        values = self.W_value(input_tensor)

        # Split the embeddings into multiple heads (reshape and transpose)
        keys = keys.view(batch_size, num_tokens, self.num_heads, self.head_dim)
        queries = queries.view(batch_size, num_tokens, self.num_heads, self.head_dim)
        values = values.view(batch_size, num_tokens, self.num_heads, self.head_dim)

        key = keys.transpose(1, 2)
        queries = queries.transpose(1, 2)
        values = values.transpose(1, 2)

        # Calculate attention scores (scaled dot-product attention)
        attention_scores = queries @ key.transpose(2, 3) # Dot product for each head

        # mask the future tokens
        mask_bool = self.mask.bool()[:num_tokens, :num_tokens]

        # Apply the mask to the attention scores
        attention_scores.masked_fill_(mask_bool, -torch.inf)

        attention_weights = torch.softmax(attention_scores / keys.shape[-1]**0.5, dim=-1)


        context_vector = (attention_weights @ values).transpose(1, 2)  # Combine heads back to original shape

        context_vector = context_vector.contiguous().view(batch_size, num_tokens, self.d_output)
        context_vector = self.output(context_vector)  # Final linear layer to combine heads
        return context_vector

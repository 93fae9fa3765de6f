"""Hugging Face transformers' GPTNeoSelfAttention (4.12.5): projections declared KEYS FIRST (k_proj, v_proj, q_proj
without bias, then out_proj with one), a uint8 tril buffer named `bias` (for attention_type "local" XORed with its
band below -window_size, a sliding window), the future set with torch.where(causal_mask, scores, masked_bias) where
masked_bias is the registered constant -1e9, the scores computed in float32 and NEVER divided by sqrt(head_dim)
(GPT-Neo's design, kept from EleutherAI's mesh-tensorflow model, whose weights were trained that way), a tuple
(attn_output, present) returned, a KV cache through layer_past / use_cache.

Source: https://github.com/huggingface/transformers/blob/v4.12.5/src/transformers/models/gpt_neo/modeling_gpt_neo.py
(copied from the PyPI wheel transformers==4.12.5, file transformers/models/gpt_neo/modeling_gpt_neo.py).
Licence: Apache-2.0 (the file's header: "Copyright 2021 The Eleuther AI and HuggingFace Inc. team. All rights
reserved.", "Licensed under the Apache License, Version 2.0"; LICENSE in the wheel's dist-info).
Copied: verbatim from the wheel (pip download --no-deps transformers==4.12.5): lines 21 and 23 (`import torch`,
`from torch import nn`) and 137-253 (GPTNeoSelfAttention). Left out: the rest of the module (GPTNeoAttention, which
only picks "global" or "local" from config.attention_layers and forwards to this class, the MLP, blocks, models and
the transformers imports they need).
ADDED: this docstring, the entry's constants, `GPTNeoConfig`, a stand-in for transformers' GPTNeoConfig holding only
the attributes GPTNeoSelfAttention reads (defaults those of configuration_gpt_neo.py in the same wheel:
max_position_embeddings=2048, hidden_size=2048, num_heads=16, window_size=256, resid_dropout=attention_dropout=0.0),
and the factory `build` (attention_type "global", GPT-Neo's even layers).
Truth (_truth.py): bug under the lesson's contract - no 1/sqrt(head_dim) scale. Its output is exactly
mha_forward's with W_q multiplied by sqrt(head_dim) (relative 1e-7, float32 scores), and differs from mha_forward with
the layer's own weights (the unscaled scores: softmax sharper); causal, no future leak; with attention_type "local"
and window_size 3 a query no longer sees keys 3 or more positions back. The -1e9 fill is finite too (the lesson's
mask-fill rule): a query whose own score is far below -1e9 attends to the future.
"""
import torch
from torch import nn

TARGET = "build"
TRUTH = "bug"
BUG = "no-scaling"
RULE_GAPS = ("keys-first-declaration", "fill-minus-1e9", "float32-scores", "config-object", "tuple-output",
             "kv-cache-layer-past", "qkv-no-bias", "local-window-option")
FORWARD = "hidden_states, attention_mask=None, layer_past=None, head_mask=None, use_cache=False, output_attentions=False"
NOTES = ("GPTNeoSelfAttention(config, attention_type); TARGET is the added factory build(d, nheads, context_length, "
         "attention_type='global', window_size=256). forward returns (attn_output, present).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'no-scaling'
EXPECTED_BECAUSE = ("GPT-Neo never divides its scores by sqrt(head_dim) (a design choice of the model, a mistake under "
                    "the lesson's contract): the reference does not match, and the missing scale is the mistake to name")


class GPTNeoSelfAttention(nn.Module):
    def __init__(self, config, attention_type):
        super().__init__()

        max_positions = config.max_position_embeddings
        bias = torch.tril(torch.ones((max_positions, max_positions), dtype=torch.uint8)).view(
            1, 1, max_positions, max_positions
        )

        # local causal self attention is a sliding window where each token can only attend to the previous
        # window_size tokens. This is implemented by updating the causal mask such that for each token
        # all other tokens are masked except the previous window_size tokens.
        if attention_type == "local":
            bias = torch.bitwise_xor(bias, torch.tril(bias, -config.window_size))

        self.register_buffer("bias", bias)
        self.register_buffer("masked_bias", torch.tensor(-1e9))

        self.attn_dropout = nn.Dropout(config.attention_dropout)
        self.resid_dropout = nn.Dropout(config.resid_dropout)

        self.embed_dim = config.hidden_size
        self.num_heads = config.num_heads
        self.head_dim = self.embed_dim // self.num_heads
        if self.head_dim * self.num_heads != self.embed_dim:
            raise ValueError(
                f"embed_dim must be divisible by num_heads (got `embed_dim`: {self.embed_dim} and `num_heads`: {self.num_heads})."
            )

        self.k_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=False)
        self.v_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=False)
        self.q_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=False)
        self.out_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=True)

    def _split_heads(self, tensor, num_heads, attn_head_size):
        """
        Splits hidden_size dim into attn_head_size and num_heads
        """
        new_shape = tensor.size()[:-1] + (num_heads, attn_head_size)
        tensor = tensor.view(*new_shape)
        return tensor.permute(0, 2, 1, 3)  # (batch, head, seq_length, head_features)

    def _merge_heads(self, tensor, num_heads, attn_head_size):
        """
        Merges attn_head_size dim and num_attn_heads dim into hidden_size
        """
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        new_shape = tensor.size()[:-2] + (num_heads * attn_head_size,)
        return tensor.view(new_shape)

    def _attn(self, query, key, value, attention_mask=None, head_mask=None):
        # Keep the attention weights computation in fp32 to avoid overflow issues
        query = query.to(torch.float32)
        key = key.to(torch.float32)

        attn_weights = torch.matmul(query, key.transpose(-1, -2))

        query_length, key_length = query.size(-2), key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length : key_length, :key_length].bool()
        attn_weights = torch.where(causal_mask, attn_weights, self.masked_bias.to(attn_weights.dtype))

        if attention_mask is not None:
            # Apply the attention mask
            attn_weights = attn_weights + attention_mask

        attn_weights = nn.Softmax(dim=-1)(attn_weights)
        attn_weights = attn_weights.to(value.dtype)
        attn_weights = self.attn_dropout(attn_weights)

        # Mask heads if we want to
        if head_mask is not None:
            attn_weights = attn_weights * head_mask

        attn_output = torch.matmul(attn_weights, value)

        return attn_output, attn_weights

    def forward(
        self,
        hidden_states,
        attention_mask=None,
        layer_past=None,
        head_mask=None,
        use_cache=False,
        output_attentions=False,
    ):

        query = self.q_proj(hidden_states)
        key = self.k_proj(hidden_states)
        value = self.v_proj(hidden_states)

        query = self._split_heads(query, self.num_heads, self.head_dim)
        key = self._split_heads(key, self.num_heads, self.head_dim)
        value = self._split_heads(value, self.num_heads, self.head_dim)

        if layer_past is not None:
            past_key = layer_past[0]
            past_value = layer_past[1]
            key = torch.cat((past_key, key), dim=-2)
            value = torch.cat((past_value, value), dim=-2)

        if use_cache is True:
            present = (key, value)
        else:
            present = None

        attn_output, attn_weights = self._attn(query, key, value, attention_mask, head_mask)

        attn_output = self._merge_heads(attn_output, self.num_heads, self.head_dim)
        attn_output = self.out_proj(attn_output)
        attn_output = self.resid_dropout(attn_output)

        outputs = (attn_output, present)
        if output_attentions:
            outputs += (attn_weights,)

        return outputs  # a, present, (attentions)


# --- added for the zoo: a stand-in for transformers' GPTNeoConfig (only what GPTNeoSelfAttention reads) and a factory ---
class GPTNeoConfig:
    def __init__(self, max_position_embeddings=2048, hidden_size=2048, num_heads=16, window_size=256,
                 resid_dropout=0.0, attention_dropout=0.0):
        self.max_position_embeddings = max_position_embeddings
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.window_size = window_size
        self.resid_dropout = resid_dropout
        self.attention_dropout = attention_dropout


def build(d, nheads, context_length, attention_type="global", window_size=256):
    cfg = GPTNeoConfig(max_position_embeddings=context_length, hidden_size=d, num_heads=nheads, window_size=window_size)
    return GPTNeoSelfAttention(cfg, attention_type)

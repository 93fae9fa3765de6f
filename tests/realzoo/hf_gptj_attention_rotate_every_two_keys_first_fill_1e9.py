"""Hugging Face transformers' GPTJAttention (4.12.5): projections declared KEYS FIRST (k_proj, v_proj, q_proj, then
out_proj, all without bias), GPT-J's INTERLEAVED rotary ("rotate every two": pairs (x0, x1), (x2, x3), ... of each head,
sin/cos made in float32 and repeated two by two) on the first rotary_dim features of every head, the causal mask a
bool tril buffer named `bias` applied with torch.where(causal_mask, scores, masked_bias) where masked_bias is the
registered constant -1e9 - BEFORE the scores are divided by sqrt(head_dim) - the scores computed in float32, a tuple
(attn_output, present) returned, a KV cache through layer_past / use_cache.

Source: https://github.com/huggingface/transformers/blob/v4.12.5/src/transformers/models/gptj/modeling_gptj.py (copied
from the PyPI wheel transformers==4.12.5, file transformers/models/gptj/modeling_gptj.py).
Licence: Apache-2.0 (the file's header: "Copyright 2021 The EleutherAI and HuggingFace Teams. All rights reserved.",
"Licensed under the Apache License, Version 2.0"; LICENSE in the wheel's dist-info).
Copied: verbatim from the wheel (pip download --no-deps transformers==4.12.5): lines 19 and 21 (`import torch`,
`from torch import nn`) and 45-234 (fixed_pos_embedding, rotate_every_two, apply_rotary_pos_emb, GPTJAttention).
Left out: the rest of the module (GPTJMLP, GPTJBlock, the models, the transformers imports they need).
ADDED: this docstring, the entry's constants, `GPTJConfig`, a stand-in for transformers' GPTJConfig holding only the
attributes GPTJAttention reads (its defaults those of configuration_gptj.py in the same wheel: n_positions=2048,
n_embd=4096, n_head=16, rotary_dim=64, resid_pdrop=attn_pdrop=0.0; max_position_embeddings, hidden_size and
num_attention_heads are the attribute_map's names for n_positions, n_embd and n_head), and the factory `build`.
Truth (_truth.py): correct, within float32. q, k, v = x W_q^T, x W_k^T, x W_v^T; each head's first rotary_dim features
turned pair by pair (x_2i, x_2i+1) by angle p * 10000^(-2i / rotary_dim) - with rotary_dim >= head_dim every feature,
the lesson's rotary reference rope_mha_forward(convention="interleaved"); scores q k^T with the future set to -1e9 and
then divided by sqrt(head_dim) (a future score of -1e9 / sqrt(head_dim), which softmax turns into 0 for scores of
ordinary size), softmax, @ v, merge, out_proj. Relative error to the reference about 1e-7 (float32 q, k and sin/cos),
no future leak. The -1e9 is a finite fill: scores below about -1e9 / sqrt(head_dim) would let the future in (the
lesson's mask-fill rule).
"""
import torch
from torch import nn

TARGET = "build"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("keys-first-declaration", "interleaved-rotary-rotate-every-two", "partial-rotary-dim", "fill-minus-1e9-before-scale",
             "float32-scores", "config-object", "tuple-output", "kv-cache-layer-past", "no-biases")
FORWARD = "hidden_states, attention_mask=None, layer_past=None, head_mask=None, use_cache=False, output_attentions=False"
NOTES = ("GPTJAttention(config); TARGET is the added factory build(d, nheads, context_length, rotary_dim=64) (GPT-J's own "
         "rotary_dim; with head_dim <= 64 every feature of a head is turned). forward returns (attn_output, present).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'rules'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("GPT-J's interleaved rotary layer, correct within float32; two lesson rules not followed: the -1e9 fill (a "
                    "torch.where with the registered masked_bias, mask-fill) and out_proj without bias (out-proj-bias), "
                    "each marked at its line: no single mistake to name")


def fixed_pos_embedding(x, seq_dim=1, seq_len=None):
    dim = x.shape[-1]
    if seq_len is None:
        seq_len = x.shape[seq_dim]
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2) / dim))
    sinusoid_inp = torch.einsum("i , j -> i j", torch.arange(seq_len), inv_freq).to(x.device).float()
    return torch.sin(sinusoid_inp), torch.cos(sinusoid_inp)


def rotate_every_two(x):
    x1 = x[:, :, :, ::2]
    x2 = x[:, :, :, 1::2]
    x = torch.stack((-x2, x1), axis=-1)
    return x.flatten(-2)  # in einsum notation: rearrange(x, '... d j -> ... (d j)')


def apply_rotary_pos_emb(x, sincos, offset=0):
    sin, cos = map(lambda t: t[None, offset : x.shape[1] + offset, None, :].repeat_interleave(2, 3), sincos)
    # einsum notation for lambda t: repeat(t[offset:x.shape[1]+offset,:], "n d -> () n () (d j)", j=2)
    return (x * cos) + (rotate_every_two(x) * sin)


class GPTJAttention(nn.Module):
    def __init__(self, config):
        super().__init__()

        max_positions = config.max_position_embeddings
        self.register_buffer(
            "bias",
            torch.tril(torch.ones((max_positions, max_positions), dtype=torch.bool)).view(
                1, 1, max_positions, max_positions
            ),
        )
        self.register_buffer("masked_bias", torch.tensor(-1e9))

        self.attn_dropout = nn.Dropout(config.attn_pdrop)
        self.resid_dropout = nn.Dropout(config.resid_pdrop)

        self.embed_dim = config.hidden_size
        self.num_attention_heads = config.num_attention_heads
        self.head_dim = self.embed_dim // self.num_attention_heads
        if self.head_dim * self.num_attention_heads != self.embed_dim:
            raise ValueError(
                f"embed_dim must be divisible by num_attention_heads (got `embed_dim`: {self.embed_dim} and `num_attention_heads`: {self.num_attention_heads})."
            )
        self.scale_attn = torch.sqrt(torch.tensor(self.head_dim, dtype=torch.float32)).to(torch.get_default_dtype())

        self.k_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=False)
        self.v_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=False)
        self.q_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=False)
        self.out_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=False)
        self.rotary_dim = None
        if config.rotary_dim is not None:
            self.rotary_dim = config.rotary_dim

    def _split_heads(self, tensor, num_attention_heads, attn_head_size, rotary):
        """
        Splits n_ctx dim into attn_head_size and num_attention_heads
        """
        new_shape = tensor.size()[:-1] + (num_attention_heads, attn_head_size)
        tensor = tensor.view(*new_shape)
        if rotary:
            return tensor
        if len(tensor.shape) == 5:
            return tensor.permute(0, 1, 3, 2, 4)  # (batch, blocks, head, block_length, head_features)
        elif len(tensor.shape) == 4:
            return tensor.permute(0, 2, 1, 3)  # (batch, head, seq_length, head_features)
        else:
            raise ValueError(f"Input tensor rank should be one of [4, 5], but is: {len(tensor.shape)}")

    def _merge_heads(self, tensor, num_attention_heads, attn_head_size):
        """
        Merges attn_head_size dim and num_attn_heads dim into n_ctx
        """
        if len(tensor.shape) == 5:
            tensor = tensor.permute(0, 1, 3, 2, 4).contiguous()
        elif len(tensor.shape) == 4:
            tensor = tensor.permute(0, 2, 1, 3).contiguous()
        else:
            raise ValueError(f"Input tensor rank should be one of [4, 5], but is: {len(tensor.shape)}")
        new_shape = tensor.size()[:-2] + (num_attention_heads * attn_head_size,)
        return tensor.view(new_shape)

    def _attn(
        self,
        query,
        key,
        value,
        attention_mask=None,
        head_mask=None,
    ):

        # compute causal mask from causal mask buffer
        query_length, key_length = query.size(-2), key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length : key_length, :key_length]

        # Keep the attention weights computation in fp32 to avoid overflow issues
        query = query.to(torch.float32)
        key = key.to(torch.float32)

        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        attn_weights = torch.where(causal_mask, attn_weights, self.masked_bias.to(attn_weights.dtype))

        attn_weights = attn_weights / self.scale_attn

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

        query = self._split_heads(query, self.num_attention_heads, self.head_dim, True)
        key = self._split_heads(key, self.num_attention_heads, self.head_dim, True)
        value = self._split_heads(value, self.num_attention_heads, self.head_dim, False)

        seq_len = key.shape[1]
        offset = 0

        if layer_past is not None:
            offset = layer_past[0].shape[-2]
            seq_len += offset

        if self.rotary_dim is not None:
            k_rot = key[:, :, :, : self.rotary_dim]
            k_pass = key[:, :, :, self.rotary_dim :]

            q_rot = query[:, :, :, : self.rotary_dim]
            q_pass = query[:, :, :, self.rotary_dim :]

            sincos = fixed_pos_embedding(k_rot, 1, seq_len=seq_len)
            k_rot = apply_rotary_pos_emb(k_rot, sincos, offset=offset)
            q_rot = apply_rotary_pos_emb(q_rot, sincos, offset=offset)

            key = torch.cat([k_rot, k_pass], dim=-1)
            query = torch.cat([q_rot, q_pass], dim=-1)
        else:
            sincos = fixed_pos_embedding(key, 1, seq_len=seq_len)
            key = apply_rotary_pos_emb(key, sincos, offset=offset)
            query = apply_rotary_pos_emb(query, sincos, offset=offset)

        key = key.permute(0, 2, 1, 3)
        query = query.permute(0, 2, 1, 3)

        if layer_past is not None:
            past_key = layer_past[0]
            past_value = layer_past[1]
            key = torch.cat((past_key, key), dim=-2)
            value = torch.cat((past_value, value), dim=-2)

        if use_cache is True:
            present = (key, value)
        else:
            present = None

        # compute self-attention: V x Softmax(QK^T)
        attn_output, attn_weights = self._attn(query, key, value, attention_mask, head_mask)

        attn_output = self._merge_heads(attn_output, self.num_attention_heads, self.head_dim)
        attn_output = self.out_proj(attn_output)
        attn_output = self.resid_dropout(attn_output)

        outputs = (attn_output, present)
        if output_attentions:
            outputs += (attn_weights,)

        return outputs  # a, present, (attentions)


# --- added for the zoo: a stand-in for transformers' GPTJConfig (only what GPTJAttention reads) and a factory ---
class GPTJConfig:
    def __init__(self, n_positions=2048, n_embd=4096, n_head=16, rotary_dim=64, resid_pdrop=0.0, attn_pdrop=0.0):
        self.max_position_embeddings = n_positions
        self.hidden_size = n_embd
        self.num_attention_heads = n_head
        self.rotary_dim = rotary_dim
        self.resid_pdrop = resid_pdrop
        self.attn_pdrop = attn_pdrop


def build(d, nheads, context_length, rotary_dim=64):
    return GPTJAttention(GPTJConfig(n_positions=context_length, n_embd=d, n_head=nheads, rotary_dim=rotary_dim))

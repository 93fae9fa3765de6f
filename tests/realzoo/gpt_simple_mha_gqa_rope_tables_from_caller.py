"""gpt-simple's MultiHeadAttention: a Llama-style layer driven by a ModelConfig dataclass (n_embd, n_head, n_kv_head
for grouped-query / multi-query attention, use_bias / qkv_bias / attn_out_bias, attention_mode), q_proj / k_proj /
v_proj / c_proj, a rotate-half RoPE whose (cos, sin) tables (1, 1, L, dh) are REQUIRED from the caller and indexed by
position_ids, repeat_kv (expand + reshape) to the query heads, and three backends: SDPA is_causal=True (the default
"causal" mode), SDPA with an additive finfo.min mask ("sdpa_mask", also the KV-cache decode path), flex_attention;
a manual fallback for torch without SDPA; forward returns (y, present) with an optional (k, v) cache.

Source: https://github.com/lb-off/gpt-simple (the PyPI project's repository), files gpt_simple/model.py,
gpt_simple/config.py and gpt_simple/errors.py as released in gpt-simple-lm 0.1.2 on PyPI.
Licence: MIT (Copyright (c) 2026 Louis Bertucci), LICENSE in the wheel's dist-info (licenses/LICENSE).
Copied: verbatim from the PyPI wheel gpt_simple_lm==0.1.2 (pip download --no-deps): config.py line 11
(`from __future__ import annotations`), lines 15 and 17 (its dataclasses and typing imports) and lines 23-143 (the
"Model architecture" comment and ModelConfig); model.py lines 19-24 (math, torch, nn, F, checkpoint, typing) and
lines 69-378 (RotaryPositionalEmbedding, rotate_half, repeat_kv, apply_rotary_pos_emb, MultiHeadAttention); errors.py
lines 9-16 (GptSimpleError, ConfigError; config.py imports ConfigError from there). ADDED: this entry's constants and
the factory GptSimpleAttentionLayer below, which builds the RoPE module as SimpleLLM.__init__ does (head_dim, the
config's rope_base) and calls the attention as SimpleLLM.forward and TransformerBlock.forward do: position_ids =
arange(n) per sequence, tables of max(n, n_positions) rows, no cache; it returns the attention's y.
Truth: correct. Through the factory with n_kv_head = 2, 1 or 4 of 4 heads (and with use_bias=True, the default
"causal" mode, and "sdpa_mask"), y is the rotate-half rotary reference with W_k, W_v repeated per group (query head h
reads key/value head h // (H / KV)) and q_proj, k_proj, v_proj, c_proj, to relative 1e-5 (the inverse frequencies
are float32); no leak. The defaults have no bias at all (Llama style).
"""
from __future__ import annotations
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Literal, Optional, Union
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
from typing import Optional, Tuple

TARGET = "GptSimpleAttentionLayer"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("config-dataclass", "gqa-n-kv-head", "rope-tables-from-caller", "position-ids-index", "sdpa-is-causal",
             "three-backends", "tuple-output", "no-biases-by-default")
FORWARD = "x (via the factory; the class: hidden_states, rope_cos_sin, attention_mask=None, position_ids=None, ...)"
NOTES = ("GptSimpleAttentionLayer(d, heads, context_length, kv_heads=None) wraps MultiHeadAttention(ModelConfig(n_embd=d, "
         "n_head=heads, n_kv_head=kv_heads, n_positions=context_length)) and RotaryPositionalEmbedding(d // heads).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("grouped-query attention with rotate-half RoPE and no biases, the Llama family's layer: the grouped "
                    "rotary reference reproduces it, and out-proj-bias does not apply to that family")


class GptSimpleError(Exception):
    """Base exception for all gpt_simple errors."""
    exit_code = 1


class ConfigError(GptSimpleError):
    """Invalid or missing configuration."""
    exit_code = 2


# ---------------------------------------------------------------------------
# Model architecture
# ---------------------------------------------------------------------------

@dataclass
class ModelConfig:
    """Pure architecture — everything that defines the weight/checkpoint format.

    Defaults produce a small 125M-class model suitable for quick experiments.

    The defaults describe a modern Llama-style decoder (RMSNorm + RoPE +
    SwiGLU + tied head, no biases).  The extra knobs below let the same code
    express other dense decoder-only families:

      - ``n_kv_head``           grouped-/multi-query attention (Llama-3, Mistral, Qwen2)
      - ``mlp_type``            vanilla (non-gated) FFN (GPT-2, NeoX, OPT, Falcon)
      - ``intermediate_size``   explicit FFN width (Gemma, exact Mistral/Qwen widths)
      - ``tie_word_embeddings`` untied output head (real Llama-1/2, GPT-2)
      - ``qkv_bias`` / ``attn_out_bias`` / ``mlp_bias``  per-projection bias (Qwen2)
    """

    vocab_size: Optional[int] = None  # inferred from tokenizer, padded to 128
    n_embd: int = 768
    n_layer: int = 12
    n_head: int = 12
    # Number of key/value heads.  None -> n_head (standard multi-head
    # attention).  < n_head enables grouped-query attention (must divide
    # n_head); 1 is multi-query attention.
    n_kv_head: Optional[int] = None
    n_positions: int = 2048

    dropout: float = 0.0

    # -- bias -----------------------------------------------------------------
    # ``use_bias`` is the global default for every linear layer.  The three
    # per-projection overrides take precedence when not None, so e.g. Qwen2
    # (bias on Q/K/V only) is ``use_bias=False, qkv_bias=True``.
    use_bias: bool = False
    qkv_bias: Optional[bool] = None        # Q/K/V projections
    attn_out_bias: Optional[bool] = None   # attention output projection
    mlp_bias: Optional[bool] = None        # MLP linears

    activation: str = "swish"          # "swish", "gelu", "relu"

    # -- feed-forward ---------------------------------------------------------
    # "gated" -> SwiGLU/GeGLU/ReGLU (gate * up); "mlp" -> vanilla act(fc) proj.
    mlp_type: Literal["gated", "mlp"] = "gated"
    # Explicit FFN inner width.  None derives it: gated -> round_256(8*n_embd/3)
    # (the Llama sizing); vanilla -> 4*n_embd (the GPT sizing).
    intermediate_size: Optional[int] = None

    norm: str = "rmsnorm"              # "rmsnorm", "layernorm"
    norm_eps: float = 1e-5

    # Tie the LM head to the token-embedding matrix.  False allocates a
    # separate output projection (real Llama-1/2, GPT-2 both tie; Llama ties
    # nothing — set False for a faithful replica).
    tie_word_embeddings: bool = True

    rope_base: float = 10000.0
    rope_scaling_type: Optional[Literal["linear", "ntk"]] = None
    rope_scaling_factor: float = 1.0

    attention_mode: Literal["causal", "sdpa_mask", "flex"] = "causal"

    def __post_init__(self):
        if self.n_embd % self.n_head != 0:
            raise ConfigError(f"n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})")
        if self.n_kv_head is not None:
            if self.n_kv_head < 1:
                raise ConfigError(f"n_kv_head must be >= 1, got {self.n_kv_head}")
            if self.n_head % self.n_kv_head != 0:
                raise ConfigError(
                    f"n_head ({self.n_head}) must be divisible by "
                    f"n_kv_head ({self.n_kv_head})"
                )
        if self.activation not in ("gelu", "relu", "swish"):
            raise ConfigError(f"Unsupported activation: {self.activation}")
        if self.mlp_type not in ("gated", "mlp"):
            raise ConfigError(f"Unsupported mlp_type: {self.mlp_type}")
        if self.intermediate_size is not None and self.intermediate_size < 1:
            raise ConfigError(
                f"intermediate_size must be >= 1 or None, got {self.intermediate_size}"
            )
        if self.attention_mode not in ("causal", "sdpa_mask", "flex"):
            raise ConfigError(f"Unsupported attention_mode: {self.attention_mode}")
        if self.rope_scaling_type is not None and self.rope_scaling_factor < 1.0:
            raise ConfigError("rope_scaling_factor should be >= 1.0")

    # -- derived architecture helpers ----------------------------------------

    @property
    def kv_heads(self) -> int:
        """Effective number of key/value heads (n_head for plain MHA)."""
        return self.n_head if self.n_kv_head is None else self.n_kv_head

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @property
    def resolved_qkv_bias(self) -> bool:
        return self.use_bias if self.qkv_bias is None else self.qkv_bias

    @property
    def resolved_attn_out_bias(self) -> bool:
        return self.use_bias if self.attn_out_bias is None else self.attn_out_bias

    @property
    def resolved_mlp_bias(self) -> bool:
        return self.use_bias if self.mlp_bias is None else self.mlp_bias

    def intermediate_dim(self) -> int:
        """Resolve the FFN inner width from config + mlp_type."""
        if self.intermediate_size is not None:
            return self.intermediate_size
        if self.mlp_type == "gated":
            h = (8 * self.n_embd) // 3
            return ((h + 255) // 256) * 256
        return 4 * self.n_embd



class RotaryPositionalEmbedding(nn.Module):
    """
    Rotary Position Embedding (RoPE) with optional scaling and caching.
    Generates cos/sin tables of shape (1,1,seq_len,dim) and caches them for efficiency.
    """
    def __init__(self, dim: int, base: float = 10000.0,
                 scaling_type: Optional[str] = None, scaling_factor: float = 1.0):
        super().__init__()
        assert dim % 2 == 0, "RoPE dim must be even"
        self.dim = dim
        self.base = float(base)
        self.scaling_type = scaling_type
        self.scaling_factor = float(scaling_factor)

        # Build inverse frequencies (half-dim)
        self.register_buffer("inv_freq_base",
                             (torch.arange(0, dim, 2).float() / dim),
                             persistent=False)
        
        # Cache for cos/sin tables to avoid recomputation
        # Format: {(seq_len, device_str): (cos_tensor, sin_tensor)}
        self._cos_sin_cache = {}

    def _inv_freq(self, device):
        # Apply scaling: linear -> divide theta by factor (equiv to inv_freq / factor)
        # NTK-ish -> increase base by factor (simple, popular approximation)
        if self.scaling_type == "linear" and self.scaling_factor > 1.0:
            base = self.base
            inv = (base ** (-self.inv_freq_base)) / self.scaling_factor
        elif self.scaling_type == "ntk" and self.scaling_factor > 1.0:
            base = self.base * self.scaling_factor
            inv = base ** (-self.inv_freq_base)
        else:
            base = self.base
            inv = base ** (-self.inv_freq_base)
        return inv.to(device)

    def forward(self, seq_len: int, device) -> Tuple[torch.Tensor, torch.Tensor]:
        # Create cache key using sequence length and device string
        device_str = str(device)
        cache_key = (seq_len, device_str)
        
        # Check if we have cached cos/sin tables for this configuration
        if cache_key in self._cos_sin_cache:
            cos, sin = self._cos_sin_cache[cache_key]
            # Verify the cached tensors are still on the correct device
            if cos.device == device and sin.device == device:
                return cos, sin
            else:
                # Remove stale cache entry if device changed
                del self._cos_sin_cache[cache_key]
        
        # Compute cos/sin tables if not cached
        inv_freq = self._inv_freq(device)                               # (half,)
        t = torch.arange(seq_len, device=device, dtype=inv_freq.dtype)  # (L,)
        freqs = torch.outer(t, inv_freq)                                # (L, half)
        emb = torch.cat((freqs, freqs), dim=-1)                         # (L, dim)
        cos = emb.cos().unsqueeze(0).unsqueeze(0)                       # (1,1,L,dim)
        sin = emb.sin().unsqueeze(0).unsqueeze(0)
        
        # Cache the computed tables
        self._cos_sin_cache[cache_key] = (cos, sin)
        
        return cos, sin
    
    def clear_cache(self):
        """Clear the cos/sin cache. Useful for memory management or when changing devices."""
        self._cos_sin_cache.clear()


def rotate_half(x):
    """Rotates half the hidden dims of the input."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Expand grouped key/value heads to match the number of query heads.

    x: (B, n_kv_head, T, D) -> (B, n_kv_head * n_rep, T, D).
    Used for grouped-query / multi-query attention; ``n_rep == 1`` is a no-op
    (plain multi-head attention).
    """
    if n_rep == 1:
        return x
    B, H, T, D = x.shape
    x = x[:, :, None, :, :].expand(B, H, n_rep, T, D)
    return x.reshape(B, H * n_rep, T, D)


def apply_rotary_pos_emb(q, k, cos, sin, position_ids=None):
    """
    Apply rotary position embedding to query and key tensors.

    q,k: (B, H, T, D)
    cos,sin: (1,1,L, D) where L >= max(position_ids)+1 (if provided) or >= T
    position_ids: (B, T) absolute positions for current tokens only
    """
    if position_ids is not None:
        # index cos/sin -> (B,1,T,D)
        cos = cos.squeeze(0).squeeze(0)         # (L, D)
        sin = sin.squeeze(0).squeeze(0)         # (L, D)
        cos = cos[position_ids].unsqueeze(1)    # (B,1,T,D)
        sin = sin[position_ids].unsqueeze(1)    # (B,1,T,D)
    # else broadcast (1,1,T,D) against q,k
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


class MultiHeadAttention(nn.Module):
    """
    Multi-head causal self-attention with RoPE.

    Supports three attention backends selected via ``config.attention_mode``:
      - ``"causal"``: ``is_causal=True`` (Flash Attention eligible, fastest)
      - ``"sdpa_mask"``: materialized additive mask with doc-boundary masking
      - ``"flex"``: PyTorch ``flex_attention`` with compiled block masks (experimental)
    """
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.n_head = config.n_head
        self.n_kv_head = config.kv_heads
        self.n_embd = config.n_embd
        self.head_dim = self.n_embd // self.n_head
        self.n_rep = self.n_head // self.n_kv_head

        assert self.n_embd % self.n_head == 0, "n_embd must be divisible by n_head"
        assert self.n_head % self.n_kv_head == 0, "n_head must be divisible by n_kv_head"

        q_dim = self.n_head * self.head_dim       # == n_embd
        kv_dim = self.n_kv_head * self.head_dim    # smaller under GQA/MQA

        # Separate Q/K/V projections so key/value can have fewer heads than
        # query (grouped-/multi-query attention).  With n_kv_head == n_head
        # this is exactly standard multi-head attention.
        self.q_proj = nn.Linear(self.n_embd, q_dim, bias=config.resolved_qkv_bias)
        self.k_proj = nn.Linear(self.n_embd, kv_dim, bias=config.resolved_qkv_bias)
        self.v_proj = nn.Linear(self.n_embd, kv_dim, bias=config.resolved_qkv_bias)
        self.c_proj = nn.Linear(q_dim, self.n_embd, bias=config.resolved_attn_out_bias)

        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)

    # ------------------------------------------------------------------
    # Attention backends
    # ------------------------------------------------------------------

    def _attn_causal(self, q, k, v):
        """Pure causal SDPA – enables the Flash Attention kernel."""
        return F.scaled_dot_product_attention(
            q, k, v,
            is_causal=True,
            dropout_p=self.config.dropout if self.training else 0.0,
        )

    def _attn_sdpa_mask(self, q, k, v, B, attention_mask, doc_ids):
        """SDPA with explicit additive mask (causal + doc-boundary + padding)."""
        NEG_INF = torch.finfo(q.dtype).min

        T_q, T_k = q.size(-2), k.size(-2)
        past_kv = T_k - T_q
        i = torch.arange(T_q, device=q.device)
        j = torch.arange(T_k, device=q.device)
        causal_bool = j.unsqueeze(0) > (past_kv + i.unsqueeze(1))

        add_mask = torch.zeros((T_q, T_k), device=q.device, dtype=q.dtype)
        add_mask = add_mask.masked_fill(causal_bool, NEG_INF)

        if doc_ids is not None and doc_ids.dim() == 2 and doc_ids.size(1) >= T_k:
            doc_ids_q = doc_ids[:, :T_q]
            doc_ids_k = doc_ids[:, :T_k]
            cross_doc_mask = doc_ids_q[:, :, None] != doc_ids_k[:, None, :]
            add_mask = add_mask.unsqueeze(0).expand(B, T_q, T_k)
            add_mask = add_mask.masked_fill(cross_doc_mask, NEG_INF)
            add_mask = add_mask.unsqueeze(1).expand(B, self.n_head, T_q, T_k)
        else:
            add_mask = add_mask.unsqueeze(0).unsqueeze(0).expand(B, self.n_head, T_q, T_k)

        if attention_mask is not None and attention_mask.dim() == 2 and attention_mask.size(1) == T_k:
            key_pad = ~attention_mask.to(torch.bool)
            pad_mask = key_pad[:, None, None, :].expand(B, self.n_head, T_q, T_k)
            add_mask = add_mask.masked_fill(pad_mask, NEG_INF)

        return F.scaled_dot_product_attention(
            q, k, v,
            attn_mask=add_mask,
            dropout_p=self.config.dropout if self.training else 0.0,
            is_causal=False,
        )

    def _attn_flex(self, q, k, v, B, doc_ids):
        """flex_attention with compiled block mask (PyTorch 2.5+)."""
        try:
            from torch.nn.attention.flex_attention import flex_attention, create_block_mask
        except ImportError:
            raise RuntimeError(
                "attention_mode='flex' requires PyTorch >= 2.5. "
                "Upgrade PyTorch or use 'causal' / 'sdpa_mask'."
            )

        T = q.size(-2)

        if doc_ids is None:
            def mask_fn(b, h, q_idx, kv_idx):
                return q_idx >= kv_idx
        else:
            _doc_ids = doc_ids
            def mask_fn(b, h, q_idx, kv_idx):
                causal = q_idx >= kv_idx
                same_doc = _doc_ids[b, q_idx] == _doc_ids[b, kv_idx]
                return causal & same_doc

        block_mask = create_block_mask(mask_fn, B=B, H=1, Q_LEN=T, KV_LEN=T, device=q.device)
        return flex_attention(q, k, v, block_mask=block_mask)

    def _attn_manual(self, q, k, v, B, attention_mask, doc_ids):
        """Manual attention fallback for CPU / older GPUs without SDPA."""
        scale = 1.0 / math.sqrt(k.size(-1))
        att = (q @ k.transpose(-2, -1)) * scale

        T_q = q.size(-2)
        T_k = k.size(-2)
        past_kv = T_k - T_q

        i = torch.arange(T_q, device=q.device)
        j = torch.arange(T_k, device=q.device)
        causal_mask = j.unsqueeze(0) > (past_kv + i.unsqueeze(1))
        att = att.masked_fill(causal_mask, float('-inf'))

        if doc_ids is not None and doc_ids.dim() == 2 and doc_ids.size(1) >= T_k:
            doc_ids_q = doc_ids[:, :T_q]
            doc_ids_k = doc_ids[:, :T_k]
            cross_doc_mask = doc_ids_q[:, :, None] != doc_ids_k[:, None, :]
            cross_doc_mask = cross_doc_mask.unsqueeze(1).expand(B, self.n_head, T_q, T_k)
            att = att.masked_fill(cross_doc_mask, float('-inf'))

        if attention_mask is not None:
            if attention_mask.size(1) == T_k:
                key_pad_mask = attention_mask.view(B, 1, 1, T_k) == 0
                att = att.masked_fill(key_pad_mask, float('-inf'))

        att_max = att.max(dim=-1, keepdim=True)[0]
        att_max = torch.clamp(att_max, max=0.0)
        att = att - att_max

        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        return att @ v

    # ------------------------------------------------------------------
    # Forward
    # ------------------------------------------------------------------

    def forward(
        self,
        hidden_states: torch.Tensor,
        rope_cos_sin: [Tuple[torch.Tensor, torch.Tensor]],
        attention_mask: Optional[torch.Tensor] = None,
        position_ids: Optional[torch.Tensor] = None,
        doc_ids: Optional[torch.Tensor] = None,
        use_cache: bool = False,
        past_key_value: Optional[Tuple[torch.Tensor, torch.Tensor]] = None,
    ) -> Tuple[torch.Tensor, Optional[Tuple[torch.Tensor, torch.Tensor]]]:

        B, T, C = hidden_states.size()

        q = self.q_proj(hidden_states).view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        k = self.k_proj(hidden_states).view(B, T, self.n_kv_head, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden_states).view(B, T, self.n_kv_head, self.head_dim).transpose(1, 2)

        cos, sin = rope_cos_sin
        if rope_cos_sin[0].dtype != q.dtype:
            cos = cos.to(dtype=q.dtype)
            sin = sin.to(dtype=q.dtype)
        q, k = apply_rotary_pos_emb(q, k, cos, sin, position_ids)

        if past_key_value is not None:
            past_key, past_value = past_key_value
            k = torch.cat([past_key, k], dim=-2)
            v = torch.cat([past_value, v], dim=-2)

        # Cache the compact (pre-expansion) K/V so GQA keeps its memory win.
        present = (k, v) if use_cache else None

        # Expand grouped K/V up to the query head count (no-op for plain MHA).
        if self.n_rep > 1:
            k = repeat_kv(k, self.n_rep)
            v = repeat_kv(v, self.n_rep)

        if hasattr(F, 'scaled_dot_product_attention'):
            mode = self.config.attention_mode
            has_kv_cache = past_key_value is not None

            if mode == "causal" and not has_kv_cache:
                y = self._attn_causal(q, k, v)
            elif mode == "flex" and not has_kv_cache:
                y = self._attn_flex(q, k, v, B, doc_ids)
            else:
                # sdpa_mask explicitly, or fallback for KV-cache decode
                y = self._attn_sdpa_mask(q, k, v, B, attention_mask, doc_ids)
        else:
            y = self._attn_manual(q, k, v, B, attention_mask, doc_ids)

        y = y.transpose(1, 2).contiguous().view(B, T, C)
        y = self.resid_dropout(self.c_proj(y))

        return y, present


# --- added for the zoo: the attention called as SimpleLLM.forward and TransformerBlock.forward call it ---
class GptSimpleAttentionLayer(nn.Module):
    def __init__(self, d, heads, context_length, kv_heads=None, use_bias=False, attention_mode="causal"):
        super().__init__()
        self.config = ModelConfig(n_embd=d, n_head=heads, n_kv_head=kv_heads, n_positions=context_length,
                                  use_bias=use_bias, attention_mode=attention_mode)
        self.attn = MultiHeadAttention(self.config)
        self.rotary_emb = RotaryPositionalEmbedding(dim=d // heads, base=self.config.rope_base,
                                                    scaling_type=self.config.rope_scaling_type,
                                                    scaling_factor=self.config.rope_scaling_factor)

    def forward(self, x):
        batch_size, seq_length, _ = x.shape
        position_ids = torch.arange(0, seq_length, dtype=torch.long, device=x.device).unsqueeze(0).expand(batch_size, -1)
        rope_cos_sin = self.rotary_emb(max(seq_length, self.config.n_positions), device=x.device)
        y, _ = self.attn(x, rope_cos_sin=rope_cos_sin, position_ids=position_ids, use_cache=False, past_key_value=None)
        return y

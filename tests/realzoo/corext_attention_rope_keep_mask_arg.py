"""corext's Attention ("COREX: A complete language model built entirely from scratch"): one fused qkv_proj chunked
[Q; K; V] without bias, out_proj without bias, a RotaryEmbedding module of its own (rotate-half, cos/sin cache kept
in PLAIN attributes, float32 inverse frequencies), a mask ARGUMENT (bool, True = attend) turned into an additive
0 / -inf mask, and a "logsumexp" softmax written out (max subtracted, log_softmax in float32, exp). Without a mask the
manual path masks nothing; the model always passes tril(ones(S, S)).bool().

Source: https://pypi.org/project/corext/ (corext 0.1.0; the wheel's METADATA names no repository), file
corext/model.py as released in corext 0.1.0 on PyPI.
Licence: MIT per the wheel's METADATA ("License: MIT"); the LICENSE file in its dist-info (licenses/LICENSE) is the
Apache License 2.0 text with its template copyright line unfilled. Both permissive; no copyright holder is named.
Copied: verbatim from the PyPI wheel corext==0.1.0 (pip download --no-deps): lines 1-14 of corext/model.py (its
module docstring, kept as a comment), lines 15, 17 and 20-22 (imports used), lines 28-113 (RotaryEmbedding) and
lines 188-330 (Attention). Line 25 (the package's config import) and the other imports serve the classes left out.
ADDED: this entry's constants and this docstring.
Truth: bug (dtypes). The softmax is computed as exp(log_softmax(scores.float())) and never cast back, and only
bfloat16 inputs are upcast (q_mat, k_mat, v_mat): for float64 and float16 inputs torch.matmul(attn_probs, v_mat)
raises "expected scalar type Float but found Double" (or Half), and for bfloat16 without autocast out_proj gets
float32. In float32 the math is right: Attention(dim, num_heads, dropout=0) called as
m(x, mask=tril(ones(n, n)).bool()) is the rotate-half rotary reference with W_q, W_k, W_v the rows of qkv_proj,
W_o = out_proj, no biases (relative 1e-7 against the float64 reference); no leak. Called as m(x) the future moves
the past. Lesson rules not followed: no output bias, no context length. Latent: the cos/sin cache is a plain
attribute keyed only by length, so after .to(device or dtype) it stays where and what it was.
"""
# (corext/model.py lines 1-14, its module docstring:)
# """COREX Production Model — Complete Transformer Architecture.
#
# This is the core transformer implementation with production-grade features:
# - Rotary Position Embeddings (RoPE) for relative positional encoding
# - Multi-head causal self-attention with proper numerical stability
# - SwiGLU gated feed-forward networks
# - Pre-LayerNorm via RMSNorm
# - Gradient checkpointing for memory-efficient training
# - FP32 upcast in attention to prevent underflow/overflow
# - Weight tying between embedding and LM head
#
# Architecture:
#   Input Tokens → Embedding → [Transformer Block]×N → RMSNorm → LM Head → Softmax
# """
import math
from typing import Optional, Tuple, List, Dict

import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "Attention"
TRUTH = "bug"
BUG = "softmax-left-in-float32-raises-for-float64"
RULE_GAPS = ("fused-qkv", "rope-rotate-half-own-module", "causal-only-through-mask-arg", "mask-bool-true-keep",
             "no-out-proj-bias", "no-context-length", "rope-cache-plain-attribute", "softmax-written-out")
FORWARD = "x, mask=None, use_flash_attn=False"
NOTES = ("Attention(dim, num_heads, dropout=0.1, base_freq=10000.0). forward(x, mask=None, use_flash_attn=False) -> "
         "(B, S, dim); mask (S, S) bool, True = attend; COREXModel passes tril(ones(S, S)).bool().")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("its forward raises for float64 input (the probabilities stay float32 and meet float64 values "
                    "at the matmul), a fault of the layer (float16 raises too); no known mistake is that")


# ═══════════════════════════════════════════════════════════
#  Rotary Positional Embeddings (RoPE)
# ═══════════════════════════════════════════════════════════

class RotaryEmbedding(nn.Module):
    """Rotary Position Embeddings (Su et al., 2021).
    
    Applies rotation to query/key vectors based on their position, 
    enabling the model to learn relative positions naturally and 
    extrapolate to longer sequences than trained on.
    
    The rotation angle for position i is θ_i = θ^(-i/d_model) where θ=10000.
    Query and Key vectors are rotated by different amounts depending on their 
    absolute positions, allowing the attention mechanism to detect relative distances.
    
    Args:
        dim: Half of the head dimension (freqs computed for dim/2 pairs)
        max_seq_len: Maximum sequence length the embeddings were trained on
        base: Base frequency parameter (default 10000 matches GPT-3/LLaMA)
    """

    def __init__(self, 
                 dim: int, 
                 max_seq_len: int = 2048, 
                 base: float = 10_000.0):
        super().__init__()
        self.dim = dim
        self.max_seq_len = max_seq_len
        self.base = base

        # Precompute inverse frequencies
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq)

        # Lazy cache for cos/sin tables (updated as needed)
        self._seq_len_cached = 0
        self._cos_cached = None
        self._sin_cached = None

    def _update_cache(self, seq_len: int, device: torch.device):
        """Update cached cos/sin values if we need a longer sequence."""
        if seq_len <= self._seq_len_cached:
            return
        
        self._seq_len_cached = seq_len
        t = torch.arange(seq_len, device=device, dtype=self.inv_freq.dtype)
        freqs = torch.einsum("i,j->ij", t.float(), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)  # (seq_len, dim)
        
        self._cos_cached = emb.cos().to(dtype=self.inv_freq.dtype)
        self._sin_cached = emb.sin().to(dtype=self.inv_freq.dtype)

    def forward(
        self, q: torch.Tensor, k: torch.Tensor
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """Apply RoPE rotation to query and key tensors.
        
        Args:
            q: (batch, heads, seq_len, head_dim) - query tensor
            k: (batch, heads, seq_len, head_dim) - key tensor
            
        Returns:
            Rotated q, k tensors with same shape as inputs
        """
        self._update_cache(q.shape[2], q.device)
        
        cos = self._cos_cached[:q.shape[2]]  # (seq_len, dim/2)
        sin = self._sin_cached[:q.shape[2]]

        def rotate_half(x: torch.Tensor) -> torch.Tensor:
            """Rotate half the dimensions of x by 90 degrees."""
            x1, x2 = x.chunk(2, dim=-1)
            return torch.cat((-x2, x1), dim=-1)

        # Apply rotation formula: [cos -sin; sin cos] * [q; k] for each frequency pair
        q_roped = (q * cos.unsqueeze(0).unsqueeze(0)) + \
                  (rotate_half(q) * sin.unsqueeze(0).unsqueeze(0))
        k_roped = (k * cos.unsqueeze(0).unsqueeze(0)) + \
                  (rotate_half(k) * sin.unsqueeze(0).unsqueeze(0))

        return q_roped, k_roped


# ═══════════════════════════════════════════════════════════
#  RMSNorm — Root Mean Square Layer Normalization
# ═══════════════════════════════════════════════════════════


# ═══════════════════════════════════════════════════════════
#  Multi-Head Attention with RoPE — Production Grade
# ═══════════════════════════════════════════════════════════

class Attention(nn.Module):
    """Multi-head causal self-attention with rotary positional encoding.
    
    This is the core attention mechanism of the transformer. It computes 
    scaled dot-product attention between queries and keys, then applies 
    the resulting attention weights to values.
    
    Key production features:
      - FP32 upcasting for numerical stability during matmul
      - logsumexp in softmax for gradient stability
      - Proper causal masking with flash attention compatibility
    
    Args:
        dim: Hidden dimension (must be divisible by num_heads)
        num_heads: Number of parallel attention heads
        dropout: Dropout applied to attention weights and output
        base_freq: Base frequency for RoPE (default 10000)
    """

    def __init__(self, dim: int, num_heads: int, dropout: float = 0.1, 
                 base_freq: float = 10_000.0):
        super().__init__()
        assert dim % num_heads == 0, f"dim {dim} must be divisible by num_heads {num_heads}"

        self.dim = dim
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        
        # Single linear layer for QKV projection — more efficient than three separate Liners
        self.qkv_proj = nn.Linear(dim, 3 * dim, bias=False)
        
        # Output projection
        self.out_proj = nn.Linear(dim, dim, bias=False)

        # Rotary embeddings per head dimension
        self.rope = RotaryEmbedding(self.head_dim, base_freq)
        
        # Dropout layers
        self.attn_dropout = nn.Dropout(dropout)    # Applied to attention weights
        self.resid_dropout = nn.Dropout(dropout)   # Applied to output

    def _split_heads(self, x: torch.Tensor):
        """Reshape (batch, seq, dim) → (batch, heads, seq, head_dim)."""
        batch, seq, _ = x.shape
        x = x.view(batch, seq, self.num_heads, self.head_dim)
        return x.transpose(1, 2)  # (B, H, S, D_head)

    def forward(self, 
                x: torch.Tensor, 
                mask: Optional[torch.Tensor] = None,
                use_flash_attn: bool = False) -> torch.Tensor:
        """Forward pass of multi-head causal attention.
        
        Production features:
          - FP32 upcast for matrix multiplications (prevents gradient underflow)
          - logsumexp trick in softmax (prevents gradient overflow)
          - Optional flash attention integration
        
        Args:
            x: Input tensor (batch, seq_len, hidden_dim)
            mask: Causal boolean mask (seq_len, seq_len) — True means attend
            use_flash_attn: Whether to use flash attention (requires CUDA + transformers lib)
            
        Returns:
            Attention output with same shape as input (batch, seq_len, hidden_dim)
        """
        batch_size, seq_len, _ = x.shape

        # QKV projections in a single matmul for efficiency
        qkv = self.qkv_proj(x)  # (B, S, 3*dim)
        
        # Split into Q, K, V tensors
        q, k, v = qkv.chunk(3, dim=-1)

        # Reshape to multi-head format: (B, H, S, D_head)
        q = self._split_heads(q)  
        k = self._split_heads(k)
        v = self._split_heads(v)

        # Apply rotary positional embeddings to Q and K
        q, k = self.rope(q, k)

        # Compute attention scores — this is where FP32 upcasting matters
        # Use float32 for the matmul to prevent gradient underflow with bf16 inputs
        attn_dtype = q.dtype
        
        if use_flash_attn and hasattr(F, 'scaled_dot_product_attention'):
            # Flash attention (if available via PyTorch 2.0+)
            q_fp32 = q.float() if attn_dtype == torch.bfloat16 else q
            k_fp32 = k.float() if attn_dtype == torch.bfloat16 else k
            v_fp32 = v.float() if attn_dtype == torch.bfloat16 else v
            
            mask_bool = None if mask is None else mask.bool()
            
            out = F.scaled_dot_product_attention(
                q_fp32, k_fp32, v_fp32, 
                attn_mask=mask_bool,  # bool mask: True = keep, False = mask
                dropout_p=self.attn_dropout.p if self.training else 0.0,
                is_causal=(mask is None),  # auto-detect causal if no explicit mask
            )
        else:
            # Standard scaled dot-product attention (works everywhere)
            
            # FP32 upcast for the matmul to ensure numerical stability
            q_mat = q.float() if attn_dtype == torch.bfloat16 else q
            k_mat = k.float() if attn_dtype == torch.bfloat16 else k
            
            # Scaled dot product: Q @ K^T / sqrt(d_k)  
            # We use float32 to prevent gradient underflow with bf16 inputs
            attn_scores = torch.matmul(q_mat, k_mat.transpose(-2, -1))
            attn_scores = attn_scores / math.sqrt(self.head_dim)  # Scale by sqrt(d_k)
            
            # Causal masking — set future tokens to -inf before softmax
            if mask is not None:
                # boolean mask: True means "allowed to attend"
                # Convert to float for masked_fill (True → 0, False → -inf)
                mask_float = mask.float().masked_fill(mask == 0, float('-inf')).masked_fill(mask == 1, 0.0)
                attn_scores = attn_scores + mask_float
            
            # logsumexp trick: subtract max for numerical stability in softmax
            max_vals = attn_scores.max(dim=-1, keepdim=True).values
            attn_stable = attn_scores - max_vals  # Subtract max for numerical stability
            
            # Compute log-softmax numerically stably: log(softmax(x)) = x - max(x) - log(sum(exp(x - max)))
            log_softmax = F.log_softmax(attn_stable.float(), dim=-1)
            attn_probs = torch.exp(log_softmax)  # Back to probability space
            
            attn_probs = self.attn_dropout(attn_probs)

            # Apply attention weights to values (FP32 upcast if needed)  
            v_mat = v.float() if attn_dtype == torch.bfloat16 else v
            out = torch.matmul(attn_probs, v_mat)  # (B, H, S, D_head)

        # Reassemble heads: (B, H, S, D_head) → (B, S, H*D_head) = (B, S, dim)
        out = out.transpose(1, 2).contiguous().view(batch_size, seq_len, self.dim)

        # Output projection and residual dropout
        return self.out_proj(self.resid_dropout(out))


"""MiniMind's (jingyaogong/minimind) Attention before "[update] prompt prefill": Llama/Qwen-style grouped-query attention with names of the transformers config (hidden_size, num_attention_heads, num_key_value_heads), q_proj/k_proj/v_proj/o_proj without bias, rotate-half RoPE with cos/sin tables passed in by the model (theta 1e6, float32), repeat_kv, SDPA is_causal=True (flash_attn) or an additive triu(-inf) mask, an optional (B, n) padding mask added as (1 - mask) * -1e9, a (k, v) KV cache passed in and returned: forward returns (output, past_kv).

Source: https://github.com/jingyaogong/minimind/blob/05d0b216f61e6fa278cdeec97cd6a93f7c529c34/model/model_minimind.py ("[update] show speed", 2026-01-07). Fixed upstream by 1279a61 ("[update] prompt prefill", 2026-01-13): the SDPA path is taken only when past_key_value is None, and the manual path adds the causal mask to the LAST seq_len key columns (`scores[:, :, :, -seq_len:] += torch.triu(...)`).
Licence: Apache-2.0 (LICENSE at the repository root; the file has no header).
Copied: verbatim from `git show 05d0b21:model/model_minimind.py` in the fetched history: the class MiniMindConfig, the imports `math`, `torch`, `torch.nn.init as init`, `torch.nn.functional as F`, `from torch import nn`, `from typing import Optional, Tuple, List, Union`, and precompute_freqs_cis, apply_rotary_pos_emb, repeat_kv and Attention. Left out: RMSNorm, the feed-forward and MoE classes, MiniMindBlock, MiniMindModel, MiniMindForCausalLM, and the transformers imports (ACT2FN, PreTrainedModel, GenerationMixin, CausalLMOutputWithPast). ADDED: a shim for `from transformers import PretrainedConfig` (the real one when installed), this entry's constants, and at the end a factory module MiniMindAttentionLayer(hidden_size, num_attention_heads, num_key_value_heads=None, max_position_embeddings=32768, flash_attn=True) that holds the Attention and the RoPE tables and slices them from start_pos = the cached length, as MiniMindModel.forward does (lines 389-411 of the same file).
Truth: without a cache, = the grouped-query reference with rotate-half RoPE (theta 1e6) on q and k, query head h using key/value head h // (H / KV), scores / sqrt(head_dim), to float32 precision of the cos/sin tables (relative ~1e-7), in both paths (flash_attn True and False); decoding ONE token per call with the cache is right too. The bug: a chunk of several new tokens after a cached prompt (chunked prefill, or a prompt continued) - the SDPA path applies is_causal=True to a (n, cached + n) score matrix, which PyTorch aligns to the TOP LEFT: new token i sees the first i + 1 cached tokens and none of the new ones, so the output differs from the full forward; the manual path (flash_attn=False) raises (a (n, n) mask added to (n, cached + n) scores).
"""
# --- added for the zoo: a shim for `from transformers import PretrainedConfig` (the real one when installed) ---
try:
    from transformers import PretrainedConfig
except ImportError:  # pragma: no cover - depends on the environment
    class PretrainedConfig:
        def __init__(self, **kwargs):
            for key, value in kwargs.items():
                setattr(self, key, value)
# --- end of shim; copied blocks follow, then the added factory ---
class MiniMindConfig(PretrainedConfig):
    model_type = "minimind"

    def __init__(
            self,
            dropout: float = 0.0,
            bos_token_id: int = 1,
            eos_token_id: int = 2,
            hidden_act: str = 'silu',
            hidden_size: int = 512,
            intermediate_size: int = None,
            max_position_embeddings: int = 32768,
            num_attention_heads: int = 8,
            num_hidden_layers: int = 8,
            num_key_value_heads: int = 2,
            vocab_size: int = 6400,
            rms_norm_eps: float = 1e-05,
            rope_theta: int = 1000000.0,
            inference_rope_scaling: bool = False,
            flash_attn: bool = True,
            ####################################################
            # Here are the specific configurations of MOE
            # When use_moe is false, the following is invalid
            ####################################################
            use_moe: bool = False,
            num_experts_per_tok: int = 2,
            n_routed_experts: int = 4,
            n_shared_experts: int = 1,
            scoring_func: str = 'softmax',
            aux_loss_alpha: float = 0.01,
            seq_aux: bool = True,
            norm_topk_prob: bool = True,
            **kwargs
    ):
        super().__init__(**kwargs)
        self.dropout = dropout
        self.bos_token_id = bos_token_id
        self.eos_token_id = eos_token_id
        self.hidden_act = hidden_act
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.max_position_embeddings = max_position_embeddings
        self.num_attention_heads = num_attention_heads
        self.num_hidden_layers = num_hidden_layers
        self.num_key_value_heads = num_key_value_heads
        self.vocab_size = vocab_size
        self.rms_norm_eps = rms_norm_eps
        self.rope_theta = rope_theta
        self.inference_rope_scaling = inference_rope_scaling
        # 外推长度 = factor * original_max_position_embeddings = 32768
        self.rope_scaling = {
            "beta_fast": 32,
            "beta_slow": 1,
            "factor": 16,
            "original_max_position_embeddings": 2048,
            "attention_factor": 1.0,
            "type": "yarn"
        } if self.inference_rope_scaling else None
        self.flash_attn = flash_attn
        ####################################################
        # Here are the specific configurations of MOE
        # When use_moe is false, the following is invalid
        ####################################################
        self.use_moe = use_moe
        self.num_experts_per_tok = num_experts_per_tok  # 每个token选择的专家数量
        self.n_routed_experts = n_routed_experts  # 总的专家数量
        self.n_shared_experts = n_shared_experts  # 共享专家
        self.scoring_func = scoring_func  # 评分函数，默认为'softmax'
        self.aux_loss_alpha = aux_loss_alpha  # 辅助损失的alpha参数
        self.seq_aux = seq_aux  # 是否在序列级别上计算辅助损失
        self.norm_topk_prob = norm_topk_prob  # 是否标准化top-k概率


# 📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘
#                                             MiniMind Model
# 📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘📘

import math
import torch
import torch.nn.init as init
import torch.nn.functional as F
from torch import nn
from typing import Optional, Tuple, List, Union

TARGET = "MiniMindAttentionLayer"
TRUTH = "bug"
BUG = "KV cache + several new tokens: is_causal on (n, cached + n) scores sees the wrong keys (fixed upstream in 1279a61)"
RULE_GAPS = ("config-object", "grouped-query", "rope", "needs-rope-args", "float32-rope", "kv-cache-argument",
             "tuple-output", "no-qkv-bias", "no-out-proj-bias", "no-context-length")
FORWARD = "x, past_key_value=None, use_cache=False"
NOTES = ("MiniMindAttentionLayer(hidden_size, num_attention_heads, num_key_value_heads=None, max_position_embeddings"
         "=32768, flash_attn=True) (added factory) -> attn = Attention(MiniMindConfig(...)). forward returns (output, "
         "past_kv), past_kv = (k, v) of shape (B, cached + n, KV, head_dim) when use_cache. Weights attn.q_proj (H * "
         "dh, d), attn.k_proj / attn.v_proj (KV * dh, d), attn.o_proj (d, H * dh), no biases; buffers freqs_cos, "
         "freqs_sin (max_position_embeddings, dh).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = None
EXPECTED_BECAUSE = ('the full forward is right (grouped-query attention with RoPE) and so is one token per call with the '
                    'cache; kv-cache fails on two new tokens in one call after the prompt (is_causal aligned to the '
                    'top left), a cache bug no catalogued mistake names')

def precompute_freqs_cis(dim: int, end: int = int(32 * 1024), rope_base: float = 1e6,
                         rope_scaling: Optional[dict] = None):
    freqs, attn_factor = 1.0 / (rope_base ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim)), 1.0
    if rope_scaling is not None:
        orig_max, factor, beta_fast, beta_slow, attn_factor = (
            rope_scaling.get("original_max_position_embeddings", 2048), rope_scaling.get("factor", 16),
            rope_scaling.get("beta_fast", 32.0), rope_scaling.get("beta_slow", 1.0), rope_scaling.get("attention_factor", 1.0)
        )
        if end / orig_max > 1.0:
            # YaRN: f'(i) = f(i)((1-γ) + γ/s), where γ∈[0,1] is linear ramp
            inv_dim = lambda b: (dim * math.log(orig_max / (b * 2 * math.pi))) / (2 * math.log(rope_base))
            low, high = max(math.floor(inv_dim(beta_fast)), 0), min(math.ceil(inv_dim(beta_slow)), dim // 2 - 1)
            ramp = torch.clamp((torch.arange(dim // 2, device=freqs.device).float() - low) / max(high - low, 0.001), 0, 1)
            freqs = freqs * (1 - ramp + ramp / factor)

    t = torch.arange(end, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    freqs_cos = torch.cat([torch.cos(freqs), torch.cos(freqs)], dim=-1) * attn_factor
    freqs_sin = torch.cat([torch.sin(freqs), torch.sin(freqs)], dim=-1) * attn_factor
    return freqs_cos, freqs_sin


def apply_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
    def rotate_half(x):
        return torch.cat((-x[..., x.shape[-1] // 2:], x[..., : x.shape[-1] // 2]), dim=-1)

    q_embed = (q * cos.unsqueeze(unsqueeze_dim)) + (rotate_half(q) * sin.unsqueeze(unsqueeze_dim))
    k_embed = (k * cos.unsqueeze(unsqueeze_dim)) + (rotate_half(k) * sin.unsqueeze(unsqueeze_dim))
    return q_embed, k_embed


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """torch.repeat_interleave(x, dim=2, repeats=n_rep)"""
    bs, slen, num_key_value_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return (
        x[:, :, :, None, :].expand(bs, slen, num_key_value_heads, n_rep, head_dim).reshape(bs, slen, num_key_value_heads * n_rep, head_dim)
    )


class Attention(nn.Module):
    def __init__(self, args: MiniMindConfig):
        super().__init__()
        self.num_key_value_heads = args.num_attention_heads if args.num_key_value_heads is None else args.num_key_value_heads
        assert args.num_attention_heads % self.num_key_value_heads == 0
        self.n_local_heads = args.num_attention_heads
        self.n_local_kv_heads = self.num_key_value_heads
        self.n_rep = self.n_local_heads // self.n_local_kv_heads
        self.head_dim = args.hidden_size // args.num_attention_heads
        self.q_proj = nn.Linear(args.hidden_size, args.num_attention_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(args.hidden_size, self.num_key_value_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(args.hidden_size, self.num_key_value_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(args.num_attention_heads * self.head_dim, args.hidden_size, bias=False)
        self.attn_dropout = nn.Dropout(args.dropout)
        self.resid_dropout = nn.Dropout(args.dropout)
        self.dropout = args.dropout
        self.flash = hasattr(torch.nn.functional, 'scaled_dot_product_attention') and args.flash_attn
        # print("WARNING: using slow attention. Flash Attention requires PyTorch >= 2.0")

    def forward(self,
                x: torch.Tensor,
                position_embeddings: Tuple[torch.Tensor, torch.Tensor],  # 修改为接收cos和sin
                past_key_value: Optional[Tuple[torch.Tensor, torch.Tensor]] = None,
                use_cache=False,
                attention_mask: Optional[torch.Tensor] = None):
        bsz, seq_len, _ = x.shape
        xq, xk, xv = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        xq = xq.view(bsz, seq_len, self.n_local_heads, self.head_dim)
        xk = xk.view(bsz, seq_len, self.n_local_kv_heads, self.head_dim)
        xv = xv.view(bsz, seq_len, self.n_local_kv_heads, self.head_dim)

        cos, sin = position_embeddings
        xq, xk = apply_rotary_pos_emb(xq, xk, cos[:seq_len], sin[:seq_len])

        # kv_cache实现
        if past_key_value is not None:
            xk = torch.cat([past_key_value[0], xk], dim=1)
            xv = torch.cat([past_key_value[1], xv], dim=1)
        past_kv = (xk, xv) if use_cache else None

        xq, xk, xv = (
            xq.transpose(1, 2),
            repeat_kv(xk, self.n_rep).transpose(1, 2),
            repeat_kv(xv, self.n_rep).transpose(1, 2)
        )

        if self.flash and seq_len > 1 and (attention_mask is None or torch.all(attention_mask == 1)):
            output = F.scaled_dot_product_attention(xq, xk, xv, dropout_p=self.dropout if self.training else 0.0, is_causal=True)
        else:
            scores = (xq @ xk.transpose(-2, -1)) / math.sqrt(self.head_dim)
            scores = scores + torch.triu(
                torch.full((seq_len, seq_len), float("-inf"), device=scores.device),
                diagonal=1
            ).unsqueeze(0).unsqueeze(0)  # scores+mask

            if attention_mask is not None:
                extended_attention_mask = attention_mask.unsqueeze(1).unsqueeze(2)
                extended_attention_mask = (1.0 - extended_attention_mask) * -1e9
                scores = scores + extended_attention_mask

            scores = F.softmax(scores.float(), dim=-1).type_as(xq)
            scores = self.attn_dropout(scores)
            output = scores @ xv

        output = output.transpose(1, 2).reshape(bsz, seq_len, -1)
        output = self.resid_dropout(self.o_proj(output))
        return output, past_kv



# --- added for the zoo: the factory (what MiniMindModel.__init__ and forward do for one layer) ---
class MiniMindAttentionLayer(nn.Module):
    def __init__(self, hidden_size, num_attention_heads, num_key_value_heads=None, max_position_embeddings=32768,
                 flash_attn=True):
        super().__init__()
        config = MiniMindConfig(hidden_size=hidden_size, num_attention_heads=num_attention_heads,
                                num_key_value_heads=num_key_value_heads, max_position_embeddings=max_position_embeddings,
                                flash_attn=flash_attn)
        self.attn = Attention(config)
        freqs_cos, freqs_sin = precompute_freqs_cis(dim=config.hidden_size // config.num_attention_heads,
                                                    end=config.max_position_embeddings, rope_base=config.rope_theta,
                                                    rope_scaling=config.rope_scaling)
        self.register_buffer("freqs_cos", freqs_cos, persistent=False)
        self.register_buffer("freqs_sin", freqs_sin, persistent=False)

    def forward(self, x, past_key_value=None, use_cache=False):
        start_pos = past_key_value[0].shape[1] if past_key_value is not None else 0
        position_embeddings = (self.freqs_cos[start_pos:start_pos + x.shape[1]],
                               self.freqs_sin[start_pos:start_pos + x.shape[1]])
        return self.attn(x, position_embeddings, past_key_value=past_key_value, use_cache=use_cache)

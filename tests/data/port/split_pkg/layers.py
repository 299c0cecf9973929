"""Layers the model file of this package imports: a bidirectional attention module whose
computation lives in a processor object (one processor class shared by self- and
cross-attention), an RMS norm for the query and key heads, a feed-forward whose GELU mode
is a module attribute, and a final norm modulated as ``(1 + scale)[:, None, :]``."""

import torch
import torch.nn.functional as F
from torch import nn


class HeadRMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, hidden_states):
        dtype = hidden_states.dtype
        variance = hidden_states.float().pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states.float() * torch.rsqrt(variance + self.eps)
        return (self.weight * hidden_states).to(dtype)


class SharedAttnProcessor:
    """Every query attends to every key (no mask)."""

    def __call__(self, attn, hidden_states, encoder_hidden_states=None):
        context = hidden_states if encoder_hidden_states is None else encoder_hidden_states
        b, n, _ = hidden_states.shape
        query = attn.to_q(hidden_states).view(b, n, attn.heads, -1).transpose(1, 2)
        key = attn.to_k(context).view(b, context.shape[1], attn.heads, -1).transpose(1, 2)
        value = attn.to_v(context).view(b, context.shape[1], attn.heads, -1).transpose(1, 2)
        query = attn.norm_q(query)
        key = attn.norm_k(key)
        out = F.scaled_dot_product_attention(query, key, value, dropout_p=0.0, is_causal=False)
        out = out.transpose(1, 2).reshape(b, n, -1)
        return attn.to_out(out)


class Attention(nn.Module):
    def __init__(self, dim, heads, cross_dim=None):
        super().__init__()
        self.heads = heads
        head_dim = dim // heads
        self.to_q = nn.Linear(dim, dim)
        self.to_k = nn.Linear(cross_dim or dim, dim)
        self.to_v = nn.Linear(cross_dim or dim, dim)
        self.norm_q = HeadRMSNorm(head_dim)
        self.norm_k = HeadRMSNorm(head_dim)
        self.to_out = nn.Linear(dim, dim)
        self.processor = SharedAttnProcessor()

    def forward(self, hidden_states, encoder_hidden_states=None):
        return self.processor(self, hidden_states, encoder_hidden_states)


class FeedForward(nn.Module):
    def __init__(self, dim, mult=4, approximate="tanh"):
        super().__init__()
        self.proj_in = nn.Linear(dim, dim * mult)
        self.proj_out = nn.Linear(dim * mult, dim)
        self.approximate = approximate

    def forward(self, hidden_states):
        return self.proj_out(F.gelu(self.proj_in(hidden_states), approximate=self.approximate))


class ModulatedNorm(nn.Module):
    """The final norm modulated by the pooled text: a LayerNorm, or an RMS norm when
    asked for one (built in a branch)."""

    def __init__(self, dim, kind="layer_norm"):
        super().__init__()
        self.linear = nn.Linear(dim, 2 * dim)
        if kind == "layer_norm":
            self.norm = nn.LayerNorm(dim, eps=1e-6, elementwise_affine=False)
        else:
            self.norm = HeadRMSNorm(dim)

    def forward(self, x, pooled):
        scale, shift = self.linear(F.silu(pooled)).chunk(2, dim=1)
        return self.norm(x) * (1 + scale)[:, None, :] + shift[:, None, :]

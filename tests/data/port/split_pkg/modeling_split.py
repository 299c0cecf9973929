"""A transformer over image tokens with text conditioning; its attention, norm and
feed-forward classes come from the sibling module ``layers``."""

import torch
from torch import nn

from .layers import Attention, FeedForward, ModulatedNorm


class SplitBlock(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.attn1 = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.attn2 = Attention(dim, heads, cross_dim=dim)
        self.norm3 = nn.LayerNorm(dim, eps=1e-6)
        self.ff = FeedForward(dim)
        self.modulation = nn.Linear(dim, 2 * dim)

    def forward(self, hidden_states, encoder_hidden_states):
        cond = encoder_hidden_states.mean(dim=1)
        shift, scale = self.modulation(torch.nn.functional.silu(cond)).chunk(2, dim=-1)
        h = self.norm1(hidden_states) * (1 + scale[:, None]) + shift[:, None]
        hidden_states = hidden_states + self.attn1(h)
        h = self.norm2(hidden_states)
        hidden_states = hidden_states + self.attn2(h, encoder_hidden_states)
        return hidden_states + self.ff(self.norm3(hidden_states))


class SplitModel(nn.Module):
    def __init__(self, hidden_size, num_heads, num_layers):
        super().__init__()
        self.blocks = nn.ModuleList(SplitBlock(hidden_size, num_heads) for _ in range(num_layers))
        self.norm_out = ModulatedNorm(hidden_size)

    def forward(self, hidden_states, encoder_hidden_states):
        for block in self.blocks:
            hidden_states = block(hidden_states, encoder_hidden_states)
        return self.norm_out(hidden_states, encoder_hidden_states.mean(dim=1))

"""A GPT-style block written for the port tests: a LayerNorm class with an optional bias
through the functional call, bidirectional self-attention, an MLP with an nn.GELU() module,
and an adaLN final norm whose LayerNorm keeps its affine weight and bias."""

import torch
import torch.nn.functional as F
from torch import nn


class BiasedLayerNorm(nn.Module):
    def __init__(self, ndim: int, bias: bool = True):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class Mlp(nn.Module):
    def __init__(self, hidden_size: int):
        super().__init__()
        self.fc_in = nn.Linear(hidden_size, 4 * hidden_size)
        self.act = nn.GELU()
        self.fc_out = nn.Linear(4 * hidden_size, hidden_size)

    def forward(self, x):
        return self.fc_out(self.act(self.fc_in(x)))


class GptLnBlock(nn.Module):
    def __init__(self, hidden_size: int, num_heads: int):
        super().__init__()
        self.heads = num_heads
        self.ln_1 = BiasedLayerNorm(hidden_size)
        self.qkv = nn.Linear(hidden_size, 3 * hidden_size)
        self.proj = nn.Linear(hidden_size, hidden_size)
        self.ln_2 = BiasedLayerNorm(hidden_size)
        self.mlp = Mlp(hidden_size)
        self.cond = nn.Linear(hidden_size, 2 * hidden_size)
        self.final_norm = nn.LayerNorm(hidden_size, eps=1e-6)

    def forward(self, x, c):
        b, n, h = x.shape
        y = self.qkv(self.ln_1(x)).reshape(b, n, 3, self.heads, h // self.heads)
        q, k, v = y.permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(y.transpose(1, 2).reshape(b, n, h))
        x = x + self.mlp(self.ln_2(x))
        shift, scale = self.cond(c).chunk(2, dim=-1)
        return (1 + scale.unsqueeze(1)) * self.final_norm(x) + shift.unsqueeze(1)

"""A GPT-style stack written for the port tests the way research code often writes it:
torch LayerNorm modules called as attributes (one kept in a ModuleDict), a GELU written
out in a small class's forward (the tanh formula), and causal attention spelled out
(scores scaled, masked_fill with a registered lower-triangular buffer, softmax, a dropout
module, the product with the values)."""

import math

import torch
from torch import nn


class TanhGelu(nn.Module):
    def forward(self, h):
        cubic = 0.044715 * h**3
        return h * 0.5 * (1 + torch.tanh(math.sqrt(2 / math.pi) * (h + cubic)))


class TanhGeluInline(nn.Module):
    def forward(self, h):
        return h * 0.5 * (1 + torch.tanh(0.7978845608 * (h + 0.044715 * h**3)))


class MaskedAttention(nn.Module):
    def __init__(self, width: int, heads: int, span: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        self.drop = nn.Dropout(0.0)
        self.register_buffer("lower", torch.tril(torch.ones(span, span, dtype=torch.bool)))

    def forward(self, x):
        b, n, w = x.shape
        a, c, d = self.qkv(x).chunk(3, dim=-1)
        a = a.view(b, n, self.heads, w // self.heads).transpose(1, 2)
        c = c.view(b, n, self.heads, w // self.heads).transpose(1, 2)
        d = d.view(b, n, self.heads, w // self.heads).transpose(1, 2)
        scores = torch.matmul(a, c.transpose(-1, -2)) / math.sqrt(a.shape[-1])
        scores = scores.masked_fill(~self.lower[:n, :n], float("-inf"))
        weights = self.drop(scores.softmax(dim=-1))
        mixed = weights @ d
        return self.out(mixed.transpose(1, 2).reshape(b, n, w))


class WrittenBlock(nn.Module):
    def __init__(self, width: int, heads: int, span: int):
        super().__init__()
        self.pre = nn.LayerNorm(width, eps=1e-6)
        self.attn = MaskedAttention(width, heads, span)
        self.ff = nn.ModuleDict(
            dict(norm=nn.LayerNorm(width), up=nn.Linear(width, 4 * width), act=TanhGelu())
        )
        self.down = nn.Linear(4 * width, width)

    def forward(self, x):
        x = x + self.attn(self.pre(x))
        return x + self.down(self.ff.act(self.ff.up(self.ff.norm(x))))


class WrittenGpt(nn.Module):
    def __init__(self, hidden_size: int, num_heads: int, max_len: int = 64):
        super().__init__()
        self.blocks = nn.ModuleList([WrittenBlock(hidden_size, num_heads, max_len)])
        self.head_up = nn.Linear(hidden_size, 2 * hidden_size)
        self.head_act = TanhGeluInline()
        self.final = nn.LayerNorm(2 * hidden_size, elementwise_affine=False)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.final(self.head_act(self.head_up(x)))

"""A small decoder written for the port tests: attention through flash-attn when it
imports (padded batches, a sliding window on every other layer) and packed sequences
through the varlen entry point; SDPA-free, so without flash-attn it cannot run."""

from dataclasses import dataclass

import torch
from torch import nn

try:
    from flash_attn import flash_attn_func, flash_attn_varlen_func
except ImportError:  # the test machine: kb verify puts its CPU stand-ins in place
    flash_attn_func = flash_attn_varlen_func = None


@dataclass
class ModelArgs:
    dim: int = 256
    n_layers: int = 4
    n_heads: int = 8
    n_kv_heads: int = 2
    vocab_size: int = 500
    ffn_dim: int = 512
    window: int = 5
    max_seq_len: int = 64


class Attention(nn.Module):
    def __init__(self, args: ModelArgs, layer: int):
        super().__init__()
        self.n_heads = args.n_heads
        self.n_kv = args.n_kv_heads
        self.head_dim = args.dim // args.n_heads
        self.window = args.window if layer % 2 else -1
        self.wq = nn.Linear(args.dim, args.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(args.dim, args.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(args.dim, args.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(args.n_heads * self.head_dim, args.dim, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, self.n_heads, self.head_dim)
        k = self.wk(x).view(b, s, self.n_kv, self.head_dim)
        v = self.wv(x).view(b, s, self.n_kv, self.head_dim)
        out = flash_attn_func(
            q, k, v, 0.0, softmax_scale=None, causal=True, window_size=(self.window, self.window)
        )
        return self.wo(out.reshape(b, s, -1))


class PackedAttention(nn.Module):
    """Several sequences of different lengths packed along one token axis."""

    def __init__(self, args: ModelArgs):
        super().__init__()
        self.n_heads = args.n_heads
        self.head_dim = args.dim // args.n_heads
        self.qkv = nn.Linear(args.dim, 3 * args.dim, bias=False)
        self.proj = nn.Linear(args.dim, args.dim, bias=False)

    def forward(self, x, lengths):
        b, s, d = x.shape
        tokens = x.reshape(b * s, d)
        keep = (torch.arange(b * s) % s) < s - (torch.arange(b * s) // s)
        tokens = tokens[keep]
        seqlens = torch.tensor([s - i for i in range(b)], dtype=torch.int32)
        cu = torch.nn.functional.pad(torch.cumsum(seqlens, 0, dtype=torch.int32), (1, 0))
        q, k, v = self.qkv(tokens).view(-1, 3, self.n_heads, self.head_dim).unbind(1)
        out = flash_attn_varlen_func(
            q,
            k,
            v,
            cu_seqlens_q=cu,
            cu_seqlens_k=cu,
            max_seqlen_q=s,
            max_seqlen_k=s,
            dropout_p=0.0,
            causal=True,
        )
        full = torch.zeros(b * s, d, dtype=x.dtype)
        full[keep] = self.proj(out.reshape(out.shape[0], d))
        return full.view(b, s, d)


class Block(nn.Module):
    def __init__(self, args: ModelArgs, layer: int):
        super().__init__()
        self.attention = Attention(args, layer)
        self.packed = PackedAttention(args)
        self.norm1 = nn.LayerNorm(args.dim)
        self.norm2 = nn.LayerNorm(args.dim)

    def forward(self, x):
        h = x + self.attention(self.norm1(x))
        return h + self.packed(self.norm2(h), None)


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.tok_embeddings = nn.Embedding(args.vocab_size, args.dim)
        self.layers = nn.ModuleList(Block(args, i) for i in range(args.n_layers))
        self.output = nn.Linear(args.dim, args.vocab_size, bias=False)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h)
        return self.output(h)

"""A small decoder whose even layers attend over a sliding window, written for the port
tests: the model builds one mask per kind of layer and each layer adds the one it is
given to its scores (the way library models keep the window out of the attention code)."""

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class ModelArgs:
    """Sizes of the model (a params.json overrides them)."""

    dim: int = 512
    n_layers: int = 4
    n_heads: int = 8
    n_kv_heads: int = 2
    vocab_size: int = 1000
    sliding_window: int = 256
    norm_eps: float = 1e-6
    softcap: float | None = None


def positions_mask(s, window, dtype):
    """Additive [s, s] mask: causal, and within the window when one is given."""
    q = torch.arange(s)[:, None]
    k = torch.arange(s)[None, :]
    keep = k <= q
    if window is not None:
        keep = keep & (k > q - window)  # the query and the window - 1 keys before it
    return torch.zeros(s, s, dtype=dtype).masked_fill(~keep, torch.finfo(dtype).min)


def rotate_halves(x, cos, sin):
    """RoPE on the two halves of x; cos/sin are as wide as a half."""
    first, second = torch.chunk(x, 2, dim=-1)
    out_first = first * cos - second * sin
    out_second = second * cos + first * sin
    return torch.cat((out_first, out_second), dim=-1)


def half_tables(head_dim, seq_len, dtype):
    inv = 1.0 / (10000.0 ** (torch.arange(0, head_dim, 2).float() / head_dim))
    ang = torch.outer(torch.arange(seq_len).float(), inv)
    return ang.cos().to(dtype), ang.sin().to(dtype)


class Attention(nn.Module):
    def __init__(self, args: ModelArgs, layer_id: int):
        super().__init__()
        self.is_causal = True
        self.n_heads = args.n_heads
        self.n_rep = args.n_heads // args.n_kv_heads
        self.head_dim = args.dim // args.n_heads
        self.scale = self.head_dim**-0.5
        self.softcap = args.softcap
        self.sliding_window = args.sliding_window if layer_id % 2 == 0 else None
        self.wq = nn.Linear(args.dim, args.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(args.dim, args.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(args.dim, args.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(args.n_heads * self.head_dim, args.dim, bias=False)

    def forward(self, x, mask):
        b, s, _ = x.shape
        cos, sin = half_tables(self.head_dim, s, x.dtype)
        q = self.wq(x).view(b, s, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        q = rotate_halves(q, cos, sin)
        k = rotate_halves(k, cos, sin)
        k = k.repeat_interleave(self.n_rep, dim=1)
        v = v.repeat_interleave(self.n_rep, dim=1)
        scores = torch.matmul(q, k.transpose(2, 3)) * self.scale
        if self.softcap is not None:
            scores = scores / self.softcap
            scores = torch.tanh(scores) * self.softcap
        scores = scores + mask
        probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)
        out = torch.matmul(probs, v)
        return self.wo(out.transpose(1, 2).reshape(b, s, -1))


class Block(nn.Module):
    def __init__(self, args: ModelArgs, layer_id: int):
        super().__init__()
        self.attention = Attention(args, layer_id)
        self.norm = nn.LayerNorm(args.dim, eps=args.norm_eps)

    def forward(self, x, masks):
        return x + self.attention(self.norm(x), masks[self.attention.sliding_window is None])


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        self.tok_embeddings = nn.Embedding(args.vocab_size, args.dim)
        self.layers = nn.ModuleList(Block(args, i) for i in range(args.n_layers))
        self.output = nn.Linear(args.dim, args.vocab_size, bias=False)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        s = tokens.shape[1]
        masks = (
            positions_mask(s, self.args.sliding_window, h.dtype),
            positions_mask(s, None, h.dtype),
        )
        for layer in self.layers:
            h = layer(h, masks)
        return self.output(h)

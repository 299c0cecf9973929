"""A small decoder whose every layer attends over one sliding window from its config, for
the port tests: the attention class hands the window by keyword to a module-level
attention function that takes it in ``**kwargs`` and never reads it (the model's mask
already holds the window), the way library models pass a window to other kernels."""

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class ModelArgs:
    """Sizes of the model (a params.json overrides them)."""

    dim: int = 512
    n_layers: int = 2
    n_heads: int = 8
    n_kv_heads: int = 2
    vocab_size: int = 1000
    sliding_window: int | None = 4
    norm_eps: float = 1e-6


def band_mask(s, window, dtype):
    """Additive [s, s] mask: causal, and within the window when one is given."""
    q = torch.arange(s)[:, None]
    k = torch.arange(s)[None, :]
    keep = k <= q
    if window is not None:
        keep = keep & (k > q - window)  # the query and the window - 1 keys before it
    return torch.zeros(s, s, dtype=dtype).masked_fill(~keep, torch.finfo(dtype).min)


def attend(module, q, k, v, mask, scaling, **kwargs):
    """Written-out attention over [B, N, S, D]; extra keywords are for other kernels."""
    k = k.repeat_interleave(module.n_rep, dim=1)
    v = v.repeat_interleave(module.n_rep, dim=1)
    scores = torch.matmul(q, k.transpose(2, 3)) * scaling
    scores = scores + mask
    probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)
    return torch.matmul(probs, v)


class Attention(nn.Module):
    def __init__(self, config: ModelArgs):
        super().__init__()
        self.config = config
        self.is_causal = True
        self.n_heads = config.n_heads
        self.n_rep = config.n_heads // config.n_kv_heads
        self.head_dim = config.dim // config.n_heads
        self.wq = nn.Linear(config.dim, config.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(config.dim, config.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(config.dim, config.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(config.n_heads * self.head_dim, config.dim, bias=False)

    def forward(self, x, mask):
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        out = attend(
            self,
            q,
            k,
            v,
            mask,
            self.head_dim**-0.5,
            sliding_window=getattr(self.config, "sliding_window", None),
        )
        return self.wo(out.transpose(1, 2).reshape(b, s, -1))


class Block(nn.Module):
    def __init__(self, config: ModelArgs):
        super().__init__()
        self.attention = Attention(config)
        self.norm = nn.LayerNorm(config.dim, eps=config.norm_eps)

    def forward(self, x, mask):
        return x + self.attention(self.norm(x), mask)


class Transformer(nn.Module):
    def __init__(self, config: ModelArgs):
        super().__init__()
        self.config = config
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.dim)
        self.layers = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.output = nn.Linear(config.dim, config.vocab_size, bias=False)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        mask = band_mask(tokens.shape[1], self.config.sliding_window, h.dtype)
        for layer in self.layers:
            h = layer(h, mask)
        return self.output(h)

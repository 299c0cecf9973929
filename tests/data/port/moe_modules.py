"""Mixture-of-experts blocks with one module per expert, written for the port tests.

The expert MLP activates the projection called ``lift`` and multiplies it with
``proj_in``: the gate is what the activation reaches, whatever its name.  ``TopKExperts``
loops over every expert index in a method of its own (one_hot masks, a float32
accumulator); ``BiasedExperts`` iterates the module list itself, its experts add biases
and the sum is written with ``acc[rows] += ...`` (a counter bound before the loop is rebound
in it); ``ScaledInputExperts`` scales the
experts' inputs by the routing weights (not their outputs), which the routed pass does
not compute, so the port leaves it as it is; ``SortedExperts`` sorts the tokens by expert,
runs each expert on its slice, puts the outputs back in order and sums them weighted
(the result kept in the name its input came in)."""

import torch
import torch.nn.functional as F
from torch import nn


class GatedExpert(nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int, bias: bool = False):
        super().__init__()
        self.proj_in = nn.Linear(hidden_size, intermediate_size, bias=bias)
        self.lift = nn.Linear(hidden_size, intermediate_size, bias=bias)
        self.proj_out = nn.Linear(intermediate_size, hidden_size, bias=bias)

    def forward(self, x):
        h = self.proj_in(x)
        h = F.silu(self.lift(x)) * h
        return self.proj_out(h)


def pick(router: nn.Linear, x: torch.Tensor, k: int):
    probs = F.softmax(router(x), dim=-1, dtype=torch.float)
    weights, ids = torch.topk(probs, k, dim=-1)
    return ids, (weights / weights.sum(dim=-1, keepdim=True)).to(x.dtype)


class TopKExperts(nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int, num_experts: int):
        super().__init__()
        self.experts = nn.ModuleList(
            [GatedExpert(hidden_size, intermediate_size) for _ in range(num_experts)]
        )

    def dispatch(self, tokens, ids, weights):
        acc = torch.zeros_like(tokens, dtype=torch.float32)
        mask = F.one_hot(ids, num_classes=len(self.experts)).permute(2, 0, 1)
        for i in range(len(self.experts)):
            expert = self.experts[i]
            token_idx, slot = torch.where(mask[i])
            if token_idx.numel() > 0:
                scale = weights[token_idx, slot]
                y = expert(tokens[token_idx]) * scale.unsqueeze(-1)
                acc.index_add_(0, token_idx, y.to(acc.dtype))
        return acc.to(tokens.dtype)

    def forward(self, tokens, ids, weights):
        return self.dispatch(tokens, ids, weights)


class BiasedExperts(nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int, num_experts: int):
        super().__init__()
        self.experts = nn.ModuleList(
            GatedExpert(hidden_size, intermediate_size, bias=True) for _ in range(num_experts)
        )
        for expert in self.experts:  # visible biases (nn.Linear starts them near zero)
            for lin in (expert.proj_in, expert.lift, expert.proj_out):
                nn.init.uniform_(lin.bias, -0.5, 0.5)

    def forward(self, tokens, ids, weights):
        acc = torch.zeros_like(tokens)
        seen = 0  # rows routed so far (rebound in the loop)
        for e, expert in enumerate(self.experts):
            rows, slot = torch.where(ids == e)
            seen = seen + rows.numel()
            if rows.numel() == 0:
                continue
            acc[rows] += expert(tokens[rows]) * weights[rows, slot, None]
        return acc


class ScaledInputExperts(nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int, num_experts: int):
        super().__init__()
        self.experts = nn.ModuleList(
            GatedExpert(hidden_size, intermediate_size) for _ in range(num_experts)
        )

    def forward(self, tokens, ids, weights):
        acc = torch.zeros_like(tokens)
        for e, expert in enumerate(self.experts):
            rows, slot = torch.where(ids == e)
            acc.index_add_(0, rows, expert(tokens[rows] * weights[rows, slot, None]))
        return acc


class SortedExperts(nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int, num_experts: int):
        super().__init__()
        self.experts = nn.ModuleList(
            GatedExpert(hidden_size, intermediate_size) for _ in range(num_experts)
        )

    @torch.no_grad()
    def grouped(self, x, expert_ids, expert_weights):
        k = expert_ids.shape[1]
        flat = expert_ids.reshape(-1)
        order = torch.argsort(flat, stable=True)
        counts = torch.bincount(flat, minlength=len(self.experts)).tolist()
        gathered = x[order // k]
        pieces = []
        start = 0
        for e, n in enumerate(counts):
            end = start + n
            if n == 0:
                continue
            expert = self.experts[e]
            pieces.append(expert(gathered[start:end]))
            start = end
        joined = torch.cat(pieces)
        back = torch.empty_like(joined)
        back[order] = joined
        x = (back.view(*expert_ids.shape, -1) * expert_weights[..., None]).sum(1)
        return x

    def forward(self, tokens, ids, weights):
        return self.grouped(tokens, ids, weights)


class ModuleMoE(nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int, num_experts: int, top_k: int):
        super().__init__()
        self.top_k = top_k
        self.router = nn.Linear(hidden_size, num_experts, bias=False)
        self.plain = TopKExperts(hidden_size, intermediate_size, num_experts)
        self.biased = BiasedExperts(hidden_size, intermediate_size, num_experts)
        self.scaled = ScaledInputExperts(hidden_size, intermediate_size, num_experts)
        self.sorted = SortedExperts(hidden_size, intermediate_size, num_experts)

    def forward(self, hidden_states):
        b, s, h = hidden_states.shape
        flat = hidden_states.reshape(-1, h)
        ids, weights = pick(self.router, flat, self.top_k)
        out = self.plain(flat, ids, weights) + self.biased(flat, ids, weights)
        out = out + self.scaled(flat, ids, weights) + self.sorted(flat, ids, weights)
        return out.reshape(b, s, h)

"""Mixture-of-experts blocks whose expert weights are stacked tensors, written for the port
tests: one keeps gate and up packed in one [E, 2I, H] tensor applied with F.linear, the
other keeps three [E, in, out] tensors applied with ``@``, the up projection first."""

import torch
import torch.nn.functional as F
from torch import nn


class PackedExperts(nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int, num_experts: int):
        super().__init__()
        self.count = num_experts
        self.w_in = nn.Parameter(
            torch.randn(num_experts, 2 * intermediate_size, hidden_size) * 0.05
        )
        self.w_out = nn.Parameter(torch.randn(num_experts, hidden_size, intermediate_size) * 0.05)

    def forward(self, tokens, expert_ids, expert_weights):
        result = torch.zeros_like(tokens)
        hits = F.one_hot(expert_ids, num_classes=self.count).permute(2, 1, 0)
        for e in range(self.count):
            slot, row = torch.where(hits[e])
            if row.numel() == 0:
                continue
            gate, up = F.linear(tokens[row], self.w_in[e]).chunk(2, dim=-1)
            y = F.linear(F.silu(gate) * up, self.w_out[e])
            result.index_add_(0, row, y * expert_weights[row, slot, None])
        return result


class SplitExperts(nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int, num_experts: int):
        super().__init__()
        self.count = num_experts
        self.up = nn.Parameter(torch.randn(num_experts, hidden_size, intermediate_size) * 0.05)
        self.gate = nn.Parameter(torch.randn(num_experts, hidden_size, intermediate_size) * 0.05)
        self.down = nn.Parameter(torch.randn(num_experts, intermediate_size, hidden_size) * 0.05)

    def forward(self, tokens, expert_ids, expert_weights):
        result = torch.zeros_like(tokens)
        hits = F.one_hot(expert_ids, num_classes=self.count).permute(2, 1, 0)
        for e in range(self.count):
            slot, row = torch.where(hits[e])
            if row.numel() == 0:
                continue
            x = tokens[row]
            lifted = x @ self.up[e]
            gated = F.silu(x @ self.gate[e])
            result.index_add_(
                0, row, ((gated * lifted) @ self.down[e]) * expert_weights[row, slot, None]
            )
        return result


class MoEBlock(nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int, num_experts: int, top_k: int):
        super().__init__()
        self.top_k = top_k
        self.router = nn.Linear(hidden_size, num_experts, bias=False)
        self.packed = PackedExperts(hidden_size, intermediate_size, num_experts)
        self.split = SplitExperts(hidden_size, intermediate_size, num_experts)

    def forward(self, hidden_states):
        b, s, h = hidden_states.shape
        flat = hidden_states.reshape(-1, h)
        probs = F.softmax(self.router(flat), dim=-1, dtype=torch.float)
        weights, chosen = torch.topk(probs, self.top_k, dim=-1)
        weights = (weights / weights.sum(dim=-1, keepdim=True)).to(flat.dtype)
        out = self.packed(flat, chosen, weights) + self.split(flat, chosen, weights)
        return out.reshape(b, s, h)

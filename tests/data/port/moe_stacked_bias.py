"""Mixture-of-experts blocks with stacked expert weights that add biases, written for the
port tests.  ``ClampedExperts`` packs gate and up interleaved in one [E, H, 2I] tensor
applied with ``@``, adds a bias after each product and clamps both halves of its GLU in a
method of its own; ``LinearBiasExperts`` keeps three [E, out, in] tensors applied with
``F.linear(x, w, b)`` and a plain SwiGLU."""

import torch
import torch.nn.functional as F
from torch import nn


class ClampedExperts(nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int, num_experts: int):
        super().__init__()
        self.count = num_experts
        self.limit = 0.5
        self.alpha = 1.702
        self.w_in = nn.Parameter(torch.empty(num_experts, hidden_size, 2 * intermediate_size))
        self.b_in = nn.Parameter(torch.randn(num_experts, 2 * intermediate_size) * 0.5)
        self.w_out = nn.Parameter(torch.empty(num_experts, intermediate_size, hidden_size))
        self.b_out = nn.Parameter(torch.randn(num_experts, hidden_size) * 0.5)
        nn.init.normal_(self.w_in, std=0.1)
        nn.init.normal_(self.w_out, std=0.1)

    def squash(self, h):
        a, b = h[..., ::2], h[..., 1::2]
        a = a.clamp(min=None, max=self.limit)
        b = b.clamp(min=-self.limit, max=self.limit)
        glu = a * torch.sigmoid(a * self.alpha)
        return (b + 1) * glu

    def forward(self, tokens, expert_ids, expert_weights):
        result = torch.zeros_like(tokens)
        hits = F.one_hot(expert_ids, num_classes=self.count).permute(2, 1, 0)
        for e in range(self.count):
            slot, row = torch.where(hits[e])
            if row.numel() == 0:
                continue
            x = tokens[row]
            h = x @ self.w_in[e] + self.b_in[e]
            act = self.squash(h)
            y = act @ self.w_out[e] + self.b_out[e]
            result.index_add_(0, row, y * expert_weights[row, slot, None])
        return result


class LinearBiasExperts(nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int, num_experts: int):
        super().__init__()
        self.count = num_experts
        self.w_gate = nn.Parameter(torch.randn(num_experts, intermediate_size, hidden_size) * 0.05)
        self.b_gate = nn.Parameter(torch.randn(num_experts, intermediate_size) * 0.5)
        self.w_up = nn.Parameter(torch.randn(num_experts, intermediate_size, hidden_size) * 0.05)
        self.b_up = nn.Parameter(torch.randn(num_experts, intermediate_size) * 0.5)
        self.w_down = nn.Parameter(torch.randn(num_experts, hidden_size, intermediate_size) * 0.05)
        self.b_down = nn.Parameter(torch.randn(num_experts, hidden_size) * 0.5)

    def forward(self, tokens, expert_ids, expert_weights):
        result = torch.zeros_like(tokens)
        hits = F.one_hot(expert_ids, num_classes=self.count).permute(2, 1, 0)
        for e in range(self.count):
            slot, row = torch.where(hits[e])
            if row.numel() == 0:
                continue
            x = tokens[row]
            up = F.linear(x, self.w_up[e], self.b_up[e])
            gate = F.silu(F.linear(x, self.w_gate[e], self.b_gate[e]))
            y = F.linear(gate * up, self.w_down[e], bias=self.b_down[e])
            result.index_add_(0, row, y * expert_weights[row, slot, None])
        return result


class BiasMoE(nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int, num_experts: int, top_k: int):
        super().__init__()
        self.top_k = top_k
        self.router = nn.Linear(hidden_size, num_experts, bias=False)
        self.clamped = ClampedExperts(hidden_size, intermediate_size, num_experts)
        self.linear = LinearBiasExperts(hidden_size, intermediate_size, num_experts)

    def forward(self, hidden_states):
        b, s, h = hidden_states.shape
        flat = hidden_states.reshape(-1, h)
        probs = F.softmax(self.router(flat), dim=-1, dtype=torch.float)
        weights, chosen = torch.topk(probs, self.top_k, dim=-1)
        weights = (weights / weights.sum(dim=-1, keepdim=True)).to(flat.dtype)
        out = self.clamped(flat, chosen, weights) + self.linear(flat, chosen, weights)
        return out.reshape(b, s, h)

"""A model whose configuration class lives in a sibling module and whose namespace also
holds an output dataclass (as remote-code modelling files import their ModelOutput types);
the configuration JSON it is verified with names no model_type.  An MLP class nothing
builds comes first."""

from collections import OrderedDict
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .configuration_tiny import TinyConfig


@dataclass
class TinyOutput(OrderedDict):
    last_hidden_state: torch.Tensor | None = None


class TinyRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.float().pow(2).mean(-1, keepdim=True)
        normed = hidden_states.float() * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * normed.to(hidden_states.dtype)


class TinyUnusedMLP(nn.Module):
    """Defined beside the model and built by nothing in the file (as a dense MLP class
    beside the experts of a MoE modelling file)."""

    def __init__(self, config):
        super().__init__()
        self.gate = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class TinyModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        if not isinstance(config, TinyConfig):
            raise TypeError("config must be a TinyConfig")
        self.norm = TinyRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, hidden_states):
        h = self.norm(hidden_states)
        return hidden_states + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))

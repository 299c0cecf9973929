"""A latent denoiser written for the port tests: a convolution patchifies the latent, the
forward takes a timestep, class labels and text states by name, and the adaLN modulation
is written as two statements (the norm's result, then the modulation of that name) and
through a helper function."""

import math

import torch
from torch import nn


def modulate(x, shift, scale):
    """The adaLN modulation as a helper (DiT's way of writing it)."""
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


class TinyDenoiser(nn.Module):
    def __init__(
        self,
        in_channels=4,
        sample_size=64,
        patch_size=2,
        hidden_size=1152,
        caption_channels=4096,
        num_classes=1000,
    ):
        super().__init__()
        self.patch = patch_size
        self.proj_in = nn.Conv2d(in_channels, hidden_size, patch_size, stride=patch_size)
        self.labels = nn.Embedding(num_classes, hidden_size)
        self.time = nn.Linear(256, hidden_size)
        self.text = nn.Linear(caption_channels, hidden_size)
        self.cond = nn.Linear(hidden_size, 4 * hidden_size)
        self.norm_mid = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.mix = nn.Linear(hidden_size, hidden_size)
        self.norm_pre = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.mix_pre = nn.Linear(hidden_size, hidden_size)
        self.norm_out = nn.LayerNorm(hidden_size, eps=1e-6)
        self.proj_out = nn.Linear(hidden_size, patch_size * patch_size * in_channels)

    def forward(self, hidden_states, timestep=None, class_labels=None, encoder_hidden_states=None):
        x = self.proj_in(hidden_states).flatten(2).transpose(1, 2)
        half = 128
        freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half)
        angles = timestep[:, None].float() * freqs[None]
        t = self.time(torch.cat([angles.cos(), angles.sin()], dim=-1).to(x.dtype))
        c = t + self.labels(class_labels) + self.text(encoder_hidden_states).mean(1)
        shift_a, scale_a, shift_b, scale_b = self.cond(nn.functional.silu(c)).chunk(4, dim=-1)
        x = x + self.mix_pre(modulate(self.norm_pre(x), shift_b, scale_a))
        normed = self.norm_mid(x)
        normed = normed * (1 + scale_a.unsqueeze(1)) + shift_a.unsqueeze(1)
        x = x + self.mix(normed)
        x = self.norm_out(x)
        # the modulation reads the device of the name the norm rebinds
        x = x * (1 + scale_b[:, None].to(x.device)) + shift_b[:, None].to(x.device)
        return self.proj_out(x)

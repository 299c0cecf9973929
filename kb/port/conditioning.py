"""Inputs of a denoiser: a model whose first layer with weights is a convolution (a patch
embedding) takes an image- or latent-shaped first input, and the conditioning its forward
names is made by name (the names diffusers' transformers use): a timestep per sample,
class labels inside the smallest embedding table, text states as wide as the setting that
names their width, pooled text as wide as its own setting.

A conditioning argument whose width no setting gives is left at its default, so the
model's own code says what it lacks.
"""

from __future__ import annotations

import inspect
from typing import Any

TIMESTEP = ("timestep", "timesteps")
LABELS = ("class_labels",)
#: argument -> the settings that give its last axis, in order
WIDTHS = {
    "encoder_hidden_states": (
        "caption_channels",
        "joint_attention_dim",
        "cross_attention_dim",
        "encoder_hid_dim",
    ),
    "pooled_projections": ("pooled_projection_dim",),
}
TEXT_TOKENS = 6


def settings(model: Any, cfg: dict[str, Any]) -> dict[str, Any]:
    """The model's own registered configuration (diffusers' ``model.config``) under ``cfg``."""
    own = getattr(model, "config", None)
    base = dict(own) if isinstance(own, dict) else {}
    return {**base, **cfg}


def first_conv(model: Any) -> Any:
    """The first layer (a module without submodules) with weights, when it is a
    convolution."""
    import torch

    for m in model.modules():
        if next(m.children(), None) is None and any(True for _ in m.parameters()):
            return m if isinstance(m, (torch.nn.Conv2d, torch.nn.Conv3d)) else None
    return None


def linear_patches(model: Any, cfg: dict[str, Any]) -> Any:
    """A patch embedding written as a linear layer over flattened patches (no
    convolution), when the model's own settings name the image's channels, its patch
    side and its sample size: what :func:`image` needs of a 2-D convolution."""
    import types

    own = settings(model, cfg)
    sizes = [own.get(k) for k in ("in_channels", "patch_size", "sample_size")]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in sizes):
        return None
    return types.SimpleNamespace(in_channels=sizes[0], weight=types.SimpleNamespace(dim=lambda: 4))


def image(conv: Any, cfg: dict[str, Any], batch: int, gen: Any, dtype: Any) -> Any:
    """[B, C, size, size] (a 2-D patch embedding) at the configured sample size (else 8)."""
    import torch

    size = cfg.get("sample_size")
    size = size if isinstance(size, int) and size > 0 else 8
    shape = (batch, conv.in_channels) + (size,) * (conv.weight.dim() - 2)
    return torch.randn(*shape, generator=gen).to(dtype)


def keywords(model: Any, cfg: dict[str, Any], batch: int, gen: Any, dtype: Any) -> dict[str, Any]:
    """The conditioning ``model.forward`` names, made by name (see the module doc)."""
    import torch

    found: dict[str, Any] = {}
    tables = [m.num_embeddings for m in model.modules() if isinstance(m, torch.nn.Embedding)]
    for name in inspect.signature(model.forward).parameters:
        if name in TIMESTEP:
            found[name] = torch.randint(0, 1000, (batch,), generator=gen)
        elif name in LABELS and tables:
            found[name] = torch.randint(0, min(tables), (batch,), generator=gen)
        elif name in WIDTHS:
            width = next((cfg[k] for k in WIDTHS[name] if isinstance(cfg.get(k), int)), None)
            if width is None:
                continue
            shape = (
                (batch, TEXT_TOKENS, width) if name == "encoder_hidden_states" else (batch, width)
            )
            found[name] = torch.randn(*shape, generator=gen).to(dtype)
    return found

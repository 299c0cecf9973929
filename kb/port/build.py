"""Build a model class at a tiny size: its hyper-parameters shrunk, its constructor fed
from them (an HF-style config object, a dataclass ``ModelArgs``, or plain keyword
arguments), and inputs for its ``forward`` made from its signature.

The size names are the configuration vocabularies' (HF configs, ``params.json``); a
size nothing names keeps its value, and a constructor or forward argument nothing can
supply is reported by name (:class:`CannotBuild`), never guessed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import inspect
import json
import sys
from pathlib import Path
from typing import Any

from kb.port import conditioning

#: tiny sizes: key -> value (or a function of the original value)
_SIZES: dict[str, Any] = {
    **dict.fromkeys(("hidden_size", "dim", "d_model", "n_embd", "model_dim", "emb_dim"), 64),
    **dict.fromkeys(("num_attention_heads", "n_heads", "n_head", "num_heads", "heads"), 4),
    **dict.fromkeys(("head_dim", "attention_head_dim", "kv_channels", "v_head_dim"), 16),
    **dict.fromkeys(("qk_nope_head_dim",), 16),
    **dict.fromkeys(("qk_rope_head_dim",), 8),
    **dict.fromkeys(("q_lora_rank", "kv_lora_rank"), 32),
    **dict.fromkeys(
        (
            "intermediate_size",
            "ffn_dim",
            "ffn_hidden_size",
            "moe_intermediate_size",
            "shared_expert_intermediate_size",
            "mlp_dim",
            "d_ff",
            "inter_dim",
            "moe_inter_dim",
            "hidden_dim",
        ),
        128,
    ),
    **dict.fromkeys(("num_hidden_layers", "n_layers", "num_layers", "n_layer", "depth"), 2),
    **dict.fromkeys(("vocab_size", "n_vocab", "padded_vocab_size"), 256),
    **dict.fromkeys(
        ("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts", "n_experts"),
        4,
    ),
    **dict.fromkeys(("n_shared_experts", "num_shared_experts"), 1),
    **dict.fromkeys(("max_position_embeddings", "max_seq_len", "seq_len"), 64),
    "caption_projection_dim": 64,  # text states projected to the hidden size
    "multiple_of": 16,
    "first_k_dense_replace": 1,
}
#: sizes kept at most this (the top-k of a router must stay below the experts)
_AT_MOST: dict[str, int] = {
    **dict.fromkeys(
        (
            "num_experts_per_tok",
            "n_activated_experts",
            "moe_topk",
            "top_k",
            "num_experts_per_token",
        ),
        2,
    ),
    **dict.fromkeys(("n_group", "n_expert_groups", "n_limited_groups", "topk_group"), 2),
    "sliding_window": 4,
    "sample_size": 32,  # a denoiser's latent side
}
_KV_HEADS = (
    "num_key_value_heads",
    "n_kv_heads",
    "num_kv_heads",
    "multi_query_group_num",
    "n_query_groups",
)
_HEADS = ("num_attention_heads", "n_heads", "n_head", "num_heads", "heads")
#: the hidden size as constructors name it
HIDDEN = ("hidden_size", "dim", "d_model", "n_embd", "model_dim", "emb_dim")
BATCH, SEQ = 2, 8
#: how the name of an input of integer ids ends
IDS = ("ids", "idx", "tokens", "labels", "label")


class CannotBuild(Exception):
    """What stops building or feeding a class (the message names it)."""


def load_config(path: str) -> dict[str, Any]:
    """A JSON file of hyper-parameters (``config.json``, ``params.json``)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CannotBuild(f"{path}: not a readable JSON file of hyper-parameters ({exc})") from None
    if not isinstance(data, dict):
        raise CannotBuild(f"{path}: a JSON object of hyper-parameters was expected")
    return data


def shrink(cfg: dict[str, Any]) -> dict[str, Any]:
    """The configuration at a tiny size (nested configs too; dtype settings dropped)."""
    out: dict[str, Any] = {}
    heads = next((cfg[k] for k in _HEADS if isinstance(cfg.get(k), int)), None)
    for key, value in cfg.items():
        if key in ("torch_dtype", "dtype", "quantization_config"):
            continue
        if isinstance(value, dict):
            out[key] = shrink(value)
        elif isinstance(value, bool) or not isinstance(value, int):
            out[key] = value
        elif key in _SIZES:
            out[key] = _SIZES[key]
        elif key in _AT_MOST:
            out[key] = min(value, _AT_MOST[key])
        elif key in _KV_HEADS:
            out[key] = 4 if heads is not None and value >= heads else (1 if value == 1 else 2)
        else:
            out[key] = value
    vocab = out.get("vocab_size")
    for key, value in out.items():  # special tokens inside the shrunk vocabulary
        if isinstance(vocab, int) and key.endswith("token_id") and isinstance(value, int):
            out[key] = min(value, vocab - 1)
        elif isinstance(vocab, int) and key.endswith("token_id") and isinstance(value, list):
            out[key] = [min(v, vocab - 1) if isinstance(v, int) else v for v in value]
    if "topk_group" in out and "n_group" in out:
        out["topk_group"] = min(out["topk_group"], out["n_group"])
    return out


def load_module(path: str, alias: str = "", beside: str = "") -> Any:
    """Import a model file as its package would (relative imports resolve inside the
    package its ``__init__.py`` files make); ``alias`` imports it under that name in the
    package of ``beside`` (the port as a sibling of its original, wherever it was written)."""
    file = Path(path).resolve()
    anchor = Path(beside).resolve() if beside else file
    parts = [anchor.stem]
    d = anchor.parent
    while (d / "__init__.py").exists():
        parts.insert(0, d.name)
        d = d.parent
    if str(d) not in sys.path:
        sys.path.insert(0, str(d))
    name = ".".join(parts[:-1] + [alias or parts[-1]])
    if not alias and name in sys.modules:
        return sys.modules[name]
    try:
        if len(parts) > 1:  # the package first, as an import statement would
            importlib.import_module(".".join(parts[:-1]))
            if not alias:
                return importlib.import_module(name)
    except ImportError as exc:
        raise CannotBuild(f"{path}: its imports fail: {exc}") from None
    except Exception as exc:  # the package's own code failing at import time
        raise CannotBuild(f"{path}: importing it raised {type(exc).__name__}: {exc}") from None
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise CannotBuild(f"{path}: not importable as Python")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except ImportError as exc:
        sys.modules.pop(name, None)
        raise CannotBuild(f"{path}: its imports fail: {exc}") from None
    except SyntaxError as exc:
        sys.modules.pop(name, None)
        raise CannotBuild(f"{exc.filename}:{exc.lineno}: {exc.msg}") from None
    except Exception as exc:  # the module's own code failing at import time
        sys.modules.pop(name, None)
        raise CannotBuild(f"{path}: importing it raised {type(exc).__name__}: {exc}") from None
    return mod


def _config_class(ns: Any, cfg: dict[str, Any], annotation: Any) -> Any:
    if isinstance(annotation, str):
        annotation = getattr(ns, annotation.strip("'\""), None)
    if inspect.isclass(annotation) and annotation is not inspect.Parameter.empty:
        return annotation
    found = [
        v
        for v in vars(ns).values()
        if inspect.isclass(v)
        and (
            (dataclasses.is_dataclass(v) and not issubclass(v, dict))  # not a model output
            or any(b.__name__.endswith("PretrainedConfig") for b in v.__mro__)
            or any(b.__name__.endswith("PreTrainedConfig") for b in v.__mro__)
        )
    ]
    kind = cfg.get("model_type")
    typed = [v for v in found if kind and getattr(v, "model_type", None) == kind]
    package = getattr(ns, "__name__", "").rpartition(".")[0]
    own = [v for v in found if v.__module__.rpartition(".")[0] == package]
    pool = typed or own or found
    return pool[0] if len(pool) == 1 else None


def config_object(ns: Any, cfg: dict[str, Any], annotation: Any) -> Any:
    """The object a constructor's config argument expects, filled from ``cfg``."""
    import types

    cls = _config_class(ns, cfg, annotation)
    if cls is None:
        return types.SimpleNamespace(**cfg)
    obj = _filled(cls, cfg)
    if hasattr(obj, "to_dict"):  # the file's own attention and experts, not a library's
        for switch in ("_attn_implementation", "_experts_implementation"):
            with contextlib.suppress(Exception):
                setattr(obj, switch, "eager")
    return obj


def _filled(cls: Any, cfg: dict[str, Any]) -> Any:
    """A config class's instance: a dataclass from its own defaults shrunk and ``cfg``
    (fields left at their defaults not passed), else from ``cfg`` over its defaults."""
    named = set(inspect.signature(cls.__init__).parameters) - {"self"}
    fields = dataclasses.fields(cls) if dataclasses.is_dataclass(cls) else ()
    # a dataclass's own constructor; a subclass with its own __init__ (remote-code configs
    # over transformers' dataclass base) names sizes that are no fields: read as below
    if fields and named <= {f.name for f in fields} | {"kwargs", "args"}:
        own = {f.name: f.default for f in fields if f.default is not dataclasses.MISSING}
        merged = shrink({**own, **cfg})
        make: Any = cls
        return make(
            **{
                f.name: merged[f.name]
                for f in fields
                if f.name in cfg or (f.name in merged and merged[f.name] != own.get(f.name))
            }
        )
    if hasattr(cls, "to_dict"):
        try:
            cfg = shrink({**cls().to_dict(), **cfg})
        except Exception:  # a config class that needs arguments: the JSON alone
            cfg = dict(cfg)
    return cls(**cfg)


def build(cls: Any, cfg: dict[str, Any], ns: Any) -> Any:
    """An instance of ``cls`` at the shrunk size (the constructor's own size defaults
    shrunk too, so a class built from its defaults is tiny as well)."""
    sig = inspect.signature(cls.__init__)
    defaults = {
        p.name: p.default
        for p in sig.parameters.values()
        if p.default is not inspect.Parameter.empty and p.name not in cfg
    }
    cfg = {**shrink(defaults), **cfg}
    kwargs: dict[str, Any] = {}
    hidden = next((cfg[k] for k in HIDDEN if k in cfg), None)
    for p in list(sig.parameters.values())[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.name in cfg:
            kwargs[p.name] = cfg[p.name]
        elif p.name in ("config", "args", "params", "model_args", "cfg") or (
            isinstance(p.annotation, str) and ("Config" in p.annotation or "Args" in p.annotation)
        ):
            kwargs[p.name] = config_object(ns, cfg, p.annotation)
        elif p.name in HIDDEN and hidden is not None:
            kwargs[p.name] = hidden
        elif p.name in _SIZES and p.default is inspect.Parameter.empty:
            kwargs[p.name] = _SIZES[p.name]  # a size nothing gives: the tiny one
        elif p.name in ("layer_idx", "layer_id", "layer_number", "idx"):
            kwargs[p.name] = 0
        elif p.default is inspect.Parameter.empty:
            raise CannotBuild(f"{cls.__name__}.__init__ needs {p.name!r}, which the config lacks")
    return cls(**kwargs)


def width(model: Any) -> int:
    """The feature size a module's input has: the first linear layer's input features,
    else the last axis of its first parameter."""
    import torch

    for m in model.modules():
        if isinstance(m, torch.nn.Linear):
            return int(m.in_features)
    for p in model.parameters():
        return int(p.shape[-1])
    raise CannotBuild(f"{type(model).__name__} has no parameters to size an input by")


def inputs(model: Any, cfg: dict[str, Any], dtype: Any, seed: int, seq: int = SEQ) -> list[Any]:
    """Candidate argument lists for ``model.forward`` (token ids where the model embeds
    them, else hidden states; further required tensors as [B, S, H], then [B, H])."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    sig = inspect.signature(model.forward)
    required = [
        p
        for p in sig.parameters.values()
        if p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    if not required:
        lead = next(iter(sig.parameters.values()), None)
        required = (
            [lead]
            if lead is not None and lead.kind not in (lead.VAR_POSITIONAL, lead.VAR_KEYWORD)
            else []
        )
    if not required:
        raise CannotBuild(f"{type(model).__name__}.forward takes no argument to feed")
    ids_name = required[0].name.lower()
    embeds = any(isinstance(m, torch.nn.Embedding) for m in model.children()) or (
        any(isinstance(m, torch.nn.Embedding) for m in model.modules())
        and ids_name.endswith(("ids", "tokens", "idx", "input"))
    )
    conv = conditioning.first_conv(model) or conditioning.linear_patches(model, cfg)
    if conv is not None:  # a denoiser: an image-shaped input and its conditioning by name
        own = conditioning.settings(model, cfg)
        x = conditioning.image(conv, own, BATCH, gen, dtype)
        return [[x, conditioning.keywords(model, own, BATCH, gen, dtype)]]
    h = width(model)
    vocab = next((cfg[k] for k in ("vocab_size", "n_vocab") if k in cfg), None)
    first: Any
    if embeds:
        emb = next(m for m in model.modules() if isinstance(m, torch.nn.Embedding))
        first = torch.randint(0, vocab or emb.num_embeddings, (BATCH, seq), generator=gen)
    else:
        first = torch.randn(BATCH, seq, h, generator=gen).to(dtype)
    rest = required[1:]
    if len(rest) > 2:
        raise CannotBuild(
            f"{type(model).__name__}.forward needs {', '.join(p.name for p in rest)}: "
            "name a class whose inputs are hidden states or token ids (--module)"
        )
    options = []
    for shape in ((BATCH, seq, h), (BATCH, h)):
        options.append([first] + [_feed(p.name, shape, vocab, gen, dtype) for p in rest])
    return options if rest else options[:1]


def _feed(name: str, shape: tuple[int, ...], vocab: int | None, gen: Any, dtype: Any) -> Any:
    """A further input of ``forward``: ids (one per position, or one per sample) where its
    name says so (``cond_idx``, ``labels``), else hidden states of ``shape``."""
    import torch

    if name.lower().endswith(IDS):
        return torch.randint(0, min(vocab or 2, 2), shape[:-1], generator=gen)
    return torch.randn(*shape, generator=gen).to(dtype)

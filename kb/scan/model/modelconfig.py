"""The checkpoint's configuration: hyper-parameters that decide what the code computes.

``kb scan --model-config FILE`` (a ``config.json`` beside the weights, llama's
``params.json``, any JSON object of hyper-parameters) gives values the code reads from its
config object (``config.hidden_act``, ``args.n_heads``) or takes as constructor arguments
(``hidden_size=1152``).  Keys are matched through one vocabulary of spellings
(:mod:`kb.vocab.model_keys`); a multimodal checkpoint's ``text_config`` is read when the
top level lacks a key.  A bad file is a :class:`ModelConfigError` naming file and line.
"""

from __future__ import annotations

import json
import os
from typing import Any

from kb.scan.model.files import Refusal, read_source
from kb.scan.model.graph import UNKNOWN, Const, Inst
from kb.vocab.model_keys import MODEL_KEY_BY_NAME, MODEL_KEY_OF, NESTED_CONFIGS

MAX_CONFIG_BYTES = 4 * 1024 * 1024


class ModelConfigError(ValueError):
    """A model configuration that cannot be used; the message names file and line."""


def load(path: str) -> dict[str, Any]:
    """The hyper-parameters of a JSON configuration file (an object at the top)."""
    text = read_source(path, MAX_CONFIG_BYTES)
    if isinstance(text, Refusal):
        raise ModelConfigError(f"{path}: {text.reason}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelConfigError(f"{path}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None
    except RecursionError:
        raise ModelConfigError(f"{path}:1:1: not JSON: nested too deep") from None
    if not isinstance(data, dict):
        raise ModelConfigError(
            f"{path}:1:1: the model configuration must be a JSON object of hyper-parameters"
        )
    return data


_LOADED: dict[tuple[str, float, int], dict[str, Any]] = {}


def cached(path: str) -> dict[str, Any]:
    """:func:`load`, once per file version (a scan plans many files with one config)."""
    try:
        st = os.stat(path)
        key = (os.path.realpath(path), st.st_mtime, st.st_size)
    except OSError:
        return load(path)  # says why it cannot be read
    if key not in _LOADED:
        _LOADED[key] = load(path)
    return _LOADED[key]


def raw(config: dict[str, Any], name: str) -> Any:
    """The JSON value of hyper-parameter ``name`` under any of its spellings, at the top
    level or in a nested language-model config (UNKNOWN: not there)."""
    if not config:
        return UNKNOWN
    if name in config:
        return config[name]
    canonical = MODEL_KEY_OF.get(name)
    if canonical is not None:
        for spelling in MODEL_KEY_BY_NAME[canonical].spellings:
            if spelling in config:
                return config[spelling]
    for nested in NESTED_CONFIGS:
        inner = config.get(nested)
        if isinstance(inner, dict):
            found = raw(inner, name)
            if found is not UNKNOWN:
                return found
    return UNKNOWN


def value_of(data: Any) -> Any:
    """A JSON value as the reader's value: objects become configuration instances."""
    if isinstance(data, dict):
        return Inst(
            "config",
            config=True,
            module=False,
            attrs={str(k): value_of(v) for k, v in data.items()},
        )
    if isinstance(data, list):
        return Const(tuple(data), "model config")
    return Const(data, "model config")


def lookup(config: dict[str, Any], name: str) -> Any:
    found = raw(config, name)
    return UNKNOWN if found is UNKNOWN else value_of(found)

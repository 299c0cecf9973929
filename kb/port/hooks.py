"""The stages the rewrite pass asks before its own (one module per kind of span).

``CALLS``: each hook is called on every call the pass leaves, as
``hook(porter, original, updated)``; the first one that returns a node replaces the call
(None: not its kind).  ``CLASSES``: each hook is called on every class the pass leaves,
as ``hook(porter, name, updated)``, and returns the class (rewritten or not).  Add a kind by writing its module and listing its hook here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kb.port import attention, flashattn, rope_halves

CallHook = Callable[[Any, Any, Any], Any]
ClassHook = Callable[[Any, str, Any], Any]

CALLS: list[CallHook] = [
    attention.sdpa,
    flashattn.call,
    attention.written_out,
    rope_halves.cat_rope,
]

CLASSES: list[ClassHook] = []

"""Which operators kb.emulate runs, read without torch or numpy.

Every operator with a numpy reference (:func:`kb.reference.available`, read at call
time so new references are emulated without a change here), plus the device plumbing a
port calls around them: format casts and reads, and the workspace helpers of graph
capture.  ``kb show`` and the site ask :func:`emulated` to say whether an operator runs
on the CPU.
"""

from __future__ import annotations

from kb.reference import available

#: Plumbing operator → what the emulator does for it (see kb.emulate.plumbing).
PLUMBING: dict[str, str] = {
    "npu_format_cast": "returns a copy that remembers the requested format",
    "npu_format_cast_": "remembers the requested format on the tensor itself",
    "get_npu_format": "returns the format npu_format_cast remembered, else the base format",
    "empty_with_format": "torch.empty on the CPU, remembering acl_format",
    "_npu_fused_infer_attention_score_get_max_workspace": "returns a one-element workspace "
    "(the emulated attention needs none)",
    "_npu_fused_infer_attention_score_v2_get_max_workspace": "returns a one-element "
    "workspace (the emulated attention needs none)",
}


def how(name: str) -> str | None:
    """``reference`` or ``plumbing`` for an emulated record name, else None."""
    if name in available():
        return "reference"
    return "plumbing" if name in PLUMBING else None


def emulated(name: str) -> bool:
    """Whether ``torch_npu.<name>`` runs under kb.emulate."""
    return how(name) is not None


def emulated_names() -> list[str]:
    """Every record name kb.emulate runs, sorted."""
    return sorted({*available(), *PLUMBING})


def in_words(name: str) -> str:
    """How ``kb show`` and the site say whether ``name`` runs under kb.emulate."""
    way = how(name)
    if way == "reference":
        return "yes: kb emulate runs it on the CPU through its numpy reference"
    if way == "plumbing":
        return f"yes: kb emulate {PLUMBING[name]}"
    return "no: there is no numpy reference, so kb emulate raises NotEmulated"

"""Operator namespaces of PyTorch itself: ``torch.ops.<ns>`` calls the scanner leaves alone.

``torch.ops`` holds every namespace any library registered.  torch_npu's own are the
call paths of :mod:`kb.vocab.call_paths`; the ones below ship with PyTorch (ATen, the
primitive and collective libraries, higher-order operators, quantization, inductor), so a
call there is plain PyTorch, neither a torch_npu operator nor an extension package's.
Every other namespace is foreign: the scanner names who registers it (the tree, an
extension record) or says it does not know.
"""

from __future__ import annotations

from typing import NamedTuple


class TorchNamespaceDef(NamedTuple):
    """One namespace PyTorch registers operators in, and what lives there."""

    namespace: str
    what: str


TORCH_NAMESPACE_ROWS: tuple[TorchNamespaceDef, ...] = (
    TorchNamespaceDef("aten", "ATen, the core tensor library"),
    TorchNamespaceDef("prims", "primitive operators of the reference decompositions"),
    TorchNamespaceDef("_c10d_functional", "functional collectives"),
    TorchNamespaceDef("_c10d_functional_autograd", "functional collectives with autograd"),
    TorchNamespaceDef("c10d", "process-group collectives"),
    TorchNamespaceDef("_dtensor", "distributed tensor helpers"),
    TorchNamespaceDef("higher_order", "higher-order operators (cond, while_loop, ...)"),
    TorchNamespaceDef("profiler", "profiler record functions"),
    TorchNamespaceDef("quantized", "quantized kernels"),
    TorchNamespaceDef("_quantized", "internal quantized kernels"),
    TorchNamespaceDef("quantized_decomposed", "decomposed quantization primitives"),
    TorchNamespaceDef("rngprims", "random-number primitives"),
    TorchNamespaceDef("debugprims", "debugging primitives"),
    TorchNamespaceDef("inductor", "inductor runtime helpers"),
    TorchNamespaceDef("mkldnn", "oneDNN CPU kernels"),
    TorchNamespaceDef("onednn", "oneDNN CPU kernels (newer spelling)"),
    TorchNamespaceDef("symm_mem", "symmetric-memory collectives"),
)

#: Namespaces whose ``torch.ops`` calls are PyTorch's own.
TORCH_NAMESPACES: frozenset[str] = frozenset(r.namespace for r in TORCH_NAMESPACE_ROWS)

"""What an attribute of a known module is: a sub-module, an operator or a dtype constant.

``torch_npu.X`` is an operator unless X is a sub-module, a dtype or a class (a capitalised
name such as ``HiFloat8Tensor``: operators are snake_case); ``torch.ops.<ns>.X``
is an operator of namespace ``ns`` (``npu``, ``atb`` or a custom one), ``.default`` /
``.out`` its overload; ``torch_npu.atb`` (a call-path namespace of kb.vocab) is a module
whose attributes are operators; everything else under a module is just a longer module path.
Which attributes are dtypes is kb.vocab's (``torch.int4`` is not torch_npu's int4).
"""

from __future__ import annotations

from typing import Any

from kb.scan.values import UNKNOWN, DtypeConst, Module, Op
from kb.vocab import NAMESPACE_PATHS, PYTHON_NAMESPACES, TORCH_DTYPE_ATTRS, TORCH_NPU_DTYPE_ATTRS

#: torch_npu attributes that are sub-modules, not operators.
SUBMODULES = frozenset(
    {
        "npu",
        "profiler",
        "_C",
        "multiprocessing",
        "_inductor",
        "testing",
        "op_plugin",
        "contrib",
        "utils",
        "dynamo",
        "distributed",
        "optim",
        "onnx",
        "asd",
        "jit",
        "fx",
        "npu_fusion",
        "_afd",
        "dtypes",
        "version",
        "meta",
        "erase_stream",
        "_logging",
        "compiler",
        "graph",
    }
)
#: Module path -> the namespace id of the operators under it (``torch.ops.npu`` -> ``npu``).
PATH_NAMESPACES = {path: ns for ns, path in NAMESPACE_PATHS.items()}
#: Namespaces a tree may mount its own operators on (``torch_npu.x = f``,
#: ``torch.ops.npu.x = ...``): all but torch.npu, which is device API.
MOUNT_NAMESPACES = frozenset(NAMESPACE_PATHS) - {"torch.npu"}


def _module_attribute(path: str, attr: str) -> Any:
    if path == "torch":
        if attr in ("ops", "npu", "library"):
            return Module(f"torch.{attr}")
        if attr in TORCH_DTYPE_ATTRS:
            return DtypeConst(f"torch.{attr}")
        return Module(f"torch.{attr}")
    if path == "torch.ops":
        return Module(f"torch.ops.{attr}")
    if path.startswith("torch.ops."):
        ns = path[len("torch.ops.") :]
        if "." in ns:
            return UNKNOWN
        return Op(ns, attr)
    if path == "torch_npu":
        if attr in TORCH_NPU_DTYPE_ATTRS:
            return DtypeConst(f"torch_npu.{attr}")
        if attr in SUBMODULES or attr.startswith("__") or f"torch_npu.{attr}" in PATH_NAMESPACES:
            return Module(f"torch_npu.{attr}")
        if attr[:1].isupper():  # a class (HiFloat8Tensor): torch_npu's operators are snake_case
            return Module(f"torch_npu.{attr}")
        return Op("torch_npu", attr)
    if PATH_NAMESPACES.get(path) in PYTHON_NAMESPACES:  # torch.npu, torch_npu.atb
        return Op(PATH_NAMESPACES[path], attr)
    if path == "functools" and attr == "partial":
        return Module("functools.partial")
    if path == "torch.library":
        return Module(f"torch.library.{attr}")
    return Module(f"{path}.{attr}")


def attribute(value: Any, attr: str) -> Any:
    """``value.attr`` for a module or an operator (an overload); UNKNOWN otherwise."""
    if isinstance(value, Module):
        return _module_attribute(value.path, attr)
    if isinstance(value, Op):
        if value.overload is None and not attr.startswith("_"):
            return Op(value.namespace, value.name, attr, value.bound_args, value.bound_kwargs)
        return UNKNOWN
    return UNKNOWN

"""Which ``torch.X`` and ``torch_npu.X`` attributes are dtype constants, from kb.vocab.

torch's dtypes are the c10::ScalarType ones, the :data:`kb.vocab.DTYPE_CODES` below 256,
plus torch's alias attributes (``torch.half``); torch_npu's are its custom dtypes
(``torch_npu/csrc/custom_dtype/Init.cpp``): every vocabulary dtype but the quantized
ones, plus three the vocabulary does not know.  An attribute that is not a dtype stays
a module path or an operator, so ``torch.int4`` is not mistaken for torch_npu's int4.
"""

from __future__ import annotations

from kb.vocab import CANONICAL, DTYPE_ALIASES, DTYPE_CODES

# TODO(issue 18): kb.vocab's dtype table has no column for these attribute facts yet
# (which module exposes a dtype under which name); move them there and derive below.
#: torch's alias attributes of vocabulary dtypes (``torch.half`` is ``torch.float16``).
_TORCH_ALIAS_ATTRS = frozenset({"float", "half", "double", "int", "long", "short",
                                "cfloat", "cdouble", "chalf"})  # fmt: skip
#: vocabulary dtypes torch_npu does not expose (the quantized ones).
_NOT_ON_TORCH_NPU = frozenset({"qint8", "quint8", "qint32", "quint4x2"})
#: torch_npu dtypes kb.vocab lacks: only recognised as constants, never normalised.
TORCH_NPU_ONLY = frozenset({"uint1", "float6_e3m2", "float6_e2m3"})

#: torch attributes that name dtypes (``torch.bfloat16``, ``torch.float`` ...).
TORCH_DTYPES = frozenset(
    {dtype for code, dtype in DTYPE_CODES.items() if code < 256}
    | {alias for alias in _TORCH_ALIAS_ATTRS if alias in DTYPE_ALIASES}
)
#: torch_npu attributes that name dtypes (``torch_npu.hifloat8`` ...).
TORCH_NPU_DTYPES = frozenset(set(CANONICAL["dtype"]) - _NOT_ON_TORCH_NPU) | TORCH_NPU_ONLY

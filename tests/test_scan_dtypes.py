"""The scanner's dtype constants come from kb.vocab (one dtype table)."""

from __future__ import annotations

from kb.scan.dtypes import TORCH_DTYPES, TORCH_NPU_DTYPES, TORCH_NPU_ONLY
from kb.scan.names import attribute
from kb.scan.values import DtypeConst, Module, Op
from kb.vocab import normalize


def test_every_dtype_attribute_but_the_fallback_is_a_vocabulary_dtype() -> None:
    for attr in TORCH_DTYPES:
        assert normalize("dtype", f"torch.{attr}") is not None, attr
    for attr in TORCH_NPU_DTYPES - TORCH_NPU_ONLY:
        assert normalize("dtype", f"torch_npu.{attr}") is not None, attr


def test_the_fallback_holds_only_names_the_vocabulary_lacks() -> None:
    """When kb.vocab learns one of these, it leaves the fallback in kb/scan/dtypes.py."""
    assert [n for n in sorted(TORCH_NPU_ONLY) if normalize("dtype", n) is not None] == []


def test_attributes_resolve_by_module() -> None:
    torch, npu = Module("torch"), Module("torch_npu")
    assert attribute(torch, "half") == DtypeConst("torch.half")
    assert attribute(torch, "bfloat16") == DtypeConst("torch.bfloat16")
    assert attribute(torch, "int4") == Module("torch.int4")  # torch's own int4, not torch_npu's
    assert attribute(npu, "int4") == DtypeConst("torch_npu.int4")
    assert attribute(npu, "float6_e3m2") == DtypeConst("torch_npu.float6_e3m2")
    assert attribute(npu, "qint8") == Op("torch_npu", "qint8")
    assert attribute(npu, "npu_rms_norm") == Op("torch_npu", "npu_rms_norm")

"""What ``torch.X`` / ``torch_npu.X`` resolve to: dtypes from kb.vocab, operators, modules."""

from __future__ import annotations

from kb.scan.names import attribute
from kb.scan.values import DtypeConst, Module, Op


def test_attributes_resolve_by_module() -> None:
    torch, npu = Module("torch"), Module("torch_npu")
    assert attribute(torch, "half") == DtypeConst("torch.half")
    assert attribute(torch, "bfloat16") == DtypeConst("torch.bfloat16")
    assert attribute(torch, "int4") == Module("torch.int4")  # torch's own int4, not torch_npu's
    assert attribute(npu, "int4") == DtypeConst("torch_npu.int4")
    assert attribute(npu, "float6_e3m2") == DtypeConst("torch_npu.float6_e3m2")
    assert attribute(npu, "qint8") == Op("torch_npu", "qint8")
    assert attribute(npu, "npu_rms_norm") == Op("torch_npu", "npu_rms_norm")
    assert attribute(Module("torch.ops.atb"), "x") == Op("atb", "x")
    assert attribute(Module("torch.ops.custom"), "x") == Op("custom", "x")

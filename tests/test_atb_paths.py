"""torch_npu.atb is a call path of its own: records, kb show and the scanner agree on it.

op-plugin attaches some ATB operators to ``torch_npu`` and others only to the
``torch_npu.atb`` module; the spelling that does not exist is an AttributeError at the
first call, so the scanner reports it, and the real one resolves to its record.
"""

from __future__ import annotations

from typing import Any

import pytest

from kb.api.scan import ScanOptions, scanner
from kb.catalog.compiled import open_catalog
from kb.vocab import CALL_PREFIXES, bare_operator, call_path, missing_call_path

#: Records op-plugin exposes only as torch_npu.atb.X (its ATB-only list).
ATB_ONLY = (
    "npu_mla_preprocess",
    "npu_ring_mla",
    "npu_fused_add_topk_div",
    "npu_self_attention_prefix_encoder",
    "_npu_paged_attention_v2_get_workspace",
)


@pytest.fixture(scope="module")
def catalog() -> Any:
    return open_catalog()


def test_atb_prefix_is_stripped_before_the_torch_npu_one() -> None:
    assert CALL_PREFIXES.index("torch_npu.atb.") < CALL_PREFIXES.index("torch_npu.")
    assert bare_operator("torch_npu.atb.npu_ring_mla") == "npu_ring_mla"
    path = call_path("torch_npu.atb.npu_ring_mla")
    assert path is not None and path.binding == "python" and path.namespace == "torch_npu.atb"


def test_missing_call_path_compares_within_one_binding() -> None:
    calls = ["torch_npu.atb.npu_ring_mla", "torch.ops.atb.npu_ring_mla"]
    assert missing_call_path("torch_npu.npu_ring_mla", calls) == ["torch_npu.atb.npu_ring_mla"]
    assert missing_call_path("torch.ops.npu.npu_ring_mla", calls) == ["torch.ops.atb.npu_ring_mla"]
    assert missing_call_path("torch.ops.atb.npu_ring_mla.default", calls) == []
    assert missing_call_path("npu_ring_mla", calls) == []
    # a record listing no Python path has nothing to compare a Python spelling with
    assert missing_call_path("torch_npu.npu_x", ["torch.ops.npu.npu_x"]) == []


@pytest.mark.parametrize("name", ATB_ONLY)
def test_atb_only_records_list_the_atb_module(catalog: Any, name: str) -> None:
    rec = catalog.get(name)
    assert rec["calls"] == [f"torch_npu.atb.{name}", f"torch.ops.atb.{name}"]
    assert all(f"torch_npu.{name}(" not in ex["code"] for ex in rec["examples"])
    assert catalog.resolve(f"torch_npu.atb.{name}") == name


@pytest.mark.parametrize(
    ("spelling", "name"),
    [
        ("torch_npu.npu_fused_infer_attention_score.out", "npu_fused_infer_attention_score"),
        (
            "torch.ops.npu.npu_fused_infer_attention_score.default",
            "npu_fused_infer_attention_score",
        ),
        ("torch_npu.atb.npu_ring_mla", "npu_ring_mla"),
        ("torch.ops.atb.npu_ring_mla.out", "npu_ring_mla"),
    ],
)
def test_overloads_and_atb_paths_resolve(catalog: Any, spelling: str, name: str) -> None:
    assert catalog.resolve(spelling) == name


def test_an_overload_needs_a_real_operator(catalog: Any) -> None:
    assert catalog.resolve("torch_npu.npu_no_such_op.out") is None
    assert catalog.resolve("torch_npu.npu_rms_norm.") is None


_SRC = """\
import torch
import torch_npu
from torch_npu.atb import npu_fused_add_topk_div
from torch_npu import atb


def step(qn, qr, kn, kr, v, mask, lens, x, bias):
    good = torch_npu.atb.npu_ring_mla(qn, qr, kn, kr, v, mask, lens, 16, 16)
    also = atb.npu_ring_mla(qn, qr, kn, kr, v, mask, lens, 16, 16)
    wrong = torch_npu.npu_ring_mla(qn, qr, kn, kr, v, mask, lens, 16, 16)
    plain = torch_npu.atb._npu_paged_attention(qn)
    topk = npu_fused_add_topk_div(x, bias, bogus=1)
    return good, also, wrong, plain, topk
"""


def test_scanner_reads_torch_npu_atb_as_a_namespace(catalog: Any) -> None:
    report = scanner(catalog, ScanOptions(use_config=False, fusion=False)).scan_source(_SRC, "m.py")
    ops = {(s.line, s.spelled, s.record) for s in report.sites}
    assert (8, "torch_npu.atb.npu_ring_mla", "npu_ring_mla") in ops
    assert (9, "torch_npu.atb.npu_ring_mla", "npu_ring_mla") in ops
    assert not any(s.record == "atb" or s.spelled == "torch_npu.atb" for s in report.sites)
    by_line = {(f.line, f.code): f.message for f in report.findings}
    assert (8, "KB101") not in by_line and (9, "KB101") not in by_line
    assert "torch_npu.atb.npu_ring_mla" in by_line[(10, "KB101")]
    assert "AttributeError" in by_line[(10, "KB101")]
    assert "torch_npu._npu_paged_attention" in by_line[(11, "KB101")]
    assert "bogus" in by_line[(12, "KB104")]  # imported from torch_npu.atb: checked

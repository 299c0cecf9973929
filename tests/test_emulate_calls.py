"""How emulated calls behave: binding, validation in kb check's words, in-place writes,
overloads, formats, device plumbing, tracing and what is not emulated."""

from __future__ import annotations

import os
import re
import warnings
from typing import Any

import pytest
import yaml

from kb.api.check import check_text
from kb.catalog.compiled import open_catalog
from kb.emulate import BackwardNotEmulated, CallRejected, EmulatorWarning, NotEmulated, calls
from tests.emulate_support import torch

BF16 = torch.bfloat16
#: this file as call sites name it (relative to the directory the tests run in)
HERE = os.path.relpath(__file__) if __file__.startswith(os.getcwd() + os.sep) else __file__


@pytest.fixture
def npu(emulation: Any) -> Any:
    import torch_npu

    return torch_npu


def kb_check_messages(
    operator: str, tensors: dict[str, Any], args: dict[str, Any] | None = None
) -> list[str]:
    doc = {
        "version": 1,
        "target": {"product": "atlas-a2"},
        "candidates": [
            {"module": "m", "operator": operator, "tensors": tensors, "args": args or {}}
        ],
    }
    return [
        f"{f.code} {f.message}" for f in check_text(yaml.safe_dump(doc)) if f.severity == "error"
    ]


def test_a_rejected_call_reads_as_kb_check_reads_it(npu: Any) -> None:
    x = torch.randn(4, 64).to(torch.int8)
    with pytest.raises(CallRejected) as caught:
        npu.npu_rms_norm(x, torch.ones(64, dtype=BF16))
    (expected,) = [
        m for m in kb_check_messages("npu_rms_norm", {"self": {"dtype": "int8"}}) if "KB107" in m
    ]
    assert expected in str(caught.value)
    assert caught.value.op == "npu_rms_norm" and caught.value.site.startswith(HERE)
    assert caught.value.findings[0]["code"] == "KB107"


def test_a_value_outside_the_allowed_set_is_kb106(npu: Any) -> None:
    x = torch.randn(1, 2, 4, 8, dtype=BF16)
    with pytest.raises(CallRejected, match="KB106 rotary_mode='sideways' is not allowed"):
        npu.npu_rotary_mul(x, x, x, rotary_mode="sideways")


def test_binding_errors_are_type_errors_in_kb_check_words(npu: Any) -> None:
    x, g = torch.randn(2, 8, dtype=BF16), torch.ones(8, dtype=BF16)
    with pytest.raises(TypeError, match=re.escape("no parameter 'eps' (did you mean epsilon?)")):
        npu.npu_rms_norm(x, g, eps=1e-6)
    with pytest.raises(TypeError, match="at most 3 positional"):
        npu.npu_rms_norm(x, g, 1e-6, 4)
    with pytest.raises(TypeError, match="missing required argument 'gamma'"):
        npu.npu_rms_norm(x)
    with pytest.raises(TypeError, match="multiple values"):
        npu.npu_rms_norm(x, g, input=x)
    y, _ = npu.npu_rms_norm(input=x, gamma=g)  # the binding's name for a schema self
    assert y.dtype == BF16 and y.shape == x.shape


def test_an_operator_without_a_reference_raises_not_emulated_naming_its_page(npu: Any) -> None:
    name = _unemulated_with_one_tensor()
    page = open_catalog().get(name)["upstream"]["url"]
    assert callable(getattr(npu, name))  # hasattr holds, as on the device
    with pytest.raises(NotEmulated, match=re.escape(name)) as caught:
        getattr(npu, name)(torch.zeros(8))
    assert page and page in str(caught.value)
    with pytest.raises(NotEmulated, match=re.escape(name)):
        getattr(torch.ops.npu, name)(torch.zeros(8))
    with pytest.raises(AttributeError, match="npu_rms_normalize"):
        npu.npu_rms_normalize  # noqa: B018


def _unemulated_with_one_tensor() -> str:
    """An operator with a page the emulator does not run, whose only required argument
    is a tensor (chosen from the records, so new references do not break the test)."""
    from kb.emulate import emulated

    for rec in open_catalog().records("operator"):
        if not (rec.get("upstream") or {}).get("url"):
            continue
        required = [p for p in rec["parameters"] if p.get("required", True)]
        if (
            not emulated(rec["name"])
            and rec.get("signature")
            and [p["type"] for p in required] == ["Tensor"]
            and "torch.ops.npu." + rec["name"] in rec["calls"]
        ):
            return str(rec["name"])
    raise AssertionError("no such operator")


def test_a_cache_writer_writes_into_its_argument(npu: Any) -> None:
    key = torch.randn(3, 2, 8, dtype=torch.float16)
    k_cache = torch.zeros(4, 16, 2, 8, dtype=torch.float16)
    v_cache = torch.zeros_like(k_cache)
    slots = torch.tensor([0, 17, 63], dtype=torch.int32)
    npu._npu_reshape_and_cache(key, key * 2, k_cache, v_cache, slots)
    assert torch.equal(k_cache[0, 0], key[0]) and torch.equal(k_cache[1, 1], key[1])
    assert torch.equal(v_cache[3, 15], key[2] * 2) and k_cache[2].abs().sum() == 0


def test_the_out_overload_fills_the_tensors_it_is_given(npu: Any) -> None:
    q, k = torch.randn(1, 4, 2, 16, dtype=BF16), torch.randn(1, 4, 1, 16, dtype=BF16)
    kw = dict(num_query_heads=2, num_key_value_heads=1, input_layout="BSND", softmax_scale=0.25)
    ref, _ = npu.npu_fused_infer_attention_score_v2(q, k, k, **kw)
    ws = npu._npu_fused_infer_attention_score_v2_get_max_workspace(q, k, k, **kw)
    out, lse = torch.empty_like(ref), torch.empty(1)
    got = npu.npu_fused_infer_attention_score_v2.out(q, k, k, workspace=ws, out=[out, lse], **kw)
    assert got[0] is out and torch.equal(out, ref)
    again = torch.ops.npu.npu_fused_infer_attention_score_v2.out(
        q, k, k, workspace=ws, attention_out=torch.empty_like(ref), softmax_lse=lse, **kw
    )
    assert torch.equal(again[0], ref)
    assert sorted(npu.npu_fused_infer_attention_score_v2.overloads()) == ["default", "out"]


def test_formats_are_remembered_per_storage(npu: Any) -> None:
    w = torch.nn.Parameter(torch.randn(8, 8, dtype=BF16), requires_grad=False)
    assert npu.get_npu_format(w) == 2
    w.data = npu.npu_format_cast(w.data, 29)  # the weight loaders' idiom
    assert npu.get_npu_format(w) == 29 and npu.get_npu_format(w.t()) == 29
    assert npu.get_npu_format(w) == npu.Format.FRACTAL_NZ
    t = torch.zeros(4, 4)
    assert (
        npu.npu_format_cast_(t, 29) is t and npu.get_npu_format(t) == 29
    )  # the .acl_format overload
    fresh = torch.zeros(4, 4)
    assert (
        npu.get_npu_format(npu.npu_format_cast(fresh, 29)) == 29 and npu.get_npu_format(fresh) == 2
    )


def test_a_weight_never_cast_to_nz_is_named(npu: Any) -> None:
    k = torch.randn(2, 1, 16, dtype=torch.float16)
    cache = torch.zeros(2, 1, 16, 16, dtype=torch.float16)
    with pytest.raises(
        CallRejected,
        match=r"key_cache, value_cache were never cast with torch_npu\.npu_format_cast",
    ):
        npu.npu_scatter_pa_kv_cache(
            k, k, cache, cache.clone(), torch.tensor([0, 3], dtype=torch.int32), cache_mode="PA_NZ"
        )
    nz = npu.npu_format_cast(cache, 29)
    npu.npu_scatter_pa_kv_cache(
        k,
        k,
        nz,
        npu.npu_format_cast(cache, 29),
        torch.tensor([0, 3], dtype=torch.int32),
        cache_mode="PA_NZ",
    )


def test_device_placement_and_streams_are_cpu_no_ops(emulation: Any) -> None:
    x = torch.randn(2, 2, device="npu")
    assert x.device.type == "cpu" and x.npu() is x and x.to("npu:0").device.type == "cpu"
    assert torch.nn.Linear(2, 2).npu().to("npu").weight.device.type == "cpu"
    assert (
        torch.npu.is_available()
        and torch.npu.device_count() == 1
        and torch.npu.current_device() == 0
    )
    torch.npu.set_device(0)
    s = torch.npu.Stream()
    e = torch.npu.Event(enable_timing=True)
    with torch.npu.stream(s):
        e.record()
    s.wait_event(e)
    torch.npu.current_stream().wait_stream(s)
    torch.npu.synchronize()
    torch.npu.empty_cache()
    assert e.query() and torch.npu.memory_allocated() == 0
    import torch_npu

    assert torch_npu.npu is torch.npu and torch_npu.npu.utils.is_available()


def test_every_call_is_traced_with_its_site(npu: Any) -> None:
    x, g = torch.randn(2, 8, dtype=BF16), torch.ones(8, dtype=BF16)
    npu.npu_rms_norm(x, g)
    last = calls()[-1]
    assert last.op == "npu_rms_norm" and last.file == HERE
    assert last.inputs[0] == ("self", (2, 8), "bfloat16")
    assert last.as_dict()["site"].endswith(f":{last.line}")


def test_a_deprecated_operator_warns_once_per_site(npu: Any) -> None:
    x = torch.randn(2, 8, dtype=torch.float16)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(3):
            npu.npu_silu(x)
    hits = [w for w in seen if issubclass(w.category, EmulatorWarning)]
    assert len(hits) == 1 and "KB102" in str(hits[0].message) and hits[0].filename == HERE


def test_a_gradient_asked_of_an_emulated_operator_says_it_is_not_emulated(npu: Any) -> None:
    x = torch.randn(1, 2, 2, 8, dtype=torch.float32, requires_grad=True)
    cos = torch.randn(1, 2, 1, 8)
    y = npu.npu_rotary_mul(x, cos, cos)
    with pytest.raises(BackwardNotEmulated, match="npu_rotary_mul"):
        y.sum().backward()

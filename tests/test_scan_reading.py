"""What the model reader makes of code shapes met in original research code (issue 29
item 2): library kernels and base classes read by their documented behaviour, expert
outputs gathered in a list, scores clamped under a mask, slot writes into a fresh tensor,
kernels called through a registry, a module built but run only behind a flag, and a
composite configuration's parts.  Each fixture is written for these tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kb.api.scan import scanner
from kb.scan.engine import ScanOptions

READING = Path(__file__).resolve().parent / "fixtures" / "modelread"


@pytest.fixture(scope="module")
def scanned() -> Any:
    made = scanner(options=ScanOptions(product="atlas-a3", use_config=False))
    cache: dict[str, Any] = {}

    def scan(name: str) -> Any:
        if name not in cache:
            cache[name] = made.scan([str(READING / name)])
        return cache[name]

    return scan


def _facts(report: Any, module: str, kind: str) -> dict[str, Any]:
    found = [m for m in report.inventory if m.name == module and m.kind.startswith(kind)]
    assert found, [(m.name, m.kind) for m in report.inventory]
    return found[0].facts  # type: ignore[no-any-return]


def _phases(report: Any, module: str) -> set[str]:
    return {e["phase"] for e in report.plan if e["module"] == module}


def test_flash_attn_rotary_pairs_halves_unless_interleaved(scanned) -> None:
    report = scanned("library_kernels.py")
    assert _facts(report, "HalfTurnAttention", "attention")["rope"] == "half"
    assert _facts(report, "PairTurnAttention", "attention")["rope"] == "interleave"
    # the optional import's fallback (None) does not hide the kernel
    assert _facts(report, "HalfTurnAttention", "attention")["form"] == "flash_attn"


def test_xformers_rope_padded_writes_the_cache_it_is_handed(scanned) -> None:
    facts = _facts(scanned("library_kernels.py"), "PaddedCacheAttention", "attention")
    assert facts["rope"] == "interleave" and facts["cache"] and facts["causal"] is True


def test_a_diffusers_attention_subclass_runs_its_processor(scanned) -> None:
    report = scanned("processor_subclass.py")
    found = [m for m in report.inventory if m.kind.startswith("attention")]
    assert found and found[0].kind == "attention.bidirectional"
    assert found[0].facts["form"] == "sdpa"
    assert all(e["phase"] == "prefill" for e in report.plan)  # no cache: no decode phase


def test_expert_outputs_collected_in_a_list_are_experts(scanned) -> None:
    report = scanned("expert_lists.py")
    assert _facts(report, "ArgmaxRouter", "moe.router")["topk"] == 1
    for module in ("ChunkedExperts", "SortedExperts"):
        facts = _facts(report, module, "moe.experts")
        assert facts["activation"] == "silu" and facts["glu"] == "first"
    assert "sorted" in _facts(report, "SortedExperts", "moe.experts")["form"]


def test_clamped_scores_slot_writes_registry_kernels_and_flagged_modules(scanned) -> None:
    report = scanned("scores_and_slots.py")
    assert _facts(report, "ClampedCausalAttention", "attention")["causal"] is True
    slots = _facts(report, "SlotRotaryAttention", "attention")
    assert slots["rope"] == "interleave" and slots["form"] == "sdpa"
    assert "cache" not in slots and slots["causal"] is False  # a fresh tensor is no cache
    assert _phases(report, "SlotRotaryAttention") == {"prefill"}
    # built in __init__, run only behind a flag the defaults leave off: read on its own
    assert _facts(report, "GatedMixer", "mlp")["activation"] == "gelu_tanh"


def test_a_composite_config_builds_its_parts_from_their_classes(scanned) -> None:
    report = scanned("pair/modeling_pair.py")
    assert _facts(report, "TextGatedFFN", "mlp")["activation"] == "silu"
    assert _facts(report, "VisionFFN", "mlp")["activation"] == "gelu"


def test_an_optional_import_keeps_both_paths(scanned) -> None:
    """``try: import kernel / except ImportError: kernel = None`` then ``if kernel is not
    None``: the path without the package is read too (here the only one that computes)."""
    facts = _facts(scanned("optional_path.py"), "OptionalPathAttention", "attention")
    assert facts["form"] == "sdpa" and facts["causal"] is False

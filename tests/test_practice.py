"""Practice as evidence: calls that ship must pass kb check, and kb scan must read the
calibration corpus (../shared/corpus, public vLLM-Ascend code) without false errors.

The candidate lists in tests/fixtures/practice/ are transcribed from shipping code, each
candidate with its file:line; the corpus test reads the corpus itself (CI has it).
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest
import yaml

from kb.api.check import check_paths
from kb.api.scan import ScanOptions, scan_paths
from kb.catalog.compiled import open_catalog

HERE = Path(__file__).parent
PRACTICE = sorted((HERE / "fixtures" / "practice").glob("*.yaml"))
CORPUS = HERE.parent.parent / "shared" / "corpus" / "vllm-ascend"


def test_transcribed_shipping_calls_pass_kb_check() -> None:
    findings = check_paths(PRACTICE)
    assert [
        f"{f.file}:{f.line}: {f.code} {f.message}" for f in findings if f.severity == "error"
    ] == []


def test_the_transcription_covers_every_module_family() -> None:
    catalog = open_catalog()
    cands = [c for p in PRACTICE for c in yaml.safe_load(p.read_text())["candidates"]]
    assert len(cands) >= 50
    assert all(re.search(r"\.py:\d+", c.get("evidence", "")) for c in cands)
    families = set()
    for c in cands:
        if c.get("kind") == "prefetch":
            families.add("prefetch")
            continue
        rec = catalog.get(c["operator"])
        families.add(rec["category"])
        if rec["category"] == "matmul" and "quant" in rec["name"]:
            families.add("quantized-matmul")
    assert {
        "attention",
        "mla",
        "moe",
        "quantized-matmul",
        "norm",
        "rope",
        "kv-cache",
        "prefetch",
    } <= families


# -- the corpus ----------------------------------------------------------------------------

needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is not here")
SUBMODULES = {
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
}
DTYPES = {
    "hifloat8",
    "float8_e8m0fnu",
    "float4_e2m1fn_x2",
    "float4_e1m2fn_x2",
    "int4",
    "float8_e5m2",
    "float8_e4m3fn",
    "bfloat16",
    "float16",
    "float32",
    "int8",
    "int32",
}


def _dotted(node: ast.AST) -> list[str]:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return []
    return [node.id, *reversed(parts)]


def independent_count(root: Path) -> int:
    """Call sites by a plain AST pass: the direct spellings and import aliases only."""
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            if not name.endswith(".py"):
                continue
            try:
                tree = ast.parse(Path(dirpath, name).read_text(encoding="utf-8"))
            except (SyntaxError, UnicodeDecodeError):
                continue
            aliases = {"torch_npu"} | {
                a.asname
                for n in ast.walk(tree)
                if isinstance(n, ast.Import)
                for a in n.names
                if a.name == "torch_npu" and a.asname
            }
            imported = {
                a.asname or a.name
                for n in ast.walk(tree)
                if isinstance(n, ast.ImportFrom) and n.module == "torch_npu"
                for a in n.names
            }
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call):
                    continue
                parts = _dotted(node.func)
                if parts and parts[-1] in ("default", "out"):
                    parts = parts[:-1]
                if len(parts) == 2 and parts[0] in aliases and parts[1] not in SUBMODULES | DTYPES:
                    total += not parts[1].startswith("__")
                elif (
                    len(parts) == 4
                    and parts[:3] in (["torch", "ops", "npu"], ["torch", "ops", "atb"])
                ) or (len(parts) == 1 and parts[0] in imported):
                    total += 1
    return total


@needs_corpus
def test_scan_reads_the_corpus_with_no_false_errors() -> None:
    report = scan_paths([str(CORPUS)], ScanOptions(fusion=False, use_config=False))
    expected = independent_count(CORPUS)
    assert report.files == 202
    assert report.calls >= 0.95 * expected, (report.calls, expected)
    errors = [f for f in report.findings if f.severity == "error"]
    # the one known defect (../shared/corpus/README.md): the non-fp8 branch of the A5
    # adaptor's npu_grouped_matmul_swiglu_quant_v2 call
    defect = [
        f
        for f in errors
        if f.file.endswith("vllm_ascend/device/device_op.py") and 1190 <= f.line <= 1202
    ]
    assert {f.code for f in defect} == {"KB104", "KB506"}
    assert {
        m for f in defect for m in re.findall(r"'(swiglu_limit|use_mxfp_quant)'", f.message)
    } == {"swiglu_limit", "use_mxfp_quant"}
    # a true finding the README does not list: the GPT-J branch of vllm-ascend's M-RoPE call
    # passes rotary_mode="interleaved", which the wrapper refuses in every release
    # (Ascend/op-plugin 517f2e7d, op_plugin/ops/opapi/RopeWithSinCosCacheKernelNpuOpApi.cpp
    # 20-25: only "half" or "interleave")
    gptj = [
        f
        for f in errors
        if f.file.endswith("vllm_ascend/ops/rotary_embedding.py")
        and f.code == "KB106"
        and "rotary_mode='interleaved'" in f.message
    ]
    assert len(gptj) <= 1
    rest = [f for f in errors if f not in defect and f not in gptj]
    assert [f"{f.file}:{f.line} {f.code} {f.message}" for f in rest] == []

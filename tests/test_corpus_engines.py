"""kb scan on engines nobody calibrated it on: MindIE-LLM and dlinfer (../shared/corpus).

The corpus holds their torch_npu-calling and operator-registering files, unchanged (see
its README for commits and licences); the tests read it and skip when it is absent.
What the scanner reports as an error there is false unless upstream proves it real; the
one real defect known is dlinfer's A2-only ``npu_mm_all_reduce_base`` on an unguarded
path that also runs on Atlas A3.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.api.scan import ScanOptions, scan_paths

_ROOT = Path(__file__).resolve().parent.parent
CORPUS = next((p / "shared" / "corpus" for p in (_ROOT.parent, _ROOT.parent.parent)
               if (p / "shared" / "corpus").is_dir()), _ROOT.parent / "shared" / "corpus")  # fmt: skip


def _errors(tree: str, **options: object) -> list[str]:
    path = CORPUS / tree
    if not path.is_dir():
        pytest.skip(f"{path} is not here")
    report = scan_paths([str(path)], ScanOptions(fusion=False, use_config=False, **options))  # type: ignore[arg-type]
    return [f"{f.file}:{f.line} {f.code} {f.message}" for f in report.findings if f.severity == "error"]


@pytest.mark.parametrize("tree", ["mindie-llm", "dlinfer"])
def test_no_false_errors_without_a_product(tree: str) -> None:
    assert _errors(tree) == []


def test_dlinfer_a2_only_operator_on_its_a3_path() -> None:
    errors = _errors("dlinfer", product="atlas-a3")
    assert len(errors) == 1
    (error,) = errors
    assert "dlinfer/vendor/ascend/torch_npu_ops.py" in error and " KB201 " in error
    assert "npu_mm_all_reduce_base" in error and "atlas-a2" in error


def test_dlinfer_own_atb_operators_are_read_from_its_registrations() -> None:
    path = CORPUS / "dlinfer"
    if not path.is_dir():
        pytest.skip(f"{path} is not here")
    report = scan_paths([str(path)], ScanOptions(fusion=False, use_config=False))
    custom = {s.spelled for s in report.sites if s.custom}
    assert {"torch.ops.atb.linear", "torch.ops.atb.allreduce"} <= custom

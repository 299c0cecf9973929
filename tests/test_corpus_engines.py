"""kb scan on engines nobody calibrated it on: MindIE-LLM and dlinfer (../shared/corpus).

The corpus holds their torch_npu-calling and operator-registering files, unchanged (see
its README for commits and licences); the tests read it and skip when it is absent.
What the scanner reports as an error there is false unless upstream proves it real.  Two
real defects are known, both in dlinfer at a50184e3734e5799bd4cec484d3a2ac46a36ae86:

* its A2-only ``npu_mm_all_reduce_base`` on an unguarded path that also runs on Atlas A3
  (``dlinfer/vendor/ascend/torch_npu_ops.py``, the eager ``linear(all_reduce=True)``), a
  finding with ``--product atlas-a3``;
* its own operator ``atb::allreduce`` is declared with two parameters
  (``dlinfer/graph/dicp/vendor/AtbGraph/ext_ops.py`` lines 42-46: ``x``, ``reduce_type``),
  while the graph pattern that replaces all-reduce calls it with three
  (``pattern_replacement.py`` line 126 passes ``group`` too; the ATB conversion at
  ``conversion.py`` lines 130-131 expects it), so tracing that replacement raises.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.api.scan import ScanOptions, scan_paths

_ROOT = Path(__file__).resolve().parent.parent
CORPUS = next(
    (
        p / "shared" / "corpus"
        for p in (_ROOT.parent, _ROOT.parent.parent)
        if (p / "shared" / "corpus").is_dir()
    ),
    _ROOT.parent / "shared" / "corpus",
)


def _errors(tree: str, **options: object) -> list[str]:
    path = CORPUS / tree
    if not path.is_dir():
        pytest.skip(f"{path} is not here")
    report = scan_paths([str(path)], ScanOptions(fusion=False, use_config=False, **options))  # type: ignore[arg-type]
    return [
        f"{f.file}:{f.line} {f.code} {f.message}" for f in report.findings if f.severity == "error"
    ]


def test_mindie_llm_has_no_errors_without_a_product() -> None:
    assert _errors("mindie-llm") == []


def _allreduce_arity(error: str) -> bool:
    return (
        "AtbGraph/pattern_replacement.py:126 KB501" in error
        and "torch.ops.atb.allreduce" in error
        and "ext_ops.py:42" in error
    )


def test_dlinfer_errors_without_a_product_are_its_known_defect_only() -> None:
    errors = _errors("dlinfer")
    assert len(errors) == 1 and _allreduce_arity(errors[0]), errors


def test_dlinfer_a2_only_operator_on_its_a3_path() -> None:
    errors = [e for e in _errors("dlinfer", product="atlas-a3") if not _allreduce_arity(e)]
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

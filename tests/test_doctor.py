"""``kb doctor`` against fake installed torch_npu packages (never imported, no network)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from kb.audit.doctor import NotInstalled, find_install
from kb.catalog.releases import ReleaseData
from kb.cli import main
from tests.conftest import operator_yaml
from tests.test_releases import FIXTURES, fixture_data  # noqa: F401 - a fixture

_POISON = "raise RuntimeError('kb doctor must not import torch_npu')\n"


def fake_site(root: Path, version: str, schema_from: str, *, metadata: bool = True) -> Path:
    """A site-packages with torch_npu/ (its schema file) and, optionally, its dist-info."""
    pkg = root / "torch_npu"
    (pkg / "csrc" / "aten").mkdir(parents=True)
    (pkg / "__init__.py").write_text(_POISON)
    (pkg / "version.py").write_text(f"__version__ = '{version}'\ngit_version = 'abc'\n")
    schema = (FIXTURES / f"{schema_from}.yaml").read_text()
    (pkg / "csrc" / "aten" / "npu_native_functions_by_codegen.yaml").write_text(schema)
    if metadata:
        info = root / f"torch_npu-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: torch_npu\nVersion: {version}\n"
        )
        (info / "RECORD").write_text("torch_npu/__init__.py,,\n")
    return root


def _records(record_tree: Callable[..., Path], *names: str) -> None:
    record_tree({f"operators/{n}.yaml": operator_yaml(n) for n in names})


def test_reports_differences_missing_and_uncovered(
    fixture_data: ReleaseData,  # noqa: F811
    record_tree,
    tmp_path: Path,
    capsys,
) -> None:
    _records(record_tree, "npu_alpha", "npu_beta", "npu_extra", "npu_ghost")
    site = fake_site(tmp_path / "site", "2.1.0.post10", "2.1.0.post10")
    assert main(["doctor", "--path", str(site), "--format", "json"]) == 1
    got = json.loads(capsys.readouterr().out)
    assert got["torch_npu"]["version"] == "2.1.0.post10"
    assert got["torch_npu"]["release"] == "2.1.0.post10" and got["torch_npu"]["exact"] is True
    assert [d["operator"] for d in got["differs"]] == ["npu_alpha"]
    alpha = got["differs"][0]
    assert alpha["changes"] == ['+ str mode="a"'], "what the documented signature adds"
    assert alpha["release_schema"] is True, "2.1.0.post10 did ship the older schema"
    assert {m["operator"]: m["in_release"] for m in got["missing"]} == {
        "npu_extra": False,
        "npu_ghost": None,
    }
    assert got["not_in_kb"] == ["npu_delta"], "overloads and backward kernels are not listed"
    assert got["summary"]["matching"] == 1 and got["summary"]["consistent"] is False
    assert "torch_npu" not in sys.modules


def test_text_report(fixture_data: ReleaseData, record_tree, tmp_path: Path, capsys) -> None:  # noqa: F811
    _records(record_tree, "npu_alpha", "npu_beta", "npu_extra")
    site = fake_site(tmp_path / "site", "2.1.0.post10", "2.1.0.post10")
    assert main(["doctor", "--path", str(site)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("torch_npu 2.1.0.post10 (a harvested release)")
    assert "1 as documented, 1 differ, 1 missing" in out
    assert '  npu_alpha: + str mode="a"' in out
    assert "npu_extra: first in 2.2.0; not in 2.1.0.post10" in out
    assert "Installed, not in the knowledge base (1)\n  npu_delta" in out
    assert out.rstrip().endswith("differences found (exit 1)")


def test_consistent_install_exits_0(
    fixture_data: ReleaseData,  # noqa: F811
    record_tree,
    tmp_path: Path,
    capsys,
) -> None:
    _records(record_tree, "npu_alpha", "npu_beta")
    site = fake_site(tmp_path / "site", "2.2.0", "2.2.0")
    assert main(["doctor", "--path", str(site / "torch_npu")]) == 0, "the package dir works too"
    assert "consistent with the knowledge base" in capsys.readouterr().out


def test_unexpected_schema_is_flagged(
    fixture_data: ReleaseData,  # noqa: F811
    record_tree,
    tmp_path: Path,
    capsys,
) -> None:
    _records(record_tree, "npu_alpha")
    site = fake_site(tmp_path / "site", "2.2.0", "2.1.0.post10")  # says 2.2.0, has older schemas
    assert main(["doctor", "--path", str(site), "--format", "json"]) == 1
    assert json.loads(capsys.readouterr().out)["differs"][0]["release_schema"] is False


def test_found_on_sys_path_and_version_from_version_py(
    fixture_data: ReleaseData,  # noqa: F811
    tmp_path: Path,
) -> None:
    site = fake_site(tmp_path / "site", "2.2.0+gitabc", "2.2.0", metadata=False)
    got = find_install(search_path=[str(tmp_path / "empty"), str(site)])
    assert got.package_dir == (site / "torch_npu").resolve()
    assert got.version == "2.2.0+gitabc" and got.metadata is None
    assert "torch_npu" not in sys.modules


def test_metadata_is_preferred_and_stale_dist_info_ignored(tmp_path: Path) -> None:
    site = fake_site(tmp_path / "site", "2.1.0.post8", "2.1.0.post8")
    stale = site / "torch_npu-2.9.0.dist-info"
    stale.mkdir()
    (stale / "METADATA").write_text("Name: torch_npu\nVersion: 2.9.0\n")
    got = find_install(site)
    assert got.version == "2.1.0.post8"
    assert got.metadata == site / "torch_npu-2.1.0.post8.dist-info"


def test_no_torch_npu_is_a_finding_exit_1(record_tree, tmp_path: Path, monkeypatch, capsys) -> None:
    """Not installed is a fact about the environment (1), not bad usage (2)."""
    _records(record_tree, "npu_alpha")
    (tmp_path / "empty").mkdir()
    assert main(["doctor", "--path", str(tmp_path / "empty")]) == 1
    assert "no torch_npu package in" in capsys.readouterr().err
    monkeypatch.setattr(sys, "path", [str(tmp_path / "empty")])
    assert main(["doctor"]) == 1
    assert "no torch_npu in this Python environment" in capsys.readouterr().err
    assert main(["doctor", "--format", "json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["torch_npu"] is None and "no torch_npu" in out["finding"]


def test_doctor_path_that_does_not_exist_is_usage_error(
    record_tree, tmp_path: Path, capsys
) -> None:
    assert main(["doctor", "--path", str(tmp_path / "nowhere")]) == 2
    assert "does not exist" in capsys.readouterr().err
    broken = tmp_path / "broken" / "torch_npu"
    broken.mkdir(parents=True)
    with pytest.raises(NotInstalled, match="has no csrc/aten"):
        find_install(tmp_path / "broken")


def test_unreadable_schema_file_exits_2(record_tree, tmp_path: Path, capsys) -> None:
    _records(record_tree, "npu_alpha")
    site = fake_site(tmp_path / "site", "2.2.0", "2.2.0")
    (site / "torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml").write_text("a: [1,\n")
    assert main(["doctor", "--path", str(site)]) == 2
    assert "cannot parse" in capsys.readouterr().err


def test_real_release_data_for_an_installed_2_7_1(record_tree, tmp_path: Path, capsys) -> None:
    """With the committed matrix: an install of 2.7.1 lacks npu_mla_prolog_v3 (2.7.1.post2+)."""
    _records(record_tree, "npu_mla_prolog_v3")
    site = fake_site(tmp_path / "site", "2.7.1", "2.1.0.post10")
    assert main(["doctor", "--path", str(site), "--format", "json"]) == 1
    got = json.loads(capsys.readouterr().out)
    assert got["torch_npu"]["release"] == "2.7.1"
    assert got["missing"] == [
        {"operator": "npu_mla_prolog_v3", "first": "2.6.0.post5", "in_release": False}
    ]

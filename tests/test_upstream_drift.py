"""Drift: none against the sources the records came from; exactly the edits otherwise."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.upstream.helpers import build_wheel, config_dir, op_plugin_copy, pages_dir

from tools.upstream.cli import main

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(op-plugin copy, wheel, records drafted from exactly those sources)."""
    op_plugin = op_plugin_copy(tmp_path, real_layout=True)
    wheel = build_wheel(tmp_path)
    records = tmp_path / "records"
    records.mkdir()
    args = ["--op-plugin", str(op_plugin), "--wheel", str(wheel), "--records", str(records)]
    assert main(["import", *args, "--commit", "abc1234"]) == 0
    return op_plugin, wheel, records


def _drift(
    op_plugin: Path, wheel: Path, records: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, dict]:
    capsys.readouterr()
    code = main(
        [
            "drift",
            "--op-plugin",
            str(op_plugin),
            "--wheel",
            str(wheel),
            "--records",
            str(records),
            "--format",
            "json",
        ]
    )
    return code, json.loads(capsys.readouterr().out)


def test_no_drift_against_the_sources_records_were_built_from(
    built: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = _drift(*built, capsys)
    assert (code, report["drift"]) == (0, [])
    assert report["summary"]["records"] == 10
    assert (
        main(
            [
                "drift",
                "--op-plugin",
                str(built[0]),
                "--wheel",
                str(built[1]),
                "--records",
                str(built[2]),
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.startswith("no drift (10 records, 10 upstream operators)")


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8-sig")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_drift_reports_exactly_the_edits(
    built: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    op_plugin, wheel, records = built
    pages, config = pages_dir(op_plugin), config_dir(op_plugin)
    # 1. a schema change
    _edit(
        config / "op_plugin_functions.yaml",
        "npu_fake_scatter(Tensor self, Tensor indices, Tensor updates) -> Tensor",
        "npu_fake_scatter(Tensor self, Tensor indices, Tensor updates, *, int axis=0) -> Tensor",
    )
    # 2. a new dtype on a page, 3. a product switched on
    _edit(
        pages / "torch_npu-npu_fake_norm.md",
        "数据类型支持`float16`、`bfloat16`，数据格式支持$ND$。",
        "数据类型支持`float16`、`bfloat16`、`float32`，数据格式支持$ND$、FRACTAL_NZ。",
    )
    _edit(
        pages / "torch_npu-npu_fake_norm.md",
        "<term>Atlas 推理系列产品</term>    |     x",
        "<term>Atlas 推理系列产品</term>    |     √",
    )
    # 4. a deprecation, 5. a page removed, 6. a new page
    _edit(config / "deprecated.yaml", "deprecated:\n", "deprecated:\n  - name: npu_fake_scatter_\n")
    (pages / "torch_npu-fake_limit.md").unlink()
    (pages / "torch_npu-npu_fake_new.md").write_text(
        "# torch_npu.npu_fake_new\n\n## 函数原型\n\n```python\ntorch_npu.npu_fake_new(x) -> Tensor\n```\n",
        encoding="utf-8",
    )
    # 7. a version range moved
    _edit(
        config / "op_plugin_functions.yaml",
        "op_api: v2.3\n\n  - func: npu_fake_scatter_",
        "op_api: [v2.3, newest]\n\n  - func: npu_fake_scatter_",
    )

    code, report = _drift(op_plugin, wheel, records, capsys)
    assert code == 1
    got = {(d["kind"], d["name"]) for d in report["drift"]}
    assert got == {
        ("signature", "npu_fake_scatter"),
        ("dtypes", "npu_fake_norm"),
        ("formats", "npu_fake_norm"),
        ("products", "npu_fake_norm"),
        ("deprecation", "npu_fake_scatter_"),
        ("removed", "fake_limit"),
        ("new", "npu_fake_new"),
        ("versions", "npu_fake_scatter"),
    }
    by_kind = {d["kind"]: d for d in report["drift"]}
    assert by_kind["dtypes"]["parameter"] == "x" and by_kind["dtypes"]["added"] == ["float32"]
    assert by_kind["formats"]["added"] == ["FRACTAL_NZ"]
    assert (
        by_kind["products"]["added"] == ["atlas-inference"] and by_kind["products"]["removed"] == []
    )
    assert by_kind["signature"]["upstream"].endswith("*, int axis=0) -> Tensor")
    assert by_kind["versions"]["upstream"] == ["2.3", "2.4"]
    assert report["summary"]["kinds"]["new"] == 1 and report["summary"]["total"] == 8

    # refreshing the records from the edited sources clears every fact drift
    assert (
        main(
            [
                "import",
                "--op-plugin",
                str(op_plugin),
                "--wheel",
                str(wheel),
                "--records",
                str(records),
                "--no-undocumented",
            ]
        )
        == 0
    )
    code, report = _drift(op_plugin, wheel, records, capsys)
    assert {(d["kind"], d["name"]) for d in report["drift"]} == {
        ("deprecation", "npu_fake_scatter_"),
        ("removed", "fake_limit"),
    }


def test_json_shape(built: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    op_plugin, wheel, records = built
    (next(records.rglob("npu_fake_cast.yaml"))).unlink()
    code, report = _drift(op_plugin, wheel, records, capsys)
    assert code == 1
    assert set(report) == {"summary", "drift", "notes"}
    assert set(report["summary"]) == {"total", "kinds", "records", "upstream_operators"}
    assert list(report["summary"]["kinds"]) == [
        "new",
        "removed",
        "signature",
        "dtypes",
        "formats",
        "products",
        "deprecation",
        "status",
        "versions",
    ]
    (item,) = report["drift"]
    assert item == {
        "kind": "new",
        "name": "npu_fake_cast",
        "file": None,
        "message": item["message"],
        "status": "deprecated",
        "source": "docs/zh/custom_APIs/torch_npu/（beta）torch_npu-npu_fake_cast.md",
    }


def test_text_report_names_record_and_upstream(
    built: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    op_plugin, wheel, records = built
    path = next(records.rglob("npu_fake_norm.yaml"))
    path.write_text(path.read_text().replace("float epsilon=1e-06", "float epsilon=1e-05"))
    capsys.readouterr()
    assert (
        main(
            [
                "drift",
                "--op-plugin",
                str(op_plugin),
                "--wheel",
                str(wheel),
                "--records",
                str(records),
            ]
        )
        == 1
    )
    out = capsys.readouterr().out
    assert out.startswith("drift: 1 (signature 1)")
    assert re.search(r"record: +npu_fake_norm\(.*epsilon=1e-05", out)
    assert re.search(
        r"upstream: +npu_fake_norm\(.*epsilon=1e-06.*\(op_plugin_functions.yaml\)", out
    )


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    script = ROOT / "scripts" / "import_upstream.py"
    run = [sys.executable, str(script)]
    missing = subprocess.run(
        [*run, "drift", "--op-plugin", str(tmp_path / "nope")], capture_output=True, text=True
    )
    assert missing.returncode == 2 and "not found" in missing.stderr
    bad = subprocess.run([*run, "drift"], capture_output=True, text=True)
    assert bad.returncode == 2
    wheel = subprocess.run(
        [*run, "drift", "--op-plugin", str(tmp_path), "--wheel", str(tmp_path / "x.whl")],
        capture_output=True,
        text=True,
    )
    assert wheel.returncode == 2


def test_skeleton_script(tmp_path: Path) -> None:
    op_plugin = op_plugin_copy(tmp_path)
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "skeleton.py"),
            "npu_fake_norm",
            "--op-plugin",
            str(op_plugin),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.startswith("signature: npu_fake_norm(Tensor x, Tensor gamma, *, int mode=0")
    assert "summary" not in out


def test_superseded_by_and_deprecation_facts_follow_deprecated_yaml(
    built: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    op_plugin, wheel, records = built
    path = next(records.rglob("npu_fake_cast.yaml"))
    assert "replace: torch_npu.npu_fake_norm" in path.read_text()
    _edit(path, "superseded_by: npu_fake_norm", "superseded_by: npu_fake_scatter")
    _edit(path, "listed_in: [deprecated.yaml, page]", "listed_in: [page]")
    code, report = _drift(op_plugin, wheel, records, capsys)
    assert code == 1
    messages = sorted(d["message"] for d in report["drift"])
    assert [(d["kind"], d["name"]) for d in report["drift"]] == [
        ("deprecation", "npu_fake_cast")
    ] * 2
    assert messages[0] == "superseded_by is npu_fake_scatter, deprecated.yaml names npu_fake_norm"
    assert messages[1].startswith("upstream.deprecation is {'listed_in': ['page']")
    args = ["--op-plugin", str(op_plugin), "--wheel", str(wheel), "--records", str(records)]
    assert main(["import", *args, "--commit", "abc1234"]) == 0
    assert _drift(op_plugin, wheel, records, capsys) == (
        0,
        _drift(op_plugin, wheel, records, capsys)[1],
    )
    assert _drift(op_plugin, wheel, records, capsys)[1]["drift"] == []
    assert "superseded_by: npu_fake_norm" in path.read_text()


def test_refresh_drops_a_deprecation_upstream_withdrew(
    built: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    op_plugin, wheel, records = built
    config, pages = config_dir(op_plugin), pages_dir(op_plugin)
    _edit(
        config / "deprecated.yaml",
        "  - name: npu_fake_cast\n    replace: 'torch_npu.npu_fake_norm'\n",
        "",
    )
    _edit(pages / "beta-torch_npu-npu_fake_cast.md", "该接口计划废弃，", "")
    args = ["--op-plugin", str(op_plugin), "--wheel", str(wheel), "--records", str(records)]
    assert main(["import", *args]) == 0
    text = next(records.rglob("npu_fake_cast.yaml")).read_text()
    assert "deprecation:" not in text and "listed_in" not in text
    code, report = _drift(op_plugin, wheel, records, capsys)
    assert code == 1
    assert [(d["kind"], d["name"]) for d in report["drift"]] == [("deprecation", "npu_fake_cast")]
    assert report["drift"][0]["message"] == "the record says deprecated, upstream does not"


def test_products_named_by_evidence_are_not_drift(
    built: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    op_plugin, wheel, records = built
    path = next(records.rglob("npu_fake_norm.yaml"))
    text = path.read_text()
    products = re.search(r"^products: \[(.*)\]$", text, re.M)
    assert products is not None
    _edit(path, products.group(0), f"products: [{products.group(1)}, atlas-200i-500-a2]")
    code, report = _drift(op_plugin, wheel, records, capsys)
    assert code == 1 and report["drift"][0]["removed"] == ["atlas-200i-500-a2"]
    path.write_text(
        path.read_text() + "evidence:\n  - about: [products]\n    values: [atlas-200i-500-a2]\n"
        "    kind: page\n    repo: example/kernels\n    commit: abc1234\n"
        "    path: docs/fake_norm.md\n    says: A newer kernel reference lists it.\n"
    )
    code, report = _drift(op_plugin, wheel, records, capsys)
    assert (code, report["drift"]) == (0, [])

"""Release facts: the harvester on fixture wheels, version matching, enrich, filters, show."""

from __future__ import annotations

import importlib.util
import json
import sys
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import kb.catalog.releases as releases
from kb.catalog.compiled import open_catalog
from kb.catalog.releases import (
    ReleaseData,
    args_missing,
    availability,
    enrich,
    is_public,
    read_schemas,
    record_has,
    record_schema_in,
    release_key,
    schema_diff,
    sort_releases,
)
from kb.cli import main
from tests.conftest import operator_yaml

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "releases"
VERSIONS = ["2.1.0.post8", "2.1.0.post10", "2.2.0"]
NEW_ALPHA = 'npu_alpha(Tensor x, float eps=1e-06, *, str mode="a") -> Tensor'
OLD_ALPHA = "npu_alpha(Tensor x, float eps=1e-06) -> Tensor"


def load_harvester() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "harvest_releases", ROOT / "scripts" / "harvest_releases.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("harvest_releases", module)
    spec.loader.exec_module(module)
    return module


harvester = load_harvester()


def fixture_wheel(version: str, dest: Path) -> Path:
    """A tiny wheel holding only what the harvester reads (fixed timestamps: same bytes)."""
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / f"torch_npu-{version}-cp311-cp311-manylinux_2_28_x86_64.whl"
    members = {releases.SCHEMA_MEMBER: (FIXTURES / f"{version}.yaml").read_bytes()}
    docs = FIXTURES / f"{version}.docs.py"
    if docs.exists():
        members[releases.DOCS_MEMBER] = docs.read_bytes()
    members[f"torch_npu-{version}.dist-info/METADATA"] = (
        f"Name: torch_npu\nVersion: {version}\n".encode()
    )
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in sorted(members.items()):
            zf.writestr(zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0)), data)
    return path


def fake_downloader(
    store: Path,
    fail: set[str] = frozenset(),
    no_wheel: set[str] = frozenset(),  # type: ignore[assignment]
    calls: list[str] | None = None,
) -> Callable[[str, Path], Path]:
    """Stands in for ``pip download``: copies fixture wheels, or fails as told."""

    def download(version: str, cache: Path) -> Path:
        if calls is not None:
            calls.append(version)
        if version in fail:
            raise harvester.DownloadError("connection reset (simulated)")
        if version in no_wheel:
            raise harvester.NoWheel("no Linux wheel (simulated)")
        src = fixture_wheel(version, store)
        cache.mkdir(parents=True, exist_ok=True)
        target = cache / src.name
        target.write_bytes(src.read_bytes())
        return target

    return download


def build_fixture_data(tmp: Path) -> Path:
    """Harvest the fixture releases into ``tmp/releases.json`` (what tests point KB at)."""
    out = tmp / "releases.json"
    code = harvester.harvest(
        VERSIONS, tmp / "cache", out, fake_downloader(tmp / "store"), log=lambda _: None
    )
    assert code == 0
    return out


@pytest.fixture
def fixture_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ReleaseData]:
    """Point kb.catalog.releases at the fixture data for the whole test."""
    path = build_fixture_data(tmp_path / "data")
    monkeypatch.setattr(releases, "DATA_FILE", path)
    releases._load.cache_clear()
    yield releases.load()
    releases._load.cache_clear()


# --- the harvester ---------------------------------------------------------------------


def test_harvest_reads_the_wheels_and_is_byte_identical_on_rerun(tmp_path: Path) -> None:
    out = tmp_path / "releases.json"
    calls: list[str] = []
    download = fake_downloader(tmp_path / "store", calls=calls)
    assert (
        harvester.harvest(
            list(reversed(VERSIONS)), tmp_path / "cache", out, download, log=lambda _: None
        )
        == 0
    )
    first = out.read_bytes()
    assert sorted(calls) == sorted(VERSIONS)
    calls.clear()
    assert harvester.harvest(VERSIONS, tmp_path / "cache", out, download, log=lambda _: None) == 0
    assert calls == [], "cached wheels are reused, not downloaded again"
    assert out.read_bytes() == first

    data = json.loads(first)
    assert data["releases"] == VERSIONS, "version order: post8 < post10 < 2.2.0"
    ops = data["operators"]
    assert ops["npu_alpha"]["schemas"] == [OLD_ALPHA, NEW_ALPHA], "whitespace normalized"
    assert ops["npu_alpha"]["runs"] == [["2.1.0.post8", "2.1.0.post10", 0], ["2.2.0", "2.2.0", 1]]
    assert ops["npu_alpha"]["documented"] == [["2.2.0", "2.2.0"]]
    assert ops["npu_gone"]["runs"] == [["2.1.0.post8", "2.1.0.post8", 0]]
    assert "npu_cast.Tensor" in ops
    assert "npu_alpha.out" not in ops, ".out overloads are left out"
    assert "mul.Tensor" not in ops and "add" not in ops, "ATen operators are not harvested"
    assert data["wheels"]["2.2.0"]["file"].startswith("torch_npu-2.2.0-")
    assert data["no_wheel"] == {}


def test_failed_download_leaves_the_previous_file_untouched(tmp_path: Path) -> None:
    out = tmp_path / "releases.json"
    out.write_text('{"previous": true}\n')
    lines: list[str] = []
    code = harvester.harvest(
        VERSIONS,
        tmp_path / "cache",
        out,
        fake_downloader(tmp_path / "store", fail={"2.1.0.post10"}),
        log=lines.append,
    )
    assert code == 1
    assert out.read_text() == '{"previous": true}\n'
    assert any("2.1.0.post10: FAILED" in line for line in lines)
    assert not list(tmp_path.glob(".releases.json.*")), "no temporary file left behind"


def test_offline_without_a_cached_wheel_fails_without_writing(tmp_path: Path) -> None:
    out = tmp_path / "releases.json"
    assert harvester.harvest(VERSIONS, tmp_path / "cache", out, None, log=lambda _: None) == 1
    assert not out.exists()


def test_a_release_without_any_wheel_is_recorded_not_fatal(tmp_path: Path) -> None:
    out = tmp_path / "releases.json"
    code = harvester.harvest(
        VERSIONS,
        tmp_path / "cache",
        out,
        fake_downloader(tmp_path / "store", no_wheel={"2.1.0.post10"}),
        log=lambda _: None,
    )
    assert code == 0
    data = json.loads(out.read_text())
    assert data["releases"] == ["2.1.0.post8", "2.2.0"]
    assert data["no_wheel"] == {"2.1.0.post10": "no Linux wheel (simulated)"}


def test_a_wheel_without_the_schema_file_is_a_failure(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    with zipfile.ZipFile(
        cache / "torch_npu-2.2.0-cp311-cp311-manylinux_2_28_x86_64.whl", "w"
    ) as zf:
        zf.writestr("torch_npu/__init__.py", "")
    out = tmp_path / "releases.json"
    assert harvester.harvest(["2.2.0"], cache, out, None, log=lambda _: None) == 1
    assert not out.exists()


def test_read_schemas_keeps_custom_operators_only() -> None:
    got = read_schemas((FIXTURES / "2.1.0.post8.yaml").read_text())
    assert got == {
        "npu_alpha": OLD_ALPHA,
        "npu_alpha_backward": "npu_alpha_backward(Tensor grad, Tensor x) -> Tensor",
        "npu_gone": "npu_gone(Tensor x) -> Tensor",
    }
    with pytest.raises(ValueError, match="custom"):
        read_schemas("backend: NPU\n")


def test_committed_data_is_well_formed_and_agrees_with_spot_checks() -> None:
    data = releases._load(releases.DATA_FILE.resolve())
    assert data.releases == sort_releases(data.releases)
    assert data.releases[0] == "2.1.0.post8"
    size = releases.DATA_FILE.stat().st_size
    assert size < 1_000_000, f"releases.json is {size} bytes; keep it compact"
    v3 = data.history("npu_mla_prolog_v3")
    fia2 = data.history("npu_fused_infer_attention_score_v2")
    assert v3 is not None and fia2 is not None
    assert v3.first == "2.6.0.post5"
    assert not data.has("npu_mla_prolog_v3", "2.7.1") and data.has(
        "npu_mla_prolog_v3", "2.7.1.post2"
    )
    assert fia2.first == "2.1.0.post17"


# --- versions and matching ------------------------------------------------------------


def test_release_order_is_numeric_not_textual() -> None:
    shuffled = [
        "2.10.0",
        "2.2.0",
        "2.1.0.post10",
        "2.2.0rc1",
        "2.1.0.post8",
        "2.1.0",
        "2.9.0.post2",
    ]
    assert sort_releases(shuffled) == [
        "2.1.0",
        "2.1.0.post8",
        "2.1.0.post10",
        "2.2.0rc1",
        "2.2.0",
        "2.9.0.post2",
        "2.10.0",
    ]
    assert release_key("not a version") is None
    with pytest.raises(ValueError):
        sort_releases(["2.1.0", "banana"])


@pytest.mark.parametrize(
    ("typed", "release", "exact"),
    [
        ("2.1.0.post10", "2.1.0.post10", True),
        ("2.1.0.post9", "2.1.0.post8", False),  # newest of the line not newer than typed
        ("2.1.0.post99", "2.1.0.post10", False),
        ("2.1.0", "2.1.0.post8", False),  # older than every release of the line: its oldest
        ("2.1", "2.1.0.post10", False),  # two parts: the newest of the minor line
        ("2.2.0rc1", "2.2.0", False),
        ("2.2.1", "2.2.0", False),  # patch line not harvested: the minor line
        (" v2.2.0 ", "2.2.0", False),
    ],
)
def test_match_a_typed_version(
    fixture_data: ReleaseData, typed: str, release: str, exact: bool
) -> None:
    got = fixture_data.match(typed)
    assert got is not None and (got.release, got.exact) == (release, exact)


def test_unknown_release_line_matches_nothing(fixture_data: ReleaseData) -> None:
    assert fixture_data.match("3.0.0") is None
    assert fixture_data.match("garbage") is None
    with pytest.raises(ValueError, match=r"harvested lines: 2\.1, 2\.2"):
        releases.resolve("2.5.1")


def test_history_queries(fixture_data: ReleaseData) -> None:
    assert fixture_data.has("npu_beta", "2.1.0.post10") and not fixture_data.has(
        "npu_beta", "2.1.0.post8"
    )
    assert fixture_data.schema_in("npu_alpha", "2.1.0.post10") == OLD_ALPHA
    assert fixture_data.schema_in("npu_alpha", "2.2.0") == NEW_ALPHA
    assert fixture_data.schema_in("npu_gone", "2.2.0") is None
    hist = fixture_data.history("npu_alpha")
    assert hist is not None and hist.changes() == [("2.1.0.post8", OLD_ALPHA), ("2.2.0", NEW_ALPHA)]


# --- enrich and record helpers --------------------------------------------------------


def test_enrich_fills_empty_versions(fixture_data: ReleaseData) -> None:
    body: dict[str, Any] = {
        "kind": "operator",
        "name": "npu_alpha",
        "calls": ["torch_npu.npu_alpha"],
        "versions": {
            "first": None,
            "last": None,
            "releases": [],
            "changes": [],
            "pytorch": ["2.1"],
        },
    }
    enrich(body)
    v = body["versions"]
    assert v["first"] == "2.1.0.post8" and v["last"] is None, "still shipped: no last"
    assert v["releases"] == VERSIONS
    assert v["changes"] == [
        {"release": "2.1.0.post8", "schema": OLD_ALPHA},
        {"release": "2.2.0", "schema": NEW_ALPHA},
    ]
    assert v["pytorch"] == ["2.1"], "curated fields are kept"
    gone: dict[str, Any] = {"kind": "operator", "name": "npu_gone", "versions": {}}
    enrich(gone)
    assert gone["versions"]["last"] == "2.1.0.post8", "removed: last is set"


def test_enrich_respects_curated_versions_and_other_kinds(fixture_data: ReleaseData) -> None:
    curated: dict[str, Any] = {
        "kind": "operator",
        "name": "npu_alpha",
        "versions": {"first": "2.0.0"},
    }
    enrich(curated)
    assert curated["versions"] == {"first": "2.0.0"}
    chain: dict[str, Any] = {"kind": "chain", "name": "npu_alpha"}
    enrich(chain)
    assert "versions" not in chain
    by_call: dict[str, Any] = {
        "kind": "operator",
        "name": "alpha_alias",
        "calls": ["torch.ops.npu.npu_beta"],
        "versions": {},
    }
    enrich(by_call)
    assert by_call["versions"]["first"] == "2.1.0.post10"
    unknown: dict[str, Any] = {"kind": "operator", "name": "npu_never", "versions": {}}
    enrich(unknown)
    assert unknown["versions"] == {}


def test_record_helpers_answer_from_the_record(fixture_data: ReleaseData) -> None:
    rec: dict = {"kind": "operator", "name": "npu_alpha", "versions": {}}
    enrich(rec)
    assert record_has(rec, "2.1.0.post10") is True
    assert record_schema_in(rec, "2.1.0.post10") == OLD_ALPHA
    assert record_schema_in(rec, "2.2.0") == NEW_ALPHA
    assert record_has({"versions": {"first": "2.2.0"}}, "2.1.0.post10") is False
    assert record_has({"versions": {}}, "2.2.0") is None
    beta: dict = {"kind": "operator", "name": "npu_beta", "versions": {}}
    enrich(beta)
    got = availability(beta, "2.1.0.post8")
    assert (got.release, got.has, got.first, got.upgrade) == (
        "2.1.0.post8",
        False,
        "2.1.0.post10",
        "2.1.0.post10",
    )
    old = availability(rec, "2.1.0.post10")
    assert old.has and old.schema == OLD_ALPHA
    assert args_missing(old.schema, ["x", "mode"]) == ["mode"]
    assert availability(rec, "9.9").release is None


def test_schema_diff_phrases() -> None:
    assert schema_diff(OLD_ALPHA, NEW_ALPHA) == ['+ str mode="a"']
    assert schema_diff(NEW_ALPHA, OLD_ALPHA) == ["- mode"]
    assert schema_diff("f(Tensor x, int k=0) -> Tensor", "f(Tensor x, int k=1) -> Tensor") == [
        "int k=0 -> int k=1"
    ]
    assert schema_diff("f(Tensor x) -> Tensor", "f(Tensor(a!) x) -> (Tensor, Tensor)") == [
        "Tensor x -> Tensor(!) x",
        "returns (Tensor) -> (Tensor, Tensor)",
    ]
    assert schema_diff(OLD_ALPHA, " ".join(OLD_ALPHA.split(" "))) == []


def test_is_public() -> None:
    assert is_public("npu_alpha") and is_public("npu_cast.Tensor") and is_public("scatter_update_")
    for name in (
        "npu_alpha_backward",
        "npu_fusion_attention_grad_v2",
        "_npu_dropout",
        "npu_roi_alignbk",
    ):
        assert not is_public(name), name


# --- compile, show, list, search ------------------------------------------------------


def _tree(record_tree: Callable[..., Path]) -> Path:
    return record_tree(
        {
            "operators/npu_alpha.yaml": operator_yaml("npu_alpha", keyword="zebra"),
            "operators/npu_beta.yaml": operator_yaml("npu_beta", keyword="zebra"),
            "operators/npu_ghost.yaml": operator_yaml("npu_ghost", keyword="zebra"),
        }
    )


def test_compiled_records_carry_release_facts(fixture_data: ReleaseData, record_tree) -> None:
    _tree(record_tree)
    cat = open_catalog()
    alpha = cat.get("npu_alpha")
    assert alpha is not None and alpha["versions"]["first"] == "2.1.0.post8"
    assert alpha["versions"]["releases"] == VERSIONS
    ghost = cat.get("npu_ghost")
    assert ghost is not None and ghost["versions"]["first"] is None


def test_show_prints_history_without_loading_the_data(
    fixture_data: ReleaseData, record_tree, monkeypatch, capsys
) -> None:
    _tree(record_tree)
    open_catalog()  # compile with the fixture data
    # a cached ReleaseData is gone and the file is missing: any read would fail
    monkeypatch.setattr(releases, "DATA_FILE", Path("/nonexistent/releases.json"))
    releases._load.cache_clear()
    assert main(["show", "npu_alpha"]) == 0
    out = capsys.readouterr().out
    assert out.count("torch_npu: 2.1.0.post8+ (3 harvested releases)") == 1
    assert "releases: 2.1.0.post8/10, 2.2.0" in out
    assert "Signature history" in out
    assert '2.2.0         + str mode="a" [= signature above]' in out


def test_list_filters_by_release(fixture_data: ReleaseData, record_tree, capsys) -> None:
    _tree(record_tree)
    assert main(["list", "--torch-npu", "2.1.0.post8", "--format", "json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in got["results"]] == ["npu_alpha"]
    assert got["torch_npu"] == {"asked": "2.1.0.post8", "release": "2.1.0.post8", "exact": True}
    assert main(["list", "--torch-npu", "2.2"]) == 0
    captured = capsys.readouterr()
    assert "npu_alpha" in captured.out and "npu_beta" in captured.out
    assert "npu_ghost" not in captured.out, "no release facts: not known to be shipped"
    assert "read as 2.2.0" in captured.err
    assert main(["list", "--torch-npu", "7.0"]) == 2
    assert "not a harvested release" in capsys.readouterr().err


def test_search_filters_by_release(fixture_data: ReleaseData, record_tree, capsys) -> None:
    _tree(record_tree)
    assert main(["search", "zebra", "--torch-npu", "2.1.0.post8", "--format", "json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in got["results"]] == ["npu_alpha"]
    assert (
        main(["search", "zebra", "--torch-npu", "2.2.0", "--limit", "1", "--format", "json"]) == 0
    )
    assert len(json.loads(capsys.readouterr().out)["results"]) == 1
    main(["search", "npu_ghost", "--torch-npu", "2.2.0"])
    assert "npu_ghost" not in capsys.readouterr().out, "an exact name hit is filtered too"


def test_release_ranges_keep_gaps() -> None:
    from kb.catalog.releases import ReleaseData, format_ranges, release_ranges

    data = ReleaseData(
        {"format": 1, "releases": ["2.1.0", "2.2.0", "2.3.0", "2.4.0", "2.5.0"], "operators": {}}
    )
    runs = release_ranges(["2.1.0", "2.3.0", "2.4.0", "2.5.0"], data)
    assert runs == [("2.1.0", "2.1.0"), ("2.3.0", None)]
    assert format_ranges(runs) == "2.1.0, 2.3.0+"
    assert format_ranges(release_ranges(["2.2.0", "2.3.0"], data)) == "2.2.0 .. 2.3.0"

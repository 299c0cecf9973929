"""Compiled cache and search index: invalidation, corruption, atomic rebuilds, queries."""

from __future__ import annotations

import json
import os
import time

import pytest

from kb.catalog.compiled import db_path, open_catalog
from kb.cli import main
from kb.core.paths import records_dir
from kb.index.search import search
from kb.index.searchindex import index_dir, open_index
from kb.vocab import CALL_PREFIXES
from tests.conftest import operator_yaml


def test_cache_is_reused_then_invalidated_on_change(record_tree) -> None:
    root = record_tree({"operators/npu_test_op.yaml": operator_yaml()})
    first = open_catalog()
    db = db_path(root.resolve())
    stamp = db.stat().st_mtime_ns
    assert open_catalog().get("npu_test_op") is not None
    assert db.stat().st_mtime_ns == stamp, "an unchanged tree must not rebuild the cache"
    time.sleep(0.01)
    record_tree({"operators/npu_test_op.yaml": operator_yaml(keyword="changed")})
    second = open_catalog()
    assert second.get("npu_test_op")["keywords"]["en"] == ["changed"]
    assert second.content != first.content


def test_corrupt_cache_is_rebuilt(record_tree) -> None:
    root = record_tree({"operators/npu_test_op.yaml": operator_yaml()})
    open_catalog()
    db_path(root.resolve()).write_bytes(b"this is not sqlite" * 10)
    assert open_catalog().get("torch_npu.npu_test_op")["name"] == "npu_test_op"


def test_resolve_spellings(record_tree) -> None:
    record_tree({"operators/npu_test_op.yaml": operator_yaml()})
    cat = open_catalog()
    for spelling in (
        "npu_test_op",
        "torch_npu.npu_test_op",
        "torch.ops.npu.npu_test_op",
        "NPU_TEST_OP",
    ):
        assert cat.resolve(spelling) == "npu_test_op", spelling
    assert cat.resolve("npu_test") is None


def test_corrupt_index_is_rebuilt_not_trusted(record_tree) -> None:
    record_tree(
        {
            "operators/npu_test_op.yaml": operator_yaml(keyword="zebra"),
            "operators/npu_other_op.yaml": operator_yaml("npu_other_op", keyword="giraffe"),
        }
    )
    cat = open_catalog()
    open_index(cat)
    target = index_dir(cat)
    for f in target.iterdir():
        if f.name in ("docs.json", "terms.sqlite"):
            f.write_bytes(b"garbage")
    hits = search(cat, "giraffe")
    assert [h.name for h in hits][:1] == ["npu_other_op"]


def test_stale_stamp_triggers_rebuild(record_tree) -> None:
    record_tree({"operators/npu_test_op.yaml": operator_yaml(keyword="zebra")})
    cat = open_catalog()
    open_index(cat)
    stamp = index_dir(cat) / "stamp.json"
    stamp.write_text(json.dumps({"content": "x", "docs": 99}))
    assert [h.name for h in search(cat, "zebra")] == ["npu_test_op"]
    assert json.loads(stamp.read_text())["docs"] == 1


def test_exact_prefix_and_typo(record_tree) -> None:
    record_tree(
        {
            "operators/npu_test_op.yaml": operator_yaml(),
            "operators/npu_test_op_v2.yaml": operator_yaml("npu_test_op_v2"),
            "operators/npu_unrelated.yaml": operator_yaml("npu_unrelated"),
        }
    )
    cat = open_catalog()
    assert [h.name for h in search(cat, "npu_test_op")][:2] == ["npu_test_op", "npu_test_op_v2"]
    assert [h.why for h in search(cat, "npu_test_op")][:2] == ["exact", "prefix"]
    assert search(cat, "npu_test_op_v3")[0].name == "npu_test_op_v2"
    assert search(cat, "torch_npu.npu_unrelated")[0].name == "npu_unrelated"


@pytest.mark.parametrize("prefix", CALL_PREFIXES)
def test_search_strips_every_call_path_like_show(record_tree, prefix: str) -> None:
    """``torch.ops.atb.X`` is found by search as by ``kb show`` (search once lacked it)."""
    record_tree(
        {
            "operators/npu_test_op.yaml": operator_yaml(),
            "operators/npu_test_op_v2.yaml": operator_yaml("npu_test_op_v2"),
        }
    )
    cat = open_catalog()
    assert cat.resolve(prefix + "npu_test_op") == "npu_test_op"
    hits = search(cat, prefix + "npu_test")
    assert [(h.name, h.why) for h in hits][:2] == [
        ("npu_test_op", "prefix"),
        ("npu_test_op_v2", "prefix"),
    ]


def test_chinese_query_uses_bigrams(record_tree) -> None:
    other = operator_yaml("npu_other_op").replace("zh: [测试]", "zh: [权重预取]")
    record_tree(
        {"operators/npu_test_op.yaml": operator_yaml(), "operators/npu_other_op.yaml": other}
    )
    hits = search(open_catalog(), "权重预取")
    assert hits[0].name == "npu_other_op"


@pytest.mark.parametrize("query", ["", "   ", "x" * 10_000])
def test_bad_queries_are_usage_errors(record_tree, capsys, query: str) -> None:
    record_tree({"operators/npu_test_op.yaml": operator_yaml()})
    assert main(["search", query]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kb search: the query") and "Traceback" not in err


def test_search_json_contract(record_tree, capsys) -> None:
    record_tree({"operators/npu_test_op.yaml": operator_yaml(keyword="zebra")})
    assert main(["search", "zebra", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["query"] == "zebra"
    (hit,) = out["results"]
    assert set(hit) == {"kind", "name", "score", "summary"}
    assert hit["kind"] == "operator" and hit["name"] == "npu_test_op"


def test_no_results_exit_1(record_tree, capsys) -> None:
    record_tree({"operators/npu_test_op.yaml": operator_yaml()})
    assert main(["search", "qwertyuiop"]) == 1


def test_index_rebuild_verb(record_tree, capsys) -> None:
    record_tree({"operators/npu_test_op.yaml": operator_yaml()})
    assert main(["index", "--rebuild"]) == 0
    assert "index:   1 documents" in capsys.readouterr().out


def test_show_unknown_suggests(record_tree, capsys) -> None:
    record_tree({"operators/npu_test_op.yaml": operator_yaml()})
    assert main(["show", "npu_tset_op"]) == 1
    assert "did you mean: npu_test_op" in capsys.readouterr().err


def test_default_records_dir_is_shipped() -> None:
    assert records_dir().name == "records" and records_dir().parent.name == "kb"
    assert os.environ.get("KB_RECORDS_DIR") is None

"""The shipped records: valid, examples honest, text fits 80 columns, key facts exact."""

from __future__ import annotations

import ast
import json
from typing import Any

import pytest

from kb.catalog.compiled import open_catalog
from kb.catalog.schema_export import schemas
from kb.catalog.store import load_store
from kb.cli import main
from kb.core.paths import PACKAGE_DIR, records_dir
from kb.text.render import record_text


@pytest.fixture(scope="module")
def catalog():
    return open_catalog()


def test_shipped_records_validate() -> None:
    result = load_store(records_dir())
    assert result.ok, "\n".join(map(str, result.problems[:20]))
    assert len(result.records) >= 38


def test_json_schemas_are_current() -> None:
    for name, text in schemas().items():
        path = PACKAGE_DIR.parent / "schema" / name
        assert path.exists(), f"schema/{name} missing: run scripts/export_schema.py"
        assert path.read_text(encoding="utf-8") == text, (
            f"schema/{name} is stale: run scripts/export_schema.py"
        )


ISSUE_2_OPERATORS = [
    "npu_mla_prolog",
    "npu_mla_prolog_v2",
    "npu_mla_prolog_v3",
    "npu_kv_rmsnorm_rope_cache",
    "npu_fused_infer_attention_score",
    "npu_fused_infer_attention_score_v2",
    "npu_incre_flash_attention",
    "npu_prompt_flash_attention",
    "npu_sparse_flash_attention",
    "npu_kv_quant_sparse_flash_attention",
    "npu_lightning_indexer",
    "npu_quant_lightning_indexer",
    "npu_scatter_pa_kv_cache",
    "npu_scatter_nd_update_",
    "scatter_update_",
    "npu_interleave_rope",
    "npu_apply_rotary_pos_emb",
    "npu_rotary_mul",
    "npu_rms_norm",
    "npu_add_rms_norm",
    "npu_transpose_batchmatmul",
    "npu_moe_gating_top_k_softmax",
    "npu_moe_gating_top_k",
    "npu_moe_init_routing_v2",
    "npu_moe_re_routing",
    "npu_grouped_matmul",
    "npu_moe_finalize_routing",
    "npu_moe_distribute_dispatch_v2",
    "npu_moe_distribute_combine_v2",
    "npu_moe_distribute_combine_add_rms_norm",
    "npu_dynamic_quant",
    "npu_dequant_swiglu_quant",
    "npu_swiglu",
    "npu_quant_matmul",
    "npu_weight_quant_batchmatmul",
    "npu_prefetch",
    "npu_format_cast",
]


@pytest.mark.parametrize("name", ISSUE_2_OPERATORS)
def test_workflow_operators_are_complete(catalog, name: str) -> None:
    rec = catalog.get(name)
    assert rec is not None, name
    assert rec["signature"] and rec["products"] and rec["examples"] and rec["fuses"] is not None
    assert rec["upstream"]["path"] and rec["upstream"]["url"]
    for p in rec["parameters"]:
        assert p["description"], f"{name}.{p['name']} has no description"
        if p["type"].startswith("Tensor") and not (
            p.get("reserved") or p.get("any_dtype") or p.get("undocumented")
        ):
            assert p["dtypes"], f"{name}.{p['name']} lists no dtypes"


def test_mla_prolog_v3_facts(catalog, capsys) -> None:
    assert main(["show", "npu_mla_prolog_v3", "--format", "json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["signature"].startswith(
        "npu_mla_prolog_v3(Tensor token_x, Tensor weight_dq, Tensor weight_uq_qr, Tensor weight_uk, "
        "Tensor weight_dkv_kr, Tensor rmsnorm_gamma_cq, Tensor rmsnorm_gamma_ckv, Tensor rope_sin, "
        "Tensor rope_cos, Tensor(a!) kv_cache, Tensor(b!) kr_cache, *, Tensor? cache_index=None, "
    )
    assert rec["signature"].endswith(
        "int? kv_cache_dtype=None) -> (Tensor, Tensor, Tensor, Tensor, Tensor)"
    )
    params = {p["name"]: p for p in rec["parameters"]}
    assert params["weight_dq"]["formats"] == ["FRACTAL_NZ"]
    assert sorted(rec["products"]) == ["ascend-950", "atlas-a2", "atlas-a3"]
    assert params["kv_cache"]["mutated"] is True


def _calls(tree: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)]


def _callee(call: ast.Call) -> str | None:
    f = call.func
    parts = []
    while isinstance(f, ast.Attribute):
        parts.append(f.attr)
        f = f.value
    if isinstance(f, ast.Name):
        parts.append(f.id)
        return ".".join(reversed(parts))
    return None


def _records(kind: str | None) -> list[dict[str, Any]]:
    return list(open_catalog().records(kind))


def test_examples_pass_kb_scan(tmp_path: Any) -> None:
    """Every example is Python that kb scan accepts on the record's first product: real
    operators, real keywords bound the way the binding binds them, allowed values."""
    from kb.api.scan import scanner
    from kb.scan.engine import ScanOptions

    catalog = open_catalog()
    problems = []
    for rec in catalog.records("operator"):
        product = (rec.get("products") or [None])[0]
        for i, ex in enumerate(rec["examples"]):
            path = tmp_path / f"{rec['name']}__{i}.py"
            path.write_text(ex["code"], encoding="utf-8")
            options = ScanOptions(fusion=False, use_config=False, product=product)
            report = scanner(catalog, options).scan([str(path)])
            problems += [
                f"{rec['name']} example {i}: {f.line}: {f.code} {f.message}"
                for f in report.findings
                if f.severity == "error"
            ]
    assert problems == []


@pytest.mark.parametrize("rec", _records(None), ids=lambda r: f"{r['kind']}:{r['name']}")
def test_text_fits_80_columns(rec: dict[str, Any]) -> None:
    too_long = [line for line in record_text(rec).splitlines() if len(line) > 80]
    # example code is printed as written; everything else must wrap
    code = {line.strip() for ex in rec.get("examples", []) for line in ex["code"].splitlines()}
    assert [line for line in too_long if line.strip() not in code] == []


@pytest.mark.parametrize("verb", ["search", "show", "list", "validate", "index"])
def test_every_verb_has_help(verb: str, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main([verb, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: kb {verb}") and len(out.splitlines()) > 4


def test_top_level_help_lists_verbs(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for verb in ("search", "show", "list", "validate", "index"):
        assert verb in out


def test_no_placeholder_words_ship() -> None:
    """Importer drafts carry 'TODO:' words; a shipped record must have ours instead."""
    offenders = [
        str(p.relative_to(records_dir()))
        for p in records_dir().rglob("*.yaml")
        if "TODO:" in p.read_text(encoding="utf-8")
    ]
    assert offenders == []


def _example_candidates(rec: dict[str, Any], catalog: Any) -> list[dict[str, Any]]:
    """The record's own example calls as candidates (literal scalar keyword arguments)."""
    out = []
    for ex in rec["examples"]:
        for call in _calls(ast.parse(ex["code"])):
            callee = _callee(call)
            target = (
                catalog.get(callee)
                if callee and callee.startswith(("torch_npu.", "torch.ops."))
                else None
            )
            if target is None or target["name"] != rec["name"]:
                continue
            params = {p["name"]: p for p in target["parameters"]}
            args = {
                kw.arg: kw.value.value
                for kw in call.keywords
                if kw.arg in params
                and not params[kw.arg]["type"].startswith("Tensor")
                and isinstance(kw.value, ast.Constant)
                and kw.value.value is not None
            }
            out.append({"module": ex["title"], "operator": rec["name"], "args": args})
    return out


@pytest.mark.parametrize("rec", _records("operator"), ids=lambda r: r["name"])
def test_examples_pass_the_records_own_rules(rec: dict[str, Any]) -> None:
    """A record's example must not break the record's own checkable rules on some product."""
    import yaml

    from kb.api.check import check_text

    catalog = open_catalog()
    for cand in _example_candidates(rec, catalog):
        errors_per_product = []
        for product in rec["products"] or ["atlas-a3"]:
            doc = {"version": 1, "target": {"product": product}, "candidates": [cand]}
            errors = [
                f"{f.code} {f.message}"
                for f in check_text(yaml.safe_dump(doc), catalog=catalog)
                if f.severity == "error"
            ]
            errors_per_product.append(errors)
            if not errors:
                break
        assert not errors_per_product[-1], (cand["module"], errors_per_product)

"""The fact audit's verdicts on a fixture page and record of our own (tools/upstream/fact_audit)."""

from __future__ import annotations

from pathlib import Path

import yaml
from fixtures.upstream.helpers import op_plugin_copy

from tools.upstream.fact_audit import Sources, audit_record, sample, summary
from tools.upstream.facts import load_upstream

RECORD = """\
name: npu_fake_norm
signature: npu_fake_norm(Tensor x, Tensor gamma, *, int mode=0, float epsilon=1e-06) -> (Tensor, Tensor)
parameters:
  - {name: x, type: Tensor, dtypes: [float16, bfloat16, float32], formats: [ND], shapes: [{dims: "[B, S, H]"}]}
  - {name: gamma, type: Tensor, dtypes: [float16]}
  - {name: mode, type: int, required: false, default: "0", keyword_only: true, allowed: [0, 1, 2]}
  - {name: epsilon, type: float, required: false, default: "1e-06", keyword_only: true}
products: [atlas-a3-training, atlas-inference]
phases: [prefill]
versions: {pytorch: ["2.2", "1.11"]}
rules:
  - {id: mode-one, values: {mode: [1]}, message: Only mode 1.}
evidence:
  - {about: [parameters.x.shapes], kind: source, repo: o/r, commit: abc1234, path: f.cpp, says: It says so.}
"""


def test_each_fact_gets_the_verdict_its_sources_give(tmp_path: Path) -> None:
    upstream = load_upstream(op_plugin_copy(tmp_path))
    facts = upstream.facts("npu_fake_norm")
    found = audit_record(yaml.safe_load(RECORD), Sources(facts=facts, text="mode 取值为0或1"))
    verdict = {(f.field, f.value): f.verdict for f in found}
    assert verdict[("signature", facts.schema.text)] == "confirmed"  # type: ignore[union-attr]
    assert verdict[("parameters.mode.keyword_only", "True")] == "confirmed"
    assert verdict[("parameters.x.dtypes", "bfloat16")] == "confirmed"
    assert verdict[("parameters.x.dtypes", "float32")] == "contradicted"  # the page lists two
    assert verdict[("parameters.gamma.dtypes", "missing bfloat16")] == "contradicted"
    assert verdict[("parameters.x.shapes", "[B, S, H]")] == "cited"
    assert verdict[("parameters.mode.allowed", "1")] == "confirmed"
    assert verdict[("parameters.mode.allowed", "2")] == "open"  # a bare number: a person reads it
    assert verdict[("products", "atlas-a3-training")] == "confirmed"
    assert verdict[("products", "atlas-inference")] == "contradicted"  # the page marks it x
    assert (
        verdict[("phases", "prefill")] == "open"
        and verdict[("rules.mode-one", "Only mode 1.")] == "open"
    )
    assert verdict[("versions.pytorch", "1.11")] == "contradicted"
    assert summary(found)["facts"] == len(found) and summary(found)["records"] == 1


def test_the_draw_is_stable_and_leaves_out_what_it_is_told() -> None:
    names = [f"npu_op_{i}" for i in range(50)]
    first = sample(names, 10, seed=7)
    assert first == sample(list(reversed(names)), 10, seed=7) and len(first) == 10
    assert not set(first) & set(sample(names, 10, seed=7, exclude=set(first)))

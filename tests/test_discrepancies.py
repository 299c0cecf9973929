"""The binding is the fact (kb.catalog.discrepancies): records agree with their wrapper's
checks, and a page claim the wrapper contradicts is kept as a noted discrepancy.

Each case writes a small record in our own words and runs the real validation, so the
messages carry file and line as ``kb validate`` prints them; each defect has a clean twin.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

from kb.api.check import Finding
from kb.catalog.store import load_store

RECORD = """\
kind: operator
name: npu_spin
calls: [torch_npu.npu_spin]
status: stable
category: rope
summary: {{en: A test rotation., zh: 测试用的旋转。}}
description: A test rotation.
signature: npu_spin(Tensor x, *, str? style='half', float ratio=1.0) -> Tensor
parameters:
  - name: x
    type: Tensor
    dtypes: [float16, bfloat16]
    shapes: [{{dims: "{dims}"}}]
  - name: style
    type: str?
    required: false
    default: "'half'"
    keyword_only: true
    allowed: {allowed}
  - name: ratio
    type: float
    required: false
    default: "1.0"
    keyword_only: true
    range: {range}
"""

CHECK = """\
  - param: {param}
    kind: {kind}
    {body}
    condition: {condition}
    repo: Ascend/op-plugin
    commit: 517f2e7d0f20
    path: op_plugin/ops/opapi/SpinKernelNpuOpApi.cpp
    lines: "21"
"""

STYLE = CHECK.format(
    param="style",
    kind="value",
    body="values: [half, interleave]\n    page: [half, interleaved]",
    condition='\'style == "half" || style == "interleave"\'',
)

NOTE = """\
discrepancies:
  - about: parameters.style.allowed
    page: [half, interleaved]
    binding: [half, interleave]
    source:
      kind: wrapper
      repo: Ascend/op-plugin
      commit: 517f2e7d0f20
      path: op_plugin/ops/opapi/SpinKernelNpuOpApi.cpp
      lines: "21"
    note: The page spells the pairwise mode 'interleaved'; the wrapper accepts 'interleave'.
"""


def record(
    *,
    allowed: str = "[half, interleave]",
    dims: str = "[T, H]",
    range_: str = "{min: 0, max: 1}",
    checks: str = STYLE,
    note: str = NOTE,
) -> str:
    text = RECORD.format(allowed=allowed, dims=dims, range=range_)
    if checks:
        text += "wrapper_checks:\n" + checks
    return text + note


def problems(tmp_path: Path, text: str) -> list[str]:
    (tmp_path / "npu_spin.yaml").write_text(textwrap.dedent(text), encoding="utf-8")
    return [str(p) for p in load_store(tmp_path).problems]


def test_the_binding_and_a_noted_page_claim_validate(tmp_path: Path) -> None:
    assert problems(tmp_path, record()) == []


def test_a_value_the_wrapper_refuses_cannot_stay_allowed(tmp_path: Path) -> None:
    found = problems(tmp_path, record(allowed="[half, interleaved]"))
    refused = [p for p in found if "lists 'interleaved', but the wrapper refuses it" in p]
    assert len(refused) == 1 and "npu_spin.yaml:" in refused[0]
    assert "SpinKernelNpuOpApi.cpp:21" in refused[0] and "discrepancies" in refused[0]
    # and the discrepancy no longer describes the field
    assert any("parameters.style.allowed: style.allowed is" in p for p in found)


def test_a_contradicted_page_claim_must_be_noted(tmp_path: Path) -> None:
    found = problems(tmp_path, record(note=""))
    assert len(found) == 1
    assert "the page states style ['half', 'interleaved']" in found[0]
    assert "refuses ['interleaved']" in found[0]


def test_a_discrepancy_follows_the_field_and_differs_from_the_page(tmp_path: Path) -> None:
    same = NOTE.replace("binding: [half, interleave]", "binding: [half, interleaved]")
    found = problems(tmp_path, record(note=same, checks=""))
    assert len(found) == 1 and "page and binding are the same value" in found[0]
    stale = NOTE.replace("binding: [half, interleave]", "binding: [half, interleave, both]")
    found = problems(tmp_path, record(note=stale, checks=""))
    assert len(found) == 1 and "not the binding's" in found[0]


def test_shapes_of_a_rank_the_wrapper_refuses(tmp_path: Path) -> None:
    rank = CHECK.format(
        param="x", kind="rank", body="values: [2, 3]", condition="'x.dim() == 2 || x.dim() == 3'"
    )
    assert problems(tmp_path, record(checks=STYLE + rank)) == []
    found = problems(tmp_path, record(checks=STYLE + rank, dims="[B, S, N, D]"))
    assert len(found) == 1 and "shape [B, S, N, D] has 4 dims" in found[0]


def test_dtypes_the_wrapper_refuses(tmp_path: Path) -> None:
    dtype = CHECK.format(
        param="x",
        kind="dtype",
        body="values: [float16]",
        condition="'x.scalar_type() == at::kHalf'",
    )
    found = problems(tmp_path, record(checks=STYLE + dtype))
    assert len(found) == 1 and "x.dtypes lists bfloat16" in found[0]


def test_a_range_bound_the_wrapper_excludes_is_open(tmp_path: Path) -> None:
    ratio = CHECK.format(
        param="ratio",
        kind="value",
        body="intervals: [{min: 0, min_open: true, max: 1}]",
        condition="'ratio > 0 && ratio <= 1'",
    )
    found = problems(tmp_path, record(checks=STYLE + ratio))
    assert len(found) == 1 and "ratio.range reaches 0.0" in found[0]
    clean = record(checks=STYLE + ratio, range_="{min: 0, min_open: true, max: 1}")
    assert problems(tmp_path, clean) == []


def test_a_default_the_wrapper_refuses_is_said(tmp_path: Path) -> None:
    ratio = CHECK.format(
        param="ratio", kind="value", body="values: [0.5]", condition="'ratio == 0.5'"
    )
    found = problems(tmp_path, record(checks=STYLE + ratio, range_="{min: 0.5, max: 0.5}"))
    assert len(found) == 1 and "the schema default of ratio (1.0) fails" in found[0]


def _checked(tmp_path: Path, text: str) -> Callable[[str], list[Finding]]:
    """A checker over a one-record catalog: args text in, findings out."""
    from kb.api.check import check_text
    from kb.catalog.compiled import open_catalog

    root = tmp_path / "records"
    root.mkdir()
    (root / "npu_spin.yaml").write_text(text, encoding="utf-8")
    catalog = open_catalog(root)

    def findings(args: str) -> list[Finding]:
        doc = (
            "version: 1\ntarget: {product: atlas-a2}\ncandidates:\n"
            f"  - module: m\n    operator: npu_spin\n    args: {{{args}}}\n"
        )
        return [f for f in check_text(doc, "c.yaml", catalog=catalog) if f.severity == "error"]

    return findings


def test_the_checker_refuses_an_open_bound_itself(tmp_path: Path) -> None:
    check = _checked(
        tmp_path, record(checks="", note="", range_="{min: 0, min_open: true, max: 1}")
    )
    assert check("ratio: 0.5") == [] and check("ratio: 1.0") == []
    (found,) = check("ratio: 0.0")
    assert found.code == "KB106" and "ratio=0.0 must be above 0 (range (0, 1])" in found.message


def test_ranges_with_single_values_and_rule_ranges(tmp_path: Path) -> None:
    text = record(checks="", note="", range_="{min: 6, max: 12, also: [0]}")
    text += (
        "rules:\n  - id: narrow-with-style\n    when: [{arg: style, equals: interleave}]\n"
        "    ranges: {ratio: {min: 8, max: 9, also: [0]}}\n    message: Narrower here.\n"
    )
    check = _checked(tmp_path, text)

    def codes(args: str) -> list[str]:
        return [f.code for f in check(args)]

    assert codes("ratio: 0") == [] and codes("ratio: 7") == []
    assert codes("ratio: 3") == ["KB106"]  # between the single value and the span
    assert codes("ratio: 7, style: interleave") == ["KB109"]  # the rule's narrower range
    assert codes("ratio: 0, style: interleave") == []


def test_the_page_and_kb_show_say_page_versus_binding() -> None:
    from kb.text.binding import discrepancy_texts
    from site_plugins.operator_discrepancies import discrepancies_section

    rec = {
        "name": "npu_spin",
        "discrepancies": [
            {
                "about": "parameters.style.allowed",
                "page": ["half", "interleaved"],
                "binding": ["half", "interleave"],
                "source": {
                    "kind": "wrapper",
                    "repo": "Ascend/op-plugin",
                    "commit": "517f2e7d0f20",
                    "path": "op_plugin/ops/opapi/Spin.cpp",
                    "lines": "21-24",
                },
                "note": "The page's spelling fails | in the wrapper.",
            }
        ],
    }
    (text,) = discrepancy_texts(rec)
    assert text.startswith(
        "parameters.style.allowed: the page says [half, interleaved]; what runs: [half, interleave]"
    )
    assert "Ascend/op-plugin@517f2e7 op_plugin/ops/opapi/Spin.cpp:21-24" in text
    page = discrepancies_section(rec)
    assert page.startswith("## Page versus binding")
    assert (
        "https://github.com/Ascend/op-plugin/blob/517f2e7d0f20/op_plugin/ops/opapi/Spin.cpp#L21-L24"
        in page
    )
    assert "fails &#124; in" in page  # a pipe in record text cannot break the table
    assert discrepancies_section({"name": "x"}) == ""

"""The wrapper audit: reading op-plugin's TORCH_CHECKs, holding records to them, writing blocks.

The C++ here is a small fixture written for these tests in the shapes op-plugin's wrappers
use (a parse helper in an anonymous namespace, an optional string unwrapped into a local,
enum constants, a check under an ``if``, a dispatch that drops an argument on older
kernels, an aclop-only wrapper); none of it is upstream code.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from kb.catalog.models import WrapperCheck
from tools.upstream.cexpr import (
    Unparsed,
    expand_membership,
    parse_condition,
    reduce,
    requirements,
)
from tools.upstream.wrapper_audit import audit_record, check_blocks
from tools.upstream.wrapper_checks import WrapperFacts, WrapperTree, split_top
from tools.upstream.wrapper_cli import main

SPIN_CPP = textwrap.dedent("""\
    #include "op_plugin/OpApiInterface.h"
    namespace {
    enum class Band { NONE = 0, LOW, HIGH, TOP = 8 };
    const static int64_t FAST_FIRST = 10;
    const static int64_t FAST_LAST = 12;

    bool read_style(const std::string& style) {
      // a comment with TORCH_CHECK(false) is not a check
      TORCH_CHECK(style == "half" || style == "interleave", "style is half or interleave");
      return style == "half";
    }

    int64_t read_fill(const std::string& fill) {
      if (fill == "zero") {
        return 0;
      }
      if (fill == "edge") {
        return 1;
      }
      TORCH_CHECK(false, "fill is zero or edge");
      return 0;
    }
    }  // namespace

    namespace op_api {
    at::Tensor npu_spin(const at::Tensor& x, c10::optional<c10::string_view> style,
                        c10::string_view fill, double ratio, int64_t band, bool keep,
                        c10::optional<int64_t> group_kind) {
      std::string style_str = style.has_value() ? std::string(style.value()) : "half";
      std::string fill_str = std::string(fill);
      bool half = read_style(style_str);
      int64_t fill_mode = read_fill(fill_str);
      TORCH_CHECK(x.dim() == 2 || x.dim() == 3, "x is 2-D or 3-D");
      TORCH_CHECK(ratio > 0 && ratio <= 1, "ratio in (0, 1]");
      TORCH_CHECK(x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16, "16-bit x");
      TORCH_CHECK(keep && band >= static_cast<int64_t>(Band::NONE), "keep and a band");
      if (fill_str == "edge") {
        TORCH_CHECK(band <= static_cast<int64_t>(Band::HIGH), "edge fill takes bands up to HIGH");
      }
      int64_t inner = 1;
      if (band >= FAST_FIRST && band <= FAST_LAST) {
        inner = 0;
      }
      int64_t kind = group_kind.value_or(0);
      static const bool has_v2 = check_aclnn_kernel_available("aclnnSpinV2");
      at::Tensor out = at::empty_like(x);
      if (!has_v2) {
        EXEC_NPU_CMD(aclnnSpin, x, half, fill_mode, ratio, band, inner, out);
        return out;
      }
      EXEC_NPU_CMD(aclnnSpinV2, x, half, fill_mode, ratio, band, inner, kind, out);
      return out;
    }
    }  // namespace op_api
    """)

BOXES_CPP = textwrap.dedent("""\
    namespace acl_op {
    at::Tensor npu_fix_boxes(const at::Tensor &self, bool flip, int64_t mode) {
      TORCH_CHECK(flip && mode == 0, "only flip=True, mode=0");
      TORCH_CHECK(self.dim() >= 2, "2-D at least");
      return self;
    }
    }
    """)

RING_CPP = textwrap.dedent("""\
    namespace op_api {
    const std::set<int> SUPPORT_WORLD_SIZE_LIST{2, 4, 8};
    static const std::vector<std::string> LAYOUTS = {"BSH", "TND"};
    constexpr int64_t WIDE = 16;
    const std::unordered_set<int64_t> TILES = {1, WIDE};
    at::Tensor npu_ring(const at::Tensor& x, int64_t world_size, c10::string_view layout,
                        int64_t tile, int64_t skip) {
      std::string layout_str = std::string(layout);
      TORCH_CHECK(SUPPORT_WORLD_SIZE_LIST.find(world_size) != SUPPORT_WORLD_SIZE_LIST.end(),
                  "world_size in [2, 4, 8]");
      TORCH_CHECK(std::find(LAYOUTS.begin(), LAYOUTS.end(), layout_str) != LAYOUTS.end(),
                  "layout is BSH or TND");
      TORCH_CHECK(TILES.count(tile) > 0, "tile is 1 or 16");
      TORCH_CHECK(SUPPORT_WORLD_SIZE_LIST.find(skip) == SUPPORT_WORLD_SIZE_LIST.end(), "no skip");
      if (TILES.count(tile)) {
        return x;
      }
      return x;
    }
    }  // namespace op_api
    """)

PARAMS_H = textwrap.dedent("""\
    namespace atb {
    struct PagedParam {
      enum MaskType : int { UNDEFINED = 0, MASK_NORM, MASK_ALIBI, MASK_SPEC, MASK_FREE, MASK_COMPRESS };
    };
    struct SelfParam {
      enum MaskType : int { UNDEFINED = 0, MASK_NORM, MASK_ALIBI, MASK_COMPRESS };
    };
    }
    """)

MASK_CPP = textwrap.dedent("""\
    namespace {
    enum StatusMode { STATUS_PLAIN = 0, STATUS_DEBUG = 1, STATUS_END };
    }
    namespace atb {
    void _npu_mask_op(const at::Tensor& x, int64_t mask_type, int64_t mode, int64_t k) {
      TORCH_CHECK(mask_type == SelfParam::MASK_COMPRESS, "compressed mask only");
      TORCH_CHECK(mode >= STATUS_PLAIN && mode < STATUS_END, "mode 0 or 1");
      TORCH_CHECK(x.dim() == 2 or x.dim() == 3, "x is 2-D or 3-D");
      TORCH_CHECK(k >= 0 and k <= x.size(-1), "k within the last dim");
      TORCH_CHECK(mask_type != MASK_COMPRESS, "a bare name two structs define differently");
    }
    }
    """)

ARGS = ["x", "style", "fill", "ratio", "band", "keep", "group_kind"]

RECORD = """\
kind: operator
name: npu_spin
signature: npu_spin(Tensor x, str? style='half', str fill='zero', float ratio=1.0, int band=0, bool keep=True, int? group_kind=None) -> Tensor
parameters:
  - {name: x, type: Tensor, dtypes: [float16, bfloat16, float32], shapes: [{dims: "[B, S, N, D]"}, {dims: "[T, H]"}]}
  - {name: style, type: "str?", required: false, default: "'half'", allowed: [half, interleaved]}
  - {name: fill, type: str, required: false, default: "'zero'", allowed: [zero, edge]}
  - {name: ratio, type: float, required: false, default: "1.0", range: {min: 0, max: 1}}
  - {name: band, type: int, required: false, default: "0", allowed: [0, 1, 2, 8]}
  - {name: keep, type: bool, required: false, default: "True"}
  - {name: group_kind, type: "int?", required: false, default: None, allowed: [0, 1]}
"""


@pytest.fixture(scope="module")
def plugin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("op-plugin")
    for rel, text in (
        ("op_plugin/ops/opapi/SpinKernelNpuOpApi.cpp", SPIN_CPP),
        ("op_plugin/ops/aclops/FixBoxesKernelNpu.cpp", BOXES_CPP),
        ("op_plugin/ops/opapi/RingKernelNpuOpApi.cpp", RING_CPP),
        ("op_plugin/third_party/atb/inc/params.h", PARAMS_H),
        ("op_plugin/ops/atb/MaskOpAtb.cpp", MASK_CPP),
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def spin(plugin: Path) -> WrapperFacts:
    facts = WrapperTree(plugin).facts("npu_spin", ARGS)
    assert facts is not None
    return facts


def _accepted(facts: WrapperFacts, guard: bool = False) -> dict[tuple[str, str], str]:
    return {
        (c.accepts.kind, c.accepts.param): c.accepts.describe()
        for c in facts.checks
        if c.accepts is not None and bool(c.guard) == guard
    }


def test_conditions_reduce_to_what_they_accept() -> None:
    names = {"m": "mode", "x": "x"}

    def read(text: str) -> str:
        acc = reduce(parse_condition(text, names, {"K::HIGH": 2}.get))
        return "opaque" if acc is None else f"{acc.kind}:{acc.param} {acc.describe()}"

    assert read('m == "a" || "b" == m') == "value:mode 'a' or 'b'"
    with pytest.raises(Unparsed):  # arithmetic is not modelled: such a check stays text
        read("m <= static_cast<int64_t>(K::HIGH) + 6")
    assert read("(m >= 0 && m < 5) || (m > 5 && m <= 8)") == "value:mode [0, 5) or (5, 8]"
    assert read("m <= static_cast<int64_t>(K::HIGH)") == "value:mode (-inf, 2]"
    assert read("x.dim() == 3 || x.sizes().size() == 4") == "dim:x 3 or 4"
    assert read("x.size(-1) == 64") == "size:x 64"
    assert read("!m") == "value:mode False"
    assert read("m && x.dim() == 2") == "opaque"  # two subjects: not one requirement
    parts = requirements(parse_condition("m && x.dim() == 2", names, {}.get))
    assert [(a.kind, a.describe()) for a in parts if a] == [("value", "True"), ("dim", "2")]
    with pytest.raises(Unparsed):
        parse_condition("m ? 1 : 2", names, {}.get)
    assert split_top('a, f(b, c), std::map<int, int>{}, "x,y"') == [
        "a",
        "f(b, c)",
        "std::map<int, int>{}",
        '"x,y"',
    ]


def test_wrapper_checks_follow_locals_and_helpers(spin: WrapperFacts) -> None:
    assert spin.backend == "opapi" and spin.path.endswith("SpinKernelNpuOpApi.cpp")
    got = _accepted(spin)
    assert got[("value", "style")] == "'half' or 'interleave'"  # through style_str and read_style
    assert got[("value", "fill")] == "'zero' or 'edge'"  # the returns before TORCH_CHECK(false)
    assert got[("dim", "x")] == "2 or 3"
    assert got[("value", "ratio")] == "(0, 1]"
    assert got[("dtype", "x")] == "'float16' or 'bfloat16'"
    assert got[("value", "keep")] == "True" and got[("value", "band")] == "[0, inf)"
    assert _accepted(spin, guard=True) == {("value", "band"): "(-inf, 2]"}
    (cond,) = [c for c in spin.checks if c.guard]
    assert cond.guard == 'if (fill_str == "edge")'
    assert [
        b.accepts.describe() for b in spin.branches if b.accepts and b.accepts.param == "band"
    ] == ["[10, 12]"]
    dropped = {(i.param, i.api, i.platform) for i in spin.ignored}
    assert dropped == {("group_kind", "aclnnSpin", True)}


def test_an_aclop_only_operator_is_read_from_aclops(plugin: Path) -> None:
    facts = WrapperTree(plugin).facts("npu_fix_boxes", ["self", "flip", "mode"])
    assert facts is not None and facts.backend == "aclops"
    assert _accepted(facts) == {
        ("value", "flip"): "True",
        ("value", "mode"): "0",
        ("dim", "self"): "[2, inf)",
    }
    assert WrapperTree(plugin).facts("npu_nothing", ["x"]) is None


def test_membership_in_a_literal_set_is_a_value_check(plugin: Path) -> None:
    """``LIST.find(x) != LIST.end()`` and its kin accept the set's members (the MC2
    wrappers' world sizes); ``== end()`` refuses them; the check keeps its own text."""
    facts = WrapperTree(plugin).facts("npu_ring", ["x", "world_size", "layout", "tile", "skip"])
    assert facts is not None
    assert _accepted(facts) == {
        ("value", "world_size"): "2 or 4 or 8",
        ("value", "layout"): "'BSH' or 'TND'",
        ("value", "tile"): "1 or 16",  # a member named by the file's own constant
        ("value", "skip"): "anything except 2, 4, 8",
    }
    (world,) = [c for c in facts.checks if c.accepts and c.accepts.param == "world_size"]
    assert world.text.startswith("SUPPORT_WORLD_SIZE_LIST.find(world_size)")
    assert [b.accepts.describe() for b in facts.branches if b.accepts] == ["1 or 16"]
    names = {"w": "world_size"}
    unknown = "OTHER.find(w) != OTHER.end()"  # a set the file does not define stays opaque
    assert expand_membership(unknown, {"SIZES": (2,)}) == unknown
    assert reduce(parse_condition(expand_membership(unknown, {}), names, {}.get)) is None


def test_plain_enums_and_alternative_operators(plugin: Path) -> None:
    """A plain enum nested in a struct is named through the struct (two ATB parameter
    structs give MASK_COMPRESS 5 and 3); a bare name they disagree on stays unread; a
    namespace-level plain enum is read bare; ``and`` / ``or`` are ``&&`` / ``||``."""
    facts = WrapperTree(plugin).facts("_npu_mask_op", ["x", "mask_type", "mode", "k"])
    assert facts is not None and facts.backend == "atb"
    assert _accepted(facts) == {
        ("value", "mask_type"): "3",
        ("value", "mode"): "[0, 2)",
        ("dim", "x"): "2 or 3",
        ("value", "k"): "[0, inf)",
    }
    assert [c.text for c in facts.checks if c.accepts is None] == [
        "k >= 0 and k <= x.size(-1)",  # the bound from another argument is not one subject
        "mask_type != MASK_COMPRESS",
    ]


def test_audit_names_each_disagreement_with_its_weight(spin: WrapperFacts) -> None:
    rec = yaml.safe_load(RECORD)
    found = {(d.kind, d.param, d.severity) for d in audit_record(rec, spin, {"fill": ["zero"]})}
    assert found == {
        ("refused", "style", "high"),  # 'interleaved' fails in the wrapper
        ("unlisted", "style", "high"),  # 'interleave' works and is missing
        ("rank", "x", "high"),  # [B, S, N, D] is 4-D
        ("dtype", "x", "high"),  # float32 is refused
        ("range", "ratio", "high"),  # 0 is refused: the bound is open
        ("conditional", "band", "info"),  # 8 fails with fill='edge'
        ("branch", "band", "medium"),  # 10-12 are handled but not allowed
        ("dropped", "group_kind", "info"),  # not passed on without aclnnSpinV2
        ("docstring", "fill", "medium"),
        ("open", "keep", "medium"),  # only keep=True passes, the record lists nothing
    }
    rec["discrepancies"] = [{"about": "parameters.style.allowed"}]
    noted = {d.kind for d in audit_record(rec, spin) if d.noted}
    assert noted == {"refused", "unlisted"}


def test_blocks_hold_only_unconditional_checks_and_validate(spin: WrapperFacts) -> None:
    rec = yaml.safe_load(RECORD)
    blocks = check_blocks(
        rec, spin, "Ascend/op-plugin", "517f2e7d0f20", {"style": ["half", "interleaved"]}
    )
    kinds = {(b["param"], b["kind"]) for b in blocks}
    assert kinds == {
        ("style", "value"),
        ("fill", "value"),
        ("x", "rank"),
        ("ratio", "value"),
        ("x", "dtype"),
        ("keep", "value"),
        ("band", "value"),
    }
    style = next(b for b in blocks if b["param"] == "style")
    assert style["page"] == ["half", "interleaved"] and style["path"].endswith(
        "SpinKernelNpuOpApi.cpp"
    )
    models = [WrapperCheck.model_validate(b) for b in blocks]
    ratio = next(m for m in models if m.param == "ratio")
    assert ratio.admits(0) is False and ratio.admits(1) is True and ratio.admits("x") is None


def test_the_script_prints_writes_and_exits_by_weight(
    plugin: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = tmp_path / "records"
    records.mkdir()
    path = records / "npu_spin.yaml"
    path.write_text(RECORD, encoding="utf-8")
    assert main(["--op-plugin", str(plugin), "--records", str(records)]) == 1
    out = capsys.readouterr().out
    assert "high   refused     npu_spin.style: record ['interleaved']" in out
    assert main(["--op-plugin", str(plugin), "--records", str(records), "--write"]) == 2
    assert "--write needs --commit" in capsys.readouterr().err
    code = main(
        [
            "--op-plugin",
            str(plugin),
            "--records",
            str(records),
            "--write",
            "--commit",
            "abc1234",
            "--severity",
            "high",
        ]
    )
    assert code == 1
    written = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert {b["param"] for b in written["wrapper_checks"]} >= {"style", "x", "ratio"}
    assert path.read_text(encoding="utf-8").startswith(RECORD)  # the rest of the file is kept
    assert main(["--op-plugin", str(tmp_path)]) == 2

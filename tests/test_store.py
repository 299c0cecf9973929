"""The store reports every broken record as file:line:col and `kb validate` exits 1."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.catalog.store import load_store
from kb.cli import main
from tests.conftest import operator_yaml


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def problems(root: Path) -> list[str]:
    return [str(p) for p in load_store(root).problems]


def test_minimal_record_is_valid(record_tree) -> None:
    root = record_tree({"operators/npu_test_op.yaml": operator_yaml()})
    result = load_store(root)
    assert result.ok, problems(root)
    assert result.names["torch_npu.npu_test_op"] == "npu_test_op"


def test_broken_yaml_reports_line(record_tree) -> None:
    text = operator_yaml().replace("category: norm", "category: [norm")
    root = record_tree({"operators/npu_test_op.yaml": text})
    (msg,) = problems(root)
    assert msg.startswith("operators/npu_test_op.yaml:")
    assert "YAML does not parse" in msg
    line = int(msg.split(":")[1])
    assert 4 <= line <= 8


def test_unknown_field_points_at_the_key(record_tree) -> None:
    text = operator_yaml().replace("category: norm\n", "category: norm\nflavour: sweet\n")
    root = record_tree({"operators/npu_test_op.yaml": text})
    assert problems(root) == ["operators/npu_test_op.yaml:6:1: flavour: unknown field"]


def test_unknown_dtype_points_at_the_value(record_tree) -> None:
    text = operator_yaml().replace("dtypes: [bfloat16]", "dtypes: [bfloat61]")
    root = record_tree({"operators/npu_test_op.yaml": text})
    (msg,) = problems(root)
    line = line_of(text, "bfloat61")
    assert msg.startswith(f"operators/npu_test_op.yaml:{line}:14: parameters[0].dtypes[0]:")
    assert "'bfloat61'" in msg and "did you mean 'bfloat16'" in msg


def test_unknown_product(record_tree) -> None:
    text = operator_yaml().replace("products: [atlas-a2]", "products: [atlas-a9]")
    root = record_tree({"operators/npu_test_op.yaml": text})
    (msg,) = problems(root)
    line = line_of(text, "atlas-a9")
    assert msg.startswith(f"operators/npu_test_op.yaml:{line}:12: products[0]: 'atlas-a9'")


def test_dangling_reference(record_tree) -> None:
    root = record_tree(
        {
            "operators/npu_test_op.yaml": operator_yaml(related="npu_tset_op2"),
            "operators/npu_test_op2.yaml": operator_yaml("npu_test_op2"),
        }
    )
    (msg,) = problems(root)
    line = line_of(operator_yaml(), "related:")
    assert msg.startswith(
        f"operators/npu_test_op.yaml:{line}:11: related[0]: 'npu_tset_op2' names no"
    )
    assert "did you mean npu_test_op2" in msg


def test_parameters_must_match_signature(record_tree) -> None:
    text = operator_yaml().replace('default: "1e-06"', 'default: "1e-05"')
    root = record_tree({"operators/npu_test_op.yaml": text})
    (msg,) = problems(root)
    assert "parameters[1].default: is '1e-05', the schema says '1e-06'" in msg


def test_rule_naming_unknown_parameter_is_rejected(record_tree) -> None:
    text = operator_yaml() + (
        "rules:\n  - id: r1\n    when: [{arg: mode, equals: b}]\n"
        "    require: [nope]\n    message: Pass nope.\n"
    )
    root = record_tree({"operators/npu_test_op.yaml": text})
    (msg,) = problems(root)
    assert "rule 'r1' names unknown parameters ['nope']" in msg


def test_file_name_must_match_record_name(record_tree) -> None:
    root = record_tree({"operators/other.yaml": operator_yaml()})
    (msg,) = problems(root)
    assert "file name should be npu_test_op.yaml" in msg


def test_alias_bomb_is_refused(record_tree) -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, 8):
        bomb += f"{chr(97 + i)}: &{chr(97 + i)} [*{chr(96 + i)}, *{chr(96 + i)}, *{chr(96 + i)}, *{chr(96 + i)}, *{chr(96 + i)}, *{chr(96 + i)}, *{chr(96 + i)}, *{chr(96 + i)}, *{chr(96 + i)}, *{chr(96 + i)}]\n"
    root = record_tree({"operators/bomb.yaml": bomb})
    (msg,) = problems(root)
    assert "alias bomb" in msg


def test_binary_file_is_refused(record_tree) -> None:
    root = record_tree({})
    (root / "bin.yaml").write_bytes(b"\x00\x01\x02kind: operator")
    (msg,) = problems(root)
    assert msg == "bin.yaml:1:1: binary file (NUL bytes), expected YAML or JSON text"


@pytest.mark.parametrize("bad", ["- just\n- a list\n", "kind: gadget\nname: x\n"])
def test_not_a_record(record_tree, bad: str) -> None:
    root = record_tree({"x.yaml": bad})
    (msg,) = problems(root)
    assert msg.startswith("x.yaml:1:")


def test_validate_cli_exit_codes(record_tree, capsys) -> None:
    record_tree({"operators/npu_test_op.yaml": operator_yaml()})
    assert main(["validate"]) == 0
    assert "1 operator; all valid" in capsys.readouterr().out
    record_tree({"operators/npu_test_op.yaml": operator_yaml(related="missing_op")})
    assert main(["validate"]) == 2
    out = capsys.readouterr().out
    line = line_of(operator_yaml(), "related:")
    assert f"npu_test_op.yaml:{line}:11: related[0]: 'missing_op' names no record" in out


def test_show_refuses_invalid_records_cleanly(record_tree, capsys) -> None:
    record_tree({"operators/npu_test_op.yaml": operator_yaml(related="missing_op")})
    with pytest.raises(SystemExit) as exc:
        main(["show", "npu_test_op"])
    assert exc.value.code == 2
    assert "run 'kb validate'" in capsys.readouterr().err

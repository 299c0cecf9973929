"""kb scan on shapes of code that gave false errors on engines it had never seen (issue 32).

Each class has its own fixture tree under tests/fixtures/scan/falsefree/ (code written
for these tests) and a test that failed before the class was fixed at its root:
exclusive bindings (device branches, per-build registrations), ``.out`` overloads,
flow (dicts changed before the call, kernels the tree builds), context (what a path or
README documents, syntax errors in files that never touch torch_npu, training paths on
inference products) and build conditions of extension operators.  Real defects in the
same files stay errors.
"""

from __future__ import annotations

from pathlib import Path

from kb.api.scan import ScanOptions, scan_paths
from kb.scan.registrations import native_registrations

HERE = Path(__file__).parent / "fixtures" / "scan" / "falsefree"


def _found(path: Path, **options: object) -> list[tuple[str, int, str, str]]:
    report = scan_paths([str(path)], ScanOptions(fusion=False, use_config=False, **options))  # type: ignore[arg-type]
    return sorted((Path(f.file).name, f.line, f.code, f.severity) for f in report.findings)


def _messages(path: Path, **options: object) -> dict[tuple[str, int], str]:
    report = scan_paths([str(path)], ScanOptions(fusion=False, use_config=False, **options))  # type: ignore[arg-type]
    return {(Path(f.file).name, f.line): f.message for f in report.findings}


def test_exclusive_bindings_are_errors_only_where_every_npu_binding_rejects_the_call() -> None:
    found = _found(HERE / "exclusive")
    assert found == [
        ("layers.py", 12, "KB501", "info"),  # only the CPU/ROCm builds' schemas are in sight
        ("layers.py", 25, "KB501", "info"),  # the non-NPU arm of `if is_npu():`
        ("layers.py", 35, "KB501", "info"),  # the `except ImportError` fallback of torch_npu
        ("layers.py", 40, "KB503", "error"),  # the NPU arm itself: still an error
    ]
    # gelu_tail (line 17): the NPU build registers it by name only, so nothing rejects it
    messages = _messages(HERE / "exclusive")
    assert "cpu build" in messages[("layers.py", 12)]
    assert "not is_npu()" in messages[("layers.py", 25)]
    assert "except ImportError of torch_npu" in messages[("layers.py", 35)]


def test_out_overloads_are_judged_as_what_they_are() -> None:
    found = _found(HERE / "overloads")
    assert found == [
        ("optim_and_codec.py", 14, "KB120", "info"),  # npu_hans_encode: only an .out overload
        ("optim_and_codec.py", 18, "KB120", "info"),  # npu_hans_decode: likewise
        ("optim_and_codec.py", 26, "KB104", "error"),  # npu_rms_norm has no .out form
    ]
    messages = _messages(HERE / "overloads")
    assert ".out overload" in messages[("optim_and_codec.py", 14)]


def test_flow_dict_pops_and_kernels_the_tree_builds() -> None:
    found = _found(HERE / "flow")
    assert found == [("attention.py", 15, "KB507", "info")]  # trace_name was popped before the call
    assert "OP_ADD(FusedRouterGate)" in _messages(HERE / "flow")[("attention.py", 15)]


def test_context_documented_products_and_training_paths() -> None:
    plain = _found(HERE / "context")
    assert plain == [("attn.py", 11, "KB503", "error")]
    on_300i = _found(HERE / "context", product="atlas-inference")
    assert on_300i == [
        ("attn.py", 7, "KB201", "warning"),  # A2/ folder
        ("attn.py", 7, "KB201", "warning"),  # serving/README.md names Atlas A2 and A3
        ("attn.py", 11, "KB503", "error"),  # wrong on every product: stays an error
        ("moe.py", 16, "KB109", "warning"),  # a backward pass on an inference product
    ]
    report = scan_paths(
        [str(HERE / "context")],
        ScanOptions(fusion=False, use_config=False, product="atlas-inference"),
    )
    notes = sorted(f.message.rsplit("(", 1)[1] for f in report.findings if f.code == "KB201")
    assert notes[0].startswith("this code is documented for atlas-a2 by its path")
    assert "atlas-a2, atlas-a3 by" in notes[1] and "README.md" in notes[1]
    assert _found(HERE / "context", product="atlas-a2") == plain  # the documented product


def test_syntax_errors_are_errors_only_in_files_that_touch_torch_npu(tmp_path: Path) -> None:
    (tmp_path / "render_template.py").write_text(
        "# a generator's template\ndef {{ name }}(x):\n    return x\n"
    )
    (tmp_path / "broken_port.py").write_text("import torch_npu\n\n\ndef norm(x, g)\n    return x\n")
    assert _found(tmp_path) == [
        ("broken_port.py", 4, "KB500", "error"),  # a port that does not parse
        ("render_template.py", 2, "KB500", "warning"),  # never names torch_npu
    ]


def test_extension_operators_not_built_for_the_target_are_named() -> None:
    src = HERE / "extensions" / "a5_paths.py"
    assert _found(src) == [
        ("a5_paths.py", 9, "KB507", "info"),
        ("a5_paths.py", 9, "KB508", "warning"),  # guarded for Ascend 950, whose build lacks it
        ("a5_paths.py", 14, "KB507", "info"),
    ]
    assert ("a5_paths.py", 14, "KB508", "warning") in _found(src, product="ascend-950")
    assert [f for f in _found(src, product="atlas-a3") if f[2] == "KB508"] == [
        ("a5_paths.py", 9, "KB508", "warning")
    ]


def test_preprocessor_conditions_are_read_per_registration() -> None:
    text = (
        'TORCH_LIBRARY(k, m) {\n#ifdef ONLY_A\n  m.def("a(Tensor x) -> Tensor");\n#else\n'
        '#if defined(WITH_B)\n  m.def("b(Tensor x) -> Tensor");\n#endif\n#endif\n'
        '  m.def("c(Tensor x) -> Tensor");\n}\n'
    )
    conds = {r.name: r.condition for r in native_registrations(text, "k.cpp")}
    assert conds == {"a": ("ONLY_A",), "b": ("!ONLY_A", "WITH_B"), "c": ()}


CMAKE = """
string(TOLOWER "${SOC_VERSION}" soc)  # lower case, as the build passes it
if(NOT DEFINED ONLY_NEW)
  if(soc MATCHES "^ascend950")
    set(ONLY_NEW OFF)
  else()
    set(ONLY_NEW ON)
  endif()
endif()
if(ONLY_NEW)
  add_compile_definitions(ONLY_NEW)
endif()
option(WITH_EXTRA "the builder's choice" OFF)
if(WITH_EXTRA)
  add_compile_definitions(WITH_EXTRA)
endif()
if(SOC_VERSION MATCHES "ascend310p.*")
  target_compile_definitions(lib PRIVATE -DPLATFORM_310P)
endif()
"""


def test_build_conditions_are_decided_per_product_from_cmake() -> None:
    from tools.upstream.buildconds import not_built, product_socs

    assert not_built([CMAKE], ("ONLY_NEW",)) == ["ascend-950"]
    assert not_built([CMAKE], ("WITH_EXTRA",)) is None  # an option: nobody knows
    assert not_built([CMAKE], ("WITH_EXTRA", "ONLY_NEW")) == ["ascend-950"]
    assert not_built([CMAKE], ("!PLATFORM_310P",)) == ["atlas-inference"]
    assert sorted(not_built([CMAKE], ("PLATFORM_310P",)) or []) == sorted(
        set(product_socs()) - {"atlas-inference"}
    )
    assert not_built([CMAKE], ("X > 1",)) is None  # an #if expression is not read

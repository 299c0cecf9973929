"""kb scan on more shapes of engine code it had never seen (issue 32, classes 1, 3, 4, 5).

The fixtures under tests/fixtures/scan/unseen/ are written for these tests.  Each test
failed on the scanner before its class was fixed: device flags spelled as engines spell
them (``IS_NPU``, ``on_npu``, ``torch.version.hip``) and registrations kept to another
build by a preprocessor block, a namespace or a Python branch; keywords only an ``.out``
or other overload takes; keys taken out of a ``**kwargs`` dict by a loop or a variable,
and kernels added with arguments after their name; syntax errors in files that name
torch_npu only in a comment.  The real defects in the same files stay errors.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from kb.api.scan import ScanOptions, scan_paths

HERE = Path(__file__).parent / "fixtures" / "scan" / "unseen"


def _report(path: Path, **options: object):  # type: ignore[no-untyped-def]
    return scan_paths([str(path)], ScanOptions(fusion=False, use_config=False, **options))  # type: ignore[arg-type]


def _found(path: Path, **options: object) -> list[tuple[str, int, str, str]]:
    return sorted(
        (Path(f.file).name, f.line, f.code, f.severity) for f in _report(path, **options).findings
    )


def _errors(path: Path, **options: object) -> list[tuple[str, int, str]]:
    return [(n, line, c) for n, line, c, s in _found(path, **options) if s == "error"]


def test_device_flags_and_per_build_registrations_are_not_npu_bindings() -> None:
    found = _found(HERE / "exclusive")
    # the CPU/ROCm arms of IS_NPU, on_npu, not use_npu, HAS_NPU, is_cuda_alike(),
    # torch.version.hip; a ROCm-only #ifdef block, the _rocm_C namespace and a Python
    # definition under `if not is_npu()` are other builds' registrations; `except
    # Exception` after a try that only imports torch_npu is the fallback without it; a
    # registration in a .cu source is the CUDA build's
    infos = [(n, line) for n, line, c, s in found if s == "info" and c == "KB501"]
    assert infos == [("flags.py", n) for n in (20, 25, 30, 35, 40, 42, 47, 51, 55, 77, 97)]
    assert _errors(HERE / "exclusive") == [
        ("flags.py", 60, "KB501"),  # x.cpu() moves a tensor: not a device branch
        ("flags.py", 66, "KB503"),  # the NPU arm itself
        ("flags.py", 86, "KB501"),  # the try also calls set_device: may fail on an NPU
        ("flags.py", 93, "KB503"),  # after `if torch_npu is None: raise`: the NPU path
    ]
    assert [f for f in found if f[1] == 93] == [("flags.py", 93, "KB503", "error")]
    messages = {f.line: f.message for f in _report(HERE / "exclusive").findings}
    assert "only where not IS_NPU" in messages[20]
    assert "a rocm build's registration" in messages[47]
    assert "a rocm build's registration" in messages[51]
    assert "a non-NPU build's registration" in messages[55]
    assert "a cuda build's registration" in messages[97]  # a .cu source


def test_calls_are_bound_against_every_overload_the_operator_registers() -> None:
    # .out with workspace= (out=(...) and the packet's buffers by name), FIA v2's .out,
    # npu_format_cast.Tensor's dst: no error; the errors left are the calls that reach
    # no overload (workspace= without out=, a packet without its buffers) and a typo
    assert _errors(HERE / "overloads") == [
        ("attention_out.py", 36, "KB104"),
        ("attention_out.py", 40, "KB104"),
        ("attention_out.py", 44, "KB104"),
    ]
    messages = {f.line: f.message for f in _report(HERE / "overloads").findings}
    assert "'num_head'" in messages[44]  # judged against the .out form it reaches


def test_keys_dropped_by_loops_and_named_keys_and_kernels_added_with_hooks() -> None:
    found = _found(HERE / "flow")
    # keys popped by a loop over literal keys, through a name bound to the key, and from a
    # dict attribute (self.kwargs.pop / del self.extra[...] in __init__) never reach the call
    assert [f for f in found if f[3] == "error"] == [
        ("attend.py", 28, "KB104", "error")  # trace is still in the dict: a real error
    ]
    assert [(n, line, c) for n, line, c, s in found if s == "info"] == [
        ("attend.py", 35, "KB507"),  # OP_ADD(RouterTopKV3)
        ("attend.py", 39, "KB507"),  # OP_ADD(MatmulReduceWQ, optiling::TilingPrepare)
    ]
    messages = {f.line: f.message for f in _report(HERE / "flow").findings}
    assert "'trace'" in messages[28] and "OP_ADD(MatmulReduceWQ)" in messages[39]


LEGACY = (
    "# A Python 2 helper kept in the tree; it once sat next to the torch_npu ports.\n"
    'import sys\n\nprint "report", sys.argv\n'
)


def test_context_from_readme_spellings_and_comment_only_mentions(tmp_path: Path) -> None:
    tree = tmp_path / "context"
    shutil.copytree(HERE / "context", tree)  # the fixtures stay parseable (test_scan_text)
    (tree / "tools").mkdir()
    (tree / "tools" / "legacy_report.py").write_text(LEGACY)
    plain = [
        ("legacy_report.py", 4, "KB500", "warning"),  # torch_npu only in a comment
        ("prefill.py", 13, "KB503", "error"),  # wrong on every product
    ]
    assert [f for f in _found(tree) if f[2] != "KB103"] == plain
    on_300i = [f for f in _found(tree, product="atlas-inference") if f[2] != "KB103"]
    assert on_300i == [
        ("legacy_report.py", 4, "KB500", "warning"),
        ("prefill.py", 8, "KB109", "warning"),  # models/800I/
        ("prefill.py", 8, "KB109", "warning"),  # serving/README_CN.md lists the 800I A2
        ("prefill.py", 13, "KB503", "error"),
    ]
    notes = sorted(
        f.message.rsplit("(", 1)[1]
        for f in _report(tree, product="atlas-inference").findings
        if f.code == "KB109"
    )
    assert notes[0].startswith("this code is documented for atlas-a2, atlas-a2-inference by ")
    assert notes[0].endswith("README_CN.md)")
    assert notes[1].startswith("this code is documented for atlas-a2-inference by its path")
    on_a3 = [f for f in _found(tree, product="atlas-a3") if f[3] == "error"]
    assert on_a3 == [("prefill.py", 13, "KB503", "error")]  # the _310p path: no error


def test_a_file_names_torch_npu_in_code_not_in_comments() -> None:
    from kb.scan.sources import touches_npu

    assert not touches_npu("# ported from torch_npu\nprint 'x'\n")
    assert not touches_npu('"""Notes on torch_npu."""\nprint "x"\n')
    assert touches_npu('import importlib\nm = importlib.import_module("torch_npu")\n')
    assert touches_npu("import torch_npu  # the port\nprint 'x'\n")
    assert touches_npu("x = '''unterminated torch_npu\nimport torch_npu\n")  # tokenizer gives up

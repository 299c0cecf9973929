"""Issue 35, class D: the C++ registration reader is one linear pass over tokens.

A few MB of generated or hostile C++ -- empty blocks, thousands of fragments, raw-string
delimiters never closed, directives, ``OP_ADD`` lines -- cost work proportional to the
text (counted: the characters the pass looks at), and a registration call inside a raw
string literal or after its block's closing brace is not a registration.  Main's reader
re-searched the text per block, per directive and per raw delimiter: 12 s to minutes.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kb.scan.registrations import native_registrations

REPO = Path(__file__).resolve().parent.parent
SIZE = 3_000_000  # characters of each hostile text

HOSTILE = {
    "empty_blocks": lambda n: "TORCH_LIBRARY(a, m) {" + "{}" * (n // 2) + "}",
    "nested_blocks": lambda n: "TORCH_LIBRARY(a, m) {" + "{{}}" * (n // 4) + "}",
    "empty_fragments": lambda n: "TORCH_LIBRARY_FRAGMENT(a, m) {}\n" * (n // 32),
    "fragments": lambda n: "".join(
        f'TORCH_LIBRARY_FRAGMENT(a{i}, m) {{ m.def("f{i}(Tensor x) -> Tensor"); }}\n'
        for i in range(n // 64)
    ),
    "distinct_raw_delimiters": lambda n: (
        "TORCH_LIBRARY(a, m) {" + "".join(f'm.def(R"d{i}(' for i in range(n // 14))
    ),
    "one_raw_delimiter": lambda n: "TORCH_LIBRARY(a, m) {" + 'm.def(R"x(' * (n // 10),
    "raw_in_code": lambda n: (
        "TORCH_LIBRARY(a, m) {\n" + "".join(f'auto s{i} = R"q{i}(\n' for i in range(n // 20))
    ),
    "directives": lambda n: (
        "TORCH_LIBRARY(a, m) {\n"
        + '#ifdef X\n m.def("a(Tensor x) -> Tensor");\n#endif\n' * (n // 50)
    ),
    "kernels": lambda n: "OP_ADD(Foo)\n" * (n // 12),
    "macros": lambda n: "TORCH_LIBRARY(" * (n // 14),
    "defs": lambda n: "TORCH_LIBRARY(a, m) {" + 'm.def("' * (n // 7),
    "comments": lambda n: "TORCH_LIBRARY(a, m) {" + "/*" * (n // 2),
    "escapes": lambda n: "TORCH_LIBRARY(a, m) {" + '"\\' * (n // 2),
    "calls": lambda n: "TORCH_LIBRARY(a, m) {" + "m .def(TORCH_SELECTIVE_SCHEMA(" * (n // 30),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_cpp_costs_work_linear_in_its_size(kind: str) -> None:
    from kb.scan.native_reader import NativeReader

    text = HOSTILE[kind](SIZE)
    reader = NativeReader(text)
    reader.read()
    # every character is looked at a small constant number of times: no re-scans
    assert reader.examined <= 3 * len(text), (kind, reader.examined, len(text))


_TIMED = """
import sys, time
from kb.scan.registrations import native_registrations
sys.path.insert(0, {tests!r})
from test_faults_native import HOSTILE
for kind in ("empty_fragments", "directives", "distinct_raw_delimiters", "kernels"):
    native_registrations(HOSTILE[kind](1_500_000), "x.cpp")
"""


def test_hostile_cpp_finishes_in_bounded_time() -> None:
    """Four 1.5 MB texts, in a child so a quadratic reader is stopped, not waited for
    (main's needs minutes; the linear pass about a second)."""
    code = textwrap.dedent(_TIMED.format(tests=str(REPO / "tests")))
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    try:
        subprocess.run([sys.executable, "-c", code], env=env, timeout=20, check=True)
    except subprocess.TimeoutExpired:
        pytest.fail("the registration reader took over 20 s on 6 MB of C++: not linear")


RAW = r"""
TORCH_LIBRARY(k, m) {
  const char* help = R"doc(
  m.def("fake(Tensor x) -> Tensor");
  )doc";
  auto w = u8R"(m.def("fake_too(Tensor x) -> Tensor"))";
  int n = 1'000'000;
  m.def("real(Tensor x) -> Tensor");
  m.def(R"sch(raw_schema(Tensor x,
      int k=1) -> Tensor)sch");
}
PYBIND11_MODULE(ext, m) {
  m.def("helper", &helper);
}
"""


def test_registrations_inside_literals_or_after_the_block_are_not_read() -> None:
    found = [(r.namespace, r.name, r.schema, r.line) for r in native_registrations(RAW, "k.cpp")]
    assert found == [
        ("k", "real", "real(Tensor x) -> Tensor", 8),
        ("k", "raw_schema", "raw_schema(Tensor x, int k=1) -> Tensor", 9),
    ]


def test_an_unclosed_raw_string_hides_the_rest_of_the_file() -> None:
    text = (
        'TORCH_LIBRARY(k, m) {\n  m.def("before(Tensor x) -> Tensor");\n'
        '  auto s = R"never(\n  m.def("after(Tensor x) -> Tensor");\n}\n'
    )
    assert [r.name for r in native_registrations(text, "k.cpp")] == ["before"]

"""Scanning source given as text: in memory, and exactly what scanning a file of it gives.

``Scanner.scan_text`` (the MCP scan tool, the site's rule examples) parses the string;
the name it is given is only a label -- the findings, the call sites and the path hints
read it, the file system is never touched.
"""

from __future__ import annotations

import builtins
import dataclasses
import io
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from kb.api.scan import ScanOptions, scanner
from kb.scan.sources import MAX_BYTES

FIX = Path(__file__).parent / "fixtures" / "scan"
FIXTURES = sorted(FIX.rglob("*.py"))
#: Texts a file reader refuses, cannot parse or decodes by its cookie -> the codes found.
BAD = {
    "syntax error": ("import torch_npu\ndef f(:\n", ["KB500"]),
    "NUL byte": ("import torch_npu\nx = 1\x00\n", ["KB500"]),
    "too large": ("#" * (MAX_BYTES + 1), ["KB500"]),
    "unknown coding cookie": ("# coding: no-such-codec\nx = 1\n", ["KB500"]),
    # read as latin-1, as Python would read such a file: epsilon is the text 'Ã©'
    "latin-1 cookie": (
        "# -*- coding: latin-1 -*-\nimport torch_npu\ntorch_npu.npu_rms_norm(x, g, epsilon='é')\n",
        ["KB106"],
    ),
    "byte order mark": ("\ufeffimport torch_npu\ntorch_npu.npu_rms_norm(x)\n", ["KB503"]),
}


@pytest.fixture(scope="module")
def sc() -> Any:
    return scanner(None, ScanOptions(use_config=False))


def _no_file_system(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail on any temp dir or file written (and on any open of a path in the working dir)."""

    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("scanning text touched the file system")

    for name in (
        "mkdtemp",
        "mkstemp",
        "TemporaryDirectory",
        "NamedTemporaryFile",
        "TemporaryFile",
        "SpooledTemporaryFile",
    ):
        monkeypatch.setattr(tempfile, name, refuse)
    real_open, real_os_open = builtins.open, os.open
    cwd = os.getcwd()

    def guarded_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if any(m in mode for m in "wax+") or os.path.abspath(str(file)).startswith(cwd):
            refuse()
        return real_open(file, mode, *args, **kwargs)

    def guarded_os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            refuse()
        return real_os_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded_open)
    monkeypatch.setattr(io, "open", guarded_open)
    monkeypatch.setattr(os, "open", guarded_os_open)


def _summary(report: Any) -> dict[str, Any]:
    return {
        "findings": report.findings,
        "sites": [dataclasses.asdict(s) for s in report.sites],
        "notes": report.notes,
        "opportunities": [o.finding for o in report.opportunities],
        "files": report.files,
        "skipped": report.skipped,
    }


def _file_then_text(
    sc: Any, text: str, shown_as: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Scan ``text`` as the file ``shown_as`` (relative to an empty dir), then as text
    with the file gone and the file system closed."""
    monkeypatch.chdir(tmp_path)
    file = tmp_path / shown_as
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_bytes(text.encode("utf-8"))
    from_file = _summary(sc.scan([shown_as]))
    file.unlink()
    with monkeypatch.context() as closed:
        _no_file_system(closed)
        from_text = _summary(sc.scan_text(text, shown_as))
    assert list(tmp_path.rglob("*.py")) == []
    return from_file, from_text


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
@pytest.mark.parametrize("shown_as", ["model.py", "vllm_ascend/_310p/model.py"])
def test_text_scans_like_the_same_file(
    sc: Any, fixture: Path, shown_as: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from_file, from_text = _file_then_text(
        sc, fixture.read_text(encoding="utf-8"), shown_as, tmp_path, monkeypatch
    )
    assert from_text == from_file
    assert from_text["sites"] or from_text["opportunities"], "the fixture finds something"
    assert {f.file for f in from_text["findings"]} <= {shown_as}


def test_the_label_gives_the_path_hints(sc: Any) -> None:
    """A call under a ``_310p`` directory is judged on Atlas inference, as for a file there."""
    text = (FIX / "resolution" / "spellings.py").read_text(encoding="utf-8")
    plain = sc.scan_text(text, "model.py")
    hinted = sc.scan_text(text, "vllm_ascend/_310p/model.py")
    assert {tuple(s.products) for s in plain.sites} == {()}
    assert {tuple(s.products) for s in hinted.sites} == {("atlas-inference",)}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_text_fails_as_the_file_does(
    sc: Any, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text, codes = BAD[name]
    from_file, from_text = _file_then_text(sc, text, "model.py", tmp_path, monkeypatch)
    assert from_text == from_file
    assert [f.code for f in from_text["findings"]] == codes

"""Every citation of every record names a file that exists upstream, at the commit it names.

Always on: each citation carries repo, commit and path, and none uses a file name that
only a local copy has (upstream spells beta pages ``（beta）torch_npu-X.md``).  With
``KB_UPSTREAM_TREES`` set to a directory of git copies (``Ascend+op-plugin``,
``hicann+ops-nn``, … bare or checked out), every cited path is looked up at its commit and
every cited line range must lie inside the file; repositories that are not there are
skipped and counted.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kb.core.paths import PACKAGE_DIR
from tools.upstream.citations import Citation, citations, local_only, resolve, resolve_local

# a minute or more of CPU: started first (see the heavy marker in pyproject.toml)
pytestmark = pytest.mark.heavy

TREES = os.environ.get("KB_UPSTREAM_TREES")


def _records() -> list[dict[str, Any]]:
    out = []
    for path in sorted((PACKAGE_DIR / "records").rglob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if isinstance(data, dict):
            out.append(data)
    return out


@pytest.fixture(scope="module")
def cited() -> list[Citation]:
    return [c for rec in _records() for c in citations(rec)]


def test_every_citation_names_repo_commit_and_path(cited: list[Citation]) -> None:
    assert len(cited) > 2000  # the walk reaches every kind of citation
    incomplete = [c for c in cited if not (c.repo and c.commit and c.path)]
    assert incomplete == []


def test_no_citation_uses_a_local_only_file_name(cited: list[Citation]) -> None:
    assert [(c.record, c.field, c.path) for c in cited if local_only(c)] == []
    urls = [
        (rec["name"], rec["upstream"]["url"])
        for rec in _records()
        if "beta-torch_npu-" in str((rec.get("upstream") or {}).get("url") or "")
    ]
    assert urls == []


def test_citation_walk_reaches_every_field() -> None:
    rec = {
        "name": "npu_x",
        "upstream": {"path": "docs/p.md", "commit": "abc1234"},
        "evidence": [{"repo": "o/a", "commit": "abc1234", "path": "e.cpp", "lines": "3-9"}],
        "reference": {"sources": [{"repo": "o/a", "commit": "abc1234", "path": "r.py"}]},
        "kernels": [
            {
                "repo": "o/k",
                "commit": "abc1234",
                "path": "k_def.cpp",
                "lines": "1-2",
                "wrapper": {"repo": "o/a", "commit": "abc1234", "path": "w.cpp", "lines": "5"},
            }
        ],
        "wrapper_checks": [{"repo": "o/a", "commit": "abc1234", "path": "w.cpp", "lines": "7"}],
        "discrepancies": [
            {"source": {"repo": "o/a", "commit": "abc1234", "path": "w.cpp", "lines": "8"}}
        ],
        "seen_in": [{"repo": "o/s", "commit": "abc1234", "sites": [{"path": "m.py", "line": 40}]}],
    }
    fields = [(c.field, c.path, c.last_line) for c in citations(rec)]
    assert fields == [
        ("upstream", "docs/p.md", None),
        ("evidence[0]", "e.cpp", 9),
        ("reference.sources[0]", "r.py", None),
        ("kernels[0]", "k_def.cpp", 2),
        ("kernels[0].wrapper", "w.cpp", 5),
        ("wrapper_checks[0]", "w.cpp", 7),
        ("discrepancies[0].source", "w.cpp", 8),
        ("seen_in[0].sites[0]", "m.py", 40),
    ]
    assert next(citations(rec)).repo == "Ascend/op-plugin"
    ext = {
        "name": "pkg",
        "repo": "o/p",
        "commit": "abc1234",
        "operators": [{"name": "f", "path": "r.cpp", "line": 7}],
    }
    assert [(c.field, c.repo, c.last_line) for c in citations(ext)] == [("operators[0]", "o/p", 7)]


def _git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@e",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@e",
    }
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def test_resolver_finds_missing_paths_and_lines_past_the_end(tmp_path: Path) -> None:
    repo = tmp_path / "owner+lib"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "docs").mkdir()
    (repo / "docs" / "（beta）page.md").write_text("one\ntwo\nthree\n", encoding="utf-8")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "pages")
    head = _git(repo, "rev-parse", "HEAD")[:12]
    good = Citation("r", "evidence[0]", "owner/lib", head, "docs/（beta）page.md", 3)
    local = Citation("r", "evidence[1]", "owner/lib", head, "docs/beta-page.md", None)
    long = Citation("r", "evidence[2]", "owner/lib", head, "docs/（beta）page.md", 4)
    absent = Citation("r", "evidence[3]", "other/repo", head, "x.md", None)
    resolved, bad, skipped = resolve(tmp_path, [good, local, long, absent])
    assert resolved == 1
    assert [(u.citation.field, "lines" in u.reason) for u in bad] == [
        ("evidence[1]", False),
        ("evidence[2]", True),
    ]
    assert skipped == [absent]


@pytest.mark.skipif(
    not TREES, reason="set KB_UPSTREAM_TREES to a directory of OWNER+NAME git copies"
)
def test_every_cited_path_resolves_at_its_commit(cited: list[Citation]) -> None:
    resolved, bad, skipped = resolve(Path(str(TREES)), cited)
    print(f"{resolved} citations resolved, {len(skipped)} skipped (repository not given)")
    assert [f"{u.citation.record} {u.citation.field}: {u.reason}" for u in bad] == []
    assert resolved > 0


SOURCES = os.environ.get("KB_UPSTREAM_SOURCES")


def test_the_sources_folder_resolves_upstream_names_only(tmp_path: Path) -> None:
    """A sources folder keeps beta pages as ``beta-…``: a citation by upstream's name finds
    the local file, one by the local name does not resolve, nor a line past the end."""
    pages = tmp_path / "op-plugin" / "docs" / "torch_npu"
    pages.mkdir(parents=True)
    (pages / "beta-torch_npu-npu_x.md").write_text("a\nb\n", encoding="utf-8")
    (pages / "torch_npu-npu_y.md").write_text("a\n", encoding="utf-8")
    base = "docs/zh/custom_APIs/torch_npu/"
    commit = "517f2e7d0f20"
    good = Citation(
        "r", "upstream", "Ascend/op-plugin", commit, base + "（beta）torch_npu-npu_x.md"
    )
    local = Citation(
        "r", "evidence[0]", "Ascend/op-plugin", commit, base + "beta-torch_npu-npu_x.md"
    )
    long = Citation("r", "evidence[1]", "Ascend/op-plugin", commit, base + "torch_npu-npu_y.md", 2)
    gone = Citation("r", "evidence[2]", "Ascend/op-plugin", commit, base + "torch_npu-npu_z.md")
    other = Citation("r", "evidence[3]", "Ascend/op-plugin", "e60dc48cff1f", base + "x.md")
    code = Citation("r", "evidence[4]", "Ascend/op-plugin", commit, "op_plugin/ops/opapi/X.cpp")
    resolved, bad, skipped = resolve_local(tmp_path, [good, local, long, gone, other, code])
    assert resolved == 1
    assert [u.citation.field for u in bad] == ["evidence[0]", "evidence[1]", "evidence[2]"]
    assert "local-only" in bad[0].reason and "line 2" in bad[1].reason
    assert skipped == [other, code]  # another commit, a file the folder does not hold


@pytest.mark.skipif(
    not SOURCES, reason="set KB_UPSTREAM_SOURCES to the offline sources folder (op-plugin/docs …)"
)
def test_every_page_and_config_citation_resolves_in_the_sources_folder(
    cited: list[Citation],
) -> None:
    resolved, bad, skipped = resolve_local(Path(str(SOURCES)), cited)
    print(f"{resolved} citations resolved in {SOURCES}, {len(skipped)} not covered by it")
    assert [f"{u.citation.record} {u.citation.field}: {u.reason}" for u in bad] == []
    assert resolved > 300  # every record names its page

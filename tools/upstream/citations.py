"""Every place a record cites a file of a public repository, and whether it is there.

A record cites upstream in several fields: the reference page (``upstream``, always
Ascend/op-plugin), ``evidence``, the numpy reference's ``reference.sources``, the harvested
``kernels`` (registration and wrapper), ``wrapper_checks``, ``discrepancies``, the call
sites of ``seen_in``, a chain's sources and an extension's registrations.
:func:`citations` lists them uniformly; :func:`resolve` looks
each one up in local git copies of the cited repositories (``OWNER+NAME`` directories
under one root, bare or not) at the commit it names, so a renamed, moved or mistyped
path is found before a reader follows the link.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The repository the ``upstream`` block's page lives in.
PAGE_REPO = "Ascend/op-plugin"
#: File names only a local copy uses; upstream spells beta pages ``（beta）torch_npu-X.md``.
LOCAL_ONLY = ("beta-torch_npu-",)


@dataclass(frozen=True)
class Citation:
    record: str
    field: str  # where in the record, e.g. evidence[3]
    repo: str
    commit: str
    path: str
    last_line: int | None = None  # the highest line the citation names


def _last(lines: object) -> int | None:
    text = str(lines or "").strip()
    if not text:
        return None
    tail = text.split("-")[-1]
    return int(tail) if tail.isdigit() else None


def citations(rec: dict[str, Any]) -> Iterator[Citation]:
    """Every file ``rec`` cites, in document order.

    A citation is any mapping with a ``path`` under a ``repo`` and ``commit`` of its own or
    of an enclosing mapping (``seen_in`` sites and extension operators inherit their
    repository's); the ``upstream`` block names a page of :data:`PAGE_REPO`.
    """
    name = str(rec.get("name") or "")

    def walk(node: object, where: str, repo: str, commit: str) -> Iterator[Citation]:
        if isinstance(node, list):
            for i, item in enumerate(node):
                yield from walk(item, f"{where}[{i}]", repo, commit)
            return
        if not isinstance(node, dict):
            return
        if where == "upstream":
            repo = PAGE_REPO
        repo = str(node.get("repo") or repo)
        commit = str(node.get("commit") or commit)
        if isinstance(node.get("path"), str) and (repo or commit):
            line = node.get("lines") if node.get("lines") is not None else node.get("line")
            yield Citation(name, where, repo, commit, node["path"], _last(line))
        for key, value in node.items():
            if isinstance(value, (dict, list)):
                yield from walk(value, f"{where}.{key}" if where else key, repo, commit)

    yield from walk(rec, "", "", "")


def local_only(cite: Citation) -> bool:
    """Does the citation use a file name that exists only in a local copy?"""
    return any(part in cite.path for part in LOCAL_ONLY)


def repo_dir(root: Path, repo: str) -> Path | None:
    """The git directory of ``repo`` under ``root`` (``OWNER+NAME``, bare or a checkout)."""
    base = root / repo.replace("/", "+")
    for candidate in (base, base / ".git", base / "repo"):
        if (candidate / "objects").is_dir() or (candidate / "HEAD").is_file():
            return candidate
    return None


@dataclass(frozen=True)
class Unresolved:
    citation: Citation
    reason: str


def resolve(root: Path, cites: Iterable[Citation]) -> tuple[int, list[Unresolved], list[Citation]]:
    """(resolved count, unresolved ones with why, skipped ones whose repository is absent)."""
    by_repo: dict[str, list[Citation]] = {}
    skipped: list[Citation] = []
    for c in cites:
        by_repo.setdefault(c.repo, []).append(c)
    resolved, bad = 0, []
    for repo, group in sorted(by_repo.items()):
        git = repo_dir(root, repo)
        if git is None:
            skipped += group
            continue
        keys = sorted({(c.commit, c.path) for c in group})
        sizes = _line_counts(git, keys)
        for c in group:
            count = sizes.get((c.commit, c.path))
            if count is None:
                bad.append(Unresolved(c, f"{c.path} is not in {repo} at {c.commit}"))
            elif c.last_line is not None and c.last_line > count:
                bad.append(
                    Unresolved(
                        c,
                        f"{c.path} at {c.commit} has {count} lines, the citation "
                        f"names line {c.last_line}",
                    )
                )
            else:
                resolved += 1
    return resolved, bad, skipped


def _line_counts(git: Path, keys: list[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """Line counts of the cited blobs (missing ones left out), read in one ``cat-file --batch``."""
    request = "".join(f"{commit}:{path}\n" for commit, path in keys).encode("utf-8")
    proc = subprocess.run(
        ["git", "--git-dir", str(git), "cat-file", "--batch"],
        input=request,
        capture_output=True,
        check=False,
    )
    out: dict[tuple[str, str], int] = {}
    data, pos = proc.stdout, 0
    for key in keys:
        end = data.index(b"\n", pos)
        header = data[pos:end].split()
        pos = end + 1
        if len(header) < 3 or header[-1] == b"missing":
            continue
        size = int(header[2])
        blob = data[pos : pos + size]
        pos += size + 1
        if header[1] == b"blob":
            out[key] = blob.count(b"\n") + (0 if blob.endswith(b"\n") or not blob else 1)
    return out


@dataclass(frozen=True)
class LocalCopy:
    """Part of a repository kept as plain files: ``prefix`` of ``repo`` at ``commit`` lies
    under ``folder`` (relative to the sources root), with ``renames`` of file-name parts
    (upstream spelling → local spelling)."""

    repo: str
    commit: str
    prefix: str
    folder: str
    renames: tuple[tuple[str, str], ...] = ()


#: What the project's offline sources folder holds (its README's table): the reference pages,
#: beta ones renamed ``beta-…`` locally, and op-plugin's config files, at one commit.
SOURCES_LAYOUT = (
    LocalCopy(
        PAGE_REPO,
        "517f2e7d0f20",
        "docs/zh/custom_APIs/torch_npu/",
        "op-plugin/docs/torch_npu/",
        (("（beta）torch_npu-", "beta-torch_npu-"),),
    ),
    LocalCopy(PAGE_REPO, "517f2e7d0f20", "op_plugin/config/", "op-plugin/config/"),
)


def local_path(cite: Citation, layout: Iterable[LocalCopy]) -> str | None:
    """Where ``cite`` lies in a sources folder of ``layout`` (None: not covered there)."""
    for copy in layout:
        same_commit = cite.commit.startswith(copy.commit) or copy.commit.startswith(cite.commit)
        if cite.repo != copy.repo or not same_commit or not cite.path.startswith(copy.prefix):
            continue
        rest = cite.path[len(copy.prefix) :]
        for upstream, local in copy.renames:
            rest = rest.replace(upstream, local)
        return copy.folder + rest
    return None


def resolve_local(
    root: Path, cites: Iterable[Citation], layout: Iterable[LocalCopy] = SOURCES_LAYOUT
) -> tuple[int, list[Unresolved], list[Citation]]:
    """Like :func:`resolve`, against plain files under ``root`` laid out as ``layout``:
    a citation is looked up by its upstream name mapped to the local one, so a local-only
    name (``beta-torch_npu-X.md``) cited as such does not resolve.  Citations the layout
    does not cover are returned as skipped."""
    layout = tuple(layout)
    resolved, bad, skipped = 0, [], []
    counts: dict[str, int | None] = {}
    for c in cites:
        rel = local_path(c, layout)
        if rel is None:
            skipped.append(c)
            continue
        local_only_name = [loc for copy in layout for _, loc in copy.renames if loc in c.path]
        if local_only_name:
            bad.append(Unresolved(c, f"{c.path} uses the local-only name {local_only_name[0]!r}"))
            continue
        if rel not in counts:
            f = root / rel
            counts[rel] = (
                len(f.read_text(encoding="utf-8", errors="replace").splitlines())
                if f.is_file()
                else None
            )
        count = counts[rel]
        if count is None:
            bad.append(Unresolved(c, f"{c.path} is not in {c.repo} at {c.commit} ({rel} absent)"))
        elif c.last_line is not None and c.last_line > count:
            bad.append(
                Unresolved(c, f"{c.path} has {count} lines, the citation names line {c.last_line}")
            )
        else:
            resolved += 1
    return resolved, bad, skipped

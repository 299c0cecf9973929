"""Lay out the original-code development set (issue 29) from bare git mirrors.

    python scripts/fetch_origset.py ROOT --mirrors DIR [--name NAME ...]

``tests/data/scan-origset.yaml`` names, per file, a public repository, a commit, the file's
path and the folders around it that its imports reach (``tree``).  The code is never stored
in the project: this script copies it, at the manifest's commit, out of bare mirrors of those
repositories into ``ROOT/<name>/<path>`` (the Python files of each ``tree`` folder, so the
package layout that absolute imports need is kept).  ``scripts/scan_origset.py ROOT`` then
measures the plan on them.

A mirror of ``owner/name`` is looked for as ``DIR/owner+name/repo`` (the layout the search
tool's ``fetch`` leaves), ``DIR/owner+name``, ``DIR/owner/name.git`` or ``DIR/owner/name``;
``git clone --bare`` of the repository into one of these places is enough.  ``--mirrors``
defaults to ``$KB_ORIGSET_MIRRORS``.  Exit 1 when a file could not be laid out (the others
still are), 2 on a usage error.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent.parent
MANIFEST = HERE / "tests" / "data" / "scan-origset.yaml"


def git_dir(mirrors: Path, repo: str) -> Path | None:
    """The bare repository holding ``owner/name`` under ``mirrors``, if any."""
    owner, name = repo.split("/", 1)
    for candidate in (
        mirrors / f"{owner}+{name}" / "repo",
        mirrors / f"{owner}+{name}",
        mirrors / owner / f"{name}.git",
        mirrors / owner / name,
    ):
        if (candidate / "HEAD").is_file() or (candidate / ".git").is_dir():
            return candidate if (candidate / "HEAD").is_file() else candidate / ".git"
    return None


def _git(gitdir: Path, *args: str) -> bytes:
    return subprocess.run(
        ["git", f"--git-dir={gitdir}", *args], check=True, capture_output=True
    ).stdout


def wanted_paths(gitdir: Path, item: dict[str, Any]) -> list[str]:
    """The file itself and, per ``tree`` entry, that file or every .py file of that folder."""
    paths = [item["path"]]
    for entry in item.get("tree") or []:
        listed = (
            _git(gitdir, "ls-tree", "-r", "--name-only", item["commit"], "--", entry)
            .decode()
            .splitlines()
        )
        if listed == [entry]:
            paths.append(entry)
        else:
            paths += [p for p in listed if p.endswith(".py")]
    return sorted(set(paths))


def lay_out(item: dict[str, Any], mirrors: Path, root: Path) -> str | None:
    """Copy one manifest entry's files under ``root``; the reason when it cannot."""
    gitdir = git_dir(mirrors, item["repo"])
    if gitdir is None:
        return f"no mirror of {item['repo']} under {mirrors}"
    try:
        _git(gitdir, "cat-file", "-e", f"{item['commit']}^{{commit}}")
    except subprocess.CalledProcessError:
        return f"{item['repo']}: commit {item['commit']} is not in the mirror {gitdir}"
    try:
        paths = wanted_paths(gitdir, item)
        for path in paths:
            target = root / item["name"] / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(_git(gitdir, "show", f"{item['commit']}:{path}"))
    except subprocess.CalledProcessError as exc:
        return (
            f"{item['repo']}@{item['commit'][:12]}: {exc.stderr.decode(errors='replace').strip()}"
        )
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "root", type=Path, help="folder to lay the files out in (ROOT/<name>/<path>)"
    )
    parser.add_argument(
        "--mirrors",
        type=Path,
        default=os.environ.get("KB_ORIGSET_MIRRORS"),
        help="folder of bare mirrors (default: $KB_ORIGSET_MIRRORS)",
    )
    parser.add_argument(
        "--name", action="append", default=[], help="only this manifest entry (repeatable)"
    )
    args = parser.parse_args(argv)
    if args.mirrors is None or not args.mirrors.is_dir():
        parser.error("--mirrors DIR (or $KB_ORIGSET_MIRRORS) must name a folder of bare mirrors")
    manifest = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    items = [i for i in manifest["files"] if not args.name or i["name"] in args.name]
    unknown = set(args.name) - {i["name"] for i in items}
    if unknown:
        parser.error(f"not in the manifest: {', '.join(sorted(unknown))}")
    failed = 0
    for item in items:
        reason = lay_out(item, args.mirrors, args.root)
        if reason:
            failed += 1
            print(f"{item['name']}: {reason}", file=sys.stderr)
        else:
            print(f"{item['name']}: {args.root / item['name'] / item['path']}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

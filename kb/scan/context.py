"""Where a file says it runs: the products its path and README document, and device branches.

Two kinds of context change how sure an error is.

* **Documentation.**  A folder named for a product (``_310p/``, ``800I/``, ``A2/``,
  ``atlas_300i/``) or a README in the file's folder or above that names products (a
  supported-devices list, a platform badge) says which products the code is written for.
  Scanned with ``--product`` another one, an error that only that target causes is a
  warning naming the documented products: the code was not written for the target, and
  whether it is ever deployed there the code does not say.  Errors that hold whatever the
  product (binding, values) stay errors.
* **Devices.**  A call inside a branch taken for another device (``elif is_cpu:``,
  ``if not is_npu():``, ``device.type == "cuda"``, an ``except ImportError`` of an NPU
  package) cannot run on an NPU build: what the scanner finds there is at most info.

Products are read through :mod:`kb.vocab.products` (code words and aliases), devices
through its backend words; nothing here keeps a list of its own.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from kb.core.paths import read_regular_file
from kb.lint.findings import Finding
from kb.scan.hints import tokens
from kb.scan.values import Cond
from kb.vocab import (
    INFERENCE_ONLY_PRODUCTS,
    NPU_BACKEND_WORDS,
    OTHER_BACKEND_WORDS,
    PRODUCT_ALIASES,
    SOC_NAME_PRODUCTS,
    product_family,
)

#: README file names read for a supported-devices list (the first one found per folder).
README_NAMES = ("README.md", "README_en.md", "README.rst", "README.txt", "README", "readme.md")
#: Bytes of a README read: supported devices are stated near the top.
MAX_README_BYTES = 64 * 1024


#: What a README that speaks of Ascend hardware says somewhere; a bare number that is a
#: product alias ("950", "910") counts only on a line that also speaks of devices or support.
_NPU_README = re.compile(r"ascend|npu|atlas|昇腾", re.I)
_DEVICE_LINE = re.compile(
    r"atlas|ascend|npu|support|device|hardware|platform|昇腾|支持|硬件|设备", re.I
)
_WORD = re.compile(r"(?<![%\w])[A-Za-z0-9_]+")  # not the bytes of a %-escaped URL


def _named(text: str) -> set[str]:
    """Product ids a name names, word by word (code words and one-word aliases)."""
    return {PRODUCT_ALIASES[t] for t in tokens(text) if t in PRODUCT_ALIASES}


def _stated(text: str) -> set[str]:
    """Product ids a README about Ascend hardware states: whole words (code words, one-word
    aliases, SoC names such as ``Ascend910_9382``), so a model name such as
    "Qwen3-30B-A3B" is not Atlas A3; a bare number only on a line about devices."""
    out: set[str] = set()
    if not _NPU_README.search(text):
        return out
    for line in text.splitlines():
        device_line = bool(_DEVICE_LINE.search(line))
        for word in map(str.lower, _WORD.findall(line)):
            pid = PRODUCT_ALIASES.get(word) or SOC_NAME_PRODUCTS.get(word)
            if pid and (device_line or not word.isdigit()):
                out.add(pid)
    return out


def path_products(path: str) -> set[str]:
    """Products the folder and file names of a path name (``vllm_ascend/_310p/x.py``)."""
    out: set[str] = set()
    for part in Path(path).parts:
        out |= _named(part)
    return out


class Documentation:
    """The products each folder's README documents, read once per folder."""

    def __init__(self, roots: list[Path]) -> None:
        self.roots = [r.resolve() for r in roots]
        self._folders: dict[Path, tuple[set[str], str]] = {}

    def for_file(self, path: str) -> tuple[set[str], str]:
        """(products, where they are stated) for a file: its path's names, else the nearest
        README naming products in its folder or above (no higher than the scanned root)."""
        named = path_products(path)
        if named:
            return named, "its path"
        try:
            folder = Path(path).resolve().parent
        except OSError:
            return set(), ""
        root = next((r for r in self.roots if folder == r or r in folder.parents), None)
        if root is None:
            return set(), ""
        return self._folder(folder, root)

    def _folder(self, folder: Path, root: Path) -> tuple[set[str], str]:
        if folder not in self._folders:
            found: tuple[set[str], str] = (set(), "")
            for name in README_NAMES:
                readme = folder / name
                if readme.is_file():
                    products = _stated(_head(readme))
                    if products:
                        found = (products, str(readme))
                        break
            if not found[0] and folder != root and folder.parent != folder:
                found = self._folder(folder.parent, root)
            self._folders[folder] = found
        return self._folders[folder]


def _head(path: Path) -> str:
    """The top of a README: a regular file only (never blocking on a FIFO), read through
    the confinement of ``kb mcp --root`` like every input."""
    try:
        return read_regular_file(path, MAX_README_BYTES).decode("utf-8", "replace")
    except (OSError, ValueError):
        return ""


def covers(products: set[str], target: str) -> bool:
    """Whether documented products include the target (a family covers its sub-series)."""
    fam = product_family(target)
    return any(p in (target, fam) or product_family(p) == target for p in products)


#: The prefix of a product key that marks calls judged on a target their context does not
#: name; the rest of the key says what the context names.
DOCKED = "<docked>"


def docked(target: str | None, doc: set[str], where: str, phase: str | None) -> str | None:
    """The product key a call without a product hint of its own is judged under.

    A folder named for one product decides the product when no target is given; a
    target the documentation does not name, or an inference-only target for a training
    path (a backward pass), gives a :data:`DOCKED` key whose text says what the code is for.
    """
    if target is None:
        return next(iter(doc)) if where == "its path" and len(doc) == 1 else None
    if doc and not covers(doc, target):
        return f"{DOCKED}this code is documented for {', '.join(sorted(doc))} by {where}"
    if phase == "training" and target in INFERENCE_ONLY_PRODUCTS:
        return f"{DOCKED}a training path (backward pass), which {target}, an inference product, does not run"
    return target


def demote_target_only(
    on_target: list[tuple[Finding, Any]], without: list[tuple[Finding, Any]], note: str
) -> list[tuple[Finding, Any]]:
    """Errors judged on the target that judging without a product does not give become
    warnings with ``note``; the others are kept as they are."""
    plain = {(f.line, f.column, f.code, f.message) for f, _s in without}
    out = []
    for f, site in on_target:
        if f.severity == "error" and (f.line, f.column, f.code, f.message) not in plain:
            f = replace(f, severity="warning", message=f"{f.message} ({note})")
        out.append((f, site))
    return out


_DEVICE_TEST = re.compile(r"""(?:^|[^A-Za-z0-9])is_?(\w+)|["'](\w+)["']|\b(\w+)\.is_available\b""")
_DEVICE_AFFIXES = re.compile(r"^torch_|_(?:available|platform|device|backend)$")


def _device_words(atom: str) -> set[str]:
    """Backend words an atom tests as a whole: ``is_cpu()``, ``isNpu``, ``is_torch_npu_available()``,
    ``== "cuda"``, ``torch.cuda.is_available()`` (not ``is_cpu_offload``: an NPU path)."""
    found: set[str] = set()
    for m in _DEVICE_TEST.finditer(atom):
        word = _DEVICE_AFFIXES.sub("", (m.group(1) or m.group(2) or m.group(3) or "").lower())
        if word in NPU_BACKEND_WORDS or word in OTHER_BACKEND_WORDS:
            found.add(word)
    return found


def off_npu(cond: Cond) -> str | None:
    """The branch test that keeps a call off NPU builds, if one holds in ``cond``.

    An ``except ImportError`` of an NPU package counts too: its atom names what the
    ``try`` imported (:meth:`kb.scan.interp.Interpreter.visit_try`).
    """
    for atom, truth in sorted(cond):
        if atom.startswith("<except ImportError of "):
            if truth and any(t in NPU_BACKEND_WORDS for t in tokens(atom)):
                return f"the {atom[1:].split('@')[0]} fallback"
            continue
        if atom.startswith("<"):
            continue
        words = _device_words(atom)
        npu = bool(words & NPU_BACKEND_WORDS)
        other = bool(words & OTHER_BACKEND_WORDS)
        if (truth and other and not npu) or (not truth and npu and not other):
            return f"{'' if truth else 'not '}{atom}"
    return None


def demote_off_npu(found: list[tuple[Finding, Any]]) -> list[tuple[Finding, Any]]:
    """Findings of call variants that cannot run on an NPU build become info."""
    out = []
    for f, site in found:
        test = off_npu(site.cond) if f.severity != "info" else None
        if test is not None:
            f = replace(
                f, severity="info", message=f"{f.message} (only where {test}: not an NPU build)"
            )
        out.append((f, site))
    return out

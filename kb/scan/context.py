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

import os
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
            for name in _readmes(folder):
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


def _readmes(folder: Path) -> list[str]:
    """README names to read in a folder: :data:`README_NAMES` first, then any other
    spelling the folder has (``README_CN.md``, ``Readme.md``, ``readme_zh.md``)."""
    try:
        others = sorted(
            n
            for n in os.listdir(folder)
            if n.lower().startswith("readme")
            and Path(n).suffix.lower() in ("", ".md", ".rst", ".txt")
            and n not in README_NAMES
        )
    except OSError:
        others = []
    return [*README_NAMES, *others]


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


_QUOTED = re.compile(r"""["'](\w+)["']""")
#: A dotted name (or call) in a branch test, and whether it is called.
_CHAIN = re.compile(r"[A-Za-z_][\w.]*(?:\s*\()?")
_SUBWORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
#: Words before a device word that make a name a test of the device it runs on:
#: ``is_npu``, ``IS_NPU``, ``on_npu``, ``use_npu``, ``HAS_NPU``, ``is_torch_npu_available``,
#: ``VLLM_USE_ROCM`` (what follows the last of them is read).
_FLAG_HEADS = frozenset({"is", "on", "use", "using", "uses", "has", "have", "with", "run"})
#: Words after it that say the same thing: ``npu_available``, ``is_cuda_alike``,
#: ``is_rocm_platform``, ``cuda_enabled``; any other word makes another flag
#: (``is_cpu_offload``, ``use_cuda_graph``: paths an NPU build takes too).
_FLAG_TAILS = frozenset(
    {"available", "platform", "device", "backend", "alike", "like", "build", "enabled", "env"}
)


def _flag_word(part: str, called: bool) -> str | None:
    """The backend word one name part tests (``is_npu``, ``IS_NPU``, ``on_npu``,
    ``npu_available``, ``is_cuda_alike``), if it is one: a bare backend word only as a
    name or the last attribute, never a call (``x.cpu()`` moves a tensor)."""
    words = [w.lower() for w in _SUBWORD.findall(part)]
    bare = len(words) == 1
    heads = [i for i, w in enumerate(words) if w in _FLAG_HEADS]
    if heads:  # VLLM_USE_ROCM, device_is_npu: what follows the last head word
        words = words[heads[-1] + 1 :]
        words = words[1:] if words[:1] == ["torch"] else words  # is_torch_npu_available
    while len(words) > 1 and words[-1] in _FLAG_TAILS:
        words = words[:-1]
    if len(words) != 1 or (bare and called):
        return None
    word = words[0]
    return word if word in NPU_BACKEND_WORDS or word in OTHER_BACKEND_WORDS else None


def device_words(atom: str) -> set[str]:
    """Backend words an atom tests as a whole: ``is_cpu()``, ``isNpu``, ``IS_NPU``,
    ``on_npu``, ``is_torch_npu_available()``, ``== "cuda"``, ``torch.cuda.is_available()``,
    ``torch.version.hip`` (not ``is_cpu_offload``: an NPU path; not ``torch.npu.x()``:
    a module on the way)."""
    found = {m.group(1).lower() for m in _QUOTED.finditer(atom)}
    found &= NPU_BACKEND_WORDS | OTHER_BACKEND_WORDS
    for m in _CHAIN.finditer(atom):
        chain = m.group(0)
        called = chain.endswith("(")
        parts = chain.rstrip("( \t").split(".")
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if not last and parts[i + 1] == "is_available":
                module = part.lower()  # torch.cuda.is_available()
                if module in NPU_BACKEND_WORDS or module in OTHER_BACKEND_WORDS:
                    found.add(module)
                continue
            if not last:
                continue  # a module or object on the way (torch.npu.x(), torch_npu.hifloat8)
            word = _flag_word(part, called)
            if word is not None:
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
        words = device_words(atom)
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

"""Import whoosh without paying for modules it never uses on our path.

At import time whoosh-reloaded pulls in ``urllib.request`` (for a download helper we
never call), the ``cached_property`` package (which imports asyncio), ``hashlib`` (for
``md5``, which loads OpenSSL) and ``whoosh.lang.morph_en`` (for the ``Variations`` query
we never build; its module body compiles hundreds of regexes): together more than half
of whoosh's import cost, which is most of a cold free-text ``kb search``.  While whoosh
imports, we stand in light replacements for those modules, then remove them from
``sys.modules`` so any later importer gets the real ones.  The stand-ins forward to the
real functions if ever called, and ``md5``/``sha1`` are CPython's builtin
implementations, the same digests without OpenSSL.
"""

from __future__ import annotations

import functools
import sys
import types
from typing import Any


def _urlretrieve(*args: Any, **kwargs: Any) -> Any:
    from urllib.request import urlretrieve

    return urlretrieve(*args, **kwargs)


def _variations(word: str) -> Any:
    from whoosh.lang.morph_en import variations

    return variations(word)


def _stand_ins() -> dict[str, types.ModuleType]:
    """Light modules for the heavy ones whoosh imports but our path never calls."""
    out: dict[str, types.ModuleType] = {}
    if "urllib.request" not in sys.modules:
        fake = types.ModuleType("urllib.request")
        fake.urlretrieve = _urlretrieve  # type: ignore[attr-defined]
        out["urllib.request"] = fake
    if "cached_property" not in sys.modules:
        fake = types.ModuleType("cached_property")
        fake.cached_property = functools.cached_property  # type: ignore[attr-defined]
        out["cached_property"] = fake
    if "hashlib" not in sys.modules:
        try:
            from _md5 import md5
            from _sha1 import sha1
        except ImportError:  # pragma: no cover - a CPython built without them
            pass
        else:
            fake = types.ModuleType("hashlib")
            fake.md5 = md5  # type: ignore[attr-defined]
            fake.sha1 = sha1  # type: ignore[attr-defined]
            out["hashlib"] = fake
    if "whoosh.lang.morph_en" not in sys.modules:
        fake = types.ModuleType("whoosh.lang.morph_en")
        fake.variations = _variations  # type: ignore[attr-defined]
        out["whoosh.lang.morph_en"] = fake
    return out


def import_whoosh() -> None:
    if "whoosh.index" in sys.modules:
        return
    stand_ins = _stand_ins()
    sys.modules.update(stand_ins)
    try:
        import whoosh.filedb.filetables  # every index read hashes terms with its md5
        import whoosh.index
        import whoosh.query  # noqa: F401
    finally:
        for name, module in stand_ins.items():
            if sys.modules.get(name) is module:
                del sys.modules[name]
            parent, _, child = name.rpartition(".")
            package = sys.modules.get(parent) if parent else None
            if package is not None and getattr(package, child, None) is module:
                delattr(package, child)

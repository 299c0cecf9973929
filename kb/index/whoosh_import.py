"""Import whoosh without paying for modules it never uses on our path.

whoosh-reloaded imports ``urllib.request`` (for a download helper we never call) and
the ``cached_property`` package (which imports asyncio) at import time: about 25 ms of
a 150 ms search budget.  While whoosh imports, we stand in light replacements for those
two modules, then remove them from ``sys.modules`` so any later importer gets the real
ones.  The stand-in ``urlretrieve`` forwards to the real function if ever called.
"""

from __future__ import annotations

import functools
import sys
import types
from typing import Any


def _urlretrieve(*args: Any, **kwargs: Any) -> Any:
    from urllib.request import urlretrieve

    return urlretrieve(*args, **kwargs)


def import_whoosh() -> None:
    if "whoosh.index" in sys.modules:
        return
    stand_ins: dict[str, types.ModuleType] = {}
    if "urllib.request" not in sys.modules:
        fake = types.ModuleType("urllib.request")
        fake.urlretrieve = _urlretrieve  # type: ignore[attr-defined]
        stand_ins["urllib.request"] = fake
    if "cached_property" not in sys.modules:
        fake = types.ModuleType("cached_property")
        fake.cached_property = functools.cached_property  # type: ignore[attr-defined]
        stand_ins["cached_property"] = fake
    sys.modules.update(stand_ins)
    try:
        import whoosh.index
        import whoosh.query  # noqa: F401
    finally:
        for name, module in stand_ins.items():
            if sys.modules.get(name) is module:
                del sys.modules[name]
        urllib = sys.modules.get("urllib")
        if urllib is not None and getattr(urllib, "request", None) in stand_ins.values():
            delattr(urllib, "request")

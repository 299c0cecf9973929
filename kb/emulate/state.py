"""Which emulation is on: the one piece of state every part of kb.emulate reads.

Kept apart from :mod:`kb.emulate.session` (which builds the parts) so that the
kernels and the module objects can find the running emulation without importing
what built them.
"""

from __future__ import annotations

from typing import Any

#: the emulation that is on (kb.emulate.session.Emulation), else None
ACTIVE: Any = None
#: the last emulation started, kept after it ends so its trace can still be read
LAST: Any = None


def active() -> Any:
    """The runtime of the emulation that is on; RuntimeError when none is."""
    if ACTIVE is None:
        raise RuntimeError(
            "kb.emulate is not installed: call kb.emulate.install() (or run "
            "the script with 'kb emulate -- python SCRIPT')"
        )
    return ACTIVE.runtime

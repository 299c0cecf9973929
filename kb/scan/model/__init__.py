"""Reading unfused modelling code as a porting engineer does: ``nn.Module`` classes,
what their ``__init__`` builds and what their ``forward`` computes (:mod:`.facts`), the
kind of each module (:mod:`.kinds`) and the module inventory of a file
(:mod:`.inventory`); :mod:`.plan` then matches each module and phase to the records."""

import sys


def forget_trees() -> None:
    """Let go of the modules the reader parsed, if it ran (the end of a scan; the
    reader itself is imported only by scans that read a model)."""
    resolve = sys.modules.get("kb.scan.model.resolve")
    if resolve is not None:
        resolve.forget_parsed()

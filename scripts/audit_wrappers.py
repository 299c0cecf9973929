"""Hold the operator records against op-plugin's wrapper checks (a maintainer step).

Prints every disagreement between the records and the ``TORCH_CHECK``s of the wrappers in
an op-plugin checkout: values the record allows and the wrapper refuses (or the reverse),
ranks, dtypes, defaults the wrapper refuses, optional arguments it requires, values it
branches on, arguments a dispatch drops on some chips, docstrings that list other values.
``--write`` refreshes each record's ``wrapper_checks`` blocks, which ``kb validate`` holds
the records to.

    python scripts/audit_wrappers.py --op-plugin /tmp/op-plugin \\
        --wheel /path/to/torch_npu-2.14.0 --commit 517f2e7d0f20 [--write]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.upstream.wrapper_cli import main

if __name__ == "__main__":
    raise SystemExit(main())

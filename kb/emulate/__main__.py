"""``python -m kb.emulate SCRIPT [ARGS]``: run a script with torch_npu emulated on the CPU."""

from __future__ import annotations

import sys

from kb.emulate.run import script

USAGE = "usage: python -m kb.emulate [--product P] SCRIPT [ARGS...]"


def main(argv: list[str]) -> int:
    product = None
    if argv[:1] == ["--product"] and len(argv) > 1:
        product, argv = argv[1], argv[2:]
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr if not argv else sys.stdout)
        return 2 if not argv else 0
    try:
        return script(argv[0], argv[1:], product)
    except ValueError as exc:
        print(f"kb.emulate: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

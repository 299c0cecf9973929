"""Running a script (or any command) with the emulated torch_npu importable.

A temporary directory holding a ``torch_npu`` package whose ``__init__`` turns the
emulation on is put first on the path for that run only, so ``import torch_npu`` in
the script (or in anything it imports) finds the emulator and nothing else changes.
The directory goes away when the run ends; a real torch_npu installed beside is
untouched and is what every other process keeps importing.
"""

from __future__ import annotations

import os
import runpy
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kb.emulate.session import PRODUCT_ENV

_SHIM = '''"""torch_npu emulated on the CPU by kb.emulate (a shim on the path for one run)."""
from kb.emulate.session import install as _install

_install()  # replaces this module in sys.modules with the emulated torch_npu
'''
#: where the package providing kb lives, so a child interpreter finds it too
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


@contextmanager
def shim_dir() -> Iterator[str]:
    """A directory with the ``torch_npu`` shim package, removed afterwards."""
    root = tempfile.mkdtemp(prefix="kb-emulate-")
    try:
        pkg = Path(root, "torch_npu")
        pkg.mkdir()
        (pkg / "__init__.py").write_text(_SHIM, encoding="utf-8")
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def command(argv: list[str], product: str | None = None) -> int:
    """Run ``argv`` as a child process with the shim first on PYTHONPATH; its exit code.

    A leading ``python``/``python3`` is this interpreter, which has kb and torch.
    """
    if not argv:
        raise ValueError("no command to run: kb emulate -- python SCRIPT [ARGS]")
    argv = list(argv)
    if argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    with shim_dir() as shim:
        env = dict(os.environ)
        paths = [shim, _PACKAGE_ROOT, env.get("PYTHONPATH", "")]
        env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
        if product:
            env[PRODUCT_ENV] = product
        try:
            return subprocess.call(argv, env=env)
        except FileNotFoundError:
            raise ValueError(f"cannot run {argv[0]!r}: no such program") from None
        except KeyboardInterrupt:
            return 130


def script(path: str, args: list[str], product: str | None = None) -> int:
    """Run a Python file in this process as ``__main__`` with the shim importable."""
    if not Path(path).is_file():
        raise ValueError(f"{path}: no such file")
    if product:
        os.environ[PRODUCT_ENV] = product
    with shim_dir() as shim:
        saved_argv, saved_path = sys.argv, list(sys.path)
        sys.argv = [path, *args]
        sys.path[:0] = [str(Path(path).resolve().parent), shim]
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            sys.argv, sys.path[:] = saved_argv, saved_path
    return 0

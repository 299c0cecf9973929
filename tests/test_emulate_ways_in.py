"""The ways into the emulation, and the ways it stays out.

``kb emulate -- python SCRIPT`` and ``python -m kb.emulate SCRIPT`` run a script with the
emulated torch_npu (exit code the script's); ``install()`` nests, works as a context
manager and undoes everything; a product judges calls as ``kb check``'s target does; the
pytest fixture needs no torch until it is used; a real torch_npu on the path is never
shadowed outside an explicit emulation; and the reading verbs never import torch.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import kb.emulate
from kb.emulate import CallRejected
from tests.emulate_support import torch

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parent.parent
PROBE = "import torch_npu, sys; print(type(torch_npu).__module__, getattr(torch_npu, 'MARK', '-'))"


def _run(argv: list[str], cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **env}
    return subprocess.run(
        argv, cwd=cwd or ROOT, capture_output=True, text=True, timeout=600, env=full
    )


@pytest.fixture(scope="module")
def fake_torch_npu(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding a stand-in for an installed (real) torch_npu package."""
    root = tmp_path_factory.mktemp("site")
    (root / "torch_npu").mkdir()
    (root / "torch_npu" / "__init__.py").write_text("MARK = 'installed'\n", encoding="utf-8")
    return root


def test_kb_emulate_runs_a_script_and_returns_its_exit_code(
    tmp_path: Path, fake_torch_npu: Path
) -> None:
    script = tmp_path / "port.py"
    script.write_text(PROBE + "\nsys.exit(3)\n", encoding="utf-8")
    done = _run(
        [sys.executable, "-m", "kb", "emulate", "--", "python", str(script)],
        PYTHONPATH=str(fake_torch_npu),
    )
    assert done.returncode == 3, done.stderr
    assert done.stdout.split() == ["kb.emulate.module", "-"]  # the emulator, not the installed one
    plain = _run([sys.executable, str(script)], PYTHONPATH=str(fake_torch_npu))
    assert plain.stdout.split() == ["builtins", "installed"]  # outside an emulation: untouched


def test_python_m_kb_emulate_runs_a_script_with_its_arguments(tmp_path: Path) -> None:
    script = tmp_path / "port.py"
    script.write_text(
        PROBE + "\nprint(sys.argv[1:])\nsys.exit(int(sys.argv[1]))\n", encoding="utf-8"
    )
    done = _run([sys.executable, "-m", "kb.emulate", str(script), "5"])
    assert done.returncode == 5, done.stderr
    assert "kb.emulate.module" in done.stdout and "['5']" in done.stdout


def test_a_command_is_required() -> None:
    done = _run([sys.executable, "-m", "kb", "emulate"])
    assert done.returncode == 2 and "no command to run" in done.stderr


def test_install_puts_back_the_installed_torch_npu(
    fake_torch_npu: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(fake_torch_npu))
    monkeypatch.delitem(sys.modules, "torch_npu", raising=False)
    import torch_npu as installed

    try:
        with kb.emulate.install() as em:
            import torch_npu

            assert torch_npu is not installed and type(torch_npu).__module__ == "kb.emulate.module"
            assert hasattr(torch.ops.npu, "npu_rms_norm")
            assert torch.zeros(1, device="npu").device.type == "cpu"
            with kb.emulate.install():  # nested: still on after the inner one ends
                pass
            assert sys.modules["torch_npu"] is torch_npu
        assert sys.modules["torch_npu"] is installed and installed.MARK == "installed"
        assert not hasattr(torch, "npu") and not hasattr(torch.Tensor, "npu")
        assert not hasattr(torch.ops.npu, "npu_rms_norm") and em.calls == []
        with pytest.raises((RuntimeError, ImportError)):  # no NPU backend once it is off
            torch.zeros(1, device="npu")
    finally:
        sys.modules.pop("torch_npu", None)


def test_a_product_judges_calls_as_kb_check_does(monkeypatch: pytest.MonkeyPatch) -> None:
    x, g = torch.randn(2, 8, dtype=torch.bfloat16), torch.ones(8, dtype=torch.bfloat16)
    with kb.emulate.install(product="atlas-inference"):
        import torch_npu

        with pytest.raises(CallRejected, match=r"KB109 .*only float16 or float32"):
            torch_npu.npu_rms_norm(x, g)
        with pytest.raises(RuntimeError, match="already on for product 'atlas-inference'"):
            kb.emulate.install(product="atlas-a2")
    monkeypatch.setenv("KB_EMULATE_PRODUCT", "atlas-a2")
    with kb.emulate.install():
        import torch_npu

        assert torch_npu.npu_rms_norm(x, g)[0].dtype == torch.bfloat16
    with pytest.raises(ValueError, match="unknown product 'atlas-z9'"):
        kb.emulate.install(product="atlas-z9")


def test_the_fixture_runs_a_test_under_the_emulator(pytester: Any) -> None:
    pytester.makepyfile(
        test_port="""
        import pytest
        import torch

        @pytest.mark.npu_product("atlas-a2")
        def test_norm(npu_emulator):
            import torch_npu
            x = torch.randn(2, 8, dtype=torch.bfloat16).npu()
            torch_npu.npu_rms_norm(x, torch.ones(8, dtype=torch.bfloat16))
            assert npu_emulator.product == "atlas-a2" and npu_emulator.calls[-1].op == "npu_rms_norm"
    """
    )
    result = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize(
    "argv",
    [
        ["show", "npu_rms_norm"],
        ["search", "rms norm"],
        ["check", "examples/qwen3-moe-a2.yaml"],
        ["scan", "examples/emulate/qwen_port.py"],
    ],
)
def test_the_reading_verbs_never_import_torch(argv: list[str]) -> None:
    code = (
        "import sys\nfrom kb.cli import main\nrc = main(sys.argv[1:])\n"
        "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH')\n"
    )
    done = _run([sys.executable, "-c", code, *argv])
    assert done.stdout.strip().splitlines()[-1] == "NO-TORCH", (
        done.stdout[-500:] + done.stderr[-500:]
    )


def test_the_plugin_loads_without_torch() -> None:
    done = _run(
        [
            sys.executable,
            "-c",
            "import sys, kb.emulate.pytest_plugin, kb.emulate; "
            "kb.emulate.emulated_names(); print('torch' in sys.modules)",
        ]
    )
    assert done.stdout.strip() == "False", done.stderr

"""What an emulated call raises: plain exception classes, importable without torch."""

from __future__ import annotations

from typing import Any


class NotEmulated(NotImplementedError):
    """A torch_npu operator the emulator cannot run (no numpy reference): the message
    names it and its record's upstream page, so a port knows what it is missing."""

    def __init__(self, name: str, page: str | None = None) -> None:
        self.name = name
        self.page = page
        where = f"; its page: {page}" if page else ""
        super().__init__(
            f"kb.emulate cannot run torch_npu.{name}: it has no numpy reference "
            f"(kb.reference.available() lists the ones it has){where}"
        )


class BackwardNotEmulated(NotEmulated):
    """A gradient asked of an emulated operator: kb.emulate runs forward calls only."""

    def __init__(self, name: str) -> None:
        NotImplementedError.__init__(
            self,
            f"the backward of torch_npu.{name} is not emulated: "
            "kb.emulate runs forward (inference) calls; take gradients "
            "on the device",
        )
        self.name = name
        self.page = None


class CallRejected(RuntimeError):
    """A call the operator's record rejects, worded as ``kb check`` words it.

    ``findings`` are the errors (``{"code", "severity", "message"}``), ``op`` the
    operator and ``site`` the caller's ``file:line``; the device would refuse the call
    in its own parameter check (or compute garbage), so the emulator refuses it too.
    """

    def __init__(self, op: str, site: str, findings: list[dict[str, Any]]) -> None:
        self.op = op
        self.site = site
        self.findings = findings
        lines = [f"{f['code']} {f['message']}" for f in findings]
        super().__init__(f"torch_npu.{op} at {site}: " + "; ".join(lines))


class EmulatorWarning(UserWarning):
    """A warning of the record about a call (deprecated operator, a product the page
    does not document, a vendor-only value): the call still runs."""


class TorchMissing(ImportError):
    """kb.emulate runs on PyTorch, which the ``[emulate]`` extra installs."""

    def __init__(self) -> None:
        super().__init__(
            "kb.emulate needs PyTorch: pip install 'torch-npu-kb[emulate]' "
            "(torch==2.13.0, the CPU build)"
        )

"""Kernel facts: what the registration of the kernel an operator launches says.

A torch_npu operator runs an aclnn API (op-plugin's wrapper names it), and that API
launches a kernel registered in hicann/ops-transformer or ops-nn
(``op_host/*_def.cpp``): the SoCs it is compiled for and the dtype/format lists of its
inputs.  These are facts of code, not of documentation: a product a kernel is built for
but the page does not list is *kernel-only* support, which the checker reports as a
warning (a compiled kernel is not a documented API).  ``scripts/harvest_kernels.py``
writes these blocks; nobody types them.
"""

from __future__ import annotations

from pydantic import Field

from kb.catalog.models.base import Strict
from kb.vocab import Product

_REPO = r"^[A-Za-z0-9_.\-]+/[A-Za-z0-9_.\-]+$"
_COMMIT = r"^[0-9a-f]{7,40}$"
_LINES = r"^\d+(?:-\d+)?$"
_GE_NAME = r"^[A-Z0-9_]+$"


class KernelTensor(Strict):
    """One input of the kernel: the dtypes and formats its lists name (first-seen order;
    the lists at the cited lines pair them up by position)."""

    name: str = Field(min_length=1)
    dtypes: list[str] = Field(default_factory=list, description="GE names, ge::DT_ dropped")
    formats: list[str] = Field(default_factory=list, description="GE names, ge::FORMAT_ dropped")


class KernelConfig(Strict):
    """The input lists that hold on some SoCs (a per-SoC config object, or the class's own)."""

    socs: list[str] = Field(min_length=1)
    inputs: list[KernelTensor] = Field(default_factory=list)


class WrapperLink(Strict):
    """Where op-plugin's wrapper of the operator calls the aclnn API."""

    repo: str = Field(pattern=_REPO)
    commit: str = Field(pattern=_COMMIT)
    path: str = Field(min_length=1)
    lines: str = Field(pattern=_LINES)
    gated: bool = Field(
        default=False,
        description="the wrapper branches on GetSocVersion(): it decides per product what "
        "runs, so the kernel's SoC list does not say where the operator runs",
    )
    refuses: list[str] = Field(
        default_factory=list,
        description="c10_npu::SocVersion names the wrapper refuses with a TORCH_CHECK",
    )
    refused_products: list[Product] = Field(
        default_factory=list, description="the products those SoC versions are"
    )


class Kernel(Strict):
    """One kernel registration the operator's wrapper reaches."""

    op_type: str = Field(min_length=1, description="the OP_ADD name")
    aclnn: str = Field(pattern=r"^aclnn\w+$", description="the API the wrapper calls")
    repo: str = Field(pattern=_REPO)
    commit: str = Field(pattern=_COMMIT)
    path: str = Field(min_length=1)
    lines: str = Field(pattern=_LINES)
    socs: list[str] = Field(min_length=1, description="AddConfig SoC names, as written")
    products: list[Product] = Field(
        default_factory=list, description="the SoCs that are products of kb/vocab"
    )
    inputs: list[KernelConfig] = Field(default_factory=list)
    wrapper: WrapperLink
    conditional: bool = Field(
        default=False,
        description="the registration has preprocessor conditionals: its SoC list depends "
        "on the build, so it does not count as support",
    )
    unreadable: list[str] = Field(
        default_factory=list, description="registration statements the harvester could not read"
    )

"""Turn kernel registrations into the ``kernels`` blocks of operator records.

For each record: op-plugin's wrapper → the aclnn APIs it calls → the operator directory
of each (ops-transformer or ops-nn) → the ``OpDef`` classes registered there.  A record
gets kernel blocks only when every aclnn API its wrapper calls resolves to exactly one
directory with a registration; anything less is reported and left out (a partial set
would make the SoC intersection mean something it does not).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.upstream.kernel_links import Link, WrapperIndex, aclnn_directories, operator_directory
from tools.upstream.kernels import KernelDef, parse_def


@dataclass
class KernelRepo:
    """A checkout of ops-transformer or ops-nn at a known commit."""

    name: str  # owner/name
    commit: str
    root: Path
    aclnn: dict[str, dict[str, str]] = field(default_factory=dict)
    defs: dict[str, list[KernelDef]] = field(default_factory=dict)  # op directory → classes

    def load(self) -> None:
        self.aclnn = aclnn_directories(self.root)
        for path in sorted(self.root.rglob("op_host/*_def.cpp")):
            rel = path.relative_to(self.root)
            if "tests" in rel.parts:
                continue
            opdir = "/".join(rel.parts[: rel.parts.index("op_host")])
            text = path.read_text(encoding="utf-8", errors="replace")
            self.defs.setdefault(opdir, []).extend(parse_def(text, rel.as_posix()))

    def kernel_count(self) -> int:
        return sum(len(v) for v in self.defs.values())


@dataclass
class Outcome:
    """What the harvest found for one record."""

    kernels: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _inputs(kd: KernelDef) -> list[dict[str, Any]]:
    """Input lists grouped by the SoCs they hold on (distinct values, first-seen order)."""
    groups: list[tuple[list[str], list[dict[str, Any]]]] = []
    for soc in kd.socs:
        tensors = kd.tensors_for(soc)
        if tensors is None:
            continue
        inputs = []
        for t in tensors:
            if t.io != "input":
                continue
            entry: dict[str, Any] = {"name": t.name}
            if t.dtypes:
                entry["dtypes"] = list(dict.fromkeys(t.dtypes))
            if t.formats:
                entry["formats"] = list(dict.fromkeys(t.formats))
            inputs.append(entry)
        for socs, have in groups:
            if have == inputs:
                socs.append(soc)
                break
        else:
            groups.append(([soc], inputs))
    return [{"socs": socs, "inputs": inputs} for socs, inputs in groups if inputs]


def kernel_block(
    kd: KernelDef,
    repo: KernelRepo,
    link: Link,
    plugin: tuple[str, str],
    soc_products: dict[str, str],
) -> dict[str, Any]:
    """One ``kernels`` entry (a dict the ``Kernel`` model validates)."""
    products = list(dict.fromkeys(soc_products[s] for s in kd.socs if s in soc_products))
    block: dict[str, Any] = {
        "op_type": kd.op_type,
        "aclnn": link.aclnn,
        "repo": repo.name,
        "commit": repo.commit,
        "path": kd.path,
        "lines": kd.lines,
        "socs": list(kd.socs),
        "products": products,
    }
    inputs = _inputs(kd)
    if inputs:
        block["inputs"] = inputs
    wrapper: dict[str, Any] = {
        "repo": plugin[0],
        "commit": plugin[1],
        "path": link.path,
        "lines": link.lines,
    }
    # A refused runtime SoC (c10_npu::SocVersion::Ascend950) names a product when its
    # lower-case spelling is a registration SoC name; any other refusal is not read, and
    # the wrapper then counts as choosing per product.
    known = [soc_products[s.lower()] for s in link.refuses if s.lower() in soc_products]
    if link.gated or len(known) < len(link.refuses):
        wrapper["gated"] = True
    if link.refuses:
        wrapper["refuses"] = list(link.refuses)
        wrapper["refused_products"] = list(dict.fromkeys(known))
    block["wrapper"] = wrapper
    if kd.conditional:
        block["conditional"] = True
    if kd.unreadable:
        block["unreadable"] = list(kd.unreadable)
    return block


def harvest_record(
    api: str,
    wrappers: WrapperIndex,
    repos: list[KernelRepo],
    plugin: tuple[str, str],
    soc_products: dict[str, str],
) -> Outcome:
    """The kernel blocks of one operator (or why there are none)."""
    out = Outcome()
    links = wrappers.links(api)
    if not links:
        out.problems.append("no op-plugin wrapper calling an aclnn API")
        return out
    for link in links:
        found = [
            (repo, operator_directory(repo.aclnn[link.aclnn]))
            for repo in repos
            if link.aclnn in repo.aclnn
        ]
        if not found:
            out.problems.append(f"{link.aclnn}: not in the kernel repositories read")
            continue
        if len(found) > 1 or found[0][1] is None:
            out.problems.append(f"{link.aclnn}: in several operator directories")
            continue
        repo, opdir = found[0]
        defs = [kd for kd in repo.defs.get(opdir or "", []) if kd.socs]
        if not defs:
            out.problems.append(f"{link.aclnn}: {repo.name} {opdir} has no registration with SoCs")
            continue
        for kd in defs:
            out.kernels.append(kernel_block(kd, repo, link, plugin, soc_products))
    if out.problems:
        out.kernels = []
    return out

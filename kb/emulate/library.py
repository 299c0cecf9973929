"""``torch.ops.npu`` (and ``torch.ops.atb``) built from the records' schema strings.

Every operator record with a schema is defined in a ``torch.library`` fragment, so
``torch.ops.npu.<op>``, its ``.default`` and its other overloads (``.out``) exist with
upstream's exact argument names, defaults and alias annotations.  Emulated operators
get a kernel that hands the dispatcher's arguments to the runtime; the others get one
that raises :class:`NotEmulated`, so a port learns which call it lacks, not that the
namespace is empty.  A schema torch cannot parse is left out of ``torch.ops`` (the
``torch_npu.<op>`` binding still runs it) and listed in :attr:`Registry.unparsed`.
"""

from __future__ import annotations

from typing import Any

import torch

from kb.catalog.signature import Schema, SchemaError, parse_schema
from kb.emulate.names import emulated
from kb.emulate.trace import call_site

Record = dict[str, Any]
ATB_PREFIX = "torch.ops.atb."


def schemas_of(rec: Record) -> list[Schema]:
    """The record's signature and its overloads, parsed; unreadable ones left out."""
    out = []
    for text in [rec.get("signature"), *(o["schema"] for o in rec.get("overloads") or [])]:
        if not text:
            continue
        try:
            out.append(parse_schema(text))
        except SchemaError:
            continue
    return out


def runs_as_record(rec: Record, schema: Schema) -> bool:
    """Whether an overload binds onto the record's parameters: each argument is one of
    them with the same type, an output it writes (``.out``), or a ``workspace``."""
    if not schema.overload:
        return True
    params = {p["name"]: str(p["type"]).replace(" ", "") for p in rec.get("parameters") or []}
    for a in schema.args:
        if a.name in params:
            if params[a.name] != a.type:
                return False
        elif not (a.mutated or a.name == "workspace"):
            return False
    return True


class Kernel:
    """The implementation of one overload under ``torch.ops``: dispatcher arguments in,
    the runtime's result out."""

    def __init__(self, rec: Record, schema: Schema) -> None:
        self.rec = rec
        self.schema = schema
        self.positional = [a.name for a in schema.args if not a.keyword_only]

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        from kb.emulate.state import active

        given = dict(zip(self.positional, args, strict=False))
        given.update(kwargs)
        return active().run(self.rec, self.schema, given, call_site())


class Missing:
    """The kernel of an operator (or overload) the emulator does not run."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        from kb.emulate.state import active

        raise active().not_emulated(self.name)


class Registry:
    """The ``torch.library`` fragments of one emulation (destroyed on uninstall)."""

    def __init__(self) -> None:
        self.libraries: dict[str, Any] = {}
        self.unparsed: dict[str, str] = {}
        self.defined: set[str] = set()

    def _library(self, namespace: str) -> Any:
        if namespace not in self.libraries:
            self.libraries[namespace] = torch.library.Library(namespace, "FRAGMENT")
        return self.libraries[namespace]

    def register(self, rec: Record) -> None:
        """Define ``rec``'s schemas under npu (and atb when it is an ATB operator)."""
        namespaces = ["npu"] + (
            ["atb"] if any(c.startswith(ATB_PREFIX) for c in rec["calls"]) else []
        )
        runs = emulated(rec["name"])
        for schema in schemas_of(rec):
            kernel: Any = (
                Kernel(rec, schema)
                if runs and runs_as_record(rec, schema)
                else Missing(f"{rec['name']}.{schema.overload}" if schema.overload else rec["name"])
            )
            for ns in namespaces:
                lib = self._library(ns)
                try:
                    lib.define(schema.text)
                    lib.impl(schema.full_name, kernel, "CompositeExplicitAutograd")
                except RuntimeError as exc:  # torch's parser or an existing definition
                    self.unparsed[f"{ns}::{schema.full_name}"] = str(exc).splitlines()[0]
                    continue
                self.defined.add(f"{ns}::{schema.full_name}")

    def destroy(self) -> None:
        for lib in self.libraries.values():
            lib._destroy()
        self.libraries.clear()
        self.defined.clear()

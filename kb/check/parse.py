"""Reading a candidate list: text → positioned YAML → checked structure.

Structure problems (does not parse, wrong type, unknown or missing field, a value
outside a controlled vocabulary) become findings here, each at the key or value it is
about.  Whatever is wrong is left out of the parsed :class:`~kb.lint.model.Document`,
so the rules that run afterwards never see a value of the wrong type.  Getting the text
(files, standard input, byte-order marks) is :mod:`kb.check.source`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kb.check.rules.file import MISSING_FIELD, SYNTAX, UNKNOWN_FIELD, UNKNOWN_VALUE, WRONG_TYPE
from kb.check.values import SizeError, parse_size, parse_version
from kb.core import yamlpos
from kb.lint.findings import Finding
from kb.lint.model import Candidate, Dependency, Document, Path, Target, TensorSpec, Weight
from kb.lint.unit import RuleUnit
from kb.vocab import (
    CANDIDATE_PHASES,
    CANONICAL,
    GRAPH_MODES,
    PHASES,
    ambiguous_scheme_message,
    normalize,
    normalize_scheme,
    scheme_family,
)

SUPPORTED_VERSIONS = (1,)
STATUSES = ("candidate", "needs-prerequisite", "not-applicable", "replaced")
KINDS = ("fusion", "prefetch")
_KIND_ALIASES = {
    "fusion": "fusion",
    "operator": "fusion",
    "fused": "fusion",
    "prefetch": "prefetch",
}

TOP_FIELDS = ("version", "model", "target", "candidates", "notes")
TARGET_FIELDS = ("product", "torch_npu", "quantization", "parallel", "graph_mode")
COMMON_FIELDS = ("kind", "module", "phase", "operator", "evidence", "notes")
FUSION_FIELDS = COMMON_FIELDS + (
    "status",
    "replaces",
    "chain",
    "prerequisites",
    "args",
    "tensors",
    "passed",
    "quantization",
    "graph_mode",
)
PREFETCH_FIELDS = COMMON_FIELDS + (
    "target",
    "target_op",
    "weight",
    "dependency",
    "max_size",
    "switch",
    "switch_default",
    "validated",
    "graph_mode",
)
TENSOR_FIELDS = ("dtype", "format", "shape")
WEIGHT_FIELDS = ("shape", "dtype")
DEPENDENCY_FIELDS = ("name", "op", "output")


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"


def _is_scalar(value: object) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


class _Parser:
    """Walks one loaded document, collecting structure findings as it goes."""

    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self.findings: list[Finding] = []

    # -- reporting -------------------------------------------------------------------
    def add(
        self,
        unit: RuleUnit,
        path: Path,
        message: str,
        *,
        key: bool = False,
        candidate: int | None = None,
    ) -> None:
        self.findings.append(unit.at(self.doc, path, message, candidate=candidate, key=key))

    def wrong_type(self, path: Path, value: object, expected: str, cand: int | None) -> None:
        self.add(
            WRONG_TYPE,
            path,
            f"{_field(path)} must be {expected}, not {_type_name(value)}",
            candidate=cand,
        )

    def fields(
        self,
        mapping: dict[Any, Any],
        path: Path,
        allowed: Iterable[str],
        cand: int | None,
        what: str,
        other: Iterable[str] = (),
    ) -> None:
        allowed = tuple(allowed)
        for key in mapping:
            if key in allowed:
                continue
            hint = ""
            if isinstance(key, str) and key in other:
                hint = f" ({key} belongs to the other kind of candidate; check 'kind')"
            elif isinstance(key, str):
                hint = _did_you_mean(key, allowed)
            self.add(
                UNKNOWN_FIELD,
                path + (key,),
                f"unknown field {_shown(key)} in {what}{hint}; allowed: {', '.join(allowed)}",
                key=True,
                candidate=cand,
            )

    def text(
        self,
        mapping: dict[Any, Any],
        path: Path,
        name: str,
        cand: int | None,
        *,
        required: bool = False,
        what: str = "",
        hint: str = "",
    ) -> str | None:
        if name not in mapping:
            if required:
                self.add(
                    MISSING_FIELD, path, f"{what} needs '{name}'{hint}", key=True, candidate=cand
                )
            return None
        value = mapping[name]
        if isinstance(value, str) and value.strip():
            return value.strip()
        if isinstance(value, str) or value is None:
            if required:
                self.add(
                    MISSING_FIELD,
                    path + (name,),
                    f"'{name}' is empty; {what} needs it",
                    candidate=cand,
                )
            return None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not required:
            return str(value)
        self.wrong_type(path + (name,), value, "text", cand)
        return None

    def boolean(self, mapping: dict[Any, Any], path: Path, name: str, cand: int) -> bool | None:
        value = mapping.get(name)
        if value is None or isinstance(value, bool):
            return value
        self.wrong_type(path + (name,), value, "true or false", cand)
        return None

    def vocab(
        self,
        vocab: str,
        value: object,
        path: Path,
        cand: int | None,
        choices: tuple[str, ...] | None = None,
    ) -> str | None:
        """Canonical id of ``value`` in ``vocab`` (or in ``choices``), else a finding."""
        if value is None:
            return None
        if not isinstance(value, (str, int)) or isinstance(value, bool):
            self.wrong_type(path, value, f"a {vocab} name", cand)
            return None
        if choices is not None:
            folded = str(value).strip().lower().replace("_", "-").replace(" ", "-")
            for c in choices:
                if c.lower() == folded:
                    return c
            canon = normalize(vocab, value) if vocab in CANONICAL else None
            if canon in choices:
                return canon
            options = choices
        else:
            canon = normalize(vocab, value)
            if canon is not None:
                return canon
            options = CANONICAL[vocab]
        hint = _did_you_mean(str(value), options)
        listed = ", ".join(options)
        self.add(
            UNKNOWN_VALUE,
            path,
            f"{_shown(value)} is not a known {vocab}{hint}; use one of: {listed}",
            candidate=cand,
        )
        return None

    def scheme(self, value: object, path: Path, cand: int | None) -> str | None:
        """A quantization scheme expression (``w8a8-dynamic``, ``mxfp8+kv-fp8``), else a finding."""
        if value is None:
            return None
        canon = normalize_scheme(value)
        if canon is not None:
            return canon
        family = scheme_family(value)
        if family is not None:  # ``w8a8``: the rules judge every member (static, dynamic)
            return family[0]
        shared = ambiguous_scheme_message(value)
        if shared:  # ``int8``: schemes that quantize different things - ask, never pick one
            self.add(UNKNOWN_VALUE, path, shared, candidate=cand)
            return None
        if isinstance(value, str) and "+" in value:
            self.add(
                UNKNOWN_VALUE,
                path,
                f"{value!r} is not a quantization scheme expression: "
                "one scheme, then optional KV-cache modifiers (kv-int8, kv-fp8, kv-hif8) "
                "joined with '+', e.g. mxfp8+kv-fp8",
                candidate=cand,
            )
            return None
        return self.vocab("quantization", value, path, cand)

    # -- sections --------------------------------------------------------------------
    def document(self, data: Any) -> None:
        if data is None:
            self.add(
                MISSING_FIELD,
                (),
                "the file is empty; a candidate list needs 'target' and 'candidates'",
            )
            return
        if not isinstance(data, dict):
            self.add(
                WRONG_TYPE,
                (),
                f"a candidate list is a mapping with version, target and "
                f"candidates, not {_type_name(data)}",
            )
            return
        self.fields(data, (), TOP_FIELDS, None, "the candidate list")
        if "version" in data:
            version = data["version"]
            if isinstance(version, str) and version.strip().isdigit() and len(version.strip()) < 10:
                version = int(version)
            if isinstance(version, bool) or not isinstance(version, int):
                self.wrong_type(("version",), data["version"], "an integer (1)", None)
            elif version not in SUPPORTED_VERSIONS:
                self.add(
                    UNKNOWN_VALUE,
                    ("version",),
                    f"version {version} is not supported; this "
                    "kb reads version 1 — write version: 1",
                )
        if "model" in data and not _is_scalar(data["model"]):
            self.wrong_type(("model",), data["model"], "text", None)
        if "notes" in data and not _is_scalar(data["notes"]):
            self.wrong_type(("notes",), data["notes"], "text", None)
        if "target" not in data:
            self.add(
                MISSING_FIELD,
                (),
                "the candidate list needs 'target' (at least target.product)",
                key=True,
            )
        elif not isinstance(data["target"], dict):
            self.wrong_type(("target",), data["target"], "a mapping (product, torch_npu, …)", None)
        else:
            self.doc.target_stated = True
            self.target(data["target"])
        if "candidates" not in data:
            self.add(MISSING_FIELD, (), "the candidate list needs 'candidates' (a list)", key=True)
        elif not isinstance(data["candidates"], list):
            self.wrong_type(("candidates",), data["candidates"], "a list of candidates", None)
        else:
            for i, item in enumerate(data["candidates"]):
                self.doc.candidates.append(self.candidate(i, item))

    def target(self, t: dict[Any, Any]) -> None:
        path: Path = ("target",)
        self.fields(t, path, TARGET_FIELDS, None, "target")
        out: Target = self.doc.target
        if "product" not in t:
            self.add(MISSING_FIELD, path, "target needs 'product' (e.g. atlas-a3)", key=True)
        else:
            out.product = self.vocab("product", t["product"], path + ("product",), None)
        if t.get("torch_npu") is not None:
            raw = t["torch_npu"]
            if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
                self.wrong_type(path + ("torch_npu",), raw, 'a release such as "2.7.1"', None)
            elif parse_version(str(raw)) is None:
                self.add(
                    UNKNOWN_VALUE,
                    path + ("torch_npu",),
                    f"{_shown(raw)} is not a torch_npu "
                    'release; write it quoted, like "2.7.1" or "2.1.0.post8"',
                )
            else:
                out.torch_npu = str(raw)
        out.quantization = self.scheme(t.get("quantization"), path + ("quantization",), None)
        mode = t.get("graph_mode")
        if isinstance(mode, dict):
            for phase, value in mode.items():
                where = path + ("graph_mode", phase)
                canon = self.vocab("phase", phase, where, None, PHASES)
                chosen = self.vocab("graph mode", value, where, None, GRAPH_MODES)
                if canon and chosen:
                    out.graph_modes[canon] = chosen
        else:
            out.graph_mode = self.vocab(
                "graph mode", mode, path + ("graph_mode",), None, GRAPH_MODES
            )
        if "parallel" in t and t["parallel"] is not None:
            par = t["parallel"]
            if not isinstance(par, dict):
                self.wrong_type(
                    path + ("parallel",), par, "a mapping such as {tp: 1, ep: 16}", None
                )
            else:
                for k, v in par.items():
                    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                        self.wrong_type(path + ("parallel", k), v, "a positive integer", None)
                    else:
                        out.parallel[str(k)] = v

    def candidate(self, i: int, item: Any) -> Candidate:
        path: Path = ("candidates", i)
        cand = Candidate(index=i)
        if not isinstance(item, dict):
            self.wrong_type(path, item, "a mapping (module, operator, …)", i)
            return cand
        cand.stated = {k for k in item if isinstance(k, str)}
        raw_kind = item.get("kind", "fusion")
        if isinstance(raw_kind, str) and raw_kind.strip().lower() in _KIND_ALIASES:
            cand.kind = _KIND_ALIASES[raw_kind.strip().lower()]
        else:
            self.vocab("candidate kind", raw_kind, path + ("kind",), i, KINDS)
            return cand
        if cand.kind == "prefetch":
            self.fields(item, path, PREFETCH_FIELDS, i, "a prefetch candidate", FUSION_FIELDS)
        else:
            self.fields(item, path, FUSION_FIELDS, i, "a fusion candidate", PREFETCH_FIELDS)
        what = "a prefetch candidate" if cand.kind == "prefetch" else "a candidate"
        cand.module = self.text(item, path, "module", i, required=True, what=what)
        cand.phase = self.vocab("phase", item.get("phase"), path + ("phase",), i, CANDIDATE_PHASES)
        cand.evidence = self.text(item, path, "evidence", i)
        self.text(item, path, "notes", i)
        if cand.kind == "prefetch":
            cand.operator = self.text(item, path, "operator", i)
            self.prefetch(item, path, cand)
        else:
            hint = ""
            if "operator" not in item and {"target", "max_size"} & cand.stated:
                hint = "; for a prefetch point write kind: prefetch"
            cand.operator = self.text(
                item, path, "operator", i, required=True, what="a fusion candidate", hint=hint
            )
            self.fusion(item, path, cand)
        return cand

    def fusion(self, item: dict[Any, Any], path: Path, cand: Candidate) -> None:
        i = cand.index
        cand.status = self.vocab("status", item.get("status"), path + ("status",), i, STATUSES)
        cand.replaces = self.text(item, path, "replaces", i)
        cand.chain = self.text(item, path, "chain", i)
        cand.quantization = self.scheme(item.get("quantization"), path + ("quantization",), i)
        cand.graph_mode = self.vocab(
            "graph mode", item.get("graph_mode"), path + ("graph_mode",), i, GRAPH_MODES
        )
        if item.get("passed") is not None:
            passed = item["passed"]
            if not isinstance(passed, list):
                self.wrong_type(path + ("passed",), passed, "a list of argument names", i)
            else:
                for j, name in enumerate(passed):
                    if isinstance(name, str) and name.strip():
                        cand.passed.add(name.strip())
                        self.doc.aliases[path + ("passed", name.strip())] = path + ("passed", j)
                    else:
                        self.wrong_type(path + ("passed", j), name, "an argument name", i)
        if item.get("prerequisites") is not None:
            prereq = item["prerequisites"]
            if not isinstance(prereq, list):
                self.wrong_type(
                    path + ("prerequisites",), prereq, "a list, e.g. [rope-precompute]", i
                )
            else:
                cand.prerequisites = []
                for j, p in enumerate(prereq):
                    if isinstance(p, str) and p.strip():
                        cand.prerequisites.append(p.strip())
                    else:
                        self.wrong_type(path + ("prerequisites", j), p, "text", i)
        if item.get("args") is not None:
            args = item["args"]
            if not isinstance(args, dict):
                self.wrong_type(path + ("args",), args, "a mapping of argument: value", i)
            else:
                for name, value in args.items():
                    if not isinstance(name, str):
                        self.wrong_type(path + ("args", name), name, "an argument name", i)
                    elif _is_scalar(value) or (
                        isinstance(value, list) and all(_is_scalar(v) for v in value)
                    ):
                        cand.args[name] = value
                    else:
                        self.wrong_type(
                            path + ("args", name), value, "a scalar or a list of scalars", i
                        )
        if item.get("tensors") is not None:
            tensors = item["tensors"]
            if not isinstance(tensors, dict):
                self.wrong_type(
                    path + ("tensors",), tensors, "a mapping of tensor: {dtype, format, shape}", i
                )
            else:
                for name, spec in tensors.items():
                    if not isinstance(name, str):
                        self.wrong_type(path + ("tensors", name), name, "a tensor name", i)
                    elif spec is None:
                        cand.tensors[name] = None
                    elif not isinstance(spec, dict):
                        self.wrong_type(
                            path + ("tensors", name),
                            spec,
                            "a mapping such as {dtype: bfloat16, format: ND}",
                            i,
                        )
                    else:
                        cand.tensors[name] = self.tensor(spec, path + ("tensors", name), i)

    def tensor(self, spec: dict[Any, Any], path: Path, i: int) -> TensorSpec:
        self.fields(spec, path, TENSOR_FIELDS, i, "a tensor description")
        return TensorSpec(
            dtype=self.vocab("dtype", spec.get("dtype"), path + ("dtype",), i),
            format=self.vocab("format", spec.get("format"), path + ("format",), i),
            shape=self.shape(spec, path, i),
        )

    def shape(self, spec: dict[Any, Any], path: Path, i: int) -> list[Any] | None:
        shape = spec.get("shape")
        if shape is None:
            return None
        if not isinstance(shape, list) or not all(
            (isinstance(d, int) and not isinstance(d, bool)) or isinstance(d, str) for d in shape
        ):
            self.wrong_type(path + ("shape",), shape, "a list of sizes such as [T, 7168]", i)
            return None
        for j, d in enumerate(shape):
            if isinstance(d, int) and d <= 0:
                self.add(
                    WRONG_TYPE,
                    path + ("shape", j),
                    f"{_field(path + ('shape', j))} is {d}; "
                    "a dimension is a positive integer (or a name such as T)",
                    candidate=i,
                )
                return None
        return shape

    def prefetch(self, item: dict[Any, Any], path: Path, cand: Candidate) -> None:
        i = cand.index
        cand.target = self.text(item, path, "target", i, required=True, what="a prefetch candidate")
        cand.target_op = self.text(item, path, "target_op", i)
        if item.get("weight") is not None:
            w = item["weight"]
            if not isinstance(w, dict):
                self.wrong_type(path + ("weight",), w, "a mapping {shape, dtype}", i)
            else:
                wpath = path + ("weight",)
                self.fields(w, wpath, WEIGHT_FIELDS, i, "weight")
                cand.weight = Weight(
                    shape=self.shape(w, wpath, i),
                    dtype=self.vocab("dtype", w.get("dtype"), wpath + ("dtype",), i),
                )
        if "dependency" in item:
            d = item["dependency"]
            if isinstance(d, dict):
                dpath = path + ("dependency",)
                self.fields(d, dpath, DEPENDENCY_FIELDS, i, "dependency")
                cand.dependency = Dependency(
                    name=self.text(d, dpath, "name", i),
                    op=self.text(d, dpath, "op", i),
                    output=self.boolean(d, dpath, "output", i),
                )
            elif d is not None:
                self.wrong_type(path + ("dependency",), d, "a mapping {name, op}", i)
        if item.get("max_size") is not None:
            try:
                cand.max_size = parse_size(item["max_size"])
                cand.max_size_unknown = cand.max_size is None
            except SizeError as exc:
                self.add(WRONG_TYPE, path + ("max_size",), f"max_size: {exc}", candidate=i)
        if "switch" in item:
            s = item["switch"]
            if isinstance(s, str):
                cand.switch = s.strip() or None
            elif s is not None:
                self.wrong_type(path + ("switch",), s, "the name of a config flag", i)
        cand.switch_default = self.boolean(item, path, "switch_default", i)
        cand.graph_mode = self.vocab(
            "graph mode", item.get("graph_mode"), path + ("graph_mode",), i, GRAPH_MODES
        )
        cand.validated = self.boolean(item, path, "validated", i)


def _shown(value: object, width: int = 60) -> str:
    """``repr`` of a value from the input, cut short: messages must stay one readable line."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 4] + "…" + text[-3:]


def _field(path: Path) -> str:
    return yamlpos.dotted(path) or "the document"


def _did_you_mean(value: str, options: Iterable[str]) -> str:
    from kb.core.fuzzy import suggest

    if len(value) > 200:  # no name is that long; fuzzy matching it only costs time
        return ""
    hits = suggest(value, list(options), limit=2, cutoff=60.0)
    return f" (did you mean {' or '.join(repr(h) for h in hits)}?)" if hits else ""


def parse(file: str, text: str) -> tuple[Document, list[Finding]]:
    """The document of one input plus its structure findings (never raises)."""
    doc = Document(file=file, text=text)
    parser = _Parser(doc)
    try:
        doc.located = yamlpos.load(text)
    except yamlpos.YamlError as exc:
        parser.findings.append(SYNTAX.finding(file, exc.line, exc.column, exc.message))
        return doc, parser.findings
    except RecursionError:
        parser.findings.append(SYNTAX.finding(file, 1, 1, "document nests too deeply"))
        return doc, parser.findings
    parser.document(doc.located.data)
    return doc, parser.findings

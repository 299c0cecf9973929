"""Rewrite one file's planned spans into ``_kb_stage(stage, fused, unfused)`` calls.

The transformer walks the file once.  Inside a planned class (and in the file's
functions, which planned classes call), a span that computes one of the class's stages
becomes a stage call; a norm class's ``forward`` becomes the fused call with the
original ``forward`` kept as ``_kb_unfused_forward``.  Comments above a class say what
was not rewritten and why; nothing else in the file changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from kb.port import (
    attention,
    cachewrite,
    expertmods,
    experts,
    hooks,
    norms,
    residual,
    rope_halves,
)
from kb.port.modules import ModuleSpans
from kb.port.spans import (
    Stage,
    _assigns,
    _init_facts,
    _passing,
    code,
    dotted,
    glu_parts,
    keyword,
    lam,
    one_arg,
    projection,
    rope_parts,
)

#: mappings rewritten as a norm class's whole forward
NORM_ROWS = {"rms_norm", "rms_norm_one_plus_w"}
GLU_ROWS = {"swiglu", "geglu"}
GELU_ROWS = {"gelu_tanh", "gelu"}
ROPE_ROWS = {"rope_half", "rope_interleave", "rope_deinterleave"}
ROUTER_ROWS = {"router_softmax_topk"}
RESIDUAL_ROWS = {"add_rms_norm"}
#: mappings rewritten as an expert loop's whole forward (:mod:`kb.port.experts`)
EXPERT_ROWS = {"moe_experts_loop"}


@dataclass
class Result:
    """What the rewrite did: stage id -> its plan entry, derived weights, helpers used."""

    stages: dict[str, dict[str, Any]] = field(default_factory=dict)
    weights: dict[str, Any] = field(default_factory=dict)
    helpers: list[str] = field(default_factory=list)
    done: set[tuple[str, str]] = field(default_factory=set)  # (module, mapping) rewritten


class Porter(ModuleSpans, cst.CSTTransformer):
    """The one pass over a file (see the module doc)."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, stages: list[Stage], notes: dict[str, list[str]]) -> None:
        super().__init__()
        self.by_module: dict[str, list[Stage]] = {}
        for s in stages:
            self.by_module.setdefault(s.module, []).append(s)
        self.notes = notes
        self.result = Result()
        self.cls: list[str] = []
        self.linears: list[set[str]] = []
        self.softmax_of: list[dict[str, str]] = [{}]
        self.fn: list[str] = []
        self.params: list[set[str]] = []  #: per function: its parameters' names
        #: per function: name -> [(position, value or None for an unpacked target)]
        self.history: list[dict[str, list[tuple[int, cst.BaseExpression | None]]]] = [{}]
        self.counter = 0

    # -- scopes ---------------------------------------------------------------------------
    def visit_Module(self, node: cst.Module) -> None:
        """The file's classes, for what a layer's norm attribute is."""
        self.classes = {st.name.value: st for st in node.body if isinstance(st, cst.ClassDef)}
        self.module_node = node
        self.fns = norms.one_return_functions(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.cls.append(node.name.value)
        self.linears.append(_init_facts(node)[0])

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        name = self.cls.pop()
        self.linears.pop()
        updated = self._gelu_class(updated)
        for s in self.by_module.get(name, []):
            if s.mapping in NORM_ROWS:
                updated = self._norm(updated, s)
            elif s.mapping in EXPERT_ROWS:
                updated = self._experts(updated, s)
        for hook in hooks.CLASSES:
            updated = hook(self, name, updated)
        missed = [
            f"stage {s.mapping} ({s.operator}) not rewritten: {_missing(s)}"
            for s in self.by_module.get(name, [])
            if (s.module, s.mapping) not in self.result.done
            and not any(
                n.startswith(f"stage {s.mapping} not rewritten: ") for n in self.notes.get(name, [])
            )
        ]
        if missed:
            self.notes.setdefault(name, []).extend(missed)
        lines = [f"# kb port: {n}" for n in self.notes.get(name, [])]
        if not lines:
            return updated
        comments = [cst.EmptyLine(comment=cst.Comment(t)) for t in lines]
        return updated.with_changes(leading_lines=[*updated.leading_lines, *comments])

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.fn.append(node.name.value)
        self.params.append(
            {p.name.value for p in (*node.params.posonly_params, *node.params.params)}
        )
        self.softmax_of.append({})
        self.history.append({})

    def leave_FunctionDef(
        self, original: cst.FunctionDef, updated: cst.FunctionDef
    ) -> cst.FunctionDef:
        self.fn.pop()
        self.params.pop()
        self.softmax_of.pop()
        self.history.pop()
        return updated

    def _resolve(self, name: str, before: int) -> tuple[cst.BaseExpression, int] | None:
        found = [(i, v) for i, v in self.history[-1].get(name, []) if i < before]
        if not found or found[-1][1] is None:
            return None
        i, v = found[-1]
        assert v is not None
        return v, i

    def _stale(self, text: str, since: int) -> bool:
        """A plain name reassigned after ``since``: its value now is not the one read then."""
        return text.isidentifier() and any(i > since for i, _ in self.history[-1].get(text, []))

    def visit_Assign(self, node: cst.Assign) -> None:
        self.counter += 1
        for t in node.targets:
            if isinstance(t.target, cst.Name):
                self.history[-1].setdefault(t.target.value, []).append((self.counter, node.value))
            elif isinstance(t.target, (cst.Tuple, cst.List)):
                for el in t.target.elements:
                    if isinstance(el.value, cst.Name):
                        self.history[-1].setdefault(el.value.value, []).append((self.counter, None))
        if len(node.targets) == 1 and isinstance(node.value, cst.Call):
            callee = dotted(node.value.func)
            target = dotted(node.targets[0].target)
            if target and callee.endswith("softmax") and node.value.args:
                self.softmax_of[-1][target] = code(node.value.args[0].value)

    # -- which stages apply here ----------------------------------------------------------
    def _candidates(self, rows: set[str]) -> list[Stage]:
        """Stages of the enclosing planned class, else (in a function outside classes, or
        a class without a plan) of every planned class."""
        if self.cls and self.cls[-1] in self.by_module:
            return [s for s in self.by_module[self.cls[-1]] if s.mapping in rows]
        return [s for ss in self.by_module.values() for s in ss if s.mapping in rows]

    def _adaln(self, s: Stage, node: cst.CSTNode, parts: tuple[str, ...], unfused: str) -> str:
        self.result.helpers.append("_kb_adaln")
        fused = "_kb_adaln({}, {}, {}, {})".format(*parts)
        return code(self._emit(s, node, fused, unfused, operator="npu_layer_norm_eval"))

    def _inside(self, rows: set[str]) -> list[Stage]:
        """Stages of ``rows`` planned for the enclosing class (none outside a class)."""
        inside = self.cls and self.cls[-1] in self.by_module
        return [s for s in self.by_module[self.cls[-1]] if s.mapping in rows] if inside else []

    def _layer_norms(self) -> set[str]:
        cls = self.classes.get(self.cls[-1]) if self.cls else None
        return norms.layer_norm_attrs(cls) if cls is not None else set()

    def _line(self, node: cst.CSTNode) -> int:
        try:
            return int(self.get_metadata(PositionProvider, node).start.line)
        except KeyError:  # a node the pass built (a rewritten forward)
            return 0

    def _stage_id(self, s: Stage) -> str:
        scope = self.cls[-1] if self.cls else (self.fn[0] if self.fn else "module")
        base = f"{scope}.{s.mapping}"
        sid, n = base, 1
        while sid in self.result.stages:
            n += 1
            sid = f"{base}#{n}"
        return sid

    def _emit(
        self, s: Stage, node: cst.CSTNode, fused: str, unfused: str, **extra: Any
    ) -> cst.BaseExpression:
        sid = self._register(s, node, **extra)
        return cst.parse_expression(f"_kb_stage({sid!r}, {lam(fused)}, {lam(unfused)})")

    def _register(self, s: Stage, node: cst.CSTNode, **extra: Any) -> str:
        sid = self._stage_id(s)
        modules = sorted({t.module for t in self._candidates({s.mapping})} or {s.module})
        self.result.stages[sid] = {
            "modules": modules,
            "mapping": s.mapping,
            "operator": extra.pop("operator", s.operator),
            "covers": extra.pop("covers", []),  # other mappings of the module it computes
            "args": extra.pop("args") if "args" in extra else {**s.args, **extra},
            "facts": s.facts,
            "source_line": self._line(node),
        }
        for m in modules:
            self.result.done.add((m, s.mapping))
        return sid

    # -- cache writes ---------------------------------------------------------------------
    def _cache_stage(self) -> Stage | None:
        pool = self._candidates(cachewrite.ROWS)
        return pool[0] if pool and self.fn else None

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> Any:
        """``cache[:, :, pos] = k`` (:mod:`kb.port.cachewrite`)."""
        s = self._cache_stage()
        found = cachewrite.slot_write(updated, self._resolve, self.counter + 1) if s else None
        if s is None or found is None or cachewrite.plain_container(self, found[0]):
            return updated
        cache, axis, pos, key, value = found
        sid = self._register(s, original, args={"dim": axis, "indices": pos})
        self.result.helpers += ["_kb_scatter_write", "_kb_stage_inplace"]
        unfused = f"{cache}.__setitem__({key}, {value})"
        text = cachewrite.statement(sid, cache, str(axis), pos, value, unfused)
        return cst.Expr(cst.parse_expression(text))

    # -- spans ----------------------------------------------------------------------------
    def leave_BinaryOperation(
        self, original: cst.BinaryOperation, updated: cst.BinaryOperation
    ) -> cst.BaseExpression:
        if isinstance(updated.operator, cst.MatrixMultiply):
            return attention.written(self, original, updated)
        adaln = self._inside(norms.ADALN_ROWS)
        found_ln = norms.adaln_parts(updated, self._layer_norms()) if adaln else None
        if adaln and found_ln is not None:
            return cst.parse_expression(self._adaln(adaln[0], original, found_ln, code(updated)))
        rope = self._candidates(ROPE_ROWS)
        parts = rope_parts(updated) if rope else None
        mode = rope_halves.mode_of(self, rope[0], parts[0]) if rope and parts else None
        if rope and parts is not None and mode is not None:
            s = rope[0]
            x, c, sn = parts
            self.result.helpers.append("_kb_rotary")
            return self._emit(
                s,
                original,
                f"_kb_rotary({x}, {c}, {sn}, {mode!r})",
                code(updated),
                rotary_mode=mode,
                operator="npu_rotary_mul",
            )
        glu = self._candidates(GLU_ROWS) if self.cls and self.cls[-1] in self.by_module else []
        linears = self.linears[-1] if self.linears else set()
        found = glu_parts(updated, linears) if glu else None
        if glu and found is not None:
            s = glu[0]
            if s.glu_line and self._line(original) != s.glu_line:
                return updated
            act, other = found
            gate = one_arg(act)
            assert gate is not None
            return self._glu(s, original, updated, gate, other, linears)
        return updated

    def _glu(
        self,
        s: Stage,
        original: cst.CSTNode,
        updated: cst.BinaryOperation,
        gate: cst.BaseExpression,
        other: str,
        linears: set[str],
    ) -> cst.BaseExpression:
        g = projection(gate, linears)
        u = projection(cst.parse_expression(other), linears)
        if g and u and g[1] == u[1]:
            names = (g[0], u[0])
            merged = f"_kb_merged_linear(self, {names!r}, {g[1]})"
            self.result.helpers.append("_kb_merged_linear")
            key = f"{self.cls[-1]}.{'+'.join(names)}" if self.cls else "+".join(names)
            self.result.weights[key] = {
                "merge": "concatenate along the output axis (dim 0), gate first",
                "from": [f"{n}.weight" for n in names],
                "prerequisite": "merged-gate-up",
            }
        else:
            merged = f"torch.cat([{code(gate)}, {other}], dim=-1)"
        # the activated projection is first in the merged tensor: the kernel's left half
        if s.mapping == "swiglu":
            fused, extra = f"torch_npu.npu_swiglu({merged}, dim=-1)", {}
        else:
            approx = s.args.get("approximate", 1 if s.facts.get("activation") == "gelu_tanh" else 0)
            fused = (
                f"torch_npu.npu_geglu({merged}, dim=-1, approximate={approx!r}, "
                "activate_left=True)[0]"
            )
            extra = {"approximate": approx, "activate_left": True}
        return self._emit(s, original, fused, code(updated), **extra)

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        for hook in hooks.CALLS:  # stages kept in their own modules (kb.port.hooks)
            found = hook(self, original, updated)
            if found is not None:
                return found
        callee = dotted(updated.func)
        gelu = self._inside(GELU_ROWS)
        cls = self.classes.get(self.cls[-1]) if gelu else None
        act = norms.gelu_call(updated, norms.built_from(cls, "GELU")) if cls else None
        row = {"tanh": "gelu_tanh", "none": "gelu"}.get(act[1], "") if act else None
        s = next((g for g in gelu if row in (g.mapping, "")), None)  # "": set at run time
        if act and s:
            fused = f"torch_npu.npu_gelu({act[0]}, approximate={repr(act[1]) if row else act[1]})"
            return self._emit(s, original, fused, code(updated), approximate=act[1])
        adaln = self._inside(norms.ADALN_ROWS) if callee in self.fns else []
        body = norms.inline(updated, self.fns) if adaln else None  # modulate(self.norm(x), ..)
        found = norms.adaln_parts(body, self._layer_norms()) if body is not None else None
        if adaln and found is not None:
            return cst.parse_expression(self._adaln(adaln[0], original, found, code(updated)))
        ln = self._inside(norms.LAYER_NORM_ROWS)
        found_ln = norms.layer_norm_call(updated) if ln and callee.endswith("layer_norm") else None
        if ln and found_ln is not None:
            self.result.helpers.append("_kb_layer_norm")
            fused = "_kb_layer_norm({}, {}, {}, {}, {})".format(*found_ln)
            return self._emit(ln[0], original, fused, code(updated), eps=found_ln[4])
        module_ln = self._module_norm(original, updated) if ln else None
        if module_ln is not None:
            return module_ln
        copied = cachewrite.copy_stage(self, original, updated) if self.fn else None
        if copied is not None:
            return copied
        inside = self.cls and self.cls[-1] in self.by_module
        routers = self._candidates(ROUTER_ROWS) if inside else []
        if routers and (callee.endswith(".topk") or callee == "topk"):
            return self._router(routers[0], original, updated, callee)
        return updated

    def leave_IndentedBlock(
        self, original: cst.IndentedBlock, updated: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        """``s = x + y; r = s; h = self.norm(s)`` into one residual add + RMSNorm call;
        ``h = self.norm(x); h = h * (1 + scale) + shift`` into one adaLN call."""
        adaln = self._inside(norms.ADALN_ROWS) if self.fn else []
        body = list(updated.body)
        if adaln and norms.fold_adaln(body, self._layer_norms(), partial(self._adaln, adaln[0])):
            updated = updated.with_changes(body=body)
        stages = [
            st
            for st in (self.by_module.get(self.cls[-1], []) if self.cls and self.fn else [])
            if st.mapping in RESIDUAL_ROWS
        ]
        if not stages:
            return updated
        body = list(updated.body)
        i = 0
        while i < len(body):
            found = residual.find(body, i, self._norm_eps)
            if found is None:
                i += 1
                continue
            text = self._residual_stage(stages[0], original, found)
            new = list(cst.parse_module(text).body)
            new[0] = new[0].with_changes(leading_lines=getattr(body[i], "leading_lines", ()))
            reader = residual.read_normed(body[found.reader], found.norm, found.total)
            body[found.reader] = reader
            body[i : i + 1] = new
            i = found.reader + len(new)  # the reader may start the next residual sum
        return updated.with_changes(body=body)

    def _norm_eps(self, attr: str) -> str:
        """The epsilon attribute of the RMSNorm class ``self.<attr>`` is built from, when
        the plan ports that class with its weight."""
        cls = self.classes.get(self.cls[-1]) if self.cls else None
        ctor = ""
        if cls is not None:
            for st in cls.body.body:
                if isinstance(st, cst.FunctionDef) and st.name.value == "__init__":
                    ctor = next(
                        (
                            dotted(v.func)
                            for t, v in _assigns(st)
                            if t == f"self.{attr}" and isinstance(v, cst.Call)
                        ),
                        "",
                    )
        norm = self.classes.get(ctor.rsplit(".", 1)[-1])
        planned = [
            s for s in self.by_module.get(ctor.rsplit(".", 1)[-1], []) if s.mapping == "rms_norm"
        ]
        if norm is None or not planned or planned[0].facts.get("weight") != "weight":
            return ""
        eps = _init_facts(norm)[2]
        return eps[0] if eps else ""

    def _residual_stage(self, s: Stage, node: cst.CSTNode, found: residual.Found) -> str:
        x, y, norm, eps = found.x, found.y, found.norm, found.eps
        self.result.helpers += ["_kb_add_rms_norm", "_kb_add_then"]
        sid = self._stage_id(s)
        self.result.stages[sid] = {
            "modules": [s.module],
            "mapping": s.mapping,
            "operator": "npu_add_rms_norm",
            "args": {"epsilon": f"{norm}.{eps}"},
            "facts": s.facts,
            "source_line": self._line(node),
        }
        self.result.done.add((s.module, s.mapping))
        head = ""
        if not (x.isidentifier() and y.isidentifier()):  # computed once, whichever side runs
            head, x, y = f"_kb_x, _kb_residual = {x}, {y}\n", "_kb_x", "_kb_residual"
        fused = f"_kb_add_rms_norm({x}, {y}, {norm}, {norm}.{eps})"
        unfused = f"_kb_add_then({norm}, {x} + {y})"
        target = f"{residual.NORMED}, {found.total}"
        return head + f"{target} = _kb_stage({sid!r}, {lam(fused)}, {lam(unfused)})\n"

    def _candidates_kind(self, prefix: str) -> list[Stage]:
        if self.cls and self.cls[-1] in self.by_module:
            pool = self.by_module[self.cls[-1]]
        else:
            pool = [s for ss in self.by_module.values() for s in ss]
        return [s for s in pool if s.kind.startswith(prefix)]

    def _router(
        self, s: Stage, original: cst.Call, updated: cst.Call, callee: str
    ) -> cst.BaseExpression:
        if callee.endswith(".topk") and callee != "torch.topk":
            probs, k = callee[: -len(".topk")], keyword(updated, "k", 0)
        else:
            probs, k = keyword(updated, "input", 0) or "", keyword(updated, "k", 1)
        logits = self.softmax_of[-1].get(probs)
        if not logits or not k:
            return updated
        self.result.helpers.append("_kb_topk_softmax")
        fused = f"_kb_topk_softmax({logits}, {k}, {probs}.dtype)"
        op = "npu_moe_gating_top_k_softmax"
        return self._emit(s, original, fused, code(updated), args={"k": k}, operator=op)

    # -- whole forwards -------------------------------------------------------------------
    def _experts(self, cls: cst.ClassDef, s: Stage) -> cst.ClassDef:
        ported = expertmods.rewrite(self, cls, s)  # None: no list of expert modules
        if ported is not None:
            return ported
        body = list(cls.body.body)
        idx = next((i for i, st in enumerate(body) if _named(st, "forward")), None)
        fwd = body[idx] if idx is not None else None
        found: experts.Loop | str = "no forward"
        if isinstance(fwd, cst.FunctionDef):
            found = experts.read(fwd, s.facts, cls)
        if isinstance(found, str) or not isinstance(fwd, cst.FunctionDef) or idx is None:
            why = found if isinstance(found, str) else "no forward"
            self.notes.setdefault(cls.name.value, []).append(
                f"stage {s.mapping} ({s.operator}) not rewritten: {why}"
            )
            return cls
        self.result.helpers.append("_kb_moe_experts")
        fused = (
            f"_kb_moe_experts({found.x}, {found.ids}, {found.weights}, {found.gate_up}, "
            f"{found.down}{found.biases}{found.act})"
        )
        if found.note:
            self.notes.setdefault(cls.name.value, []).append(found.note)
        self.cls.append(cls.name.value)
        unfused = f"self._kb_unfused_forward({', '.join(_passing(fwd.params))})"
        stage = self._emit(s, fwd, fused, unfused, covers=["swiglu"])
        self.cls.pop()
        self.result.done.add((cls.name.value, "swiglu"))
        new_fwd = fwd.with_changes(
            body=cst.IndentedBlock([cst.SimpleStatementLine([cst.Return(stage)])])
        )
        old = fwd.with_changes(
            name=cst.Name("_kb_unfused_forward"), leading_lines=[cst.EmptyLine()]
        )
        body[idx : idx + 1] = [new_fwd, old]
        return cls.with_changes(body=cls.body.with_changes(body=body))

    def _norm(self, cls: cst.ClassDef, s: Stage) -> cst.ClassDef:
        _, params, eps = _init_facts(cls)
        body = list(cls.body.body)
        idx = next(
            (
                i
                for i, st in enumerate(body)
                if isinstance(st, cst.FunctionDef) and st.name.value == "forward"
            ),
            None,
        )
        if idx is None or not eps:
            why = "no forward" if idx is None else "no epsilon attribute in __init__"
            self.notes.setdefault(cls.name.value, []).append(
                f"stage {s.mapping} ({s.operator}) not rewritten: {why}"
            )
            return cls
        fwd = body[idx]
        assert isinstance(fwd, cst.FunctionDef)
        plist = [p.name.value for p in fwd.params.params]
        if len(plist) < 2:
            return cls
        x = plist[1]
        weight = s.facts.get("weight")
        if weight == "none" or not params:
            gamma = f"torch.ones({x}.shape[-1], dtype={x}.dtype, device={x}.device)"
        elif weight == "1 + weight":
            gamma = f"(1 + self.{params[0]}).to({x}.dtype)"
        else:
            gamma = f"self.{params[0]}.to({x}.dtype)"
        fused = f"torch_npu.npu_rms_norm({x}, {gamma}, epsilon=self.{eps[0]})[0]"
        call_args = ", ".join(_passing(fwd.params))
        self.cls.append(cls.name.value)
        stage = self._emit(
            s, fwd, fused, f"self._kb_unfused_forward({call_args})", epsilon=f"self.{eps[0]}"
        )
        self.cls.pop()
        new_fwd = fwd.with_changes(
            body=cst.IndentedBlock([cst.SimpleStatementLine([cst.Return(stage)])]),
            leading_lines=fwd.leading_lines,
        )
        old = fwd.with_changes(
            name=cst.Name("_kb_unfused_forward"), leading_lines=[cst.EmptyLine()]
        )
        body[idx : idx + 1] = [new_fwd, old]
        return cls.with_changes(body=cls.body.with_changes(body=body))


def _named(st: cst.CSTNode, name: str) -> bool:
    return isinstance(st, cst.FunctionDef) and st.name.value == name


def _missing(s: Stage) -> str:
    """Why a planned stage was not rewritten (the others get their own note)."""
    if s.mapping in cachewrite.ROWS:
        return cachewrite.why_not(s.facts, s.operator)
    ours = NORM_ROWS | GLU_ROWS | GELU_ROWS | ROPE_ROWS | ROUTER_ROWS | EXPERT_ROWS | RESIDUAL_ROWS
    if s.mapping in ours | norms.LAYER_NORM_ROWS | norms.ADALN_ROWS or s.mapping.startswith(
        "attention_"
    ):
        return "no span computing it was found in this class or the functions it calls"
    return (
        "kb port does not write this mapping yet (norms, residual norms, adaLN, RoPE, GLU, "
        "GELU, attention, cache writes by position, routers, expert loops)"
    )


def rewrite(text: str, stages: list[Stage], notes: dict[str, list[str]]) -> tuple[str, Result]:
    """The ported text of one file (no prelude yet) and what was rewritten."""
    wrapper = MetadataWrapper(cst.parse_module(text))
    porter = Porter(stages, notes)
    tree = wrapper.visit(porter)
    return tree.code, porter.result

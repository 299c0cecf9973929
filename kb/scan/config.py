"""``[tool.kb]`` in the scanned project's ``pyproject.toml`` (ruff's convention).

Example::

    [tool.kb]
    product = "atlas-a3"
    torch-npu = "2.7.1"
    graph-mode = { prefill = "eager", decode = "aclgraph" }
    ignore = ["KB208"]
    exclude = ["tests/"]
    custom-ops = ["npu_my_fused_op"]
    model-config = "checkpoints/config.json"

    [tool.kb.per-file-ignores]
    "tools/*.py" = ["KB6"]

    [[tool.kb.overrides]]
    files = ["model/_310p/**"]
    product = "atlas-inference"

Command-line options win over the file; overrides apply to the files their globs match
(relative to the directory of the ``pyproject.toml``), and so does ``model-config`` (the
checkpoint's hyper-parameters the model reader decides facts with).  Keys may use ``-``
or ``_``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from kb.core.paths import NotText, describe_os_error, read_side_text
from kb.core.releasenumber import release_text
from kb.scan.globs import PatternError, PatternSet, compile_pattern
from kb.vocab import GRAPH_MODES, PHASES, normalize
from kb.vocab.parallel import PARALLEL_MODES

KEYS = (
    "product",
    "torch-npu",
    "graph-mode",
    "quantization",
    "parallel",
    "model-config",
    "select",
    "ignore",
    "exclude",
    "custom-ops",
    "per-file-ignores",
    "overrides",
)
OVERRIDE_KEYS = (
    "files",
    "product",
    "torch-npu",
    "graph-mode",
    "quantization",
    "parallel",
    "model-config",
    "select",
    "ignore",
)


class ConfigError(Exception):
    """A ``[tool.kb]`` table that cannot be used; the message names file and key."""


@dataclass
class Settings:
    """Scan settings for one file (after overrides)."""

    product: str | None = None
    torch_npu: str | None = None
    graph_mode: str | None = None
    graph_modes: dict[str, str] = field(default_factory=dict)
    quantization: str | None = None
    parallel: str | None = None  # kb.vocab.parallel; None: a single device
    model_config: str | None = None  # a JSON file of the checkpoint's hyper-parameters
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)


@dataclass
class Override:
    files: list[str]
    values: dict[str, Any]


@dataclass
class Config:
    path: Path | None = None  # the pyproject.toml, when one has [tool.kb]
    base: Settings = field(default_factory=Settings)
    exclude: list[str] = field(default_factory=list)
    custom_ops: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    overrides: list[Override] = field(default_factory=list)

    def settings_for(self, file: Path) -> Settings:
        """The settings that apply to ``file``: the table, then matching overrides."""
        import copy

        out = copy.deepcopy(self.base)
        rel = self._relative(file)
        if rel is None:
            return out
        for ov in self.overrides:
            if _patterns(tuple(ov.files)).match(rel):
                base = self.path.parent if self.path else None
                _apply(out, ov.values, where=f"{self.path}: overrides", base=base)
        for pattern, codes in self.per_file_ignores.items():
            if _patterns((pattern,)).match(rel):
                out.ignore = out.ignore + codes
        return out

    def _relative(self, file: Path) -> str | None:
        if self.path is None:
            return None
        try:
            return file.resolve().relative_to(self.path.parent.resolve()).as_posix()
        except ValueError:
            return None


@lru_cache(maxsize=256)
def _patterns(lines: tuple[str, ...]) -> PatternSet:
    """Compiled globs of a key (each checked when the file was loaded)."""
    return PatternSet.from_lines(lines)


def _globs(values: list[str], where: str) -> list[str]:
    """``values`` when every glob compiles alone; else ConfigError naming key and glob."""
    for value in values:
        try:
            compile_pattern(value)
        except PatternError as exc:
            raise ConfigError(f"{where}: bad glob {value!r}: {exc}") from None
    return values


def _load_toml(path: Path) -> dict[str, Any]:
    """The TOML of ``path``, read by the safe side-file reader (regular, capped, UTF-8)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        text = read_side_text(path)
    except OSError as exc:
        raise ConfigError(f"{path}: {describe_os_error(exc)}") from None
    except NotText as exc:
        raise ConfigError(f"{exc}; pyproject.toml must be UTF-8") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid TOML: nested too deeply") from None


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, RuntimeError):  # a symlink loop, a name too long
        return False


def find(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` at or above ``start`` that has a ``[tool.kb]`` table.

    A symlink loop on the way (in ``start`` or a ``pyproject.toml``) ends the search
    where it is, not in a traceback: the loop cannot hold a configuration.
    """
    try:
        here = start.resolve()
        if not here.is_dir():
            here = here.parent
    except (OSError, RuntimeError):  # RuntimeError: "Symlink loop" before Python 3.13
        here = Path(os.path.abspath(start)).parent
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if _is_file(candidate):
            data = _load_toml(candidate)
            if isinstance(data.get("tool"), dict) and "kb" in data["tool"]:
                return candidate
    return None


def _key(name: str) -> str:
    return name.replace("_", "-")


def _str_list(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ConfigError(f"{where} must be a string or a list of strings")


def _apply(out: Settings, values: dict[str, Any], *, where: str, base: Path | None = None) -> None:
    for raw, value in values.items():
        key = _key(raw)
        if key == "files":
            continue
        if key == "product":
            canon = normalize("product", value)
            if canon is None:
                raise ConfigError(f"{where}: product {value!r} is not a known product")
            out.product = canon
        elif key == "torch-npu":
            release = release_text(value)
            if release is None:
                raise ConfigError(f'{where}: torch-npu must be a release such as "2.7.1"')
            out.torch_npu = release
        elif key == "graph-mode":
            if isinstance(value, dict):
                for phase, mode in value.items():
                    if phase not in PHASES or mode not in GRAPH_MODES:
                        raise ConfigError(
                            f"{where}: graph-mode.{phase} = {mode!r}; phases are "
                            "prefill/decode/training, modes eager/aclgraph/torchair"
                        )
                    out.graph_modes[phase] = mode
            elif value in GRAPH_MODES:
                out.graph_mode = value
            else:
                raise ConfigError(
                    f"{where}: graph-mode {value!r} is not one of {', '.join(GRAPH_MODES)}"
                )
        elif key == "quantization":
            from kb.vocab import ambiguous_scheme_message, normalize_scheme

            canon = normalize_scheme(value)
            if canon is None:
                why = ambiguous_scheme_message(value)
                raise ConfigError(
                    f"{where}: quantization {why}"
                    if why
                    else f"{where}: quantization {value!r} is not a known scheme"
                )
            out.quantization = canon
        elif key == "parallel":
            canon = normalize("parallel", value)
            if canon is None:
                raise ConfigError(
                    f"{where}: parallel {value!r} is not one of {', '.join(PARALLEL_MODES)}"
                )
            out.parallel = canon
        elif key == "model-config":
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{where}: model-config must be the path of a JSON file")
            out.model_config = str(base / value) if base is not None else value
        elif key == "select":
            out.select = _str_list(value, f"{where}: select")
        elif key == "ignore":
            out.ignore = _str_list(value, f"{where}: ignore")


def with_options(s: Settings, o: Any) -> Settings:
    """The file's settings with the command line's (a ScanOptions) laid over them."""
    if o.product:
        s.product = o.product
    if o.torch_npu:
        s.torch_npu = o.torch_npu
    if o.graph_mode:
        s.graph_mode, s.graph_modes = o.graph_mode, {}
    if o.quantization:
        s.quantization = o.quantization
    if o.parallel:
        s.parallel = o.parallel
    if o.model_config:
        s.model_config = o.model_config
    if o.select:
        s.select = list(o.select)
    s.ignore = s.ignore + list(o.ignore)
    return s


def check_model_config(path: str | None) -> None:
    """The model configuration an option names loads (else ConfigError with its line)."""
    if path:
        from kb.scan.model.modelconfig import ModelConfigError, cached

        try:
            cached(path)
        except ModelConfigError as exc:
            raise ConfigError(f"model config: {exc}") from None


def _check_model_config(settings: Settings, where: str) -> None:
    """The model configuration a table names loads (else ConfigError with its line)."""
    if settings.model_config is None:
        return
    from kb.scan.model.modelconfig import ModelConfigError, cached

    try:
        cached(settings.model_config)
    except ModelConfigError as exc:
        raise ConfigError(f"{where}: model-config: {exc}") from None


def load(start: Path, explicit: Path | None = None) -> Config:
    """The configuration for a scan rooted at ``start`` (or the file given explicitly)."""
    path = explicit or find(start)
    if path is None:
        return Config()
    data = _load_toml(path)
    table = (data.get("tool") or {}).get("kb")
    if table is None:
        return Config(path=path)
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.kb] must be a table")
    where = f"{path}: [tool.kb]"
    unknown = [k for k in table if _key(k) not in KEYS]
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; known keys: {', '.join(KEYS)}")
    cfg = Config(path=path)
    plain = {
        k: v
        for k, v in table.items()
        if _key(k) not in ("exclude", "custom-ops", "per-file-ignores", "overrides")
    }
    _apply(cfg.base, plain, where=where, base=path.parent)
    _check_model_config(cfg.base, where)
    for raw, value in table.items():
        key = _key(raw)
        if key == "exclude":
            cfg.exclude = _globs(_str_list(value, f"{where} exclude"), f"{where} exclude")
        elif key == "custom-ops":
            cfg.custom_ops = _str_list(value, f"{where} custom-ops")
        elif key == "per-file-ignores":
            if not isinstance(value, dict):
                raise ConfigError(f"{where} per-file-ignores must be a table of glob = [codes]")
            _globs(list(value), f"{where} per-file-ignores")
            cfg.per_file_ignores = {
                g: _str_list(c, f"{where} per-file-ignores.{g}") for g, c in value.items()
            }
        elif key == "overrides":
            if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
                raise ConfigError(
                    f"{where} overrides must be an array of tables ([[tool.kb.overrides]])"
                )
            for i, ov in enumerate(value):
                ov_where = f"{where} overrides[{i}]"
                bad = [k for k in ov if _key(k) not in OVERRIDE_KEYS]
                if bad:
                    raise ConfigError(f"{ov_where}: unknown key {bad[0]!r}")
                if "files" not in ov:
                    raise ConfigError(f"{ov_where}: needs files = [globs]")
                files = _globs(_str_list(ov["files"], f"{ov_where} files"), f"{ov_where} files")
                checked = Settings()  # validate now, apply per file
                _apply(checked, ov, where=ov_where, base=path.parent)
                _check_model_config(checked, ov_where)
                cfg.overrides.append(Override(files, ov))
    return cfg

"""Decoding driven by positions, for ``kb verify``: a model whose ``forward`` takes where
its tokens go (a tensor of positions or a start offset) and writes a cache it keeps
itself, allocated by one of its methods from a batch size and a length (or by its
constructor, or lazily by its first call with positions).

Everything is read from the class: the position argument from ``forward``'s
parameters (:data:`POSITION_ARGS`, a tensor unless it is typed or defaulted ``int``),
the allocating method from the methods whose parameters name a batch size.  Every
attempt starts from freshly allocated caches on both sides.  Prefill writes positions
``0..S-1``; decode runs the original's prefill, copies its buffers (the caches) into
the port so that both sides write from the same state, then measures one step at
position ``S``.  The cache-write stage compares the two writes from that state in the
port; the step's outputs are compared as every other run's.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

#: what a forward calls the positions its tokens take in the cache
POSITION_ARGS = (
    "input_pos",
    "start_pos",
    "positions",
    "cache_position",
    "cache_positions",
    "pos",
)
#: cache length allocated for a run (the prompt plus a step, with room to spare)
LENGTH = 32


class CannotDrive(Exception):
    """What stops kb verify from driving the class by positions (the message names it)."""


@dataclass(frozen=True)
class Driver:
    """How to drive one class: its position argument and its allocating method."""

    cls: str
    arg: str
    offset: bool  #: a start offset (int), not a tensor of positions
    setup: str = ""  #: the method allocating the cache ('' : none found)
    params: tuple[str, ...] = ()
    #: its place among the forward's required arguments (-1: it has a default)
    index: int = -1

    def describe(self) -> str:
        """How kb verify drives the class, in words."""
        how = f"{self.cls}.forward({self.arg}=" + ("<start>" if self.offset else "<positions>")
        return how + (f"), caches by {self.cls}.{self.setup}" if self.setup else ")")


def _batch(name: str) -> bool:
    n = name.lower()
    return "batch" in n or n in ("bsz", "bs")


def _length(name: str) -> bool:
    n = name.lower()
    return any(w in n for w in ("seq", "len", "tokens", "cache_size"))


def reader(cls: Any) -> Driver | None:
    """The :class:`Driver` of ``cls`` (None: its forward takes no position argument)."""
    fwd = inspect.signature(cls.forward).parameters
    arg = next((a for a in POSITION_ARGS if a in fwd), "")
    if not arg:
        return None
    p = fwd[arg]
    offset = p.annotation in (int, "int") or (
        type(p.default) is int and p.default is not inspect.Parameter.empty
    )
    required = [
        q
        for q, v in list(fwd.items())[1:]
        if v.default is inspect.Parameter.empty and v.kind not in (v.VAR_POSITIONAL, v.VAR_KEYWORD)
    ]
    index = required.index(arg) if arg in required else -1
    found = []
    for name, fn in inspect.getmembers(cls, inspect.isfunction):
        if name == "forward" or name.startswith("_"):
            continue
        params = tuple(inspect.signature(fn).parameters)[1:]
        if any(_batch(q) for q in params):
            found.append(("cache" not in name.lower(), name, params))
    if not found:
        return Driver(cls.__name__, arg, offset, index=index)
    _, setup, params = min(found)
    return Driver(cls.__name__, arg, offset, setup, params, index)


def why_not(cache_arg: str, fwd: Any) -> str:
    """Why a class's decode cannot be driven (neither an HF cache nor positions)."""
    if cache_arg:
        return (
            f"no cache: the class's forward takes {cache_arg} but no use_cache to ask for it "
            "(prefill only)"
        )
    return (
        "no cache: the class's forward takes no past keys/values ("
        + ", ".join(("past_key_values", "cache"))
        + ") and no position argument ("
        + ", ".join(POSITION_ARGS)
        + "), so kb verify cannot drive a decode step (prefill only)"
    )


@contextlib.contextmanager
def default_dtype(dtype: Any) -> Iterator[None]:
    """Tensors made without a dtype are ``dtype`` while the models are built: a cache a
    constructor makes with ``torch.zeros(shape)`` is in the run's dtype, as the model's
    own inference sets the default dtype for it (None: unchanged)."""
    import torch

    before = torch.get_default_dtype()
    if dtype is not None and dtype.is_floating_point:
        torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def keeps_cache(model: Any, drive: Driver) -> bool:
    """The model keeps a cache to write: a method allocates one, or a submodule, buffer or
    tensor attribute is named as a cache."""
    import torch

    if drive.setup:
        return True
    for name, mod in model.named_modules():
        kept = [name, *dict(mod.named_buffers(recurse=False))]
        kept += [k for k, v in vars(mod).items() if isinstance(v, torch.Tensor)]
        if any("cache" in k.lower() for k in kept):
            return True
    return False


def no_cache(drive: Driver) -> str:
    """Why decode is not run for a class that takes positions but keeps no cache."""
    return (
        f"no cache: {drive.cls}.forward takes {drive.arg}, but the class keeps no cache to "
        "write (no method of it takes a batch size to allocate one, no submodule, buffer or "
        "tensor attribute is named as a cache), so kb verify cannot drive a decode step "
        "(prefill only)"
    )


def allocate(model: Any, drive: Driver, dtype: Any) -> None:
    """Call the model's allocating method with a batch, a length and the run's dtype."""
    import torch

    from kb.port.build import BATCH

    if not drive.setup:
        return
    sig = inspect.signature(getattr(model, drive.setup)).parameters
    kwargs: dict[str, Any] = {}
    sized = False
    for name, p in sig.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if _batch(name):
            kwargs[name] = BATCH
        elif _length(name) and (p.default is inspect.Parameter.empty or not sized):
            kwargs[name] = LENGTH  # the cache's length (a further length keeps its default)
            sized = True
        elif "dtype" in name:
            kwargs[name] = dtype
        elif "device" in name:
            kwargs[name] = torch.device("cpu")
        elif p.default is inspect.Parameter.empty:
            raise CannotDrive(
                f"{drive.cls}.{drive.setup} needs {name!r}, which kb verify cannot supply "
                "(it passes a batch size, a length, the dtype and the device)"
            )
    getattr(model, drive.setup)(**kwargs)


def at(drive: Driver, start: int, count: int) -> Any:
    """The position argument for ``count`` tokens from ``start``."""
    import torch

    return start if drive.offset else torch.arange(start, start + count)


def share(a: Any, b: Any) -> None:
    """``b``'s state set to ``a``'s, one state for both sides: its buffers and the tensors
    its modules keep as plain attributes (a cache made with ``torch.zeros`` in
    ``__init__``)."""
    import torch

    theirs = dict(b.named_modules())
    with torch.no_grad():
        for name, mod in a.named_modules():
            other = theirs.get(name)
            if other is None:
                continue
            kept = {**dict(mod.named_buffers(recurse=False)), **_plain(mod)}
            mine = {**dict(other.named_buffers(recurse=False)), **_plain(other)}
            for key, t in kept.items():
                o = mine.get(key)
                if o is not None and o.shape == t.shape:
                    o.copy_(t)


def _plain(mod: Any) -> dict[str, Any]:
    """The tensors a module keeps as plain attributes (neither parameters nor buffers)."""
    import torch

    return {k: v for k, v in vars(mod).items() if isinstance(v, torch.Tensor) and k[0] != "_"}


def _by_token(model: Any, args: list[Any], named: dict[str, Any], drive: Driver, n: int) -> None:
    """The first ``n`` tokens fed one call per token (a model that takes one at a time)."""
    import torch

    with torch.no_grad():
        for t in range(n):
            one = [a[:, t : t + 1] if _along(a, args) else a for a in args]
            model(*one, **named, **{drive.arg: at(drive, t, 1)})


def _along(x: Any, args: list[Any]) -> bool:
    """``x`` runs along the prompt's sequence axis."""
    return hasattr(x, "shape") and x.dim() > 1 and x.shape[1] == args[0].shape[1]


def _variants(args: list[Any]) -> list[list[Any]]:
    """The argument lists to try: all as built, then the first alone (the others None),
    as a model with another input for its first step (a class label, a prompt) takes
    its plain tokens."""
    out = [args]
    if len(args) > 1:
        out.append([args[0]] + [None] * (len(args) - 1))
    return out


def _step(first: Any, rest: list[Any], seq: int, seed: int) -> list[Any]:
    """One next token (or hidden state) after a prompt of ``seq``; the other inputs
    cut to their last position where they run along the sequence."""
    import torch

    gen = torch.Generator().manual_seed(seed + 2)
    if first.is_floating_point():
        nxt = torch.randn(first.shape[0], 1, *first.shape[2:], generator=gen).to(first.dtype)
    else:
        nxt = torch.randint(0, int(first.max()) + 1, (first.shape[0], 1), generator=gen)
    cut = [
        r[:, -1:] if hasattr(r, "shape") and r.dim() > 1 and r.shape[1] == seq else r for r in rest
    ]
    return [nxt, *cut]


def attempts(
    a: Any, b: Any, options: list[Any], drive: Driver, phase: str, dtype: Any, seed: int
) -> list[Callable[[], Any]]:
    """The measured calls to try in turn: each allocates fresh caches on both sides (and
    for decode runs the original's prefill and shares its state), then returns the
    arguments of the call to measure."""
    import torch

    out: list[Callable[[], Any]] = []
    for option in options:
        named = option[-1] if option and isinstance(option[-1], dict) else {}
        given = list(option[:-1] if named else option)
        if 0 <= drive.index < len(given):  # the positions go by name
            del given[drive.index]
        for args in _variants(given):

            def attempt(args: list[Any] = args, named: dict[str, Any] = named) -> Any:
                allocate(a, drive, dtype)
                allocate(b, drive, dtype)
                seq = int(args[0].shape[1])
                if phase != "decode":
                    return tuple(args), {**named, drive.arg: at(drive, 0, seq)}
                with torch.no_grad():
                    a(*args, **named, **{drive.arg: at(drive, 0, seq)})
                share(a, b)
                step = _step(args[0], args[1:], seq, seed)
                return tuple(step), {**named, drive.arg: at(drive, seq, 1)}

            out.append(attempt)

            def by_token(args: list[Any] = args, named: dict[str, Any] = named) -> Any:
                """The prompt fed one token per call; prefill measures the last one."""
                allocate(a, drive, dtype)
                allocate(b, drive, dtype)
                seq = int(args[0].shape[1])
                last = seq - 1 if phase != "decode" else seq
                _by_token(a, args, named, drive, last)
                share(a, b)
                if phase != "decode":
                    one = [x[:, last:] if _along(x, args) else x for x in args]
                    return tuple(one), {**named, drive.arg: at(drive, last, 1)}
                step = _step(args[0], args[1:], seq, seed)
                return tuple(step), {**named, drive.arg: at(drive, seq, 1)}

            out.append(by_token)
    return out

"""A stand-in for ``torch`` and ``torch_npu`` that runs record examples on zeros.

Tensor factories build zero-filled numpy arrays of the written shape and dtype (so an
example's shapes and dtypes are what gets checked), ``torch_npu.<op>`` calls go to
``kb.reference.run``, and the few tensor methods examples use map onto numpy.  Anything
else raises :class:`Unsupported`; arrays past a size budget raise :class:`TooLarge`.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import ml_dtypes
import numpy as np

from kb import reference

MAX_ELEMENTS = 1 << 22  # per array
MAX_MATMUL = 3e8  # multiply-adds


class Unsupported(Exception):
    """The example uses torch beyond what the shim models."""


class TooLarge(Exception):
    """The example's tensors are too big to run cheaply."""


DTYPES = {
    "float32": np.float32,
    "float": np.float32,
    "float16": np.float16,
    "half": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "int8": np.int8,
    "uint8": np.uint8,
    "int16": np.int16,
    "int32": np.int32,
    "int": np.int32,
    "int64": np.int64,
    "long": np.int64,
    "bool": np.bool_,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2,
    "float64": np.float64,
    "double": np.float64,
}


class DType:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"torch.{self.name}"


def _np_dtype(d: Any) -> Any:
    if d is None:
        return np.float32
    if isinstance(d, DType):
        if d.name not in DTYPES:
            raise Unsupported(f"dtype {d.name}")
        return DTYPES[d.name]
    raise Unsupported(f"dtype {d!r}")


def _shape(args: tuple[Any, ...]) -> tuple[int, ...]:
    dims = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
    shape = tuple(int(d) for d in dims)
    if math.prod(shape) > MAX_ELEMENTS:
        raise TooLarge(f"a tensor of shape {shape}")
    return shape


def unwrap(v: Any) -> Any:
    if isinstance(v, T):
        return v.a
    if isinstance(v, (list, tuple)):
        return type(v)(unwrap(x) for x in v)
    if isinstance(v, DType):
        return v.name
    return v


def wrap(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return T(v)
    if isinstance(v, tuple):
        return tuple(wrap(x) for x in v)
    if isinstance(v, list):
        return [wrap(x) for x in v]
    return v


class T:
    """A tensor: a numpy array with the torch methods examples call."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    shape = property(lambda self: self.a.shape)
    dtype = property(lambda self: self.a.dtype)

    def size(self, dim: int | None = None) -> Any:
        return self.a.shape if dim is None else self.a.shape[dim]

    def dim(self) -> int:
        return self.a.ndim

    def numel(self) -> int:
        return int(self.a.size)

    def npu(self, *_: Any, **__: Any) -> T:
        return self

    cuda = npu
    contiguous = npu
    detach = npu
    clone = lambda self: T(self.a.copy())  # noqa: E731

    def to(self, *args: Any, dtype: Any = None, **_: Any) -> T:
        for a in args:
            if isinstance(a, DType):
                dtype = a
        return T(self.a.astype(_np_dtype(dtype))) if dtype is not None else self

    float = lambda self: T(self.a.astype(np.float32))  # noqa: E731
    half = lambda self: T(self.a.astype(np.float16))  # noqa: E731
    bfloat16 = lambda self: T(self.a.astype(ml_dtypes.bfloat16))  # noqa: E731
    int = lambda self: T(self.a.astype(np.int32))  # noqa: E731
    long = lambda self: T(self.a.astype(np.int64))  # noqa: E731

    def view(self, *shape: Any) -> T:
        if len(shape) == 1 and isinstance(shape[0], DType):
            raise Unsupported("view as another dtype")
        return T(self.a.reshape(_flat_shape(shape)))

    def reshape(self, *shape: Any) -> T:
        return T(self.a.reshape(_flat_shape(shape)))

    def transpose(self, d0: int, d1: int) -> T:
        return T(np.swapaxes(self.a, d0, d1))

    def permute(self, *dims: Any) -> T:
        return T(self.a.transpose(_flat_shape(dims)))

    def unsqueeze(self, d: int) -> T:
        return T(np.expand_dims(self.a, d))

    def squeeze(self, d: int | None = None) -> T:
        return T(np.squeeze(self.a, d))

    def triu_(self, diagonal: int = 0) -> T:
        self.a[...] = np.triu(self.a, diagonal)
        return self

    triu = lambda self, diagonal=0: T(np.triu(self.a, diagonal))  # noqa: E731

    def sum(self, dim: Any = None, keepdim: bool = False, **_: Any) -> T:
        return T(np.asarray(self.a.sum(axis=dim, keepdims=keepdim)))

    def mean(self, dim: Any = None, keepdim: bool = False, **_: Any) -> T:
        return T(
            np.asarray(self.a.astype(np.float32).mean(axis=dim, keepdims=keepdim)).astype(
                self.a.dtype
            )
        )

    def pow(self, e: Any) -> T:
        return T(self.a**e)

    def sqrt(self) -> T:
        return T(np.sqrt(self.a))

    def softmax(self, dim: int = -1, **_: Any) -> T:
        x = self.a.astype(np.float32)
        e = np.exp(x - x.max(axis=dim, keepdims=True))
        return T((e / e.sum(axis=dim, keepdims=True)).astype(self.a.dtype))

    def split(self, size: Any, dim: int = 0) -> tuple[T, ...]:
        sizes = [size] * -(-self.a.shape[dim] // size) if isinstance(size, int) else list(size)
        cuts = np.cumsum(sizes)[:-1]
        return tuple(T(p) for p in np.split(self.a, cuts, axis=dim))

    def tolist(self) -> Any:
        return self.a.tolist()

    def item(self) -> Any:
        return self.a.item()

    def __getitem__(self, key: Any) -> T:
        return T(np.asarray(self.a[unwrap(key)]))

    def __setitem__(self, key: Any, value: Any) -> None:
        self.a[unwrap(key)] = unwrap(value)

    def __len__(self) -> int:
        return len(self.a)

    def __int__(self) -> int:
        return int(self.a)

    __index__ = __int__

    def __float__(self) -> float:
        return float(self.a)

    def __iter__(self) -> Any:
        return (T(np.asarray(x)) for x in self.a)

    def __matmul__(self, other: Any) -> T:
        b = unwrap(other)
        if self.a.shape[-1] * math.prod(self.a.shape[:-1]) * b.shape[-1] > MAX_MATMUL:
            raise TooLarge("a matmul")
        return T((self.a.astype(np.float32) @ b.astype(np.float32)).astype(self.a.dtype))

    def __getattr__(self, name: str) -> Any:
        raise Unsupported(f"Tensor.{name}")


def _flat_shape(shape: tuple[Any, ...]) -> tuple[int, ...]:
    dims = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
    return tuple(int(d) for d in dims)


def _binary(op: Any) -> Any:
    def method(self: T, other: Any) -> T:
        b = unwrap(other)
        out = op(self.a, b)
        return T(
            np.asarray(out).astype(self.a.dtype)
            if np.asarray(out).dtype == np.float64
            else np.asarray(out)
        )

    return method


for _name, _op in {
    "__add__": operator.add,
    "__radd__": lambda a, b: b + a,
    "__sub__": operator.sub,
    "__rsub__": lambda a, b: b - a,
    "__mul__": operator.mul,
    "__rmul__": lambda a, b: b * a,
    "__truediv__": operator.truediv,
    "__rtruediv__": lambda a, b: b / a,
    "__pow__": operator.pow,
    "__rpow__": lambda a, b: b**a,
    "__neg__": None,
}.items():
    if _op is not None:
        setattr(T, _name, _binary(_op))
T.__neg__ = lambda self: T(-self.a)  # type: ignore[attr-defined]


class Torch:
    """The ``torch`` module as examples use it."""

    Tensor = T

    def __init__(self, npu_ops: TorchNpu) -> None:
        for name in (*DTYPES, "qint8", "quint8", "quint4x2"):
            setattr(self, name, DType(name))
        self.npu = _Anything("torch.npu")
        self.nn = _Anything("torch.nn")
        self.ops = _Ops(npu_ops)

    @staticmethod
    def _make(args: tuple[Any, ...], dtype: Any, fill: float = 0) -> T:
        return T(np.full(_shape(args), fill, dtype=_np_dtype(dtype)))

    def zeros(self, *args: Any, dtype: Any = None, **_: Any) -> T:
        return self._make(args, dtype)

    randn = rand = empty = zeros

    def ones(self, *args: Any, dtype: Any = None, **_: Any) -> T:
        return self._make(args, dtype, 1)

    def full(self, size: Any, fill: Any, dtype: Any = None, **_: Any) -> T:
        return self._make((size,), dtype, fill)

    def randint(
        self, low: int, high: Any = None, size: Any = None, dtype: Any = None, **_: Any
    ) -> T:
        if size is None:
            raise Unsupported("randint without size")
        return T(np.full(_shape((size,)), int(low), dtype=_np_dtype(dtype) if dtype else np.int64))

    def zeros_like(self, t: T, dtype: Any = None, **_: Any) -> T:
        return T(np.zeros(t.a.shape, dtype=_np_dtype(dtype) if dtype else t.a.dtype))

    randn_like = rand_like = empty_like = zeros_like

    def ones_like(self, t: T, dtype: Any = None, **_: Any) -> T:
        return T(np.ones(t.a.shape, dtype=_np_dtype(dtype) if dtype else t.a.dtype))

    def arange(self, *args: Any, dtype: Any = None, **_: Any) -> T:
        out = np.arange(*[int(a) for a in args])
        if out.size > MAX_ELEMENTS:
            raise TooLarge("arange")
        return T(out.astype(_np_dtype(dtype) if dtype else np.int64))

    def tensor(self, data: Any, dtype: Any = None, **_: Any) -> T:
        raw = np.asarray(unwrap(data))
        default = (
            np.int64
            if raw.dtype.kind in "iu"
            else (np.bool_ if raw.dtype.kind == "b" else np.float32)
        )
        return T(raw.astype(_np_dtype(dtype) if dtype else default))

    def cat(self, ts: Any, dim: int = 0) -> T:
        return T(np.concatenate([unwrap(t) for t in ts], axis=dim))

    def stack(self, ts: Any, dim: int = 0) -> T:
        return T(np.stack([unwrap(t) for t in ts], axis=dim))

    def topk(self, t: T, k: int, dim: int = -1, **_: Any) -> tuple[T, T]:
        idx = np.argsort(-t.a.astype(np.float32), axis=dim, kind="stable")
        idx = np.take(idx, range(k), axis=dim)
        return T(np.take_along_axis(t.a, idx, dim)), T(idx.astype(np.int64))

    def manual_seed(self, *_: Any) -> None:
        return None

    def no_grad(self) -> Any:
        import contextlib

        return contextlib.nullcontext()

    inference_mode = no_grad

    def __getattr__(self, name: str) -> Any:
        raise Unsupported(f"torch.{name}")


class _Anything:
    def __init__(self, path: str) -> None:
        self.path = path

    def __getattr__(self, name: str) -> Any:
        raise Unsupported(f"{self.path}.{name}")


class _Ops:
    def __init__(self, npu_ops: TorchNpu) -> None:
        self.npu = npu_ops

    def __getattr__(self, name: str) -> Any:
        raise Unsupported(f"torch.ops.{name}")


class TorchNpu:
    """``torch_npu``: operators with a reference run it; other operators are unsupported,
    and a name that is no operator at all is an error (a wrong call path)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def npu_format_cast(self, t: T, *_: Any, **__: Any) -> T:
        return t  # a format is a layout tag numpy arrays do not carry

    def __getattr__(self, name: str) -> Any:
        if name not in reference.available():
            try:
                reference.record(name)
            except reference.ReferenceInputError as exc:
                if "no operator record" in str(exc):
                    raise AttributeError(f"torch_npu has no operator {name!r}") from None
            raise Unsupported(f"torch_npu.{name}")

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return wrap(
                reference.run(name, *unwrap(args), **{k: unwrap(v) for k, v in kwargs.items()})
            )

        return call


def execute(code: str) -> list[str]:
    """Run an example; the operators it called through the reference."""
    npu = TorchNpu()
    torch = Torch(npu)
    namespace: dict[str, Any] = {"torch": torch, "torch_npu": npu, "__name__": "example"}
    lines = [
        ln for ln in code.splitlines() if not ln.startswith(("import torch", "import torch_npu"))
    ]
    try:
        exec(compile("\n".join(lines), "<example>", "exec"), namespace)
    except NameError as exc:  # a module the shim does not stand in for (torch.nn.functional as F)
        raise Unsupported(str(exc)) from exc
    return npu.calls

"""What a program reads back from the emulated device, where kernels never ran.

Kernels do not run under emulation, so device memory holds no computed
values, and a program whose work depends on them (a mixture of experts that
sizes each expert's batch from token counts copied to the host, a sparse
optimizer that updates the rows a gradient coalesces to) would take the zero
path and skip that work.  For the data-dependent operations whose result has
a natural expected value, the emulated one gets it, and says so:

- ``bincount`` with ``minlength`` and ``histc`` with a range (token counts
  per expert): the inputs drawn uniformly over the bins, the design point of
  a load-balanced router, whose counts still vary from step to step (and
  with them the shapes of the GEMMs they size, which the GPU server's host
  pays for: ``maya.predictor.replay.host``).  The draws are seeded, the same
  in every emulation of a program.  The counts are written into the result's device
  memory (device pointers are real addresses under emulation, and small copies
  to the host read them back), so ``.tolist()`` and ``.item()`` see them.
  ``bincount`` of values known here (below) counts them.
- ``coalesce`` of a sparse tensor (a sparse gradient of embedding rows): its
  entries' indices drawn uniformly, so as many distinct rows as that many
  uniform draws give on average.
- ``topk`` and ``argmax`` over a last dimension of at most ``ROUTER_WIDTH``
  (a router's choice of experts): each row's ``k`` indices are ``k``
  consecutive columns (modulo the width) from one drawn uniformly, so every
  column is chosen equally often on average, by counts that vary from call to
  call.  Values computed from such known ones by a few cheap operations
  (``one_hot``, ``sum``, ``cumsum``, ``scatter``, comparisons, casts,
  indexing; ``zeros_like``/``ones_like``/``new_zeros``/``new_ones`` made
  while known values exist are known;
  an in-place change of a known tensor is made on the host too, or the
  tensor is known no longer) are
  computed on the host from the same memory and written into the result, so
  a router's mask, its per-expert counts and ``nonzero``/``torch.where`` of
  them (which size each expert's batch) come out as such a router's.
  ``nonzero`` of known values launches what the real one does (a count, a
  blocking copy of it to the host, the output's write) and returns the
  indices computed on the host.
- ``torch.nn.utils.rnn.invert_permutation`` (a packed batch's order, sorted
  by length on the host): its inverse computed on the host from the order's
  values, which a copy from the host made real.

The host work of all this is left out of the trace clock (the interposer's
``maya_hook_pause``; ``summary.json``'s ``hook_seconds`` holds its total), so
it does not count as the program's.

Other reads of integer or boolean device values still see zeros; those made
by ``.tolist()``, ``nonzero``, ``torch.where(mask)``, ``argwhere`` and
``masked_select`` are counted by the line of the program that
made them, so ``maya emulate`` can say where the prediction may miss work.
``.item()``, ``bool()`` and ``int()`` are left alone: they run on hot paths
(an optimizer reads every parameter's step count with ``.item()``), where a
wrapper's own time would be taken for the program's host time.

Installed by the start-up hook only under the emulating interposer (never in
record mode), after ``torch`` is imported.  Each wrapper returns the
operation's own result when anything about its inputs is not as expected.
"""

from __future__ import annotations

import ctypes
import math
import os
import sys
import warnings
import weakref
from collections import Counter
from typing import Any

# (kind, program line) -> count; written into the rank's torch report at exit
assumed: Counter = Counter()
unknown: Counter = Counter()

_TORCH_DIR = ""
_compiling: Any = bool  # torch.compiler.is_compiling once installed: torch.compile traces the bare operations
_THIS = os.path.abspath(__file__)
_INTEGRAL = ()  # torch dtypes read as sizes or indices, filled in by install()


def _site() -> str:
    """The program's line that led here: the first frame outside torch and this module."""
    f = sys._getframe(2)
    while f is not None:
        name = f.f_code.co_filename
        if not (name.startswith(_TORCH_DIR) or os.path.abspath(name) == _THIS):
            return f"{os.path.basename(name)}:{f.f_lineno}"
        f = f.f_back
    return "?"


_known: dict[int, int] = {}  # start -> end of the device storages whose values this module wrote
_pause: Any = None  # the interposer's maya_hook_pause: host work of ours left out of the trace clock
_torch: Any = None


class _Untimed:
    """Leaves the host time inside it out of the trace clock (while no other thread makes a call)."""

    def __enter__(self) -> None:
        if _pause is not None:
            _pause(1)

    def __exit__(self, *exc: Any) -> None:
        if _pause is not None:
            _pause(0)


_untimed = _Untimed()


def _is_known(t: Any) -> bool:
    """Whether the device tensor ``t``'s values were written here (it may be a view of such a tensor).  By its
    storage, in one look-up: the wrappers that ask run among the program's own host work, where a scan of
    every known storage (a router's indices, kept for the backward, are dozens) counted as the program's."""
    if not _known or not isinstance(t, _torch.Tensor) or not t.is_cuda:
        return False
    try:
        return t.untyped_storage().data_ptr() in _known
    except RuntimeError:  # no storage: a sparse tensor
        return False


def _remember(t: Any) -> None:
    """Mark ``t``'s storage as holding known values, and zero it again once the storage is freed: the caching
    allocator hands the block to later tensors, and their own reads (``bincount`` reads its input's largest
    value to size its result) would see these values where a kernel's output reads as zeros."""
    storage = t.untyped_storage()
    start, size = storage.data_ptr(), storage.nbytes()
    if size and start not in _known:
        _known[start] = start + size
        weakref.finalize(storage, _forget, start, size)
        if not _armed:
            _arm(True)


def _forget(address: int, size: int) -> None:
    with _untimed:
        ctypes.memset(address, 0, size)
        _known.pop(address, None)
        if not _known and _armed:
            _arm(False)


# Tensor methods that carry known values on (indexing, casts, sums, comparisons) are wrapped only while
# known values exist: they run on hot paths of every program, where a wrapper's time would count as its own.
_armed = False
_methods: list = []  # (name, the method as found, its wrapper, whether Tensor's own __dict__ held it)


def _arm(on: bool) -> None:
    global _armed
    T = _torch.Tensor
    for name, found, wrapper, own in _methods:
        if on:
            setattr(T, name, wrapper)
        elif own:
            setattr(T, name, found)
        else:
            delattr(T, name)
    _armed = on


def _alias(t: Any) -> Any:
    """A host tensor over the emulated device tensor ``t``'s memory (device pointers are host addresses here)."""
    storage = t.untyped_storage()
    raw = (ctypes.c_char * storage.nbytes()).from_address(storage.data_ptr())
    flat = _torch.frombuffer(raw, dtype=_torch.uint8).view(t.dtype)
    return flat.as_strided(t.shape, t.stride(), t.storage_offset())


def _write(t: Any, values: Any) -> None:
    """Write host ``values`` into the device tensor ``t`` and mark it known."""
    _alias(t).copy_(values)
    _remember(t)


DRAWS_SEED = 20261128  # the draws below: the same in every emulation of a program, so its answers agree
UNIFORM_DRAWS = 1 << 24  # the most items drawn one by one; more are spread evenly (their counts barely vary)
_generator: Any = None


def _draws() -> Any:
    """The seeded generator of the values this module draws (one per rank: ranks route other tokens)."""
    global _generator
    if _generator is None:
        _generator = _torch.Generator().manual_seed(DRAWS_SEED + int(os.environ.get("RANK", "0") or 0))
    return _generator


def _counts(n: int, bins: int) -> Any:
    """How many of ``n`` items fall in each of ``bins`` bins, each item drawn uniformly: a balanced router's
    counts, which vary from call to call (step to step) as a real router's do."""
    if n <= UNIFORM_DRAWS:
        return _torch.bincount(_torch.randint(bins, (n,), generator=_draws()), minlength=bins)
    return _torch.tensor([n // bins + (1 if i < n % bins else 0) for i in range(bins)])


def _spread(result: Any, n: int, kind: str) -> None:
    """Fill a count per bin with ``n`` items drawn uniformly over the bins."""
    with _untimed:
        _write(result, _counts(n, result.numel()).view(result.shape))
    assumed[(kind, _site())] += 1


def _counted(input: Any, bins: int) -> Any:
    """The host's bincount of known values (a router's choice) into ``bins`` bins, the size the emulated one
    took from their largest value, as on a GPU; None where the values are unknown or do not fit."""
    if not _is_known(input):
        return None
    with _untimed:
        try:
            counts = _torch.bincount(_alias(input).flatten(), minlength=bins)
        except Exception:  # noqa: BLE001 - not countable (negative, not integral): drawn instead
            return None
    return counts if counts.numel() == bins else None


def _wrap_bincount(original: Any) -> Any:
    def bincount(input: Any, weights: Any = None, minlength: int = 0) -> Any:
        result = original(input, weights, minlength)
        if getattr(input, "is_cuda", False) and not _compiling():
            counted = _counted(input, result.numel()) if weights is None else None
            if counted is not None:
                with _untimed:
                    _write(result, counted)
            elif weights is None and minlength > 0:
                # sized by the input's largest value, which is no kernel's output here: minlength bins
                result = result[:minlength]
                _spread(result, input.numel(), "bincount")
            else:
                unknown[("bincount", _site())] += 1
        return result
    return bincount


def _wrap_histc(original: Any) -> Any:
    def histc(input: Any, bins: int = 100, min: float = 0, max: float = 0, **kw: Any) -> Any:  # noqa: A002
        result = original(input, bins=bins, min=min, max=max, **kw)
        if getattr(input, "is_cuda", False) and not _compiling():
            if min < max and not kw:
                _spread(result, input.numel(), "histc")
            else:
                unknown[("histc", _site())] += 1
        return result
    return histc


def distinct_draws(n: int, rows: int) -> int:
    """Expected number of distinct rows among ``n`` uniform draws from ``rows``: rows * (1 - (1 - 1/rows)**n)."""
    if rows <= 0 or n <= 0:
        return 0
    if rows == 1:
        return 1
    return min(n, rows, round(-rows * math.expm1(n * math.log1p(-1.0 / rows))))


def _wrap_coalesce(original: Any, torch: Any) -> Any:
    def coalesce(self: Any) -> Any:
        if _compiling() or not (self.is_cuda and self.layout == torch.sparse_coo) or self.is_coalesced():
            return original(self)
        # Not the operation itself: its host side reads the number of distinct entries back from the device,
        # where this memory holds no count (zeros, or whatever an earlier tensor left: 2**30 entries once).
        try:
            n, sparse_dims = self._nnz(), self.sparse_dim()
            m = distinct_draws(n, math.prod(self.shape[:sparse_dims]))
            indices, values = self._indices(), self._values()
            # what CUDA's coalesce launches: a sort of the n indices, and a sum of their values into m rows
            _, order = indices[0].sort()
            summed = torch.zeros((m, *values.shape[1:]), dtype=values.dtype, device=self.device)
            summed.index_add_(0, order, values)
            kept = torch.empty((sparse_dims, m), dtype=torch.int64, device=self.device)
            # zeros, as memory no kernel wrote reads: ``empty`` may hold an earlier tensor's values, and
            # the sparse kernels' host side sizes some results from the indices' largest one
            ctypes.memset(kept.data_ptr(), 0, kept.numel() * kept.element_size())
            with warnings.catch_warnings():  # "invariant checks are implicitly disabled": the indices are ours
                warnings.simplefilter("ignore")
                out = torch.sparse_coo_tensor(kept, summed, self.shape, is_coalesced=True, check_invariants=False)
            assumed[("coalesce", _site())] += 1
            return out
        except Exception:  # noqa: BLE001 - the operation as it is
            unknown[("coalesce", _site())] += 1
            return original(self)
    return coalesce


ROUTER_WIDTH = 4096  # the widest last dimension whose topk / argmax is taken as a router's choice
ROUTER_K = 16
PROPAGATED_ELEMENTS = 1 << 24  # the largest result computed on the host from known values


def _route(indices: Any, width: int, k: int, kind: str) -> None:
    """Each row's ``k`` indices become ``k`` consecutive columns (modulo ``width``) from one drawn uniformly:
    every column chosen equally often on average, by counts that vary from call to call."""
    with _untimed:
        first = _torch.randint(width, (indices.numel() // k, 1), generator=_draws())
        _write(indices, (first + _torch.arange(k)).remainder_(width).view(indices.shape))
    assumed[(kind, _site())] += 1


def _router_input(input: Any, dim: Any) -> bool:
    return (getattr(input, "is_cuda", False) and input.is_floating_point() and input.dim() >= 1
            and dim in (-1, input.dim() - 1) and 1 < input.shape[-1] <= ROUTER_WIDTH and not _compiling())


def _wrap_topk(original: Any) -> Any:
    def topk(input: Any, k: int, dim: int = -1, *args: Any, **kwargs: Any) -> Any:
        result = original(input, k, dim, *args, **kwargs)
        if _router_input(input, dim) and k <= ROUTER_K and "out" not in kwargs:
            try:
                _route(result.indices, input.shape[-1], k, "topk")
            except Exception:  # noqa: BLE001 - the operation's own result
                pass
        return result
    return topk


def _wrap_argmax(original: Any) -> Any:
    def argmax(input: Any, dim: Any = None, keepdim: bool = False, **kwargs: Any) -> Any:
        result = original(input, dim, keepdim, **kwargs)
        if dim is not None and _router_input(input, dim) and "out" not in kwargs:
            try:
                _route(result, input.shape[-1], 1, "argmax")
            except Exception:  # noqa: BLE001
                pass
        return result
    return argmax


def _on_host(x: Any) -> Any:
    """A known device tensor's host alias; other arguments as they are (nested in tuples and lists)."""
    if isinstance(x, _torch.Tensor):
        return _alias(x)
    if isinstance(x, (tuple, list)):
        return type(x)(_on_host(v) for v in x)
    return x


def _tensors(x: Any) -> list:
    if isinstance(x, _torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for v in x for t in _tensors(v)]
    return []


def _wrap_propagating(original: Any, cast: bool = False) -> Any:
    """An operation that gives known values from known ones: the result is computed on the host too, from the
    same memory, and written into the device result.  ``cast``: a dtype conversion (``.to``, ``.int()``, ...),
    computed as a conversion to the result's dtype whatever its arguments (a device among them)."""
    def propagating(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        if not _known or not getattr(result, "is_cuda", False) or _compiling():
            return result
        with _untimed:
            try:
                inputs = _tensors(args) + _tensors(list(kwargs.values()))
                if (inputs and result.numel() <= PROPAGATED_ELEMENTS and all(_is_known(t) for t in inputs)
                        and not _is_known(result)):
                    host = (_alias(inputs[0]).to(result.dtype) if cast
                            else original(*_on_host(args), **{k: _on_host(v) for k, v in kwargs.items()}))
                    if isinstance(host, _torch.Tensor) and not host.is_cuda and host.shape == result.shape:
                        _write(result, host)
            except Exception:  # noqa: BLE001 - the result stays unknown
                pass
        return result
    return propagating


def _wrap_in_place(original: Any) -> Any:
    """An in-place operation on a known tensor: done on the host too when its other tensors are known, else the
    tensor is known no longer (a kernel that never ran would have changed it)."""
    def in_place(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        if not _known or _compiling() or not _is_known(self):
            return result
        with _untimed:
            try:
                others = _tensors(args) + _tensors(list(kwargs.values()))
                if all(_is_known(t) for t in others):
                    original(_alias(self), *_on_host(args), **{k: _on_host(v) for k, v in kwargs.items()})
                    return result
            except Exception:  # noqa: BLE001 - then it is unknown
                pass
            _known.pop(self.untyped_storage().data_ptr(), None)
        return result
    return in_place


ZEROED_ELEMENTS = 1 << 22  # the largest filled tensor made known (its memory is written on the host)


def _wrap_fill(original: Any, value: int) -> Any:
    """``zeros_like``, ``ones_like``, ``new_zeros``, ``new_ones`` while known values exist: the tensor is filled on
    the host and known, as a router's map that the choice is scattered into (``zeros_like(...).scatter(1, topk,
    1)``) must be; the fill kernel never runs, so the memory may hold an earlier tensor's values."""
    def fill(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        if (_known and getattr(result, "is_cuda", False) and not _compiling()
                and 0 < result.numel() <= ZEROED_ELEMENTS and not _is_known(result)):
            with _untimed:
                try:
                    _alias(result).fill_(value)
                    _remember(result)
                except Exception:  # noqa: BLE001 - the result stays unknown
                    pass
        return result
    return fill


def _known_nonzero(input: Any, as_tuple: bool) -> Any:
    """``nonzero`` of known values: what the device does (a count, a blocking copy of it to the host, the write
    of the indices), with the indices computed on the host.  The real operation would size its output from a
    count no kernel computed.  The indices are laid out as CUDA's ``nonzero`` lays them out, one row per
    dimension, transposed: ``torch.where``'s index tensors are then contiguous, and what indexes with them
    (a gather, ``index_add_``) launches the kernels it does on a GPU."""
    with _untimed:
        found = _torch.nonzero(_alias(input))
    count = _torch.count_nonzero(input)
    count.cpu()
    out = _torch.zeros((found.shape[1], found.shape[0]), dtype=_torch.int64, device=input.device)
    with _untimed:
        _write(out, found.t())
    out = out.t()
    assumed[("nonzero", _site())] += 1
    return out.unbind(1) if as_tuple else out


def _wrap_nonzero(original: Any) -> Any:
    def nonzero(input: Any, *args: Any, as_tuple: bool = False, **kwargs: Any) -> Any:
        if not args and not kwargs and _is_known(input) and not _compiling():
            return _known_nonzero(input, as_tuple)
        if getattr(input, "is_cuda", False) and not _compiling():
            unknown[("nonzero", _site())] += 1
        return original(input, *args, as_tuple=as_tuple, **kwargs)
    return nonzero


def _wrap_where(original: Any) -> Any:
    def where(*args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and getattr(args[0], "is_cuda", False) and not _compiling():
            if _is_known(args[0]):
                return _known_nonzero(args[0], as_tuple=True)
            unknown[("where", _site())] += 1
        return original(*args, **kwargs)
    return where


def _wrap_argwhere(original: Any) -> Any:
    def argwhere(input: Any) -> Any:
        if _is_known(input) and not _compiling():
            return _known_nonzero(input, as_tuple=False)
        if getattr(input, "is_cuda", False) and not _compiling():
            unknown[("argwhere", _site())] += 1
        return original(input)
    return argwhere


def _wrap_invert_permutation(original: Any) -> Any:
    """``pack_padded_sequence(..., enforce_sorted=False)`` sorts a batch's lengths on the host, copies the order
    to the device and inverts it there (a scatter of an ``arange``, neither of which runs here); the padded
    output's order and ``pad_packed_sequence``'s lengths are read with the inverse, which would hold whatever
    the memory held (an index out of range).  The order's values are real (copied from the host), so the
    inverse is computed from them on the host and written into the result, after the operation's own launches;
    an order that is no permutation (computed by kernels that did not run) is taken as the identity, and
    counted."""
    def invert_permutation(permutation: Any) -> Any:
        out = original(permutation)
        if out is None or _compiling() or not getattr(out, "is_cuda", False) or out.dim() != 1:
            return out
        with _untimed:
            try:
                order = _alias(permutation).clone()
                n = order.numel()
                inverse = _torch.arange(n, dtype=order.dtype)
                if bool(((order >= 0) & (order < n)).all()) and order.unique().numel() == n:
                    inverse[order] = _torch.arange(n, dtype=order.dtype)
                else:
                    assumed[("invert_permutation", _site())] += 1
                _alias(out).copy_(inverse)
            except Exception:  # noqa: BLE001 - the operation's own result
                unknown[("invert_permutation", _site())] += 1
        return out
    return invert_permutation


def _wrap_tolist(original: Any) -> Any:
    """A host read of device values: counted as unknown when integral and not written by an assumption."""
    def tolist(self: Any) -> Any:
        if self.is_cuda and self.dtype in _INTEGRAL and not _is_known(self) and not _compiling():
            unknown[(".tolist()", _site())] += 1
        return original(self)
    return tolist


def _wrap_sized(original: Any, kind: str) -> Any:
    """An operation whose result's size the device values decide: counted as unknown on the device."""
    def sized(*args: Any, **kwargs: Any) -> Any:
        if args and getattr(args[0], "is_cuda", False) and not _compiling():
            unknown[(kind, _site())] += 1
        return original(*args, **kwargs)
    return sized


def _replace(owner: Any, name: str, wrap: Any) -> None:
    """``owner.name`` becomes ``wrap(owner.name)``, and TorchScript compiles a call of the wrapper as the
    operation it wraps (it finds torch's operations by identity: a script calling ``torch.where`` would
    otherwise try to compile the wrapper, and fail)."""
    original = getattr(owner, name)
    wrapper = wrap(original)
    setattr(owner, name, wrapper)
    try:
        builtins = _torch.jit._builtins
        op = builtins._find_builtin(original)
        if op is not None:
            builtins._register_builtin(wrapper, op)
    except Exception:  # noqa: BLE001 - TorchScript's private table: only scripts that call it are affected
        pass


def install(torch: Any) -> None:
    """Wrap torch's data-dependent operations (called once, right after ``import torch``)."""
    global _TORCH_DIR, _INTEGRAL, _compiling, _torch, _pause
    _torch = torch
    _compiling = torch.compiler.is_compiling
    try:
        _pause = ctypes.PyDLL(None).maya_hook_pause  # PyDLL keeps the GIL: it only takes a lock
        _pause.argtypes, _pause.restype = [ctypes.c_int], None
    except (OSError, AttributeError):
        _pause = None
    _TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
    _INTEGRAL = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool)
    T = torch.Tensor
    F = torch.nn.functional
    _replace(torch, "bincount", _wrap_bincount)
    T.bincount = _wrap_bincount(T.bincount)
    _replace(torch, "histc", _wrap_histc)
    T.histc = _wrap_histc(T.histc)
    T.coalesce = _wrap_coalesce(T.coalesce, torch)
    # Not .item(), bool() or int(): optimizers call .item() on every parameter's step count, and a wrapper's
    # cost there would land in the emulated host delays (device_reads still counts those reads).
    T.tolist = _wrap_tolist(T.tolist)
    # Not torch.unique: TorchScript compiles it from its Python source, and a wrapper's would not compile.
    _replace(torch, "masked_select", lambda f: _wrap_sized(f, "masked_select"))
    T.masked_select = _wrap_sized(T.masked_select, "masked_select")
    _replace(torch, "nonzero", _wrap_nonzero)
    T.nonzero = _wrap_nonzero(T.nonzero)
    _replace(torch, "argwhere", _wrap_argwhere)
    T.argwhere = _wrap_argwhere(T.argwhere)
    _replace(torch, "where", _wrap_where)
    rnn = torch.nn.utils.rnn  # PackedSequence finds invert_permutation here
    rnn.invert_permutation = _wrap_invert_permutation(rnn.invert_permutation)
    # a router's choice, and what a router's mask, counts and offsets are computed with
    _replace(torch, "topk", _wrap_topk)
    T.topk = _wrap_topk(T.topk)
    _replace(torch, "argmax", _wrap_argmax)
    T.argmax = _wrap_argmax(T.argmax)
    _replace(F, "one_hot", _wrap_propagating)
    for name in ("sum", "cumsum", "scatter", "gt", "greater", "ge", "greater_equal", "lt", "less", "le",
                 "less_equal", "eq", "ne", "not_equal"):
        _replace(torch, name, _wrap_propagating)
    # Not torch.zeros and torch.ones: ``with torch.device(...)`` finds its factory functions by identity.
    for name, value in (("zeros_like", 0), ("ones_like", 1)):
        _replace(torch, name, lambda f, v=value: _wrap_fill(f, v))
    for name in ("sum", "cumsum", "scatter", "gt", "greater", "ge", "greater_equal", "lt", "less", "le",
                 "less_equal", "eq", "ne", "not_equal", "__gt__", "__ge__", "__lt__", "__le__", "__eq__", "__ne__",
                 "__getitem__", "to", "int", "long", "bool", "float", "new_zeros", "new_ones"):
        found = getattr(T, name)
        wrapper = (_wrap_fill(found, int(name == "new_ones")) if name.startswith("new_")
                   else _wrap_propagating(found, cast=name in ("to", "int", "long", "bool", "float")))
        _methods.append((name, found, wrapper, name in T.__dict__))
    for name in ("scatter_", "scatter_add_", "index_add_", "add_", "masked_fill_", "index_put_", "copy_", "fill_",
                 "zero_", "__setitem__"):
        found = getattr(T, name)
        _methods.append((name, found, _wrap_in_place(found), name in T.__dict__))


ASSUMED_AS = {
    "bincount": "counts of items drawn uniformly over the bins",
    "histc": "counts of items drawn uniformly over the bins",
    "coalesce": "rows drawn uniformly (as many distinct rows as uniform draws give)",
    "topk": "each row's k columns drawn uniformly, a router balanced on average",
    "argmax": "each row's column drawn uniformly, a router balanced on average",
    "nonzero": "computed from values known here (a router's drawn choice)",
    "invert_permutation": "the identity: the order's values were not copied from the host",
}


def report() -> dict:
    """The counts for the rank's torch report, by operation and program line (the 20 most frequent of each)."""
    return {"assumed": [{"operation": k, "where": w, "count": n, "as": ASSUMED_AS[k]}
                        for (k, w), n in assumed.most_common(20)],
            "unknown": [{"operation": k, "where": w, "count": n} for (k, w), n in unknown.most_common(20)]}

"""What a program reads back from the emulated device, where kernels never ran.

Kernels do not run under emulation, so device memory holds no computed
values, and a program whose work depends on them (a mixture of experts that
sizes each expert's batch from token counts copied to the host, a sparse
optimizer that updates the rows a gradient coalesces to) would take the zero
path and skip that work.  For the data-dependent operations whose result has
a natural expected value, the emulated one gets it, and says so:

- ``bincount`` with ``minlength`` and ``histc`` with a range (token counts
  per expert): the inputs spread evenly over the bins, the design point of a
  load-balanced router.  The counts are written into the result's device
  memory (device pointers are real addresses under emulation, and small copies
  to the host read them back), so ``.tolist()`` and ``.item()`` see them.
- ``coalesce`` of a sparse tensor (a sparse gradient of embedding rows): its
  entries' indices drawn uniformly, so as many distinct rows as that many
  uniform draws give on average.

Other reads of integer or boolean device values still see zeros; those made
by ``.tolist()``, ``nonzero``, ``torch.where(mask)``, ``argwhere``,
``unique`` and ``masked_select`` are counted by the line of the program that
made them, so ``maya emulate`` can say where the prediction may miss work.
``.item()``, ``bool()`` and ``int()`` are left alone: they run on hot paths
(an optimizer reads every parameter's step count with ``.item()``), where a
wrapper's own time would be taken for the program's host time.

Installed by the start-up hook only under the emulating interposer (never in
record mode), after ``torch`` is imported.  Each wrapper returns the
operation's own result when anything about its inputs is not as expected.
"""

from __future__ import annotations

import array
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


_known: set[int] = set()  # device addresses whose values an assumption wrote


def _poke(tensor: Any, values: list, typecode: str) -> None:
    """Write ``values`` into a contiguous emulated device tensor's memory (its address is a host one),
    and zero it again when the tensor is freed: the caching allocator hands the block to later tensors,
    and their own reads (``bincount`` reads its input's largest value to size its result) would see
    these values where a kernel's output reads as zeros."""
    buf = array.array(typecode, values)
    address, size = tensor.data_ptr(), len(buf) * buf.itemsize
    ctypes.memmove(address, buf.buffer_info()[0], size)
    _known.add(address)
    weakref.finalize(tensor, _forget, address, size)


def _forget(address: int, size: int) -> None:
    ctypes.memset(address, 0, size)
    _known.discard(address)


def _even(total: int, bins: int) -> list[int]:
    return [total // bins + (1 if i < total % bins else 0) for i in range(bins)]


_TYPECODES = {(False, 8): "q", (False, 4): "i", (True, 4): "f", (True, 8): "d"}


def _spread(result: Any, n: int, kind: str) -> None:
    """Fill a count per bin with ``n`` items spread evenly, or leave it and count the read as unknown."""
    code = _TYPECODES.get((result.is_floating_point(), result.element_size()))
    if code is None:
        unknown[(kind, _site())] += 1
        return
    counts = _even(n, result.numel())
    _poke(result, [float(c) for c in counts] if code in "fd" else counts, code)
    assumed[(kind, _site())] += 1


def _wrap_bincount(original: Any) -> Any:
    def bincount(input: Any, weights: Any = None, minlength: int = 0) -> Any:
        result = original(input, weights, minlength)
        if getattr(input, "is_cuda", False) and not _compiling():
            if weights is None and minlength > 0:
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


def _wrap_tolist(original: Any) -> Any:
    """A host read of device values: counted as unknown when integral and not written by an assumption."""
    def tolist(self: Any) -> Any:
        if self.is_cuda and self.dtype in _INTEGRAL and self.data_ptr() not in _known and not _compiling():
            unknown[(".tolist()", _site())] += 1
        return original(self)
    return tolist


def _wrap_sized(original: Any, kind: str, first_only: bool = False) -> Any:
    """An operation whose result's size the device values decide: counted as unknown on the device."""
    def sized(*args: Any, **kwargs: Any) -> Any:
        if ((not first_only or len(args) + len(kwargs) == 1) and args and getattr(args[0], "is_cuda", False)
                and not _compiling()):
            unknown[(kind, _site())] += 1
        return original(*args, **kwargs)
    return sized


def install(torch: Any) -> None:
    """Wrap torch's data-dependent operations (called once, right after ``import torch``)."""
    global _TORCH_DIR, _INTEGRAL, _compiling
    _compiling = torch.compiler.is_compiling
    _TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
    _INTEGRAL = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool)
    T = torch.Tensor
    torch.bincount = _wrap_bincount(torch.bincount)
    T.bincount = _wrap_bincount(T.bincount)
    torch.histc = _wrap_histc(torch.histc)
    T.histc = _wrap_histc(T.histc)
    T.coalesce = _wrap_coalesce(T.coalesce, torch)
    # Not .item(), bool() or int(): optimizers call .item() on every parameter's step count, and a wrapper's
    # cost there would land in the emulated host delays (device_reads still counts those reads).
    T.tolist = _wrap_tolist(T.tolist)
    for name in ("nonzero", "argwhere", "masked_select", "unique", "unique_consecutive"):
        setattr(torch, name, _wrap_sized(getattr(torch, name), name))
    for name in ("nonzero", "argwhere", "masked_select"):  # Tensor.unique calls torch.unique
        setattr(T, name, _wrap_sized(getattr(T, name), name))
    torch.where = _wrap_sized(torch.where, "where", first_only=True)


ASSUMED_AS = {
    "bincount": "counts spread evenly over the bins",
    "histc": "counts spread evenly over the bins",
    "coalesce": "rows drawn uniformly (as many distinct rows as uniform draws give)",
}


def report() -> dict:
    """The counts for the rank's torch report, by operation and program line (the 20 most frequent of each)."""
    return {"assumed": [{"operation": k, "where": w, "count": n, "as": ASSUMED_AS[k]}
                        for (k, w), n in assumed.most_common(20)],
            "unknown": [{"operation": k, "where": w, "count": n} for (k, w), n in unknown.most_common(20)]}

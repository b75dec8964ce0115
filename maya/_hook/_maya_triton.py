"""What an Inductor Triton kernel moves, worked out from its source, for the trace (emulation only).

A Triton kernel's launch says how many programs run, not how much each one reads: a persistent
reduction over rows of 4096 launches as many programs as one over rows of 64, and its sizes are
constants compiled into the kernel.  Inductor writes them in the kernel's source (``xnumel = 8192``,
``r0_numel = 1024``), each load and store with the index it reads (``tl.load(in_ptr0 + (r0_1 +
1024*x0))``), and the pointers' element types in ``triton_meta['signature']``.  So before a kernel's
first launch, the hook gives the interposer six facts (``maya_kernel_facts``), which its launches
record as their integer arguments (emulation-image/TRACE_FORMAT.md):

    (elements of the x dimensions, of the reduction dimensions, bytes loaded, bytes stored,
     loads, stores)

Each pointer counts once, with its widest access: an index's extent is the product of its
variables' extents per dimension (a variable ``xindex % 1024`` spans 1024, ``xindex // 1024`` the
rest), at most that dimension's size.  A gather (an index computed from a loaded value) reads one
element per element of the dimensions it runs over; reuse through the caches is not modelled.  Dynamic sizes are taken from the first call's
arguments.
"""

from __future__ import annotations

import ctypes
import math
import re
import sys
from typing import Any

FACTS = 6
_ELEMENT_BYTES = {"fp64": 8, "i64": 8, "u64": 8, "fp32": 4, "i32": 4, "u32": 4, "tf32": 4, "fp16": 2, "bf16": 2,
                  "i16": 2, "u16": 2}  # anything else (i1, i8, u8, fp8 kinds) is one byte
_NUMEL = re.compile(r"^\s*(x|y|z|r0_|r1_|r)numel\s*=\s*(\d+)\s*$", re.M)
_INDEX = re.compile(r"\b(xindex|yindex|zindex|r0_index|r1_index|rindex)\b")
_VARIABLE = re.compile(r"^\s*([A-Za-z_]\w*)\s*=\s*(.+)$", re.M)
_ACCESS = re.compile(r"tl\.(load|store)\(\s*([A-Za-z_]\w*)\s*\+")
_WORD = re.compile(r"[A-Za-z_]\w*")
_DIMENSION = {"xindex": "x", "yindex": "y", "zindex": "z", "r0_index": "r0_", "r1_index": "r1_", "rindex": "r0_"}


def _element_bytes(kind: str) -> int:
    kind = kind.lstrip("*").strip()
    return _ELEMENT_BYTES.get(kind, 1)


def _argument(text: str, start: int) -> str:
    """The text from ``start`` up to the first comma or closing bracket at depth zero."""
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                return text[start:i]
            depth -= 1
        elif c == "," and depth == 0:
            return text[start:i]
    return text[start:]


def facts(source: str, signature: dict[str, str], numels: dict[str, int] | None = None) -> tuple[int, ...] | None:
    """The six facts of the kernel in ``source`` (None when its sizes cannot be told).

    ``numels``: sizes the source leaves to the arguments (``{"xnumel": 8192}``)."""
    sizes = {"r0_" if d == "r" else d: int(n) for d, n in _NUMEL.findall(source)}
    for name, value in (numels or {}).items():
        d = name[: -len("numel")]
        sizes.setdefault("r0_" if d == "r" else d, int(value))
    if "x" not in sizes:
        return None
    extents: dict[str, tuple[str, int]] = {}  # index variable -> (dimension, elements it spans)
    for name, expr in _VARIABLE.findall(source):
        found = _INDEX.findall(expr)
        if not found or name in _DIMENSION:
            continue
        dim = _DIMENSION[found[0]]
        total = sizes.get(dim, 1)
        mod = re.search(r"%\s*\(?(\d+)", expr)
        div = re.search(r"//\s*\(?(\d+)", expr)
        extents[name] = (dim, int(mod.group(1)) if mod else math.ceil(total / int(div.group(1))) if div else total)
    for raw, dim in _DIMENSION.items():
        extents[raw] = (dim, sizes.get(dim, 1))
    widest: dict[tuple[str, str], int] = {}
    accesses = {"load": 0, "store": 0}
    for m in _ACCESS.finditer(source):
        kind, pointer = m.group(1), m.group(2)
        accesses[kind] += 1
        per_dim: dict[str, int] = {}
        words = set(_WORD.findall(_argument(source, m.end())))
        for word in words:
            if word in extents:
                dim, n = extents[word]
                per_dim[dim] = per_dim.get(dim, 1) * n
        if any(w.startswith("tmp") for w in words):  # a gather: one element per element of its dimensions
            per_dim = {d: sizes[d] for d in per_dim or ("x",)}
        elements = math.prod(min(n, sizes.get(dim, n)) for dim, n in per_dim.items())
        widest[(kind, pointer)] = max(widest.get((kind, pointer), 0), elements)
    moved = {"load": 0, "store": 0}
    for (kind, pointer), elements in widest.items():
        moved[kind] += elements * _element_bytes(signature.get(pointer, "fp32"))
    x = math.prod(n for d, n in sizes.items() if not d.startswith("r"))
    r = math.prod(n for d, n in sizes.items() if d.startswith("r"))
    return (x, r if any(d.startswith("r") for d in sizes) else 0, moved["load"], moved["store"],
            accesses["load"], accesses["store"])


def _source(autotuner: Any) -> str | None:
    src = getattr(autotuner.fn, "src", None)
    if isinstance(src, str):
        return src
    filename = getattr(autotuner, "filename", None)
    if filename:
        with open(filename, encoding="utf-8") as f:
            return f.read()
    return None


def _kernel_facts(autotuner: Any, args: tuple[Any, ...]) -> tuple[str, tuple[int, ...]] | None:
    name = autotuner.inductor_meta.get("kernel_name") or getattr(autotuner.fn, "__name__", None)
    source = _source(autotuner)
    if not name or source is None:
        return None
    signature = dict(autotuner.triton_meta.get("signature", {}))
    numels = {k: v for k, v in zip(signature, args, strict=False) if k.endswith("numel") and isinstance(v, int)}
    found = facts(source, signature, numels)
    return (name, found) if found else None


def install(heuristics: Any) -> None:
    """Wrap Inductor's kernel launcher (``CachingAutotuner.run``): the facts of each kernel are
    pending in the interposer during its first call, which loads and first launches it."""
    tell = ctypes.PyDLL(None).maya_kernel_facts  # PyDLL keeps the GIL: it only takes a lock
    tell.argtypes, tell.restype = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int64), ctypes.c_int], None
    original = heuristics.CachingAutotuner.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.__dict__.get("_maya_told"):
            return original(self, *args, **kwargs)
        self.__dict__["_maya_told"] = True
        try:
            found = _kernel_facts(self, args)
        except Exception as e:  # the kernel runs on, its launches without facts
            print(f"maya: could not read the sizes of a Triton kernel: {e!r}", file=sys.stderr)
            found = None
        if found is None:
            return original(self, *args, **kwargs)
        name, values = found
        tell(name.encode(), (ctypes.c_int64 * FACTS)(*values), FACTS)
        try:
            return original(self, *args, **kwargs)
        finally:
            tell(None, None, 0)

    heuristics.CachingAutotuner.run = run

"""Reader (and writer, for hand-built test traces) of the Maya binary trace.

The format is defined by ``emulation-image/src/maya.h`` and written by
``emulation-image/src/trace.c``; ``emulation-image/TRACE_FORMAT.md`` documents
it.  A trace is a header followed by 64-byte slots.  A slot whose kind is
``CONT`` (0xFF) continues the head record before it: its bytes 8..63 carry
seven extra 64-bit words (or string text).

Decoding is vectorised: the slots are viewed in place with ``np.frombuffer``
and only string records are visited one by one.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

MAGIC = b"MAYATRC\0"
VERSION = 1
SLOT = 64
CONT_BYTES = 56
CONT_WORDS = CONT_BYTES // 8
HEADER_SIZE = 128


class Kind(enum.IntEnum):
    """Record kinds, mirroring ``enum maya_kind`` in maya.h."""

    STRING = 1
    FUNC = 2
    KERNEL = 3
    MEMCPY = 4
    MEMSET = 5
    MALLOC = 6
    FREE = 7
    STREAM_CREATE = 8
    STREAM_DESTROY = 9
    EVENT_CREATE = 10
    EVENT_DESTROY = 11
    EVENT_RECORD = 12
    STREAM_WAIT_EVENT = 13
    EVENT_QUERY = 14
    EVENT_SYNC = 15
    STREAM_SYNC = 16
    DEVICE_SYNC = 17
    STREAM_QUERY = 18
    HOST_FUNC = 19
    GRAPH_CAPTURE_BEGIN = 20
    GRAPH_CAPTURE_END = 21
    GRAPH_INSTANTIATE = 22
    GRAPH_LAUNCH = 23
    BLAS = 24
    DNN = 25
    COMM_INIT = 26
    COLL = 27
    COMM_DESTROY = 28
    UNSUPPORTED = 29
    NOTE = 30
    SET_DEVICE = 31
    THREAD = 32
    DEVICE_TIME = 33
    APPROXIMATED = 34
    CONT = 0xFF


class Flag(enum.IntFlag):
    """Record flags (byte 1), mirroring maya.h."""

    ASYNC = 1 << 0
    CAPTURED = 1 << 1
    REPLAY = 1 << 2
    FAILED = 1 << 3
    DATA = 1 << 4
    PINNED = 1 << 5


# One 64-byte slot, as ``maya_rec`` lays it out (little endian, no padding).
SLOT_DTYPE = np.dtype(
    [
        ("kind", "u1"),
        ("flags", "u1"),
        ("device", "u1"),
        ("thread", "u1"),
        ("stream", "<u4"),
        ("t_ns", "<u8"),
        ("dur_ns", "<u4"),
        ("a32", "<u4"),
        ("a", "<u8", (5,)),
    ]
)
assert SLOT_DTYPE.itemsize == SLOT

# Header fields after the magic, in trace.c's order: (name, struct code).
_HEADER_FIELDS: tuple[tuple[str, str], ...] = (
    ("version", "I"),
    ("slot_size", "I"),
    ("header_size", "I"),
    ("pid", "I"),
    ("rank", "i"),
    ("local_rank", "i"),
    ("world_size", "i"),
    ("node", "i"),
    ("gpus_per_node", "i"),
    ("num_devices", "I"),
    ("off_cpu_us", "I"),
    ("reserved", "I"),
    ("start_unix_ns", "Q"),
)
_HEADER_STRUCT = struct.Struct("<8s" + "".join(code for _, code in _HEADER_FIELDS) + "64s")
assert _HEADER_STRUCT.size == HEADER_SIZE


class TraceError(ValueError):
    """The file is not a Maya trace this reader understands."""


def _parse_header(data: bytes | bytearray | memoryview) -> dict[str, Any]:
    if len(data) < 24 or bytes(data[:8]) != MAGIC:
        raise TraceError("not a Maya trace (bad magic)")
    if len(data) < _HEADER_STRUCT.size:
        raise TraceError("truncated trace header")
    values = _HEADER_STRUCT.unpack_from(data, 0)
    header: dict[str, Any] = dict(zip((n for n, _ in _HEADER_FIELDS), values[1:-1], strict=True))
    header["gpu_name"] = values[-1].split(b"\0", 1)[0].decode("utf-8", "replace")
    if header["version"] != VERSION:
        raise TraceError(f"trace version {header['version']}, this reader knows {VERSION}")
    if header["slot_size"] != SLOT:
        raise TraceError(f"slot size {header['slot_size']}, expected {SLOT}")
    if header["header_size"] < _HEADER_STRUCT.size:
        raise TraceError(f"header size {header['header_size']} too small")
    return header


@dataclass
class Trace:
    """A decoded trace.

    ``records`` holds the head records only (``SLOT_DTYPE``); ``slot_index[i]``
    is the slot of head record ``i`` in the file, so its continuation slots are
    the ones up to the next head.
    """

    header: dict[str, Any]
    records: np.ndarray
    slot_index: npt.NDArray[np.int64]
    _words: npt.NDArray[np.uint64]  # every slot as 8 little-endian words
    _strings: dict[int, str] = field(default_factory=dict)
    truncated_bytes: int = 0

    def __len__(self) -> int:
        return len(self.records)

    def _cont_range(self, i: int) -> tuple[int, int]:
        start = int(self.slot_index[i]) + 1
        end = int(self.slot_index[i + 1]) if i + 1 < len(self.slot_index) else len(self._words)
        return start, end

    def ext(self, i: int) -> npt.NDArray[np.uint64]:
        """Continuation words of head record ``i`` (seven per slot; the last
        slot is zero-padded, so the meaning of each kind says how many count)."""
        start, end = self._cont_range(i)
        return self._words[start:end, 1:].reshape(-1)

    def string(self, sid: int) -> str:
        """Text of string id ``sid`` ('' for 0; KeyError if never written)."""
        if sid == 0:
            return ""
        return self._strings[int(sid)]

    @property
    def strings(self) -> dict[int, str]:
        return self._strings

    def of_kind(self, *kinds: int) -> npt.NDArray[np.int64]:
        """Indices of head records of the given kinds."""
        return np.flatnonzero(np.isin(self.records["kind"], np.asarray(kinds, dtype=np.uint8)))

    def kind_counts(self) -> dict[str, int]:
        counts = np.bincount(self.records["kind"], minlength=256)
        out: dict[str, int] = {}
        for k in Kind:
            if k is not Kind.CONT and counts[k]:
                out[k.name] = int(counts[k])
        return out

    @property
    def span_ns(self) -> int:
        """Host time from the first record's start to the last record's end."""
        if len(self.records) == 0:
            return 0
        ends = self.records["t_ns"] + self.records["dur_ns"].astype(np.uint64)
        return int(ends.max() - self.records["t_ns"].min())


def _decode_strings(trace: Trace, raw: npt.NDArray[np.uint8]) -> None:
    slots = raw.reshape(-1, SLOT)
    for i in trace.of_kind(Kind.STRING):
        rec = trace.records[i]
        length = int(rec["a32"])
        start, end = trace._cont_range(int(i))
        nslots = min(end - start, -(-length // CONT_BYTES))
        text = slots[start : start + nslots, 8:].tobytes()[:length]
        trace._strings[int(rec["a"][0])] = text.decode("utf-8", "replace")


def decode(data: bytes | bytearray | memoryview) -> Trace:
    """Decode a whole trace held in memory."""
    header = _parse_header(data)
    hsize = int(header["header_size"])
    body = len(data) - hsize
    truncated = body % SLOT if body > 0 else 0
    nslots = max(body, 0) // SLOT
    raw = np.frombuffer(data, dtype=np.uint8, count=nslots * SLOT, offset=hsize) if nslots else np.zeros(0, np.uint8)
    slots = raw.view(SLOT_DTYPE)
    heads = np.flatnonzero(slots["kind"] != Kind.CONT).astype(np.int64)
    if nslots and (len(heads) == 0 or heads[0] != 0):
        raise TraceError("trace starts with a continuation slot")
    trace = Trace(
        header=header,
        records=slots[heads],
        slot_index=heads,
        _words=raw.view("<u8").reshape(-1, 8),
        truncated_bytes=truncated,
    )
    _decode_strings(trace, raw)
    return trace


def read_trace(path: str | Path) -> Trace:
    """Read and decode the trace file at ``path``."""
    with open(path, "rb") as f:
        data = f.read()
    return decode(data)


def name_of(value: int) -> str:
    """Kind name for display (``KIND_<n>`` for unknown kinds)."""
    try:
        return Kind(value).name
    except ValueError:
        return f"KIND_{value}"


# ---------------------------------------------------------------- writing


class TraceWriter:
    """Builds a trace in memory, in exactly the layout trace.c writes.

    Meant for tests and benchmarks::

        w = TraceWriter(rank=0, gpu_name="H100-SXM-80GB")
        sid = w.string("ampere_sgemm")
        w.record(Kind.KERNEL, t_ns=10, a=[sid, 1, 1, 1, 0], ext=[128, 1, 1])
        w.write(path)
    """

    def __init__(self, **header: Any) -> None:
        self.header: dict[str, Any] = {
            "version": VERSION,
            "slot_size": SLOT,
            "header_size": HEADER_SIZE,
            "pid": 0,
            "rank": 0,
            "local_rank": 0,
            "world_size": 1,
            "node": 0,
            "gpus_per_node": 8,
            "num_devices": 1,
            "off_cpu_us": 0,
            "reserved": 0,
            "start_unix_ns": 0,
            "gpu_name": "",
        }
        unknown = set(header) - set(self.header)
        if unknown:
            raise TypeError(f"unknown header fields: {sorted(unknown)}")
        self.header.update(header)
        self._chunks: list[np.ndarray] = []
        self._strings: dict[str, int] = {}

    def record(
        self,
        kind: int,
        *,
        flags: int = 0,
        device: int = 0,
        thread: int = 0,
        stream: int = 0,
        t_ns: int = 0,
        dur_ns: int = 0,
        a32: int = 0,
        a: Sequence[int] = (),
        ext: Sequence[int] = (),
    ) -> None:
        """Append one head record and ``ext`` words in continuation slots."""
        if len(a) > 5:
            raise ValueError("at most 5 a-words")
        head = np.zeros(1, SLOT_DTYPE)
        head[0] = (kind, flags, device, thread, stream, t_ns, dur_ns, a32, list(a) + [0] * (5 - len(a)))
        self._chunks.append(head)
        if len(ext):
            self._chunks.append(_cont_slots(np.asarray(ext, dtype=np.uint64).tobytes()))

    def string(self, text: str, t_ns: int = 0) -> int:
        """Id of ``text``, writing its STRING record on first use (as maya_str)."""
        if text in self._strings:
            return self._strings[text]
        sid = len(self._strings) + 1
        self._strings[text] = sid
        data = text.encode()
        head = np.zeros(1, SLOT_DTYPE)
        head[0] = (Kind.STRING, 0, 0, 0, 0, t_ns, 0, len(data), [sid, 0, 0, 0, 0])
        self._chunks.append(head)
        if data:
            self._chunks.append(_cont_slots(data))
        return sid

    def extend(self, slots: np.ndarray) -> None:
        """Append pre-built slots (``SLOT_DTYPE``), e.g. a million at once."""
        if slots.dtype != SLOT_DTYPE:
            raise TypeError("slots must have SLOT_DTYPE")
        self._chunks.append(slots)

    def to_bytes(self) -> bytes:
        h = self.header
        values = [h[name] for name, _ in _HEADER_FIELDS]
        head = _HEADER_STRUCT.pack(MAGIC, *values, str(h["gpu_name"]).encode()[:63])
        head = head.ljust(int(h["header_size"]), b"\0")
        body = np.concatenate(self._chunks).tobytes() if self._chunks else b""
        return head + body

    def write(self, path: str | Path) -> None:
        Path(path).write_bytes(self.to_bytes())


def _cont_slots(payload: bytes) -> np.ndarray:
    """Continuation slots carrying ``payload`` in their bytes 8..63."""
    n = -(-len(payload) // CONT_BYTES)
    raw = np.zeros((n, SLOT), np.uint8)
    raw[:, 0] = Kind.CONT
    buf = np.zeros(n * CONT_BYTES, np.uint8)
    buf[: len(payload)] = np.frombuffer(payload, np.uint8)
    raw[:, 8:] = buf.reshape(n, CONT_BYTES)
    return raw.reshape(-1).view(SLOT_DTYPE)


def write_trace(path: str | Path, records: Iterable[dict[str, Any]], **header: Any) -> None:
    """Write records given as dicts of :meth:`TraceWriter.record` arguments
    (``kind`` required)."""
    w = TraceWriter(**header)
    for r in records:
        r = dict(r)
        w.record(r.pop("kind"), **r)
    w.write(path)

"""Writer of Maya traces in memory, in exactly the layout the interposer's trace.c writes.

For tests and benchmarks that need hand-built traces.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from maya.predictor.trace.format import (
    CONT_BYTES,
    HEADER_FIELDS,
    HEADER_SIZE,
    HEADER_STRUCT,
    MAGIC,
    SLOT,
    SLOT_DTYPE,
    VERSION,
    Kind,
)


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
            "gc_us": 0,
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
        values = [h[name] for name, _ in HEADER_FIELDS]
        head = HEADER_STRUCT.pack(MAGIC, *values, str(h["gpu_name"]).encode()[:59], int(h.get("hook_us", 0)))
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

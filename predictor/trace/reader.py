"""Reader of the Maya binary trace (:mod:`maya.predictor.trace.format`).

Decoding is vectorised: the slots are viewed in place with ``np.frombuffer``
and only string records are visited one by one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from maya.predictor.trace.format import (
    CONT_BYTES,
    HEADER_FIELDS,
    HEADER_STRUCT,
    MAGIC,
    SLOT,
    SLOT_DTYPE,
    VERSION,
    Kind,
)


class TraceError(ValueError):
    """The file is not a Maya trace this reader understands."""


def _parse_header(data: bytes | bytearray | memoryview) -> dict[str, Any]:
    if len(data) < 24 or bytes(data[:8]) != MAGIC:
        raise TraceError("not a Maya trace (bad magic)")
    if len(data) < HEADER_STRUCT.size:
        raise TraceError("truncated trace header")
    values = HEADER_STRUCT.unpack_from(data, 0)
    header: dict[str, Any] = dict(zip((n for n, _ in HEADER_FIELDS), values[1:-2], strict=True))
    header["gpu_name"] = values[-2].split(b"\0", 1)[0].decode("utf-8", "replace")
    header["hook_us"] = values[-1]
    if header["version"] != VERSION:
        raise TraceError(f"trace version {header['version']}, this reader knows {VERSION}")
    if header["slot_size"] != SLOT:
        raise TraceError(f"slot size {header['slot_size']}, expected {SLOT}")
    if header["header_size"] < HEADER_STRUCT.size:
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


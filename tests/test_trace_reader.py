"""Trace reader (maya.predictor.trace).

Covers:
- the record dtype is the 64-byte maya_rec layout and the kind enum mirrors maya.h;
- writer -> reader round trip: header fields, head records, continuation
  words, strings longer than one continuation slot, empty and non-ASCII strings;
- continuation slots are removed from ``records`` and ``ext(i)`` returns the
  zero-padded words of exactly record i;
- bad magic / version are rejected; a truncated last slot is ignored;
- a trace written by the C writer during an emulated run reads back
  (header names the GPU and rank, strings resolve, kernel launches present).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from emulated import REPO, requires_library, run_emulated

from maya.predictor.trace import (
    HEADER_SIZE,
    SLOT_DTYPE,
    Flag,
    Kind,
    TraceError,
    TraceWriter,
    decode,
    read_trace,
)


def test_slot_layout_matches_maya_h() -> None:
    assert SLOT_DTYPE.itemsize == 64
    offsets = {name: SLOT_DTYPE.fields[name][1] for name in SLOT_DTYPE.names}
    assert offsets == {"kind": 0, "flags": 1, "device": 2, "thread": 3, "stream": 4,
                       "t_ns": 8, "dur_ns": 16, "a32": 20, "a": 24}


def test_kinds_and_flags_mirror_maya_h() -> None:
    header = (REPO / "emulation-image" / "src" / "maya.h").read_text()
    kinds = {m[0]: int(m[1], 0) for m in re.findall(r"\bMK_(\w+)\s*=\s*(0x[0-9A-Fa-f]+|\d+)", header)}
    assert kinds == {k.name: int(k) for k in Kind}
    flags = {m[0]: 1 << int(m[1]) for m in re.findall(r"\bMF_(\w+)\s*=\s*1\s*<<\s*(\d+)", header)}
    assert flags == {f.name: int(f) for f in Flag}
    assert f"MAYA_HEADER_SIZE {HEADER_SIZE}" in header


def _sample(path: Path) -> None:
    w = TraceWriter(rank=3, local_rank=1, world_size=8, node=0, gpus_per_node=4,
                    num_devices=4, pid=1234, start_unix_ns=1_700_000_000_000_000_000,
                    gpu_name="H200-SXM-141GB")
    long_name = "_ZN2at6native" + "x" * 150  # three continuation slots
    sid_long = w.string(long_name, t_ns=1)
    sid_empty = w.string("")
    sid_utf = w.string("naïve µs")
    assert w.string(long_name) == sid_long  # interned
    w.record(Kind.KERNEL, flags=Flag.ASYNC, device=2, thread=1, stream=7, t_ns=100, dur_ns=5,
             a32=1, a=[sid_long, 2, 3, 4, 5], ext=list(range(10, 19)))  # 9 words: 2 slots
    w.record(Kind.MALLOC, t_ns=200, dur_ns=1, a=[0x7F0000000000, 1 << 20])
    w.record(Kind.UNSUPPORTED, t_ns=300, a=[sid_utf])
    w.record(Kind.NOTE, t_ns=400, a=[sid_empty], ext=[2**64 - 1])
    w.write(path)


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "rank3.mayatrace"
    _sample(path)
    t = read_trace(path)
    h = t.header
    assert (h["rank"], h["local_rank"], h["world_size"], h["gpus_per_node"], h["num_devices"]) == (3, 1, 8, 4, 4)
    assert h["gpu_name"] == "H200-SXM-141GB" and h["pid"] == 1234 and h["header_size"] == HEADER_SIZE
    assert h["start_unix_ns"] == 1_700_000_000_000_000_000

    kinds = [Kind(k) for k in t.records["kind"]]
    assert kinds == [Kind.STRING] * 3 + [Kind.KERNEL, Kind.MALLOC, Kind.UNSUPPORTED, Kind.NOTE]
    assert Kind.CONT not in t.records["kind"]

    k = t.records[3]
    assert (k["flags"], k["device"], k["thread"], k["stream"], k["t_ns"], k["dur_ns"], k["a32"]) == (
        Flag.ASYNC, 2, 1, 7, 100, 5, 1)
    assert list(k["a"]) == [1, 2, 3, 4, 5]
    ext = t.ext(3)
    assert ext.dtype == np.uint64 and len(ext) == 14
    assert list(ext[:9]) == list(range(10, 19)) and not ext[9:].any()
    assert len(t.ext(4)) == 0
    assert list(t.ext(6)[:1]) == [2**64 - 1]

    assert t.string(1) == "_ZN2at6native" + "x" * 150
    assert t.string(2) == ""
    assert t.string(3) == "naïve µs"
    assert t.string(0) == ""
    assert t.string(int(t.records[5]["a"][0])) == "naïve µs"
    assert t.kind_counts() == {"STRING": 3, "KERNEL": 1, "MALLOC": 1, "UNSUPPORTED": 1, "NOTE": 1}
    assert t.span_ns == 400  # the empty string was written at t=0
    assert list(t.of_kind(Kind.MALLOC, Kind.NOTE)) == [4, 6]


def test_empty_trace(tmp_path: Path) -> None:
    TraceWriter().write(tmp_path / "t")
    t = read_trace(tmp_path / "t")
    assert len(t) == 0 and t.span_ns == 0 and t.kind_counts() == {}


def test_rejects_foreign_files_and_ignores_a_torn_last_slot(tmp_path: Path) -> None:
    with pytest.raises(TraceError):
        decode(b"NOTATRACE" + bytes(200))
    path = tmp_path / "t"
    _sample(path)
    data = path.read_bytes()
    bad_version = bytearray(data)
    bad_version[8] = 99
    with pytest.raises(TraceError):
        decode(bad_version)
    torn = decode(data + b"\x03" * 40)  # a process killed mid-write
    assert len(torn) == 7 and torn.truncated_bytes == 40


@pytest.mark.emulation
@requires_library
def test_reads_a_trace_written_by_the_interposer(tmp_path: Path) -> None:
    r = run_emulated(
        """
        import torch
        x = torch.ones(256, 256, device="cuda")
        y = (x * 2).sum()
        torch.cuda.synchronize()
        print("ok")
        """,
        tmp_path,
        gpu="H200-SXM-141GB",
    )
    assert r.returncode == 0, r.output
    t = read_trace(r.trace_path(0))
    assert t.header["gpu_name"] == "H200-SXM-141GB"
    assert t.header["rank"] == 0 and t.header["world_size"] == 1
    assert t.truncated_bytes == 0
    counts = t.kind_counts()
    assert counts.get("KERNEL", 0) >= 2, counts
    assert counts.get("MALLOC", 0) >= 1, counts
    # Every string id a FUNC record names resolves to a kernel name.
    for i in t.of_kind(Kind.FUNC):
        assert t.string(int(t.records[i]["a"][1]))

"""The Maya binary trace format: its constants, record kinds, flags and slot layout.

The format is defined by ``emulation-image/src/maya.h`` and written by
``emulation-image/src/trace.c``; ``emulation-image/TRACE_FORMAT.md``
documents it.  A trace is a header followed by 64-byte slots.  A slot whose
kind is ``CONT`` (0xFF) continues the head record before it: its bytes 8..63
carry seven extra 64-bit words (or string text).  What the words of each
kind mean is :mod:`maya.predictor.trace.records`.
"""

from __future__ import annotations

import enum
import struct

import numpy as np

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
HEADER_FIELDS: tuple[tuple[str, str], ...] = (
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
    ("gc_us", "I"),
    ("start_unix_ns", "Q"),
)
# Then gpu_name (60 bytes, NUL-terminated) and hook_us (u32): traces written before hook_us have
# zeros there, the tail of a 64-byte gpu_name.
HEADER_STRUCT = struct.Struct("<8s" + "".join(code for _, code in HEADER_FIELDS) + "60sI")
assert HEADER_STRUCT.size == HEADER_SIZE

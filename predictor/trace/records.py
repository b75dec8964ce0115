"""Typed decoders of trace records: what the packed words of each kind mean.

The interposer packs several fields into one 64-bit word (a KERNEL's grid,
a BLAS call's sizes and types, a DNN record's flags...).  This module is the
only place that knows those bit layouts (``emulation-image/TRACE_FORMAT.md``,
``docs/blas.md``, ``docs/dnn.md``, ``docs/nccl.md``; the C definitions are in
``src/maya.h``, ``blas.h`` and ``dnn.h``, which ``tests/test_trace_records.py``
checks these constants against).  Everything else asks for fields by name.

A :class:`Field` reads a plain int or a numpy array of words alike, so the
vectorised readers (ops, replay) and the per-operation ones (estimation)
share the same definitions.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeVar, overload

import numpy as np
import numpy.typing as npt

_Words = npt.NDArray[np.uint64]
_A = TypeVar("_A", int, _Words)


@dataclass(frozen=True)
class Field:
    """``width`` bits from bit ``shift`` of head word ``a[word]``."""

    word: int
    shift: int = 0
    width: int = 64

    @overload
    def of(self, a: Sequence[int]) -> int: ...

    @overload
    def of(self, a: _Words) -> _Words: ...

    def of(self, a: Sequence[int] | _Words) -> int | _Words:
        """The field in a record's a-words: ``a`` is a0..a4 of one record, or rows of them."""
        if isinstance(a, np.ndarray):
            return self.bits(a[..., self.word])
        return self.bits(int(a[self.word]))

    def bits(self, word: _A) -> _A:
        """The field in the word itself (an int or an array of words)."""
        if isinstance(word, np.ndarray):
            out = word >> np.uint64(self.shift)
            return out if self.width >= 64 else out & np.uint64((1 << self.width) - 1)
        out = word >> self.shift
        return out if self.width >= 64 else out & ((1 << self.width) - 1)


def signed(value: int) -> int:
    """A 64-bit word as the signed integer the interposer wrote (sign-extended values)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def double(bits: int) -> float:
    """A 64-bit word as the IEEE double whose bits it holds (BLAS scalars, DNN scales)."""
    return float(struct.unpack("<d", struct.pack("<Q", bits & 0xFFFFFFFFFFFFFFFF))[0])


# ---------------------------------------------------------------- bookkeeping

STRING_ID = Field(0)  # a32: length in bytes
FUNC_ID, FUNC_MANGLED, FUNC_DEMANGLED = Field(0), Field(1), Field(2)  # the names are string ids
THREAD_INDEX, THREAD_NAME, THREAD_OS_ID = Field(0), Field(1), Field(2)

# DEVICE_TIME (record mode): a32 what ran (DEVICE_TIME_KINDS), a0 start, a1 end (trace clock), a2 name.
DEVICE_TIME_START, DEVICE_TIME_END, DEVICE_TIME_NAME = Field(0), Field(1), Field(2)
DEVICE_TIME_KINDS = {0: "kernel", 1: "memcpy", 2: "memset"}

# ---------------------------------------------------------------- kernels

KERNEL_INTS = 6  # MAYA_KERNEL_INTS: integer arguments a KERNEL record carries at most
KERNEL_FUNC = Field(0)  # a FUNC record's id; a32: 0 runtime launch, 1 driver launch
GRID_X, GRID_Y, GRID_Z = Field(1, 0, 32), Field(1, 32, 16), Field(1, 48, 16)
BLOCK_X, BLOCK_Y, BLOCK_Z = Field(2, 0, 16), Field(2, 16, 16), Field(2, 32, 16)
KERNEL_SMEM = Field(3)  # dynamic shared memory bytes
KERNEL_N_INTS = Field(4)  # integer arguments in the continuation words


@dataclass(frozen=True)
class Launch:
    """A kernel launch's geometry (KERNEL a1, a2, a3); a dimension recorded as 0 reads as 1."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int

    @classmethod
    def decode(cls, a: Sequence[int]) -> Launch:
        grid = (max(GRID_X.of(a), 1), max(GRID_Y.of(a), 1), max(GRID_Z.of(a), 1))
        block = (max(BLOCK_X.of(a), 1), max(BLOCK_Y.of(a), 1), max(BLOCK_Z.of(a), 1))
        return cls(grid, block, KERNEL_SMEM.of(a))

    @property
    def blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def threads(self) -> int:
        return self.blocks * self.threads_per_block


class TensorLists(NamedTuple):
    """A multi_tensor_apply launch's integer words, in place of arguments: what its blocks cover
    (the interposer reads its tensor list metadata; emulation only)."""

    elements: int
    scalar_path_elements: int  # in blocks off the vectorised path (a size no multiple of 4, misaligned)
    tensors: int

    @classmethod
    def of(cls, params: Sequence[int]) -> TensorLists | None:
        return cls(*params) if len(params) == len(cls._fields) else None


class CatInputs(NamedTuple):
    """A torch.cat kernel's integer words, in place of arguments: what its inputs hold (the interposer reads
    its input metadata; emulation only)."""

    elements: int
    inputs: int
    element_bytes: int

    @classmethod
    def of(cls, params: Sequence[int]) -> CatInputs | None:
        return cls(*params) if len(params) == len(cls._fields) else None


class TritonFacts(NamedTuple):
    """An Inductor Triton kernel's integer words, in place of arguments: what its source says it
    moves (the start-up hook's ``_maya_triton``; emulation only)."""

    x_elements: int
    r_elements: int  # 0: no reduction
    bytes_loaded: int
    bytes_stored: int
    loads: int
    stores: int

    @classmethod
    def of(cls, params: Sequence[int]) -> TritonFacts | None:
        return cls(*params) if len(params) == len(cls._fields) else None


# ---------------------------------------------------------------- copies, memory, streams, events

# MEMCPY: a32 cudaMemcpyKind, a0 dst, a1 src, a2 bytes, a3 the devices + 1 (0: host).
MEMCPY_BYTES = Field(2)
MEMCPY_DST_DEVICE, MEMCPY_SRC_DEVICE = Field(3, 0, 32), Field(3, 32, 32)
MEMCPY_KINDS = {0: "h2h", 1: "h2d", 2: "d2h", 3: "d2d"}  # cudaMemcpyKind; 4 (default) says nothing
# MEMSET: a32 element size, a0 dst, a1 bytes, a2 value.
MEMSET_BYTES = Field(1)
# MALLOC and FREE: a32 source, a0 pointer, a1 bytes, a2 device bytes in use after the call.
MALLOC_BYTES, MALLOC_IN_USE = Field(1), Field(2)

STREAM_NON_BLOCKING = 0x1  # cudaStreamNonBlocking, in STREAM_CREATE a32
EVENT_ID, EVENT_VERSION = Field(0), Field(1)  # EVENT_RECORD, STREAM_WAIT_EVENT, EVENT_SYNC, EVENT_QUERY


@dataclass(frozen=True)
class Copy:
    """What a MEMCPY or MEMSET moves: ``kind`` memset, h2d, d2h, d2d, peer or h2h, and its bytes."""

    kind: str
    bytes: int

    @classmethod
    def memcpy(cls, a32: int, a: Sequence[int]) -> Copy:
        """The devices (a3) say the direction; the cudaMemcpyKind (a32) where both sides are host."""
        dst, src = MEMCPY_DST_DEVICE.of(a), MEMCPY_SRC_DEVICE.of(a)
        if dst and src:
            kind = "d2d" if dst == src else "peer"
        elif dst:
            kind = "h2d"
        elif src:
            kind = "d2h"
        else:
            kind = MEMCPY_KINDS.get(a32, "h2h")
        return cls(kind, MEMCPY_BYTES.of(a))

    @classmethod
    def memset(cls, a: Sequence[int]) -> Copy:
        return cls("memset", MEMSET_BYTES.of(a))


# ---------------------------------------------------------------- NCCL

# COMM_INIT: a32 world rank, a0 communicator, a1 size | rank in it, a2 parent, a3 color/key, a4 device.
COMM_ID, COMM_SIZE, COMM_RANK = Field(0), Field(1, 0, 32), Field(1, 32, 32)
# COLL: a32 sequence number, a0 communicator, a1 count, a2 op/dtype/reduction/group, a3 peer or
# root (signed), a4 bytes in each rank's send buffer.  Continuation word 0: ns spent waiting for
# the other ranks (an emulation artefact), 1 and 2 the buffers.
COLL_COMM, COLL_COUNT = Field(0), Field(1)
COLL_OP, COLL_DTYPE, COLL_REDOP, COLL_IN_GROUP = Field(2, 0, 8), Field(2, 8, 8), Field(2, 16, 8), Field(2, 24, 1)
COLL_PEER, COLL_BYTES = Field(3), Field(4)
COLL_WAIT_WORD = 0
NCCL_OPS = {1: "all_reduce", 2: "broadcast", 3: "reduce", 4: "all_gather", 5: "reduce_scatter", 6: "all_to_all",
            7: "send", 8: "recv", 9: "gather", 10: "scatter"}
NCCL_SEND, NCCL_RECV = 7, 8

# ---------------------------------------------------------------- BLAS

BLAS_M, BLAS_N = Field(0, 0, 32), Field(0, 32, 32)
BLAS_K, BLAS_BATCH = Field(1, 0, 32), Field(1, 32, 32)
BLAS_TRANSA, BLAS_TRANSB, BLAS_EPILOGUE = Field(2, 0, 8), Field(2, 8, 8), Field(2, 16, 16)
BLAS_SIDE, BLAS_UPLO, BLAS_DIAG = Field(2, 32, 8), Field(2, 40, 8), Field(2, 48, 8)
BLAS_A_TYPE, BLAS_B_TYPE, BLAS_C_TYPE, BLAS_D_TYPE = Field(3, 0, 8), Field(3, 8, 8), Field(3, 16, 8), Field(3, 24, 8)
BLAS_COMPUTE, BLAS_SCALE_TYPE = Field(3, 32, 8), Field(3, 40, 8)
BLAS_WORKSPACE = Field(4)
BLAS_NO_TYPE = 0xFF  # a type byte where the matrix or type does not apply

# Continuation words of a BLAS record, in order (the BX_* enum of blas.h).
BLAS_EXT = ("LDA", "LDB", "LDC", "LDD", "STRIDE_A", "STRIDE_B", "STRIDE_C", "STRIDE_D",
            "ALPHA", "BETA", "ALPHA_IM", "BETA_IM", "A", "B", "C", "D", "BIAS", "BIAS_TYPE", "AUX", "MODES",
            "A_SCALE", "B_SCALE", "C_SCALE", "D_SCALE", "AMAX_D", "ALGO", "SM_TARGET", "D_OUT_SCALE")
BX = {name: i for i, name in enumerate(BLAS_EXT)}
BLAS_WORDS = len(BLAS_EXT)
# The words that hold device pointers (they differ from run to run).
BLAS_POINTER_WORDS = tuple(BX[n] for n in ("A", "B", "C", "D", "BIAS", "AUX", "A_SCALE", "B_SCALE", "C_SCALE",
                                           "D_SCALE", "AMAX_D", "D_OUT_SCALE"))


@dataclass(frozen=True)
class Blas:
    """A BLAS record's sizes, layout and types (``cudaDataType_t`` codes; ``d_type`` is A's where
    the record has none), its beta and whether an Lt epilogue adds a bias."""

    m: int
    n: int
    k: int
    batch: int
    transa: int
    transb: int
    epilogue: int
    a_type: int
    d_type: int
    compute: int
    beta: float
    bias: bool
    ext: tuple[int, ...]

    @classmethod
    def decode(cls, a: Sequence[int], ext: Sequence[int]) -> Blas:
        a_type, d_type = BLAS_A_TYPE.of(a), BLAS_D_TYPE.of(a)
        beta = double(ext[BX["BETA"]]) if len(ext) > BX["BETA"] else 0.0
        # BIAS_TYPE: the bias cudaDataType (-1: none) in its low 32 bits; 0 for the legacy routines.
        bias_type = ext[BX["BIAS_TYPE"]] if len(ext) > BX["BIAS_TYPE"] else 0
        return cls(
            m=BLAS_M.of(a), n=BLAS_N.of(a), k=BLAS_K.of(a), batch=max(BLAS_BATCH.of(a), 1),
            transa=BLAS_TRANSA.of(a), transb=BLAS_TRANSB.of(a), epilogue=BLAS_EPILOGUE.of(a),
            a_type=a_type, d_type=a_type if d_type == BLAS_NO_TYPE else d_type, compute=BLAS_COMPUTE.of(a),
            beta=beta, bias=(bias_type & 0xFFFFFFFF) != 0xFFFFFFFF and bias_type != 0, ext=tuple(ext),
        )

    def word(self, name: str) -> int:
        """Continuation word ``name`` (a ``BLAS_EXT`` name), 0 where the record has fewer."""
        i = BX[name]
        return int(self.ext[i]) if i < len(self.ext) else 0

    @property
    def beta_nonzero(self) -> bool:
        return self.beta != 0.0 and not math.isnan(self.beta)


# ---------------------------------------------------------------- DNN

DNN_WORKSPACE = Field(0)
DNN_ENGINE, DNN_KNOB = Field(1, 0, 32), Field(1, 32, 32)
DNN_IO_DTYPE, DNN_COMPUTE_DTYPE, DNN_LAYOUT = Field(2, 0, 8), Field(2, 8, 8), Field(2, 16, 8)
# Flags of a2 (DNN_F_* in dnn.h).
DNN_CAUSAL, DNN_DROPOUT, DNN_BACKEND = Field(2, 24, 1), Field(2, 25, 1), Field(2, 26, 1)
DNN_TRAINING, DNN_GQA, DNN_UNIFIED, DNN_BIAS = Field(2, 27, 1), Field(2, 28, 1), Field(2, 29, 1), Field(2, 30, 1)
DNN_N_PARAMS, DNN_N_KERNELS, DNN_N_GRAPH = Field(3, 0, 16), Field(3, 16, 16), Field(3, 32, 32)
DNN_GRAPH_HASH = Field(4)
DNN_LAYOUTS = {0: "nchw", 1: "nhwc", 2: "rowmajor"}  # DNN_LAYOUT_* of dnn.h

# Parameter words by operation (the order of dnn.h's parameter blocks).
SDPA_PARAMS = ("b", "h", "hk", "sq", "skv", "d", "dv", "scale", "dropout")
CONV_PARAMS = ("n", "c", "k", "groups", "nsp")  # then CONV_DIM words for each of 3 spatial dims
CONV_DIM = ("in", "filt", "out", "pad", "stride", "dil")
BATCHNORM_PARAMS = ("n", "c", "spatial", "mode", "ops", "epsilon", "factor", "reserve_bytes")
POOLING_PARAMS = ("in_elems", "out_elems", "window_h", "window_w", "stride_h", "stride_w")
DROPOUT_PARAMS = ("elems", "probability")
DROPOUT_INIT_PARAMS = ("states_bytes", "seed")
# rnn_fwd, rnn_bwd_data, rnn_bwd_weights (dnn_rnn): cudnnRNNMode_t, cudnnRNNAlgo_t, physical layers,
# directions, input/hidden/projection sizes (proj 0: none), longest sequence, batch, sum of the
# sequence lengths, cudnnRNNBiasMode_t, cudnnMathType_t, reserve-space bytes, dropout (double bits).
RNN_PARAMS = ("mode", "algo", "layers", "dirs", "input", "hidden", "proj", "seq", "batch", "tokens", "bias", "math",
              "reserve", "dropout")
RNN_MODES = {0: "relu", 1: "tanh", 2: "lstm", 3: "gru"}  # cudnnRNNMode_t


def param(params: Sequence[int], i: int) -> int:
    """Parameter word ``i`` (0 past the recorded ones)."""
    return int(params[i]) if i < len(params) else 0


@dataclass(frozen=True)
class Sdpa:
    """The shapes of an ``sdpa_fprop``/``sdpa_bprop`` DNN record (sizes of 0 read as 1 where they multiply)."""

    b: int
    h: int
    hk: int
    sq: int
    skv: int
    d: int
    dv: int
    causal: bool
    dropout: bool
    bias: bool = False  # an additive mask (attn_mask)

    @classmethod
    def decode(cls, a: Sequence[int], params: Sequence[int]) -> Sdpa:
        p = {name: param(params, i) for i, name in enumerate(SDPA_PARAMS)}
        return cls(b=max(p["b"], 1), h=max(p["h"], 1), hk=max(p["hk"], 1), sq=p["sq"], skv=p["skv"], d=p["d"],
                   dv=p["dv"] or p["d"], causal=bool(DNN_CAUSAL.of(a)), dropout=bool(DNN_DROPOUT.of(a)),
                   bias=bool(DNN_BIAS.of(a)))

    @classmethod
    def of_kernel(cls, params: Sequence[int], grid: tuple[int, int, int]) -> Sdpa | None:
        """The shapes an attention kernel's launch records (PyTorch's flash and memory-efficient
        attention, ``emulation-image/src/kernel_args.c``): batch (0: the grid's z), heads, query and
        key lengths, head dimension, mask word (bit 0 causal, bit 2 a bias, value head dimension from
        bit 8).  None when the launch recorded other words."""
        if len(params) != 6:
            return None
        b, h, sq, skv, d, mask = (int(v) for v in params)
        return cls(b=b or grid[2], h=h, hk=h, sq=sq, skv=skv, d=d, dv=(mask >> 8) or d, causal=bool(mask & 1),
                   dropout=False, bias=bool(mask & 4))


@dataclass(frozen=True)
class Conv:
    """The shape of a convolution DNN record: per spatial dimension (1 to 3) input, filter and
    output sizes and strides (0 read as 1)."""

    n: int
    c: int
    k: int
    groups: int
    inp: tuple[int, ...]
    flt: tuple[int, ...]
    out: tuple[int, ...]
    stride: tuple[int, ...]

    @classmethod
    def decode(cls, params: Sequence[int]) -> Conv:
        n, c, k, groups, nsp = (param(params, i) for i in range(len(CONV_PARAMS)))
        nsp = min(max(nsp, 1), 3)
        base = len(CONV_PARAMS)
        dims = [{name: param(params, base + len(CONV_DIM) * d + j) for j, name in enumerate(CONV_DIM)}
                for d in range(nsp)]
        return cls(n, c, k, max(groups, 1), tuple(max(d["in"], 1) for d in dims),
                   tuple(max(d["filt"], 1) for d in dims), tuple(max(d["out"], 1) for d in dims),
                   tuple(max(d["stride"], 1) for d in dims))


@dataclass(frozen=True)
class Rnn:
    """The shape of an ``rnn_*`` DNN record (sizes of 0 read as 1 where they multiply; ``proj`` 0: none)."""

    mode: str
    layers: int
    dirs: int
    input: int
    hidden: int
    proj: int
    seq: int
    batch: int
    tokens: int
    math_type: int
    dropout: float

    @classmethod
    def decode(cls, params: Sequence[int]) -> Rnn:
        p = {name: param(params, i) for i, name in enumerate(RNN_PARAMS)}
        seq, batch = max(p["seq"], 1), max(p["batch"], 1)
        return cls(mode=RNN_MODES.get(p["mode"], "tanh"), layers=max(p["layers"], 1), dirs=max(p["dirs"], 1),
                   input=max(p["input"], 1), hidden=max(p["hidden"], 1), proj=p["proj"], seq=seq, batch=batch,
                   tokens=p["tokens"] or seq * batch, math_type=p["math"], dropout=double(p["dropout"]))

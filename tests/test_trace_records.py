"""Typed record decoders (maya.predictor.trace.records) against the interposer's C definitions.

Covers, by parsing the C sources rather than restating them:
- the slot (``maya_rec`` in maya.h): field order, sizes and offsets equal ``SLOT_DTYPE``'s;
- maya.h's trace constants (magic, version, header and slot sizes, continuation bytes,
  ``MAYA_KERNEL_INTS``);
- blas.h: the ``BX_*`` continuation words in order, their count, ``BLAS_NO_TYPE``;
- dnn.h: the ``DNN_F_*`` flag bits, the ``DNN_LAYOUT_*`` codes, and the SDPA and convolution
  parameter blocks' field order (``dnn_sdpa``, ``dnn_conv``, ``dnn_rnn``);
- the packed head words as the C writers build them (``r.a[i] = x | y << s ...`` in registry.c,
  blas_op.c, cudnn.c, nccl.c, memory_api.c): every packed field has a decoder with its shift and
  mask, and no decoder reads a field the writer does not pack;
- the decoders themselves on hand-packed words (int and numpy rows alike).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from emulated import REPO

from maya.predictor.trace import format as fmt
from maya.predictor.trace import records as R

SRC = REPO / "emulation-image" / "src"
_C_SIZES = {"uint8_t": 1, "int8_t": 1, "uint32_t": 4, "int32_t": 4, "uint64_t": 8, "int64_t": 8}


def _text(name: str) -> str:
    return re.sub(r"/\*.*?\*/", "", (SRC / name).read_text(), flags=re.S)  # without comments


def _struct(text: str, name: str) -> list[tuple[str, str, int]]:
    """(C type, field, array length) of ``typedef struct {...} name;`` in declaration order."""
    body = re.search(r"typedef struct\s*(?:\w+\s*)?\{([^{}]*)\}\s*" + name + r"\s*;", text)
    assert body, f"struct {name} not found"
    out = []
    for decl in body.group(1).split(";"):
        m = re.match(r"\s*(?:const\s+)?(\w+)\s+(.+)", decl.strip())
        if not m:
            continue
        for item in m.group(2).split(","):
            f = re.match(r"\s*\**\s*(\w+)\s*(?:\[(\w+)\])?", item)
            assert f, item
            out.append((m.group(1), f.group(1), int(f.group(2)) if f.group(2) and f.group(2).isdigit() else 1))
    return out


def _enum(text: str, prefix: str) -> dict[str, int]:
    """``PREFIX_NAME = value`` entries and implicitly numbered ones of the enums naming ``prefix``."""
    out: dict[str, int] = {}
    for body in re.findall(r"enum\s*\w*\s*\{([^}]*)\}", text):
        value = -1
        for item in body.split(","):
            m = re.match(r"\s*" + prefix + r"(\w+)\s*(?:=\s*(.+))?", item.strip())
            if not m:
                continue
            expr = (m.group(2) or "").strip()
            shift = re.fullmatch(r"(\w+)\s*<<\s*(\d+)", expr.replace("1u", "1"))
            value = (int(shift.group(1), 0) << int(shift.group(2))) if shift else int(expr, 0) if expr else value + 1
            out[m.group(1)] = value
    return out


def _define(text: str, name: str) -> str:
    m = re.search(r"#define\s+" + name + r"\s+(\S+)", text)
    assert m, name
    return m.group(1)


def test_slot_struct_is_the_slot_dtype() -> None:
    fields = _struct(_text("maya.h"), "maya_rec")
    offset, layout = 0, {}
    for ctype, name, count in fields:
        layout[name] = (offset, _C_SIZES[ctype] * count)
        offset += _C_SIZES[ctype] * count
    assert offset == fmt.SLOT
    dtype = {name: (fmt.SLOT_DTYPE.fields[name][1], fmt.SLOT_DTYPE.fields[name][0].itemsize)
             for name in fmt.SLOT_DTYPE.names}
    assert layout == dtype


def test_trace_constants_are_maya_h_s() -> None:
    h = _text("maya.h")
    assert int(_define(h, "MAYA_TRACE_VERSION")) == fmt.VERSION
    assert int(_define(h, "MAYA_HEADER_SIZE")) == fmt.HEADER_SIZE
    assert int(_define(h, "MAYA_SLOT")) == fmt.SLOT
    assert int(_define(h, "MAYA_CONT_BYTES")) == fmt.CONT_BYTES
    assert _define(h, "MAYA_TRACE_MAGIC").strip('"').replace("\\0", "\0").encode() == fmt.MAGIC
    assert int(_define(h, "MAYA_KERNEL_INTS")) == R.KERNEL_INTS


def test_blas_words_are_blas_h_s() -> None:
    h = _text("blas.h")
    words = _enum(h, "BX_")
    assert words.pop("WORDS") == R.BLAS_WORDS
    assert list(words) == list(R.BLAS_EXT)
    assert words == R.BX
    assert int(_define(h, "BLAS_NO_TYPE"), 0) == R.BLAS_NO_TYPE


def test_dnn_flags_layouts_and_parameter_blocks_are_dnn_h_s() -> None:
    h = _text("dnn.h")
    flags = _enum(h, "DNN_F_")
    decoders = {"CAUSAL": R.DNN_CAUSAL, "DROPOUT": R.DNN_DROPOUT, "BACKEND": R.DNN_BACKEND,
                "TRAINING": R.DNN_TRAINING, "GQA": R.DNN_GQA, "UNIFIED": R.DNN_UNIFIED, "BIAS": R.DNN_BIAS}
    assert set(flags) == set(decoders)
    for name, bit in flags.items():
        field = decoders[name]
        assert (field.word, 1 << field.shift, field.width) == (2, bit, 1), name
    layouts = _enum(h, "DNN_LAYOUT_")
    assert {v: k.lower() for k, v in layouts.items()} == R.DNN_LAYOUTS
    sdpa = [name for ctype, name, _ in _struct(h, "dnn_sdpa") if ctype != "int"]  # causal, gqa go to a2 flags
    assert tuple(sdpa) == R.SDPA_PARAMS
    conv = _struct(h, "dnn_conv")
    assert tuple(name for _, name, n in conv if n == 1) == R.CONV_PARAMS
    assert tuple(name for _, name, n in conv if n == 3) == R.CONV_DIM
    assert len(R.CONV_PARAMS) + 3 * len(R.CONV_DIM) <= int(_define(h, "DNN_MAX_PARAMS"))
    assert tuple(name for _, name, _ in _struct(h, "dnn_rnn")) == R.RNN_PARAMS


# (source, a-word, C operand -> decoder): the head words that pack several fields.
PACKED = [
    ("registry.c", 1, {"gx": R.GRID_X, "gy": R.GRID_Y, "gz": R.GRID_Z}),
    ("registry.c", 2, {"bx": R.BLOCK_X, "by": R.BLOCK_Y, "bz": R.BLOCK_Z}),
    ("blas_op.c", 0, {"m": R.BLAS_M, "n": R.BLAS_N}),
    ("blas_op.c", 1, {"k": R.BLAS_K, "batch": R.BLAS_BATCH}),
    ("blas_op.c", 2, {"transa": R.BLAS_TRANSA, "transb": R.BLAS_TRANSB, "epilogue": R.BLAS_EPILOGUE,
                      "side": R.BLAS_SIDE, "uplo": R.BLAS_UPLO, "diag": R.BLAS_DIAG}),
    ("blas_op.c", 3, {"atype": R.BLAS_A_TYPE, "btype": R.BLAS_B_TYPE, "ctype": R.BLAS_C_TYPE,
                      "dtype": R.BLAS_D_TYPE, "compute": R.BLAS_COMPUTE, "scale": R.BLAS_SCALE_TYPE}),
    ("cudnn.c", 1, {"engine": R.DNN_ENGINE, "knob": R.DNN_KNOB}),
    ("cudnn.c", 2, {"io_dtype": R.DNN_IO_DTYPE, "compute_dtype": R.DNN_COMPUTE_DTYPE, "layout": R.DNN_LAYOUT,
                    "flags": None}),  # the DNN_F_* bits, checked above
    ("cudnn.c", 3, {"np": R.DNN_N_PARAMS, "nk": R.DNN_N_KERNELS, "ng": R.DNN_N_GRAPH}),
    ("nccl.c", 1, {"nranks": R.COMM_SIZE, "rank": R.COMM_RANK}),
    ("nccl.c", 2, {"op": R.COLL_OP, "dt": R.COLL_DTYPE, "redop": R.COLL_REDOP, "in_group": R.COLL_IN_GROUP}),
    ("memory_api.c", 3, {"dev_dst": R.MEMCPY_DST_DEVICE, "dev_src": R.MEMCPY_SRC_DEVICE}),
]
_TYPES = {"uint64_t", "uint32_t", "int64_t", "unsigned"}


def _terms(expr: str) -> dict[str, tuple[int, int | None]]:
    """C operand -> (shift, mask) of each ``|``-joined term of a packed word."""
    terms, depth, cur = [], 0, ""
    for ch in expr:
        depth += (ch == "(") - (ch == ")")
        if ch == "|" and depth == 0:
            terms.append(cur)
            cur = ""
        else:
            cur += ch
    terms.append(cur)
    out: dict[str, tuple[int, int | None]] = {}
    for term in terms:
        shift = re.search(r"<<\s*(\d+)\s*\)*\s*$", term)
        mask = re.search(r"&\s*(0x[0-9A-Fa-f]+)", term)
        bare = re.sub(r"\w+->|0x[0-9A-Fa-f]+\w*", "", term)  # struct pointers and constants
        names = [n for n in re.findall(r"[A-Za-z_]\w*", bare) if n not in _TYPES]
        assert names, term
        out[names[0]] = (int(shift.group(1)) if shift else 0, int(mask.group(1), 16) if mask else None)
    return out


@pytest.mark.parametrize(("source", "word", "fields"), PACKED, ids=[f"{s}:a{w}" for s, w, _ in PACKED])
def test_packed_words_are_decoded_as_written(source: str, word: int, fields: dict[str, R.Field | None]) -> None:
    text = _text(source)
    writes = [_terms(m) for m in re.findall(rf"\.a\[{word}\]\s*=\s*([^;]+);", text)]
    packed = [w for w in writes if set(fields) <= set(w)]
    assert len(packed) == 1, f"{source}: no single a[{word}] assignment packs {sorted(fields)}: {writes}"
    assert set(packed[0]) == set(fields), "a field the writer packs has no decoder, or the reverse"
    for name, (shift, mask) in packed[0].items():
        field = fields[name]
        if field is None:
            continue
        assert (field.word, field.shift) == (word, shift), name
        if mask is not None:
            assert (1 << field.width) - 1 == mask, name


def test_decoders_read_ints_and_arrays_alike() -> None:
    a = [0, 7 | 3 << 32 | 2 << 48, 128 | 2 << 16, 4096, 0]
    launch = R.Launch.decode(a)
    assert (launch.grid, launch.block, launch.smem, launch.threads) == ((7, 3, 2), (128, 2, 1), 4096, 7 * 3 * 2 * 256)
    rows = np.array([a, [0, 5, 64, 0, 0]], dtype=np.uint64)
    assert R.GRID_Y.of(rows).tolist() == [3, 0] and R.BLOCK_X.of(rows).tolist() == [128, 64]
    coll = [9, 1024, 1 | 9 << 8 | 0 << 16 | 1 << 24, 2**64 - 1, 2048]
    assert (R.COLL_OP.of(coll), R.COLL_DTYPE.of(coll), R.COLL_IN_GROUP.of(coll)) == (1, 9, 1)
    assert R.signed(R.COLL_PEER.of(coll)) == -1
    assert R.Copy.memcpy(1, [0, 0, 512, 1 | 0 << 32, 0]) == R.Copy("h2d", 512)
    assert R.Copy.memcpy(3, [0, 0, 8, 2 | 1 << 32, 0]) == R.Copy("peer", 8)
    assert R.Copy.memcpy(2, [0, 0, 8, 0, 0]) == R.Copy("d2h", 8)


def test_blas_and_dnn_records_decode_their_words() -> None:
    a = [64 | 32 << 32, 16 | 4 << 32, 1 | 0 << 8 | 4 << 16, 14 | 14 << 8 | 14 << 16 | 0xFF << 24 | 68 << 32, 1 << 20]
    ext = [0] * R.BLAS_WORDS
    ext[R.BX["BETA"]] = int(np.float64(1.0).view(np.uint64))
    ext[R.BX["BIAS_TYPE"]] = 14 | (0xFFFFFFFF << 32)
    b = R.Blas.decode(a, ext)
    assert (b.m, b.n, b.k, b.batch, b.transa, b.epilogue) == (64, 32, 16, 4, 1, 4)
    assert (b.a_type, b.d_type, b.compute, b.beta_nonzero, b.bias) == (14, 14, 68, True, True)
    assert not R.Blas.decode(a, [0] * R.BLAS_WORDS).bias  # a legacy routine: no bias word
    sdpa = R.Sdpa.decode([0, 0, 9 | 2 << 16 | 1 << 24, 0, 0], [2, 8, 2, 128, 128, 64, 0])
    assert (sdpa.b, sdpa.hk, sdpa.dv, sdpa.causal, sdpa.dropout) == (2, 2, 64, True, False)
    conv = R.Conv.decode([32, 64, 128, 1, 2, 56, 3, 56, 1, 1, 1, 56, 3, 28, 1, 2, 1])
    assert (conv.inp, conv.flt, conv.out, conv.stride) == ((56, 56), (3, 3), (56, 28), (1, 2))

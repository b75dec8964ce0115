"""Device operations, alignment and profile tables (maya.predictor.trace.ops, .align, .profiles).

Covers:
- a KERNEL and a BLAS operation written by an "emulated" and a "recorded"
  trace with different function ids, string ids and pointers give equal Ops;
  captured records are skipped; DNN parameters and kernel names are read;
- DEVICE_TIME records: span and busy time of a multi-kernel operation, with
  STRING records between the operation and its times;
- alignment: an extra operation on one side; any DNN matches any DNN; a
  periodic sequence with one operation dropped stays in step (difflib would
  pair step k with step k+1); traces are aligned per thread name;
- Op and profile rows round-trip through CSV; the gzip table keeps its stamp;
  load_profiles reads a GPU's folder; rows_from_pair aggregates repeats
  (median, n, spread) and counts unmatched recorded operations;
- emulated KERNEL records carry the integer arguments of the launch, and PyTorch's strided
  elementwise kernel the layout of its operands.
"""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from emulated import requires_library, run_emulated

from maya.predictor.estimate.profiles import ProfileRow, load_profiles, read_table, rows_from_pair, write_table
from maya.predictor.trace import Flag, Kind, TraceWriter, read_trace
from maya.predictor.trace.align import align, align_traces
from maya.predictor.trace.ops import Op, device_ops, differing_fields, measured
from maya.predictor.trace.records import BLAS_WORDS, Sdpa

SGEMM = "_Z13ampere_sgemmPfS_"
COPY = "_ZN2at6native29vectorized_elementwise_kernelILi4E"
SDPA_KERNEL = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64"
GRID = 4 | 1 << 32 | 1 << 48
BLOCK = 128 | 1 << 16 | 1 << 32


@dataclass
class Spec:
    """One device operation to write: kind 'kernel', 'blas', 'dnn', 'memcpy' or 'memset'."""

    kind: str
    name: str = ""
    size: int = 1024
    times: Sequence[tuple[int, int, str]] = field(default_factory=list)  # recorded: (start, end, kernel name)


def build(path: Path, specs: Sequence[Spec], *, recorded: bool, thread: str = "python",
          captured: Sequence[Spec] = ()) -> Path:
    """A trace as emulation (recorded=False) or record mode (recorded=True) writes it.

    The two styles differ in everything that is not the operation itself:
    function ids, string ids, pointers, DNN naming and DEVICE_TIME records."""
    w = TraceWriter(gpu_name="H100-SXM-80GB")
    if recorded:
        w.string("padding: shifts every later string id")
    w.record(Kind.THREAD, a=[0, w.string(thread), 4242])
    funcs: dict[str, int] = {}
    base = 0x7F0000000000 if recorded else 0x200000000
    t = 0

    def func(name: str) -> int:
        if name not in funcs:
            funcs[name] = len(funcs) + (100 if recorded else 1)
            w.record(Kind.FUNC, a=[funcs[name], w.string(name), w.string(name)])
        return funcs[name]

    def emit(s: Spec, flags: int = 0) -> None:
        nonlocal t
        t += 1000
        ptr = base + t
        if s.kind == "kernel":
            w.record(Kind.KERNEL, flags=flags | Flag.ASYNC, t_ns=t, a=[func(s.name), GRID, BLOCK, 0])
        elif s.kind == "blas":
            ext = [0] * BLAS_WORDS
            ext[0:4] = [s.size] * 4
            ext[12:16] = [ptr, ptr + 8, ptr + 16, ptr + 16]
            w.record(Kind.BLAS, flags=flags | Flag.ASYNC, t_ns=t, a32=w.string(s.name),
                     a=[s.size | s.size << 32, s.size | 1 << 32, 0, 0x4400000000, 1 << 20], ext=ext)
        elif s.kind == "dnn" and recorded:
            w.record(Kind.DNN, flags=flags | Flag.ASYNC, t_ns=t, a32=w.string("cudnnBackendExecute"))
        elif s.kind == "dnn":
            params = [8, 12, 12, s.size, s.size, 64, 64, 0x3FC0000000000000, 0]
            kernels = [w.string("Memset (Device)"), w.string(SDPA_KERNEL)]
            w.record(Kind.DNN, flags=flags | Flag.ASYNC, t_ns=t, a32=w.string("sdpa_fprop"),
                     a=[256, 7 << 32 | 2, 9, len(params) | len(kernels) << 16 | 3 << 32, 1234],
                     ext=[*params, *kernels, 11, 22, 33])
        elif s.kind == "memcpy":
            w.record(Kind.MEMCPY, flags=flags | Flag.ASYNC, t_ns=t, a32=1, a=[ptr, ptr + 64, s.size, 1])
        elif s.kind == "memset":
            w.record(Kind.MEMSET, flags=flags | Flag.ASYNC, t_ns=t, a=[ptr, s.size, 0])
        for start, end, name in s.times if recorded else ():
            sid = w.string(name)  # record mode interns the name right before its DEVICE_TIME
            w.record(Kind.DEVICE_TIME, t_ns=start, a32=0, a=[start, end, sid, GRID, BLOCK])

    for s in captured:
        emit(s, Flag.CAPTURED)
    for s in specs:
        emit(s)
    w.record(Kind.DEVICE_SYNC, t_ns=t + 1)
    w.write(path)
    return path


def test_the_same_operations_from_an_emulated_and_a_recorded_trace_are_equal(tmp_path: Path) -> None:
    specs = [Spec("kernel", COPY, times=[(10, 30, COPY)]), Spec("blas", "cublasSgemm_v2", 256, [(40, 90, SGEMM)]),
             Spec("memcpy", size=4096, times=[(100, 150, "memcpy")]), Spec("memset", size=64)]
    emu = read_trace(build(tmp_path / "e", specs, recorded=False, captured=[Spec("kernel", SGEMM)]))
    rec = read_trace(build(tmp_path / "r", specs, recorded=True))
    ops_e, ops_r = device_ops(emu), device_ops(rec)
    assert [op for _, op in ops_e] == [op for _, op in ops_r]  # captured launch skipped
    kernel, blas, memcpy, memset = (op for _, op in ops_e)
    assert kernel == Op(Kind.KERNEL, COPY, 0, (0, GRID, BLOCK, 0, 0))
    assert blas.name == "cublasSgemm_v2" and blas.a[0] == 256 | 256 << 32 and len(blas.params) == BLAS_WORDS
    assert blas.params[:4] == (256,) * 4 and not any(blas.params[12:])  # pointers zeroed
    assert memcpy == Op(Kind.MEMCPY, "", 1, (0, 0, 4096, 1, 0))
    assert memset == Op(Kind.MEMSET, "", 0, (0, 64, 0, 0, 0))
    assert {op.signature() for _, op in ops_e} == {op.signature() for _, op in ops_r}
    assert all(rec.records[i]["kind"] == op.kind for i, op in ops_r)


def test_dnn_operations_keep_parameters_and_kernel_names(tmp_path: Path) -> None:
    emu = read_trace(build(tmp_path / "e", [Spec("dnn", size=1024)], recorded=False))
    (_, op), = device_ops(emu)
    assert op.name == "sdpa_fprop" and op.params[:4] == (8, 12, 12, 1024) and len(op.params) == 9
    assert op.kernels == ("Memset (Device)", SDPA_KERNEL)
    rec = read_trace(build(tmp_path / "r", [Spec("dnn")], recorded=True))
    (_, rop), = device_ops(rec)
    assert rop.name == "cudnnBackendExecute" and rop.params == () and rop.kernels == ()
    assert {"name", "a0", "params", "kernels"} <= set(differing_fields(op, rop))


def test_measured_span_and_busy_time_of_multi_kernel_operations(tmp_path: Path) -> None:
    specs = [
        Spec("dnn", times=[(1000, 1100, "memset"), (1200, 1700, SDPA_KERNEL)]),
        Spec("blas", "cublasLtMatmul", times=[(2000, 2300, SGEMM), (2250, 2400, COPY), (2500, 2600, COPY)]),
        Spec("kernel", COPY, times=[(3000, 3010, COPY)]),
        Spec("kernel", COPY),  # caused no device time
    ]
    rec = read_trace(build(tmp_path / "r", specs, recorded=True))
    times = measured(rec)
    dnn, blas, k1, k2 = (i for i, _ in device_ops(rec))
    assert times[dnn].span_ns == 700 and times[dnn].busy_ns == 600 and times[dnn].n == 2
    assert times[dnn].kernels == ("memset", SDPA_KERNEL)
    assert times[blas].span_ns == 600 and times[blas].busy_ns == 300 + 150 + 100
    assert times[blas].kernels == (SGEMM, COPY, COPY) and times[blas].n == 3
    assert times[k1] == (10, 10, (COPY,), 1)
    assert k2 not in times and len(times) == 3
    assert measured(read_trace(build(tmp_path / "e", specs, recorded=False))) == {}


def _op(name: str, kind: int = Kind.KERNEL) -> Op:
    return Op(kind, name, 0, (0, 1, 1, 0, 0))


def test_align_with_an_extra_operation_on_one_side() -> None:
    a = [_op("x"), _op("y"), _op("z")]
    b = [_op("x"), _op("extra"), _op("y"), _op("z")]
    assert align(a, b) == [(0, 0), (None, 1), (1, 2), (2, 3)]
    assert align(b, a) == [(0, 0), (1, None), (2, 1), (3, 2)]
    assert align([], b) == [(None, j) for j in range(4)]
    assert align(a, []) == [(i, None) for i in range(3)]
    # A differing stretch: A's side first, then B's.
    assert align([_op("x"), _op("p"), _op("z")], [_op("x"), _op("q"), _op("z")]) == [
        (0, 0), (1, None), (None, 1), (2, 2)]


def test_any_dnn_matches_any_dnn() -> None:
    emu = [_op("k"), Op(Kind.DNN, "sdpa_fprop", 0, (1, 2, 3, 4, 5)), _op("k")]
    rec = [_op("k"), Op(Kind.DNN, "cudnnBackendExecute", 0, (0, 0, 0, 0, 0)), _op("k")]
    assert align(emu, rec) == [(0, 0), (1, 1), (2, 2)]
    assert align([Op(Kind.BLAS, "cublasGemmEx", 0, (0,) * 5)], [_op("cublasGemmEx")]) == [(0, None), (None, 0)]


def test_a_periodic_trace_with_one_operation_dropped_stays_in_step() -> None:
    step = [_op(f"k{i % 7}") for i in range(40)] + [_op("optimizer")]
    a = step * 30
    b = a[:400] + a[401:]  # one launch missing in step 10
    pairs = align(a, b)
    matched = [(i, j) for i, j in pairs if i is not None and j is not None]
    assert len(matched) == len(a) - 1
    assert (400, None) in pairs or all(i != 400 for i, _ in matched)
    assert all(a[i] == b[j] for i, j in matched)
    assert [i for i, _ in pairs if i is not None] == list(range(len(a)))
    assert [j for _, j in pairs if j is not None] == list(range(len(b)))


def test_traces_are_aligned_per_thread_name(tmp_path: Path) -> None:
    main = [Spec("kernel", COPY), Spec("kernel", SGEMM)]
    a = read_trace(build(tmp_path / "a", main, recorded=False, thread="python3.11"))
    b = read_trace(build(tmp_path / "b", [*main, Spec("memset")], recorded=True, thread="python"))
    pairs = align_traces(a, b)
    assert [(p.op_a is not None, p.op_b is not None) for p in pairs] == [(True, True), (True, True), (False, True)]
    assert {p.thread for p in pairs} == {"python3.11 | python"}


def test_op_and_profile_rows_round_trip_through_csv(tmp_path: Path) -> None:
    ops = [
        Op(Kind.DNN, "conv_fprop", 0, (0, 2**64 - 1, 3, 4, 5), (1, 2, 2**63), ("a<b, c>", 'say "hi"')),
        Op(Kind.MEMCPY, "", 2, (0, 0, 4096, 1 << 32, 0), pinned=True),
        Op(Kind.BLAS, "cublasLtMatmul", 0, (1, 2, 3, 4, 5), tuple(range(BLAS_WORDS))),
    ]
    for op in ops:
        assert Op.from_row(op.to_row()) == op
    rows = [ProfileRow(op, 1000 + i, 900, 3, 0.25, "example:gpt") for i, op in enumerate(ops)]
    stamp = {"gpu": "H100-SXM-80GB", "driver": "580.95", "cuda": "13.0", "cublas": "13.1", "cudnn": "9.19",
             "nccl": "2.27", "torch": "2.11.0+cu130", "date": "2026-11-22", "command": "test"}
    path = tmp_path / "H100-SXM-80GB" / "examples.csv.gz"
    path.parent.mkdir()
    write_table(path, rows, stamp)
    first = gzip.open(path, "rt").readline()
    assert first.startswith("# stamp {") and '"gpu": "H100-SXM-80GB"' in first
    assert read_table(path) == (stamp, rows)
    data = path.read_bytes()
    write_table(path, rows, stamp)
    assert path.read_bytes() == data  # reproducible
    assert load_profiles("H100-SXM-80GB", root=tmp_path) == rows
    assert load_profiles("B200", root=tmp_path) == []
    (tmp_path / "bad.csv.gz").write_bytes(gzip.compress(b"kind,name\n"))
    with pytest.raises(ValueError, match="not a profile table"):
        read_table(tmp_path / "bad.csv.gz")


def test_rows_from_pair_aggregates_repeats_and_counts_unmatched(tmp_path: Path) -> None:
    def specs(recorded_extra: bool) -> list[Spec]:
        out = []
        for i, dur in enumerate((100, 120, 200)):
            t = 10_000 * (i + 1)
            out += [Spec("dnn", size=512, times=[(t, t + 50, "memset"), (t + 60, t + 60 + dur, SDPA_KERNEL)]),
                    Spec("kernel", COPY, times=[(t + 500, t + 510 + i, COPY)])]
        if recorded_extra:
            out.append(Spec("kernel", SGEMM, times=[(90_000, 91_000, SGEMM)]))
        return out

    emu = read_trace(build(tmp_path / "e", specs(False), recorded=False))
    rec = read_trace(build(tmp_path / "r", specs(True), recorded=True))
    rows, unmatched = rows_from_pair(emu, rec, "attention")
    assert unmatched == 1
    dnn, copy = rows
    assert dnn.op.name == "sdpa_fprop" and dnn.op.params[3] == 512  # features from the emulated side
    assert (dnn.n, dnn.dur_ns, dnn.busy_ns, dnn.source) == (3, 180, 170, "attention")
    assert dnn.spread == pytest.approx((260 - 160) / 180)
    assert (copy.n, copy.dur_ns, copy.busy_ns) == (3, 11, 11)


KERNEL_ARGS_SCRIPT = """
import torch
x = torch.empty(1000, 300, device="cuda")
torch.nn.functional.layer_norm(x, (300,))
torch.nn.functional.embedding_bag(torch.zeros(64, dtype=torch.long, device="cuda"), torch.empty(100, 16, device="cuda"),
                                  torch.zeros(8, dtype=torch.long, device="cuda"))
torch.cuda.synchronize()
"""


@pytest.mark.emulation
@requires_library
def test_emulated_kernels_carry_their_integer_arguments(tmp_path: Path) -> None:
    """Grid-stride kernels' sizes: the integer parameters of the demangled signature, read at launch."""
    run = run_emulated(KERNEL_ARGS_SCRIPT, tmp_path)
    assert run.returncode == 0, run.output
    ops = {op.name: op for _, op in device_ops(read_trace(run.trace_path())) if op.kind == Kind.KERNEL}
    layer_norm = next(op for name, op in ops.items() if "vectorized_layer_norm_kernel" in name)
    assert layer_norm.a[4] == 1 and layer_norm.params == (300,)  # (int N, float eps, ...)
    bag = next(op for name, op in ops.items() if "EmbeddingBag_updateOutputKernel" in name)
    assert bag.params[:3] == (64, 8, 16)  # numIndices, numBags, featureSize
    fill = [op for name, op in ops.items() if "FillFunctor" in name]
    assert all(op.params and op.params[0] > 0 for op in fill)  # (int N, ...)


STRIDED_SCRIPT = """
import torch
x = torch.empty(4, 8, 16, 64, device="cuda", dtype=torch.bfloat16)
x.permute(0, 2, 1, 3).contiguous()   # heads permuted: the innermost dimension stays contiguous
x.transpose(-1, -2).contiguous()     # innermost dimension transposed
torch.cuda.synchronize()
"""


@pytest.mark.emulation
@requires_library
def test_strided_elementwise_kernels_carry_their_operands_layout(tmp_path: Path) -> None:
    """PyTorch's strided elementwise kernel launches the same grid for both copies; the layout read from its
    closure (dims, innermost size, output's and input's innermost byte strides) is what tells them apart."""
    run = run_emulated(STRIDED_SCRIPT, tmp_path)
    assert run.returncode == 0, run.output
    copies = [op.params for _, op in device_ops(read_trace(run.trace_path()))
              if "18elementwise_kernel" in op.name and "direct_copy_kernel" in op.name]
    assert copies == [(32768, 4, 64, 2, 2), (32768, 3, 16, 2, 128)]


TENSOR_LISTS_SCRIPT = """
import torch
xs = [torch.ones(n, device="cuda") for n in (100000, 1001, 4096)]
torch._foreach_sqrt(xs)                                 # 2 + 1 + 1 blocks of 65536-element chunks
params = [torch.nn.Parameter(torch.ones(n, device="cuda")) for n in (70000, 64)]
for p in params:
    p.grad = torch.ones_like(p)
opt = torch.optim.AdamW(params, fused=True)
opt.step()
torch.cuda.synchronize()
"""


@pytest.mark.emulation
@requires_library
def test_multi_tensor_kernels_carry_what_their_blocks_cover(tmp_path: Path) -> None:
    """A foreach or fused-optimizer launch's grid counts blocks, each up to one 65536-element chunk of one
    tensor; the words read from its tensor list metadata give the elements covered, those off the
    vectorised path (a size no multiple of 4), and the tensors."""
    run = run_emulated(TENSOR_LISTS_SCRIPT, tmp_path)
    assert run.returncode == 0, run.output
    lists = {op.name: op for _, op in device_ops(read_trace(run.trace_path())) if "multi_tensor_apply" in op.name}
    sqrt = next(op for name, op in lists.items() if "UnaryOp" in name)
    assert sqrt.params == (100000 + 1001 + 4096, 1001, 3)
    adam = next(op for name, op in lists.items() if "fused_adam" in name)
    assert adam.params == (70000 + 64, 0, 2)


ATTENTION_SCRIPT = """
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
def qkv(lq, lk, dtype=torch.bfloat16):
    return [torch.randn(3, 5, n, 64, device="cuda", dtype=dtype, requires_grad=True) for n in (lq, lk, lk)]
with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
    F.scaled_dot_product_attention(*qkv(328, 328), is_causal=True).sum().backward()
with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]):
    mask = torch.randn(3, 5, 200, 328, device="cuda", dtype=torch.bfloat16)
    F.scaled_dot_product_attention(*qkv(200, 328), attn_mask=mask).sum().backward()
with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
    F.scaled_dot_product_attention(*qkv(256, 256), is_causal=True).sum().backward()
    padding = torch.randn(3, 1, 1, 256, device="cuda", dtype=torch.bfloat16)
    F.scaled_dot_product_attention(*qkv(256, 256), attn_mask=padding).sum().backward()
torch.cuda.synchronize()
"""


@pytest.mark.emulation
@requires_library
def test_attention_kernels_carry_their_shapes(tmp_path: Path) -> None:
    """Flash and memory-efficient attention kernels: the grid does not say how many keys, the head dimension
    or the mask; the words read from their parameter struct do (batch, heads, query and key lengths, head
    dimension, mask word: bit 0 causal, bit 2 a bias, value head dimension from bit 8)."""
    run = run_emulated(ATTENTION_SCRIPT, tmp_path)
    assert run.returncode == 0, run.output
    ops = [op for _, op in device_ops(read_trace(run.trace_path())) if "flash" in op.name or "fmha" in op.name]
    flash = [op.params for op in ops if "flash" in op.name]
    assert len(flash) >= 3 and set(flash) == {(3, 5, 328, 328, 64, 1 | 64 << 8)}
    forward, backward = (next(op.params for op in ops if f"fmha_cutlass{d}" in op.name) for d in "FB")
    assert forward == (3, 5, 200, 328, 64, 4 | 64 << 8)
    assert backward == (0, 5, 200, 328, 64, 4 | 64 << 8)  # the backward's batch is its grid's z
    # cuDNN's attention graphs: the mask is an input added to the scores (the causal one is generated).
    cudnn = [(op.name, Sdpa.decode(op.a, op.params)) for _, op in device_ops(read_trace(run.trace_path()))
             if op.name.startswith("sdpa")]
    assert [(name, s.causal, s.bias) for name, s in cudnn] == [
        ("sdpa_fprop", True, False), ("sdpa_bprop", True, False), ("sdpa_fprop", False, True),
        ("sdpa_bprop", False, True)]


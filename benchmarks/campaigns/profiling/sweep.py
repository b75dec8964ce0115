#!/usr/bin/env python3
"""Profiling sweep: the GPU work of training, one distinct operation at a time.

    python benchmarks/campaigns/profiling/sweep.py --part {gemm,attention,dnn,memory,copy,...} [--size tiny|full]
                                         [--repeats 3] [--dry-run [--list]]

Recorded on a GPU (`maya record`), the trace gives each operation's device
time; emulated on a CPU (`maya emulate`), it gives the same operations'
features (BLAS sizes, cuDNN parameters, kernel names and grids). The two traces
are joined operation by operation, so both runs must issue exactly the same
device operations: the plan is a fixed list drawn from seeded generators,
filtered by a cost model (never by a clock), and nothing reads device memory.

Each operation is set up (its inputs allocated and filled on the device), issued
once as warm-up and `--repeats` more times back to back, then its tensors are
freed. The device is synchronised once, at the end of the part. Backward
passes go through `torch.autograd.grad`, so that no call accumulates into
`.grad` and the warm-up issues the same kernels as the repeats.

`--size full` is the campaign: seeded samples of each part, kept while the
part's estimated H100 GPU time (warm-up and 3 repeats, from the cost model
below) stays within `BUDGET_S`, under the 90 s a part may take, and its
estimated wall time (cuDNN's plan building included) within `WALL_BUDGET_S`;
no operation holds more than `MEMORY_CAP` bytes of device memory.
`--size tiny` is a handful of small operations per part, for the tests.
`--dry-run` prints the plan (operations, estimated GPU seconds, a digest to
check that two machines run the same plan) without touching CUDA; `--list`
adds every operation.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import math
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

PARTS = ("gemm", "attention", "dnn", "memory", "copy", "gemm-grid", "attention-grid", "attention-mask",
         "conv-modern", "embedding", "scatter")
GiB = 1 << 30

# Cost model of an H100 SXM, used only to plan (what fits the budget) and to
# print the estimate: dense peaks as reached by large GEMMs, HBM bandwidth, a
# per-kernel floor, PCIe rates for pinned and pageable host memory.
PEAK_FLOPS = {"bf16": 700e12, "fp16": 700e12, "tf32": 350e12, "fp32": 50e12}
HBM_BYTES_S = 3e12
# PCIe as torch's copies reached it on the H100 (1 GiB): pinned either way, pageable to the device, pageable
# back to a fresh host tensor (page faults included).
PCIE_BYTES_S = {"pinned": 50e9, "h2d_pageable": 8e9, "d2h_pageable": 1.2e9}
LAUNCH_S = 5e-6
L2_FLUSH_BYTES = 256 << 20  # written before timing a device copy or a parameter list: several times an H100's L2

# Host time, measured on an H100 (torch 2.11.0+cu130, cuDNN 9.19): cuDNN builds a plan the first time it
# meets a shape (SDPA and depthwise convolutions compile kernels at run time), and Python issues each call.
CUDNN_SDPA_PLAN_S = 0.13          # forward and backward (median of 1615 shapes)
CUDNN_SDPA_DROPOUT_PLAN_S = 0.35  # the same with dropout (mean of 152)
CUDNN_CONV_PLAN_S = 0.005         # per direction (median of 860 shapes: 10 to 15 ms for three)
CUDNN_DEPTHWISE_PLAN_S = 1.0      # depthwise forward and backward (median 0.5 to 0.9 s, 90th percentile 1.8 s)
HOST_CALL_S = 20e-6               # one torch call issued from Python

BUDGET_S = 60.0        # estimated GPU seconds per full part (warm-up + default repeats)
WALL_BUDGET_S = 120.0  # estimated seconds per full part, host included (room for `maya record`'s overhead)
PLAN_CALLS = 4         # warm-up + 3 repeats: the budget is planned for this, whatever --repeats says
MEMORY_CAP = 16 * GiB  # device bytes one operation may hold (the caching allocator keeps more: see README)
MATRIX_CAP = 4 * GiB   # bytes of any one GEMM operand
FLOP_CAP = 3e12        # flops of any one call
CALL_CAP_S = 0.05      # estimated GPU seconds of any one call: many shapes rather than a few huge ones

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "tf32": torch.float32}
ITEMSIZE = {"bf16": 2, "fp16": 2, "fp32": 4, "tf32": 4}

Call = Callable[[], object]


@dataclass(frozen=True)
class Op:
    """One distinct operation of a sweep.

    ``setup`` allocates the inputs on the device and returns the call to
    repeat; the plan itself never touches CUDA (``--dry-run``).
    ``seconds`` is the estimated GPU time of one call, ``device_bytes`` what
    it holds on the device while it runs, ``host_s`` the estimated host time
    of the whole operation (setup, plan building, issuing every call).
    """

    family: str
    label: str
    seconds: float
    device_bytes: int
    setup: Callable[[], Call]
    host_s: float

    @property
    def wall_s(self) -> float:
        """Estimated seconds of the operation with warm-up and 3 repeats, host and GPU not overlapping."""
        return self.host_s + self.seconds * PLAN_CALLS


def compute_s(flops: float, nbytes: float, dtype: str, kernels: int = 1, efficiency: float = 1.0) -> float:
    """Estimated time of work bound by either the tensor cores or HBM."""
    return max(flops / (PEAK_FLOPS[dtype] * efficiency), nbytes / HBM_BYTES_S) + kernels * LAUNCH_S


def memory_s(nbytes: float, kernels: int = 1) -> float:
    """Estimated time of memory-bound work (80% of HBM bandwidth)."""
    return nbytes / (0.8 * HBM_BYTES_S) + kernels * LAUNCH_S


def within_budget(candidates: Iterable[Op], call_cap_s: float = CALL_CAP_S, share: float = 1.0) -> list[Op]:
    """The distinct candidates, in order, that fit the memory and call caps and ``share`` of the part's GPU and
    wall budgets."""
    chosen: dict[str, Op] = {}
    gpu = wall = 0.0
    for op in candidates:
        if op.label in chosen or op.device_bytes > MEMORY_CAP or op.seconds > call_cap_s:
            continue
        if gpu + op.seconds * PLAN_CALLS > share * BUDGET_S or wall + op.wall_s > share * WALL_BUDGET_S:
            continue
        chosen[op.label] = op
        gpu += op.seconds * PLAN_CALLS
        wall += op.wall_s
    return list(chosen.values())


def host_s(torch_calls: int, setup_calls: int = 3, plan_s: float = 0.0) -> float:
    """Host time of an operation: its setup's torch calls, ``torch_calls`` per call, a one-time plan build."""
    return (setup_calls + PLAN_CALLS * torch_calls) * HOST_CALL_S + plan_s


def log_uniform(rng: random.Random, lo: float, hi: float, align: int = 1) -> int:
    """An integer drawn log-uniformly in [lo, hi], rounded to a multiple of ``align``."""
    v = 2 ** rng.uniform(math.log2(lo), math.log2(hi))
    return int(min(max(align, round(v / align) * align), hi))


def randn(*shape: int, dtype: str = "fp32", grad: bool = False) -> torch.Tensor:
    return torch.randn(*shape, device="cuda", dtype=DTYPES[dtype], requires_grad=grad)


# ---------------------------------------------------------------- gemm

GEMM_VARIANTS = ("mm", "addmm", "linear", "addmm_gelu", "addmm_relu", "bmm", "baddbmm")
GEMM_WEIGHTS = (40, 10, 10, 7, 3, 20, 10)
GEMM_DTYPES = ("bf16", "fp16", "fp32", "tf32")
GEMM_DTYPE_WEIGHTS = (35, 20, 15, 30)


def _operand(batch: int, rows: int, cols: int, transposed: bool, dtype: str) -> torch.Tensor:
    """A rows x cols operand, stored transposed (a column-major view) when asked."""
    shape = (cols, rows) if transposed else (rows, cols)
    t = randn(*((batch, *shape) if batch else shape), dtype=dtype)
    return t.transpose(-1, -2) if transposed else t


def gemm_op(variant: str, dtype: str, m: int, n: int, k: int, batch: int = 0, ta: bool = False,
            tb: bool = False) -> Op:
    """(m x k) @ (k x n), ``batch`` times for bmm/baddbmm; ``ta``/``tb`` make the operand a transposed view.

    addmm (bias) runs cuBLASLt's bias epilogue, addmm_gelu/relu
    ``torch._addmm_activation``'s GELU/ReLU epilogue; linear is ``F.linear``
    with bias (the weight is n x k, as in nn.Linear); tf32 is fp32 with
    ``allow_tf32``.
    """
    nb = max(batch, 1)
    size = ITEMSIZE[dtype]
    flops = 2.0 * nb * m * n * k
    moved = nb * (m * k + k * n + m * n * (2 if variant == "baddbmm" else 1)) * size
    efficiency = 0.7 if min(m, n, k) >= 256 else 0.4
    if any(dim % (16 // size) for dim in (m, n, k)):  # rows not 16-byte aligned: slower tensor-core kernels
        efficiency *= 0.3
    label = f"{variant} {dtype} m={m} n={n} k={k}" + (f" b={batch}" if batch else "") + f" {'TN'[ta]}{'TN'[tb]}"

    def setup() -> Call:
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        a = _operand(batch, m, k, ta, dtype)
        if variant == "linear":
            w = _operand(0, n, k, tb, dtype)  # the weight as stored: (n, k); tb transposes its storage
            bias = randn(n, dtype=dtype)
            return lambda: F.linear(a, w, bias)
        b = _operand(batch, k, n, tb, dtype)
        if variant == "mm":
            return lambda: torch.mm(a, b)
        if variant == "bmm":
            return lambda: torch.bmm(a, b)
        if variant == "baddbmm":
            c = randn(batch, m, n, dtype=dtype)
            return lambda: torch.baddbmm(c, a, b)
        bias = randn(n, dtype=dtype)
        if variant == "addmm":
            return lambda: torch.addmm(bias, a, b)
        gelu = variant == "addmm_gelu"
        return lambda: torch._addmm_activation(bias, a, b, use_gelu=gelu)

    return Op("gemm " + variant, label, compute_s(flops, moved, dtype, efficiency=efficiency),
              moved + n * size, setup, host_s(1))


def _gemm_fits(dtype: str, m: int, n: int, k: int, batch: int) -> bool:
    nb = max(batch, 1) * ITEMSIZE[dtype]
    return max(m * k, k * n, m * n) * nb <= MATRIX_CAP and 2.0 * max(batch, 1) * m * n * k <= FLOP_CAP


def _training_gemms() -> Iterator[Op]:
    """The three GEMMs of each linear layer of GPT/BERT/Llama-sized transformers, forward and backward."""
    for tokens in (2048, 8192, 16384):
        for hidden in (768, 1024, 2048, 4096):
            for d_in, d_out in ((hidden, 3 * hidden), (hidden, hidden), (hidden, 4 * hidden), (4 * hidden, hidden)):
                for dtype in ("bf16", "fp16"):
                    if not _gemm_fits(dtype, tokens, d_out, d_in, 0):
                        continue
                    yield gemm_op("linear", dtype, tokens, d_out, d_in)               # y = x W^T + b
                    yield gemm_op("mm", dtype, tokens, d_in, d_out)                   # dx = dy W
                    yield gemm_op("mm", dtype, d_out, d_in, tokens, ta=True)          # dW = dy^T x


def _random_gemms(rng: random.Random, draws: int) -> Iterator[Op]:
    for _ in range(draws):
        variant = rng.choices(GEMM_VARIANTS, GEMM_WEIGHTS)[0]
        dtype = rng.choices(GEMM_DTYPES, GEMM_DTYPE_WEIGHTS)[0]
        batched = variant in ("bmm", "baddbmm")
        batch = log_uniform(rng, 1, 1024) if batched else 0
        hi = 16384 if batched else 65536
        m, n, k = (log_uniform(rng, 1, hi, rng.choice((1, 8, 64))) for _ in range(3))
        ta, tb = rng.random() < 0.5, rng.random() < 0.5
        if _gemm_fits(dtype, m, n, k, batch):
            yield gemm_op(variant, dtype, m, n, k, batch, ta, tb)


def gemm_plan(size: str) -> list[Op]:
    if size == "tiny":
        return [
            gemm_op("mm", "bf16", 64, 128, 32),
            gemm_op("mm", "tf32", 96, 64, 48, ta=True),
            gemm_op("mm", "fp32", 33, 17, 65, tb=True),
            gemm_op("addmm", "bf16", 128, 64, 32),
            gemm_op("linear", "fp16", 64, 96, 32),
            gemm_op("addmm_gelu", "bf16", 64, 64, 64),
            gemm_op("bmm", "fp16", 32, 64, 16, batch=4, tb=True),
            gemm_op("baddbmm", "bf16", 16, 32, 64, batch=3),
        ]
    return within_budget([*_training_gemms(), *_random_gemms(random.Random(0), 20000)])


# A log grid of four points an octave (2^i times 1, 1.25, 1.5, 1.75): the sizes models are built from (768,
# 1536, 3072, 5120, 7168, 14336...), every one aligned from 8 up, and dense enough that a held-out point's
# neighbours on the grid were profiled.
LOG_GRID = tuple(sorted({int(2**i * f) for i in range(17) for f in (1, 1.25, 1.5, 1.75)
                         if float(2**i * f).is_integer() and 2**i * f <= 65536}))


def _grid_gemms(rng: random.Random, draws: int) -> Iterator[Op]:
    """GEMMs on ``LOG_GRID``: the variants, types and transposes of the random sweep, sizes from the grid."""
    for _ in range(draws):
        variant = rng.choices(GEMM_VARIANTS, GEMM_WEIGHTS)[0]
        dtype = rng.choices(GEMM_DTYPES, GEMM_DTYPE_WEIGHTS)[0]
        batched = variant in ("bmm", "baddbmm")
        batch = rng.choice(LOG_GRID[:LOG_GRID.index(1024) + 1]) if batched else 0
        dims = LOG_GRID[:LOG_GRID.index(16384) + 1] if batched else LOG_GRID
        m, n, k = (rng.choice(dims) for _ in range(3))
        ta, tb = rng.random() < 0.5, rng.random() < 0.5
        if _gemm_fits(dtype, m, n, k, batch):
            yield gemm_op(variant, dtype, m, n, k, batch, ta, tb)


def gemm_grid_plan(size: str) -> list[Op]:
    if size == "tiny":
        return [gemm_op("mm", "bf16", 96, 1280, 64), gemm_op("bmm", "tf32", 48, 40, 64, batch=6, tb=True)]
    return within_budget(_grid_gemms(random.Random(5), 40000), share=0.7)


# ---------------------------------------------------------------- attention

BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "math": SDPBackend.MATH,
}
# Relative speed of each backend against the dense peak (forward and backward together).
BACKEND_EFFICIENCY = {"flash": 0.45, "cudnn": 0.55, "efficient": 0.3}


# Masks an encoder-decoder or a padded batch passes as ``attn_mask``: (shape of the mask, bool or additive).
MASKS = {
    "full": (lambda b, h, sq, sk: (b, h, sq, sk), False),     # one additive score per query-key pair
    "padding": (lambda b, h, sq, sk: (b, 1, 1, sk), False),   # keys masked per sequence
    "square": (lambda b, h, sq, sk: (sq, sk), False),         # one mask for every sequence and head
    "bool": (lambda b, h, sq, sk: (sq, sk), True),            # a boolean lower-triangular mask
}


def attention_op(backend: str, dtype: str, b: int, h: int, sq: int, sk: int, d: int, causal: bool = False,
                 hk: int = 0, dropout: float = 0.0, mask: str = "") -> Op:
    """``F.scaled_dot_product_attention`` forward and backward on one backend.

    Q, K, V are laid out as a transformer makes them, (B, S, H, D) transposed
    to (B, H, S, D); ``hk`` < ``h`` is grouped-query attention; ``mask`` one of
    :data:`MASKS`, passed as ``attn_mask``.
    """
    hk = hk or h
    size = ITEMSIZE[dtype]
    flops = 4.0 * b * h * sq * sk * d * (0.5 if causal else 1.0) * 3.5  # forward 1, backward 2.5
    io = (2 * b * h * sq * d + 2 * b * hk * sk * d) * size * 2  # inputs, output and their gradients
    mask_shape = MASKS[mask][0](b, h, sq, sk) if mask else ()
    io += 2 * math.prod(mask_shape) * size if mask else 0  # read by the forward and the backward
    if backend == "math":  # fp32 batched GEMMs and several passes over the B x H x Sq x Sk scores
        seconds = compute_s(flops, io + 10.0 * b * h * sq * sk * 4, "fp32", kernels=20)
        held = io + 4 * b * h * sq * sk * 4
        host = host_s(50, 4)
    else:
        seconds = compute_s(flops, io, dtype, kernels=6, efficiency=BACKEND_EFFICIENCY[backend])
        held = io + b * h * sq * d * 4
        plan = (CUDNN_SDPA_DROPOUT_PLAN_S if dropout else CUDNN_SDPA_PLAN_S) if backend == "cudnn" else 0.0
        host = host_s(15, 4, plan)
    label = (f"{backend} {dtype} b={b} h={h} hk={hk} sq={sq} sk={sk} d={d}"
             f"{' causal' if causal else ''}{f' dropout={dropout}' if dropout else ''}{f' mask={mask}' if mask else ''}")

    def setup() -> Call:
        q0, k0, v0 = (randn(b, s, heads, d, dtype=dtype, grad=True) for s, heads in ((sq, h), (sk, hk), (sk, hk)))
        grad_out = randn(b, sq, h, d, dtype=dtype).transpose(1, 2)
        q, k, v = (t.transpose(1, 2) for t in (q0, k0, v0))
        attn_mask = None
        if mask:
            shape, boolean = MASKS[mask]
            attn_mask = (torch.ones(*shape(b, h, sq, sk), device="cuda", dtype=torch.bool).tril() if boolean
                         else randn(*shape(b, h, sq, sk), dtype=dtype))

        def call() -> object:
            with sdpa_kernel([BACKENDS[backend]]):
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout,
                                                     is_causal=causal, enable_gqa=hk != h)
            return torch.autograd.grad(out, (q0, k0, v0), grad_out)

        return call

    return Op("attention " + backend, label, seconds, held, setup, host)


def _attention_shape_ok(backend: str, dtype: str, b: int, h: int, sq: int, sk: int, d: int, hk: int,
                        dropout: float) -> bool:
    """Each backend's constraints on an H100 (torch 2.11, cuDNN 9.19), so that no call raises."""
    if backend in ("flash", "cudnn") and dtype == "fp32":
        return False
    if backend == "cudnn" and (d > 128 or d % 8 or sk == 1 or (hk != h and dropout)):
        return False
    if backend == "efficient" and hk != h:
        return False
    if 2 * b * h * max(sq, sk) * d * ITEMSIZE[dtype] > 2 * GiB:
        return False
    if backend == "math" and b * h * sq * sk > 1 << 28:
        return False
    return 4.0 * b * h * sq * sk * d <= FLOP_CAP


def _random_attention(rng: random.Random, draws: int) -> Iterator[Op]:
    for _ in range(draws):
        backend = rng.choices(("cudnn", "flash", "efficient", "math"), (35, 30, 25, 10))[0]
        low_precision = backend in ("flash", "cudnn") or rng.random() < 0.7
        dtype = rng.choice(("bf16", "fp16")) if low_precision else "fp32"
        d = rng.choices((64, 128, 32, 80, 96), (35, 35, 10, 10, 10))[0]
        b = 2 ** rng.randint(0, 5)
        h = rng.choice((1, 2, 4, 8, 12, 16, 24, 32))
        sq = log_uniform(rng, 16, 16384, rng.choice((1, 64)))
        causal = rng.random() < 0.5
        sk = sq if causal or rng.random() < 0.7 else log_uniform(rng, 16, 16384, rng.choice((1, 64)))
        hk = h
        if backend != "efficient" and h >= 4 and rng.random() < 0.15:
            hk = h // rng.choice((2, 4))
        dropout = 0.125 if rng.random() < 0.1 else 0.0
        if _attention_shape_ok(backend, dtype, b, h, sq, sk, d, hk, dropout):
            yield attention_op(backend, dtype, b, h, sq, sk, d, causal, hk, dropout)


def _model_attention() -> Iterator[Op]:
    """GPT/BERT/Llama-like attention on every backend, causal and not."""
    for backend in BACKENDS:
        for dtype in ("bf16", "fp16"):
            for b, h, s, d in ((8, 12, 1024, 64), (4, 16, 2048, 128), (32, 12, 512, 64), (2, 32, 4096, 128)):
                for causal in (True, False):
                    if _attention_shape_ok(backend, dtype, b, h, s, s, d, h, 0.0):
                        yield attention_op(backend, dtype, b, h, s, s, d, causal)


def attention_plan(size: str) -> list[Op]:
    if size == "tiny":
        return [
            attention_op("flash", "bf16", 2, 4, 128, 128, 64, causal=True),
            attention_op("cudnn", "bf16", 2, 4, 128, 128, 64, causal=True),
            attention_op("cudnn", "fp16", 1, 8, 96, 160, 128, hk=2),
            attention_op("efficient", "fp16", 2, 2, 100, 100, 80),
            attention_op("efficient", "fp32", 1, 2, 64, 128, 32),
            attention_op("math", "bf16", 1, 2, 64, 64, 64, causal=True),
        ]
    return within_budget([*_model_attention(), *_random_attention(random.Random(1), 5000)])


def _grid_attention(rng: random.Random, draws: int) -> Iterator[Op]:
    """The default paths of training on an H100 (cuDNN, then flash), at the shapes of transformers."""
    for _ in range(draws):
        backend = rng.choices(("cudnn", "flash"), (75, 25))[0]
        dtype = rng.choice(("bf16", "fp16"))
        d = rng.choices((64, 128, 96, 80), (45, 45, 5, 5))[0]
        b = rng.choice((1, 2, 4, 8, 16, 32))
        h = rng.choice((4, 8, 12, 16, 20, 24, 32, 40, 48))
        s = rng.choice((128, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384))
        hk = h // rng.choice((2, 4, 8)) if h % 8 == 0 and rng.random() < 0.2 else h
        causal = rng.random() < 0.6
        if _attention_shape_ok(backend, dtype, b, h, s, s, d, hk, 0.0):
            yield attention_op(backend, dtype, b, h, s, s, d, causal, hk)


def attention_grid_plan(size: str) -> list[Op]:
    if size == "tiny":
        return [attention_op("cudnn", "bf16", 2, 8, 256, 256, 128, causal=True, hk=2)]
    return within_budget(_grid_attention(random.Random(6), 3000), share=0.3)


def _masked_attention(rng: random.Random, draws: int) -> Iterator[Op]:
    """Attention under an ``attn_mask`` (encoder-decoders, padded batches): cuDNN adds it to the scores
    in its graph, memory-efficient attention reads it as a bias; at transformer shapes."""
    for _ in range(draws):
        backend = rng.choices(("cudnn", "efficient"), (75, 25))[0]
        dtype = rng.choice(("bf16", "fp16"))
        d = rng.choices((64, 128, 96, 80), (50, 40, 5, 5))[0]
        b = rng.choice((1, 2, 4, 8, 16, 32, 64))
        h = rng.choice((4, 8, 12, 16, 24, 32))
        sq = rng.choice((64, 128, 256, 384, 512, 768, 1024, 2048, 4096, 8192))
        sk = sq if rng.random() < 0.7 else rng.choice((64, 128, 256, 512, 1024, 2048, 4096))
        mask = rng.choices(tuple(MASKS), (30, 40, 20, 10))[0]
        if _attention_shape_ok(backend, dtype, b, h, sq, sk, d, h, 0.0) and (
                mask != "full" or 2 * b * h * sq * sk * ITEMSIZE[dtype] <= 2 * GiB):
            yield attention_op(backend, dtype, b, h, sq, sk, d, mask=mask)


def attention_mask_plan(size: str) -> list[Op]:
    if size == "tiny":
        return [attention_op("cudnn", "bf16", 2, 4, 128, 192, 64, mask="padding"),
                attention_op("efficient", "fp16", 2, 2, 96, 96, 64, mask="full")]
    return within_budget(_masked_attention(random.Random(7), 3000), share=0.3)


# ---------------------------------------------------------------- dnn

# (name, C, K, filter, stride, input size, groups, bias) at 224x224 input.
ConvLayer = tuple[str, int, int, int, int, int, int, bool]
CONV_LAYERS: tuple[ConvLayer, ...] = (
    # ResNet-18/34 (basic blocks) and the shared stem
    ("resnet stem", 3, 64, 7, 2, 224, 1, False),
    ("resnet18 s1", 64, 64, 3, 1, 56, 1, False),
    ("resnet18 s2 in", 64, 128, 3, 2, 56, 1, False),
    ("resnet18 s2", 128, 128, 3, 1, 28, 1, False),
    ("resnet18 s2 down", 64, 128, 1, 2, 56, 1, False),
    ("resnet18 s3 in", 128, 256, 3, 2, 28, 1, False),
    ("resnet18 s3", 256, 256, 3, 1, 14, 1, False),
    ("resnet18 s3 down", 128, 256, 1, 2, 28, 1, False),
    ("resnet18 s4 in", 256, 512, 3, 2, 14, 1, False),
    ("resnet18 s4", 512, 512, 3, 1, 7, 1, False),
    ("resnet18 s4 down", 256, 512, 1, 2, 14, 1, False),
    # ResNet-50 (bottlenecks, stride on the 3x3)
    ("resnet50 s1 reduce0", 64, 64, 1, 1, 56, 1, False),
    ("resnet50 s1 reduce", 256, 64, 1, 1, 56, 1, False),
    ("resnet50 s1 expand", 64, 256, 1, 1, 56, 1, False),
    ("resnet50 s2 reduce0", 256, 128, 1, 1, 56, 1, False),
    ("resnet50 s2 3x3 in", 128, 128, 3, 2, 56, 1, False),
    ("resnet50 s2 reduce", 512, 128, 1, 1, 28, 1, False),
    ("resnet50 s2 expand", 128, 512, 1, 1, 28, 1, False),
    ("resnet50 s2 down", 256, 512, 1, 2, 56, 1, False),
    ("resnet50 s3 reduce0", 512, 256, 1, 1, 28, 1, False),
    ("resnet50 s3 3x3 in", 256, 256, 3, 2, 28, 1, False),
    ("resnet50 s3 reduce", 1024, 256, 1, 1, 14, 1, False),
    ("resnet50 s3 expand", 256, 1024, 1, 1, 14, 1, False),
    ("resnet50 s3 down", 512, 1024, 1, 2, 28, 1, False),
    ("resnet50 s4 reduce0", 1024, 512, 1, 1, 14, 1, False),
    ("resnet50 s4 3x3 in", 512, 512, 3, 2, 14, 1, False),
    ("resnet50 s4 reduce", 2048, 512, 1, 1, 7, 1, False),
    ("resnet50 s4 expand", 512, 2048, 1, 1, 7, 1, False),
    ("resnet50 s4 down", 1024, 2048, 1, 2, 14, 1, False),
    # VGG-16 (3x3, stride 1, with bias)
    ("vgg 1a", 3, 64, 3, 1, 224, 1, True),
    ("vgg 1b", 64, 64, 3, 1, 224, 1, True),
    ("vgg 2a", 64, 128, 3, 1, 112, 1, True),
    ("vgg 2b", 128, 128, 3, 1, 112, 1, True),
    ("vgg 3a", 128, 256, 3, 1, 56, 1, True),
    ("vgg 3b", 256, 256, 3, 1, 56, 1, True),
    ("vgg 4a", 256, 512, 3, 1, 28, 1, True),
    ("vgg 4b", 512, 512, 3, 1, 28, 1, True),
    ("vgg 5", 512, 512, 3, 1, 14, 1, True),
    # MobileNet-V2: 3x3 stem, depthwise 3x3, 1x1 expand / project
    ("mobilenet stem", 3, 32, 3, 2, 224, 1, False),
    ("mobilenet dw 32", 32, 32, 3, 1, 112, 32, False),
    ("mobilenet dw 96 s2", 96, 96, 3, 2, 112, 96, False),
    ("mobilenet dw 144", 144, 144, 3, 1, 56, 144, False),
    ("mobilenet dw 144 s2", 144, 144, 3, 2, 56, 144, False),
    ("mobilenet dw 192", 192, 192, 3, 1, 28, 192, False),
    ("mobilenet dw 384", 384, 384, 3, 1, 14, 384, False),
    ("mobilenet dw 576 s2", 576, 576, 3, 2, 14, 576, False),
    ("mobilenet dw 960", 960, 960, 3, 1, 7, 960, False),
    ("mobilenet pw 32-16", 32, 16, 1, 1, 112, 1, False),
    ("mobilenet pw 16-96", 16, 96, 1, 1, 112, 1, False),
    ("mobilenet pw 24-144", 24, 144, 1, 1, 56, 1, False),
    ("mobilenet pw 144-24", 144, 24, 1, 1, 56, 1, False),
    ("mobilenet pw 32-192", 32, 192, 1, 1, 28, 1, False),
    ("mobilenet pw 64-384", 64, 384, 1, 1, 14, 1, False),
    ("mobilenet pw 384-64", 384, 64, 1, 1, 14, 1, False),
    ("mobilenet pw 96-576", 96, 576, 1, 1, 14, 1, False),
    ("mobilenet pw 160-960", 160, 960, 1, 1, 7, 1, False),
    ("mobilenet pw 960-160", 960, 160, 1, 1, 7, 1, False),
    ("mobilenet pw 320-1280", 320, 1280, 1, 1, 7, 1, False),
)
CONV_BATCHES = (1, 2, 8, 16, 32, 64, 128, 256)
DNN_DTYPES = ("bf16", "fp16", "fp32")
CONV_VARIANTS = 3000  # seeded layers of other widths and resolutions, so that estimators see more than these nets
DEPTHWISE_SHARE = 0.25


def _scaled_layer(rng: random.Random, layers: tuple[ConvLayer, ...] = CONV_LAYERS) -> ConvLayer:
    """A layer of ``layers`` with its channels (multiples of 8) and input size scaled by seeded factors."""
    name, c, k, r, stride, hw, groups, bias = rng.choice(layers)
    width, resolution = rng.choice((0.5, 0.75, 1.25, 1.5, 2.0)), rng.choice((0.5, 0.75, 0.875, 1.25, 1.5))
    k = max(8, round(k * width / 8) * 8)
    c = k if groups > 1 else c if c == 3 else max(8, round(c * width / 8) * 8)
    return f"{name} x{width} @{resolution}", c, k, r, stride, max(r, round(hw * resolution)), c if groups > 1 else 1, bias


def _layout(t: torch.Tensor, channels_last: bool) -> torch.Tensor:
    return t.contiguous(memory_format=torch.channels_last) if channels_last else t


def conv_op(name: str, n: int, c: int, k: int, r: int, stride: int, hw: int, groups: int, bias: bool, dtype: str,
            channels_last: bool) -> Op:
    """``F.conv2d`` forward, then the input and weight gradients (no input gradient for an RGB image).  Padded
    to keep the size, except a patchifying convolution (stride as wide as the filter), which has none."""
    pad = _conv_pad(r, stride)
    out = _conv_out(hw, r, stride)
    size = ITEMSIZE[dtype]
    x_n, y_n, w_n = n * c * hw * hw, n * k * out * out, k * (c // groups) * r * r
    input_grad = c != 3
    flops = 2.0 * n * k * out * out * (c // groups) * r * r * (3 if input_grad else 2)
    moved = (2 * x_n + 3 * y_n + 2 * w_n) * size
    efficiency = 0.5 if groups == 1 and c >= 16 else 0.05
    peak = "tf32" if dtype == "fp32" else dtype  # cuDNN convolutions use TF32 by default
    layout = "NHWC" if channels_last else "NCHW"
    label = f"conv {name} {dtype} {layout} n={n} c={c} k={k} r={r} s={stride} hw={hw} g={groups}"

    def setup() -> Call:
        x = _layout(randn(n, c, hw, hw, dtype=dtype), channels_last).requires_grad_(input_grad)
        w = _layout(randn(k, c // groups, r, r, dtype=dtype), channels_last).requires_grad_()
        b = randn(k, dtype=dtype, grad=True) if bias else None
        grad_out = _layout(randn(n, k, out, out, dtype=dtype), channels_last)
        inputs = tuple(t for t in (x if input_grad else None, w, b) if t is not None)

        def call() -> object:
            y = F.conv2d(x, w, b, stride, pad, 1, groups)
            return torch.autograd.grad(y, inputs, grad_out)

        return call

    seconds = compute_s(flops, moved, peak, kernels=6, efficiency=efficiency)
    plan = CUDNN_DEPTHWISE_PLAN_S if groups > 1 else CUDNN_CONV_PLAN_S * (3 if input_grad else 2)
    host = host_s(15, 4, plan)
    family = "dnn conv depthwise" if groups > 1 else "dnn conv"
    return Op(family, label, seconds, (2 * x_n + 3 * y_n + 3 * w_n) * size + (64 << 20), setup, host)


def _conv_pad(r: int, stride: int) -> int:
    """conv_op's padding: none for a patchifying convolution, else what keeps the size at stride 1."""
    return 0 if stride == r > 1 else r // 2


def _conv_out(hw: int, r: int, stride: int) -> int:
    """conv_op's output size."""
    return (hw + 2 * _conv_pad(r, stride) - r) // stride + 1


def batchnorm_op(n: int, c: int, hw: int, dtype: str, channels_last: bool) -> Op:
    """``F.batch_norm`` in training (fp32 affine parameters and running stats, as with autocast), forward and backward."""
    elems = n * c * hw * hw
    size = ITEMSIZE[dtype]
    layout = "NHWC" if channels_last else "NCHW"

    def setup() -> Call:
        x = _layout(randn(n, c, hw, hw, dtype=dtype), channels_last).requires_grad_()
        w, b = randn(c, grad=True), randn(c, grad=True)
        mean, var = torch.zeros(c, device="cuda"), torch.ones(c, device="cuda")
        grad_out = _layout(randn(n, c, hw, hw, dtype=dtype), channels_last)

        def call() -> object:
            y = F.batch_norm(x, mean, var, w, b, training=True, momentum=0.1, eps=1e-5)
            return torch.autograd.grad(y, (x, w, b), grad_out)

        return call

    return Op("dnn batchnorm", f"batchnorm {dtype} {layout} n={n} c={c} hw={hw}",
              memory_s(7.0 * elems * size, kernels=4), 5 * elems * size, setup, host_s(15, 6))


def dnn_plan(size: str) -> list[Op]:
    if size == "tiny":
        return [
            conv_op("tiny 3x3", 2, 16, 32, 3, 1, 16, 1, False, "bf16", True),
            conv_op("tiny 1x1 s2", 2, 32, 16, 1, 2, 16, 1, True, "fp32", False),
            conv_op("tiny stem", 2, 3, 16, 7, 2, 32, 1, False, "fp16", True),
            conv_op("tiny dw", 2, 32, 32, 3, 1, 16, 32, False, "bf16", True),
            batchnorm_op(2, 16, 16, "fp32", True),
            batchnorm_op(2, 32, 8, "fp16", False),
        ]
    rng = random.Random(2)
    convs = [(layer, n, dtype, channels_last) for dtype in DNN_DTYPES for channels_last in (True, False)
             for layer in CONV_LAYERS for n in CONV_BATCHES]
    convs += [(_scaled_layer(rng), rng.choice(CONV_BATCHES), rng.choice(DNN_DTYPES), rng.random() < 0.5)
              for _ in range(CONV_VARIANTS)]
    ops: list[Op] = []
    norms: dict[tuple[int, int, int, str, bool], None] = {}
    for (name, c, k, r, stride, hw, groups, bias), n, dtype, channels_last in convs:
        ops.append(conv_op(name, n, c, k, r, stride, hw, groups, bias, dtype, channels_last))
        norms[(n, k, _conv_out(hw, r, stride), dtype, channels_last)] = None
    ops += [batchnorm_op(n, c, hw, dtype, cl) for n, c, hw, dtype, cl in norms]
    rng.shuffle(ops)  # what the budget leaves out is spread over every shape and type
    # Depthwise convolutions cost about a second of host time each: a fixed share keeps them from crowding out the rest.
    depthwise = within_budget((op for op in ops if op.family == "dnn conv depthwise"), share=DEPTHWISE_SHARE)
    return within_budget([*depthwise, *(op for op in ops if op.family != "dnn conv depthwise")])


# Layers of recent convolutional and vision-transformer nets that the classic ones above lack, at 224x224
# input: ConvNeXt-T's 4x4 stride-4 stem, 7x7 depthwise convolutions and 2x2 stride-2 downsampling,
# EfficientNet-B0's 5x5 depthwise convolutions, ViT-B/16's patch embedding.  Each comes with the LayerNorm
# over channels that ConvNeXt puts after it (rows: pixels, columns: channels).
MODERN_LAYERS: tuple[ConvLayer, ...] = (
    ("convnext stem", 3, 96, 4, 4, 224, 1, True),
    ("convnext dw 96", 96, 96, 7, 1, 56, 96, True),
    ("convnext down 96", 96, 192, 2, 2, 56, 1, True),
    ("convnext dw 192", 192, 192, 7, 1, 28, 192, True),
    ("convnext down 192", 192, 384, 2, 2, 28, 1, True),
    ("convnext dw 384", 384, 384, 7, 1, 14, 384, True),
    ("convnext down 384", 384, 768, 2, 2, 14, 1, True),
    ("convnext dw 768", 768, 768, 7, 1, 7, 768, True),
    ("efficientnet dw5 144 s2", 144, 144, 5, 2, 56, 144, False),
    ("efficientnet dw5 240", 240, 240, 5, 1, 28, 240, False),
    ("efficientnet dw5 480", 480, 480, 5, 1, 14, 480, False),
    ("efficientnet dw5 672 s2", 672, 672, 5, 2, 14, 672, False),
    ("efficientnet dw5 1152", 1152, 1152, 5, 1, 7, 1152, False),
    ("vit patch 16", 3, 768, 16, 16, 224, 1, True),
)
MODERN_BATCHES = (8, 16, 32, 64, 128, 256)


def conv_modern_plan(size: str) -> list[Op]:
    if size == "tiny":
        return [conv_op("tiny dw 7x7", 2, 32, 32, 7, 1, 14, 32, True, "bf16", True),
                conv_op("tiny patch 4", 2, 3, 32, 4, 4, 32, 1, True, "fp16", True),
                rowwise_op("layer_norm", 2 * 8 * 8, 32, "fp32")]
    rng = random.Random(9)
    layers = [*MODERN_LAYERS, *(_scaled_layer(rng, MODERN_LAYERS) for _ in range(len(MODERN_LAYERS) * 4))]
    convs = [(layer, n, dtype, channels_last) for layer in layers for n in MODERN_BATCHES for dtype in DNN_DTYPES
             for channels_last in (True, False)]
    rng.shuffle(convs)
    ops = [conv_op(name, n, c, k, r, stride, hw, groups, bias, dtype, channels_last)
           for (name, c, k, r, stride, hw, groups, bias), n, dtype, channels_last in convs]
    norms = [rowwise_op("layer_norm", n * _conv_out(hw, r, stride) ** 2, k, dtype)
             for (_, _, k, r, stride, hw, _, _), n, dtype, _ in convs[:len(convs) // 4]]
    # Depthwise convolutions are the layers the dnn part has fewest of, and cost a second of host time each:
    # they get three quarters of the budget.
    depthwise = within_budget((op for op in ops if op.family == "dnn conv depthwise"), share=0.75)
    return within_budget([*depthwise, *norms, *(op for op in ops if op.family != "dnn conv depthwise")])


# ---------------------------------------------------------------- memory

MEMORY_DTYPES = ("fp32", "bf16", "fp16")


def _sizes(rng: random.Random, lo: int, hi: int, extra: int) -> list[int]:
    """Byte sizes: every power of two in [lo, hi] and ``extra`` seeded sizes between them."""
    powers = [1 << e for e in range(lo.bit_length() - 1, hi.bit_length())]
    return powers + [log_uniform(rng, lo, hi, 16) for _ in range(extra)]


def _rows_cols(rng: random.Random, numel: int, lo: int = 8, hi: int = 65536) -> tuple[int, int]:
    cols = min(log_uniform(rng, lo, hi), numel)
    return max(1, numel // cols), cols


def _op(family: str, detail: str, moved: float, held: float, kernels: int, setup: Callable[[], Call],
        tensors: int = 1) -> Op:
    """A memory-bound operation of ``kernels`` launches per call over lists of ``tensors`` tensors."""
    host = host_s(3 * kernels + tensors // 8, 2 + tensors)
    return Op("memory " + family, f"{family} {detail}", memory_s(moved, kernels), int(held), setup, host)


def _unary(name: str, fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[int, str, random.Random], Op]:
    """An elementwise function, forward and backward through autograd."""

    def make(numel: int, dtype: str, rng: random.Random) -> Op:
        size = ITEMSIZE[dtype]

        def setup() -> Call:
            x, grad_out = randn(numel, dtype=dtype, grad=True), randn(numel, dtype=dtype)

            def call() -> object:
                return torch.autograd.grad(fn(x), (x,), grad_out)

            return call

        return _op(name, f"{dtype} n={numel}", 6 * numel * size, 5 * numel * size, 2, setup)

    return make


def _binary(name: str, fn: Callable[[torch.Tensor, torch.Tensor], object]) -> Callable[[int, str, random.Random], Op]:
    def make(numel: int, dtype: str, rng: random.Random) -> Op:
        size = ITEMSIZE[dtype]

        def setup() -> Call:
            x, y = randn(numel, dtype=dtype), randn(numel, dtype=dtype)
            return lambda: fn(x, y)

        return _op(name, f"{dtype} n={numel}", 3 * numel * size, 3 * numel * size, 1, setup)

    return make


def _where(numel: int, dtype: str, rng: random.Random) -> Op:
    size = ITEMSIZE[dtype]

    def setup() -> Call:
        cond = torch.rand(numel, device="cuda") < 0.5
        x, y = randn(numel, dtype=dtype), randn(numel, dtype=dtype)
        return lambda: torch.where(cond, x, y)

    return _op("where", f"{dtype} n={numel}", numel * (3 * size + 1), numel * (3 * size + 1), 1, setup)


def _fill(zero: bool) -> Callable[[int, str, random.Random], Op]:
    def make(numel: int, dtype: str, rng: random.Random) -> Op:
        size = ITEMSIZE[dtype]

        def setup() -> Call:
            x = torch.empty(numel, device="cuda", dtype=DTYPES[dtype])
            return (lambda: x.zero_()) if zero else (lambda: x.fill_(1.5))

        return _op("zero_" if zero else "fill_", f"{dtype} n={numel}", numel * size, numel * size, 1, setup)

    return make


def _cast(numel: int, dtype: str, rng: random.Random) -> Op:
    target = "fp32" if dtype != "fp32" else rng.choice(("bf16", "fp16"))
    moved = numel * (ITEMSIZE[dtype] + ITEMSIZE[target])

    def setup() -> Call:
        x = randn(numel, dtype=dtype)
        return lambda: x.to(DTYPES[target])

    return _op("cast", f"{dtype}->{target} n={numel}", moved, moved, 1, setup)


def _transpose_copy(numel: int, dtype: str, rng: random.Random) -> Op:
    rows, cols = _rows_cols(rng, numel, 1, 1 << 16)
    size = ITEMSIZE[dtype]

    def setup() -> Call:
        x = randn(rows, cols, dtype=dtype)
        return lambda: x.t().contiguous()

    return _op("transpose_copy", f"{dtype} {rows}x{cols}", 2 * rows * cols * size, 2 * rows * cols * size, 1, setup)


def _concat(stack: bool) -> Callable[[int, str, random.Random], Op]:
    def make(numel: int, dtype: str, rng: random.Random) -> Op:
        pieces = rng.choice((2, 3, 4, 8))
        rows, cols = _rows_cols(rng, max(1, numel // pieces), 1, 1 << 14)
        dim = 0 if stack else rng.choice((0, 1))
        moved = 2 * pieces * rows * cols * ITEMSIZE[dtype]

        def setup() -> Call:
            xs = [randn(rows, cols, dtype=dtype) for _ in range(pieces)]
            return (lambda: torch.stack(xs)) if stack else (lambda: torch.cat(xs, dim))

        name = "stack" if stack else "cat"
        return _op(name, f"{dtype} {pieces}x{rows}x{cols} dim={dim}", moved, moved, 1, setup)

    return make


REDUCTIONS: dict[str, Callable[[torch.Tensor], object]] = {
    "sum_last": lambda x: x.sum(-1),
    "sum_first": lambda x: x.sum(0),
    "sum_all": lambda x: x.sum(),
    "mean_last": lambda x: x.mean(-1),
    "max_last": lambda x: x.max(-1),
    "amax_all": lambda x: x.amax(),
    "norm_last": lambda x: torch.linalg.vector_norm(x, dim=-1),
}


def _reduction(name: str) -> Callable[[int, str, random.Random], Op]:
    def make(numel: int, dtype: str, rng: random.Random) -> Op:
        rows, cols = _rows_cols(rng, numel, 1)
        size = ITEMSIZE[dtype]

        def setup() -> Call:
            x = randn(rows, cols, dtype=dtype)
            return lambda: REDUCTIONS[name](x)

        return _op(name, f"{dtype} {rows}x{cols}", rows * cols * size, 2 * rows * cols * size, 1, setup)

    return make


def _rowwise(name: str) -> Callable[[int, str, random.Random], Op]:
    """softmax, log_softmax, layer_norm, rms_norm over the last dimension, forward and backward."""

    def make(numel: int, dtype: str, rng: random.Random) -> Op:
        rows, cols = _rows_cols(rng, numel, 16 if name.endswith("softmax") else 64)  # norms: hidden sizes >= 64
        return rowwise_op(name, rows, cols, dtype)

    return make


def rowwise_op(name: str, rows: int, cols: int, dtype: str) -> Op:
    """``name`` over the last dimension of a rows x cols tensor, forward and backward."""
    numel, size = rows * cols, ITEMSIZE[dtype]

    def setup() -> Call:
        x, grad_out = randn(rows, cols, dtype=dtype, grad=True), randn(rows, cols, dtype=dtype)
        w, b = randn(cols, dtype=dtype, grad=True), randn(cols, dtype=dtype, grad=True)
        forward: dict[str, tuple[Callable[[], torch.Tensor], tuple[torch.Tensor, ...]]] = {
            "softmax": (lambda: F.softmax(x, -1), (x,)),
            "log_softmax": (lambda: F.log_softmax(x, -1), (x,)),
            "layer_norm": (lambda: F.layer_norm(x, (cols,), w, b), (x, w, b)),
            "rms_norm": (lambda: F.rms_norm(x, (cols,), w), (x, w)),
        }
        fn, inputs = forward[name]
        return lambda: torch.autograd.grad(fn(), inputs, grad_out)

    return _op(name, f"{dtype} {rows}x{cols}", 6 * numel * size, 5 * numel * size, 4, setup)


def _cross_entropy(numel: int, dtype: str, rng: random.Random) -> Op:
    vocab = rng.choice((1000, 32000, 50304, 128256))
    tokens = max(1, numel // vocab)
    size = ITEMSIZE[dtype]

    def setup() -> Call:
        logits = randn(tokens, vocab, dtype=dtype, grad=True)
        target = torch.randint(0, vocab, (tokens,), device="cuda")
        return lambda: torch.autograd.grad(F.cross_entropy(logits, target), (logits,))

    return _op("cross_entropy", f"{dtype} {tokens}x{vocab}", 4 * tokens * vocab * size, 3 * tokens * vocab * size,
               6, setup)


def _embedding(numel: int, dtype: str, rng: random.Random) -> Op:
    dim = rng.choice((64, 256, 768, 1024, 4096))
    rows = max(1, numel // dim)
    tokens = log_uniform(rng, 16, 65536)
    size = ITEMSIZE[dtype]

    def setup() -> Call:
        weight = randn(rows, dim, dtype=dtype, grad=True)
        idx = torch.randint(0, rows, (tokens,), device="cuda")
        grad_out = randn(tokens, dim, dtype=dtype)
        return lambda: torch.autograd.grad(F.embedding(idx, weight), (weight,), grad_out)

    moved = (rows * dim + 3 * tokens * dim) * size
    return _op("embedding", f"{dtype} {rows}x{dim} tokens={tokens}", moved, 2 * rows * dim * size + moved, 12, setup)


def _indexing(name: str) -> Callable[[int, str, random.Random], Op]:
    """index_select / gather / scatter_add / index_add_ with random indices."""

    def make(numel: int, dtype: str, rng: random.Random) -> Op:
        rows, cols = _rows_cols(rng, numel, 1, 1 << 14)
        picked = max(1, rows * rng.choice((1, 2, 4)) // 4)  # rows (index_select/index_add) or cols
        size = ITEMSIZE[dtype]

        def setup() -> Call:
            x = randn(rows, cols, dtype=dtype)
            if name == "index_select":
                idx = torch.randint(0, rows, (picked,), device="cuda")
                return lambda: torch.index_select(x, 0, idx)
            if name == "index_add_":
                idx = torch.randint(0, rows, (picked,), device="cuda")
                src = randn(picked, cols, dtype=dtype)
                return lambda: x.index_add_(0, idx, src)
            idx = torch.randint(0, cols, (rows, max(1, cols // 2)), device="cuda")
            if name == "gather":
                return lambda: torch.gather(x, 1, idx)
            src = randn(rows, max(1, cols // 2), dtype=dtype)
            return lambda: torch.scatter_add(x, 1, idx, src)

        moved = 3 * rows * cols * size + rows * cols * 8
        return _op(name, f"{dtype} {rows}x{cols} picked={picked}", moved, moved, 2, setup)

    return make


def _tensor_list(rng: random.Random, total_bytes: int, dtype: str) -> list[int]:
    """Element counts of a parameter list of about ``total_bytes``: a seeded count of tensors, sizes jittered
    in multiples of 16 elements, as layers' sizes are.  The foreach and fused optimizer kernels take their
    vectorised path only where every tensor's size is a multiple of 4: sizes jittered to any count ran
    AdamW's full launches 1.8 times slower than a model's parameters do (225 against 127 us, H100)."""
    elems = max(1, total_bytes // ITEMSIZE[dtype])
    count = min(rng.choice((1, 4, 16, 64, 256, 1024)), max(1, elems // 256))
    return [max(16, round(elems / count * rng.uniform(0.5, 1.5) / 16) * 16) for _ in range(count)]


FOREACH: dict[str, Callable[[list[torch.Tensor], list[torch.Tensor]], object]] = {
    "_foreach_add_": lambda xs, ys: torch._foreach_add_(xs, ys, alpha=0.5),
    "_foreach_mul_": lambda xs, ys: torch._foreach_mul_(xs, 0.9),
    "_foreach_addcmul_": lambda xs, ys: torch._foreach_addcmul_(xs, ys, ys, value=0.1),
    "_foreach_lerp_": lambda xs, ys: torch._foreach_lerp_(xs, ys, 0.1),
    "_foreach_sqrt": lambda xs, ys: torch._foreach_sqrt(xs),
    "_foreach_norm": lambda xs, ys: torch._foreach_norm(xs),
    "_foreach_zero_": lambda xs, ys: torch._foreach_zero_(xs),
    "_foreach_copy_": lambda xs, ys: torch._foreach_copy_(xs, ys),
}


def _cold(call: Call) -> Call:
    """The call after a fill of ``L2_FLUSH_BYTES`` (a kernel of its own): a training step reads its
    parameter lists once, long after they were written, where calls repeated back to back would find a
    list that fits the L2 cache (50 MiB on an H100) there and run up to 1.6 times quicker."""
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")

    def cold() -> object:
        flush.fill_(0)
        return call()

    return cold


def _foreach(name: str) -> Callable[[int, str, random.Random], Op]:
    def make(numel: int, dtype: str, rng: random.Random) -> Op:
        counts = _tensor_list(rng, numel * ITEMSIZE[dtype], dtype)
        total = sum(counts) * ITEMSIZE[dtype]

        def setup() -> Call:
            xs, ys = [randn(c, dtype=dtype) for c in counts], [randn(c, dtype=dtype) for c in counts]
            return _cold(lambda: FOREACH[name](xs, ys))

        kernels = 1 + len(counts) // 32
        return _op(name, f"{dtype} tensors={len(counts)} bytes={total} cold", 3 * total + L2_FLUSH_BYTES,
                   3 * total + L2_FLUSH_BYTES, kernels + 1, setup, len(counts))

    return make


def _optimizer(kind: str) -> Callable[[int, str, random.Random], Op]:
    """AdamW (foreach or fused), Adagrad (foreach) or clip_grad_norm_ over a parameter list with gradients."""

    def make(numel: int, dtype: str, rng: random.Random) -> Op:
        counts = _tensor_list(rng, numel * ITEMSIZE[dtype], dtype)
        total = sum(counts) * ITEMSIZE[dtype]

        def setup() -> Call:
            params = [torch.nn.Parameter(randn(c, dtype=dtype)) for c in counts]
            for p in params:
                p.grad = randn(p.numel(), dtype=dtype)
            if kind == "clip_grad_norm_":
                return _cold(lambda: torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True))
            if kind == "adagrad":
                opt: torch.optim.Optimizer = torch.optim.Adagrad(params, lr=0.01, foreach=True)
            else:
                opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.1, foreach=kind == "foreach",
                                        fused=kind == "fused")
            return _cold(lambda: opt.step())

        name = {"clip_grad_norm_": "clip_grad_norm_", "adagrad": "adagrad_foreach"}.get(kind, f"adamw_{kind}")
        moved = {"clip_grad_norm_": 3, "adagrad": 6}.get(kind, 7) * total + L2_FLUSH_BYTES
        held = (3 if kind == "adagrad" else 4) * total + L2_FLUSH_BYTES
        return _op(name, f"{dtype} tensors={len(counts)} bytes={total} cold", moved, held, 5 + len(counts) // 16,
                   setup, 2 * len(counts))

    return make


MEMORY_FAMILIES: dict[str, Callable[[int, str, random.Random], Op]] = {
    "add": _binary("add", lambda x, y: x + y),
    "mul": _binary("mul", lambda x, y: x * y),
    "add_": _binary("add_", lambda x, y: x.add_(y, alpha=-0.1)),
    "mul_scalar": _unary("mul_scalar", lambda x: x * 0.5),
    "gelu": _unary("gelu", F.gelu),
    "gelu_tanh": _unary("gelu_tanh", lambda x: F.gelu(x, approximate="tanh")),
    "relu": _unary("relu", F.relu),
    "silu": _unary("silu", F.silu),
    "dropout": _unary("dropout", lambda x: F.dropout(x, 0.1, training=True)),
    "where": _where,
    "fill_": _fill(False),
    "zero_": _fill(True),
    "cast": _cast,
    "transpose_copy": _transpose_copy,
    "cat": _concat(False),
    "stack": _concat(True),
    **{name: _reduction(name) for name in REDUCTIONS},
    **{name: _rowwise(name) for name in ("softmax", "log_softmax", "layer_norm", "rms_norm")},
    "cross_entropy": _cross_entropy,
    "embedding": _embedding,
    **{name: _indexing(name) for name in ("index_select", "gather", "scatter_add", "index_add_")},
    **{name: _foreach(name) for name in FOREACH},
    "adamw_foreach": _optimizer("foreach"),
    "adamw_fused": _optimizer("fused"),
    "clip_grad_norm_": _optimizer("clip_grad_norm_"),
}
# Families whose inputs are parameter lists: sizes up to 1 GiB of parameters (AdamW holds 4x that).
LIST_FAMILIES = {name for name in MEMORY_FAMILIES if name.startswith(("_foreach", "adamw", "clip"))}


def memory_plan(size: str) -> list[Op]:
    rng = random.Random(3)
    if size == "tiny":
        return [make(4096, "bf16" if i % 2 else "fp32", rng) for i, make in enumerate(MEMORY_FAMILIES.values())]
    ops = []
    for name, make in MEMORY_FAMILIES.items():
        hi = GiB if name in LIST_FAMILIES else 2 * GiB
        for dtype in MEMORY_DTYPES:
            ops += [make(nbytes // ITEMSIZE[dtype], dtype, rng) for nbytes in _sizes(rng, 4096, hi, 10)]
    return within_budget(ops)


# ---------------------------------------------------------------- embedding

# The layers of recommenders: EmbeddingBag (sum, mean or max pooling; per-sample weights with sum), its dense
# gradient (sort, per-bag gradient, scatter) or sparse one, single-id Embedding with a sparse gradient, and
# Adagrad over large tables.  Ids are uniform: emulation cannot see an id's value, so the profile holds the case
# a user's ids are spread (power-law ids repeat rows, and the dense gradient's time follows how often).
EMBEDDING_MODES = ("sum", "mean", "max")
EMBEDDING_MODE_WEIGHTS = (55, 30, 15)
EMBEDDING_DTYPES = ("fp32", "bf16", "fp16")
EMBEDDING_DTYPE_WEIGHTS = (60, 20, 20)
EMBEDDING_POOLING = (1, 2, 4, 8, 16, 20, 32, 50, 100)
MAX_IDS = 1 << 22


def embedding_bag_op(rows: int, dim: int, batch: int, pooling: int, mode: str, dtype: str, *,
                     weighted: bool = False, sparse: bool = False, offsets: bool = True) -> Op:
    """One EmbeddingBag forward and the gradient of its table (and of the per-sample weights), from ids given
    flat with bag offsets or as a batch x pooling matrix."""
    size = ITEMSIZE[dtype]
    ids = batch * pooling

    def setup() -> Call:
        weight = randn(rows, dim, dtype=dtype, grad=True)
        idx = torch.randint(0, rows, (ids,), device="cuda")
        starts = torch.arange(0, ids, pooling, device="cuda") if offsets else None
        psw = randn(*((ids,) if offsets else (batch, pooling)), dtype=dtype, grad=True) if weighted else None
        grad_out = randn(batch, dim, dtype=dtype)
        inputs = (weight,) if psw is None else (weight, psw)

        def call() -> object:
            out = F.embedding_bag(idx if offsets else idx.view(batch, pooling), weight, starts, mode=mode,
                                  per_sample_weights=psw, sparse=sparse)
            return torch.autograd.grad(out, inputs, grad_out)

        return call

    gathered = 3 * ids * dim * size + 24 * ids
    moved = gathered if sparse else gathered + rows * dim * size  # a dense gradient is the whole table, zeroed
    held = rows * dim * size * (1 if sparse else 2) + gathered
    detail = (f"{mode} {dtype} {rows}x{dim} batch={batch} pooling={pooling}"
              f"{' weighted' if weighted else ''}{' sparse' if sparse else ''}{'' if offsets else ' 2d'}")
    return Op("embedding bag", f"embedding_bag {detail}", memory_s(moved, kernels=12), int(held), setup,
              host_s(6, 6))


def sparse_embedding_op(rows: int, dim: int, ids: int, dtype: str) -> Op:
    """Embedding of single ids with a sparse gradient (the table's rows the batch touched)."""
    size = ITEMSIZE[dtype]

    def setup() -> Call:
        weight = randn(rows, dim, dtype=dtype, grad=True)
        idx = torch.randint(0, rows, (ids,), device="cuda")
        grad_out = randn(ids, dim, dtype=dtype)
        return lambda: torch.autograd.grad(F.embedding(idx, weight, sparse=True), (weight,), grad_out)

    moved = 3 * ids * dim * size + 16 * ids
    return Op("embedding sparse", f"embedding sparse {dtype} {rows}x{dim} ids={ids}", memory_s(moved, kernels=6),
              rows * dim * size + moved, setup, host_s(4, 4))


def _embedding_bag(rng: random.Random) -> Op:
    mode = rng.choices(EMBEDDING_MODES, EMBEDDING_MODE_WEIGHTS)[0]
    weighted = mode == "sum" and rng.random() < 0.2
    dtype = rng.choices(EMBEDDING_DTYPES, EMBEDDING_DTYPE_WEIGHTS)[0]
    if dtype == "bf16" and (mode == "max" or weighted):  # these gradients have no bf16 kernel
        dtype = "fp16"
    dim = rng.choice((16, 32, 64, 128, 256, 512)) if rng.random() < 0.7 else log_uniform(rng, 8, 1024, 8)
    pooling = rng.choice(EMBEDDING_POOLING)
    batch = min(log_uniform(rng, 64, 65536), max(1, MAX_IDS // pooling))
    rows = log_uniform(rng, 1000, 4_000_000)
    return embedding_bag_op(rows, dim, batch, pooling, mode, dtype, weighted=weighted,
                            sparse=mode != "max" and rng.random() < 0.3, offsets=rng.random() < 0.7)


def embedding_plan(size: str) -> list[Op]:
    rng = random.Random(10)
    if size == "tiny":
        return [embedding_bag_op(1000, 32, 16, 4, "sum", "fp32"),
                embedding_bag_op(1000, 32, 16, 4, "sum", "fp32", weighted=True, offsets=False),
                embedding_bag_op(500, 16, 8, 3, "mean", "bf16", sparse=True),
                embedding_bag_op(500, 16, 8, 3, "max", "fp32"),
                sparse_embedding_op(700, 24, 64, "fp32"),
                _optimizer("adagrad")(1 << 14, "fp32", rng)]
    bags = [_embedding_bag(rng) for _ in range(3000)]
    singles = [sparse_embedding_op(log_uniform(rng, 1000, 4_000_000), rng.choice((1, 16, 32, 64, 128, 256)),
                                   log_uniform(rng, 64, 1 << 20), rng.choices(EMBEDDING_DTYPES,
                                                                              EMBEDDING_DTYPE_WEIGHTS)[0])
               for _ in range(400)]
    adagrad = [_optimizer("adagrad")(nbytes // ITEMSIZE[dtype], dtype, rng)
               for dtype in EMBEDDING_DTYPES for nbytes in _sizes(rng, 4096, GiB, 10)]
    ops = [*bags, *singles, *adagrad]
    rng.shuffle(ops)
    return within_budget(ops)


# ---------------------------------------------------------------- scatter

SCATTER_FORMS = ("index_add_", "scatter_add_", "scatter_amax", "scatter_mean", "index_put_accumulate")
SCATTER_WEIGHTS = (40, 20, 10, 10, 20)
SCATTER_FAN_IN = (0.25, 0.5, 1, 2, 4, 8, 16, 32)  # source rows per destination row
ATOMIC_SLOWDOWN = 6.0  # atomic read-modify-writes run several times slower than streaming (the plan's budget only)


def scatter_op(form: str, rows: int, cols: int, sources: int, dtype: str) -> Op:
    """Message passing's reduction: ``sources`` rows of ``cols`` features summed (or maxed, averaged) into ``rows``
    destination rows at uniform random indices, as a graph network aggregates its edges into its nodes (several
    sources per destination: atomics that collide); ``index_put_accumulate`` sorts its indices first, as the
    backward of indexing does."""
    size = ITEMSIZE[dtype]

    def setup() -> Call:
        x = randn(rows, cols, dtype=dtype)
        src = randn(sources, cols, dtype=dtype)
        idx = torch.randint(0, rows, (sources,), device="cuda")
        if form == "index_add_":
            return lambda: x.index_add_(0, idx, src)
        if form == "index_put_accumulate":
            return lambda: x.index_put_((idx,), src, accumulate=True)
        wide = idx.unsqueeze(1).expand(sources, cols)
        if form == "scatter_add_":
            return lambda: x.scatter_add_(0, wide, src)
        reduce = form.removeprefix("scatter_")
        return lambda: x.scatter_reduce_(0, wide, src, reduce=reduce, include_self=False)

    moved = (2 * sources * cols + rows * cols) * size + sources * 8
    held = (rows + sources) * cols * size + sources * 8 * (3 if form == "index_put_accumulate" else 1)
    kernels = 4 if form in ("index_put_accumulate", "scatter_mean") else 1
    op = _op(form, f"{dtype} {rows}x{cols} sources={sources}", moved, held, kernels, setup)
    return replace(op, seconds=op.seconds * ATOMIC_SLOWDOWN)


def scatter_plan(size: str) -> list[Op]:
    if size == "tiny":
        return [scatter_op(form, 1000, 16, 4000, "fp32") for form in SCATTER_FORMS]
    rng = random.Random(11)
    ops = []
    for _ in range(3000):
        form = rng.choices(SCATTER_FORMS, SCATTER_WEIGHTS)[0]
        dtype = rng.choices(MEMORY_DTYPES, (60, 20, 20))[0]
        cols = rng.choice((1, 8, 16, 32, 64, 128, 256, 512))
        rows = log_uniform(rng, 1000, 4_000_000)
        sources = max(1, round(rows * rng.choice(SCATTER_FAN_IN)))
        if sources * cols * ITEMSIZE[dtype] <= 2 * GiB:
            ops.append(scatter_op(form, rows, cols, sources, dtype))
    return within_budget(ops)


# ---------------------------------------------------------------- copy

COPY_KINDS = ("h2d_pageable", "h2d_pinned", "d2h_pageable", "d2h_pinned", "d2d")


def copy_op(kind: str, nbytes: int) -> Op:
    """One copy of ``nbytes``: host to device or back (pageable, or pinned and non-blocking), or device to device."""
    pinned = kind.endswith("pinned")
    if kind == "d2d":
        seconds = 2 * nbytes / HBM_BYTES_S + LAUNCH_S
    else:
        seconds = nbytes / PCIE_BYTES_S["pinned" if pinned else kind] + 2 * LAUNCH_S

    def setup() -> Call:
        if kind == "d2d":
            # A training step copies data other kernels have since pushed out of the L2 cache (50 MiB on an
            # H100): each planned call copies a pair of buffers of its own, and the fills that made them are
            # flushed.
            buffers = [[torch.empty(nbytes, dtype=torch.uint8, device="cuda") for _ in range(2)]
                       for _ in range(PLAN_CALLS)]
            for src, _ in buffers:
                src.fill_(1)
            torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda").fill_(0)
            turn = itertools.cycle(buffers)

            def call() -> object:
                src, dst = next(turn)
                return dst.copy_(src)

            return call
        if kind.startswith("h2d"):
            host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned)
            host.fill_(1)  # touch every page, as a data loader's batch would be
            return lambda: host.to("cuda", non_blocking=pinned)
        dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        dev.fill_(1)
        if pinned:
            host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
            return lambda: host.copy_(dev, non_blocking=True)
        return lambda: dev.cpu()

    label = f"{kind} bytes={nbytes}" + (" cold" if kind == "d2d" else "")
    held = 2 * nbytes * PLAN_CALLS + L2_FLUSH_BYTES if kind == "d2d" else nbytes
    return Op("copy " + kind, label, seconds, held, setup,
              host_s(1, 3) + (nbytes / 5e9 if kind != "d2d" else 0.0))  # filling the host buffer


def copy_plan(size: str) -> list[Op]:
    if size == "tiny":
        return [copy_op(kind, nbytes) for kind in COPY_KINDS for nbytes in (1024, 3 << 16)]
    rng = random.Random(4)
    return within_budget((copy_op(kind, nbytes) for kind in COPY_KINDS for nbytes in _sizes(rng, 1024, GiB, 12)),
                         call_cap_s=1.0)


# ---------------------------------------------------------------- running

PLANS: dict[str, Callable[[str], list[Op]]] = {
    "gemm": gemm_plan,
    "attention": attention_plan,
    "dnn": dnn_plan,
    "memory": memory_plan,
    "copy": copy_plan,
    "gemm-grid": gemm_grid_plan,
    "attention-grid": attention_grid_plan,
    "attention-mask": attention_mask_plan,
    "conv-modern": conv_modern_plan,
    "embedding": embedding_plan,
    "scatter": scatter_plan,
}


def describe(part: str, size: str, ops: list[Op], repeats: int) -> list[str]:
    """The plan in a few lines: operations and estimated GPU seconds, per family."""
    calls = 1 + repeats
    total = sum(op.seconds for op in ops) * calls
    wall = sum(op.wall_s for op in ops)
    peak = max((op.device_bytes for op in ops), default=0)
    digest = hashlib.sha256("\n".join(op.label for op in ops).encode()).hexdigest()[:12]
    lines = [f"sweep {part} ({size}): {len(ops)} operations x {calls} calls, estimated {total:.1f} s of H100 time "
             f"({wall:.0f} s with the host, 3 repeats), largest operation {peak / GiB:.2f} GiB, plan {digest}"]
    count: Counter[str] = Counter()
    seconds: dict[str, float] = {}
    for op in ops:
        count[op.family] += 1
        seconds[op.family] = seconds.get(op.family, 0.0) + op.seconds * calls
    lines += [f"  {family:28} {count[family]:6d} ops {seconds[family]:8.2f} s" for family in sorted(count)]
    return lines


def run(ops: list[Op], repeats: int) -> None:
    """Each operation: set up, warm-up plus ``repeats`` calls back to back, free; one synchronisation at the end."""
    for op in ops:
        try:
            call = op.setup()
            for _ in range(1 + repeats):
                call()
        except Exception as e:
            e.add_note(f"sweep operation: {op.label}")
            raise
        del call
    torch.cuda.synchronize()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--part", required=True, choices=PARTS)
    p.add_argument("--size", default="full", choices=("tiny", "full"))
    p.add_argument("--repeats", type=int, default=3, help="calls after the warm-up (default 3)")
    p.add_argument("--dry-run", action="store_true", help="print the plan; do not touch CUDA")
    p.add_argument("--list", action="store_true", help="also print every operation with its estimated time")
    args = p.parse_args(argv)
    ops = PLANS[args.part](args.size)
    for line in describe(args.part, args.size, ops, args.repeats):
        print(line, flush=True)
    if args.list:
        for op in ops:
            print(f"  {op.seconds * 1e6:10.1f} us  {op.label}")
    if args.dry_run:
        return 0
    random.seed(0)
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    start = time.perf_counter()
    run(ops, args.repeats)
    print(f"sweep {args.part}: done in {time.perf_counter() - start:.1f} s (host wall time)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What an Inductor Triton kernel moves, read from its source (``maya/_hook/_maya_triton.py``).

The sources below have the shapes Inductor writes (torch 2.11): a pointwise kernel with a
broadcast operand, a persistent reduction with a per-row and a per-column operand, a tiled
transpose (x and y), a gather, and one whose sizes are arguments.
"""

from __future__ import annotations

from maya._hook._maya_triton import facts

POINTWISE = """
def triton_poi_fused_add_mul_0(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 4194304
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = tl.full([XBLOCK], True, tl.int1)
    x2 = xindex
    x0 = (xindex % 1024)
    tmp0 = tl.load(in_ptr0 + (x2), None).to(tl.float32)
    tmp1 = tl.load(in_ptr1 + (x0), None, eviction_policy='evict_last')
    tmp2 = tmp0 * tmp1
    tl.store(out_ptr0 + (x2), tmp2, None)
"""

REDUCTION = """
def triton_per_fused_mean_mul_pow_rsqrt_0(in_ptr0, in_ptr1, in_ptr2, out_ptr1, xnumel, r0_numel, XBLOCK : tl.constexpr):
    xnumel = 8192
    r0_numel = 1024
    R0_BLOCK: tl.constexpr = 1024
    rnumel = r0_numel
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    r0_index = tl.arange(0, R0_BLOCK)[None, :]
    x0 = xindex
    r0_1 = r0_index
    tmp0 = tl.load(in_ptr0 + (r0_1 + 1024*x0), None).to(tl.float32)
    tmp1 = tl.load(in_ptr1 + (r0_1), None, eviction_policy='evict_last').to(tl.float32)
    tmp2 = tl.load(in_ptr2 + (x0), None, eviction_policy='evict_last')
    tmp3 = tl.load(in_ptr0 + (r0_1 + 1024*x0), None).to(tl.float32)
    tl.store(out_ptr1 + (r0_1 + 1024*x0), tmp3, None)
"""

TRANSPOSE = """
def triton_poi_fused_clone_0(in_ptr0, out_ptr0, ynumel, xnumel, YBLOCK : tl.constexpr, XBLOCK : tl.constexpr):
    ynumel = 64
    xnumel = 4096
    yoffset = tl.program_id(1) * YBLOCK
    yindex = yoffset + tl.arange(0, YBLOCK)[None, :]
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    x2 = xindex
    y0 = (yindex % 16)
    y1 = yindex // 16
    tmp0 = tl.load(in_ptr0 + (y0 + 16*x2 + 65536*y1), xmask & ymask)
    tl.store(out_ptr0 + (x2 + 4096*yindex), tmp0, xmask & ymask)
"""

GATHER = """
def triton_poi_fused_embedding_0(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 2097152
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    x1 = xindex // 1024
    x0 = (xindex % 1024)
    x2 = xindex
    tmp0 = tl.load(in_ptr0 + (x1), None, eviction_policy='evict_last')
    tmp6 = tl.load(in_ptr1 + (x0 + 1024*tmp5), None)
    tl.store(out_ptr0 + (x2), tmp6, None)
"""

SIGNATURE = {"in_ptr0": "*bf16", "in_ptr1": "*fp32", "in_ptr2": "*fp32", "out_ptr0": "*bf16", "out_ptr1": "*bf16",
             "xnumel": "i32", "ynumel": "i32", "r0_numel": "i32", "XBLOCK": "constexpr"}


def test_pointwise_with_a_broadcast_operand() -> None:
    # x * w[col]: the bf16 input and output span every element, the fp32 row vector 1024 of them
    n = 4194304
    assert facts(POINTWISE, SIGNATURE) == (n, 0, n * 2 + 1024 * 4, n * 2, 2, 1)


def test_persistent_reduction_counts_each_operand_once_at_its_extent() -> None:
    # rows of 1024: the matrix (read twice, counted once), a column vector, a row vector; the output
    assert facts(REDUCTION, SIGNATURE) == (8192, 1024, 8192 * 1024 * 2 + 1024 * 4 + 8192 * 4, 8192 * 1024 * 2, 4, 1)


def test_tiled_kernel_multiplies_its_dimensions() -> None:
    # y0 (16) and y1 (64 // 16) together span ynumel: every element of the 64 x 4096 tensor, both ways
    assert facts(TRANSPOSE, SIGNATURE) == (64 * 4096, 0, 64 * 4096 * 2, 64 * 4096 * 2, 1, 1)


def test_gather_reads_one_row_per_index() -> None:
    # an id (bf16 here, 2 bytes) per row of 1024; the fp32 table's rows gathered: one element per output element
    n = 2097152
    assert facts(GATHER, SIGNATURE) == (n, 0, (n // 1024) * 2 + n * 4, n * 2, 2, 1)


def test_sizes_left_to_the_arguments() -> None:
    dynamic = POINTWISE.replace("    xnumel = 4194304\n", "")
    assert facts(dynamic, SIGNATURE) is None
    assert facts(dynamic, SIGNATURE, {"xnumel": 1000})[:2] == (1000, 0)

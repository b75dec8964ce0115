"""Roofline time: how long a GPU of the catalog needs for some work at its peaks.

The estimators use it three ways: as the fallback for work no profile covers,
as the yardstick their fitted targets are measured against (the models learn
``duration / roofline``, a ratio that varies far less with size than the
duration does), and to carry an estimate from a profiled GPU to one without
profiles (the ratio of the two GPUs' roofline times).
"""

from __future__ import annotations

from dataclasses import dataclass

from maya.catalog import GPU

# The catalog gives no host link bandwidth: host<->device copies assume a
# PCIe Gen5 x16 link's practical rate for pinned memory (about 50 GB/s of 64).
# A profiled GPU replaces it with the rate its copies reached.
HOST_LINK_BYTES_PER_S = 50e9

# What moves the bytes: device memory, the host link, a peer GPU (NVLink).
LINKS = ("hbm", "host", "peer")


@dataclass(frozen=True)
class Work:
    """The FLOPs and bytes of one device operation.

    ``math`` is the catalog peak it computes at (``fp64`` .. ``fp8``, '' when
    it does no arithmetic worth counting); ``link`` is what carries ``bytes``.
    """

    flops: float
    bytes: float
    math: str = ""
    link: str = "hbm"


def bandwidth(gpu: GPU, link: str, host_link: float = HOST_LINK_BYTES_PER_S) -> float:
    """Bytes per second of ``link`` on ``gpu``."""
    if link == "host":
        return host_link
    if link == "peer":
        # nvlink_gbps sums both directions; a copy uses one. PCIe-only parts use the host link.
        return gpu.nvlink_bytes_per_s / 2 if gpu.nvlink_bytes_per_s > 0 else host_link
    return gpu.mem_bw_bytes_per_s


def roofline_ns(work: Work, gpu: GPU, host_link: float = HOST_LINK_BYTES_PER_S) -> float:
    """max(compute time at peak, transfer time at full bandwidth), in ns.

    A dtype the GPU lacks (fp8 on an A100) runs at the next wider one's peak,
    as the frameworks would upcast it.
    """
    t_bytes = work.bytes / bandwidth(gpu, work.link, host_link)
    t_flops = 0.0
    if work.math and work.flops > 0:
        order = ("fp8", "fp16", "bf16", "tf32", "fp32", "fp64")
        start = order.index(work.math) if work.math in order else order.index("fp32")
        peak = next((p for p in (gpu.peak_flops(d) for d in order[start:]) if p > 0), 0.0)
        if peak > 0:
            t_flops = work.flops / peak
    return max(t_bytes, t_flops) * 1e9

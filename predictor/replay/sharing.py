"""What a resident NCCL kernel costs the work that runs beside it on the same GPU.

A collective's kernel holds SMs from when its stream reaches it to its end,
while it spins waiting for its peers too, and kernels of other streams that
run meanwhile get fewer SMs.  In DDP the backward pass runs beside the
gradient all-reduces, so this lengthens the step.  Profiled DDP steps on
2 x H200 (``benchmarks/calibration/sharing.py``) put the same kernel on one rank
beside a resident NCCL kernel and on the other rank not: cuBLAS's GEMMs,
persistent kernels sized to every SM, ran about 1.8 times as long, PyTorch's
own kernels and cuDNN's a few percent longer.  The replay stretches the
share of each operation's time that overlaps a collective's transfer by its
record kind's factor (:func:`maya.predictor.replay.simulator.simulate`; not
its wait for a later peer, which slows only a rank that is ahead, by less than
its lead).

The factors are kept by compute capability in ``sharing.json``: measured on
the H200, they stand for the H100 too (the same SMs and libraries); other
GPUs have none, and their work is not stretched.
"""

from __future__ import annotations

import json
from pathlib import Path

from maya.catalog import GPU
from maya.predictor.trace.format import Kind

FACTORS = Path(__file__).parents[1] / "sharing.json"


def sharing_factors(gpu: GPU, path: Path = FACTORS) -> dict[int, float]:
    """By record kind, how much longer ``gpu``'s work lasts while beside a resident collective
    ({}: not measured for this GPU's compute capability)."""
    table = json.loads(path.read_text()) if path.is_file() else {}
    cc = "{}.{}".format(*gpu.compute_capability)
    factors = table.get("by_compute_capability", {}).get(cc, {}).get("factors", {})
    return {int(Kind[name]): float(f) for name, f in factors.items()}

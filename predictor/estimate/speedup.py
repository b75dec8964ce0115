"""How much faster one GPU runs a kind of work than another, as both GPUs measured it.

A GPU that borrows a family or domain from a profiled GPU of the same
architecture (the H200 its attention, convolutions and batch-norm kernels
from the H100) carries each borrowed estimate over by a speed-up.  The ratio
of the two GPUs' roofline times is the wrong one for most work: it credits
the H200 with its full 4.8 / 3.35 TB/s bandwidth on any operation whose
roofline is memory-bound, while the operations both GPUs measured (the same
signatures in both GPUs' sweeps and example models) show that only large
streaming kernels gain that much; normalisation, reduction, convolution and
attention kernels, and short kernels of any kind, run 0-15% faster on the
H200.  How much faster depends on the kind of work and on its size, so the
speed-up of an operation is the median over the ``NEIGHBOURS`` signatures of
its domain, both GPUs measured, whose lender's times are nearest its own
(in log time); a domain with fewer than ``MIN_COMMON`` such signatures
takes its family's; a family without them keeps the roofline ratio (as does
a GPU with no profiles of its own).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from maya.predictor.estimate.work import domain, family
from maya.predictor.trace.ops import Op

MIN_COMMON = 3  # signatures both GPUs measured, before their speed-ups stand for a domain or family
NEIGHBOURS = 9  # signatures nearest in duration whose median speed-up an operation takes

FAMILY = "*"  # the domain key of a family's own speed-ups

Curve = tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]  # log lender ns (ascending), speed-up


class Speedups:
    """Measured speed-ups of a borrowing GPU over its lender, by family and domain, against duration."""

    def __init__(self, curves: Mapping[tuple[str, str], Curve] | None = None) -> None:
        self.curves: dict[tuple[str, str], Curve] = dict(curves or {})

    def __bool__(self) -> bool:
        return bool(self.curves)

    @classmethod
    def measured(cls, lender: Mapping[tuple[Any, ...], float], borrower: Mapping[tuple[Any, ...], float],
                 families: set[str] | None = None) -> Speedups:
        """From the signatures both GPUs measured: ``lender`` and ``borrower`` map operation
        signatures to durations (:attr:`Estimators.measured
        <maya.predictor.estimate.estimators.Estimators.measured>`); ``families``: only these."""
        points: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
        for sig, ns in borrower.items():
            src = lender.get(sig)
            if src is None or src <= 0 or ns <= 0:
                continue
            op = Op(*sig)
            fam = family(op)
            if families is not None and fam not in families:
                continue
            point = (math.log(src), src / ns)
            points[fam, domain(op)].append(point)
            points[fam, FAMILY].append(point)
        curves = {}
        for key, pts in sorted(points.items()):
            if len(pts) >= MIN_COMMON:
                pts.sort()
                curves[key] = (np.array([p[0] for p in pts]), np.array([p[1] for p in pts]))
        return cls(curves)

    def of(self, fam: str, op: Op, lender_ns: float) -> float | None:
        """How much faster the borrower runs ``op`` (of family ``fam``), which the lender runs in
        ``lender_ns``: from its domain's measurements, else its family's, else None."""
        curve = self.curves.get((fam, domain(op))) or self.curves.get((fam, FAMILY))
        if curve is None:
            return None
        xs, ratios = curve
        x = math.log(max(lender_ns, 1.0))
        i = int(np.searchsorted(xs, x))
        lo, hi = max(0, i - NEIGHBOURS), min(len(xs), i + NEIGHBOURS)
        near = np.argsort(np.abs(xs[lo:hi] - x), kind="stable")[:NEIGHBOURS]
        return float(np.median(ratios[lo:hi][near]))

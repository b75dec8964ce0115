"""Estimators for any catalog GPU: its own fit, or a profiled GPU's, scaled.

A GPU without profiles borrows the estimators of a profiled GPU (of the
same compute capability if there is one); a GPU whose tables lack a family,
or a domain of a family (the H200's batch-norm kernels: its memory sweep has
none, the H100's convolution sweep thousands), borrows it from a profiled
GPU of the same architecture, scaled by the speed-up the two GPUs measured
on the operations both profiled (:mod:`maya.predictor.estimate.speedup`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from maya import catalog
from maya.catalog import GPU
from maya.predictor.estimate import fit
from maya.predictor.estimate.cache import Table, cached_fit, domain_sizes
from maya.predictor.estimate.estimators import Estimators
from maya.predictor.estimate.fit import NameTable
from maya.predictor.estimate.profiles import ProfileRow, table_paths
from maya.predictor.estimate.speedup import Speedups

# A family (or a domain of a family) with fewer points than this fraction of a same-architecture
# GPU's (the H200's convolutions, from its example models alone, against the H100's sweep) is
# borrowed from it.
BORROW_FRACTION = 0.1


def profiled_gpus() -> list[str]:
    """Catalog GPUs with profile tables in ``predictor/profiles``."""
    return [g.name for g in catalog.all_gpus() if table_paths(g.name)]


def _source_for(gpu: GPU, profiled: Sequence[str]) -> str | None:
    """The profiled GPU to borrow from: the GPU itself, else one of the same compute capability, else any."""
    if gpu.name in profiled:
        return gpu.name
    same = [p for p in profiled if catalog.lookup(p).fields["cc"] == gpu.fields["cc"]]
    candidates = same or list(profiled)
    return candidates[0] if candidates else None


def _table(gpu: str, profiles: Mapping[str, Sequence[ProfileRow]] | None) -> Table:
    return Table(gpu, profiles[gpu] if profiles is not None else None)


def load(gpu: str, *, profiles: Mapping[str, Sequence[ProfileRow]] | None = None,
         cache: Path | None = None, borrow: bool = True) -> Estimators:
    """Estimators for catalog GPU ``gpu``, fitted (or read from the cache) on its profiles, or
    borrowed from a profiled GPU.  ``profiles`` (GPU name -> rows) replaces the committed tables;
    ``borrow=False``: no family is borrowed from another GPU."""
    g = catalog.lookup(gpu)
    names = list(profiles) if profiles is not None else profiled_gpus()
    source = _source_for(g, names)
    if source is None:
        empty = Estimators(g.name, g.name, {}, {}, NameTable([]), 0.0)
        return empty
    est = cached_fit(catalog.lookup(source), "fit", _table(source, profiles), cache)
    if source != g.name:
        return est.on(g.name)
    if borrow:
        borrow_families(est, g, names, profiles, cache)
    return est


def _thin(own: int, donor: int) -> bool:
    """Whether ``own`` points are too few beside a donor's ``donor`` (``MIN_SELECT``, or ``BORROW_FRACTION``)."""
    return own < min(max(fit.MIN_SELECT, BORROW_FRACTION * donor), donor)


def borrow_families(est: Estimators, g: GPU, names: Sequence[str],
                    profiles: Mapping[str, Sequence[ProfileRow]] | None, cache: Path | None) -> None:
    """Families with too few profile points of ``g`` (``MIN_SELECT``, or ``BORROW_FRACTION`` of the
    donor's) are estimated by a profiled GPU of the same architecture, scaled (``est.borrowed``);
    so are the domains of the other families that are thin by the same rule
    (``est.borrowed_domains``).  The scale is the speed-up both GPUs measured on the same
    operations.  The donor is fitted only when it lends something."""
    donors = [p for p in names if p != g.name and catalog.lookup(p).fields["cc"] == g.fields["cc"]]
    if not donors:
        return
    donor, table = catalog.lookup(donors[0]), _table(donors[0], profiles)
    sizes = domain_sizes(donor, table, cache)
    lent, lent_domains = [], {}
    for f, by_domain in sizes.items():
        own = est.families.get(f)
        if _thin(own.n if own else 0, sum(by_domain.values())):
            lent.append(f)
            continue
        own_sizes = own.domain_sizes if own else {}
        thin = sorted(d for d, n in by_domain.items() if _thin(own_sizes.get(d, 0), n))
        if thin:
            lent_domains[f] = thin
    if lent or lent_domains:
        lender = cached_fit(donor, "fit", table, cache).on(g.name)
        lender.speedups = Speedups.measured(lender.measured, est.measured, set(lent) | set(lent_domains))
        est.borrowed = {f: lender for f in lent}
        est.borrowed_domains = {f: {d: lender for d in ds} for f, ds in lent_domains.items()}

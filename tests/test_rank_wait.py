"""benchmarks.calibration.rank_wait: how long a data-parallel step waits for its slowest rank on a server."""

from __future__ import annotations

from pathlib import Path

import pytest
from loops import loop_trace

from benchmarks.calibration.rank_wait import fit_jitter, measure, slowest_over_mean
from maya.predictor.replay.host import expected_max_normal


def test_a_slower_rank_is_waited_for(tmp_path: Path) -> None:
    loop_trace(tmp_path / "rank0.mayatrace", steps=6)
    loop_trace(tmp_path / "rank1.mayatrace", steps=6, pace=1.2)  # every delay of rank 1 1.2 times rank 0's
    ranks, wait = slowest_over_mean(tmp_path)
    assert ranks == 2 and wait == pytest.approx(1.2 / 1.1, rel=0.01)
    alone = tmp_path / "alone"
    alone.mkdir()
    loop_trace(alone / "rank0.mayatrace", steps=6)
    assert slowest_over_mean(alone) is None  # one rank waits for nobody


def test_the_jitter_fits_runs_of_any_number_of_ranks() -> None:
    s = 0.08
    runs = [(2, 1 + s * expected_max_normal(2)), (4, 1 + s * expected_max_normal(4)), (8, 1 + s * expected_max_normal(8))]
    assert fit_jitter(runs) == pytest.approx(s)
    assert fit_jitter([(2, 0.99)]) == 0.0  # never a negative spread


def test_the_committed_records_give_the_committed_jitter() -> None:
    import json

    from maya.predictor.replay.host import CALIBRATION

    found = measure()
    committed = json.loads(CALIBRATION.read_text())["machines"]
    assert set(found) == {gpu for gpu, m in committed.items() if "rank_jitter" in m}
    for gpu, m in found.items():
        assert committed[gpu]["rank_jitter"] == pytest.approx(m["rank_jitter"], abs=1e-4)
        assert {r["ranks"] for r in m["runs"]} >= {2}

"""Measured collectives: the campaign that times them (benchmarks/campaigns/collective_campaign.py) and the
table the collective model reads them from (benchmarks/calibration/collectives.py --write).

Covers: the campaign runs end to end on two emulated GPUs (its plumbing, not its times) and writes
every op at every size asked for, five trials each; the committed table holds the committed
measurements, send and receive alike, and is what ``collective_model`` times a 2-rank collective
by at the measured sizes.
"""

from __future__ import annotations

import json

import pytest
from emulated import REPO, run_emulated

from benchmarks.calibration import collectives as collective_accuracy
from maya import catalog  # noqa: E402
from maya.predictor.replay.network import Collective, collective_model  # noqa: E402


@pytest.mark.emulation
def test_campaign_runs_on_emulated_gpus(tmp_path) -> None:
    out = tmp_path / "coll"
    r = run_emulated((REPO / "benchmarks" / "campaigns" / "collective_campaign.py").read_text(), tmp_path,
                     gpu="H200-SXM-141GB", torchrun_nproc=2, gpus_per_node=2,
                     args=["--out", str(out), "--max-bytes", "2048"], timeout=300)
    assert r.returncode == 0, r.output
    d = json.loads((out / "collectives.json").read_text())
    assert d["world_size"] == 2 and d["gpu"] == "NVIDIA H200"
    sizes = [8, 32, 128, 512, 2048]
    assert [(row["op"], row["bytes"]) for row in d["rows"]] == [
        (op, b) for op in ("all_reduce", "all_gather", "reduce_scatter", "send_recv") for b in sizes]
    assert all(len(row["seconds"]) == 5 for row in d["rows"])
    # Every rank ran every timed call: warm-up and trials, plus the agreement on going on.
    assert r.summary["ranks"][1]["collectives"] >= len(d["rows"]) * (5 + 5 * 50)


def test_committed_table_is_the_committed_measurements() -> None:
    written = collective_accuracy.table(collective_accuracy.measurements())
    committed = json.loads((REPO / "predictor" / "collectives.json").read_text())
    assert committed == json.loads(json.dumps(written)), "run: python -m benchmarks.calibration.collectives --write"
    (gpu, d), = collective_accuracy.measurements()
    model = collective_model(catalog.lookup(gpu), 8)
    for row in d["rows"]:
        for op in collective_accuracy.model_ops(row["op"]):
            assert model.seconds(Collective(op, row["bytes"], 2)) == pytest.approx(row["median_s"])

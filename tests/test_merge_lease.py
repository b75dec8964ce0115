"""Merging one GPU machine's measurements into the ground truth (benchmarks/merge_lease.py).

Covers: call-cost runs appended with their lease and machine, the medians over every run; a
campaign's runs appended to the configurations it measured, tagged with the lease, its probe kept
beside them and left out of the configurations (benchmarks/step_truth.py); a lease merged twice,
an unknown configuration (unless asked to start it) and a changed command refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import merge_lease, step_truth  # noqa: E402

GPU = "H100-SXM-80GB"


def result(step_s: float) -> dict[str, object]:
    return {"step_times_s": [step_s] * 8, "host_times_s": [step_s / 2] * 8}


def campaign(folder: Path, argv: list[str], step_s: float, uuid: str = "GPU-1") -> Path:
    folder.mkdir(parents=True)
    (folder / "env.json").write_text(json.dumps({"device_properties": {"uuid": uuid}}))
    (folder / "campaign.log").write_text("[0.0s] done\n")
    runs = [{"run": i, "profiled": False, "results": [result(step_s)]} for i in range(2)]
    (folder / "cnn.json").write_text(json.dumps({"argv": argv, "processes": 1, "runs": runs}))
    return folder


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    calls, steps = tmp_path / "server_call_cost", tmp_path / "step_times"
    (steps / GPU).mkdir(parents=True)
    calls.mkdir()
    (calls / f"{GPU}.json").write_text(json.dumps({"gpu": GPU, "runs": [
        {"lease": "earlier", "machine": None, "kernel": 4000.0, "blas": 12000.0}]}))
    old = [{"run": 0, "profiled": False, "results": [result(0.010)], "campaign": "r1"}]
    (steps / GPU / "cnn.json").write_text(json.dumps({"argv": ["examples/cnn.py"], "processes": 1, "runs": old}))
    (steps / GPU / "campaign.log").write_text("")
    monkeypatch.setattr(merge_lease, "CALL_COSTS", calls)
    monkeypatch.setattr(merge_lease, "STEP_TIMES", steps)
    monkeypatch.setattr(step_truth, "DATA", steps)
    return tmp_path


def test_a_lease_adds_runs_and_call_costs(data: Path) -> None:
    lines = data / "call_cost.jsonl"
    lines.write_text("\n".join(json.dumps({"run": i, "cpu": "Xeon", "calls": {"kernel": k, "blas": 8000.0},
                                           "dnn": {"dnn": 7000.0, "workspace_bytes": 0}})
                               for i, k in enumerate((3000.0, 3200.0))) + "\n")
    folder = campaign(data / "r4", ["examples/cnn.py"], 0.020)
    median = merge_lease.merge_calls(GPU, "r4", lines, merge_lease.machine(folder))
    assert median == {"blas": 8000.0, "dnn": 7000.0, "kernel": 3200.0}
    runs = json.loads((data / "server_call_cost" / f"{GPU}.json").read_text())["runs"]
    assert [(r["lease"], r["machine"]) for r in runs] == [("earlier", None), ("r4", "GPU-1"), ("r4", "GPU-1")]

    assert merge_lease.merge_campaign(GPU, "r4", folder) == 2
    (m,) = step_truth.measured(GPU)  # env-r4.json is no configuration
    assert m.name == "cnn" and m.step_s == pytest.approx([0.010, 0.020, 0.020])
    saved = json.loads((data / "step_times" / GPU / "cnn.json").read_text())["runs"]
    assert [r["campaign"] for r in saved] == ["r1", "r4", "r4"]
    assert (data / "step_times" / GPU / "env-r4.json").is_file()
    assert "# lease r4, GPU GPU-1" in (data / "step_times" / GPU / "campaign.log").read_text()

    with pytest.raises(SystemExit, match="already holds lease r4"):
        merge_lease.merge_campaign(GPU, "r4", folder)
    with pytest.raises(SystemExit, match="already holds lease r4"):
        merge_lease.merge_calls(GPU, "r4", lines, None)


def test_a_campaign_that_does_not_match_is_refused(data: Path) -> None:
    with pytest.raises(SystemExit, match="differs from the committed"):
        merge_lease.merge_campaign(GPU, "r5", campaign(data / "r5", ["examples/cnn.py", "--batch", "8"], 0.02))
    other = campaign(data / "r6", ["examples/cnn.py"], 0.02)
    (other / "cnn.json").rename(other / "gpt.json")
    with pytest.raises(SystemExit, match="gpt.json: no such configuration"):
        merge_lease.merge_campaign(GPU, "r6", other)


def test_a_new_configuration_starts_its_file_when_asked(data: Path) -> None:
    folder = campaign(data / "x1", ["examples/ddp.py"], 0.015)
    (folder / "cnn.json").rename(folder / "ddp.json")
    assert merge_lease.merge_campaign(GPU, "x1", folder, new=True) == 2
    ddp = {m.name: m for m in step_truth.measured(GPU)}["ddp"]
    assert ddp.argv == ["examples/ddp.py"] and ddp.step_s == pytest.approx([0.015, 0.015])


def test_the_oracle_jobs_are_the_measured_configurations() -> None:
    """Each lease's probe (env-<lease>.json) sits beside the configurations; no job is made of it."""
    from benchmarks.profiling_jobs import JOBS

    oracle = {j.removeprefix("oracle-") for j in JOBS if j.startswith("oracle-")}
    assert oracle == {m.name for m in step_truth.measured(GPU)}
    assert len(oracle) >= 20 and not any(n.startswith("env") for n in oracle)

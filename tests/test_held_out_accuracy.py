"""The held-out accuracy benchmark's ground truth and arithmetic (benchmarks/held_out/truth.py, accuracy.py).

Covers: a run's step as the median of its timed steps (rank 0), a configuration's as the median
over runs pooled over machines, with the spread and each machine's median; peak memory the largest
over ranks; the device name mapped to the catalog GPU; two ranks' results printed on one line read
from the run's kept stdout; failed runs and the plan grid left out, runs
without a result line counted; an unknown device and a folder without results refused; errors,
the suite's median and max, the known-gap cases summed up apart and an unpredicted case named; a
DDP workload measured on another number of GPUs emulated with that many ranks.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from statistics import median

import pytest

from benchmarks.held_out import accuracy
from benchmarks.held_out.suite import BY_NAME
from benchmarks.held_out.truth import TruthError, read_truth

H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"


def line(steps: list[float], device: str, alloc: int, rank: int | None = None) -> dict[str, object]:
    out: dict[str, object] = {"step_times_s": steps, "device": device, "max_memory_allocated": alloc,
                              "max_memory_reserved": alloc + 100}
    if rank is not None:
        out["rank"] = rank
    return out


def run(name: str, results: list[dict[str, object]], nproc: int = 1, rc: int = 0) -> dict[str, object]:
    return {"name": name, "nproc": nproc, "rc": rc, "results": results}


def machine(data: Path, folder: str, runs: list[dict[str, object]]) -> None:
    (data / folder).mkdir(parents=True)
    (data / folder / "results.json").write_text(json.dumps({"campaign": {}, "runs": runs}))


@pytest.fixture
def data(tmp_path: Path) -> Path:
    machine(tmp_path, "H100-SXM-80GB", [
        run("vit", [line([0.010, 0.050, 0.011, 0.012], H100, 1000)]),  # median 0.0115: the outlier step is out
        run("vit", [line([0.013, 0.013, 0.013], H100, 1002)]),
        run("vit", [], rc=1),  # failed: measured nothing
        run("grid-1x-b4", [line([1.0, 1.0, 1.0], H100, 5)]),
    ])
    machine(tmp_path, "H100-SXM-80GB-x2", [
        run("vit", [line([0.020, 0.020, 0.020], H100, 1001)]),
        run("ddp_gpt2_tied", [line([0.040, 0.042, 0.041], H100, 900, rank=1),
                              line([0.050, 0.050, 0.050], H100, 800, rank=0)], nproc=2),
        run("ddp_gpt2_tied", [], nproc=2),  # ranks' lines interleaved: nothing parsed
    ])
    machine(tmp_path, "H200-SXM-141GB-x2", [
        run("vit", [line([0.009, 0.009, 0.009], H200, 1000)]),
        {**run("ddp_gpt2_tied", [], nproc=2),  # both ranks printed on one line: read from the kept stdout
         "stdout_tail": "noise {\n" + json.dumps(line([0.060] * 3, H200, 700, rank=1))
                        + json.dumps(line([0.061] * 3, H200, 950, rank=0)) + "\n"},
    ])
    return tmp_path


def test_truth_pools_runs_by_workload_gpu_and_count(data: Path) -> None:
    truth = read_truth(data)
    assert sorted(truth) == [("ddp_gpt2_tied", "H100-SXM-80GB", 2), ("ddp_gpt2_tied", "H200-SXM-141GB", 2),
                             ("vit", "H100-SXM-80GB", 1),
                             ("vit", "H200-SXM-141GB", 1)]
    vit = truth[("vit", "H100-SXM-80GB", 1)]
    assert [r.step_s for r in vit.runs] == [0.0115, 0.013, 0.020]
    assert vit.step_s == 0.013
    assert vit.spread == pytest.approx((0.020 - 0.0115) / 0.013)
    assert vit.allocated_bytes == 1001 and vit.reserved_bytes == 1101
    assert vit.by_machine() == {"H100-SXM-80GB": {"step_s": median([0.0115, 0.013]), "runs": 2},
                                "H100-SXM-80GB-x2": {"step_s": 0.020, "runs": 1}}
    assert vit.without_result == 0
    ddp = truth[("ddp_gpt2_tied", "H100-SXM-80GB", 2)]
    assert ddp.step_s == 0.050  # rank 0's steps, whatever the order of the lines
    assert ddp.allocated_bytes == 900  # the largest rank's peak
    assert ddp.without_result == 1
    one_line = truth[("ddp_gpt2_tied", "H200-SXM-141GB", 2)]
    assert (one_line.step_s, one_line.allocated_bytes, one_line.without_result) == (0.061, 950, 0)
    assert read_truth(data, {"grid-1x-b4"})[("grid-1x-b4", "H100-SXM-80GB", 1)].step_s == 1.0


def test_truth_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    with pytest.raises(TruthError, match="no \\*/results.json"):
        read_truth(tmp_path)
    machine(tmp_path, "X", [run("vit", [line([0.01, 0.01, 0.01], "NVIDIA A100-SXM4-80GB-ish", 1)])])
    with pytest.raises(TruthError, match="no catalog GPU"):
        read_truth(tmp_path)


def test_errors_and_summary(data: Path) -> None:
    truth = read_truth(data)
    vit, ddp = BY_NAME["vit"], BY_NAME["ddp_gpt2_tied"]
    moe = BY_NAME["moe"]
    assert moe.known_gap and not vit.known_gap
    emulated = {"peak_allocated_bytes": 909, "peak_reserved_bytes": 1000}
    rows = [
        accuracy.case_row(vit, truth[("vit", "H100-SXM-80GB", 1)], 0.0143, {"peak_allocated_bytes": 1001}),
        accuracy.case_row(vit, truth[("vit", "H200-SXM-141GB", 1)], 0.0081, {"peak_allocated_bytes": 1001}),
        accuracy.case_row(ddp, truth[("ddp_gpt2_tied", "H100-SXM-80GB", 2)], 0.055, emulated),
        # a known-gap workload's row (the vit truth stands in for the moe one)
        accuracy.case_row(moe, truth[("vit", "H100-SXM-80GB", 1)], 0.0065, {"peak_allocated_bytes": 500}),
        accuracy.case_row(ddp, truth[("ddp_gpt2_tied", "H100-SXM-80GB", 2)], None, emulated, "emulation failed"),
    ]
    assert [r["error"] for r in rows[:4]] == pytest.approx([0.1, -0.1, 0.1, -0.5])
    assert rows[2]["memory_error"] == pytest.approx(0.01)
    assert rows[4]["error"] is None and rows[4]["memory_error"] is None
    s = accuracy.summarize(rows)
    assert s["all"]["cases"] == 4
    assert s["all"]["median_abs_error"] == pytest.approx(0.1) and s["all"]["max_abs_error"] == pytest.approx(0.5)
    assert s["without_known_gap"]["cases"] == 3 and s["without_known_gap"]["max_abs_error"] == pytest.approx(0.1)
    assert s["known_gap"] == ["moe"]
    assert s["not_predicted"] == ["ddp_gpt2_tied (H100-SXM-80GB x2)"]
    assert s["by_config"]["H200-SXM-141GB x1"]["cases"] == 1
    assert s["ddp_peak_memory"] == {"cases": 1, "median_abs_error": pytest.approx(0.01),
                                    "max_abs_error": pytest.approx(0.01), "runs": 1, "runs_within_range": 0}
    # a run's peak may hold DDP's first buckets: measured from the emulated peak to it plus them counts
    held = accuracy.case_row(ddp, truth[("ddp_gpt2_tied", "H100-SXM-80GB", 2)], 0.055,
                             {"peak_allocated_bytes": 850, "first_buckets_bytes": 100})
    assert held["emulated_allocated_high_bytes"] == 950 and held["runs_within_memory_range"] == 1
    assert accuracy.summarize([held])["ddp_peak_memory"]["runs_within_range"] == 1
    assert accuracy.repeat_spread([0.9, 1.0, 1.2]) == pytest.approx(0.3)
    doc = {"date": "d", "command": "c", "commit": "x", "frozen": "f", "truth": "t", "emulated_gpu": "g", "steps": 6,
           "repeat": 3, "machine": {"cpu": "cpu", "cpus": 2, "load_before": [1], "load_after": [1]},
           "summary": s, "cases": rows, "repeatability": []}
    md = accuracy.markdown(doc)
    assert "| all | 4 | 10.0% | 50.0% |" in md
    assert md.index("| vit |") < md.index("| moe |")  # the known-gap rows come last
    assert "1 run(s) left no result line" in md
    # two machines measured it: each one's median, runs, and the prediction's error against it
    assert "| vit | H100-SXM-80GB | 1 | 13.00 (3, 65.4%; by machine 12.25 (2, +16.7%), 20.00 (1, -28.5%)) |" in md
    h200 = next(line for line in md.splitlines() if line.startswith("| vit | H200-SXM-141GB |"))
    assert "by machine" not in h200  # one machine measured it


def test_another_gpu_count_is_emulated_with_that_many_ranks(data: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    machine(data, "H100-SXM-80GB-x4", [run("ddp_gpt2_tied", [line([0.052] * 3, H100, 900, rank=r) for r in range(4)],
                                           nproc=4)])
    truth = read_truth(data)
    four = truth[("ddp_gpt2_tied", "H100-SXM-80GB", 4)]
    assert four.step_s == 0.052
    asked: list[tuple[int, Path]] = []

    def emulate(w: object, steps: int, out: Path, timeout_s: float) -> dict[str, object]:
        asked.append((w.gpus, out))  # type: ignore[attr-defined]
        return {"exit_code": 1, "stderr_tail": "no GPU here", "wall_s": 0.1}
    monkeypatch.setattr(accuracy, "emulate", emulate)
    emulations: dict[str, object] = {}
    four_ranks = replace(BY_NAME["ddp_gpt2_tied"], gpus=4)
    rows, again = accuracy.questions(four_ranks, [four], tmp_path / "work" / "x4", 6, 60.0, 5, emulations,
                                     "ddp_gpt2_tied x4")
    assert again == []  # a failed emulation is not asked again
    assert asked == [(4, tmp_path / "work" / "x4" / "ddp_gpt2_tied" / "run0")]  # four ranks, apart from the suite's two
    assert [(r["workload"], r["gpus"], r["predicted_s"]) for r in rows] == [("ddp_gpt2_tied", 4, None)]
    assert "emulation failed" in rows[0]["note"] and "ddp_gpt2_tied x4" in emulations
    assert BY_NAME["ddp_gpt2_tied"].gpus == 2  # the suite's workload is left as it was

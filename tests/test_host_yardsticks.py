"""Comparing emulating machines (benchmarks/host_yardsticks.py) and an emulated run's own host time
per steady step (benchmarks/step_truth.py's ``emulated_host_s``), on hand-made readings and traces; the
benchmarks' kept emulations (``step_truth.emulate``) made again where they did not complete."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from benchmarks import host_yardsticks, step_truth  # noqa: E402
from maya.predictor.trace import Kind, TraceWriter, read_trace  # noqa: E402


def reading(probe: float, hosts: dict[str, float]) -> dict:
    return {"cpu": "x", "yardsticks_ns": {"probe": probe, "cpu_add": 1000.0},
            "configs": {n: {"emulated_host_s": h} for n, h in hosts.items()}}


def test_ratios_per_family_and_against_the_jobs() -> None:
    a = reading(300e3, {"gpt": 4e-3, "gpt-b4": 5e-3, "cnn": 2e-3, "bert": 6e-3})
    b = reading(600e3, {"gpt": 8e-3, "gpt-b4": 12e-3, "cnn": 3e-3})  # bert not read on b: left out
    b["yardsticks_ns"]["cpu_add"] = 1500.0
    r = host_yardsticks.ratios(a, b)
    assert r["job_ratio_by_config"] == pytest.approx({"gpt": 2.0, "gpt-b4": 2.4, "cnn": 1.5})
    assert r["job_ratio_by_family"] == pytest.approx({"cnn": 1.5, "gpt": 2.2})
    assert r["job_ratio"] == pytest.approx(2.0)
    assert r["yardstick_ratio"] == pytest.approx({"cpu_add": 1.5, "probe": 2.0})
    assert r["yardstick_over_jobs"] == pytest.approx({"cpu_add": 0.75, "probe": 1.0})


def test_emulated_host_time_is_the_median_steady_step(tmp_path: Path) -> None:
    # Steps end with a device synchronisation; a step's host time runs from the end of one to the
    # next's start.  Steps 0 and 1 warm up (STEADY_FROM) and are left out.
    w = TraceWriter(gpu_name="H100-SXM-80GB")
    t, lengths_ms = 0, [50, 20, 4, 6, 5, 9, 5]
    w.record(Kind.DEVICE_SYNC, t_ns=t, dur_ns=1000)
    for ms in lengths_ms:
        t += 1000 + int(ms * 1e6)
        w.record(Kind.DEVICE_SYNC, t_ns=t, dur_ns=1000)
    w.write(tmp_path / "t.mayatrace")
    trace = read_trace(tmp_path / "t.mayatrace")
    assert step_truth.emulated_host_s(trace, steps=len(lengths_ms)) == pytest.approx(5e-3)
    # A window of the last 4 steps (6, 5, 9, 5 ms) leaves out its own first two as well.
    assert step_truth.emulated_host_s(trace, steps=4) == pytest.approx(7e-3)


def test_an_emulation_that_did_not_complete_is_made_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = "H100-SXM-80GB"
    made: list[list[str]] = []

    def run(cmd: list[str], **_kw: object) -> subprocess.CompletedProcess[str]:
        made.append(cmd)
        (tmp_path / "summary.json").write_text(json.dumps({"exit_code": 0}))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(step_truth.subprocess, "run", run)
    # Stopped half-way (the benchmark killed): its summary says exit 1, and it is emulated again.
    (tmp_path / "summary.json").write_text(json.dumps({"exit_code": 1}))
    assert step_truth.emulate(["examples/gpt.py"], gpu, 1, tmp_path) == tmp_path and len(made) == 1
    assert step_truth.emulate(["examples/gpt.py"], gpu, 1, tmp_path) == tmp_path and len(made) == 1  # kept

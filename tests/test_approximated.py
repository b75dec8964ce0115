"""Approximations are counted, never silent.

Covers: APPROXIMATED records counted by name per trace, per rank (over a
rank's trace files) and over ranks in ``summary.json``'s ``approximated``,
and printed in the summary; the replay counts a collective whose NCCL op code
the model does not know (timed as an all-reduce) beside the traces' own, once
per replay, and ``Prediction.to_json()`` carries them; end to end, a program
under ``maya emulate`` that asks the driver for an attribute the emulator does
not know and for a driver symbol it does not have gets ``approximated`` and
``unsupported_apis`` entries in ``summary.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from emulated import run_emulated

from maya import catalog
from maya.predict import Job, Prediction
from maya.predictor.replay.host import HostModel
from maya.predictor.trace import Flag, Kind, TraceWriter, read_trace
from maya.summary import approximated_calls, render, summarize

ATTR = "cuFuncGetAttribute: attribute 3 answered 0"
GRAPH = "cudnnBackendExecute: unknown-pattern graph recorded by its op list only"


def _trace_with(path: Path, names: list[str], *, rank: int = 0) -> Path:
    w = TraceWriter(rank=rank, world_size=2)
    for t, name in enumerate(names):
        w.record(int(Kind.APPROXIMATED), t_ns=100 * (t + 1), a=[w.string(name)])
    w.record(int(Kind.KERNEL), t_ns=10_000, flags=Flag.ASYNC)
    w.write(path)
    return path


def test_records_are_counted_by_name(tmp_path: Path) -> None:
    t = read_trace(_trace_with(tmp_path / "rank0.mayatrace", [ATTR, GRAPH, ATTR]))
    assert approximated_calls(t) == {ATTR: 2, GRAPH: 1}
    assert approximated_calls(read_trace(_trace_with(tmp_path / "none.mayatrace", []))) == {}


def test_summary_counts_per_rank_and_over_ranks(tmp_path: Path) -> None:
    _trace_with(tmp_path / "rank0.mayatrace", [ATTR, GRAPH])
    _trace_with(tmp_path / "rank0.pid42.mayatrace", [ATTR], rank=0)  # a second CUDA process of rank 0
    _trace_with(tmp_path / "rank1.mayatrace", [GRAPH, GRAPH], rank=1)
    s = summarize(tmp_path, gpu={"name": "H100-SXM-80GB", "memory_bytes": 80 * 2**30}, exit_code=0, command=["x"])
    r0, r1 = s["ranks"]
    assert r0["approximated"] == {ATTR: 2, GRAPH: 1}
    assert r1["approximated"] == {GRAPH: 2}
    assert s["approximated"] == {ATTR: 2, GRAPH: 3}
    lines = render(s)
    assert any(line.startswith("  rank 1: approximated 2 call(s)") and GRAPH in line for line in lines), lines


def _collective_job(tmp_path: Path, op: int) -> Job:
    """Two ranks, one communicator, one collective of NCCL op code ``op``."""
    traces = []
    for rank in range(2):
        w = TraceWriter(rank=rank, world_size=2)
        w.record(int(Kind.COMM_INIT), t_ns=1000, a32=rank, a=[99, 2 | rank << 32])
        w.record(int(Kind.COLL), t_ns=2000, flags=Flag.ASYNC, a32=1, a=[99, 1024, op | 7 << 8, 2**64 - 1, 4096],
                 ext=[0, 0, 0])
        w.record(int(Kind.DEVICE_SYNC), t_ns=3000)
        w.write(tmp_path / f"rank{rank}.mayatrace")
        traces.append(read_trace(tmp_path / f"rank{rank}.mayatrace"))
    n = [len(t.records) for t in traces]
    return Job(catalog.lookup("H100-SXM-80GB"), tmp_path, traces, [{}, {}], [[""] * k for k in n], {}, [set(), set()], 8,
               [np.ones(k) for k in n], {}, {}, traced_approximations={ATTR: 1})


def test_replay_counts_an_unknown_nccl_op(tmp_path: Path) -> None:
    job = _collective_job(tmp_path, op=42)
    job.replay(HostModel())
    assert job.approximated == {ATTR: 1, "NCCL op 42 timed as all_reduce": 1}
    job.replay(HostModel())  # each replay counts afresh
    assert job.approximated == {ATTR: 1, "NCCL op 42 timed as all_reduce": 1}


def test_replay_of_a_known_op_adds_nothing(tmp_path: Path) -> None:
    job = _collective_job(tmp_path, op=1)
    job.replay(HostModel())
    assert job.approximated == {ATTR: 1}


def test_prediction_json_carries_approximated() -> None:
    p = Prediction("H100-SXM-80GB", 0.01, (0.01,), {}, [0], 1, {}, approximated={ATTR: 3})
    assert json.loads(json.dumps(p.to_json()))["approximated"] == {ATTR: 3}
    assert Prediction("H100-SXM-80GB", 0.01, (0.01,), {}, [0], 1, {}).to_json()["approximated"] == {}


SCRIPT = """
import ctypes

cuda = ctypes.CDLL("libcuda.so.1")  # the interposer, by its SONAME
assert cuda.cuInit(0) == 0
value = ctypes.c_int(-1)
for _ in range(3):
    assert cuda.cuDeviceGetAttribute(ctypes.byref(value), 100000, 0) == 0 and value.value == 0
fn, status = ctypes.c_void_p(1), ctypes.c_int(-1)
rc = cuda.cudaGetDriverEntryPoint(b"cuNoSuchEntryPoint", ctypes.byref(fn), ctypes.c_ulonglong(0),
                                  ctypes.byref(status))
assert rc == 0 and fn.value is None and status.value == 1, (rc, fn.value, status.value)
"""


@pytest.mark.emulation
def test_emulated_program_reports_approximated_and_unsupported(tmp_path: Path) -> None:
    r = run_emulated(SCRIPT, tmp_path, timeout=60)
    assert r.returncode == 0, r.output
    what = "cuDeviceGetAttribute: attribute 100000 answered 0"
    assert r.summary["approximated"] == {what: 3}, r.output
    assert r.rank0["approximated"] == {what: 3}
    assert r.summary["unsupported_apis"] == ["cuNoSuchEntryPoint"]
    assert "approximated 3 call(s)" in r.stdout + r.stderr


def test_a_failed_run_is_not_predicted(tmp_path: Path) -> None:
    """A crashed emulation's few records are no training step: predicting it says so instead of a time."""
    from maya.predict import PredictError, predict_folder

    _trace_with(tmp_path / "rank0.mayatrace", [])
    s = summarize(tmp_path, gpu={"name": "H100-SXM-80GB", "memory_bytes": 80 * 2**30}, exit_code=1, command=["x"])
    (tmp_path / "summary.json").write_text(json.dumps(s))
    with pytest.raises(PredictError, match="exited with code 1"):
        predict_folder(tmp_path, "H100-SXM-80GB")
